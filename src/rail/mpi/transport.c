/* SPDX-License-Identifier: BSD-3-Clause */
/* The MPI RMA transport of a job: opening, wiring, stopping, closing
 * (the rails' windows), rig_info and the ops table.  How it carries and
 * why: mpi_internal.h. */
#include "mpi_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool rig_mpi_err(char **err, int rc, const char *call)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS) {
        snprintf(s, sizeof(s), "MPI error %d", rc);
    }
    return rig_err(err, "system: %s failed: %s", call, s);
}

void rig_mpi_unref_locked(rig_mpi *m, bool *last)
{
    *last = --m->refs == 0;
}

void rig_mpi_free(rig_mpi *m)
{
    free(m->pair);
    free(m->shared);
    rig_failure_fini(&m->fail);
    pthread_cond_destroy(&m->wake_watcher);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* ---- open and wire --------------------------------------------------------
 */

static const char *handshake_failed(void *self)
{
    rig_mpi *m = self;
    rig_mpi_poll_fail(m); /* a rank may have told why */
    return rig_mpi_failed(&m->super);
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
    if (!rig_failure_init(&m->fail, m->rank, m->size, err)) {
        free(m);
        return false;
    }
    m->pair = malloc((size_t)m->size * sizeof(*m->pair));
    m->shared = calloc((size_t)m->size, sizeof(*m->shared));
    if (m->pair == NULL || m->shared == NULL) {
        int size = m->size;
        free(m->pair);
        free(m->shared);
        rig_failure_fini(&m->fail);
        free(m);
        return rig_err(err, "nomem: pair communicators for %d ranks", size);
    }
    for (int r = 0; r < m->size; r++) {
        m->pair[r] = MPI_COMM_NULL;
    }
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->wake_watcher, NULL);
    m->refs = 1;
    if (!rig_mpi_watch_start(m, err)) {
        rig_mpi_free(m);
        return false;
    }
    *out = &m->super;
    return true;
}

/* Nothing to swap: pair communicators and windows are made rail by rail.
 * The pids of same-node ranks are kept for the watcher.
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
    rig_failure_know(&m->fail, w);
    return true;
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
        if (e->hs.attached) {
            rig_window_detach(m->window, e->base);
            e->hs.attached = false;
        }
        if (!mine[i] && !theirs[i]) {
            MPI_Win_unlock_all(e->win);
            MPI_Win_free(&e->win);
        }
    }
    free(mine);
    free(theirs);
}

/* The windows of rails no rank holds are freed pair by pair (each a
 * collective of two), skipping peers that left the job. */
static void mpi_close(rig_transport *t, bool every)
{
    (void)every; /* a rank that left is skipped pair by pair (gone) */
    rig_mpi *m = rig_mpi_of(t);
    rig_mpi_watch_stop(m);
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
    /* Pairs in ascending order of peer: one global order of pairs, so the
     * pairwise collectives never wait in a cycle.  Without memory for the
     * lists every window stays (safe; only memory). */
    for (int p = 0; p < m->size && ends != NULL && one != NULL; p++) {
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
    for (int p = 0; p < m->size; p++) {
        if (m->pair[p] != MPI_COMM_NULL) {
            MPI_Comm_free(&m->pair[p]);
        }
    }
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
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
    rig_mpi_unref_locked(m, &last);
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
    for (rig_mend *e = dead, *next; e != NULL; e = next) {
        next = e->next;
        rig_mend_free(e);
    }
    if (last) {
        rig_mpi_free(m);
    }
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
    .fail = rig_mpi_fail,
    .failed = rig_mpi_failed,
    .gone = rig_mpi_gone,
    .finalize = rig_mpi_finalize,
    .stop = mpi_stop,
    .close = mpi_close,
    .info = mpi_info,
};
