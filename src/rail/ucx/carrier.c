/* SPDX-License-Identifier: BSD-3-Clause */
/* The UCX transport's carrier: wake, and carrying by mapped stores or by
 * run messages.
 *
 * rig_end_ready stores `ready` and calls wake, which lets one carrier at a
 * time carry (rig_wake_serial, ../base/carrier.h).
 *
 * A peer on the same node has its end mapped here (ucp_rkey_ptr): the
 * carrier copies each transfer into the peer's inbound with plain stores,
 * then raises `arrived` once with release order -- the ordering fence --
 * and `sent` at home, since the source was read already.  No syscall, no
 * lock, one `arrived` update per batch however many transfers it holds.
 * `arrived` is a plain release store inside a window that failure waits
 * for (rig_count_window_open, ../base/carrier.h; src/abi/counts.c argues
 * it): the peer may raise it to RIG_COUNT_FAILED in the same instant, and
 * a failed count stays.  A compare-and-swap there cost an extra trip of
 * the line between the cores on every run (the receiver polls it).
 *
 * Otherwise (another node, or RIG_SHM_STORES=off) every wake's transfers
 * go as one message: on the peer's lane when the end's runs are small
 * (lane.c: rig's own TCP connection, whose frames the receiver reads with
 * a recv and hands to rig_carrier_run_in), else as one UCX active
 * message.  Either way the message is a header (the rail, the counts it
 * carries, its number among the end's messages) and the bytes, gathered
 * from the outbound copies (an iov: no copy at the sender).  The
 * receiver's handler finds its end by the rail's id, checks the message
 * against its receive list, lands the bytes and raises `arrived` (the
 * receiver's own compare-and-swap, rig_count_advance: never lowered,
 * never moved off RIG_COUNT_FAILED).  Every run goes eagerly, whatever
 * its size: UCX streams the fragments down the socket and the handler
 * copies the whole message out of UCX's buffer (one fragment up to the
 * TCP receive segment rig's context sets, 2 MiB: transport.c; forcing a
 * rendezvous above 128 KiB read 0.35-0.5x MPI's bandwidth again, measured
 * after waiters drove the worker), where a rendezvous (UCX's
 * choice above its threshold) costs handshakes over TCP that each wait
 * for the other side's progress thread -- measured across 2 simulated
 * hosts under load, 1 MiB runs went from 0.24x to 0.69x MPI's bandwidth
 * in the same run (noisy; benchmarks/multihost.sh measures it).  So a
 * run costs one message and no fence; puts did cost more over TCP: each
 * put and the `arrived` put (without a memory handle, UCX's software
 * path) were acknowledged one by one, the fence waited for them, and UCX
 * 1.13.1 aborted the process (ucs_fatal "Endpoint timeout" in
 * ucp_put_handler) when a software put met an endpoint that had failed.
 * (The handler still takes a rendezvous, landing it straight in the
 * inbound copy, should UCX ever choose one.)
 * A large run sent as several messages of at most 256 KiB each, so that
 * UCX's receive buffer would stay in the cache for the handler's copy,
 * lost (1 MiB runs across 2 simulated hosts at a load of 7-10, one
 * perf-sampled run each): the handler's copy took as many samples per
 * MiB or more (+3% with the 2 MiB segment, +34% with one of 257 KiB), and
 * a receiver still checking run k found the first parts of run k + 2
 * over it (one progress call lands every part the socket holds) and
 * waited for a drive to bring the rest.
 *
 * Ordering.  A rendezvous may land after an eager message sent later, so
 * `arrived` moves in the order of the messages: each landed message's
 * count waits in rx_done until the earlier ones landed.  Two messages
 * never write the same bytes out of order: a copy is written again only
 * after `sent` covered its last run, and `sent` moves when the send
 * completes -- for a rendezvous, once its bytes landed.  Eager messages
 * on one endpoint are handled in the order they were sent, so with every
 * run eager none overtakes another; the source is reusable once UCX
 * copied it (the send completed).
 *
 * The carrier takes the worker lock only if it is free; when the
 * progress thread (or another carrier) holds it, the end is handed to the
 * progress thread, which carries it.  `sent` moves as messages complete,
 * in order; a ring of RIG_BATCHES messages per end bounds what is in
 * flight, and a wake that finds it full leaves the carrying to the
 * progress thread, once a message completes.
 *
 * A jump of ready over many runs carries only the last two runs' worth
 * (rig_carry_from): a landing copy keeps only its last run anyway.  The
 * message then says where its bytes start (`from`) besides the count it
 * continues from (`first`).
 *
 * No stale bytes: once the job failed here (or the rail's `arrived` is
 * RIG_COUNT_FAILED) a run message is dropped unread, so a link that comes
 * back after a failure lands nothing. */
#include "ucx_internal.h"

#include "../base/carrier.h"

#include <stdlib.h>
#include <string.h>

#define RIG_AM_RUN 0x7268 /* "rh": a run (or a failure notice) */

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
static inline size_t span_readied(const struct rig_span *span, size_t j,
                                  uint64_t left)
{
    size_t m = span[j].count;
    return m > 1 && m <= left ? m : 1;
}

static void carry_mapped(rig_uend *e, uint64_t ready)
{
    const size_t n = e->nsend;
    uint64_t run;
    size_t j;
    if (!rig_count_window_open(e->peer_counts_map)) {
        /* The receiver's `arrived` is failing: nothing lands any more, and
         * the sources are free again (as a carry would leave them). */
        e->carried = ready;
        rig_count_advance(e->counts, RIG_SENT_AT, ready);
        return;
    }
    for (uint64_t c = carry_start(e, ready, &run, &j); c < ready;) {
        const rig_transfer *t = &e->send[j];
        size_t k = (size_t)(run & 1);
        size_t m = span_readied(e->span, j, ready - c);
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
    rig_count_window_close(e->peer_counts_map, ready);
    e->next_run = run;
    e->next_j = j;
    e->carried = ready;
    rig_count_advance(e->counts, RIG_SENT_AT, ready);
}

/* ---- the index of ends by rail id -----------------------------------------
 */

static size_t index_slot(const rig_ucx *u, int64_t id)
{
    uint64_t h = (uint64_t)id * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (u->index_cap - 1);
}

static rig_uend *index_find(const rig_ucx *u, int64_t id)
{
    if (u->index_cap == 0) {
        return NULL;
    }
    for (rig_uend *e = u->index[index_slot(u, id)]; e != NULL;
         e = e->index_next) {
        if (e->id == id) {
            return e;
        }
    }
    return NULL;
}

/* The spans of back-to-back transfers of the receive list, by dst only:
 * where a rendezvous may land in one piece. */
static struct rig_span *rspans_make(const rig_transfer *t, size_t n)
{
    struct rig_span *s = malloc((n > 0 ? n : 1) * sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    for (size_t j = n; j-- > 0;) {
        s[j].count = 1;
        s[j].bytes = (size_t)t[j].length;
        if (j + 1 < n && t[j + 1].dst == t[j].dst + t[j].length) {
            s[j].count += s[j + 1].count;
            s[j].bytes += s[j + 1].bytes;
        }
    }
    return s;
}

bool rig_uend_index_add(rig_uend *e, char **err)
{
    rig_ucx *u = e->ucx;
    e->rspan = rspans_make(e->receive, e->nreceive);
    if (e->rspan == NULL) {
        return rig_err(err, "nomem: spans of %zu transfers", e->nreceive);
    }
    if (u->index_cap == 0) {
        u->index_cap = 64;
        u->index = calloc(u->index_cap, sizeof(*u->index));
        if (u->index == NULL) {
            u->index_cap = 0;
            free(e->rspan);
            e->rspan = NULL;
            return rig_err(err, "nomem: the index of ends");
        }
    }
    size_t s = index_slot(u, e->id);
    e->index_next = u->index[s];
    u->index[s] = e;
    e->indexed = true;
    e->rx_next = 1;
    return true;
}

void rig_uend_index_del(rig_uend *e)
{
    rig_ucx *u = e->ucx;
    if (!e->indexed) {
        return;
    }
    for (rig_uend **p = &u->index[index_slot(u, e->id)]; *p != NULL;
         p = &(*p)->index_next) {
        if (*p == e) {
            *p = e->index_next;
            break;
        }
    }
    e->indexed = false;
    rig_lanes_forget(u, e);
    free(e->rspan);
    e->rspan = NULL;
}

/* ---- receiving ------------------------------------------------------------
 */

/* The receive list's walk: count c is transfer j of run `run`. */
typedef struct {
    uint64_t run;
    size_t j;
} place;

static place place_of(const rig_uend *e, uint64_t c)
{
    place p = {(c - 1) / e->nreceive, (size_t)((c - 1) % e->nreceive)};
    return p;
}

static uint8_t *landing(const rig_uend *e, place p)
{
    return e->mem.base + e->layout.inbound_at +
           (size_t)(p.run & 1) * (e->layout.inbound_len / 2) +
           (size_t)e->receive[p.j].dst;
}

/* The bytes counts first..last carry. */
static uint64_t range_bytes(const rig_uend *e, uint64_t first, uint64_t last)
{
    const size_t n = e->nreceive;
    uint64_t per_run = 0;
    for (size_t j = 0; j < n; j++) {
        per_run += (uint64_t)e->receive[j].length;
    }
    uint64_t bytes = 0;
    place p = place_of(e, first);
    uint64_t c = first;
    /* Walk to the end of first's run, whole runs at once, then the tail. */
    while (c <= last && p.j != 0) {
        bytes += (uint64_t)e->receive[p.j].length;
        c++;
        if (++p.j == n) {
            p.j = 0;
        }
    }
    uint64_t runs = (last - c + 1) / n;
    bytes += runs * per_run;
    c += runs * n;
    for (size_t j = 0; c <= last; c++, j++) {
        bytes += (uint64_t)e->receive[j].length;
    }
    return bytes;
}

/* The landed message seq moves `arrived` once every earlier one landed. */
static void landed(rig_uend *e, uint32_t seq, uint64_t count)
{
    e->rx_done[seq % RIG_BATCHES] = count;
    uint64_t arrived = 0;
    while (e->rx_done[e->rx_retire % RIG_BATCHES] != 0) {
        arrived = e->rx_done[e->rx_retire % RIG_BATCHES];
        e->rx_done[e->rx_retire % RIG_BATCHES] = 0;
        e->rx_retire++;
    }
    if (arrived != 0) {
        rig_count_advance(e->counts, RIG_ARRIVED_AT, arrived);
        e->ucx->moved = true;
    }
}

/* Copies an eager message's bytes into the inbound copies. */
static void land_copy(rig_uend *e, uint64_t first, uint64_t last,
                      const uint8_t *data)
{
    const size_t n = e->nreceive;
    place p = place_of(e, first);
    for (uint64_t c = first; c <= last;) {
        size_t m = span_readied(e->rspan, p.j, last - c + 1);
        size_t len =
            m == 1 ? (size_t)e->receive[p.j].length : e->rspan[p.j].bytes;
        memcpy(landing(e, p), data, len);
        data += len;
        c += m;
        p.j += m;
        if (p.j == n) {
            p.j = 0;
            p.run++;
        }
    }
}

/* A rendezvous in flight: where its message lands. */
typedef struct {
    rig_uend *e;
    uint32_t seq;
    uint64_t count;
    ucp_dt_iov_t *iov; /* NULL: one piece */
} rx_ctx;

static void rx_done_cb(void *req, ucs_status_t st, size_t len, void *arg)
{
    (void)len;
    rx_ctx *x = arg;
    rig_uend *e = x->e;
    if (st == UCS_OK) {
        landed(e, x->seq, x->count);
    } else if (!atomic_load(&e->ucx->closing)) {
        rig_ucx_fail_later(e->ucx, "failed: a run from rank %d failed: %s",
                           e->peer, rig_ucs_str(st));
    }
    free(x->iov);
    free(x);
    if (req != NULL) {
        ucp_request_free(req);
        atomic_fetch_sub(&e->ucx->outstanding, 1);
    }
}

/* The pieces counts first..last land in: one when they lie back to back
 * in one copy (*one), else an iov (malloc'd). */
static ucp_dt_iov_t *rx_pieces(rig_uend *e, uint64_t first, uint64_t last,
                               size_t *npieces, uint8_t **one)
{
    const size_t n = e->nreceive;
    place p = place_of(e, first);
    size_t m = span_readied(e->rspan, p.j, last - first + 1);
    if (last - first + 1 == m) {
        *one = landing(e, p);
        *npieces = 1;
        return NULL;
    }
    size_t cap = 0;
    for (uint64_t c = first; c <= last; cap++) {
        place q = place_of(e, c);
        c += span_readied(e->rspan, q.j, last - c + 1);
    }
    ucp_dt_iov_t *iov = malloc(cap * sizeof(*iov));
    if (iov == NULL) {
        return NULL;
    }
    size_t k = 0;
    for (uint64_t c = first; c <= last; k++) {
        m = span_readied(e->rspan, p.j, last - c + 1);
        iov[k].buffer = landing(e, p);
        iov[k].length =
            m == 1 ? (size_t)e->receive[p.j].length : e->rspan[p.j].bytes;
        c += m;
        p.j += m;
        if (p.j == n) {
            p.j = 0;
            p.run++;
        }
    }
    *npieces = k;
    *one = NULL;
    return iov;
}

/* The end a run message is for, once it checked against the receive
 * list (and took its place in the sequence); NULL when it is dropped: the
 * job failed or is closing, no such end, a failure notice (which fails
 * the end's counts), a failed rail, or a message the list does not match
 * (which fails the job). */
static rig_uend *run_accept(rig_ucx *u, const rig_run_hdr *hp, size_t len)
{
    if (atomic_load(&u->closing) || rig_failure_failed(&u->fail)) {
        return NULL;
    }
    const rig_run_hdr h = *hp;
    rig_uend *e = index_find(u, h.id);
    if (e == NULL) {
        return NULL;
    }
    if (h.first == 0) {
        /* The peer failed the job: this end's counts of the rail fail. */
        rig_count_advance(e->counts, RIG_READY_AT, RIG_COUNT_FAILED);
        rig_count_advance(e->counts, RIG_SENT_AT, RIG_COUNT_FAILED);
        rig_count_advance(e->counts, RIG_ARRIVED_AT, RIG_COUNT_FAILED);
        return NULL;
    }
    if (rig_count_load(e->counts, RIG_ARRIVED_AT) == RIG_COUNT_FAILED) {
        return NULL; /* the rail failed: nothing lands any more */
    }
    /* What the receive list says the message must be. */
    if (e->nreceive == 0 || h.first != e->rx_next || h.count < h.first ||
        h.from < h.first || h.from > h.count || h.count >= RIG_COUNT_FAILED ||
        h.seq != e->rx_seq || e->rx_done[h.seq % RIG_BATCHES] != 0 ||
        range_bytes(e, h.from, h.count) != (uint64_t)len) {
        rig_ucx_fail_later(u,
                           "failed: rank %d sent rail %lld a run its "
                           "receive list does not match (counts %llu..%llu, "
                           "%zu bytes)",
                           e->peer, (long long)e->id,
                           (unsigned long long)h.first,
                           (unsigned long long)h.count, len);
        return NULL;
    }
    e->rx_next = h.count + 1;
    e->rx_seq++;
    return e;
}

void rig_carrier_run_in(rig_ucx *u, const rig_run_hdr *h, const void *data,
                        size_t len)
{
    rig_uend *e = run_accept(u, h, len);
    if (e != NULL) {
        land_copy(e, h->from, h->count, data);
        landed(e, h->seq, h->count);
    }
}

/* ---- a lane frame landing read by read ----------------------------------- */

static const ucp_dt_iov_t *landing_piece(const rig_landing *l, size_t k)
{
    return l->iov != NULL ? &l->iov[k] : &l->one;
}

/* Fills the next n bytes of the pieces from data (NULL: a read put them
 * there already). */
static void landing_fill(rig_landing *l, const uint8_t *data, size_t n)
{
    while (n > 0) {
        const ucp_dt_iov_t *p = landing_piece(l, l->at);
        size_t k = p->length - l->off < n ? p->length - l->off : n;
        if (data != NULL) {
            memcpy((uint8_t *)p->buffer + l->off, data, k);
            data += k;
        }
        l->off += k;
        n -= k;
        if (l->off == p->length) {
            l->at++;
            l->off = 0;
        }
    }
}

void rig_landing_open(rig_ucx *u, const rig_run_hdr *h, size_t len,
                      const uint8_t *data, size_t have, rig_landing *l)
{
    *l = (rig_landing){.left = len};
    rig_uend *e = run_accept(u, h, len);
    uint8_t *one = NULL;
    size_t n = 0;
    ucp_dt_iov_t *iov =
        e != NULL ? rx_pieces(e, h->from, h->count, &n, &one) : NULL;
    if (e != NULL && iov == NULL && one == NULL) {
        rig_ucx_fail_later(u, "nomem: a run of %zu bytes from rank %d", len,
                           e->peer);
        e = NULL;
    }
    if (e != NULL) {
        *l = (rig_landing){.e = e,
                           .seq = h->seq,
                           .count = h->count,
                           .iov = iov,
                           .one = {one, len},
                           .n = n,
                           .left = len};
        landing_fill(l, data, have);
    }
    l->left -= have;
}

void rig_landing_check(rig_ucx *u, rig_landing *l)
{
    if (l->e != NULL &&
        (atomic_load(&u->closing) || rig_failure_failed(&u->fail) ||
         rig_count_load(l->e->counts, RIG_ARRIVED_AT) == RIG_COUNT_FAILED)) {
        rig_landing_drop(l);
    }
}

bool rig_landing_advance(rig_landing *l, size_t n)
{
    if (l->e != NULL) {
        landing_fill(l, NULL, n);
    }
    l->left -= n;
    if (l->left != 0) {
        return false;
    }
    if (l->e != NULL) {
        landed(l->e, l->seq, l->count);
    }
    rig_landing_drop(l);
    return true;
}

size_t rig_landing_iov(const rig_landing *l, struct iovec *v, size_t max)
{
    size_t k = 0;
    for (size_t at = l->at; at < l->n && k < max; at++) {
        const ucp_dt_iov_t *p = landing_piece(l, at);
        size_t skip = at == l->at ? l->off : 0;
        v[k++] = (struct iovec){(uint8_t *)p->buffer + skip, p->length - skip};
    }
    return k;
}

void rig_landing_drop(rig_landing *l)
{
    free(l->iov);
    l->iov = NULL;
    l->e = NULL;
}

static ucs_status_t run_am(void *arg, const void *header, size_t header_len,
                           void *data, size_t len,
                           const ucp_am_recv_param_t *param)
{
    rig_ucx *u = arg;
    rig_run_hdr h;
    if (header_len != sizeof(h)) {
        return UCS_OK; /* dropped (a rendezvous is answered as dropped) */
    }
    memcpy(&h, header, sizeof(h));
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0) {
        rig_carrier_run_in(u, &h, data, len);
        return UCS_OK;
    }
    rig_uend *e = run_accept(u, &h, len);
    if (e == NULL) {
        return UCS_OK;
    }
    rx_ctx *x = calloc(1, sizeof(*x));
    size_t npieces = 0;
    uint8_t *one = NULL;
    ucp_dt_iov_t *iov =
        x != NULL ? rx_pieces(e, h.from, h.count, &npieces, &one) : NULL;
    if (x == NULL || (iov == NULL && one == NULL)) {
        free(x);
        rig_ucx_fail_later(u, "nomem: a run of %zu bytes from rank %d", len,
                           e->peer);
        return UCS_OK;
    }
    *x = (rx_ctx){.e = e, .seq = h.seq, .count = h.count, .iov = iov};
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                        UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_DATATYPE,
        .cb.recv_am = rx_done_cb,
        .user_data = x,
        .datatype = iov != NULL ? ucp_dt_make_iov() : ucp_dt_make_contig(1),
    };
    if (iov == NULL) {
        p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        p.memh = e->mem.memh;
    }
    ucs_status_ptr_t r = ucp_am_recv_data_nbx(
        u->worker, data, iov != NULL ? (void *)iov : (void *)one,
        iov != NULL ? npieces : len, &p);
    if (UCS_PTR_IS_ERR(r)) {
        rx_done_cb(NULL, UCS_PTR_STATUS(r), 0, x);
    } else if (r == NULL) {
        rx_done_cb(NULL, UCS_OK, len, x);
    } else {
        /* In flight: the progress thread keeps watching it (outstanding)
         * rather than sleeping on the worker's events alone. */
        atomic_fetch_add(&u->outstanding, 1);
    }
    return UCS_OK;
}

bool rig_carrier_init(rig_ucx *u, char **err)
{
    return rig_ucx_am_handler(u, RIG_AM_RUN, run_am, err);
}

/* ---- sending ---------------------------------------------------------------
 */

static void handoff(rig_uend *e)
{
    rig_ucx *u = e->ucx;
    if (atomic_exchange(&e->queued, true)) {
        return; /* queued already: the thread carries whatever is due */
    }
    rig_uend *head = atomic_load(&u->handoff);
    do {
        e->queue_next = head;
    } while (!atomic_compare_exchange_weak(&u->handoff, &head, e));
    rig_ucx_kick(u);
}

/* Pops the completed batches at the head of the ring; `sent` follows. */
static void batches_retire(rig_uend *e)
{
    uint64_t sent = 0;
    while (e->batch_n > 0 && e->batch[e->batch_head].pending == 0) {
        rig_batch *b = &e->batch[e->batch_head];
        sent = b->c;
        if (b->iov != b->iov_inline) {
            free(b->iov);
        }
        b->iov = NULL;
        e->batch_head = (e->batch_head + 1) % RIG_BATCHES;
        e->batch_n--;
    }
    if (sent != 0) {
        rig_count_advance(e->counts, RIG_SENT_AT, sent);
        e->ucx->moved = true;
        if (e->ring_full) {
            e->ring_full = false;
            handoff(e); /* a wake waited for room */
        }
    }
}

void rig_carrier_lane_sent(rig_batch *b)
{
    b->pending = 0;
    batches_retire(b->end);
    atomic_fetch_sub(&b->end->ucx->outstanding, 1);
}

static void send_done(void *req, ucs_status_t st, void *user_data)
{
    rig_batch *b = user_data;
    rig_uend *e = b->end;
    if (st != UCS_OK && !atomic_load(&e->ucx->closing)) {
        rig_ucx_fail_later(e->ucx, "failed: a run to rank %d failed: %s",
                           e->peer, rig_ucs_str(st));
    }
    ucp_request_free(req);
    if (--b->pending == 0) {
        batches_retire(e);
        atomic_fetch_sub(&e->ucx->outstanding, 1);
    }
}

/* The sources of counts from+1..ready, walked from (run, j): one iov
 * entry per span readied.  False without memory. */
static bool tx_pieces(rig_uend *e, rig_batch *b, uint64_t from, uint64_t ready,
                      uint64_t *run, size_t *j)
{
    const size_t n = e->nsend;
    size_t cap = sizeof(b->iov_inline) / sizeof(b->iov_inline[0]);
    b->iov = b->iov_inline;
    b->niov = 0;
    for (uint64_t c = from; c < ready;) {
        const rig_transfer *t = &e->send[*j];
        size_t m = span_readied(e->span, *j, ready - c);
        if (b->niov == cap) {
            ucp_dt_iov_t *more = malloc(2 * cap * sizeof(*more));
            if (more == NULL) {
                if (b->iov != b->iov_inline) {
                    free(b->iov);
                }
                b->iov = NULL;
                return false;
            }
            memcpy(more, b->iov, cap * sizeof(*more));
            if (b->iov != b->iov_inline) {
                free(b->iov);
            }
            b->iov = more;
            cap *= 2;
        }
        b->iov[b->niov].buffer =
            (void *)(e->out + (size_t)(*run & 1) * e->out_copy +
                     (size_t)t->src);
        b->iov[b->niov].length = m == 1 ? (size_t)t->length : e->span[*j].bytes;
        b->niov++;
        c += m;
        *j += m;
        if (*j == n) {
            *j = 0;
            (*run)++;
        }
    }
    return true;
}

/* Sends b as one UCX active message: true while it is in flight (send_done
 * follows), false once UCX took it whole or refused it (the job then
 * fails).  Worker lock held. */
static bool am_send(rig_uend *e, rig_batch *b)
{
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                        UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_FLAGS,
        .cb.send = send_done,
        .user_data = b,
        .datatype = ucp_dt_make_iov(),
        /* Eager at every size: see the file's comment. */
        .flags = UCP_AM_SEND_FLAG_EAGER,
    };
    /* One piece goes as contiguous bytes: UCX tries its short protocol
     * (no request, the header and bytes copied into one send) only then,
     * which a ping-pong's 8 B runs take. */
    const void *buf = b->iov;
    size_t count = b->niov;
    if (b->niov == 1) {
        p.datatype = ucp_dt_make_contig(1);
        buf = b->iov[0].buffer;
        count = b->iov[0].length;
    }
    ucs_status_ptr_t r = ucp_am_send_nbx(e->ep, RIG_AM_RUN, &b->hdr,
                                         sizeof(b->hdr), buf, count, &p);
    if (UCS_PTR_IS_ERR(r)) {
        rig_ucx_fail_later(e->ucx,
                           "failed: ucp_am_send_nbx to rank %d failed: %s",
                           e->peer, rig_ucs_str(UCS_PTR_STATUS(r)));
    }
    return UCS_PTR_IS_PTR(r);
}

/* Sends counts carried+1..ready as one message, on the end's lane or as
 * a UCX active message; worker lock held. */
static void send_run(rig_uend *e, uint64_t ready)
{
    rig_ucx *u = e->ucx;
    if (e->batch_n == RIG_BATCHES) {
        e->ring_full = true; /* carried when a message completes */
        return;
    }
    rig_batch *b = &e->batch[(e->batch_head + e->batch_n) % RIG_BATCHES];
    uint64_t run;
    size_t j;
    uint64_t from = carry_start(e, ready, &run, &j);
    if (!tx_pieces(e, b, from, ready, &run, &j)) {
        rig_ucx_fail_later(u, "nomem: the pieces of a run to rank %d", e->peer);
        return;
    }
    b->c = ready;
    b->pending = 0;
    b->end = e;
    b->hdr = (rig_run_hdr){
        .id = e->id,
        .first = e->carried + 1,
        .from = from + 1,
        .count = ready,
        .seq = e->tx_seq,
    };
    e->batch_n++;
    bool in_flight = e->lane ? !rig_lane_send(u, e->peer, b) : am_send(e, b);
    e->tx_seq++;
    e->next_run = run;
    e->next_j = j;
    e->carried = ready;
    if (!in_flight) {
        batches_retire(e);
    } else {
        b->pending = 1;
        if (atomic_fetch_add(&u->outstanding, 1) == 0) {
            rig_ucx_kick(u); /* the progress thread may be asleep */
        }
    }
}

/* blocking: the progress thread, which may wait for the lock; a wake
 * takes it only when free and else hands over. */
static void carry_net(rig_uend *e, uint64_t ready, bool blocking)
{
    rig_ucx *u = e->ucx;
    if (blocking) {
        rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
    } else if (!rig_trylock(&u->worker_lock, UCX_LOCK_WORKER)) {
        handoff(e);
        return;
    }
    if (e->ep != NULL && e->rkey != NULL && !u->ep_closed[e->peer]) {
        send_run(e, ready);
    }
    rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
}

static void carry(rig_uend *e, bool blocking)
{
    uint64_t ready = rig_carry_due(e->counts, &e->carried, e->nsend, e->id);
    if (ready == 0) {
        return;
    }
    if (RIG_LIKELY(e->peer_in != NULL)) {
        carry_mapped(e, ready);
    } else {
        carry_net(e, ready, blocking);
    }
}

static void uend_wake_carry(void *self)
{
    carry(self, false);
}

static void progress_carry(void *self)
{
    carry(self, true);
}

void rig_uend_wake(void *self, uint64_t c)
{
    (void)c; /* may be stale: carry reads the count itself */
    rig_uend *e = self;
    rig_wake_serial(&e->wakes, uend_wake_carry, e);
}

void rig_carrier_handoffs(rig_ucx *u)
{
    rig_uend *e = atomic_exchange(&u->handoff, NULL);
    while (e != NULL) {
        rig_uend *next = e->queue_next;
        atomic_store(&e->queued, false);
        rig_wake_serial(&e->wakes, progress_carry, e);
        e = next;
    }
}

/* ---- failure ------------------------------------------------------------- */

/* The header lives until the send completes. */
static void notice_done(void *req, ucs_status_t st, void *user_data)
{
    (void)st;
    free(user_data);
    ucp_request_free(req);
}

void rig_uend_fail_peer(rig_uend *e)
{
    static const size_t at[] = {RIG_READY_AT, RIG_SENT_AT, RIG_ARRIVED_AT};
    if (e->peer_counts_map != NULL) {
        /* rig_count_advance, not a plain store: `arrived` waits for this
         * end's own carrier's window (a store of RIG_COUNT_FAILED outside
         * it could be overwritten by the carrier's store). */
        for (size_t i = 0; i < 3; i++) {
            rig_count_advance(e->peer_counts_map, at[i], RIG_COUNT_FAILED);
        }
        return;
    }
    if (e->ep == NULL || e->ucx->ep_closed[e->peer]) {
        return; /* the peer is lost: nothing reaches it */
    }
    /* A notice (first 0) on the rail: the header alone, sent eagerly; its
     * request is not waited for (the job's failure message follows). */
    rig_run_hdr *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        return;
    }
    h->id = e->id;
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                        UCP_OP_ATTR_FIELD_USER_DATA,
        .flags = UCP_AM_SEND_FLAG_EAGER,
        .cb.send = notice_done,
        .user_data = h,
    };
    ucs_status_ptr_t r =
        ucp_am_send_nbx(e->ep, RIG_AM_RUN, h, sizeof(*h), NULL, 0, &p);
    if (!UCS_PTR_IS_PTR(r)) {
        free(h); /* sent at once, or failed */
    }
}
