#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# mpitest.sh's verdicts, without MPI: a stand-in launcher prints what the
# ranks of a run would print and exits with a chosen status, and each case
# checks the exit code mpitest.sh gives for it.  Above all a SKIP line of
# one rank must never hide another rank's FAIL line or crash.
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
harness=$top_srcdir/mpi_tests/mpitest.sh
dir=$(mktemp -d "${TMPDIR:-/tmp}/harness.XXXXXX") || exit 99
trap 'rm -rf "$dir"' EXIT

# The launcher ignores every option; the program is the stand-in below.
cat > "$dir/launcher" <<'EOF'
#!/bin/sh
printf '%b' "$FAKE_OUT"
exit "$FAKE_RC"
EOF
printf '#!/bin/sh\nexit 0\n' > "$dir/prog"
chmod +x "$dir/launcher" "$dir/prog"

fails=0
# case NAME WANT_EXIT RC OUTPUT [STATUS-LINE]
case_() {
    name=$1 want=$2 rc=$3 text=$4 status=${5:-}
    {
        echo "np=2"
        echo "prog=prog"
        echo "timeout=30"
        [ -n "$status" ] && echo "$status"
    } > "$dir/t.mpi"
    FAKE_OUT=$text FAKE_RC=$rc MPIRUN=$dir/launcher RIG_MPI_FLAVOR=openmpi \
        top_builddir=$dir sh "$harness" "$dir/t.mpi" > "$dir/log" 2>&1
    got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: $name: mpitest.sh exited $got, expected $want"
        sed 's/^/    | /' "$dir/log"
        fails=$((fails + 1))
    else
        echo "ok: $name: exit $got"
    fi
}

export FAKE_OUT FAKE_RC
case_ "pass" 0 0 'rank 0: PASS\n'
case_ "skip alone" 77 0 'SKIP: no GPU\n'
case_ "skip on rank 0, FAIL on rank 1" 1 0 'SKIP: no GPU\nFAIL rank 1: x.c:3: 1 != 2\n'
case_ "FAIL before SKIP" 1 0 'FAIL rank 1: x.c:3\nSKIP: no GPU\n'
case_ "skip on rank 0, rank 1 crashed" 1 139 'SKIP: no GPU\n'
case_ "skip, aborted run" 1 1 'SKIP: no GPU\n'
case_ "FAIL alone" 1 0 'FAIL: bad\n'
case_ "nonzero status wanted, a rank killed" 0 137 'rank 0: PASS\n' status=nonzero
case_ "nonzero status wanted, skip and kill" 0 137 'SKIP: part\n' status=nonzero
case_ "nonzero status wanted, skipped before the kill" 77 0 'SKIP: not one node\n' status=nonzero
case_ "nonzero status wanted, nothing died" 1 0 'rank 0: PASS\n' status=nonzero
case_ "nonzero status wanted, FAIL" 1 137 'SKIP: x\nFAIL rank 0: y\n' status=nonzero

[ "$fails" -eq 0 ] || exit 1
exit 0
