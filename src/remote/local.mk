# SPDX-License-Identifier: BSD-3-Clause
# src/remote: rank 0 as the controller of the job's machines (rig/remote.h),
# the rig_agent program, and mesh_run's controller mode.  Needs the rails
# (MPI) and the executors layer (jansson, xxHash, hwloc).
if RIG_RAILS
if RIG_HAVE_JANSSON
if RIG_HAVE_XXHASH
if RIG_HAVE_HWLOC

riginclude_HEADERS += include/rig/remote.h
noinst_HEADERS += src/remote/remote_internal.h

REMOTE_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS) \
	$(HWLOC_CFLAGS)

noinst_LTLIBRARIES += src/remote/libremote.la
src_remote_libremote_la_SOURCES = \
	src/remote/agent.c \
	src/remote/controller.c \
	src/remote/machine.c \
	src/remote/open.c \
	src/remote/rails.c \
	src/remote/records.c \
	src/remote/wait.c
src_remote_libremote_la_CPPFLAGS = $(REMOTE_CPPFLAGS)
src_remote_libremote_la_CFLAGS = $(RIG_CFLAGS)
src_librig_la_LIBADD += src/remote/libremote.la

bin_PROGRAMS += tools/rig_agent
tools_rig_agent_SOURCES = tools/rig_agent.c
tools_rig_agent_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS)
tools_rig_agent_CFLAGS = $(RIG_CFLAGS)
tools_rig_agent_LDADD = src/librig.la $(MPI_LIBS)
tools_rig_agent_LDFLAGS = $(RIG_LDFLAGS)

# The README's controller, built so that it stays true.
noinst_PROGRAMS += examples/remote/controller
examples_remote_controller_SOURCES = examples/remote/controller.c
examples_remote_controller_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(MPI_CFLAGS)
examples_remote_controller_CFLAGS = $(RIG_CFLAGS)
examples_remote_controller_LDADD = src/librig.la $(MPI_LIBS)
examples_remote_controller_LDFLAGS = $(RIG_LDFLAGS)

# mesh_run (built by src/mesh/local.mk) runs through the controller when
# started by mpirun on more than one rank.
tools_mesh_run_CPPFLAGS += $(MPI_CFLAGS) -DRIG_MESH_RUN_MPI
tools_mesh_run_LDADD += $(MPI_LIBS)

endif
endif
endif
endif
