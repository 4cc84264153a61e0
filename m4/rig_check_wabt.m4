dnl SPDX-License-Identifier: BSD-3-Clause
dnl RIG_CHECK_WABT: wabt's wasm2c and wat2wasm, and the wasm-rt runtime
dnl sources (optional; without them the wasm backend answers unsupported:).
dnl The shape of m4/rig_check_lib.m4 for a tool: --with-wabt=DIR (DIR/bin),
dnl else PATH; the runtime sources beside it; a summary line.  wabt has
dnl no version macro and no pkg-config: `wasm2c --version` is shown.
AC_DEFUN([RIG_CHECK_WABT], [
  AC_ARG_WITH([wabt],
    [AS_HELP_STRING([--with-wabt[[=DIR]]], [wabt prefix with bin/wasm2c (default: search PATH)])],
    [], [with_wabt=check])
  rig_have_wabt=no
  AS_IF([test "x$with_wabt" != xno], [
    rig_wabt_path="$PATH"
    AS_IF([test "x$with_wabt" != xyes && test "x$with_wabt" != xcheck],
      [rig_wabt_path="$with_wabt/bin"])
    AC_PATH_PROG([WASM2C], [wasm2c], [], [$rig_wabt_path])
    AC_PATH_PROG([WAT2WASM], [wat2wasm], [], [$rig_wabt_path])
    rig_wasm_rt_dir=""
    for d in /usr/src/wasm2c "$with_wabt/src/wasm2c" "$with_wabt/share/wabt/wasm2c"; do
      AS_IF([test -f "$d/wasm-rt-impl.c" && test -f "$d/wasm-rt.h"], [rig_wasm_rt_dir="$d"; break])
    done
    AS_IF([test "x$WASM2C" != x && test "x$rig_wasm_rt_dir" != x], [
      rig_have_wabt=yes
      rig_wabt_version=`$WASM2C --version 2>/dev/null`
      RIG_SUMMARY([wabt (wasm2c)], [yes ($WASM2C $rig_wabt_version, runtime in $rig_wasm_rt_dir)])
      AC_DEFINE([RIG_HAVE_WABT], [1], [wasm2c is available])
      AC_DEFINE_UNQUOTED([RIG_WASM2C], ["$WASM2C"], [wasm2c found at configure time])
      AC_DEFINE_UNQUOTED([RIG_WASM_RT_DIR], ["$rig_wasm_rt_dir"], [wasm-rt runtime sources])
    ], [AS_IF([test "x$with_wabt" != xcheck],
      [AC_MSG_ERROR([wabt requested but wasm2c or its runtime sources were not found])])
     RIG_SUMMARY([wabt (wasm2c)], [no])])
  ])
  AC_SUBST([WASM_RT_DIR], [$rig_wasm_rt_dir])
  AM_CONDITIONAL([RIG_HAVE_WABT], [test "x$rig_have_wabt" = xyes])
])
