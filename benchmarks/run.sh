#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# benchmarks/run.sh: the main job: rig's OSU-style suite on 2 ranks of this
# machine, every method side by side in one run, then the stencil
# application benchmark at 2 ranks (one per core) and 4 ranks (on the same
# cores: oversubscribed on 2), the controller's benchmark (a build tree's
# rig_remote_bench: images, loads and launches through rank 0 at 4 and 2
# ranks), and OSU's own osu_latency and osu_bw when
# they are there; writes benchmarks/results/<date>-<host>.md (tables,
# targets, machine, commands) and PNG plots, and prints the tables.
#
# Usage: bash benchmarks/run.sh [BUILD_DIR]   (default _build/quickstart)
#        $(libexecdir)/rig/rig_osu_run        (installed: the programs beside it)
# Multi-host mode: bash benchmarks/run.sh --hosts 2 [BUILD_DIR] (or
# RIG_BENCH_HOSTS=2; installed: rig_osu_run --hosts 2), as root: the
# point-to-point suite and the stencil across 2 simulated hosts (network
# namespaces on a bridge, the bed of mpi_tests/multihost/hosts.sh), run by
# benchmarks/multihost.sh (installed: multihost/multihost.sh beside the
# programs), which writes its own benchmarks/results/<date>-<host>-mh.md
# and plots; its settings are in its header (QUICK=1, PML, ROUNDS too).
# Settings: RESULTS_DIR (default benchmarks/results), MPIRUN (default
# mpirun), QUICK=1 (fewer iterations, one round: a smoke run, not for
# the record), BW_ROUNDS (rounds of bw, default 5), SIDE_ROUNDS (of
# bibw, mr and bw1, default 3), STENCIL_ROUNDS (of the stencil, default
# 64), OSU_DIR (OSU Micro-Benchmarks: an install prefix, a build tree or the
# folder of osu_latency and osu_bw; unset: not compared).
set -euo pipefail

# Where the programs are: given a BUILD_DIR, its benchmarks/; run as the
# installed $(libexecdir)/rig/rig_osu_run, the programs beside it (results
# then go to ./rig-results unless RESULTS_DIR says otherwise); else the
# quick start's build tree.
here=$(cd "$(dirname "$0")" && pwd)
# The results file's machine section, shared with multihost.sh.
# shellcheck source=machine.sh
. "$here/machine.sh"
# The multi-host mode is multihost.sh's: one copy of that suite.
hosts=${RIG_BENCH_HOSTS:-}
args=()
while [ $# -gt 0 ]; do
    case $1 in
    --hosts)
        if [ $# -lt 2 ]; then
            echo "run.sh: invalid: --hosts wants a number of hosts (2)" >&2
            exit 2
        fi
        hosts=$2
        shift
        ;;
    --hosts=*) hosts=${1#--hosts=} ;;
    *) args+=("$1") ;;
    esac
    shift
done
set -- ${args[@]+"${args[@]}"}
if [ -n "$hosts" ]; then
    if [ "$hosts" != 2 ]; then
        echo "run.sh: invalid: --hosts '$hosts': the multi-host mode runs 2 simulated hosts" >&2
        exit 2
    fi
    for mh in "$here/multihost/multihost.sh" "$here/multihost.sh"; do
        if [ -r "$mh" ]; then
            exec bash "$mh" "$@"
        fi
    done
    echo "run.sh: missing: multihost.sh (beside $0 or in multihost/)" >&2
    exit 1
fi
if [ $# -eq 0 ] && [ -x "$here/rig_osu_latency" ]; then
    top=$PWD
    bin=$here
    : "${RESULTS_DIR:=$PWD/rig-results}"
    build=$(cd "$here/../.." && pwd)     # the prefix, as the report names it
    rig_info=$build/bin/rig_info
else
    top=$(cd "$here/.." && pwd)
    build=$(cd "${1:-$top/_build/quickstart}" && pwd)
    bin=$build/benchmarks
    rig_info=$build/tools/rig_info
fi
for b in rig_osu_latency rig_osu_bw rig_osu_bibw rig_osu_mr rig_osu_multi \
    rig_osu_ready rig_stencil rig_wait_cost; do
    if [ ! -x "$bin/$b" ]; then
        echo "run.sh: missing: $bin/$b (build with MPI first)" >&2
        exit 1
    fi
done
# OSU's osu_latency and osu_bw, wherever OSU_DIR keeps them.
osu_lat="" osu_bw=""
if [ -n "${OSU_DIR:-}" ]; then
    osu_lat=$(find "$OSU_DIR" -name osu_latency -type f -perm -u+x 2>/dev/null |
        grep -v /one-sided/ | head -n1 || true)
    osu_bw=$(find "$OSU_DIR" -name osu_bw -type f -perm -u+x 2>/dev/null |
        grep -v /one-sided/ | head -n1 || true)
    if [ -z "$osu_lat" ] || [ -z "$osu_bw" ]; then
        echo "run.sh: OSU_DIR=$OSU_DIR holds no osu_latency and osu_bw" >&2
        exit 1
    fi
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI's osc ucx crashes on dynamic windows with UCX 1.13, and osc rdma
# hangs in MPI_Win_attach past osc_rdma_max_attach (64) attached ends, which
# 1,024 rails exceed; one rank per core, as OSU is run.
mpi=("${MPIRUN:-mpirun}" --oversubscribe --allow-run-as-root -np 2
    --bind-to core --mca osc ^ucx --mca osc_rdma_max_attach 4096)
# 4 ranks on the same cores: Open MPI binds none when oversubscribed.
mpi4=("${MPIRUN:-mpirun}" --oversubscribe --allow-run-as-root -np 4
    --bind-to none --mca osc ^ucx --mca osc_rdma_max_attach 4096)

quick=()
# The stencil's rounds.  At 1024 x 1024 compute is ~95% of an iteration,
# so rig and MPI differ by ~1% there, while this VM's rounds spread by
# 3-5% either way (bursts of noise of tens of ms): the median of 15
# rounds moved by more than the difference it was to show, and the
# verdict (the lowest of three such medians) with it.  64, the most
# rig_stencil takes, halve the median's spread for ~30 s more.
squick=(-r "${STENCIL_ROUNDS:-64}")
# Rounds of the bandwidth tests: every size measured in rounds, the
# methods interleaved in each (alternating order), each method's median
# printed: one measurement of a size lasts milliseconds, and this VM's
# memory bandwidth drifts more than that between two.  5 for bw, whose
# ratios are targets; 3 for bibw, mr and bw1 (OSU's own runs 3 times),
# which keeps the suite near 4 minutes.
brounds=(-r "${BW_ROUNDS:-5}")
orounds=(-r "${SIDE_ROUNDS:-3}")
if [ "${QUICK:-0}" = 1 ]; then
    quick=(-i 200 -x 20)
    squick=(-r 1 -i 20)
    brounds=(-r 1)
    orounds=(-r 1)
fi

stamp=$(date +%Y-%m-%d)
host=$(hostname -s)
results=${RESULTS_DIR:-$top/benchmarks/results}
mkdir -p "$results"
name=$stamp-$host
md=$results/$name.md
# RAW_DIR keeps the raw outputs (and reuses those there: re-render only).
if [ -n "${RAW_DIR:-}" ]; then
    tmp=$RAW_DIR
    mkdir -p "$tmp"
else
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
fi

commands=()
# run_as NAME COMMAND...: runs one benchmark, printing its table and
# keeping it in $tmp/NAME.txt.
run_as() {
    local b=$1
    shift
    local cmd=("$@")
    commands+=("${cmd[*]}")
    if [ -n "${RAW_DIR:-}" ] && [ -s "$tmp/$b.txt" ]; then
        cat "$tmp/$b.txt"
        return 0
    fi
    echo "+ ${cmd[*]}" >&2
    "${cmd[@]}" 2> >(grep -v 'UCX  WARN' >&2) | tee "$tmp/$b.txt"
}
# run B ARGS...: rig_osu_B on 2 ranks, into $tmp/B.txt.
run() {
    local b=$1
    shift
    run_as "$b" "${mpi[@]}" "$bin/rig_osu_$b" "$@"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# Other processes busy on the cores when the suite starts (noise).
busy=$(top -bn1 | awk 'NR > 7 && $9 + 0 >= 20 { printf "%s%s (%s%% CPU)", sep, $12, $9; sep = ", " }')
t0=$(date +%s)
run latency -b all -r 5 "${quick[@]}"
run bw -b all "${brounds[@]}" "${quick[@]}"
run bibw -b all "${orounds[@]}" "${quick[@]}"
run mr -b all "${orounds[@]}" "${quick[@]}"
run multi -b rig,mpi "${quick[@]}"
run ready
# MPI with OSU's footprint (one buffer each way), beside OSU's own.
run_as latency1 "${mpi[@]}" "$bin/rig_osu_latency" -b mpi -B 1 -r 5 "${quick[@]}"
run_as bw1 "${mpi[@]}" "$bin/rig_osu_bw" -b mpi -B 1 "${orounds[@]}" "${quick[@]}"
if [ -n "$osu_lat" ]; then
    # Three runs each, interleaved: the results take the median per size.
    for k in 1 2 3; do
        run_as osu_latency.$k "${mpi[@]}" "$osu_lat" -m 1:4194304 "${quick[@]}"
        run_as osu_bw.$k "${mpi[@]}" "$osu_bw" -m 1:4194304 "${quick[@]}"
    done
fi
# The application: 2 ranks one per core, 4 ranks on the same 2 cores.
run_as stencil2 "${mpi[@]}" "$bin/rig_stencil" "${squick[@]}"
run_as stencil4 "${mpi4[@]}" "$bin/rig_stencil" "${squick[@]}"
# The same exchanges without the arithmetic (-e): the exchange's own cost.
run_as stencil2e "${mpi[@]}" "$bin/rig_stencil" -e "${squick[@]}"
run_as stencil4e "${mpi4[@]}" "$bin/rig_stencil" -e "${squick[@]}"
# What a wait costs in each mode: how late, and how much CPU.
run_as waits "${mpi[@]}" "$bin/rig_wait_cost" $([ "${QUICK:-0}" = 1 ] && echo -i 5)
# The controller (rig_remote_*): a 64 MiB image to 3 agents beside
# MPI_Bcast, a small program's load and launch beside the same steps on
# one machine; 3 agents on the same 2 cores, and one agent.  A build
# tree only (the benchmark reads the test catalog `make` laid out there).
remote_args=(-r 10 -s 64)
if [ "${QUICK:-0}" = 1 ]; then
    remote_args=(-r 2 -s 8)
fi
have_remote=0
if [ -x "$bin/rig_remote_bench" ]; then
    have_remote=1
    run_as remote4 "${mpi4[@]}" "$bin/rig_remote_bench" "${remote_args[@]}"
    run_as remote2 "${mpi[@]}" "$bin/rig_remote_bench" "${remote_args[@]}"
fi
t1=$(date +%s)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
# Re-rendering from RAW_DIR keeps the conditions of the run that measured.
if [ -n "${RAW_DIR:-}" ]; then
    if [ -s "$tmp/meta.sh" ]; then
        . "$tmp/meta.sh"
    else
        printf 'load_before=%q\nload_after=%q\nbusy=%q\nt0=%q\nt1=%q\n' \
            "$load_before" "$load_after" "$busy" "$t0" "$t1" >"$tmp/meta.sh"
    fi
fi

# Syscalls on the inline ready path: strace rank 0 with no ready calls and
# with 2.56 million; the totals must not grow with the calls.
syscalls() {
    local n=$1
    "${mpi[@]}" bash -c 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then
            exec strace -f -c -o "$0" "$1" -i "$2"; else exec "$1" -i "$2"; fi' \
        "$tmp/strace.$n" "$bin/rig_osu_ready" "$n" >/dev/null 2>&1 || true
    awk '$NF == "total" { print $(NF-2) }' "$tmp/strace.$n" 2>/dev/null
}
if [ -n "${RAW_DIR:-}" ] && [ -s "$tmp/strace.20000" ]; then
    sys0=$(awk '$NF == "total" { print $(NF-2) }' "$tmp/strace.0")
    sys1=$(awk '$NF == "total" { print $(NF-2) }' "$tmp/strace.20000")
else
    sys0=$(syscalls 0 || true)
    sys1=$(syscalls 20000 || true)
fi
strace_cmd="${mpi[*]} bash -c 'strace -f -c (rank 0) $bin/rig_osu_ready -i N'"

# ---- parse the tables ---------------------------------------------------

# value FILE TABLE KEY COLUMN: the value in the row KEY (first field) under
# COLUMN in the TABLE-th table (headers start with "# Size", "# Run"...).
value() {
    awk -v t="$2" -v key="$3" -v col="$4" '
        /^# (Size|Run|Rails|Grid) / { n++; ci = 0
            for (i = 3; i <= NF && $i !~ /^\(/; i++) if ($i == col) ci = i - 1
            next }
        n == t && ci > 0 && $1 == key { print $ci; exit }' "$1"
}
# best FILE KEY COL...: the smallest (latency) or largest value among COLs.
best() {
    local f=$1 key=$2 mode=$3
    shift 3
    local v out=""
    for c in "$@"; do
        v=$(value "$f" 1 "$key" "$c")
        [ -z "$v" ] || [ "$v" = - ] && continue
        if [ -z "$out" ] ||
            awk -v a="$v" -v b="$out" -v m="$mode" \
                'BEGIN { exit !((m == "min") ? a < b : a > b) }'; then
            out=$v
        fi
    done
    echo "$out"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
holds() { awk -v v="$1" -v op="$2" -v lim="$3" 'BEGIN {
    ok = (op == "<=") ? v <= lim : (op == ">=") ? v >= lim : v < lim
    print ok ? "holds" : "**does not hold**" }'; }

# ns FILE KEY COLUMN: from the "# ns" rows, the small sizes again in
# nanoseconds (the table's two decimals of a microsecond are too coarse
# for a ratio at 0.1 us).
ns() {
    awk -v key="$2" -v col="$3" '
        $1 == "#" && $2 == "ns" && $3 == "Size" {
            for (i = 4; i <= NF; i++) if ($i == col) ci = i; next }
        $1 == "#" && $2 == "ns" && $3 == key && ci > 0 { print $ci; exit }' "$1"
}

# paired FILE KEY COLUMN: machine.sh's.
# rounds_of FILE: the rounds per size its header states (1 when none).
rounds_of() {
    awk '/^# Rounds: / { print $3 + 0; found = 1; exit }
        END { if (!found) print 1 }' "$1"
}

lat=$tmp/latency.txt
rig8=$(ns "$lat" 8 rig)
floor8=$(ns "$lat" 8 floor)
floor28=$(ns "$lat" 8 floor2)
mpi8=$(ns "$lat" 8 mpi)
r_floor=$(ratio "$rig8" "$floor8")
r_floor2=$(ratio "$rig8" "$floor28")
r_mpi=$(ratio "$rig8" "$mpi8")

bw_rows=""
bw_worst_ucx=""
bw_worst_mpi=""
for s in 65536 131072 262144 524288 1048576 2097152 4194304; do
    r=$(value "$tmp/bw.txt" 1 $s rig)
    u=$(value "$tmp/bw.txt" 1 $s ucx)
    m=$(best "$tmp/bw.txt" $s max mpi persistent put)
    ru=$(ratio "$r" "$u")
    rm_=$(ratio "$r" "$m")
    pu=$(paired "$tmp/bw.txt" $s ucx)
    bw_rows+="| $s | $r | $u | $m | $ru | ${pu:--} | $rm_ |"$'\n'
    # The target takes the paired ratio where there are rounds to pair:
    # the ratio of two medians still carries the drift between rounds.
    bw_worst_ucx=$(printf '%s\n%s\n' "$bw_worst_ucx" "${pu:-$ru}" | grep -v '^$' | sort -g | head -n1)
    bw_worst_mpi=$(printf '%s\n%s\n' "$bw_worst_mpi" "$rm_" | grep -v '^$' | sort -g | head -n1)
done

bw_rounds=$(rounds_of "$tmp/bw.txt")

multi=$tmp/multi.txt
m64=$(value "$multi" 1 64 rig)
m64one=$(value "$multi" 1 64 rig.single)
r_multi=$(value "$multi" 1 64 ratio) # from the unrounded latencies
rails1=$(value "$multi" 2 1 newest)
rails1024=$(value "$multi" 2 1024 newest)
rr1024=$(value "$multi" 2 1024 round_robin)
r_rails=$(ratio "$rails1024" "$rails1")

# ---- OSU beside the mpi column ---------------------------------------------

# osu NAME KEY: the median of OSU's values in the row KEY of its three
# runs' tables ($tmp/NAME.1.txt ...).
osu() {
    local f
    for f in "$tmp/$1".[123].txt; do
        awk -v key="$2" '$1 !~ /^#/ && $1 == key { print $2; exit }' "$f"
    done | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
}
# osu_spread NAME KEY: the lowest and highest of the three runs: the noise
# a difference must be read against.
osu_spread() {
    local f
    for f in "$tmp/$1".[123].txt; do
        awk -v key="$2" '$1 !~ /^#/ && $1 == key { print $2; exit }' "$f"
    done | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { if (NR) print lo ".." hi }'
}
# agree A B: "agrees" when within 10% of each other, else by how much.
agree() { awk -v a="$1" -v b="$2" 'BEGIN {
    if (a == "" || b == "" || a <= 0 || b <= 0) { print "-"; exit }
    d = (a > b ? a / b : b / a) - 1
    if (d <= 0.10) printf "agrees (%.0f%%)", d * 100
    else printf "**differs by %.0f%%**", d * 100 }'; }
osu_rows_lat=""
osu_rows_bw=""
if [ -n "$osu_lat" ]; then
    for s in 8 64 512 4096 65536 1048576 4194304; do
        o=$(osu osu_latency $s)
        m1=$(value "$tmp/latency1.txt" 1 $s mpi)
        m2=$(value "$tmp/latency.txt" 1 $s mpi)
        osu_rows_lat+="| $s | $o | $(osu_spread osu_latency $s) | $m1 | $(agree "$m1" "$o") | $m2 |"$'\n'
    done
    for s in 64 512 4096 65536 1048576 4194304; do
        o=$(osu osu_bw $s)
        m1=$(value "$tmp/bw1.txt" 1 $s mpi)
        m2=$(value "$tmp/bw.txt" 1 $s mpi)
        osu_rows_bw+="| $s | $o | $(osu_spread osu_bw $s) | $m1 | $(agree "$m1" "$o") | $m2 |"$'\n'
    done
fi

# ---- the stencil -------------------------------------------------------------

stencil_rows=""
exchange_rows=""
stencil_worst=""
stencil_worst4=""
for np in 2 4; do
    f=$tmp/stencil$np.txt
    for g in $(awk '$1 !~ /^#/ && NF > 2 { print $1 }' "$f"); do
        rt=$(stencil_ratio "$f" "$g")
        rt=${rt:-$(value "$f" 1 "$g" ratio)}
        stencil_rows+="| $np | ${g}x$g | $(stencil_cells "$f" "$g") | $(holds "$rt" ">=" 1.0) |"$'\n'
        exchange_rows+="| $np | ${g}x$g | $(stencil_cells "$tmp/stencil${np}e.txt" "$g") |"$'\n'
        stencil_worst=$(printf '%s\n%s\n' "$stencil_worst" "$rt" | grep -v '^$' | sort -g | head -n1)
        if [ "$np" = 4 ]; then
            stencil_worst4=$(printf '%s\n%s\n' "$stencil_worst4" "$rt" | grep -v '^$' | sort -g | head -n1)
        fi
    done
done
# The block mode's row at the longest gap: late (us) and CPU (%).
block_late=$(awk '$1 == "block" && $2 == "100.0" { print $3 }' "$tmp/waits.txt")
block_worst=$(awk '$1 == "block" && $2 == "100.0" { print $4 }' "$tmp/waits.txt")
block_cpu=$(awk '$1 == "block" && $2 == "100.0" { print $5 }' "$tmp/waits.txt")
stencil_waits2=$(sed -n 's/^# rig waits: //p' "$tmp/stencil2.txt")
stencil_waits4=$(sed -n 's/^# rig waits: //p' "$tmp/stencil4.txt")

ready_ns=$(awk '$1 == "rig_end_ready" { print $2 }' "$tmp/ready.txt")
readyfn_ns=$(awk '$1 == "ready_fn" { print $2 }' "$tmp/ready.txt")
if [ -n "$sys0" ] && [ -n "$sys1" ]; then
    sys_extra=$((sys1 - sys0))
    sys_word=$(holds "$sys_extra" "<" 1000)
else
    sys_extra="?"
    sys_word="not measured (strace failed)"
fi

# ---- the controller ----------------------------------------------------------

# rb FILE LABEL: the value at the end of rig_remote_bench's line LABEL.
rb() { awk -v k="$2" 'index($0, k) == 1 { print $NF; exit }' "$1"; }
remote_rows=""
remote_targets=""
if [ "$have_remote" = 1 ]; then
    for np in 4 2; do
        f=$tmp/remote$np.txt
        agents=$((np - 1))
        rt=$(rb "$f" "MPI_Bcast+MPI_Gather 64 B (rt)")
        img=$(awk '/^image to every agent \(warm\)/ { print $(NF-1); exit }' "$f")
        bc=$(awk '/^MPI_Bcast of the same bytes/ { print $(NF-1); exit }' "$f")
        ir=$(awk '/^image bandwidth \(warm\)/ { print $6; exit }' "$f")
        for step in load launch; do
            if [ $step = load ]; then
                rem=$(rb "$f" "load rtiny, every agent")
                loc=$(rb "$f" "load rtiny, here alone")
                ev=$(rb "$f" "load rtiny, local on every agent")
                seen=$(rb "$f" "load rtiny, every, rank 0's clock")
            else
                rem=$(rb "$f" "launch -> all online, every agent")
                loc=$(rb "$f" "launch -> all online, here alone")
                ev=$(rb "$f" "launch, local on every agent")
                seen=$(rb "$f" "launch, every, rank 0's clock")
            fi
            lim=$(awk -v a="$loc" -v r="$rt" 'BEGIN { printf "%.3f", a + 2 * r }')
            slim=$(awk -v a="$seen" -v r="$rt" 'BEGIN { printf "%.3f", a + r }')
            remote_rows+="| $agents | $step | $rem | $loc | $ev | $seen | $rt |"$'\n'
            remote_targets+="| $agents agent(s): $step <= here alone + 2 rt | $rem ms vs $lim ms | $(holds "$rem" "<=" "$lim") |"$'\n'
            remote_targets+="| $agents agent(s): $step <= every agent at once on rank 0's clock + rt (like for like) | $rem ms vs $slim ms | $(holds "$rem" "<=" "$slim") |"$'\n'
        done
        remote_targets+="| $agents agent(s): image (warm) bandwidth >= 0.9 x MPI_Bcast's | $img ms vs $bc ms: ${ir:--} | $(holds "${ir:-0}" ">=" 0.9) |"$'\n'
    done
fi

# ---- plots --------------------------------------------------------------

# table FILE T: the T-th table as whitespace columns, header without '#'.
table() {
    awk -v t="$2" '
        /^# (Size|Run|Rails|Grid) / { n++
            if (n == t) {
                h = $2
                for (i = 3; i <= NF && $i !~ /^\(/; i++) h = h " " $i
                print h
            }
            next }
        /^#/ || NF == 0 { next }
        n == t { print }' "$1"
}
# gnuplot's PNG terminal: pngcairo where gnuplot has it, else png.
gp_term=pngcairo
if ! gnuplot -e 'set terminal pngcairo' 2>/dev/null; then
    gp_term=png
fi
plot() {
    local data=$1 png=$2 title=$3 xlabel=$4 ylabel=$5 xfmt=${6:-%.0s%cB}
    local ncol
    ncol=$(head -n1 "$data" | awk '{ print NF }')
    gnuplot <<EOF
set terminal $gp_term size 900,600 noenhanced
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
for b in latency bw bibw mr; do
    table "$tmp/$b.txt" 1 >"$tmp/$b.dat"
done
# Without their ratio columns.
table "$multi" 1 | awk '{ NF--; print }' >"$tmp/multi.dat"
table "$multi" 2 | awk '{ NF--; print }' >"$tmp/rails.dat"
# Without best_mpi and ratio.
for np in 2 4; do
    table "$tmp/stencil$np.txt" 1 | awk '{ NF -= 2; print }' >"$tmp/stencil$np.dat"
done
plot "$tmp/latency.dat" "$results/$name-latency.png" \
    "Latency, 2 ranks on $host (lower is better)" "message size" \
    "half round trip (us)"
plot "$tmp/bw.dat" "$results/$name-bw.png" \
    "Bandwidth, 2 ranks on $host (higher is better)" "message size" \
    "MB/s"
plot "$tmp/bibw.dat" "$results/$name-bibw.png" \
    "Bi-directional bandwidth, 2 ranks on $host" "message size" "MB/s"
plot "$tmp/mr.dat" "$results/$name-mr.png" \
    "Message rate, windows of 64, 2 ranks on $host" "message size" \
    "messages/s"
plot "$tmp/multi.dat" "$results/$name-multi.png" \
    "Runs of n 8-byte transfers vs one transfer of n*8 bytes" \
    "transfers per run (n)" "half round trip (us)" "%g"
plot "$tmp/rails.dat" "$results/$name-rails.png" \
    "8-byte latency with k rails open" "rails open (k)" \
    "half round trip (us)" "%g"
plot "$tmp/stencil2.dat" "$results/$name-stencil2.png" \
    "2-D stencil, 2 ranks on 2 cores (higher is better)" "grid edge (N)" \
    "iterations/s" "%g"
plot "$tmp/stencil4.dat" "$results/$name-stencil4.png" \
    "2-D stencil, 4 ranks on 2 cores, oversubscribed (higher is better)" \
    "grid edge (N)" "iterations/s" "%g"
# The controller's steps beside their baselines: bars on a log scale.
plots=(latency bw bibw mr multi rails stencil2 stencil4)
if [ "$have_remote" = 1 ]; then
    plots+=(remote)
    {
        echo "step remote here_alone every_agent every_agent_rank0_clock"
        printf '%s' "$remote_rows" | awk -F' *[|] *' '{
            printf "\"%s agent(s): %s\" %s %s %s %s\n", $2, $3, $4, $5, $6, $7 }'
    } >"$tmp/remote.dat"
    gnuplot <<GP
set terminal $gp_term size 900,600 noenhanced
set output "$results/$name-remote.png"
set title "The controller: a small program's load and launch, remote and on one machine (lower is better)"
set ylabel "ms"
set logscale y
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set yrange [0.05:1000]
set key left top
set grid ytics
plot for [i=2:5] "$tmp/remote.dat" using i:xtic(1) title columnhead(i)
GP
fi

# ---- the results file ----------------------------------------------------

{
    echo "# rig benchmarks: $stamp on $host"
    echo
    echo "All methods measured side by side in one run, interleaved at every"
    echo "size (each size: rig, then every baseline), 2 ranks on one node,"
    echo "one per core; the stencil also at 4 ranks on the same cores."
    echo "Each size is measured in rounds, every method once a round, in"
    echo "alternating order (forwards, then backwards), and each value is"
    echo "the median of its method's rounds ($(rounds_of "$tmp/latency.txt") for latency, $bw_rounds for"
    echo "bandwidth, $(rounds_of "$tmp/bibw.txt") for bi-directional bandwidth and message"
    echo "rate: the \`# Rounds\` line of each table)."
    echo "Every baseline keeps a rail's footprint, 2 copies of each message"
    echo "of a run per direction (\`-B 1\`: OSU's one buffer), and is checked"
    echo "as rig is. Load average before: $load_before; after:"
    echo "$load_after. The suite took $((t1 - t0)) s."
    echo "Busy on the cores when it started: ${busy:-nothing else}."
    echo
    echo "Command: \`bash benchmarks/run.sh $build\` (or"
    echo "\`bash tools/quickstart.sh bench\`), which ran:"
    echo
    echo '```'
    printf '%s\n' "${commands[@]}"
    echo "$strace_cmd   # N = 0 and 20000"
    echo '```'
    echo
    echo "## Targets (ISSUE 9)"
    echo
    echo "| target | measured | verdict |"
    echo "|---|---|---|"
    echo "| 8 B rail latency <= 1.2 x floor | rig $rig8 ns, floor $floor8 ns: $r_floor (floor2, the count in a line of its own as in a rig end: $floor28 ns, rig/floor2 $r_floor2) | $(holds "$r_floor" "<=" 1.2) |"
    echo "| 8 B rail latency <= 0.85 x MPI_Send/MPI_Recv | rig $rig8 ns, mpi $mpi8 ns: $r_mpi | $(holds "$r_mpi" "<=" 0.85) |"
    echo "| bandwidth 64 KiB..4 MiB >= 0.9 x raw UCX | worst ratio $bw_worst_ucx ($([ "$bw_rounds" -gt 1 ] && echo "paired by round, $bw_rounds rounds" || echo "one round")) | $(holds "$bw_worst_ucx" ">=" 0.9) |"
    echo "| bandwidth 64 KiB..4 MiB >= 1.2 x MPI's best | worst ratio $bw_worst_mpi | $(holds "$bw_worst_mpi" ">=" 1.2) |"
    echo "| 64 transfers per run <= 3 x one transfer of the same size | $m64 us vs $m64one us: $r_multi | $(holds "$r_multi" "<=" 3) |"
    echo "| 1,024 rails open <= 1.2 x one | $rails1024 us vs $rails1 us: $r_rails (round-robin over all 1,024: $rr1024 us) | $(holds "$r_rails" "<=" 1.2) |"
    echo "| inline ready < 100 ns median | rig_end_ready $ready_ns ns, ready_fn $readyfn_ns ns | $(holds "$ready_ns" "<" 100) |"
    echo "| no syscall on the inline ready path | rank 0 made $sys_extra more syscalls with 2,560,000 ready calls than with none (strace -f -c: $sys0 vs $sys1) | $sys_word |"
    echo
    echo "Bandwidth ratios (MB/s; MPI's best of mpi, persistent and put):"
    echo "each value is the median of its method's $bw_rounds rounds at that"
    echo "size, every method measured once a round, in alternating order"
    echo "(rig, ucx, rig_mpi, mpi, persistent, put, then backwards); rig/ucx"
    echo "is the ratio of the medians, *paired* the median over rounds of"
    echo "rig/ucx within a round (drift between rounds taken out; the"
    echo "target above takes this one)."
    echo
    echo "| size | rig | ucx | MPI best | rig/ucx | rig/ucx paired | rig/MPI |"
    echo "|---|---|---|---|---|---|---|"
    printf '%s' "$bw_rows"
    echo
    echo "## Application: a 2-D stencil (ISSUE 18)"
    echo
    echo "\`rig_stencil\`: a radius-2 star stencil over a 2-D grid of ranks,"
    echo "halos of width 2 with up to 4 neighbours per iteration, the result"
    echo "checked exactly after every measurement; iterations per second,"
    echo "the median of ${squick[1]} rounds of about 30 ms, methods interleaved,"
    echo "forwards and backwards in turn; the ratio pairs rig with each MPI"
    echo "method round by round (against load that drifts), its median, and"
    echo "is the lowest of the three: that method is MPI's best (the"
    echo "\`# paired\` lines of the tables give all three). The middle half of"
    echo "the rounds is the spread of rig's per-round ratios against that method"
    echo "(lower to upper quartile): a ratio whose middle half straddles 1.0 is"
    echo "a tie in that sitting. rig waits at 2 ranks:"
    echo "$stencil_waits2; at 4 ranks: $stencil_waits4."
    echo
    echo "| target | measured | verdict |"
    echo "|---|---|---|"
    echo "| rails >= 1.0 x MPI's best (isend, persistent, neighbor) in every configuration | worst ratio $stencil_worst | $(holds "$stencil_worst" ">=" 1.0) |"
    echo "| rails at 4 ranks on 2 cores no slower than MPI at 4 ranks on 2 cores | worst ratio $stencil_worst4 | $(holds "$stencil_worst4" ">=" 1.0) |"
    echo
    echo "| ranks | grid | rig (it/s) | MPI's best (it/s) | rig/MPI | middle half of the rounds | >= 1.0 |"
    echo "|---|---|---|---|---|---|---|"
    printf '%s' "$stencil_rows"
    echo
    echo "Below, the halo exchange alone (\`rig_stencil -e\`: the same exchanges,"
    echo "packing and unpacking, no arithmetic; each iteration adds 1 to the"
    echo "strips a rank sends, and every halo point is checked after every"
    echo "measurement). Where compute is most of an iteration (1024x1024)"
    echo "the application's ratio above moves with the sitting's noise more"
    echo "than with the exchange; this is the exchange's own ratio, measured"
    echo "as above:"
    echo
    echo "| ranks | grid | rig (exchanges/s) | MPI's best (exchanges/s) | rig/MPI | middle half of the rounds |"
    echo "|---|---|---|---|---|---|"
    printf '%s' "$exchange_rows"
    echo
    echo "## Waits that share the CPU (ISSUE 18)"
    echo
    echo "\`rig_wait_cost\`: the receiver waits while the sender sleeps a gap,"
    echo "then stores the time into a run; how late the wait noticed it and"
    echo "the share of a core it burnt meanwhile, per wait mode (\`RIG_WAIT\`)."
    echo "A peer's store wakes no sleeping wait: \`block\` notices it within"
    echo "its sleep period (\`RIG_WAIT_SLEEP_US\`, 1000 us by default)."
    echo
    echo "| target | measured | verdict |"
    echo "|---|---|---|"
    echo "| block: a 100 ms wait burns < 5% of a core | $block_cpu% | $(holds "${block_cpu:-100}" "<" 5) |"
    echo "| block: notices a peer's arrival within RIG_WAIT_SLEEP_US (1 ms) after a 100 ms wait | median $block_late us (worst $block_worst us) | $(holds "${block_late:-1e9}" "<=" 1000) |"
    echo
    echo '```'
    grep -v '^$' "$tmp/waits.txt"
    echo '```'
    echo
    echo "## The controller (ISSUE 16)"
    echo
    if [ "$have_remote" = 1 ]; then
        echo "\`rig_remote_bench\`: rank 0 is the controller, the other ranks its"
        echo "agents (native executor); 3 agents on the same 2 cores (4 ranks),"
        echo "then 1 (2 ranks); medians of the rounds. A remote step"
        echo "(rig_remote_load of the small program rtiny; rig_remote_launch"
        echo "until every node is online) beside the same step on one machine:"
        echo "*here alone* (rank 0 on idle cores), *every agent* (every agent at"
        echo "once, each on its own clock, the slowest) and *every agent, rank"
        echo "0's clock* (the same from rank 0's go to the slowest agent's word:"
        echo "it counts an agent's wait for a core, as a remote step's clock"
        echo "does, and holds one of the two round trips a remote step may add;"
        echo "rank 0 waits for the word as the controller waits for replies)."
        echo "rt: MPI_Bcast + MPI_Gather of 64 B. The image: a payload of"
        echo "${remote_args[3]} MiB to every agent (the slowest agent's receipt), beside a"
        echo "bare MPI_Bcast of the same bytes. Each round opens the layer, loads"
        echo "and unloads rtiny untimed (a session's first command pays one-time"
        echo "costs the baselines pay in their first round only), then times the"
        echo "load and launch, and the images last (a launch right after a 64 MiB"
        echo "image's unload was 0.5-0.8 ms slower on the agent itself)."
        echo
        echo "| target | measured | verdict |"
        echo "|---|---|---|"
        printf '%s' "$remote_targets"
        echo
        echo "| agents | step | remote (ms) | here alone | every agent | every agent, rank 0's clock | rt |"
        echo "|---|---|---|---|---|---|---|"
        printf '%s' "$remote_rows"
    else
        echo "rig_remote_bench runs from a build tree only (it reads the test"
        echo "catalog \`make\` lays out there): not run."
    fi
    echo
    echo "## OSU Micro-Benchmarks beside the mpi column"
    echo
    if [ -n "$osu_lat" ]; then
        echo "OSU's \`osu_latency\` and \`osu_bw\` ($(sed -n 's/^# OSU MPI Latency Test /OSU /p' "$tmp/osu_latency.1.txt" | head -n1), \`$osu_lat\`)"
        echo "on the same \`mpirun\` line (the median of 3 runs), beside this"
        echo "suite's \`mpi\` method with OSU's footprint (\`-B 1\`: one buffer"
        echo "each way, the median of $(rounds_of "$tmp/latency1.txt") rounds for latency, of $(rounds_of "$tmp/bw1.txt") for"
        echo "bandwidth) and with a rail's (2"
        echo "copies, the tables above); agreement within 10% expected for the"
        echo "first, on a quiet machine: OSU's own spread over its 3 runs says"
        echo "how much of a difference the machine's noise explains."
        echo
        echo "| size | osu_latency (us) | its 3 runs | mpi -B 1 (us) | agreement | mpi, 2 copies (us) |"
        echo "|---|---|---|---|---|---|"
        printf '%s' "$osu_rows_lat"
        echo
        echo "| size | osu_bw (MB/s) | its 3 runs | mpi -B 1 (MB/s) | agreement | mpi, 2 copies (MB/s) |"
        echo "|---|---|---|---|---|---|"
        printf '%s' "$osu_rows_bw"
    else
        echo "OSU_DIR was not set: OSU's osu_latency and osu_bw were not run."
        echo "The mpi method with OSU's footprint (\`-B 1\`) is in the tables"
        echo "latency1 and bw1 below."
    fi
    echo
    echo "## Plots"
    echo
    for p in "${plots[@]}"; do
        echo "![$p]($name-$p.png)"
    done
    echo
    echo "## Tables (OSU Micro-Benchmarks 7 format)"
    for b in latency bw bibw mr multi ready latency1 bw1 stencil2 stencil4 \
        stencil2e stencil4e remote4 remote2 osu_latency.1 osu_bw.1; do
        [ -s "$tmp/$b.txt" ] || continue
        echo
        case $b in
        latency1 | bw1) echo "### rig_osu_${b%1} -b mpi -B 1 (OSU's footprint)" ;;
        stencil2 | stencil4) echo "### rig_stencil, ${b#stencil} ranks" ;;
        stencil2e | stencil4e) echo "### rig_stencil -e (the exchange alone), ${b:7:1} ranks" ;;
        remote4 | remote2) echo "### rig_remote_bench, ${b#remote} ranks" ;;
        osu_*) echo "### ${b%.1} (OSU Micro-Benchmarks, the first of 3 runs)" ;;
        *) echo "### rig_osu_$b" ;;
        esac
        echo
        echo '```'
        grep -v '^$' "$tmp/$b.txt"
        echo '```'
    done
    echo
    rig_machine "$rig_info"
} >"$md"

echo
echo "run.sh: wrote $md and its plots ($results/$name-*.png)"
sed -n '/^## Targets/,/^## Plots/p' "$md" | sed '$d'
