#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Runs the CUDA GPU tests against the stand-in driver (tests/cuda/mock_cuda.c)
# found first as libcuda.so.1 on LD_LIBRARY_PATH.
set -u
b=${top_builddir:-.}
. "${top_srcdir:-.}/tests/cuda/mock_env.sh"
"$b/tests/cuda/test_cuda_gpu"
