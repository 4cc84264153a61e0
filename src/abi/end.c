/* SPDX-License-Identifier: BSD-3-Clause */
/* Ends and rails: construction, shared reference counts, ready, waits, and
 * the process-wide table of live ends that rig_ready_by_counts consults. */
#include "abi_internal.h"
#include "../util/util_internal.h"

#include <pthread.h>
#include <stdlib.h>

#include "config.h"

/* ---- the table of live ends ---------------------------------------------
 * Keyed by the counts address.  A read lock is held across a ready_fn call,
 * so removing an end (write lock) waits for calls already in it. */

#define LIVE_BUCKETS 4096

static pthread_rwlock_t live_lock = PTHREAD_RWLOCK_INITIALIZER;
static rig_end *live_table[LIVE_BUCKETS];

static size_t live_bucket(const void *counts)
{
    uintptr_t x = (uintptr_t)counts >> 7;
    x ^= x >> 17;
    return (size_t)(x * 0x9E3779B97F4A7C15ull >> 20) % LIVE_BUCKETS;
}

static rig_end *live_find_locked(const void *counts)
{
    for (rig_end *e = live_table[live_bucket(counts)]; e != NULL;
         e = e->next_live) {
        if (e->counts.base == counts) {
            return e;
        }
    }
    return NULL;
}

bool rig_live_insert(rig_end *e, char **err)
{
    pthread_rwlock_wrlock(&live_lock);
    if (live_find_locked(e->counts.base) != NULL) {
        pthread_rwlock_unlock(&live_lock);
        return rig_err(err, "invalid: counts area %p belongs to a live end",
                       (void *)e->counts.base);
    }
    size_t b = live_bucket(e->counts.base);
    e->next_live = live_table[b];
    live_table[b] = e;
    e->tabled = true;
    pthread_rwlock_unlock(&live_lock);
    return true;
}

void rig_live_remove(rig_end *e)
{
    pthread_rwlock_wrlock(&live_lock);
    if (e->tabled) {
        rig_end **pp = &live_table[live_bucket(e->counts.base)];
        while (*pp != NULL && *pp != e) {
            pp = &(*pp)->next_live;
        }
        if (*pp == e) {
            *pp = e->next_live;
        }
        e->tabled = false;
        e->next_live = NULL;
    }
    pthread_rwlock_unlock(&live_lock);
}

/* ---- ends ---------------------------------------------------------------- */

static bool area_ok(rig_area a)
{
    return a.base != NULL || a.len == 0;
}

/* The landing offsets of desc->receive, checked against one inbound copy;
 * *land stays NULL when there is no list. */
static bool land_make(const rig_end_desc *d, int64_t **land, char **err)
{
    if (d->nreceive == 0) {
        return true;
    }
    if (d->receive == NULL) {
        return rig_err(err, "invalid: desc->receive is NULL with %zu transfers",
                       d->nreceive);
    }
    size_t copy = d->inbound.len / 2;
    for (size_t j = 0; j < d->nreceive; j++) {
        const rig_transfer *t = &d->receive[j];
        if (t->dst < 0 || t->length < 0 || (uint64_t)t->dst > copy ||
            (uint64_t)t->length > copy - (uint64_t)t->dst) {
            return rig_err(err,
                           "invalid: desc->receive[%zu] (dst %lld, length "
                           "%lld) lands outside an inbound copy of %zu bytes",
                           j, (long long)t->dst, (long long)t->length, copy);
        }
    }
    if (d->nreceive > SIZE_MAX / sizeof(int64_t) ||
        (*land = malloc(d->nreceive * sizeof(int64_t))) == NULL) {
        return rig_err(err, "nomem: rig_end_make: %zu landing offsets",
                       d->nreceive);
    }
    for (size_t j = 0; j < d->nreceive; j++) {
        (*land)[j] = d->receive[j].dst;
    }
    return true;
}

bool rig_end_make(const rig_end_desc *d, rig_end **out, char **err)
{
    if (d == NULL) {
        return rig_err(err, "invalid: desc is NULL");
    }
    if (out == NULL) {
        return rig_err(err, "invalid: out is NULL");
    }
    if (d->wake == NULL) {
        return rig_err(err, "invalid: desc->wake is NULL");
    }
    if (d->counts.base == NULL || d->counts.len < RIG_COUNTS_BYTES ||
        ((uintptr_t)d->counts.base % 8) != 0) {
        return rig_err(err,
                       "invalid: desc->counts (%p, %zu bytes) must be "
                       "8-byte aligned and at least %d bytes",
                       (void *)d->counts.base, d->counts.len, RIG_COUNTS_BYTES);
    }
    if (!area_ok(d->outbound)) {
        return rig_err(err,
                       "invalid: desc->outbound has a NULL base and "
                       "%zu bytes",
                       d->outbound.len);
    }
    if (!area_ok(d->inbound)) {
        return rig_err(err,
                       "invalid: desc->inbound has a NULL base and "
                       "%zu bytes",
                       d->inbound.len);
    }
    int64_t *land = NULL;
    if (!land_make(d, &land, err)) {
        return false;
    }
    rig_end *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        free(land);
        return rig_err(err, "nomem: rig_end_make: calloc(%zu) failed",
                       sizeof(*e));
    }
    e->land = land;
    e->nland = land != NULL ? d->nreceive : 0;
    e->outbound = d->outbound;
    e->inbound = d->inbound;
    e->counts = d->counts;
    e->wake = d->wake;
    e->ready_fn = d->ready_fn != NULL ? d->ready_fn : rig_ready_by_counts;
    e->release = d->release;
    e->self = d->self;
    e->progress = d->progress;
    e->progress_arg = d->progress_arg;
    atomic_init(&e->refs, 1);
    atomic_init(&e->slot, 0);
    atomic_init(&e->busy, 0);
    atomic_init(&e->live, true);
    if (!rig_live_insert(e, err)) {
        free(e->land);
        free(e);
        return false;
    }
    *out = e;
    return true;
}

rig_area rig_end_outbound(const rig_end *e)
{
    rig_area none = {NULL, 0};
    return e != NULL ? e->outbound : none;
}

rig_area rig_end_inbound(const rig_end *e)
{
    rig_area none = {NULL, 0};
    return e != NULL ? e->inbound : none;
}

rig_area rig_end_counts(const rig_end *e)
{
    rig_area none = {NULL, 0};
    return e != NULL ? e->counts : none;
}

uint64_t rig_end_ready_count(const rig_end *e)
{
    return e != NULL ? rig_count_load(e->counts.base, RIG_READY_AT) : 0;
}

uint64_t rig_end_sent(const rig_end *e)
{
    return e != NULL ? rig_count_load(e->counts.base, RIG_SENT_AT) : 0;
}

uint64_t rig_end_arrived(const rig_end *e)
{
    return e != NULL ? rig_count_load(e->counts.base, RIG_ARRIVED_AT) : 0;
}

rig_ready_fn rig_end_ready_fn(const rig_end *e)
{
    return e != NULL ? e->ready_fn : NULL;
}

void *rig_end_provider(const rig_end *e)
{
    return e != NULL ? e->self : NULL;
}

static int ready_bad_logged;

void rig_end_ready(rig_end *e, uint64_t c)
{
    if (RIG_UNLIKELY(e == NULL || c == 0 || c >= RIG_COUNT_FAILED)) {
        rig_log_once(&ready_bad_logged, RIG_LOG_WARN,
                     "rig_end_ready ignored an invalid call (end %p, count "
                     "%llu): counts must be 1 <= c < INT64_MAX",
                     (void *)e, (unsigned long long)c);
        return;
    }
    if (rig_count_raise_ready(e->counts.base, c) == RIG_COUNT_FAILED) {
        return;
    }
    /* The handshake with rig_end_stop is store-then-load on both sides:
     * here a read-modify-write that says "in flight" (the slot taken, or
     * busy++) then a load of live; there live = false then loads of slot
     * and busy.  All of them are seq_cst, so they sit in one total order
     * S, consistent with sequenced-before and with each object's
     * modification order.  If the load of live here finds true, it
     * precedes stop's store in S, and so does our read-modify-write.  A
     * seq_cst load of stop's that follows it in S reads the last seq_cst
     * write of that object before the load in S (ours or a later one) or
     * a write that does not happen before that one (C11's rule for
     * seq_cst loads): never an older write than ours, since every older
     * write of the slot or of busy happens before our read-modify-write
     * (below).  So stop sees
     * this call in flight and waits until it reads what this call writes
     * when wake is over, a release that its load (seq_cst, hence acquire)
     * synchronises with: wake is over before the provider's state goes.
     * If the load finds false, wake is not called.  An acquire load in
     * stop would not be in S and could miss our write while this load
     * misses live = false (store buffering, allowed by C11 and by Arm's
     * RCpc loads).
     *
     * The slot spares the common case, one thread readying the end, a
     * locked instruction: it is taken by a compare-and-swap 0 -> 1 and
     * given back by a plain release store of 0, where busy needs a
     * read-modify-write both ways (several calls share it).  Only the
     * holder writes 0, so the slot's modification order alternates: a
     * take, its holder's 0, the next take (which reads that 0), ...  A
     * take reads the 0 just before it, a release that its acquire
     * synchronises with: every earlier holder's wake happens before it.
     * So when stop's load of the slot reads a 0 after our take, that 0 is
     * ours or a later holder's, and our wake happens before the load (our
     * release store, or through the takes that follow it).  A call that
     * finds the slot taken counts itself in busy instead, as before: each
     * write of busy is a read-modify-write, continuing a release sequence,
     * so stop's load that reads busy back at 0 synchronises with every
     * decrement it follows. */
    int free_slot = 0;
    bool mine = atomic_compare_exchange_strong_explicit(
        &e->slot, &free_slot, 1, memory_order_seq_cst, memory_order_relaxed);
    if (!mine) {
        atomic_fetch_add_explicit(&e->busy, 1, memory_order_seq_cst);
    }
    if (atomic_load_explicit(&e->live, memory_order_seq_cst)) {
        e->wake(e->self, c);
    }
    if (mine) {
        atomic_store_explicit(&e->slot, 0, memory_order_release);
    } else {
        atomic_fetch_sub_explicit(&e->busy, 1, memory_order_release);
    }
}

void rig_ready_by_counts(void *counts, uint64_t c)
{
    if (RIG_UNLIKELY(counts == NULL || c == 0 || c >= RIG_COUNT_FAILED)) {
        rig_log_once(&ready_bad_logged, RIG_LOG_WARN,
                     "ready_fn ignored an invalid call (counts %p, count "
                     "%llu)",
                     counts, (unsigned long long)c);
        return;
    }
    pthread_rwlock_rdlock(&live_lock);
    rig_end *e = live_find_locked(counts);
    if (e != NULL) {
        rig_end_ready(e, c);
    } else {
        rig_count_advance(counts, RIG_READY_AT, c);
    }
    pthread_rwlock_unlock(&live_lock);
}

void rig_end_stop(rig_end *e)
{
    if (e == NULL) {
        return;
    }
    /* seq_cst store, then seq_cst loads: see rig_end_ready. */
    atomic_store_explicit(&e->live, false, memory_order_seq_cst);
    rig_live_remove(e);
    rig_backoff b = {0};
    while (atomic_load_explicit(&e->slot, memory_order_seq_cst) != 0 ||
           atomic_load_explicit(&e->busy, memory_order_seq_cst) != 0) {
        rig_backoff_step(&b);
    }
}

void rig_end_fail(rig_end *e)
{
    if (e == NULL) {
        return;
    }
    rig_count_advance(e->counts.base, RIG_READY_AT, RIG_COUNT_FAILED);
    rig_count_advance(e->counts.base, RIG_SENT_AT, RIG_COUNT_FAILED);
    rig_count_advance(e->counts.base, RIG_ARRIVED_AT, RIG_COUNT_FAILED);
}

bool rig_end_failed(const rig_end *e)
{
    return e != NULL && (rig_end_ready_count(e) == RIG_COUNT_FAILED ||
                         rig_end_sent(e) == RIG_COUNT_FAILED ||
                         rig_end_arrived(e) == RIG_COUNT_FAILED);
}

/* ---- shared references of a rail and its end ----------------------------- */

static atomic_long *pair_refs(rig_rail *r, rig_end *e)
{
    if (e != NULL) {
        return &e->refs;
    }
    return &r->refs;
}

static void pair_destroy(rig_rail *r, rig_end *e)
{
    if (r != NULL && r->gone != NULL) {
        r->gone(r->gone_arg);
    }
    if (e != NULL) {
        rig_end_stop(e);
        if (e->release != NULL) {
            e->release(e->self);
        }
        free(e->land);
        free(e);
    }
    free(r);
}

static void pair_release(rig_rail *r, rig_end *e)
{
    atomic_long *refs = pair_refs(r, e);
    long left = atomic_fetch_sub_explicit(refs, 1, memory_order_acq_rel) - 1;
    if (left == 0) {
        pair_destroy(r, e);
    } else if (left < 0) {
        rig_log(RIG_LOG_ERROR, "a rail or end was released more often than "
                               "it was retained");
    }
}

rig_end *rig_end_retain(rig_end *e)
{
    if (e != NULL) {
        atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
    }
    return e;
}

void rig_end_release(rig_end *e)
{
    if (e != NULL) {
        pair_release(e->rail, e);
    }
}

bool rig_rail_make(int64_t id, rig_end *local, rig_rail **out, char **err)
{
    if (out == NULL) {
        return rig_err(err, "invalid: out is NULL");
    }
    if (id < 0) {
        return rig_err(err, "invalid: rail id %lld < 0", (long long)id);
    }
    if (local != NULL && local->rail != NULL) {
        return rig_err(err, "invalid: local end already belongs to rail %lld",
                       (long long)local->rail->id);
    }
    rig_rail *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return rig_err(err, "nomem: rig_rail_make: calloc(%zu) failed",
                       sizeof(*r));
    }
    r->id = id;
    r->local = local;
    atomic_init(&r->refs, 1);
    atomic_init(&r->watched, false);
    if (local != NULL) {
        local->rail = r;
    }
    *out = r;
    return true;
}

bool rig_rail_on_release(rig_rail *r, void (*gone)(void *arg), void *arg,
                         char **err)
{
    if (r == NULL || gone == NULL) {
        return rig_err(err, "invalid: %s is NULL", r == NULL ? "r" : "gone");
    }
    bool none = false;
    if (!atomic_compare_exchange_strong(&r->watched, &none, true)) {
        return rig_err(err, "invalid: rail %lld has a release function already",
                       (long long)r->id);
    }
    /* The pair's last release reads these after its acq_rel decrement,
     * which a reference of the caller's still holds off. */
    r->gone = gone;
    r->gone_arg = arg;
    return true;
}

int64_t rig_rail_id(const rig_rail *r)
{
    return r != NULL ? r->id : -1;
}

rig_end *rig_rail_local(const rig_rail *r)
{
    return r != NULL ? r->local : NULL;
}

rig_rail *rig_rail_retain(rig_rail *r)
{
    if (r != NULL) {
        atomic_fetch_add_explicit(pair_refs(r, r->local), 1,
                                  memory_order_relaxed);
    }
    return r;
}

void rig_rail_release(rig_rail *r)
{
    if (r != NULL) {
        pair_release(r, r->local);
    }
}

const char *rig_version(void)
{
    return PACKAGE_VERSION;
}
