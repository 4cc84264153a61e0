#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Cuts and restores the links of the simulated hosts of hosts.sh, for the
# tests that lose a host: called by a rank (inside its namespace) or by the
# driver, as root.
#
# Usage: ctl.sh OP HOST      (HOST: a host name, e.g. $(hostname))
#   eth-down    the host's own interface down: nothing in or out
#   port-down   the bridge's port to the host down (the switch side)
#   drop-out    every packet the host sends is dropped (one direction)
#   drop-in     every packet sent to the host is dropped (one direction)
#   restore     undoes all of the above for the host
# Needs $RIG_MH_HOSTS (address, namespace, bridge port per line) and
# $RIG_MH_ROOT, the bridge's network namespace (/proc/PID/ns/net).
# One direction is a tbf qdisc whose burst (10 bytes) no packet fits in:
# this kernel has no netem, prio or matchall.
set -u
op=${1:?ctl.sh: no operation}
host=${2:?ctl.sh: no host}
hosts=${RIG_MH_HOSTS:?ctl.sh: RIG_MH_HOSTS is not set}
root=${RIG_MH_ROOT:?ctl.sh: RIG_MH_ROOT is not set}
line=$(awk -v h="$host" '$2 == h || $1 == h { print $2, $3 }' "$hosts")
[ -n "$line" ] || { echo "ctl.sh: $host is not a host of $hosts" >&2; exit 2; }
ns=${line% *}
port=${line#* }
at_root() { nsenter --net="$root" "$@"; }
drop='tbf rate 1kbit burst 10 limit 1'
case $op in
    eth-down) ip -n "$ns" link set eth0 down ;;
    port-down) at_root ip link set "$port" down ;;
    # shellcheck disable=SC2086
    drop-out) tc -n "$ns" qdisc replace dev eth0 root $drop ;;
    # shellcheck disable=SC2086
    drop-in) at_root tc qdisc replace dev "$port" root $drop ;;
    restore)
        tc -n "$ns" qdisc del dev eth0 root 2>/dev/null
        at_root tc qdisc del dev "$port" root 2>/dev/null
        at_root ip link set "$port" up &&
            ip -n "$ns" link set eth0 up
        ;;
    *) echo "ctl.sh: unknown operation $op" >&2; exit 2 ;;
esac
