dnl SPDX-License-Identifier: BSD-3-Clause
dnl RIG_CHECK_MPI: find mpicc and mpirun; MPI_CFLAGS/MPI_LIBS from
dnl `mpicc --showme`, else pkg-config ompi-c.  --without-mpi builds only the
dnl ABI and executor layers.
AC_DEFUN([RIG_CHECK_MPI], [
  AC_ARG_WITH([mpi],
    [AS_HELP_STRING([--with-mpi[=DIR]], [MPI installation with bin/mpicc (default: search PATH)])],
    [], [with_mpi=check])
  rig_have_mpi=no
  rig_mpi_summary="no"
  AS_IF([test "x$with_mpi" != xno], [
    rig_mpi_path="$PATH"
    AS_IF([test "x$with_mpi" != xyes && test "x$with_mpi" != xcheck],
      [rig_mpi_path="$with_mpi/bin"])
    AC_PATH_PROG([MPICC], [mpicc], [], [$rig_mpi_path])
    AC_PATH_PROG([MPIRUN], [mpirun], [], [$rig_mpi_path])
    AS_IF([test "x$MPICC" != x && test "x$MPIRUN" != x], [
      MPI_CFLAGS=`$MPICC --showme:compile 2>/dev/null`
      MPI_LIBS=`$MPICC --showme:link 2>/dev/null`
      AS_IF([test "x$MPI_LIBS" = x],
        [PKG_CHECK_MODULES([MPI], [ompi-c], [], [MPI_LIBS=""])])
      rig_save_CPPFLAGS="$CPPFLAGS"; CPPFLAGS="$CPPFLAGS $MPI_CFLAGS"
      rig_save_LIBS="$LIBS"; LIBS="$MPI_LIBS $LIBS"
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
          [[MPI_Init(0, 0); MPI_Finalize();]])],
        [rig_have_mpi=yes])
      CPPFLAGS="$rig_save_CPPFLAGS"; LIBS="$rig_save_LIBS"
      AS_IF([test "x$rig_have_mpi" = xyes], [
        rig_mpi_version=`$MPIRUN --version 2>/dev/null | head -n 1`
        rig_mpi_summary="yes ($rig_mpi_version; $MPICC)"
        AC_DEFINE_UNQUOTED([RIG_MPI_VERSION], ["$rig_mpi_version"], [MPI found at configure time])
        AC_DEFINE_UNQUOTED([RIG_MPIRUN], ["$MPIRUN"], [mpirun found at configure time])])
    ])
    AS_IF([test "x$rig_have_mpi" != xyes && test "x$with_mpi" != xcheck],
      [AC_MSG_ERROR([MPI requested but mpicc/mpirun or a working mpi.h were not found])])
  ])
  AC_SUBST([MPI_CFLAGS])
  AC_SUBST([MPI_LIBS])
  AC_SUBST([MPIRUN])
])
