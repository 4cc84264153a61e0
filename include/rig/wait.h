/* SPDX-License-Identifier: BSD-3-Clause */
/* rig/wait.h: how waits share the CPU, tests and waits over several ends,
 * and the run loop of a rail without count arithmetic.
 *
 * Concepts.
 *
 * *Wait modes.*  A wait (rig_end_wait_*, rig_wait_all/any, the run
 * helpers) polls a count until it is reached.  How it polls is the
 * process's *wait mode*, one for the whole process because it follows from
 * where the process runs (how many ranks share its cores), not from a
 * rail:
 *   spin   polls with a pause instruction and never gives the core away:
 *          the lowest latency, for ranks on cores of their own;
 *   yield  gives the core away (sched_yield) between polls from the
 *          first miss, so a rank that shares its core with the rank it
 *          waits for lets that rank run; after 2 ms it sleeps as below,
 *          at most 100 us at a time;
 *   block  sleeps in the kernel after a few polls: a long wait costs
 *          almost no CPU (one wake-up per period).  A count this process
 *          raises (a loopback rail, a failure, any rig_count_advance)
 *          wakes it at once; a count another process stores (UCX puts
 *          and plain stores of a peer never wake a sleeper) is noticed
 *          within the period, which doubles from 20 us up to
 *          RIG_WAIT_SLEEP_US (1000 us by default);
 *   auto   (the default) yield when this node is oversubscribed, else
 *          spin for about 4,096 polls, yield for 2 ms, then sleep as
 *          yield does -- except a wait on bulk runs across nodes (below),
 *          which sleeps as block does.
 * RIG_WAIT=auto|spin|yield|block sets the mode and wins over
 * rig_wait_mode_set.  auto decides once, at the first wait that misses,
 * from the first of: what a job layer told rig_wait_node (rig_job_open
 * does: the ranks of the job on this kernel and the PUs their bindings
 * cover together); Open MPI's own verdict (OMPI_MCA_mpi_oversubscribe);
 * the launcher's count of ranks on the node (OMPI_COMM_WORLD_LOCAL_SIZE,
 * MPI_LOCALNRANKS, MV2_COMM_WORLD_LOCAL_SIZE, PALS_LOCAL_SIZE) against the
 * PUs this process may run on (sched_getaffinity), taken as oversubscribed
 * when the ranks outnumber them and the process is not bound to a subset
 * of the machine (a launcher that binds ranks to subsets places them
 * apart); else not oversubscribed.  rig_wait_node and rig_wait_mode_set
 * make auto decide again.
 *
 * *Driving the transport.*  Across nodes a rail's counts move when its
 * transport's progress runs (UCX's handlers raise them inside
 * ucp_worker_progress).  A wait or test that misses runs the progress
 * hook of its ends (rig_end_desc.progress) on its own thread, as MPI's
 * waits progress MPI: once at the first miss (so a test drives once and
 * looks again), every few polls while it spins, before each yield and
 * before each sleep of yield and auto.  Block never drives: its waits
 * sleep and leave it to the transport's own thread.  Ends on one node,
 * and the loopback provider's, have no hook.  A wait or test that finds
 * its count there at once does not drive, but tells rig's transports that
 * a waiter is about: their threads keep standing back, and what comes
 * next waits for that waiter's next miss, as MPI's messages wait for the
 * next MPI call (a rank whose peers' runs always came before it waited
 * otherwise had its transport's thread woken to take each one).
 *
 * *Bulk runs.*  An auto wait on a node that is not oversubscribed whose
 * ends with a hook all move at least RIG_WAIT_BULK_BYTES a run (the larger
 * direction's copy; 1 MiB by default, 0: never) and share one transport
 * drives once, hands the transport to its own thread and sleeps as block
 * does: a run that long on the wire gains nothing from spinning, and a
 * spinning wait's drives (a system call each) take the cores the
 * network stack needs.  A test (no time limit) still drives once.
 *
 * *Reaching a count.*  A test or a wait tells four outcomes apart
 * (rig_reach): the count reached c, not yet (a test, or a wait's time
 * limit passed), the job failed (the count is RIG_COUNT_FAILED: it will
 * never be reached), or bad arguments.  Negative outcomes are final: stop
 * waiting.
 *
 * *Goals.*  A goal is an (end, count) pair: `arrived` or `sent` of an end
 * reaching a count.  rig_wait_all waits until every goal of a set is
 * reached, rig_wait_any until one is; both end at once when a goal's end
 * failed.  Ends of several rails, and of several jobs, may be mixed.
 *
 * *Runs.*  Runs count from 0.  Run r of a direction of n transfers is
 * counts r * n + 1 .. (r + 1) * n and uses copy r % 2 of each landing
 * area.  The run helpers do that arithmetic, given the transfers per run
 * of each direction (rig_runs):
 *   sender:   rig_run_outbound(s, r, &out)  -- waits until copy r % 2 of
 *             the outbound may be written (`sent` covers run r - 2) and
 *             hands it over; write it; rig_run_ready(s, r) signals run r;
 *   receiver: rig_run_inbound(s, r, &in)    -- waits until run r arrived
 *             and hands over copy r % 2 of the inbound; read it.
 * The outbound copy may be written from rig_run_outbound's return until
 * rig_run_ready; not after (the rail may be reading it).
 *
 * *When an inbound copy may be overwritten.*  Run r + 2 lands in the
 * inbound copy of run r, and it may land as soon as the sender signals
 * run r + 2 (the spec: "A transfer may land in an inbound copy that work
 * still reads.  The caller must order it").  So the receiver must be done
 * reading run r before the sender signals run r + 2.  Two patterns
 * guarantee it:
 *   - A symmetric exchange (a halo exchange: both ranks send and receive
 *     every run): each rank reads run r of its inbound before it signals
 *     its own run r + 1.  A sender signals run r + 2 only after run r + 1
 *     arrived from its peer, which the peer signalled after reading run
 *     r.  The usual loop keeps it: outbound, write, ready, inbound, read,
 *     next run.  It breaks if a rank signals run r + 1 before it has read
 *     run r (say, to overlap the next send with reading).
 *   - An acknowledged rail (asymmetric exchanges: a producer faster than
 *     its consumer, or reads that outlast the next signal): the receiver
 *     sends one transfer per run back on the same rail (its send list is
 *     one transfer of at least 1 byte; the bytes are not read) and calls
 *     rig_run_done(s, r) once it is done reading run r; the sender sets
 *     `acked`, and rig_run_ready(s, r) then first waits until run r - 2
 *     was acknowledged.  The producer may run two runs ahead of the
 *     consumer, never more.  A rail carrying data both ways uses a second
 *     rail for acknowledgements.
 *
 * Threads: every function here may be called from any thread; a rig_runs
 * is read-only to them.  No function here allocates or calls MPI. */
#ifndef RIG_WAIT_H
#define RIG_WAIT_H

#include <rig/api.h>
#include <rig/remote_abi.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- wait modes --------------------------------------------------------- */

typedef enum {
    RIG_WAIT_AUTO = 0, /* yield when oversubscribed, else spin first */
    RIG_WAIT_SPIN = 1,
    RIG_WAIT_YIELD = 2,
    RIG_WAIT_BLOCK = 3
} rig_wait_mode;

/* Sets the process's wait mode; RIG_WAIT, when set, still wins.  Waits
 * already under way keep the mode they started with.  False with
 * "invalid:" for a value outside rig_wait_mode.  Any thread. */
RIG_API bool rig_wait_mode_set(rig_wait_mode mode, char **err);

/* The mode waits use now, auto decided as the overview says: spin, yield
 * or block, or RIG_WAIT_AUTO for auto on a node that is not
 * oversubscribed (spin, then yield, then sleep).  *why (when why is not
 * NULL) gets a static sentence saying what decided it.  Any thread. */
RIG_API rig_wait_mode rig_wait_mode_now(const char **why);

/* The mode's name ("auto", "spin", "yield", "block"; "?" otherwise). */
RIG_API const char *rig_wait_mode_name(rig_wait_mode mode);

/* What a job layer knows of this node, for auto: local_ranks, the ranks
 * of the job running on this kernel (this one included), and pus, the
 * processing units their bindings cover together.  The node is
 * oversubscribed when local_ranks > pus; once a call said so, later calls
 * do not undo it (ranks do not leave a node).  Arguments < 1 are ignored.
 * rig_job_open calls it; a program that knows better may too.  Any
 * thread. */
RIG_API void rig_wait_node(int local_ranks, int pus);

/* ---- tests -------------------------------------------------------------- */

/* The outcome of a test or a wait.  Negative: final (stop waiting). */
typedef enum {
    RIG_REACHED = 1, /* the count reached c */
    RIG_NOT_YET = 0, /* not yet: a test, or the wait's time limit passed */
    RIG_FAILED = -1, /* the count is RIG_COUNT_FAILED: the job failed */
    RIG_INVALID = -2 /* bad arguments (logged once); nothing waited */
} rig_reach;

/* No time limit, for the timeout_ms of the waits below. */
#define RIG_FOREVER UINT32_MAX

/* Whether arrived (resp. sent) of e reached c, without waiting: one
 * acquire load.  c == 0 is reached unless the job failed.  RIG_INVALID
 * for a NULL end or c >= INT64_MAX. */
RIG_API rig_reach rig_end_test_arrived(const rig_end *e, uint64_t c);
RIG_API rig_reach rig_end_test_sent(const rig_end *e, uint64_t c);

/* ---- several ends at once ------------------------------------------------ */

/* A goal: the count at byte `at` (RIG_ARRIVED_AT or RIG_SENT_AT) of end's
 * counts reaching count. */
typedef struct {
    const rig_end *end;
    size_t at;
    uint64_t count;
} rig_goal;

static inline rig_goal rig_goal_arrived(const rig_end *e, uint64_t c)
{
    rig_goal g = {e, RIG_ARRIVED_AT, c};
    return g;
}

static inline rig_goal rig_goal_sent(const rig_end *e, uint64_t c)
{
    rig_goal g = {e, RIG_SENT_AT, c};
    return g;
}

/* Waits until every goal g[0..n) is reached (RIG_REACHED, *which n; n ==
 * 0 is reached at once), one failed (RIG_FAILED, *which its index), or
 * timeout_ms passed (RIG_NOT_YET, *which the first goal not reached).
 * RIG_INVALID, *which the culprit (n for g itself), for g NULL with n >
 * 0, a NULL end, `at` not RIG_ARRIVED_AT or RIG_SENT_AT, or a count >=
 * INT64_MAX -- checked before anything is waited for.  A goal reached
 * once stays reached, so a failure after all were reached still gives
 * RIG_REACHED.  timeout_ms 0 tests; RIG_FOREVER waits without a limit
 * (a failure still ends the wait).  which may be NULL.  Any thread. */
RIG_API rig_reach rig_wait_all_for(const rig_goal *g, size_t n,
                                   uint32_t timeout_ms, size_t *which);
RIG_API rig_reach rig_wait_all(const rig_goal *g, size_t n, size_t *which);

/* Waits until one goal of g[0..n) is reached (RIG_REACHED, *which the
 * lowest index reached) or failed (RIG_FAILED, *which its index; goals
 * are looked at in index order, so a goal reached before a failed one
 * is reported first), or timeout_ms passed (RIG_NOT_YET, *which n).
 * RIG_INVALID as rig_wait_all_for, and for n == 0 (*which 0): no goal
 * can be reached.  which may be NULL.  Any thread. */
RIG_API rig_reach rig_wait_any_for(const rig_goal *g, size_t n,
                                   uint32_t timeout_ms, size_t *which);
RIG_API rig_reach rig_wait_any(const rig_goal *g, size_t n, size_t *which);

/* ---- the run loop ---------------------------------------------------------
 */

/* One end's runs: the transfers per run of each direction, as its rail
 * was made (nsend: this end's send list; nreceive: its receive list).
 * Fill it with a designated initializer; the helpers only read it. */
typedef struct {
    rig_end *end;
    size_t nsend;      /* transfers this end sends per run; 0: none */
    size_t nreceive;   /* transfers it receives per run; 0: none */
    bool acked;        /* sender: wait for acknowledgements (see above) */
    uint32_t limit_ms; /* each wait's time limit; 0: none */
} rig_runs;

/* Sender: waits until copy r % 2 of the outbound may be written (`sent`
 * reached r - 1 runs' counts, for r >= 2) and sets *copy to it.
 * RIG_NOT_YET when limit_ms passed, RIG_FAILED when the job failed,
 * RIG_INVALID for NULL arguments, nsend == 0, an end that sends nothing,
 * or a run whose counts reach INT64_MAX.  *copy is set only on
 * RIG_REACHED. */
RIG_API rig_reach rig_run_outbound(const rig_runs *s, uint64_t r,
                                   rig_area *copy);

/* Sender: signals run r, rig_end_ready(end, (r + 1) * nsend), once its
 * outbound copy is written.  With acked, for r >= 2, it first waits until
 * the receiver acknowledged run r - 2 (rig_run_done), so that run r never
 * lands in an inbound copy the receiver still reads (RIG_NOT_YET and
 * RIG_FAILED as rig_run_outbound; nothing signalled then).  RIG_REACHED
 * once signalled; RIG_INVALID as rig_run_outbound, and with acked for
 * nreceive == 0. */
RIG_API rig_reach rig_run_ready(const rig_runs *s, uint64_t r);

/* Receiver: waits until run r arrived (arrived reached (r + 1) *
 * nreceive) and sets *copy to copy r % 2 of the inbound, which holds it
 * until the sender signals run r + 2 (see "When an inbound copy may be
 * overwritten").  Outcomes as rig_run_outbound, RIG_INVALID for nreceive
 * == 0, an end that receives nothing, or nreceive differing from the
 * receive list the provider gave. */
RIG_API rig_reach rig_run_inbound(const rig_runs *s, uint64_t r,
                                  rig_area *copy);

/* Receiver of an acknowledged rail: done reading run r; signals the ack,
 * run r of this end's send direction (its bytes are not read).  Never
 * waits.  RIG_REACHED; RIG_INVALID for NULL, nsend == 0 or an overflowing
 * run; RIG_FAILED when the job failed. */
RIG_API rig_reach rig_run_done(const rig_runs *s, uint64_t r);

#ifdef __cplusplus
}
#endif

#endif
