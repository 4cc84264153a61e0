/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI RMA rail ends: the pair protocol's steps (make, connect: the rail's
 * window on the pair's communicator, finish, discard), release, and the
 * transport's list of ends. */
#include "mpi_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void rig_mend_free(rig_mend *e)
{
    free(e->send);
    free(e);
}

rig_mend *rig_mend_find(rig_mpi *m, const rig_rail *r)
{
    for (rig_mend *e = m->ends; e != NULL; e = e->next) {
        if (e->held && e->rail == r) {
            return e;
        }
    }
    return NULL;
}

bool rig_mpi_owns(rig_transport *t, const rig_end *end)
{
    rig_mpi *m = rig_mpi_of(t);
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    rig_mend *e = m->ends;
    while (e != NULL && !(e->held && e->end == end)) {
        e = e->next;
    }
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
    return e != NULL;
}

/* The ABI's release hook: the window outlives the rail (it is freed
 * collectively, once both ranks released it: the pair protocol's next
 * offers, or close); the structure goes now if the job closed.  No wake
 * runs any more (the ABI stopped the end) and no failure touches a
 * released end: nothing of this rank writes into the peer's end from
 * now on. */
static void mend_release(void *self)
{
    rig_mend *e = self;
    rig_mpi *m = e->m;
    if (!e->listed) {
        e->end = NULL; /* a rail never handed out: the protocol discards e */
        return;
    }
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    e->held = false;
    e->end = NULL;
    e->rail = NULL;
    bool gone = !e->in_job, last = false;
    if (gone) {
        rig_mend **pp = &m->ends;
        while (*pp != NULL && *pp != e) {
            pp = &(*pp)->next;
        }
        if (*pp == e) {
            *pp = e->next;
        }
        rig_mpi_unref_locked(m, &last);
    }
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
    if (gone) {
        rig_mend_free(e);
    }
    if (last) {
        rig_mpi_free(m);
    }
}

/* ---- making ---------------------------------------------------------- */

/* The pair protocol's make: this side's end before the window, lists and
 * layout; "nomem:" when the machine cannot hold it. */
static bool mend_make(void *self, int peer, int64_t id,
                      const rig_transfer *send, size_t nsend,
                      const rig_transfer *receive, size_t nreceive, void **out,
                      const void **desc, size_t *desc_len, char **err)
{
    rig_mpi *m = self;
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
    *desc = NULL; /* the window is made once both offers agree */
    *desc_len = 0;
    return true;
}

/* The communicator of this rank and peer (lo is rank 0 in it). */
static bool pair_comm(rig_mpi *m, int peer, MPI_Comm *out, char **err)
{
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    MPI_Comm pc = m->pair[peer];
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
    if (pc == MPI_COMM_NULL) {
        MPI_Group all, two;
        int ranks[2] = {m->rank < peer ? m->rank : peer,
                        m->rank < peer ? peer : m->rank};
        int rc = MPI_Comm_group(m->comm, &all);
        if (rc != MPI_SUCCESS) {
            return rig_err_mpi(err, rc, "MPI_Comm_group");
        }
        rc = MPI_Group_incl(all, 2, ranks, &two);
        MPI_Group_free(&all);
        if (rc != MPI_SUCCESS) {
            return rig_err_mpi(err, rc, "MPI_Group_incl");
        }
        rc = MPI_Comm_create_group(m->comm, two, TAG_PAIR, &pc);
        MPI_Group_free(&two);
        if (rc != MPI_SUCCESS) {
            return rig_err_mpi(err, rc, "MPI_Comm_create_group");
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
        rig_lock(&m->lock, MPI_LOCK_LEVEL);
        m->shared[peer] = nsize == 2;
        m->pair[peer] = pc;
        rig_unlock(&m->lock, MPI_LOCK_LEVEL);
    }
    *out = pc;
    return true;
}

/* ---- connecting ------------------------------------------------------ */

/* Allocates e's window (collective over the pair), zeroes and locks it,
 * makes the ABI end and rail. */
static bool mend_open(rig_mend *e, MPI_Comm pc, rig_rail **rail, char **err)
{
    rig_mpi *m = e->m;
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    bool shared = m->shared[e->peer];
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
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
        return rig_err_mpi(
            err, rc, shared ? "MPI_Win_allocate_shared" : "MPI_Win_allocate");
    }
    MPI_Win_set_errhandler(e->win, MPI_ERRORS_RETURN);
    e->shift = (page - (uintptr_t)base % page) % page;
    e->base = (uint8_t *)base + e->shift;
    memset(e->base, 0, e->layout.total); /* first touch: this rank's node */
    rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, e->win);
    if (rc != MPI_SUCCESS) {
        return rig_err_mpi(err, rc, "MPI_Win_lock_all");
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

    rig_end_desc d = {
        .wake = rig_mend_wake,
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

/* The pair protocol's connect: the pair's communicator (made once, now
 * that both know the other comes) and the rail's window. */
static bool mend_connect(void *end, const void *desc, size_t desc_len,
                         rig_rail **rail, rig_handshake_mem *mem,
                         const void **answer, size_t *answer_len, char **err)
{
    (void)desc;
    (void)desc_len;
    rig_mend *e = end;
    MPI_Comm pc = MPI_COMM_NULL;
    if (!pair_comm(e->m, e->peer, &pc, err) || !mend_open(e, pc, rail, err)) {
        return false;
    }
    e->rail = *rail;
    e->answer.counts_at = (int64_t)(e->shift + e->layout.counts_at);
    e->answer.inbound_at = (int64_t)(e->shift + e->layout.inbound_at);
    mem->base = e->base;
    mem->layout = &e->layout;
    *answer = &e->answer;
    *answer_len = sizeof(e->answer);
    return true;
}

/* The pair protocol's finish: the peer's end in the rail's window, the
 * end listed (failed at once if the job failed meanwhile). */
static void mend_finish(void *end, const void *answer, size_t answer_len,
                        const rig_handshake_end *he)
{
    rig_mend *e = end;
    rig_mpi *m = e->m;
    rig_mend_answer t = {0};
    if (answer_len == sizeof(t)) {
        memcpy(&t, answer, sizeof(t));
    }
    e->peer_counts = (MPI_Aint)t.counts_at;
    if (e->peer_counts_map != NULL) {
        e->peer_counts_map += t.counts_at;
    }
    e->peer_in = (MPI_Aint)t.inbound_at;
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    e->hs = *he;
    e->listed = true;
    e->held = true;
    e->in_job = true;
    e->live = true;
    e->next = m->ends;
    m->ends = e;
    m->refs++;
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
    if (rig_failure_failed(&m->fail)) {
        rig_end_fail(e->end);
    }
}

/* The pair protocol's discard: e was never listed.  Its window, if made,
 * is freed by both ranks when both discard at the same step (together);
 * otherwise the exchange failed with the job and the peer may be gone,
 * so the window is left to MPI (a collective with a dead peer would
 * never return). */
static void mend_discard(void *end, rig_rail *rail, bool together)
{
    rig_mend *e = end;
    if (rail != NULL) {
        rig_rail_release(rail); /* e is not listed: the hook does nothing */
    }
    if (e->win != MPI_WIN_NULL && together) {
        MPI_Win_unlock_all(e->win);
        MPI_Win_free(&e->win); /* the peer undoes its side too */
    }
    rig_mend_free(e);
}

void rig_mend_destroy(rig_mpi *m, rig_mend *e)
{
    if (e->hs.attached) {
        rig_window_detach(m->window, e->base);
        e->hs.attached = false;
    }
    if (e->win != MPI_WIN_NULL) {
        MPI_Win_unlock_all(e->win);
        MPI_Win_free(&e->win);
    }
    rig_mend_free(e);
}

/* ---- freeing released rails ---------------------------------------------- */

static bool released_by_me(const rig_mend *e, int peer)
{
    return e->listed && !e->held && e->in_job && e->peer == peer;
}

static int by_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The pair protocol's released: the carrier's MPI calls are done under
 * the lock and flushed, so a released end is quiet at once. */
static void mend_released(void *self, int peer, int64_t **ids, size_t *n)
{
    rig_mpi *m = self;
    *ids = NULL;
    *n = 0;
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    size_t k = 0;
    for (rig_mend *e = m->ends; e != NULL; e = e->next) {
        k += released_by_me(e, peer) ? 1 : 0;
    }
    int64_t *out = k > 0 ? malloc(k * sizeof(*out)) : NULL;
    k = 0;
    for (rig_mend *e = m->ends; e != NULL && out != NULL; e = e->next) {
        if (released_by_me(e, peer)) {
            out[k++] = e->id;
        }
    }
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
    if (out != NULL) {
        qsort(out, k, sizeof(*out), by_id);
    }
    *ids = out;
    *n = k;
}

/* The pair protocol's free_released: both ranks free the same windows in
 * the same order, right after the offers that agreed on them. */
static void mend_free_released(void *self, int peer, const int64_t *ids,
                               size_t n)
{
    rig_mpi *m = self;
    for (size_t i = 0; i < n; i++) {
        rig_lock(&m->lock, MPI_LOCK_LEVEL);
        rig_mend **pp = &m->ends;
        while (*pp != NULL &&
               !((*pp)->id == ids[i] && released_by_me(*pp, peer))) {
            pp = &(*pp)->next;
        }
        rig_mend *e = *pp;
        bool last = false;
        if (e != NULL) {
            *pp = e->next;
            rig_mpi_unref_locked(m, &last); /* the job holds one: not last */
        }
        rig_unlock(&m->lock, MPI_LOCK_LEVEL);
        if (e != NULL) {
            rig_mend_destroy(m, e);
        }
    }
}

const rig_handshake_ops rig_mend_handshake = {
    .make = mend_make,
    .connect = mend_connect,
    .finish = mend_finish,
    .discard = mend_discard,
    .released = mend_released,
    .free_released = mend_free_released,
};
