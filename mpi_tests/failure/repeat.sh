#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The racy cases of never-hang (issue 13), each run many times: a death
# while a survivor closes, a death beside rails that do not reach the
# dead rank, a failure raised while a peer carries, a death at any point
# of rig_job_rails over MPI RMA and UCX, a program's crash beside the
# controller's waits (how many runs it takes with it), an agent's death
# while the controller makes rails.  Run by CI; by hand:
#
#   sh mpi_tests/failure/repeat.sh BUILDDIR [REPEATS [PARALLEL]]
#
# REPEATS runs of each case (default 50), PARALLEL at a time (default 2).
# Each run is mpitest.sh with its .mpi file (its hang guard included);
# any run that fails or hangs fails the whole, and its output is shown.
# At the end, for each case: runs passed and the unblock times the
# survivors measured (ms, from test_neverhang's and test_together's
# UNBLOCK lines: min, median, max) -- on a loaded machine, times grow; the
# bound is 2000 ms.
set -u
build=${1:?usage: repeat.sh BUILDDIR [REPEATS [PARALLEL]]}
repeats=${2:-50}
parallel=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$build" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/repeat.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

# Case: its .mpi file (relative to this folder), and the arguments it
# runs with here (a shorter --lower: two jobs a run, the race is in each).
# A case's files in $tmp are named by the .mpi file's base name.
cases="hang_close_death_both_np2
hang_close_death_both_mpi_np2
hang_close_death_rails_np2
hang_close_death_rails_tcp_np2
hang_partial_np3
hang_partial_mpi_np3
hang_others_np4
hang_before_rail_np2
hang_lower_np2:--lower 2
hang_lower_mpi_np2:--lower 2
hang_lower_puts_np2:--lower 2
../together_kill_during_mpi_np3
../together_kill_during_np3
../remote/rails_crash_ctl_np3
../remote/rails_kill_make_np3"

echo "$cases" | while IFS=: read -r path args; do
    name=$(basename "$path")
    spec=$tmp/$name.mpi
    if [ -n "$args" ]; then
        sed "s|^args=.*|args=$args|" "$here/$path.mpi" > "$spec"
    else
        cp "$here/$path.mpi" "$spec"
    fi
    i=1
    while [ "$i" -le "$repeats" ]; do
        echo "$name $i"
        i=$((i + 1))
    done
done > "$tmp/runs"

export tmp build here
start=$(date +%s)
# shellcheck disable=SC2016
xargs -P "$parallel" -L 1 sh -c '
    top_builddir=$0 sh "$1/../mpitest.sh" "$2/$3.mpi" > "$2/$3.$4.log" 2>&1
    echo $? > "$2/$3.$4.rc"
' "$build" "$here" "$tmp" < "$tmp/runs"
took=$(( $(date +%s) - start ))

echo "$cases" | while IFS=: read -r path args; do
    name=$(basename "$path")
    pass=0
    bad=
    for rc in "$tmp/$name".*.rc; do
        if [ "$(cat "$rc")" = 0 ]; then
            pass=$((pass + 1))
        else
            bad="$bad ${rc%.rc}.log"
        fi
    done
    times=$(cat "$tmp/$name".*.log | sed -n 's/^UNBLOCK .* \([0-9.]*\) ms after.*/\1/p' |
        sort -n | awk '{ t[NR] = $1 } END {
            if (NR) printf "%.1f / %.1f / %.1f ms", t[1], t[int((NR + 1) / 2)], t[NR]
            else printf "-" }')
    printf '%-32s %3d/%d passed   unblock min/median/max: %s\n' "$name" "$pass" \
        "$repeats" "$times"
    for log in $bad; do
        echo "---- $(basename "$log")"
        cat "$log"
    done
    [ -z "$bad" ] || echo "$name" >> "$tmp/failed"
done
echo "repeat: $(wc -l < "$tmp/runs") runs in ${took}s"
if [ -s "$tmp/failed" ]; then
    echo "repeat: FAILED: $(tr '\n' ' ' < "$tmp/failed")"
    exit 1
fi
exit 0
