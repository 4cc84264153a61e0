# SPDX-License-Identifier: BSD-3-Clause
# The executors layer (mesh_*): the interface, the native backend, the
# driver, mesh_run, the example program and the tests.  Needs jansson,
# xxHash and hwloc; without them it is not built.

MESH_CPPFLAGS = $(RIG_ABI_CPPFLAGS) -D_GNU_SOURCE
MESH_DEP_CFLAGS = $(JANSSON_CFLAGS) $(XXHASH_CFLAGS) $(HWLOC_CFLAGS)

# Files of the catalogs the build lays out (see the stamps below).
MESH_TEST_MANIFESTS = \
	tests/mesh/manifests/t_ok.json \
	tests/mesh/manifests/t_finish.json \
	tests/mesh/manifests/t_crash.json \
	tests/mesh/manifests/t_stubborn.json \
	tests/mesh/manifests/t_never.json \
	tests/mesh/manifests/t_echo.json \
	tests/mesh/manifests/t_flash.json \
	tests/mesh/manifests/t_spawn_exit.json \
	tests/mesh/manifests/t_spawn_run.json \
	tests/mesh/manifests/t_spawn_crash.json \
	tests/mesh/manifests/t_spawn_never.json \
	tests/mesh/manifests/t_corrupt.json \
	tests/mesh/manifests/t_online2.json \
	tests/mesh/manifests/t_online2_hostile.json
MESH_TEST_MANIFESTS_NOBIN = tests/mesh/manifests/t_gpu.json
# Programs whose binary links librig (and so UCX): tests/mesh/
# mesh_test_worker_rig.
MESH_TEST_MANIFESTS_RIG = tests/mesh/manifests/t_ucx_crash.json

EXTRA_DIST += \
	$(MESH_TEST_MANIFESTS) $(MESH_TEST_MANIFESTS_NOBIN) \
	$(MESH_TEST_MANIFESTS_RIG) \
	tests/mesh/make_catalog.sh \
	tests/mesh/test_mesh_run.sh \
	examples/mesh/pi.json \
	tests/fuzz/fuzz_manifest.c \
	tests/fuzz/corpus/manifest/full.json \
	tests/fuzz/corpus/manifest/minimal.json \
	tests/fuzz/corpus/manifest/args.json \
	tests/fuzz/corpus/manifest/bad_backend.json \
	tests/fuzz/corpus/manifest/not_object.json

if RIG_HAVE_JANSSON
if RIG_HAVE_XXHASH
if RIG_HAVE_HWLOC

meshinclude_HEADERS += include/mesh/backend.h \
	include/mesh/driver.h \
	include/mesh/executors.h \
	include/mesh/loader.h \
	include/mesh/manifest.h \
	include/mesh/ends.h \
	include/mesh/worker.h
meshabiinclude_HEADERS += include/mesh/abi/backend.h \
	include/mesh/abi/control_block.h \
	include/mesh/abi/ends.h
noinst_HEADERS += src/mesh/mesh_internal.h src/mesh/child_internal.h

noinst_LTLIBRARIES += src/mesh/libmesh.la
src_mesh_libmesh_la_SOURCES = \
	src/mesh/backend.c \
	src/mesh/child.c \
	src/mesh/cleanup.c \
	src/mesh/driver.c \
	src/mesh/loader.c \
	src/mesh/manifest.c \
	src/mesh/table.c \
	src/mesh/target.c \
	src/mesh/worker.c \
	src/mesh/native/native_backend.c \
	src/mesh/native/native_compile.c \
	src/mesh/native/native_nodes.c \
	src/mesh/native/native_words.c \
	src/mesh/native/native_ends.c \
	src/mesh/ends.c
nodist_src_mesh_libmesh_la_SOURCES = src/mesh/keeper/keeper_embed.c
src_mesh_libmesh_la_CPPFLAGS = $(MESH_CPPFLAGS) $(MESH_DEP_CFLAGS) \
	-I$(top_srcdir)/src/mesh/keeper
src_mesh_libmesh_la_CFLAGS = $(RIG_CFLAGS)
src_librig_la_LIBADD += src/mesh/libmesh.la $(JANSSON_LIBS) $(XXHASH_LIBS) \
	$(HWLOC_LIBS)
noinst_HEADERS += src/mesh/native/native_internal.h

# The keeper every program of the executors runs under (src/mesh/child.c):
# a plain libc program, without the sanitizers (it is not rig's process).
# keeper_embed.c, made when the keeper changes, has the assembler put its
# bytes into librig (keeper_image.c says how).
noinst_PROGRAMS += src/mesh/keeper/mesh_keeper
src_mesh_keeper_mesh_keeper_SOURCES = src/mesh/keeper/keeper.c
src_mesh_keeper_mesh_keeper_CPPFLAGS = -D_GNU_SOURCE
src_mesh_keeper_mesh_keeper_CFLAGS = -std=gnu11 $(RIG_WARN_CFLAGS)
src_mesh_keeper_mesh_keeper_LDFLAGS = -s
src/mesh/keeper/keeper_embed.c: src/mesh/keeper/mesh_keeper$(EXEEXT)
	$(AM_V_GEN)$(MKDIR_P) src/mesh/keeper && \
	{ echo '/* Made by src/mesh/local.mk: the keeper for librig. */'; \
	  echo '#define MESH_KEEPER_PATH "$(abs_top_builddir)/src/mesh/keeper/mesh_keeper$(EXEEXT)"'; \
	  echo '#include "keeper_image.c"'; } > $@
CLEANFILES += src/mesh/keeper/keeper_embed.c
EXTRA_DIST += src/mesh/keeper/keeper_image.c

# The worker API alone, linked statically into test and example programs
# so that they are self-contained executables a catalog can hold.
noinst_LTLIBRARIES += src/mesh/libmesh_worker.la
src_mesh_libmesh_worker_la_SOURCES = src/mesh/worker.c
src_mesh_libmesh_worker_la_CPPFLAGS = $(MESH_CPPFLAGS)
src_mesh_libmesh_worker_la_CFLAGS = $(RIG_CFLAGS)

# Prints the target triple; the catalog rules use it.
noinst_PROGRAMS += src/mesh/mesh_target
src_mesh_mesh_target_SOURCES = src/mesh/print_target.c src/mesh/target.c
src_mesh_mesh_target_CPPFLAGS = $(MESH_CPPFLAGS)
src_mesh_mesh_target_CFLAGS = $(RIG_CFLAGS)

bin_PROGRAMS += tools/mesh_run
tools_mesh_run_SOURCES = tools/mesh_run.c
tools_mesh_run_CPPFLAGS = $(MESH_CPPFLAGS)
tools_mesh_run_CFLAGS = $(RIG_CFLAGS)
tools_mesh_run_LDADD = src/librig.la
tools_mesh_run_LDFLAGS = $(RIG_LDFLAGS)
# `make` also lays out the example catalog (no noinst_DATA to hang it on).
EXTRA_tools_mesh_run_DEPENDENCIES = examples/mesh/programs.stamp

# The example: examples/mesh/programs/pi/{manifest.json,<triple>/pi}.
noinst_PROGRAMS += examples/mesh/pi
examples_mesh_pi_SOURCES = examples/mesh/pi.c
examples_mesh_pi_CPPFLAGS = $(MESH_CPPFLAGS)
examples_mesh_pi_CFLAGS = $(RIG_CFLAGS)
examples_mesh_pi_LDADD = src/mesh/libmesh_worker.la -lm
examples_mesh_pi_LDFLAGS = $(RIG_LDFLAGS)

examples/mesh/programs.stamp: examples/mesh/pi$(EXEEXT) \
		src/mesh/mesh_target$(EXEEXT) $(srcdir)/examples/mesh/pi.json \
		$(srcdir)/tests/mesh/make_catalog.sh
	$(AM_V_GEN)triple=`src/mesh/mesh_target` && \
	$(SHELL) $(srcdir)/tests/mesh/make_catalog.sh examples/mesh/programs \
	  $(srcdir)/examples/mesh/pi.json "$$triple" \
	  examples/mesh/pi$(EXEEXT) pi && touch $@

# The test programs: one executable, a catalog entry per behaviour.
check_PROGRAMS += tests/mesh/mesh_test_worker
tests_mesh_mesh_test_worker_SOURCES = tests/mesh/worker_prog.c \
	tests/mesh/real_signals.h
tests_mesh_mesh_test_worker_CPPFLAGS = $(MESH_CPPFLAGS)
tests_mesh_mesh_test_worker_CFLAGS = $(RIG_CFLAGS)
tests_mesh_mesh_test_worker_LDADD = src/mesh/libmesh_worker.la
tests_mesh_mesh_test_worker_LDFLAGS = $(RIG_LDFLAGS)

# The same program linked with librig (UCX comes with it), in the build
# tree's own right: -no-install makes a binary, not a libtool wrapper.
check_PROGRAMS += tests/mesh/mesh_test_worker_rig
tests_mesh_mesh_test_worker_rig_SOURCES = tests/mesh/worker_prog.c \
	tests/mesh/real_signals.h
tests_mesh_mesh_test_worker_rig_CPPFLAGS = $(MESH_CPPFLAGS)
tests_mesh_mesh_test_worker_rig_CFLAGS = $(RIG_CFLAGS)
tests_mesh_mesh_test_worker_rig_LDADD = src/librig.la
tests_mesh_mesh_test_worker_rig_LDFLAGS = $(RIG_LDFLAGS) -no-install

tests/mesh/programs.stamp: tests/mesh/mesh_test_worker$(EXEEXT) \
		tests/mesh/mesh_test_worker_rig$(EXEEXT) \
		src/mesh/mesh_target$(EXEEXT) \
		$(srcdir)/tests/mesh/make_catalog.sh \
		$(MESH_TEST_MANIFESTS) $(MESH_TEST_MANIFESTS_NOBIN) \
		$(MESH_TEST_MANIFESTS_RIG)
	$(AM_V_GEN)triple=`src/mesh/mesh_target` && \
	for m in $(MESH_TEST_MANIFESTS); do \
	  name=`basename $$m .json` && \
	  $(SHELL) $(srcdir)/tests/mesh/make_catalog.sh tests/mesh/programs \
	    $(srcdir)/$$m "$$triple" tests/mesh/mesh_test_worker$(EXEEXT) \
	    $$name || exit 1; \
	done && \
	for m in $(MESH_TEST_MANIFESTS_RIG); do \
	  name=`basename $$m .json` && \
	  $(SHELL) $(srcdir)/tests/mesh/make_catalog.sh tests/mesh/programs \
	    $(srcdir)/$$m "$$triple" tests/mesh/mesh_test_worker_rig$(EXEEXT) \
	    $$name || exit 1; \
	done && \
	for m in $(MESH_TEST_MANIFESTS_NOBIN); do \
	  $(SHELL) $(srcdir)/tests/mesh/make_catalog.sh tests/mesh/programs \
	    $(srcdir)/$$m "$$triple" || exit 1; \
	done && touch $@

# Globs: rm expands them (the target triple is known at make time only).
CLEANFILES += examples/mesh/programs.stamp tests/mesh/programs.stamp \
	examples/mesh/programs/*/manifest.json \
	examples/mesh/programs/*/*/* \
	tests/mesh/programs/*/manifest.json \
	tests/mesh/programs/*/*/*

MESH_TEST_CPPFLAGS = $(MESH_CPPFLAGS) $(CUNIT_CFLAGS) $(XXHASH_CFLAGS) \
	-DMESH_TEST_PROGRAMS='"$(abs_top_builddir)/tests/mesh/programs"' \
	-DMESH_TEST_SRCDIR='"$(abs_top_srcdir)"'

if RIG_HAVE_CUNIT
check_PROGRAMS += tests/mesh/test_manifest tests/mesh/test_backend \
	tests/mesh/test_native tests/mesh/test_catalog
TESTS += tests/mesh/test_manifest tests/mesh/test_backend \
	tests/mesh/test_native tests/mesh/test_catalog
UNIT_TESTS += tests/mesh/test_manifest tests/mesh/test_backend \
	tests/mesh/test_native tests/mesh/test_catalog

# Bad input to every public function of include/mesh (hardening).
check_PROGRAMS += tests/mesh/test_badinput_mesh
TESTS += tests/mesh/test_badinput_mesh
UNIT_TESTS += tests/mesh/test_badinput_mesh
tests_mesh_test_badinput_mesh_SOURCES = tests/mesh/test_badinput_mesh.c \
	tests/badinput_util.h tests/test_util.h
tests_mesh_test_badinput_mesh_CPPFLAGS = $(MESH_CPPFLAGS) $(CUNIT_CFLAGS)
tests_mesh_test_badinput_mesh_CFLAGS = $(RIG_CFLAGS)
tests_mesh_test_badinput_mesh_LDADD = src/librig.la $(CUNIT_LIBS)
tests_mesh_test_badinput_mesh_LDFLAGS = $(RIG_LDFLAGS)

tests_mesh_test_catalog_SOURCES = tests/mesh/test_catalog.c tests/test_util.h
tests_mesh_test_catalog_CPPFLAGS = $(MESH_TEST_CPPFLAGS)
tests_mesh_test_catalog_CFLAGS = $(RIG_CFLAGS)
tests_mesh_test_catalog_LDADD = src/librig.la $(CUNIT_LIBS)
tests_mesh_test_catalog_LDFLAGS = $(RIG_LDFLAGS)
EXTRA_tests_mesh_test_catalog_DEPENDENCIES = tests/mesh/programs.stamp

tests_mesh_test_manifest_SOURCES = tests/mesh/test_manifest.c \
	tests/test_util.h
tests_mesh_test_manifest_CPPFLAGS = $(MESH_TEST_CPPFLAGS)
tests_mesh_test_manifest_CFLAGS = $(RIG_CFLAGS)
tests_mesh_test_manifest_LDADD = src/librig.la $(CUNIT_LIBS) $(XXHASH_LIBS)
tests_mesh_test_manifest_LDFLAGS = $(RIG_LDFLAGS)

tests_mesh_test_backend_SOURCES = tests/mesh/test_backend.c \
	tests/test_util.h tests/mesh/real_signals.h
tests_mesh_test_backend_CPPFLAGS = $(MESH_TEST_CPPFLAGS)
tests_mesh_test_backend_CFLAGS = $(RIG_CFLAGS)
tests_mesh_test_backend_LDADD = src/librig.la $(CUNIT_LIBS)
tests_mesh_test_backend_LDFLAGS = $(RIG_LDFLAGS)
EXTRA_tests_mesh_test_backend_DEPENDENCIES = tests/mesh/programs.stamp

# Not under valgrind (not in UNIT_TESTS): its hosts die of signals on
# purpose.
check_PROGRAMS += tests/mesh/test_native_exit
TESTS += tests/mesh/test_native_exit
tests_mesh_test_native_exit_SOURCES = tests/mesh/test_native_exit.c \
	tests/test_util.h tests/mesh/real_signals.h
tests_mesh_test_native_exit_CPPFLAGS = $(MESH_TEST_CPPFLAGS)
tests_mesh_test_native_exit_CFLAGS = $(RIG_CFLAGS)
tests_mesh_test_native_exit_LDADD = src/librig.la $(CUNIT_LIBS)
tests_mesh_test_native_exit_LDFLAGS = $(RIG_LDFLAGS)
EXTRA_tests_mesh_test_native_exit_DEPENDENCIES = tests/mesh/programs.stamp

tests_mesh_test_native_SOURCES = tests/mesh/test_native.c tests/test_util.h \
	tests/mesh/real_signals.h
tests_mesh_test_native_CPPFLAGS = $(MESH_TEST_CPPFLAGS)
tests_mesh_test_native_CFLAGS = $(RIG_CFLAGS)
tests_mesh_test_native_LDADD = src/librig.la $(CUNIT_LIBS)
tests_mesh_test_native_LDFLAGS = $(RIG_LDFLAGS)
EXTRA_tests_mesh_test_native_DEPENDENCIES = tests/mesh/programs.stamp
endif

TESTS += tests/mesh/test_mesh_run.sh

# The cost of the executors' isolation (benchmarks/mesh_bench.c); built with
# `make`, never run by `make check`.
noinst_PROGRAMS += benchmarks/mesh_bench
benchmarks_mesh_bench_SOURCES = benchmarks/mesh_bench.c
benchmarks_mesh_bench_CPPFLAGS = $(MESH_CPPFLAGS) \
	-DMESH_BENCH_PROGRAMS='"$(abs_top_builddir)/tests/mesh/programs"' \
	-DMESH_BENCH_SRCDIR='"$(abs_top_srcdir)"' \
	-DMESH_BENCH_WAT2WASM='"$(WAT2WASM)"'
benchmarks_mesh_bench_CFLAGS = $(RIG_CFLAGS)
benchmarks_mesh_bench_LDADD = src/librig.la
benchmarks_mesh_bench_LDFLAGS = $(RIG_LDFLAGS)
EXTRA_benchmarks_mesh_bench_DEPENDENCIES = tests/mesh/programs.stamp
EXTRA_DIST += benchmarks/mesh_kernel.wat

endif
endif
endif
