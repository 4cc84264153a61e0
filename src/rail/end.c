/* SPDX-License-Identifier: BSD-3-Clause */
/* UCX rail ends: making, connecting, carrying (the fast path), releasing.
 *
 * Carrying.  rig_end_ready stores `ready` and calls wake.  The wake lock is
 * a counter: the thread that moves it off 0 is the carrier; any other
 * thread only increments it and returns, and the carrier, before letting
 * go (a compare-and-swap back to 0), carries again if it moved.  So a
 * readied count is always carried, by one thread at a time, without a
 * thread ever waiting on another.
 *
 * A peer on the same node has its end mapped here (ucp_rkey_ptr): the
 * carrier copies each transfer into the peer's inbound with plain stores,
 * then stores `arrived` once with release order -- the ordering fence --
 * and `sent` at home, since the source was read already.  No syscall, no
 * lock, one `arrived` store per batch however many transfers it holds.
 * `arrived` is a plain store (the carrier is its only writer): a failure
 * raised at the peer in the same instant may be lowered once, which the
 * peer's progress thread repairs by re-raising its counts.
 *
 * Otherwise (another node, or RIG_SHM_STORES=off) the carrier posts UCX
 * puts under the worker lock: the transfers, ucp_worker_fence, the put of
 * `arrived`.  Puts that complete inline make `sent` immediate; the others
 * form a batch that the progress thread finishes, and `sent` advances as
 * batches complete in order. */
#include "ucx_internal.h"
#include "util_internal.h"

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

static const uint64_t failed_value = RIG_COUNT_FAILED;

/* ---- the mapped fast path ------------------------------------------------ */

/* How many transfers from j on one copy or put may carry: the whole span
 * when all of it is readied (left counts remain), else just transfer j. */
static inline size_t span_readied(const rig_uend *e, size_t j, uint64_t left)
{
    size_t m = e->span[j].count;
    return m > 1 && m <= left ? m : 1;
}

static void carry_mapped(rig_uend *e, uint64_t ready)
{
    const size_t n = e->nsend;
    uint64_t run = e->next_run;
    size_t j = e->next_j;
    for (uint64_t c = e->carried; c < ready;) {
        const rig_transfer *t = &e->send[j];
        size_t k = (size_t)(run & 1);
        size_t m = span_readied(e, j, ready - c);
        memcpy(e->peer_in + k * e->in_copy + (size_t)t->dst,
               e->out + k * e->out_copy + (size_t)t->src,
               m == 1 ? (size_t)t->length : e->span[j].bytes);
        c += m;
        j += m;
        if (j == n) {
            j = 0;
            run++;
        }
    }
    atomic_store_explicit(e->peer_arrived, ready, memory_order_release);
    e->next_run = run;
    e->next_j = j;
    e->carried = ready;
    rig_count_advance(e->counts, RIG_SENT_AT, ready);
}

/* ---- the put path -------------------------------------------------------- */

/* Pops the completed batches at the head of the ring; `sent` follows. */
static void batches_retire(rig_uend *e)
{
    uint64_t sent = 0;
    while (e->batch_n > 0 && e->batch[e->batch_head].pending == 0) {
        sent = e->batch[e->batch_head].c;
        e->batch_head = (e->batch_head + 1) % RIG_BATCHES;
        e->batch_n--;
    }
    if (sent != 0) {
        rig_count_advance(e->counts, RIG_SENT_AT, sent);
    }
}

static void put_done(void *req, ucs_status_t st, void *user_data)
{
    rig_batch *b = user_data;
    rig_uend *e = b->end;
    if (st != UCS_OK && !atomic_load(&e->ucx->closing)) {
        rig_ucx_fail_later(e->ucx, "failed: a put to rank %d failed: %s",
                           e->peer, rig_ucs_str(st));
    }
    ucp_request_free(req);
    if (--b->pending == 0) {
        batches_retire(e);
        atomic_fetch_sub(&e->ucx->outstanding, 1);
    }
}

/* Posts one put for batch b; false when it failed at once. */
static bool put(rig_uend *e, rig_batch *b, const void *src, size_t len,
                uint64_t raddr, bool registered)
{
    ucp_request_param_t p = {
        .op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = put_done,
        .user_data = b,
    };
    if (registered) {
        p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        p.memh = e->mem.memh;
    }
    ucs_status_ptr_t r = ucp_put_nbx(e->ep, src, len, raddr, e->rkey, &p);
    if (UCS_PTR_IS_ERR(r)) {
        rig_ucx_fail_later(e->ucx,
                           "failed: ucp_put_nbx to rank %d failed: "
                           "%s",
                           e->peer, rig_ucs_str(UCS_PTR_STATUS(r)));
        return false;
    }
    if (r != NULL) {
        b->pending++;
    }
    return true;
}

static void carry_put(rig_uend *e, uint64_t ready)
{
    rig_ucx *u = e->ucx;
    pthread_mutex_lock(&u->worker_lock);
    if (e->rkey == NULL) { /* closed */
        pthread_mutex_unlock(&u->worker_lock);
        return;
    }
    /* A full ring waits for its oldest batch (rare: 32 in flight). */
    rig_backoff bo = {0};
    while (e->batch_n == RIG_BATCHES) {
        if (ucp_worker_progress(u->worker) == 0) {
            rig_backoff_step(&bo);
        }
    }
    rig_batch *b = &e->batch[(e->batch_head + e->batch_n) % RIG_BATCHES];
    b->c = ready;
    b->value = ready;
    b->pending = 0;
    b->end = e;
    e->batch_n++;
    const size_t n = e->nsend;
    uint64_t run = e->next_run;
    size_t j = e->next_j;
    bool ok = true;
    for (uint64_t c = e->carried; c < ready && ok;) {
        const rig_transfer *t = &e->send[j];
        size_t k = (size_t)(run & 1);
        size_t m = span_readied(e, j, ready - c);
        ok = put(e, b, e->out + k * e->out_copy + (size_t)t->src,
                 m == 1 ? (size_t)t->length : e->span[j].bytes,
                 e->peer_in_addr + k * e->in_copy + (uint64_t)t->dst, true);
        c += m;
        j += m;
        if (j == n) {
            j = 0;
            run++;
        }
    }
    if (ok) {
        ucs_status_t st = ucp_worker_fence(u->worker);
        if (st != UCS_OK) {
            rig_ucx_fail_later(u, "failed: ucp_worker_fence failed: %s",
                               rig_ucs_str(st));
            ok = false;
        }
    }
    if (ok) {
        put(e, b, &b->value, sizeof(b->value), e->peer_counts + RIG_ARRIVED_AT,
            false);
    }
    e->next_run = run;
    e->next_j = j;
    e->carried = ready;
    if (b->pending == 0) {
        batches_retire(e);
    } else if (atomic_fetch_add(&u->outstanding, 1) == 0) {
        rig_ucx_kick(u); /* the progress thread may be asleep */
    }
    pthread_mutex_unlock(&u->worker_lock);
}

static void carry(rig_uend *e)
{
    uint64_t ready = rig_carry_due(e->counts, &e->carried, e->nsend, e->id);
    if (ready == 0) {
        return;
    }
    if (RIG_LIKELY(e->peer_in != NULL)) {
        carry_mapped(e, ready);
    } else {
        carry_put(e, ready);
    }
}

static void uend_wake_carry(void *self)
{
    carry(self);
}

static void uend_wake(void *self, uint64_t c)
{
    (void)c; /* may be stale: carry reads the count itself */
    rig_uend *e = self;
    rig_wake_serial(&e->wakes, uend_wake_carry, e);
}

/* ---- failure ------------------------------------------------------------- */

void rig_uend_tell_failed(rig_uend *e)
{
    static const size_t at[] = {RIG_READY_AT, RIG_SENT_AT, RIG_ARRIVED_AT};
    for (size_t i = 0; i < 3; i++) {
        if (e->peer_counts_map != NULL) {
            atomic_store_explicit(
                (atomic_uint_least64_t *)(e->peer_counts_map + at[i]),
                RIG_COUNT_FAILED, memory_order_release);
            continue;
        }
        ucp_request_param_t p = {.op_attr_mask = 0};
        ucs_status_ptr_t r =
            ucp_put_nbx(e->ep, &failed_value, sizeof(failed_value),
                        e->peer_counts + at[i], e->rkey, &p);
        if (UCS_PTR_IS_PTR(r)) {
            ucp_request_free(r);
        }
    }
}

/* ---- making, connecting, releasing --------------------------------------- */

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

bool rig_uend_make(rig_ucx *u, int peer, int64_t id, const rig_transfer *send,
                   size_t nsend, const rig_transfer *receive, size_t nreceive,
                   rig_uend **out, char **err)
{
    rig_uend *e = aligned_alloc(64, (sizeof(*e) + 63) / 64 * 64);
    if (e == NULL) {
        return rig_err(err, "nomem: aligned_alloc(%zu) failed", sizeof(*e));
    }
    memset(e, 0, sizeof(*e));
    atomic_init(&e->wakes, 0);
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
    pthread_mutex_lock(&u->worker_lock);
    bool ok = rig_endmem_alloc(u, e->layout.total, &e->mem, err);
    pthread_mutex_unlock(&u->worker_lock);
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
    pthread_mutex_lock(&u->list_lock);
    u->refs++;
    pthread_mutex_unlock(&u->list_lock);
    *out = e;
    return true;

err_mem:
    pthread_mutex_lock(&u->worker_lock);
    rig_endmem_free(u, &e->mem);
    pthread_mutex_unlock(&u->worker_lock);
err_free:
    uend_free_struct(e);
    return false;
}

void rig_uend_memory(const rig_uend *e, void **base, size_t *len)
{
    *base = e->mem.base;
    *len = e->mem.len;
}

void rig_uend_desc(const rig_uend *e, const void **desc, size_t *len)
{
    *desc = e->desc;
    *len = e->desc_len;
}

void rig_uend_peer_addrs(const rig_uend *e, uint64_t *counts,
                         uint64_t *outbound, uint64_t *inbound)
{
    *counts = e->peer_counts;
    *outbound = e->peer_out;
    *inbound = e->peer_in_addr;
}

int rig_uend_peer(const rig_uend *e)
{
    return e->peer;
}

void rig_uend_set_attached(rig_uend *e, bool mine, bool theirs)
{
    e->attached = mine;
    e->peer_attached = theirs;
}

bool rig_uend_attached(const rig_uend *e, bool *theirs)
{
    if (theirs != NULL) {
        *theirs = e->peer_attached;
    }
    return e->attached;
}

/* The ABI's release hook: the last reference to the end and its rail went.
 * The memory stays while the job is open -- the peer may still carry into
 * it -- and goes at close, or now if the job closed already. */
static void uend_release(void *self)
{
    rig_uend *e = self;
    rig_ucx *u = e->ucx;
    if (!e->listed) {
        e->end = NULL; /* a connect that failed; its caller discards e */
        return;
    }
    pthread_mutex_lock(&u->list_lock);
    e->held = false;
    e->end = NULL;
    e->rail = NULL;
    bool gone = !e->in_job;
    if (gone) {
        if (e->prev != NULL) {
            e->prev->next = e->next;
        } else {
            u->ends = e->next;
        }
        if (e->next != NULL) {
            e->next->prev = e->prev;
        }
    }
    pthread_mutex_unlock(&u->list_lock);
    if (gone) {
        rig_uend_free(e);
    }
}

bool rig_uend_connect(rig_uend *e, const void *desc, size_t len, rig_rail **out,
                      char **err)
{
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
    pthread_mutex_lock(&u->worker_lock);
    ucp_ep_h ep;
    if (!rig_ucx_ep(u, e->peer, &ep, err)) {
        pthread_mutex_unlock(&u->worker_lock);
        return false;
    }
    ucp_rkey_h rkey;
    ucs_status_t st =
        ucp_ep_rkey_unpack(ep, (const uint8_t *)desc + sizeof(w), &rkey);
    if (st != UCS_OK) {
        pthread_mutex_unlock(&u->worker_lock);
        return rig_err(err,
                       "system: ucp_ep_rkey_unpack of rank %d's end "
                       "failed: %s",
                       e->peer, rig_ucs_str(st));
    }
    void *map = NULL;
    if (u->set.shm_stores != RIG_OFF) {
        st = ucp_rkey_ptr(rkey, w.base, &map);
        if (st != UCS_OK) {
            map = NULL;
            if (u->set.shm_stores == RIG_ON) {
                ucp_rkey_destroy(rkey);
                pthread_mutex_unlock(&u->worker_lock);
                return rig_err(err,
                               "unsupported: RIG_SHM_STORES=on but "
                               "rank %d's end is not mapped here "
                               "(ucp_rkey_ptr: %s)",
                               e->peer, rig_ucs_str(st));
            }
        }
    }
    pthread_mutex_unlock(&u->worker_lock);

    rig_end_desc d = {
        .wake = uend_wake,
        .ready_fn = NULL,
        .release = uend_release,
        .self = e,
        .receive = e->receive,
        .nreceive = e->nreceive,
    };
    rig_end_desc_areas(&d, &e->layout, e->mem.base);
    rig_end *end;
    if (!rig_end_make(&d, &end, err)) {
        goto err_rkey;
    }
    rig_rail *rail;
    if (!rig_rail_make(e->id, end, &rail, err)) {
        rig_end_release(end); /* e is not listed: the hook does nothing */
        goto err_rkey;
    }
    e->ep = ep;
    e->rkey = rkey;
    e->peer_base = w.base;
    e->peer_counts = w.base + w.counts_at;
    e->peer_out = w.base + w.outbound_at;
    e->peer_in_addr = w.base + w.inbound_at;
    if (map != NULL) {
        e->peer_counts_map = (uint8_t *)map + w.counts_at;
        e->peer_arrived =
            (atomic_uint_least64_t *)(e->peer_counts_map + RIG_ARRIVED_AT);
        e->peer_in = (uint8_t *)map + w.inbound_at;
    }
    e->end = end;
    e->rail = rail;
    pthread_mutex_lock(&u->list_lock);
    e->listed = true;
    e->held = true;
    e->in_job = true;
    e->prev = NULL;
    e->next = u->ends;
    if (u->ends != NULL) {
        u->ends->prev = e;
    }
    u->ends = e;
    bool failed = atomic_load(&u->failed);
    pthread_mutex_unlock(&u->list_lock);
    if (failed) {
        rig_end_fail(end);
    }
    *out = rail;
    return true;

err_rkey:
    pthread_mutex_lock(&u->worker_lock);
    ucp_rkey_destroy(rkey);
    pthread_mutex_unlock(&u->worker_lock);
    return false;
}

void rig_uend_free(rig_uend *e)
{
    rig_ucx *u = e->ucx;
    pthread_mutex_lock(&u->worker_lock);
    if (e->rkey != NULL) {
        ucp_rkey_destroy(e->rkey);
        e->rkey = NULL;
    }
    rig_endmem_free(u, &e->mem);
    pthread_mutex_unlock(&u->worker_lock);
    uend_free_struct(e);
    rig_ucx_unref(u);
}

void rig_uend_discard(rig_uend *e, rig_rail *rail)
{
    rig_ucx *u = e->ucx;
    if (e->listed) {
        pthread_mutex_lock(&u->list_lock);
        if (e->prev != NULL) {
            e->prev->next = e->next;
        } else {
            u->ends = e->next;
        }
        if (e->next != NULL) {
            e->next->prev = e->prev;
        }
        e->listed = false;
        pthread_mutex_unlock(&u->list_lock);
    }
    if (rail != NULL) {
        rig_rail_release(rail); /* e is unlisted: the hook does nothing */
    }
    rig_uend_free(e);
}
