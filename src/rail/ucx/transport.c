/* SPDX-License-Identifier: BSD-3-Clause */
/* The UCX transport of a job: context, worker, endpoints, opening,
 * wiring, stopping, closing, rig_info and the ops table.
 *
 * One context and one worker per job, in UCS_THREAD_MODE_SERIALIZED: rig's
 * worker lock serialises every UCX call, which the mapped fast path never
 * makes.  Endpoints use UCP_ERR_HANDLING_MODE_PEER so a dead peer is
 * reported; UCX 1.13 then drops its shared-memory lanes (sysv, posix)
 * unless their interfaces are told to expose error handling
 * (MM_ERROR_HANDLING), and puts to a same-node peer fall back to TCP at
 * 25 us instead of 0.4 us.  rig sets that, and the keepalive periods, on
 * its own context with ucp_config_modify, which UCX applies to the
 * interfaces as the worker opens them: the application's environment and
 * every other UCX context stay as they were.  A user's own UCX_* variable
 * for the same setting wins.  No remote atomics: across nodes a run is an
 * active message, or a frame on rig's own TCP lane (lane.c), whose
 * receiver raises its own `arrived` (carrier.c). */
#include "ucx_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *rig_ucs_str(ucs_status_t st)
{
    return ucs_status_string(st);
}

/* ---- settings and configuration ------------------------------------------ */

/* RIG_KEEPALIVE_MS, the transport's own setting. */
static bool keepalive_resolve(uint64_t *out, char **err)
{
    return rig_env_u64_in("RIG_KEEPALIVE_MS", 500, 1, 3600000,
                          "milliseconds, at most an hour", out, err);
}

/* The UCX_TLS in force on rig's context: RIG_UCX_TLS when set, else
 * UCX_TLS (context_make says why). */
static const char *tls_setting(void)
{
    const char *v = getenv("RIG_UCX_TLS");
    return v != NULL && v[0] != '\0' ? v : getenv("UCX_TLS");
}

/* Whether UCX_TLS lets UCX use a transport named in tls (or an alias of
 * it): unset, "all", a list naming one, or a negated list naming none. */
static bool tls_may_use(const char *const *tls)
{
    const char *v = tls_setting();
    if (v == NULL || v[0] == '\0') {
        return true;
    }
    bool negated = v[0] == '^';
    bool named = false;
    for (size_t i = 0; tls[i] != NULL && !named; i++) {
        named = strstr(v, tls[i]) != NULL;
    }
    return negated ? !named : named || strstr(v, "all") != NULL;
}

/* The transports whose memory a same-node peer can map (ucp_rkey_ptr). */
static const char *const tls_shm[] = {"sm",   "shm",   "mm", "posix",
                                      "sysv", "xpmem", NULL};

/* Whether this rank's ends with ranks on its node go over TCP: no
 * transport in rig's context can map them (nor carry UCX's messages
 * through shared memory).  Their runs then take lanes as those across
 * nodes do (lane.c): a run over UCX's TCP costs a waiter an epoll_wait a
 * look (ucp_worker_progress) besides the lanes' recv, where MPI's
 * progress polls once.  Across 2 simulated hosts at 4 ranks
 * (UCX_TLS=tcp,self; of a 2 x 2 stencil the east-west halos between the
 * 2 ranks of a host), every look of every rank progressed the worker for
 * them.  RIG_SHM_STORES=off alone keeps UCX's messages, which then move
 * through shared memory. */
static bool near_over_tcp(void)
{
    return !tls_may_use(tls_shm);
}

static int modify_warned;

bool rig_ucx_config_set(ucp_config_t *cfg, const char *name, const char *value,
                        const char *const *user_vars, const char *const *tls,
                        char **err)
{
    for (size_t i = 0; user_vars[i] != NULL; i++) {
        const char *v = getenv(user_vars[i]);
        if (v != NULL && v[0] != '\0') {
            return true; /* the user's wins */
        }
    }
    /* UCX warns of a setting no interface took: not when UCX_TLS leaves
     * out every interface it is for. */
    if (!tls_may_use(tls)) {
        return true;
    }
    ucs_status_t st = ucp_config_modify(cfg, name, value);
    if (st == UCS_ERR_NO_ELEM) {
        /* A UCX without interface settings through ucp_config_modify. */
        rig_log_once(&modify_warned, RIG_LOG_WARN,
                     "UCX cannot set %s=%s on rig's context: set %s=%s for "
                     "the same effect",
                     name, value, user_vars[0], value);
        return true;
    }
    if (st != UCS_OK) {
        return rig_err(err, "system: ucp_config_modify(%s=%s) failed: %s", name,
                       value, rig_ucs_str(st));
    }
    return true;
}

/* ---- context and worker -------------------------------------------------- */

/* UCX_TCP_RX_SEG_SIZE on rig's context (context_make says why): a run of
 * up to about this many bytes crosses TCP as one message. */
#define RIG_UCX_TCP_SEG "2M"

static bool context_make(int size, uint64_t keepalive_ms, ucp_context_h *out,
                         char **err)
{
    ucp_config_t *cfg = NULL;
    /* rig's own prefix: UCX 1.13 reads every UCX_<name> of the context's
     * table (TLS, ATOMIC_MODE, NET_DEVICES...) and then RIG_UCX_<name>,
     * which wins.  So a job can give rig's context settings that the MPI
     * library's own UCX context (Open MPI's pml ucx, MPICH's ch4:ucx,
     * which read UCX_*) does not see -- RIG_UCX_TLS=tcp,self runs rig's
     * rails over TCP while MPICH keeps its own transports (MPICH 4.0
     * under UCX_TLS=tcp,self hung 2 runs in 3 of test_rails at 4 ranks)
     * -- while a plain UCX_* still applies to both.  An
     * interface's own settings (UCX_TCP_*, UCX_MM_*) UCX reads with its
     * UCX_ prefix only. */
    ucs_status_t st = ucp_config_read("RIG", NULL, &cfg);
    if (st != UCS_OK) {
        return rig_err(err, "system: ucp_config_read failed: %s",
                       rig_ucs_str(st));
    }
    /* Shared-memory lanes under peer-failure handling (see above): the
     * sysv and posix interfaces' ERROR_HANDLING, which both take from
     * their common "MM_" table. */
    static const char *const sm[] = {"sm", "shm", "mm", "sysv", "posix", NULL};
    static const char *const sm_vars[] = {"UCX_SYSV_ERROR_HANDLING",
                                          "UCX_POSIX_ERROR_HANDLING",
                                          "UCX_MM_ERROR_HANDLING", NULL};
    /* TCP's receive segment: the largest active message UCX's TCP
     * interface lands in one piece (its am_zcopy limit).  A larger one
     * comes in fragments, which UCP copies into a buffer of the whole
     * message before the handler sees it, and the handler copies it again
     * into the inbound copy (carrier.c): at the default 64 KiB a 1 MiB run
     * was copied twice after the kernel's copy, and across 2 simulated
     * hosts read 0.79-0.90x MPI's best bandwidth where 2 MiB read
     * 0.97-1.15x, interleaved on one loaded machine.  A buffer is taken
     * per message being received and given back when it landed. */
    static const char *const tcp[] = {"tcp", NULL};
    static const char *const seg_vars[] = {"UCX_TCP_RX_SEG_SIZE", NULL};
    if (!rig_ucx_config_set(cfg, "MM_ERROR_HANDLING", "y", sm_vars, sm, err) ||
        !rig_ucx_config_set(cfg, "RX_SEG_SIZE", RIG_UCX_TCP_SEG, seg_vars, tcp,
                            err) ||
        !rig_fail_config(cfg, keepalive_ms, err)) {
        ucp_config_release(cfg);
        return false;
    }
    ucp_params_t p = {
        .field_mask = UCP_PARAM_FIELD_FEATURES |
                      UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                      UCP_PARAM_FIELD_ESTIMATED_NUM_EPS,
        /* RMA: mapped ends (ucp_rkey_ptr); AM: runs across nodes
         * (carrier.c) and the failure message (failure.c). */
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

bool rig_ucx_am_handler(rig_ucx *u, unsigned id, ucp_am_recv_callback_t cb,
                        char **err)
{
    ucp_am_handler_param_t p = {
        .field_mask =
            UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
            UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG,
        .id = id,
        .flags = UCP_AM_FLAG_WHOLE_MSG,
        .cb = cb,
        .arg = u,
    };
    ucs_status_t st = ucp_worker_set_am_recv_handler(u->worker, &p);
    if (st != UCS_OK) {
        return rig_err(err,
                       "system: ucp_worker_set_am_recv_handler(%u) failed: %s",
                       id, rig_ucs_str(st));
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

/* ---- open, wire, endpoints ---------------------------------------------- */

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
    free(u->ep_closed);
    free(u->index);
    rig_liveness_close(atomic_load(&u->links));
    rig_lanes_close(u);
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
    rig_failure_fini(&u->fail);
    pthread_mutex_destroy(&u->worker_lock);
    pthread_mutex_destroy(&u->list_lock);
    free(u);
}

/* The pair protocol's view of the job's failure: its reason, once it
 * came (a rail refused names the cause, not the stand-in). */
static const char *handshake_failed(void *self)
{
    return rig_failure_settled(self, RIG_REASON_WAIT_NS);
}

static bool ucx_open(const rig_transport_params *p, rig_transport **out,
                     char **err)
{
    rig_ucx *u = calloc(1, sizeof(*u));
    if (u == NULL) {
        return rig_err(err, "nomem: calloc(%zu) failed", sizeof(*u));
    }
    u->super.ops = &rig_ucx_ops;
    u->rank = p->rank;
    u->size = p->size;
    u->numa = p->numa;
    u->cuda_switch = p->cuda;
    u->shm_stores = p->shm_stores;
    u->refs = 1;
    u->freed = p->freed;
    u->freed_arg = p->freed_arg;
    u->epfd = -1;
    u->eventfd = -1;
    u->lane_epfd = -1;
    u->wake_ms = -1;
    u->handshake = (rig_handshake){
        .ops = &rig_uend_handshake,
        .self = u,
        .comm = p->comm,
        .rank = p->rank,
        .failed = handshake_failed,
    };
    atomic_init(&u->told, true);
    atomic_init(&u->handoff, NULL);
    atomic_init(&u->links, NULL);
    atomic_init(&u->net_path, false);
    atomic_init(&u->am_net, false);
    atomic_init(&u->lanes_watched, false);
    atomic_init(&u->lanes_lost, false);
    atomic_init(&u->driven_ns, 0);
    pthread_mutex_init(&u->worker_lock, NULL);
    pthread_mutex_init(&u->list_lock, NULL);
    int size = p->size;
    if (!rig_failure_init(&u->fail, p->rank, size, rig_ucx_peer_gone, u, err)) {
        pthread_mutex_destroy(&u->worker_lock);
        pthread_mutex_destroy(&u->list_lock);
        free(u);
        return false;
    }
    u->peer_addr = calloc((size_t)size, sizeof(*u->peer_addr));
    u->peer_addr_len = calloc((size_t)size, sizeof(*u->peer_addr_len));
    u->ep = calloc((size_t)size, sizeof(*u->ep));
    u->ep_closed = calloc((size_t)size, sizeof(*u->ep_closed));
    if (u->peer_addr == NULL || u->peer_addr_len == NULL || u->ep == NULL ||
        u->ep_closed == NULL) {
        rig_err(err, "nomem: peer tables for %d ranks", size);
        goto err_free;
    }
    if (!keepalive_resolve(&u->keepalive_ms, err) ||
        !rig_liveness_setting(&u->peer_timeout_ms, err) ||
        !rig_lane_setting(&u->lane_bytes, err) ||
        !context_make(size, u->keepalive_ms, &u->context, err) ||
        !worker_make(u->context, &u->worker, err) || !rig_fail_init(u, err) ||
        !rig_carrier_init(u, err)) {
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
    if (u->numa != RIG_OFF) {
        u->nodeset = numa_nodeset(u->topo, err);
        if (u->nodeset == NULL) {
            goto err_free;
        }
    }
    if (u->cuda_switch != RIG_OFF) {
        u->cuda = rig_cuda_load();
        if (u->cuda == NULL && u->cuda_switch == RIG_ON) {
            rig_err(err, "unsupported: RIG_CUDA=on but there is no CUDA "
                         "driver or GPU");
            goto err_free;
        }
    }
    if (!rig_progress_start(u, err)) {
        goto err_stop;
    }
    *out = &u->super;
    return true;

err_stop:
    rig_progress_stop(u);
err_free:
    ucx_free(u);
    return false;
}

/* Every rank's worker address, swapped over the job's communicator. */
static bool addresses_swap(rig_ucx *u, char **err)
{
    int n = u->size;
    int *lens = calloc((size_t)n, sizeof(int));
    int *displs = calloc((size_t)n, sizeof(int));
    uint8_t *all = NULL;
    bool ok = false;
    if (lens == NULL || displs == NULL) {
        rig_err(err, "nomem: address tables for %d ranks", n);
        goto out_free;
    }
    MPI_Comm comm = u->handshake.comm;
    int mine = (int)u->address_len;
    int rc = MPI_Allgather(&mine, 1, MPI_INT, lens, 1, MPI_INT, comm);
    if (rc != MPI_SUCCESS) {
        rig_err_mpi(err, rc, "MPI_Allgather");
        goto out_free;
    }
    size_t total = 0;
    for (int r = 0; r < n; r++) {
        displs[r] = (int)total;
        total += (size_t)lens[r];
    }
    all = malloc(total > 0 ? total : 1);
    if (all == NULL) {
        rig_err(err, "nomem: %zu bytes of worker addresses", total);
        goto out_free;
    }
    rc = MPI_Allgatherv(u->address, mine, MPI_BYTE, all, lens, displs, MPI_BYTE,
                        comm);
    if (rc != MPI_SUCCESS) {
        rig_err_mpi(err, rc, "MPI_Allgatherv");
        goto out_free;
    }
    ok = true;
    for (int r = 0; r < n && ok; r++) {
        size_t len = (size_t)lens[r];
        u->peer_addr[r] = malloc(len > 0 ? len : 1);
        if (u->peer_addr[r] == NULL) {
            ok = rig_err(err, "nomem: worker address of rank %d", r);
        } else {
            memcpy(u->peer_addr[r], all + displs[r], len);
            u->peer_addr_len[r] = len;
        }
    }

out_free:
    free(all);
    free(displs);
    free(lens);
    return ok;
}

static bool ucx_wire(rig_transport *t, const rig_transport_wiring *w,
                     char **err)
{
    rig_ucx *u = rig_ucx_of(t);
    u->window = w->window;
    u->handshake.window = w->window;
    bool ok = addresses_swap(u, err);
    /* Collective: every rank makes its links, whatever happened above. */
    rig_liveness *links = NULL;
    char *why = NULL;
    bool near_lanes = u->lane_bytes > 0 && near_over_tcp();
    if (rig_liveness_open(u->handshake.comm, u->rank, u->size, w->local,
                          near_lanes, u->peer_timeout_ms, rig_ucx_link_lost, u,
                          &links, ok ? err : &why)) {
        atomic_store(&u->links, links);
    } else {
        ok = false;
        free(why);
    }
    return ok && rig_lanes_open(u, links, err) && rig_fail_watch(u, w, err);
}

/* An endpoint's error: inside ucp_worker_progress, under the worker lock.
 * The peer most likely died: no collective waits for it.  While closing
 * it may instead have finished its close and dropped its endpoints: then
 * it is only marked gone (the closing barrier allows for that) and the
 * job does not fail for it. */
static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    rig_ucx *u = arg;
    int peer = -1;
    for (int r = 0; r < u->size; r++) {
        if (u->ep[r] == ep) {
            peer = r;
        }
    }
    if (atomic_load(&u->closing)) {
        rig_ucx_left_closing(u, peer);
        return;
    }
    rig_failure_left(&u->fail, peer, RIG_LEFT_DIED);
    /* Worded as the watch on a process words a death ("rank V died (pid
     * P, seen by rank R)"): the reason starts with the rank, which the
     * remote layer turns into the machine's name. */
    rig_ucx_fail_later(u,
                       "failed: rank %d is unreachable (its endpoint failed: "
                       "%s, seen by rank %d)",
                       peer, rig_ucs_str(status), u->rank);
}

bool rig_ucx_ep(rig_ucx *u, int peer, ucp_ep_h *out, char **err)
{
    if (u->ep[peer] != NULL) {
        *out = u->ep[peer];
        return true;
    }
    if (u->ep_closed[peer]) {
        return rig_err(err, "failed: rank %d left the job", peer);
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

/* Forced: a lost peer answers nothing, so a flush would wait for it. */
static void ep_close_forced(rig_ucx *u, ucp_ep_h ep)
{
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
        .flags = UCP_EP_CLOSE_FLAG_FORCE,
    };
    ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &p);
    if (UCS_PTR_IS_PTR(req)) {
        rig_backoff b = {0};
        while (ucp_request_check_status(req) == UCS_INPROGRESS) {
            ucp_worker_progress(u->worker);
            rig_backoff_step(&b);
        }
        ucp_request_free(req);
    }
}

void rig_ucx_eps_drop_left(rig_ucx *u)
{
    rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
    for (int r = 0; r < u->size; r++) {
        if (r == u->rank || u->ep_closed[r] ||
            !rig_failure_has_left(&u->fail, r)) {
            continue;
        }
        /* Carriers and failure notices check ep_closed under the worker
         * lock before they use an end's endpoint.  The endpoint itself
         * stays until the job closes (what comes over it is dropped:
         * the job has failed, carrier.c's run_am).  Closing it here, even
         * forced, left UCX 1.13's TCP transport the receiving half of a
         * connected socket (uct_tcp_ep_destroy keeps it to take what is
         * still in flight); when a cut link came back, its events reached
         * an endpoint UCX had freed, and the progress thread crashed
         * (SIGSEGV in uct_tcp_iface_progress, 3 runs of about 25 of
         * cut_port_busy_h2, each at the link's return). */
        u->ep_closed[r] = true;
        /* Its lane stays too (lane.c), but is not reported when it
         * breaks. */
        rig_lanes_drop(u, r);
    }
    rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
}

/* ---- rails ----------------------------------------------------------------
 */

static bool ucx_rail(rig_transport *t, int peer, int64_t id,
                     const rig_transfer *send, size_t nsend,
                     const rig_transfer *receive, size_t nreceive,
                     rig_rail **out, char **err)
{
    return rig_handshake_rail(&rig_ucx_of(t)->handshake, peer, id, send, nsend,
                              receive, nreceive, out, err);
}

static bool ucx_rail_far(rig_transport *t, const rig_rail *r, rig_rail_far *out)
{
    rig_ucx *u = rig_ucx_of(t);
    rig_lock(&u->list_lock, UCX_LOCK_LIST);
    rig_uend *e = rig_uend_find(u, r);
    if (e != NULL) {
        *out = e->hs.far;
    }
    rig_unlock(&u->list_lock, UCX_LOCK_LIST);
    return e != NULL;
}

/* ---- stopping and closing --------------------------------------------------
 */

void rig_ucx_unref(rig_ucx *u)
{
    rig_lock(&u->list_lock, UCX_LOCK_LIST);
    long left = --u->refs;
    rig_unlock(&u->list_lock, UCX_LOCK_LIST);
    if (left == 0) {
        /* The job lets go of its record first: nothing reaches u after. */
        if (u->freed != NULL) {
            u->freed(u->freed_arg);
        }
        ucx_free(u);
    }
}

static void ucx_stop(rig_transport *t)
{
    rig_ucx *u = rig_ucx_of(t);
    /* A failure of this rank is told to every rank before closing. */
    rig_ucx_flush_fail(u);
    atomic_store(&u->closing, true);
    rig_lock(&u->list_lock, UCX_LOCK_LIST);
    for (rig_uend *e = u->ends; e != NULL; e = e->next) {
        if (e->held) {
            /* The release hook waits for the list lock, so e->end lives;
             * after this no wake runs or will run. */
            rig_end_stop(e->end);
        }
    }
    rig_unlock(&u->list_lock, UCX_LOCK_LIST);
}

/* No collective: all is not needed. */
static bool ucx_close(rig_transport *t, bool all)
{
    (void)all;
    rig_ucx *u = rig_ucx_of(t);
    rig_progress_stop(u);
    /* Peers may outlive this close: they saw closing, and ignore the
     * links' hang-up from now on. */
    rig_liveness_close(atomic_exchange(&u->links, NULL));
    rig_lock(&u->list_lock, UCX_LOCK_LIST);
    rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
    rig_lanes_close(u); /* with the links: peers see both close */
    /* Endpoints first, which purges messages still in flight (their callbacks
     * find their ends alive), then the rkeys they used.  Forced closes:
     * peers close theirs at the same time and a flush would wait for them. */
    for (int r = 0; r < u->size; r++) {
        if (u->ep[r] == NULL) {
            continue;
        }
        ep_close_forced(u, u->ep[r]);
        u->ep[r] = NULL;
    }
    rig_uend *dead = NULL;
    for (rig_uend *e = u->ends, *next; e != NULL; e = next) {
        next = e->next;
        if (e->hs.attached) {
            rig_window_detach(u->window, e->mem.base);
            e->hs.attached = false;
        }
        if (e->rkey != NULL) {
            ucp_rkey_destroy(e->rkey);
            e->rkey = NULL;
        }
        e->ep = NULL;
        e->in_job = false;
        if (!e->held) {
            /* Freed below, outside the locks. */
            rig_uend_unlink(u, e);
            e->next = dead;
            dead = e;
        }
    }
    ucp_worker_release_address(u->worker, u->address);
    u->address = NULL;
    ucp_worker_destroy(u->worker);
    u->worker = NULL;
    rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
    rig_unlock(&u->list_lock, UCX_LOCK_LIST);
    for (rig_uend *e = dead, *next; e != NULL; e = next) {
        next = e->next;
        rig_uend_free(e);
    }
    rig_failure_look(&u->fail); /* a death during the close */
    bool died = rig_failure_died(&u->fail);
    rig_ucx_unref(u);
    return died;
}

/* ---- rig_info --------------------------------------------------------------
 */

static bool ucx_info(FILE *out, char **err)
{
    unsigned major, minor, release;
    ucp_get_version(&major, &minor, &release);
    fprintf(out, "  UCX:             %u.%u.%u (%s)\n", major, minor, release,
            ucp_get_version_string());
    const char *tls = tls_setting();
    fprintf(out, "  UCX_TLS:         %s\n", tls != NULL ? tls : "(all)");
    ucp_context_h ctx;
    uint64_t keepalive_ms;
    if (!keepalive_resolve(&keepalive_ms, err) ||
        !context_make(1, keepalive_ms, &ctx, err)) {
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
    uint64_t lane_bytes = 0;
    if (!rig_lane_setting(&lane_bytes, err)) {
        return false;
    }
    fprintf(out, "\n  same-node rails: %s\n",
            shm              ? "plain stores into mapped ends (sysv/posix)"
            : lane_bytes > 0 ? "as across nodes (no shared-memory transport)"
                             : "one UCX active message a run (no "
                               "shared-memory transport)");
    fprintf(out, "  other nodes:     a TCP link per rank watched "
                 "(RIG_PEER_TIMEOUT_MS: a silent\n"
                 "                   rank is lost after it); ");
    if (lane_bytes > 0) {
        fprintf(out,
                "runs whose two copies fit in %llu\n"
                "                   bytes (RIG_LANE_BYTES) over rig's own TCP "
                "connection, larger\n"
                "                   ones as one UCX active message a run\n",
                (unsigned long long)lane_bytes);
    } else {
        fprintf(out, "one UCX active message a run\n");
    }

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

const rig_transport_ops rig_ucx_ops = {
    .name = "ucx",
    .about = "mapped stores on a node, UCX active messages across",
    .open = ucx_open,
    .wire = ucx_wire,
    .rail = ucx_rail,
    .rail_far = ucx_rail_far,
    .owns = rig_ucx_owns,
    .fail = rig_ucx_fail,
    .failed = rig_ucx_failed,
    .gone = rig_ucx_gone,
    .finalize = rig_ucx_finalize,
    .stop = ucx_stop,
    .close = ucx_close,
    .info = ucx_info,
};
