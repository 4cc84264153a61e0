/* SPDX-License-Identifier: BSD-3-Clause */
/* Rails across simulated hosts: opening and carrying, a cut link, a
 * stopped peer.  Run by mpi_tests/multihost/mhtest.sh, one rank a host.
 *
 * Usage: test_hosts MODE [--thread single|funneled|serialized|multiple]
 *                        [--may-refuse] [--bytes N] [--down-ms N]
 *   --open        every rank on its own host (distinct host names, and the
 *                 bytes cross each rank's eth0: its rx counter grows by at
 *                 least what landed in its ends); rails between every pair
 * carry 20 runs of --bytes (default 1 MiB, three transfers) and every byte
 * lands where it should.
 *   --cut OP      the last rank cuts its host's link (OP, one of ctl.sh's:
 *                 eth-down, port-down, drop-out, drop-in) while every rail
 *                 is busy (--busy: a 16 MiB run in flight on every rail)
 *                 or idle (--idle: every run arrived, every rank waiting
 *                 for the next).  Every rank, the cut one too, must see
 *                 every count of every end at RIG_COUNT_FAILED within
 *                 2000 ms of the cut, with a "failed:" reason; the link
 *                 comes back 3 s after the cut (--down-ms), and 2 s
 *                 later the job is still failed and no byte has landed
 *                 since.
 *   --stop S      the last rank is stopped (SIGSTOP) for S seconds while
 *                 the others' 4 MiB runs to it are in flight and they wait
 *                 for its run: a stopped process is not a dead one.
 *                 Nothing may fail; its run arrives after the stop,
 *                 intact, and a last run completes.
 *   --down-ms N   how long a cut link stays down (default 3000, at least
 *                 1000); waits give up after 10 s or N ms, whichever is
 *                 longer: with a long N the test measures how long today's
 *                 detection takes (and fails on the 2000 ms bound).
 *   --may-refuse  rig_job_open may refuse with "unsupported:" (a transport
 *                 that cannot work across hosts); the refusal, the same at
 *                 every rank, passes.  Any other failure to open fails.
 * Times are CLOCK_MONOTONIC, which the simulated hosts share (one kernel);
 * the cut time reaches the other ranks through a file in $RIG_MH_DIR,
 * since the cut link cannot carry it.  The link is cut and restored by
 * $RIG_MH_CTL (ctl.sh). */
#include "../mpitest.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXR 8
#define BOUND_MS 2000.0
#define AFTER_MS 2000u /* watched for stale bytes after the return */

/* How long a cut link stays down (--down-ms); snapshots are taken 500 ms
 * before it returns, after the detection the test demands. */
static unsigned down_ms = 3000;

static rig_job *job;
static int me, nranks;
static rig_rail *rails[MAXR]; /* by peer; NULL: none (or this rank) */
static size_t run_bytes;      /* of one run, each direction of each rail */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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

/* Three back-to-back transfers per run (a halo's shape): the rail carries
 * bytes [0, n) of the sender's copy to [0, n) of the receiver's. */
static void transfers(size_t n, rig_transfer t[3])
{
    int64_t a = (int64_t)(n / 4), b = (int64_t)(n / 2);
    t[0] = (rig_transfer){0, 0, a};
    t[1] = (rig_transfer){a, a, b - a};
    t[2] = (rig_transfer){b, b, (int64_t)n - b};
}

/* Rails between every pair, in one global order of pairs. */
static void make_rails(size_t n)
{
    rig_transfer t[3];
    transfers(n, t);
    for (int a = 0; a < nranks; a++) {
        for (int b = a + 1; b < nranks; b++) {
            if (me != a && me != b) {
                continue;
            }
            int peer = me == a ? b : a;
            T_OK(rig_job_rail(job, peer, t, 3, t, 3, &rails[peer], &t_err));
        }
    }
}

/* The salt of the bytes that rank `from` sends to rank `to`. */
static unsigned salt(int from, int to)
{
    return (unsigned)(from * MAXR + to);
}

/* Readies run on every rail once the run before the last was sent.
 * racing: a cut may come meanwhile (the busy cut lands while the last
 * big run may still be in flight), so a wait may end in the job's
 * failure; the rest is then left unreadied, and the waits that follow
 * see the failure. */
static void ready_run(uint64_t run, bool racing)
{
    for (int p = 0; p < nranks; p++) {
        if (rails[p] == NULL) {
            continue;
        }
        rig_end *e = end_of(p);
        if (run >= 2) {
            bool sent = rig_end_wait_sent(e, 3 * (run - 1));
            if (!sent && racing && rig_job_failed(job)) {
                return;
            }
            T_ASSERT(sent);
        }
        t_fill(rig_area_copy(rig_end_outbound(e), (unsigned)(run % 2)).base,
               run_bytes, run, salt(me, p));
        rig_end_ready(e, 3 * (run + 1));
    }
}

static void check_run(uint64_t run)
{
    for (int p = 0; p < nranks; p++) {
        if (rails[p] == NULL) {
            continue;
        }
        rig_end *e = end_of(p);
        T_ASSERT(rig_end_wait_arrived(e, 3 * (run + 1)));
        T_LANDED(rig_area_copy(rig_end_inbound(e), (unsigned)(run % 2)).base, 0,
                 run_bytes, run, salt(p, me));
    }
}

static void release_rails(void)
{
    for (int p = 0; p < MAXR; p++) {
        rig_rail_release(rails[p]);
        rails[p] = NULL;
    }
}

static const char *env_or_fail(const char *name)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0') {
        T_FAIL("%s is not set (run under mpi_tests/multihost/mhtest.sh)", name);
    }
    return v;
}

/* ---- --open ---------------------------------------------------------- */

static uint64_t eth0_rx(void)
{
    FILE *f = fopen("/sys/class/net/eth0/statistics/rx_bytes", "r");
    unsigned long long v = 0;
    if (f == NULL || fscanf(f, "%llu", &v) != 1) {
        T_FAIL("cannot read eth0's rx_bytes: %s", strerror(errno));
    }
    fclose(f);
    return v;
}

static int test_open(void)
{
    /* Distinct hosts: host names differ, and so do the job's records. */
    char name[64] = {0}, *all = calloc((size_t)nranks, 64);
    T_ASSERT(all != NULL);
    gethostname(name, sizeof(name) - 1);
    MPI_Allgather(name, 64, MPI_CHAR, all, 64, MPI_CHAR, MPI_COMM_WORLD);
    for (int a = 0; a < nranks; a++) {
        for (int b = a + 1; b < nranks; b++) {
            if (strcmp(all + a * 64, all + b * 64) == 0) {
                T_FAIL("ranks %d and %d share host %s", a, b, all + a * 64);
            }
        }
        const rig_host *h = rig_job_host(job, a);
        T_ASSERT(h != NULL);
        if (strncmp(h->machine, all + a * 64, strlen(all + a * 64)) != 0) {
            T_FAIL("rank %d's machine is \"%s\", not on host %s", a, h->machine,
                   all + a * 64);
        }
    }
    free(all);
    make_rails(run_bytes);
    uint64_t rx0 = eth0_rx();
    MPI_Barrier(MPI_COMM_WORLD); /* no rank sends before all have read */
    const uint64_t runs = 20;
    for (uint64_t run = 0; run < runs; run++) {
        ready_run(run, false);
        check_run(run);
    }
    /* Everything received has landed (checked): it came in on eth0. */
    uint64_t got = runs * run_bytes * (uint64_t)(nranks - 1);
    uint64_t rx = eth0_rx() - rx0;
    printf("rank %d (%s): %llu bytes received on rails, eth0 received "
           "%llu\n",
           me, name, (unsigned long long)got, (unsigned long long)rx);
    if (rx < got) {
        T_FAIL("eth0 received %llu bytes, fewer than the %llu of the "
               "rails: the bytes did not cross the simulated network",
               (unsigned long long)rx, (unsigned long long)got);
    }
    release_rails();
    rig_job_close(job);
    printf("rank %d: PASS open (%d hosts)\n", me, nranks);
    return 0;
}

/* ---- --cut ----------------------------------------------------------- */

typedef struct {
    const char *op;
    const char *ctl;
    char host[64];
    atomic_bool go;     /* the main thread is busy or idle now */
    uint64_t lead_ns;   /* cut this long after go */
    uint64_t t_cut;     /* just before the cut command */
    uint64_t t_restore; /* just before the restore command */
    char path[512];     /* where t_cut goes for the other ranks */
    int rc_cut, rc_restore;
} cutter;

static int ctl(const cutter *c, const char *op)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s %s %s", c->ctl, op, c->host);
    return system(cmd);
}

static void *cut_main(void *arg)
{
    cutter *c = arg;
    while (!atomic_load(&c->go)) {
        usleep(100);
    }
    sleep_until(now_ns() + c->lead_ns);
    c->t_cut = now_ns();
    c->rc_cut = ctl(c, c->op);
    FILE *f = fopen(c->path, "w");
    if (f != NULL) {
        fprintf(f, "%llu\n", (unsigned long long)c->t_cut);
        fclose(f);
    }
    sleep_until(c->t_cut + down_ms * 1000000ull);
    c->t_restore = now_ns();
    c->rc_restore = ctl(c, "restore");
    return NULL;
}

/* The cut time the last rank wrote (waits for it, 10 s at most). */
static uint64_t read_cut_time(const char *path)
{
    uint64_t until = now_ns() + 10000000000ull;
    while (now_ns() < until) {
        FILE *f = fopen(path, "r");
        unsigned long long t = 0;
        int n = f != NULL ? fscanf(f, "%llu", &t) : 0;
        if (f != NULL) {
            fclose(f);
        }
        if (n == 1 && t != 0) {
            return t;
        }
        usleep(1000);
    }
    T_FAIL("no cut time in %s after 10 s", path);
}

typedef struct {
    uint8_t *in; /* both inbound copies */
    size_t in_len;
    uint64_t counts[3];
} snapshot;

static void take(snapshot *s, int p)
{
    rig_end *e = end_of(p);
    rig_area a = rig_end_inbound(e);
    s->in_len = a.len;
    s->in = malloc(a.len);
    T_ASSERT(s->in != NULL);
    memcpy(s->in, a.base, a.len);
    s->counts[0] = rig_end_ready_count(e);
    s->counts[1] = rig_end_sent(e);
    s->counts[2] = rig_end_arrived(e);
}

/* Every count of every end at RIG_COUNT_FAILED, and waits end at once. */
static void check_all_failed(void)
{
    for (int p = 0; p < nranks; p++) {
        if (rails[p] == NULL) {
            continue;
        }
        rig_end *e = end_of(p);
        T_EQ(rig_end_ready_count(e), RIG_COUNT_FAILED);
        T_EQ(rig_end_sent(e), RIG_COUNT_FAILED);
        T_EQ(rig_end_arrived(e), RIG_COUNT_FAILED);
        T_ASSERT(rig_end_failed(e));
        T_ASSERT(!rig_end_wait_arrived(e, 1));
        T_ASSERT(!rig_end_wait_sent(e, 1));
    }
}

/* The job's reason, through a later rail that must fail at once. */
static void check_reason(void)
{
    int peer = me == 0 ? 1 : 0;
    static const rig_transfer t = {0, 0, 8};
    rig_rail *r = NULL;
    char *msg = NULL;
    T_ERR(rig_job_rail(job, peer, &t, 1, &t, 1, &r, &t_err), "failed:", "",
          &msg);
    T_ASSERT(r == NULL);
    printf("rank %d: reason: %s\n", me, msg);
    free(msg);
}

static int test_cut(const char *op, bool busy)
{
    const size_t big = (size_t)16 << 20, small = 64;
    const uint64_t warm = busy ? 4 : 10;
    bool cuts = me == nranks - 1;
    cutter c = {.op = op, .lead_ns = busy ? 2000000u : 300000000u};
    /* The wait's hang guard: 10 s, or while the link is down. */
    const unsigned guard_ms = down_ms > 10000 ? down_ms : 10000;
    snprintf(c.path, sizeof(c.path), "%s/cut.time", env_or_fail("RIG_MH_DIR"));
    if (cuts) {
        c.ctl = env_or_fail("RIG_MH_CTL");
        gethostname(c.host, sizeof(c.host) - 1);
        unlink(c.path);
    }
    run_bytes = busy ? big : small;
    make_rails(run_bytes);
    for (uint64_t run = 0; run < warm; run++) {
        ready_run(run, false);
        check_run(run);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* the cut time file is gone */
    pthread_t th;
    if (cuts) {
        T_ASSERT(pthread_create(&th, NULL, cut_main, &c) == 0);
    }
    if (cuts) {
        atomic_store(&c.go, true);
    }
    if (busy) {
        /* Every rail carries a big run; the cut lands mid-flight. */
        ready_run(warm, true);
    }
    /* Every rank then waits for a run no one readies: only the failure
     * ends the wait. */
    const uint64_t never = 3 * (warm + 2);
    uint64_t t_seen[MAXR] = {0};
    for (int p = 0; p < nranks; p++) {
        if (rails[p] == NULL) {
            continue;
        }
        bool timed_out = false;
        bool ok =
            rig_end_wait_arrived_for(end_of(p), never, guard_ms, &timed_out);
        t_seen[p] = now_ns();
        if (timed_out) {
            T_FAIL("no failure on the rail to rank %d %u ms after the cut "
                   "(%s, %s)",
                   p, guard_ms, op, busy ? "busy" : "idle");
        }
        if (ok) {
            T_FAIL("the rail to rank %d carried a run no one readied", p);
        }
    }
    uint64_t t_cut = read_cut_time(c.path);
    check_all_failed();
    T_ASSERT(rig_job_failed(job));
    check_reason();
    double worst = 0;
    for (int p = 0; p < nranks; p++) {
        if (rails[p] != NULL) {
            double ms =
                t_seen[p] > t_cut ? (double)(t_seen[p] - t_cut) / 1e6 : 0.0;
            worst = ms > worst ? ms : worst;
        }
    }
    printf("rank %d: %s (%s) seen after %.1f ms (bound %.0f ms)\n", me, op,
           busy ? "busy" : "idle", worst, BOUND_MS);
    T_ASSERT(worst < BOUND_MS);

    /* No resurrection: what lands after the link returns is stale. */
    sleep_until(t_cut + (down_ms - 500) * 1000000ull);
    snapshot snap[MAXR] = {0};
    for (int p = 0; p < nranks; p++) {
        if (rails[p] != NULL) {
            take(&snap[p], p);
        }
    }
    sleep_until(t_cut + (down_ms + AFTER_MS) * 1000000ull);
    if (cuts) {
        pthread_join(th, NULL);
        T_EQ(c.rc_cut, 0);
        T_EQ(c.rc_restore, 0);
    }
    for (int p = 0; p < nranks; p++) {
        if (rails[p] == NULL) {
            continue;
        }
        snapshot now;
        take(&now, p);
        for (int i = 0; i < 3; i++) {
            T_EQ(now.counts[i], RIG_COUNT_FAILED);
        }
        for (size_t x = 0; x < now.in_len; x++) {
            if (now.in[x] != snap[p].in[x]) {
                T_FAIL("byte %zu of the inbound area from rank %d changed "
                       "after the failure (%u -> %u): stale bytes landed "
                       "when the link came back",
                       x, p, (unsigned)snap[p].in[x], (unsigned)now.in[x]);
            }
        }
        free(now.in);
        free(snap[p].in);
    }
    T_ASSERT(rig_job_failed(job));
    check_all_failed();
    printf("rank %d: still failed %u ms after the link returned, no stale "
           "bytes\n",
           me, AFTER_MS);
    release_rails();
    rig_job_close(job);
    printf("rank %d: PASS cut %s %s\n", me, op, busy ? "busy" : "idle");
    return 0;
}

/* ---- --stop ---------------------------------------------------------- */

static int test_stop(unsigned seconds)
{
    const uint64_t warm = 10;
    bool stopped = me == nranks - 1;
    run_bytes = (size_t)4 << 20;
    make_rails(run_bytes);
    for (uint64_t run = 0; run < warm; run++) {
        ready_run(run, false);
        check_run(run);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t t0 = now_ns();
    if (stopped) {
        /* Stopped before it readies: the others' runs to it are in
         * flight and their waits for its run last the whole stop. */
        pid_t parent = getpid();
        pid_t child = fork();
        T_ASSERT(child >= 0);
        if (child == 0) {
            kill(parent, SIGSTOP);
            struct timespec ts = {(time_t)seconds, 0};
            nanosleep(&ts, NULL);
            kill(parent, SIGCONT);
            _exit(0);
        }
        int st;
        /* Returns once the child ended: after the stop. */
        while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
        }
    }
    ready_run(warm, false);
    for (int p = 0; p < nranks; p++) {
        if (rails[p] == NULL) {
            continue;
        }
        bool timed_out = false;
        bool ok = rig_end_wait_arrived_for(end_of(p), 3 * (warm + 1),
                                           (seconds + 30) * 1000, &timed_out);
        if (timed_out) {
            T_FAIL("run %llu from rank %d did not arrive %u s after the "
                   "stop ended",
                   (unsigned long long)warm, p, 30);
        }
        if (!ok) {
            T_FAIL("the job failed while rank %d was stopped for %u s: a "
                   "stopped process is not a dead one",
                   nranks - 1, seconds);
        }
    }
    double s = (double)(now_ns() - t0) / 1e9;
    check_run(warm);
    printf("rank %d: run %llu complete after %.2f s (rank %d stopped %u s)\n",
           me, (unsigned long long)warm, s, nranks - 1, seconds);
    T_ASSERT(!rig_job_failed(job));
    if (s < (double)seconds * 0.8) {
        T_FAIL("run %llu completed in %.2f s: the stop did not happen",
               (unsigned long long)warm, s);
    }
    ready_run(warm + 1, false);
    check_run(warm + 1);
    release_rails();
    rig_job_close(job);
    printf("rank %d: PASS stop %u s\n", me, seconds);
    return 0;
}

/* ---- main ------------------------------------------------------------ */

static int thread_level(const char *s)
{
    static const struct {
        const char *name;
        int level;
    } levels[] = {{"single", MPI_THREAD_SINGLE},
                  {"funneled", MPI_THREAD_FUNNELED},
                  {"serialized", MPI_THREAD_SERIALIZED},
                  {"multiple", MPI_THREAD_MULTIPLE}};
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
        if (strcmp(s, levels[i].name) == 0) {
            return levels[i].level;
        }
    }
    fprintf(stderr, "FAIL: unknown thread level %s\n", s);
    exit(1);
}

int main(int argc, char **argv)
{
    const char *mode = NULL, *op = NULL;
    bool busy = true, may_refuse = false;
    unsigned stop_s = 5;
    int level = MPI_THREAD_FUNNELED;
    run_bytes = (size_t)1 << 20;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--open") == 0) {
            mode = a;
        } else if (strcmp(a, "--cut") == 0 && v != NULL) {
            mode = a;
            op = v;
            i++;
        } else if (strcmp(a, "--stop") == 0 && v != NULL) {
            mode = a;
            stop_s = (unsigned)strtoul(v, NULL, 10);
            i++;
        } else if (strcmp(a, "--busy") == 0 || strcmp(a, "--idle") == 0) {
            busy = strcmp(a, "--busy") == 0;
        } else if (strcmp(a, "--may-refuse") == 0) {
            may_refuse = true;
        } else if (strcmp(a, "--thread") == 0 && v != NULL) {
            level = thread_level(v);
            i++;
        } else if (strcmp(a, "--down-ms") == 0 && v != NULL) {
            down_ms = (unsigned)strtoul(v, NULL, 10);
            i++;
        } else if (strcmp(a, "--bytes") == 0 && v != NULL) {
            run_bytes = (size_t)strtoull(v, NULL, 10);
            i++;
        } else {
            fprintf(stderr, "FAIL: bad argument %s\n", a);
            return 1;
        }
    }
    int provided;
    MPI_Init_thread(&argc, &argv, level, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    me = t_rank;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (mode == NULL || nranks < 2 || nranks > MAXR || run_bytes < 4 ||
        down_ms < 1000) {
        if (me == 0) {
            printf("FAIL: needs a mode and 2 to %d ranks (see the header)\n",
                   MAXR);
        }
        MPI_Finalize();
        return 1;
    }
    if (provided < level) {
        /* What the job is opened under is what the test is about. */
        if (me == 0) {
            printf("FAIL: MPI gave thread level %d, not %d\n", provided, level);
        }
        MPI_Finalize();
        return 1;
    }
    char *err = NULL;
    if (!rig_job_open(MPI_COMM_WORLD, NULL, &job, &err)) {
        if (may_refuse && strncmp(err, "unsupported:", 12) == 0) {
            printf("rank %d: PASS refused at rig_job_open: %s\n", me, err);
            free(err);
            MPI_Finalize();
            return 0;
        }
        T_FAIL("rig_job_open failed: %s", err);
    }
    int rc = 0;
    if (strcmp(mode, "--open") == 0) {
        rc = test_open();
    } else if (strcmp(mode, "--cut") == 0) {
        rc = test_cut(op, busy);
    } else {
        rc = test_stop(stop_s);
    }
    MPI_Finalize();
    return rc;
}
