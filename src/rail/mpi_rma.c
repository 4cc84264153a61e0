/* SPDX-License-Identifier: BSD-3-Clause */
/* The MPI RMA transport: rails carried by MPI one-sided calls alone.
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
 * Pairs across nodes use MPI_Win_allocate.  The window is
 * locked once (MPI_Win_lock_all, MPI_MODE_NOCHECK) for the rail's life.
 * Ends are also attached to the job's dynamic window (rig_job_window) while
 * it has room.
 *
 * Carrying.  ready stores the count and wakes the end; the wake lock is
 * the counter of src/rail/end.c (one carrier at a time, no thread waits for
 * another).  The carrier, under the transport's MPI lock: MPI_Put of every
 * transfer up to the count, MPI_Win_flush (the data is at the peer and the
 * sources may be reused: `sent` is stored), then MPI_Accumulate of the
 * count into the peer's `arrived` with MPI_MAX on MPI_UINT64_T -- atomic
 * at the target as accumulates are, never lowering a count (nor
 * RIG_COUNT_FAILED) -- and a second flush.  Two flushes are the cheapest
 * correct order: MPI orders accumulates among themselves but not puts
 * before an accumulate, so the data must be complete before `arrived`
 * moves.  With osc sm both flushes are memory barriers.
 *
 * Threads.  Every MPI call this file makes from a wake or a failure holds
 * the transport's MPI lock, so rig's own calls never overlap.  rig_end_ready
 * on a rail of this transport therefore calls MPI from the caller's thread:
 * with MPI_THREAD_MULTIPLE any thread may call it at any time; below that
 * the application must treat it as an MPI call (no other thread in MPI at
 * the same time: MPI_THREAD_SERIALIZED's rule).  There is no progress
 * thread: across nodes on a network without hardware RMA, Open MPI's osc
 * rdma may need the target to enter MPI before a flush completes.
 *
 * Failure.  rig_job_fail raises this rank's ends, accumulates
 * RIG_COUNT_FAILED (MPI_MAX) into all three counts of every peer end, and
 * sends its reason to every rank (picked up by their rig_job_rail and
 * rig_job_failed).  A watcher thread that never calls MPI spreads it: a
 * failed count on one of a rank's ends fails that rank's job and raises
 * its same-node peers' ends through MPI_Win_shared_query pointers, so
 * ranks with no rail to the first fail too (across nodes only the peers of
 * the first rank learn it before they next call rig).  A rank that calls
 * MPI_Finalize with the job open fails it (an MPI_COMM_SELF attribute) and
 * tells every rank it left, so that their closes skip the collectives it
 * would have to join.  A dead peer is seen only on its node: MPI (without
 * ULFM) reports no peer failure on a window, and a put into a same-node
 * peer's shared memory succeeds whether the peer lives or not, so the
 * watcher polls a pidfd of every same-node peer (rig_node_key decides who
 * shares the kernel and pid namespace).  A peer on another node that dies
 * is not detected: waits on its rails block until the user's timeout, and
 * Open MPI ends the job unless run with --enable-recovery.  An MPI error
 * in a carrier fails the job.
 *
 * Lifetimes.  A window is freed collectively, so never when one rank
 * releases its rail: windows live until rig_job_close, which frees those of
 * rails neither rank holds (one exchange per pair).  An end held over the
 * close keeps its window (its memory) until MPI_Finalize. */
#include "config.h"

#include "mpi_rma.h"

#include "rail_internal.h"

#include "util_internal.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TAG_PAIR 0x7270 /* MPI_Comm_create_group */
#define TAG_RAIL 0x7271 /* the lists and status of one side */
#define TAG_ACK 0x7272  /* the window's addresses and outcome */
#define TAG_CLOSE 0x7273
#define TAG_FAIL 0x7274        /* a failure's reason, to every rank */
#define TAG_LEFT 0x7275        /* this rank finalized MPI with the job open */
#define KEY_LEN 96             /* of rig_node_key */
#define WIRE_MAGIC 0x72696d31u /* "rim1" */
#define PUT_MAX ((size_t)1 << 30)

typedef struct rig_mend rig_mend;

struct rig_mend {
    _Alignas(64) atomic_uint_fast64_t wakes; /* the wake lock (end.c) */
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
    bool live;                     /* carrying allowed (MPI lock) */
    rig_mpi *m;

    /* Cold (MPI lock). */
    int peer;
    int64_t id;
    uint8_t *base; /* the end: a page boundary in the window's memory */
    size_t shift;  /* base's displacement in the window */
    rig_end_layout layout;
    rig_job_peer_end disp; /* the peer's end in the job's window */
    bool attached, peer_attached;
    rig_end *end;
    rig_rail *rail;
    bool listed; /* in the transport's list (the rail was handed out) */
    bool held;   /* the ABI end is alive */
    bool in_job; /* until close */
    rig_mend *next;
};

struct rig_mpi {
    MPI_Comm comm;
    int rank, size;
    MPI_Win jobwin;
    uint64_t attach_limit, attached;
    MPI_Comm *pair;       /* per peer; MPI_COMM_NULL until the first rail */
    bool *shared;         /* per peer: on this node (MPI_COMM_TYPE_SHARED) */
    pthread_mutex_t lock; /* MPI calls of wakes and failures; the list */
    rig_mend *ends;
    long refs; /* 1 for the job + 1 per end not freed; lock */
    atomic_bool failed;
    _Atomic(char *) why;  /* the first reason given or told */
    _Atomic(char *) seen; /* the watcher's, while no reason is known */

    /* The watcher thread (see "Failure" above); lock. */
    pthread_t watcher;
    pthread_cond_t wake_watcher;
    bool watching, wstop;
    int *pidfd;      /* per peer: its process, when on this node; -1: none */
    bool *gone;      /* per rank: left the job (died, finalized); lock */
    atomic_int left; /* a rank that left, or -1 */
    int self_key;    /* MPI_COMM_SELF attribute: finalize without close */
};

static const uint64_t failed_value = RIG_COUNT_FAILED;

static bool mpi_err(char **err, int rc, const char *call)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS) {
        snprintf(s, sizeof(s), "MPI error %d", rc);
    }
    return rig_err(err, "system: %s failed: %s", call, s);
}

static void mpi_unref_locked(rig_mpi *m, bool *gone)
{
    *gone = --m->refs == 0;
}

static void mpi_free(rig_mpi *m)
{
    free(m->pair);
    free(m->shared);
    if (m->pidfd != NULL) {
        for (int r = 0; r < m->size; r++) {
            if (m->pidfd[r] >= 0) {
                close(m->pidfd[r]);
            }
        }
    }
    free(m->pidfd);
    free(m->gone);
    free(atomic_load(&m->why));
    free(atomic_load(&m->seen));
    pthread_cond_destroy(&m->wake_watcher);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static void mend_free(rig_mend *e)
{
    free(e->send);
    free(e);
}

/* ---- carrying ------------------------------------------------------------ */

/* Puts len bytes in pieces MPI's int counts can name. */
static int put_bytes(rig_mend *e, const uint8_t *src, size_t len, MPI_Aint at)
{
    int rc = MPI_SUCCESS;
    for (size_t done = 0; done < len && rc == MPI_SUCCESS;) {
        size_t n = len - done < PUT_MAX ? len - done : PUT_MAX;
        rc = MPI_Put(src + done, (int)n, MPI_BYTE, e->target,
                     at + (MPI_Aint)done, (int)n, MPI_BYTE, e->win);
        done += n;
    }
    return rc;
}

/* Under the MPI lock.  False with *why set when an MPI call failed. */
static bool carry_locked(rig_mend *e, uint64_t ready, char **why)
{
    const size_t n = e->nsend;
    uint64_t run = e->next_run;
    size_t j = e->next_j;
    int rc = MPI_SUCCESS;
    for (uint64_t c = e->carried; c < ready && rc == MPI_SUCCESS; c++) {
        const rig_transfer *t = &e->send[j];
        size_t k = (size_t)(run & 1);
        rc = put_bytes(
            e, e->out + k * e->out_copy + (size_t)t->src, (size_t)t->length,
            e->peer_in + (MPI_Aint)(k * e->in_copy) + (MPI_Aint)t->dst);
        if (++j == n) {
            j = 0;
            run++;
        }
    }
    e->next_run = run;
    e->next_j = j;
    e->carried = ready;
    if (rc != MPI_SUCCESS) {
        return mpi_err(why, rc, "MPI_Put");
    }
    rc = MPI_Win_flush(e->target, e->win);
    if (rc != MPI_SUCCESS) {
        return mpi_err(why, rc, "MPI_Win_flush");
    }
    rig_count_advance(e->counts, RIG_SENT_AT, ready);
    e->value = ready;
    rc = MPI_Accumulate(&e->value, 1, MPI_UINT64_T, e->target,
                        e->peer_counts + RIG_ARRIVED_AT, 1, MPI_UINT64_T,
                        MPI_MAX, e->win);
    if (rc != MPI_SUCCESS) {
        return mpi_err(why, rc, "MPI_Accumulate");
    }
    rc = MPI_Win_flush(e->target, e->win);
    if (rc != MPI_SUCCESS) {
        return mpi_err(why, rc, "MPI_Win_flush");
    }
    return true;
}

static void carry(rig_mend *e)
{
    uint64_t ready = rig_carry_due(e->counts, &e->carried, e->nsend, e->id);
    if (ready == 0) {
        return;
    }
    rig_mpi *m = e->m;
    char *why = NULL;
    pthread_mutex_lock(&m->lock);
    bool ok = !e->live || carry_locked(e, ready, &why);
    pthread_mutex_unlock(&m->lock);
    if (!ok) {
        char *msg = NULL;
        rig_err(&msg, "failed: rail %lld to rank %d: %s", (long long)e->id,
                e->peer, why != NULL ? why : "nomem");
        rig_mpi_fail(m, msg != NULL ? msg : "failed: an MPI call failed");
        free(msg);
        free(why);
    }
}

static void mend_wake_carry(void *self)
{
    carry(self);
}

static void mend_wake(void *self, uint64_t c)
{
    (void)c; /* may be stale: carry reads the count itself */
    rig_mend *e = self;
    rig_wake_serial(&e->wakes, mend_wake_carry, e);
}

/* The ABI's release hook: the window outlives the rail (it is freed
 * collectively at close); the structure goes now if the job closed. */
static void mend_release(void *self)
{
    rig_mend *e = self;
    rig_mpi *m = e->m;
    if (!e->listed) {
        e->end = NULL; /* a rail never handed out: mend_undo frees e */
        return;
    }
    pthread_mutex_lock(&m->lock);
    e->held = false;
    e->end = NULL;
    e->rail = NULL;
    bool gone = !e->in_job, last = false;
    if (gone) {
        mpi_unref_locked(m, &last);
    }
    pthread_mutex_unlock(&m->lock);
    if (gone) {
        mend_free(e);
    }
    if (last) {
        mpi_free(m);
    }
}

/* ---- failure ------------------------------------------------------------- */

static bool poll_fail(rig_mpi *m);

const char *rig_mpi_failed(rig_mpi *m)
{
    if (m == NULL || !atomic_load(&m->failed)) {
        return NULL;
    }
    if (atomic_load(&m->why) == NULL) {
        poll_fail(m); /* the watcher's: a rank may have told why */
    }
    char *why = atomic_load(&m->why);
    return why != NULL ? why : atomic_load(&m->seen);
}

void rig_mpi_fail(rig_mpi *m, const char *why)
{
    if (m == NULL) {
        return;
    }
    char *mine = strdup(why != NULL ? why : "failed: (no reason)");
    char *none = NULL;
    bool first =
        mine != NULL && atomic_compare_exchange_strong(&m->why, &none, mine);
    if (!first) {
        free(mine);
    }
    atomic_store(&m->failed, true);
    pthread_mutex_lock(&m->lock);
    if (first) {
        /* Every rank learns why (rig_mpi_rail waits watch for it), so
         * that none waits for this one to make a rail.  The string lives
         * until the transport goes. */
        for (int r = 0; r < m->size; r++) {
            MPI_Request req;
            if (r != m->rank &&
                MPI_Isend(mine, (int)strlen(mine) + 1, MPI_CHAR, r, TAG_FAIL,
                          m->comm, &req) == MPI_SUCCESS) {
                MPI_Request_free(&req);
            }
        }
    }
    for (rig_mend *e = m->ends; e != NULL; e = e->next) {
        rig_count_advance(e->counts, RIG_READY_AT, RIG_COUNT_FAILED);
        rig_count_advance(e->counts, RIG_SENT_AT, RIG_COUNT_FAILED);
        rig_count_advance(e->counts, RIG_ARRIVED_AT, RIG_COUNT_FAILED);
        if (!e->in_job || e->win == MPI_WIN_NULL) {
            continue;
        }
        /* Tell the peer: its three counts of this rail. */
        static const size_t at[] = {RIG_READY_AT, RIG_SENT_AT, RIG_ARRIVED_AT};
        for (size_t i = 0; i < 3; i++) {
            MPI_Accumulate(&failed_value, 1, MPI_UINT64_T, e->target,
                           e->peer_counts + (MPI_Aint)at[i], 1, MPI_UINT64_T,
                           MPI_MAX, e->win);
        }
        MPI_Win_flush(e->target, e->win);
    }
    pthread_mutex_unlock(&m->lock);
}

/* The watcher: every 10 ms, without calling MPI, it looks at this rank's
 * ends.  A count at RIG_COUNT_FAILED that this rank did not raise means a
 * peer failed the job: the job fails here too, and every peer end mapped
 * here (same node) is raised, so the failure spreads along the rails to
 * ranks that share none with the first.  Once failed it re-raises the
 * counts each tick: an accumulate of `arrived` racing with a raise may
 * lower it once (osc sm's MPI_MAX is a locked read-modify-write). */
#define WATCH_NS 10000000L

static void raise_all_locked(rig_mpi *m)
{
    static const size_t at[] = {RIG_READY_AT, RIG_SENT_AT, RIG_ARRIVED_AT};
    for (rig_mend *e = m->ends; e != NULL; e = e->next) {
        for (size_t i = 0; i < 3; i++) {
            rig_count_advance(e->counts, at[i], RIG_COUNT_FAILED);
            if (e->peer_counts_map != NULL && e->win != MPI_WIN_NULL) {
                rig_count_advance(e->peer_counts_map, at[i], RIG_COUNT_FAILED);
            }
        }
    }
}

static void *watch(void *arg)
{
    rig_mpi *m = arg;
    pthread_mutex_lock(&m->lock);
    while (!m->wstop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += WATCH_NS;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&m->wake_watcher, &m->lock, &ts);
        if (m->wstop) {
            break;
        }
        bool failed = atomic_load(&m->failed);
        for (int r = 0; r < m->size; r++) {
            struct pollfd pf = {.fd = m->pidfd[r], .events = POLLIN};
            if (m->pidfd[r] < 0 || poll(&pf, 1, 0) <= 0) {
                continue;
            }
            /* A same-node peer's process ended: the job failed. */
            close(m->pidfd[r]);
            m->pidfd[r] = -1;
            m->gone[r] = true;
            atomic_store(&m->left, r);
            char *msg = NULL;
            rig_err(&msg, "failed: rank %d (on this node) died", r);
            char *none = NULL;
            if (msg != NULL &&
                !atomic_compare_exchange_strong(&m->why, &none, msg)) {
                free(msg);
            }
            atomic_store(&m->failed, true);
            failed = true;
        }
        for (rig_mend *e = m->ends; e != NULL && !failed; e = e->next) {
            if (rig_count_load(e->counts, RIG_READY_AT) == RIG_COUNT_FAILED ||
                rig_count_load(e->counts, RIG_SENT_AT) == RIG_COUNT_FAILED ||
                rig_count_load(e->counts, RIG_ARRIVED_AT) == RIG_COUNT_FAILED) {
                char *msg = NULL;
                rig_err(&msg,
                        "failed: rank %d's end of rail %lld to rank %d "
                        "failed (a peer failed the job)",
                        m->rank, (long long)e->id, e->peer);
                char *none = NULL;
                if (msg != NULL &&
                    !atomic_compare_exchange_strong(&m->seen, &none, msg)) {
                    free(msg);
                }
                atomic_store(&m->failed, true);
                failed = true;
            }
        }
        if (failed) {
            raise_all_locked(m);
        }
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

/* ---- the pair's exchanges ------------------------------------------------ */

/* Whether another rank told this one that the job failed; if so the job
 * fails here too (and tells the others). */
static bool poll_fail(rig_mpi *m)
{
    if (atomic_load(&m->why) != NULL) {
        return true;
    }
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_FAIL, m->comm, &flag, &st) !=
            MPI_SUCCESS ||
        !flag) {
        return atomic_load(&m->failed);
    }
    int count = 0;
    MPI_Get_count(&st, MPI_CHAR, &count);
    char *why = malloc(count > 0 ? (size_t)count + 1 : 1);
    char dummy[1];
    MPI_Recv(why != NULL ? why : dummy, why != NULL ? count : 0, MPI_CHAR,
             st.MPI_SOURCE, TAG_FAIL, m->comm, MPI_STATUS_IGNORE);
    char *msg = NULL;
    if (why != NULL) {
        why[count > 0 ? count : 0] = '\0';
        rig_err(&msg, "failed: rank %d: %s", st.MPI_SOURCE, why);
    }
    rig_mpi_fail(m, msg != NULL ? msg : "failed: another rank failed");
    free(msg);
    free(why);
    return true;
}

/* Sends buf to the other rank of pc and receives its message of the same
 * tag, waiting with backoff (a late peer costs no spinning core). */
static bool swap(rig_mpi *m, MPI_Comm pc, int other, int tag, const void *buf,
                 size_t len, void **in, size_t *inlen, char **err)
{
    MPI_Request req;
    int rc = MPI_Isend(buf, (int)len, MPI_BYTE, other, tag, pc, &req);
    if (rc != MPI_SUCCESS) {
        return mpi_err(err, rc, "MPI_Isend");
    }
    rig_backoff b = {0};
    int flag = 0;
    MPI_Message msg;
    MPI_Status st;
    while ((rc = MPI_Improbe(other, tag, pc, &flag, &msg, &st)) ==
               MPI_SUCCESS &&
           !flag) {
        if (poll_fail(m)) {
            /* The peer may never answer: the job is over. */
            MPI_Cancel(&req);
            MPI_Request_free(&req);
            return rig_err(err, "%s", rig_mpi_failed(m));
        }
        rig_backoff_step(&b);
    }
    if (rc != MPI_SUCCESS) {
        MPI_Cancel(&req);
        MPI_Request_free(&req);
        return mpi_err(err, rc, "MPI_Improbe");
    }
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    void *mbuf = malloc(count > 0 ? (size_t)count : 1);
    char dummy[1];
    rc = MPI_Mrecv(mbuf != NULL ? mbuf : dummy, mbuf != NULL ? count : 0,
                   MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    b.spins = 0;
    int rc2;
    while ((rc2 = MPI_Test(&req, &flag, MPI_STATUS_IGNORE)) == MPI_SUCCESS &&
           !flag) {
        rig_backoff_step(&b);
    }
    if (mbuf == NULL) {
        return rig_err(err, "nomem: %d-byte message", count);
    }
    if (rc != MPI_SUCCESS || rc2 != MPI_SUCCESS) {
        free(mbuf);
        return mpi_err(err, rc != MPI_SUCCESS ? rc : rc2,
                       rc != MPI_SUCCESS ? "MPI_Mrecv" : "MPI_Test");
    }
    *in = mbuf;
    *inlen = (size_t)count;
    return true;
}

/* The communicator of this rank and peer (lo is rank 0 in it). */
static bool pair_comm(rig_mpi *m, int peer, MPI_Comm *out, char **err)
{
    pthread_mutex_lock(&m->lock);
    MPI_Comm pc = m->pair[peer];
    pthread_mutex_unlock(&m->lock);
    if (pc == MPI_COMM_NULL) {
        MPI_Group all, two;
        int ranks[2] = {m->rank < peer ? m->rank : peer,
                        m->rank < peer ? peer : m->rank};
        int rc = MPI_Comm_group(m->comm, &all);
        if (rc != MPI_SUCCESS) {
            return mpi_err(err, rc, "MPI_Comm_group");
        }
        rc = MPI_Group_incl(all, 2, ranks, &two);
        MPI_Group_free(&all);
        if (rc != MPI_SUCCESS) {
            return mpi_err(err, rc, "MPI_Group_incl");
        }
        rc = MPI_Comm_create_group(m->comm, two, TAG_PAIR, &pc);
        MPI_Group_free(&two);
        if (rc != MPI_SUCCESS) {
            return mpi_err(err, rc, "MPI_Comm_create_group");
        }
        MPI_Comm_set_errhandler(pc, MPI_ERRORS_RETURN);
        /* Whether the peer shares this node: both ranks learn the same. */
        MPI_Comm node;
        int nsize = 0;
        rc = MPI_Comm_split_type(pc, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                                 &node);
        if (rc == MPI_SUCCESS) {
            MPI_Comm_size(node, &nsize);
            MPI_Comm_free(&node);
        }
        pthread_mutex_lock(&m->lock);
        m->shared[peer] = nsize == 2;
        m->pair[peer] = pc;
        pthread_mutex_unlock(&m->lock);
    }
    *out = pc;
    return true;
}

/* One side's message: a header, its lists, its error message. */
typedef struct {
    uint32_t magic;
    int32_t status;
    uint64_t nsend, nreceive, msg_len;
} wire_head;

typedef struct {
    wire_head h;
    const rig_transfer *send, *receive;
    const char *msg;
} side;

static void *pack(int status, const rig_transfer *send, size_t nsend,
                  const rig_transfer *receive, size_t nreceive, const char *msg,
                  size_t *len)
{
    size_t msg_len = msg != NULL ? strlen(msg) + 1 : 0;
    if (status == RIG_RAIL_LISTS) {
        nsend = nreceive = 0; /* may be unreadable */
    }
    wire_head h = {WIRE_MAGIC, status, nsend, nreceive, msg_len};
    size_t ls = nsend * sizeof(rig_transfer), lr = nreceive * sizeof(*receive);
    *len = sizeof(h) + ls + lr + msg_len;
    uint8_t *buf = malloc(*len);
    if (buf == NULL) {
        return NULL;
    }
    memcpy(buf, &h, sizeof(h));
    if (ls > 0) {
        memcpy(buf + sizeof(h), send, ls);
    }
    if (lr > 0) {
        memcpy(buf + sizeof(h) + ls, receive, lr);
    }
    if (msg_len > 0) {
        memcpy(buf + sizeof(h) + ls + lr, msg, msg_len);
    }
    return buf;
}

static bool parse(const void *buf, size_t len, side *s)
{
    if (len < sizeof(wire_head)) {
        return false;
    }
    memcpy(&s->h, buf, sizeof(s->h));
    if (s->h.magic != WIRE_MAGIC || s->h.nsend > (1u << 30) ||
        s->h.nreceive > (1u << 30) || s->h.msg_len > (1u << 20) ||
        sizeof(wire_head) +
                (s->h.nsend + s->h.nreceive) * sizeof(rig_transfer) +
                s->h.msg_len !=
            len) {
        return false;
    }
    const uint8_t *p = (const uint8_t *)buf + sizeof(wire_head);
    s->send = (const rig_transfer *)p;
    s->receive = s->send + s->h.nsend;
    s->msg = s->h.msg_len > 0 ? (const char *)(s->receive + s->h.nreceive)
                              : "(no reason)";
    return true;
}

/* ---- making a rail ------------------------------------------------------- */

typedef struct wire_ack wire_ack;
static void watch_pid(rig_mpi *m, int peer, const wire_ack *t);

/* This side's end before the window: lists and layout; "nomem:" when the
 * machine cannot hold it. */
static bool mend_make(rig_mpi *m, int peer, int64_t id,
                      const rig_transfer *send, size_t nsend,
                      const rig_transfer *receive, size_t nreceive,
                      rig_mend **out, char **err)
{
    rig_mend *e = aligned_alloc(64, (sizeof(*e) + 63) / 64 * 64);
    if (e == NULL) {
        return rig_err(err, "nomem: aligned_alloc(%zu) failed", sizeof(*e));
    }
    memset(e, 0, sizeof(*e));
    atomic_init(&e->wakes, 0);
    e->m = m;
    e->peer = peer;
    e->id = id;
    e->win = MPI_WIN_NULL;
    e->target = m->rank < peer ? 1 : 0;
    if (!rig_end_layout_make(send, nsend, receive, nreceive, 0, &e->layout,
                             err)) {
        free(e);
        return false;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if ((pages > 0 && page > 0 &&
         e->layout.total / (size_t)page > (size_t)pages) ||
        e->layout.total > (size_t)PTRDIFF_MAX) {
        rig_err(err,
                "nomem: an end of %zu bytes is more than this machine's "
                "memory (sysconf: %zu bytes)",
                e->layout.total, (size_t)pages * (size_t)page);
        free(e);
        return false;
    }
    if (nsend > 0) {
        e->send = malloc(nsend * sizeof(*send));
        if (e->send == NULL) {
            free(e);
            return rig_err(err, "nomem: %zu transfers", nsend);
        }
        memcpy(e->send, send, nsend * sizeof(*send));
    }
    e->nsend = nsend;
    e->out_copy = e->layout.outbound_len / 2;
    e->in_copy = rig_copy_bytes(send, nsend, RIG_BY_DST);
    *out = e;
    return true;
}

/* The ack: the outcome of making this side and where its end is. */
struct wire_ack {
    int32_t ok;
    int32_t attached;
    int64_t counts_at, inbound_at; /* in the rail's window */
    int64_t base;                  /* MPI_Get_address of the end */
    int64_t outbound_at;
    int64_t shift; /* the end's displacement in the rail's window */
    int32_t pid;
    char key[KEY_LEN]; /* rig_node_key: equal keys see each other's pids */
};

/* Watches peer's process (once) when it shares this kernel and pid
 * namespace: the watcher polls a pidfd, which is readable once the
 * process ended (a zombie included). */
static void watch_pid(rig_mpi *m, int peer, const wire_ack *t)
{
    char key[KEY_LEN];
    rig_node_key(key, sizeof(key));
    char theirs[KEY_LEN];
    memcpy(theirs, t->key, sizeof(theirs));
    theirs[KEY_LEN - 1] = '\0';
    pthread_mutex_lock(&m->lock);
    if (m->pidfd[peer] < 0 && strcmp(key, theirs) == 0 && t->pid > 0) {
#ifdef SYS_pidfd_open
        m->pidfd[peer] = (int)syscall(SYS_pidfd_open, (pid_t)t->pid, 0);
#endif
    }
    pthread_mutex_unlock(&m->lock);
}

/* Allocates e's window (collective over the pair), zeroes and locks it,
 * attaches it to the job's window, makes the ABI end and rail. */
static bool mend_open(rig_mend *e, MPI_Comm pc, rig_rail **rail, char **err)
{
    rig_mpi *m = e->m;
    pthread_mutex_lock(&m->lock);
    bool shared = m->shared[e->peer];
    pthread_mutex_unlock(&m->lock);
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "accumulate_ops", "same_op");
    MPI_Info_set(info, "same_disp_unit", "true");
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    /* The spec's areas start on pages; MPI's memory need not (osc sm
     * aligns to 8 bytes): one page more, and the end starts on the first
     * page boundary in it. */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *base = NULL;
    MPI_Aint bytes = (MPI_Aint)(e->layout.total + page);
    int rc = shared
                 ? MPI_Win_allocate_shared(bytes, 1, info, pc, &base, &e->win)
                 : MPI_Win_allocate(bytes, 1, info, pc, &base, &e->win);
    MPI_Info_free(&info);
    if (rc != MPI_SUCCESS) {
        e->win = MPI_WIN_NULL;
        return mpi_err(err, rc,
                       shared ? "MPI_Win_allocate_shared" : "MPI_Win_allocate");
    }
    MPI_Win_set_errhandler(e->win, MPI_ERRORS_RETURN);
    e->shift = (page - (uintptr_t)base % page) % page;
    e->base = (uint8_t *)base + e->shift;
    memset(e->base, 0, e->layout.total); /* first touch: this rank's node */
    rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, e->win);
    if (rc != MPI_SUCCESS) {
        return mpi_err(err, rc, "MPI_Win_lock_all");
    }
    e->counts = e->base + e->layout.counts_at;
    e->out = e->base + e->layout.outbound_at;
    if (shared) {
        MPI_Aint size = 0;
        int unit = 0;
        void *peer = NULL;
        if (MPI_Win_shared_query(e->win, e->target, &size, &unit, &peer) ==
            MPI_SUCCESS) {
            e->peer_counts_map = peer; /* + the counts' displacement, below */
        }
    }

    pthread_mutex_lock(&m->lock);
    if (m->attached < m->attach_limit) {
        rc = MPI_Win_attach(m->jobwin, e->base, (MPI_Aint)e->layout.total);
        if (rc == MPI_SUCCESS) {
            m->attached++;
            e->attached = true;
        } else {
            m->attach_limit = m->attached; /* never again */
        }
    }
    pthread_mutex_unlock(&m->lock);

    rig_end_desc d = {
        .wake = mend_wake,
        .ready_fn = NULL,
        .release = mend_release,
        .self = e,
    };
    rig_end_desc_areas(&d, &e->layout, e->base);
    rig_end *end;
    if (!rig_end_make(&d, &end, err)) {
        return false;
    }
    if (!rig_rail_make(e->id, end, rail, err)) {
        rig_end_release(end); /* e is not listed: the hook does nothing */
        return false;
    }
    e->end = end;
    return true;
}

/* Undoes mend_open when the rail was never handed out. */
static void mend_undo(rig_mend *e, rig_rail *rail)
{
    rig_mpi *m = e->m;
    if (rail != NULL) {
        rig_rail_release(rail); /* e is not listed: the hook does nothing */
    }
    if (e->attached) {
        pthread_mutex_lock(&m->lock);
        MPI_Win_detach(m->jobwin, e->base);
        m->attached--;
        pthread_mutex_unlock(&m->lock);
    }
    if (e->win != MPI_WIN_NULL) {
        MPI_Win_unlock_all(e->win);
        MPI_Win_free(&e->win); /* the peer undoes its side too */
    }
    mend_free(e);
}

bool rig_mpi_rail(rig_mpi *m, int peer, int64_t id, const rig_transfer *send,
                  size_t nsend, const rig_transfer *receive, size_t nreceive,
                  rig_rail **out, char **err)
{
    int lo = m->rank < peer ? m->rank : peer;
    int hi = m->rank < peer ? peer : m->rank;

    /* This side: check the lists, lay the end out. */
    int status = RIG_RAIL_OK;
    char *mine = NULL;
    rig_mend *e = NULL;
    poll_fail(m);
    const char *failed = rig_mpi_failed(m);
    if (failed != NULL) {
        status = RIG_RAIL_FAILED;
        rig_err(&mine, "%s", failed);
    } else if (!rig_check_transfers(send, nsend, receive, nreceive, &mine)) {
        status = RIG_RAIL_LISTS;
    } else if (!mend_make(m, peer, id, send, nsend, receive, nreceive, &e,
                          &mine)) {
        status = RIG_RAIL_END;
    }
    size_t len = 0;
    void *buf = pack(status, send, nsend, receive, nreceive, mine, &len);
    if (buf == NULL) {
        status = RIG_RAIL_END;
        free(mine);
        mine = strdup("nomem: rail message");
        buf = pack(RIG_RAIL_END, NULL, 0, NULL, 0, NULL, &len);
    }
    void *in = NULL;
    size_t inlen = 0;
    /* A reason already found (a failed job, bad lists) is the one to
     * report: the exchange's own error, if any, must not replace it. */
    if (buf == NULL || !swap(m, m->comm, peer, TAG_RAIL, buf, len, &in, &inlen,
                             mine == NULL ? &mine : NULL)) {
        free(buf);
        goto err_end;
    }
    free(buf);

    /* Both sides decide alike from the two messages. */
    side them;
    bool parsed = parse(in, inlen, &them);
    if (status != RIG_RAIL_OK) {
        goto err_end;
    }
    if (!parsed) {
        rig_err(&mine, "invalid: rank %d sent a malformed rail message", peer);
        goto err_end;
    }
    if (them.h.status != RIG_RAIL_OK) {
        rig_rail_peer_refused(peer, them.h.status, them.msg, &mine);
        goto err_end;
    }
    rig_rail_lists me = {send, receive, nsend, nreceive};
    rig_rail_lists th = {them.send, them.receive, them.h.nsend,
                         them.h.nreceive};
    bool me_lo = m->rank == lo;
    if (!rig_rail_lists_match(lo, me_lo ? &me : &th, hi, me_lo ? &th : &me,
                              &mine)) {
        goto err_end;
    }
    free(in);
    in = NULL;

    /* Both ranks allocate the window (on their pair's communicator, made
     * once, now that both know the other comes), then tell each other the
     * outcome. */
    rig_rail *rail = NULL;
    MPI_Comm pc = MPI_COMM_NULL;
    bool ok = pair_comm(m, peer, &pc, &mine) && mend_open(e, pc, &rail, &mine);
    MPI_Aint addr = 0;
    if (e->base != NULL) {
        MPI_Get_address(e->base, &addr);
    }
    wire_ack a = {
        .ok = ok ? 1 : 0,
        .attached = e->attached ? 1 : 0,
        .counts_at = (int64_t)(e->shift + e->layout.counts_at),
        .inbound_at = (int64_t)(e->shift + e->layout.inbound_at),
        .outbound_at = (int64_t)(e->shift + e->layout.outbound_at),
        .base = (int64_t)addr,
        .shift = (int64_t)e->shift,
        .pid = (int32_t)getpid(),
    };
    rig_node_key(a.key, sizeof(a.key));
    wire_ack t = {0};
    void *tin = NULL;
    size_t tlen = 0;
    if (!swap(m, m->comm, peer, TAG_ACK, &a, sizeof(a), &tin, &tlen,
              ok ? &mine : NULL)) {
        ok = false;
    } else {
        if (tlen == sizeof(t)) {
            memcpy(&t, tin, sizeof(t));
        }
        if (ok && t.ok != 1) {
            rig_err(&mine,
                    "failed: rank %d could not open its end of rail %lld", peer,
                    (long long)id);
            ok = false;
        }
    }
    free(tin);
    if (!ok) {
        mend_undo(e, rail);
        e = NULL;
        goto err_end;
    }
    e->peer_counts = (MPI_Aint)t.counts_at;
    if (e->peer_counts_map != NULL) {
        e->peer_counts_map += t.counts_at;
    }
    e->peer_in = (MPI_Aint)t.inbound_at;
    e->peer_attached = t.attached != 0;
    watch_pid(m, peer, &t);
    e->disp.rank = peer;
    /* t.base is the peer's end, the *_at its window displacements. */
    int64_t shift = t.shift;
    e->disp.counts = (MPI_Aint)(t.base + t.counts_at - shift);
    e->disp.outbound = (MPI_Aint)(t.base + t.outbound_at - shift);
    e->disp.inbound = (MPI_Aint)(t.base + t.inbound_at - shift);
    e->rail = rail;
    pthread_mutex_lock(&m->lock);
    e->listed = true;
    e->held = true;
    e->in_job = true;
    e->live = true;
    e->next = m->ends;
    m->ends = e;
    m->refs++;
    pthread_mutex_unlock(&m->lock);
    if (rig_mpi_failed(m) != NULL) {
        rig_end_fail(e->end);
    }
    *out = rail;
    return true;

err_end:
    if (e != NULL) {
        mend_free(e);
    }
    free(in);
    if (err != NULL) {
        *err = mine;
    } else {
        free(mine);
    }
    return false;
}

/* ---- looking rails up ---------------------------------------------------- */

static rig_mend *find_locked(rig_mpi *m, const rig_rail *r)
{
    for (rig_mend *e = m->ends; e != NULL; e = e->next) {
        if (e->held && e->rail == r) {
            return e;
        }
    }
    return NULL;
}

int rig_mpi_rail_peer(rig_mpi *m, const rig_rail *r)
{
    pthread_mutex_lock(&m->lock);
    rig_mend *e = find_locked(m, r);
    int peer = e != NULL ? e->peer : -1;
    pthread_mutex_unlock(&m->lock);
    return peer;
}

bool rig_mpi_rail_disp(rig_mpi *m, const rig_rail *r, rig_job_peer_end *out,
                       char **err)
{
    pthread_mutex_lock(&m->lock);
    rig_mend *e = find_locked(m, r);
    bool found = e != NULL, theirs = found && e->peer_attached;
    int peer = found ? e->peer : -1;
    if (theirs) {
        *out = e->disp;
    }
    pthread_mutex_unlock(&m->lock);
    if (!found) {
        return rig_err(err, "invalid: rail %lld is not a rail of this job",
                       (long long)rig_rail_id(r));
    }
    if (!theirs) {
        return rig_err(err,
                       "unsupported: rank %d's end of rail %lld is not "
                       "attached to the window (Open MPI's "
                       "osc_rdma_max_attach)",
                       peer, (long long)rig_rail_id(r));
    }
    return true;
}

/* ---- open and close ------------------------------------------------------ */

static void stop_watcher(rig_mpi *m)
{
    if (m->watching) {
        pthread_mutex_lock(&m->lock);
        m->wstop = true;
        pthread_cond_signal(&m->wake_watcher);
        pthread_mutex_unlock(&m->lock);
        pthread_join(m->watcher, NULL);
        m->watching = false;
    }
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first: a rank that ends
 * MPI with its job open fails the job, tells every rank why, and that it
 * left (so that their closes do not wait for it). */
static int finalize_hook(MPI_Comm comm, int key, void *val, void *extra)
{
    (void)comm;
    (void)key;
    (void)extra;
    rig_mpi *m = val;
    if (m->self_key == MPI_KEYVAL_INVALID) {
        return MPI_SUCCESS; /* rig_mpi_close is removing it */
    }
    char why[128];
    snprintf(why, sizeof(why),
             "failed: rank %d finalized MPI without closing its job", m->rank);
    for (int r = 0; r < m->size; r++) {
        MPI_Request req;
        if (r != m->rank && MPI_Isend(NULL, 0, MPI_BYTE, r, TAG_LEFT, m->comm,
                                      &req) == MPI_SUCCESS) {
            MPI_Request_free(&req);
        }
    }
    rig_mpi_fail(m, why);
    /* The windows go with MPI: the watcher must not touch them. */
    stop_watcher(m);
    m->self_key = MPI_KEYVAL_INVALID; /* the keyval goes with MPI */
    return MPI_SUCCESS;
}

static void watch_finalize(rig_mpi *m)
{
    rig_finalize_watch(finalize_hook, m, &m->self_key);
}

static void unwatch_finalize(rig_mpi *m)
{
    rig_finalize_unwatch(&m->self_key);
}

/* Takes the notices of ranks that finalized MPI with the job open. */
static void poll_left(rig_mpi *m)
{
    int flag = 0;
    MPI_Status st;
    while (MPI_Iprobe(MPI_ANY_SOURCE, TAG_LEFT, m->comm, &flag, &st) ==
               MPI_SUCCESS &&
           flag) {
        MPI_Recv(NULL, 0, MPI_BYTE, st.MPI_SOURCE, TAG_LEFT, m->comm,
                 MPI_STATUS_IGNORE);
        pthread_mutex_lock(&m->lock);
        m->gone[st.MPI_SOURCE] = true;
        pthread_mutex_unlock(&m->lock);
        atomic_store(&m->left, st.MPI_SOURCE);
    }
}

static int mpi_gone(void *arg)
{
    rig_mpi *m = arg;
    poll_left(m);
    return atomic_load(&m->left);
}

bool rig_mpi_barrier(rig_mpi *m)
{
    return rig_barrier_unless_gone(m->comm, m->rank, mpi_gone, m);
}

bool rig_mpi_open(MPI_Comm comm, MPI_Win win, uint64_t attach_limit,
                  rig_mpi **out, char **err)
{
#ifdef MPICH_VERSION
    /* MPICH (4.0, ch4:ucx) carries MPI_Accumulate with MPI_MAX as an
     * active message that completes only when the target enters MPI, and
     * a rank waiting on a rail never does: the carrier's MPI_Win_flush
     * would hang (seen in every RIG_TRANSPORT=mpi test).  With
     * MPIR_CVAR_ASYNC_PROGRESS=1 and MPI_THREAD_MULTIPLE it completes,
     * at about 4 ms a round trip.  Open MPI's osc rdma and sm need no
     * target progress. */
    (void)comm, (void)win, (void)attach_limit, (void)out;
    return rig_err(err,
                   "unsupported: RIG_TRANSPORT=mpi needs one-sided "
                   "accumulates that complete without the target calling "
                   "MPI, which MPICH %s does not give (use the ucx "
                   "transport)",
                   MPICH_VERSION);
#endif
    rig_mpi *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return rig_err(err, "nomem: calloc(%zu) failed", sizeof(*m));
    }
    m->comm = comm;
    m->jobwin = win;
    m->attach_limit = attach_limit;
    MPI_Comm_rank(comm, &m->rank);
    MPI_Comm_size(comm, &m->size);
    m->pair = malloc((size_t)m->size * sizeof(*m->pair));
    m->shared = calloc((size_t)m->size, sizeof(*m->shared));
    m->pidfd = malloc((size_t)m->size * sizeof(*m->pidfd));
    m->gone = calloc((size_t)m->size, sizeof(*m->gone));
    if (m->pair == NULL || m->shared == NULL || m->pidfd == NULL ||
        m->gone == NULL) {
        int size = m->size;
        free(m->pair);
        free(m->shared);
        free(m->pidfd);
        free(m->gone);
        free(m);
        return rig_err(err, "nomem: pair communicators for %d ranks", size);
    }
    for (int r = 0; r < m->size; r++) {
        m->pair[r] = MPI_COMM_NULL;
        m->pidfd[r] = -1;
    }
    atomic_init(&m->left, -1);
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->wake_watcher, NULL);
    m->refs = 1;
    atomic_init(&m->failed, false);
    atomic_init(&m->why, NULL);
    atomic_init(&m->seen, NULL);
    int rc = pthread_create(&m->watcher, NULL, watch, m);
    if (rc != 0) {
        mpi_free(m);
        return rig_err(err, "system: pthread_create failed: %s", strerror(rc));
    }
    m->watching = true;
    watch_finalize(m);
    *out = m;
    return true;
}

void rig_mpi_stop(rig_mpi *m)
{
    /* Held ends stop outside the lock: rig_end_stop waits for wakes in
     * flight, which take it. */
    pthread_mutex_lock(&m->lock);
    size_t n = 0;
    for (rig_mend *e = m->ends; e != NULL; e = e->next) {
        n += e->held ? 1 : 0;
    }
    rig_end **held = calloc(n > 0 ? n : 1, sizeof(*held));
    size_t k = 0;
    for (rig_mend *e = m->ends; e != NULL; e = e->next) {
        if (e->held && held != NULL) {
            held[k++] = rig_end_retain(e->end);
        }
        e->live = false; /* no carrier calls MPI on it any more */
    }
    pthread_mutex_unlock(&m->lock);
    for (size_t i = 0; i < k; i++) {
        rig_end_stop(held[i]);
        rig_end_release(held[i]);
    }
    free(held);
}

static int by_id(const void *a, const void *b)
{
    const rig_mend *x = *(rig_mend *const *)a, *y = *(rig_mend *const *)b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Frees the windows of the rails with peer that neither rank holds; both
 * ranks hold the same windows, taken in id order. */
static void close_pair(rig_mpi *m, int peer, rig_mend **ends, size_t n)
{
    qsort(ends, n, sizeof(*ends), by_id);
    uint8_t *mine = calloc(n > 0 ? n : 1, 1);
    uint8_t *theirs = calloc(n > 0 ? n : 1, 1);
    int other = m->rank < peer ? 1 : 0;
    if (mine == NULL || theirs == NULL) {
        free(mine);
        free(theirs);
        return; /* keep every window: safe, only memory */
    }
    for (size_t i = 0; i < n; i++) {
        mine[i] = ends[i]->held ? 1 : 0;
    }
    if (MPI_Sendrecv(mine, (int)n, MPI_BYTE, other, TAG_CLOSE, theirs, (int)n,
                     MPI_BYTE, other, TAG_CLOSE, m->pair[peer],
                     MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        memset(theirs, 1, n);
    }
    for (size_t i = 0; i < n; i++) {
        rig_mend *e = ends[i];
        if (e->attached) {
            MPI_Win_detach(m->jobwin, e->base);
            e->attached = false;
        }
        if (!mine[i] && !theirs[i]) {
            MPI_Win_unlock_all(e->win);
            MPI_Win_free(&e->win);
        }
    }
    free(mine);
    free(theirs);
}

void rig_mpi_close(rig_mpi *m)
{
    unwatch_finalize(m);
    stop_watcher(m);
    pthread_mutex_lock(&m->lock);
    size_t n = 0;
    for (rig_mend *e = m->ends; e != NULL; e = e->next) {
        n++;
    }
    rig_mend **all = calloc(n > 0 ? n : 1, sizeof(*all));
    rig_mend **one = calloc(n > 0 ? n : 1, sizeof(*one));
    size_t k = 0;
    for (rig_mend *e = m->ends; e != NULL && all != NULL; e = e->next) {
        all[k++] = e;
    }
    pthread_mutex_unlock(&m->lock);
    /* Pairs in ascending order of peer: one global order of pairs, so the
     * pairwise collectives never wait in a cycle.  Without memory for the
     * lists every window stays (safe; only memory). */
    for (int p = 0; p < m->size && all != NULL && one != NULL; p++) {
        size_t np = 0;
        for (size_t i = 0; i < k; i++) {
            if (all[i]->peer == p) {
                one[np++] = all[i];
            }
        }
        if (np > 0 && !m->gone[p]) {
            close_pair(m, p, one, np);
        }
    }
    free(one);
    free(all);
    for (int p = 0; p < m->size; p++) {
        if (m->pair[p] != MPI_COMM_NULL) {
            MPI_Comm_free(&m->pair[p]);
        }
    }
    pthread_mutex_lock(&m->lock);
    rig_mend *dead = NULL;
    for (rig_mend *e = m->ends, *next; e != NULL; e = next) {
        next = e->next;
        e->in_job = false;
        if (!e->held) {
            e->next = dead;
            dead = e;
            m->refs--;
        }
    }
    m->ends = NULL;
    bool last = false;
    mpi_unref_locked(m, &last);
    pthread_mutex_unlock(&m->lock);
    for (rig_mend *e = dead, *next; e != NULL; e = next) {
        next = e->next;
        mend_free(e);
    }
    if (last) {
        mpi_free(m);
    }
}

/* ---- rig_info ------------------------------------------------------------ */

void rig_mpi_info(FILE *out)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(lib, &len) != MPI_SUCCESS) {
        snprintf(lib, sizeof(lib), "unknown");
    }
    char *nl = strchr(lib, '\n');
    if (nl != NULL) {
        *nl = '\0';
    }
    int v = 0, sv = 0;
    MPI_Get_version(&v, &sv);
    fprintf(out, "  MPI:             %s (MPI %d.%d)\n", lib, v, sv);
    fprintf(out, "  method:          one MPI_Win_allocate window per rail "
                 "on its pair's communicator;\n"
                 "                   MPI_Put, MPI_Win_flush, MPI_Accumulate "
                 "(MPI_MAX) of arrived, MPI_Win_flush\n");
    int init = 0, fin = 0, level = -1;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) {
        MPI_Query_thread(&level);
    }
    fprintf(out, "  MPI threads:     %s\n",
            level == MPI_THREAD_MULTIPLE ? "multiple: ready from any thread"
            : level < 0                  ? "(MPI not initialised)"
                        : "below multiple: ready counts as an MPI call "
                          "(serialize it with the application's MPI calls)");
}
