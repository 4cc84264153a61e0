/* SPDX-License-Identifier: BSD-3-Clause */
/* UCX rail ends: the pair protocol's steps (make, connect, finish,
 * discard), release, and the transport's list of ends.
 *
 * An end is one allocation from UCX (memory.c) with its packed rkey; its
 * descriptor for the peer (the offer) says where it is and carries the
 * rkey.  Connecting unpacks the peer's rkey on the endpoint to it and, for
 * a same-node peer, maps the peer's end (ucp_rkey_ptr) for the carrier's
 * plain stores.  Once released, an end's memory stays while the peer may
 * still carry into it: it goes when the pair agrees that both released
 * the rail (the pair protocol's next offers, ../base/handshake.h), at
 * close, or at release once the job closed. */
#include "ucx_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What the peer needs of an end: where it is and its packed rkey. */
typedef struct {
    uint64_t base;
    uint64_t counts_at;
    uint64_t outbound_at;
    uint64_t inbound_at;
    uint64_t total;
    uint64_t rkey_len;
} wire_desc;

/* ---- the list ---------------------------------------------------------- */

void rig_uend_unlink(rig_ucx *u, rig_uend *e)
{
    if (e->prev != NULL) {
        e->prev->next = e->next;
    } else {
        u->ends = e->next;
    }
    if (e->next != NULL) {
        e->next->prev = e->prev;
    }
    e->next = e->prev = NULL;
    e->listed = false;
}

rig_uend *rig_uend_find(rig_ucx *u, const rig_rail *r)
{
    for (rig_uend *e = u->ends; e != NULL; e = e->next) {
        if (e->held && e->rail == r) {
            return e;
        }
    }
    return NULL;
}

bool rig_ucx_owns(rig_transport *t, const rig_end *end)
{
    rig_ucx *u = rig_ucx_of(t);
    rig_lock(&u->list_lock, UCX_LOCK_LIST);
    rig_uend *e = u->ends;
    while (e != NULL && !(e->held && e->end == end)) {
        e = e->next;
    }
    rig_unlock(&u->list_lock, UCX_LOCK_LIST);
    return e != NULL;
}

/* ---- making ----------------------------------------------------------------
 */

static bool copy_list(const rig_transfer *t, size_t n, rig_transfer **out,
                      char **err)
{
    *out = NULL;
    if (n == 0) {
        return true;
    }
    *out = malloc(n * sizeof(**out));
    if (*out == NULL) {
        return rig_err(err, "nomem: %zu transfers", n);
    }
    memcpy(*out, t, n * sizeof(**out));
    return true;
}

/* The spans of back-to-back transfers (see rig_uend's span). */
static bool spans_make(const rig_transfer *t, size_t n, struct rig_span **out,
                       char **err)
{
    *out = NULL;
    if (n == 0) {
        return true;
    }
    struct rig_span *s = malloc(n * sizeof(*s));
    if (s == NULL) {
        return rig_err(err, "nomem: spans of %zu transfers", n);
    }
    for (size_t j = n; j-- > 0;) {
        s[j].count = 1;
        s[j].bytes = (size_t)t[j].length;
        if (j + 1 < n && t[j + 1].src == t[j].src + t[j].length &&
            t[j + 1].dst == t[j].dst + t[j].length) {
            s[j].count += s[j + 1].count;
            s[j].bytes += s[j + 1].bytes;
        }
    }
    *out = s;
    return true;
}

static void uend_free_struct(rig_uend *e)
{
    free(e->span);
    free(e->send);
    free(e->receive);
    free(e->desc);
    free(e);
}

/* The pair protocol's make: the end's memory and its descriptor. */
static bool uend_make(void *self, int peer, int64_t id,
                      const rig_transfer *send, size_t nsend,
                      const rig_transfer *receive, size_t nreceive, void **out,
                      const void **desc, size_t *desc_len, char **err)
{
    rig_ucx *u = self;
    rig_uend *e = aligned_alloc(64, (sizeof(*e) + 63) / 64 * 64);
    if (e == NULL) {
        return rig_err(err, "nomem: aligned_alloc(%zu) failed", sizeof(*e));
    }
    memset(e, 0, sizeof(*e));
    atomic_init(&e->wakes, 0);
    atomic_init(&e->queued, false);
    e->ucx = u;
    e->peer = peer;
    e->id = id;
    e->nsend = nsend;
    e->nreceive = nreceive;
    if (!copy_list(send, nsend, &e->send, err) ||
        !spans_make(send, nsend, &e->span, err) ||
        !copy_list(receive, nreceive, &e->receive, err) ||
        !rig_end_layout_make(send, nsend, receive, nreceive, 0, &e->layout,
                             err)) {
        goto err_free;
    }
    /* The spec allows areas up to 2^60 bytes; what the machine cannot hold
     * is refused here rather than by an allocator that may try hard. */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 &&
        e->layout.total / (size_t)page > (size_t)pages) {
        rig_err(err,
                "nomem: an end of %zu bytes is more than this "
                "machine's memory (sysconf: %zu bytes)",
                e->layout.total, (size_t)pages * (size_t)page);
        goto err_free;
    }
    rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
    bool ok = rig_endmem_alloc(u, e->layout.total, &e->mem, err);
    rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
    if (!ok) {
        goto err_free;
    }
    uint8_t *base = e->mem.base;
    e->counts = base + e->layout.counts_at;
    e->out = base + e->layout.outbound_at;
    e->out_copy = e->layout.outbound_len / 2;
    e->in_copy = rig_copy_bytes(send, nsend, RIG_BY_DST);

    e->desc_len = sizeof(wire_desc) + e->mem.rkey_len;
    e->desc = malloc(e->desc_len);
    if (e->desc == NULL) {
        rig_err(err, "nomem: end descriptor of %zu bytes", e->desc_len);
        goto err_mem;
    }
    wire_desc w = {
        .base = (uint64_t)(uintptr_t)base,
        .counts_at = e->layout.counts_at,
        .outbound_at = e->layout.outbound_at,
        .inbound_at = e->layout.inbound_at,
        .total = e->layout.total,
        .rkey_len = e->mem.rkey_len,
    };
    memcpy(e->desc, &w, sizeof(w));
    memcpy((uint8_t *)e->desc + sizeof(w), e->mem.rkey, e->mem.rkey_len);
    rig_lock(&u->list_lock, UCX_LOCK_LIST);
    u->refs++;
    rig_unlock(&u->list_lock, UCX_LOCK_LIST);
    *out = e;
    *desc = e->desc;
    *desc_len = e->desc_len;
    return true;

err_mem:
    rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
    rig_endmem_free(u, &e->mem);
    rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
err_free:
    uend_free_struct(e);
    return false;
}

/* ---- releasing ----------------------------------------------------------- */

/* The ABI's release hook (rig/provider.h, step 6): the last reference to
 * the end and its rail went.  No wake runs any more (the ABI stopped the
 * end), and from now on nothing of this rank touches the peer's end
 * (failure.c tells only held ends' peers).  The memory stays while the
 * peer may still carry into it: until both released it (uend_released),
 * close, or now if the job closed already.  Blocks on nothing but the
 * list lock. */
static void uend_release(void *self)
{
    rig_uend *e = self;
    rig_ucx *u = e->ucx;
    if (!e->listed) {
        e->end = NULL; /* never handed out: the protocol discards e */
        return;
    }
    rig_lock(&u->list_lock, UCX_LOCK_LIST);
    e->held = false;
    e->end = NULL;
    e->rail = NULL;
    bool gone = !e->in_job;
    if (gone) {
        rig_uend_unlink(u, e);
    }
    rig_unlock(&u->list_lock, UCX_LOCK_LIST);
    if (gone) {
        rig_uend_free(e);
    }
}

/* ---- connecting ---------------------------------------------------------- */

/* The pair protocol's connect: the peer's rkey on the endpoint to it, the
 * peer's end mapped when it shares this node, the ABI end and rail. */
static bool uend_connect(void *end, const void *desc, size_t len,
                         rig_rail **out, rig_handshake_mem *mem,
                         const void **answer, size_t *answer_len, char **err)
{
    rig_uend *e = end;
    rig_ucx *u = e->ucx;
    wire_desc w;
    if (len < sizeof(w)) {
        return rig_err(err, "invalid: rank %d sent a %zu-byte end descriptor",
                       e->peer, len);
    }
    memcpy(&w, desc, sizeof(w));
    if (w.rkey_len != len - sizeof(w)) {
        return rig_err(err,
                       "invalid: rank %d's end descriptor has a %llu-"
                       "byte rkey in %zu bytes",
                       e->peer, (unsigned long long)w.rkey_len, len);
    }
    rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
    ucp_ep_h ep;
    if (!rig_ucx_ep(u, e->peer, &ep, err)) {
        rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
        return false;
    }
    ucp_rkey_h rkey;
    ucs_status_t st =
        ucp_ep_rkey_unpack(ep, (const uint8_t *)desc + sizeof(w), &rkey);
    if (st != UCS_OK) {
        rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
        return rig_err(err,
                       "system: ucp_ep_rkey_unpack of rank %d's end "
                       "failed: %s",
                       e->peer, rig_ucs_str(st));
    }
    void *map = NULL;
    if (u->shm_stores != RIG_OFF) {
        st = ucp_rkey_ptr(rkey, w.base, &map);
        if (st != UCS_OK) {
            map = NULL;
            if (u->shm_stores == RIG_ON) {
                ucp_rkey_destroy(rkey);
                rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
                return rig_err(err,
                               "unsupported: RIG_SHM_STORES=on but "
                               "rank %d's end is not mapped here "
                               "(ucp_rkey_ptr: %s)",
                               e->peer, rig_ucs_str(st));
            }
        }
    }
    if (map == NULL) {
        atomic_store(&u->net_path, true); /* progress.c's safety poll */
        /* Small runs go over the peer's lane, larger ones as UCX
         * messages (lane.c), each end on one path for good. */
        e->lane = rig_lane_fits(e, e->send, e->nsend);
        rig_lane_use(u, e->peer); /* the peer's runs may come on it */
        /* The peer decides alike for what it sends here. */
        if (!e->lane || !rig_lane_fits(e, e->receive, e->nreceive)) {
            atomic_store(&u->am_net, true);
        }
    }
    /* The peer may send as soon as its side is made: the end takes runs
     * from now on (carrier.c). */
    if (!rig_uend_index_add(e, err)) {
        ucp_rkey_destroy(rkey);
        rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
        return false;
    }
    rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);

    rig_end_desc d = {
        .wake = rig_uend_wake,
        .ready_fn = NULL,
        .release = uend_release,
        .self = e,
        .receive = e->receive,
        .nreceive = e->nreceive,
        /* Across nodes a waiter runs the handlers that raise its counts
         * (progress.c). */
        .progress = map == NULL ? rig_ucx_drive : NULL,
        .progress_arg = u,
    };
    rig_end_desc_areas(&d, &e->layout, e->mem.base);
    rig_end *abi_end;
    if (!rig_end_make(&d, &abi_end, err)) {
        goto err_rkey;
    }
    rig_rail *rail;
    if (!rig_rail_make(e->id, abi_end, &rail, err)) {
        rig_end_release(abi_end); /* e is not listed: the hook does nothing */
        goto err_rkey;
    }
    e->ep = ep;
    e->rkey = rkey;
    e->peer_counts = w.base + w.counts_at;
    e->peer_in_addr = w.base + w.inbound_at;
    if (map != NULL) {
        e->peer_counts_map = (uint8_t *)map + w.counts_at;
        e->peer_in = (uint8_t *)map + w.inbound_at;
    }
    e->end = abi_end;
    e->rail = rail;
    mem->base = e->mem.base;
    mem->layout = &e->layout;
    *answer = NULL;
    *answer_len = 0;
    *out = rail;
    return true;

err_rkey:
    rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
    rig_uend_index_del(e);
    ucp_rkey_destroy(rkey);
    rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
    return false;
}

/* The pair protocol's finish: the end joins the list (failed at once if
 * the job failed meanwhile). */
static void uend_finish(void *end, const void *answer, size_t answer_len,
                        const rig_handshake_end *he)
{
    (void)answer;
    (void)answer_len;
    rig_uend *e = end;
    rig_ucx *u = e->ucx;
    rig_lock(&u->list_lock, UCX_LOCK_LIST);
    e->hs = *he;
    e->listed = true;
    e->held = true;
    e->in_job = true;
    e->prev = NULL;
    e->next = u->ends;
    if (u->ends != NULL) {
        u->ends->prev = e;
    }
    u->ends = e;
    bool failed = rig_failure_failed(&u->fail);
    rig_unlock(&u->list_lock, UCX_LOCK_LIST);
    if (failed) {
        rig_end_fail(e->end);
    }
}

/* ---- freeing ------------------------------------------------------------- */

void rig_uend_free(rig_uend *e)
{
    rig_ucx *u = e->ucx;
    rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
    rig_uend_index_del(e);
    if (e->rkey != NULL) {
        ucp_rkey_destroy(e->rkey);
        e->rkey = NULL;
    }
    rig_endmem_free(u, &e->mem);
    rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
    uend_free_struct(e);
    rig_ucx_unref(u);
}

/* The pair protocol's discard: e was never listed.  Nothing is shared
 * with the peer yet (its rkey of this end goes with its own discard). */
static void uend_discard(void *end, rig_rail *rail, bool together)
{
    (void)together;
    rig_uend *e = end;
    if (rail != NULL) {
        rig_rail_release(rail); /* e is not listed: the hook does nothing */
    }
    rig_uend_free(e);
}

/* ---- freeing released rails ---------------------------------------------- */

/* Released, in the job, with no run message in flight: nothing of this
 * rank will touch the peer's end any more once the endpoint is flushed.
 * List and worker locks held. */
static bool released_quiet(const rig_uend *e, int peer)
{
    return e->listed && !e->held && e->in_job && e->peer == peer &&
           e->batch_n == 0;
}

static int by_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Waits until every operation posted on the endpoint to peer completed at
 * the peer (ucp_ep_flush_nbx); false when the flush failed or the job
 * failed meanwhile (then nothing is offered). */
static bool flush_peer(rig_ucx *u, int peer)
{
    rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
    ucp_ep_h ep = u->ep[peer];
    ucs_status_ptr_t r = NULL;
    if (ep != NULL) {
        ucp_request_param_t p = {.op_attr_mask = 0};
        r = ucp_ep_flush_nbx(ep, &p);
    }
    rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
    if (r == NULL) {
        return true;
    }
    if (UCS_PTR_IS_ERR(r)) {
        return false;
    }
    rig_backoff b = {0};
    for (;;) {
        rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
        ucp_worker_progress(u->worker);
        ucs_status_t st = ucp_request_check_status(r);
        if (st != UCS_INPROGRESS || rig_failure_failed(&u->fail)) {
            ucp_request_free(r); /* released by UCX once it completes */
            rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
            return st == UCS_OK;
        }
        rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
        rig_backoff_step(&b);
    }
}

/* The pair protocol's released: ends with peer released here, flushed. */
static void uend_released(void *self, int peer, int64_t **ids, size_t *n)
{
    rig_ucx *u = self;
    *ids = NULL;
    *n = 0;
    rig_lock(&u->list_lock, UCX_LOCK_LIST);
    rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
    size_t k = 0;
    for (rig_uend *e = u->ends; e != NULL; e = e->next) {
        k += released_quiet(e, peer) ? 1 : 0;
    }
    int64_t *out = k > 0 ? malloc(k * sizeof(*out)) : NULL;
    k = 0;
    for (rig_uend *e = u->ends; e != NULL && out != NULL; e = e->next) {
        if (released_quiet(e, peer)) {
            out[k++] = e->id;
        }
    }
    rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
    rig_unlock(&u->list_lock, UCX_LOCK_LIST);
    if (out == NULL) {
        return;
    }
    /* Failure notices of these ends, if any, were posted before they were
     * released: the flush makes sure they all landed. */
    if (!flush_peer(u, peer)) {
        free(out);
        return;
    }
    qsort(out, k, sizeof(*out), by_id);
    *ids = out;
    *n = k;
}

/* The pair protocol's free_released: the peer released them too and
 * touches them no more: memory, rkey and window slot go. */
static void uend_free_released(void *self, int peer, const int64_t *ids,
                               size_t n)
{
    rig_ucx *u = self;
    for (size_t i = 0; i < n; i++) {
        rig_lock(&u->list_lock, UCX_LOCK_LIST);
        rig_uend *e = u->ends;
        while (e != NULL &&
               !(e->id == ids[i] && e->peer == peer && !e->held && e->in_job)) {
            e = e->next;
        }
        bool attached = false;
        if (e != NULL) {
            rig_uend_unlink(u, e);
            attached = e->hs.attached;
            e->hs.attached = false;
        }
        rig_unlock(&u->list_lock, UCX_LOCK_LIST);
        if (e == NULL) {
            continue;
        }
        if (attached) {
            rig_window_detach(u->window, e->mem.base);
        }
        rig_uend_free(e);
    }
}

const rig_handshake_ops rig_uend_handshake = {
    .make = uend_make,
    .connect = uend_connect,
    .finish = uend_finish,
    .discard = uend_discard,
    .released = uend_released,
    .free_released = uend_free_released,
};
