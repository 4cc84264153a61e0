#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# mesh_run runs the wasm examples end to end: counter until its timeout
# halts it, trap until its node 1 traps.
set -u
b=${top_builddir:-.}
run="$b/tools/mesh_run"
RIG_WASM_CACHE="$b/tests/wasm/cache.d"
export RIG_WASM_CACHE
out=`"$run" --programs "$top_srcdir/examples/wasm" counter --nodes 4 \
    --timeout-ms 300 2>&1`
rc=$?
echo "$out"
# The wasm backend was built (this script runs only then): a refusal to
# open is a failure, not a skip.
case "$out" in
*"unsupported: "*) echo "FAIL: the wasm backend was built but: $out"; exit 1 ;;
esac
test $rc -eq 3 || { echo "FAIL: mesh_run counter exited $rc, not 3"; exit 1; }
echo "$out" | grep -q 'still runs after 300 ms; halting it' ||
    { echo "FAIL: counter was not halted"; exit 1; }
out=`"$run" --programs "$top_srcdir/examples/wasm" trap --timeout-ms 20000 \
    2>&1`
rc=$?
echo "$out"
test $rc -eq 1 || { echo "FAIL: mesh_run trap exited $rc, not 1"; exit 1; }
echo "$out" | grep -q 'node 1 trapped: out of bounds memory access' ||
    { echo "FAIL: no trap line"; exit 1; }
echo "PASS"
