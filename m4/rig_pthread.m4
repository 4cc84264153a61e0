dnl SPDX-License-Identifier: BSD-3-Clause
dnl AX_PTHREAD_RIG: threads are required (the progress engine, JIT thread, lanes).
AC_DEFUN([AX_PTHREAD_RIG], [
  AC_CHECK_HEADER([pthread.h], [], [AC_MSG_ERROR([pthread.h is required])])
  PTHREAD_CFLAGS="-pthread"
  PTHREAD_LIBS="-pthread"
  AC_SUBST([PTHREAD_CFLAGS])
  AC_SUBST([PTHREAD_LIBS])
])
