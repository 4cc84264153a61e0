dnl SPDX-License-Identifier: BSD-3-Clause
dnl RIG_CHECK_CUNIT: CUnit: pkg-config (cunit >= 2.1) first, then --with-cunit=DIR,
dnl then a version gate and a line in the configure summary.
AC_DEFUN([RIG_CHECK_CUNIT], [
  AC_ARG_WITH([cunit],
    [AS_HELP_STRING([--with-cunit[[=DIR]]], [CUnit installation prefix])],
    [], [with_cunit=check])
  rig_have_cunit=no
  rig_cunit_summary=no
  AS_IF([test "x$rig_have_mpi" = xno && test "xany" = xrails], [with_cunit=no])
  AS_IF([test "x$with_cunit" != xno], [
    AS_IF([test "x$with_cunit" = xcheck || test "x$with_cunit" = xyes], [
      PKG_CHECK_MODULES([CUNIT], [cunit >= 2.1],
        [rig_have_cunit=yes
         rig_cunit_version=`$PKG_CONFIG --modversion cunit`], [:])
    ], [
      CUNIT_CFLAGS="-I$with_cunit/include"
      CUNIT_LIBS="-L$with_cunit/lib -lcunit"
    ])
    AS_IF([test "x$rig_have_cunit" != xyes], [
      rig_save_CPPFLAGS="$CPPFLAGS"; CPPFLAGS="$CPPFLAGS $CUNIT_CFLAGS"
      rig_save_LIBS="$LIBS"; LIBS="$CUNIT_LIBS -lcunit $LIBS"
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <CUnit/Basic.h>]], [[(void)CU_initialize_registry;]])],
        [rig_have_cunit=yes
         AS_IF([test "x$CUNIT_LIBS" = x], [CUNIT_LIBS="-lcunit"])
         rig_cunit_version="(no pkg-config version)"])
      CPPFLAGS="$rig_save_CPPFLAGS"; LIBS="$rig_save_LIBS"
    ])
    AS_IF([test "x$rig_have_cunit" = xyes], [
      rig_cunit_summary="yes ($rig_cunit_version)"
      AC_DEFINE_UNQUOTED([RIG_CUNIT_VERSION], ["$rig_cunit_version"], [CUnit version])
      AC_DEFINE([RIG_HAVE_CUNIT], [1], [CUnit is available])
    ], [AS_IF([test "x$with_cunit" != xcheck],
      [AC_MSG_ERROR([CUnit requested but not found (need cunit >= 2.1)])])])
  ])
  AC_SUBST([CUNIT_CFLAGS])
  AC_SUBST([CUNIT_LIBS])
  AM_CONDITIONAL([RIG_HAVE_CUNIT], [test "x$rig_have_cunit" = xyes])
])
