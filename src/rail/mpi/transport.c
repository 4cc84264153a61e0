/* SPDX-License-Identifier: BSD-3-Clause */
/* The MPI RMA transport of a job: opening, wiring, stopping, closing
 * (the rails' windows), rig_info and the ops table.  How it carries and
 * why: mpi_internal.h. */
#include "mpi_internal.h"

#include "../base/finalize.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void rig_mpi_unref_locked(rig_mpi *m, bool *last)
{
    *last = --m->refs == 0;
}

void rig_mpi_free(rig_mpi *m)
{
    /* The job lets go of its record first: nothing reaches m after. */
    if (m->freed != NULL) {
        m->freed(m->freed_arg);
    }
    free(m->pair);
    free(m->shared);
    free(m->in_pair);
    rig_failure_fini(&m->fail);
    if (m->wake_fd >= 0) {
        close(m->wake_fd);
    }
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* ---- open and wire --------------------------------------------------------
 */

/* The pair protocol's view of the job's failure: its reason, once it
 * came (a rail refused names the cause, not the stand-in). */
static const char *handshake_failed(void *self)
{
    return rig_failure_settled(self, RIG_REASON_WAIT_NS);
}

static bool mpi_open(const rig_transport_params *p, rig_transport **out,
                     char **err)
{
#ifdef MPICH_VERSION
    /* MPICH (4.0, ch4:ucx) carries MPI_Accumulate with MPI_MAX as an
     * active message that completes only when the target enters MPI, and
     * a rank waiting on a rail never does: the carrier's MPI_Win_flush
     * would hang (seen in every RIG_TRANSPORT=mpi test).  With
     * MPIR_CVAR_ASYNC_PROGRESS=1 and MPI_THREAD_MULTIPLE it completes,
     * at about 4 ms a round trip.  Open MPI's osc rdma and sm need no
     * target progress. */
    (void)p, (void)out;
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
    m->super.ops = &rig_mpi_ops;
    m->comm = p->comm;
    m->rank = p->rank;
    m->size = p->size;
    m->handshake = (rig_handshake){
        .ops = &rig_mend_handshake,
        .self = m,
        .comm = p->comm,
        .rank = p->rank,
        .failed = handshake_failed,
    };
    m->wake_fd = -1;
    if (!rig_failure_init(&m->fail, m->rank, m->size, rig_mpi_peer_gone, m,
                          err)) {
        free(m);
        return false;
    }
    m->pair = malloc((size_t)m->size * sizeof(*m->pair));
    m->shared = calloc((size_t)m->size, sizeof(*m->shared));
    m->in_pair = calloc((size_t)m->size, sizeof(*m->in_pair));
    if (m->pair == NULL || m->shared == NULL || m->in_pair == NULL) {
        int size = m->size;
        free(m->pair);
        free(m->shared);
        free(m->in_pair);
        rig_failure_fini(&m->fail);
        free(m);
        return rig_err(err, "nomem: pair communicators for %d ranks", size);
    }
    for (int r = 0; r < m->size; r++) {
        m->pair[r] = MPI_COMM_NULL;
    }
    pthread_mutex_init(&m->lock, NULL);
    m->refs = 1;
    m->freed = p->freed; /* the job's record goes with m (transport.h) */
    m->freed_arg = p->freed_arg;
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    m->multiple = level == MPI_THREAD_MULTIPLE;
    *out = &m->super;
    return true;
}

/* Nothing to swap: pair communicators and windows are made rail by rail.
 * Every rank of this node is watched from now on, rails or not.
 *
 * Ranks on different nodes are refused.  Open MPI's osc ucx over TCP
 * completes MPI_Win_flush only once the target's UCX worker is
 * progressed, and a rank waiting on a rail never enters MPI: rails hung
 * (seen with gdb; a helper thread calling MPI_Iprobe made them work, at
 * 9-70 ms a round trip).  With Debian's defaults (osc ^ucx,pt2pt) no
 * component reaches another node at all, and a peer's death or a cut link
 * on another node is invisible to MPI RMA.  Every rank sees some rank
 * off its node, so every rank refuses alike. */
static bool mpi_wire(rig_transport *t, const rig_transport_wiring *w,
                     char **err)
{
    rig_mpi *m = rig_mpi_of(t);
    for (int r = 0; r < m->size; r++) {
        if (!w->local[r]) {
            return rig_err(err,
                           "unsupported: RIG_TRANSPORT=mpi carries rails "
                           "between ranks of one node only, and ranks %d "
                           "and %d are on different nodes: across nodes "
                           "MPI's one-sided calls over a network without "
                           "RDMA complete only when the target calls MPI, "
                           "which a rank waiting on a rail does not (use "
                           "the ucx transport)",
                           m->rank, r);
        }
    }
    m->window = w->window;
    m->handshake.window = w->window;
    return rig_mpi_watch_start(m, w, err);
}

/* ---- rails ----------------------------------------------------------------
 */

static bool mpi_rail(rig_transport *t, int peer, int64_t id,
                     const rig_transfer *send, size_t nsend,
                     const rig_transfer *receive, size_t nreceive,
                     rig_rail **out, char **err)
{
    return rig_handshake_rail(&rig_mpi_of(t)->handshake, peer, id, send, nsend,
                              receive, nreceive, out, err);
}

static bool mpi_rail_far(rig_transport *t, const rig_rail *r, rig_rail_far *out)
{
    rig_mpi *m = rig_mpi_of(t);
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    rig_mend *e = rig_mend_find(m, r);
    if (e != NULL) {
        *out = e->hs.far;
    }
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
    return e != NULL;
}

/* ---- stopping and closing --------------------------------------------------
 */

static void mpi_stop(rig_transport *t)
{
    rig_mpi *m = rig_mpi_of(t);
    rig_mpi_tell(m); /* a failure is told before closing */
    /* Held ends stop outside the lock: rig_end_stop waits for wakes in
     * flight, which take it. */
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
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
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
    for (size_t i = 0; i < k; i++) {
        rig_end_stop(held[i]);
        rig_end_release(held[i]);
    }
    free(held);
}

/* One entry of close's exchange: a rail of the pair and whether this
 * rank still holds it. */
typedef struct {
    int64_t id;
    int64_t held;
} close_entry;

static int by_id(const void *a, const void *b)
{
    const rig_mend *x = *(rig_mend *const *)a, *y = *(rig_mend *const *)b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Swaps close's lists with peer on the job's communicator, giving up
 * (false) once the peer is known to have left: a dead peer would never
 * answer.  *theirs (malloc'd) and *ntheirs on success. */
static bool close_swap(rig_mpi *m, int peer, const close_entry *mine, size_t n,
                       close_entry **theirs, size_t *ntheirs)
{
    MPI_Request req;
    if (MPI_Isend(mine, (int)(n * sizeof(*mine)), MPI_BYTE, peer, TAG_CLOSE,
                  m->comm, &req) != MPI_SUCCESS) {
        return false;
    }
    rig_backoff b = {0};
    MPI_Message msg;
    MPI_Status st;
    int flag = 0;
    for (;;) {
        if (MPI_Improbe(peer, TAG_CLOSE, m->comm, &flag, &msg, &st) !=
            MPI_SUCCESS) {
            flag = 0;
            break;
        }
        if (flag || rig_failure_has_left(&m->fail, peer)) {
            break;
        }
        rig_backoff_step(&b);
    }
    if (!flag) {
        MPI_Cancel(&req);
        MPI_Request_free(&req);
        return false;
    }
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    close_entry *in = malloc(count > 0 ? (size_t)count : 1);
    char dummy[1];
    MPI_Mrecv(in != NULL ? (void *)in : dummy, in != NULL ? count : 0, MPI_BYTE,
              &msg, MPI_STATUS_IGNORE);
    b.spins = 0;
    for (;;) {
        if (MPI_Test(&req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag ||
            rig_failure_has_left(&m->fail, peer)) {
            break;
        }
        rig_backoff_step(&b);
    }
    if (!flag || in == NULL) {
        if (!flag) {
            MPI_Cancel(&req);
            MPI_Request_free(&req);
        }
        free(in);
        return false;
    }
    *theirs = in;
    *ntheirs = (size_t)count / sizeof(*in);
    return true;
}

/* Frees the windows of the rails with peer that neither rank holds: both
 * ranks swap their lists (ids and held) and hand the rails in both with
 * neither holding, in id order, to MPI_Finalize to free.  Rails this rank
 * gave up on or never finished alone (a failed exchange) are in one list
 * only and stay. */
static void close_pair(rig_mpi *m, int peer, rig_mend **ends, size_t n)
{
    qsort(ends, n, sizeof(*ends), by_id);
    close_entry *mine = calloc(n > 0 ? n : 1, sizeof(*mine));
    close_entry *theirs = NULL;
    size_t nt = 0;
    if (mine == NULL) {
        return; /* keep every window: safe, only memory */
    }
    for (size_t i = 0; i < n; i++) {
        mine[i] = (close_entry){ends[i]->id, ends[i]->held ? 1 : 0};
    }
    if (!close_swap(m, peer, mine, n, &theirs, &nt)) {
        free(mine);
        return;
    }
    for (size_t i = 0, j = 0; i < n && j < nt;) {
        if (mine[i].id < theirs[j].id) {
            i++;
        } else if (theirs[j].id < mine[i].id) {
            j++;
        } else {
            rig_mend *e = ends[i];
            if (!mine[i].held && !theirs[j].held && e->win != MPI_WIN_NULL) {
                MPI_Win_unlock_all(e->win);
                rig_free_at_finalize(&e->win); /* see ../base/finalize.h */
            }
            i++;
            j++;
        }
    }
    free(mine);
    free(theirs);
}

/* The windows of rails no rank holds are freed pair by pair (each a
 * collective of two, at MPI_Finalize), skipping peers that left the job;
 * a failed job frees none (the peer of any may be gone, or may have given
 * up a step of the pair protocol that this rank finished): they go with
 * MPI. */
static bool mpi_close(rig_transport *t, bool every)
{
    (void)every; /* a rank that left is skipped pair by pair (gone) */
    rig_mpi *m = rig_mpi_of(t);
    bool failed = rig_failure_failed(&m->fail);
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    size_t n = 0;
    for (rig_mend *e = m->ends; e != NULL; e = e->next) {
        n++;
    }
    rig_mend **ends = calloc(n > 0 ? n : 1, sizeof(*ends));
    rig_mend **one = calloc(n > 0 ? n : 1, sizeof(*one));
    size_t k = 0;
    for (rig_mend *e = m->ends; e != NULL && ends != NULL; e = e->next) {
        ends[k++] = e;
    }
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
    /* Out of the job's window first (freed next, or abandoned). */
    for (size_t i = 0; i < k; i++) {
        if (ends[i]->hs.attached) {
            rig_window_detach(m->window, ends[i]->base);
            ends[i]->hs.attached = false;
        }
    }
    /* Pairs in ascending order of peer: one global order of pairs, so the
     * pairwise collectives never wait in a cycle.  Without memory for the
     * lists every window stays (safe; only memory).  The watcher runs on:
     * a peer that dies meanwhile is given up. */
    for (int p = 0; !failed && p < m->size && ends != NULL && one != NULL;
         p++) {
        size_t np = 0;
        for (size_t i = 0; i < k; i++) {
            if (ends[i]->peer == p) {
                one[np++] = ends[i];
            }
        }
        if (np > 0 && !rig_failure_has_left(&m->fail, p)) {
            close_pair(m, p, one, np);
        }
    }
    free(one);
    free(ends);
    rig_mpi_watch_stop(m);
    failed = rig_failure_failed(&m->fail);
    for (int p = 0; p < m->size; p++) {
        if (m->pair[p] != MPI_COMM_NULL && !failed) {
            MPI_Comm_free(&m->pair[p]);
        }
        m->pair[p] = MPI_COMM_NULL;
    }
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    m->closed = true; /* from here on: no MPI (failed, owns) */
    /* Held ends stay listed (owns finds them) until released. */
    rig_mend *dead = NULL;
    for (rig_mend **pp = &m->ends; *pp != NULL;) {
        rig_mend *e = *pp;
        e->in_job = false;
        if (e->held) {
            pp = &e->next;
            continue;
        }
        *pp = e->next;
        e->next = dead;
        dead = e;
        m->refs--;
    }
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
    for (rig_mend *e = dead, *next; e != NULL; e = next) {
        next = e->next;
        rig_mend_free(e);
    }
    rig_failure_look(&m->fail); /* a death during the close */
    bool died = rig_failure_died(&m->fail);
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    bool last = false;
    rig_mpi_unref_locked(m, &last);
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
    if (last) {
        rig_mpi_free(m);
    }
    return died;
}

/* ---- rig_info --------------------------------------------------------------
 */

static bool mpi_info(FILE *out, char **err)
{
    (void)err;
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
    fprintf(out, "  nodes:           one: a job whose ranks are on "
                 "several nodes is refused at\n"
                 "                   rig_job_open (MPI RMA there waits for "
                 "the target to call MPI)\n");
    fprintf(out, "  MPI threads:     %s\n",
            level == MPI_THREAD_MULTIPLE ? "multiple: ready from any thread"
            : level < 0                  ? "(MPI not initialised)"
                        : "below multiple: ready counts as an MPI call "
                          "(serialize it with the application's MPI calls)");
    return true;
}

const rig_transport_ops rig_mpi_ops = {
    .name = "mpi",
    .about = "MPI RMA: a window per rail",
    .open = mpi_open,
    .wire = mpi_wire,
    .rail = mpi_rail,
    .rail_far = mpi_rail_far,
    .owns = rig_mpi_owns,
    .fail = rig_mpi_fail,
    .failed = rig_mpi_failed,
    .gone = rig_mpi_gone,
    .finalize = rig_mpi_finalize,
    .stop = mpi_stop,
    .close = mpi_close,
    .info = mpi_info,
};
