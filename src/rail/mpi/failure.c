/* SPDX-License-Identifier: BSD-3-Clause */
/* Failure of the MPI RMA transport: failing, the watcher thread, telling
 * every rank.
 *
 * rig_job_fail raises this rank's ends, accumulates RIG_COUNT_FAILED
 * (MPI_MAX) into all three counts of every peer end, and sends its reason
 * to every rank (picked up by their pair protocol's waits and
 * rig_job_failed).  A watcher thread that never calls MPI spreads it: a
 * failed count on one of a rank's ends fails that rank's job and raises
 * its same-node peers' ends through MPI_Win_shared_query pointers, so
 * ranks with no rail to the first fail too (across nodes only the peers of
 * the first rank learn it before they next call rig).  A rank that calls
 * MPI_Finalize with the job open fails it and tells every rank it left,
 * so that their closes skip the collectives it would have to join.  A dead
 * peer is seen only on its node: MPI (without ULFM) reports no peer
 * failure on a window, and a put into a same-node peer's shared memory
 * succeeds whether the peer lives or not, so the watcher polls a pidfd of
 * every same-node peer this rank has a rail with (the job's wiring says
 * which ranks share the kernel and pid namespace).  A peer on another
 * node that dies is not detected: waits on its rails block until the
 * user's timeout, and Open MPI ends the job unless run with
 * --enable-recovery. */
#include "mpi_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const uint64_t failed_value = RIG_COUNT_FAILED;

/* ---- failing ------------------------------------------------------------- */

const char *rig_mpi_failed(rig_transport *t)
{
    rig_mpi *m = rig_mpi_of(t);
    if (!rig_failure_failed(&m->fail)) {
        return NULL;
    }
    if (!rig_failure_known(&m->fail)) {
        rig_mpi_poll_fail(m); /* the watcher's: a rank may have told why */
    }
    return rig_failure_reason(&m->fail);
}

void rig_mpi_fail(rig_transport *t, const char *why)
{
    rig_mpi *m = rig_mpi_of(t);
    bool first = rig_failure_set(&m->fail, why);
    /* The reason lives until the transport goes (the sends' buffer). */
    const char *mine = rig_failure_reason(&m->fail);
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    if (first) {
        /* Every rank learns why (their pair protocol's waits watch for
         * it), so that none waits for this one to make a rail. */
        for (int r = 0; r < m->size; r++) {
            MPI_Request req;
            if (r != m->rank &&
                MPI_Isend(mine, (int)strlen(mine) + 1, MPI_CHAR, r, TAG_FAIL,
                          m->comm, &req) == MPI_SUCCESS) {
                MPI_Request_free(&req);
            }
        }
    }
    for (rig_mend *e = m->ends; e != NULL; e = e->next) {
        rig_count_advance(e->counts, RIG_READY_AT, RIG_COUNT_FAILED);
        rig_count_advance(e->counts, RIG_SENT_AT, RIG_COUNT_FAILED);
        rig_count_advance(e->counts, RIG_ARRIVED_AT, RIG_COUNT_FAILED);
        if (!e->in_job || e->win == MPI_WIN_NULL) {
            continue;
        }
        /* Tell the peer: its three counts of this rail. */
        static const size_t at[] = {RIG_READY_AT, RIG_SENT_AT, RIG_ARRIVED_AT};
        for (size_t i = 0; i < 3; i++) {
            MPI_Accumulate(&failed_value, 1, MPI_UINT64_T, e->target,
                           e->peer_counts + (MPI_Aint)at[i], 1, MPI_UINT64_T,
                           MPI_MAX, e->win);
        }
        MPI_Win_flush(e->target, e->win);
    }
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
}

/* The watcher: every 10 ms, without calling MPI, it looks at this rank's
 * ends.  A count at RIG_COUNT_FAILED that this rank did not raise means a
 * peer failed the job: the job fails here too, and every peer end mapped
 * here (same node) is raised, so the failure spreads along the rails to
 * ranks that share none with the first.  Once failed it re-raises the
 * counts each tick: an accumulate of `arrived` racing with a raise may
 * lower it once (osc sm's MPI_MAX is a locked read-modify-write). */
#define WATCH_NS 10000000L

static void raise_all_locked(rig_mpi *m)
{
    static const size_t at[] = {RIG_READY_AT, RIG_SENT_AT, RIG_ARRIVED_AT};
    for (rig_mend *e = m->ends; e != NULL; e = e->next) {
        for (size_t i = 0; i < 3; i++) {
            rig_count_advance(e->counts, at[i], RIG_COUNT_FAILED);
            if (e->peer_counts_map != NULL && e->win != MPI_WIN_NULL) {
                rig_count_advance(e->peer_counts_map, at[i], RIG_COUNT_FAILED);
            }
        }
    }
}

static void *watcher_main(void *arg)
{
    rig_mpi *m = arg;
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    while (!m->wstop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += WATCH_NS;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&m->wake_watcher, &m->lock, &ts);
        if (m->wstop) {
            break;
        }
        bool failed = rig_failure_failed(&m->fail);
        for (int r = 0; r < m->size; r++) {
            if (rig_failure_fd(&m->fail, r) < 0 ||
                !rig_failure_ended(&m->fail, r)) {
                continue;
            }
            /* A same-node peer's process ended: the job failed. */
            rig_failure_unwatch(&m->fail, r);
            rig_failure_left(&m->fail, r);
            char msg[96];
            snprintf(msg, sizeof(msg), "failed: rank %d (on this node) died",
                     r);
            rig_failure_set(&m->fail, msg);
            failed = true;
        }
        for (rig_mend *e = m->ends; e != NULL && !failed; e = e->next) {
            if (rig_count_load(e->counts, RIG_READY_AT) == RIG_COUNT_FAILED ||
                rig_count_load(e->counts, RIG_SENT_AT) == RIG_COUNT_FAILED ||
                rig_count_load(e->counts, RIG_ARRIVED_AT) == RIG_COUNT_FAILED) {
                char msg[160];
                snprintf(msg, sizeof(msg),
                         "failed: rank %d's end of rail %lld to rank %d "
                         "failed (a peer failed the job)",
                         m->rank, (long long)e->id, e->peer);
                rig_failure_seen(&m->fail, msg);
                failed = true;
            }
        }
        if (failed) {
            raise_all_locked(m);
        }
    }
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
    return NULL;
}

/* ---- failures told by other ranks ------------------------------------ */

/* Whether another rank told this one that the job failed; if so the job
 * fails here too (and tells the others). */
bool rig_mpi_poll_fail(rig_mpi *m)
{
    if (rig_failure_known(&m->fail)) {
        return true;
    }
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_FAIL, m->comm, &flag, &st) !=
            MPI_SUCCESS ||
        !flag) {
        return rig_failure_failed(&m->fail);
    }
    int count = 0;
    MPI_Get_count(&st, MPI_CHAR, &count);
    char *why = malloc(count > 0 ? (size_t)count + 1 : 1);
    char dummy[1];
    MPI_Recv(why != NULL ? why : dummy, why != NULL ? count : 0, MPI_CHAR,
             st.MPI_SOURCE, TAG_FAIL, m->comm, MPI_STATUS_IGNORE);
    char *msg = NULL;
    if (why != NULL) {
        why[count > 0 ? count : 0] = '\0';
        rig_err(&msg, "failed: rank %d: %s", st.MPI_SOURCE, why);
    }
    rig_mpi_fail(&m->super, msg != NULL ? msg : "failed: another rank failed");
    free(msg);
    free(why);
    return true;
}

/* ---- the watcher thread -------------------------------------------------- */

bool rig_mpi_watch_start(rig_mpi *m, char **err)
{
    int rc = pthread_create(&m->watcher, NULL, watcher_main, m);
    if (rc != 0) {
        return rig_err(err, "system: pthread_create failed: %s", strerror(rc));
    }
    m->watching = true;
    return true;
}

void rig_mpi_watch_stop(rig_mpi *m)
{
    if (m->watching) {
        rig_lock(&m->lock, MPI_LOCK_LEVEL);
        m->wstop = true;
        pthread_cond_signal(&m->wake_watcher);
        rig_unlock(&m->lock, MPI_LOCK_LEVEL);
        pthread_join(m->watcher, NULL);
        m->watching = false;
    }
}

/* Watches peer's process (once) when it shares this kernel and pid
 * namespace: the watcher polls a pidfd, which is readable once the
 * process ended (a zombie included). */
void rig_mpi_watch_pid(rig_mpi *m, int peer)
{
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    rig_failure_watch(&m->fail, peer, NULL); /* gone already: not watched */
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
}

/* ---- leaving ------------------------------------------------------------- */

/* Takes the notices of ranks that finalized MPI with the job open. */
static void poll_left(rig_mpi *m)
{
    int flag = 0;
    MPI_Status st;
    while (MPI_Iprobe(MPI_ANY_SOURCE, TAG_LEFT, m->comm, &flag, &st) ==
               MPI_SUCCESS &&
           flag) {
        MPI_Recv(NULL, 0, MPI_BYTE, st.MPI_SOURCE, TAG_LEFT, m->comm,
                 MPI_STATUS_IGNORE);
        rig_failure_left(&m->fail, st.MPI_SOURCE);
    }
}

int rig_mpi_gone(rig_transport *t)
{
    rig_mpi *m = rig_mpi_of(t);
    poll_left(m);
    return rig_failure_gone(&m->fail);
}

/* MPI_Finalize runs with the job open: every rank learns why and that
 * this one left (so that their closes do not wait for it). */
void rig_mpi_finalize(rig_transport *t, const char *why)
{
    rig_mpi *m = rig_mpi_of(t);
    for (int r = 0; r < m->size; r++) {
        MPI_Request req;
        if (r != m->rank && MPI_Isend(NULL, 0, MPI_BYTE, r, TAG_LEFT, m->comm,
                                      &req) == MPI_SUCCESS) {
            MPI_Request_free(&req);
        }
    }
    rig_mpi_fail(t, why);
    /* The windows go with MPI: the watcher must not touch them. */
    rig_mpi_watch_stop(m);
}
