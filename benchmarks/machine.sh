# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# What both modes of the benchmarks share, one copy (sourced by run.sh and
# multihost.sh; installed beside rig_osu_run):
#
#   rig_machine RIG_INFO [LINE...]
#
# prints the results files' "## Machine" section in Markdown: the CPUs,
# memory, kernel, MPI and UCX of this machine, each LINE given (what a
# mode adds: the link of the simulated hosts), then what RIG_INFO (the
# rig_info program) prints;
#
#   paired FILE KEY COLUMN
#
# prints, from a table's "# paired" rows (a benchmark run in rounds),
# rig's value over COLUMN's in the same round, the median over the
# rounds, in row KEY; nothing when the table has no such rows (one
# round) or no such row or column;
#
#   stencil_ratio FILE KEY
#
# prints rig_stencil's ratio against MPI's best in row KEY to 3 places:
# the lowest of its "# paired" row (the ratio column has 2, and 0.997
# printed as 1.00 is not 1.0 or more); nothing when there is no such row
# (one round: then the ratio column is all there is);
#
#   spread FILE KEY
#
# prints, from rig_stencil's "# spread" rows, the middle half of the
# rounds' ratios against MPI's best in row KEY as "Q1-Q3"; "-" when
# there is no such row;
#
#   stencil_cells FILE KEY
#
# prints the cells of the results files' stencil rows for row KEY of a
# rig_stencil table: "rig | MPI's best (its method) | ratio | middle half".

rig_machine() {
    local info=$1
    shift
    echo "## Machine"
    echo
    echo '```'
    lscpu | grep -E '^(Architecture|Model name|CPU\(s\)|Thread|Core|Socket|NUMA node\(s\)|L1d|L2|L3|Hypervisor)' || true
    echo "memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
    echo "kernel: $(uname -r)"
    echo "MPI: $("${MPIRUN:-mpirun}" --version 2>/dev/null | head -n1)"
    echo "UCX: $(ucx_info -v 2>/dev/null | head -n1 | sed 's/^# //')"
    local line
    for line in "$@"; do
        echo "$line"
    done
    echo '```'
    echo
    echo "rig_info:"
    echo
    echo '```'
    "$info" 2>&1 || true
    echo '```'
}

paired() {
    awk -v key="$2" -v col="$3" '
        $1 == "#" && $2 == "paired" && ($3 == "Size" || $3 == "Grid") {
            ci = 0
            for (i = 4; i <= NF; i++) if ($i == col) ci = i
            next }
        $1 == "#" && $2 == "paired" && $3 == key && ci > 0 { print $ci; exit }' "$1"
}

spread() {
    awk -v key="$2" '
        $1 == "#" && $2 == "spread" && $3 == key { s = $4 "-" $5; exit }
        END { print (s == "" ? "-" : s) }' "$1"
}

stencil_ratio() {
    awk -v key="$2" '
        $1 == "#" && $2 == "paired" && $3 == key {
            for (i = 4; i <= NF; i++) if (lo == "" || $i + 0 < lo + 0) lo = $i
            exit }
        END { if (lo != "") print lo }' "$1"
}

# The ratio is stencil_ratio's, else (one round) the table's.
stencil_cells() {
    awk -v key="$2" -v rt="$(stencil_ratio "$1" "$2")" \
        -v sp="$(spread "$1" "$2")" '
        $1 == "#" && $2 == "Grid" {
            for (i = 3; i <= NF && $i !~ /^\(/; i++) name[i - 1] = $i
            next }
        $1 == key {
            for (i = 2; i <= NF; i++) v[name[i]] = $i
            who = ""
            split("isend persistent neighbor", m, " ")
            for (k = 1; k <= 3; k++)
                if ((m[k] in v) && v[m[k]] == v["best_mpi"]) who = m[k]
            printf "%s | %s (%s) | %s | %s\n", v["rig"], v["best_mpi"], who,
                rt != "" ? rt : v["ratio"], sp
            exit }' "$1"
}
