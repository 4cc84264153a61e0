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
    e->step_req = MPI_REQUEST_NULL;
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
        rig_mpi_in_pair(m, peer, "MPI_Comm_create_group");
        rc = MPI_Comm_create_group(m->comm, two, TAG_PAIR, &pc);
        MPI_Group_free(&two);
        if (rc != MPI_SUCCESS) {
            return rig_err_mpi(err, rc, "MPI_Comm_create_group");
        }
        MPI_Comm_set_errhandler(pc, MPI_ERRORS_RETURN);
        /* Whether the peer shares this node: both ranks learn the same. */
        MPI_Comm node;
        int nsize = 0;
        rig_mpi_in_pair(m, peer, "MPI_Comm_split_type");
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

/* ---- agreeing to connect ---------------------------------------------- */

/* Connecting is a collective over the pair (MPI_Win_free of the rails
 * both released, MPI_Comm_create_group on the pair's first rail,
 * MPI_Win_allocate[_shared]) that Open MPI 4.1 cannot abort: both ranks
 * enter it, or neither.  The pair protocol's exchanges
 * give up when the job fails, and one rank may give up on its wait for
 * the offers while the other, holding both, goes on to connect: that one
 * then waited in the window's allocation for good (the hang of
 * together_kill_during_mpi_np3, where the death of a third rank failed
 * the job under a live pair).  No bounded exchange between two ranks
 * that may both give up settles whether both go on (the two generals),
 * so one of them decides: the pair's lower rank, the leader.  Before the
 * collective each rank sends the other a word about the rail:
 *   - the follower sends COMING and waits for the leader's word, giving
 *     up only when the leader is gone (died, or finalized MPI);
 *   - the leader waits for the follower's word: on COMING it answers
 *     COMING and both connect; when the job fails first (or the follower
 *     is gone, or says NOT) it answers NOT (not to a rank gone) and gives
 *     up, and so does the follower on reading it;
 *   - a rank that discards its end before connecting (it gave up on an
 *     exchange, or the offers disagreed) sends NOT: its peer may be
 *     waiting at connect.
 * The follower's wait is bounded: it is at connect only with the
 * leader's offer, so the leader made its end, and every way out of the
 * pair protocol for a made end passes connect (which answers) or discard
 * (which sends NOT).  The leader's wait ends with the job's failure.
 * Words carry the rail's id: one of an earlier rail (sent by a rank that
 * gave up, never read) is dropped.  What remains: a peer that dies inside
 * the collective itself, which no rank can leave: the collective is
 * marked (rig_mpi_in_pair), and the watcher ends a process left in it
 * (failure.c). */

enum { STEP_NOT = 0, STEP_COMING = 1 };

/* Whether the leader of e's pair is this rank (the pair's lower rank). */
static bool leads(const rig_mend *e)
{
    return e->m->rank < e->peer;
}

/* The job's failure, for a rail that gave up before connecting. */
static bool step_failed(rig_mpi *m, int peer, char **err)
{
    const char *why = rig_failure_settled(&m->super, RIG_REASON_WAIT_NS);
    if (why != NULL) {
        return rig_err(err, "%s", why);
    }
    return rig_err(err, "failed: rank %d left the job", peer);
}

/* Sends word about e's rail to the peer (once per end). */
static bool step_send(rig_mend *e, int64_t word, char **err)
{
    rig_mpi *m = e->m;
    e->stepped = true;
    e->step_buf = malloc(2 * sizeof(*e->step_buf));
    if (e->step_buf == NULL) {
        return rig_err(err, "nomem: a 16-byte message to rank %d", e->peer);
    }
    e->step_buf[0] = e->id;
    e->step_buf[1] = word;
    int rc = MPI_Isend(e->step_buf, 2, MPI_INT64_T, e->peer, TAG_STEP, m->comm,
                       &e->step_req);
    if (rc != MPI_SUCCESS) {
        free(e->step_buf);
        e->step_buf = NULL;
        return rig_err_mpi(err, rc, "MPI_Isend");
    }
    return true;
}

/* Ends the send of e's word: done (MPI buffers a 16-byte send: done at
 * once), or, if not within 100 ms, handed to MPI (MPI_Request_free) with
 * its buffer kept for good (16 bytes, which MPI may read until sent). */
static void step_end(rig_mend *e)
{
    if (e->step_buf == NULL) {
        return;
    }
    uint64_t until = rig_now_ns() + 100000000u;
    rig_backoff b = {0};
    for (;;) {
        int flag = 0;
        if (MPI_Test(&e->step_req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            e->step_buf = NULL; /* the request's state is unknown: keep it */
            return;
        }
        if (flag) {
            free(e->step_buf);
            e->step_buf = NULL;
            return;
        }
        if (rig_now_ns() > until) {
            MPI_Request_free(&e->step_req);
            e->step_buf = NULL;
            return;
        }
        rig_backoff_step(&b);
    }
}

/* How a wait for the peer's word ended. */
typedef enum { WORD_GOT, WORD_GONE, WORD_FAILED, WORD_ERROR } word_wait;

/* Waits for the peer's word on e's rail into *word; WORD_GONE once the
 * peer is gone, WORD_FAILED (give_up only) once the job failed, and
 * WORD_ERROR with "system:" when MPI fails. */
static word_wait step_recv(rig_mend *e, bool give_up, int64_t *word, char **err)
{
    rig_mpi *m = e->m;
    rig_backoff b = {0};
    for (;;) {
        int flag = 0;
        MPI_Message msg;
        MPI_Status st;
        int rc = MPI_Improbe(e->peer, TAG_STEP, m->comm, &flag, &msg, &st);
        if (rc != MPI_SUCCESS) {
            rig_err_mpi(err, rc, "MPI_Improbe");
            return WORD_ERROR;
        }
        if (flag) {
            int64_t in[2] = {-1, STEP_NOT};
            rc = MPI_Mrecv(in, 2, MPI_INT64_T, &msg, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) {
                rig_err_mpi(err, rc, "MPI_Mrecv");
                return WORD_ERROR;
            }
            if (in[0] == e->id) {
                *word = in[1];
                return WORD_GOT;
            }
            continue; /* an earlier rail's, from a rank that gave up */
        }
        /* Polls the ranks that left and the failures told (MPI). */
        rig_mpi_gone(&m->super, NULL);
        if (rig_failure_has_left(&m->fail, e->peer)) {
            return WORD_GONE;
        }
        if (give_up && rig_transport_failed(&m->super, NULL) != NULL) {
            return WORD_FAILED;
        }
        rig_backoff_step(&b);
    }
}

/* The peer said NOT: "failed:" with the job's failure, or naming the
 * peer when the job has not failed (an error of its own). */
static bool step_refused(rig_mend *e, char **err)
{
    if (rig_transport_failed(&e->m->super, NULL) != NULL) {
        return step_failed(e->m, e->peer, err);
    }
    return rig_err(err,
                   "failed: rank %d gave up rail %lld (its error says why)",
                   e->peer, (long long)e->id);
}

/* Whether both ranks connect e's rail (see above): true when they do;
 * false with "failed:" (or "system:", "nomem:") when neither does. */
static bool step_agree(rig_mend *e, char **err)
{
    rig_mpi *m = e->m;
    int64_t word = STEP_NOT;
    if (!leads(e)) {
        if (!step_send(e, STEP_COMING, err)) {
            /* The leader waits for this word: end its wait. */
            rig_mpi_fail(&m->super, "failed: a rank could not agree to "
                                    "connect a rail");
            return false;
        }
        switch (step_recv(e, false, &word, err)) {
        case WORD_GOT:
            if (word != STEP_COMING) {
                return step_refused(e, err);
            }
            /* A leader seen dead since would leave this rank in the
             * collective: the cheap last look (the watcher's). */
            if (rig_failure_has_left(&m->fail, e->peer)) {
                return step_failed(m, e->peer, err);
            }
            return true;
        case WORD_ERROR:
            return false;
        default: /* the leader is gone */
            return step_failed(m, e->peer, err);
        }
    }
    switch (step_recv(e, true, &word, err)) {
    case WORD_GOT:
        if (word != STEP_COMING) {
            e->stepped = true; /* the follower gave up: it waits for none */
            return step_refused(e, err);
        }
        if (rig_failure_has_left(&m->fail, e->peer)) {
            e->stepped = true; /* it died since: nobody waits */
            return step_failed(m, e->peer, err);
        }
        if (!step_send(e, STEP_COMING, err)) {
            /* The follower waits for this word: end its wait. */
            rig_mpi_fail(&m->super, "failed: a rank could not agree to "
                                    "connect a rail");
            return false;
        }
        return true;
    case WORD_FAILED:
        step_send(e, STEP_NOT, NULL); /* first: the follower waits for it */
        return step_failed(m, e->peer, err);
    case WORD_GONE:
        e->stepped = true; /* nobody waits */
        return step_failed(m, e->peer, err);
    default:
        /* MPI failed here: the follower still waits for a word. */
        step_send(e, STEP_NOT, NULL);
        rig_mpi_fail(&m->super, "failed: a rank could not agree to connect "
                                "a rail");
        return false;
    }
}

/* ---- connecting ------------------------------------------------------ */

static void free_marked(rig_mpi *m, int peer);

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
    rig_mpi_in_pair(m, e->peer,
                    shared ? "MPI_Win_allocate_shared" : "MPI_Win_allocate");
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

/* The pair protocol's connect: once both ranks agreed to (above), the
 * windows of the rails both released (marked in this meeting's offers),
 * the pair's communicator (made once) and the rail's window. */
static bool mend_connect(void *end, const void *desc, size_t desc_len,
                         rig_rail **rail, rig_handshake_mem *mem,
                         const void **answer, size_t *answer_len, char **err)
{
    (void)desc;
    (void)desc_len;
    rig_mend *e = end;
    MPI_Comm pc = MPI_COMM_NULL;
    bool ok = step_agree(e, err);
    if (ok) {
        free_marked(e->m, e->peer);
        ok = pair_comm(e->m, e->peer, &pc, err) && mend_open(e, pc, rail, err);
        rig_mpi_in_pair(e->m, e->peer, NULL);
    }
    step_end(e);
    if (!ok) {
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

/* The pair protocol's discard: e was never listed.  Before connect, the
 * peer is told NOT (it may be waiting at connect for this rank's word).
 * Its window, if made, is freed by both ranks when both discard at the
 * same step (together); otherwise the exchange failed with the job and
 * the peer may be gone, so the window is left to MPI (a collective with
 * a dead peer would never return). */
static void mend_discard(void *end, rig_rail *rail, bool together)
{
    rig_mend *e = end;
    if (!e->stepped) {
        /* Before connect: the peer may be waiting there for a word. */
        step_send(e, STEP_NOT, NULL);
        step_end(e);
    }
    if (rail != NULL) {
        rig_rail_release(rail); /* e is not listed: the hook does nothing */
    }
    if (e->win != MPI_WIN_NULL && together) {
        MPI_Win_unlock_all(e->win);
        rig_mpi_in_pair(e->m, e->peer, "MPI_Win_free");
        MPI_Win_free(&e->win); /* the peer undoes its side too */
        rig_mpi_in_pair(e->m, e->peer, NULL);
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
        if (e->peer == peer) {
            e->freeing = false; /* a new meeting: see mend_free_released */
        }
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

/* The pair protocol's free_released: marks the rails both ranks
 * released, for this meeting's connect to free.  Not freed here: the
 * frees are collectives over the pair, and a rank whose wait for the
 * offers gave up (the job failed) is not here -- its peer would wait in
 * MPI_Win_free for good.  Connect happens only once both ranks agreed to
 * it, and then both marked the same rails in this meeting (both got both
 * offers); the marks of a meeting that does not connect are dropped at
 * the pair's next (mend_released), whose offers list those rails again. */
static void mend_free_released(void *self, int peer, const int64_t *ids,
                               size_t n)
{
    rig_mpi *m = self;
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    for (rig_mend *e = m->ends; e != NULL; e = e->next) {
        for (size_t i = 0; i < n && released_by_me(e, peer); i++) {
            if (e->id == ids[i]) {
                e->freeing = true;
            }
        }
    }
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
}

/* Frees the windows of the rails with peer marked by this meeting's
 * free_released, in increasing id, as the peer does; at connect, once
 * both ranks agreed to it. */
static void free_marked(rig_mpi *m, int peer)
{
    for (;;) {
        rig_lock(&m->lock, MPI_LOCK_LEVEL);
        rig_mend **first = NULL;
        for (rig_mend **pp = &m->ends; *pp != NULL; pp = &(*pp)->next) {
            if ((*pp)->freeing && released_by_me(*pp, peer) &&
                (first == NULL || (*pp)->id < (*first)->id)) {
                first = pp;
            }
        }
        rig_mend *e = first != NULL ? *first : NULL;
        bool last = false;
        if (e != NULL) {
            *first = e->next;
            rig_mpi_unref_locked(m, &last); /* the job holds one: not last */
        }
        rig_unlock(&m->lock, MPI_LOCK_LEVEL);
        if (e == NULL) {
            return;
        }
        rig_mpi_in_pair(m, peer, "MPI_Win_free");
        rig_mend_destroy(m, e);
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
