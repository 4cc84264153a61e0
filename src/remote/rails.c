/* SPDX-License-Identifier: BSD-3-Clause */
/* Rails between any two machines: the controller makes them, the agents
 * make the ends, and both keep them as long as someone can name them.
 *
 * Making.  host->rail on the controller sends RAIL to both agents (or to
 * one, and joins the pair itself for the controller's machine) in one
 * round under rm->lock: every agent serves commands one at a time, in
 * the order the controller sent them, so the job's pair protocol, which
 * matches a pair's rig_job_rail calls in order, pairs exactly the two
 * ends of this rail, whichever controller thread asked.  An agent that
 * got a RAIL always calls rig_job_rail, whatever else fails, so that its
 * peer is never left waiting; an end made on one side only (its record
 * could not be kept) is dropped again.  Each agent answers with its
 * rail's id -- the same at both ends, the job numbers the k-th rail of a
 * pair -- and where its end sits (a System V segment: a program of a
 * machine on the same node maps the peer's end through it).
 *
 * Keeping.  The agent's record holds a reference of its end's rail until
 * the controller's rail is released: that rail's release function
 * (rig_rail_on_release) marks the record, and the controller's next
 * call -- any call that talks to agents, rm_lock -- tells the agents to
 * drop theirs.  A program loaded there holds its own references (agent.c),
 * so its ends outlive the drop; the record goes when the pair does (the
 * agent's own release function on its rail). */
#include "remote_internal.h"

#include "../util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *name_of(const rig_remote *rm, int rank)
{
    return rank == 0 ? "the controller's machine" : rm->machines[rank].name;
}

static bool list_dup(const rig_transfer *t, size_t n, rig_transfer **out)
{
    *out = NULL;
    if (n == 0) {
        return true;
    }
    *out = malloc(n * sizeof(**out));
    if (*out == NULL) {
        return false;
    }
    memcpy(*out, t, n * sizeof(**out));
    return true;
}

static void wire_of(int64_t id, const mesh_end_place *p, rm_wire_end *w)
{
    memset(w, 0, sizeof(*w));
    w->id = id;
    w->shm = p->shm;
    w->bytes = p->bytes;
    w->counts_at = p->counts_at;
    w->outbound_at = p->outbound_at;
    w->inbound_at = p->inbound_at;
}

static void place_of_wire(const rm_wire_end *w, mesh_end_place *p)
{
    p->shm = w->shm;
    p->bytes = w->bytes;
    p->counts_at = w->counts_at;
    p->outbound_at = w->outbound_at;
    p->inbound_at = w->inbound_at;
}

/* Where e sits, or shm -1 (quietly: only native programs need it). */
static mesh_end_place place_or_none(const rig_end *e)
{
    mesh_end_place p = {.shm = -1};
    if (e == NULL || !mesh_end_place_of(e, &p, NULL)) {
        p.shm = -1;
    }
    return p;
}

/* ---- the controller: links and drops ------------------------------------- */

static void link_unref(rm_link *l)
{
    if (atomic_fetch_sub(&l->refs, 1) == 1) {
        pthread_mutex_destroy(&l->lock);
        free(l);
    }
}

/* The controller's rail went (rig_rail_on_release): its record is marked,
 * and rm_lock tells the agents.  Any thread; takes no lock but the
 * link's and table_lock, so it may run inside a call of this layer. */
static void rail_gone(void *arg)
{
    rm_link *l = arg;
    pthread_mutex_lock(&l->lock);
    rig_remote *rm = l->rm;
    if (rm != NULL) {
        pthread_mutex_lock(&rm->table_lock);
        for (rm_rail *r = rm->rails; r != NULL; r = r->next) {
            if (r->id == l->id && !r->released) {
                r->released = true;
                rm->nreleased++;
            }
        }
        pthread_mutex_unlock(&rm->table_lock);
    }
    pthread_mutex_unlock(&l->lock);
    link_unref(l);
}

rm_rail *rm_rail_find(rig_remote *rm, int64_t id)
{
    for (rm_rail *r = rm->rails; r != NULL; r = r->next) {
        if (r->id == id && !r->released) {
            return r;
        }
    }
    return NULL;
}

static void rail_free(rm_rail *r)
{
    free(r->send);
    free(r->receive);
    free(r);
}

/* Detaches the record's link from the layer (its function, if it runs
 * later, finds nothing) and frees the record.  No lock of the layer
 * held but rm->lock. */
static void rail_forget(rig_remote *rm, rm_rail *r)
{
    (void)rm;
    if (r->link != NULL) {
        pthread_mutex_lock(&r->link->lock);
        r->link->rm = NULL;
        pthread_mutex_unlock(&r->link->lock);
        link_unref(r->link);
    }
    rail_free(r);
}

void rm_rails_free(rig_remote *rm)
{
    pthread_mutex_lock(&rm->table_lock);
    rm_rail *all = rm->rails;
    rm->rails = NULL;
    rm->nreleased = 0;
    pthread_mutex_unlock(&rm->table_lock);
    while (all != NULL) {
        rm_rail *next = all->next;
        rail_forget(rm, all);
        all = next;
    }
}

/* Tells the agents of every released rail to drop their ends, and
 * forgets those rails.  rm->lock held. */
static void flush_released(rig_remote *rm)
{
    pthread_mutex_lock(&rm->table_lock);
    size_t n = rm->nreleased;
    rm_rail *gone = NULL;
    if (n > 0) {
        for (rm_rail **p = &rm->rails; *p != NULL;) {
            if ((*p)->released) {
                rm_rail *r = *p;
                *p = r->next;
                r->next = gone;
                gone = r;
            } else {
                p = &(*p)->next;
            }
        }
        rm->nreleased = 0;
    }
    pthread_mutex_unlock(&rm->table_lock);
    if (gone == NULL) {
        return;
    }
    if (!rig_job_failed(rm->job)) {
        /* One DROP to every agent that holds one of them, with them all:
         * an agent drops the ids it has. */
        bool *to = calloc((size_t)rm->size, sizeof(*to));
        int *ranks = calloc((size_t)rm->size, sizeof(*ranks));
        rm_buf msg = {0};
        rm_cmd c = rm_cmd_new(rm, RM_OP_DROP, 0);
        rm_buf_put(&msg, &c, sizeof(c));
        uint32_t k = 0;
        for (rm_rail *r = gone; r != NULL; r = r->next) {
            k++;
        }
        rm_buf_u32(&msg, k);
        for (rm_rail *r = gone; r != NULL; r = r->next) {
            rm_buf_u64(&msg, (uint64_t)r->id);
            if (to != NULL) {
                to[r->a] = true;
                to[r->b] = r->b != 0;
            }
        }
        size_t nr = 0;
        for (int r = 1; to != NULL && ranks != NULL && r < rm->size; r++) {
            if (to[r]) {
                ranks[nr++] = r;
            }
        }
        rm_got *g = NULL;
        char *why = NULL;
        if (to == NULL || ranks == NULL) {
            rm_buf_free(&msg);
            rig_log(RIG_LOG_WARN, "controller: no memory to tell agents of "
                                  "released rails: their ends stay until "
                                  "close");
        } else if (rm_round_trip(rm, ranks, nr, &msg, &g, "dropping rails",
                                 &why)) {
            rm_got_free(g, nr);
        } else {
            rig_log(RIG_LOG_WARN, "controller: %s", why != NULL ? why : "?");
        }
        free(why);
        free(to);
        free(ranks);
    }
    while (gone != NULL) {
        rm_rail *next = gone->next;
        rail_forget(rm, gone);
        gone = next;
    }
}

void rm_lock(rig_remote *rm)
{
    pthread_mutex_lock(&rm->lock);
    /* The agents' unasked messages (crash reports, ends of launches: one
     * per launch) are taken in at every call, so that a controller that
     * never waits does not pile them up in MPI. */
    if (!rig_job_failed(rm->job)) {
        rm_events_drain(rm);
    }
    flush_released(rm);
}

/* ---- the controller: making --------------------------------------------- */

/* RAIL for an agent: its peer, and the lists as it sends and receives. */
static void rail_cmd(rig_remote *rm, rm_buf *b, int peer,
                     const rig_transfer *send, size_t nsend,
                     const rig_transfer *receive, size_t nreceive)
{
    rm_cmd c = rm_cmd_new(rm, RM_OP_RAIL, 0);
    rm_rail_cmd rc = {.peer = peer, .nsend = nsend, .nreceive = nreceive};
    rm_buf_put(b, &c, sizeof(c));
    rm_buf_put(b, &rc, sizeof(rc));
    rm_buf_put(b, send, nsend * sizeof(*send));
    rm_buf_put(b, receive, nreceive * sizeof(*receive));
}

static uint64_t seq_of(const rm_buf *b)
{
    rm_cmd c;
    memcpy(&c, b->p, sizeof(c));
    return c.seq;
}

/* An agent's reply to RAIL: its end's id and place. */
static bool reply_end(const rm_got *g, rm_wire_end *w)
{
    if (!g->h.ok || g->raw == NULL || g->h.msg_len != sizeof(*w)) {
        return false;
    }
    memcpy(w, g->raw, sizeof(*w));
    return true;
}

/* Drops an end that only one side made (the other refused after the
 * pair protocol).  rm->lock held. */
static void drop_one(rig_remote *rm, int rank, int64_t id)
{
    rm_buf msg = {0};
    rm_cmd c = rm_cmd_new(rm, RM_OP_DROP, 0);
    rm_buf_put(&msg, &c, sizeof(c));
    rm_buf_u32(&msg, 1);
    rm_buf_u64(&msg, (uint64_t)id);
    rm_got *g = NULL;
    char *why = NULL;
    if (rm_round_trip(rm, &rank, 1, &msg, &g, "dropping a half-made rail",
                      &why)) {
        rm_got_free(g, 1);
    } else {
        rig_log(RIG_LOG_WARN, "controller: %s", why != NULL ? why : "?");
    }
    free(why);
}

bool rm_rail_make(rig_remote *rm, int a, int b, const rig_transfer *send,
                  size_t nsend, const rig_transfer *receive, size_t nreceive,
                  rig_rail **out, char **err)
{
    rm_rail *rec = calloc(1, sizeof(*rec));
    rm_link *link = calloc(1, sizeof(*link));
    if (rec == NULL || link == NULL || !list_dup(send, nsend, &rec->send) ||
        !list_dup(receive, nreceive, &rec->receive)) {
        free(link);
        if (rec != NULL) {
            rail_free(rec);
        }
        return rig_err(err, "nomem: a rail between %s and %s",
                       rm->machines[a].name, name_of(rm, b));
    }
    rec->a = a;
    rec->b = b;
    rec->nsend = nsend;
    rec->nreceive = nreceive;
    pthread_mutex_init(&link->lock, NULL);
    atomic_init(&link->refs, 2);
    link->rm = rm;

    char what[512];
    snprintf(what, sizeof(what), "making a rail between %s and %s",
             rm->machines[a].name, name_of(rm, b));
    rm_lock(rm);
    if (rig_job_failed(rm->job)) {
        pthread_mutex_unlock(&rm->lock);
        rail_free(rec);
        pthread_mutex_destroy(&link->lock);
        free(link);
        return rm_failed(rm, err, what);
    }
    /* Both agents get their command in one round; for the controller's
     * machine, the controller makes its end while a's command is on its
     * way. */
    int ranks[2] = {a, b};
    size_t n = b != 0 ? 2 : 1;
    rm_buf msg[2] = {{0}, {0}};
    rail_cmd(rm, &msg[0], b, send, nsend, receive, nreceive);
    if (b != 0) {
        rail_cmd(rm, &msg[1], a, receive, nreceive, send, nsend);
    }
    MPI_Request req[2];
    bool ok = !msg[0].oom && !msg[1].oom;
    if (!ok) {
        rig_err(err, "nomem: %s", what);
    }
    size_t posted = 0;
    for (size_t i = 0; ok && i < n; i++) {
        int rc = RM_MPI(rm, "MPI_Isend",
                        MPI_Isend(msg[i].p, (int)msg[i].len, MPI_BYTE, ranks[i],
                                  RM_TAG_CMD, rm->comm, &req[i]));
        if (rc != MPI_SUCCESS) {
            /* An agent told alone would wait for its peer for good. */
            rig_job_fail(rm->job, "the controller could not send a rail");
            ok = rm_mpi_err(err, rc, "MPI_Isend");
            break;
        }
        posted++;
    }
    if (!ok) {
        for (size_t i = 0; i < 2; i++) {
            if (i < posted) {
                rm_abandon(msg[i].p);
            } else {
                rm_buf_free(&msg[i]);
            }
        }
        pthread_mutex_unlock(&rm->lock);
        rail_free(rec);
        pthread_mutex_destroy(&link->lock);
        free(link);
        return false;
    }
    rig_rail *mine = NULL;
    char *mine_err = NULL;
    bool mine_ok = true;
    if (b == 0) {
        /* The controller's machine receives what a sends. */
        mine_ok = rig_job_rail(rm->job, a, receive, nreceive, send, nsend,
                               &mine, &mine_err);
    }
    void *keep[] = {msg[0].p, msg[1].p};
    rm_got *g = calloc(n, sizeof(*g));
    ok = rm_wait_all(rm, req, (int)n, RM_PACE_DATA, keep, 2, what, err);
    if (ok) {
        uint64_t seqs[2] = {seq_of(&msg[0]), n > 1 ? seq_of(&msg[1]) : 0};
        rm_buf_free(&msg[0]);
        rm_buf_free(&msg[1]);
        for (size_t i = 0; ok && i < n; i++) {
            ok = g != NULL
                     ? rm_replies(rm, &ranks[i], 1, seqs[i], &g[i], what, err)
                     : rig_err(err, "nomem: %s", what);
        }
    }
    if (!ok) {
        /* The job failed (or the controller cannot go on talking). */
        rm_got_free(g, n);
        pthread_mutex_unlock(&rm->lock);
        rig_rail_release(mine);
        free(mine_err);
        rail_free(rec);
        pthread_mutex_destroy(&link->lock);
        free(link);
        return false;
    }
    rm_wire_end w[2];
    bool have[2] = {reply_end(&g[0], &w[0]), n > 1 && reply_end(&g[1], &w[1])};
    if (b == 0) {
        have[1] = mine_ok;
        if (mine_ok) {
            mesh_end_place p = place_or_none(rig_rail_local(mine));
            wire_of(rig_rail_id(mine), &p, &w[1]);
        }
    }
    if (!have[0] || !have[1]) {
        /* Both sides got the same outcome from the pair protocol; a side
         * that made its end while the other refused afterwards drops it. */
        for (size_t i = 0; i < n; i++) {
            if (have[i] && ranks[i] != 0) {
                drop_one(rm, ranks[i], w[i].id);
            }
        }
        if (!have[0]) {
            ok = rm_refusals(rm, g, 1, "failed: the agent made no end", err);
        } else if (b != 0) {
            ok =
                rm_refusals(rm, &g[1], 1, "failed: the agent made no end", err);
        } else {
            ok = rig_err(err, "%s",
                         mine_err != NULL ? mine_err : "failed: the rail");
        }
        rm_got_free(g, n);
        pthread_mutex_unlock(&rm->lock);
        rig_rail_release(mine);
        free(mine_err);
        rail_free(rec);
        pthread_mutex_destroy(&link->lock);
        free(link);
        return ok;
    }
    rm_got_free(g, n);
    free(mine_err);
    if (w[0].id != w[1].id) {
        /* The pair protocol gives both ends the same id: this is a bug,
         * and neither end may be named by a program. */
        rig_job_fail(rm->job, "two ends of one rail have different ids");
        pthread_mutex_unlock(&rm->lock);
        rig_rail_release(mine);
        rail_free(rec);
        pthread_mutex_destroy(&link->lock);
        free(link);
        return rm_failed(rm, err, what);
    }
    rig_rail *rail = mine;
    if (b != 0 && !rig_rail_make(w[0].id, NULL, &rail, err)) {
        drop_one(rm, a, w[0].id);
        drop_one(rm, b, w[0].id);
        pthread_mutex_unlock(&rm->lock);
        rail_free(rec);
        pthread_mutex_destroy(&link->lock);
        free(link);
        return false;
    }
    rec->id = w[0].id;
    place_of_wire(&w[0], &rec->place[0]);
    place_of_wire(&w[1], &rec->place[1]);
    link->id = rec->id;
    rec->link = link;
    /* The rail is the caller's from here; the function runs when it goes. */
    rig_rail_on_release(rail, rail_gone, link, NULL);
    pthread_mutex_lock(&rm->table_lock);
    rec->next = rm->rails;
    rm->rails = rec;
    pthread_mutex_unlock(&rm->table_lock);
    pthread_mutex_unlock(&rm->lock);
    *out = rail;
    return true;
}

/* ---- an agent -------------------------------------------------------------
 */

agent_rail *rm_agent_rail_find(rig_remote *rm, int64_t id)
{
    for (agent_rail *r = rm->arails; r != NULL; r = r->next) {
        if (r->id == id && r->alive) {
            return r;
        }
    }
    return NULL;
}

/* The agent's rail's pair went: its record dies (the serving loop, or
 * whoever released it, is the only thread that drops references). */
static void arail_gone(void *arg)
{
    agent_rail *r = arg;
    r->alive = false;
    r->end = NULL;
}

static void arail_free(agent_rail *r)
{
    free(r->send);
    free(r->receive);
    free(r);
}

void rm_agent_rails_sweep(rig_remote *rm)
{
    for (agent_rail **p = &rm->arails; *p != NULL;) {
        if (!(*p)->alive) {
            agent_rail *r = *p;
            *p = r->next;
            arail_free(r);
        } else {
            p = &(*p)->next;
        }
    }
}

void rm_agent_rails_free(rig_remote *rm)
{
    for (agent_rail *r = rm->arails; r != NULL; r = r->next) {
        rig_rail *rail = r->rail;
        r->rail = NULL;
        rig_rail_release(rail);
    }
    /* Ends a program still held are alive until it unloads, which the
     * caller did already: every pair is gone now. */
    rm_agent_rails_sweep(rm);
}

bool rm_agent_rail(rig_remote *rm, const rm_cmd *c, rm_rd *body, char **err)
{
    rm_rail_cmd rc;
    rm_rd_get(body, &rc, sizeof(rc));
    bool sane =
        !body->bad && rc.peer >= 0 && rc.peer < rm->size &&
        rc.peer != rm->rank && rc.nsend <= RM_RAIL_TRANSFERS_MAX &&
        rc.nreceive <= RM_RAIL_TRANSFERS_MAX &&
        body->len - body->at == (rc.nsend + rc.nreceive) * sizeof(rig_transfer);
    if (!sane) {
        /* The peer waits for this side's rig_job_rail, which cannot be
         * made without the lists: only a failed job frees it. */
        rig_job_fail(rm->job, "an agent got a malformed rail command");
        return rm_failed(rm, err, "making a rail end");
    }
    rig_transfer *send = NULL, *receive = NULL;
    bool mem = list_dup((const rig_transfer *)(body->p + body->at),
                        (size_t)rc.nsend, &send) &&
               list_dup((const rig_transfer *)(body->p + body->at) + rc.nsend,
                        (size_t)rc.nreceive, &receive);
    agent_rail *rec = calloc(1, sizeof(*rec));
    /* Always the pair's call, even without memory for the record: the
     * peer's call waits for this one. */
    rig_rail *rail = NULL;
    char *why = NULL;
    const rig_transfer *s = (const rig_transfer *)(body->p + body->at);
    bool made = rig_job_rail(rm->job, rc.peer, s, (size_t)rc.nsend,
                             s + rc.nsend, (size_t)rc.nreceive, &rail, &why);
    if (made && (!mem || rec == NULL)) {
        rig_err(&why, "nomem: machine %s: the record of rail %lld",
                rm->machines[rm->rank].name, (long long)rig_rail_id(rail));
        /* The peer made its end: the controller drops it. */
        rig_rail_release(rail);
        free(send);
        free(receive);
        free(rec);
        bool sent = rm_agent_refuse(rm, c, why, err);
        free(why);
        return sent;
    }
    if (!made) {
        free(send);
        free(receive);
        free(rec);
        if (rig_job_failed(rm->job)) {
            free(why);
            return rm_failed(rm, err, "making a rail end");
        }
        bool sent = rm_agent_refuse(rm, c, why, err);
        free(why);
        return sent;
    }
    rec->id = rig_rail_id(rail);
    rec->peer = rc.peer;
    rec->rail = rail;
    rec->end = rig_rail_local(rail);
    rec->send = send;
    rec->receive = receive;
    rec->nsend = (size_t)rc.nsend;
    rec->nreceive = (size_t)rc.nreceive;
    rec->alive = true;
    rig_rail_on_release(rail, arail_gone, rec, NULL);
    rec->next = rm->arails;
    rm->arails = rec;
    rm_wire_end w;
    mesh_end_place p = place_or_none(rec->end);
    wire_of(rec->id, &p, &w);
    rm_reply h = {.op = c->op, .seq = c->seq, .ok = 1};
    return rm_agent_send_raw(rm, &h, &w, sizeof(w), err);
}

bool rm_agent_drop(rig_remote *rm, const rm_cmd *c, rm_rd *body, char **err)
{
    uint32_t k = rm_rd_u32(body);
    if (body->bad || body->len - body->at != (size_t)k * sizeof(int64_t)) {
        rig_job_fail(rm->job, "an agent got a malformed drop command");
        return rm_failed(rm, err, "dropping rails");
    }
    for (uint32_t i = 0; i < k; i++) {
        int64_t id = (int64_t)rm_rd_u64(body);
        agent_rail *r = rm_agent_rail_find(rm, id);
        if (r != NULL && r->rail != NULL) {
            rig_rail *rail = r->rail;
            r->rail = NULL;
            rig_rail_release(rail); /* may end the pair: r is then dead */
        }
    }
    rm_agent_rails_sweep(rm);
    rm_reply h = {.op = c->op, .seq = c->seq, .ok = 1};
    return rm_agent_send_raw(rm, &h, NULL, 0, err);
}

static int cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

bool rm_agent_ends(rig_remote *rm, const rm_cmd *c, char **err)
{
    rm_agent_rails_sweep(rm);
    size_t n = 0;
    for (agent_rail *r = rm->arails; r != NULL; r = r->next) {
        n++;
    }
    int64_t *ids = calloc(n > 0 ? n : 1, sizeof(*ids));
    if (ids == NULL) {
        return rm_agent_refuse(rm, c, "nomem: the list of ends", err);
    }
    size_t i = 0;
    for (agent_rail *r = rm->arails; r != NULL; r = r->next) {
        ids[i++] = r->id;
    }
    qsort(ids, n, sizeof(*ids), cmp_id);
    rm_reply h = {.op = c->op, .seq = c->seq, .ok = 1};
    bool ok = rm_agent_send_raw(rm, &h, ids, n * sizeof(*ids), err);
    free(ids);
    return ok;
}
