/* SPDX-License-Identifier: BSD-3-Clause */
/* Waits: the process's wait mode, sleeping and waking, tests, waits for one
 * count or several, and the run helpers (rig/wait.h). */
#include "abi_internal.h"
#include "rig/wait.h"
#include "../util/util_internal.h"
#include "wait_internal.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

/* ---- the wait mode ---------------------------------------------------------
 * One per process (rig/wait.h says why).  `plan` caches the decision: a
 * wait reads it once, at its first miss; rig_wait_mode_set and
 * rig_wait_node clear it so that the next wait decides again.  Relaxed
 * accesses would do for the integers (each is read whole and any recent
 * value is right); `why` is published before `plan` with release. */

#define PLAN_UNDECIDED (-1)

static atomic_int plan = PLAN_UNDECIDED;
static _Atomic(const char *) plan_why;
static atomic_int mode_asked = RIG_WAIT_AUTO;
static atomic_int node_over; /* 0: no word, 1: not oversubscribed, 2: is */
static atomic_ulong sleep_cap_ns = 1000000;
/* RIG_WAIT_BULK_BYTES: its default and its largest value. */
#define BULK_BYTES_DEFAULT 1048576ull
#define BULK_BYTES_MAX (1ull << 30)
static atomic_ulong bulk_bytes = BULK_BYTES_DEFAULT;

/* Polls that spin before anything else, per mode. */
#define AUTO_SPIN_POLLS 4096
#define BLOCK_SPIN_POLLS 64
/* How long auto and yield give the core away before they sleep. */
#define YIELD_NS 2000000ull
/* Sleeps of auto and yield, after YIELD_NS, and of block. */
#define NAP_MIN_NS 10000ull
#define NAP_MAX_NS 100000ull
#define BLOCK_MIN_NS 20000ull
#define SLEEP_US_MAX 1000000ull
/* Spinning polls between two drives of an end's transport: a drive (UCX:
 * ucp_worker_progress, an epoll_wait of no time) costs about as much as
 * this many pauses, so a spinning wait spends half its time driving. */
#define DRIVE_POLLS 16u
/* rig_waited_ns moves at most this often (a shared line). */
#define WAITED_GRAIN_NS 50000u

/* The largest machine sched_getaffinity is asked about: 8,192 PUs. */
#define AFFINITY_WORDS (8192 / (8 * sizeof(unsigned long)))

static const char *const mode_names[] = {"auto", "spin", "yield", "block"};

const char *rig_wait_mode_name(rig_wait_mode mode)
{
    return (unsigned)mode < 4 ? mode_names[mode] : "?";
}

static bool mode_parse(const char *s, rig_wait_mode *out)
{
    for (int m = 0; m < 4; m++) {
        if (strcmp(s, mode_names[m]) == 0) {
            *out = (rig_wait_mode)m;
            return true;
        }
    }
    return false;
}

/* A positive integer from the environment; 0 when unset or malformed. */
static long env_positive(const char *name)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0') {
        return 0;
    }
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    return errno == 0 && end != v && *end == '\0' && x > 0 ? x : 0;
}

/* PUs this thread may run on (its affinity), 0 when unknown. */
static long affinity_pus(void)
{
    unsigned long mask[AFFINITY_WORDS];
    memset(mask, 0, sizeof(mask));
    if (sched_getaffinity(0, sizeof(mask), (cpu_set_t *)(void *)mask) != 0) {
        return 0;
    }
    long n = 0;
    for (size_t i = 0; i < AFFINITY_WORDS; i++) {
        n += __builtin_popcountl(mask[i]);
    }
    return n;
}

/* Whether this node runs more ranks than PUs, and why we think so. */
static bool oversubscribed(const char **why)
{
    int over = atomic_load_explicit(&node_over, memory_order_relaxed);
    if (over != 0) {
        *why = over == 2 ? "auto: the job's ranks on this node outnumber "
                           "the PUs they are bound to (rig_wait_node)"
                         : "auto: the job's ranks on this node have a PU "
                           "each (rig_wait_node)";
        return over == 2;
    }
    /* Open MPI's own verdict, by which it yields when idle. */
    const char *ompi = getenv("OMPI_MCA_mpi_oversubscribe");
    if (ompi != NULL && (strcmp(ompi, "1") == 0 || strcmp(ompi, "0") == 0)) {
        bool yes = ompi[0] == '1';
        *why = yes ? "auto: Open MPI runs this node oversubscribed "
                     "(OMPI_MCA_mpi_oversubscribe=1)"
                   : "auto: Open MPI runs this node not oversubscribed "
                     "(OMPI_MCA_mpi_oversubscribe=0)";
        return yes;
    }
    static const char *const local_size[] = {
        "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
        "MV2_COMM_WORLD_LOCAL_SIZE", "PALS_LOCAL_SIZE"};
    long local = 0;
    for (size_t i = 0; i < 4 && local == 0; i++) {
        local = env_positive(local_size[i]);
    }
    long pus = affinity_pus();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (local > 0 && pus > 0) {
        /* Bound to a subset with room for every rank: the launcher
         * placed the ranks apart. */
        bool yes = local > pus && (pus >= online || local > online);
        *why = yes ? "auto: the launcher's ranks on this node outnumber "
                     "the PUs this process may use"
                   : "auto: the launcher's ranks on this node fit the PUs "
                     "they may use";
        return yes;
    }
    *why = "auto: nothing says this node is oversubscribed";
    return false;
}

/* A setting of the waits from the environment: dflt when unset, and when
 * malformed or outside lo..hi, which is logged once (*logged). */
static uint64_t setting_read(const char *name, uint64_t dflt, uint64_t lo,
                             uint64_t hi, int *logged)
{
    uint64_t v = 0;
    char *err = NULL;
    if (!rig_env_u64(name, dflt, &v, &err) || v < lo || v > hi) {
        /* rig_env_u64's reason, else "invalid: NAME" (out of range). */
        rig_log_once(logged, RIG_LOG_WARN,
                     "%s%s; %s must be %llu..%llu: %llu used",
                     err != NULL ? err : "invalid: ", err != NULL ? "" : name,
                     name, (unsigned long long)lo, (unsigned long long)hi,
                     (unsigned long long)dflt);
        free(err);
        v = dflt;
    }
    return v;
}

/* RIG_WAIT_SLEEP_US and RIG_WAIT_BULK_BYTES (the run size from which an
 * auto wait on the network path sleeps, waiter_step says why; 0: never),
 * read with the plan. */
static void settings_read(void)
{
    static int sleep_logged, bulk_logged;
    uint64_t us =
        setting_read("RIG_WAIT_SLEEP_US", 1000, 1, SLEEP_US_MAX, &sleep_logged);
    atomic_store_explicit(&sleep_cap_ns, (unsigned long)(us * 1000),
                          memory_order_relaxed);
    uint64_t b = setting_read("RIG_WAIT_BULK_BYTES", BULK_BYTES_DEFAULT, 0,
                              BULK_BYTES_MAX, &bulk_logged);
    atomic_store_explicit(&bulk_bytes, (unsigned long)b, memory_order_relaxed);
}

/* The plan: a rig_wait_mode, RIG_WAIT_AUTO meaning "auto on a node that
 * is not oversubscribed" (spin, yield, then sleep). */
static int plan_decide(const char **why)
{
    static int bad_logged;
    settings_read();
    const char *env = getenv("RIG_WAIT");
    rig_wait_mode m = RIG_WAIT_AUTO;
    if (env != NULL && env[0] != '\0') {
        if (!mode_parse(env, &m)) {
            rig_log_once(&bad_logged, RIG_LOG_WARN,
                         "invalid: RIG_WAIT=%s is not auto, spin, yield or "
                         "block: auto is used",
                         env);
            m = RIG_WAIT_AUTO;
        } else if (m != RIG_WAIT_AUTO) {
            static const char *const by_env[] = {
                "RIG_WAIT=auto", "RIG_WAIT=spin", "RIG_WAIT=yield",
                "RIG_WAIT=block"};
            *why = by_env[m];
            return (int)m;
        }
    } else {
        m = (rig_wait_mode)atomic_load_explicit(&mode_asked,
                                                memory_order_relaxed);
        if (m != RIG_WAIT_AUTO) {
            *why = "rig_wait_mode_set";
            return (int)m;
        }
    }
    return oversubscribed(why) ? RIG_WAIT_YIELD : RIG_WAIT_AUTO;
}

static int plan_now(void)
{
    int p = atomic_load_explicit(&plan, memory_order_acquire);
    if (RIG_LIKELY(p != PLAN_UNDECIDED)) {
        return p;
    }
    const char *why = "";
    p = plan_decide(&why);
    atomic_store_explicit(&plan_why, why, memory_order_relaxed);
    atomic_store_explicit(&plan, p, memory_order_release);
    rig_log(RIG_LOG_DEBUG, "waits: %s (%s)",
            p == RIG_WAIT_AUTO ? "auto, not oversubscribed"
                               : rig_wait_mode_name((rig_wait_mode)p),
            why);
    return p;
}

bool rig_wait_yields(void)
{
    int p = plan_now();
    return p == RIG_WAIT_YIELD || p == RIG_WAIT_BLOCK;
}

/* rig's other waiting loops (rig_backoff_step, in src/util below this
 * layer) ask the waits whether to give the core away: set when librig
 * loads, before any of them can run. */
__attribute__((constructor)) static void backoff_asks_waits(void)
{
    rig_backoff_yields(rig_wait_yields);
}

bool rig_wait_mode_set(rig_wait_mode mode, char **err)
{
    if ((unsigned)mode > RIG_WAIT_BLOCK) {
        return rig_err(err,
                       "invalid: wait mode %d is not one of "
                       "rig_wait_mode",
                       (int)mode);
    }
    atomic_store_explicit(&mode_asked, (int)mode, memory_order_relaxed);
    atomic_store_explicit(&plan, PLAN_UNDECIDED, memory_order_release);
    return true;
}

rig_wait_mode rig_wait_mode_now(const char **why)
{
    int p = plan_now();
    if (why != NULL) {
        *why = atomic_load_explicit(&plan_why, memory_order_relaxed);
    }
    return (rig_wait_mode)p;
}

void rig_wait_node(int local_ranks, int pus)
{
    if (local_ranks < 1 || pus < 1) {
        return;
    }
    int over = local_ranks > pus ? 2 : 1;
    int cur = atomic_load_explicit(&node_over, memory_order_relaxed);
    while (cur < over && !atomic_compare_exchange_weak_explicit(
                             &node_over, &cur, over, memory_order_relaxed,
                             memory_order_relaxed)) {
    }
    atomic_store_explicit(&plan, PLAN_UNDECIDED, memory_order_release);
}

/* ---- sleeping and waking ---------------------------------------------------
 * A sleeping wait reads the wake word, counts itself in rig_wait_sleepers
 * (seq_cst), looks at its counts once more (seq_cst loads) and sleeps on
 * the word with a time limit unless they are settled.  A store of a count
 * (rig_count_advance: a seq_cst read-modify-write) then loads the sleepers
 * (seq_cst) and, when there are any, bumps the word (release) and wakes
 * every sleeper.
 *
 * No wake is lost (by the C11 model): the waiter's increment and load of
 * the count, and the store's read-modify-write and load of the sleepers,
 * are all seq_cst, so they sit in one total order S.  Either the store
 * precedes the waiter's increment in S, and then the waiter's load of the
 * count, which follows, observes the new count and does not sleep; or the
 * increment precedes the store's load of sleepers, which then sees it and
 * bumps the word.  The bump follows the waiter's read of the word in S's
 * sense of happens-before (had the waiter read the bumped word, the bump
 * would synchronise with its read and the store would precede its look at
 * the count, the first case), so the word no longer holds what the waiter
 * read and the kernel refuses the sleep or ends it.  A store made another
 * way (a peer's put or plain store into this memory) wakes nobody: the
 * time limit of every sleep bounds how late it is noticed. */

atomic_uint rig_wait_sleepers;
static atomic_uint wake_word;

void rig_wait_wake(void)
{
    atomic_fetch_add_explicit(&wake_word, 1, memory_order_release);
#if defined(__linux__) && defined(SYS_futex)
    syscall(SYS_futex, &wake_word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#endif
}

static void sleep_on(unsigned seen, uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
#if defined(__linux__) && defined(SYS_futex)
    syscall(SYS_futex, &wake_word, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
#else
    (void)seen;
    nanosleep(&ts, NULL);
#endif
}

/* ---- the waiter --------------------------------------------------------- */

/* True when a wait must not sleep: its counts settled it (reached or
 * failed), read with seq_cst loads. */
typedef bool (*settled_fn)(const void *arg);

/* Drives the transports of a wait's ends (rig_end_desc.progress), on the
 * waiting thread: over a network library whose handlers raise the
 * counts, the waiter then handles the message that settles it, with no
 * wake-up of a progress thread in between -- as MPI's waits progress
 * MPI.  NULL when no end of the wait has a hook. */
typedef void (*drive_fn)(const void *arg);

/* Whether every end of a wait that has a progress hook carries bulk runs
 * (end_bulk); asked only of a wait with a drive. */
typedef bool (*bulk_fn)(const void *arg);

/* How a wait looks at its counts and drives their transports; arg is
 * handed to all three. */
typedef struct {
    settled_fn settled;
    drive_fn drive;
    bulk_fn bulk;
    const void *arg;
} wait_ops;

typedef struct {
    uint32_t polls;
    int plan;
    uint32_t timeout_ms;
    bool has_deadline;
    uint64_t deadline;
    uint64_t yield_from; /* when the yield phase began; 0: not yet */
    uint64_t nap_ns;     /* the next sleep */
    drive_fn drive;      /* the wait's, NULL in block (waiter_step) */
} waiter;

static void waiter_init(waiter *w, uint32_t timeout_ms)
{
    memset(w, 0, sizeof(*w));
    w->timeout_ms = timeout_ms;
}

/* Whether the time limit passed at now; the clock starts at the first
 * miss, so a count already there costs no clock read. */
static bool past(waiter *w, uint64_t now)
{
    if (w->timeout_ms == RIG_FOREVER) {
        return false;
    }
    if (!w->has_deadline) {
        w->has_deadline = true;
        w->deadline = now + (uint64_t)w->timeout_ms * 1000000u;
    }
    return now >= w->deadline;
}

static void nap(waiter *w, uint64_t now, uint64_t min_ns, uint64_t max_ns,
                const wait_ops *ops)
{
    uint64_t ns = w->nap_ns < min_ns ? min_ns : w->nap_ns;
    if (ns > max_ns) {
        ns = max_ns;
    }
    if (w->has_deadline && w->deadline - now < ns) {
        ns = w->deadline - now;
    }
    w->nap_ns = ns * 2;
    unsigned seen = atomic_load_explicit(&wake_word, memory_order_acquire);
    atomic_fetch_add_explicit(&rig_wait_sleepers, 1, memory_order_seq_cst);
    if (!ops->settled(ops->arg)) {
        sleep_on(seen, ns);
    }
    atomic_fetch_sub_explicit(&rig_wait_sleepers, 1, memory_order_relaxed);
}

/* A drive after which the wait gives the core away (a yield, a nap): the
 * transport looks at its worker once (rig_drive_once), as MPI's progress
 * looks once before each yield.  Across 2 hosts, 4 ranks on 2 cores, a
 * yielding wait's drives made 4-9 epoll_waits per yield, MPI's 1 poll. */
static void drive_once(const waiter *w, const wait_ops *ops)
{
    if (w->drive != NULL) {
        rig_drive_once = true;
        w->drive(ops->arg);
        rig_drive_once = false;
    }
}

/* Whether end e carries bulk runs: its larger direction moves at least
 * RIG_WAIT_BULK_BYTES a run (one copy of its outbound or inbound). */
static bool end_bulk(const rig_end *e)
{
    size_t run =
        (e->outbound.len > e->inbound.len ? e->outbound.len : e->inbound.len) /
        2;
    unsigned long b = atomic_load_explicit(&bulk_bytes, memory_order_relaxed);
    return b != 0 && run >= b;
}

/* A wait or test on e found its count there at once: when e's transport
 * moves only when driven, say that a waiter is about (rig_waited_ns).
 * Without it, a rank that had not driven for a while (its transport's
 * thread then takes what comes) and whose peer's runs came before it
 * waited found each run landed, never drove, and kept the thread taking
 * them: across 2 simulated hosts, in a rig_stencil sitting at 1024 x 1024
 * that read 0.95 of MPI, one rank's thread woke 0.9 times an iteration
 * and ran 79 us of it, on the ranks' 2 cores.  Over 8 interleaved pairs
 * (-n 1024 -r 31, 2 ranks) rig over MPI read 0.93-1.00 (mean 0.98)
 * before and 0.99-1.01 (mean 1.00) with this.  Not in the block mode,
 * whose waits leave the driving to that thread, nor for bulk runs, whose
 * waits hand it over. */
static void note_waited(const rig_end *e)
{
    if (e->progress == NULL || end_bulk(e) || plan_now() == RIG_WAIT_BLOCK) {
        return;
    }
    uint64_t now = rig_now_ns();
    if (now - atomic_load_explicit(&rig_waited_ns, memory_order_relaxed) >
        WAITED_GRAIN_NS) {
        atomic_store_explicit(&rig_waited_ns, now, memory_order_relaxed);
    }
}

/* One step after a poll missed: spin, yield or sleep as the plan says,
 * driving the ends' transports (ops->drive) at the first miss -- then the
 * caller looks again, so a test (a limit of 0) drives once, as MPI_Test
 * does -- every DRIVE_POLLS spins, before each yield and before each nap.
 * Block does not drive: its waits sleep and leave the driving to the
 * transport's own thread, which a waiter that drives makes stand back
 * (src/rail/ucx/progress.c).  False once the time limit passed. */
static bool waiter_step(waiter *w, const wait_ops *ops)
{
    uint32_t s = w->polls++;
    if (s == 0) {
        w->plan = plan_now();
        if (w->plan == RIG_WAIT_AUTO && ops->drive != NULL &&
            w->timeout_ms != 0 && ops->bulk(ops->arg)) {
            /* Bulk runs on the network path: the wait sleeps as block's
             * do, and hands the worker to the transport's own thread
             * (one drive that looks once and ends the thread's standby,
             * src/rail/ucx/progress.c).  A spinning wait's drives, an
             * epoll_wait of no time every microsecond or so, took the
             * cores the kernel's TCP needed (perf: 40% of the samples in
             * the hypervisor's interrupt enabling of syscalls at 1 MiB,
             * 25% at 128 KiB), and a rank that handles each run itself
             * takes the next one from the socket only after; the thread
             * receives while the waiter sleeps.  Across 2 simulated
             * hosts, rig_osu_bw paired with MPI's best, 5 rounds: 1 MiB
             * 0.94-1.05x spinning (12 runs), 1.14-1.26x sleeping (6);
             * 2 MiB 0.92-1.00x against 0.98-1.28x.  At 256 KiB a round
             * trip took 1.6-2.3x MPI's sleeping (the thread switches of
             * every hop) against 1.4x spinning: hence the bound.  A
             * test (no time) drives as ever: a loop of them must not
             * wake the thread each time. */
            w->plan = RIG_WAIT_BLOCK;
            rig_drive_handover = true;
            ops->drive(ops->arg);
            rig_drive_handover = false;
        }
        w->drive = w->plan == RIG_WAIT_BLOCK ? NULL : ops->drive;
        if (w->drive != NULL) {
            if (w->timeout_ms != RIG_FOREVER && w->timeout_ms != 0) {
                (void)past(w, rig_now_ns()); /* the clock starts */
            }
            if (w->plan == RIG_WAIT_SPIN || w->plan == RIG_WAIT_AUTO) {
                w->drive(ops->arg); /* spinning follows */
            } else {
                drive_once(w, ops);
            }
            return true;
        }
    }
    uint32_t spins = w->plan == RIG_WAIT_SPIN    ? UINT32_MAX
                     : w->plan == RIG_WAIT_AUTO  ? AUTO_SPIN_POLLS
                     : w->plan == RIG_WAIT_BLOCK ? BLOCK_SPIN_POLLS
                                                 : 0;
    if (s < spins) {
        if (w->timeout_ms != RIG_FOREVER &&
            ((s & 63) == 0 || w->timeout_ms == 0) && past(w, rig_now_ns())) {
            return false;
        }
        if (w->drive != NULL && s % DRIVE_POLLS == 0) {
            w->drive(ops->arg);
        } else {
            rig_cpu_relax();
        }
        return true;
    }
    uint64_t now = rig_now_ns();
    if (past(w, now)) {
        return false;
    }
    if (w->plan == RIG_WAIT_BLOCK) {
        nap(w, now, BLOCK_MIN_NS,
            atomic_load_explicit(&sleep_cap_ns, memory_order_relaxed), ops);
        return true;
    }
    drive_once(w, ops);
    if (w->yield_from == 0) {
        w->yield_from = now;
    }
    if (now - w->yield_from < YIELD_NS) {
        sched_yield();
    } else {
        nap(w, now, NAP_MIN_NS, NAP_MAX_NS, ops);
    }
    return true;
}

/* ---- one count ------------------------------------------------------------
 */

static _Atomic uint64_t *count_of(const rig_end *e, size_t at)
{
    return (_Atomic uint64_t *)((uintptr_t)e->counts.base + at);
}

static rig_reach reach(uint64_t v, uint64_t c)
{
    return v == RIG_COUNT_FAILED ? RIG_FAILED
           : v >= c              ? RIG_REACHED
                                 : RIG_NOT_YET;
}

typedef struct {
    _Atomic uint64_t *count;
    uint64_t c;
    const rig_end *e;
} one_goal;

static bool one_settled(const void *arg)
{
    const one_goal *g = arg;
    return atomic_load_explicit(g->count, memory_order_seq_cst) >= g->c;
}

static void one_drive(const void *arg)
{
    const one_goal *g = arg;
    g->e->progress(g->e->progress_arg);
}

static bool one_bulk(const void *arg)
{
    const one_goal *g = arg;
    return end_bulk(g->e);
}

/* Where count c lands (the first byte of its transfer in its inbound
 * copy), for a wait on `arrived` of an end that knows its receive list;
 * NULL otherwise.  A wait pulls that line into this cache while it polls,
 * so the count is the only line still to come.  Computed only once a wait
 * has to poll: a count that is there already costs no division. */
static const char *landing(const rig_end *e, size_t at, uint64_t c)
{
    if (at != RIG_ARRIVED_AT || e->nland == 0 || c == 0) {
        return NULL;
    }
    uint64_t k = (c - 1) % (2 * e->nland); /* copy 1 from nland on */
    bool second = k >= e->nland;
    return (const char *)e->inbound.base + (second ? e->inbound.len / 2 : 0) +
           e->land[second ? k - e->nland : k];
}

static int one_bad_logged;

static rig_reach wait_one(const rig_end *e, size_t at, uint64_t c,
                          uint32_t timeout_ms)
{
    if (RIG_UNLIKELY(e == NULL || c >= RIG_COUNT_FAILED)) {
        rig_log_once(&one_bad_logged, RIG_LOG_WARN,
                     "a wait or test of end %p for count %llu was refused: "
                     "the end must not be NULL and 0 <= c < INT64_MAX",
                     (const void *)e, (unsigned long long)c);
        return RIG_INVALID;
    }
    one_goal g = {count_of(e, at), c, e};
    wait_ops ops = {one_settled, e->progress != NULL ? one_drive : NULL,
                    one_bulk, &g};
    const char *pull = NULL;
    waiter w;
    waiter_init(&w, timeout_ms);
    for (;;) {
        rig_reach r =
            reach(atomic_load_explicit(g.count, memory_order_acquire), c);
        if (r != RIG_NOT_YET) {
            if (r == RIG_REACHED && w.polls == 0) {
                note_waited(e);
            }
            return r;
        }
        if (w.polls == 0) { /* the first miss: the count is not there */
            pull = landing(e, at, c);
        }
        if (pull != NULL) {
            __builtin_prefetch(pull, 0, 3);
        }
        if (!waiter_step(&w, &ops)) {
            return RIG_NOT_YET;
        }
    }
}

rig_reach rig_end_test_arrived(const rig_end *e, uint64_t c)
{
    return wait_one(e, RIG_ARRIVED_AT, c, 0);
}

rig_reach rig_end_test_sent(const rig_end *e, uint64_t c)
{
    return wait_one(e, RIG_SENT_AT, c, 0);
}

static bool wait_bool(const rig_end *e, size_t at, uint64_t c,
                      uint32_t timeout_ms, bool *timed_out)
{
    rig_reach r = wait_one(e, at, c, timeout_ms);
    if (timed_out != NULL) {
        *timed_out = r == RIG_NOT_YET;
    }
    return r == RIG_REACHED;
}

bool rig_end_wait_arrived(const rig_end *e, uint64_t c)
{
    return wait_bool(e, RIG_ARRIVED_AT, c, RIG_FOREVER, NULL);
}

bool rig_end_wait_sent(const rig_end *e, uint64_t c)
{
    return wait_bool(e, RIG_SENT_AT, c, RIG_FOREVER, NULL);
}

bool rig_end_wait_arrived_for(const rig_end *e, uint64_t c, uint32_t timeout_ms,
                              bool *timed_out)
{
    return wait_bool(e, RIG_ARRIVED_AT, c, timeout_ms, timed_out);
}

bool rig_end_wait_sent_for(const rig_end *e, uint64_t c, uint32_t timeout_ms,
                           bool *timed_out)
{
    return wait_bool(e, RIG_SENT_AT, c, timeout_ms, timed_out);
}

/* ---- several counts -------------------------------------------------------
 */

static int goals_bad_logged;

/* RIG_INVALID with *bad the culprit, or RIG_REACHED. */
static rig_reach goals_check(const rig_goal *g, size_t n, size_t *bad)
{
    if (g == NULL && n > 0) {
        *bad = n;
        rig_log_once(&goals_bad_logged, RIG_LOG_WARN,
                     "a wait for %zu goals was refused: the goals are NULL", n);
        return RIG_INVALID;
    }
    for (size_t i = 0; i < n; i++) {
        if (g[i].end == NULL ||
            (g[i].at != RIG_ARRIVED_AT && g[i].at != RIG_SENT_AT) ||
            g[i].count >= RIG_COUNT_FAILED) {
            *bad = i;
            rig_log_once(&goals_bad_logged, RIG_LOG_WARN,
                         "a wait for goals was refused: goal %zu (end %p, "
                         "at %zu, count %llu) must name an end, "
                         "RIG_ARRIVED_AT or RIG_SENT_AT, and a count < "
                         "INT64_MAX",
                         i, (const void *)g[i].end, g[i].at,
                         (unsigned long long)g[i].count);
            return RIG_INVALID;
        }
    }
    return RIG_REACHED;
}

static uint64_t goal_load(const rig_goal *g, memory_order mo)
{
    return atomic_load_explicit(count_of(g->end, g->at), mo);
}

typedef struct {
    const rig_goal *g;
    size_t from, n;
    bool any;
} many_goals;

/* all: every goal from `from` on reached, or one failed; any: one goal
 * reached or failed (a failed count is >= every count). */
static bool many_settled(const void *arg)
{
    const many_goals *m = arg;
    bool unreached = false;
    for (size_t i = m->from; i < m->n; i++) {
        uint64_t v = goal_load(&m->g[i], memory_order_seq_cst);
        if (v == RIG_COUNT_FAILED || (m->any && v >= m->g[i].count)) {
            return true;
        }
        unreached = unreached || v < m->g[i].count;
    }
    return !m->any && !unreached;
}

/* Drives the hook of every end still awaited, once per hook and argument
 * in a row (the ends of one transport share them). */
static void many_drive(const void *arg)
{
    const many_goals *m = arg;
    void (*last)(void *) = NULL;
    void *last_arg = NULL;
    for (size_t i = m->from; i < m->n; i++) {
        const rig_end *e = m->g[i].end;
        if (e->progress != NULL &&
            (e->progress != last || e->progress_arg != last_arg)) {
            last = e->progress;
            last_arg = e->progress_arg;
            last(last_arg);
        }
    }
}

/* Whether every end still awaited that has a hook carries bulk runs and
 * they share one hook (one transport's thread to hand the worker to). */
static bool many_bulk(const void *arg)
{
    const many_goals *m = arg;
    const rig_end *first = NULL;
    for (size_t i = m->from; i < m->n; i++) {
        const rig_end *e = m->g[i].end;
        if (e->progress == NULL) {
            continue;
        }
        if (!end_bulk(e) ||
            (first != NULL && (e->progress != first->progress ||
                               e->progress_arg != first->progress_arg))) {
            return false;
        }
        first = e;
    }
    return first != NULL;
}

/* many_drive when an end of the goals has a hook, else NULL. */
static drive_fn many_drive_for(const rig_goal *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (g[i].end->progress != NULL) {
            return many_drive;
        }
    }
    return NULL;
}

/* note_waited for the first end of the goals that has a progress hook. */
static void note_waited_all(const rig_goal *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (g[i].end->progress != NULL) {
            note_waited(g[i].end);
            return;
        }
    }
}

static rig_reach done(rig_reach r, size_t i, size_t *which)
{
    if (which != NULL) {
        *which = i;
    }
    return r;
}

rig_reach rig_wait_all_for(const rig_goal *g, size_t n, uint32_t timeout_ms,
                           size_t *which)
{
    size_t bad = 0;
    if (goals_check(g, n, &bad) == RIG_INVALID) {
        return done(RIG_INVALID, bad, which);
    }
    many_goals m = {g, 0, n, false};
    wait_ops ops = {many_settled, NULL, many_bulk, &m};
    waiter w;
    waiter_init(&w, timeout_ms);
    for (;;) {
        /* Goals before m.from are reached and stay so; the others are
         * looked at each time, for a failure of any. */
        size_t first = n;
        for (size_t i = m.from; i < n; i++) {
            rig_reach r =
                reach(goal_load(&g[i], memory_order_acquire), g[i].count);
            if (r == RIG_FAILED) {
                return done(RIG_FAILED, i, which);
            }
            if (r == RIG_NOT_YET && first == n) {
                first = i;
            }
        }
        if (first == n) {
            if (w.polls == 0) {
                note_waited_all(g, n);
            }
            return done(RIG_REACHED, n, which);
        }
        m.from = first;
        if (w.polls == 0) { /* the first miss */
            ops.drive = many_drive_for(g, n);
        }
        if (!waiter_step(&w, &ops)) {
            return done(RIG_NOT_YET, first, which);
        }
    }
}

rig_reach rig_wait_all(const rig_goal *g, size_t n, size_t *which)
{
    return rig_wait_all_for(g, n, RIG_FOREVER, which);
}

rig_reach rig_wait_any_for(const rig_goal *g, size_t n, uint32_t timeout_ms,
                           size_t *which)
{
    size_t bad = 0;
    if (goals_check(g, n, &bad) == RIG_INVALID) {
        return done(RIG_INVALID, bad, which);
    }
    if (n == 0) {
        rig_log_once(&goals_bad_logged, RIG_LOG_WARN,
                     "a wait for any of 0 goals was refused: none can be "
                     "reached");
        return done(RIG_INVALID, 0, which);
    }
    many_goals m = {g, 0, n, true};
    wait_ops ops = {many_settled, NULL, many_bulk, &m};
    waiter w;
    waiter_init(&w, timeout_ms);
    for (;;) {
        for (size_t i = 0; i < n; i++) {
            rig_reach r =
                reach(goal_load(&g[i], memory_order_acquire), g[i].count);
            if (r != RIG_NOT_YET) {
                if (r == RIG_REACHED && w.polls == 0) {
                    note_waited(g[i].end);
                }
                return done(r, i, which);
            }
        }
        if (w.polls == 0) { /* the first miss */
            ops.drive = many_drive_for(g, n);
        }
        if (!waiter_step(&w, &ops)) {
            return done(RIG_NOT_YET, n, which);
        }
    }
}

rig_reach rig_wait_any(const rig_goal *g, size_t n, size_t *which)
{
    return rig_wait_any_for(g, n, RIG_FOREVER, which);
}

/* ---- the run helpers -------------------------------------------------------
 */

static int runs_bad_logged;

static rig_reach runs_invalid(const char *fn, const rig_runs *s, uint64_t r,
                              const char *what)
{
    rig_log_once(&runs_bad_logged, RIG_LOG_WARN,
                 "%s(%p, run %llu) was refused: %s", fn, (const void *)s,
                 (unsigned long long)r, what);
    return RIG_INVALID;
}

/* The count of the last transfer of run r of n per run; 0 if it would
 * reach INT64_MAX. */
static uint64_t run_last(uint64_t r, size_t n)
{
    return rig_count_of(r, n - 1, n);
}

static uint32_t runs_limit(const rig_runs *s)
{
    return s->limit_ms == 0 ? RIG_FOREVER : s->limit_ms;
}

rig_reach rig_run_outbound(const rig_runs *s, uint64_t r, rig_area *copy)
{
    static const char fn[] = "rig_run_outbound";
    if (s == NULL || s->end == NULL || copy == NULL) {
        return runs_invalid(fn, s, r,
                            "the runs, their end and copy must "
                            "not be NULL");
    }
    if (s->nsend == 0 || s->end->outbound.len == 0) {
        return runs_invalid(fn, s, r, "the end sends nothing");
    }
    if (run_last(r, s->nsend) == 0) {
        return runs_invalid(fn, s, r, "the run's counts reach INT64_MAX");
    }
    /* Copy r % 2 was last read by the rail for run r - 2. */
    uint64_t need = r >= 2 ? run_last(r - 2, s->nsend) : 0;
    rig_reach got = wait_one(s->end, RIG_SENT_AT, need, runs_limit(s));
    if (got == RIG_REACHED) {
        *copy = rig_area_copy(s->end->outbound, (unsigned)(r % 2));
    }
    return got;
}

/* Signals count c of a send direction, unless the job failed. */
static rig_reach signal_count(rig_end *e, uint64_t c)
{
    if (rig_end_ready_count(e) == RIG_COUNT_FAILED) {
        return RIG_FAILED;
    }
    rig_end_ready(e, c);
    return rig_end_ready_count(e) == RIG_COUNT_FAILED ? RIG_FAILED
                                                      : RIG_REACHED;
}

rig_reach rig_run_ready(const rig_runs *s, uint64_t r)
{
    static const char fn[] = "rig_run_ready";
    if (s == NULL || s->end == NULL) {
        return runs_invalid(fn, s, r,
                            "the runs and their end must not be "
                            "NULL");
    }
    if (s->nsend == 0 || s->end->outbound.len == 0) {
        return runs_invalid(fn, s, r, "the end sends nothing");
    }
    uint64_t last = run_last(r, s->nsend);
    if (last == 0) {
        return runs_invalid(fn, s, r, "the run's counts reach INT64_MAX");
    }
    if (s->acked && s->nreceive == 0) {
        return runs_invalid(fn, s, r,
                            "acked, but the end receives no acknowledgements "
                            "(nreceive 0)");
    }
    if (s->acked && r >= 2) {
        /* Run r lands where run r - 2 is read: its ack first. */
        rig_reach got = wait_one(s->end, RIG_ARRIVED_AT,
                                 run_last(r - 2, s->nreceive), runs_limit(s));
        if (got != RIG_REACHED) {
            return got;
        }
    }
    return signal_count(s->end, last);
}

rig_reach rig_run_inbound(const rig_runs *s, uint64_t r, rig_area *copy)
{
    static const char fn[] = "rig_run_inbound";
    if (s == NULL || s->end == NULL || copy == NULL) {
        return runs_invalid(fn, s, r,
                            "the runs, their end and copy must "
                            "not be NULL");
    }
    if (s->nreceive == 0 || s->end->inbound.len == 0) {
        return runs_invalid(fn, s, r, "the end receives nothing");
    }
    if (s->end->nland != 0 && s->end->nland != s->nreceive) {
        return runs_invalid(fn, s, r,
                            "nreceive differs from the end's receive list");
    }
    uint64_t last = run_last(r, s->nreceive);
    if (last == 0) {
        return runs_invalid(fn, s, r, "the run's counts reach INT64_MAX");
    }
    rig_reach got = wait_one(s->end, RIG_ARRIVED_AT, last, runs_limit(s));
    if (got == RIG_REACHED) {
        *copy = rig_area_copy(s->end->inbound, (unsigned)(r % 2));
    }
    return got;
}

rig_reach rig_run_done(const rig_runs *s, uint64_t r)
{
    static const char fn[] = "rig_run_done";
    if (s == NULL || s->end == NULL) {
        return runs_invalid(fn, s, r,
                            "the runs and their end must not be "
                            "NULL");
    }
    if (s->nsend == 0 || s->end->outbound.len == 0) {
        return runs_invalid(fn, s, r,
                            "the end sends nothing (acknowledgements are "
                            "its send direction)");
    }
    uint64_t last = run_last(r, s->nsend);
    if (last == 0) {
        return runs_invalid(fn, s, r, "the run's counts reach INT64_MAX");
    }
    return signal_count(s->end, last);
}
