#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The CUDA backend in MPS isolation against the stand-in driver
# (tests/cuda/mock_cuda.c, libcuda.so.1 in every process: the backend's and
# its workers') and a fake nvidia-cuda-mps-control
# (tests/cuda/fake_mps_control.sh, first on PATH): tests/cuda/test_cuda_mps,
# then what the fake recorded -- a private daemon per backend with its
# folders under the job's temporary folder (TMPDIR), quit after the
# workers ended, the folders gone -- the cleanup's turn on exit and on
# SIGTERM, the refusals without the control or the worker program, and
# the environments a batch system or an administrator gives: a
# CUDA_VISIBLE_DEVICES the server applies (its clients must not), the
# Exclusive-Process compute mode, a TMPDIR too long for the pipe folder's
# sockets.
set -u
b=${top_builddir:-.}
s=${top_srcdir:-.}
worker="$b/src/mesh/cuda/rig-cuda-worker"
prog="$b/tests/cuda/test_cuda_mps"
. "$s/tests/cuda/mock_env.sh"
mkdir "$dir/bin" "$dir/job"
printf '#!/bin/sh\nexec /bin/sh "%s" "$@"\n' \
    "$(cd "$s/tests/cuda" && pwd)/fake_mps_control.sh" \
    >"$dir/bin/nvidia-cuda-mps-control"
chmod +x "$dir/bin/nvidia-cuda-mps-control"
rec="$dir/record"
RIG_MESH_CUDA_WORKER=$(cd "$(dirname "$worker")" && pwd)/rig-cuda-worker
RIG_FAKE_MPS_RECORD=$rec
export RIG_MESH_CUDA_WORKER RIG_FAKE_MPS_RECORD
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY RIG_FAKE_MPS_FAIL \
    CUDA_VISIBLE_DEVICES
fail() {
    echo "FAIL: $*"
    echo "--- the fake's record:"
    cat "$rec" 2>/dev/null
    exit 1
}
# The record's lines from the last run: every start has its private
# folders under $2 (default: the job's), one quit follows each with no
# worker alive, and nothing is left in the job's folder.
check_record() {
    what=$1
    under=${2:-$dir/job}
    starts=$(grep -c '^start ' "$rec")
    quits=$(grep -c '^quit ' "$rec")
    test "$starts" -ge 1 || fail "$what: no daemon was started"
    test "$starts" -eq "$quits" || fail "$what: $starts starts, $quits quits"
    grep '^start ' "$rec" | grep -v \
        "^start pipe=$under/rig-mps\.[A-Za-z0-9]\{6\}/pipe log=$under/rig-mps\.[A-Za-z0-9]\{6\}/log visible=" &&
        fail "$what: a daemon's folders are not private ones under $under"
    grep '^quit ' "$rec" | grep -v ' workers=0 ' &&
        fail "$what: the daemon quit while workers still ran"
    grep '^start ' "$rec" | sed 's/^start pipe=\([^ ]*\) .*/\1/' |
        while read -r p; do
            grep -q "^quit pipe=$p " "$rec" ||
                { echo "FAIL: $what: the daemon of $p never quit"; exit 1; }
            test ! -e "$p" ||
                { echo "FAIL: $what: $p is left behind"; exit 1; }
        done || exit 1
    test -z "$(ls -A "$dir/job")" ||
        fail "$what: left in TMPDIR: $(ls -A "$dir/job")"
}
# mps WHAT [VAR=VALUE...]: the tests in that environment must pass.
mps() {
    what=$1
    shift
    : >"$rec"
    out=$(env PATH="$dir/bin:$PATH" TMPDIR="$dir/job" "$@" "$prog" 2>&1)
    rc=$?
    echo "$out"
    test $rc -eq 0 || fail "$what: test_cuda_mps exited $rc"
}

# 1. The tests, then the record.
mps "the tests"
check_record "the tests"
grep -q '^quit .* clients=0$' "$rec" ||
    fail "the tests: the workers did not run on device 0"
echo "PASS: the tests' daemon: $(grep -c '^start ' "$rec") start(s), quit with no worker left, folders removed"

# 2. Exit and SIGTERM with a program running: the cleanup (after the
# native nodes) kills the worker, then quits the daemon; destroying the
# backend under a running program stops its worker, then the daemon.
for how in exit signal destroy; do
    : >"$rec"
    out=$(PATH="$dir/bin:$PATH" TMPDIR="$dir/job" "$prog" $how 2>&1)
    rc=$?
    echo "$out"
    pid=$(echo "$out" | sed -n 's/^worker \([0-9]*\)$/\1/p')
    test -n "$pid" || fail "$how: no worker started"
    if [ $how = signal ]; then
        test $rc -eq 143 || fail "$how: exited $rc, not by SIGTERM (143)"
    else
        test $rc -eq 0 || fail "$how: exited $rc"
    fi
    kill -0 "$pid" 2>/dev/null && fail "$how: worker $pid outlived its process"
    check_record "$how"
    echo "PASS: $how: worker $pid ended, then the daemon quit, folders removed"
done

# 3. A control program that fails to start the daemon: refused (a
# failure of the test program, not a skip), nothing left.
: >"$rec"
out=$(PATH="$dir/bin:$PATH" TMPDIR="$dir/job" RIG_FAKE_MPS_FAIL=1 "$prog" 2>&1)
rc=$?
echo "$out"
test $rc -eq 1 || fail "a daemon that fails to start: exit $rc, not 1"
echo "$out" | grep -q "FAIL: .*system: $dir/bin/nvidia-cuda-mps-control -d failed: exited with status 1" ||
    fail "a daemon that fails to start: no system: reason"
test -z "$(ls -A "$dir/job")" || fail "a failed start left $(ls -A "$dir/job")"
echo "PASS: a failed daemon start is refused and leaves nothing"

# 4. No worker program: unsupported, with its name.
out=$(PATH="$dir/bin:$PATH" TMPDIR="$dir/job" \
    RIG_MESH_CUDA_WORKER="$dir/nothere" "$prog" 2>&1)
rc=$?
echo "$out"
test $rc -eq 77 || fail "without the worker program: exit $rc"
echo "$out" | grep -q "unsupported: MPS isolation needs its worker program $dir/nothere" ||
    fail "without the worker program: no unsupported: reason"
echo "PASS: without the worker program: unsupported"

# 5. No control program (the fake off PATH; one on this machine's PATH or in
# the toolkit would be found, and this step is then skipped).
path=$(echo "$PATH" | tr ':' '\n' | grep -v "^$dir/bin\$" | paste -sd: -)
out=$(PATH="$path" TMPDIR="$dir/job" "$prog" 2>&1)
rc=$?
echo "$out"
if echo "$out" | grep -q "unsupported: MPS isolation needs nvidia-cuda-mps-control"; then
    test $rc -eq 77 || fail "without the control program: exit $rc"
    echo "PASS: without the control program: unsupported"
else
    echo "note: nvidia-cuda-mps-control is installed here; step 5 skipped"
fi

# 6. CUDA_VISIBLE_DEVICES=1 on a machine of two devices, as a batch system
# sets it: the daemon gets it (the server shows device 1 as its device 0),
# the workers must not, and they run on device 1.
mps "CUDA_VISIBLE_DEVICES" MOCK_CUDA_DEVICES=2 CUDA_VISIBLE_DEVICES=1
check_record "CUDA_VISIBLE_DEVICES"
grep -q '^start .* visible=1$' "$rec" ||
    fail "CUDA_VISIBLE_DEVICES: the daemon did not get it"
grep '^quit ' "$rec" | grep -qv ' clients=1$' &&
    fail "CUDA_VISIBLE_DEVICES: a worker ran on another device than 1"
echo "PASS: CUDA_VISIBLE_DEVICES=1: the daemon applies it, the workers run on device 1"

# 7. The Exclusive-Process compute mode: one process's context on the
# device, which under MPS is the server's; the backend must hold none.
mps "Exclusive-Process" MOCK_CUDA_COMPUTE_MODE=3
check_record "Exclusive-Process"
echo "PASS: the Exclusive-Process compute mode: the server's context alone"

# 8. A TMPDIR that would put the daemon's sockets past 107 bytes: its
# folders go under /tmp instead, and still go at the end.
long="$dir/job/a-batch-system-s-very-long-per-job-temporary-folder-name-0123456789"
mkdir -p "$long"
: >"$rec"
out=$(PATH="$dir/bin:$PATH" TMPDIR="$long" "$prog" 2>&1)
rc=$?
echo "$out"
test $rc -eq 0 || fail "a long TMPDIR: test_cuda_mps exited $rc"
rmdir "$long" "$dir/job/"* 2>/dev/null
check_record "a long TMPDIR" /tmp
echo "PASS: a TMPDIR too long for the sockets: the daemon's folders under /tmp"
echo "PASS"
