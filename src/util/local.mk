# SPDX-License-Identifier: BSD-3-Clause
# src/util: errors, logging, settings, clocks and backoff, below every other
# layer; libc and POSIX threads only (the layering check proves it).
noinst_LTLIBRARIES += src/util/libutil.la
src_util_libutil_la_SOURCES = \
	src/util/util_internal.h \
	src/util/util.c
src_util_libutil_la_CPPFLAGS = $(RIG_ABI_CPPFLAGS)
src_util_libutil_la_CFLAGS = $(RIG_CFLAGS)
