#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# benchmarks/multihost.sh: rig's OSU-style benchmarks across 2 simulated
# hosts (network namespaces on a bridge, mpi_tests/multihost/hosts.sh), one
# rank a host, every method side by side in one run over the same TCP link;
# writes benchmarks/results/<date>-<host>-multihost.md (the targets of
# issue 14 item 5, the tables, the commands) and PNG plots, and prints the
# tables.
#
# Usage: bash benchmarks/multihost.sh [BUILD_DIR]   (default _build/quickstart)
# Needs root and iproute2 (exits 77 and says why otherwise).
# Settings: RESULTS_DIR (default benchmarks/results), MPIRUN (default mpirun),
# QUICK=1 (10 iterations, latency to 64 KiB: a smoke run of a few
# minutes, not for the record; a full run takes an hour on a loaded
# 2-core machine), PML=ucx
# (Open MPI's pml ucx for the MPI methods, over the same UCX_TLS=tcp,self,
# instead of the system's choice), ROUNDS (default 3: each measurement
# repeated, the median kept).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/_build/quickstart}" && pwd)
bin=$build/benchmarks
for b in latency bw bibw; do
    if [ ! -x "$bin/rig_osu_$b" ]; then
        echo "multihost.sh: missing: $bin/rig_osu_$b (build with MPI first)" >&2
        exit 1
    fi
done

# shellcheck source=../mpi_tests/multihost/hosts.sh
. "$top/mpi_tests/multihost/hosts.sh"
if ! why=$(mh_check); then
    echo "multihost.sh: skipped: simulated hosts: $why" >&2
    exit 77
fi
trap 'mh_down' EXIT
trap 'exit 1' INT TERM HUP
mh_up 2
mapfile -t hostargs < <(mh_mpirun_args 1)

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# osc ucx: the job's window (and the put method's) needs a one-sided
# component that reaches the other host, and Debian's defaults
# (/etc/openmpi/openmpi-mca-params.conf: osc ^ucx,pt2pt) leave none; item
# 4 of issue 14 removes this for rig.  --bind-to none: every simulated
# host sees the same cores, and binding would stack both ranks on core 0.
mpi=("${MPIRUN:-mpirun}" --oversubscribe --allow-run-as-root -np 2
    --bind-to none "${hostargs[@]}" --mca osc ucx)
if [ "${PML:-}" = ucx ]; then
    mpi+=(--mca pml ucx)
fi
methods=rig,mpi,persistent,put,ucx
rounds=(-r "${ROUNDS:-3}")
quick=()
lat_max=1M
if [ "${QUICK:-0}" = 1 ]; then
    quick=(-i 10 -x 2)
    rounds=(-r 1)
    lat_max=64K
fi

stamp=$(date +%Y-%m-%d)
host=$(hostname -s)
results=${RESULTS_DIR:-$top/benchmarks/results}
mkdir -p "$results"
name=$stamp-$host-multihost
md=$results/$name.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; mh_down' EXIT

commands=()
run() {
    local b=$1
    shift
    local cmd=("${mpi[@]}" "$bin/rig_osu_$b" "$@")
    commands+=("${cmd[*]}")
    echo "+ ${cmd[*]}" >&2
    # The lock of the hosts is not the ranks' to keep (8>&-).
    "${cmd[@]}" 2> >(grep -v 'UCX  WARN' >&2) 8>&- | tee "$tmp/$b.txt"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)
run latency -b "$methods" -m "1:$lat_max" "${rounds[@]}" "${quick[@]}"
run bw -b "$methods" -m 4K:4M "${rounds[@]}" "${quick[@]}"
run bibw -b "$methods" -m 4K:4M "${quick[@]}"
t1=$(date +%s)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- parse ----------------------------------------------------------------

# value FILE KEY COLUMN: the value in row KEY under COLUMN of the table.
value() {
    awk -v key="$2" -v col="$3" '
        /^# Size / { for (i = 3; i <= NF; i++) if ($i == col) ci = i - 1; next }
        ci > 0 && $1 == key { print $ci; exit }' "$1"
}
# best FILE KEY min|max COL...: the best value among the columns.
best() {
    local f=$1 key=$2 mode=$3 v out=""
    shift 3
    for c in "$@"; do
        v=$(value "$f" "$key" "$c")
        [ -z "$v" ] || [ "$v" = - ] && continue
        if [ -z "$out" ] || awk -v a="$v" -v b="$out" -v m="$mode" \
            'BEGIN { exit !((m == "min") ? a < b : a > b) }'; then
            out=$v
        fi
    done
    echo "${out:--}"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "-" && b > 0) printf "%.2f", a / b; else print "-" }'; }
holds() { awk -v v="$1" -v op="$2" -v lim="$3" 'BEGIN {
    if (v == "-") { print "not measured"; exit }
    ok = (op == "<=") ? v <= lim : v >= lim
    print ok ? "holds" : "**does not hold**" }'; }

lat=$tmp/latency.txt
bw=$tmp/bw.txt
rig8=$(value "$lat" 8 rig)
mpi8=$(value "$lat" 8 mpi)
r_lat=$(ratio "$rig8" "$mpi8")
rig1m=$(value "$bw" 1048576 rig)
ucx1m=$(value "$bw" 1048576 ucx)
mpibest1m=$(best "$bw" 1048576 max mpi persistent put)
r_bw_mpi=$(ratio "$rig1m" "$mpibest1m")
r_bw_ucx=$(ratio "$rig1m" "$ucx1m")
bw_rows=""
for s in 65536 262144 1048576 4194304; do
    r=$(value "$bw" $s rig)
    u=$(value "$bw" $s ucx)
    m=$(best "$bw" $s max mpi persistent put)
    bw_rows+="| $s | $r | $u | $m | $(ratio "$r" "$u") | $(ratio "$r" "$m") |"$'\n'
done

# ---- plots ----------------------------------------------------------------

table() {
    awk '/^# Size / { h = $2
            for (i = 3; i <= NF && $i !~ /^\(/; i++) h = h " " $i
            print h; next }
        /^#/ || NF == 0 { next }
        { print }' "$1"
}
plot() {
    local data=$1 png=$2 title=$3 ylabel=$4 term=pngcairo ncol
    if ! gnuplot -e 'set terminal pngcairo' 2>/dev/null; then
        term=png
    fi
    ncol=$(head -n1 "$data" | awk '{ print NF }')
    gnuplot <<EOF
set terminal $term size 900,600 noenhanced
set output "$png"
set title "$title"
set xlabel "message size"
set ylabel "$ylabel"
set logscale xy
set format x "%.0s%cB"
set key left top
set grid
set datafile missing "-"
plot for [i=2:$ncol] "$data" using 1:i with linespoints title columnhead(i)
EOF
}
plots=()
if command -v gnuplot >/dev/null 2>&1; then
    for b in latency bw bibw; do
        table "$tmp/$b.txt" >"$tmp/$b.dat"
    done
    plot "$tmp/latency.dat" "$results/$name-latency.png" \
        "Latency across 2 simulated hosts (TCP over veth; lower is better)" \
        "half round trip (us)"
    plot "$tmp/bw.dat" "$results/$name-bw.png" \
        "Bandwidth across 2 simulated hosts (higher is better)" "MB/s"
    plot "$tmp/bibw.dat" "$results/$name-bibw.png" \
        "Bi-directional bandwidth across 2 simulated hosts" "MB/s"
    plots=(latency bw bibw)
else
    echo "multihost.sh: no gnuplot: tables only" >&2
fi

# ---- the results file -----------------------------------------------------

{
    echo "# rig benchmarks across 2 simulated hosts: $stamp on $host"
    echo
    echo "Two network namespaces on one machine joined by veth pairs to a"
    echo "bridge, each with its own host name, one rank in each, UCX_TLS=tcp,self:"
    echo "every byte crosses TCP over the bridge (mpi_tests/multihost/hosts.sh)."
    echo "All methods side by side in one run, interleaved at every size; each"
    echo "latency and bandwidth figure is the median of ${rounds[1]} round(s)."
    echo "Load average before: $load_before; after: $load_after. The suite took"
    echo "$((t1 - t0)) s. A loaded machine's figures are noise: compare the"
    echo "ratios of one run, and re-measure on a quiet machine."
    echo
    echo "Command: \`bash benchmarks/multihost.sh $build\`, which ran:"
    echo
    echo '```'
    printf '%s\n' "${commands[@]}"
    echo '```'
    echo
    echo "## Targets (issue 14, item 5)"
    echo
    echo "| target | measured | verdict |"
    echo "|---|---|---|"
    echo "| 1 MiB bandwidth >= 1.0 x MPI's best (mpi, persistent, put) | rig $rig1m MB/s, MPI best $mpibest1m MB/s: $r_bw_mpi | $(holds "$r_bw_mpi" ">=" 1.0) |"
    echo "| 1 MiB bandwidth >= 0.9 x raw UCX puts | rig $rig1m MB/s, ucx $ucx1m MB/s: $r_bw_ucx | $(holds "$r_bw_ucx" ">=" 0.9) |"
    echo "| 8 B half round trip <= 0.9 x MPI_Send/MPI_Recv | rig $rig8 us, mpi $mpi8 us: $r_lat | $(holds "$r_lat" "<=" 0.9) |"
    echo
    echo "Bandwidth ratios (MB/s; MPI's best of mpi, persistent and put):"
    echo
    echo "| size | rig | ucx | MPI best | rig/ucx | rig/MPI |"
    echo "|---|---|---|---|---|---|"
    printf '%s' "$bw_rows"
    if [ ${#plots[@]} -gt 0 ]; then
        echo
        echo "## Plots"
        echo
        for p in "${plots[@]}"; do
            echo "![$p]($name-$p.png)"
        done
    fi
    echo
    echo "## Tables (OSU Micro-Benchmarks 7 format)"
    for b in latency bw bibw; do
        echo
        echo "### rig_osu_$b"
        echo
        echo '```'
        grep -v '^$' "$tmp/$b.txt"
        echo '```'
    done
    echo
    echo "## Machine"
    echo
    echo '```'
    lscpu | grep -E '^(Model name|CPU\(s\)|NUMA node\(s\)|Hypervisor)' || true
    echo "kernel: $(uname -r)"
    echo "MPI: $("${MPIRUN:-mpirun}" --version 2>/dev/null | head -n1)"
    echo "link: veth pairs on a Linux bridge, MTU $(ip -n "${MH_HOSTS%% *}" -o link show eth0 | sed -n 's/.* mtu \([0-9]*\).*/\1/p')"
    echo '```'
} >"$md"

echo
echo "multihost.sh: wrote $md${plots:+ and its plots}"
sed -n '/^## Targets/,/^Bandwidth ratios/p' "$md" | sed '$d'
