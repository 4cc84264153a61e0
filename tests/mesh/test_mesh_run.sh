#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# mesh_run runs the example program end to end, and reports a crash.
set -u
b=${top_builddir:-.}
run="$b/tools/mesh_run"
out=`"$run" --programs "$b/examples/mesh/programs" pi --nodes 4 \
    --timeout-ms 20000 2>&1`
rc=$?
echo "$out"
test $rc -eq 0 || { echo "FAIL: mesh_run pi exited $rc"; exit 1; }
echo "$out" | grep -q '^pi = 3\.14159265' ||
    { echo "FAIL: pi did not print pi"; exit 1; }
echo "$out" | grep -q 'mesh_run: pi: done on native, 4 node(s)' ||
    { echo "FAIL: no done line"; exit 1; }
out=`"$run" --programs "$b/tests/mesh/programs" t_crash --timeout-ms 20000 \
    2>&1`
rc=$?
echo "$out"
test $rc -eq 1 || { echo "FAIL: mesh_run t_crash exited $rc"; exit 1; }
echo "$out" | grep -q 'crashed: node 2 killed by signal 11' ||
    { echo "FAIL: no crash line"; exit 1; }
"$run" --programs "$b/examples/mesh/programs" nothere >/dev/null 2>&1
test $? -eq 1 || { echo "FAIL: a missing program must exit 1"; exit 1; }
"$run" --nodes >/dev/null 2>&1
test $? -eq 2 || { echo "FAIL: bad usage must exit 2"; exit 1; }
echo "PASS"
