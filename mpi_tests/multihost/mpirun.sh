#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The MPIRUN that mhtest.sh gives mpitest.sh: Open MPI's mpirun with the
# simulated hosts' options (one per line in $RIG_MH_ARGS) before mpitest's
# own, and `--mca osc $RIG_MH_OSC` when that is set (a .mh file's osc=).
set -u
real=${RIG_MH_MPIRUN:?mpirun.sh: RIG_MH_MPIRUN is not set}
mapfile -t extra <"${RIG_MH_ARGS:?mpirun.sh: RIG_MH_ARGS is not set}"
osc=${RIG_MH_OSC:-}
if [ -n "$osc" ]; then
    extra+=(--mca osc "$osc")
fi
exec "$real" "${extra[@]}" "$@"
