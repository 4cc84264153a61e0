/* SPDX-License-Identifier: BSD-3-Clause */
/* The UCX transport's carrier: wake, and carrying by mapped stores or by
 * UCX puts.
 *
 * rig_end_ready stores `ready` and calls wake, which lets one carrier at a
 * time carry (rig_wake_serial, ../base/carrier.h).
 *
 * A peer on the same node has its end mapped here (ucp_rkey_ptr): the
 * carrier copies each transfer into the peer's inbound with plain stores,
 * then raises `arrived` once with release order -- the ordering fence --
 * and `sent` at home, since the source was read already.  No syscall, no
 * lock, one `arrived` update per batch however many transfers it holds.
 * `arrived` is raised by a compare-and-swap that never lowers it and
 * never leaves RIG_COUNT_FAILED (rig_count_advance): the peer may raise it
 * to RIG_COUNT_FAILED in the same instant, and a failed count stays.
 *
 * Otherwise (another node, or RIG_SHM_STORES=off) the carrier posts UCX
 * puts under the worker lock: the transfers, ucp_worker_fence, then a UCX
 * compare-and-swap of `arrived` from the count the previous batch stored
 * to this one's -- the carrier is its only other writer, so it fails only
 * when the peer raised it to RIG_COUNT_FAILED, which then stays (atomics
 * are in UCX's cpu mode, atomic with the peer's own CPU compare-and-swap:
 * transport.c).  The fence orders each batch's swap after the previous
 * one.  Puts that complete inline make `sent` immediate; the others form
 * a batch that the progress thread finishes, and `sent` advances as
 * batches complete in order.
 *
 * A jump of ready over many runs carries only the last two runs' worth
 * (rig_carry_from): a landing copy keeps only its last run anyway. */
#include "ucx_internal.h"

#include "../base/carrier.h"

#include <string.h>

static const uint64_t failed_value = RIG_COUNT_FAILED;

/* Where carrying to ready starts; jumps past what a copy can hold. */
static inline uint64_t carry_start(rig_uend *e, uint64_t ready, uint64_t *run,
                                   size_t *j)
{
    *run = e->next_run;
    *j = e->next_j;
    return rig_carry_from(e->carried, ready, e->nsend, run, j);
}

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
    uint64_t run;
    size_t j;
    for (uint64_t c = carry_start(e, ready, &run, &j); c < ready;) {
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
    rig_count_advance(e->peer_counts_map, RIG_ARRIVED_AT, ready);
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

/* Posts the compare-and-swap of the peer's `arrived` for batch b: from
 * b->old (what the previous batch stored) to b->value; b->value then
 * receives what was there.  False when it failed at once. */
static bool swap_arrived(rig_uend *e, rig_batch *b)
{
    ucp_request_param_t p = {
        .op_attr_mask =
            UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
            UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER,
        .cb.send = put_done,
        .user_data = b,
        .datatype = ucp_dt_make_contig(sizeof(uint64_t)),
        .reply_buffer = &b->value,
    };
    ucs_status_ptr_t r =
        ucp_atomic_op_nbx(e->ep, UCP_ATOMIC_OP_CSWAP, &b->old, 1,
                          e->peer_counts + RIG_ARRIVED_AT, e->rkey, &p);
    if (UCS_PTR_IS_ERR(r)) {
        rig_ucx_fail_later(e->ucx,
                           "failed: ucp_atomic_op_nbx to rank %d failed: %s",
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
    rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
    if (e->rkey == NULL) { /* closed */
        rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
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
    b->old = e->put_arrived;
    b->pending = 0;
    b->end = e;
    e->batch_n++;
    const size_t n = e->nsend;
    uint64_t run;
    size_t j;
    bool ok = true;
    for (uint64_t c = carry_start(e, ready, &run, &j); c < ready && ok;) {
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
    if (ok && swap_arrived(e, b)) {
        e->put_arrived = ready;
    }
    e->next_run = run;
    e->next_j = j;
    e->carried = ready;
    if (b->pending == 0) {
        batches_retire(e);
    } else if (atomic_fetch_add(&u->outstanding, 1) == 0) {
        rig_ucx_kick(u); /* the progress thread may be asleep */
    }
    rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
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

void rig_uend_wake(void *self, uint64_t c)
{
    (void)c; /* may be stale: carry reads the count itself */
    rig_uend *e = self;
    rig_wake_serial(&e->wakes, uend_wake_carry, e);
}

/* ---- failure ------------------------------------------------------------- */

void rig_uend_fail_peer(rig_uend *e)
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
