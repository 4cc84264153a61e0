#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# benchmarks/multihost.sh: the multi-host mode of run.sh (`run.sh --hosts
# 2`): rig's OSU-style benchmarks across 2 simulated hosts (network
# namespaces on a bridge, mpi_tests/multihost/hosts.sh), one rank a host,
# every method side by side in one run over the same TCP link, then the
# stencil application benchmark at 2 ranks (one a host) and 4 ranks (2 a
# host, which meet through shared memory within a host and over TCP
# across, as on real hosts); writes benchmarks/results/<date>-<host>-mh.md
# (the targets of issue 14 item 5 and issue 18 item 5, the tables, the
# commands) and PNG plots, and prints the tables.
#
# Usage: bash benchmarks/run.sh --hosts 2 [BUILD_DIR]  (default _build/quickstart)
#        bash benchmarks/multihost.sh [BUILD_DIR]      (the same)
#        $(libexecdir)/rig/rig_osu_run --hosts 2       (installed: this script
#            and the bed's hosts.sh and agent.sh are in multihost/ beside the
#            programs; results go to ./rig-results)
# Needs root and iproute2 (exits 77 and says why otherwise).  The hosts
# are torn down on every way out, INT, TERM and HUP included; a run killed
# outright (SIGKILL) leaves them to the next run's sweep (hosts.sh).
# Settings: RESULTS_DIR (default benchmarks/results), MPIRUN (default mpirun),
# QUICK=1 (10 iterations, latency to 64 KiB, one round of the stencil: a
# smoke run, not for the record: 10 minutes at a load average of 11 to 37
# on 2 cores; a full run took about an hour on a loaded 2-core machine),
# TIMEOUT_S (each program's hang guard: 900 s quick, 5400 s full),
# PML=ucx (Open MPI's pml ucx for the MPI methods, over the same
# UCX_TLS=tcp,self, instead of ob1 over btl tcp), STENCIL_SHM=0 (the
# stencil with every pair of ranks over TCP, the 2 of one host too:
# UCX_TLS=tcp,self for rig, btl tcp,self for MPI), ROUNDS (default 3: each
# latency measurement repeated, the median kept), BW_ROUNDS (the same for
# bandwidth, default 5).  The verdicts use the paired ratios: rig over
# each method in the same round, the median over the rounds.
set -euo pipefail

# Where the programs and the bed are: installed, this script is
# $(pkglibexecdir)/multihost/multihost.sh with the bed's hosts.sh and
# agent.sh beside it and the programs one folder up; in a source tree,
# the bed is mpi_tests/multihost/ and the programs a build tree's.
here=$(cd "$(dirname "$0")" && pwd)
if [ -r "$here/hosts.sh" ]; then
    bed=$here
    if [ $# -eq 0 ]; then
        bin=$(cd "$here/.." && pwd)
        build=$(cd "$bin/../.." && pwd) # the prefix, as the report names it
        rig_info=$build/bin/rig_info
    else
        build=$(cd "$1" && pwd)
        bin=$build/benchmarks
        rig_info=$build/tools/rig_info
    fi
    : "${RESULTS_DIR:=$PWD/rig-results}"
    invoked="$(cd "$here/.." && pwd)/rig_osu_run --hosts 2${1:+ $build}"
else
    top=$(cd "$here/.." && pwd)
    bed=$top/mpi_tests/multihost
    build=$(cd "${1:-$top/_build/quickstart}" && pwd)
    bin=$build/benchmarks
    rig_info=$build/tools/rig_info
    : "${RESULTS_DIR:=$top/benchmarks/results}"
    invoked="bash benchmarks/run.sh --hosts 2 $build"
fi
# The settings given, for the report's command line.
for v in QUICK PML STENCIL_SHM ROUNDS BW_ROUNDS TIMEOUT_S MPIRUN; do
    if [ -n "${!v:-}" ]; then
        invoked="$v=${!v} $invoked"
    fi
done
# The stencil's ranks of one host: shared memory (1) or TCP (0).
stencil_shm=${STENCIL_SHM:-1}
case $stencil_shm in
    0 | 1) ;;
    *)
        echo "multihost.sh: invalid: STENCIL_SHM=$stencil_shm (0 or 1)" >&2
        exit 2
        ;;
esac
for b in rig_osu_latency rig_osu_bw rig_osu_bibw rig_stencil; do
    if [ ! -x "$bin/$b" ]; then
        echo "multihost.sh: missing: $bin/$b (build with MPI first)" >&2
        exit 1
    fi
done

# shellcheck source=../mpi_tests/multihost/hosts.sh
. "$bed/hosts.sh"
# The results file's machine section, run.sh's (beside it, or one folder
# up when installed).
for m in "$here/machine.sh" "$here/../machine.sh" ""; do
    if [ -z "$m" ]; then
        echo "multihost.sh: missing: machine.sh (beside $0 or one folder up)" >&2
        exit 1
    fi
    if [ -r "$m" ]; then
        # shellcheck source=machine.sh
        . "$m"
        break
    fi
done
if ! why=$(mh_check); then
    echo "multihost.sh: skipped: simulated hosts: $why" >&2
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; mh_down' EXIT
trap 'exit 1' INT TERM HUP
mh_up 2
mapfile -t hostargs < <(mh_mpirun_args 1)
# The stencil's: ranks of one host through shared memory (hosts.sh:
# MH_SHM), unless STENCIL_SHM=0.
mapfile -t st_hostargs < <(MH_SHM=$stencil_shm mh_mpirun_args 1)
mapfile -t st_hostargs2 < <(MH_SHM=$stencil_shm mh_mpirun_args 2)

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# --bind-to none: every simulated host sees the same cores, and binding
# would stack the ranks of both hosts on the same ones.  btl: the
# point-to-point benchmarks run one rank a host over UCX_TLS=tcp,self
# (hosts.sh), and Open MPI over TCP alike.  The stencil's 2 ranks of one
# host meet through shared memory, rig's (mapped stores, UCX's shared
# memory transports within the host's IPC namespace) and Open MPI's
# (vader) alike, and over TCP across hosts; with STENCIL_SHM=0 both go
# over TCP within a host too (UCX_TLS=tcp,self and btl tcp,self).
launch=("${MPIRUN:-mpirun}" --oversubscribe --allow-run-as-root --bind-to none)
if [ "${PML:-}" = ucx ]; then
    launch+=(--mca pml ucx)
fi
base=("${launch[@]}" --mca btl tcp,self)
if [ "$stencil_shm" = 1 ]; then
    st_base=("${launch[@]}" --mca btl vader,tcp,self)
else
    st_base=("${base[@]}")
fi
# osc ucx: the put method's window needs a one-sided component that
# reaches the other host, and Debian's defaults
# (/etc/openmpi/openmpi-mca-params.conf: osc ^ucx,pt2pt) leave none.
mpi=("${base[@]}" -np 2 "${hostargs[@]}" --mca osc ucx)
# The stencil needs no MPI window: Open MPI's own choice, as a user runs
# it; 2 ranks one a host, 4 ranks 2 a host (ranks 0-1 on the first, 2-3
# on the second: of the 2 x 2 grid, the north-south halos cross hosts).
st2=("${st_base[@]}" -np 2 "${st_hostargs[@]}")
# mpi_yield_when_idle: the 4 ranks share this machine's 2 cores, which
# rig's waits see (the job's ranks on one kernel) but Open MPI, given 2
# slots a host, does not: it yields only on a node it runs oversubscribed,
# as it does at 4 ranks on one node.  Told, it waits as on one node.
st4=("${st_base[@]}" -np 4 "${st_hostargs2[@]}")
if [ "$(nproc)" -lt 4 ]; then
    st4+=(--mca mpi_yield_when_idle 1)
fi
methods=rig,mpi,persistent,put,ucx,ucx_am
rounds=(-r "${ROUNDS:-3}")
# Bandwidth over TCP moves most from round to round (the memory copies of
# both kernels' TCP stacks on shared cores): 5 rounds by default.
bw_rounds=(-r "${BW_ROUNDS:-5}")
# The stencil's rounds: at 1024 x 1024 one is ~20 ms, and a 2-core VM's
# noise comes in bursts of tens of ms; 64 rounds (the most rig_stencil
# takes) cut the median's spread by half against 15 (the figure against
# MPI's best is the lowest of three such medians, and rig and MPI differ
# by ~1% there: run.sh says more).
squick=(-r "${STENCIL_ROUNDS:-64}")
quick=()
lat_max=1M
if [ "${QUICK:-0}" = 1 ]; then
    quick=(-i 10 -x 2)
    squick=(-r 1 -i 20)
    rounds=(-r 1)
    bw_rounds=(-r 1)
    lat_max=64K
fi

stamp=$(date +%Y-%m-%d)
host=$(hostname -s)
results=$RESULTS_DIR
mkdir -p "$results"
name=$stamp-$host-mh
md=$results/$name.md
# A hang guard per program, far above a slow machine's run time: a
# benchmark that stops moving across hosts is named, not waited for.
limit=${TIMEOUT_S:-$([ "${QUICK:-0}" = 1 ] && echo 900 || echo 5400)}

commands=()
# run_as NAME COMMAND...: runs one benchmark, printing its table and
# keeping it in $tmp/NAME.txt.  In the background with a wait, so that a
# signal reaches the traps at once (mh_down then kills the ranks); the
# lock of the hosts is not the benchmark's to keep (8>&-).
run_as() {
    local b=$1 rc=0
    shift
    local cmd=("$@")
    commands+=("${cmd[*]}")
    echo "+ ${cmd[*]}" >&2
    # UCX logs to stdout: its warnings go to stderr, out of the tables.
    (timeout -k 10 "$limit" "${cmd[@]}" 2> >(grep -v 'UCX  WARN' >&2) |
        awk '/UCX  WARN/ { print > "/dev/stderr"; next } { print; fflush() }' |
        tee "$tmp/$b.txt") </dev/null 8>&- &
    wait $! || rc=$?
    if [ $rc -ne 0 ]; then
        case $rc in
        124 | 137) echo "multihost.sh: $b did not end within $limit s (TIMEOUT_S): ${cmd[*]}" >&2 ;;
        *) echo "multihost.sh: $b failed (exit $rc): ${cmd[*]}" >&2 ;;
        esac
        exit 1
    fi
}
# run B ARGS...: rig_osu_B on 2 ranks, one a host, into $tmp/B.txt.
run() {
    local b=$1
    shift
    run_as "$b" "${mpi[@]}" "$bin/rig_osu_$b" "$@"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)
run latency -b "$methods" -m "1:$lat_max" "${rounds[@]}" "${quick[@]}"
run bw -b "$methods" -m 4K:4M "${bw_rounds[@]}" "${quick[@]}"
run bibw -b "$methods" -m 4K:4M "${quick[@]}"
t1=$(date +%s)
# The application: 2 ranks one a host, 4 ranks 2 a host.
run_as stencil2 "${st2[@]}" "$bin/rig_stencil" "${squick[@]}"
run_as stencil4 "${st4[@]}" "$bin/rig_stencil" "${squick[@]}"
# The same exchanges without the arithmetic (-e): the exchange's own cost.
run_as stencil2e "${st2[@]}" "$bin/rig_stencil" -e "${squick[@]}"
run_as stencil4e "${st4[@]}" "$bin/rig_stencil" -e "${squick[@]}"
t2=$(date +%s)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- parse ----------------------------------------------------------------

# value FILE KEY COLUMN: the value in row KEY under COLUMN of the table
# (headers "# Size ..." or "# Grid ...", up to their parenthesis).
value() {
    awk -v key="$2" -v col="$3" '
        /^# (Size|Grid) / { ci = 0
            for (i = 3; i <= NF && $i !~ /^\(/; i++) if ($i == col) ci = i - 1
            next }
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
    if (v == "-" || v == "") { print "not measured"; exit }
    ok = (op == "<=") ? v <= lim : v >= lim
    print ok ? "holds" : "**does not hold**" }'; }
# lowest V...: the smallest of the numbers given ("-" when none).
lowest() { printf '%s\n' "$@" | grep -E '^[0-9.]+$' | sort -g | head -n1 | grep . || echo -; }
# vs FILE KEY COLUMN: rig over COLUMN at KEY, paired by round (machine.sh's
# paired); with one round, which has no paired rows, the ratio of the two
# values, the same thing.
vs() {
    local p
    p=$(paired "$1" "$2" "$3")
    echo "${p:-$(ratio "$(value "$1" "$2" rig)" "$(value "$1" "$2" "$3")")}"
}
# vs_mpi FILE KEY: rig against MPI's best, its lowest vs any MPI method.
vs_mpi() { lowest "$(vs "$1" "$2" mpi)" "$(vs "$1" "$2" persistent)" "$(vs "$1" "$2" put)"; }

lat=$tmp/latency.txt
bw=$tmp/bw.txt
rig8=$(value "$lat" 8 rig)
mpi8=$(value "$lat" 8 mpi)
# The verdicts pair rig with each method round by round (the stencil's
# ratio too): the VM's speed drifts between rounds, and medians taken
# from different rounds compare different machines.  Against MPI's best
# the ratio is rig's worst against any of its methods.
r_lat=$(vs "$lat" 8 mpi)
rig1m=$(value "$bw" 1048576 rig)
ucx1m=$(value "$bw" 1048576 ucx)
mpibest1m=$(best "$bw" 1048576 max mpi persistent put)
r_bw_mpi=$(vs_mpi "$bw" 1048576)
r_bw_ucx=$(vs "$bw" 1048576 ucx)
r_bw_mpi_med=$(ratio "$rig1m" "$mpibest1m")
# UCX's own active messages, what rig's larger runs ride across hosts
# (small ones take rig's own TCP lane): context for where rig's time
# goes, not a target.
am8=$(value "$lat" 8 ucx_am)
r_lat_am=$(vs "$lat" 8 ucx_am)
am1m=$(value "$bw" 1048576 ucx_am)
r_bw_am=$(vs "$bw" 1048576 ucx_am)
bw_rows=""
for s in 65536 262144 1048576 4194304; do
    r=$(value "$bw" $s rig)
    u=$(value "$bw" $s ucx)
    m=$(best "$bw" $s max mpi persistent put)
    bw_rows+="| $s | $r | $u | $m | $(vs "$bw" $s ucx) | $(vs_mpi "$bw" $s) |"$'\n'
done

# The stencil: per configuration and grid, rig, MPI's best (the method
# rig_stencil's paired ratio names: the lowest) and the ratio.
stencil_rows=""
exchange_rows=""
ratios2=()
ratios4=()
for np in 2 4; do
    f=$tmp/stencil$np.txt
    for g in $(awk '$1 !~ /^#/ && NF > 2 { print $1 }' "$f"); do
        rt=$(stencil_ratio "$f" "$g")
        rt=${rt:-$(value "$f" "$g" ratio)}
        stencil_rows+="| $np ($((np / 2)) a host) | ${g}x$g | $(stencil_cells "$f" "$g") | $(holds "$rt" ">=" 1.0) |"$'\n'
        exchange_rows+="| $np ($((np / 2)) a host) | ${g}x$g | $(stencil_cells "$tmp/stencil${np}e.txt" "$g") |"$'\n'
        if [ "$np" = 2 ]; then ratios2+=("$rt"); else ratios4+=("$rt"); fi
    done
done
stencil_worst2=$(lowest "${ratios2[@]}")
stencil_worst4=$(lowest "${ratios4[@]}")
stencil_worst=$(lowest "$stencil_worst2" "$stencil_worst4")
stencil_waits2=$(sed -n 's/^# rig waits: //p' "$tmp/stencil2.txt")
stencil_waits4=$(sed -n 's/^# rig waits: //p' "$tmp/stencil4.txt")

# ---- plots ----------------------------------------------------------------

# table FILE: the table as whitespace columns, header without '#'.
table() {
    awk '/^# (Size|Grid) / { h = $2
            for (i = 3; i <= NF && $i !~ /^\(/; i++) h = h " " $i
            print h; next }
        /^#/ || NF == 0 { next }
        { print }' "$1"
}
plot() {
    local data=$1 png=$2 title=$3 xlabel=$4 ylabel=$5 xfmt=${6:-%.0s%cB}
    local term=pngcairo ncol
    if ! gnuplot -e 'set terminal pngcairo' 2>/dev/null; then
        term=png
    fi
    ncol=$(head -n1 "$data" | awk '{ print NF }')
    gnuplot <<EOF
set terminal $term size 900,600 noenhanced
set output "$png"
set title "$title"
set xlabel "$xlabel"
set ylabel "$ylabel"
set logscale xy
set format x "$xfmt"
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
    # Without best_mpi and ratio.
    for np in 2 4; do
        table "$tmp/stencil$np.txt" | awk '{ NF -= 2; print }' >"$tmp/stencil$np.dat"
    done
    plot "$tmp/latency.dat" "$results/$name-latency.png" \
        "Latency across 2 simulated hosts (TCP over veth; lower is better)" \
        "message size" "half round trip (us)"
    plot "$tmp/bw.dat" "$results/$name-bw.png" \
        "Bandwidth across 2 simulated hosts (higher is better)" \
        "message size" "MB/s"
    plot "$tmp/bibw.dat" "$results/$name-bibw.png" \
        "Bi-directional bandwidth across 2 simulated hosts" \
        "message size" "MB/s"
    plot "$tmp/stencil2.dat" "$results/$name-stencil2.png" \
        "2-D stencil, 2 ranks on 2 simulated hosts (higher is better)" \
        "grid edge (N)" "iterations/s" "%g"
    plot "$tmp/stencil4.dat" "$results/$name-stencil4.png" \
        "2-D stencil, 4 ranks on 2 simulated hosts, 2 a host (higher is better)" \
        "grid edge (N)" "iterations/s" "%g"
    plots=(latency bw bibw stencil2 stencil4)
else
    echo "multihost.sh: no gnuplot: tables only" >&2
fi

# ---- the results file -----------------------------------------------------

{
    echo "# rig benchmarks across 2 simulated hosts: $stamp on $host"
    echo
    echo "Two network namespaces on one machine joined by veth pairs to a"
    echo "bridge, each with its own host name and System V IPC namespace"
    echo "(mpi_tests/multihost/hosts.sh): between hosts every byte crosses TCP"
    echo "over the bridge. The point-to-point benchmarks run one"
    echo "rank a host (UCX_TLS=tcp,self and Open MPI's btl tcp,self),"
    echo "all methods side by side in one run, interleaved at every"
    echo "size; each latency figure is the median of ${rounds[1]} round(s), each"
    echo "bandwidth figure of ${bw_rounds[1]}. The stencil runs at 2 ranks (one a"
    echo "host) and 4 ranks (2 a host). Every simulated host shares this"
    echo "machine's $(nproc) cores."
    echo "Load average before: $load_before; after: $load_after. The"
    echo "point-to-point suite took $((t1 - t0)) s, the stencil $((t2 - t1)) s."
    echo "A loaded machine's figures are noise: compare the ratios of one run,"
    echo "and re-measure on a quiet machine."
    echo
    echo "Command: \`$invoked\`$([ "${QUICK:-0}" = 1 ] && echo " (a smoke run, not for the record)"),"
    echo "which ran:"
    echo
    echo '```'
    printf '%s\n' "${commands[@]}"
    echo '```'
    echo
    echo "## Targets (issue 14, item 5)"
    echo
    echo "| target | measured | verdict |"
    echo "|---|---|---|"
    echo "| 1 MiB bandwidth >= 1.0 x MPI's best (mpi, persistent, put) | paired $r_bw_mpi (medians: rig $rig1m MB/s, MPI best $mpibest1m MB/s: $r_bw_mpi_med) | $(holds "$r_bw_mpi" ">=" 1.0) |"
    echo "| 1 MiB bandwidth >= 0.9 x raw UCX puts | paired $r_bw_ucx (medians: rig $rig1m MB/s, ucx $ucx1m MB/s) | $(holds "$r_bw_ucx" ">=" 0.9) |"
    echo "| 8 B half round trip <= 0.9 x MPI_Send/MPI_Recv | paired $r_lat (medians: rig $rig8 us, mpi $mpi8 us) | $(holds "$r_lat" "<=" 0.9) |"
    echo
    echo "Each ratio pairs rig with a method round by round and takes the"
    echo "median over the rounds (the \"paired\" rows of the tables below);"
    echo "against MPI's best it is rig's lowest against any of MPI's methods,"
    echo "as the stencil's. The medians beside it come from different rounds"
    echo "(the machine's speed drifts between them) and are context only."
    echo
    echo "Beside UCX's own active messages (\`ucx_am\`: one eager"
    echo "\`ucp_am_send_nbx\` a message into a handler that copies it, UCX's"
    echo "defaults; the protocol rig's runs larger than RIG_LANE_BYTES take"
    echo "across nodes, without rig; smaller ones, 8 B among them, go over"
    echo "rig's own TCP connection, which a waiter reads with a plain recv):"
    echo "8 B half round trip rig $rig8 us, ucx_am $am8 us: paired $r_lat_am;"
    echo "1 MiB bandwidth rig $rig1m MB/s, ucx_am $am1m MB/s: paired $r_bw_am."
    echo
    echo "Bandwidth (MB/s, medians; MPI's best of mpi, persistent and put) and"
    echo "the paired ratios (rig/MPI: rig's lowest against MPI's methods):"
    echo
    echo "| size | rig | ucx | MPI best | rig/ucx | rig/MPI |"
    echo "|---|---|---|---|---|---|"
    printf '%s' "$bw_rows"
    echo
    echo "## Application: a 2-D stencil across hosts (issue 18, item 5)"
    echo
    echo "\`rig_stencil\` (as in the one-node results): a radius-2 star stencil"
    echo "over a 2-D grid of ranks, halos of width 2 with up to 4 neighbours per"
    echo "iteration, the result checked exactly after every measurement;"
    echo "iterations per second, the median of the rounds, methods interleaved;"
    echo "the ratio pairs rig with each MPI method round by round, its median,"
    echo "and is the lowest of the three: that method is MPI's best. The middle"
    echo "half of the rounds is the spread of rig's per-round ratios against it"
    echo "(lower to upper quartile): a ratio whose middle half straddles 1.0 is"
    echo "a tie in that sitting. At 4 ranks the north-south halos cross hosts,"
    echo "the east-west ones stay on a host."
    if [ "$stencil_shm" = 1 ]; then
        echo "Within a host they go through shared memory, as on real hosts:"
        echo "rig's mapped stores (UCX's shared-memory transports, which the"
        echo "hosts' IPC namespaces keep within a host) and Open MPI's vader"
        echo "(\`--mca btl vader,tcp,self\`); across hosts over TCP."
    else
        echo "Within a host too they go over TCP (\`STENCIL_SHM=0\`:"
        echo "UCX_TLS=tcp,self and \`--mca btl tcp,self\`)."
    fi
    if [ "$(nproc)" -lt 4 ]; then
        echo "The 4 ranks share $(nproc) cores: Open MPI, given 2 slots a host,"
        echo "would not see it and would poll without yielding, so it is told"
        echo "(\`--mca mpi_yield_when_idle 1\`), as it finds for itself at 4 ranks on"
        echo "one node; rig's waits find it (the job's ranks on one kernel)."
    fi
    echo "rig waits at 2 ranks: $stencil_waits2; at 4 ranks: $stencil_waits4."
    echo
    echo "| target | measured | verdict |"
    echo "|---|---|---|"
    echo "| rails >= 1.0 x MPI's best (isend, persistent, neighbor) in every configuration across hosts | worst ratio $stencil_worst (2 ranks: $stencil_worst2, 4 ranks: $stencil_worst4) | $(holds "$stencil_worst" ">=" 1.0) |"
    echo
    echo "| ranks | grid | rig (it/s) | MPI's best (it/s) | rig/MPI | middle half of the rounds | >= 1.0 |"
    echo "|---|---|---|---|---|---|---|"
    printf '%s' "$stencil_rows"
    echo
    echo "Below, the halo exchange alone (\`rig_stencil -e\`, as in the one-node"
    echo "results: the same exchanges, no arithmetic, every halo point"
    echo "checked), measured as above:"
    echo
    echo "| ranks | grid | rig (exchanges/s) | MPI's best (exchanges/s) | rig/MPI | middle half of the rounds |"
    echo "|---|---|---|---|---|---|"
    printf '%s' "$exchange_rows"
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
    for b in latency bw bibw stencil2 stencil4 stencil2e stencil4e; do
        echo
        case $b in
        stencil2) echo "### rig_stencil, 2 ranks, one a host" ;;
        stencil4) echo "### rig_stencil, 4 ranks, 2 a host" ;;
        stencil2e) echo "### rig_stencil -e (the exchange alone), 2 ranks, one a host" ;;
        stencil4e) echo "### rig_stencil -e (the exchange alone), 4 ranks, 2 a host" ;;
        *) echo "### rig_osu_$b" ;;
        esac
        echo
        echo '```'
        grep -v '^$' "$tmp/$b.txt"
        echo '```'
    done
    echo
    rig_machine "$rig_info" \
        "link: veth pairs on a Linux bridge, MTU $(ip -n "${MH_HOSTS%% *}" -o link show eth0 | sed -n 's/.* mtu \([0-9]*\).*/\1/p')"
} >"$md"

echo
echo "multihost.sh: wrote $md${plots:+ and its plots ($results/$name-*.png)}"
sed -n '/^## Targets/,/^## Plots/p' "$md" | sed '$d'
