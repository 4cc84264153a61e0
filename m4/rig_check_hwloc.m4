dnl SPDX-License-Identifier: BSD-3-Clause
dnl RIG_CHECK_HWLOC: hwloc (end memory placement, machine descriptions),
dnl in the shape of m4/rig_check_lib.m4: pkg-config (hwloc >= 2.0),
dnl else --with-hwloc=DIR (lib64, then lib), then the gate on
dnl hwloc.h's version macros, then a summary line.
AC_DEFUN([RIG_CHECK_HWLOC], [
  AC_ARG_WITH([hwloc],
    [AS_HELP_STRING([--with-hwloc[[=DIR]]],
      [hwloc (end memory placement, machine descriptions) (default: pkg-config, else the compiler's paths)])],
    [], [with_hwloc=check])
  RIG_CHECK_LIB([hwloc], [HWLOC], [hwloc], [2.0],
    [hwloc.h], [hwloc], [hwloc_topology_init],
    [HWLOC_API_VERSION >= 0x00020000],
    [HWLOC_API_VERSION >> 16], [(HWLOC_API_VERSION >> 8) & 0xff], [libhwloc-dev])
])
