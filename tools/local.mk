# SPDX-License-Identifier: BSD-3-Clause
# rig_info: what this build and machine offer.
bin_PROGRAMS += tools/rig_info
tools_rig_info_SOURCES = tools/rig_info.c
tools_rig_info_CPPFLAGS = $(RIG_ABI_CPPFLAGS) $(HWLOC_CFLAGS) $(MPI_CFLAGS)
tools_rig_info_CFLAGS = $(RIG_CFLAGS)
tools_rig_info_LDADD = src/librig.la $(HWLOC_LIBS) $(MPI_LIBS)
tools_rig_info_LDFLAGS = $(RIG_LDFLAGS)
