#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Runs one MPI test described by a .mpi file under mpirun, with a hang guard.
#
# Used as the automake LOG_COMPILER of .mpi tests: `mpitest.sh FILE.mpi`.
# FILE.mpi holds key=value lines (# starts a comment):
#   np=3                       ranks (required)
#   prog=mpi_tests/test_rails  program, relative to $top_builddir (required)
#   args=--small 100           its arguments (optional)
#   short=--small 10           the arguments instead when RIG_TEST_SHORT=1:
#                              a long soak's shorter form, for builds that
#                              run the suite again to check other things
#                              (CI's sanitizer and MPICH stages; the long
#                              form runs in the plain build)
#   env=RIG_UCX_TLS=tcp,self   VAR=VALUE words exported to every rank
#   mca=NAME VALUE             an Open MPI MCA setting (may repeat; not
#                              applied under MPICH, which has no MCA)
#   timeout=300                seconds before the run counts as hung (300)
#   mpirun=--enable-recovery   more launcher options, written as Open MPI's
#                              mpirun takes them (the launcher below turns
#                              them into MPICH's where MPICH has them)
#   status=nonzero             the run must end with a nonzero status (a
#                              rank is killed on purpose); default zero
#   expect=TEXT                some rank printed TEXT (a fixed string, on
#                              stdout or stderr; may repeat): what a rank
#                              that cannot report for itself says as it
#                              ends
# Exit: 1 for a FAIL line, a wrong exit status, a timeout or a rank left
# running after mpirun ended -- whatever any rank printed besides; else 77
# when a rank printed "SKIP: reason"; 99 for a bad .mpi file; 0 pass.
#
# Every rank gets RIG_TEST_RUN=<unique id>: after the run, processes that
# still carry it are orphans (killed, and the test fails).  Shared-memory
# files that appeared in /dev/shm during the run, that no process maps any
# more and that are 3 s old (what a killed rank's UCX and Open MPI leave,
# not what a concurrent run is making) are removed.
set -u

# ---- the launcher --------------------------------------------------------
# One place knows how each MPI's launcher is spoken to.  MPIRUN is the
# launcher configure found and RIG_MPI_FLAVOR (openmpi, mpich or other)
# whose it is; run by hand, the flavour is read from `$MPIRUN --version`.
#   launch_np N               ranks
#   launch_env VAR            forward VAR (set here) to every rank
#   launch_env_value VAR VAL  set VAR=VAL in the ranks only
#   launch_mca NAME VALUE     an Open MPI MCA setting
#   launch_opt OPT            an Open MPI mpirun option
# each appends to $launch; launch_setup sets what every run has.  A run
# this MPI's launcher cannot do sets launch_skip to why (exit 77).
: "${MPIRUN:=mpirun}"
if [ -z "${RIG_MPI_FLAVOR:-}" ]; then
    case $("$MPIRUN" --version 2>&1) in
        *"Open MPI"* | *OpenRTE*) RIG_MPI_FLAVOR=openmpi ;;
        *HYDRA* | *MPICH*) RIG_MPI_FLAVOR=mpich ;;
        *) RIG_MPI_FLAVOR=other ;;
    esac
fi
launch=
launch_note=
launch_skip=
case $RIG_MPI_FLAVOR in
    mpich)
        # Hydra starts any number of ranks on this host and forwards the
        # whole environment by default; -genv sets a variable in the ranks.
        launch_setup() { :; }
        launch_np() { launch="$launch -n $1"; }
        launch_env() { :; }
        launch_env_value() { launch="$launch -genv $1 $2"; }
        launch_mca() {
            launch_note="$launch_note (Open MPI's $1 not applied: MPICH has no MCA)"
        }
        launch_opt() {
            case $1 in
                # Open MPI's way of letting survivors live on after a rank
                # dies.  Hydra's nearest, -disable-auto-cleanup, leaves them
                # running, but MPICH 4.0 (ch4:ucx) kills a survivor as
                # soon as it makes an MPI call that involves the dead rank
                # (rig_job_close is collective), MPIR_CVAR_ENABLE_FT=1 or
                # not, and the job's status is the killed rank's (9): the
                # survivors' verdict cannot be had, so the run is skipped.
                --enable-recovery)
                    launch_skip="MPICH 4.0 kills survivors of a killed rank at their next MPI call that involves it (rig_job_close is collective; -disable-auto-cleanup and MPIR_CVAR_ENABLE_FT=1 do not help), and Hydra's status is the killed rank's: no equivalent of Open MPI's --enable-recovery"
                    ;;
                *) launch="$launch $1" ;;
            esac
        }
        ;;
    *)
        # --oversubscribe: more ranks than cores on small machines.  No
        # osc: rig runs with whatever one-sided components Open MPI picks.
        # Each run its own session directory: two mpiruns that start
        # together race on creating and removing /tmp/ompi.HOST.UID, and
        # the loser fails orte_init ("mkdir ... File exists").
        launch_setup() {
            launch="$launch --oversubscribe --allow-run-as-root"
            session=$(mktemp -d "${TMPDIR:-/tmp}/mpitest-ompi.XXXXXX") || exit 99
            trap 'rm -rf "$session"' EXIT
            OMPI_MCA_orte_tmpdir_base=$session
            export OMPI_MCA_orte_tmpdir_base
        }
        launch_np() { launch="$launch -np $1"; }
        launch_env() { launch="$launch -x $1"; }
        launch_env_value() { launch="$launch -x $1=$2"; }
        launch_mca() { launch="$launch --mca $1 $2"; }
        launch_opt() { launch="$launch $1"; }
        ;;
esac

spec=$1
[ -r "$spec" ] || { echo "mpitest: cannot read $spec"; exit 99; }
np=
prog=
args=
short=
envs=
mcas=
mpiopts=
want=zero
expects=
limit=300
while IFS= read -r line || [ -n "$line" ]; do
    case $line in
        ''|'#'*) continue ;;
        np=*) np=${line#np=} ;;
        prog=*) prog=${line#prog=} ;;
        args=*) args=${line#args=} ;;
        short=*) short=${line#short=} ;;
        env=*) envs="$envs ${line#env=}" ;;
        mca=*) mcas="$mcas${mcas:+
}${line#mca=}" ;;
        timeout=*) limit=${line#timeout=} ;;
        mpirun=*) mpiopts="$mpiopts ${line#mpirun=}" ;;
        status=zero|status=nonzero) want=${line#status=} ;;
        expect=*) expects="$expects${expects:+
}${line#expect=}" ;;
        *) echo "mpitest: $spec: unknown line: $line"; exit 99 ;;
    esac
done < "$spec"
[ -n "$np" ] && [ -n "$prog" ] || { echo "mpitest: $spec needs np= and prog="; exit 99; }
if [ "${RIG_TEST_SHORT:-0}" = 1 ] && [ -n "$short" ]; then
    args=$short
fi

: "${top_builddir:=.}"
exe=$top_builddir/$prog
[ -x "$exe" ] || { echo "mpitest: $exe is not built"; exit 99; }

launch_setup
launch_np "$np"
# Each VAR=VALUE is exported here and forwarded to the ranks, and so is
# RIG_LOG when set.
for kv in $envs; do
    export "$kv"
    launch_env "${kv%%=*}"
done
[ -n "${RIG_LOG:-}" ] && launch_env RIG_LOG
# Only the ranks carry it (not exported here: grep would match itself).
RIG_TEST_RUN=mpitest.$$.$(date +%s%N)
launch_env_value RIG_TEST_RUN "$RIG_TEST_RUN"
if [ -n "$mcas" ]; then
    while read -r name value; do
        launch_mca "$name" "$value"
    done <<EOF_MCA
$mcas
EOF_MCA
fi
for o in $mpiopts; do
    launch_opt "$o"
done

# The shared-memory files of this run: new since it began, mapped by no one
# -- and at least 3 s old.  Other runs go on at the same time (make -j,
# other users): UCX makes its file, maps it and unlinks it within
# microseconds, and a file removed in between fails that run's UCX
# ("shm_unlink ... failed", "Shared memory error").  A younger file is
# looked at again once it is 3 s old, by when its maker has mapped it.
shm_before=$(ls /dev/shm 2>/dev/null | sort)
shm_cleanup() {
    for f in $(ls /dev/shm 2>/dev/null | sort); do
        case $f in
            ucx_shm_posix_*|vader_segment.*) ;;
            *) continue ;;
        esac
        echo "$shm_before" | grep -qxF "$f" && continue
        made=$(stat -c %Y "/dev/shm/$f" 2>/dev/null) || continue
        age=$(($(date +%s) - made))
        [ "$age" -ge 3 ] || sleep $((3 - age))
        [ -e "/dev/shm/$f" ] || continue
        grep -qsF "/dev/shm/$f" /proc/[0-9]*/maps && continue
        rm -f "/dev/shm/$f" && echo "mpitest: removed /dev/shm/$f (left by a dead rank)"
    done
}
orphans() {
    grep -lsa "RIG_TEST_RUN=$RIG_TEST_RUN" /proc/[0-9]*/environ 2>/dev/null |
        sed 's|/proc/\([0-9]*\)/environ|\1|'
}

# Under ASan, leak reports must unwind through Open MPI's and UCX's frames
# (built without frame pointers) for tests/sanitizers/lsan.supp to match
# them; the fast unwinder stops there and reports "<unknown module>".
if [ -n "${ASAN_OPTIONS:-}" ]; then
    ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
    export ASAN_OPTIONS
fi

if [ -n "$launch_skip" ]; then
    echo "SKIP: $launch_skip"
    exit 77
fi
out=$(mktemp "${TMPDIR:-/tmp}/mpitest.XXXXXX") || exit 99
echo "mpitest: np=$np $prog $args [$envs ] timeout ${limit}s"
echo "mpitest: $MPIRUN$launch ($RIG_MPI_FLAVOR)$launch_note"
start=$(date +%s)
# shellcheck disable=SC2086
timeout -k 10 "$limit" "$MPIRUN" $launch "$exe" $args > "$out" 2>&1
rc=$?
took=$(( $(date +%s) - start ))
cat "$out"
# A rank the launcher has just killed (or that killed itself at the end of
# a test, on a loaded machine) may still be exiting: it gets 3 s to go
# before it counts as left running.
left=$(orphans)
waited=0
while [ -n "$left" ] && [ "$waited" -lt 30 ]; do
    sleep 0.1
    waited=$((waited + 1))
    left=$(orphans)
done
if [ -n "$left" ]; then
    echo "mpitest: ranks left running after mpirun ended:" $left
    # shellcheck disable=SC2086
    kill -9 $left 2>/dev/null
fi
# Only after a rank was killed on purpose: another test running beside
# this one may hold a file that is briefly mapped by no one.
[ "$want" = nonzero ] || [ -n "$mpiopts" ] && shm_cleanup
[ -z "$left" ] || { rm -f "$out"; exit 1; }
# mpirun itself exits 137 when a rank was SIGKILLed: a timeout is told by
# the time taken.
if { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && [ "$took" -ge "$limit" ]; then
    echo "mpitest: TIMEOUT after ${limit}s (hang guard)"
    rm -f "$out"
    exit 1
fi
# A skip never hides a failure: one rank's SKIP line says nothing of the
# others, so a FAIL line or a wrong exit status (a rank that crashed or
# aborted) fails the test first, and only a run that ended as it should
# is then a skip if a rank printed SKIP.
skipped=false
grep -q '^SKIP:' "$out" && skipped=true
if grep -q '^FAIL' "$out"; then
    rm -f "$out"
    exit 1
fi
if ! $skipped && [ -n "$expects" ]; then
    while IFS= read -r e; do
        grep -qF -- "$e" "$out" && continue
        echo "mpitest: no rank printed: $e"
        rm -f "$out"
        exit 1
    done <<EOF_EXPECT
$expects
EOF_EXPECT
fi
rm -f "$out"
if [ "$want" = nonzero ]; then
    if [ $rc -eq 0 ]; then
        # The rank meant to die did not: fine only if the test said why.
        $skipped && exit 77
        echo "mpitest: exit status 0, expected nonzero"
        exit 1
    fi
    echo "mpitest: exit status $rc, as expected (ended in ${took}s)"
    exit 0
fi
[ $rc -eq 0 ] || { echo "mpitest: exit status $rc"; exit 1; }
$skipped && exit 77
exit 0
