# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# The results files' "## Machine" section, one copy for both modes of the
# benchmarks (sourced by run.sh and multihost.sh; installed beside
# rig_osu_run).
#
#   rig_machine RIG_INFO [LINE...]
#
# prints the section in Markdown: the CPUs, memory, kernel, MPI and UCX
# of this machine, each LINE given (what a mode adds: the link of the
# simulated hosts), then what RIG_INFO (the rig_info program) prints.

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
