/* SPDX-License-Identifier: BSD-3-Clause */
/* A job's failure as every transport keeps it: whether and why the job
 * failed, which ranks left it, and the watching of same-node peers'
 * processes.  Each transport's failure.c detects and spreads failures its
 * own way (UCX: a message to every rank, pidfds in the progress thread's
 * epoll; MPI: a message to every rank, a watcher thread) on this one
 * state, which the ops table's failed and gone slots read.
 *
 * The reason.  The first rig_failure_set wins and stays; a transport that
 * finds the job failed before anyone told it why (a peer's count at
 * RIG_COUNT_FAILED) records a stand-in with rig_failure_seen, which a
 * later reason replaces.  One reason more may replace the first: where
 * the first is this rank's own sighting of rank X's end, a reason that X
 * itself told (rig_failure_told) was sent before X ended, so it is the
 * earlier cause -- X found the job failed, said why, finished and
 * exited, and a watcher that looked only after both events must not
 * blame X's exit (the reason a rank reports would otherwise depend on
 * how late its watcher ran).  A transport whose watcher cannot take the
 * told reasons itself drains them before it answers the reason (the MPI
 * transport's rig_mpi_failed); one whose watcher can takes them before
 * a sighting (UCX's progress thread, and its links' thread before a
 * closed link's).  The reason is stored before the
 * flag (seq_cst both), so a reader that sees rig_failure_failed sees a
 * reason; a replaced reason stays readable until fini.  A
 * transport sets the failure state before it raises any count of its own
 * ends, so that a wait that returns false and rig_job_failed agree.
 *
 * Ranks that left.  A rank that died or finalized MPI with the job open
 * left it: no collective with it can complete.  rig_failure_left records
 * it (per rank, and the first one for rig_failure_gone), and whether it
 * died: a rank that finalized MPI is still there for MPI_Finalize, a dead
 * one never is (rig_failure_died).
 *
 * Rank r is gone.  Every source that finds a rank gone -- its pidfd, a
 * poll of its pid, a failed endpoint, and the heartbeat of a peer on
 * another node that issue 14 adds -- enters through one call,
 * rig_failure_peer_gone(f, r, how), which words the reason ("failed: rank
 * 1 died (pid 21252, seen by rank 0)") and hands it to the transport's
 * on_gone (given at init), which marks the rank left, fails the job and
 * spreads it to every rank.  A new source needs no more than that call.
 *
 * Peers' processes.  A rank on this node (the job's wiring says which)
 * is watched through a pidfd, readable once the process ended (a zombie
 * included), where the kernel has pidfd_open (Linux 5.3), else by
 * kill(pid, 0).  A stopped process (SIGSTOP) or one that spins is not
 * ended: a silent peer on this node is never taken for gone, however
 * long it is silent.  The transport decides when to look (an epoll on the
 * fds, a thread that polls) and holds whatever lock guards its watcher;
 * these calls take none. */
#ifndef RIG_FAILURE_H
#define RIG_FAILURE_H

#include "transport.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The transport's taking of a rank that is gone (see above): why is the
 * reason, worded.  Called by rig_failure_peer_gone on the caller's thread,
 * with no lock of the failure state held. */
typedef void (*rig_failure_gone_fn)(void *self, int rank, const char *why);

typedef struct {
    atomic_bool failed;
    _Atomic(char *) why;      /* the first reason, malloc'd; NULL: none yet */
    _Atomic(char *) seen;     /* a stand-in while no reason is known */
    _Atomic(char *) replaced; /* a sighting a told reason replaced */
    pthread_mutex_t reason_lock; /* why's setting, replaced, sighted */
    int sighted;                 /* the rank whose end is the reason, or -1 */
    atomic_int gone;             /* the first rank known to have left, or -1 */
    atomic_bool died;            /* a rank left by dying (not by finalizing) */
    int rank, size;
    atomic_uchar *left; /* per rank: 0 in the job, else RIG_LEFT_* */
    int32_t *pid;       /* per rank: its pid (0 until the wiring) */
    bool *local;        /* per rank: on this node, so pid means a process */
    int *pidfd;         /* per rank: its pidfd when watched, else -1 */
    bool polled;        /* a watched peer has no pidfd: kill(pid, 0) */
    rig_failure_gone_fn on_gone;
    void *self; /* the transport, for on_gone */
} rig_failure;

/* Sets f up for rank of a job of size ranks, with the transport's
 * on_gone; "nomem:". */
bool rig_failure_init(rig_failure *f, int rank, int size,
                      rig_failure_gone_fn on_gone, void *self, char **err);
/* Closes the pidfds and frees what f holds. */
void rig_failure_fini(rig_failure *f);

/* Marks the job failed with why (a "failed: ..." message, copied) unless a
 * reason is known already; true when this was the first reason.  Any
 * thread. */
bool rig_failure_set(rig_failure *f, const char *why);
/* rig_failure_set for a reason that is this rank's sighting of rank
 * sighted's end (see above). */
bool rig_failure_set_sighted(rig_failure *f, const char *why, int sighted);
/* A reason rank from told this rank: rig_failure_set, except that it
 * replaces a reason that is this rank's sighting of from's end (see
 * above); true when it became the reason.  from -1: rig_failure_set. */
bool rig_failure_told(rig_failure *f, int from, const char *why);
/* The rank whose end, as this rank saw it, is the reason; -1 when the
 * reason is anything else (or none). */
int rig_failure_sighted(const rig_failure *f);
/* Marks the job failed, with why as a stand-in until a reason is set. */
void rig_failure_seen(rig_failure *f, const char *why);
/* Whether the job failed; whether its reason is known (not a stand-in). */
bool rig_failure_failed(const rig_failure *f);
bool rig_failure_known(const rig_failure *f);
/* The reason (or stand-in) once failed, else NULL; valid until fini. */
const char *rig_failure_reason(const rig_failure *f);

/* How a rank left: it died (or its endpoint failed, most likely so); it
 * finalized MPI with the job open; or its endpoint failed while closing,
 * which it may have done itself having finished its close (not counted
 * as a death). */
enum { RIG_LEFT_DIED = 1, RIG_LEFT_FINALIZED = 2, RIG_LEFT_CLOSING = 3 };

/* Records that rank left the job (how: RIG_LEFT_*); true the first time
 * for that rank. */
bool rig_failure_left(rig_failure *f, int rank, int how);
/* Whether rank left; how it did (0: it did not); the first rank known to
 * have left, or -1; whether any rank that left died. */
bool rig_failure_has_left(const rig_failure *f, int rank);
int rig_failure_how(const rig_failure *f, int rank);
int rig_failure_gone(const rig_failure *f);
bool rig_failure_died(const rig_failure *f);

/* Rank r is gone (see above): how says what was seen ("died", "fell
 * silent for 1500 ms"); the reason handed to on_gone is "failed: rank R
 * HOW (pid P, seen by rank ME)".  Any thread; no lock held. */
void rig_failure_peer_gone(rig_failure *f, int r, const char *how);

/* How long a reason on its way is waited for (rig_failure_settled). */
#define RIG_REASON_WAIT_NS 1000000000ull

/* t's failure (the ops table's failed slot) once its reason is known:
 * while the answer is a stand-in (the reason on its way) it asks again
 * for up to wait_ns, then answers the stand-in.  NULL when t's job has
 * not failed.  Any thread that may call t's failed slot. */
const char *rig_failure_settled(rig_transport *t, uint64_t wait_ns);

/* Learns every rank's pid and which share this node (at wire). */
void rig_failure_know(rig_failure *f, const rig_transport_wiring *w);
/* Starts watching rank r's process when it shares this node (once):
 * through a pidfd (rig_failure_fd), else by polling (f->polled).  False
 * with "failed: rank R (pid P) is gone" when it ended already. */
bool rig_failure_watch(rig_failure *f, int r, char **err);
/* Whether rank r's process is watched here (it shares this node and its
 * pid is known): its end, not a connection's, tells its death. */
bool rig_failure_watched(const rig_failure *f, int r);
/* Rank r's pidfd, or -1. */
int rig_failure_fd(const rig_failure *f, int r);
/* Whether rank r, a watched peer, has ended (its pidfd is readable, or
 * kill(pid, 0) says it is gone).  Does not block. */
bool rig_failure_ended(const rig_failure *f, int r);
/* Stops watching rank r (closes its pidfd).  Not while another thread may
 * look at it: a watcher keeps a dead rank's pidfd and skips it (left). */
void rig_failure_unwatch(rig_failure *f, int r);

/* Looks now, on the calling thread, at every watched rank that has not
 * left, and takes each that ended as gone (rig_failure_peer_gone); then
 * the first rank known gone, or -1.  For a decision that must not wait
 * for the watcher's next look (the closing barrier completes with the
 * part a rank gave before it died).  Any thread; no lock held. */
int rig_failure_look(rig_failure *f);

#endif
