dnl SPDX-License-Identifier: BSD-3-Clause
dnl RIG_CHECK_HWLOC: hwloc: pkg-config (hwloc >= 2.0) first, then --with-hwloc=DIR,
dnl then a version gate and a line in the configure summary.
AC_DEFUN([RIG_CHECK_HWLOC], [
  AC_ARG_WITH([hwloc],
    [AS_HELP_STRING([--with-hwloc[[=DIR]]], [hwloc installation prefix])],
    [], [with_hwloc=check])
  rig_have_hwloc=no
  rig_hwloc_summary=no
  AS_IF([test "x$rig_have_mpi" = xno && test "xany" = xrails], [with_hwloc=no])
  AS_IF([test "x$with_hwloc" != xno], [
    AS_IF([test "x$with_hwloc" = xcheck || test "x$with_hwloc" = xyes], [
      PKG_CHECK_MODULES([HWLOC], [hwloc >= 2.0],
        [rig_have_hwloc=yes
         rig_hwloc_version=`$PKG_CONFIG --modversion hwloc`], [:])
    ], [
      HWLOC_CFLAGS="-I$with_hwloc/include"
      HWLOC_LIBS="-L$with_hwloc/lib -lhwloc"
    ])
    AS_IF([test "x$rig_have_hwloc" != xyes], [
      rig_save_CPPFLAGS="$CPPFLAGS"; CPPFLAGS="$CPPFLAGS $HWLOC_CFLAGS"
      rig_save_LIBS="$LIBS"; LIBS="$HWLOC_LIBS -lhwloc $LIBS"
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <hwloc.h>]], [[(void)hwloc_topology_init;]])],
        [rig_have_hwloc=yes
         AS_IF([test "x$HWLOC_LIBS" = x], [HWLOC_LIBS="-lhwloc"])
         rig_hwloc_version="(no pkg-config version)"])
      CPPFLAGS="$rig_save_CPPFLAGS"; LIBS="$rig_save_LIBS"
    ])
    AS_IF([test "x$rig_have_hwloc" = xyes], [
      rig_hwloc_summary="yes ($rig_hwloc_version)"
      AC_DEFINE_UNQUOTED([RIG_HWLOC_VERSION], ["$rig_hwloc_version"], [hwloc version])
      AC_DEFINE([RIG_HAVE_HWLOC], [1], [hwloc is available])
    ], [AS_IF([test "x$with_hwloc" != xcheck],
      [AC_MSG_ERROR([hwloc requested but not found (need hwloc >= 2.0)])])])
  ])
  AC_SUBST([HWLOC_CFLAGS])
  AC_SUBST([HWLOC_LIBS])
  AM_CONDITIONAL([RIG_HAVE_HWLOC], [test "x$rig_have_hwloc" = xyes])
])
