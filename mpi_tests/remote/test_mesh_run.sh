#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# mesh_run under mpirun: rank 0 runs the example program pi on every agent
# through the controller and prints a line per machine and a total; alone
# it prints its one line as before.
set -u
b=${top_builddir:-.}
run="$b/tools/mesh_run"
: "${MPIRUN:=mpirun}"
# The launcher's words for 3 ranks (mpitest.sh knows more of them):
# Hydra starts any number here and forwards the environment itself.
case ${RIG_MPI_FLAVOR:-openmpi} in
mpich) np3="-n 3" ;;
*) np3="--oversubscribe --allow-run-as-root -np 3 --mca osc ^ucx,pt2pt" ;;
esac
# As mpitest.sh: leak reports must unwind through Open MPI's frames for
# the suppressions to match them.
if [ -n "${ASAN_OPTIONS:-}" ]; then
    ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
    export ASAN_OPTIONS
fi
out=`timeout -k 10 120 "$MPIRUN" $np3 "$run" --programs "$b/examples/mesh/programs" pi \
    --nodes 2 2>&1`
rc=$?
echo "$out"
test $rc -eq 0 || { echo "FAIL: mesh_run under mpirun exited $rc"; exit 1; }
for r in 1 2; do
    echo "$out" | grep -q "^mesh_run: pi on [^ ]*:$r: done on native, 2 node(s), point 0 = " ||
        { echo "FAIL: no line for machine $r"; exit 1; }
done
echo "$out" | grep -q '^mesh_run: pi: done on 2 machine(s), 4 node(s), hash ' ||
    { echo "FAIL: no total line"; exit 1; }
test `echo "$out" | grep -c '^pi = 3.14159265'` -eq 2 ||
    { echo "FAIL: pi was not printed once per machine"; exit 1; }
out=`"$run" --programs "$b/examples/mesh/programs" pi --nodes 2 2>&1`
rc=$?
echo "$out"
test $rc -eq 0 || { echo "FAIL: mesh_run alone exited $rc"; exit 1; }
echo "$out" | grep -q '^mesh_run: pi: done on native, 2 node(s), hash ' ||
    { echo "FAIL: mesh_run alone changed its line"; exit 1; }
echo "PASS"
