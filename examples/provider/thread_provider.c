/* SPDX-License-Identifier: BSD-3-Clause */
/* A worked rail provider: both ends in one process, bytes carried by a
 * thread of the provider's own (see rig/provider.h, steps 1-6).
 *
 * wake only records that an end has work and signals the carrier thread,
 * so rig_end_ready never waits on a copy; the carrier moves the bytes,
 * raises the receiver's `arrived` after them and the sender's `sent`.
 * The pair's memory and thread live until both ends are released: the
 * last release joins the thread, then frees.  main() runs a halo exchange
 * over it from two threads, checks every byte, fails a rail on purpose and
 * checks that waits end.  Needs only librig and rig/provider.h. */
#include <rig/provider.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the provider -------------------------------------------------------- */

typedef struct tp_pair tp_pair;

typedef struct {
    tp_pair *pair;
    int side;        /* 0: end a, 1: end b */
    rig_transfer *t; /* what this side sends */
    size_t n;
    uint64_t carried;    /* the carrier thread's alone */
    atomic_bool pending; /* wake -> carrier: ready moved */
} tp_end;

struct tp_pair {
    pthread_mutex_t lock; /* the signal below */
    pthread_cond_t cond;
    bool stop;
    pthread_t thread;
    atomic_int holds; /* ends not released yet */
    uint8_t *mem[2];
    rig_end_layout layout[2];
    tp_end end[2];
};

static uint8_t *at(tp_pair *p, int s, size_t off)
{
    return p->mem[s] + off;
}

/* Step 3: everything up to `ready` of side s, then arrived and sent. */
static void carry(tp_pair *p, int s)
{
    tp_end *me = &p->end[s];
    const rig_end_layout *lf = &p->layout[s], *lt = &p->layout[1 - s];
    uint8_t *from = at(p, s, lf->counts_at), *to = at(p, 1 - s, lt->counts_at);
    uint64_t ready = rig_count_load(from, RIG_READY_AT);
    if (ready == RIG_COUNT_FAILED || ready <= me->carried || me->n == 0) {
        return;
    }
    size_t out_copy = lf->outbound_len / 2, in_copy = lt->inbound_len / 2;
    /* Counts that a later run overwrites in the same copy are skipped, so
     * a jump of ready of any size costs at most 2n copies. */
    for (uint64_t k = rig_count_carry_from(me->carried, ready, me->n);
         k <= ready; k++) {
        const rig_transfer *t = &me->t[rig_count_transfer(k, me->n)];
        unsigned c = rig_count_copy(k, me->n);
        memcpy(at(p, 1 - s, lt->inbound_at + c * in_copy + (size_t)t->dst),
               at(p, s, lf->outbound_at + c * out_copy + (size_t)t->src),
               (size_t)t->length);
    }
    me->carried = ready;
    rig_count_advance(to, RIG_ARRIVED_AT, ready); /* after the bytes */
    rig_count_advance(from, RIG_SENT_AT, ready);  /* sources read */
}

static void *carrier(void *arg)
{
    tp_pair *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        bool any = false;
        for (int s = 0; s < 2; s++) {
            if (atomic_exchange(&p->end[s].pending, false)) {
                any = true;
                pthread_mutex_unlock(&p->lock);
                carry(p, s);
                pthread_mutex_lock(&p->lock);
            }
        }
        if (!any) {
            pthread_cond_wait(&p->cond, &p->lock); /* idle: no CPU */
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* Step 3's wake: any thread, concurrent, c maybe stale -- so it only
 * flags the end and signals; the carrier reads ready itself. */
static void tp_wake(void *self, uint64_t c)
{
    (void)c;
    tp_end *e = self;
    tp_pair *p = e->pair;
    atomic_store(&e->pending, true);
    pthread_mutex_lock(&p->lock);
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

static void pair_free(tp_pair *p)
{
    for (int s = 0; s < 2; s++) {
        free(p->mem[s]);
        free(p->end[s].t);
    }
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* Step 6: the last release stops the carrier (which may still be writing
 * into the other end) before the memory goes.  Never called from the
 * carrier, which holds no reference. */
static void tp_release(void *self)
{
    tp_end *e = self;
    tp_pair *p = e->pair;
    if (atomic_fetch_sub(&p->holds, 1) != 1) {
        return;
    }
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    pair_free(p);
}

/* Makes a rail whose end *a sends send and receives receive, *b the
 * opposite.  false with *err (malloc'd, a reason word first) on failure. */
static bool tp_make(int64_t id, const rig_transfer *send, size_t nsend,
                    const rig_transfer *receive, size_t nreceive, rig_rail **a,
                    rig_rail **b, char **err)
{
    /* Step 1: check and lay out both ends. */
    if (!rig_check_transfers(send, nsend, receive, nreceive, err)) {
        return false;
    }
    tp_pair *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        *err = strdup("nomem: tp_make");
        return false;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    const rig_transfer *lists[2] = {send, receive};
    size_t counts[2] = {nsend, nreceive};
    for (int s = 0; s < 2; s++) {
        if (!rig_end_layout_make(lists[s], counts[s], lists[1 - s],
                                 counts[1 - s], 0, &p->layout[s], err)) {
            pair_free(p);
            return false;
        }
        p->mem[s] = aligned_alloc(4096, p->layout[s].total);
        p->end[s].t = malloc((counts[s] + 1) * sizeof(rig_transfer));
        if (p->mem[s] == NULL || p->end[s].t == NULL) {
            pair_free(p);
            *err = strdup("nomem: tp_make");
            return false;
        }
        memset(p->mem[s], 0, p->layout[s].total); /* counts start at 0 */
        if (counts[s] > 0) {
            memcpy(p->end[s].t, lists[s], counts[s] * sizeof(rig_transfer));
        }
        p->end[s].n = counts[s];
        p->end[s].pair = p;
        p->end[s].side = s;
    }
    if (pthread_create(&p->thread, NULL, carrier, p) != 0) {
        pair_free(p);
        *err = strdup("system: pthread_create failed");
        return false;
    }
    /* Step 2: the ends and rails.  From the first rig_end_make on, the
     * pair belongs to the release hooks. */
    atomic_store(&p->holds, 2);
    rig_rail *r[2] = {NULL, NULL};
    for (int s = 0; s < 2; s++) {
        const rig_end_layout *l = &p->layout[s];
        rig_end_desc d = {
            .wake = tp_wake,
            .ready_fn = NULL, /* rig's table lookup */
            .release = tp_release,
            .self = &p->end[s],
        };
        rig_end_desc_areas(&d, l, p->mem[s]); /* counts, outbound, inbound */
        rig_end *e = NULL;
        if (!rig_end_make(&d, &e, err)) {
            tp_release(&p->end[s]); /* the hook this end would have run */
            if (s == 0) {
                tp_release(&p->end[1]);
            } else {
                rig_rail_release(r[0]);
            }
            return false;
        }
        if (!rig_rail_make(id, e, &r[s], err)) {
            rig_end_release(e); /* runs tp_release */
            if (s == 0) {
                tp_release(&p->end[1]);
            } else {
                rig_rail_release(r[0]);
            }
            return false;
        }
    }
    *a = r[0];
    *b = r[1];
    return true;
}

/* ---- using it: a halo exchange from two threads -------------------------- */

enum { RUNS = 2000, N = 3 };

typedef struct {
    rig_rail *rail;
    int me;
    int bad;
} rank_arg;

static uint8_t byte_of(int sender, long run, size_t i)
{
    return (uint8_t)(sender * 31 + run * 7 + (long)i);
}

static void *rank_main(void *arg)
{
    rank_arg *r = arg;
    rig_end *e = rig_rail_local(r->rail);
    rig_area out = rig_end_outbound(e), in = rig_end_inbound(e);
    size_t oc = out.len / 2, ic = in.len / 2;
    for (long it = 0; it < RUNS; it++) {
        unsigned k = (unsigned)(it % 2);
        if (it >= 2 && !rig_end_wait_sent(e, (uint64_t)(it - 1) * N)) {
            r->bad++;
            break;
        }
        for (size_t i = 0; i < oc; i++) {
            out.base[k * oc + i] = byte_of(r->me, it, i);
        }
        rig_end_ready(e, (uint64_t)(it + 1) * N);
        if (!rig_end_wait_arrived(e, (uint64_t)(it + 1) * N)) {
            r->bad++;
            break;
        }
        /* Transfer j moves 64 bytes from src 64 * j to dst 64 * (N-1-j). */
        for (size_t j = 0; j < N; j++) {
            for (size_t i = 0; i < 64; i++) {
                size_t src = 64 * j + i, dst = 64 * (N - 1 - j) + i;
                if (in.base[k * ic + dst] != byte_of(1 - r->me, it, src)) {
                    r->bad++;
                }
            }
        }
    }
    return NULL;
}

int main(void)
{
    rig_transfer t[N];
    for (size_t j = 0; j < N; j++) {
        t[j] = (rig_transfer){64 * (int64_t)j, 64 * (int64_t)(N - 1 - j), 64};
    }
    rig_rail *a, *b;
    char *err = NULL;
    if (!tp_make(7, t, N, t, N, &a, &b, &err)) {
        fprintf(stderr, "FAIL: tp_make: %s\n", err);
        free(err);
        return 1;
    }
    rank_arg ra = {a, 0, 0}, rb = {b, 1, 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, rank_main, &ra);
    pthread_create(&tb, NULL, rank_main, &rb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    if (ra.bad + rb.bad != 0) {
        fprintf(stderr, "FAIL: %d wrong bytes or failed waits\n",
                ra.bad + rb.bad);
        return 1;
    }
    printf("ok: %d runs of %d transfers each way, every byte checked\n", RUNS,
           N);

    /* A jump of ready to the last valid count: the carrier moves only the
     * last two runs' transfers (rig_count_carry_from), so it lands at
     * once, and the last transfer's bytes are the ones written now. */
    rig_end *ea = rig_rail_local(a);
    const uint64_t top = RIG_COUNT_FAILED - 1;
    rig_area ao = rig_end_outbound(ea), bi = rig_end_inbound(rig_rail_local(b));
    memset(ao.base, 0xa5, ao.len);
    rig_end_ready(ea, top);
    size_t jl = rig_count_transfer(top, N);
    const uint8_t *landed =
        bi.base + rig_count_copy(top, N) * (bi.len / 2) + 64 * (N - 1 - jl);
    if (!rig_end_wait_arrived(rig_rail_local(b), top) || landed[0] != 0xa5 ||
        landed[63] != 0xa5) {
        fprintf(stderr, "FAIL: a jump to INT64_MAX - 1 did not land\n");
        return 1;
    }
    printf("ok: a jump of ready to INT64_MAX - 1 landed at once\n");

    /* Step 4: a failed end ends every wait; counts stay failed. */
    rig_end_fail(ea);
    rig_end_ready(ea, (uint64_t)RUNS * N + 1);
    if (rig_end_wait_arrived(ea, (uint64_t)RUNS * N + 1) ||
        rig_end_ready_count(ea) != RIG_COUNT_FAILED) {
        fprintf(stderr, "FAIL: a failed end still waits or counts\n");
        return 1;
    }
    printf("ok: a failed end ends its waits\n");

    /* Step 6: an extra reference outlives the rail; the last release joins
     * the carrier and frees. */
    rig_end *eb = rig_end_retain(rig_rail_local(b));
    rig_rail_release(b);
    rig_rail_release(a);
    if (rig_end_arrived(eb) != top) {
        fprintf(stderr, "FAIL: end b's arrived is %llu\n",
                (unsigned long long)rig_end_arrived(eb));
        return 1;
    }
    rig_end_release(eb);
    printf("ok: ends outlive their rails as long as they are held\nPASS\n");
    return 0;
}
