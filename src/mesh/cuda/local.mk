# SPDX-License-Identifier: BSD-3-Clause
# src/mesh/cuda: the CUDA backend (Driver API and nvJitLink, both dlopen'd),
# its tests and example programs.  Built wherever CUDA's headers are; the
# GPU tests skip (exit 77) on machines without a GPU.
meshinclude_HEADERS += include/mesh/cuda.h
noinst_HEADERS += src/mesh/cuda/cuda_internal.h \
	src/mesh/cuda/cuda_mps_internal.h src/mesh/cuda/cuda_backend_internal.h

# The example programs: CUDA C, with their PTX committed so that machines
# without nvcc run them too.  The build assembles a catalog of them in the
# build tree (what the GPU tests load): PTX from nvcc -ptx where nvcc
# exists (compute_75, the oldest arch CUDA 13 targets), else the committed
# PTX.  `make cuda-ptx` refreshes the committed PTX with nvcc.
CUDA_EXAMPLES = counter pattern rails
CUDA_EXAMPLE_FILES = examples/cuda/mesh_node.cuh \
	examples/cuda/counter/manifest.json examples/cuda/counter/counter.cu \
	examples/cuda/counter/counter.ptx \
	examples/cuda/pattern/manifest.json examples/cuda/pattern/pattern.cu \
	examples/cuda/pattern/pattern.ptx \
	examples/cuda/rails/manifest.json examples/cuda/rails/rails.cu \
	examples/cuda/rails/rails.ptx
EXTRA_DIST += $(CUDA_EXAMPLE_FILES) \
	tests/cuda/data/greedy/manifest.json tests/cuda/data/greedy/greedy.cu \
	tests/cuda/data/greedy/greedy.ptx \
	tests/cuda/data/fault/manifest.json tests/cuda/data/fault/fault.cu \
	tests/cuda/data/fault/fault.ptx \
	tests/cuda/data/broken/manifest.json tests/cuda/data/broken/broken.ptx \
	mpi_tests/gpu/device-check.sh
CUDA_CATALOG = examples/cuda/catalog
CLEANFILES += $(CUDA_CATALOG)/.stamp $(CUDA_CATALOG)/*/manifest.json \
	$(CUDA_CATALOG)/*/*.ptx
# nvcc: on PATH, else in the toolkit configure found (RIG_CUDA_DIR).
CUDA_FIND_NVCC = nvcc=`command -v nvcc 2>/dev/null || true`; \
	if test -z "$$nvcc"; then \
	  d=`sed -n 's/^\#define RIG_CUDA_DIR "\(.*\)"$$/\1/p' \
	    $(top_builddir)/config.h 2>/dev/null`; \
	  if test -n "$$d" && test -x "$$d/bin/nvcc"; then nvcc="$$d/bin/nvcc"; \
	  fi; \
	fi
$(CUDA_CATALOG)/.stamp: $(CUDA_EXAMPLE_FILES)
	@set -e; $(CUDA_FIND_NVCC); \
	for p in $(CUDA_EXAMPLES); do \
	  s=$(top_srcdir)/examples/cuda/$$p; d=$(CUDA_CATALOG)/$$p; \
	  $(MKDIR_P) $$d; cp $$s/manifest.json $$d/manifest.json; \
	  if test -n "$$nvcc"; then \
	    echo "  NVCC     $$d/$$p.ptx"; \
	    $$nvcc -ptx -arch=compute_75 -o $$d/$$p.ptx $$s/$$p.cu; \
	  else \
	    echo "  CP       $$d/$$p.ptx (no nvcc: the committed PTX)"; \
	    cp $$s/$$p.ptx $$d/$$p.ptx; \
	  fi; \
	done; \
	touch $@
cuda-ptx:
	@set -e; $(CUDA_FIND_NVCC); \
	if test -z "$$nvcc"; then echo "cuda-ptx: no nvcc found"; exit 1; fi; \
	for p in $(CUDA_EXAMPLES); do \
	  d=$(abs_top_srcdir)/examples/cuda/$$p; echo "  NVCC     $$d/$$p.ptx"; \
	  $$nvcc -ptx -arch=compute_75 -o $$d/$$p.ptx $$d/$$p.cu; \
	done; \
	for t in greedy fault; do \
	  d=$(abs_top_srcdir)/tests/cuda/data/$$t; echo "  NVCC     $$d/$$t.ptx"; \
	  $$nvcc -ptx -arch=compute_75 -o $$d/$$t.ptx $$d/$$t.cu; \
	done
.PHONY: cuda-ptx

# The backend builds on the executors layer (libmesh): same conditions.
if RIG_HAVE_CUDA
if RIG_HAVE_JANSSON
if RIG_HAVE_XXHASH
if RIG_HAVE_HWLOC
noinst_LTLIBRARIES += src/mesh/cuda/libmeshcuda.la
src_mesh_cuda_libmeshcuda_la_SOURCES = src/mesh/cuda/cuda_lib.c \
	src/mesh/cuda/cuda_compile.c src/mesh/cuda/cuda_image.c \
	src/mesh/cuda/cuda_mps_programs.c src/mesh/cuda/cuda_mps_daemon.c \
	src/mesh/cuda/cuda_mps.c src/mesh/cuda/cuda_backend.c \
	src/mesh/cuda/cuda_launch.c src/mesh/cuda/cuda_occupancy.c \
	src/mesh/cuda/cuda_ends.c
src_mesh_cuda_libmeshcuda_la_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(CUDA_CFLAGS) \
	$(HWLOC_CFLAGS) $(JANSSON_CFLAGS) $(XXHASH_CFLAGS) -I$(top_srcdir)/src \
	-DRIG_PKGLIBEXECDIR='"$(pkglibexecdir)"'
src_mesh_cuda_libmeshcuda_la_CFLAGS = $(RIG_CFLAGS)
src_mesh_cuda_libmeshcuda_la_LIBADD = -ldl
EXTRA_src_mesh_cuda_libmeshcuda_la_DEPENDENCIES = $(CUDA_CATALOG)/.stamp
# Its strong mesh_cuda_open/mesh_cuda_built replace the table's weak stubs.
src_librig_la_LIBADD += src/mesh/cuda/libmeshcuda.la

# MPS isolation's worker: one process per program (cuda_mps.c starts it;
# RIG_MESH_CUDA_WORKER names the build tree's for the tests).  libcuda is
# dlopen'd as in the backend; no other library of rig but the ABI's helpers.
pkglibexec_PROGRAMS = src/mesh/cuda/rig-cuda-worker
src_mesh_cuda_rig_cuda_worker_SOURCES = src/mesh/cuda/cuda_worker.c \
	src/mesh/cuda/cuda_lib.c src/mesh/cuda/cuda_image.c
src_mesh_cuda_rig_cuda_worker_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(CUDA_CFLAGS) \
	-I$(top_srcdir)/src
src_mesh_cuda_rig_cuda_worker_CFLAGS = $(RIG_CFLAGS)
src_mesh_cuda_rig_cuda_worker_LDADD = src/abi/libabi.la -ldl
src_mesh_cuda_rig_cuda_worker_LDFLAGS = $(RIG_LDFLAGS)

# Unit tests: no GPU needed (the GPU ones skip with their reason).
CUDA_TEST_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(CUDA_CFLAGS) $(CUNIT_CFLAGS) \
	-I$(top_srcdir)/src -I$(top_srcdir)/tests \
	-DCUDA_EXAMPLES_DIR='"$(abs_top_srcdir)/examples/cuda"' \
	-DCUDA_CATALOG_DIR='"$(abs_top_builddir)/$(CUDA_CATALOG)"' \
	-DCUDA_TEST_DATA='"$(abs_top_srcdir)/tests/cuda/data"'
# Linked statically (librig hides the internal helpers the backend uses):
# the backend's strong mesh_cuda_* replace the table's weak stubs.
CUDA_TEST_LDADD = src/mesh/cuda/libmeshcuda.la src/mesh/libmesh.la \
	src/abi/libabi.la $(JANSSON_LIBS) $(XXHASH_LIBS) $(HWLOC_LIBS) \
	$(CUNIT_LIBS) -ldl
check_PROGRAMS += tests/cuda/test_cuda_compile
tests_cuda_test_cuda_compile_SOURCES = tests/cuda/test_cuda_compile.c
tests_cuda_test_cuda_compile_CPPFLAGS = $(CUDA_TEST_CPPFLAGS)
tests_cuda_test_cuda_compile_CFLAGS = $(RIG_CFLAGS)
tests_cuda_test_cuda_compile_LDADD = $(CUDA_TEST_LDADD)
tests_cuda_test_cuda_compile_LDFLAGS = $(RIG_LDFLAGS)
TESTS += tests/cuda/test_cuda_compile
UNIT_TESTS += tests/cuda/test_cuda_compile

# The GPU tests: exit 77 with the reason where the backend does not open.
check_PROGRAMS += tests/cuda/test_cuda_gpu
tests_cuda_test_cuda_gpu_SOURCES = tests/cuda/test_cuda_gpu.c \
	tests/cuda/cuda_test_util.h
tests_cuda_test_cuda_gpu_CPPFLAGS = $(CUDA_TEST_CPPFLAGS)
tests_cuda_test_cuda_gpu_CFLAGS = $(RIG_CFLAGS)
tests_cuda_test_cuda_gpu_LDADD = $(CUDA_TEST_LDADD)
tests_cuda_test_cuda_gpu_LDFLAGS = $(RIG_LDFLAGS)
EXTRA_tests_cuda_test_cuda_gpu_DEPENDENCIES = $(CUDA_CATALOG)/.stamp
TESTS += tests/cuda/test_cuda_gpu

# The GPU tests once more, against a stand-in libcuda.so.1 that emulates
# the example kernels on host threads and plays the behaviours cuda.h and
# NVIDIA's documentation give a driver (implicit synchronization, hardware
# queues, sticky faults, registered memory, per-SM residency, compute
# modes): the backend's host side end to end on any machine.  Never what
# device-check.sh uses.
check_LTLIBRARIES += tests/cuda/libcudamock.la
tests_cuda_libcudamock_la_SOURCES = tests/cuda/mock_cuda.c
tests_cuda_libcudamock_la_CPPFLAGS = $(CUDA_CFLAGS)
tests_cuda_libcudamock_la_CFLAGS = $(RIG_CFLAGS)
tests_cuda_libcudamock_la_LDFLAGS = -module -avoid-version -shared \
	-rpath /nowhere $(PTHREAD_LIBS)
EXTRA_DIST += tests/cuda/test_cuda_mock.sh tests/cuda/test_mesh_run_cuda.sh \
	tests/cuda/mock_env.sh
TESTS += tests/cuda/test_cuda_mock.sh tests/cuda/test_mesh_run_cuda.sh

# MPS isolation against the stand-in driver and a fake control program
# (tests/cuda/fake_mps_control.sh): the backend's process, its workers and
# the daemon's start and quit.  On a GPU, device-check.sh runs the same
# test program against the real driver and MPS.
check_PROGRAMS += tests/cuda/test_cuda_mps
tests_cuda_test_cuda_mps_SOURCES = tests/cuda/test_cuda_mps.c \
	tests/cuda/cuda_test_util.h
tests_cuda_test_cuda_mps_CPPFLAGS = $(CUDA_TEST_CPPFLAGS)
tests_cuda_test_cuda_mps_CFLAGS = $(RIG_CFLAGS)
tests_cuda_test_cuda_mps_LDADD = $(CUDA_TEST_LDADD)
tests_cuda_test_cuda_mps_LDFLAGS = $(RIG_LDFLAGS)
EXTRA_tests_cuda_test_cuda_mps_DEPENDENCIES = $(CUDA_CATALOG)/.stamp \
	src/mesh/cuda/rig-cuda-worker$(EXEEXT)
EXTRA_DIST += tests/cuda/test_cuda_mps.sh tests/cuda/fake_mps_control.sh
TESTS += tests/cuda/test_cuda_mps.sh

# Rails' end registration with a CUDA context current beside the backend
# (mpi_tests/gpu/test_endreg on 2 ranks), against the stand-in driver and
# a preloaded stand-in for a UCX built with CUDA (tests/cuda/ucx_cuda_shim.c,
# which device-check.sh preloads on a GPU too).
if RIG_RAILS
check_PROGRAMS += mpi_tests/gpu/test_endreg
mpi_tests_gpu_test_endreg_SOURCES = mpi_tests/gpu/test_endreg.c
mpi_tests_gpu_test_endreg_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS) \
	$(CUDA_CFLAGS) -I$(top_srcdir)/mpi_tests \
	-DCUDA_CATALOG_DIR='"$(abs_top_builddir)/$(CUDA_CATALOG)"'
mpi_tests_gpu_test_endreg_CFLAGS = $(RIG_CFLAGS)
mpi_tests_gpu_test_endreg_LDADD = src/librig.la $(MPI_LIBS) -ldl
mpi_tests_gpu_test_endreg_LDFLAGS = $(RIG_LDFLAGS)
EXTRA_mpi_tests_gpu_test_endreg_DEPENDENCIES = $(CUDA_CATALOG)/.stamp
check_LTLIBRARIES += tests/cuda/libucxcudashim.la
tests_cuda_libucxcudashim_la_SOURCES = tests/cuda/ucx_cuda_shim.c
tests_cuda_libucxcudashim_la_CPPFLAGS = $(UCX_CFLAGS) $(CUDA_CFLAGS)
# No sanitizer: it is preloaded into mpirun and the shell tools too, which
# have no sanitizer runtime.
tests_cuda_libucxcudashim_la_CFLAGS = -std=gnu11 -D_GNU_SOURCE \
	-fvisibility=hidden $(RIG_WARN_CFLAGS) $(PTHREAD_CFLAGS)
tests_cuda_libucxcudashim_la_LDFLAGS = -module -avoid-version -shared \
	-rpath /nowhere $(PTHREAD_LIBS)
tests_cuda_libucxcudashim_la_LIBADD = -ldl
EXTRA_DIST += tests/cuda/test_cuda_endreg.sh
TESTS += tests/cuda/test_cuda_endreg.sh
endif
endif
endif
endif
endif
