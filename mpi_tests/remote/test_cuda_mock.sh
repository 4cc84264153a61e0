#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The controller with CUDA agents, under the stand-in driver
# (tests/cuda/mock_cuda.c, found first as libcuda.so.1): every machine has
# a Device proxy, and the counter example is compiled (nvJitLink) and runs
# on every agent; then the rails example drives a rail end the controller
# made.  Skips (77) where the stand-in or nvJitLink is missing.
set -u
b=${top_builddir:-.}
. "${top_srcdir:-.}/tests/cuda/mock_env.sh"
: "${MPIRUN:=mpirun}"
# The launcher's words for 3 ranks (mpitest.sh knows more of them):
# Hydra starts any number here and forwards the environment itself.
case ${RIG_MPI_FLAVOR:-openmpi} in
mpich) np3="-n 3" ;;
*) np3="--oversubscribe --allow-run-as-root -np 3 --mca osc ^ucx,pt2pt -x LD_LIBRARY_PATH" ;;
esac
if [ -n "${ASAN_OPTIONS:-}" ]; then
    ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
    export ASAN_OPTIONS
fi
out=`timeout -k 10 120 "$MPIRUN" $np3 \
    "$b/mpi_tests/remote/test_remote" --cuda "${top_srcdir:-.}/examples/cuda" \
    2>&1`
rc=$?
echo "$out"
case "$out" in
*"SKIP: "*)
    echo "$out" | grep -q '^FAIL' && exit 1
    exit 77 ;;
esac
test $rc -eq 0 || { echo "FAIL: exit status $rc"; exit 1; }
echo "$out" | grep -q '^FAIL' && exit 1
# Every rank passed: each ends in MPI_Finalize after its checks (a failed
# one exits nonzero), so the launcher's status 0 says so.  Counting the
# ranks' PASS lines does not: MPICH's mpiexec interleaved two of them
# mid-line in a CI run ("rank r2ank 0: PASS : PASS ---cuda-cuda").
echo "$out" | grep -q 'PASS' ||
    { echo "FAIL: no rank said PASS"; exit 1; }
# A kernel that drives a rail end the controller made (test_rails --cuda).
out=`timeout -k 10 120 "$MPIRUN" $np3 \
    "$b/mpi_tests/remote/test_rails" --cuda "${top_srcdir:-.}/examples/cuda" \
    2>&1`
rc=$?
echo "$out"
test $rc -eq 0 || { echo "FAIL: test_rails --cuda: exit status $rc"; exit 1; }
echo "$out" | grep -q '^FAIL' && exit 1
echo "$out" | grep -q '^ok: a CUDA kernel' ||
    { echo "FAIL: test_rails --cuda did not run its kernel"; exit 1; }
echo "PASS"
