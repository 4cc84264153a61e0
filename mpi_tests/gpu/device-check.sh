#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# device-check.sh: builds rig and runs the CUDA backend's GPU tests.
#
# Run on a machine with an NVIDIA GPU, from anywhere:
#   mpi_tests/gpu/device-check.sh [build dir (default: _build/gpu)]
# It configures (without MPI) and builds what the tests need, runs the
# no-GPU compiler tests and the GPU tests under a timeout, and prints one
# summary line per test ("PASS caps", "FAIL blink", "SKIP gpu: reason")
# and the detail lines the tests print ("GPU ...", "MPS ...").  Meant to
# finish in under 5 minutes (the build, then tests of seconds each); the
# per-test timeouts (60 + 180 + 120 s) only guard against hangs.
# Exit status: 0 all passed, 77 skipped (no GPU), 1 a failure.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/_build/gpu}
jobs=$(nproc 2>/dev/null || echo 4)
t0=$(date +%s)
status=0

say() { printf '%s\n' "$*"; }
elapsed() { echo $(($(date +%s) - t0)); }

say "device-check: $(uname -n), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total \
        --format=csv,noheader 2>&1 | sed 's/^/device-check: gpu: /'
else
    say "device-check: nvidia-smi not found"
fi

if [ ! -x "$top/configure" ]; then
    (cd "$top" && autoreconf -fi) >/dev/null 2>&1 ||
        { say "FAIL build: autoreconf"; exit 1; }
fi
mkdir -p "$build" || exit 1
cd "$build" || exit 1
if [ ! -f Makefile ]; then
    "$top/configure" --without-mpi >configure.log 2>&1 || {
        say "FAIL build: configure (tail of $build/configure.log)"
        tail -n 20 configure.log
        exit 1
    }
fi
# What the tests need first (fatal), then the rest (reported, not fatal:
# the GPU path must not wait on an unrelated part of the tree).
if ! make -j"$jobs" tests/cuda/test_cuda_compile tests/cuda/test_cuda_gpu \
    tests/cuda/test_cuda_mps src/mesh/cuda/rig-cuda-worker \
    >make.log 2>&1; then
    say "FAIL build: the CUDA tests (tail of $build/make.log)"
    tail -n 30 make.log
    exit 1
fi
if ! make -j"$jobs" >make-all.log 2>&1; then
    say "device-check: note: the full build failed (see $build/make-all.log)"
    grep -m 3 'error' make-all.log | sed 's/^/device-check:   /'
fi
say "device-check: built in $(elapsed) s"

if [ -x tools/rig_info ]; then
    tools/rig_info 2>&1 | sed -n '/GPUs/,/^ *$/p' |
        sed 's/^/device-check: rig_info: /'
fi

# run NAME PROGRAM TIMEOUT: runs one test program, summarises its results.
run() {
    name=$1 prog=$2 limit=$3
    log="$build/$name.log"
    timeout "$limit" "$prog" >"$log" 2>&1
    rc=$?
    grep '^GPU \|^MPS ' "$log"
    grep '^RESULT ' "$log" | sed 's/^RESULT \(.*\): \(.*\)$/\2 \1/'
    case $rc in
    0) say "PASS $name" ;;
    77) say "SKIP $name: $(grep '^SKIP' "$log" | head -n 1)"
        [ "$status" -eq 0 ] && status=77 ;;
    124) say "FAIL $name: timed out after $limit s (log: $log)"
        tail -n 20 "$log"; status=1 ;;
    *) say "FAIL $name: exit $rc (log: $log)"
        grep -B2 -A6 'FAILED\|failed\|Assertion' "$log" | head -n 60
        status=1 ;;
    esac
}

# The build tree's MPS worker (not installed): the gpu run's "mps" line
# opens the backend in MPS isolation with it, and the mps run below.
RIG_MESH_CUDA_WORKER=$(pwd)/src/mesh/cuda/rig-cuda-worker
export RIG_MESH_CUDA_WORKER
run compiler tests/cuda/test_cuda_compile 60
[ "$status" -eq 77 ] && status=0
run gpu tests/cuda/test_cuda_gpu 180
# MPS isolation for real where nvidia-cuda-mps-control is (PATH, then the
# toolkit's bin): a private daemon under $TMPDIR, a worker per program.
# Without it the line is "SKIP mps: SKIP: ... unsupported: MPS isolation
# needs nvidia-cuda-mps-control ...", which does not fail the check.
before=$status
run mps tests/cuda/test_cuda_mps 120
[ "$status" -eq 77 ] && status=$before
say "device-check: done in $(elapsed) s, status $status"
exit "$status"
