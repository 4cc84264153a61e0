# SPDX-License-Identifier: BSD-3-Clause
# mpi_tests/failure: failure, bad input and soak tests (hardening issue),
# and hang_*: every way a survivor must not hang (test_neverhang, issue
# 13; repeat.sh runs the racy ones many times).  Run by mpitest.sh like
# mpi_tests/local.mk's tests.
FAILURE_TEST_FILES = \
	mpi_tests/failure/fail_np3.mpi \
	mpi_tests/failure/kill_recovery_np3.mpi \
	mpi_tests/failure/kill_recovery_tcp_np3.mpi \
	mpi_tests/failure/kill_np3.mpi \
	mpi_tests/failure/finalize_np2.mpi \
	mpi_tests/failure/soak_np3.mpi \
	mpi_tests/failure/bad_input_np2.mpi \
	mpi_tests/failure/fail_mpi_np3.mpi \
	mpi_tests/failure/kill_recovery_mpi_np3.mpi \
	mpi_tests/failure/finalize_mpi_np2.mpi \
	mpi_tests/failure/hang_before_rail_mpi_np2.mpi \
	mpi_tests/failure/hang_before_rail_np2.mpi \
	mpi_tests/failure/hang_close_death_both_mpi_np2.mpi \
	mpi_tests/failure/hang_close_death_both_np2.mpi \
	mpi_tests/failure/hang_close_death_both_tcp_np2.mpi \
	mpi_tests/failure/hang_close_death_norails_mpi_np2.mpi \
	mpi_tests/failure/hang_close_death_norails_np2.mpi \
	mpi_tests/failure/hang_close_death_norails_tcp_np2.mpi \
	mpi_tests/failure/hang_close_death_rails_mpi_np2.mpi \
	mpi_tests/failure/hang_close_death_rails_np2.mpi \
	mpi_tests/failure/hang_close_death_rails_tcp_np2.mpi \
	mpi_tests/failure/hang_connect_death_mpi_np3.mpi \
	mpi_tests/failure/hang_cycles_mpi_np2.mpi \
	mpi_tests/failure/hang_cycles_np2.mpi \
	mpi_tests/failure/hang_jump_mpi_np2.mpi \
	mpi_tests/failure/hang_jump_np2.mpi \
	mpi_tests/failure/hang_jump_puts_np2.mpi \
	mpi_tests/failure/hang_lower_mpi_np2.mpi \
	mpi_tests/failure/hang_lower_np2.mpi \
	mpi_tests/failure/hang_lower_puts_np2.mpi \
	mpi_tests/failure/hang_others_mpi_np4.mpi \
	mpi_tests/failure/hang_others_np4.mpi \
	mpi_tests/failure/hang_partial_mpi_np3.mpi \
	mpi_tests/failure/hang_partial_np3.mpi \
	mpi_tests/failure/hang_stop_mpi_np2.mpi \
	mpi_tests/failure/hang_stop_np2.mpi \
	mpi_tests/failure/hang_stop_tcp_np2.mpi \
	mpi_tests/failure/hang_stop_bulk_tcp_np2.mpi
EXTRA_DIST += $(FAILURE_TEST_FILES) mpi_tests/failure/soak.sh \
	mpi_tests/failure/test_harness.sh mpi_tests/failure/repeat.sh

# mpitest.sh's own verdicts (a skip never hides a failure); needs no MPI.
TESTS += mpi_tests/failure/test_harness.sh

if RIG_RAILS
check_PROGRAMS += mpi_tests/failure/test_failure
mpi_tests_failure_test_failure_SOURCES = mpi_tests/failure/test_failure.c \
	mpi_tests/mpitest.h
mpi_tests_failure_test_failure_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS)
mpi_tests_failure_test_failure_CFLAGS = $(RIG_CFLAGS)
mpi_tests_failure_test_failure_LDADD = src/librig.la $(MPI_LIBS)
mpi_tests_failure_test_failure_LDFLAGS = $(RIG_LDFLAGS)

check_PROGRAMS += mpi_tests/failure/test_soak
mpi_tests_failure_test_soak_SOURCES = mpi_tests/failure/test_soak.c \
	mpi_tests/mpitest.h
mpi_tests_failure_test_soak_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS)
mpi_tests_failure_test_soak_CFLAGS = $(RIG_CFLAGS)
mpi_tests_failure_test_soak_LDADD = src/librig.la $(MPI_LIBS)
mpi_tests_failure_test_soak_LDFLAGS = $(RIG_LDFLAGS)

check_PROGRAMS += mpi_tests/failure/test_neverhang
mpi_tests_failure_test_neverhang_SOURCES = \
	mpi_tests/failure/test_neverhang.c mpi_tests/mpitest.h tests/sanitizer.h
mpi_tests_failure_test_neverhang_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS)
mpi_tests_failure_test_neverhang_CFLAGS = $(RIG_CFLAGS)
mpi_tests_failure_test_neverhang_LDADD = src/librig.la $(MPI_LIBS)
mpi_tests_failure_test_neverhang_LDFLAGS = $(RIG_LDFLAGS)

check_PROGRAMS += mpi_tests/failure/test_badinput_job
mpi_tests_failure_test_badinput_job_SOURCES = \
	mpi_tests/failure/test_badinput_job.c mpi_tests/mpitest.h
mpi_tests_failure_test_badinput_job_CPPFLAGS = $(RIG_ABI_CPPFLAGS) \
	$(MPI_CFLAGS)
mpi_tests_failure_test_badinput_job_CFLAGS = $(RIG_CFLAGS)
mpi_tests_failure_test_badinput_job_LDADD = src/librig.la $(MPI_LIBS)
mpi_tests_failure_test_badinput_job_LDFLAGS = $(RIG_LDFLAGS)

TESTS += $(FAILURE_TEST_FILES)
endif
