# SPDX-License-Identifier: BSD-3-Clause
# examples: small programs built by `make`.  provider/: the worked rail
# provider of rig/provider.h, built against the public headers only and
# run by `make check` (it checks its own outcomes).
noinst_PROGRAMS += examples/provider/thread_provider
examples_provider_thread_provider_SOURCES = \
	examples/provider/thread_provider.c
examples_provider_thread_provider_CPPFLAGS = -I$(top_srcdir)/include
examples_provider_thread_provider_CFLAGS = $(RIG_CFLAGS)
examples_provider_thread_provider_LDADD = src/librig.la
examples_provider_thread_provider_LDFLAGS = $(RIG_LDFLAGS)
TESTS += examples/provider/thread_provider
riginclude_HEADERS += include/rig/provider.h
