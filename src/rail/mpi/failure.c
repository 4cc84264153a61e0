/* SPDX-License-Identifier: BSD-3-Clause */
/* Failure of the MPI RMA transport: failing, the watcher thread, telling
 * every rank.
 *
 * Failing here (fail_locked): the failure state first, then every count
 * of every held end raised to RIG_COUNT_FAILED by a compare-and-swap that
 * never lowers a count, and the counts of the same-node peers' ends of
 * those rails too (mapped through MPI_Win_shared_query), all under the
 * transport's lock.  Then the peers are told (rig_mpi_tell), which needs
 * MPI: a rank where the failure started sends its reason to every rank
 * (picked up by their pair protocol's waits, rig_job_failed and closing
 * barriers), and every rank accumulates RIG_COUNT_FAILED (MPI_MAX) into
 * its peers' counts of the rails it holds across nodes.
 *
 * The watcher thread never calls MPI (below MPI_THREAD_MULTIPLE it may
 * not).  It sleeps in poll on the pidfds of every rank on this node (the
 * job's wiring says which ranks share the kernel and pid namespace),
 * waking at once when one ends and every 10 ms otherwise.  A rank that
 * ended is gone (rig_failure_peer_gone, the one way in for "rank r is
 * gone", which a heartbeat of issue 14 will use too): it left the job and
 * the job fails here.  On each tick it also looks for a count raised by a
 * peer on one of this rank's ends, which fails the job here too (with a
 * stand-in reason until the peer's message brings the real one).  What
 * needs MPI -- the messages, the accumulates across nodes -- waits for the
 * next call of this rank into rig that may call MPI (rig_job_failed,
 * rig_job_rail, rig_end_ready, closing), or is done by the watcher itself
 * under MPI_THREAD_MULTIPLE.  So every rank on the node of a dead rank
 * sees the death itself within a tick, rails or not; ranks on other
 * nodes learn it from a message or an accumulate, or, while no rank of
 * that node calls rig, not at all: a peer on another node that dies is
 * not detected by this transport (Open MPI ends the job unless run with
 * --enable-recovery; heartbeats are issue 14's).
 *
 * A failed count is never lowered: on a same-node rail `arrived` is
 * raised by the carrier through the shared mapping with the same
 * compare-and-swap (carrier.c), so the failure's and the carrier's
 * updates are atomic with each other.  Across nodes the carrier's
 * MPI_Accumulate of `arrived` is atomic with other accumulates only; each
 * rank, when it tells, also accumulates RIG_COUNT_FAILED into its own
 * counts of such rails, which orders every later accumulate after it.
 * Until then (a failure the watcher took in, with no rig call since) an
 * accumulate racing with the raise may lower `arrived` once, if the MPI's
 * accumulates are not atomic with the CPU's: a limit of mixing the two
 * that only MPI_THREAD_MULTIPLE (the watcher tells at once) removes.
 *
 * A rank that calls MPI_Finalize with the job open fails it and tells
 * every rank it left, so that their closes skip the collectives it would
 * have to join.
 *
 * The watcher also ends this process when a peer left while this rank is
 * inside a collective of their pair ("a collective of a pair", below). */
#include "mpi_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static const uint64_t failed_value = RIG_COUNT_FAILED;

static const size_t count_at[] = {RIG_READY_AT, RIG_SENT_AT, RIG_ARRIVED_AT};

#define WATCH_MS 10

/* ---- failing ------------------------------------------------------------- */

/* Raises every held end's counts, and the same-node peers' counts of
 * those rails.  Lock held. */
static void raise_all_locked(rig_mpi *m)
{
    for (rig_mend *e = m->ends; e != NULL; e = e->next) {
        if (!e->held) {
            continue; /* released: its counts are no one's any more */
        }
        for (size_t i = 0; i < 3; i++) {
            rig_count_advance(e->counts, count_at[i], RIG_COUNT_FAILED);
            if (e->peer_counts_map != NULL && e->in_job) {
                rig_count_advance(e->peer_counts_map, count_at[i],
                                  RIG_COUNT_FAILED);
            }
        }
    }
}

/* Fails the job here (see above); why NULL: a stand-in was recorded
 * already.  origin: the failure starts here and every rank is told why;
 * rank is then the rank whose end this rank saw (why is that sighting),
 * else the rank that told why (-1: neither; ../base/failure.h says why
 * the difference matters).  Lock held. */
static void fail_locked(rig_mpi *m, const char *why, bool origin, int rank)
{
    bool first = !rig_failure_failed(&m->fail);
    if (why != NULL && (origin ? rig_failure_set_sighted(&m->fail, why, rank)
                               : rig_failure_told(&m->fail, rank, why))) {
        rig_log(RIG_LOG_WARN, "rank %d: the job failed: %s", m->rank, why);
        if (origin) {
            m->fail_origin = true;
        }
    }
    raise_all_locked(m);
    if (first || m->fail_origin) {
        atomic_store(&m->tell, true);
    }
}

/* A held end with a count at RIG_COUNT_FAILED while the job has not
 * failed here: a peer failed the rail.  Lock held. */
static rig_mend *raised_by_peer(rig_mpi *m)
{
    for (rig_mend *e = m->ends; e != NULL; e = e->next) {
        if (e->held && rig_end_failed(e->end)) {
            return e;
        }
    }
    return NULL;
}

/* Takes in a failure a peer raised into one of this rank's ends before
 * this rank knew of it.  Lock held. */
static void take_in_locked(rig_mpi *m)
{
    rig_mend *e;
    if (rig_failure_failed(&m->fail) || (e = raised_by_peer(m)) == NULL) {
        return;
    }
    char seen[160];
    snprintf(seen, sizeof(seen),
             "failed: rank %d's end of rail %lld was failed by rank %d (the "
             "reason is on its way)",
             m->rank, (long long)e->id, e->peer);
    rig_failure_seen(&m->fail, seen);
    fail_locked(m, NULL, false, -1);
}

void rig_mpi_tell(rig_mpi *m)
{
    if (!atomic_load(&m->tell) || m->closed) {
        return;
    }
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    if (!atomic_exchange(&m->tell, false)) {
        rig_unlock(&m->lock, MPI_LOCK_LEVEL);
        return;
    }
    /* The reason lives until the transport goes (the sends' buffer). */
    const char *why = rig_failure_reason(&m->fail);
    if (m->fail_origin && !m->told_all) {
        m->told_all = true;
        for (int r = 0; r < m->size; r++) {
            MPI_Request req;
            if (r != m->rank && !rig_failure_has_left(&m->fail, r) &&
                MPI_Isend(why, (int)strlen(why) + 1, MPI_CHAR, r, TAG_FAIL,
                          m->comm, &req) == MPI_SUCCESS) {
                MPI_Request_free(&req);
            }
        }
    }
    /* Across nodes: the peers' counts, and this rank's own, through the
     * accumulates the carriers use (see above).  Not to a rank gone: a
     * flush towards it would never return. */
    for (rig_mend *e = m->ends; e != NULL; e = e->next) {
        if (!e->held || !e->in_job || e->win == MPI_WIN_NULL ||
            e->peer_counts_map != NULL ||
            rig_failure_has_left(&m->fail, e->peer)) {
            continue;
        }
        for (size_t i = 0; i < 3; i++) {
            MPI_Accumulate(&failed_value, 1, MPI_UINT64_T, e->target,
                           e->peer_counts + (MPI_Aint)count_at[i], 1,
                           MPI_UINT64_T, MPI_MAX, e->win);
            MPI_Accumulate(
                &failed_value, 1, MPI_UINT64_T, 1 - e->target,
                (MPI_Aint)(e->shift + e->layout.counts_at + count_at[i]), 1,
                MPI_UINT64_T, MPI_MAX, e->win);
        }
        MPI_Win_flush_all(e->win);
    }
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
}

void rig_mpi_fail(rig_transport *t, const char *why)
{
    rig_mpi *m = rig_mpi_of(t);
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    fail_locked(m, why != NULL ? why : "failed: rig_job_fail", true, -1);
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
    rig_mpi_tell(m);
}

/* ---- failures told by other ranks ------------------------------------ */

/* Takes the reasons other ranks sent; the first one fails the job here
 * (if it has not yet), replaces a stand-in, or replaces this rank's
 * sighting of its sender's end.  Calls MPI. */
static void poll_fail(rig_mpi *m)
{
    int flag = 0;
    MPI_Status st;
    while (MPI_Iprobe(MPI_ANY_SOURCE, TAG_FAIL, m->comm, &flag, &st) ==
               MPI_SUCCESS &&
           flag) {
        int count = 0;
        MPI_Get_count(&st, MPI_CHAR, &count);
        char *why = malloc(count > 0 ? (size_t)count + 1 : 1);
        char dummy[1];
        MPI_Recv(why != NULL ? why : dummy, why != NULL ? count : 0, MPI_CHAR,
                 st.MPI_SOURCE, TAG_FAIL, m->comm, MPI_STATUS_IGNORE);
        if (why != NULL) {
            why[count > 0 ? count : 0] = '\0';
        }
        rig_lock(&m->lock, MPI_LOCK_LEVEL);
        fail_locked(m, why != NULL ? why : "failed: another rank failed", false,
                    st.MPI_SOURCE);
        rig_unlock(&m->lock, MPI_LOCK_LEVEL);
        free(why);
    }
}

const char *rig_mpi_failed(rig_transport *t, bool *known)
{
    rig_mpi *m = rig_mpi_of(t);
    if (!m->closed) {
        /* Whoever sets the state raises every count in the same hold of
         * the lock: once this thread holds it, all are raised. */
        rig_lock(&m->lock, MPI_LOCK_LEVEL);
        take_in_locked(m);
        rig_unlock(&m->lock, MPI_LOCK_LEVEL);
        /* A sighting waits for what its rank told before it ended:
         * drained here, before anyone reads the reason. */
        if (!rig_failure_known(&m->fail) ||
            rig_failure_sighted(&m->fail) >= 0) {
            poll_fail(m);
        }
        rig_mpi_tell(m);
    }
    if (known != NULL) {
        *known = rig_failure_known(&m->fail);
    }
    return rig_failure_reason(&m->fail);
}

/* ---- the watcher thread -------------------------------------------------- */

/* A collective of a pair (the frees, communicator and window of the pair
 * protocol's connect, end.c) that the peer left -- died, or finalized MPI
 * -- can still return, if the peer had done its part; else never: MPI
 * (Open MPI 4.1, MPICH 4.0, no ULFM) cannot leave a collective one of its
 * ranks left, and the process would wait for the batch system's time
 * limit.  So the watcher, seeing this rank still in one PAIR_STUCK_MS
 * after it saw the peer leave, ends the process (as MPI's default error
 * handler would), naming the call and the peer.  It counts its ticks (a
 * poll that timed out), not the clock: a process stopped and resumed is
 * not taken for a stuck one. */
#define PAIR_STUCK_MS 1000

/* ticks: per peer, the ticks since this rank was seen in a collective
 * with it, gone. */
static void look_in_pairs(rig_mpi *m, unsigned *ticks, bool ticked)
{
    for (int r = 0; r < m->size; r++) {
        const char *call =
            atomic_load_explicit(&m->in_pair[r], memory_order_acquire);
        if (call == NULL || !rig_failure_has_left(&m->fail, r)) {
            ticks[r] = 0;
            continue;
        }
        if (ticked && ++ticks[r] * WATCH_MS >= PAIR_STUCK_MS) {
            rig_stuck_exit(
                "rank %d: %s, a collective of rank %d and rank %d alone "
                "(making or freeing a rail of RIG_TRANSPORT=mpi), has not "
                "returned %d ms after rank %d left the job: MPI cannot "
                "leave a collective that one of its ranks left, and no wait "
                "of rig's can",
                m->rank, call, m->rank, r, PAIR_STUCK_MS, r);
        }
    }
}

void rig_mpi_peer_gone(void *self, int r, const char *why)
{
    rig_mpi *m = self;
    if (!rig_failure_left(&m->fail, r, RIG_LEFT_DIED)) {
        return;
    }
    rig_lock(&m->lock, MPI_LOCK_LEVEL);
    fail_locked(m, why, true, r);
    rig_unlock(&m->lock, MPI_LOCK_LEVEL);
}

static void *watcher_main(void *arg)
{
    rig_mpi *m = arg;
    int n = m->size + 1;
    struct pollfd *fds = calloc((size_t)n, sizeof(*fds));
    int *rank_of = calloc((size_t)n, sizeof(*rank_of));
    unsigned *ticks = calloc((size_t)m->size, sizeof(*ticks));
    if (fds == NULL || rank_of == NULL || ticks == NULL) {
        free(fds);
        free(rank_of);
        free(ticks);
        rig_log(RIG_LOG_ERROR,
                "rank %d: no memory for the watcher: peers' "
                "deaths go unseen",
                m->rank);
        return NULL;
    }
    while (!atomic_load(&m->wstop)) {
        int k = 0;
        fds[k++] = (struct pollfd){.fd = m->wake_fd, .events = POLLIN};
        for (int r = 0; r < m->size; r++) {
            int fd = rig_failure_fd(&m->fail, r);
            if (fd >= 0 && !rig_failure_has_left(&m->fail, r)) {
                rank_of[k] = r;
                fds[k++] = (struct pollfd){.fd = fd, .events = POLLIN};
            }
        }
        int ready = poll(fds, (nfds_t)k, WATCH_MS);
        if (atomic_load(&m->wstop)) {
            break;
        }
        if (ready > 0 && (fds[0].revents & POLLIN)) {
            uint64_t v;
            ssize_t got = read(m->wake_fd, &v, sizeof(v));
            (void)got;
        }
        for (int i = 1; i < k && ready > 0; i++) {
            if (fds[i].revents != 0) {
                rig_failure_peer_gone(&m->fail, rank_of[i], "died");
            }
        }
        /* Where pidfd_open is missing, peers are polled by kill(pid, 0). */
        for (int r = 0; m->fail.polled && r < m->size; r++) {
            if (r != m->rank && rig_failure_fd(&m->fail, r) < 0 &&
                !rig_failure_has_left(&m->fail, r) &&
                rig_failure_ended(&m->fail, r)) {
                rig_failure_peer_gone(&m->fail, r, "died");
            }
        }
        look_in_pairs(m, ticks, ready == 0);
        rig_lock(&m->lock, MPI_LOCK_LEVEL);
        take_in_locked(m);
        rig_unlock(&m->lock, MPI_LOCK_LEVEL);
        if (m->multiple) {
            rig_mpi_tell(m);
        }
    }
    free(fds);
    free(rank_of);
    free(ticks);
    return NULL;
}

bool rig_mpi_watch_start(rig_mpi *m, const rig_transport_wiring *w, char **err)
{
    rig_failure_know(&m->fail, w);
    for (int r = 0; r < m->size; r++) {
        if (r != m->rank && !rig_failure_watch(&m->fail, r, err)) {
            return false;
        }
    }
    m->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (m->wake_fd < 0) {
        return rig_err(err, "system: eventfd failed: %s", strerror(errno));
    }
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
        atomic_store(&m->wstop, true);
        uint64_t one = 1;
        ssize_t n = write(m->wake_fd, &one, sizeof(one));
        (void)n;
        pthread_join(m->watcher, NULL);
        m->watching = false;
    }
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
        rig_failure_left(&m->fail, st.MPI_SOURCE, RIG_LEFT_FINALIZED);
    }
}

int rig_mpi_gone(rig_transport *t, bool *died)
{
    rig_mpi *m = rig_mpi_of(t);
    poll_left(m);
    poll_fail(m);
    rig_mpi_tell(m);
    int gone = rig_failure_look(&m->fail);
    if (died != NULL) {
        *died = rig_failure_died(&m->fail);
    }
    return gone;
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
    m->closed = true; /* no MPI from here on */
}
