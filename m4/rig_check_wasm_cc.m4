dnl SPDX-License-Identifier: BSD-3-Clause
dnl RIG_CHECK_WASM_CC: a C compiler that builds freestanding wasm32 modules
dnl (clang with wasm-ld), for the examples' wasm programs written in C
dnl (optional; without it the build uses the modules kept in the source
dnl tree).  The shape of m4/rig_check_lib.m4 for a tool: WASM_CC, else
dnl clang on PATH; a probe that compiles and links a module; a summary line.
AC_DEFUN([RIG_CHECK_WASM_CC], [
  AC_ARG_VAR([WASM_CC], [C compiler for wasm32 modules (default: clang)])
  AS_IF([test "x$WASM_CC" = x], [AC_PATH_PROGS([WASM_CC], [clang clang-14])])
  rig_have_wasm_cc=no
  AS_IF([test "x$WASM_CC" != x], [
    AC_MSG_CHECKING([whether $WASM_CC builds wasm32 modules])
    cat > conftest_wasm.c <<'EOT'
__attribute__((export_name("f"))) int f(int x) { return x + 1; }
EOT
    AS_IF([$WASM_CC --target=wasm32 -O2 -nostdlib -Wl,--no-entry \
             -o conftest_wasm.wasm conftest_wasm.c >&AS_MESSAGE_LOG_FD 2>&1],
      [rig_have_wasm_cc=yes])
    rm -f conftest_wasm.c conftest_wasm.wasm
    AC_MSG_RESULT([$rig_have_wasm_cc])
  ])
  AS_IF([test "x$rig_have_wasm_cc" = xyes],
    [RIG_SUMMARY([wasm32 C compiler], [yes ($WASM_CC)])],
    [RIG_SUMMARY([wasm32 C compiler], [no (examples use their kept modules)])])
  AM_CONDITIONAL([RIG_HAVE_WASM_CC], [test "x$rig_have_wasm_cc" = xyes])
])
