dnl SPDX-License-Identifier: BSD-3-Clause
dnl RIG_CHECK_UCX: UCX: pkg-config (ucx >= 1.10) first, then --with-ucx=DIR,
dnl then a version gate and a line in the configure summary.
AC_DEFUN([RIG_CHECK_UCX], [
  AC_ARG_WITH([ucx],
    [AS_HELP_STRING([--with-ucx[[=DIR]]], [UCX installation prefix])],
    [], [with_ucx=check])
  rig_have_ucx=no
  rig_ucx_summary=no
  AS_IF([test "x$rig_have_mpi" = xno && test "xrails" = xrails], [with_ucx=no])
  AS_IF([test "x$with_ucx" != xno], [
    AS_IF([test "x$with_ucx" = xcheck || test "x$with_ucx" = xyes], [
      PKG_CHECK_MODULES([UCX], [ucx >= 1.10],
        [rig_have_ucx=yes
         rig_ucx_version=`$PKG_CONFIG --modversion ucx`], [:])
    ], [
      UCX_CFLAGS="-I$with_ucx/include"
      UCX_LIBS="-L$with_ucx/lib -lucp"
    ])
    AS_IF([test "x$rig_have_ucx" != xyes], [
      rig_save_CPPFLAGS="$CPPFLAGS"; CPPFLAGS="$CPPFLAGS $UCX_CFLAGS"
      rig_save_LIBS="$LIBS"; LIBS="$UCX_LIBS -lucp $LIBS"
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <ucp/api/ucp.h>]], [[(void)ucp_get_version;]])],
        [rig_have_ucx=yes
         AS_IF([test "x$UCX_LIBS" = x], [UCX_LIBS="-lucp"])
         rig_ucx_version="(no pkg-config version)"])
      CPPFLAGS="$rig_save_CPPFLAGS"; LIBS="$rig_save_LIBS"
    ])
    AS_IF([test "x$rig_have_ucx" = xyes], [
      rig_ucx_summary="yes ($rig_ucx_version)"
      AC_DEFINE_UNQUOTED([RIG_UCX_VERSION], ["$rig_ucx_version"], [UCX version])
      AC_DEFINE([RIG_HAVE_UCX], [1], [UCX is available])
    ], [AS_IF([test "x$with_ucx" != xcheck],
      [AC_MSG_ERROR([UCX requested but not found (need ucx >= 1.10)])])])
  ])
  AC_SUBST([UCX_CFLAGS])
  AC_SUBST([UCX_LIBS])
  AM_CONDITIONAL([RIG_HAVE_UCX], [test "x$rig_have_ucx" = xyes])
])
