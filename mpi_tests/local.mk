# SPDX-License-Identifier: BSD-3-Clause
# mpi_tests: programs run under mpirun by mpitest.sh, one .mpi file per
# (program, ranks, environment).  A `SKIP: reason` line means exit 77.
MPI_LOG_COMPILER = $(SHELL) $(top_srcdir)/mpi_tests/mpitest.sh
EXTRA_DIST += mpi_tests/mpitest.sh

MPI_TEST_FILES = \
	mpi_tests/rails_np2.mpi \
	mpi_tests/rails_np3.mpi \
	mpi_tests/rails_np4.mpi \
	mpi_tests/rails_tcp_np2.mpi \
	mpi_tests/rails_tcp_np3.mpi \
	mpi_tests/rails_tcp_np4.mpi \
	mpi_tests/rails_puts_np2.mpi \
	mpi_tests/job_np2.mpi \
	mpi_tests/job_np3.mpi \
	mpi_tests/job_np4.mpi \
	mpi_tests/job_tcp_np2.mpi \
	mpi_tests/job_tcp_np3.mpi \
	mpi_tests/job_tcp_np4.mpi \
	mpi_tests/rails_mpi_np2.mpi \
	mpi_tests/rails_mpi_np3.mpi \
	mpi_tests/rails_mpi_np4.mpi \
	mpi_tests/job_mpi_np2.mpi \
	mpi_tests/job_mpi_np3.mpi \
	mpi_tests/together_np2.mpi \
	mpi_tests/together_np3.mpi \
	mpi_tests/together_np4.mpi \
	mpi_tests/together_mpi_np2.mpi \
	mpi_tests/together_mpi_np3.mpi \
	mpi_tests/together_mpi_np4.mpi \
	mpi_tests/together_bad_np3.mpi \
	mpi_tests/together_bad_mpi_np3.mpi \
	mpi_tests/together_kill_before_np3.mpi \
	mpi_tests/together_kill_before_mpi_np3.mpi \
	mpi_tests/together_kill_during_np3.mpi \
	mpi_tests/together_kill_during_mpi_np3.mpi
EXTRA_DIST += $(MPI_TEST_FILES)

if RIG_RAILS
check_PROGRAMS += mpi_tests/test_rails mpi_tests/test_job
mpi_tests_test_rails_SOURCES = mpi_tests/test_rails.c mpi_tests/mpitest.h
mpi_tests_test_rails_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS)
mpi_tests_test_rails_CFLAGS = $(RIG_CFLAGS)
mpi_tests_test_rails_LDADD = src/librig.la $(MPI_LIBS)
mpi_tests_test_rails_LDFLAGS = $(RIG_LDFLAGS)

mpi_tests_test_job_SOURCES = mpi_tests/test_job.c mpi_tests/mpitest.h \
	tests/sanitizer.h
mpi_tests_test_job_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS) \
	$(HWLOC_CFLAGS)
mpi_tests_test_job_CFLAGS = $(RIG_CFLAGS)
mpi_tests_test_job_LDADD = src/librig.la $(MPI_LIBS) $(HWLOC_LIBS)
mpi_tests_test_job_LDFLAGS = $(RIG_LDFLAGS)

# rig_job_rails (rig/job.h): graphs, bad input, deaths during the call
check_PROGRAMS += mpi_tests/test_together
mpi_tests_test_together_SOURCES = mpi_tests/test_together.c \
	mpi_tests/mpitest.h
mpi_tests_test_together_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS)
mpi_tests_test_together_CFLAGS = $(RIG_CFLAGS)
mpi_tests_test_together_LDADD = src/librig.la $(MPI_LIBS)
mpi_tests_test_together_LDFLAGS = $(RIG_LDFLAGS)

TESTS += $(MPI_TEST_FILES)

# The transport layer's registry and lock order, without mpirun: linked
# against the convenience libraries, whose symbols librig hides.
check_PROGRAMS += mpi_tests/test_transports
mpi_tests_test_transports_SOURCES = mpi_tests/test_transports.c \
	tests/test_util.h
mpi_tests_test_transports_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS) \
	$(CUNIT_CFLAGS)
mpi_tests_test_transports_CFLAGS = $(RIG_CFLAGS)
mpi_tests_test_transports_LDADD = src/rail/librail.la src/abi/libabi.la \
	$(UCX_LIBS) $(HWLOC_LIBS) $(MPI_LIBS) $(CUNIT_LIBS)
mpi_tests_test_transports_LDFLAGS = $(RIG_LDFLAGS)
TESTS += mpi_tests/test_transports
endif
