# SPDX-License-Identifier: BSD-3-Clause
# src/mesh/wasm: the wasm backend (wasm2c modules on lease lanes), its
# examples and tests.  Built only with wabt (wasm2c) and the executors
# layer's dependencies; without wabt the table's stub answers unsupported:.

WASM_EXAMPLES_SRC = \
	examples/wasm/counter/manifest.json \
	examples/wasm/counter/counter.wat \
	examples/wasm/counter/counter.wasm \
	examples/wasm/trap/manifest.json \
	examples/wasm/trap/trap.wat \
	examples/wasm/trap/trap.wasm
WASM_TEST_WAT = \
	tests/wasm/programs/iface.wat \
	tests/wasm/programs/stubborn.wat \
	tests/wasm/programs/spin_mem.wat \
	tests/wasm/programs/never.wat \
	tests/wasm/programs/alltrap.wat \
	tests/wasm/programs/scratch_oob.wat \
	tests/wasm/programs/bad_import.wat \
	tests/wasm/programs/no_entry.wat \
	tests/wasm/programs/quick.wat \
	tests/wasm/programs/recurse.wat \
	tests/wasm/programs/flash.wat \
	tests/wasm/programs/ends.wat

EXTRA_DIST += \
	$(WASM_EXAMPLES_SRC) \
	$(WASM_TEST_WAT) \
	tests/wasm/test_examples.sh \
	tests/wasm/test_mesh_run.sh \
	tests/wasm/hang_cc.sh \
	tests/fuzz/fuzz_wasm.c \
	tests/fuzz/corpus/wasm

meshinclude_HEADERS += include/mesh/wasm.h

if RIG_HAVE_WABT
if RIG_HAVE_JANSSON
if RIG_HAVE_XXHASH
if RIG_HAVE_HWLOC

WASM_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(HWLOC_CFLAGS) $(JANSSON_CFLAGS) \
	$(XXHASH_CFLAGS) -I$(top_srcdir)/src

noinst_HEADERS += src/mesh/wasm/wasm_internal.h
noinst_LTLIBRARIES += src/mesh/wasm/libmeshwasm.la
src_mesh_wasm_libmeshwasm_la_SOURCES = \
	src/mesh/wasm/wasm_backend.c \
	src/mesh/wasm/wasm_compile.c \
	src/mesh/wasm/wasm_glue.c \
	src/mesh/wasm/wasm_lanes.c \
	src/mesh/wasm/wasm_module.c
src_mesh_wasm_libmeshwasm_la_CPPFLAGS = $(WASM_CPPFLAGS)
src_mesh_wasm_libmeshwasm_la_CFLAGS = $(RIG_CFLAGS)
src_mesh_wasm_libmeshwasm_la_LIBADD = -ldl
# wasm_backend.c's strong mesh_wasm_open and mesh_wasm_built replace the
# weak stubs of src/mesh/table.c.
src_librig_la_LIBADD += src/mesh/wasm/libmeshwasm.la

# Example programs: the .wasm is committed; the build assembles the .wat
# again and tests/wasm/test_examples.sh checks both agree.
WASM_EXAMPLES_BUILT = examples/wasm/counter/counter.wasm.built \
	examples/wasm/trap/trap.wasm.built
check_DATA += $(WASM_EXAMPLES_BUILT)
examples/wasm/counter/counter.wasm.built: \
		$(srcdir)/examples/wasm/counter/counter.wat
	$(AM_V_GEN)$(MKDIR_P) examples/wasm/counter && \
	$(WAT2WASM) $(srcdir)/examples/wasm/counter/counter.wat -o $@
examples/wasm/trap/trap.wasm.built: $(srcdir)/examples/wasm/trap/trap.wat
	$(AM_V_GEN)$(MKDIR_P) examples/wasm/trap && \
	$(WAT2WASM) $(srcdir)/examples/wasm/trap/trap.wat -o $@
# The module cache the tests point RIG_WASM_CACHE at (a glob: rm expands it).
CLEANFILES += $(WASM_EXAMPLES_BUILT) tests/wasm/cache.d/*.so

if RIG_HAVE_CUNIT
WASM_TEST_CPPFLAGS = $(WASM_CPPFLAGS) $(CUNIT_CFLAGS) \
	-DWASM_TEST_SRCDIR='"$(abs_top_srcdir)"' \
	-DWASM_TEST_WAT2WASM='"$(WAT2WASM)"' -I$(top_srcdir)/tests
# Linked statically (librig hides the internal helpers the tests use).
WASM_TEST_LDADD = src/mesh/wasm/libmeshwasm.la src/mesh/libmesh.la \
	src/abi/libabi.la $(JANSSON_LIBS) $(XXHASH_LIBS) $(HWLOC_LIBS) \
	$(CUNIT_LIBS) -ldl
check_PROGRAMS += tests/wasm/test_wasm tests/wasm/test_wasm_faults \
	tests/wasm/test_wasm_halt tests/wasm/test_wasm_ends
TESTS += tests/wasm/test_wasm tests/wasm/test_wasm_faults \
	tests/wasm/test_wasm_ends \
	tests/wasm/test_wasm_halt tests/wasm/test_examples.sh \
	tests/wasm/test_mesh_run.sh
# Not test_wasm_faults and test_wasm_halt: valgrind reports their faults.
UNIT_TESTS += tests/wasm/test_wasm
tests_wasm_test_wasm_SOURCES = tests/wasm/test_wasm.c \
	tests/wasm/wasm_test_util.h tests/test_util.h
tests_wasm_test_wasm_CPPFLAGS = $(WASM_TEST_CPPFLAGS)
tests_wasm_test_wasm_CFLAGS = $(RIG_CFLAGS)
tests_wasm_test_wasm_LDADD = $(WASM_TEST_LDADD)
tests_wasm_test_wasm_LDFLAGS = $(RIG_LDFLAGS)
tests_wasm_test_wasm_faults_SOURCES = tests/wasm/test_wasm_faults.c \
	tests/wasm/wasm_test_util.h tests/test_util.h
tests_wasm_test_wasm_faults_CPPFLAGS = $(WASM_TEST_CPPFLAGS)
tests_wasm_test_wasm_faults_CFLAGS = $(RIG_CFLAGS)
tests_wasm_test_wasm_faults_LDADD = $(WASM_TEST_LDADD)
tests_wasm_test_wasm_faults_LDFLAGS = $(RIG_LDFLAGS)
tests_wasm_test_wasm_ends_SOURCES = tests/wasm/test_wasm_ends.c \
	tests/wasm/wasm_test_util.h tests/test_util.h
tests_wasm_test_wasm_ends_CPPFLAGS = $(WASM_TEST_CPPFLAGS)
tests_wasm_test_wasm_ends_CFLAGS = $(RIG_CFLAGS)
tests_wasm_test_wasm_ends_LDADD = $(WASM_TEST_LDADD)
tests_wasm_test_wasm_ends_LDFLAGS = $(RIG_LDFLAGS)
tests_wasm_test_wasm_halt_SOURCES = tests/wasm/test_wasm_halt.c \
	tests/wasm/wasm_test_util.h tests/test_util.h
tests_wasm_test_wasm_halt_CPPFLAGS = $(WASM_TEST_CPPFLAGS)
tests_wasm_test_wasm_halt_CFLAGS = $(RIG_CFLAGS)
tests_wasm_test_wasm_halt_LDADD = $(WASM_TEST_LDADD)
tests_wasm_test_wasm_halt_LDFLAGS = $(RIG_LDFLAGS)
# The host's end ends its compiles (a subreaper; hosts die on purpose).
check_PROGRAMS += tests/wasm/test_wasm_exit
TESTS += tests/wasm/test_wasm_exit
tests_wasm_test_wasm_exit_SOURCES = tests/wasm/test_wasm_exit.c \
	tests/test_util.h
tests_wasm_test_wasm_exit_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(CUNIT_CFLAGS) \
	-DWASM_TEST_SRCDIR='"$(abs_top_srcdir)"'
tests_wasm_test_wasm_exit_CFLAGS = $(RIG_CFLAGS)
tests_wasm_test_wasm_exit_LDADD = src/librig.la $(CUNIT_LIBS)
tests_wasm_test_wasm_exit_LDFLAGS = $(RIG_LDFLAGS)
endif

endif
endif
endif
endif
