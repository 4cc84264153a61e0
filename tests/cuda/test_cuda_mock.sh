#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Runs the CUDA GPU tests against the stand-in driver (tests/cuda/mock_cuda.c)
# found first as libcuda.so.1 on LD_LIBRARY_PATH.
set -u
b=${top_builddir:-.}
lib="$b/tests/cuda/.libs/libcudamock.so"
if [ ! -f "$lib" ]; then
    echo "SKIP: $lib is not built"
    exit 77
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/rig-mockcuda.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
ln -s "$(cd "$(dirname "$lib")" && pwd)/libcudamock.so" "$dir/libcuda.so.1"
LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    "$b/tests/cuda/test_cuda_gpu"
