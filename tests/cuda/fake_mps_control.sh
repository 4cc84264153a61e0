#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A stand-in nvidia-cuda-mps-control for tests/cuda/test_cuda_mps.sh: it
# plays the daemon's start (-d) and its "quit" and records both, with the
# folders it was given and the workers still alive, in $RIG_FAKE_MPS_RECORD.
#   -d       "start pipe=<CUDA_MPS_PIPE_DIRECTORY> log=<..._LOG_DIRECTORY>
#            visible=<CUDA_VISIBLE_DEVICES or ->"; makes <pipe>/control and
#            <log>/control.log as the daemon does, and tells the stand-in
#            driver's clients what the server sees (<pipe>/mock-server-
#            visible: the server applies CUDA_VISIBLE_DEVICES itself);
#            exits 1 when $RIG_FAKE_MPS_FAIL is set, and when a socket in
#            <pipe> ("control_privileged", the longest name) would not fit
#            the 107 bytes of a Unix socket path.
#   (stdin)  "<command> pipe=<...> workers=<n> clients=<devices>": n counts
#            the processes named rig-cuda-worker whose parent is this
#            program's parent (the backend's process), zombies included;
#            devices are the physical devices the stand-in's clients used,
#            sorted and unique.  A quit also gives up the device the server
#            held in the Exclusive-Process compute mode.
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
    if [ ${#pipe} -gt $((107 - 19)) ]; then
        echo "start-path-too-long pipe=$pipe" >>"$rec"
        echo "fake nvidia-cuda-mps-control: $pipe/control_privileged is too long for a socket" >&2
        exit 1
    fi
    if [ ! -d "$pipe" ] || [ ! -d "$log" ]; then
        echo "start-bad-folders pipe=$pipe log=$log" >>"$rec"
        exit 1
    fi
    echo "start pipe=$pipe log=$log visible=${CUDA_VISIBLE_DEVICES:--}" >>"$rec"
    echo "${CUDA_VISIBLE_DEVICES:--}" >"$pipe/mock-server-visible"
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
    clients=$(cat "$pipe"/mock-client.* 2>/dev/null | sort -u | paste -sd, -)
    echo "$cmd pipe=$pipe workers=$n clients=${clients:--}" >>"$rec"
    if [ "$cmd" = quit ] && [ -n "${MOCK_CUDA_STATE:-}" ] &&
        [ "$(cat "$MOCK_CUDA_STATE/exclusive" 2>/dev/null)" = "mps $pipe" ]; then
        rm -f "$MOCK_CUDA_STATE/exclusive"
    fi
    exit 0
    ;;
*)
    echo "fake nvidia-cuda-mps-control: unexpected arguments: $*" >&2
    exit 2
    ;;
esac
