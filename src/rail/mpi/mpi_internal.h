/* SPDX-License-Identifier: BSD-3-Clause */
/* The MPI RMA transport: its object, its ends, and what its files share.
 *
 * Files, by concern (the UCX transport names its files alike):
 *   transport.c  the object: open, wire, stop, close (the windows' frees),
 *                rig_info, the ops table
 *   end.c        ends: the pair protocol's steps (a window per rail on the
 *                pair's communicator), release, the list
 *   carrier.c    wake and carrying: MPI_Put, flush, accumulate, flush
 *   failure.c    failing, the watcher thread, telling every rank
 *
 * Window.  Each rail has a window of its own, allocated by MPI on a
 * communicator of just its two ranks (made once per pair with
 * MPI_Comm_create_group and cached), each rank allocating its end (the
 * spec's layout: counts, outbound, inbound) as its part.  Why: measured
 * with Open MPI 4.1.4, MPI_Put + MPI_Win_flush costs 0.10 us on memory MPI
 * allocated for same-node ranks (osc sm: a store), but 2.5 us on created
 * or dynamic windows (osc rdma through CMA), and osc ucx crashes on
 * dynamic windows with UCX 1.13.1.  Rails are made pair by pair, so the
 * collective allocation is over the pair only.  Same-node pairs use
 * MPI_Win_allocate_shared (noncontiguous: each end on its own pages, first
 * touched by its owner): MPI_Win_allocate would get osc rdma (priority 101
 * over osc sm's 100), whose shared-memory file is named by the
 * communicator's id, which disjoint pairs share -- two pairs' windows then
 * collide (seen at 4 ranks: "unlink /dev/shm/osc_rdma..." and lost data).
 * Pairs across nodes use MPI_Win_allocate.  The window is locked once
 * (MPI_Win_lock_all, MPI_MODE_NOCHECK) for the rail's life.  Ends are
 * also attached to the job's window (rig_job_window) while it has room.
 *
 * Threads.  Every MPI call this transport makes from a wake or a failure
 * holds its lock, so rig's own calls never overlap.  rig_end_ready on a
 * rail of this transport therefore calls MPI from the caller's thread:
 * with MPI_THREAD_MULTIPLE any thread may call it at any time; below that
 * the application must treat it as an MPI call (no other thread in MPI at
 * the same time: MPI_THREAD_SERIALIZED's rule).  There is no progress
 * thread: across nodes on a network without hardware RMA, Open MPI's osc
 * rdma may need the target to enter MPI before a flush completes.
 *
 * Lock: one, `lock` (MPI_LOCK_LEVEL): the list of ends, the failure's
 * telling and every MPI call of wakes and failures.  The job window's lock
 * (RIG_WINDOW_LOCK_LEVEL) is never taken under it.
 *
 * Lifetimes.  A window is freed collectively over its pair, so never in
 * the release hook: a window lives until both ranks released its rail
 * and say so in the pair protocol's next offers (../base/handshake.h),
 * after which the pair's connect frees it (MPI_Win_free by both, in id
 * order, once both agreed to connect: end.c), or until
 * rig_job_close, which hands those of rails neither rank holds (one
 * exchange per pair, giving up on a peer gone) to MPI_Finalize to free
 * (../base/finalize.h: no collective after the closing barrier).  A
 * failed job frees no window (a collective with a peer that may be
 * gone): they go with MPI.  An end held over the close keeps its window
 * (its memory) until MPI_Finalize. */
#ifndef RIG_MPI_INTERNAL_H
#define RIG_MPI_INTERNAL_H

#include "../base/failure.h"
#include "../base/handshake.h"
#include "../base/transport.h"

#include "../../util/util_internal.h"

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>

#define MPI_LOCK_LEVEL 20

/* Tags of this transport on the job's communicator. */
enum {
    TAG_PAIR = RIG_TAG_TRANSPORT,     /* MPI_Comm_create_group */
    TAG_STEP = RIG_TAG_TRANSPORT + 1, /* a rail's word before connect */
    TAG_CLOSE = RIG_TAG_TRANSPORT + 3,
    TAG_FAIL = RIG_TAG_TRANSPORT + 4, /* a failure's reason, to every rank */
    TAG_LEFT = RIG_TAG_TRANSPORT + 5  /* this rank finalized MPI, job open */
};

typedef struct rig_mpi rig_mpi;
typedef struct rig_mend rig_mend;

/* The pair protocol's answer of an end: where it sits in the rail's
 * window. */
typedef struct {
    int64_t counts_at, inbound_at;
} rig_mend_answer;

struct rig_mend {
    _Alignas(64) atomic_uint_fast64_t wakes; /* the wake lock (carrier.h) */
    _Alignas(64) uint64_t carried; /* every count <= carried is carried */
    uint64_t next_run;             /* run and transfer of carried + 1 */
    size_t next_j;
    uint64_t value; /* the source of the `arrived` accumulate */
    uint8_t *counts;
    const uint8_t *out;
    size_t out_copy, in_copy;
    rig_transfer *send;
    size_t nsend;
    MPI_Win win; /* the rail's window; MPI_WIN_NULL once freed */
    int target;  /* the peer's rank in the window */
    MPI_Aint peer_counts, peer_in; /* displacements in the rail's window */
    uint8_t *peer_counts_map;      /* the peer's counts, mapped (same node) */
    bool live;                     /* carrying allowed (lock) */
    rig_mpi *m;

    /* Cold (lock). */
    int peer;
    int64_t id;
    uint8_t *base; /* the end: a page boundary in the window's memory */
    size_t shift;  /* base's displacement in the window */
    rig_end_layout layout;
    rig_handshake_end hs;   /* the job's window and the peer's end */
    rig_mend_answer answer; /* this end's, for the peer */
    rig_end *end;
    rig_rail *rail;
    bool listed;  /* in the transport's list (the rail was handed out) */
    bool held;    /* the ABI end is alive */
    bool in_job;  /* until close */
    bool freeing; /* both ranks released it: freed at the pair's connect */
    rig_mend *next;
    /* The word this end sent its peer before connect (end.c): sent
     * (one at most), its request and buffer until the send is done. */
    bool stepped;
    MPI_Request step_req;
    int64_t *step_buf;
};

struct rig_mpi {
    rig_transport super;
    MPI_Comm comm; /* the job's */
    int rank, size;
    rig_window *window;      /* the job's, from wire */
    rig_handshake handshake; /* the pair protocol's view of this transport */
    MPI_Comm *pair;          /* per peer; MPI_COMM_NULL until the first rail */
    bool *shared;            /* per peer: on this node (MPI_COMM_TYPE_SHARED) */
    pthread_mutex_t lock;    /* MPI calls of wakes and failures; the list */
    rig_mend *ends;
    long refs;                /* 1 for the job + 1 per end not freed; lock */
    void (*freed)(void *arg); /* the job's hook, when the last ref goes */
    void *freed_arg;
    bool multiple; /* MPI_THREAD_MULTIPLE: the watcher may call MPI */
    bool closed;   /* closed or finalized: no MPI call any more */
    /* The shared failure state: the reason, the ranks that left, the
     * same-node peers' processes (their pidfds: the watcher's). */
    rig_failure fail;
    atomic_bool tell; /* a failure still to tell (rig_mpi_tell) */
    bool fail_origin; /* the failure's reason started here (lock) */
    bool told_all;    /* every rank was sent the reason (lock) */

    /* The watcher thread (failure.c). */
    pthread_t watcher;
    int wake_fd; /* an eventfd in its poll: stop */
    bool watching;
    atomic_bool wstop;
    /* Per peer: the collective of the pair in progress (its MPI call's
     * name), NULL when none (rig_mpi_in_pair). */
    _Atomic(const char *) *in_pair;
};

static inline rig_mpi *rig_mpi_of(rig_transport *t)
{
    return (rig_mpi *)t;
}

/* Marks this rank as inside a collective of its pair with peer (call: the
 * MPI call's name), or out of it (NULL).  A peer that dies while this
 * rank is in one leaves it there for good: the watcher ends the process
 * (failure.c, "a collective of a pair"). */
static inline void rig_mpi_in_pair(rig_mpi *m, int peer, const char *call)
{
    atomic_store_explicit(&m->in_pair[peer], call, memory_order_release);
}

/* ---- transport.c -------------------------------------------------------- */

extern const rig_transport_ops rig_mpi_ops;
/* Drops one reference, lock held; *last when it was the last (free the
 * transport with rig_mpi_free after unlocking). */
void rig_mpi_unref_locked(rig_mpi *m, bool *last);
void rig_mpi_free(rig_mpi *m);

/* ---- end.c -------------------------------------------------------------- */

extern const rig_handshake_ops rig_mend_handshake;
/* Frees an end's structure (its window is freed apart). */
void rig_mend_free(rig_mend *e);
/* The end of rail r if this transport made it and it is held; lock held. */
rig_mend *rig_mend_find(rig_mpi *m, const rig_rail *r);
/* Whether e is the ABI end of a held end of m (the ops table's owns). */
bool rig_mpi_owns(rig_transport *t, const rig_end *e);
/* Frees e's window (collective over the pair: both ranks call it for the
 * same rails in the same order), detaches it from the job's window and
 * frees e; e is out of the list already. */
void rig_mend_destroy(rig_mpi *m, rig_mend *e);

/* ---- carrier.c ---------------------------------------------------------- */

/* The ABI end's wake (rig/provider.h, step 3). */
void rig_mend_wake(void *self, uint64_t c);

/* ---- failure.c ---------------------------------------------------------- */

/* Watches every rank of this node (wire's w) and starts the watcher
 * thread; "failed:" for a rank gone already, "system:".  Stops it. */
bool rig_mpi_watch_start(rig_mpi *m, const rig_transport_wiring *w, char **err);
void rig_mpi_watch_stop(rig_mpi *m);
/* Tells the peers of a failure not told yet (see failure.c).  Calls MPI:
 * from a thread that may (a call into rig); takes the lock. */
void rig_mpi_tell(rig_mpi *m);
/* rig_failure_peer_gone's sink (the failure state's on_gone). */
void rig_mpi_peer_gone(void *self, int r, const char *why);

/* The ops table's failure slots. */
void rig_mpi_fail(rig_transport *t, const char *why);
const char *rig_mpi_failed(rig_transport *t, bool *known);
int rig_mpi_gone(rig_transport *t, bool *died);
void rig_mpi_finalize(rig_transport *t, const char *why);

#endif
