/* SPDX-License-Identifier: BSD-3-Clause */
/* Failure of the UCX transport: failing, watching peers, telling every
 * rank.
 *
 * Detection.  A peer on the same node (same boot id and PID namespace) is
 * watched through a pidfd in the progress thread's epoll: its death wakes
 * the thread at once, with no cost to the fast path and no CPU while idle.
 * Where pidfd_open is missing (Linux < 5.3) such a peer is polled with
 * kill(pid, 0) every keepalive period.  A peer on another node is watched
 * by UCX: endpoints use UCP_ERR_HANDLING_MODE_PEER, UCX keepalive runs
 * every RIG_KEEPALIVE_MS (default 500 ms; UCX's own default is 20 s) and
 * TCP keepalive is tightened to match (both through rig's own UCX
 * configuration, never the environment), and the progress thread wakes every
 * keepalive period while the job has such peers, since keepalive runs
 * inside ucp_worker_progress.  With the default a dead peer is seen well
 * within 2 s.
 *
 * Every way of seeing a rank gone enters through rig_failure_peer_gone
 * (../base/failure.h), which calls ucx_peer_gone below on the progress
 * thread: a pidfd, a kill(pid, 0) poll, and whatever source issue 14 adds
 * (a heartbeat).  An endpoint error is the one exception: it arrives
 * inside ucp_worker_progress and is handed over (rig_ucx_fail_later).
 *
 * Propagation.  The rank where a failure starts (a peer's death seen here,
 * a failed put, rig_job_fail, MPI_Finalize without rig_job_close) sends
 * the reason to every other rank in a UCX active message, which wakes the
 * receiver's progress thread (UCP_FEATURE_WAKEUP): every rank fails within
 * a message latency, whether or not it shares a rail with the origin.  A
 * rank that learns of a failure this way does not send it on.  Then every
 * rank raises the counts of its rail peers' ends of the rails it holds
 * (stores into mapped ends, a notice message on the rail otherwise), which is
 * faster than the message; a rank whose counts a peer raised before its
 * message came takes the failure in when asked (rig_ucx_failed), with a
 * stand-in reason until the message brings the real one.
 *
 * Closing.  Once closing began, a death (or a notice naming a rank that
 * left) still marks the rank gone and fails the job, so that the closing
 * barrier gives up on it; an endpoint error then only marks its rank gone
 * (a peer that finished closing drops its endpoints too, and the job's
 * closing barrier allows for that, see src/job/job.c). */
#include "ucx_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define RIG_AM_FAIL 0x7267 /* "rg": the failure message */
#define RIG_FAIL_MSG_MAX 512

bool rig_fail_config(ucp_config_t *cfg, uint64_t keepalive_ms, char **err)
{
    char v[32];
    snprintf(v, sizeof(v), "%llums", (unsigned long long)keepalive_ms);
    ucs_status_t st = ucp_config_modify(cfg, "KEEPALIVE_INTERVAL", v);
    if (st != UCS_OK) {
        return rig_err(err,
                       "system: ucp_config_modify(KEEPALIVE_INTERVAL=%s) "
                       "failed: %s",
                       v, rig_ucs_str(st));
    }
    /* TCP keepalive is a setting of the TCP interfaces, which UCX applies
     * to them as the worker opens them. */
    static const char *const tcp[] = {"tcp", NULL};
    static const char *const idle[] = {"UCX_TCP_KEEPIDLE", "UCX_KEEPIDLE",
                                       NULL};
    static const char *const intvl[] = {"UCX_TCP_KEEPINTVL", "UCX_KEEPINTVL",
                                        NULL};
    return rig_ucx_config_set(cfg, "KEEPIDLE", v, idle, tcp, err) &&
           rig_ucx_config_set(cfg, "KEEPINTVL", v, intvl, tcp, err);
}

/* ---- the failure message ------------------------------------------------- */

static ucs_status_t fail_am(void *arg, const void *header, size_t header_len,
                            void *data, size_t len,
                            const ucp_am_recv_param_t *param)
{
    (void)header;
    (void)header_len;
    rig_ucx *u = arg;
    /* Sent eager (UCP_AM_SEND_FLAG_EAGER): data is here for the call.
     * Taken while closing too: the rank it names as gone must not be
     * waited for by the closing barrier. */
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        return UCS_OK;
    }
    /* The rank that left the job (or -1) and how, then the reason. */
    int32_t head[2] = {-1, 0};
    if (len < sizeof(head)) {
        return UCS_OK;
    }
    memcpy(head, data, sizeof(head));
    /* -1 or out of range: none */
    int how = head[1];
    rig_failure_left(&u->fail, (int)head[0],
                     how == RIG_LEFT_FINALIZED || how == RIG_LEFT_CLOSING
                         ? how
                         : RIG_LEFT_DIED);
    char msg[RIG_FAIL_MSG_MAX];
    len -= sizeof(head);
    size_t n = len < sizeof(msg) - 1 ? len : sizeof(msg) - 1;
    memcpy(msg, (const char *)data + sizeof(head), n);
    msg[n] = '\0';
    /* Inside ucp_worker_progress, under the worker lock: the progress
     * thread fails the job. */
    char *why = strdup(msg);
    char *none = NULL;
    if (why == NULL ||
        !atomic_compare_exchange_strong(&u->pending_remote, &none, why)) {
        free(why);
    }
    rig_ucx_kick(u);
    return UCS_OK;
}

bool rig_fail_init(rig_ucx *u, char **err)
{
    return rig_ucx_am_handler(u, RIG_AM_FAIL, fail_am, err);
}

/* Sends why to every rank but this one and the dead, waiting (at most 1 s)
 * for the sends.  List and worker locks held. */
static void broadcast(rig_ucx *u, const char *why)
{
    char msg[2 * sizeof(int32_t) + RIG_FAIL_MSG_MAX];
    int gone = rig_failure_gone(&u->fail);
    int32_t head[2] = {(int32_t)gone, (int32_t)rig_failure_how(&u->fail, gone)};
    memcpy(msg, head, sizeof(head));
    size_t len = strlen(why) + 1;
    if (len > RIG_FAIL_MSG_MAX) {
        len = RIG_FAIL_MSG_MAX;
    }
    memcpy(msg + sizeof(head), why, len);
    len += sizeof(head);
    void **req = calloc((size_t)u->size, sizeof(*req));
    if (req == NULL) {
        return;
    }
    for (int r = 0; r < u->size; r++) {
        ucp_ep_h ep;
        if (r == u->rank || rig_failure_has_left(&u->fail, r) ||
            !rig_ucx_ep(u, r, &ep, NULL)) {
            continue;
        }
        ucp_request_param_t p = {
            .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
            .flags = UCP_AM_SEND_FLAG_EAGER,
        };
        ucs_status_ptr_t s =
            ucp_am_send_nbx(ep, RIG_AM_FAIL, NULL, 0, msg, len, &p);
        if (UCS_PTR_IS_PTR(s)) {
            req[r] = s;
        }
    }
    /* Bounded: a peer that cannot take the message (dead, unreachable)
     * must not hold this rank; 1 s is far above a message latency. */
    uint64_t until = rig_now_ns() + 1000000000ull;
    rig_backoff b = {0};
    for (;;) {
        ucp_worker_progress(u->worker);
        bool busy = false;
        for (int r = 0; r < u->size; r++) {
            if (req[r] != NULL) {
                if (ucp_request_check_status(req[r]) != UCS_INPROGRESS) {
                    ucp_request_free(req[r]);
                    req[r] = NULL;
                } else {
                    busy = true;
                }
            }
        }
        if (!busy) {
            break;
        }
        if (rig_now_ns() > until || atomic_load(&u->stop)) {
            for (int r = 0; r < u->size; r++) {
                if (req[r] != NULL) {
                    ucp_request_cancel(u->worker, req[r]);
                    ucp_request_free(req[r]);
                }
            }
            break;
        }
        rig_backoff_step(&b);
    }
    free(req);
}

/* ---- watching peers ------------------------------------------------------ */

static void fail_from(rig_ucx *u, const char *why, bool origin);

/* rig_failure_peer_gone's sink: the rank left the job (so the closing
 * barrier gives up on it, closing or not) and the job fails here, told
 * to every rank.  Any thread holding no lock of the transport. */
void rig_ucx_peer_gone(void *self, int r, const char *why)
{
    rig_ucx *u = self;
    if (!rig_failure_left(&u->fail, r, RIG_LEFT_DIED)) {
        return; /* seen already */
    }
    fail_from(u, why, true);
}

static void peer_died(rig_ucx *u, int r)
{
    rig_failure_peer_gone(&u->fail, r, "died");
}

void rig_ucx_left_closing(rig_ucx *u, int r)
{
    if (rig_failure_watched(&u->fail, r)) {
        /* On this node the watch on the process tells a death from a
         * close.  Over TCP (RIG_UCX_TLS=tcp,self) a killed peer's socket
         * resets as its process exits, before its pidfd is readable:
         * taken for a close, rig_job_close said every rank reached it
         * while rank 1 died in rank 0's closing barrier (test_neverhang
         * --close-death-rails, 4 runs of 4). */
        return;
    }
    /* A peer that finished its close drops its endpoints and closes its
     * links: it only leaves, the job does not fail for it. */
    rig_failure_left(&u->fail, r, RIG_LEFT_CLOSING);
}

void rig_ucx_link_lost(void *self, int r, const char *how, bool closed)
{
    rig_ucx *u = self;
    if (closed && atomic_load(&u->closing)) {
        rig_ucx_left_closing(u, r); /* as an endpoint error (transport.c) */
        return;
    }
    if (closed) {
        /* Its process ended: what it told before it did is the earlier
         * cause, and its message came over the worker's own connection
         * before the link's close (the progress thread does the same
         * before a pidfd's sighting).  Measured: across hosts, a survivor
         * the load kept from its worker blamed the other survivor's exit,
         * though that one had told it rank 2 died (kill_h3, 1 run in 15
         * at load 7). */
        rig_ucx_take_told(u);
    }
    rig_failure_peer_gone(&u->fail, r, how);
}

bool rig_fail_watch(rig_ucx *u, const rig_transport_wiring *w, char **err)
{
    rig_failure_know(&u->fail, w);
    for (int r = 0; r < u->size; r++) {
        if (r == u->rank) {
            continue;
        }
        if (!w->local[r]) {
            u->wake_ms = (int)u->keepalive_ms; /* keepalive runs then */
            continue;
        }
        if (!rig_failure_watch(&u->fail, r, err)) {
            return false;
        }
        int fd = rig_failure_fd(&u->fail, r);
        if (fd < 0) {
            u->wake_ms = (int)u->keepalive_ms; /* polled with kill */
            continue;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        if (epoll_ctl(u->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            int e = errno;
            rig_failure_unwatch(&u->fail, r);
            return rig_err(err, "system: epoll_ctl of rank %d's pidfd: %s", r,
                           strerror(e));
        }
    }
    /* Endpoints to every peer now: UCX polls (and keeps alive) only the
     * interfaces its endpoints use, and the failure message must reach a
     * rank that has no rail with its sender. */
    rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
    bool ok = true;
    for (int r = 0; r < u->size && ok; r++) {
        ucp_ep_h ep;
        ok = r == u->rank || rig_ucx_ep(u, r, &ep, err);
    }
    rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
    return ok;
}

bool rig_fail_event(rig_ucx *u, int fd)
{
    for (int r = 0; r < u->size; r++) {
        if (rig_failure_fd(&u->fail, r) == fd) {
            epoll_ctl(u->epfd, EPOLL_CTL_DEL, fd, NULL);
            peer_died(u, r);
            return true;
        }
    }
    return false;
}

void rig_fail_poll(rig_ucx *u)
{
    if (!u->fail.polled) {
        return;
    }
    for (int r = 0; r < u->size; r++) {
        if (r != u->rank && rig_failure_fd(&u->fail, r) < 0 &&
            rig_failure_ended(&u->fail, r)) {
            peer_died(u, r);
        }
    }
}

/* ---- failing ------------------------------------------------------------- */

int rig_ucx_gone(rig_transport *t, bool *died)
{
    rig_ucx *u = rig_ucx_of(t);
    int gone = rig_failure_look(&u->fail);
    if (died != NULL) {
        *died = rig_failure_died(&u->fail);
    }
    return gone;
}

/* Fails the job here: the failure state first, then every held end's
 * counts, all under the list lock, so that a thread that finds the state
 * set and takes the list lock finds every count raised.  origin: the
 * failure starts here (not told by a peer), so every rank is told of it.
 * A stand-in (why NULL: a peer raised a count of ours before its message
 * came) never makes this rank the origin. */
static void fail_from(rig_ucx *u, const char *why, bool origin)
{
    rig_lock(&u->list_lock, UCX_LOCK_LIST);
    bool first = !rig_failure_failed(&u->fail);
    /* The first reason (a stand-in is none) says who tells every rank. */
    bool reason = why != NULL && rig_failure_set(&u->fail, why);
    if (reason) {
        u->fail_origin = origin;
        atomic_store(&u->told, !origin);
        rig_log(RIG_LOG_WARN, "rank %d: the job failed: %s", u->rank,
                rig_failure_reason(&u->fail));
    }
    for (rig_uend *e = u->ends; e != NULL; e = e->next) {
        if (e->held) {
            rig_end_fail(e->end);
        }
    }
    rig_unlock(&u->list_lock, UCX_LOCK_LIST);
    if (first || reason) {
        atomic_store(&u->tell_peers, true);
        rig_ucx_kick(u);
    }
}

/* A held end with a count at RIG_COUNT_FAILED while the job has not
 * failed here: a peer failed the rail before its message came.  List lock
 * held. */
static rig_uend *raised_by_peer(rig_ucx *u)
{
    for (rig_uend *e = u->ends; e != NULL; e = e->next) {
        if (e->held && rig_end_failed(e->end)) {
            return e;
        }
    }
    return NULL;
}

void rig_ucx_fail(rig_transport *t, const char *why)
{
    fail_from(rig_ucx_of(t), why, true);
}

const char *rig_ucx_failed(rig_transport *t, bool *known)
{
    rig_ucx *u = rig_ucx_of(t);
    /* Whoever sets the state raises every held end's counts in the same
     * hold of the list lock: once this thread holds it, either the job
     * has not failed here or every count is raised. */
    rig_lock(&u->list_lock, UCX_LOCK_LIST);
    rig_uend *e = NULL;
    if (!rig_failure_failed(&u->fail) && (e = raised_by_peer(u)) != NULL) {
        char seen[160];
        snprintf(seen, sizeof(seen),
                 "failed: rank %d's end of rail %lld was failed by rank %d "
                 "(the reason is on its way)",
                 u->rank, (long long)e->id, e->peer);
        rig_failure_seen(&u->fail, seen);
        for (rig_uend *x = u->ends; x != NULL; x = x->next) {
            if (x->held) {
                rig_end_fail(x->end);
            }
        }
    }
    rig_unlock(&u->list_lock, UCX_LOCK_LIST);
    if (e != NULL) {
        /* The peers of this rank's other rails, at once. */
        atomic_store(&u->tell_peers, true);
        rig_ucx_kick(u);
    }
    if (known != NULL) {
        *known = rig_failure_known(&u->fail);
    }
    return rig_failure_reason(&u->fail);
}

void rig_ucx_flush_fail(rig_ucx *u)
{
    uint64_t until = rig_now_ns() + 1000000000ull;
    rig_backoff b = {0};
    while (!atomic_load(&u->told) && rig_now_ns() < until) {
        rig_backoff_step(&b);
    }
}

void rig_ucx_finalize(rig_transport *t, const char *why)
{
    rig_ucx *u = rig_ucx_of(t);
    rig_failure_left(&u->fail, u->rank, RIG_LEFT_FINALIZED);
    rig_ucx_fail(t, why);
    rig_ucx_flush_fail(u);
}

/* A stand-in reason is replaced once the reason comes: the message of the
 * rank where the failure started, which wakes this rank's progress
 * thread. */

/* Endpoint errors and failed sends arrive inside ucp_worker_progress, under
 * the worker lock and possibly on a thread in a wake: the failure is
 * handed to the progress thread (failing takes the list lock, which comes
 * first). */
static void fail_later(rig_ucx *u, char *why)
{
    char *none = NULL;
    if (why == NULL ||
        !atomic_compare_exchange_strong(&u->pending_why, &none, why)) {
        free(why);
    }
    rig_ucx_kick(u);
}

void rig_ucx_fail_later(rig_ucx *u, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *why = NULL;
    if (vasprintf(&why, fmt, ap) < 0) {
        why = NULL;
    }
    va_end(ap);
    fail_later(u, why != NULL ? why : strdup("failed: a put failed"));
}

/* Tells every rank when the failure started here -- the message first,
 * so that it is on its way before any count it explains moves -- then
 * the peers of every held end (a released end's peer is told by its own
 * rank, and its memory may be about to go: see end.c).  Closing or not:
 * a rank in its closing barrier learns from it which rank left. */
static void tell_peers(rig_ucx *u)
{
    rig_lock(&u->list_lock, UCX_LOCK_LIST);
    rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
    /* The reason and fail_origin are set once, before tell_peers. */
    if (u->fail_origin) {
        broadcast(u, rig_failure_reason(&u->fail));
    }
    for (rig_uend *e = u->ends; e != NULL; e = e->next) {
        if (e->held && e->in_job && e->rkey != NULL) {
            rig_uend_fail_peer(e);
        }
    }
    rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
    rig_unlock(&u->list_lock, UCX_LOCK_LIST);
    atomic_store(&u->told, true);
}

bool rig_fail_progress(rig_ucx *u)
{
    /* A peer's message first: when both came in one progress call, the
     * peer told why before its endpoint failed here (its message rode the
     * same connection, ahead of the close).  Measured: across 3 hosts, a
     * survivor that was slow to see rank 2's death took the other
     * survivor's exit (its endpoint's failure, "Endpoint timeout") for
     * the cause, though that one's message "rank 2 closed its link" came
     * in the same call (kill_h3, once in a CI run). */
    char *why = atomic_exchange(&u->pending_remote, NULL);
    if (why != NULL) {
        fail_from(u, why, false);
        free(why);
    }
    why = atomic_exchange(&u->pending_why, NULL);
    if (why != NULL) {
        fail_from(u, why, true);
        free(why);
    }
    if (atomic_exchange(&u->tell_peers, false)) {
        tell_peers(u);
        return true;
    }
    return false;
}
