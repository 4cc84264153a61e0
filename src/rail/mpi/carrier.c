/* SPDX-License-Identifier: BSD-3-Clause */
/* The MPI RMA transport's carrier: wake, and carrying with MPI one-sided
 * calls.
 *
 * ready stores the count and wakes the end; one carrier at a time carries
 * (rig_wake_serial, ../base/carrier.h).  The carrier, under the
 * transport's lock: MPI_Put of every transfer up to the count (of a jump
 * over many runs, only the last two runs' worth: rig_carry_from),
 * MPI_Win_flush (the data is at the peer and the sources may be reused:
 * `sent` is stored), then `arrived` at the peer:
 *   - on the same node (a shared window, osc sm: the flush is a memory
 *     barrier) through the mapping MPI_Win_shared_query gave, by the
 *     compare-and-swap that never lowers a count nor leaves
 *     RIG_COUNT_FAILED (rig_count_advance): atomic with the peer's own
 *     raise of its counts when the job fails, which is the same CPU
 *     operation (an MPI accumulate there is a locked read and write that
 *     a raise in between would be undone by);
 *   - across nodes by MPI_Accumulate with MPI_MAX on MPI_UINT64_T --
 *     atomic at the target as accumulates are, never lowering a count --
 *     and a second flush: MPI orders accumulates among themselves but
 *     not puts before an accumulate, so the data must be complete before
 *     `arrived` moves.  (failure.c says how a failure's raise is ordered
 *     with these.)
 * An MPI error in a carrier fails the job. */
#include "mpi_internal.h"

#include "../base/carrier.h"

#include <stdlib.h>

#define PUT_MAX ((size_t)1 << 30)

/* Puts len bytes in pieces MPI's int counts can name. */
static int put_bytes(rig_mend *e, const uint8_t *src, size_t len, MPI_Aint at)
{
    int rc = MPI_SUCCESS;
    for (size_t done = 0; done < len && rc == MPI_SUCCESS;) {
        size_t n = len - done < PUT_MAX ? len - done : PUT_MAX;
        rc = MPI_Put(src + done, (int)n, MPI_BYTE, e->target,
                     at + (MPI_Aint)done, (int)n, MPI_BYTE, e->win);
        done += n;
    }
    return rc;
}

/* Under the MPI lock.  False with *why set when an MPI call failed. */
static bool carry_locked(rig_mend *e, uint64_t ready, char **why)
{
    const size_t n = e->nsend;
    uint64_t run = e->next_run;
    size_t j = e->next_j;
    int rc = MPI_SUCCESS;
    for (uint64_t c = rig_carry_from(e->carried, ready, n, &run, &j);
         c < ready && rc == MPI_SUCCESS; c++) {
        const rig_transfer *t = &e->send[j];
        size_t k = (size_t)(run & 1);
        rc = put_bytes(
            e, e->out + k * e->out_copy + (size_t)t->src, (size_t)t->length,
            e->peer_in + (MPI_Aint)(k * e->in_copy) + (MPI_Aint)t->dst);
        if (++j == n) {
            j = 0;
            run++;
        }
    }
    e->next_run = run;
    e->next_j = j;
    e->carried = ready;
    if (rc != MPI_SUCCESS) {
        return rig_err_mpi(why, rc, "MPI_Put");
    }
    rc = MPI_Win_flush(e->target, e->win);
    if (rc != MPI_SUCCESS) {
        return rig_err_mpi(why, rc, "MPI_Win_flush");
    }
    rig_count_advance(e->counts, RIG_SENT_AT, ready);
    if (e->peer_counts_map != NULL) {
        rig_count_advance(e->peer_counts_map, RIG_ARRIVED_AT, ready);
        return true;
    }
    e->value = ready;
    rc = MPI_Accumulate(&e->value, 1, MPI_UINT64_T, e->target,
                        e->peer_counts + RIG_ARRIVED_AT, 1, MPI_UINT64_T,
                        MPI_MAX, e->win);
    if (rc != MPI_SUCCESS) {
        return rig_err_mpi(why, rc, "MPI_Accumulate");
    }
    rc = MPI_Win_flush(e->target, e->win);
    if (rc != MPI_SUCCESS) {
        return rig_err_mpi(why, rc, "MPI_Win_flush");
    }
    return true;
}

static void carry(rig_mend *e)
{
    rig_mpi_tell(e->m); /* a failure the watcher took in, if any */
    uint64_t ready = rig_carry_due(e->counts, &e->carried, e->nsend, e->id);
    if (ready == 0) {
        return;
    }
    rig_mpi *m = e->m;
    char *why = NULL;
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    bool ok = !e->live || carry_locked(e, ready, &why);
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
    if (!ok) {
        char *msg = NULL;
        rig_err(&msg, "failed: rail %lld to rank %d: %s", (long long)e->id,
                e->peer, why != NULL ? why : "nomem");
        rig_mpi_fail(&m->super,
                     msg != NULL ? msg : "failed: an MPI call failed");
        free(msg);
        free(why);
    }
}

static void mend_wake_carry(void *self)
{
    carry(self);
}

void rig_mend_wake(void *self, uint64_t c)
{
    (void)c; /* may be stale: carry reads the count itself */
    rig_mend *e = self;
    rig_wake_serial(&e->wakes, mend_wake_carry, e);
}
