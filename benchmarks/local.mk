# SPDX-License-Identifier: BSD-3-Clause
# benchmarks: OSU-style benchmarks of rails against MPI and raw UCX.  Built
# with the rails, never run by `make check`; benchmarks/run.sh runs them.
if RIG_RAILS
noinst_LTLIBRARIES += benchmarks/libbench.la
benchmarks_libbench_la_SOURCES = benchmarks/bench.c benchmarks/bench.h \
	benchmarks/patterns.c benchmarks/patterns.h \
	benchmarks/mpi_methods.c benchmarks/ucx_methods.c \
	benchmarks/rig_method.c benchmarks/rig_bench.h
benchmarks_libbench_la_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS) \
	$(UCX_CFLAGS)
benchmarks_libbench_la_CFLAGS = $(RIG_CFLAGS)

RIG_BENCH_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS) $(UCX_CFLAGS) \
	$(HWLOC_CFLAGS)
RIG_BENCH_LDADD = benchmarks/libbench.la src/librig.la $(MPI_LIBS) \
	$(UCX_LIBS) $(HWLOC_LIBS)

# Installed as OSU installs its programs, under libexec, not on PATH:
# $(libexecdir)/rig/rig_osu_*, with run.sh beside them as rig_osu_run
# (rig_osu(1)).
benchexecdir = $(pkglibexecdir)
benchexec_PROGRAMS = benchmarks/rig_osu_latency benchmarks/rig_osu_bw \
	benchmarks/rig_osu_bibw benchmarks/rig_osu_mr benchmarks/rig_osu_multi \
	benchmarks/rig_osu_ready benchmarks/rig_stencil benchmarks/rig_wait_cost

benchmarks_rig_osu_latency_SOURCES = benchmarks/osu_latency.c
benchmarks_rig_osu_latency_CPPFLAGS = $(RIG_BENCH_CPPFLAGS)
benchmarks_rig_osu_latency_CFLAGS = $(RIG_CFLAGS)
benchmarks_rig_osu_latency_LDADD = $(RIG_BENCH_LDADD)
benchmarks_rig_osu_latency_LDFLAGS = $(RIG_LDFLAGS)

benchmarks_rig_osu_bw_SOURCES = benchmarks/osu_bw.c
benchmarks_rig_osu_bw_CPPFLAGS = $(RIG_BENCH_CPPFLAGS)
benchmarks_rig_osu_bw_CFLAGS = $(RIG_CFLAGS)
benchmarks_rig_osu_bw_LDADD = $(RIG_BENCH_LDADD)
benchmarks_rig_osu_bw_LDFLAGS = $(RIG_LDFLAGS)

benchmarks_rig_osu_bibw_SOURCES = benchmarks/osu_bibw.c
benchmarks_rig_osu_bibw_CPPFLAGS = $(RIG_BENCH_CPPFLAGS)
benchmarks_rig_osu_bibw_CFLAGS = $(RIG_CFLAGS)
benchmarks_rig_osu_bibw_LDADD = $(RIG_BENCH_LDADD)
benchmarks_rig_osu_bibw_LDFLAGS = $(RIG_LDFLAGS)

benchmarks_rig_osu_mr_SOURCES = benchmarks/osu_mr.c
benchmarks_rig_osu_mr_CPPFLAGS = $(RIG_BENCH_CPPFLAGS)
benchmarks_rig_osu_mr_CFLAGS = $(RIG_CFLAGS)
benchmarks_rig_osu_mr_LDADD = $(RIG_BENCH_LDADD)
benchmarks_rig_osu_mr_LDFLAGS = $(RIG_LDFLAGS)

benchmarks_rig_osu_multi_SOURCES = benchmarks/osu_multi.c
benchmarks_rig_osu_multi_CPPFLAGS = $(RIG_BENCH_CPPFLAGS)
benchmarks_rig_osu_multi_CFLAGS = $(RIG_CFLAGS)
benchmarks_rig_osu_multi_LDADD = $(RIG_BENCH_LDADD)
benchmarks_rig_osu_multi_LDFLAGS = $(RIG_LDFLAGS)

benchmarks_rig_osu_ready_SOURCES = benchmarks/osu_ready.c
benchmarks_rig_osu_ready_CPPFLAGS = $(RIG_BENCH_CPPFLAGS)
benchmarks_rig_osu_ready_CFLAGS = $(RIG_CFLAGS)
benchmarks_rig_osu_ready_LDADD = $(RIG_BENCH_LDADD)
benchmarks_rig_osu_ready_LDFLAGS = $(RIG_LDFLAGS)

benchmarks_rig_stencil_SOURCES = benchmarks/stencil.c
benchmarks_rig_stencil_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS)
benchmarks_rig_stencil_CFLAGS = $(RIG_CFLAGS)
benchmarks_rig_stencil_LDADD = src/librig.la $(MPI_LIBS)
benchmarks_rig_stencil_LDFLAGS = $(RIG_LDFLAGS)

benchmarks_rig_wait_cost_SOURCES = benchmarks/wait_cost.c
benchmarks_rig_wait_cost_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS)
benchmarks_rig_wait_cost_CFLAGS = $(RIG_CFLAGS)
benchmarks_rig_wait_cost_LDADD = src/librig.la $(MPI_LIBS)
benchmarks_rig_wait_cost_LDFLAGS = $(RIG_LDFLAGS)

RIG_OSU_RUN = rig_osu_run
endif
dist_noinst_SCRIPTS += benchmarks/run.sh benchmarks/multihost.sh
EXTRA_DIST += benchmarks/machine.sh
# run.sh beside the programs (a build without MPI has none), and its
# multi-host mode (rig_osu_run --hosts 2) in multihost/ with the bed it
# sources (mpi_tests/multihost: hosts.sh, and agent.sh that mpirun runs).
install-exec-local: install-rig-osu-run
uninstall-local: uninstall-rig-osu-run
install-rig-osu-run:
	@if test -n "$(RIG_OSU_RUN)"; then \
	  $(MKDIR_P) '$(DESTDIR)$(pkglibexecdir)/multihost' && \
	  echo " $(INSTALL_SCRIPT) run.sh $(pkglibexecdir)/$(RIG_OSU_RUN)" && \
	  $(INSTALL_SCRIPT) $(srcdir)/benchmarks/run.sh \
	    '$(DESTDIR)$(pkglibexecdir)/$(RIG_OSU_RUN)' && \
	  echo " $(INSTALL_DATA) machine.sh $(pkglibexecdir)" && \
	  $(INSTALL_DATA) $(srcdir)/benchmarks/machine.sh \
	    '$(DESTDIR)$(pkglibexecdir)' && \
	  echo " $(INSTALL_SCRIPT) multihost.sh agent.sh hosts.sh $(pkglibexecdir)/multihost" && \
	  $(INSTALL_SCRIPT) $(srcdir)/benchmarks/multihost.sh \
	    $(srcdir)/mpi_tests/multihost/agent.sh \
	    '$(DESTDIR)$(pkglibexecdir)/multihost' && \
	  $(INSTALL_DATA) $(srcdir)/mpi_tests/multihost/hosts.sh \
	    '$(DESTDIR)$(pkglibexecdir)/multihost'; fi
uninstall-rig-osu-run:
	rm -f '$(DESTDIR)$(pkglibexecdir)/rig_osu_run' \
	  '$(DESTDIR)$(pkglibexecdir)/machine.sh' \
	  '$(DESTDIR)$(pkglibexecdir)/multihost/multihost.sh' \
	  '$(DESTDIR)$(pkglibexecdir)/multihost/agent.sh' \
	  '$(DESTDIR)$(pkglibexecdir)/multihost/hosts.sh'
	rmdir '$(DESTDIR)$(pkglibexecdir)/multihost' 2>/dev/null || :
EXTRA_DIST += benchmarks/README.md

# The controller (rig/remote.h): images and loads beside bare MPI and the
# same steps on one machine.  Uses the test catalog of mpi_tests/remote.
if RIG_RAILS
if RIG_HAVE_JANSSON
if RIG_HAVE_XXHASH
noinst_PROGRAMS += benchmarks/rig_remote_bench
benchmarks_rig_remote_bench_SOURCES = benchmarks/remote_bench.c
benchmarks_rig_remote_bench_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS) \
	-DREMOTE_PROGRAMS='"$(abs_top_builddir)/mpi_tests/remote/programs"'
benchmarks_rig_remote_bench_CFLAGS = $(RIG_CFLAGS)
benchmarks_rig_remote_bench_LDADD = src/librig.la $(MPI_LIBS)
benchmarks_rig_remote_bench_LDFLAGS = $(RIG_LDFLAGS)
EXTRA_benchmarks_rig_remote_bench_DEPENDENCIES = \
	mpi_tests/remote/programs.stamp
endif
endif
endif
