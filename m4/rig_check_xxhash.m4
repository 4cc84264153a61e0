dnl SPDX-License-Identifier: BSD-3-Clause
dnl RIG_CHECK_XXHASH: xxHash (program identities),
dnl in the shape of m4/rig_check_lib.m4: pkg-config (libxxhash >= 0.8),
dnl else --with-xxhash=DIR (lib64, then lib), then the gate on
dnl xxhash.h's version macros, then a summary line.
AC_DEFUN([RIG_CHECK_XXHASH], [
  AC_ARG_WITH([xxhash],
    [AS_HELP_STRING([--with-xxhash[[=DIR]]],
      [xxHash (program identities) (default: pkg-config, else the compiler's paths)])],
    [], [with_xxhash=check])
  RIG_CHECK_LIB([xxhash], [XXHASH], [libxxhash], [0.8],
    [xxhash.h], [xxhash], [XXH3_64bits],
    [XXH_VERSION_NUMBER >= 800],
    [XXH_VERSION_MAJOR], [XXH_VERSION_MINOR], [libxxhash-dev])
])
