/* SPDX-License-Identifier: BSD-3-Clause */
/* What every transport's carrier starts with: one carrier at a time per
 * end, and the count it must carry.
 *
 * rig_end_ready stores `ready` and calls the end's wake (rig/provider.h,
 * step 3) from any thread, concurrently.  The wake lock is a counter: the
 * thread that moves it off 0 is the carrier; any other thread only
 * increments it and returns, and the carrier, before letting go (a
 * compare-and-swap back to 0), carries again if it moved.  So a readied
 * count is always carried, by one thread at a time, without a thread ever
 * waiting on another. */
#ifndef RIG_CARRIER_H
#define RIG_CARRIER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rig/remote_abi.h"

/* A wake with one carrier at a time (above): the first waker calls
 * carry(arg) until no wake arrived meanwhile; later wakers only bump the
 * counter and return. */
void rig_wake_serial(atomic_uint_fast64_t *wakes, void (*carry)(void *),
                     void *arg);

/* A carrier that stores `arrived` straight into the receiver's mapped
 * counts does it in a window that failure waits for (src/abi/counts.c,
 * which argues it by the C11 model): a plain release store in place of a
 * compare-and-swap on the line the receiver polls, and never a count
 * lowered that failure raised.  Open the window before copying the bytes;
 * false: the receiver's `arrived` is failing, carry nothing.  Then close it
 * with the count to store (0: none).  counts: the receiver's counts area,
 * as mapped here.  One carrier of the rail at a time (the wake lock); the
 * receiver's failure raises `arrived` with rig_count_advance, never by a
 * plain store.  Defined in src/abi/counts.c, beside that failure side. */
bool rig_count_window_open(void *counts);
void rig_count_window_close(void *counts, uint64_t c);

/* What a wake must carry: the ready count when it is past *carried and not
 * failed, else 0.  A rail that sends nothing has nothing to carry: its
 * readies are logged once and taken as carried (returns 0). */
uint64_t rig_carry_due(const uint8_t *counts, uint64_t *carried, size_t nsend,
                       int64_t id);

/* Where a carry from carried to ready starts, for n transfers a run, as
 * the index (count - 1) of the first count to carry: carried, or when
 * ready jumped past two runs, the first of the last 2n counts -- the rule
 * is rig_count_carry_from's (rig/remote_abi.h, which argues it), kept in
 * that one place; this only turns its count into the carriers' run and
 * transfer.  When it jumped, sets *run and *j to the run and transfer of
 * that count; otherwise leaves them (the carrier's own next run and
 * transfer).  O(1): a jump of any size, INT64_MAX - 1 included, costs at
 * most 2n transfers.  Nothing to carry (ready <= carried, a failed count,
 * n == 0) returns carried. */
static inline uint64_t rig_carry_from(uint64_t carried, uint64_t ready,
                                      size_t n, uint64_t *run, size_t *j)
{
    uint64_t first = rig_count_carry_from(carried, ready, n);
    if (first == 0) {
        return carried;
    }
    if (first != carried + 1) {
        *run = rig_count_run(first, n);
        *j = rig_count_transfer(first, n);
    }
    return first - 1;
}

#endif
