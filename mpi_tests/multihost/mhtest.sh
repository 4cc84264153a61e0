#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs one MPI test across simulated hosts (hosts.sh): the automake
# LOG_COMPILER of .mh tests, `mhtest.sh FILE.mh`.
#
# FILE.mh is a .mpi file (mpi_tests/mpitest.sh's keys, which runs it, with
# its hang guard and orphan check) plus:
#   hosts=2                    simulated hosts (required, 1 to 9); the np
#                              ranks fill them in order, ceil(np/hosts) each
#   osc=ucx                    Open MPI's osc components (--mca osc VALUE;
#                              optional: without it Open MPI chooses, as
#                              for a user's `mpirun -np N app`, from the
#                              system's defaults, e.g. Debian's
#                              /etc/openmpi/openmpi-mca-params.conf)
#   shm=1                      ranks of one host meet through shared
#                              memory, as on real hosts (hosts.sh: MH_SHM);
#                              without it every pair of ranks goes over TCP
# Ranks get RIG_MH_CTL (ctl.sh, to cut links), RIG_MH_HOSTS, RIG_MH_ROOT
# and RIG_MH_DIR (a directory of this run, for times the ranks share).
#
# RIG_MULTIHOST=0 skips every such test (a quick make check).
# Exit: mpitest.sh's (0 pass, 1 fail, 77 skip, 99 bad file); 77 also when
# this machine cannot make the hosts (not root, no iproute2, no namespaces:
# the reason is printed), 99 when making them failed.  The hosts are torn
# down on every way out, signals included; a run killed outright is swept
# by the next (hosts.sh).
set -u
spec=$1
here=$(cd "$(dirname "$0")" && pwd)
[ -r "$spec" ] || { echo "mhtest: cannot read $spec"; exit 99; }

hosts=
osc=
shm=0
lines=() # the .mpi file for mpitest.sh, written into the run's directory
while IFS= read -r line || [ -n "$line" ]; do
    case $line in
        hosts=*) hosts=${line#hosts=} ;;
        osc=*) osc=${line#osc=} ;;
        shm=*) shm=${line#shm=} ;;
        *) lines+=("$line") ;;
    esac
done <"$spec"
case $shm in
    0 | 1) ;;
    *)
        echo "mhtest: $spec: shm= takes 0 or 1"
        exit 99
        ;;
esac
case $hosts in
    [1-9]) ;;
    *)
        echo "mhtest: $spec needs hosts=1..9"
        exit 99
        ;;
esac
np=$(printf '%s\n' "${lines[@]}" | sed -n 's/^np=//p' | tail -n1)
case $np in
    '' | *[!0-9]*)
        echo "mhtest: $spec needs np="
        exit 99
        ;;
esac

if [ "${RIG_MULTIHOST:-1}" = 0 ]; then
    echo "SKIP: RIG_MULTIHOST=0 (the multi-host stage is turned off)"
    exit 77
fi
# Open MPI only: the launch goes through its rsh agent.
real=${MPIRUN:-mpirun}
if ! "$real" --version 2>/dev/null | grep -qE 'Open MPI|OpenRTE'; then
    echo "SKIP: the multi-host test bed launches through Open MPI's" \
        "plm_rsh_agent; $real is not Open MPI's mpirun"
    exit 77
fi

# shellcheck source=hosts.sh
. "$here/hosts.sh"
if ! why=$(mh_check); then
    echo "SKIP: simulated hosts: $why"
    exit 77
fi

child=
cleanup() {
    trap - EXIT INT TERM HUP
    if [ -n "$child" ]; then
        kill -TERM "$child" 2>/dev/null
    fi
    # mh_down kills what is left: in the hosts, and whatever carries this
    # run's RIG_MH_RUN (mpirun, in this namespace).
    mh_down
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

t0=$(date +%s%N)
if ! mh_up "$hosts"; then
    echo "mhtest: could not make $hosts simulated hosts"
    exit 99
fi
t1=$(date +%s%N)
ppn=$(((np + hosts - 1) / hosts))
tmp=$MH_DIR/test.mpi
printf '%s\n' "${lines[@]}" >"$tmp"
export RIG_MH_DIR=$MH_DIR
MH_SHM=$shm mh_mpirun_args "$ppn" >"$MH_DIR/mpirun.args"
echo "-x" >>"$MH_DIR/mpirun.args"
echo "RIG_MH_DIR" >>"$MH_DIR/mpirun.args"
echo "mhtest: $hosts hosts ($MH_HOSTS, $MH_NET.0/24) up in" \
    "$(((t1 - t0) / 1000000)) ms ($MH_UP_TIMES); $ppn rank(s) a host;" \
    "osc ${osc:-as Open MPI chooses}; within a host:" \
    "$([ "$shm" = 1 ] && echo shared memory || echo TCP)"

# mpirun.sh adds the hosts' options to mpitest.sh's mpirun line.
export RIG_MH_MPIRUN=$real RIG_MH_ARGS=$MH_DIR/mpirun.args
export RIG_MH_OSC=$osc
MPIRUN=$here/mpirun.sh sh "${top_srcdir:-$here/../..}/mpi_tests/mpitest.sh" \
    "$tmp" 8>&- &
child=$!
wait "$child"
rc=$?
child=
t2=$(date +%s%N)
cleanup
echo "mhtest: run ${rc}, hosts down; $(((t2 - t0) / 1000000)) ms in all"
exit $rc
