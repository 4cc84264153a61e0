/* SPDX-License-Identifier: BSD-3-Clause */
/* The loopback provider: both ends of a rail in one process, bytes moved by
 * ready itself on the calling thread.
 *
 * This is the reference example of the provider interface:
 *  - the provider allocates each end's memory from rig_end_layout_make and
 *    owns it (here one struct for the pair holds both allocations);
 *  - it makes each end with rig_end_make (wake = its "carry the transfers"
 *    function; ready_fn NULL = rig's table lookup) and a rail with
 *    rig_rail_make, which takes the end's reference;
 *  - wake reads `ready` itself (it may be stale or concurrent), carries
 *    every transfer not yet carried, stores `arrived` at the receiver and
 *    `sent` at the sender with rig_count_advance (release, monotonic);
 *  - the release hook drops the provider's hold; memory is freed when the
 *    last end of the pair is gone, so a late wake never touches freed
 *    memory. */
#include "abi_internal.h"
#include "../util/util_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct lb_pair lb_pair;

/* One direction's state: what `from` sends to `to`. */
typedef struct {
    lb_pair *pair;
    int side;        /* 0: end a, 1: end b */
    rig_transfer *t; /* transfers from this side's outbound */
    size_t n;
    uint64_t carried; /* the last count carried (under pair->lock) */
} lb_side;

struct lb_pair {
    pthread_mutex_t lock;
    atomic_int holds; /* ends not yet released */
    uint8_t *mem[2];
    rig_end_layout layout[2];
    lb_side side[2];
};

static uint8_t *area_at(lb_pair *p, int s, size_t at)
{
    return p->mem[s] + at;
}

static void lb_wake(void *self, uint64_t c)
{
    lb_side *me = self;
    lb_pair *p = me->pair;
    int from = me->side, to = 1 - me->side;
    (void)c; /* the count is read below: c may be stale */
    pthread_mutex_lock(&p->lock);
    const rig_end_layout *lf = &p->layout[from], *lt = &p->layout[to];
    uint8_t *counts_from = area_at(p, from, lf->counts_at);
    uint8_t *counts_to = area_at(p, to, lt->counts_at);
    uint64_t ready = rig_count_load(counts_from, RIG_READY_AT);
    if (ready == RIG_COUNT_FAILED || me->n == 0) {
        pthread_mutex_unlock(&p->lock);
        return;
    }
    size_t out_copy = lf->outbound_len / 2, in_copy = lt->inbound_len / 2;
    /* Counts a later run overwrote are skipped: a wake costs at most 2n
     * transfers however far ready jumped. */
    uint64_t from_c = rig_count_carry_from(me->carried, ready, me->n);
    if (from_c != 0) {
        uint64_t run = rig_count_run(from_c, me->n);
        size_t j = rig_count_transfer(from_c, me->n);
        for (uint64_t k = from_c; k <= ready; k++) {
            size_t copy = (size_t)(run % 2);
            const rig_transfer *t = &me->t[j];
            memcpy(area_at(p, to, lt->inbound_at + copy * in_copy + t->dst),
                   area_at(p, from, lf->outbound_at + copy * out_copy + t->src),
                   (size_t)t->length);
            if (++j == me->n) {
                j = 0;
                run++;
            }
        }
    }
    if (ready > me->carried) {
        me->carried = ready;
        /* One release store of arrived covers the whole batch. */
        rig_count_advance(counts_to, RIG_ARRIVED_AT, ready);
        rig_count_advance(counts_from, RIG_SENT_AT, ready);
    }
    pthread_mutex_unlock(&p->lock);
}

static void lb_pair_free(lb_pair *p)
{
    for (int s = 0; s < 2; s++) {
        free(p->mem[s]);
        free(p->side[s].t);
    }
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static void lb_release(void *self)
{
    lb_side *me = self;
    lb_pair *p = me->pair;
    if (atomic_fetch_sub(&p->holds, 1) == 1) {
        lb_pair_free(p);
    }
}

static rig_transfer *dup_list(const rig_transfer *t, size_t n)
{
    rig_transfer *d = malloc((n > 0 ? n : 1) * sizeof(*d));
    if (d != NULL && n > 0) {
        memcpy(d, t, n * sizeof(*d));
    }
    return d;
}

bool rig_loopback_make(int64_t id, const rig_transfer *send, size_t nsend,
                       const rig_transfer *receive, size_t nreceive,
                       rig_rail **a, rig_rail **b, char **err)
{
    if (a == NULL || b == NULL) {
        return rig_err(err, "invalid: %s is NULL", a == NULL ? "a" : "b");
    }
    if (id < 0) {
        return rig_err(err, "invalid: rail id %lld < 0", (long long)id);
    }
    lb_pair *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return rig_err(err, "nomem: rig_loopback_make: calloc failed");
    }
    pthread_mutex_init(&p->lock, NULL);
    /* End a sends `send`, end b sends `receive`. */
    if (!rig_end_layout_make(send, nsend, receive, nreceive, 0, &p->layout[0],
                             err) ||
        !rig_end_layout_make(receive, nreceive, send, nsend, 0, &p->layout[1],
                             err)) {
        lb_pair_free(p);
        return false;
    }
    p->side[0] = (lb_side){p, 0, dup_list(send, nsend), nsend, 0};
    p->side[1] = (lb_side){p, 1, dup_list(receive, nreceive), nreceive, 0};
    for (int s = 0; s < 2; s++) {
        p->mem[s] = aligned_alloc(4096, p->layout[s].total);
        if (p->mem[s] == NULL || p->side[s].t == NULL) {
            size_t total = p->layout[s].total;
            lb_pair_free(p);
            return rig_err(err, "nomem: rig_loopback_make: %zu bytes", total);
        }
        memset(p->mem[s], 0, p->layout[s].total);
    }
    rig_end *e[2] = {NULL, NULL};
    rig_rail *r[2] = {NULL, NULL};
    for (int s = 0; s < 2; s++) {
        const rig_end_layout *l = &p->layout[s];
        rig_end_desc d = {
            .wake = lb_wake,
            .ready_fn = NULL,
            .release = lb_release,
            .self = &p->side[s],
            /* side s receives what the other side sends */
            .receive = p->side[1 - s].t,
            .nreceive = p->side[1 - s].n,
        };
        rig_end_desc_areas(&d, l, p->mem[s]);
        if (!rig_end_make(&d, &e[s], err)) {
            goto err_unmake;
        }
        atomic_fetch_add(&p->holds, 1);
        if (!rig_rail_make(id, e[s], &r[s], err)) {
            goto err_unmake;
        }
    }
    *a = r[0];
    *b = r[1];
    return true;

err_unmake:
    /* Release what was made; the last release frees the pair. */
    for (int s = 0; s < 2; s++) {
        if (r[s] != NULL) {
            rig_rail_release(r[s]);
        } else if (e[s] != NULL) {
            rig_end_release(e[s]);
        }
    }
    if (e[0] == NULL) {
        lb_pair_free(p);
    }
    return false;
}
