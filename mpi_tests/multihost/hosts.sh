# SPDX-License-Identifier: BSD-3-Clause
# Simulated hosts on one machine, sourced by the multi-host test driver and
# benchmarks: network namespaces joined by veth pairs to a bridge, each
# with its own host name and System V IPC namespace (entered at launch,
# agent.sh), so that Open MPI, UCX and rig see N machines that reach each
# other only over TCP.
#
#   mh_check              why this machine cannot (prints it, returns 1)
#   mh_sweep              removes what killed earlier runs left behind
#   mh_up N               makes N hosts (N in 1..9); sets MH_* below
#   mh_down               removes everything mh_up made (idempotent)
#   mh_mpirun_args [PPN]  the mpirun options that launch into the hosts,
#                         PPN ranks a host; with MH_SHM=1, ranks of one
#                         host meet through shared memory, as on real
#                         hosts, else every pair of ranks over TCP
#
# Every name starts with "rigmh<ID>", ID being the process id of the shell
# that ran mh_up: bridge rigmh<ID>b, host-side ports rigmh<ID>p<i>,
# namespaces (and host names) rigmh<ID>h<i>; inside a namespace the port is
# eth0.  While the hosts live, that shell holds an flock on
# $MH_RUN/<ID>.lock; mh_sweep removes the objects of any ID whose lock is
# free (its owner died, even by SIGKILL), killing the processes left in
# their namespaces and those that carry its RIG_MH_RUN (exported by mh_up,
# inherited by everything started after it).  The subnet is 10.222.K.0/24 for the first K (from a
# start that depends on ID) that no address or route of this machine
# overlaps and no live run claims; host i is 10.222.K.(i+1), the bridge
# 10.222.K.254 (mpirun, in this namespace, reaches the daemons there).
# IPv6 is off on every link made, so nothing is sent but the test's own
# IPv4 traffic between these addresses.
#
# Needs root, ip (iproute2), unshare and nsenter (util-linux), flock, and
# a kernel with network namespaces, veth and bridges.  Safe to source in a
# script under set -euo pipefail.

MH_RUN=${MH_RUN:-/run/rig-multihost}
MH_PREFIX=rigmh

# Set by mh_up.
MH_ID=
MH_N=0
MH_NET=   # 10.222.K
MH_DIR=   # $MH_RUN/<ID>: hostfile, agent map, control script state
MH_HOSTS= # host names, space separated
MH_UP_TIMES= # how long mh_up's steps took, for the log

mh_log() {
    echo "multihost: $*" >&2
}

mh_check() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "needs root (network namespaces, veth pairs, a bridge)"
        return 1
    fi
    local t
    for t in ip unshare nsenter flock; do
        if ! command -v "$t" >/dev/null 2>&1; then
            echo "needs $t (iproute2 / util-linux)"
            return 1
        fi
    done
    # A probe namespace with a veth pair: proves namespaces and veth work
    # here (containers without CAP_NET_ADMIN or CAP_SYS_ADMIN fail).
    local probe=${MH_PREFIX}$$x
    if ! ip netns add "$probe" 2>/dev/null; then
        echo "cannot make a network namespace (ip netns add failed)"
        return 1
    fi
    local ok=0
    if ip link add "${probe}v" type veth peer name eth0 netns "$probe" \
        2>/dev/null && ip link add "${probe}b" type bridge 2>/dev/null &&
        unshare --uts --ipc true 2>/dev/null; then
        ok=1
    fi
    ip link del "${probe}v" 2>/dev/null || true
    ip link del "${probe}b" 2>/dev/null || true
    ip netns del "$probe" 2>/dev/null || true
    if [ $ok != 1 ]; then
        echo "cannot make veth pairs, bridges, UTS or IPC namespaces here"
        return 1
    fi
    return 0
}

# Whether run ID's lock is held (its owner lives).
mh_alive() {
    local lock=$MH_RUN/$1.lock
    [ -e "$lock" ] || return 1
    ! flock -n "$lock" true 2>/dev/null
}

# Kills the processes left in namespace $1 (ours: started into it by a run
# of these scripts), TERM then KILL, bounded.
mh_kill_in() {
    local ns=$1 pids i
    for i in 1 2 3 4 5 6 7 8 9 10; do
        pids=$(ip netns pids "$ns" 2>/dev/null || true)
        [ -n "$pids" ] || return 0
        if [ $i -lt 5 ]; then
            # shellcheck disable=SC2086
            kill -TERM $pids 2>/dev/null || true
        else
            # shellcheck disable=SC2086
            kill -KILL $pids 2>/dev/null || true
        fi
        sleep 0.2
    done
}

# Kills what run $1 started outside the hosts too (mpirun and its
# wrappers): every process whose environment has RIG_MH_RUN=rigmh$1
# (mh_up exports it), but this shell; TERM, then KILL.
mh_kill_marked() {
    local id=$1 pids p i
    for i in 1 2 3 4 5 6; do
        pids=$(grep -lsaz "^RIG_MH_RUN=${MH_PREFIX}${id}\$" \
            /proc/[0-9]*/environ 2>/dev/null |
            sed 's|/proc/\([0-9]*\)/environ|\1|' | grep -vx "$$" || true)
        [ -n "$pids" ] || return 0
        for p in $pids; do
            if [ $i -lt 3 ]; then
                kill -TERM "$p" 2>/dev/null || true
            else
                kill -KILL "$p" 2>/dev/null || true
            fi
        done
        sleep 0.2
    done
}

# Removes the objects of run $1 (idempotent).
mh_remove() {
    local id=$1 ns link
    mh_kill_marked "$id"
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        case $ns in
            "${MH_PREFIX}${id}h"[0-9]) ;;
            *) continue ;;
        esac
        mh_kill_in "$ns"
        ip netns del "$ns" 2>/dev/null || true
    done
    for link in $(ip -o link show 2>/dev/null |
        awk -F': ' '{ sub(/@.*/, "", $2); print $2 }'); do
        case $link in
            "${MH_PREFIX}${id}p"[0-9] | "${MH_PREFIX}${id}b")
                ip link del "$link" 2>/dev/null || true
                ;;
        esac
    done
    rm -rf "${MH_RUN:?}/$id"
    rm -f "$MH_RUN/$id.lock" "$MH_RUN/$id.net"
}

mh_sweep() {
    local ids id
    ids=$(
        {
            ip netns list 2>/dev/null | awk '{print $1}'
            ip -o link show 2>/dev/null |
                awk -F': ' '{ sub(/@.*/, "", $2); print $2 }'
            ls "$MH_RUN" 2>/dev/null || true
        } | sed -n "s/^${MH_PREFIX}\([0-9][0-9]*\)[bhp].*/\1/p
                    s/^\([0-9][0-9]*\)\(\.lock\|\.net\)\{0,1\}$/\1/p" |
            sort -u
    )
    for id in $ids; do
        [ "$id" = "$MH_ID" ] && continue
        if ! mh_alive "$id"; then
            mh_log "removing what run $id left behind"
            mh_remove "$id"
        fi
    done
}

# Whether 10.222.$1.0/24 overlaps an address or a route of this machine
# (any table) or is claimed by a live run.
mh_net_used() {
    local k=$1 f
    for f in "$MH_RUN"/*.net; do
        [ -e "$f" ] || continue
        [ "$(cat "$f")" = "10.222.$k" ] || continue
        mh_alive "$(basename "$f" .net)" && return 0
    done
    {
        ip -4 -o addr show 2>/dev/null | awk '{print $4}'
        ip -4 route show table all 2>/dev/null | awk '{print $1}'
    } | awk -v k="$k" '
        function ip2n(s, a) { split(s, a, "."); return ((a[1] * 256 + a[2]) * 256 + a[3]) * 256 + a[4] }
        $1 == "default" || $1 == "" { next }
        {
            split($1, p, "/"); len = (p[2] == "" ? 32 : p[2])
            if (p[1] !~ /^[0-9.]+$/ || len == 0) next
            # the prefix of the shorter of the two masks must agree
            m = (len < 24 ? len : 24); span = 2 ^ (32 - m)
            a = int(ip2n(p[1]) / span); b = int(ip2n("10.222." k ".0") / span)
            if (a == b) used = 1
        }
        END { exit !used }'
}

mh_up() {
    local n=$1 i k start ns port
    if [ "$n" -lt 1 ] || [ "$n" -gt 9 ]; then
        mh_log "mh_up: $n hosts (1 to 9)"
        return 1
    fi
    local t0 t1 t2
    t0=$(date +%s%N)
    mkdir -p "$MH_RUN" || return 1
    MH_ID=$$
    MH_N=$n
    MH_DIR=$MH_RUN/$MH_ID
    # The run's lock, on a descriptor no child keeps (see mh_mpirun_args).
    exec 8>"$MH_RUN/$MH_ID.lock"
    flock -n 8 || {
        mh_log "cannot lock $MH_RUN/$MH_ID.lock"
        return 1
    }
    mh_sweep
    # Pick and claim a subnet under a machine-wide lock (two runs starting
    # together must not pick the same one).
    exec 7>"$MH_RUN/pick.lock"
    flock -w 30 7 || {
        mh_log "cannot lock $MH_RUN/pick.lock"
        return 1
    }
    start=$((MH_ID % 250))
    MH_NET=
    for i in $(seq 0 249); do
        k=$(((start + i) % 250))
        if ! mh_net_used "$k"; then
            MH_NET=10.222.$k
            break
        fi
    done
    if [ -z "$MH_NET" ]; then
        exec 7>&-
        mh_log "no free subnet in 10.222.0.0/16"
        return 1
    fi
    echo "$MH_NET" >"$MH_RUN/$MH_ID.net"
    exec 7>&-
    mkdir -p "$MH_DIR"
    t1=$(date +%s%N)

    local br=${MH_PREFIX}${MH_ID}b
    ip link add "$br" type bridge || return 1
    echo 1 >"/proc/sys/net/ipv6/conf/$br/disable_ipv6" 2>/dev/null || true
    ip addr add "$MH_NET.254/24" dev "$br" || return 1
    ip link set "$br" up || return 1
    MH_HOSTS=
    : >"$MH_DIR/hosts"
    for i in $(seq 0 $((n - 1))); do
        ns=${MH_PREFIX}${MH_ID}h$i
        port=${MH_PREFIX}${MH_ID}p$i
        ip netns add "$ns" || return 1
        ip netns exec "$ns" sh -c \
            'echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6;
             echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6' \
            2>/dev/null || true
        ip link add "$port" type veth peer name eth0 netns "$ns" || return 1
        echo 1 >"/proc/sys/net/ipv6/conf/$port/disable_ipv6" 2>/dev/null || true
        ip link set "$port" master "$br" up || return 1
        ip -n "$ns" addr add "$MH_NET.$((i + 1))/24" dev eth0 || return 1
        ip -n "$ns" link set eth0 up || return 1
        ip -n "$ns" link set lo up || return 1
        MH_HOSTS="$MH_HOSTS $ns"
        echo "$MH_NET.$((i + 1)) $ns $port" >>"$MH_DIR/hosts"
    done
    MH_HOSTS=${MH_HOSTS# }
    # For the agent and ctl.sh (run by mpirun and by the ranks).
    RIG_MH_HOSTS=$MH_DIR/hosts
    RIG_MH_ROOT=/proc/$MH_ID/ns/net
    RIG_MH_CTL=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/ctl.sh
    RIG_MH_RUN=${MH_PREFIX}${MH_ID}
    export RIG_MH_HOSTS RIG_MH_ROOT RIG_MH_CTL RIG_MH_RUN
    t2=$(date +%s%N)
    # Every host answers the bridge (bounded: about 10 s each).
    for i in $(seq 0 $((n - 1))); do
        if ! mh_reach "$MH_NET.$((i + 1))"; then
            mh_log "host $i ($MH_NET.$((i + 1))) does not answer"
            return 1
        fi
    done
    MH_UP_TIMES="sweep and subnet $(((t1 - t0) / 1000000)) ms, links"
    MH_UP_TIMES="$MH_UP_TIMES $(((t2 - t1) / 1000000)) ms, reach"
    MH_UP_TIMES="$MH_UP_TIMES $((($(date +%s%N) - t2) / 1000000)) ms"
    return 0
}

# Whether the bridge's side reaches addr within about 10 s: a TCP connect
# to a port no one listens on is refused at once by a host that is up (no
# ICMP tools needed); a host not up yet fails after the ARP timeout.  In
# a subshell of this shell, not a new program: on a loaded machine a
# program's start alone can outlast a short timeout.
mh_reach() {
    local addr=$1 end=$((SECONDS + 10))
    while [ $SECONDS -lt $end ]; do
        case $( (exec 3<>"/dev/tcp/$addr/9") 2>&1) in
            *refused*) return 0 ;;
        esac
        sleep 0.1
    done
    return 1
}

mh_down() {
    [ -n "$MH_ID" ] || return 0
    mh_remove "$MH_ID"
    exec 8>&-
    MH_ID=
}

# The mpirun options that start ranks in the hosts, ppn ranks a host
# (default 1): the agent enters the host's namespaces; hosts are named by
# address, so mpirun resolves no name (no DNS query leaves the machine).
#
# Which transports the ranks of one host may use between them (MH_SHM):
# 1: UCX's defaults, shared memory within a host and TCP across hosts (the
# IPC namespace of each host, agent.sh, keeps shared memory within it), as
# a job runs on real hosts; Open MPI's too, when the caller leaves its btl
# alone.  Otherwise (the default): UCX_TLS=tcp,self, every pair of ranks
# over TCP, the 2 of one host too (tests of one rank a host see no
# difference).
mh_mpirun_args() {
    local ppn=${1:-1} hosts="" i here
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    for i in $(seq 1 "$MH_N"); do
        hosts="$hosts${hosts:+,}$MH_NET.$i:$ppn"
    done
    printf '%s\n' --host "$hosts" \
        --mca plm_rsh_agent "$here/agent.sh" \
        --mca plm_rsh_no_tree_spawn 1 \
        --mca oob_tcp_if_include "$MH_NET.0/24" \
        --mca btl_tcp_if_include "$MH_NET.0/24"
    if [ "${MH_SHM:-0}" != 1 ]; then
        printf '%s\n' -x UCX_TLS=tcp,self
    fi
    printf '%s\n' -x RIG_MH_HOSTS -x RIG_MH_ROOT -x RIG_MH_CTL
}
