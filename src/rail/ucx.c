/* SPDX-License-Identifier: BSD-3-Clause */
/* The UCX transport of a job: context, worker, endpoints, progress thread,
 * failure and closing.
 *
 * One context and one worker per job, in UCS_THREAD_MODE_SERIALIZED: rig's
 * worker lock serialises every UCX call, which the mapped fast path never
 * makes.  Endpoints use UCP_ERR_HANDLING_MODE_PEER so a dead peer is
 * reported; UCX 1.13 then drops its shared-memory lanes unless
 * SYSV_ERROR_HANDLING and POSIX_ERROR_HANDLING are set, which rig sets in
 * the environment before ucp_init unless the user set them (setenv: job
 * open is collective and runs before the job's threads exist).
 *
 * The progress thread sleeps in epoll on the worker's event fd and an
 * eventfd whenever no put is outstanding (ucp_worker_arm): an idle job uses
 * no CPU.  While puts are outstanding it progresses the worker with backoff
 * (spin, yield, sleep); it also serves transports whose target must
 * progress (TCP), tells peers of a failure and re-raises failed counts. */
#include "ucx_internal.h"
#include "util_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

const char *rig_ucs_str(ucs_status_t st)
{
    return ucs_status_string(st);
}

/* ---- settings ------------------------------------------------------------ */

static bool parse_switch(const char *name, rig_switch *v, char **err)
{
    const char *s = getenv(name);
    if (s == NULL || s[0] == '\0') {
        return true;
    }
    if (strcmp(s, "auto") == 0) {
        *v = RIG_AUTO;
    } else if (strcmp(s, "on") == 0 || strcmp(s, "y") == 0 ||
               strcmp(s, "yes") == 0 || strcmp(s, "1") == 0) {
        *v = RIG_ON;
    } else if (strcmp(s, "off") == 0 || strcmp(s, "n") == 0 ||
               strcmp(s, "no") == 0 || strcmp(s, "0") == 0) {
        *v = RIG_OFF;
    } else {
        return rig_err(err, "invalid: %s=%s is not auto, on or off", name, s);
    }
    return true;
}

static bool switch_ok(rig_switch v)
{
    return v == RIG_AUTO || v == RIG_OFF || v == RIG_ON;
}

bool rig_rail_settings_resolve(const rig_job_options *opt,
                               rig_rail_settings *out, char **err)
{
    rig_job_options o;
    if (opt != NULL) {
        o = *opt;
    } else {
        rig_job_options_init(&o);
    }
    if (!switch_ok(o.numa) || !switch_ok(o.cuda) || !switch_ok(o.shm_stores)) {
        return rig_err(err,
                       "invalid: rig_job_options.%s is not a switch "
                       "(RIG_AUTO, RIG_OFF or RIG_ON)",
                       !switch_ok(o.numa)   ? "numa"
                       : !switch_ok(o.cuda) ? "cuda"
                                            : "shm_stores");
    }
    const char *t =
        rig_env_str("RIG_TRANSPORT", o.transport != NULL ? o.transport : "ucx");
    if (strcmp(t, "ucx") != 0 && strcmp(t, "mpi") != 0) {
        const char *env = getenv("RIG_TRANSPORT");
        return rig_err(
            err, "invalid: %s \"%s\" is not \"ucx\" or \"mpi\"",
            env != NULL && env[0] != '\0' ? "RIG_TRANSPORT" : "transport", t);
    }
    out->mpi = strcmp(t, "mpi") == 0;
    if (!parse_switch("RIG_NUMA", &o.numa, err) ||
        !parse_switch("RIG_CUDA", &o.cuda, err) ||
        !parse_switch("RIG_SHM_STORES", &o.shm_stores, err)) {
        return false;
    }
    if (!rig_env_u64("RIG_KEEPALIVE_MS", 500, &out->keepalive_ms, err)) {
        return false;
    }
    if (out->keepalive_ms == 0 || out->keepalive_ms > 3600000) {
        return rig_err(err,
                       "invalid: RIG_KEEPALIVE_MS=%llu is not in [1, "
                       "3600000]",
                       (unsigned long long)out->keepalive_ms);
    }
    out->numa = o.numa;
    out->cuda = o.cuda;
    out->shm_stores = o.shm_stores;
    return true;
}

/* ---- context and worker -------------------------------------------------- */

static bool context_make(int size, uint64_t keepalive_ms, ucp_context_h *out,
                         char **err)
{
    /* Keep shared-memory lanes under peer-failure handling (see above).
     * These are memory-domain settings, which ucp_config_modify cannot set
     * in UCX 1.13 ("invalid configuration" and TCP-emulated puts at 57 us
     * instead of 0.13 us), so they go through the environment, which UCX
     * reads in ucp_init; a user's own value wins.  Not when UCX_TLS
     * leaves shared memory out: UCX would warn of unused variables. */
    const char *tls = getenv("UCX_TLS");
    if (tls == NULL || tls[0] == '^' || strstr(tls, "all") != NULL ||
        strstr(tls, "sm") != NULL || strstr(tls, "sysv") != NULL ||
        strstr(tls, "posix") != NULL) {
        setenv("UCX_SYSV_ERROR_HANDLING", "y", 0);
        setenv("UCX_POSIX_ERROR_HANDLING", "y", 0);
    }
    ucp_config_t *cfg = NULL;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK) {
        return rig_err(err, "system: ucp_config_read failed: %s",
                       rig_ucs_str(st));
    }
    if (!rig_fail_config(cfg, keepalive_ms, err)) {
        ucp_config_release(cfg);
        return false;
    }
    ucp_params_t p = {
        .field_mask = UCP_PARAM_FIELD_FEATURES |
                      UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                      UCP_PARAM_FIELD_ESTIMATED_NUM_EPS,
        /* AM: the failure message (failure.c). */
        .features = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP | UCP_FEATURE_AM,
        .mt_workers_shared = 1,
        .estimated_num_eps = size > 0 ? (size_t)size : 1,
    };
    st = ucp_init(&p, cfg, out);
    ucp_config_release(cfg);
    if (st != UCS_OK) {
        return rig_err(err, "system: ucp_init failed: %s", rig_ucs_str(st));
    }
    return true;
}

static bool worker_make(ucp_context_h ctx, ucp_worker_h *out, char **err)
{
    ucp_worker_params_t wp = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SERIALIZED,
    };
    ucs_status_t st = ucp_worker_create(ctx, &wp, out);
    if (st != UCS_OK) {
        return rig_err(err, "system: ucp_worker_create failed: %s",
                       rig_ucs_str(st));
    }
    return true;
}

/* The NUMA nodes of the process's cores; when it is bound to cores of more
 * than one node (or not bound), the node of the core it runs on now, so
 * that ends follow the rank as first touch would. */
static hwloc_nodeset_t numa_nodeset(hwloc_topology_t topo, char **err)
{
    hwloc_cpuset_t cpus = hwloc_bitmap_alloc();
    hwloc_nodeset_t nodes = hwloc_bitmap_alloc();
    if (cpus == NULL || nodes == NULL) {
        hwloc_bitmap_free(cpus);
        hwloc_bitmap_free(nodes);
        rig_err(err, "nomem: hwloc_bitmap_alloc failed");
        return NULL;
    }
    if (hwloc_get_cpubind(topo, cpus, HWLOC_CPUBIND_PROCESS) != 0 ||
        hwloc_bitmap_iszero(cpus)) {
        hwloc_bitmap_copy(cpus, hwloc_topology_get_allowed_cpuset(topo));
    }
    hwloc_cpuset_to_nodeset(topo, cpus, nodes);
    if (hwloc_bitmap_weight(nodes) > 1 &&
        hwloc_get_last_cpu_location(topo, cpus, HWLOC_CPUBIND_THREAD) == 0) {
        hwloc_cpuset_to_nodeset(topo, cpus, nodes);
    }
    hwloc_bitmap_free(cpus);
    return nodes;
}

static bool topology_load(hwloc_topology_t *out, char **err)
{
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0) {
        return rig_err(err, "system: hwloc_topology_init failed: %s",
                       strerror(errno));
    }
    if (hwloc_topology_load(t) != 0) {
        int e = errno;
        hwloc_topology_destroy(t);
        return rig_err(err, "system: hwloc_topology_load failed: %s",
                       strerror(e));
    }
    *out = t;
    return true;
}

/* ---- the progress thread ------------------------------------------------- */

void rig_ucx_kick(rig_ucx *u)
{
    uint64_t one = 1;
    ssize_t n = write(u->eventfd, &one, sizeof(one));
    (void)n; /* a full counter already wakes the thread */
}

/* Tells the peers of every end that the job failed, then re-raises the
 * local ends: a put that was in flight when they failed may have lowered a
 * count at this end. */
static void tell_peers(rig_ucx *u)
{
    pthread_mutex_lock(&u->list_lock);
    pthread_mutex_lock(&u->worker_lock);
    for (rig_uend *e = u->ends; e != NULL; e = e->next) {
        if (e->in_job && e->rkey != NULL) {
            rig_uend_tell_failed(e);
        }
    }
    /* fail_why and fail_origin are set once, before tell_peers. */
    if (u->fail_origin && !atomic_load(&u->closing)) {
        rig_fail_broadcast(u, u->fail_why != NULL ? u->fail_why
                                                  : "failed: the job failed");
    }
    pthread_mutex_unlock(&u->worker_lock);
    pthread_mutex_unlock(&u->list_lock);
    atomic_store(&u->told, true);
}

static void refail(rig_ucx *u)
{
    pthread_mutex_lock(&u->list_lock);
    for (rig_uend *e = u->ends; e != NULL; e = e->next) {
        if (e->held) {
            rig_end_fail(e->end);
        }
    }
    pthread_mutex_unlock(&u->list_lock);
}

static void fail_from(rig_ucx *u, const char *why, bool origin);

static void *progress_main(void *arg)
{
    rig_ucx *u = arg;
    rig_backoff b = {0};
    int refails = 0;
    struct epoll_event ev[4];
    while (!atomic_load(&u->stop)) {
        char *why = atomic_exchange(&u->pending_why, NULL);
        if (why != NULL) {
            rig_ucx_fail(u, why);
            free(why);
        }
        why = atomic_exchange(&u->pending_remote, NULL);
        if (why != NULL) {
            fail_from(u, why, false);
            free(why);
        }
        if (atomic_exchange(&u->tell_peers, false)) {
            tell_peers(u);
            refails = 3;
        }
        pthread_mutex_lock(&u->worker_lock);
        while (ucp_worker_progress(u->worker) != 0) {
        }
        long busy = atomic_load(&u->outstanding);
        ucs_status_t st = UCS_OK;
        if (busy == 0) {
            st = ucp_worker_arm(u->worker);
        }
        pthread_mutex_unlock(&u->worker_lock);
        if (busy != 0) {
            rig_backoff_step(&b);
            continue;
        }
        b.spins = 0;
        if (st == UCS_ERR_BUSY) {
            continue;
        }
        /* Failed counts are re-raised after 1, 10 and 100 ms. */
        int timeout = refails > 0 ? (refails == 3   ? 1
                                     : refails == 2 ? 10
                                                    : 100)
                                  : u->wake_ms;
        int n = epoll_wait(u->epfd, ev, 4, timeout);
        if (n == 0 && refails > 0) {
            refail(u);
            refails--;
        }
        if (n == 0) {
            rig_fail_poll(u); /* and keepalive runs in the next progress */
        }
        for (int i = 0; i < n; i++) {
            if (ev[i].data.fd == u->eventfd) {
                uint64_t v;
                ssize_t r = read(u->eventfd, &v, sizeof(v));
                (void)r;
            } else if (ev[i].data.fd != u->efd) {
                rig_fail_event(u, ev[i].data.fd);
            }
        }
    }
    return NULL;
}

static bool progress_start(rig_ucx *u, char **err)
{
    ucs_status_t st = ucp_worker_get_efd(u->worker, &u->efd);
    if (st != UCS_OK) {
        return rig_err(err, "system: ucp_worker_get_efd failed: %s",
                       rig_ucs_str(st));
    }
    u->eventfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (u->eventfd < 0) {
        return rig_err(err, "system: eventfd failed: %s", strerror(errno));
    }
    u->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (u->epfd < 0) {
        return rig_err(err, "system: epoll_create1 failed: %s",
                       strerror(errno));
    }
    int fds[2] = {u->efd, u->eventfd};
    for (int i = 0; i < 2; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        if (epoll_ctl(u->epfd, EPOLL_CTL_ADD, fds[i], &ev) != 0) {
            return rig_err(err, "system: epoll_ctl failed: %s",
                           strerror(errno));
        }
    }
    int e = pthread_create(&u->thread, NULL, progress_main, u);
    if (e != 0) {
        return rig_err(err, "system: pthread_create failed: %s", strerror(e));
    }
    u->thread_started = true;
    return true;
}

static void progress_stop(rig_ucx *u)
{
    if (u->thread_started) {
        atomic_store(&u->stop, true);
        rig_ucx_kick(u);
        pthread_join(u->thread, NULL);
        u->thread_started = false;
    }
}

/* ---- open, peers, endpoints ---------------------------------------------- */

static void ucx_free(rig_ucx *u)
{
    if (u->peer_addr != NULL) {
        for (int r = 0; r < u->size; r++) {
            free(u->peer_addr[r]);
        }
    }
    free(u->peer_addr);
    free(u->peer_addr_len);
    free(u->ep);
    if (u->epfd > 0) {
        close(u->epfd);
    }
    if (u->eventfd > 0) {
        close(u->eventfd);
    }
    if (u->address != NULL) {
        ucp_worker_release_address(u->worker, u->address);
    }
    if (u->worker != NULL) {
        ucp_worker_destroy(u->worker);
    }
    if (u->context != NULL) {
        ucp_cleanup(u->context);
    }
    rig_cuda_unload(u->cuda);
    if (u->nodeset != NULL) {
        hwloc_bitmap_free(u->nodeset);
    }
    if (u->topo != NULL) {
        hwloc_topology_destroy(u->topo);
    }
    free(atomic_load(&u->pending_why));
    free(atomic_load(&u->pending_remote));
    rig_fail_unwatch(u);
    free(u->fail_why);
    pthread_mutex_destroy(&u->worker_lock);
    pthread_mutex_destroy(&u->list_lock);
    free(u);
}

bool rig_ucx_open(const rig_rail_settings *s, int rank, int size, rig_ucx **out,
                  char **err)
{
    rig_ucx *u = calloc(1, sizeof(*u));
    if (u == NULL) {
        return rig_err(err, "nomem: calloc(%zu) failed", sizeof(*u));
    }
    u->set = *s;
    u->rank = rank;
    u->size = size;
    u->refs = 1;
    u->epfd = -1;
    u->eventfd = -1;
    u->keepalive_ms = s->keepalive_ms;
    u->wake_ms = -1;
    atomic_init(&u->told, true);
    atomic_init(&u->gone, -1);
    pthread_mutex_init(&u->worker_lock, NULL);
    pthread_mutex_init(&u->list_lock, NULL);
    u->peer_addr = calloc((size_t)size, sizeof(*u->peer_addr));
    u->peer_addr_len = calloc((size_t)size, sizeof(*u->peer_addr_len));
    u->ep = calloc((size_t)size, sizeof(*u->ep));
    if (u->peer_addr == NULL || u->peer_addr_len == NULL || u->ep == NULL) {
        rig_err(err, "nomem: peer tables for %d ranks", size);
        goto err_free;
    }
    if (!context_make(size, s->keepalive_ms, &u->context, err) ||
        !worker_make(u->context, &u->worker, err) || !rig_fail_init(u, err)) {
        goto err_free;
    }
    ucs_status_t st = ucp_worker_get_address(
        u->worker, (ucp_address_t **)&u->address, &u->address_len);
    if (st != UCS_OK) {
        u->address = NULL;
        rig_err(err, "system: ucp_worker_get_address failed: %s",
                rig_ucs_str(st));
        goto err_free;
    }
    if (!topology_load(&u->topo, err)) {
        goto err_free;
    }
    if (s->numa != RIG_OFF) {
        u->nodeset = numa_nodeset(u->topo, err);
        if (u->nodeset == NULL) {
            goto err_free;
        }
    }
    if (s->cuda != RIG_OFF) {
        u->cuda = rig_cuda_load();
        if (u->cuda == NULL && s->cuda == RIG_ON) {
            rig_err(err, "unsupported: RIG_CUDA=on but there is no CUDA "
                         "driver or GPU");
            goto err_free;
        }
    }
    if (!progress_start(u, err)) {
        goto err_stop;
    }
    *out = u;
    return true;

err_stop:
    progress_stop(u);
err_free:
    ucx_free(u);
    return false;
}

void rig_ucx_address(const rig_ucx *u, const void **addr, size_t *len)
{
    *addr = u->address;
    *len = u->address_len;
}

bool rig_ucx_set_peers(rig_ucx *u, const uint8_t *addrs, const size_t *offs,
                       const size_t *lens, char **err)
{
    for (int r = 0; r < u->size; r++) {
        u->peer_addr[r] = malloc(lens[r] > 0 ? lens[r] : 1);
        if (u->peer_addr[r] == NULL) {
            return rig_err(err, "nomem: worker address of rank %d", r);
        }
        memcpy(u->peer_addr[r], addrs + offs[r], lens[r]);
        u->peer_addr_len[r] = lens[r];
    }
    return true;
}

/* Endpoint errors arrive inside ucp_worker_progress, under the worker lock
 * and possibly on a thread in a wake: the failure is handed to the progress
 * thread (rig_ucx_fail takes the list lock, which comes first). */
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

static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    rig_ucx *u = arg;
    if (atomic_load(&u->closing)) {
        return;
    }
    int peer = -1;
    for (int r = 0; r < u->size; r++) {
        if (u->ep[r] == ep) {
            peer = r;
        }
    }
    if (peer >= 0) {
        rig_ucx_left(u, peer); /* most likely dead: no collective waits */
    }
    rig_ucx_fail_later(u, "failed: the endpoint to rank %d failed: %s", peer,
                       rig_ucs_str(status));
}

bool rig_ucx_ep(rig_ucx *u, int peer, ucp_ep_h *out, char **err)
{
    if (u->ep[peer] != NULL) {
        *out = u->ep[peer];
        return true;
    }
    if (u->peer_addr[peer] == NULL) {
        return rig_err(err, "invalid: no worker address for rank %d", peer);
    }
    ucp_ep_params_t p = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .address = (const ucp_address_t *)u->peer_addr[peer],
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = ep_error, .arg = u},
    };
    ucs_status_t st = ucp_ep_create(u->worker, &p, &u->ep[peer]);
    if (st != UCS_OK) {
        u->ep[peer] = NULL;
        return rig_err(err, "system: ucp_ep_create to rank %d failed: %s", peer,
                       rig_ucs_str(st));
    }
    *out = u->ep[peer];
    /* Wire-up may need the progress thread: it was asleep. */
    rig_ucx_kick(u);
    return true;
}

/* ---- failure ------------------------------------------------------------- */

/* origin: the failure starts here (not told by a peer), so every rank is
 * told of it. */
static void fail_from(rig_ucx *u, const char *why, bool origin)
{
    pthread_mutex_lock(&u->list_lock);
    if (!atomic_load(&u->failed)) {
        u->fail_why = strdup(why != NULL ? why : "failed: rig_job_fail");
        u->fail_origin = origin;
        atomic_store(&u->told, false);
        atomic_store(&u->failed, true);
        rig_log(RIG_LOG_WARN, "rank %d: the job failed: %s", u->rank,
                u->fail_why != NULL ? u->fail_why : "(nomem)");
    }
    for (rig_uend *e = u->ends; e != NULL; e = e->next) {
        if (e->held) {
            rig_end_fail(e->end);
        }
    }
    pthread_mutex_unlock(&u->list_lock);
    atomic_store(&u->tell_peers, true);
    rig_ucx_kick(u);
}

void rig_ucx_fail(rig_ucx *u, const char *why)
{
    fail_from(u, why, true);
}

void rig_ucx_flush_fail(rig_ucx *u)
{
    uint64_t until = rig_now_ns() + 1000000000ull;
    rig_backoff b = {0};
    while (!atomic_load(&u->told) && rig_now_ns() < until) {
        rig_backoff_step(&b);
    }
}

const char *rig_ucx_failed(const rig_ucx *u)
{
    if (!atomic_load(&((rig_ucx *)u)->failed)) {
        return NULL;
    }
    return u->fail_why != NULL ? u->fail_why : "failed: the job failed";
}

/* ---- the list of ends and closing ---------------------------------------- */

rig_uend *rig_ucx_find(rig_ucx *u, const rig_rail *r)
{
    rig_uend *found = NULL;
    pthread_mutex_lock(&u->list_lock);
    for (rig_uend *e = u->ends; e != NULL; e = e->next) {
        if (e->held && e->rail == r) {
            found = e;
            break;
        }
    }
    pthread_mutex_unlock(&u->list_lock);
    return found;
}

void rig_ucx_unref(rig_ucx *u)
{
    pthread_mutex_lock(&u->list_lock);
    long left = --u->refs;
    pthread_mutex_unlock(&u->list_lock);
    if (left == 0) {
        ucx_free(u);
    }
}

void rig_ucx_stop(rig_ucx *u)
{
    /* A failure of this rank is told to every rank before closing. */
    rig_ucx_flush_fail(u);
    atomic_store(&u->closing, true);
    pthread_mutex_lock(&u->list_lock);
    for (rig_uend *e = u->ends; e != NULL; e = e->next) {
        if (e->held) {
            /* The release hook waits for the list lock, so e->end lives;
             * after this no wake runs or will run. */
            rig_end_stop(e->end);
        }
    }
    pthread_mutex_unlock(&u->list_lock);
}

void rig_ucx_close(rig_ucx *u, void (*detach)(void *arg, void *base), void *arg)
{
    progress_stop(u);
    pthread_mutex_lock(&u->list_lock);
    pthread_mutex_lock(&u->worker_lock);
    /* Endpoints first, which purges puts still in flight (their callbacks
     * find their ends alive), then the rkeys they used.  Forced closes:
     * peers close theirs at the same time and a flush would wait for them. */
    for (int r = 0; r < u->size; r++) {
        if (u->ep[r] == NULL) {
            continue;
        }
        ucp_request_param_t p = {
            .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
            .flags = UCP_EP_CLOSE_FLAG_FORCE,
        };
        ucs_status_ptr_t req = ucp_ep_close_nbx(u->ep[r], &p);
        if (UCS_PTR_IS_PTR(req)) {
            rig_backoff b = {0};
            while (ucp_request_check_status(req) == UCS_INPROGRESS) {
                ucp_worker_progress(u->worker);
                rig_backoff_step(&b);
            }
            ucp_request_free(req);
        }
        u->ep[r] = NULL;
    }
    rig_uend *dead = NULL;
    for (rig_uend *e = u->ends, *next; e != NULL; e = next) {
        next = e->next;
        if (e->attached && detach != NULL) {
            detach(arg, e->mem.base);
        }
        e->attached = false;
        if (e->rkey != NULL) {
            ucp_rkey_destroy(e->rkey);
            e->rkey = NULL;
        }
        e->ep = NULL;
        e->in_job = false;
        if (!e->held) {
            /* Unlink; freed below, outside the locks. */
            if (e->prev != NULL) {
                e->prev->next = e->next;
            } else {
                u->ends = e->next;
            }
            if (e->next != NULL) {
                e->next->prev = e->prev;
            }
            e->next = dead;
            dead = e;
        }
    }
    ucp_worker_release_address(u->worker, u->address);
    u->address = NULL;
    ucp_worker_destroy(u->worker);
    u->worker = NULL;
    pthread_mutex_unlock(&u->worker_lock);
    pthread_mutex_unlock(&u->list_lock);
    for (rig_uend *e = dead, *next; e != NULL; e = next) {
        next = e->next;
        rig_uend_free(e);
    }
    rig_ucx_unref(u);
}

/* ---- rig_info ------------------------------------------------------------ */

bool rig_ucx_info(FILE *out, char **err)
{
    unsigned major, minor, release;
    ucp_get_version(&major, &minor, &release);
    fprintf(out, "  UCX:             %u.%u.%u (%s)\n", major, minor, release,
            ucp_get_version_string());
    const char *tls = getenv("UCX_TLS");
    fprintf(out, "  UCX_TLS:         %s\n", tls != NULL ? tls : "(all)");
    ucp_context_h ctx;
    rig_rail_settings set;
    if (!rig_rail_settings_resolve(NULL, &set, err) ||
        !context_make(1, set.keepalive_ms, &ctx, err)) {
        return false;
    }
    /* The transport resources of a job's context, as "tl/device" words
     * picked from UCX's own listing. */
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem == NULL) {
        ucp_cleanup(ctx);
        return rig_err(err, "system: open_memstream failed: %s",
                       strerror(errno));
    }
    ucp_context_print_info(ctx, mem);
    fclose(mem);
    ucp_cleanup(ctx);
    fprintf(out, "  UCX transports: ");
    bool shm = false;
    for (char *line = strtok(text, "\n"); line != NULL;
         line = strtok(NULL, "\n")) {
        const char *tl = strstr(line, "flags -- ");
        if (strstr(line, "resource") != NULL && tl != NULL) {
            tl += strlen("flags -- ");
            fprintf(out, "%s ", tl);
            shm = shm || strncmp(tl, "sysv/", 5) == 0 ||
                  strncmp(tl, "posix/", 6) == 0;
        }
    }
    free(text);
    fprintf(out, "\n  same-node rails: %s\n",
            shm ? "plain stores into mapped ends (sysv/posix)"
                : "UCX puts (no shared-memory transport)");

    hwloc_topology_t topo;
    if (!topology_load(&topo, err)) {
        return false;
    }
    hwloc_nodeset_t nodes = numa_nodeset(topo, err);
    if (nodes == NULL) {
        hwloc_topology_destroy(topo);
        return false;
    }
    char *s = NULL;
    hwloc_bitmap_list_asprintf(&s, nodes);
    fprintf(out, "  NUMA node(s) of ends: %s (of %d; this process's cores)\n",
            s != NULL ? s : "?",
            hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE));
    free(s);
    hwloc_bitmap_free(nodes);
    hwloc_topology_destroy(topo);

    char cuda[128];
    rig_cuda_describe(cuda, sizeof(cuda));
    fprintf(out, "  CUDA registration: %s\n", cuda);
    return true;
}
