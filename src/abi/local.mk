# SPDX-License-Identifier: BSD-3-Clause
# The ABI layer: libc and POSIX threads only (src/check_layers.sh proves it
# from the objects' symbols).
noinst_LTLIBRARIES += src/abi/libabi.la
src_abi_libabi_la_SOURCES = \
	src/abi/abi_internal.h \
	src/abi/wait_internal.h \
	src/abi/transfers.c \
	src/abi/counts.c \
	src/abi/end.c \
	src/abi/wait.c \
	src/abi/proxy.c \
	src/abi/loopback.c \
	src/abi/settings.c
src_abi_libabi_la_CPPFLAGS = $(RIG_ABI_CPPFLAGS)
src_abi_libabi_la_CFLAGS = $(RIG_CFLAGS)
# The helpers travel with the ABI: whatever links libabi.la gets them.
src_abi_libabi_la_LIBADD = src/util/libutil.la
src_librig_la_LIBADD += src/abi/libabi.la
riginclude_HEADERS += include/rig/api.h \
	include/rig/remote_abi.h \
	include/rig/settings.h \
	include/rig/wait.h
