# SPDX-License-Identifier: BSD-3-Clause
# src/rail: the transports of rails, one folder each behind one ops table
# (base/transport.h), on a shared base (base/: the pair protocol, the
# carrier's start, the job's window) and a registry (transports.c).  Built
# only with MPI (RIG_RAILS), which configure ties to UCX and hwloc;
# libcuda is dlopen'd, so only CUDA's headers are used.
if RIG_RAILS
noinst_LTLIBRARIES += src/rail/librail.la
src_rail_librail_la_SOURCES = \
	src/rail/transports.h \
	src/rail/transports.c \
	src/rail/base/transport.h \
	src/rail/base/handshake.h \
	src/rail/base/handshake.c \
	src/rail/base/carrier.h \
	src/rail/base/carrier.c \
	src/rail/base/window.h \
	src/rail/base/window.c \
	src/rail/base/finalize.h \
	src/rail/base/finalize.c \
	src/rail/base/failure.h \
	src/rail/base/failure.c \
	src/rail/base/liveness.h \
	src/rail/base/liveness.c \
	src/rail/ucx/ucx_internal.h \
	src/rail/ucx/transport.c \
	src/rail/ucx/progress.c \
	src/rail/ucx/end.c \
	src/rail/ucx/carrier.c \
	src/rail/ucx/lane.c \
	src/rail/ucx/failure.c \
	src/rail/ucx/memory.c \
	src/rail/ucx/cuda.c \
	src/rail/mpi/mpi_internal.h \
	src/rail/mpi/transport.c \
	src/rail/mpi/end.c \
	src/rail/mpi/carrier.c \
	src/rail/mpi/failure.c
src_rail_librail_la_CPPFLAGS = $(RIG_ABI_CPPFLAGS) \
	$(MPI_CFLAGS) $(UCX_CFLAGS) $(HWLOC_CFLAGS) $(CUDA_CFLAGS)
src_rail_librail_la_CFLAGS = $(RIG_CFLAGS)
src_librig_la_LIBADD += src/rail/librail.la $(UCX_LIBS) $(HWLOC_LIBS) \
	$(MPI_LIBS)
endif
