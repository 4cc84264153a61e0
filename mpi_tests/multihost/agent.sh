#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Open MPI's plm_rsh_agent for the simulated hosts of hosts.sh: where ssh
# would log into HOST and run the command there, this enters HOST's network
# namespace, a new UTS namespace named after it and a new System V IPC
# namespace, and runs the command.  The IPC namespace is what tells UCX's
# shared-memory transports that two hosts are two machines: they compare
# the kernel's boot id and, outside the first namespace, the IPC
# namespace, so without one a rank maps a rank's memory on another host
# (they share /dev/shm).  Open MPI's daemon of the host and the ranks it
# starts share the host's namespaces, as the processes of one machine do.
#
# Usage (by mpirun): agent.sh [ssh-style options] HOST COMMAND WORDS...
# HOST is a host's address; $RIG_MH_HOSTS (the run's hosts file: address,
# namespace, bridge port per line) maps it to its namespace.
set -u
while [ $# -gt 0 ]; do
    case $1 in
        -*) shift ;;
        *) break ;;
    esac
done
host=${1:?agent.sh: no host}
shift
ns=$(awk -v h="$host" '$1 == h { print $2 }' "${RIG_MH_HOSTS:?agent.sh: RIG_MH_HOSTS is not set}")
if [ -z "$ns" ]; then
    echo "agent.sh: $host is not a host of $RIG_MH_HOSTS" >&2
    exit 1
fi
# The words are a command line for a remote shell, as ssh passes them.
exec ip netns exec "$ns" unshare --uts --ipc sh -c "hostname $ns && $*"
