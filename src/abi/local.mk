# SPDX-License-Identifier: BSD-3-Clause
# The ABI layer: libc only.  Compiled with RIG_ABI_CPPFLAGS alone -- no MPI,
# UCX or hwloc include path -- so the build proves the dependency rule.
noinst_LTLIBRARIES += src/abi/libabi.la
src_abi_libabi_la_SOURCES = \
	src/abi/util_internal.h \
	src/abi/abi_internal.h \
	src/abi/wait_internal.h \
	src/abi/util.c \
	src/abi/transfers.c \
	src/abi/counts.c \
	src/abi/end.c \
	src/abi/wait.c \
	src/abi/proxy.c \
	src/abi/loopback.c \
	src/abi/settings.c
src_abi_libabi_la_CPPFLAGS = $(RIG_ABI_CPPFLAGS)
src_abi_libabi_la_CFLAGS = $(RIG_CFLAGS)
src_librig_la_LIBADD += src/abi/libabi.la
riginclude_HEADERS += include/rig/api.h \
	include/rig/remote_abi.h \
	include/rig/settings.h \
	include/rig/wait.h
