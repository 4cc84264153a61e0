dnl SPDX-License-Identifier: BSD-3-Clause
dnl RIG_CHECK_UCX: UCX (the rails transport),
dnl in the shape of m4/rig_check_lib.m4: pkg-config (ucx >= 1.10),
dnl else --with-ucx=DIR (lib64, then lib), then the gate on
dnl ucp/api/ucp.h's version macros, then a summary line.
AC_DEFUN([RIG_CHECK_UCX], [
  AC_ARG_WITH([ucx],
    [AS_HELP_STRING([--with-ucx[[=DIR]]],
      [UCX (the rails transport) (default: pkg-config, else the compiler's paths)])],
    [], [with_ucx=check])
  dnl Only the rails use ucx: a build without MPI has no rails.
  AS_IF([test "x$rig_have_mpi" != xyes && test "x$with_ucx" = xcheck],
    [with_ucx=no])
  RIG_CHECK_LIB([ucx], [UCX], [ucx], [1.10],
    [ucp/api/ucp.h], [ucp -lucs], [ucp_get_version],
    [UCP_API_VERSION >= UCP_VERSION(1, 10)],
    [UCP_API_MAJOR], [UCP_API_MINOR], [libucx-dev])
])
