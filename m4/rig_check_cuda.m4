dnl SPDX-License-Identifier: BSD-3-Clause
dnl RIG_CHECK_CUDA: CUDA headers only (cuda.h, nvJitLink.h).  libcuda and
dnl nvJitLink are dlopen'd at run time, so one build runs with and without
dnl a GPU.  --with-cuda=guess (default) tries /usr/local/cuda.
AC_DEFUN([RIG_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda[=DIR]], [CUDA toolkit (headers only; default: guess /usr/local/cuda)])],
    [], [with_cuda=guess])
  rig_have_cuda=no
  rig_cuda_summary=no
  CUDA_CFLAGS=""
  AS_IF([test "x$with_cuda" != xno], [
    AS_IF([test "x$with_cuda" = xguess || test "x$with_cuda" = xyes],
      [rig_cuda_dir=/usr/local/cuda], [rig_cuda_dir="$with_cuda"])
    rig_save_CPPFLAGS="$CPPFLAGS"; CPPFLAGS="$CPPFLAGS -I$rig_cuda_dir/include"
    AC_CHECK_HEADERS([cuda.h nvJitLink.h], [rig_have_cuda=yes], [rig_have_cuda=no; break])
    CPPFLAGS="$rig_save_CPPFLAGS"
    AS_IF([test "x$rig_have_cuda" = xyes], [
      CUDA_CFLAGS="-I$rig_cuda_dir/include"
      rig_cuda_ver=`sed -n 's/^#define CUDA_VERSION //p' $rig_cuda_dir/include/cuda.h`
      rig_cuda_summary="yes ($rig_cuda_dir, CUDA_VERSION $rig_cuda_ver; libcuda/nvJitLink loaded at run time)"
      AC_DEFINE([RIG_HAVE_CUDA], [1], [CUDA headers are available])
      AC_DEFINE_UNQUOTED([RIG_CUDA_DIR], ["$rig_cuda_dir"], [CUDA toolkit found at configure time])
    ], [AS_IF([test "x$with_cuda" != xguess],
      [AC_MSG_ERROR([CUDA requested but cuda.h/nvJitLink.h not found in $rig_cuda_dir/include])])])
  ])
  AC_SUBST([CUDA_CFLAGS])
  AM_CONDITIONAL([RIG_HAVE_CUDA], [test "x$rig_have_cuda" = xyes])
])
