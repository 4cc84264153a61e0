#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Runs one MPI test described by a .mpi file under mpirun, with a hang guard.
#
# Used as the automake LOG_COMPILER of .mpi tests: `mpitest.sh FILE.mpi`.
# FILE.mpi holds key=value lines (# starts a comment):
#   np=3                       ranks (required)
#   prog=mpi_tests/test_rails  program, relative to $top_builddir (required)
#   args=--small 100           its arguments (optional)
#   env=UCX_TLS=tcp,self       VAR=VALUE words exported to every rank
#   mca=NAME VALUE             an Open MPI MCA setting (may repeat)
#   timeout=300                seconds before the run counts as hung (300)
# Exit: 0 pass, 77 when the program printed "SKIP: reason", 99 for a bad
# .mpi file, 1 otherwise (a nonzero exit, a FAIL line, or a timeout).
set -u

spec=$1
[ -r "$spec" ] || { echo "mpitest: cannot read $spec"; exit 99; }
np=
prog=
args=
envs=
mcas=
limit=300
while IFS= read -r line || [ -n "$line" ]; do
    case $line in
        ''|'#'*) continue ;;
        np=*) np=${line#np=} ;;
        prog=*) prog=${line#prog=} ;;
        args=*) args=${line#args=} ;;
        env=*) envs="$envs ${line#env=}" ;;
        mca=*) mcas="$mcas --mca ${line#mca=}" ;;
        timeout=*) limit=${line#timeout=} ;;
        *) echo "mpitest: $spec: unknown line: $line"; exit 99 ;;
    esac
done < "$spec"
[ -n "$np" ] && [ -n "$prog" ] || { echo "mpitest: $spec needs np= and prog="; exit 99; }

: "${top_builddir:=.}"
: "${MPIRUN:=mpirun}"
exe=$top_builddir/$prog
[ -x "$exe" ] || { echo "mpitest: $exe is not built"; exit 99; }

# Each VAR=VALUE is exported here and forwarded to the ranks with -x, and
# so is RIG_LOG when set.
xargs_=
for kv in $envs; do
    export "$kv"
    xargs_="$xargs_ -x ${kv%%=*}"
done
[ -n "${RIG_LOG:-}" ] && xargs_="$xargs_ -x RIG_LOG"

# Under ASan, leak reports must unwind through Open MPI's and UCX's frames
# (built without frame pointers) for tests/sanitizers/lsan.supp to match
# them; the fast unwinder stops there and reports "<unknown module>".
if [ -n "${ASAN_OPTIONS:-}" ]; then
    ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
    export ASAN_OPTIONS
fi

# --oversubscribe: more ranks than cores on small machines; osc ^ucx: Open
# MPI's osc ucx crashes on dynamic windows with UCX 1.13 (the job's window
# is dynamic).
out=$(mktemp "${TMPDIR:-/tmp}/mpitest.XXXXXX") || exit 99
echo "mpitest: np=$np $prog $args [$envs ] [$mcas ] timeout ${limit}s"
# shellcheck disable=SC2086
timeout -k 10 "$limit" "$MPIRUN" --oversubscribe --allow-run-as-root \
    -np "$np" --mca osc '^ucx,pt2pt' $mcas $xargs_ "$exe" $args \
    > "$out" 2>&1
rc=$?
cat "$out"
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "mpitest: TIMEOUT after ${limit}s (hang guard)"
    rm -f "$out"
    exit 1
fi
if grep -q '^SKIP:' "$out"; then
    rm -f "$out"
    exit 77
fi
if grep -q '^FAIL' "$out"; then
    rm -f "$out"
    exit 1
fi
rm -f "$out"
[ $rc -eq 0 ] || { echo "mpitest: exit status $rc"; exit 1; }
exit 0
