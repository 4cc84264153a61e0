/* SPDX-License-Identifier: BSD-3-Clause */
/* Count arithmetic and the atomic accesses to an end's counts. */
#include "abi_internal.h"
#include "../util/util_internal.h"
#include "wait_internal.h"

#include <stdatomic.h>

static bool count_ok(uint64_t c, size_t n)
{
    return n >= 1 && c >= 1 && c < RIG_COUNT_FAILED;
}

uint64_t rig_count_run(uint64_t c, size_t n)
{
    return count_ok(c, n) ? (c - 1) / n : UINT64_MAX;
}

size_t rig_count_transfer(uint64_t c, size_t n)
{
    return count_ok(c, n) ? (size_t)((c - 1) % n) : SIZE_MAX;
}

unsigned rig_count_copy(uint64_t c, size_t n)
{
    return count_ok(c, n) ? (unsigned)(((c - 1) / n) % 2) : UINT32_MAX;
}

uint64_t rig_count_of(uint64_t run, size_t j, size_t n)
{
    if (n == 0 || j >= n) {
        return 0;
    }
    /* run * n + j + 1 < INT64_MAX, without overflow. */
    if (run > (RIG_COUNT_FAILED - 1 - j) / n) {
        return 0;
    }
    uint64_t c = run * n + j + 1;
    return c < RIG_COUNT_FAILED ? c : 0;
}

uint64_t rig_count_carry_from(uint64_t carried, uint64_t ready, size_t n)
{
    if (n == 0 || ready <= carried || ready >= RIG_COUNT_FAILED) {
        return 0;
    }
    /* Fewer than 2n counts readied (written so that 2n cannot overflow):
     * none is overwritten.  Otherwise 2n <= ready - carried < 2^63. */
    if ((ready - carried) / 2 < n) {
        return carried + 1;
    }
    return ready - 2 * (uint64_t)n + 1;
}

static _Atomic uint64_t *count_at(const void *counts, size_t at)
{
    return (_Atomic uint64_t *)((uintptr_t)counts + at);
}

uint64_t rig_count_load(const void *counts, size_t at)
{
    if (counts == NULL) {
        return 0;
    }
    return atomic_load_explicit(count_at(counts, at), memory_order_acquire);
}

uint64_t rig_count_advance(void *counts, size_t at, uint64_t c)
{
    if (counts == NULL) {
        return 0;
    }
    if (c > RIG_COUNT_FAILED) {
        c = RIG_COUNT_FAILED;
    }
    _Atomic uint64_t *p = count_at(counts, at);
    uint64_t cur = atomic_load_explicit(p, memory_order_relaxed);
    while (cur < c && cur != RIG_COUNT_FAILED) {
        /* seq_cst (release and more): the store half of the handshake
         * with sleeping waits (wait_internal.h).  On x86 a locked
         * cmpxchg either way. */
        if (atomic_compare_exchange_weak_explicit(
                p, &cur, c, memory_order_seq_cst, memory_order_relaxed)) {
            /* Nobody waits for ready: its fast path loads nothing more. */
            if (at != RIG_READY_AT &&
                atomic_load_explicit(&rig_wait_sleepers,
                                     memory_order_seq_cst) != 0) {
                rig_wait_wake();
            }
            break;
        }
    }
    return cur;
}
