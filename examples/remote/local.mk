# SPDX-License-Identifier: BSD-3-Clause
# examples/remote: the stencil over the controller's rails (stencil.c, the
# controller and the MPI baseline; stencil_node.c, the native program;
# stencil_wasm.c, the wasm module) and its catalog, examples/remote/
# programs/{stencil,stencil_wasm}.  Needs the remote layer.
STENCIL_FILES = examples/remote/stencil_kernel.h examples/remote/latency.json \
	examples/remote/stencil.json examples/remote/stencil_wasm.json \
	examples/remote/stencil_wasm.c examples/remote/stencil.wasm \
	examples/remote/README.md examples/remote/ends_bench_wasm.c
EXTRA_DIST += $(STENCIL_FILES)

if RIG_RAILS
if RIG_HAVE_JANSSON
if RIG_HAVE_XXHASH
if RIG_HAVE_HWLOC

# Every version of the stencil must round alike: no fused multiply-adds.
STENCIL_CFLAGS = $(RIG_CFLAGS) -ffp-contract=off

noinst_PROGRAMS += examples/remote/stencil examples/remote/stencil_node \
	examples/remote/rail_latency examples/remote/latency_node
examples_remote_stencil_SOURCES = examples/remote/stencil.c \
	examples/remote/stencil_kernel.h
examples_remote_stencil_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS) \
	-DSTENCIL_PROGRAMS='"$(abs_top_builddir)/examples/remote/programs"'
examples_remote_stencil_CFLAGS = $(STENCIL_CFLAGS)
examples_remote_stencil_LDADD = src/librig.la $(MPI_LIBS)
examples_remote_stencil_LDFLAGS = $(RIG_LDFLAGS)
EXTRA_examples_remote_stencil_DEPENDENCIES = examples/remote/programs.stamp

examples_remote_stencil_node_SOURCES = examples/remote/stencil_node.c \
	examples/remote/stencil_kernel.h
examples_remote_stencil_node_CPPFLAGS = $(MESH_CPPFLAGS)
examples_remote_stencil_node_CFLAGS = $(STENCIL_CFLAGS)
examples_remote_stencil_node_LDADD = src/mesh/libmesh_worker.la
examples_remote_stencil_node_LDFLAGS = $(RIG_LDFLAGS)

# rail_latency: program-driven against host-driven (a benchmark, never run
# by make check).
examples_remote_rail_latency_SOURCES = examples/remote/rail_latency.c
examples_remote_rail_latency_CPPFLAGS = $(examples_remote_stencil_CPPFLAGS)
examples_remote_rail_latency_CFLAGS = $(RIG_CFLAGS)
examples_remote_rail_latency_LDADD = src/librig.la $(MPI_LIBS)
examples_remote_rail_latency_LDFLAGS = $(RIG_LDFLAGS)
EXTRA_examples_remote_rail_latency_DEPENDENCIES = \
	examples/remote/programs.stamp
examples_remote_latency_node_SOURCES = examples/remote/latency_node.c
examples_remote_latency_node_CPPFLAGS = $(MESH_CPPFLAGS)
examples_remote_latency_node_CFLAGS = $(RIG_CFLAGS)
examples_remote_latency_node_LDADD = src/mesh/libmesh_worker.la
examples_remote_latency_node_LDFLAGS = $(RIG_LDFLAGS)

# The wasm module: built from stencil_wasm.c where a wasm32 C compiler is,
# else the one kept in the source tree (refresh it with
# `make examples/remote/stencil.wasm-update` after changing the source).
STENCIL_WASM_FLAGS = --target=wasm32 -O2 -mbulk-memory -ffp-contract=off \
	-nostdlib -Wall -Wextra -Wl,--no-entry -Wl,--allow-undefined
if RIG_HAVE_WASM_CC
examples/remote/stencil_built.wasm: $(srcdir)/examples/remote/stencil_wasm.c \
		$(srcdir)/examples/remote/stencil_kernel.h
	$(AM_V_GEN)$(MKDIR_P) examples/remote && \
	$(WASM_CC) $(STENCIL_WASM_FLAGS) -o $@ \
	  $(srcdir)/examples/remote/stencil_wasm.c
examples/remote/stencil.wasm-update: examples/remote/stencil_built.wasm
	cp examples/remote/stencil_built.wasm $(srcdir)/examples/remote/stencil.wasm

# ends_bench: the wasm imports against stores in place (a benchmark; its
# module needs the wasm32 compiler, so it is built only where one is).
if RIG_HAVE_WABT
noinst_PROGRAMS += examples/remote/ends_bench
examples_remote_ends_bench_SOURCES = examples/remote/ends_bench.c
examples_remote_ends_bench_CPPFLAGS = $(MESH_CPPFLAGS) \
	-DENDS_BENCH_PROGRAMS='"$(abs_top_builddir)/examples/remote/programs"'
examples_remote_ends_bench_CFLAGS = $(RIG_CFLAGS)
examples_remote_ends_bench_LDADD = src/librig.la
examples_remote_ends_bench_LDFLAGS = $(RIG_LDFLAGS)
EXTRA_examples_remote_ends_bench_DEPENDENCIES = examples/remote/ebench.stamp
examples/remote/ebench.stamp: $(srcdir)/examples/remote/ends_bench_wasm.c
	$(AM_V_GEN)$(MKDIR_P) examples/remote/programs && \
	for e in none copy8 store8 copy4k store4k; do \
	  d=examples/remote/programs/ebench_$$e && $(MKDIR_P) $$d && \
	  printf '{"name": "ebench_%s", "abi": 1, "backends": ["wasm"], "entry": "%s", "wasm": "ends_bench.wasm", "nodes": 1, "writes": 1}\n' \
	    $$e $$e > $$d/manifest.json && \
	  $(WASM_CC) $(STENCIL_WASM_FLAGS) -o $$d/ends_bench.wasm \
	    $(srcdir)/examples/remote/ends_bench_wasm.c || exit 1; \
	done && touch $@
CLEANFILES += examples/remote/ebench.stamp
endif
else
examples/remote/stencil_built.wasm: $(srcdir)/examples/remote/stencil.wasm
	$(AM_V_GEN)$(MKDIR_P) examples/remote && cp $< $@
endif
CLEANFILES += examples/remote/stencil_built.wasm

examples/remote/programs.stamp: examples/remote/stencil_node$(EXEEXT) \
		examples/remote/latency_node$(EXEEXT) \
		$(srcdir)/examples/remote/latency.json \
		examples/remote/stencil_built.wasm src/mesh/mesh_target$(EXEEXT) \
		$(srcdir)/examples/remote/stencil.json \
		$(srcdir)/examples/remote/stencil_wasm.json \
		$(srcdir)/tests/mesh/make_catalog.sh
	$(AM_V_GEN)triple=`src/mesh/mesh_target` && \
	$(SHELL) $(srcdir)/tests/mesh/make_catalog.sh examples/remote/programs \
	  $(srcdir)/examples/remote/stencil.json "$$triple" \
	  examples/remote/stencil_node$(EXEEXT) stencil_node && \
	$(SHELL) $(srcdir)/tests/mesh/make_catalog.sh examples/remote/programs \
	  $(srcdir)/examples/remote/latency.json "$$triple" \
	  examples/remote/latency_node$(EXEEXT) latency_node && \
	$(SHELL) $(srcdir)/tests/mesh/make_catalog.sh examples/remote/programs \
	  $(srcdir)/examples/remote/stencil_wasm.json "$$triple" && \
	cp examples/remote/stencil_built.wasm \
	  examples/remote/programs/stencil_wasm/stencil.wasm && touch $@
CLEANFILES += examples/remote/programs.stamp \
	examples/remote/programs/*/manifest.json \
	examples/remote/programs/*/*.wasm \
	examples/remote/programs/*/*/*

endif
endif
endif
endif
