#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Rails' end registration with a CUDA context current, beside the CUDA
# backend: mpi_tests/gpu/test_endreg on 2 ranks against the stand-in driver
# (tests/cuda/mock_cuda.c), with tests/cuda/ucx_cuda_shim.c preloaded to
# register host memory in ucp_mem_map as a UCX built with CUDA does.  Run
# through mpi_tests/mpitest.sh (its hang guard and orphan check).  Then the
# shim's log: UCX did register end memory first (the case was exercised),
# and every one of its unregistrations succeeded (rails did not take UCX's
# registration away).
set -u
b=${top_builddir:-.}
s=${top_srcdir:-.}
. "$s/tests/cuda/mock_env.sh"
shim="$(cd "$b/tests/cuda/.libs" && pwd)/libucxcudashim.so"
test -f "$shim" || { echo "FAIL: $shim is not built"; exit 1; }
log="$dir/shim.log"
spec="$dir/endreg.mpi"
cat >"$spec" <<SPEC
np=2
prog=mpi_tests/gpu/test_endreg
timeout=120
env=LD_LIBRARY_PATH=$LD_LIBRARY_PATH
env=MOCK_CUDA_STATE=$MOCK_CUDA_STATE
env=CUDA_SHIM_LOG=$log
env=LD_PRELOAD=$shim
env=ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}:verify_asan_link_order=0
SPEC
sh "$s/mpi_tests/mpitest.sh" "$spec"
rc=$?
echo "--- the shim's log:"
cat "$log" 2>/dev/null
test $rc -eq 0 || { echo "FAIL: test_endreg: exit $rc"; exit 1; }
grep -q '^register .* 0$' "$log" ||
    { echo "FAIL: UCX registered no end memory: the case was not exercised"; exit 1; }
grep '^unregister ' "$log" | grep -v ' 0$' &&
    { echo "FAIL: UCX could not unregister its own registration"; exit 1; }
echo "PASS"
