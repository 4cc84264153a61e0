/* SPDX-License-Identifier: BSD-3-Clause */
/* Never hang (issue 13): the deaths, races and counts that must not block
 * a survivor, each asserting that the survivor unblocks within 2 s with
 * every count at RIG_COUNT_FAILED and the reason delivered.
 *
 * Usage: test_neverhang MODE [ARG]
 *   --close-death-norails (2)  rank 1 dies while rank 0 is inside
 *                              rig_job_close; no rails
 *   --close-death-rails (2)    the same with a rail, which rank 0 holds
 *                              over the close: its counts fail and
 *                              rig_end_failure names the death after it
 *   --close-death-both (2)     rank 1 dies 1 ms into its own close, which
 *                              rank 0 enters 1 ms later
 *   --partial (3)              rails only between 0 and 2; rank 1 dies:
 *                              the waits of 0 and 2 and rig_job_failed
 *                              agree at once, and both learn why
 *   --before-rail (2)          rank 1 dies while rank 0 waits for it in
 *                              its first rig_job_rail
 *   --others (4)               rails 0-1 and 2-3; rank 1 dies: ranks 2
 *                              and 3, with no rail to it, see it too
 *   --lower [JOBS] (2)         rank 0 carries without pause while rank 1
 *                              fails the job: rank 1's counts, once at
 *                              RIG_COUNT_FAILED, never come down again;
 *                              JOBS jobs in a row (default 20)
 *   --cycles [N] (2)           N rails made, used and released in turn
 *                              (default 10000): resident memory flat,
 *                              the job's window keeps room
 *   --stop (2)                 rank 1 stopped (SIGSTOP) for 5 s is not a
 *                              failure
 *   --jump (2)                 ready jumps to INT64_MAX - 1: returns at
 *                              once, the last two runs land
 *   --connect-death (3)        RIG_TRANSPORT=mpi: rank 1 dies inside the
 *                              window allocation of its rail with rank 0,
 *                              which MPI cannot leave: the transport ends
 *                              rank 0 (status 70) 1-3 s after; rank 2
 *                              sees it end
 * A rank that dies announces the time it will die (CLOCK_MONOTONIC, one
 * per node) to the others first.  Survivors end as rig/job.h says a
 * failed job must: rig_job_close says a rank left, so no MPI_Finalize.
 * Lines "UNBLOCK <mode> <transport> rank R: ..." give the measured times.
 */
#include "../../tests/sanitizer.h"
#include "../mpitest.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#define RSS_CHECKED (!RIG_TEST_ASAN)

#define TAG_TIME 4242
#define BOUND_MS 2000.0 /* the bound for every unblock */
#define GUARD_MS 10000  /* a hang guard on every wait */

static rig_job *job;
static int me, size;
static const char *mode = "";
static char transport[48];
static rig_rail *rails[8]; /* by peer; NULL: none */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double ms_since(uint64_t t0, uint64_t t1)
{
    return t1 > t0 ? (double)(t1 - t0) / 1e6 : 0.0;
}

static void sleep_until(uint64_t t)
{
    for (uint64_t n = now_ns(); n < t; n = now_ns()) {
        uint64_t d = t - n;
        struct timespec ts = {(time_t)(d / 1000000000u),
                              (long)(d % 1000000000u)};
        nanosleep(&ts, NULL);
    }
}

static rig_end *end_of(int peer)
{
    return rig_rail_local(rails[peer]);
}

/* A rail of one 64-byte transfer each way with peer. */
static void make_rail(int peer)
{
    static const rig_transfer t = {0, 0, 64};
    T_OK(rig_job_rail(job, peer, &t, 1, &t, 1, &rails[peer], &t_err));
}

/* Run `run` (from 0) on every rail of this rank: write, ready, wait,
 * check what landed. */
static void exchange(uint64_t run)
{
    for (int p = 0; p < size; p++) {
        if (rails[p] != NULL) {
            rig_end *e = end_of(p);
            if (run >= 2) {
                T_ASSERT(rig_end_wait_sent(e, run - 1));
            }
            memset(rig_end_outbound(e).base + (run % 2) * 256,
                   (int)(me * 16 + run), 64);
            rig_end_ready(e, run + 1);
        }
    }
    for (int p = 0; p < size; p++) {
        if (rails[p] != NULL) {
            rig_end *e = end_of(p);
            T_ASSERT(rig_end_wait_arrived(e, run + 1));
            const uint8_t *in = rig_end_inbound(e).base + (run % 2) * 256;
            T_EQ(in[0], (uint8_t)(p * 16 + run));
            T_EQ(in[63], (uint8_t)(p * 16 + run));
        }
    }
}

/* ---- a death, announced ------------------------------------------------- */

/* The victim tells every other rank when it dies (delay_ns from now).
 * Every rank first meets the others, so that the delay counts from when
 * the last of them got here: on a loaded machine a survivor may still be
 * making its rails or running its exchanges 100 ms after the victim
 * passed this point, and a death before the survivors are ready is not
 * the case a test means. */
static uint64_t announce(int victim, uint64_t delay_ns)
{
    uint64_t t = 0;
    /* The death is timed from when every rank got here: under load the
     * others may take longer than delay_ns to reach this point. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == victim) {
        t = now_ns() + delay_ns;
        for (int r = 0; r < size; r++) {
            if (r != victim) {
                MPI_Send(&t, 1, MPI_UINT64_T, r, TAG_TIME, MPI_COMM_WORLD);
            }
        }
    } else {
        MPI_Recv(&t, 1, MPI_UINT64_T, victim, TAG_TIME, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    }
    return t;
}

static void die_at(uint64_t t)
{
    fflush(stdout);
    fflush(stderr);
    sleep_until(t);
    raise(SIGKILL);
    for (;;) {
        pause();
    }
}

static void *killer(void *arg)
{
    die_at(*(uint64_t *)arg);
    return NULL;
}

/* ---- what a survivor checks --------------------------------------------- */

/* The job failed: rig_job_failed says so at once (a wait returned false
 * before), every count of every end is RIG_COUNT_FAILED, and the reason,
 * from the job and from every end, names the victim's death. */
static void check_failed(int victim)
{
    T_ASSERT(rig_job_failed(job));
    char *why = rig_job_failure(job);
    T_ASSERT(why != NULL);
    if (!t_names_death(why, victim, t_transport_ucx())) {
        T_FAIL("reason \"%s\" does not name rank %d's death", why, victim);
    }
    for (int p = 0; p < size; p++) {
        if (rails[p] == NULL) {
            continue;
        }
        rig_end *e = end_of(p);
        T_EQ(rig_end_ready_count(e), RIG_COUNT_FAILED);
        T_EQ(rig_end_sent(e), RIG_COUNT_FAILED);
        T_EQ(rig_end_arrived(e), RIG_COUNT_FAILED);
        char *ewhy = rig_end_failure(e);
        T_ASSERT(ewhy != NULL);
        if (strcmp(ewhy, why) != 0) {
            T_FAIL("rig_end_failure \"%s\" != rig_job_failure \"%s\"", ewhy,
                   why);
        }
        free(ewhy);
    }
    printf("rank %d: reason: %s\n", me, why);
    free(why);
}

/* Every rail of this rank fails within BOUND_MS of t_kill; returns when
 * the first wait returned. */
static uint64_t waits_fail(uint64_t t_kill)
{
    uint64_t first = 0;
    for (int p = 0; p < size; p++) {
        if (rails[p] == NULL) {
            continue;
        }
        bool timed_out = false;
        bool ok =
            rig_end_wait_arrived_for(end_of(p), 1u << 30, GUARD_MS, &timed_out);
        uint64_t t = now_ns();
        if (timed_out) {
            T_FAIL("the wait on the rail to rank %d did not end in %d ms", p,
                   GUARD_MS);
        }
        T_ASSERT(!ok);
        if (first == 0) {
            first = t;
            /* The same instant: a wait returned false, so the job failed
             * here and every end with it (no waiting allowed). */
            T_ASSERT(rig_job_failed(job));
            for (int q = 0; q < size; q++) {
                if (rails[q] != NULL) {
                    T_EQ(rig_end_arrived(end_of(q)), RIG_COUNT_FAILED);
                }
            }
        }
    }
    if (first != 0) {
        double ms = ms_since(t_kill, first);
        printf("UNBLOCK %s %s rank %d: waits failed %.1f ms after the death\n",
               mode, transport, me, ms);
        T_ASSERT(ms < BOUND_MS);
    }
    return first;
}

/* A later rail is refused at once, naming the death. */
static void later_rail_refused(int peer, int victim)
{
    static const rig_transfer t = {0, 0, 8};
    rig_rail *r = NULL;
    char *msg = NULL;
    uint64_t t0 = now_ns();
    T_ERR(rig_job_rail(job, peer, &t, 1, &t, 1, &r, &t_err), "failed:", "",
          &msg);
    if (!t_names_death(msg, victim, t_transport_ucx())) {
        T_FAIL("later rig_job_rail: \"%s\" does not name rank %d's death", msg,
               victim);
    }
    free(msg);
    T_ASSERT(r == NULL);
    T_ASSERT(ms_since(t0, now_ns()) < BOUND_MS);
}

/* Closes the job of a survivor within BOUND_MS of the death (or of this
 * close's start if later); returns what rig_job_close said. */
static bool close_survivor_as(uint64_t t_kill, bool must_fail)
{
    uint64_t t0 = now_ns();
    bool all = rig_job_close(job);
    uint64_t t1 = now_ns();
    job = NULL;
    if (must_fail) {
        T_ASSERT(!all); /* a rank left: MPI_Finalize must not follow */
    }
    double ms = ms_since(t0 > t_kill ? t0 : t_kill, t1);
    printf("UNBLOCK %s %s rank %d: rig_job_close returned %.1f ms after "
           "%s\n",
           mode, transport, me, ms, t0 > t_kill ? "it began" : "the death");
    T_ASSERT(ms < BOUND_MS);
    return all;
}

static void close_survivor(uint64_t t_kill)
{
    close_survivor_as(t_kill, true);
}

/* How a survivor ends (rig/job.h): no MPI_Finalize after a rank left. */
static void survivor_exit(void)
{
    printf("rank %d: PASS %s\n", me, mode);
    fflush(NULL);
    exit(EXIT_SUCCESS);
}

static void release_rails(void)
{
    for (int p = 0; p < 8; p++) {
        rig_rail_release(rails[p]);
        rails[p] = NULL;
    }
}

/* ---- deaths during close ------------------------------------------------ */

static void test_close_death(bool with_rails, bool both)
{
    if (with_rails) {
        make_rail(1 - me);
        for (uint64_t run = 0; run < 20; run++) {
            exchange(run);
        }
    }
    if (both) {
        /* Rank 1 closes at t and dies 1 ms into it; rank 0 closes 2 ms
         * after t.  On a loaded machine the death may come later than
         * meant, even after rank 0's close returned: rig_job_close then
         * rightly says every rank reached it (the death is MPI_Finalize's
         * to wait for); what must never be is a close that hangs. */
        int32_t pid = (int32_t)getpid(), peer_pid = 0;
        MPI_Sendrecv(&pid, 1, MPI_INT32_T, 1 - me, 5, &peer_pid, 1, MPI_INT32_T,
                     1 - me, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        uint64_t t = announce(1, 20000000u);
        if (me == 1) {
            uint64_t t_kill = t + 1000000u;
            pthread_t th;
            sleep_until(t);
            T_ASSERT(pthread_create(&th, NULL, killer, &t_kill) == 0);
            rig_job_close(job);
            for (;;) {
                pause(); /* the killer ends this */
            }
        }
        sleep_until(t + 2000000u);
        if (close_survivor_as(t + 1000000u, false)) {
            printf("rank 0: rank 1 died after rank 0's close returned\n");
            while (kill(peer_pid, 0) == 0 && now_ns() < t + 10000000000u) {
                usleep(1000); /* gone, or a zombie the launcher reaps */
            }
        }
    } else {
        /* Rank 0 is in its closing barrier when rank 1 dies. */
        uint64_t t_kill = announce(1, 200000000u);
        if (me == 1) {
            die_at(t_kill);
        }
        close_survivor(t_kill);
    }
    if (with_rails) {
        /* Held over the close: failed, and it still says why. */
        rig_end *e = end_of(1);
        T_EQ(rig_end_arrived(e), RIG_COUNT_FAILED);
        T_EQ(rig_end_ready_count(e), RIG_COUNT_FAILED);
        char *why = rig_end_failure(e);
        T_ASSERT(t_names_death(why, 1, t_transport_ucx()));
        printf("rank 0: reason after close: %s\n", why);
        free(why);
        release_rails();
    }
    survivor_exit();
}

/* ---- deaths elsewhere --------------------------------------------------- */

static void test_partial(void)
{
    if (me != 1) {
        make_rail(2 - me); /* 0 <-> 2 */
        for (uint64_t run = 0; run < 20; run++) {
            exchange(run);
        }
    }
    uint64_t t_kill = announce(1, 100000000u);
    if (me == 1) {
        die_at(t_kill);
    }
    waits_fail(t_kill);
    check_failed(1);
    later_rail_refused(2 - me, 1);
    later_rail_refused(1, 1);
    close_survivor(t_kill);
    release_rails();
    survivor_exit();
}

static void test_before_rail(void)
{
    uint64_t t_kill = announce(1, 200000000u);
    if (me == 1) {
        die_at(t_kill);
    }
    static const rig_transfer t = {0, 0, 64};
    rig_rail *r = NULL;
    char *msg = NULL;
    T_ERR(rig_job_rail(job, 1, &t, 1, &t, 1, &r, &t_err), "failed:", "", &msg);
    if (!t_names_death(msg, 1, t_transport_ucx())) {
        T_FAIL("rig_job_rail: \"%s\" does not name rank 1's death", msg);
    }
    double ms = ms_since(t_kill, now_ns());
    printf("UNBLOCK %s %s rank 0: rig_job_rail failed %.1f ms after the "
           "death: %s\n",
           mode, transport, ms, msg);
    free(msg);
    T_ASSERT(ms < BOUND_MS);
    check_failed(1);
    close_survivor(t_kill);
    survivor_exit();
}

static void test_others(void)
{
    make_rail(me ^ 1); /* 0-1, 2-3 */
    for (uint64_t run = 0; run < 20; run++) {
        exchange(run);
    }
    uint64_t t_kill = announce(1, 100000000u);
    if (me == 1) {
        die_at(t_kill);
    }
    waits_fail(t_kill);
    check_failed(1);
    close_survivor(t_kill);
    release_rails();
    survivor_exit();
}

/* ---- counts never come down --------------------------------------------- */

typedef struct {
    rig_end *e;
    uint64_t readies;
} pusher;

/* Rank 0's side: readies without pause until its end fails. */
static void *push(void *arg)
{
    pusher *p = arg;
    for (uint64_t c = 1; rig_end_ready_count(p->e) != RIG_COUNT_FAILED; c++) {
        rig_end_ready(p->e, c);
        p->readies = c;
    }
    return NULL;
}

static void test_lower(int jobs)
{
    static const rig_transfer t = {0, 0, 8};
    uint64_t seen = 0, readies = 0;
    for (int k = 0; k < jobs; k++) {
        if (k > 0) {
            job = t_job_open();
        }
        rig_rail *r = NULL;
        T_OK(rig_job_rail(job, 1 - me, &t, 1, &t, 1, &r, &t_err));
        rig_end *e = rig_rail_local(r);
        MPI_Barrier(MPI_COMM_WORLD);
        if (me == 0) {
            pusher p = {e, 0};
            push(&p);
            readies += p.readies;
        } else {
            /* Fail while rank 0 carries, at a different moment each job. */
            T_ASSERT(rig_end_wait_arrived(e, 1 + (uint64_t)k * 97));
            rig_job_fail(job, "test: rank 1 fails mid-flight");
            /* From here on no count of this end may be below
             * RIG_COUNT_FAILED, for as long as rank 0 may still carry. */
            uint64_t until = now_ns() + 20000000u;
            while (now_ns() < until) {
                uint64_t a = rig_end_arrived(e);
                if (a != RIG_COUNT_FAILED) {
                    T_FAIL("job %d: arrived came down to %llu after the "
                           "failure",
                           k, (unsigned long long)a);
                }
                T_ASSERT(!rig_end_wait_arrived(e, 1));
                seen++;
            }
        }
        T_ASSERT(rig_job_failed(job));
        T_ASSERT(rig_end_failed(e));
        rig_rail_release(r);
        T_ASSERT(rig_job_close(job)); /* every rank alive: a whole close */
        job = NULL;
    }
    if (me == 0) {
        printf("rank 0: %d jobs, %llu readies while rank 1 failed them\n", jobs,
               (unsigned long long)readies);
    } else {
        printf("rank 1: %d jobs, arrived read %llu times after the failure, "
               "always RIG_COUNT_FAILED\n",
               jobs, (unsigned long long)seen);
    }
}

/* ---- released rails are freed ------------------------------------------- */

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) {
            res = 0;
        }
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static void test_cycles(long n)
{
    static const rig_transfer t[2] = {{0, 0, 3000}, {4096, 8192, 5000}};
    int peer = 1 - me;
    long warm = n / 10 > 50 ? n / 10 : 50;
    long before = 0;
    uint64_t t0 = now_ns();
    for (long i = 0; i < n; i++) {
        if (i == warm) {
            before = rss_kib();
        }
        rig_rail *r = NULL;
        T_OK(rig_job_rail(job, peer, t, 2, t, 2, &r, &t_err));
        rig_end *e = rig_rail_local(r);
        size_t out_copy = rig_end_outbound(e).len / 2;
        size_t in_copy = rig_end_inbound(e).len / 2;
        for (uint64_t run = 0; run < 2; run++) {
            uint8_t *o = rig_end_outbound(e).base + run * out_copy;
            o[0] = (uint8_t)(i + run + me);
            o[4096] = (uint8_t)(i + run + me + 1);
            rig_end_ready(e, (run + 1) * 2);
            T_ASSERT(rig_end_wait_arrived(e, (run + 1) * 2));
            const uint8_t *in = rig_end_inbound(e).base + run * in_copy;
            T_EQ(in[0], (uint8_t)(i + run + peer));
            T_EQ(in[8192], (uint8_t)(i + run + peer + 1));
        }
        T_ASSERT(rig_end_wait_sent(e, 4));
        rig_rail_release(r);
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    long after = rss_kib();
    /* One rail stays live: it must still be in the job's window. */
    rig_rail *live = NULL;
    T_OK(rig_job_rail(job, peer, t, 2, t, 2, &live, &t_err));
    rig_job_peer_end pe;
    T_OK(rig_job_rail_disp(job, live, &pe, &t_err));
    T_EQ(pe.rank, peer);
    rig_rail_release(live);
    long grown = after - before;
    printf("UNBLOCK %s %s rank %d: %ld cycles in %.1f s (%.0f us each), "
           "resident %ld KiB -> %ld KiB (%+ld KiB)\n",
           mode, transport, me, n, secs, secs * 1e6 / (double)n, before, after,
           grown);
    if (!RSS_CHECKED && me == 0) {
        printf("note: resident memory not bounded here: AddressSanitizer's "
               "quarantine holds freed memory\n");
    }
    /* 64 KiB an end: a leak of one end per cycle would be 600 MiB.  Not
     * under AddressSanitizer: its quarantine holds freed memory back (up
     * to 256 MiB), and its leak check at exit covers this case. */
    if (RSS_CHECKED && grown > 4096) {
        T_FAIL("resident memory grew by %ld KiB over %ld cycles", grown,
               n - warm);
    }
}

/* ---- a death inside a collective of a pair ------------------------------ */

/* --connect-death: rank 1 dies inside the window allocation of its rail
 * with rank 0 (RIG_TRANSPORT=mpi), which rank 0 is inside too: MPI cannot
 * leave that collective, so the transport's watcher must end rank 0 about
 * a second after the death rather than let it wait for the batch
 * system's time limit.  Rank 2, with no rail, watches rank 0's process
 * end.  The allocation is MPI's profiling interface's: PMPI_* until the
 * victim is in it. */
#define TAG_PID 4243
#define PAIR_STUCK_MS 1000.0 /* src/rail/mpi/failure.c */

static bool die_in_window;

static void die_in_collective(void)
{
    if (!die_in_window) {
        return;
    }
    uint64_t t = now_ns();
    MPI_Send(&t, 1, MPI_UINT64_T, 2, TAG_TIME, MPI_COMM_WORLD);
    die_at(t);
}

int MPI_Win_allocate_shared(MPI_Aint size, int unit, MPI_Info info,
                            MPI_Comm comm, void *base, MPI_Win *win)
{
    die_in_collective();
    return PMPI_Win_allocate_shared(size, unit, info, comm, base, win);
}

int MPI_Win_allocate(MPI_Aint size, int unit, MPI_Info info, MPI_Comm comm,
                     void *base, MPI_Win *win)
{
    die_in_collective();
    return PMPI_Win_allocate(size, unit, info, comm, base, win);
}

/* Waits up to GUARD_MS for process pid to end; its end's time, 0 if not. */
static uint64_t wait_end(pid_t pid)
{
    uint64_t until = now_ns() + (uint64_t)GUARD_MS * 1000000u;
    while (now_ns() < until) {
        char path[64], state = '?';
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        /* gone, or a zombie its launcher has still to reap */
        if (f == NULL || fscanf(f, "%*d %*s %c", &state) != 1 || state == 'Z' ||
            state == 'X') {
            uint64_t t = now_ns();
            if (f != NULL) {
                fclose(f);
            }
            return t;
        }
        fclose(f);
        usleep(1000);
    }
    return 0;
}

static void test_connect_death(void)
{
    int32_t pid = (int32_t)getpid(), pid0 = 0;
    if (me == 0) {
        MPI_Send(&pid, 1, MPI_INT32_T, 2, TAG_PID, MPI_COMM_WORLD);
    } else if (me == 2) {
        MPI_Recv(&pid0, 1, MPI_INT32_T, 0, TAG_PID, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me < 2) {
        die_in_window = me == 1;
        make_rail(1 - me);
        T_FAIL("rig_job_rail returned on rank %d, whose peer %s", me,
               me == 1 ? "was this rank (it should have died)"
                       : "died inside the rail's window allocation");
    }
    MPI_Request req;
    uint64_t t_kill = 0;
    int flag = 0;
    MPI_Irecv(&t_kill, 1, MPI_UINT64_T, 1, TAG_TIME, MPI_COMM_WORLD, &req);
    for (int i = 0; i < GUARD_MS && !flag; i++) {
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        if (!flag) {
            usleep(1000);
        }
    }
    if (!flag) {
        T_FAIL("rank 1 never reached the window allocation in %d ms", GUARD_MS);
    }
    uint64_t t_end = wait_end((pid_t)pid0);
    if (t_end == 0) {
        T_FAIL("rank 0 still runs %d ms after its peer died inside their "
               "collective",
               GUARD_MS);
    }
    double ms = ms_since(t_kill, t_end);
    printf("UNBLOCK %s %s rank 0: ended %.1f ms after rank 1 died inside "
           "their window allocation (the watcher waits %.0f ms)\n",
           mode, transport, ms, PAIR_STUCK_MS);
    T_ASSERT(ms >= PAIR_STUCK_MS && ms < PAIR_STUCK_MS + BOUND_MS);
    check_failed(1);
    close_survivor(t_kill);
    survivor_exit();
}

/* ---- a stopped peer is not a dead one ----------------------------------- */

static void test_stop(void)
{
    make_rail(1 - me);
    for (uint64_t run = 0; run < 10; run++) {
        exchange(run);
    }
    int32_t pid = (int32_t)getpid(), peer_pid = 0;
    MPI_Sendrecv(&pid, 1, MPI_INT32_T, 1 - me, 5, &peer_pid, 1, MPI_INT32_T,
                 1 - me, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        /* Rank 1 readies run 10 at most, then waits for rank 0's run 10,
         * not readied yet: count 12 cannot come while it is stopped. */
        T_ASSERT(kill(peer_pid, SIGSTOP) == 0);
        bool timed_out = false;
        uint64_t t0 = now_ns();
        bool ok = rig_end_wait_arrived_for(end_of(1), 12, 5000, &timed_out);
        T_ASSERT(!ok && timed_out); /* silent, not failed */
        T_ASSERT(!rig_job_failed(job));
        T_ASSERT(kill(peer_pid, SIGCONT) == 0);
        printf("rank 0: rank 1 stopped %.0f ms: the job did not fail\n",
               ms_since(t0, now_ns()));
    }
    for (uint64_t run = 10; run < 20; run++) {
        exchange(run);
    }
    T_ASSERT(!rig_job_failed(job));
    release_rails();
}

/* ---- a jump of ready ---------------------------------------------------- */

static void test_jump(void)
{
    static const rig_transfer t[2] = {{0, 0, 100}, {512, 300, 50}};
    rig_rail *r = NULL;
    T_OK(rig_job_rail(job, 1 - me, t, 2, t, 2, &r, &t_err));
    rig_end *e = rig_rail_local(r);
    size_t out_copy = rig_end_outbound(e).len / 2;
    size_t in_copy = rig_end_inbound(e).len / 2;
    uint64_t c = (uint64_t)INT64_MAX - 1;
    /* The last runs of c: copy k holds run with run % 2 == k. */
    for (unsigned k = 0; k < 2; k++) {
        t_fill(rig_end_outbound(e).base + k * out_copy, out_copy, k, me);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t t0 = now_ns();
    rig_end_ready(e, 3); /* a small step first */
    rig_end_ready(e, c); /* then the jump */
    double ms = ms_since(t0, now_ns());
    bool timed_out = false;
    T_ASSERT(rig_end_wait_arrived_for(e, c, GUARD_MS, &timed_out));
    T_ASSERT(rig_end_wait_sent_for(e, c, GUARD_MS, &timed_out));
    printf("UNBLOCK %s %s rank %d: rig_end_ready(INT64_MAX - 1) took %.3f "
           "ms\n",
           mode, transport, me, ms);
    T_ASSERT(ms < 1000.0);
    for (unsigned k = 0; k < 2; k++) {
        const uint8_t *in = rig_end_inbound(e).base + k * in_copy;
        for (size_t j = 0; j < 2; j++) {
            T_LANDED(in + t[j].dst, t[j].src, t[j].length, k, 1 - me);
        }
    }
    rig_rail_release(r);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    me = t_rank;
    setvbuf(stdout, NULL, _IOLBF, 0);
    mode = argc > 1 ? argv[1] : "";
    long arg = argc > 2 ? atol(argv[2]) : 0;
    const char *tr = getenv("RIG_TRANSPORT");
    const char *shm = getenv("RIG_SHM_STORES");
    const char *tls = getenv("RIG_UCX_TLS");
    if (tls == NULL || tls[0] == '\0') {
        tls = getenv("UCX_TLS");
    }
    snprintf(transport, sizeof(transport), "%s%s%s",
             tr != NULL && tr[0] != '\0' ? tr : "ucx",
             shm != NULL && strcmp(shm, "off") == 0 ? "+puts" : "",
             tls != NULL && strstr(tls, "tcp") != NULL ? "+tcp" : "");
    struct {
        const char *name;
        int np;
    } modes[] = {
        {"--close-death-norails", 2},
        {"--close-death-rails", 2},
        {"--close-death-both", 2},
        {"--partial", 3},
        {"--before-rail", 2},
        {"--others", 4},
        {"--lower", 2},
        {"--cycles", 2},
        {"--stop", 2},
        {"--jump", 2},
        {"--connect-death", 3},
    };
    int need = 0;
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        if (strcmp(mode, modes[i].name) == 0) {
            need = modes[i].np;
        }
    }
    if (need == 0 || size != need) {
        if (me == 0) {
            printf("FAIL: mode \"%s\" unknown, or not %d ranks but %d\n", mode,
                   need, size);
        }
        MPI_Finalize();
        return 1;
    }
    job = t_job_open();
    if (strcmp(mode, "--close-death-norails") == 0) {
        test_close_death(false, false);
    } else if (strcmp(mode, "--close-death-rails") == 0) {
        test_close_death(true, false);
    } else if (strcmp(mode, "--close-death-both") == 0) {
        test_close_death(false, true);
    } else if (strcmp(mode, "--partial") == 0) {
        test_partial();
    } else if (strcmp(mode, "--before-rail") == 0) {
        test_before_rail();
    } else if (strcmp(mode, "--others") == 0) {
        test_others();
    } else if (strcmp(mode, "--lower") == 0) {
        test_lower(arg > 0 ? (int)arg : 20);
    } else if (strcmp(mode, "--cycles") == 0) {
        test_cycles(arg > 0 ? arg : 10000);
    } else if (strcmp(mode, "--stop") == 0) {
        test_stop();
    } else if (strcmp(mode, "--jump") == 0) {
        test_jump();
    } else if (strcmp(mode, "--connect-death") == 0) {
        test_connect_death();
    }
    /* The modes where every rank lives close together. */
    if (job != NULL) {
        T_ASSERT(rig_job_close(job));
    }
    printf("rank %d: PASS %s\n", me, mode);
    MPI_Finalize();
    return 0;
}
