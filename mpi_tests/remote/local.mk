# SPDX-License-Identifier: BSD-3-Clause
# mpi_tests/remote: the remote layer (rig/remote.h) at 2, 3 and 4 ranks,
# run by mpi_tests/mpitest.sh, and mesh_run under mpirun.  The test
# programs' catalog (mpi_tests/remote/programs) is laid out by the build.
REMOTE_TEST_FILES = \
	mpi_tests/remote/basic_np2.mpi \
	mpi_tests/remote/basic_np3.mpi \
	mpi_tests/remote/basic_np4.mpi \
	mpi_tests/remote/chunks_np3.mpi \
	mpi_tests/remote/hash_np3.mpi \
	mpi_tests/remote/unsupported_np3.mpi \
	mpi_tests/remote/cycles_np3.mpi \
	mpi_tests/remote/keep_np3.mpi \
	mpi_tests/remote/keep0_np3.mpi \
	mpi_tests/remote/kill_close_np3.mpi \
	mpi_tests/remote/kill_load_np3.mpi \
	mpi_tests/remote/kill_open_np3.mpi \
	mpi_tests/remote/kill_run_np3.mpi \
	mpi_tests/remote/kill_controller_np3.mpi \
	mpi_tests/remote/late_agent_np3.mpi \
	mpi_tests/remote/late_controller_np3.mpi \
	mpi_tests/remote/stuck_np3.mpi \
	mpi_tests/remote/badinput_np2.mpi \
	mpi_tests/remote/badinput_np3.mpi \
	mpi_tests/remote/mpmd_np3.mpi \
	mpi_tests/remote/threads_np3.mpi \
	mpi_tests/remote/example_np4.mpi \
	mpi_tests/remote/rails_np3.mpi \
	mpi_tests/remote/rails_np4.mpi \
	mpi_tests/remote/rails_crash_np3.mpi \
	mpi_tests/remote/rails_crash_ctl_np3.mpi \
	mpi_tests/remote/rails_kill_np3.mpi \
	mpi_tests/remote/rails_kill_make_np3.mpi \
	mpi_tests/remote/rails_puts_np3.mpi \
	mpi_tests/remote/stencil_puts_np3.mpi \
	mpi_tests/remote/stencil_native_np3.mpi \
	mpi_tests/remote/stencil_native_np4.mpi
# The wasm stencil needs wabt's wasm2c on the agents.
STENCIL_WASM_TESTS = mpi_tests/remote/stencil_wasm_np3.mpi \
	mpi_tests/remote/stencil_wasm_np4.mpi
# Programs of rail_prog (a rail end on input 0).
RAIL_MANIFESTS = \
	mpi_tests/remote/manifests/rswap.json \
	mpi_tests/remote/manifests/rswap_long.json \
	mpi_tests/remote/manifests/rswap_forever.json \
	mpi_tests/remote/manifests/rcrash_rail.json \
	mpi_tests/remote/manifests/rstrict.json
REMOTE_MANIFESTS = \
	mpi_tests/remote/manifests/rsum.json \
	mpi_tests/remote/manifests/rspin.json \
	mpi_tests/remote/manifests/rcrash.json \
	mpi_tests/remote/manifests/rtiny.json
EXTRA_DIST += $(REMOTE_TEST_FILES) $(REMOTE_MANIFESTS) $(RAIL_MANIFESTS) \
	$(STENCIL_WASM_TESTS) \
	mpi_tests/remote/stencil_native_h4.mh mpi_tests/remote/stencil_wasm_h4.mh \
	mpi_tests/remote/kill_load_h3.mh mpi_tests/remote/kill_open_h3.mh \
	mpi_tests/remote/kill_run_h3.mh \
	mpi_tests/remote/manifests/wsum.json mpi_tests/remote/wsum.wat \
	mpi_tests/remote/test_mesh_run.sh mpi_tests/remote/test_cuda_mock.sh

if RIG_RAILS
if RIG_HAVE_JANSSON
if RIG_HAVE_XXHASH
if RIG_HAVE_HWLOC

check_PROGRAMS += mpi_tests/remote/remote_prog mpi_tests/remote/test_remote \
	mpi_tests/remote/rail_prog mpi_tests/remote/test_rails
mpi_tests_remote_rail_prog_SOURCES = mpi_tests/remote/rail_prog.c \
	tests/mesh/real_signals.h tests/sanitizer.h
mpi_tests_remote_rail_prog_CPPFLAGS = $(MESH_CPPFLAGS)
mpi_tests_remote_rail_prog_CFLAGS = $(RIG_CFLAGS)
mpi_tests_remote_rail_prog_LDADD = src/mesh/libmesh_worker.la
mpi_tests_remote_rail_prog_LDFLAGS = $(RIG_LDFLAGS)
mpi_tests_remote_test_rails_SOURCES = mpi_tests/remote/test_rails.c \
	mpi_tests/mpitest.h
mpi_tests_remote_test_rails_CPPFLAGS = $(REMOTE_TEST_CPPFLAGS)
mpi_tests_remote_test_rails_CFLAGS = $(RIG_CFLAGS)
mpi_tests_remote_test_rails_LDADD = src/librig.la $(MPI_LIBS)
mpi_tests_remote_test_rails_LDFLAGS = $(RIG_LDFLAGS)
EXTRA_mpi_tests_remote_test_rails_DEPENDENCIES = \
	mpi_tests/remote/programs.stamp
mpi_tests_remote_remote_prog_SOURCES = mpi_tests/remote/remote_prog.c
mpi_tests_remote_remote_prog_CPPFLAGS = $(MESH_CPPFLAGS)
mpi_tests_remote_remote_prog_CFLAGS = $(RIG_CFLAGS)
mpi_tests_remote_remote_prog_LDADD = src/mesh/libmesh_worker.la
mpi_tests_remote_remote_prog_LDFLAGS = $(RIG_LDFLAGS)

REMOTE_TEST_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS) \
	-DREMOTE_PROGRAMS='"$(abs_top_builddir)/mpi_tests/remote/programs"'
if RIG_HAVE_WABT
REMOTE_TEST_CPPFLAGS += -DREMOTE_HAVE_WASM
endif
mpi_tests_remote_test_remote_SOURCES = mpi_tests/remote/test_remote.c \
	mpi_tests/mpitest.h tests/sanitizer.h
mpi_tests_remote_test_remote_CPPFLAGS = $(REMOTE_TEST_CPPFLAGS)
mpi_tests_remote_test_remote_CFLAGS = $(RIG_CFLAGS)
mpi_tests_remote_test_remote_LDADD = src/librig.la $(MPI_LIBS)
mpi_tests_remote_test_remote_LDFLAGS = $(RIG_LDFLAGS)
EXTRA_mpi_tests_remote_test_remote_DEPENDENCIES = \
	mpi_tests/remote/programs.stamp

# The catalog: one native executable under each native manifest, and the
# wasm module assembled from its text where wabt is.
mpi_tests/remote/programs.stamp: mpi_tests/remote/remote_prog$(EXEEXT) \
		mpi_tests/remote/rail_prog$(EXEEXT) $(RAIL_MANIFESTS) \
		src/mesh/mesh_target$(EXEEXT) \
		$(srcdir)/tests/mesh/make_catalog.sh $(REMOTE_MANIFESTS) \
		$(srcdir)/mpi_tests/remote/manifests/wsum.json \
		$(srcdir)/mpi_tests/remote/wsum.wat
	$(AM_V_GEN)triple=`src/mesh/mesh_target` && \
	for m in $(REMOTE_MANIFESTS); do \
	  $(SHELL) $(srcdir)/tests/mesh/make_catalog.sh \
	    mpi_tests/remote/programs $(srcdir)/$$m "$$triple" \
	    mpi_tests/remote/remote_prog$(EXEEXT) remote_prog || exit 1; \
	done && \
	for m in $(RAIL_MANIFESTS); do \
	  $(SHELL) $(srcdir)/tests/mesh/make_catalog.sh \
	    mpi_tests/remote/programs $(srcdir)/$$m "$$triple" \
	    mpi_tests/remote/rail_prog$(EXEEXT) rail_prog || exit 1; \
	done && \
	$(SHELL) $(srcdir)/tests/mesh/make_catalog.sh mpi_tests/remote/programs \
	  $(srcdir)/mpi_tests/remote/manifests/wsum.json "$$triple" && \
	if test -n "$(WAT2WASM)"; then \
	  $(WAT2WASM) $(srcdir)/mpi_tests/remote/wsum.wat \
	    -o mpi_tests/remote/programs/wsum/wsum.wasm || exit 1; \
	fi && touch $@
CLEANFILES += mpi_tests/remote/programs.stamp \
	mpi_tests/remote/programs/*/manifest.json \
	mpi_tests/remote/programs/*/*.wasm \
	mpi_tests/remote/programs/*/*/*

# Across 3 and 4 simulated hosts (mpi_tests/multihost's bed; skipped
# without root or iproute2).
TESTS += mpi_tests/remote/stencil_native_h4.mh \
	mpi_tests/remote/kill_load_h3.mh mpi_tests/remote/kill_open_h3.mh \
	mpi_tests/remote/kill_run_h3.mh
if RIG_HAVE_WABT
TESTS += $(STENCIL_WASM_TESTS) mpi_tests/remote/stencil_wasm_h4.mh
endif
TESTS += $(REMOTE_TEST_FILES) mpi_tests/remote/test_mesh_run.sh \
	mpi_tests/remote/test_cuda_mock.sh

endif
endif
endif
endif
