/* SPDX-License-Identifier: BSD-3-Clause */
/* rig/provider.h: how to write a provider of rails (the spec's `end_` and
 * `rail` for providers), as a tutorial over the declarations of
 * rig/remote_abi.h, which this header includes and which stay the
 * reference for each call.
 *
 * A *provider* is the code that moves a rail's bytes: rig's transports
 * (src/rail/ucx/: UCX puts and mapped stores; src/rail/mpi/: MPI RMA),
 * the loopback provider (src/abi/loopback.c), or yours.  rig owns the
 * ends' bookkeeping (counts arithmetic, waits, the table of live ends
 * behind ready_fn, reference counts); the provider owns the memory and the
 * transport, and is called back at three moments: wake, release, and
 * whatever failure it detects.  A complete provider that carries on a
 * thread of its own is examples/provider/thread_provider.c.
 *
 * rig's own transports use the words of the steps below for their ends --
 * each folder's end.c makes and releases them (steps 1, 2, 6), carrier.c
 * wakes and carries (3), failure.c fails them and tells the peer (4), and
 * the transport's stop stops them (5) -- and add what a transport of a
 * whole MPI job needs, in one ops table inside rig
 * (src/rail/base/transport.h): open, wire, rail, rail_far, fail, failed,
 * gone, finalize, stop, close, info.
 *
 * 1. Lay an end out.  For the end that sends send[0..nsend) and receives
 *    receive[0..nreceive), rig_end_layout_make gives one allocation's
 *    layout: counts (RIG_COUNTS_BYTES, each count alone in its cache line),
 *    outbound (two copies of rig_copy_bytes(send, RIG_BY_SRC)) and inbound
 *    (two copies of rig_copy_bytes(receive, RIG_BY_DST)), each on a page.
 *    Allocate layout.total bytes, page-aligned, **zeroed** (counts start at
 *    0), wherever your transport can reach them (pinned, registered,
 *    shared, an MPI window ...).  Check the lists first with
 *    rig_check_transfers; the two ends of a rail must agree on them (one's
 *    send is the other's receive) -- compare them if they come from two
 *    processes.
 *
 * 2. Make the end.  Fill a rig_end_desc: the three areas (an empty
 *    direction is {NULL, 0}), wake, ready_fn (NULL: rig's own, which finds
 *    the end by its counts address -- use it unless you have a faster
 *    lookup), release, self (handed back to wake and release), and --
 *    optional, for a transport that stores straight into this memory --
 *    the receive list (receive, nreceive), so that waits for `arrived`
 *    pull the awaited transfer's line while they poll, and -- optional,
 *    for a transport whose counts move only when its progress runs --
 *    a progress hook (progress, progress_arg) that waits on the end call
 *    while they spin or yield (rig/wait.h: it must never block).  Then
 *    rig_end_make (the end is now live: ready_fn finds it) and
 *    rig_rail_make(id, end) (the rail takes the end's reference; a rail
 *    and its local end share one count, so either keeps both alive).  Give
 *    both ends of a rail the same id, unique among your rails.  If
 *    rig_rail_make fails, rig_end_release the end yourself.
 *
 * 3. Wake.  rig_end_ready(e, c) raises `ready` (release) and calls
 *    wake(self, c) -- from any thread, concurrently with itself, with a c
 *    that may already be stale.  So wake must:
 *      - read `ready` itself: rig_count_load(counts, RIG_READY_AT); stop if
 *        it is RIG_COUNT_FAILED;
 *      - carry every transfer from the last count it carried + 1 up to
 *        ready, each count k being transfer rig_count_transfer(k, n) of
 *        copy rig_count_copy(k, n): length bytes from src in that copy of
 *        the outbound to dst in that copy of the peer's inbound;
 *      - then, and only once the bytes are visible at the receiver, raise
 *        the receiver's `arrived` to ready with release order, never
 *        lowering it (rig_count_advance(peer_counts, RIG_ARRIVED_AT,
 *        ready) when you can store there, a compare-and-swap; a remote
 *        atomic otherwise -- not a plain store, which could lower a count
 *        the receiver just raised to RIG_COUNT_FAILED).  One update per
 *        batch, however many transfers it covers;
 *      - raise the sender's `sent` (rig_count_advance(counts,
 *        RIG_SENT_AT, c)) as soon as the sources up to c may be written
 *        again -- maybe before `arrived` moves, never before the bytes
 *        were read.
 *    Serialise carriers of one end yourself (a mutex, or the lock-free
 *    "counter of wakes" of src/rail/base/carrier.c: the thread that moves
 *    it off 0 carries, the others only count and return).  wake must not
 *    block for long: hand slow work to a thread of yours and signal it
 *    (step 6).  Never lower a count; rig_count_advance never does.
 *
 * 4. Fail.  When the transport breaks (a peer dies, a put fails),
 *    rig_end_fail(e) raises all three counts to RIG_COUNT_FAILED, which
 *    ends every wait with false; tell the peer so that its end fails too
 *    (store RIG_COUNT_FAILED into its three counts).  Counts at
 *    RIG_COUNT_FAILED stay there: rig_count_advance never moves them.
 *
 * 5. Stop.  rig_end_stop(e) takes the end out of the live table and waits
 *    for wakes in flight; from then on ready only advances the count.
 *    Call it when your transport can no longer carry (e.g. the job
 *    closes).  Do not hold a lock that wake takes while calling it.
 *
 * 6. Lifetimes.  The last reference to a rail or its end (the user's
 *    rig_rail_release, or rig_end_release of an extra rig_end_retain)
 *    stops the end and then calls release(self), exactly once, on that
 *    thread.  Until release returns, the areas must stay valid -- the user
 *    may read them -- and so must everything wake uses.  After it, wake is
 *    never called again, but a peer may still be writing into this end's
 *    inbound: free the memory only when the peer can no longer write (the
 *    UCX and MPI transports once both ranks released the rail, which
 *    they agree on in the pair's next rig_job_rail, or at close; the
 *    loopback provider when both ends are released).  A thread of your own that
 *    carries must be done with the end before its memory goes: release
 *    the thread's hold in release and let the last holder free.
 *
 * Threads: every rig_* function named here may be called from any thread.
 * Errors follow rig/remote_abi.h. */
#ifndef RIG_PROVIDER_H
#define RIG_PROVIDER_H

#include <rig/remote_abi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A setting of a provider (and of a job, rig/job.h) that may be on, off,
 * or decided by what the machine offers. */
typedef enum {
    RIG_AUTO = 0, /* the default: on when the machine supports it */
    RIG_OFF = 1,
    RIG_ON = 2 /* on, and an error when the machine does not support it */
} rig_switch;

#ifdef __cplusplus
}
#endif

#endif
