#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The MPIRUN that mhtest.sh gives mpitest.sh: Open MPI's mpirun with the
# simulated hosts' options (one per line in $RIG_MH_ARGS) before mpitest's
# own, and, when $RIG_MH_OSC is set, mpitest's `--mca osc X` replaced by
# `--mca osc $RIG_MH_OSC` ("system": no osc option at all).  Open MPI
# refuses a parameter given twice, hence the replacement.
set -u
real=${RIG_MH_MPIRUN:?mpirun.sh: RIG_MH_MPIRUN is not set}
mapfile -t extra <"${RIG_MH_ARGS:?mpirun.sh: RIG_MH_ARGS is not set}"
osc=${RIG_MH_OSC:-}
args=()
while [ $# -gt 0 ]; do
    if [ -n "$osc" ] && [ "$1" = --mca ] && [ "${2:-}" = osc ] && [ $# -ge 3 ]; then
        shift 3
        continue
    fi
    args+=("$1")
    shift
done
if [ -n "$osc" ] && [ "$osc" != system ]; then
    args=(--mca osc "$osc" "${args[@]}")
fi
exec "$real" "${extra[@]}" "${args[@]}"
