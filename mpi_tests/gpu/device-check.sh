#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# device-check.sh: builds rig and runs the CUDA backend's tests on a GPU.
#
# Run on a machine with an NVIDIA GPU, from anywhere:
#   mpi_tests/gpu/device-check.sh [build dir (default: _build/gpu)]
# One script, meant to end well within the 15 minutes a device machine is
# lent for: the build (a few minutes), then test runs of seconds each,
# every one under a hang guard, the guards shrunk to what is left of
# DEVICE_CHECK_BUDGET (720 s after the build; the whole budget is printed).
#
# First it prints what a first GPU run must show: the driver's and
# nvJitLink's versions, the compute mode, host-native atomics,
# CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, the watchdog and the hardware
# queue count (CUDA_DEVICE_MAX_CONNECTIONS).  Then each run, its detail
# lines ("GPU ...", "MPS ...", "ENDREG ...") and one line per case ("PASS
# caps", "FAIL blink", "SKIP ..."):
#   gpu        every case of tests/cuda/test_cuda_gpu: caps, the context
#              left current, lifecycle, blink, occupancy, fragmentation,
#              49,148 B of shared memory, admission, 12 programs started
#              one after another on the default queues, close with 3
#              programs running (a 30 s alarm), green contexts of 16 SMs
#              and 1 SM, 100 load/unload cycles with cuMemGetInfo flat,
#              rails: a resident kernel ping-pongs 8 B with the host over
#              a rail end (device writes, points the watcher readies);
#              its "GPU rails:" line gives the one-way time of points
#              against cuStreamWriteValue64 + host poll and
#              cuLaunchHostFunc after one kernel per message
#   queues32   the 12 programs again with CUDA_DEVICE_MAX_CONNECTIONS=32
#   fault      a faulting kernel next to a counter (its own process: the
#              fault loses the context)
#   mps        tests/cuda/test_cuda_mps under a private MPS daemon, with
#              CUDA_VISIBLE_DEVICES set as a batch system sets it
#   endreg     rails' end registration with a context current and a UCX
#              that registers host memory itself (tests/cuda/ucx_cuda_shim.c
#              preloaded), on 2 ranks; needs MPI
#   compiler   tests/cuda/test_cuda_compile
# Every expected RESULT line must appear and say PASS.  Where nvidia-smi
# sees a GPU, a skip is a failure unless it says there is no driver or no
# device.  Exit status: 0 all passed, 77 no GPU here (nothing could run),
# 1 a failure.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/_build/gpu}
jobs=$(nproc 2>/dev/null || echo 4)
budget=${DEVICE_CHECK_BUDGET:-720}
t0=$(date +%s)
status=0
nogpu=0

say() { printf '%s\n' "$*"; }
elapsed() { echo $(($(date +%s) - t0)); }
fail() { say "FAIL $*"; status=1; }

say "device-check: $(uname -n), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
gpu_seen=no
if command -v nvidia-smi >/dev/null 2>&1; then
    if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
        gpu_seen=yes
    fi
    nvidia-smi --query-gpu=name,driver_version,compute_mode,memory.total,uuid \
        --format=csv,noheader 2>&1 | sed 's/^/device-check: nvidia-smi: /'
else
    say "device-check: nvidia-smi not found"
fi
say "device-check: nvidia-smi sees a GPU: $gpu_seen"
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader 2>/dev/null |
    head -n 1 | tr -d ' ')

# ---- the build ---------------------------------------------------------------
if [ ! -x "$top/configure" ]; then
    (cd "$top" && autoreconf -fi) >/dev/null 2>&1 ||
        { say "FAIL build: autoreconf"; exit 1; }
fi
mkdir -p "$build" || exit 1
build=$(cd "$build" && pwd)
cd "$build" || exit 1
if [ ! -f Makefile ]; then
    mpi=
    command -v mpicc >/dev/null 2>&1 || mpi=--without-mpi
    # shellcheck disable=SC2086
    "$top/configure" $mpi >configure.log 2>&1 || {
        say "FAIL build: configure (tail of $build/configure.log)"
        tail -n 20 configure.log
        exit 1
    }
fi
rails=no
grep -q '^#define RIG_HAVE_RAILS 1' config.h 2>/dev/null && rails=yes
targets="tests/cuda/test_cuda_compile tests/cuda/test_cuda_gpu
    tests/cuda/test_cuda_mps src/mesh/cuda/rig-cuda-worker"
[ $rails = yes ] &&
    targets="$targets mpi_tests/gpu/test_endreg tests/cuda/libucxcudashim.la"
# shellcheck disable=SC2086
if ! make -j"$jobs" $targets >make.log 2>&1; then
    say "FAIL build: the CUDA tests (tail of $build/make.log)"
    tail -n 30 make.log
    exit 1
fi
say "device-check: built in $(elapsed) s (MPI and rails: $rails)"
tstart=$(date +%s)

# ---- the runs ----------------------------------------------------------------

# The hang guard for a run: its own limit, or what is left of the budget.
guard() {
    left=$((budget - ($(date +%s) - tstart)))
    [ "$left" -lt 10 ] && left=10
    [ "$1" -lt "$left" ] && echo "$1" || echo "$left"
}

# run NAME LIMIT EXPECTED PROGRAM [ARGS...]: runs a test program under a
# hang guard (the environment set before it passes on), prints its detail
# and RESULT lines, and checks them: every case of EXPECTED (names
# separated by "|") must report PASS.
run() {
    name=$1 limit=$(guard "$2") expected=$3
    shift 3
    log="$build/$name.log"
    timeout -k 10 "$limit" "$@" >"$log" 2>&1
    rc=$?
    grep '^GPU \|^MPS \|^ENDREG' "$log"
    grep '^RESULT ' "$log" | sed 's/^RESULT \(.*\): \(.*\)$/\2 \1/'
    case $rc in
    0) ;;
    77)
        why=$(grep -m 1 '^SKIP' "$log")
        case $why in
        *"no CUDA driver"* | *CUDA_ERROR_NO_DEVICE* | *"reports 0)"*)
            say "SKIP $name: $why (no driver or no device)"
            nogpu=1
            return ;;
        esac
        if [ $gpu_seen = yes ]; then
            fail "$name: skipped where nvidia-smi sees a GPU: $why"
        else
            say "SKIP $name: $why"
            nogpu=1
        fi
        return ;;
    124 | 137) fail "$name: timed out after $limit s (log: $log)"
        tail -n 20 "$log" ;;
    *) fail "$name: exit $rc (log: $log)"
        grep -B2 -A6 'FAIL\|failed\|Assertion' "$log" | head -n 60 ;;
    esac
    old_ifs=$IFS
    IFS='|'
    for c in $expected; do
        if ! grep -q "^RESULT $c: PASS\$" "$log"; then
            grep -q "^RESULT $c: " "$log" ||
                fail "$name: no result for \"$c\""
            grep -q "^RESULT $c: \(FAIL\|SKIP\)" "$log" &&
                fail "$name: \"$c\" did not pass"
        fi
    done
    IFS=$old_ifs
    [ $rc -eq 0 ] && say "PASS $name"
}

unset CUDA_DEVICE_MAX_CONNECTIONS
# The build tree's MPS worker (not installed).
RIG_MESH_CUDA_WORKER=$(pwd)/src/mesh/cuda/rig-cuda-worker
export RIG_MESH_CUDA_WORKER

# What a first GPU run must show, first.
run first 60 "environment" tests/cuda/test_cuda_gpu environment
run gpu 240 "environment|caps|context|lifecycle|pattern|blink|mps|occupancy|fragmentation|shared 49148|admit arguments|admit bound|connections|close 3|green 16|green 1|leak|rails" \
    tests/cuda/test_cuda_gpu
run queues32 60 "connections" env CUDA_DEVICE_MAX_CONNECTIONS=32 \
    tests/cuda/test_cuda_gpu connections
run fault 60 "fault" tests/cuda/test_cuda_gpu fault
# MPS for real where nvidia-cuda-mps-control is (PATH, then the toolkit's
# bin): a private daemon under $TMPDIR, a worker per program, and
# CUDA_VISIBLE_DEVICES naming the GPU (its UUID, as the MPS documentation
# recommends), which the daemon applies and the workers must not carry.
run mps 150 "mps open|mps lifecycle|mps isolation|mps cycles|mps crash|mps refusal|mps stack|mps fault" \
    env CUDA_VISIBLE_DEVICES="${uuid:-0}" tests/cuda/test_cuda_mps
if [ $rails = yes ]; then
    spec="$build/endreg.mpi"
    shim="$(pwd)/tests/cuda/.libs/libucxcudashim.so"
    shimlog="$build/endreg-shim.log"
    rm -f "$shimlog"
    {
        echo "np=2"
        echo "prog=mpi_tests/gpu/test_endreg"
        echo "timeout=$(guard 90)"
        echo "env=CUDA_SHIM_LOG=$shimlog"
        echo "env=LD_PRELOAD=$shim"
    } >"$spec"
    run endreg 120 "end registration" env top_builddir="$(pwd)" \
        sh "$top/mpi_tests/mpitest.sh" "$spec"
    if grep -q '^RESULT end registration: PASS$' "$build/endreg.log"; then
        grep -q '^register .* 0$' "$shimlog" 2>/dev/null ||
            fail "endreg: UCX's stand-in registered no end memory first"
        grep '^unregister ' "$shimlog" 2>/dev/null | grep -v ' 0$' &&
            fail "endreg: UCX's own unregistration failed"
    fi
else
    if [ $gpu_seen = yes ]; then
        fail "endreg: this build has no MPI (configure found none): the end registration case cannot run"
    else
        say "SKIP endreg: no MPI"
    fi
fi
run compiler 60 "" tests/cuda/test_cuda_compile

if [ $status -eq 0 ] && [ $nogpu -eq 1 ]; then
    status=77
fi
say "device-check: done in $(elapsed) s (budget ${budget} s after the build), status $status"
exit "$status"
