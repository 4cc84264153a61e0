dnl SPDX-License-Identifier: BSD-3-Clause
dnl RIG_CHECK_LIB and RIG_SUMMARY: the one shape every m4/rig_check_<dep>.m4
dnl of a library follows, so that a packager reads one and knows them all.
dnl
dnl RIG_CHECK_LIB(name, VAR, pkg-module, min-version, header, lib, function,
dnl               gate, major-expr, minor-expr, debian-package)
dnl
dnl With --with-name=check (the default) or =yes:
dnl   1. pkg-config: PKG_CHECK_MODULES(VAR, pkg-module >= min-version)
dnl      (VAR_CFLAGS / VAR_LIBS given on the command line win, as usual);
dnl   2. else the compiler's default paths (a system without pkg-config).
dnl With --with-name=DIR: DIR/include with DIR/lib64, then DIR/lib, then
dnl DIR/lib/<multiarch> (Debian's; the first that holds the library and
dnl links wins; pkg-config is not asked, the user named a DIR).
dnl Then the version gate: `gate`, a C preprocessor condition over the
dnl header's own version macros, must hold whatever found the library, so
dnl that a DIR or a stray default path cannot bring in an old release.
dnl major-expr and minor-expr (integer expressions of the header) name the
dnl version in the summary when pkg-config did not.  Last, one summary line
dnl (RIG_SUMMARY).  VAR_CFLAGS and VAR_LIBS are substituted, each -l once;
dnl rig_have_name is yes or no; a named DIR or =yes that fails is an error,
dnl the default that fails is "no".
AC_DEFUN([RIG_CHECK_LIB], [
  rig_have_$1=no
  rig_$1_where=""
  rig_$1_version=""
  AS_CASE([$with_$1],
    [no], [],
    [check|yes], [
      PKG_CHECK_MODULES([$2], [$3 >= $4],
        [rig_have_$1=yes
         rig_$1_version=`$PKG_CONFIG --modversion $3`
         rig_$1_where="pkg-config $3"],
        [AC_MSG_CHECKING([for $1 in the compiler's default paths])
         RIG_TRY_LIB([$1], [$2], [], [-l$6], [$5], [$7])
         AS_IF([test "x$rig_have_$1" = xyes],
           [rig_$1_where="default paths, -l$6"])
         AC_MSG_RESULT([$rig_have_$1])])],
    [rig_multiarch=`$CC -print-multiarch 2>/dev/null`
     for rig_libdir in lib64 lib ${rig_multiarch:+lib/$rig_multiarch}; do
       dnl a DIR/lib64 without the library would link through the
       dnl default paths and be taken for it
       ls "$with_$1/$rig_libdir"/lib`echo "$6" | sed 's/ .*//'`.* \
         >/dev/null 2>&1 || continue
       AC_MSG_CHECKING([for $1 in $with_$1/$rig_libdir])
       dnl -I/usr/include would reorder the system's own include path
       rig_inc="-I$with_$1/include"
       AS_IF([test "x$with_$1" = x/usr], [rig_inc=""])
       RIG_TRY_LIB([$1], [$2], [$rig_inc],
         [-L$with_$1/$rig_libdir -l$6], [$5], [$7])
       AC_MSG_RESULT([$rig_have_$1])
       AS_IF([test "x$rig_have_$1" = xyes], [break])
     done])
  AS_IF([test "x$rig_have_$1" = xyes], [
    AC_MSG_CHECKING([that $1 is at least $4])
    rig_save_CPPFLAGS="$CPPFLAGS"; CPPFLAGS="$CPPFLAGS $$2_CFLAGS"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <$5>
#if !($8)
#error too old
#endif]], [])], [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])
       AC_MSG_ERROR([$1 at $rig_$1_where is older than $4 (need $8); dnl
use --with-$1=DIR or --without-$1])])
    AS_IF([test "x$rig_$1_version" = x], [
      AC_COMPUTE_INT([rig_$1_major], [$9], [[#include <$5>]])
      AC_COMPUTE_INT([rig_$1_minor], [$10], [[#include <$5>]])
      rig_$1_version="$rig_$1_major.$rig_$1_minor"])
    CPPFLAGS="$rig_save_CPPFLAGS"
    AC_DEFINE_UNQUOTED(AS_TR_CPP([RIG_$1_VERSION]), ["$rig_$1_version"],
      [$1 version found at configure time])
    AC_DEFINE(AS_TR_CPP([RIG_HAVE_$1]), [1], [$1 is available])
    RIG_SUMMARY([$1], [yes ($rig_$1_version; $rig_$1_where)])
  ], [
    AS_IF([test "x$with_$1" != xcheck && test "x$with_$1" != xno],
      [AC_MSG_ERROR([$1 >= $4 requested (--with-$1=$with_$1) but not dnl
found (Debian: $11)])])
    RIG_SUMMARY([$1], [no])
  ])
  AC_SUBST([$2_CFLAGS])
  AC_SUBST([$2_LIBS])
  AM_CONDITIONAL(AS_TR_CPP([RIG_HAVE_$1]), [test "x$rig_have_$1" = xyes])
])

dnl RIG_TRY_LIB(name, VAR, cflags, libs, header, function): sets
dnl rig_have_name=yes, VAR_CFLAGS, VAR_LIBS and rig_name_where when a
dnl program that includes header and takes function's address links.
AC_DEFUN([RIG_TRY_LIB], [
  rig_save_CPPFLAGS="$CPPFLAGS"; CPPFLAGS="$CPPFLAGS $3"
  rig_save_LIBS="$LIBS"; LIBS="$4 $LIBS"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <$5>]], [[(void)$6;]])],
    [rig_have_$1=yes
     $2_CFLAGS="$3"
     $2_LIBS="$4"
     rig_$1_where="$3 $4"])
  CPPFLAGS="$rig_save_CPPFLAGS"; LIBS="$rig_save_LIBS"
])

dnl RIG_SUMMARY(what, text): one line of the configure summary that
dnl configure.ac prints at the end (RIG_SUMMARY_PRINT).
AC_DEFUN([RIG_SUMMARY], [
  rig_summary="$rig_summary
  m4_format([%-17s], [$1:]) $2"
])
AC_DEFUN([RIG_SUMMARY_PRINT], [
  AC_MSG_NOTICE([
rig $PACKAGE_VERSION configuration
$rig_summary
])
])
