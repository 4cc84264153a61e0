# SPDX-License-Identifier: BSD-3-Clause
# CUnit unit tests of the ABI layer (no MPI, no GPU).
check_PROGRAMS += tests/test_abi
tests_test_abi_SOURCES = tests/test_abi.c tests/test_util.h
tests_test_abi_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(CUNIT_CFLAGS)
tests_test_abi_CFLAGS = $(RIG_CFLAGS)
tests_test_abi_LDADD = src/librig.la $(CUNIT_LIBS)
tests_test_abi_LDFLAGS = $(RIG_LDFLAGS)
TESTS += tests/test_abi
UNIT_TESTS += tests/test_abi

# The mapped carrier's window (internal to librig: linked to the ABI's
# objects).
check_PROGRAMS += tests/test_counts_window
tests_test_counts_window_SOURCES = tests/test_counts_window.c \
	tests/test_util.h
tests_test_counts_window_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(CUNIT_CFLAGS)
tests_test_counts_window_CFLAGS = $(RIG_CFLAGS)
tests_test_counts_window_LDADD = src/abi/libabi.la $(CUNIT_LIBS)
tests_test_counts_window_LDFLAGS = $(RIG_LDFLAGS)
TESTS += tests/test_counts_window
UNIT_TESTS += tests/test_counts_window

# What a wait that finds its count tells the transports (internal: linked
# to the ABI's objects).
check_PROGRAMS += tests/test_wait_note
tests_test_wait_note_SOURCES = tests/test_wait_note.c tests/test_util.h
tests_test_wait_note_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(CUNIT_CFLAGS)
tests_test_wait_note_CFLAGS = $(RIG_CFLAGS)
tests_test_wait_note_LDADD = src/abi/libabi.la $(CUNIT_LIBS)
tests_test_wait_note_LDFLAGS = $(RIG_LDFLAGS)
TESTS += tests/test_wait_note
UNIT_TESTS += tests/test_wait_note

# The reason a job failed, as the transports keep it (internal to librig:
# linked to the transports' objects).
if RIG_RAILS
check_PROGRAMS += tests/test_failure_reason
tests_test_failure_reason_SOURCES = tests/test_failure_reason.c \
	tests/test_util.h
tests_test_failure_reason_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS) \
	$(CUNIT_CFLAGS)
tests_test_failure_reason_CFLAGS = $(RIG_CFLAGS)
tests_test_failure_reason_LDADD = src/rail/librail.la src/abi/libabi.la \
	src/util/libutil.la $(UCX_LIBS) $(HWLOC_LIBS) $(MPI_LIBS) $(CUNIT_LIBS)
tests_test_failure_reason_LDFLAGS = $(RIG_LDFLAGS)
TESTS += tests/test_failure_reason
UNIT_TESTS += tests/test_failure_reason
endif

# Bad input to every public function of the ABI layer (hardening; the
# executors' are tests/mesh/test_badinput_mesh).
check_PROGRAMS += tests/test_badinput
tests_test_badinput_SOURCES = tests/test_badinput.c tests/badinput_util.h \
	tests/test_util.h
tests_test_badinput_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(CUNIT_CFLAGS)
tests_test_badinput_CFLAGS = $(RIG_CFLAGS)
tests_test_badinput_LDADD = src/librig.la $(CUNIT_LIBS)
tests_test_badinput_LDFLAGS = $(RIG_LDFLAGS)
TESTS += tests/test_badinput
UNIT_TESTS += tests/test_badinput

# Wait modes, tests, waits over several ends and the run helpers.
check_PROGRAMS += tests/test_wait
tests_test_wait_SOURCES = tests/test_wait.c tests/test_util.h \
	tests/sanitizer.h
tests_test_wait_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(CUNIT_CFLAGS)
tests_test_wait_CFLAGS = $(RIG_CFLAGS)
tests_test_wait_LDADD = src/librig.la $(CUNIT_LIBS)
tests_test_wait_LDFLAGS = $(RIG_LDFLAGS)
TESTS += tests/test_wait
UNIT_TESTS += tests/test_wait
