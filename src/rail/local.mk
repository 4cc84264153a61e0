# SPDX-License-Identifier: BSD-3-Clause
# src/rail: the UCX transport of rails (end memory, fast path, progress
# engine).  Built only with MPI (RIG_RAILS), which configure ties to UCX and
# hwloc; libcuda is dlopen'd, so only CUDA's headers are used.
if RIG_RAILS
noinst_LTLIBRARIES += src/rail/librail.la
src_rail_librail_la_SOURCES = \
	src/rail/rail_internal.h \
	src/rail/ucx_internal.h \
	src/rail/ucx.c \
	src/rail/end.c \
	src/rail/failure.c \
	src/rail/memory.c \
	src/rail/finalize.c \
	src/rail/handshake.c \
	src/rail/cuda.c \
	src/rail/mpi_rma.h \
	src/rail/mpi_rma.c
src_rail_librail_la_CPPFLAGS = $(RIG_ABI_CPPFLAGS) -I$(top_srcdir)/src/util \
	$(MPI_CFLAGS) $(UCX_CFLAGS) $(HWLOC_CFLAGS) $(CUDA_CFLAGS)
src_rail_librail_la_CFLAGS = $(RIG_CFLAGS)
src_librig_la_LIBADD += src/rail/librail.la $(UCX_LIBS) $(HWLOC_LIBS) \
	$(MPI_LIBS)
endif
