/* SPDX-License-Identifier: BSD-3-Clause */
/* The controller: programs onto machines, their launches, and the crash
 * reports agents send.
 *
 * A call talks to the agents of its program's machines in one round: the
 * command to each (MPI_Isend), for a load the image (MPI_Ibcast when every
 * agent loads, else point-to-point), then every reply (MPI_Improbe per
 * agent, in any order).  All of it is tested in loops that watch the job,
 * under rm->lock, so one call at a time talks to the agents.  A step that
 * some machines did and others refused is undone on the ones that did it
 * (all or nothing), and the error names every refusing machine, keeping
 * the first refusal's reason word in front. */
#include "remote_internal.h"

#include "../util/util_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void rm_got_free(rm_got *g, size_t n)
{
    if (g == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        free(g[i].threads);
        free(g[i].msg);
        free(g[i].raw);
    }
    free(g);
}

static const char *name_of(const rig_remote *rm, int rank)
{
    return rm->machines[rank].name;
}

static bool is_controller(const rig_remote *rm, const char *fn, char **err)
{
    if (rm == NULL) {
        return rig_err(err, "invalid: %s: rm is NULL", fn);
    }
    if (rm->rank != 0) {
        return rig_err(err,
                       "invalid: %s is the controller's (rank 0); this is "
                       "rank %d, an agent",
                       fn, rm->rank);
    }
    return true;
}

static rm_program *prog_find(rig_remote *rm, int64_t id)
{
    for (rm_program *p = rm->programs; p != NULL; p = p->next) {
        if (p->id == id) {
            return p;
        }
    }
    return NULL;
}

static void program_free(rm_program *p)
{
    if (p == NULL) {
        return;
    }
    for (size_t i = 0; i < p->nplaces; i++) {
        free(p->places[i].crash);
    }
    free(p->places);
    free(p->name);
    free(p);
}

/* Drops the manifest manifest_of keeps (below). */
static void manifest_forget(rig_remote *rm)
{
    if (rm->manifest_json != NULL) {
        free(rm->manifest_json);
        mesh_manifest_free(&rm->manifest);
        rm->manifest_json = NULL;
    }
}

void rm_programs_free(rig_remote *rm)
{
    while (rm->programs != NULL) {
        rm_program *p = rm->programs;
        rm->programs = p->next;
        program_free(p);
    }
    manifest_forget(rm);
}

/* What the manifest f says, parsed once for loads of the same bytes: a
 * controller loads a program again and again (a load after an unload, a
 * load per set of machines), and parsing a manifest of 200 bytes took
 * 10 us warm and 26-43 us in rig_remote_bench's loads, a fifth of what a
 * remote load may cost above the same step on one machine; comparing its
 * bytes takes 0.1 us.  Lock held; the answer lives until the next call. */
static bool manifest_of(rig_remote *rm, const mesh_payload_file *f,
                        const mesh_manifest **out, char **err)
{
    if (rm->manifest_json == NULL || rm->manifest_len != f->len ||
        memcmp(rm->manifest_json, f->data, f->len) != 0) {
        mesh_manifest m;
        if (!mesh_manifest_parse((const char *)f->data, f->len, &m, err)) {
            return false;
        }
        char *copy = malloc(f->len > 0 ? f->len : 1);
        if (copy == NULL) {
            mesh_manifest_free(&m);
            return rig_err(err, "nomem: a manifest of %zu bytes", f->len);
        }
        memcpy(copy, f->data, f->len);
        manifest_forget(rm);
        rm->manifest_json = copy;
        rm->manifest_len = f->len;
        rm->manifest = m;
    }
    *out = &rm->manifest;
    return true;
}

static void program_forget(rig_remote *rm, rm_program *gone)
{
    pthread_mutex_lock(&rm->table_lock);
    for (rm_program **p = &rm->programs; *p != NULL; p = &(*p)->next) {
        if (*p == gone) {
            *p = gone->next;
            break;
        }
    }
    pthread_mutex_unlock(&rm->table_lock);
    for (size_t i = 0; i < gone->nplaces; i++) {
        rm_threads_set(rm, gone->places[i].rank, gone->id, NULL, 0);
    }
    program_free(gone);
}

/* ---- crash reports ------------------------------------------------------- */

/* Records report why of program on rank's machine: the first one of a
 * launch is logged and queued for rig_remote_event.  Caller holds
 * table_lock. */
static void crash_record(rig_remote *rm, int rank, int64_t program,
                         uint64_t launch, const char *why)
{
    rm_program *p = prog_find(rm, program);
    rm_place *pl = NULL;
    for (size_t i = 0; p != NULL && i < p->nplaces; i++) {
        if (p->places[i].rank == rank) {
            pl = &p->places[i];
        }
    }
    if (pl == NULL || pl->crash != NULL || !pl->launched ||
        pl->launch != launch) {
        return; /* reported already, or of a launch that is over */
    }
    pl->crash = strdup(why);
    char *ev = strdup(why);
    if (pl->crash == NULL || ev == NULL) {
        free(ev);
        return;
    }
    rig_log(RIG_LOG_WARN, "controller: %s", why);
    if (rm->nevents == rm->events_cap) {
        size_t cap = rm->events_cap != 0 ? rm->events_cap * 2 : 8;
        char **e = realloc(rm->events, cap * sizeof(*e));
        if (e == NULL) {
            free(ev);
            return;
        }
        rm->events = e;
        rm->events_cap = cap;
    }
    rm->events[rm->nevents++] = ev;
}

/* Records that rank's agent saw launch `launch` of program end in state.
 * Launch numbers only grow, so the latest is kept whatever the controller
 * knows of the launch yet: the word may be taken in (by a round with other
 * agents) before the launch's own round recorded its number.  Caller
 * holds table_lock. */
static void over_record(rig_remote *rm, int rank, const rm_over *o)
{
    rm_program *p = prog_find(rm, o->program);
    for (size_t i = 0; p != NULL && i < p->nplaces; i++) {
        rm_place *pl = &p->places[i];
        if (pl->rank == rank && o->launch > pl->over) {
            pl->over = o->launch;
            pl->over_state = o->state;
        }
    }
}

/* One message of tag that has arrived, whole (no waiting): its bytes
 * (malloc'd; the caller frees them) and length, and its sender.  NULL when
 * none has arrived; a message that could not be held is taken and
 * dropped (*count -1). */
static uint8_t *take_msg(rig_remote *rm, int tag, int *count, int *from,
                         bool *any)
{
    int flag = 0;
    MPI_Message m;
    MPI_Status st;
    *any = false;
    if (RM_MPI(rm, "MPI_Improbe",
               MPI_Improbe(MPI_ANY_SOURCE, tag, rm->comm, &flag, &m, &st)) !=
            MPI_SUCCESS ||
        !flag) {
        return NULL;
    }
    *any = true;
    *count = 0;
    MPI_Get_count(&st, MPI_BYTE, count);
    uint8_t *msg = malloc(*count > 0 ? (size_t)*count : 1);
    uint8_t dummy;
    int rc =
        RM_MPI(rm, "MPI_Mrecv",
               MPI_Mrecv(msg != NULL ? msg : &dummy, msg != NULL ? *count : 0,
                         MPI_BYTE, &m, MPI_STATUS_IGNORE));
    *from = st.MPI_SOURCE;
    if (rc != MPI_SUCCESS || msg == NULL) {
        free(msg);
        *count = -1;
        return NULL;
    }
    return msg;
}

/* Takes in the ends of launches that have arrived (no waiting). */
static void overs_drain(rig_remote *rm)
{
    bool any = true;
    while (any) {
        int count, from;
        uint8_t *msg = take_msg(rm, RM_TAG_OVER, &count, &from, &any);
        rm_over o = {0};
        if (msg != NULL && (size_t)count == sizeof(o)) {
            memcpy(&o, msg, sizeof(o));
        }
        free(msg);
        if (o.magic == RM_MAGIC) {
            pthread_mutex_lock(&rm->table_lock);
            over_record(rm, from, &o);
            pthread_mutex_unlock(&rm->table_lock);
        }
    }
}

void rm_events_drain(rig_remote *rm)
{
    if (rm->hosts == NULL) {
        return; /* still opening */
    }
    overs_drain(rm);
    bool any = true;
    while (any) {
        int count, from;
        uint8_t *msg = take_msg(rm, RM_TAG_EVENT, &count, &from, &any);
        rm_event ev;
        if (msg != NULL && (size_t)count >= sizeof(ev)) {
            memcpy(&ev, msg, sizeof(ev));
            if (ev.magic == RM_MAGIC &&
                (size_t)count - sizeof(ev) == ev.msg_len) {
                char *why = strndup((char *)msg + sizeof(ev), ev.msg_len);
                if (why != NULL) {
                    pthread_mutex_lock(&rm->table_lock);
                    crash_record(rm, from, ev.program, ev.launch, why);
                    pthread_mutex_unlock(&rm->table_lock);
                    free(why);
                }
            }
        }
        free(msg);
    }
}

bool rig_remote_event(rig_remote *rm, char **event)
{
    if (event != NULL) {
        *event = NULL;
    }
    if (rm == NULL || event == NULL || rm->rank != 0) {
        return false;
    }
    rm_lock(rm);
    if (!rig_job_failed(rm->job)) {
        rm_events_drain(rm);
    }
    pthread_mutex_lock(&rm->table_lock);
    if (rm->nevents > 0) {
        *event = rm->events[0];
        memmove(rm->events, rm->events + 1,
                (rm->nevents - 1) * sizeof(*rm->events));
        rm->nevents--;
    }
    pthread_mutex_unlock(&rm->table_lock);
    pthread_mutex_unlock(&rm->lock);
    return *event != NULL;
}

/* ---- one round with the agents ------------------------------------------- */

/* Takes each of ranks[0..n)'s reply to command seq into out[i]. */
bool rm_replies(rig_remote *rm, const int *ranks, size_t n, uint64_t seq,
                rm_got *out, const char *what, char **err)
{
    size_t left = n;
    bool *have = calloc(n, sizeof(*have));
    if (have == NULL) {
        rig_job_fail(rm->job, "the controller ran out of memory");
        return rm_failed(rm, err, what);
    }
    rm_backoff b = {0};
    uint32_t turn = 0;
    while (left > 0) {
        bool took = false;
        for (size_t i = 0; i < n; i++) {
            if (have[i]) {
                continue;
            }
            int flag = 0;
            MPI_Message m;
            MPI_Status st;
            int rc = RM_MPI(
                rm, "MPI_Improbe",
                MPI_Improbe(ranks[i], RM_TAG_REPLY, rm->comm, &flag, &m, &st));
            if (rc != MPI_SUCCESS) {
                free(have);
                return rm_mpi_err(err, rc, "MPI_Improbe");
            }
            if (!flag) {
                continue;
            }
            int count = 0;
            MPI_Get_count(&st, MPI_BYTE, &count);
            uint8_t *msg = malloc(count > 0 ? (size_t)count : 1);
            uint8_t dummy;
            rc = RM_MPI(rm, "MPI_Mrecv",
                        MPI_Mrecv(msg != NULL ? msg : &dummy,
                                  msg != NULL ? count : 0, MPI_BYTE, &m,
                                  MPI_STATUS_IGNORE));
            rm_got *g = &out[i];
            g->rank = ranks[i];
            rm_rd r = {.p = msg, .len = msg != NULL ? (size_t)count : 0};
            if (rc != MPI_SUCCESS || !rm_rd_get(&r, &g->h, sizeof(g->h)) ||
                g->h.magic != RM_MAGIC || g->h.nthreads > 1024 ||
                r.len - r.at !=
                    g->h.nthreads * sizeof(int32_t) + (size_t)g->h.msg_len) {
                free(msg);
                free(have);
                rig_job_fail(rm->job, "the controller got a malformed reply");
                return rm_failed(rm, err, what);
            }
            if (g->h.seq != seq) {
                free(msg); /* not this round's: cannot happen, is skipped */
                continue;
            }
            if (g->h.nthreads > 0) {
                size_t tb = g->h.nthreads * sizeof(int32_t);
                g->threads = malloc(tb);
                if (g->threads != NULL) {
                    rm_rd_get(&r, g->threads, tb);
                } else {
                    g->h.nthreads = 0;
                    r.at += tb;
                }
            }
            g->msg = strndup((const char *)r.p + r.at, g->h.msg_len);
            g->raw = malloc(g->h.msg_len > 0 ? g->h.msg_len : 1);
            if (g->raw != NULL) {
                memcpy(g->raw, r.p + r.at, g->h.msg_len);
            }
            free(msg);
            have[i] = true;
            left--;
            took = true;
        }
        if (left == 0) {
            break;
        }
        if (rig_job_failed(rm->job)) {
            free(have);
            return rm_failed(rm, err, what);
        }
        if ((++turn & 15u) == 0) {
            rm_events_drain(rm);
        }
        if (took) {
            rm_backoff_reset(&b);
        }
        rm_backoff_step(&b, RM_PACE_REPLY);
    }
    free(have);
    return true;
}

rm_cmd rm_cmd_new(rig_remote *rm, uint32_t op, int64_t program)
{
    rm_cmd c = {
        .magic = RM_MAGIC,
        .op = op,
        .seq = ++rm->seq,
        .program = program,
        .chunk = rm->chunk,
    };
    return c;
}

static void cmd_head(rig_remote *rm, rm_buf *b, uint32_t op, int64_t program)
{
    rm_cmd c = rm_cmd_new(rm, op, program);
    rm_buf_put(b, &c, sizeof(c));
}

static uint64_t cmd_seq(const rm_buf *b)
{
    rm_cmd c;
    memcpy(&c, b->p, sizeof(c));
    return c.seq;
}

/* Sends command msg to ranks[0..n) and takes their replies into *out
 * (malloc'd, n entries).  msg is freed. */
bool rm_round_trip(rig_remote *rm, const int *ranks, size_t n, rm_buf *msg,
                   rm_got **out, const char *what, char **err)
{
    *out = NULL;
    if (msg->oom) {
        rm_buf_free(msg);
        return rig_err(err, "nomem: %s", what);
    }
    MPI_Request *reqs = calloc(n, sizeof(*reqs));
    rm_got *g = calloc(n, sizeof(*g));
    if (reqs == NULL || g == NULL) {
        free(reqs);
        free(g);
        rm_buf_free(msg);
        return rig_err(err, "nomem: %s", what);
    }
    for (size_t i = 0; i < n; i++) {
        int rc = RM_MPI(rm, "MPI_Isend",
                        MPI_Isend(msg->p, (int)msg->len, MPI_BYTE, ranks[i],
                                  RM_TAG_CMD, rm->comm, &reqs[i]));
        if (rc != MPI_SUCCESS) {
            /* The agents before it wait for a reply's turn: the job must
             * end, or the next round meets their stale state. */
            rig_job_fail(rm->job, "the controller could not send a command");
            rm_abandon(msg->p);
            free(reqs);
            free(g);
            return rm_mpi_err(err, rc, "MPI_Isend");
        }
    }
    void *keep[] = {msg->p};
    if (!rm_wait_all(rm, reqs, (int)n, RM_PACE_DATA, keep, 1, what, err)) {
        free(reqs);
        free(g);
        return false;
    }
    free(reqs);
    uint64_t seq = cmd_seq(msg);
    rm_buf_free(msg);
    if (!rm_replies(rm, ranks, n, seq, g, what, err)) {
        rm_got_free(g, n);
        return false;
    }
    *out = g;
    return true;
}

/* "<reason>: machine vm:2: <rest>" for each refusal, joined by "; ". */
bool rm_refusals(const rig_remote *rm, const rm_got *g, size_t n,
                 const char *fallback, char **err)
{
    rm_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (g[i].h.ok) {
            continue;
        }
        const char *msg = g[i].msg != NULL && g[i].msg[0] != '\0'
                              ? g[i].msg
                              : "failed: (no reason given)";
        const char *colon = strstr(msg, ": ");
        size_t wl = colon != NULL ? (size_t)(colon - msg) : 0;
        bool word = wl > 0 && wl < 16 &&
                    strspn(msg, "abcdefghijklmnopqrstuvwxyz") == wl;
        if (b.len > 0) {
            rm_buf_put(&b, "; ", 2);
        }
        if (word) {
            rm_buf_put(&b, msg, wl);
        } else {
            rm_buf_put(&b, "failed", 6);
        }
        rm_buf_put(&b, ": machine ", 10);
        const char *nm = name_of(rm, g[i].rank);
        rm_buf_put(&b, nm, strlen(nm));
        rm_buf_put(&b, ": ", 2);
        const char *rest = word ? colon + 2 : msg;
        rm_buf_put(&b, rest, strlen(rest));
    }
    rm_buf_put(&b, "", 1);
    if (b.oom || b.len <= 1) {
        rm_buf_free(&b);
        return rig_err(err, "%s", fallback);
    }
    if (err != NULL) {
        *err = (char *)b.p;
    } else {
        rm_buf_free(&b);
    }
    return false;
}

/* ---- load ---------------------------------------------------------------- */

/* The machines of a load: ranks, or every agent; sorted, checked. */
static bool targets(const rig_remote *rm, const int *ranks, size_t nranks,
                    int **out, size_t *n, char **err)
{
    if (rm->size < 2) {
        return rig_err(err, "invalid: the job has no agent machines (one "
                            "rank)");
    }
    if (ranks == NULL && nranks > 0) {
        return rig_err(err, "invalid: ranks is NULL with nranks %zu", nranks);
    }
    size_t k = nranks > 0 ? nranks : (size_t)rm->size - 1;
    int *t = calloc(k, sizeof(*t));
    bool *seen = calloc((size_t)rm->size, sizeof(*seen));
    if (t == NULL || seen == NULL) {
        free(t);
        free(seen);
        return rig_err(err, "nomem: %zu machines", k);
    }
    for (size_t i = 0; i < k; i++) {
        int r = nranks > 0 ? ranks[i] : (int)i + 1;
        if (r <= 0 || r >= rm->size) {
            free(t);
            free(seen);
            return rig_err(err, "invalid: ranks[%zu] = %d is no agent (1..%d)",
                           i, r, rm->size - 1);
        }
        if (seen[r]) {
            free(t);
            free(seen);
            return rig_err(err, "invalid: ranks[%zu] = %d is named twice", i,
                           r);
        }
        seen[r] = true;
    }
    size_t j = 0;
    for (int r = 1; r < rm->size; r++) {
        if (seen[r]) {
            t[j++] = r;
        }
    }
    free(seen);
    *out = t;
    *n = k;
    return true;
}

/* Before anything is sent: every machine runs one of the manifest's
 * executors; picks[rank] is the one each machine t[i] will pick. */
static bool runs_everywhere(const rig_remote *rm, const mesh_manifest *m,
                            const int *t, size_t n, uint32_t *picks, char **err)
{
    rm_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        const rig_remote_machine *mc = &rm->machines[t[i]];
        uint32_t have[MESH_BACKEND_COUNT];
        size_t nhave = 0;
        for (uint32_t k = 0; k < MESH_BACKEND_COUNT; k++) {
            if (mc->executors[k].runs) {
                have[nhave++] = k;
            }
        }
        uint32_t exec;
        if (mesh_pick_exec(m, have, nhave, &exec, NULL)) {
            picks[t[i]] = exec;
            continue;
        }
        char *runs = rm_runs_list(mc);
        char *msg = NULL;
        rm_buf lists = {0};
        for (size_t j = 0; j < m->nbackends; j++) {
            const char *nm = mesh_backend_name(m->backends[j]);
            if (j > 0) {
                rm_buf_put(&lists, ", ", 2);
            }
            rm_buf_put(&lists, nm != NULL ? nm : "?",
                       strlen(nm != NULL ? nm : "?"));
        }
        rm_buf_put(&lists, "", 1);
        if (asprintf(&msg, "%smachine %s runs %s; program %s lists %s",
                     b.len > 0 ? "; " : "", mc->name, runs != NULL ? runs : "?",
                     m->name, lists.oom ? "?" : (const char *)lists.p) >= 0) {
            rm_buf_put(&b, msg, strlen(msg));
            free(msg);
        } else {
            b.oom = true;
        }
        rm_buf_free(&lists);
        free(runs);
    }
    if (b.len == 0 && !b.oom) {
        return true;
    }
    rm_buf_put(&b, "", 1);
    bool r = rig_err(err, "unsupported: %s",
                     b.oom ? "a machine cannot run it" : (const char *)b.p);
    rm_buf_free(&b);
    return r;
}

/* Posts the image: an MPI_Ibcast per chunk when every agent loads, else a
 * send per chunk and machine.  *reqs and *nreq are the caller's. */
static bool post_image(rig_remote *rm, const mesh_payload *src, const int *t,
                       size_t n, bool all, MPI_Request **reqs, size_t *nreq,
                       char **err)
{
    size_t chunks = 0;
    for (size_t i = 0; i < src->nfiles; i++) {
        chunks += (src->files[i].len + rm->chunk - 1) / rm->chunk;
    }
    size_t total = all ? chunks : chunks * n;
    *nreq = 0;
    *reqs = calloc(total > 0 ? total : 1, sizeof(**reqs));
    if (*reqs == NULL) {
        return rig_err(err, "nomem: %zu image requests", total);
    }
    for (size_t i = 0; i < src->nfiles; i++) {
        const mesh_payload_file *f = &src->files[i];
        for (size_t off = 0; off < f->len; off += rm->chunk) {
            size_t left = f->len - off;
            int len = (int)(left < rm->chunk ? left : rm->chunk);
            /* MPI reads a root's or sender's buffer only. */
            void *from = f->data + off;
            for (size_t j = 0; j < (all ? 1 : n); j++) {
                int rc = all ? RM_MPI(rm, "MPI_Ibcast",
                                      MPI_Ibcast(from, len, MPI_BYTE, 0,
                                                 rm->comm, &(*reqs)[*nreq]))
                             : RM_MPI(rm, "MPI_Isend",
                                      MPI_Isend(from, len, MPI_BYTE, t[j],
                                                RM_TAG_IMAGE, rm->comm,
                                                &(*reqs)[*nreq]));
                if (rc != MPI_SUCCESS) {
                    return rm_mpi_err(err, rc,
                                      all ? "MPI_Ibcast" : "MPI_Isend");
                }
                (*nreq)++;
            }
        }
    }
    return true;
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* The load's bindings, checked against the machines t[0..n), the rails
 * and the manifest, as the wire carries them (*out malloc'd, nends
 * entries).  rm->lock held. */
static bool ends_check(rig_remote *rm, const mesh_manifest *m, const int *t,
                       size_t n, const rig_remote_end *ends, size_t nends,
                       rm_wire_bind **out, char **err)
{
    *out = NULL;
    if (nends == 0) {
        return true;
    }
    if (ends == NULL) {
        return rig_err(err, "invalid: ends is NULL with nends %zu", nends);
    }
    rm_wire_bind *w = calloc(nends, sizeof(*w));
    if (w == NULL) {
        return rig_err(err, "nomem: %zu ends", nends);
    }
    bool ok = true;
    for (size_t i = 0; ok && i < nends; i++) {
        const rig_remote_end *e = &ends[i];
        bool in = false;
        for (size_t j = 0; j < n; j++) {
            in |= t[j] == e->rank;
        }
        uint64_t bit = e->input < MESH_INPUTS ? (uint64_t)1 << e->input : 0;
        if (e->rail == NULL) {
            ok = rig_err(err, "invalid: ends[%zu].rail is NULL", i);
        } else if (!in) {
            ok = rig_err(err,
                         "invalid: ends[%zu]: rank %d is not a machine the "
                         "program loads onto",
                         i, e->rank);
        } else if (e->input >= MESH_INPUTS) {
            ok = rig_err(err, "invalid: ends[%zu]: input %u is not below %u", i,
                         e->input, MESH_INPUTS);
        } else if (((m->reads | m->writes) & bit) == 0) {
            ok = rig_err(err,
                         "invalid: ends[%zu]: program %s neither reads nor "
                         "writes input %u (its manifest's \"reads\" and "
                         "\"writes\")",
                         i, m->name, e->input);
        }
        for (size_t j = 0; ok && j < i; j++) {
            if (ends[j].rank == e->rank && ends[j].input == e->input) {
                ok = rig_err(err,
                             "invalid: ends[%zu]: input %u is bound twice on "
                             "machine %s (ends[%zu] too)",
                             i, e->input, name_of(rm, e->rank), j);
            }
        }
        if (!ok) {
            break;
        }
        int64_t id = rig_rail_id(e->rail);
        pthread_mutex_lock(&rm->table_lock);
        rm_rail *r = rm_rail_find(rm, id);
        int side = r == NULL         ? -1
                   : r->a == e->rank ? 0
                   : r->b == e->rank ? 1
                                     : -1;
        size_t sends = side == 0 ? r->nsend : side == 1 ? r->nreceive : 0;
        size_t gets = side == 0 ? r->nreceive : side == 1 ? r->nsend : 0;
        int other = side == 0 ? r->b : side == 1 ? r->a : 0;
        mesh_end_place peer = {.shm = -1};
        if (side >= 0 &&
            strcmp(rm->machines[e->rank].node, rm->machines[other].node) == 0) {
            peer = r->place[1 - side];
        }
        pthread_mutex_unlock(&rm->table_lock);
        if (r == NULL) {
            ok = rig_err(err,
                         "invalid: ends[%zu]: rail %lld is no rail of this "
                         "layer (or its controller's rail was released)",
                         i, (long long)id);
        } else if (side < 0) {
            ok = rig_err(err, "invalid: ends[%zu]: rail %lld has no end on %s",
                         i, (long long)id, name_of(rm, e->rank));
        } else if ((m->writes & bit) != 0 && sends == 0) {
            ok = rig_err(err,
                         "invalid: ends[%zu]: program %s writes input %u, but "
                         "%s's end of rail %lld sends nothing",
                         i, m->name, e->input, name_of(rm, e->rank),
                         (long long)id);
        } else if ((m->reads & bit) != 0 && gets == 0) {
            ok = rig_err(err,
                         "invalid: ends[%zu]: program %s reads input %u, but "
                         "%s's end of rail %lld receives nothing",
                         i, m->name, e->input, name_of(rm, e->rank),
                         (long long)id);
        }
        if (ok) {
            w[i].rank = e->rank;
            w[i].input = e->input;
            w[i].peer.id = id;
            w[i].peer.shm = peer.shm;
            w[i].peer.bytes = peer.bytes;
            w[i].peer.counts_at = peer.counts_at;
            w[i].peer.outbound_at = peer.outbound_at;
            w[i].peer.inbound_at = peer.inbound_at;
        }
    }
    if (!ok) {
        free(w);
        return false;
    }
    *out = w;
    return true;
}

bool rig_remote_load(rig_remote *rm, const mesh_payload *src, const int *ranks,
                     size_t nranks, rig_remote_load_info *info,
                     int64_t *program, char **err)
{
    return rig_remote_load_ends(rm, src, ranks, nranks, NULL, 0, info, program,
                                err);
}

bool rig_remote_load_ends(rig_remote *rm, const mesh_payload *src,
                          const int *ranks, size_t nranks,
                          const rig_remote_end *ends, size_t nends,
                          rig_remote_load_info *info, int64_t *program,
                          char **err)
{
    if (!is_controller(rm, "rig_remote_load", err)) {
        return false;
    }
    if (src == NULL || program == NULL) {
        return rig_err(err, "invalid: rig_remote_load: %s is NULL",
                       src == NULL ? "src" : "program");
    }
    if (src->nfiles == 0 || src->files == NULL || src->files[0].path == NULL ||
        strcmp(src->files[0].path, "manifest.json") != 0 || src->name == NULL) {
        return rig_err(err, "invalid: src is no payload: it needs a name and "
                            "manifest.json as its first file");
    }
    /* What an agent takes (mesh/loader.h's limits), checked here: an
     * agent that cannot take an image's bytes can only fail the job. */
    if (!mesh_manifest_name_ok(src->name)) {
        return rig_err(err, "invalid: src->name \"%s\" is no program name",
                       src->name);
    }
    if (src->nfiles > MESH_PAYLOAD_MAX_FILES) {
        return rig_err(err, "limits: program %s has %zu files, more than %u",
                       src->name, src->nfiles, MESH_PAYLOAD_MAX_FILES);
    }
    for (size_t i = 0; i < src->nfiles; i++) {
        const mesh_payload_file *f = &src->files[i];
        if (f->path == NULL || f->path[0] == '\0' ||
            strlen(f->path) > RM_PATH_MAX || (f->data == NULL && f->len > 0)) {
            return rig_err(err, "invalid: src->files[%zu] has no %s", i,
                           f->data == NULL && f->len > 0 ? "bytes"
                                                         : "usable path");
        }
        if (f->len > MESH_PAYLOAD_MAX_FILE_BYTES) {
            return rig_err(err,
                           "limits: program %s: %s has %zu bytes, more than "
                           "%u",
                           src->name, f->path, f->len,
                           MESH_PAYLOAD_MAX_FILE_BYTES);
        }
    }
    uint64_t t0 = rig_now_ns();
    rm_lock(rm);
    const mesh_manifest *m = NULL;
    if (!manifest_of(rm, &src->files[0], &m, err)) {
        pthread_mutex_unlock(&rm->lock);
        return false;
    }
    int *t = NULL;
    size_t n = 0;
    rm_wire_bind *wb = NULL;
    /* Each machine's executor, so that an agent need not read the
     * manifest to pick it (RM_NO_PICK: not one of the load's). */
    uint32_t *picks = malloc((size_t)rm->size * sizeof(*picks));
    for (int r = 0; picks != NULL && r < rm->size; r++) {
        picks[r] = RM_NO_PICK;
    }
    bool ok = picks != NULL ? true : rig_err(err, "nomem: %d picks", rm->size);
    ok = ok && targets(rm, ranks, nranks, &t, &n, err) &&
         runs_everywhere(rm, m, t, n, picks, err) &&
         ends_check(rm, m, t, n, ends, nends, &wb, err);
    if (ok && rig_job_failed(rm->job)) {
        ok = rm_failed(rm, err, "loading a program");
    }
    if (!ok) {
        pthread_mutex_unlock(&rm->lock);
        free(picks);
        free(wb);
        free(t);
        return false;
    }
    char what[128];
    snprintf(what, sizeof(what), "loading program %s", src->name);
    uint64_t th = rig_now_ns();
    uint64_t hash = mesh_payload_hash(src);
    uint64_t th2 = rig_now_ns();
    int64_t id = ++rm->last_program;
    uint64_t bytes = 0;
    for (size_t i = 0; i < src->nfiles; i++) {
        bytes += src->files[i].len;
    }
    rm_cmd c = rm_cmd_new(rm, RM_OP_LOAD, id);
    /* A broadcast to one machine is a send: it takes the plain form; so
     * does a small image (RM_SMALL_IMAGE). */
    bool small = bytes <= RM_SMALL_IMAGE;
    bool all = n == (size_t)rm->size - 1 && n > 1 && !small;
    /* The message's length, so that it is made in one piece. */
    size_t want = sizeof(c) + 4 + strlen(src->name) + 4 + 4 +
                  nends * sizeof(*wb) + 4 + (size_t)rm->size * sizeof(*picks);
    for (size_t i = 0; i < src->nfiles; i++) {
        want += 4 + strlen(src->files[i].path) + 8;
    }
    rm_buf msg = {.p = malloc(want), .cap = want};
    msg.oom = msg.p == NULL;
    c.hash = hash;
    c.image = all ? RM_IMAGE_BCAST : RM_IMAGE_P2P;
    rm_buf_put(&msg, &c, sizeof(c));
    rm_buf_str(&msg, src->name);
    rm_buf_u32(&msg, (uint32_t)src->nfiles);
    for (size_t i = 0; i < src->nfiles; i++) {
        rm_buf_str(&msg, src->files[i].path);
        rm_buf_u64(&msg, src->files[i].len);
    }
    rm_buf_u32(&msg, (uint32_t)nends);
    rm_buf_put(&msg, wb, nends * sizeof(*wb));
    free(wb);
    rm_buf_u32(&msg, (uint32_t)rm->size);
    rm_buf_put(&msg, picks, (size_t)rm->size * sizeof(*picks));
    free(picks);
    rm_got *g = NULL;
    MPI_Request *creq = calloc(n, sizeof(*creq));
    MPI_Request *ireq = NULL;
    size_t nireq = 0;
    uint64_t tc = 0, ts = 0, ts2 = 0;
    if (msg.oom || creq == NULL) {
        ok = rig_err(err, "nomem: %s", what);
        goto out;
    }
    tc = rig_now_ns();
    for (size_t i = 0; i < n; i++) {
        int rc = RM_MPI(rm, "MPI_Isend",
                        MPI_Isend(msg.p, (int)msg.len, MPI_BYTE, t[i],
                                  RM_TAG_CMD, rm->comm, &creq[i]));
        if (rc != MPI_SUCCESS) {
            rig_job_fail(rm->job, "the controller could not send a load");
            ok = rm_mpi_err(err, rc, "MPI_Isend");
            goto out;
        }
    }
    void *keep[] = {msg.p};
    ok = rm_wait_all(rm, creq, (int)n, RM_PACE_DATA, keep, 1, what, err);
    if (!ok) {
        memset(&msg, 0, sizeof(msg));
        goto out;
    }
    ts = rig_now_ns();
    if (!post_image(rm, src, t, n, all, &ireq, &nireq, err)) {
        /* Agents wait for bytes that will not come. */
        rig_job_fail(rm->job, "the controller could not send an image");
        ok = false;
        goto out;
    }
    /* The payload is the caller's: on a failed job it must not be freed
     * while MPI may still read it, which the caller cannot know.  MPI
     * reads a send buffer only while its request is pending, and only a
     * dead peer leaves one pending; the job is over then. */
    /* A small image's sends complete once each agent took its bytes, and
     * with more agents than cores they take turns on the cores: a wait
     * that never yields would keep one of them from its turn.  A big one
     * moves only while the controller tests. */
    ok = rm_wait_all(rm, ireq, (int)nireq, small ? RM_PACE_REPLY : RM_PACE_DATA,
                     NULL, 0, what, err);
    ts2 = rig_now_ns();
    if (!ok) {
        goto out;
    }
    uint64_t seq = c.seq;
    g = calloc(n, sizeof(*g));
    if (g == NULL) {
        rig_job_fail(rm->job, "the controller ran out of memory");
        ok = rm_failed(rm, err, what);
        goto out;
    }
    ok = rm_replies(rm, t, n, seq, g, what, err);
    if (!ok) {
        goto out;
    }
    size_t refused = 0;
    for (size_t i = 0; i < n; i++) {
        refused += g[i].h.ok ? 0 : 1;
    }
    rm_program *p = NULL;
    if (refused == 0) {
        p = calloc(1, sizeof(*p));
        if (p != NULL) {
            p->places = calloc(n, sizeof(*p->places));
            p->name = strdup(src->name);
        }
        if (p == NULL || p->places == NULL || p->name == NULL) {
            program_free(p);
            p = NULL;
        }
    }
    if (refused > 0 || p == NULL) {
        /* All or nothing: the machines that loaded unload again. */
        int *back = calloc(n, sizeof(*back));
        size_t nb = 0;
        for (size_t i = 0; back != NULL && i < n; i++) {
            if (g[i].h.ok) {
                back[nb++] = g[i].rank;
            }
        }
        if (nb > 0) {
            rm_buf u = {0};
            cmd_head(rm, &u, RM_OP_UNLOAD, id);
            rm_got *ug = NULL;
            char *uerr = NULL;
            if (rm_round_trip(rm, back, nb, &u, &ug, what, &uerr)) {
                rm_got_free(ug, nb);
            } else {
                rig_log(RIG_LOG_WARN, "controller: undoing a refused load: %s",
                        uerr != NULL ? uerr : "?");
            }
            free(uerr);
        }
        free(back);
        ok = refused > 0
                 ? rm_refusals(rm, g, n, "failed: a machine refused", err)
                 : rig_err(err, "nomem: %s", what);
        goto out;
    }
    p->id = id;
    p->hash = hash;
    p->nplaces = n;
    double receive = 0, prepare = 0;
    for (size_t i = 0; i < n; i++) {
        p->places[i].rank = t[i];
        p->places[i].exec = g[i].h.exec;
        rm_threads_set(rm, t[i], id, g[i].threads, g[i].h.nthreads);
        receive =
            receive > ms(g[i].h.receive_ns) ? receive : ms(g[i].h.receive_ns);
        prepare =
            prepare > ms(g[i].h.prepare_ns) ? prepare : ms(g[i].h.prepare_ns);
    }
    pthread_mutex_lock(&rm->table_lock);
    p->next = rm->programs;
    rm->programs = p;
    pthread_mutex_unlock(&rm->table_lock);
    if (info != NULL) {
        info->image_bytes = bytes;
        info->machines = n;
        info->hash_ms = ms(th2 - th);
        info->check_ms = ms(tc - t0);
        info->send_ms = ms(ts2 - ts);
        info->receive_ms = receive;
        info->prepare_ms = prepare;
        info->total_ms = ms(rig_now_ns() - t0);
    }
    *program = id;
out:
    rm_got_free(g, n);
    free(ireq);
    free(creq);
    rm_buf_free(&msg);
    free(t);
    pthread_mutex_unlock(&rm->lock);
    return ok;
}

bool rig_remote_load_catalog(rig_remote *rm, const char *root, const char *name,
                             const int *ranks, size_t nranks, int64_t *program,
                             char **err)
{
    return rig_remote_load_catalog_ends(rm, root, name, ranks, nranks, NULL, 0,
                                        program, err);
}

bool rig_remote_load_catalog_ends(rig_remote *rm, const char *root,
                                  const char *name, const int *ranks,
                                  size_t nranks, const rig_remote_end *ends,
                                  size_t nends, int64_t *program, char **err)
{
    if (!is_controller(rm, "rig_remote_load_catalog", err)) {
        return false;
    }
    if (root == NULL || name == NULL || program == NULL) {
        return rig_err(err, "invalid: rig_remote_load_catalog: %s is NULL",
                       root == NULL   ? "root"
                       : name == NULL ? "name"
                                      : "program");
    }
    mesh_payload src;
    if (!mesh_payload_read(root, name, &src, err)) {
        return false;
    }
    bool ok = rig_remote_load_ends(rm, &src, ranks, nranks, ends, nends, NULL,
                                   program, err);
    if (!ok && rig_job_failed(rm->job)) {
        /* An abandoned send may still read the image. */
        for (size_t i = 0; i < src.nfiles; i++) {
            rm_abandon(src.files[i].data);
            src.files[i].data = NULL;
            src.files[i].len = 0;
        }
    }
    mesh_payload_free(&src);
    return ok;
}

/* ---- launch, query, halt, unload ----------------------------------------- */

/* The program and its machines' ranks (malloc'd); rm->lock held. */
static bool places_of(rig_remote *rm, int64_t id, rm_program **p, int **ranks,
                      char **err)
{
    *p = prog_find(rm, id);
    if (*p == NULL) {
        return rig_err(err, "invalid: no program %lld is loaded",
                       (long long)id);
    }
    *ranks = calloc((*p)->nplaces, sizeof(int));
    if (*ranks == NULL) {
        return rig_err(err, "nomem: program %s's machines", (*p)->name);
    }
    for (size_t i = 0; i < (*p)->nplaces; i++) {
        (*ranks)[i] = (*p)->places[i].rank;
    }
    if (rig_job_failed(rm->job)) {
        free(*ranks);
        char what[128];
        snprintf(what, sizeof(what), "program %s", (*p)->name);
        return rm_failed(rm, err, what);
    }
    return true;
}

bool rig_remote_launch(rig_remote *rm, int64_t program, uint32_t nodes,
                       char **err)
{
    if (!is_controller(rm, "rig_remote_launch", err)) {
        return false;
    }
    rm_lock(rm);
    rm_program *p;
    int *ranks = NULL;
    bool ok = places_of(rm, program, &p, &ranks, err);
    for (size_t i = 0; ok && i < p->nplaces; i++) {
        if (p->places[i].launched) {
            ok = rig_err(err,
                         "invalid: program %s is launched on %s already "
                         "(halt it first)",
                         p->name, name_of(rm, p->places[i].rank));
        }
    }
    if (!ok) {
        free(ranks);
        pthread_mutex_unlock(&rm->lock);
        return false;
    }
    char what[128];
    snprintf(what, sizeof(what), "launching program %s", p->name);
    rm_buf msg = {0};
    rm_cmd c = rm_cmd_new(rm, RM_OP_LAUNCH, program);
    c.nodes = nodes;
    rm_buf_put(&msg, &c, sizeof(c));
    rm_got *g = NULL;
    ok = rm_round_trip(rm, ranks, p->nplaces, &msg, &g, what, err);
    if (ok) {
        size_t failed = 0;
        pthread_mutex_lock(&rm->table_lock);
        for (size_t i = 0; i < p->nplaces; i++) {
            rm_place *pl = &p->places[i];
            if (g[i].h.ok) {
                pl->launched = true;
                pl->nodes = g[i].h.nodes;
                pl->launch = g[i].h.launch;
                free(pl->crash);
                pl->crash = NULL;
            } else {
                failed++;
            }
        }
        pthread_mutex_unlock(&rm->table_lock);
        if (failed > 0) {
            /* All or nothing: the machines that started halt again. */
            int *back = calloc(p->nplaces, sizeof(*back));
            size_t nb = 0;
            for (size_t i = 0; back != NULL && i < p->nplaces; i++) {
                if (g[i].h.ok) {
                    back[nb++] = g[i].rank;
                    p->places[i].launched = false;
                }
            }
            if (nb > 0) {
                rm_buf h = {0};
                cmd_head(rm, &h, RM_OP_HALT, program);
                rm_got *hg = NULL;
                char *herr = NULL;
                if (rm_round_trip(rm, back, nb, &h, &hg, what, &herr)) {
                    rm_got_free(hg, nb);
                } else {
                    rig_log(RIG_LOG_WARN,
                            "controller: undoing a failed launch: %s",
                            herr != NULL ? herr : "?");
                }
                free(herr);
            }
            free(back);
            ok = rm_refusals(rm, g, p->nplaces,
                             "failed: a machine did not launch", err);
        }
    }
    rm_got_free(g, p->nplaces);
    free(ranks);
    pthread_mutex_unlock(&rm->lock);
    return ok;
}

void rig_remote_status_free(rig_remote_status *s, size_t n)
{
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        free(s[i].why);
    }
    free(s);
}

/* One query round; rm->lock held.  *out has p->nplaces entries. */
static bool query_locked(rig_remote *rm, int64_t program,
                         rig_remote_status **out, size_t *n, char **err)
{
    rm_program *p;
    int *ranks = NULL;
    if (!places_of(rm, program, &p, &ranks, err)) {
        return false;
    }
    char what[128];
    snprintf(what, sizeof(what), "querying program %s", p->name);
    rm_buf msg = {0};
    cmd_head(rm, &msg, RM_OP_QUERY, program);
    rm_got *g = NULL;
    bool ok = rm_round_trip(rm, ranks, p->nplaces, &msg, &g, what, err);
    free(ranks);
    if (!ok) {
        return false;
    }
    for (size_t i = 0; i < p->nplaces; i++) {
        if (!g[i].h.ok) {
            ok = rm_refusals(rm, g, p->nplaces, "failed: a query", err);
            rm_got_free(g, p->nplaces);
            return ok;
        }
    }
    rig_remote_status *s = calloc(p->nplaces, sizeof(*s));
    if (s == NULL) {
        rm_got_free(g, p->nplaces);
        return rig_err(err, "nomem: %s", what);
    }
    pthread_mutex_lock(&rm->table_lock);
    for (size_t i = 0; i < p->nplaces; i++) {
        s[i].rank = g[i].rank;
        s[i].machine = name_of(rm, g[i].rank);
        s[i].exec = g[i].h.exec;
        s[i].state = (rig_remote_run)g[i].h.state;
        s[i].nodes = g[i].h.nodes;
        memcpy(s[i].points, g[i].h.points, sizeof(s[i].points));
        if (s[i].state == RIG_REMOTE_CRASHED) {
            const char *why =
                g[i].msg != NULL && g[i].msg[0] != '\0' ? g[i].msg : "crashed";
            crash_record(rm, g[i].rank, program, g[i].h.launch, why);
            s[i].why = strdup(why);
        }
    }
    pthread_mutex_unlock(&rm->table_lock);
    rm_got_free(g, p->nplaces);
    *out = s;
    *n = p->nplaces;
    return true;
}

bool rig_remote_query(rig_remote *rm, int64_t program, rig_remote_status **out,
                      size_t *n, char **err)
{
    if (!is_controller(rm, "rig_remote_query", err)) {
        return false;
    }
    if (out == NULL || n == NULL) {
        return rig_err(err, "invalid: rig_remote_query: %s is NULL",
                       out == NULL ? "out" : "n");
    }
    rm_lock(rm);
    bool ok = query_locked(rm, program, out, n, err);
    pthread_mutex_unlock(&rm->lock);
    return ok;
}

/* Waits, asking the agents nothing, until their word may have changed
 * what a query says of program: every machine's launch ended or one
 * crashed (rm_over, which an agent sends once per launch), it is not
 * launched (or not loaded) any more or was never, the job failed, or
 * deadline (0: none) passed.  It takes the agents' words in under
 * rm->lock between naps of *nap_us (none the first time, 0), which grow
 * to 1 ms: a wait of any length costs the agents nothing (a query would
 * start their hot phase, beside their own program's nodes) and the
 * controller a wakeup a millisecond.  False only for a failed job. */
static bool wait_word(rig_remote *rm, int64_t program, uint64_t deadline,
                      long *nap_us, char **err)
{
    for (;;) {
        if (*nap_us > 0) {
            struct timespec ts = {0, *nap_us * 1000};
            nanosleep(&ts, NULL);
        }
        *nap_us = *nap_us == 0 ? 20 : (*nap_us < 500 ? *nap_us * 2 : 1000);
        rm_lock(rm);
        bool failed = rig_job_failed(rm->job);
        if (!failed) {
            rm_events_drain(rm);
        }
        pthread_mutex_lock(&rm->table_lock);
        rm_program *p = prog_find(rm, program);
        char what[128];
        snprintf(what, sizeof(what), "waiting for program %s",
                 p != NULL ? p->name : "(unloaded)");
        bool news = p == NULL;
        size_t over = 0;
        for (size_t i = 0; !news && i < p->nplaces; i++) {
            const rm_place *pl = &p->places[i];
            if (!pl->launched) {
                news = true;
            } else if (pl->over >= pl->launch) {
                over++;
                news = pl->over_state == RIG_REMOTE_CRASHED;
            }
        }
        news = news || over == p->nplaces;
        pthread_mutex_unlock(&rm->table_lock);
        pthread_mutex_unlock(&rm->lock);
        if (failed) {
            return rm_failed(rm, err, what);
        }
        if (news || (deadline != 0 && rig_now_ns() >= deadline)) {
            return true;
        }
    }
}

bool rig_remote_wait(rig_remote *rm, int64_t program, uint32_t timeout_ms,
                     char **err)
{
    if (!is_controller(rm, "rig_remote_wait", err)) {
        return false;
    }
    uint64_t t0 = rig_now_ns();
    uint64_t deadline =
        timeout_ms > 0 ? t0 + (uint64_t)timeout_ms * 1000000u : 0;
    /* The agents are asked only once their word (or the controller's
     * table: an unknown program, one not launched) says a query ends the
     * wait, and at the deadline. */
    long nap_us = 0;
    for (;;) {
        if (!wait_word(rm, program, deadline, &nap_us, err)) {
            return false;
        }
        rig_remote_status *s = NULL;
        size_t n = 0;
        rm_lock(rm);
        bool ok = query_locked(rm, program, &s, &n, err);
        pthread_mutex_unlock(&rm->lock);
        if (!ok) {
            return false;
        }
        size_t done = 0;
        const char *crash = NULL, *idle = NULL;
        for (size_t i = 0; i < n; i++) {
            if (s[i].state == RIG_REMOTE_CRASHED && crash == NULL) {
                crash = s[i].why;
            } else if (s[i].state == RIG_REMOTE_DONE) {
                done++;
            } else if (s[i].state == RIG_REMOTE_LOADED && idle == NULL) {
                idle = s[i].machine;
            }
        }
        if (crash != NULL) {
            ok = rig_err(err, "failed: %s", crash);
        } else if (idle != NULL) {
            ok = rig_err(err, "invalid: program %lld is not launched on %s",
                         (long long)program, idle);
        } else if (done == n) {
            rig_remote_status_free(s, n);
            return true;
        } else if (deadline != 0 && rig_now_ns() >= deadline) {
            rm_buf b = {0};
            for (size_t i = 0; i < n; i++) {
                if (s[i].state == RIG_REMOTE_RUNNING) {
                    if (b.len > 0) {
                        rm_buf_put(&b, ", ", 2);
                    }
                    rm_buf_put(&b, s[i].machine, strlen(s[i].machine));
                }
            }
            rm_buf_put(&b, "", 1);
            ok = rig_err(err,
                         "timeout: program %lld still runs on %s after "
                         "%u ms",
                         (long long)program, b.oom ? "?" : (char *)b.p,
                         timeout_ms);
            rm_buf_free(&b);
        } else {
            rig_remote_status_free(s, n);
            continue;
        }
        rig_remote_status_free(s, n);
        return ok;
    }
}

/* Halts (unload false) or unloads program on every machine. */
static bool halt_or_unload(rig_remote *rm, int64_t program, bool unload,
                           const char *fn, char **err)
{
    if (!is_controller(rm, fn, err)) {
        return false;
    }
    rm_lock(rm);
    rm_program *p;
    int *ranks = NULL;
    bool ok = places_of(rm, program, &p, &ranks, err);
    if (!ok) {
        if (unload && p != NULL) {
            program_forget(rm, p); /* the job failed: forgotten anyway */
        }
        pthread_mutex_unlock(&rm->lock);
        return false;
    }
    char what[128];
    snprintf(what, sizeof(what), "%s program %s",
             unload ? "unloading" : "halting", p->name);
    rm_buf msg = {0};
    cmd_head(rm, &msg, unload ? RM_OP_UNLOAD : RM_OP_HALT, program);
    rm_got *g = NULL;
    ok = rm_round_trip(rm, ranks, p->nplaces, &msg, &g, what, err);
    if (ok) {
        pthread_mutex_lock(&rm->table_lock);
        for (size_t i = 0; i < p->nplaces; i++) {
            p->places[i].launched = false;
        }
        pthread_mutex_unlock(&rm->table_lock);
        for (size_t i = 0; i < p->nplaces && ok; i++) {
            if (!g[i].h.ok) {
                ok = rm_refusals(rm, g, p->nplaces, "failed: a halt", err);
            }
        }
    }
    rm_got_free(g, p->nplaces);
    free(ranks);
    if (unload) {
        program_forget(rm, p);
    }
    pthread_mutex_unlock(&rm->lock);
    return ok;
}

bool rig_remote_halt(rig_remote *rm, int64_t program, char **err)
{
    return halt_or_unload(rm, program, false, "rig_remote_halt", err);
}

bool rig_remote_unload(rig_remote *rm, int64_t program, char **err)
{
    return halt_or_unload(rm, program, true, "rig_remote_unload", err);
}

/* Asks agent rank for a list of ids (HELD: its programs; ENDS: its
 * rails' ends). */
static bool ids_held(rig_remote *rm, int rank, uint32_t op, const char *fn,
                     const char *what, int64_t **ids, size_t *n, char **err)
{
    if (!is_controller(rm, fn, err)) {
        return false;
    }
    if (ids == NULL || n == NULL) {
        return rig_err(err, "invalid: %s: %s is NULL", fn,
                       ids == NULL ? "ids" : "n");
    }
    if (rank <= 0 || rank >= rm->size) {
        return rig_err(err, "invalid: rank %d is no agent (1..%d)", rank,
                       rm->size - 1);
    }
    rm_lock(rm);
    if (rig_job_failed(rm->job)) {
        bool r = rm_failed(rm, err, what);
        pthread_mutex_unlock(&rm->lock);
        return r;
    }
    rm_buf msg = {0};
    cmd_head(rm, &msg, op, 0);
    rm_got *g = NULL;
    bool ok = rm_round_trip(rm, &rank, 1, &msg, &g, what, err);
    if (ok && !g[0].h.ok) {
        ok = rm_refusals(rm, g, 1, "failed: listing", err);
    } else if (ok &&
               (g[0].h.msg_len % sizeof(int64_t) != 0 || g[0].raw == NULL)) {
        ok = rig_err(err, "nomem: %s (machine %s)", what, name_of(rm, rank));
    } else if (ok) {
        size_t k = g[0].h.msg_len / sizeof(int64_t);
        *ids = NULL;
        if (k > 0) {
            *ids = malloc(k * sizeof(int64_t));
            if (*ids == NULL) {
                ok = rig_err(err, "nomem: %zu ids", k);
            } else {
                memcpy(*ids, g[0].raw, k * sizeof(int64_t));
            }
        }
        if (ok) {
            *n = k;
        }
    }
    rm_got_free(g, 1);
    pthread_mutex_unlock(&rm->lock);
    return ok;
}

bool rig_remote_programs_held(rig_remote *rm, int rank, int64_t **ids,
                              size_t *n, char **err)
{
    return ids_held(rm, rank, RM_OP_HELD, "rig_remote_programs_held",
                    "listing a machine's programs", ids, n, err);
}

bool rig_remote_ends_held(rig_remote *rm, int rank, int64_t **ids, size_t *n,
                          char **err)
{
    return ids_held(rm, rank, RM_OP_ENDS, "rig_remote_ends_held",
                    "listing a machine's ends", ids, n, err);
}

/* ---- close --------------------------------------------------------------- */

void rm_controller_close(rig_remote *rm)
{
    if (rm->size > 1 && rm->hosts != NULL) {
        int *all = calloc((size_t)rm->size - 1, sizeof(*all));
        if (all != NULL) {
            for (int r = 1; r < rm->size; r++) {
                all[r - 1] = r;
            }
            rm_buf msg = {0};
            cmd_head(rm, &msg, RM_OP_CLOSE, 0);
            rm_got *g = NULL;
            char *why = NULL;
            if (rm_round_trip(rm, all, (size_t)rm->size - 1, &msg, &g,
                              "closing the remote layer", &why)) {
                rm_got_free(g, (size_t)rm->size - 1);
            } else {
                rig_log(RIG_LOG_WARN, "controller: %s",
                        why != NULL ? why : "?");
            }
            free(why);
            free(all);
        }
    }
    rm_events_drain(rm);
    for (rm_program *p = rm->programs; p != NULL; p = p->next) {
        for (size_t i = 0; i < p->nplaces; i++) {
            rm_threads_set(rm, p->places[i].rank, p->id, NULL, 0);
        }
    }
}
