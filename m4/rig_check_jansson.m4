dnl SPDX-License-Identifier: BSD-3-Clause
dnl RIG_CHECK_JANSSON: jansson: pkg-config (jansson >= 2.10) first, then --with-jansson=DIR,
dnl then a version gate and a line in the configure summary.
AC_DEFUN([RIG_CHECK_JANSSON], [
  AC_ARG_WITH([jansson],
    [AS_HELP_STRING([--with-jansson[[=DIR]]], [jansson installation prefix])],
    [], [with_jansson=check])
  rig_have_jansson=no
  rig_jansson_summary=no
  AS_IF([test "x$rig_have_mpi" = xno && test "xany" = xrails], [with_jansson=no])
  AS_IF([test "x$with_jansson" != xno], [
    AS_IF([test "x$with_jansson" = xcheck || test "x$with_jansson" = xyes], [
      PKG_CHECK_MODULES([JANSSON], [jansson >= 2.10],
        [rig_have_jansson=yes
         rig_jansson_version=`$PKG_CONFIG --modversion jansson`], [:])
    ], [
      JANSSON_CFLAGS="-I$with_jansson/include"
      JANSSON_LIBS="-L$with_jansson/lib -ljansson"
    ])
    AS_IF([test "x$rig_have_jansson" != xyes], [
      rig_save_CPPFLAGS="$CPPFLAGS"; CPPFLAGS="$CPPFLAGS $JANSSON_CFLAGS"
      rig_save_LIBS="$LIBS"; LIBS="$JANSSON_LIBS -ljansson $LIBS"
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <jansson.h>]], [[(void)json_loads;]])],
        [rig_have_jansson=yes
         AS_IF([test "x$JANSSON_LIBS" = x], [JANSSON_LIBS="-ljansson"])
         rig_jansson_version="(no pkg-config version)"])
      CPPFLAGS="$rig_save_CPPFLAGS"; LIBS="$rig_save_LIBS"
    ])
    AS_IF([test "x$rig_have_jansson" = xyes], [
      rig_jansson_summary="yes ($rig_jansson_version)"
      AC_DEFINE_UNQUOTED([RIG_JANSSON_VERSION], ["$rig_jansson_version"], [jansson version])
      AC_DEFINE([RIG_HAVE_JANSSON], [1], [jansson is available])
    ], [AS_IF([test "x$with_jansson" != xcheck],
      [AC_MSG_ERROR([jansson requested but not found (need jansson >= 2.10)])])])
  ])
  AC_SUBST([JANSSON_CFLAGS])
  AC_SUBST([JANSSON_LIBS])
  AM_CONDITIONAL([RIG_HAVE_JANSSON], [test "x$rig_have_jansson" = xyes])
])
