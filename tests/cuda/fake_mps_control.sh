#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A stand-in nvidia-cuda-mps-control for tests/cuda/test_cuda_mps.sh: it
# plays the daemon's start (-d) and its "quit" and records both, with the
# folders it was given and the workers still alive, in $RIG_FAKE_MPS_RECORD.
#   -d       "start pipe=<CUDA_MPS_PIPE_DIRECTORY> log=<..._LOG_DIRECTORY>";
#            makes <pipe>/control and <log>/control.log as the daemon does;
#            exits 1 when $RIG_FAKE_MPS_FAIL is set.
#   (stdin)  "<command> pipe=<...> workers=<n>": n counts the processes
#            named rig-cuda-worker whose parent is this program's parent
#            (the backend's process), zombies included.
set -u
rec=${RIG_FAKE_MPS_RECORD:?RIG_FAKE_MPS_RECORD is not set}
pipe=${CUDA_MPS_PIPE_DIRECTORY:-}
log=${CUDA_MPS_LOG_DIRECTORY:-}
case "${1:-}" in
-d)
    if [ -n "${RIG_FAKE_MPS_FAIL:-}" ]; then
        echo "start-refused pipe=$pipe log=$log" >>"$rec"
        exit 1
    fi
    if [ ! -d "$pipe" ] || [ ! -d "$log" ]; then
        echo "start-bad-folders pipe=$pipe log=$log" >>"$rec"
        exit 1
    fi
    echo "start pipe=$pipe log=$log" >>"$rec"
    : >"$pipe/control"
    echo "fake MPS control daemon started" >"$log/control.log"
    exit 0
    ;;
"")
    read -r cmd || cmd=
    n=0
    for f in /proc/[0-9]*/stat; do
        s=$(cat "$f" 2>/dev/null) || continue
        case "$s" in
        *"(rig-cuda-worker) "*) ;;
        *) continue ;;
        esac
        ppid=$(echo "${s##*) }" | cut -d' ' -f2)
        [ "$ppid" = "$PPID" ] && n=$((n + 1))
    done
    echo "$cmd pipe=$pipe workers=$n" >>"$rec"
    exit 0
    ;;
*)
    echo "fake nvidia-cuda-mps-control: unexpected arguments: $*" >&2
    exit 2
    ;;
esac
