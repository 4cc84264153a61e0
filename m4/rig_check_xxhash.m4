dnl SPDX-License-Identifier: BSD-3-Clause
dnl RIG_CHECK_XXHASH: xxHash: pkg-config (libxxhash >= 0.8) first, then --with-xxhash=DIR,
dnl then a version gate and a line in the configure summary.
AC_DEFUN([RIG_CHECK_XXHASH], [
  AC_ARG_WITH([xxhash],
    [AS_HELP_STRING([--with-xxhash[[=DIR]]], [xxHash installation prefix])],
    [], [with_xxhash=check])
  rig_have_xxhash=no
  rig_xxhash_summary=no
  AS_IF([test "x$rig_have_mpi" = xno && test "xany" = xrails], [with_xxhash=no])
  AS_IF([test "x$with_xxhash" != xno], [
    AS_IF([test "x$with_xxhash" = xcheck || test "x$with_xxhash" = xyes], [
      PKG_CHECK_MODULES([XXHASH], [libxxhash >= 0.8],
        [rig_have_xxhash=yes
         rig_xxhash_version=`$PKG_CONFIG --modversion libxxhash`], [:])
    ], [
      XXHASH_CFLAGS="-I$with_xxhash/include"
      XXHASH_LIBS="-L$with_xxhash/lib -lxxhash"
    ])
    AS_IF([test "x$rig_have_xxhash" != xyes], [
      rig_save_CPPFLAGS="$CPPFLAGS"; CPPFLAGS="$CPPFLAGS $XXHASH_CFLAGS"
      rig_save_LIBS="$LIBS"; LIBS="$XXHASH_LIBS -lxxhash $LIBS"
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <xxhash.h>]], [[(void)XXH3_64bits;]])],
        [rig_have_xxhash=yes
         AS_IF([test "x$XXHASH_LIBS" = x], [XXHASH_LIBS="-lxxhash"])
         rig_xxhash_version="(no pkg-config version)"])
      CPPFLAGS="$rig_save_CPPFLAGS"; LIBS="$rig_save_LIBS"
    ])
    AS_IF([test "x$rig_have_xxhash" = xyes], [
      rig_xxhash_summary="yes ($rig_xxhash_version)"
      AC_DEFINE_UNQUOTED([RIG_XXHASH_VERSION], ["$rig_xxhash_version"], [xxHash version])
      AC_DEFINE([RIG_HAVE_XXHASH], [1], [xxHash is available])
    ], [AS_IF([test "x$with_xxhash" != xcheck],
      [AC_MSG_ERROR([xxHash requested but not found (need libxxhash >= 0.8)])])])
  ])
  AC_SUBST([XXHASH_CFLAGS])
  AC_SUBST([XXHASH_LIBS])
  AM_CONDITIONAL([RIG_HAVE_XXHASH], [test "x$rig_have_xxhash" = xyes])
])
