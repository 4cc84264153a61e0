/* SPDX-License-Identifier: BSD-3-Clause */
/* rig/wait.h: how waits share the CPU, and tests and waits over several
 * ends.
 *
 * Concepts.
 *
 * *Wait modes.*  A wait (rig_end_wait_*, rig_wait_all/any) polls a count
 * until it is reached.  How it polls is the process's *wait mode*, one for
 * the whole process because it follows from where the process runs (how
 * many ranks share its cores), not from a rail:
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
 *          yield does.
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
 * Threads: every function here may be called from any thread.  No function here
 * allocates or calls MPI. */
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

/* The mode waits use now: spin, yield or block (auto decided, as the
 * overview says); *why (when why is not NULL) gets a static sentence
 * saying what decided it.  Any thread. */
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

#ifdef __cplusplus
}
#endif

#endif
