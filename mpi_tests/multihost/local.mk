# SPDX-License-Identifier: BSD-3-Clause
# mpi_tests/multihost: the rails, job and failure suites, and the link-cut
# tests, across 2 and 3 simulated hosts (network namespaces on a bridge;
# see hosts.sh), both transports (RIG_TRANSPORT=mpi is refused across
# nodes, which its tests check), with Open MPI's own choice of one-sided
# components (no MCA flags).  Each .mh file is a .mpi file with hosts=
# (and optionally osc=, and shm=1 for ranks of one host that meet through
# shared memory), run by mhtest.sh; skipped (77) without root or
# iproute2.
MH_LOG_COMPILER = $(SHELL) $(top_srcdir)/mpi_tests/multihost/mhtest.sh
TEST_EXTENSIONS += .mh

MH_TEST_FILES = \
	mpi_tests/multihost/cut_eth_busy_h3.mh \
	mpi_tests/multihost/cut_eth_busy_shm_h2.mh \
	mpi_tests/multihost/cut_eth_idle_h2.mh \
	mpi_tests/multihost/cut_in_idle_h3.mh \
	mpi_tests/multihost/cut_mpi_eth_busy_h3.mh \
	mpi_tests/multihost/cut_out_busy_h2.mh \
	mpi_tests/multihost/cut_port_busy_h2.mh \
	mpi_tests/multihost/cut_port_idle_h3.mh \
	mpi_tests/multihost/fail_h3.mh \
	mpi_tests/multihost/fail_mpi_h3.mh \
	mpi_tests/multihost/finalize_h2.mh \
	mpi_tests/multihost/finalize_mpi_h2.mh \
	mpi_tests/multihost/job_h2.mh \
	mpi_tests/multihost/job_h3.mh \
	mpi_tests/multihost/job_oscucx_h2.mh \
	mpi_tests/multihost/job_mpi_h2.mh \
	mpi_tests/multihost/kill_h3.mh \
	mpi_tests/multihost/kill_bulk_h3.mh \
	mpi_tests/multihost/kill_mpi_h3.mh \
	mpi_tests/multihost/open_h2.mh \
	mpi_tests/multihost/open_h3.mh \
	mpi_tests/multihost/open_mpi_h2.mh \
	mpi_tests/multihost/open_mpi_noflags_h2.mh \
	mpi_tests/multihost/open_noflags_h2.mh \
	mpi_tests/multihost/open_noflags_mt_h2.mh \
	mpi_tests/multihost/rails_h2.mh \
	mpi_tests/multihost/rails_am_h2.mh \
	mpi_tests/multihost/rails_bulk_h2.mh \
	mpi_tests/multihost/rails_h3.mh \
	mpi_tests/multihost/rails_mpi_h2.mh \
	mpi_tests/multihost/rails_shm_h2.mh \
	mpi_tests/multihost/stop_h2.mh \
	mpi_tests/multihost/stop_mpi_h2.mh
EXTRA_DIST += $(MH_TEST_FILES) mpi_tests/multihost/hosts.sh \
	mpi_tests/multihost/agent.sh mpi_tests/multihost/ctl.sh \
	mpi_tests/multihost/mhtest.sh mpi_tests/multihost/mpirun.sh

if RIG_RAILS
check_PROGRAMS += mpi_tests/multihost/test_hosts
mpi_tests_multihost_test_hosts_SOURCES = mpi_tests/multihost/test_hosts.c \
	mpi_tests/mpitest.h
mpi_tests_multihost_test_hosts_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS)
mpi_tests_multihost_test_hosts_CFLAGS = $(RIG_CFLAGS)
mpi_tests_multihost_test_hosts_LDADD = src/librig.la $(MPI_LIBS)
mpi_tests_multihost_test_hosts_LDFLAGS = $(RIG_LDFLAGS)

TESTS += $(MH_TEST_FILES)
endif
