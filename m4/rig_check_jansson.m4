dnl SPDX-License-Identifier: BSD-3-Clause
dnl RIG_CHECK_JANSSON: jansson (program manifests),
dnl in the shape of m4/rig_check_lib.m4: pkg-config (jansson >= 2.10),
dnl else --with-jansson=DIR (lib64, then lib), then the gate on
dnl jansson.h's version macros, then a summary line.
AC_DEFUN([RIG_CHECK_JANSSON], [
  AC_ARG_WITH([jansson],
    [AS_HELP_STRING([--with-jansson[[=DIR]]],
      [jansson (program manifests) (default: pkg-config, else the compiler's paths)])],
    [], [with_jansson=check])
  RIG_CHECK_LIB([jansson], [JANSSON], [jansson], [2.10],
    [jansson.h], [jansson], [json_loads],
    [JANSSON_VERSION_HEX >= 0x020a00],
    [JANSSON_MAJOR_VERSION], [JANSSON_MINOR_VERSION], [libjansson-dev])
])
