# SPDX-License-Identifier: BSD-3-Clause
# src/job: jobs on an MPI communicator and rails between ranks (rig/job.h),
# over whichever transport the registry names; no UCX or hwloc here.
if RIG_RAILS
noinst_LTLIBRARIES += src/job/libjob.la
src_job_libjob_la_SOURCES = src/job/job.c src/job/job_internal.h \
	src/job/together.c
src_job_libjob_la_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS)
src_job_libjob_la_CFLAGS = $(RIG_CFLAGS)
src_librig_la_LIBADD += src/job/libjob.la
riginclude_HEADERS += include/rig/job.h
endif
