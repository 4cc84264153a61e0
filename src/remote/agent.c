/* SPDX-License-Identifier: BSD-3-Clause */
/* An agent: it serves the controller's commands on its machine's
 * executors and reports its programs' crashes.
 *
 * The serving loop probes for the next command (MPI_Improbe, so that no
 * receive is left posted when the job fails), polls the running programs
 * every RM_POLL_NS for their end or a crash -- telling the controller of
 * either unasked (RM_TAG_OVER, what rig_remote_wait waits for), so that a
 * waiting controller asks nothing while the program runs -- completes
 * the messages on their way and watches the job.  Commands run one at a
 * time, each ending with its reply; the rail commands (RAIL, DROP, ENDS)
 * are rails.c's.
 *
 * Ends of programs.  A load names, per machine, the rail ends the
 * program's inputs are bound to; the agent checks them against the
 * manifest once the image is prepared (mesh_ends_check), refuses an end
 * that another loaded program writes already, and takes a reference on
 * each, which the program gives back at unload.  Every launch hands the
 * bindings to the executor in the prepared image.  A crash fails the
 * program's ends and their peers', and the job (see fail_ends).
 *
 * Loaded and launched (see rig/remote.h): a load prepares the image on
 * the executor's JIT thread and keeps the mesh_prepared; a launch hands
 * it to mesh_driver_start, keeping the payload it came from so that a
 * later launch can prepare it again. */
#include "remote_internal.h"

#include "../util/util_internal.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/shm.h>

/* Running programs are polled every 1 ms (a crash is reported, the end
 * told to rig_remote_wait); the loop wakes that often anyway once it
 * naps. */
#define RM_POLL_NS 1000000ull

static const char *my_name(const rig_remote *rm)
{
    return rm->machines != NULL ? rm->machines[rm->rank].name : "?";
}

static agent_prog *find(rig_remote *rm, int64_t id)
{
    for (agent_prog *p = rm->progs; p != NULL; p = p->next) {
        if (p->id == id) {
            return p;
        }
    }
    return NULL;
}

/* "node 2 killed by signal 11" -> "node 2 of program p on vm:3 killed by
 * signal 11"; anything else -> "program p on vm:3: <why>". */
static char *crash_report(const rig_remote *rm, const agent_prog *p,
                          const char *why)
{
    char *out = NULL;
    size_t n = 0;
    if (strncmp(why, "node ", 5) == 0) {
        n = 5;
        while (isdigit((unsigned char)why[n])) {
            n++;
        }
    }
    int rc;
    if (n > 5 && why[n] == ' ') {
        rc = asprintf(&out, "%.*s of program %s on %s%s", (int)n, why, p->name,
                      my_name(rm), why + n);
    } else {
        rc = asprintf(&out, "program %s on %s: %s", p->name, my_name(rm), why);
    }
    return rc < 0 ? NULL : out;
}

/* ---- messages ------------------------------------------------------------ */

/* Completes the crash reports sent so far (no waiting). */
static void pending_progress(rig_remote *rm)
{
    size_t k = 0;
    for (size_t i = 0; i < rm->npending; i++) {
        int flag = 0;
        RM_MPI(rm, "MPI_Test",
               MPI_Test(&rm->pending[i], &flag, MPI_STATUS_IGNORE));
        if (flag) {
            free(rm->pending_buf[i]);
        } else {
            rm->pending[k] = rm->pending[i];
            rm->pending_buf[k] = rm->pending_buf[i];
            k++;
        }
    }
    rm->npending = k;
}

static void pending_abandon(rig_remote *rm)
{
    for (size_t i = 0; i < rm->npending; i++) {
        rm_abandon(rm->pending_buf[i]);
    }
    rm->npending = 0;
}

/* Sends b's bytes to the controller unasked, with tag, and keeps the
 * request among the pending ones (pending_progress completes it); b is
 * taken.  Nothing is sent without memory: the controller then learns of
 * it from a query (the state is the agent's). */
static void send_unasked(rig_remote *rm, int tag, rm_buf *b)
{
    if (rm->npending == rm->pending_cap) {
        size_t cap = rm->pending_cap != 0 ? rm->pending_cap * 2 : 8;
        MPI_Request *r = realloc(rm->pending, cap * sizeof(*r));
        if (r == NULL) {
            rm_buf_free(b);
            return;
        }
        rm->pending = r;
        void **pb = realloc(rm->pending_buf, cap * sizeof(*pb));
        if (pb == NULL) {
            rm_buf_free(b);
            return;
        }
        rm->pending_buf = pb;
        rm->pending_cap = cap;
    }
    if (b->oom) {
        rm_buf_free(b);
        return;
    }
    MPI_Request req;
    if (RM_MPI(rm, "MPI_Isend",
               MPI_Isend(b->p, (int)b->len, MPI_BYTE, 0, tag, rm->comm,
                         &req)) != MPI_SUCCESS) {
        rm_buf_free(b);
        return;
    }
    rm->pending[rm->npending] = req;
    rm->pending_buf[rm->npending] = b->p;
    rm->npending++;
}

/* Tells the controller that p's launch ended (RM_TAG_OVER): what
 * rig_remote_wait waits for, instead of asking. */
static void report_over(rig_remote *rm, const agent_prog *p)
{
    rm_over o = {.magic = RM_MAGIC,
                 .state = (uint32_t)p->state,
                 .program = p->id,
                 .launch = p->launches};
    rm_buf b = {0};
    rm_buf_put(&b, &o, sizeof(o));
    send_unasked(rm, RM_TAG_OVER, &b);
}

/* Sends p's crash report to the controller, once. */
static void report_crash(rig_remote *rm, agent_prog *p)
{
    if (p->crash == NULL || p->crash_sent) {
        return;
    }
    p->crash_sent = true;
    rig_log(RIG_LOG_INFO, "rank %d: %s", rm->rank, p->crash);
    size_t len = strlen(p->crash);
    rm_event ev = {.magic = RM_MAGIC,
                   .msg_len = (uint32_t)len,
                   .program = p->id,
                   .launch = p->launches};
    rm_buf b = {0};
    rm_buf_put(&b, &ev, sizeof(ev));
    rm_buf_put(&b, p->crash, len);
    send_unasked(rm, RM_TAG_EVENT, &b);
}

/* Sends a reply and waits until it is on its way; false (with the job's
 * reason) when the job fails first. */
static bool send_msg(rig_remote *rm, rm_reply *h, const int32_t *threads,
                     const void *msg, size_t mlen, char **err);

static bool send_reply(rig_remote *rm, rm_reply *h, const int32_t *threads,
                       const char *msg, char **err)
{
    size_t mlen = msg != NULL ? strlen(msg) : 0;
    return send_msg(rm, h, threads, msg, mlen > 65536 ? 65536 : mlen, err);
}

/* A reply whose message is len bytes of data. */
static bool send_raw(rig_remote *rm, rm_reply *h, const void *data, size_t len,
                     char **err)
{
    return send_msg(rm, h, NULL, data, len, err);
}

bool rm_agent_send_raw(rig_remote *rm, rm_reply *h, const void *data,
                       size_t len, char **err)
{
    return send_raw(rm, h, data, len, err);
}

static bool send_msg(rig_remote *rm, rm_reply *h, const int32_t *threads,
                     const void *msg, size_t mlen, char **err)
{
    h->magic = RM_MAGIC;
    h->msg_len = (uint32_t)mlen;
    rm_buf b = {0};
    rm_buf_put(&b, h, sizeof(*h));
    rm_buf_put(&b, threads, h->nthreads * sizeof(int32_t));
    rm_buf_put(&b, msg, mlen);
    if (b.oom) {
        /* A reply the controller can read at least. */
        rm_buf_free(&b);
        h->ok = 0;
        h->nthreads = 0;
        h->msg_len = 0;
        rm_buf_put(&b, h, sizeof(*h));
        if (b.oom) {
            rig_job_fail(rm->job, "an agent ran out of memory replying");
            return rm_failed(rm, err, "replying to the controller");
        }
    }
    MPI_Request req;
    int rc = RM_MPI(
        rm, "MPI_Isend",
        MPI_Isend(b.p, (int)b.len, MPI_BYTE, 0, RM_TAG_REPLY, rm->comm, &req));
    if (rc != MPI_SUCCESS) {
        rm_buf_free(&b);
        return rm_mpi_err(err, rc, "MPI_Isend");
    }
    void *keep[] = {b.p};
    if (!rm_wait_all(rm, &req, 1, RM_PACE_DATA, keep, 1,
                     "replying to the controller", err)) {
        return false;
    }
    rm_buf_free(&b);
    return true;
}

static bool refuse(rig_remote *rm, const rm_cmd *c, const char *why, char **err)
{
    rm_reply h = {.op = c->op, .seq = c->seq, .ok = 0};
    return send_reply(rm, &h, NULL, why != NULL ? why : "nomem: (no reason)",
                      err);
}

bool rm_agent_refuse(rig_remote *rm, const rm_cmd *c, const char *why,
                     char **err)
{
    return refuse(rm, c, why, err);
}

/* ---- ends of programs ---------------------------------------------------- */

/* Raises the three counts of the end at place (another process's, on this
 * node) to failure, through its segment. */
static bool fail_segment(const mesh_end_place *place)
{
    void *seg = shmat(place->shm, NULL, 0);
    if (seg == (void *)-1) {
        return false;
    }
    bool ok = place->counts_at + RIG_COUNTS_BYTES <= place->bytes;
    if (ok) {
        uint8_t *counts = (uint8_t *)seg + place->counts_at;
        rig_count_advance(counts, RIG_READY_AT, RIG_COUNT_FAILED);
        rig_count_advance(counts, RIG_SENT_AT, RIG_COUNT_FAILED);
        rig_count_advance(counts, RIG_ARRIVED_AT, RIG_COUNT_FAILED);
    }
    shmdt(seg);
    return ok;
}

/* A crash of p: its ends fail, and so do their peers' ends, so that no
 * one waits for what p will never send.  A rail's counts are raised to
 * RIG_COUNT_FAILED only when its job fails (seed 000, "Counts"), and the
 * transports read a failed count on a held end as the job's failure on
 * its way from the peer (../rail/base/failure.h): so a crash that holds
 * an end fails the job, with the crash report as its reason, before any
 * count is raised -- then every rank learns that reason, not a guess.
 * The ends of this agent and their peers on this node are raised at
 * once (a peer's through its segment) rather than when the job's
 * failure reaches them; a peer elsewhere is raised by the job's
 * failure. */
static void fail_ends(rig_remote *rm, agent_prog *p)
{
    if (p->nbinds == 0) {
        return;
    }
    char *why = NULL;
    rig_err(&why, "%s, holding rail %lld",
            p->crash != NULL ? p->crash : "a program crashed",
            (long long)p->binds[0].id);
    rig_job_fail(rm->job, why != NULL ? why : "a program crashed");
    free(why);
    for (size_t i = 0; i < p->nbinds; i++) {
        mesh_end_binding *b = &p->binds[i];
        rig_end_fail(b->end);
        if (b->peer_place.shm >= 0) {
            (void)fail_segment(&b->peer_place);
        }
    }
}

/* Gives back p's ends: the writer marks, then the references. */
static void unbind_ends(rig_remote *rm, agent_prog *p)
{
    for (size_t i = 0; i < p->nbinds; i++) {
        agent_rail *r = rm_agent_rail_find(rm, p->binds[i].id);
        if (r != NULL && r->writer == p->id) {
            r->writer = 0;
        }
    }
    for (size_t i = 0; i < p->nbinds; i++) {
        rig_end_release(p->binds[i].end);
    }
    free(p->binds);
    p->binds = NULL;
    p->nbinds = 0;
    p->ends.b = NULL;
    p->ends.n = 0;
    rm_agent_rails_sweep(rm);
}

/* Binds p's inputs on this machine: wb[0..n) are the load's bindings of
 * every machine; those of this rank are checked against p's manifest
 * (prepared already) and the ends of other programs, then each end gets a
 * reference.  False with why (the load is refused). */
static bool bind_ends(rig_remote *rm, agent_prog *p, const rm_wire_bind *wb,
                      size_t n, char **why)
{
    size_t mine = 0;
    for (size_t i = 0; i < n; i++) {
        mine += wb[i].rank == rm->rank ? 1 : 0;
    }
    if (mine == 0) {
        return true;
    }
    mesh_end_binding *b = calloc(mine, sizeof(*b));
    if (b == NULL) {
        return rig_err(why, "nomem: %zu ends", mine);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (wb[i].rank != rm->rank) {
            continue;
        }
        agent_rail *r = rm_agent_rail_find(rm, wb[i].peer.id);
        if (r == NULL) {
            free(b);
            return rig_err(why, "invalid: no end of rail %lld is here",
                           (long long)wb[i].peer.id);
        }
        b[k].input = wb[i].input;
        b[k].id = r->id;
        b[k].peer = r->peer;
        b[k].here = rm->rank;
        b[k].end = r->end;
        b[k].send = r->send;
        b[k].nsend = r->nsend;
        b[k].receive = r->receive;
        b[k].nreceive = r->nreceive;
        b[k].peer_place.shm = wb[i].peer.shm;
        b[k].peer_place.bytes = wb[i].peer.bytes;
        b[k].peer_place.counts_at = wb[i].peer.counts_at;
        b[k].peer_place.outbound_at = wb[i].peer.outbound_at;
        b[k].peer_place.inbound_at = wb[i].peer.inbound_at;
        k++;
    }
    mesh_ends ends = {.b = b, .n = k};
    const mesh_manifest *m = &p->prepared.manifest;
    char *e = NULL;
    if (!mesh_ends_check(&ends, m->reads, m->writes, &e)) {
        free(b);
        bool r =
            rig_err(why, "invalid: program %s: %s", p->name,
                    e != NULL && strncmp(e, "invalid: ", 9) == 0 ? e + 9 : "?");
        free(e);
        return r;
    }
    for (size_t i = 0; i < k; i++) {
        if ((m->writes & ((uint64_t)1 << b[i].input)) == 0) {
            continue;
        }
        agent_rail *r = rm_agent_rail_find(rm, b[i].id);
        bool twice = false;
        for (size_t j = 0; j < i; j++) {
            twice |= b[j].id == b[i].id &&
                     (m->writes & ((uint64_t)1 << b[j].input)) != 0;
        }
        if (r->writer != 0 || twice) {
            free(b);
            return rig_err(why,
                           "invalid: rail %lld's end is written by program "
                           "%lld already",
                           (long long)r->id,
                           (long long)(twice ? p->id : r->writer));
        }
    }
    for (size_t i = 0; i < k; i++) {
        rig_end_retain(b[i].end);
        if ((m->writes & ((uint64_t)1 << b[i].input)) != 0) {
            rm_agent_rail_find(rm, b[i].id)->writer = p->id;
        }
    }
    p->binds = b;
    p->nbinds = k;
    p->ends.b = b;
    p->ends.n = k;
    return true;
}

/* ---- staging lines ------------------------------------------------------- */

/* Why keep them.  A file of an image of many MiB is malloc'd by glibc as
 * a fresh mmap (its mmap threshold stops rising at 32 MiB), so every load
 * would receive into pages the kernel has still to fault in and zero --
 * which costs more than the copy itself -- while a bare MPI_Bcast that
 * reuses its buffer receives into pages in place.  So an unloaded image's
 * big files go to a pool, bounded by rm->keep, and the next load takes
 * its lines from there.  (Fresh lines in transparent huge pages, asked
 * for with madvise, made a first load of 64 MiB on 3 agents 4 times
 * slower on a loaded machine -- the kernel compacts memory to find huge
 * pages on the fault -- so a fresh line is plain malloc'd memory.) */
static uint8_t *line_fresh(size_t len)
{
    return malloc(len);
}

/* Memory for a file of len bytes: a kept line that fits (the smallest),
 * else a fresh one.  *cap is the line's length, 0 for a small file's
 * plain buffer (never pooled).  NULL when out of memory. */
static uint8_t *line_take(rig_remote *rm, size_t len, size_t *cap)
{
    *cap = 0;
    if (len < RM_LINE_MIN) {
        return malloc(len > 0 ? len : 1);
    }
    size_t best = rm->npool;
    for (size_t i = 0; i < rm->npool; i++) {
        if (rm->pool[i].cap >= len &&
            (best == rm->npool || rm->pool[i].cap < rm->pool[best].cap)) {
            best = i;
        }
    }
    if (best < rm->npool) {
        rm_line l = rm->pool[best];
        rm->pool[best] = rm->pool[--rm->npool];
        rm->pool_bytes -= l.cap;
        *cap = l.cap;
        return l.p;
    }
    uint8_t *p = line_fresh(len);
    if (p == NULL && rm->npool > 0) {
        /* Lines too small for this file: give them back and try again. */
        for (size_t i = 0; i < rm->npool; i++) {
            free(rm->pool[i].p);
        }
        rm->npool = 0;
        rm->pool_bytes = 0;
        p = line_fresh(len);
    }
    *cap = p != NULL ? len : 0;
    return p;
}

/* Keeps line l for the next loads, the oldest kept lines making room
 * while more than rm->keep bytes would be kept; a line longer than keep
 * is freed. */
static void line_give(rig_remote *rm, rm_line l)
{
    if (l.cap > rm->keep) {
        free(l.p);
        return;
    }
    while (rm->npool > 0 && rm->pool_bytes + l.cap > rm->keep) {
        free(rm->pool[0].p);
        rm->pool_bytes -= rm->pool[0].cap;
        memmove(rm->pool, rm->pool + 1, --rm->npool * sizeof(*rm->pool));
    }
    if (rm->npool == rm->pool_cap) {
        size_t cap = rm->pool_cap != 0 ? rm->pool_cap * 2 : 4;
        rm_line *np = realloc(rm->pool, cap * sizeof(*np));
        if (np == NULL) {
            free(l.p);
            return;
        }
        rm->pool = np;
        rm->pool_cap = cap;
    }
    rm->pool[rm->npool++] = l;
    rm->pool_bytes += l.cap;
}

/* Takes p's lines back out of payload src (which then no longer owns
 * them) into the pool. */
static void lines_reclaim(rig_remote *rm, agent_prog *p, mesh_payload *src)
{
    for (size_t i = 0; i < src->nfiles; i++) {
        for (size_t k = 0; k < p->nlines; k++) {
            if (p->lines[k].p != NULL && src->files[i].data == p->lines[k].p) {
                line_give(rm, p->lines[k]);
                p->lines[k].p = NULL;
                src->files[i].data = NULL;
                src->files[i].len = 0;
            }
        }
    }
}

/* Frees every kept line (the layer closes, or the job failed). */
static void pool_free(rig_remote *rm)
{
    for (size_t i = 0; i < rm->npool; i++) {
        free(rm->pool[i].p);
    }
    free(rm->pool);
    rm->pool = NULL;
    rm->npool = rm->pool_cap = 0;
    rm->pool_bytes = 0;
}

/* ---- programs ------------------------------------------------------------ */

/* Reads slot's state and points; records a crash (and reports it). */
static void poll_prog(rig_remote *rm, agent_prog *p)
{
    if (!p->launched || p->state != RIG_REMOTE_RUNNING) {
        return;
    }
    mesh_driver *d = rm->drivers[p->exec];
    mesh_run_state st = MESH_RUN_RUNNING;
    char *why = NULL, *e = NULL;
    if (!mesh_driver_poll(d, p->slot, &st, &why, &e)) {
        if (p->crash == NULL) {
            p->crash = crash_report(rm, p, e != NULL ? e : "query failed");
        }
        st = MESH_RUN_CRASHED;
    }
    free(e);
    for (uint32_t i = 0; i < MESH_POINTS; i++) {
        p->points[i] = mesh_driver_point(d, p->slot, i);
    }
    if (st == MESH_RUN_CRASHED) {
        if (p->crash == NULL) {
            p->crash = crash_report(rm, p, why != NULL ? why : "crashed");
        }
        p->state = RIG_REMOTE_CRASHED;
        fail_ends(rm, p);
        report_crash(rm, p);
        report_over(rm, p);
    } else if (st == MESH_RUN_DONE) {
        p->state = RIG_REMOTE_DONE;
        report_over(rm, p);
    }
    free(why);
}

/* Polls every running program: true when one runs still, *ended when a
 * launch ended. */
static bool poll_all(rig_remote *rm, bool *ended)
{
    bool running = false;
    for (agent_prog *p = rm->progs; p != NULL; p = p->next) {
        bool was = p->launched && p->state == RIG_REMOTE_RUNNING;
        poll_prog(rm, p);
        bool is = p->launched && p->state == RIG_REMOTE_RUNNING;
        *ended = *ended || (was && !is);
        running = running || is;
    }
    return running;
}

/* Halts p's launch, if any; false with the executor's unload error. */
static bool halt_prog(rig_remote *rm, agent_prog *p, char **why)
{
    if (!p->launched) {
        return true;
    }
    mesh_driver *d = rm->drivers[p->exec];
    for (uint32_t i = 0; i < MESH_POINTS; i++) {
        p->points[i] = mesh_driver_point(d, p->slot, i);
    }
    p->launched = false;
    p->state = RIG_REMOTE_LOADED;
    return mesh_driver_stop(d, p->slot, why);
}

static void prog_free(rig_remote *rm, agent_prog *p)
{
    halt_prog(rm, p, NULL);
    unbind_ends(rm, p);
    if (p->has_prepared) {
        lines_reclaim(rm, p, &p->prepared.src);
        mesh_prepared_free(&p->prepared);
    }
    if (p->has_kept) {
        lines_reclaim(rm, p, &p->kept);
        mesh_payload_free(&p->kept);
    }
    free(p->lines);
    rm_threads_set(rm, rm->rank, p->id, NULL, 0);
    free(p->crash);
    free(p->name);
    free(p);
}

static void prog_remove(rig_remote *rm, agent_prog *gone)
{
    for (agent_prog **p = &rm->progs; *p != NULL; p = &(*p)->next) {
        if (*p == gone) {
            *p = gone->next;
            break;
        }
    }
    prog_free(rm, gone);
}

void rm_agent_unload_all(rig_remote *rm)
{
    while (rm->progs != NULL) {
        prog_remove(rm, rm->progs);
    }
}

void rm_agent_free(rig_remote *rm)
{
    rm_agent_unload_all(rm);
    rm_agent_rails_free(rm);
    pool_free(rm);
    for (uint32_t k = 0; k < MESH_BACKEND_COUNT; k++) {
        mesh_driver_close(rm->drivers[k]);
        rm->drivers[k] = NULL;
        if (rm->backends[k] != NULL) {
            mesh_backend_destroy(rm->backends[k]);
            rm->backends[k] = NULL;
        }
    }
    if (rig_job_failed(rm->job)) {
        pending_abandon(rm);
    } else {
        for (size_t i = 0; i < rm->npending; i++) {
            /* Small and eager: on its way already, or the controller is
             * gone and the job failed; either way nothing waits for it. */
            MPI_Request_free(&rm->pending[i]);
            rm_abandon(rm->pending_buf[i]);
        }
        rm->npending = 0;
    }
}

/* The threads a group of a launch of p may have here (rig/remote.h). */
static int32_t threads_of(const rig_remote *rm, const mesh_prepared *p)
{
    const mesh_backend *b = rm->backends[p->exec];
    const mesh_caps *c = b->ops->caps(b);
    uint64_t per = p->manifest.threads > 0 ? p->manifest.threads : 1;
    uint64_t t = 0;
    if (p->exec == MESH_BACKEND_CUDA) {
        uint32_t per_sm = c->blocks_per_sm, v = 0;
        if (p->kernel != NULL &&
            mesh_kernel_max_blocks_per_sm(p->kernel, &v, NULL) && v > 0) {
            per_sm = v;
        }
        t = (uint64_t)per_sm * c->sms * per;
    } else if (p->exec == MESH_BACKEND_WASM) {
        t = c->sms;
    } else {
        uint64_t nodes =
            c->sms < MESH_MANIFEST_MAX_NODES ? c->sms : MESH_MANIFEST_MAX_NODES;
        t = nodes * per;
    }
    return t > INT32_MAX ? INT32_MAX : (int32_t)t;
}

/* ---- LOAD ---------------------------------------------------------------- */

typedef struct {
    char *path;
    uint64_t len;
} file_desc;

/* Receives the image into bufs (one per file), or, when bufs is NULL,
 * chunk by chunk into one scratch line (an agent out of memory still
 * takes its part of the broadcast).  False with the job's reason. */
static bool receive_image(rig_remote *rm, const rm_cmd *c, const file_desc *f,
                          uint32_t n, uint8_t **bufs, char **err)
{
    size_t nreq = 0;
    for (uint32_t i = 0; i < n; i++) {
        nreq += (size_t)((f[i].len + c->chunk - 1) / c->chunk);
    }
    if (nreq == 0) {
        return true;
    }
    uint8_t *scratch = NULL;
    MPI_Request *reqs = calloc(bufs != NULL ? nreq : 1, sizeof(*reqs));
    if (bufs == NULL) {
        scratch = malloc((size_t)c->chunk);
    }
    if (reqs == NULL || (bufs == NULL && scratch == NULL)) {
        free(reqs);
        free(scratch);
        rig_job_fail(rm->job, "an agent could not take an image's bytes");
        return rm_failed(rm, err, "receiving an image");
    }
    size_t k = 0;
    bool ok = true;
    for (uint32_t i = 0; i < n && ok; i++) {
        for (uint64_t off = 0; off < f[i].len && ok; off += c->chunk) {
            uint64_t left = f[i].len - off;
            int len = (int)(left < c->chunk ? left : c->chunk);
            uint8_t *into = bufs != NULL ? bufs[i] + off : scratch;
            MPI_Request *r = bufs != NULL ? &reqs[k++] : &reqs[0];
            int rc =
                c->image == RM_IMAGE_BCAST
                    ? RM_MPI(rm, "MPI_Ibcast",
                             MPI_Ibcast(into, len, MPI_BYTE, 0, rm->comm, r))
                    : RM_MPI(rm, "MPI_Irecv",
                             MPI_Irecv(into, len, MPI_BYTE, 0, RM_TAG_IMAGE,
                                       rm->comm, r));
            if (rc != MPI_SUCCESS) {
                /* Requests posted already may still write their lines. */
                rig_job_fail(rm->job, "an agent could not receive an image");
                ok = rm_failed(rm, err, "receiving an image");
                for (uint32_t j = 0; bufs != NULL && j < n; j++) {
                    rm_abandon(bufs[j]);
                    bufs[j] = NULL;
                }
                rm_abandon(scratch);
                scratch = NULL;
                break;
            }
            if (bufs == NULL) {
                void *keep[] = {scratch};
                ok = rm_wait_all(rm, r, 1, RM_PACE_DATA, keep, 1,
                                 "receiving an image", err);
                if (!ok) {
                    scratch = NULL;
                }
            }
        }
    }
    if (ok && bufs != NULL) {
        void **keep = (void **)bufs;
        ok = rm_wait_all(rm, reqs, (int)k, RM_PACE_DATA, keep, n,
                         "receiving an image", err);
        if (!ok) {
            for (uint32_t i = 0; i < n; i++) {
                bufs[i] = NULL; /* abandoned */
            }
        }
    }
    free(scratch);
    free(reqs);
    return ok;
}

/* The most bindings a load may carry (every machine's). */
#define RM_BINDS_MAX (1u << 20)

/* Parses LOAD's body into name, files, the bindings (every machine's,
 * malloc'd) and this machine's pick; false: malformed. */
static bool load_body(const rig_remote *rm, rm_rd *r, char **name,
                      file_desc **files, uint32_t *n, rm_wire_bind **binds,
                      uint32_t *nbinds, uint32_t *pick)
{
    *pick = RM_NO_PICK;
    *name = rm_rd_str(r, MESH_MANIFEST_MAX_NAME);
    *n = rm_rd_u32(r);
    *files = NULL;
    *binds = NULL;
    *nbinds = 0;
    if (r->bad || *n == 0 || *n > MESH_PAYLOAD_MAX_FILES) {
        return false;
    }
    *files = calloc(*n, sizeof(**files));
    if (*files == NULL) {
        return false;
    }
    for (uint32_t i = 0; i < *n; i++) {
        (*files)[i].path = rm_rd_str(r, RM_PATH_MAX);
        (*files)[i].len = rm_rd_u64(r);
        if (r->bad || (*files)[i].len > MESH_PAYLOAD_MAX_FILE_BYTES) {
            return false;
        }
    }
    *nbinds = rm_rd_u32(r);
    if (r->bad || *nbinds > RM_BINDS_MAX ||
        (size_t)*nbinds * sizeof(rm_wire_bind) > r->len - r->at) {
        return false;
    }
    if (*nbinds > 0) {
        *binds = malloc((size_t)*nbinds * sizeof(**binds));
        if (*binds == NULL ||
            !rm_rd_get(r, *binds, (size_t)*nbinds * sizeof(**binds))) {
            return false;
        }
    }
    uint32_t npicks = rm_rd_u32(r);
    if (r->bad || npicks != (uint32_t)rm->size ||
        (size_t)npicks * sizeof(uint32_t) > r->len - r->at) {
        return false;
    }
    memcpy(pick, r->p + r->at + (size_t)rm->rank * sizeof(uint32_t),
           sizeof(*pick));
    r->at += (size_t)npicks * sizeof(uint32_t);
    return true;
}

static void files_free(file_desc *f, uint32_t n)
{
    if (f != NULL) {
        for (uint32_t i = 0; i < n; i++) {
            free(f[i].path);
        }
    }
    free(f);
}

/* Prepares payload src (taken) for the executor its manifest picks: the
 * controller's pick when it names an executor this agent opened (the
 * controller picked from this machine's description, as this agent
 * would, and the executor's compiler checks the manifest again), else
 * this agent's own. */
static bool prepare(rig_remote *rm, mesh_payload *src, uint64_t hash,
                    uint32_t pick, mesh_prepared *out, char **why)
{
    if (pick < MESH_BACKEND_COUNT && rm->drivers[pick] != NULL) {
        return mesh_driver_prepare(rm->drivers[pick], src, &hash, NULL, out,
                                   why);
    }
    const mesh_payload_file *mf = mesh_payload_find(src, "manifest.json");
    mesh_manifest m;
    if (mf == NULL) {
        mesh_payload_free(src);
        return rig_err(why, "manifest: program %s has no manifest.json",
                       src->name != NULL ? src->name : "?");
    }
    if (!mesh_manifest_parse((const char *)mf->data, mf->len, &m, why)) {
        mesh_payload_free(src);
        return false;
    }
    /* The GPU first, as the executors' table of compilers has it. */
    static const uint32_t order[] = {MESH_BACKEND_CUDA, MESH_BACKEND_WASM,
                                     MESH_BACKEND_NATIVE};
    uint32_t have[3];
    size_t nhave = 0;
    for (size_t i = 0; i < 3; i++) {
        if (rm->drivers[order[i]] != NULL) {
            have[nhave++] = order[i];
        }
    }
    uint32_t exec = 0;
    bool ok = mesh_pick_exec(&m, have, nhave, &exec, why);
    mesh_manifest_free(&m);
    if (!ok) {
        mesh_payload_free(src);
        return false;
    }
    return mesh_driver_prepare(rm->drivers[exec], src, &hash, NULL, out, why);
}

/* Returns false only when serving must end (the job failed). */
static bool on_load(rig_remote *rm, const rm_cmd *c, rm_rd *body, uint64_t t0,
                    char **err)
{
    char *name = NULL;
    file_desc *files = NULL;
    uint32_t n = 0;
    rm_wire_bind *wb = NULL;
    uint32_t nwb = 0, pick = RM_NO_PICK;
    bool parsed = c->chunk > 0 && c->chunk <= INT_MAX &&
                  load_body(rm, body, &name, &files, &n, &wb, &nwb, &pick);
    parsed = parsed && body->at == body->len &&
             (c->image == RM_IMAGE_BCAST || c->image == RM_IMAGE_P2P);
    if (!parsed) {
        /* The image's bytes cannot be taken without their sizes: the two
         * sides disagree on the protocol, and only a failed job frees
         * the controller's broadcast. */
        free(name);
        files_free(files, n);
        free(wb);
        rig_job_fail(rm->job, "an agent got a malformed load command");
        return rm_failed(rm, err, "loading a program");
    }
    uint8_t **bufs = calloc(n, sizeof(*bufs));
    rm_line *lines = calloc(n, sizeof(*lines));
    bool have = bufs != NULL && lines != NULL;
    for (uint32_t i = 0; i < n && have; i++) {
        bufs[i] = line_take(rm, (size_t)files[i].len, &lines[i].cap);
        lines[i].p = lines[i].cap > 0 ? bufs[i] : NULL;
        have = bufs[i] != NULL;
    }
    if (!have && bufs != NULL) {
        for (uint32_t i = 0; i < n; i++) {
            free(bufs[i]);
        }
        free(bufs);
        bufs = NULL;
    }
    if (!receive_image(rm, c, files, n, have ? bufs : NULL, err)) {
        free(bufs); /* its lines were abandoned */
        free(lines);
        free(name);
        files_free(files, n);
        free(wb);
        return false;
    }
    uint64_t t1 = rig_now_ns();
    char *why = NULL;
    mesh_payload src = {0};
    bool ok = have;
    if (!ok) {
        rig_err(&why, "nomem: machine %s cannot hold the image of %s",
                my_name(rm), name);
    }
    if (ok && rm->corrupt && n > 1 && files[n - 1].len > 0) {
        /* RIG_REMOTE_TEST_CORRUPT: a byte changed on the way. */
        bufs[n - 1][files[n - 1].len - 1] ^= 0x5a;
    }
    if (ok) {
        src.name = name;
        src.files = calloc(n, sizeof(*src.files));
        name = NULL;
        if (src.files == NULL) {
            ok = rig_err(&why, "nomem: program %s's files", src.name);
        }
        for (uint32_t i = 0; ok && i < n; i++) {
            src.files[i].path = files[i].path;
            src.files[i].data = bufs[i];
            src.files[i].len = (size_t)files[i].len;
            files[i].path = NULL;
            bufs[i] = NULL;
            src.nfiles = i + 1;
        }
    }
    if (ok && find(rm, c->program) != NULL) {
        ok = rig_err(&why, "invalid: program %lld is loaded here already",
                     (long long)c->program);
    }
    agent_prog *p = NULL;
    if (ok) {
        p = calloc(1, sizeof(*p));
        if (p == NULL || (p->name = strdup(src.name)) == NULL) {
            free(p);
            p = NULL;
            ok = rig_err(&why, "nomem: program %s", src.name);
        }
    }
    if (ok) {
        /* prepare takes src, whatever happens: the lines are p's now
         * (or freed with src when it fails). */
        ok = prepare(rm, &src, c->hash, pick, &p->prepared, &why);
        p->id = c->program;
        if (ok) {
            p->lines = lines;
            p->nlines = n;
            lines = NULL;
        }
        if (ok && !bind_ends(rm, p, wb, nwb, &why)) {
            lines_reclaim(rm, p, &p->prepared.src);
            mesh_prepared_free(&p->prepared);
            ok = false;
        }
        if (!ok) {
            free(p->lines);
            free(p->name);
            free(p);
            p = NULL;
        }
    }
    mesh_payload_free(&src);
    if (bufs != NULL) {
        for (uint32_t i = 0; i < n; i++) {
            free(bufs[i]);
        }
    }
    free(bufs);
    free(lines);
    free(name);
    files_free(files, n);
    free(wb);
    uint64_t t2 = rig_now_ns();
    if (!ok) {
        bool sent = refuse(rm, c, why, err);
        free(why);
        return sent;
    }
    p->id = c->program;
    p->hash = c->hash;
    p->exec = p->prepared.exec;
    p->has_prepared = true;
    p->state = RIG_REMOTE_LOADED;
    p->threads = threads_of(rm, &p->prepared);
    p->next = rm->progs;
    rm->progs = p;
    rm_threads_set(rm, rm->rank, p->id, &p->threads, 1);
    rm_reply h = {
        .op = c->op,
        .seq = c->seq,
        .ok = 1,
        .state = RIG_REMOTE_LOADED,
        .exec = p->exec,
        .receive_ns = t1 - t0,
        .prepare_ns = t2 - t1,
        .nthreads = 1,
    };
    return send_reply(rm, &h, &p->threads, NULL, err);
}

/* ---- LAUNCH, QUERY, HALT, UNLOAD ----------------------------------------- */

static bool on_launch(rig_remote *rm, const rm_cmd *c, char **err)
{
    agent_prog *p = find(rm, c->program);
    char *why = NULL;
    if (p == NULL) {
        rig_err(&why, "invalid: no program %lld on machine %s",
                (long long)c->program, my_name(rm));
    } else if (p->launched) {
        rig_err(&why, "invalid: program %s runs on machine %s already", p->name,
                my_name(rm));
    } else if (!p->has_prepared) {
        mesh_payload copy;
        if (mesh_payload_copy(&copy, &p->kept, &why)) {
            p->has_prepared =
                mesh_driver_prepare(rm->drivers[p->exec], &copy, &p->hash, NULL,
                                    &p->prepared, &why);
        }
    }
    if (why == NULL && p->has_prepared) {
        /* The payload stays here for the next launch; the launch needs
         * only what the compiler made of it. */
        if (!p->has_kept) {
            p->kept = p->prepared.src;
            p->has_kept = true;
        } else {
            mesh_payload_free(&p->prepared.src);
        }
        memset(&p->prepared.src, 0, sizeof(p->prepared.src));
        uint32_t nodes = c->nodes != 0 ? c->nodes : p->prepared.manifest.nodes;
        p->prepared.ends = p->nbinds > 0 ? &p->ends : NULL;
        p->has_prepared = false; /* start takes it, whatever happens */
        uint32_t slot = 0;
        if (mesh_driver_start(rm->drivers[p->exec], &p->prepared, c->nodes,
                              &slot, &why)) {
            p->launched = true;
            p->launches++;
            p->slot = slot;
            p->nodes = nodes;
            p->state = RIG_REMOTE_RUNNING;
            free(p->crash);
            p->crash = NULL;
            p->crash_sent = false;
            memset(p->points, 0, sizeof(p->points));
        }
        memset(&p->prepared, 0, sizeof(p->prepared));
    }
    if (why != NULL) {
        bool sent = refuse(rm, c, why, err);
        free(why);
        return sent;
    }
    rm_reply h = {.op = c->op,
                  .seq = c->seq,
                  .ok = 1,
                  .state = RIG_REMOTE_RUNNING,
                  .exec = p->exec,
                  .nodes = p->nodes,
                  .launch = p->launches};
    return send_reply(rm, &h, NULL, NULL, err);
}

static bool on_query(rig_remote *rm, const rm_cmd *c, char **err)
{
    agent_prog *p = find(rm, c->program);
    if (p == NULL) {
        char *why = NULL;
        rig_err(&why, "invalid: no program %lld on machine %s",
                (long long)c->program, my_name(rm));
        bool sent = refuse(rm, c, why, err);
        free(why);
        return sent;
    }
    poll_prog(rm, p);
    rm_reply h = {.op = c->op,
                  .seq = c->seq,
                  .ok = 1,
                  .state = p->state,
                  .exec = p->exec,
                  .nodes = p->nodes,
                  .launch = p->launches};
    memcpy(h.points, p->points, sizeof(h.points));
    return send_reply(rm, &h, NULL,
                      p->state == RIG_REMOTE_CRASHED ? p->crash : NULL, err);
}

static bool on_halt(rig_remote *rm, const rm_cmd *c, bool unload, char **err)
{
    agent_prog *p = find(rm, c->program);
    char *why = NULL;
    if (p == NULL) {
        rig_err(&why, "invalid: no program %lld on machine %s",
                (long long)c->program, my_name(rm));
    } else {
        poll_prog(rm, p); /* a crash is reported before the halt ends it */
        halt_prog(rm, p, &why);
        if (unload) {
            prog_remove(rm, p);
        }
    }
    if (why != NULL) {
        bool sent = refuse(rm, c, why, err);
        free(why);
        return sent;
    }
    rm_reply h = {.op = c->op, .seq = c->seq, .ok = 1};
    return send_reply(rm, &h, NULL, NULL, err);
}

static int cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static bool on_held(rig_remote *rm, const rm_cmd *c, char **err)
{
    size_t n = 0;
    for (agent_prog *p = rm->progs; p != NULL; p = p->next) {
        n++;
    }
    int64_t *ids = calloc(n > 0 ? n : 1, sizeof(*ids));
    if (ids == NULL) {
        return refuse(rm, c, "nomem: the list of programs", err);
    }
    size_t i = 0;
    for (agent_prog *p = rm->progs; p != NULL; p = p->next) {
        ids[i++] = p->id;
    }
    qsort(ids, n, sizeof(*ids), cmp_id);
    rm_reply h = {.op = c->op, .seq = c->seq, .ok = 1};
    bool ok = send_raw(rm, &h, ids, n * sizeof(*ids), err);
    free(ids);
    return ok;
}

/* ---- serving ------------------------------------------------------------- */

/* Runs one command; *closed once the controller closed.  False only when
 * serving must end with *err. */
static bool handle(rig_remote *rm, const uint8_t *msg, size_t len, uint64_t t0,
                   bool *closed, char **err)
{
    rm_cmd c;
    rm_rd r = {.p = msg, .len = len};
    if (!rm_rd_get(&r, &c, sizeof(c)) || c.magic != RM_MAGIC) {
        rig_job_fail(rm->job, "an agent got a malformed command");
        return rm_failed(rm, err, "serving the controller");
    }
    switch (c.op) {
    case RM_OP_LOAD:
        return on_load(rm, &c, &r, t0, err);
    case RM_OP_LAUNCH:
        return on_launch(rm, &c, err);
    case RM_OP_QUERY:
        return on_query(rm, &c, err);
    case RM_OP_HALT:
        return on_halt(rm, &c, false, err);
    case RM_OP_UNLOAD:
        return on_halt(rm, &c, true, err);
    case RM_OP_HELD:
        return on_held(rm, &c, err);
    case RM_OP_RAIL:
        return rm_agent_rail(rm, &c, &r, err);
    case RM_OP_DROP:
        return rm_agent_drop(rm, &c, &r, err);
    case RM_OP_ENDS:
        return rm_agent_ends(rm, &c, err);
    case RM_OP_CLOSE: {
        rm_agent_unload_all(rm);
        rm_agent_rails_free(rm);
        *closed = true;
        rm_reply h = {.op = c.op, .seq = c.seq, .ok = 1};
        return send_reply(rm, &h, NULL, NULL, err);
    }
    default: {
        char *why = NULL;
        rig_err(&why, "unsupported: command %u", c.op);
        bool sent = refuse(rm, &c, why, err);
        free(why);
        return sent;
    }
    }
}

bool rig_remote_serve(rig_remote *rm, char **err)
{
    if (rm == NULL) {
        return rig_err(err, "invalid: rm is NULL");
    }
    if (rm->rank == 0) {
        return rig_err(err, "invalid: rank 0 is the controller: it does not "
                            "serve");
    }
    if (rm->served) {
        return rig_err(err, "invalid: rank %d served to the end already",
                       rm->rank);
    }
    rm_backoff b = {0};
    uint64_t next_poll = 0;
    bool running = false; /* a program ran at the last poll */
    for (;;) {
        if (rig_job_failed(rm->job)) {
            rm->served = true;
            pending_abandon(rm);
            rm_agent_unload_all(rm);
            rm_agent_rails_free(rm);
            return rm_failed(rm, err, "serving the controller");
        }
        int flag = 0;
        MPI_Message m;
        MPI_Status st;
        int rc = RM_MPI(rm, "MPI_Improbe",
                        MPI_Improbe(0, RM_TAG_CMD, rm->comm, &flag, &m, &st));
        if (rc != MPI_SUCCESS) {
            rm->served = true;
            rm_agent_unload_all(rm);
            return rm_mpi_err(err, rc, "MPI_Improbe");
        }
        if (flag) {
            uint64_t t0 = rig_now_ns();
            int count = 0;
            MPI_Get_count(&st, MPI_BYTE, &count);
            uint8_t *msg = malloc(count > 0 ? (size_t)count : 1);
            uint8_t dummy;
            rc = RM_MPI(rm, "MPI_Mrecv",
                        MPI_Mrecv(msg != NULL ? msg : &dummy,
                                  msg != NULL ? count : 0, MPI_BYTE, &m,
                                  MPI_STATUS_IGNORE));
            bool closed = false;
            bool ok;
            if (msg == NULL || rc != MPI_SUCCESS) {
                rig_job_fail(rm->job, "an agent could not take a command");
                ok = rm_failed(rm, err, "serving the controller");
            } else {
                ok = handle(rm, msg, (size_t)count, t0, &closed, err);
            }
            free(msg);
            if (!ok || closed) {
                rm->served = true;
                if (!ok) {
                    pending_abandon(rm);
                    rm_agent_unload_all(rm);
                    rm_agent_rails_free(rm);
                }
                return ok;
            }
            rm_backoff_reset(&b);
            continue;
        }
        pending_progress(rm);
        uint64_t now = rig_now_ns();
        if (now >= next_poll) {
            bool ended = false;
            running = poll_all(rm, &ended);
            next_poll = now + RM_POLL_NS;
            if (ended) {
                /* The controller's query and halt follow the word. */
                rm_backoff_reset(&b);
            }
        }
        rm_backoff_step(&b, running ? RM_PACE_RUN : RM_PACE_IDLE);
    }
}
