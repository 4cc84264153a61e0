#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The CUDA GPU tests against the stand-in driver (tests/cuda/mock_cuda.c),
# found first as libcuda.so.1 on LD_LIBRARY_PATH, as device-check.sh runs
# them on a GPU: every case; the hardware queues again with
# CUDA_DEVICE_MAX_CONNECTIONS=32; a kernel fault in a process of its own;
# then what open must refuse up front (a driver older than nvJitLink, a
# watchdog, the Prohibited compute mode, a green split that makes no
# group) and what the Exclusive-Process compute mode allows.  The backend
# is built and the stand-in is a driver: a refusal to open fails here.
set -u
b=${top_builddir:-.}
prog="$b/tests/cuda/test_cuda_gpu"
. "${top_srcdir:-.}/tests/cuda/mock_env.sh"
fail() {
    echo "FAIL: $*"
    exit 1
}
# run WHAT [ARGS]: the test program; its status must be 0.
run() {
    what=$1
    shift
    "$prog" "$@"
    rc=$?
    test $rc -eq 0 || fail "$what: test_cuda_gpu $* exited $rc"
}
run "every case"
CUDA_DEVICE_MAX_CONNECTIONS=32 run "32 queues" connections
run "a fault" fault

# refused WHAT WANT [VAR=VALUE...]: opening the backend in that
# environment is refused with a message that starts with WANT.
refused() {
    what=$1
    want=$2
    shift 2
    out=$(env "$@" "$prog" open 2>&1)
    echo "$what: $out"
    case $out in
    "open: $want"*) ;;
    *) fail "$what: not refused with \"$want\"" ;;
    esac
}
refused "a CUDA 12.8 driver" \
    "unsupported: the CUDA driver supports CUDA 12.8 (cuDriverGetVersion 12080); cubins from nvJitLink 13." \
    MOCK_CUDA_DRIVER_VERSION=12080
refused "a watchdog" "unsupported: CUDA device 0 has a run time limit" \
    MOCK_CUDA_WATCHDOG=1
refused "the Prohibited compute mode" \
    "unsupported: CUDA device 0 is in the Prohibited compute mode" \
    MOCK_CUDA_COMPUTE_MODE=2
refused "a green split that makes no group" \
    "unsupported: RIG_MESH_CUDA_SMS=1: the device's SMs split into 0 groups" \
    RIG_MESH_CUDA_SMS=1 MOCK_CUDA_SM_ALIGN=8

# Exclusive-Process: the backend is the one process on the device.
MOCK_CUDA_COMPUTE_MODE=3 run "Exclusive-Process" lifecycle
echo "PASS"
