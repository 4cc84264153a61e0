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
#include <stddef.h>
#include <stdint.h>

/* A wake with one carrier at a time (above): the first waker calls
 * carry(arg) until no wake arrived meanwhile; later wakers only bump the
 * counter and return. */
void rig_wake_serial(atomic_uint_fast64_t *wakes, void (*carry)(void *),
                     void *arg);

/* What a wake must carry: the ready count when it is past *carried and not
 * failed, else 0.  A rail that sends nothing has nothing to carry: its
 * readies are logged once and taken as carried (returns 0). */
uint64_t rig_carry_due(const uint8_t *counts, uint64_t *carried, size_t nsend,
                       int64_t id);

/* Where a carry from carried to ready starts, for n transfers a run: a
 * copy of each landing area holds only the last run that used it, so of
 * a jump past two runs only the last 2n counts need moving (each
 * transfer's last run in each copy, in order); earlier ones would land
 * where these land next.  Returns the count to carry from (carried, or
 * ready - 2n) and, when it jumped, sets *run and *j to the run and
 * transfer of that count + 1.  O(1): a jump of any size costs at most 2n
 * transfers. */
static inline uint64_t rig_carry_from(uint64_t carried, uint64_t ready,
                                      size_t n, uint64_t *run, size_t *j)
{
    uint64_t two = 2 * (uint64_t)n;
    if (ready - carried <= two) {
        return carried;
    }
    uint64_t from = ready - two;
    *run = from / n;
    *j = (size_t)(from % n);
    return from;
}

#endif
