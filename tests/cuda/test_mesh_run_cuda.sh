#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# mesh_run on the CUDA backend against the stand-in driver
# (tests/cuda/mock_cuda.c): a CUDA example runs end to end, and
# --nvjitlink decides where nvJitLink comes from.
set -u
b=${top_builddir:-.}
run="$b/tools/mesh_run"
cat="$b/examples/cuda/catalog"
. "${top_srcdir:-.}/tests/cuda/mock_env.sh"
mkdir "$dir/empty"
unset MESH_NVJITLINK_DIR

# The toolkit's nvJitLink (the default directory): the pattern example
# runs to its end on 4 nodes.
out=$("$run" --programs "$cat" pattern --backend cuda --timeout-ms 20000 2>&1)
rc=$?
echo "$out"
# The backend was built and the stand-in is a driver: a refusal (no
# nvJitLink where the toolkit should have it included) fails, never skips.
test $rc -eq 0 || { echo "FAIL: mesh_run pattern exited $rc"; exit 1; }
echo "$out" | grep -q 'mesh_run: pattern: done on cuda, 4 node(s)' ||
    { echo "FAIL: no done line for pattern"; exit 1; }

# --nvjitlink naming a directory without nvJitLink: the compile is refused
# with that directory named, and MESH_NVJITLINK_DIR does not win over it.
out=$(MESH_NVJITLINK_DIR=/usr/local/cuda/lib64 "$run" --programs "$cat" \
    pattern --backend cuda --timeout-ms 20000 --nvjitlink "$dir/empty" 2>&1)
rc=$?
echo "$out"
test $rc -eq 1 || { echo "FAIL: --nvjitlink to an empty dir exited $rc"; exit 1; }
echo "$out" | grep -q "unsupported: no nvJitLink in $dir/empty" ||
    { echo "FAIL: the refusal does not name --nvjitlink's directory"; exit 1; }

# Not a directory: a usage error (exit 2) naming it.
out=$("$run" --programs "$cat" pattern --nvjitlink "$dir/nothere" 2>&1)
rc=$?
echo "$out"
test $rc -eq 2 || { echo "FAIL: --nvjitlink to nothing exited $rc"; exit 1; }
echo "$out" | grep -q "invalid: --nvjitlink $dir/nothere is not a directory" ||
    { echo "FAIL: no invalid: line"; exit 1; }
echo "PASS"
