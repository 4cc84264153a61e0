dnl SPDX-License-Identifier: BSD-3-Clause
dnl RIG_CHECK_CUDA: the CUDA toolkit's headers (cuda.h, nvJitLink.h).
dnl libcuda and nvJitLink are dlopen'd at run time, so one build runs with
dnl and without a GPU, and nothing of CUDA is on rig's link line.  The
dnl shape of m4/rig_check_lib.m4, with the toolkit's own ways of being
dnl found where a library has pkg-config:
dnl   1. --with-cuda=DIR; else (the default, guess) the toolkit of `nvcc` on
dnl      PATH (DIR/bin/nvcc), then the usual prefixes: $CUDA_HOME,
dnl      $CUDA_PATH, /usr/local/cuda, /opt/cuda, /usr (Debian's
dnl      nvidia-cuda-toolkit);
dnl   2. cuda.h and nvJitLink.h must compile from DIR/include;
dnl   3. the version gate: CUDA_VERSION >= 12000 (nvJitLink is CUDA 12's);
dnl   4. a summary line.
dnl The toolkit found is recorded once: RIG_CUDA_DIR (config.h) and
dnl RIG_NVJITLINK_DIR, DIR/lib64 or DIR/lib (whichever holds
dnl libnvJitLink.so), which becomes MESH_NVJITLINK_DIR in the installed
dnl <mesh/paths.h>; MESH_NVJITLINK_DIR in the environment overrides it at
dnl run time, `mesh_run --nvjitlink DIR` overrides both.
AC_DEFUN([RIG_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda[[=DIR]]],
      [CUDA toolkit, headers only (default: guess: nvcc on PATH, then
       $CUDA_HOME, /usr/local/cuda, /opt/cuda, /usr)])],
    [], [with_cuda=guess])
  rig_have_cuda=no
  rig_cuda_dir=""
  CUDA_CFLAGS=""
  RIG_NVJITLINK_DIR=""
  AS_CASE([$with_cuda],
    [no], [rig_cuda_candidates=""],
    [guess|yes], [
      AC_PATH_PROG([NVCC], [nvcc])
      rig_cuda_candidates=""
      AS_IF([test "x$NVCC" != x],
        [rig_cuda_candidates=`dirname "$NVCC"`
         rig_cuda_candidates=`dirname "$rig_cuda_candidates"`])
      rig_cuda_candidates="$rig_cuda_candidates $CUDA_HOME $CUDA_PATH dnl
/usr/local/cuda /opt/cuda /usr"],
    [rig_cuda_candidates="$with_cuda"])
  for rig_d in $rig_cuda_candidates; do
    AC_MSG_CHECKING([for cuda.h and nvJitLink.h in $rig_d/include])
    rig_save_CPPFLAGS="$CPPFLAGS"; CPPFLAGS="$CPPFLAGS -I$rig_d/include"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <cuda.h>
#include <nvJitLink.h>]], [])], [rig_have_cuda=yes])
    AC_MSG_RESULT([$rig_have_cuda])
    AS_IF([test "x$rig_have_cuda" = xyes], [
      AC_MSG_CHECKING([that CUDA in $rig_d is at least 12.0])
      AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <cuda.h>
#if CUDA_VERSION < 12000
#error too old
#endif]], [])], [AC_MSG_RESULT([yes])],
        [AC_MSG_RESULT([no]); rig_have_cuda=no])
      AS_IF([test "x$rig_have_cuda" = xyes],
        [AC_COMPUTE_INT([rig_cuda_ver], [CUDA_VERSION], [[#include <cuda.h>]])])
    ])
    CPPFLAGS="$rig_save_CPPFLAGS"
    AS_IF([test "x$rig_have_cuda" = xyes], [rig_cuda_dir="$rig_d"; break])
  done
  AS_IF([test "x$rig_have_cuda" = xyes], [
    CUDA_CFLAGS="-I$rig_cuda_dir/include"
    dnl /usr holds Debian's toolkit: its headers are on the default path
    AS_IF([test "x$rig_cuda_dir" = x/usr], [CUDA_CFLAGS=""])
    RIG_NVJITLINK_DIR="$rig_cuda_dir/lib64"
    rig_multiarch=`$CC -print-multiarch 2>/dev/null`
    for rig_l in lib64 lib "lib/$rig_multiarch"; do
      AS_IF([test -e "$rig_cuda_dir/$rig_l/libnvJitLink.so" ||
             test -e "$rig_cuda_dir/$rig_l/libnvJitLink.so.1"],
        [RIG_NVJITLINK_DIR="$rig_cuda_dir/$rig_l"; break])
    done
    AC_DEFINE([RIG_HAVE_CUDA], [1], [CUDA headers are available])
    AC_DEFINE_UNQUOTED([RIG_CUDA_DIR], ["$rig_cuda_dir"],
      [the CUDA toolkit configure found])
    AC_DEFINE_UNQUOTED([RIG_NVJITLINK_DIR], ["$RIG_NVJITLINK_DIR"],
      [where libnvJitLink.so is loaded from by default (mesh/paths.h)])
    RIG_SUMMARY([CUDA headers], [yes (CUDA_VERSION $rig_cuda_ver, $rig_cuda_dir; nvJitLink from $RIG_NVJITLINK_DIR at run time)])
  ], [
    AS_IF([test "x$with_cuda" != xguess && test "x$with_cuda" != xno],
      [AC_MSG_ERROR([CUDA >= 12 requested (--with-cuda=$with_cuda) but cuda.h/nvJitLink.h were not found in: $rig_cuda_candidates])])
    RIG_SUMMARY([CUDA headers], [no])
  ])
  AC_SUBST([CUDA_CFLAGS])
  AC_SUBST([RIG_NVJITLINK_DIR])
  AM_CONDITIONAL([RIG_HAVE_CUDA], [test "x$rig_have_cuda" = xyes])
])
