/* SPDX-License-Identifier: BSD-3-Clause */
/* Waits that watch the job, the memory they may abandon, and the buffers
 * messages are packed in.
 *
 * Open MPI 4.1 has no fault-tolerant collectives: a blocking MPI_Bcast or
 * MPI_Recv with a dead peer never returns.  Every wait of this layer
 * therefore tests non-blocking requests in a loop that reads the job's
 * failure flag between tests (an atomic load: the job layer raises it
 * within its detection time of a death), and gives up at once when it is
 * raised.  The requests are then left to MPI as they are: MPI forbids
 * freeing a non-blocking collective's request, and a receive that a live
 * peer may still complete must keep its buffer. */
#include "remote_internal.h"

#include "../util/util_internal.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- pacing -------------------------------------------------------------- */

/* How a wait paces its tests.  An image moves only while its ranks test
 * (Open MPI progresses in MPI_Test; it yields the core itself when
 * oversubscribed), so a data wait never sleeps.  The other waits are hot
 * for a while -- they test, yielding the core between tests to whatever
 * else is runnable on it, as a blocking MPI call does -- then sleep:
 *   RM_PACE_IDLE   an agent waiting for a command stays hot for
 *                  RM_HOT_IDLE_NS after its last one, so that a burst of
 *                  commands (load, launch, query ...) is served at once;
 *   RM_PACE_MEET   a rank waiting in a collective step of the open for
 *                  the others to reach it is hot as long: ranks that open
 *                  together meet within it, and a rank that waits for a
 *                  late one (a controller that reads its input first, an
 *                  agent that initialises a device) sleeps, where it used
 *                  to test without pause -- a core each, 2000 ms of CPU
 *                  over a 2 s wait, taken from the late rank's own work
 *                  on a shared node (test_remote --late);
 *   RM_PACE_REPLY  the controller waiting for its agents' replies is
 *                  hot for RM_HOT_REPLY_NS only (a load's replies come in
 *                  0.1-0.7 ms), then naps a sixteenth of the time it has
 *                  waited, from 20 us to 100 us: a reply after a step of
 *                  a few ms (a launch) is taken within a sixteenth more.
 *                  Its wait used to stay hot for 20 ms, and yields that
 *                  find nothing else to run spin: on this 2-core VM an
 *                  agent's mesh_driver_start took 11.3 ms while rank 0
 *                  tested beside it, 7.4 ms while rank 0 slept, each rank
 *                  bound to a core of its own (rig_remote_bench, -np 2;
 *                  the spinning core slows the other), and the remote
 *                  launch went from 11.4-11.8 ms to 7.7-8.0 ms with the
 *                  naps, against 7.3-8.1 ms for the same launch on rank 0
 *                  alone.
 * Then the wait sleeps 1 us, 2 us ... up to 100 us (the kernel's timer
 * slack, 50 us by default, comes on top of each), and 1 ms once it has
 * been quiet for RM_QUIET_NS more, so that an idle agent costs almost
 * nothing: no wait spins when nothing is coming.
 *   RM_PACE_RUN    an agent waiting for a command while its programs run
 *                  is hot as RM_PACE_IDLE, then sleeps 1 ms, 2 ms, 4 ms,
 *                  then RM_RUN_NAP_MAX_NS at a time: its nodes have the
 *                  cores, and each wake of the agent takes one from them
 *                  (rail_latency's program-driven rounds of 100-200 ms
 *                  spent a third of each in 100 us naps; 1 ms naps still
 *                  woke the three agents of the stencil example 3,000
 *                  times a second beside its three nodes on 2 cores).
 *                  A short launch is still seen to end within a ms or
 *                  two, a long one within RM_RUN_NAP_MAX_NS.  The
 *                  controller sends nothing until the launch ends
 *                  (rig_remote_wait waits for the agent's word), and the
 *                  end of a launch makes the agent hot again
 *                  (rig_remote_serve), for the query and halt that follow. */
#define RM_SPINS 64u
#define RM_HOT_IDLE_NS 2000000ull
#define RM_HOT_REPLY_NS 100000ull
#define RM_REPLY_NAP_MIN_NS 20000ull
#define RM_REPLY_NAP_MAX_NS 100000ull
#define RM_QUIET_NS 50000000ull
#define RM_RUN_NAP_NS 1000000L
#define RM_RUN_NAP_MAX_NS 8000000L

void rm_backoff_reset(rm_backoff *b)
{
    b->spins = 0;
    b->naps = 0;
    b->idle_since = 0;
}

void rm_backoff_step(rm_backoff *b, rm_pace pace)
{
    if (pace == RM_PACE_DATA || b->spins < RM_SPINS) {
        b->spins++;
        return; /* the next MPI_Test is the progress */
    }
    uint64_t now = rig_now_ns();
    if (b->idle_since == 0) {
        b->idle_since = now;
    }
    uint64_t quiet = now - b->idle_since;
    uint64_t hot = pace == RM_PACE_REPLY ? RM_HOT_REPLY_NS : RM_HOT_IDLE_NS;
    if (quiet < hot) {
        /* A yield, not a nap, even with more ranks than PUs: on a 2-core
         * VM a nap of 1 us took 25 us with a timer slack of 1 us (110 us
         * with the default 50 us), a yield 0.7 us.  Naps in the agents'
         * hot phase (always, after 1 ms of yields, or once a yield came
         * back 200 us late) and no spins made the load and launch of
         * rig_remote_bench no faster at -np 2, 3 and 4: +-10-30 % either
         * way, within the noise of a loaded machine, and the load up to
         * 1.8x slower with naps from the first miss.  The controller's
         * reply wait is hot for 100 us only (RM_PACE_REPLY above). */
        sched_yield();
        return;
    }
    uint32_t nap = b->naps < UINT32_MAX ? b->naps++ : b->naps;
    long ns = nap >= 99 ? 100000 : 1000 * (long)(nap + 1);
    if (pace == RM_PACE_REPLY) {
        uint64_t part = quiet / 16;
        ns = (long)(part < RM_REPLY_NAP_MIN_NS   ? RM_REPLY_NAP_MIN_NS
                    : part > RM_REPLY_NAP_MAX_NS ? RM_REPLY_NAP_MAX_NS
                                                 : part);
    }
    if (pace == RM_PACE_RUN) {
        ns = nap < 3 ? RM_RUN_NAP_NS << nap : RM_RUN_NAP_MAX_NS;
    } else if (quiet - hot > RM_QUIET_NS) {
        ns = 1000000;
    }
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

/* ---- MPI that does not return ------------------------------------------ */

/* Every wait of this layer leaves when the job fails -- between MPI calls.
 * A call that MPI itself never returns from no wait can leave: across
 * machines over Open MPI 4.1's TCP BTL (mpirun --enable-recovery), an
 * agent killed while an image moved to it left the controller in
 * MPI_Testall for good, 8 loads of 14 across 3 simulated hosts: the BTL's
 * failed send closed the endpoint, whose error path sent again and took
 * the endpoint's send lock that the failed send still held.  The process
 * then waits until the batch system's time limit.  So a thread watches:
 * when the same call of this layer (RM_MPI) is still in progress at
 * every look over RIG_REMOTE_STUCK_MS (10 s by default; every call it
 * watches is one that returns at once, or takes a message that has
 * arrived), it says so and ends the process, as MPI's default error
 * handler would.  It counts looks, not the clock: a process stopped
 * (SIGSTOP) and resumed is not taken for a stuck one.  It looks every
 * quarter of the limit, at most every second, at least every 10 ms, and
 * does nothing else: an idle job wakes it once a second. */
#define RM_STUCK_LOOKS 4u
#define RM_STUCK_LOOK_MAX_NS 1000000000ull
#define RM_STUCK_LOOK_MIN_NS 10000000ull
static void stuck_end(rig_remote *rm, uint64_t looked_ns)
{
    const char *call = atomic_load(&rm->mpi_call);
    rig_stuck_exit("rank %d: %s, called by the remote layer, has not "
                   "returned in %.1f s (RIG_REMOTE_STUCK_MS=%llu): MPI is "
                   "stuck inside itself, which no wait of rig's can leave "
                   "(Open MPI 4.1's TCP BTL deadlocks so when a peer dies "
                   "during a send)",
                   rm->rank, call != NULL ? call : "an MPI call",
                   (double)looked_ns / 1e9,
                   (unsigned long long)(rm->stuck_ns / 1000000u));
}

static void *stuck_main(void *arg)
{
    rig_remote *rm = arg;
    uint64_t look = rm->stuck_ns / RM_STUCK_LOOKS;
    look = look > RM_STUCK_LOOK_MAX_NS   ? RM_STUCK_LOOK_MAX_NS
           : look < RM_STUCK_LOOK_MIN_NS ? RM_STUCK_LOOK_MIN_NS
                                         : look;
    uint64_t seen = 0, looked = 0;
    pthread_mutex_lock(&rm->stuck_lock);
    while (!rm->stuck_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t at = (uint64_t)ts.tv_nsec + look;
        ts.tv_sec += (time_t)(at / 1000000000u);
        ts.tv_nsec = (long)(at % 1000000000u);
        pthread_cond_timedwait(&rm->stuck_cond, &rm->stuck_lock, &ts);
        if (rm->stuck_stop) {
            break;
        }
        uint64_t steps =
            atomic_load_explicit(&rm->mpi_steps, memory_order_acquire);
        if ((steps & 1u) == 0 || steps != seen) {
            seen = steps;
            looked = 0;
            continue;
        }
        looked += look;
        if (looked >= rm->stuck_ns) {
            stuck_end(rm, looked);
        }
    }
    pthread_mutex_unlock(&rm->stuck_lock);
    return NULL;
}

void rm_stuck_start(rig_remote *rm)
{
    pthread_mutex_init(&rm->stuck_lock, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&rm->stuck_cond, &a);
    pthread_condattr_destroy(&a);
    if (rm->stuck_ns == 0) {
        return;
    }
    int rc = pthread_create(&rm->stuck_thread, NULL, stuck_main, rm);
    if (rc != 0) {
        rig_log(RIG_LOG_WARN,
                "rank %d: no watch on MPI calls that do not return "
                "(pthread_create: %s)",
                rm->rank, strerror(rc));
        return;
    }
    rm->stuck_started = true;
}

void rm_stuck_stop(rig_remote *rm)
{
    if (rm->stuck_started) {
        pthread_mutex_lock(&rm->stuck_lock);
        rm->stuck_stop = true;
        pthread_cond_signal(&rm->stuck_cond);
        pthread_mutex_unlock(&rm->stuck_lock);
        pthread_join(rm->stuck_thread, NULL);
        rm->stuck_started = false;
    }
    pthread_cond_destroy(&rm->stuck_cond);
    pthread_mutex_destroy(&rm->stuck_lock);
}

/* ---- errors -------------------------------------------------------------- */

bool rm_mpi_err(char **err, int rc, const char *call)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS) {
        snprintf(s, sizeof(s), "MPI error %d", rc);
    }
    return rig_err(err, "system: %s failed: %s", call, s);
}

bool rm_failed(const rig_remote *rm, char **err, const char *what)
{
    char *why = rig_job_failure(rm->job);
    const char *w = why != NULL ? why : "failed: the job failed";
    if (strncmp(w, "failed: ", 8) == 0) {
        w += 8;
    }
    /* The job names ranks ("rank 2 died (pid ...)"); people name the
     * machine too. */
    int r = -1, used = 0;
    const char *machine = NULL;
    if (sscanf(w, "rank %d %n", &r, &used) == 1 && used > 0 && r > 0 &&
        r < rm->size && rm->machines != NULL) {
        machine = rm->machines[r].name;
    }
    if (machine != NULL) {
        rig_err(err, "failed: %s: %s (machine %s)", what, w, machine);
    } else {
        rig_err(err, "failed: %s: %s", what, w);
    }
    free(why);
    return false;
}

/* ---- abandoned memory ---------------------------------------------------- */

/* Process-wide on purpose: MPI may write into a receive buffer of a
 * request this layer gave up on after the layer itself is gone, so that
 * memory must outlive every object of ours.  It is kept reachable here so
 * that leak checkers do not count it; the process is ending anyway (a
 * failed job cannot finalize MPI). */
static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static void **abandoned;
static size_t nabandoned, abandoned_cap;

void rm_abandon(void *buf)
{
    if (buf == NULL) {
        return;
    }
    pthread_mutex_lock(&abandoned_lock);
    if (nabandoned == abandoned_cap) {
        size_t cap = abandoned_cap != 0 ? abandoned_cap * 2 : 16;
        void **p = realloc(abandoned, cap * sizeof(*p));
        if (p == NULL) {
            pthread_mutex_unlock(&abandoned_lock);
            return; /* unreachable then, but still never freed */
        }
        abandoned = p;
        abandoned_cap = cap;
    }
    abandoned[nabandoned++] = buf;
    pthread_mutex_unlock(&abandoned_lock);
}

/* ---- waits --------------------------------------------------------------- */

bool rm_wait_all(rig_remote *rm, MPI_Request *reqs, int n, rm_pace pace,
                 void **bufs, size_t nbufs, const char *what, char **err)
{
    rm_backoff b = {0};
    uint32_t turn = 0;
    for (;;) {
        int flag = 0;
        int rc = RM_MPI(rm, "MPI_Testall",
                        MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE));
        if (rc != MPI_SUCCESS) {
            /* A broken connection to a dead peer: the job's own detection
             * names it, if it comes in time. */
            uint64_t until = rig_now_ns() + 1000000000ull;
            while (!rig_job_failed(rm->job) && rig_now_ns() < until) {
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
            }
            for (size_t i = 0; i < nbufs; i++) {
                rm_abandon(bufs[i]);
            }
            if (rig_job_failed(rm->job)) {
                return rm_failed(rm, err, what);
            }
            return rm_mpi_err(err, rc, "MPI_Testall");
        }
        if (flag) {
            return true;
        }
        if (rig_job_failed(rm->job)) {
            for (size_t i = 0; i < nbufs; i++) {
                rm_abandon(bufs[i]);
            }
            return rm_failed(rm, err, what);
        }
        if (rm->rank == 0 && (++turn & 63u) == 0) {
            rm_events_drain(rm);
        }
        rm_backoff_step(&b, pace);
    }
}

/* ---- buffers ------------------------------------------------------------- */

void rm_buf_put(rm_buf *b, const void *data, size_t len)
{
    if (b->oom || len == 0) {
        return;
    }
    if (b->len + len > b->cap) {
        size_t cap = b->cap != 0 ? b->cap : 256;
        while (cap < b->len + len) {
            cap *= 2;
        }
        uint8_t *p = realloc(b->p, cap);
        if (p == NULL) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, len);
    b->len += len;
}

void rm_buf_u32(rm_buf *b, uint32_t v)
{
    rm_buf_put(b, &v, sizeof(v));
}

void rm_buf_u64(rm_buf *b, uint64_t v)
{
    rm_buf_put(b, &v, sizeof(v));
}

void rm_buf_str(rm_buf *b, const char *s)
{
    size_t n = s != NULL ? strlen(s) : 0;
    if (n > UINT32_MAX) {
        b->oom = true;
        return;
    }
    rm_buf_u32(b, (uint32_t)n);
    rm_buf_put(b, s, n);
}

void rm_buf_free(rm_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

bool rm_rd_get(rm_rd *r, void *out, size_t len)
{
    if (r->bad || len > r->len - r->at) {
        r->bad = true;
        memset(out, 0, len);
        return false;
    }
    memcpy(out, r->p + r->at, len);
    r->at += len;
    return true;
}

uint32_t rm_rd_u32(rm_rd *r)
{
    uint32_t v = 0;
    rm_rd_get(r, &v, sizeof(v));
    return v;
}

uint64_t rm_rd_u64(rm_rd *r)
{
    uint64_t v = 0;
    rm_rd_get(r, &v, sizeof(v));
    return v;
}

char *rm_rd_str(rm_rd *r, size_t max)
{
    uint32_t n = rm_rd_u32(r);
    if (r->bad || n > max || n > r->len - r->at) {
        r->bad = true;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (s == NULL) {
        r->bad = true;
        return NULL;
    }
    memcpy(s, r->p + r->at, n);
    s[n] = '\0';
    r->at += n;
    if (memchr(s, '\0', n) != NULL) {
        free(s);
        r->bad = true;
        return NULL;
    }
    return s;
}
