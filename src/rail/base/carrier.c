/* SPDX-License-Identifier: BSD-3-Clause */
/* The carriers' shared start: the wake lock and the count due. */
#include "carrier.h"

#include "rig/remote_abi.h"

#include "../../util/util_internal.h"

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
