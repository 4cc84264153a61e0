dnl SPDX-License-Identifier: BSD-3-Clause
dnl RIG_CHECK_CUNIT: CUnit (the unit tests),
dnl in the shape of m4/rig_check_lib.m4: pkg-config (cunit >= 2.1),
dnl else --with-cunit=DIR (lib64, then lib), then the gate on
dnl CUnit/Basic.h (CUnit has no numeric version macro: the gate is the
dnl link of CU_add_suite_with_setup_and_teardown, new in 2.1-3), then a
dnl summary line.
AC_DEFUN([RIG_CHECK_CUNIT], [
  AC_ARG_WITH([cunit],
    [AS_HELP_STRING([--with-cunit[[=DIR]]],
      [CUnit (the unit tests) (default: pkg-config, else the compiler's paths)])],
    [], [with_cunit=check])
  RIG_CHECK_LIB([cunit], [CUNIT], [cunit], [2.1],
    [CUnit/Basic.h], [cunit], [CU_add_suite_with_setup_and_teardown],
    [defined(CU_VERSION)],
    [2], [1], [libcunit1-dev])
])
