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

/* ---- raising a count, and the mapped carrier's window ---------------------
 *
 * Counts only grow, and RIG_COUNT_FAILED stays (the spec).  `ready` has any
 * number of writers (every thread may call ready) and `sent` one carrier at
 * a time, so both are raised by a compare-and-swap (below): a
 * read-modify-write reads the value just before its own write in the
 * count's modification order, so it never moves a count down, nor off
 * RIG_COUNT_FAILED.  Their lines are the sender's own: the locked
 * instruction costs little there.
 *
 * `arrived` is written by the peer's carrier, into memory the receiver
 * polls.  A compare-and-swap there costs a whole extra trip of a cache
 * line between the cores: it must first drain the carrier's stores of the
 * data (their line is the receiver's too) and only then take the count's
 * line, which the receiver's polling holds -- the two transfers happen one
 * after the other instead of together.  Measured on the 2-core VM under
 * load (per-iteration medians of rig_osu_latency -f, 8 B): 0.15 us with it
 * against 0.10 us with a plain store (floor2 0.09 us) when the two vCPUs
 * sat close, 0.43 us against 0.28 us (floor2 0.31 us) when far apart.
 *
 * A load and a plain store instead would not do on their own: between the
 * carrier's load of `arrived` (say c0) and its store of c, failure (the
 * receiver's rig_end_fail, or any thread's rig_count_advance to
 * RIG_COUNT_FAILED) may write RIG_COUNT_FAILED; C11 allows that write to
 * come between the two in the modification order (the load reads c0,
 * which precedes it; the store need only follow c0), and the count goes
 * RIG_COUNT_FAILED, then c: lowered, and a wait that saw the failure may
 * see c next.  So the carrier's store sits in a window that failure waits
 * for instead: a counter at WINDOW_AT, written only by the carrier, odd
 * while a window is open, and a flag at FAILING_AT that failure sets before
 * it raises `arrived`.
 *
 *   carrier (rig_count_window_open / _close):  window := odd; load the
 *     flag; if set: close, carry nothing.  Else copy the bytes, store
 *     `arrived` := c (release), close: a compare-and-swap of the window
 *     odd -> even.
 *   failure (rig_count_advance to RIG_COUNT_FAILED at RIG_ARRIVED_AT):
 *     flag := 1; load the window; while it is odd and unchanged, wait;
 *     then the compare-and-swap to RIG_COUNT_FAILED as for every count.
 *
 * Every access to the window and the flag is seq_cst (no fences: TSan
 * does not model them), so they all sit in one total order S, consistent
 * with sequenced-before, and every write of the window (opens, closes,
 * claims) is seq_cst: a seq_cst load reads the last write before it in S.
 * Why no store of a window lands after failure's compare-and-swap (by the
 * C11 model).  Take a window and a failure.  If failure's store of the
 * flag precedes the window's load of it in S, that load sees the flag:
 * the window stores nothing.  Otherwise the window's open precedes its
 * load of the flag, which precedes failure's store of the flag, which
 * precedes failure's load of the window: that load reads the open or a
 * later write.  Failure then waits until it reads a close (the odd value
 * it waited on changed; a close's compare-and-swap is a release): its
 * load synchronises with that close, so the window's store of `arrived`
 * -- and every earlier window's, since carriers follow each other through
 * the wake lock's acquire and release -- happens before failure's
 * compare-and-swap, which therefore follows them in the modification
 * order of `arrived` (write-write coherence).
 *
 * Failure waits at most WINDOW_WAIT_NS.  A window stays open only while
 * its carrier is descheduled or stopped between two of its own
 * instructions; waiting longer than that would let a stopped peer hold a
 * failure up (a hang).  Failure then claims the window (a compare-and-swap
 * odd -> WINDOW_CLAIMED) and raises `arrived` anyway; the carrier's close
 * finds the claim and raises `arrived` to RIG_COUNT_FAILED again itself,
 * right after its store.  So a count is lowered only if its carrier
 * stalled inside the window longer than WINDOW_WAIT_NS, and only until that
 * carrier's next instructions.  The fast path takes no lock and no
 * read-modify-write on the receiver's lines: the open (a seq_cst store,
 * while only its own stores are pending) and the close on the window's
 * line, which the carrier keeps (failure alone reads it) and whose drain
 * the `sent` that follows needs anyway.
 *
 * The window's words lie in bytes of the counts area that the spec leaves
 * unused (each count has 128 bytes of its own): the window and the flag
 * side by side in the second cache line of ready's, which the receiver
 * never touches, so the carrier keeps the line and reads the flag there
 * without a miss.  (The flag beside `arrived` cost as much as the
 * compare-and-swap: reading the line the receiver polls, before the
 * bytes' store, is a trip of that line too.)  End memory starts zeroed:
 * window 0 (closed), flag clear.  Other transports never open a window
 * (theirs stays 0): for them failure only sets the flag. */

#define WINDOW_AT (RIG_READY_AT + 64)
#define FAILING_AT (WINDOW_AT + 8)
#define WINDOW_CLAIMED UINT64_MAX /* odd: no window opens after it */
#define WINDOW_WAIT_NS 200000000ull

static void fail_arrived(void *counts)
{
    _Atomic uint64_t *window = count_at(counts, WINDOW_AT);
    atomic_store_explicit(count_at(counts, FAILING_AT), 1,
                          memory_order_seq_cst);
    uint64_t w = atomic_load_explicit(window, memory_order_seq_cst);
    if ((w & 1) == 0 || w == WINDOW_CLAIMED) {
        return;
    }
    uint64_t until = rig_now_ns() + WINDOW_WAIT_NS;
    rig_backoff b = {0};
    while (atomic_load_explicit(window, memory_order_seq_cst) == w) {
        if (rig_now_ns() >= until) {
            /* The carrier stalled in its window: claim it (its close
             * raises the count again), unless it closed just now. */
            if (atomic_compare_exchange_strong_explicit(
                    window, &w, WINDOW_CLAIMED, memory_order_seq_cst,
                    memory_order_seq_cst)) {
                rig_log(RIG_LOG_DEBUG,
                        "a failure raised arrived while a carrier stalled "
                        "in its window (counts %p)",
                        counts);
            }
            return;
        }
        rig_backoff_step(&b);
    }
}

/* Raises *p to c unless it is there or failed already; the value it found
 * (c itself when it raised), and *raised whether it wrote. */
static inline uint64_t count_raise(_Atomic uint64_t *p, uint64_t c,
                                   bool *raised)
{
    uint64_t cur = atomic_load_explicit(p, memory_order_relaxed);
    *raised = false;
    while (cur < c && cur != RIG_COUNT_FAILED) {
        /* seq_cst (release and more): the store half of the handshake
         * with sleeping waits (wait_internal.h).  On x86 a locked
         * cmpxchg either way. */
        if (atomic_compare_exchange_weak_explicit(
                p, &cur, c, memory_order_seq_cst, memory_order_relaxed)) {
            *raised = true;
            break;
        }
    }
    return cur;
}

uint64_t rig_count_advance(void *counts, size_t at, uint64_t c)
{
    if (counts == NULL) {
        return 0;
    }
    if (c > RIG_COUNT_FAILED) {
        c = RIG_COUNT_FAILED;
    }
    if (c == RIG_COUNT_FAILED && at == RIG_ARRIVED_AT) {
        fail_arrived(counts);
    }
    bool raised;
    uint64_t cur = count_raise(count_at(counts, at), c, &raised);
    /* Nobody waits for ready: its fast path loads nothing more. */
    if (raised && at != RIG_READY_AT &&
        atomic_load_explicit(&rig_wait_sleepers, memory_order_seq_cst) != 0) {
        rig_wait_wake();
    }
    return cur;
}

uint64_t rig_count_raise_ready(void *counts, uint64_t c)
{
    bool raised;
    return count_raise(count_at(counts, RIG_READY_AT), c, &raised);
}

bool rig_count_window_open(void *counts)
{
    _Atomic uint64_t *window = count_at(counts, WINDOW_AT);
    /* Only the carrier writes the window but for a claim, and failure
     * claims only an open one: closed, it holds still for this load. */
    uint64_t w = atomic_load_explicit(window, memory_order_relaxed);
    if (w == WINDOW_CLAIMED) {
        return false;
    }
    atomic_store_explicit(window, w + 1, memory_order_seq_cst);
    if (atomic_load_explicit(count_at(counts, FAILING_AT),
                             memory_order_seq_cst) != 0) {
        rig_count_window_close(counts, 0);
        return false;
    }
    return true;
}

void rig_count_window_close(void *counts, uint64_t c)
{
    _Atomic uint64_t *window = count_at(counts, WINDOW_AT);
    if (c != 0) {
        atomic_store_explicit(count_at(counts, RIG_ARRIVED_AT), c,
                              memory_order_release);
    }
    /* Odd: this window's value, unless failure claimed it meanwhile. */
    uint64_t w = atomic_load_explicit(window, memory_order_relaxed);
    if (w == WINDOW_CLAIMED ||
        !atomic_compare_exchange_strong_explicit(
            window, &w, w + 1, memory_order_seq_cst, memory_order_relaxed)) {
        /* Failure raised the count while this window was open and left it
         * to us to raise it again, after our store. */
        rig_count_advance(counts, RIG_ARRIVED_AT, RIG_COUNT_FAILED);
    }
}
