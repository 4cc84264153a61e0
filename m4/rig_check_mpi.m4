dnl SPDX-License-Identifier: BSD-3-Clause
dnl RIG_CHECK_MPI: the MPI, found by what compiles and links, whichever it
dnl is (Open MPI, or MPICH and the MPIs built on it: Intel MPI, MVAPICH,
dnl Cray MPICH).  The shape of m4/rig_check_lib.m4, with the MPI's own
dnl compiler wrapper where a library has pkg-config (the wrapper, not
dnl pkg-config, says which MPI a site means; Debian's `mpi` pkg-config
dnl alternative names only one of two installed MPIs):
dnl   1. the wrapper: $MPICC if set; else --with-mpi=FILE (a wrapper such as
dnl      /usr/bin/mpicc.mpich); else --with-mpi=DIR's bin/mpicc; else mpicc
dnl      on PATH.  Its flags come from `-showme` (Open MPI) or `-show`
dnl      (MPICH family), split into MPI_CFLAGS and MPI_LIBS (either may be
dnl      given on the command line instead);
dnl   2. a program calling MPI_Init and MPI_Get_library_version must link;
dnl   3. the version gate: MPI_VERSION >= 3 (dynamic windows, flushes);
dnl      the flavour from the header's own macros (OPEN_MPI, MPICH_VERSION),
dnl      the library's version string from MPI_Get_library_version, which
dnl      MPI-3 lets a program call before MPI_Init;
dnl   4. the launcher: $MPIEXEC if set; else mpiexec (then mpirun) beside
dnl      the wrapper with the wrapper's suffix (mpicc.mpich: mpiexec.mpich),
dnl      then on PATH;
dnl   5. a summary line.
dnl --without-mpi builds only the ABI and executor layers (no rails).
AC_DEFUN([RIG_CHECK_MPI], [
  AC_ARG_WITH([mpi],
    [AS_HELP_STRING([--with-mpi[[=DIR|WRAPPER]]],
      [MPI (Open MPI or an MPICH): a prefix with bin/mpicc, or the path of a
       C compiler wrapper such as /usr/bin/mpicc.mpich; the launcher is
       found beside it (default: mpicc on PATH)])],
    [], [with_mpi=check])
  AC_ARG_VAR([MPICC], [MPI C compiler wrapper (wins over --with-mpi)])
  AC_ARG_VAR([MPIEXEC], [MPI launcher for the tests (default: beside MPICC)])
  AC_ARG_VAR([MPI_CFLAGS], [MPI compile flags (default: from MPICC)])
  AC_ARG_VAR([MPI_LIBS], [MPI link flags (default: from MPICC)])
  rig_have_mpi=no
  rig_mpi_flavor=none
  AS_IF([test "x$with_mpi" != xno], [
    dnl 1. the wrapper and its flags
    AS_IF([test "x$MPICC" != x], [],
      [test -f "$with_mpi" && test -x "$with_mpi"], [MPICC="$with_mpi"],
      [test "x$with_mpi" != xyes && test "x$with_mpi" != xcheck],
        [AC_PATH_PROG([MPICC], [mpicc], [], [$with_mpi/bin])],
      [AC_PATH_PROG([MPICC], [mpicc])])
    AS_IF([test "x$MPICC" != x], [
      AC_MSG_CHECKING([the flags of $MPICC])
      rig_mpi_show=`$MPICC -showme 2>/dev/null` ||
        rig_mpi_show=`$MPICC -show 2>/dev/null` || rig_mpi_show=""
      rig_mpi_cflags=""
      rig_mpi_libs=""
      set dummy $rig_mpi_show; shift; test $[#] -gt 0 && shift
      for rig_w in "$[@]"; do
        AS_CASE([$rig_w],
          [-I*|-D*], [rig_mpi_cflags="$rig_mpi_cflags $rig_w"],
          [-pthread], [rig_mpi_cflags="$rig_mpi_cflags $rig_w"
                       rig_mpi_libs="$rig_mpi_libs $rig_w"],
          [-L*|-l*|-Wl,*], [rig_mpi_libs="$rig_mpi_libs $rig_w"])
      done
      AS_IF([test "x${MPI_CFLAGS+set}" != xset], [MPI_CFLAGS="$rig_mpi_cflags"])
      AS_IF([test "x${MPI_LIBS+set}" != xset], [MPI_LIBS="$rig_mpi_libs"])
      AC_MSG_RESULT([$MPI_CFLAGS $MPI_LIBS])

      dnl 2. what links
      rig_save_CPPFLAGS="$CPPFLAGS"; CPPFLAGS="$CPPFLAGS $MPI_CFLAGS"
      rig_save_LIBS="$LIBS"; LIBS="$MPI_LIBS $LIBS"
      AC_MSG_CHECKING([that an MPI program links with them])
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
          [[char v[MPI_MAX_LIBRARY_VERSION_STRING]; int n;
            MPI_Get_library_version(v, &n);
            MPI_Init(0, 0); MPI_Finalize();]])],
        [rig_have_mpi=yes])
      AC_MSG_RESULT([$rig_have_mpi])

      dnl 3. the gate, the flavour, the version string
      AS_IF([test "x$rig_have_mpi" = xyes], [
        AC_COMPUTE_INT([rig_mpi_std], [MPI_VERSION], [[#include <mpi.h>]],
          [rig_mpi_std=0])
        AC_COMPUTE_INT([rig_mpi_sub], [MPI_SUBVERSION], [[#include <mpi.h>]],
          [rig_mpi_sub=0])
        AS_IF([test "$rig_mpi_std" -lt 3],
          [AC_MSG_ERROR([$MPICC gives MPI $rig_mpi_std.$rig_mpi_sub; rig needs MPI 3 (dynamic windows)])])
        AC_MSG_CHECKING([which MPI $MPICC gives])
        AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef OPEN_MPI
#error not Open MPI
#endif]], [])], [rig_mpi_flavor=openmpi],
          [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef MPICH_VERSION
#error not MPICH
#endif]], [])], [rig_mpi_flavor=mpich], [rig_mpi_flavor=other])])
        AC_MSG_RESULT([$rig_mpi_flavor])
        AC_MSG_CHECKING([the MPI library's version string])
        AC_RUN_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#include <stdio.h>
#include <string.h>]],
            [[char v[MPI_MAX_LIBRARY_VERSION_STRING]; int n = 0;
              if (MPI_Get_library_version(v, &n) != MPI_SUCCESS) return 1;
              v[strcspn(v, "\n,")] = 0;
              FILE *f = fopen("conftest.ver", "w");
              if (f == NULL) return 1;
              fputs(v, f); fclose(f);]])],
          [rig_mpi_version=`cat conftest.ver`],
          [rig_mpi_version="$rig_mpi_flavor"],
          [rig_mpi_version="$rig_mpi_flavor (cross-compiled)"])
        rm -f conftest.ver
        dnl "MPICH Version:<tab>4.0.2" reads "MPICH 4.0.2"
        rig_mpi_version=`echo "$rig_mpi_version" | tr '\t' ' ' | dnl
          sed 's/ Version: */ /; s/ *$//'`
        AC_MSG_RESULT([$rig_mpi_version])
        dnl MPICH defines MPI_STATUSES_IGNORE as (MPI_Status *)1 and
        dnl declares statuses as arrays, which GCC >= 11 reads as an
        dnl overflow (pmodels/mpich#5687, not to be fixed there).
        AC_MSG_CHECKING([whether MPI_STATUSES_IGNORE trips -Wstringop-overflow])
        rig_save_CFLAGS="$CFLAGS"
        CFLAGS="$CFLAGS -O2 -Werror=stringop-overflow"
        AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
            [[MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
              return MPI_Waitall(2, r, MPI_STATUSES_IGNORE);]])],
          [AC_MSG_RESULT([no])],
          [AC_MSG_RESULT([yes: -Wno-stringop-overflow])
           RIG_WARN_CFLAGS="$RIG_WARN_CFLAGS -Wno-stringop-overflow"])
        CFLAGS="$rig_save_CFLAGS"
      ])
      CPPFLAGS="$rig_save_CPPFLAGS"; LIBS="$rig_save_LIBS"

      dnl 4. the launcher beside the wrapper
      AS_IF([test "x$rig_have_mpi" = xyes && test "x$MPIEXEC" = x], [
        rig_mpicc_name=`basename "$MPICC"`
        rig_mpi_suffix=`echo "$rig_mpicc_name" | sed -n 's/^mpicc//p'`
        rig_mpi_bindir=`dirname "$MPICC"`
        AS_CASE([$rig_mpi_bindir], [.], [rig_mpi_bindir="$PATH"],
          [rig_mpi_bindir="$rig_mpi_bindir$PATH_SEPARATOR$PATH"])
        AC_PATH_PROGS([MPIEXEC],
          [mpiexec$rig_mpi_suffix mpirun$rig_mpi_suffix mpiexec mpirun], [],
          [$rig_mpi_bindir])])
    ])
    AS_IF([test "x$rig_have_mpi" = xyes && test "x$MPIEXEC" = x],
      [AC_MSG_WARN([no mpiexec or mpirun beside $MPICC: the MPI tests need MPIEXEC=...])])
    AS_IF([test "x$rig_have_mpi" != xyes && test "x$with_mpi" != xcheck],
      [AC_MSG_ERROR([MPI requested (--with-mpi=$with_mpi) but no mpicc that links an MPI-3 program was found (Debian: libopenmpi-dev or libmpich-dev)])])
  ])
  AS_IF([test "x$rig_have_mpi" = xyes], [
    AC_DEFINE_UNQUOTED([RIG_MPI_VERSION], ["$rig_mpi_version"],
      [the MPI library's version string at configure time])
    AC_DEFINE_UNQUOTED([RIG_MPI_STANDARD], ["$rig_mpi_std.$rig_mpi_sub"],
      [the MPI standard version of mpi.h])
    AC_DEFINE_UNQUOTED([RIG_MPIRUN], ["$MPIEXEC"],
      [the MPI launcher found at configure time])
    RIG_SUMMARY([MPI], [yes ($rig_mpi_version, MPI $rig_mpi_std.$rig_mpi_sub; $MPICC; $MPIEXEC)])
  ], [RIG_SUMMARY([MPI], [no (no rails)])])
  dnl MPIRUN: what the tests' launcher (mpi_tests/mpitest.sh) runs;
  dnl RIG_MPI_FLAVOR: openmpi, mpich or other, how it speaks to it.
  AC_SUBST([MPIRUN], [$MPIEXEC])
  AC_SUBST([RIG_MPI_FLAVOR], [$rig_mpi_flavor])
  AC_SUBST([MPI_CFLAGS])
  AC_SUBST([MPI_LIBS])
])
