#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A C compiler that hangs as cc does when cc1 runs long: it starts a child
# that sleeps (as cc1 would) and one that left its session, writes a
# temporary file where cc would ($TMPDIR), puts their pids in
# $RIG_TEST_CC_PIDS, and waits.  tests/wasm/test_wasm.c checks that a
# compile timeout ends all of it.
sleep 600 &
child=$!
setsid sleep 601 &
daemon=$!
: >"${TMPDIR:-/tmp}/ccHANG.s"
# Written whole, then renamed: the tests wait for the file to exist and
# read it at once, so it must never be seen empty.
echo "$child $daemon" >"$RIG_TEST_CC_PIDS.tmp"
mv "$RIG_TEST_CC_PIDS.tmp" "$RIG_TEST_CC_PIDS"
wait
