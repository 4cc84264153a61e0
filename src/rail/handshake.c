/* SPDX-License-Identifier: BSD-3-Clause */
/* What both transports share: the check that one side's send list is the
 * other's receive list, the words for a peer's refusal, the one-carrier-at-
 * a-time wake and what it must carry, and the barrier of closing. */
#include "rail_internal.h"

#include "../util/util_internal.h"

#include <string.h>

static bool same(const rig_transfer *a, const rig_transfer *b)
{
    return a->src == b->src && a->dst == b->dst && a->length == b->length;
}

bool rig_rail_lists_match(int lo, const rig_rail_lists *l, int hi,
                          const rig_rail_lists *h, char **err)
{
    const char *prefix = "invalid: rail between ranks";
    for (int dir = 0; dir < 2; dir++) {
        int sr = dir == 0 ? lo : hi, rr = dir == 0 ? hi : lo;
        const rig_transfer *s = dir == 0 ? l->send : h->send;
        const rig_transfer *r = dir == 0 ? h->receive : l->receive;
        uint64_t ns = dir == 0 ? l->nsend : h->nsend;
        uint64_t nr = dir == 0 ? h->nreceive : l->nreceive;
        uint64_t n = ns < nr ? ns : nr;
        for (uint64_t i = 0; i < n; i++) {
            if (!same(&s[i], &r[i])) {
                return rig_err(err,
                               "%s %d and %d: send[%llu] of rank %d {src "
                               "%lld, dst %lld, length %lld} differs from "
                               "receive[%llu] of rank %d {src %lld, dst "
                               "%lld, length %lld}",
                               prefix, lo, hi, (unsigned long long)i, sr,
                               (long long)s[i].src, (long long)s[i].dst,
                               (long long)s[i].length, (unsigned long long)i,
                               rr, (long long)r[i].src, (long long)r[i].dst,
                               (long long)r[i].length);
            }
        }
        if (ns != nr) {
            return rig_err(err,
                           "%s %d and %d: rank %d sends %llu transfers "
                           "but rank %d receives %llu",
                           prefix, lo, hi, sr, (unsigned long long)ns, rr,
                           (unsigned long long)nr);
        }
    }
    return true;
}

bool rig_rail_peer_refused(int peer, int status, const char *why, char **err)
{
    if (status == RIG_RAIL_LISTS) {
        return rig_err(err, "invalid: rank %d's lists: %s", peer,
                       strncmp(why, "invalid: ", 9) == 0 ? why + 9 : why);
    }
    if (status == RIG_RAIL_FAILED) {
        return rig_err(err, "failed: rank %d: %s", peer, why);
    }
    return rig_err(err, "failed: rank %d could not make its end: %s", peer,
                   why);
}

void rig_wake_serial(atomic_uint_fast64_t *wakes, void (*carry)(void *),
                     void *arg)
{
    uint_fast64_t seen =
        atomic_fetch_add_explicit(wakes, 1, memory_order_acq_rel) + 1;
    if (seen != 1) {
        return; /* the carrier sees the moved counter and carries again */
    }
    for (;;) {
        carry(arg);
        if (atomic_compare_exchange_strong_explicit(
                wakes, &seen, 0, memory_order_acq_rel, memory_order_acquire)) {
            return;
        }
    }
}

uint64_t rig_carry_due(const uint8_t *counts, uint64_t *carried, size_t nsend,
                       int64_t id)
{
    static int empty_ready_logged;
    uint64_t ready = rig_count_load(counts, RIG_READY_AT);
    if (ready == RIG_COUNT_FAILED || ready <= *carried) {
        return 0;
    }
    if (RIG_UNLIKELY(nsend == 0)) {
        rig_log_once(&empty_ready_logged, RIG_LOG_WARN,
                     "ready on rail %lld, which sends nothing, is ignored",
                     (long long)id);
        *carried = ready;
        return 0;
    }
    return ready;
}

bool rig_barrier_unless_gone(MPI_Comm comm, int rank, int (*gone)(void *),
                             void *arg)
{
    if (gone(arg) >= 0) {
        return false;
    }
    MPI_Request req;
    if (MPI_Ibarrier(comm, &req) != MPI_SUCCESS) {
        return false;
    }
    rig_backoff b = {0};
    for (;;) {
        int flag = 0;
        if (MPI_Test(&req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            return false;
        }
        if (flag) {
            return true;
        }
        int left = gone(arg);
        if (left >= 0) {
            rig_log(RIG_LOG_WARN,
                    "rank %d: closing the job without rank %d, which left it",
                    rank, left);
            return false; /* the request is abandoned with the comm */
        }
        rig_backoff_step(&b);
    }
}
