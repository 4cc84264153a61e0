/* SPDX-License-Identifier: BSD-3-Clause */
/* A job's failure: a killed peer, rig_job_fail, MPI_Finalize without close.
 *
 * Usage: test_failure --kill | --fail | --finalize
 *   --kill      (3 ranks) rank 2 SIGKILLs itself mid-run; ranks 0 and 1
 *               must see every count of every end at RIG_COUNT_FAILED, their
 *               waits return false within 2 s of the kill, and later calls
 *               fail with "failed:" naming rank 2.  Needs mpirun
 *               --enable-recovery for the survivors to live on; without it
 *               mpirun ends the job, which must not hang either.
 *   --fail      (3 ranks) rank 1 calls rig_job_fail; ranks 0 and 2 (rank 2
 *               has no rail to rank 1) fail within 100 ms, with the reason.
 *   --finalize  (2 ranks) rank 1 calls MPI_Finalize with its job open;
 *               rank 0 sees a failure naming rank 1, not a hang.
 * Times are CLOCK_MONOTONIC, which all ranks of one node share; the sender
 * of the event writes its time into a rail just before the event. */
#include "../mpitest.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#define NB 64 /* bytes of the one transfer of each direction */

static rig_job *job;
static rig_rail *rails[8]; /* by peer; NULL: none */
static rig_job *left_open; /* --finalize: the job rank 1 never closes */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static rig_end *end_of(int peer)
{
    return rig_rail_local(rails[peer]);
}

/* Makes the rails of the pairs in `pairs` (in that global order). */
static void make_rails(const int (*pairs)[2], size_t n)
{
    static const rig_transfer t = {0, 0, NB};
    int me = rig_job_rank(job);
    for (size_t i = 0; i < n; i++) {
        int a = pairs[i][0], b = pairs[i][1];
        if (me != a && me != b) {
            continue;
        }
        int peer = me == a ? b : a;
        T_OK(rig_job_rail(job, peer, &t, 1, &t, 1, &rails[peer], &t_err));
    }
}

/* Run `run` (from 0) on every rail: write, ready, wait, check. */
static void exchange(uint64_t run)
{
    int me = rig_job_rank(job);
    for (int p = 0; p < 8; p++) {
        if (rails[p] != NULL) {
            rig_end *e = end_of(p);
            if (run >= 2) {
                T_ASSERT(rig_end_wait_sent(e, run - 1));
            }
            uint8_t *o = rig_end_outbound(e).base + (run % 2) * 256;
            memset(o, (int)(me * 16 + run), NB);
            rig_end_ready(e, run + 1);
        }
    }
    for (int p = 0; p < 8; p++) {
        if (rails[p] != NULL) {
            rig_end *e = end_of(p);
            T_ASSERT(rig_end_wait_arrived(e, run + 1));
            const uint8_t *in = rig_end_inbound(e).base + (run % 2) * 256;
            T_EQ(in[0], (uint8_t)(p * 16 + run));
            T_EQ(in[NB - 1], (uint8_t)(p * 16 + run));
        }
    }
}

/* MPI_Bcast that sleeps while it waits.  MPICH's blocking calls poll
 * without ever yielding the core: a rank done early that sat in
 * MPI_Bcast would take a core from a rank still waiting for its
 * failure, on a machine with fewer cores than ranks, and that rank's
 * measured time would be the scheduler's (over 100 ms, about 1 run in 6
 * under MPICH 4.0), not rig's.  Open MPI yields when oversubscribed. */
static void bcast_sleeping(void *buf, int count, MPI_Datatype type, int root)
{
    MPI_Request req;
    T_ASSERT(MPI_Ibcast(buf, count, type, root, MPI_COMM_WORLD, &req) ==
             MPI_SUCCESS);
    for (int done = 0;;) {
        T_ASSERT(MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        if (done) {
            return;
        }
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}

/* Sends this rank's clock to peer in run `run`, the last before an event. */
static void send_time(int peer, uint64_t run)
{
    rig_end *e = end_of(peer);
    uint8_t *o = rig_end_outbound(e).base + (run % 2) * 256;
    uint64_t t = now_ns();
    memcpy(o, &t, sizeof(t));
    rig_end_ready(e, run + 1);
}

static uint64_t recv_time(int peer, uint64_t run)
{
    rig_end *e = end_of(peer);
    T_ASSERT(rig_end_wait_arrived(e, run + 1));
    uint64_t t;
    memcpy(&t, rig_end_inbound(e).base + (run % 2) * 256, sizeof(t));
    return t;
}

/* Waits (10 s hang guard) for the failure on peer's rail; returns when. */
static uint64_t wait_failed(int peer, uint64_t c)
{
    bool timed_out = false;
    bool ok = rig_end_wait_arrived_for(end_of(peer), c, 10000, &timed_out);
    uint64_t t = now_ns();
    if (timed_out) {
        T_FAIL("no failure seen on the rail to rank %d after 10 s", peer);
    }
    T_ASSERT(!ok);
    return t;
}

/* The job failed here, every count of every end of this rank is
 * RIG_COUNT_FAILED, and nothing a provider does lowers it: ready,
 * ready_fn.  Called once a wait returned false: rig_job_failed must say
 * so at once, and once it did, every end's counts are raised (a peer
 * raises the count of its rail first; this rank's other ends follow when
 * it takes the failure in, which rig_job_failed makes sure of). */
static void check_all_failed(void)
{
    T_ASSERT(rig_job_failed(job));
    for (int p = 0; p < 8; p++) {
        if (rails[p] == NULL) {
            continue;
        }
        rig_end *e = end_of(p);
        T_EQ(rig_end_ready_count(e), RIG_COUNT_FAILED);
        T_EQ(rig_end_sent(e), RIG_COUNT_FAILED);
        T_EQ(rig_end_arrived(e), RIG_COUNT_FAILED);
        T_ASSERT(rig_end_failed(e));
        rig_end_ready(e, 1000);
        rig_ready_fn fn = rig_end_ready_fn(e);
        T_ASSERT(fn != NULL);
        fn(rig_end_counts(e).base, 2000);
        T_ASSERT(!rig_end_wait_arrived(e, 1));
        T_ASSERT(!rig_end_wait_sent(e, 1));
        T_EQ(rig_end_ready_count(e), RIG_COUNT_FAILED);
        T_EQ(rig_end_sent(e), RIG_COUNT_FAILED);
        T_EQ(rig_end_arrived(e), RIG_COUNT_FAILED);
    }
    char *why = rig_job_failure(job);
    T_ASSERT(why != NULL && strncmp(why, "failed: ", 8) == 0);
    free(why);
}

/* A later rail fails at once with "failed:" and `has`, without the peer. */
static void check_later_call(int peer, const char *has)
{
    static const rig_transfer t = {0, 0, 8};
    rig_rail *r = NULL;
    char *msg = NULL;
    T_ERR(rig_job_rail(job, peer, &t, 1, &t, 1, &r, &t_err), "failed:", has,
          &msg);
    printf("rank %d: later rig_job_rail: %s\n", rig_job_rank(job), msg);
    free(msg);
    T_ASSERT(r == NULL);
}

static void release_rails(void)
{
    for (int p = 0; p < 8; p++) {
        rig_rail_release(rails[p]);
        rails[p] = NULL;
    }
}

static int test_kill(void)
{
    static const int pairs[][2] = {{0, 1}, {0, 2}, {1, 2}};
    make_rails(pairs, 3);
    int me = rig_job_rank(job);
    uint64_t run = 0;
    for (; run < 50; run++) {
        exchange(run);
    }
    if (me == 2) {
        fflush(stdout);
        send_time(0, run);
        send_time(1, run);
        /* Die only once both have the time (see test_finalize). */
        T_ASSERT(rig_end_wait_arrived(end_of(0), run + 1));
        T_ASSERT(rig_end_wait_arrived(end_of(1), run + 1));
        raise(SIGKILL);
        for (;;) {
            pause();
        }
    }
    int other = 1 - me;
    uint64_t t_kill = recv_time(2, run);
    rig_end_ready(end_of(2), run + 1); /* got it: rank 2 may die */
    uint64_t t_seen = wait_failed(2, run + 2);
    /* The survivors' own rail fails too. */
    T_ASSERT(!rig_end_wait_arrived(end_of(other), run + 2));
    check_all_failed();
    /* The job's reason names rank 2; without --enable-recovery
     * (RIG_TEST_LAUNCHER_ENDS) it may name the other survivor instead:
     * the launcher ends the job once rank 2 died, and MPICH 4.0's Hydra
     * killed rank 0 before rank 1 took rank 2's death in (CI, 2026-12-05:
     * "failed: rank 0 died (pid P, seen by rank 1)").  Under recovery
     * nobody kills a survivor, so only rank 2 will do. */
    char *why = rig_job_failure(job);
    char has[24] = "rank 2";
    bool ucx = t_transport_ucx();
    if (getenv("RIG_TEST_LAUNCHER_ENDS") != NULL &&
        !t_names_death(why, 2, ucx) && t_names_death(why, other, ucx)) {
        printf("info: rank %d: the launcher ended rank %d first: %s\n", me,
               other, why);
        snprintf(has, sizeof(has), "rank %d", other);
    }
    free(why);
    check_later_call(other, has);
    double ms = (double)(t_seen - t_kill) / 1e6;
    printf("rank %d: detection of killed rank 2: %.3f ms (bound 2000 ms)\n", me,
           ms);
    T_ASSERT(ms < 2000.0);
    release_rails();
    uint64_t t0 = now_ns();
    bool all = rig_job_close(job);
    printf("rank %d: rig_job_close without rank 2: %.1f ms\n", me,
           (double)(now_ns() - t0) / 1e6);
    T_ASSERT(!all);
    printf("rank %d: PASS kill\n", me);
    /* rig/job.h's ending of a failed job: MPI_Finalize waits for every
     * process, rank 2 included, in Open MPI 4.1 even under
     * --enable-recovery. */
    fflush(NULL);
    exit(0);
}

static int test_fail(void)
{
    /* Rank 2 shares no rail with rank 1: it learns from the message. */
    static const int pairs[][2] = {{0, 1}, {0, 2}};
    make_rails(pairs, 2);
    int me = rig_job_rank(job);
    for (uint64_t run = 0; run < 50; run++) {
        exchange(run);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t t0 = 0, seen = 0;
    if (me == 1) {
        t0 = now_ns();
        rig_job_fail(job, "test: rank 1 gives up");
        seen = now_ns();
    } else {
        seen = wait_failed(0 == me ? 1 : 0, 1000);
    }
    bcast_sleeping(&t0, 1, MPI_UINT64_T, 1);
    check_all_failed();
    if (me != 1) {
        check_later_call(me == 0 ? 2 : 0, "rig_job_fail on rank 1: test: "
                                          "rank 1 gives up");
        double ms = (double)(seen - t0) / 1e6;
        printf("rank %d: rig_job_fail on rank 1 seen after %.3f ms "
               "(bound 100 ms)\n",
               me, ms);
        /* The bound the failure issue states, a hang guard here: about
         * 0.6 ms is measured over UCX, 6 ms over the MPI transport
         * (whose watcher looks every 10 ms). */
        T_ASSERT(ms < 100.0);
    }
    release_rails();
    /* Every rank is alive: the close is whole, MPI_Finalize may follow. */
    T_ASSERT(rig_job_close(job));
    printf("rank %d: PASS fail\n", me);
    return 0;
}

static int test_finalize(void)
{
    static const int pairs[][2] = {{0, 1}};
    make_rails(pairs, 1);
    int me = rig_job_rank(job);
    uint64_t run = 0;
    for (; run < 50; run++) {
        exchange(run);
    }
    if (me == 1) {
        send_time(0, run);
        /* Finalize only once rank 0 has the time: the failure must not
         * overtake it, since a failed count hides what arrived before. */
        T_ASSERT(rig_end_wait_arrived(end_of(0), run + 1));
        left_open = job; /* never closed, on purpose (reachable for LSan) */
        MPI_Finalize();
        printf("rank 1: PASS finalize (left its job open)\n");
        return 0;
    }
    uint64_t t0 = recv_time(1, run);
    rig_end_ready(end_of(1), run + 1); /* got it: rank 1 may finalize */
    uint64_t seen = wait_failed(1, run + 2);
    check_all_failed();
    check_later_call(1, "rank 1 finalized MPI");
    printf("rank 0: rank 1's MPI_Finalize without close seen after %.3f "
           "ms\n",
           (double)(seen - t0) / 1e6);
    release_rails();
    /* Rank 1 left without closing, alive: MPI_Finalize may follow. */
    T_ASSERT(rig_job_close(job));
    printf("rank 0: PASS finalize\n");
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    int need = strcmp(mode, "--finalize") == 0 ? 2 : 3;
    if (size != need) {
        if (t_rank == 0) {
            printf("FAIL: %s needs %d ranks, not %d\n", mode, need, size);
        }
        MPI_Finalize();
        return 1;
    }
    job = t_job_open();
    int rc;
    if (strcmp(mode, "--kill") == 0) {
        rc = test_kill();
    } else if (strcmp(mode, "--fail") == 0) {
        rc = test_fail();
    } else if (strcmp(mode, "--finalize") == 0) {
        return test_finalize();
    } else {
        T_FAIL("unknown mode \"%s\"", mode);
    }
    MPI_Finalize();
    return rc;
}
