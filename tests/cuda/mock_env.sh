# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the tests that run against the stand-in driver
# (tests/cuda/mock_cuda.c): skips (77) when it is not built; otherwise sets
# $dir, a temporary folder removed on exit, puts $dir/lib/libcuda.so.1
# (the mock) first on LD_LIBRARY_PATH and gives the mock $dir/state for
# what its processes share (MOCK_CUDA_STATE), both exported.  Needs $b
# (top_builddir).
mock_lib="$b/tests/cuda/.libs/libcudamock.so"
if [ ! -f "$mock_lib" ]; then
    echo "SKIP: $mock_lib is not built"
    exit 77
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/rig-mockcuda.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/lib" "$dir/state"
ln -s "$(cd "$(dirname "$mock_lib")" && pwd)/libcudamock.so" \
    "$dir/lib/libcuda.so.1"
LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
MOCK_CUDA_STATE="$dir/state"
export LD_LIBRARY_PATH MOCK_CUDA_STATE
