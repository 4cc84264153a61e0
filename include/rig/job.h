/* SPDX-License-Identifier: BSD-3-Clause */
/* rig/job.h: an MPI job's rails between ranks, carried by a transport:
 * UCX (the default) or MPI RMA.
 *
 * Concepts.
 *
 * A *job* is rig opened on an MPI communicator, with one *transport* that
 * carries its rails (RIG_TRANSPORT below; each is a provider of rails in
 * the sense of rig/provider.h, behind one ops table inside rig), and one
 * dynamic MPI window through which every end of the job is also reachable
 * by MPI RMA (freed at MPI_Finalize, see rig_job_close).  The UCX transport has
 * one UCX context and worker per process, their addresses exchanged at open,
 * and one progress thread that sleeps when nothing is outstanding.  Every rank
 * of the communicator is a *machine* of the job and has a host record
 * (rig_job_host).
 *
 * A *rail* (rig/remote_abi.h) between two ranks is made by both calling
 * rig_job_rail naming each other; the send list of one must equal the
 * receive list of the other.  Calls between one pair are matched in the
 * order they are made (the k-th call of rank a naming b pairs with the k-th
 * call of b naming a), so a rank may make any number of rails to any number
 * of peers, but -- as with blocking MPI sends -- the ranks must not wait for
 * each other in a cycle (make all-pairs rails in one global order of pairs).
 * rig_job_rails makes every rail of every rank in one collective call,
 * whatever order each rank lists them in: the neighbour graph of a stencil
 * code, with no order to find.
 * A rail's id is the same at both ends and unique in the job.
 *
 * The end memory of a rail is one allocation: counts, outbound and inbound
 * areas each starting on a page, sized as the spec says, allocated by UCX
 * (so that a peer on the same node maps it and moves bytes with plain
 * stores, no syscall per transfer), bound to the NUMA node of the calling
 * rank's cores, registered with cuMemHostRegister where a CUDA driver and GPU
 * are present, and attached to the job's MPI window.
 *
 * rig_end_ready on a rail carries every transfer up to the count inline on
 * the calling thread when it can (a mapped peer: plain stores, one release
 * compare-and-swap of `arrived`); otherwise it posts UCX puts and the
 * progress thread finishes them.  Ends fail (every count raised to
 * RIG_COUNT_FAILED) when a peer dies, a put fails, or rig_job_fail is
 * called.  A released rail's ends are freed (memory, registration, their
 * place in the job's window) once both ranks released it: the pair's next
 * rig_job_rail, or rig_job_close.
 *
 * Failure.  Every rank of the job watches every other: a rank on the same
 * node through its process (a pidfd: a death is seen at once), a rank on
 * another node through UCX keepalive (RIG_KEEPALIVE_MS; the MPI transport
 * has none across nodes).  The rank that sees a failure tells every rank,
 * whatever rails they share, and every count of every end of every rank
 * still running goes to RIG_COUNT_FAILED and stays there: no wait blocks,
 * rig_job_rail fails with "failed: <why>", and rig_job_close gives up on a
 * rank that left, each within 2 s of the death (measured: tens of ms on
 * one node).  A rank that is stopped (SIGSTOP), or that spins or deadlocks
 * without dying, is not a failure: a silent rank on the same node is never
 * taken for gone, however long it is silent, and its peers' waits wait for
 * it (use rig_end_wait_arrived_for for a bound of your own); a rank on
 * another node is taken for gone when UCX keepalive finds its connection
 * dead (a stopped process's kernel still answers).  What arrived before a
 * failure stays readable; what the landing areas hold then is
 * unspecified.
 *
 * What rig cannot fix, and how to end a failed job.  MPI (Open MPI 4.1,
 * MPICH 4.0, without ULFM) has no collective that survives a dead rank:
 *   - MPI collectives a death blocks for good: rig_job_open (MPI_Comm_dup,
 *     MPI_Allreduce, MPI_Allgather[v], MPI_Win_create_dynamic: every rank
 *     must get through it alive); with RIG_TRANSPORT=mpi, rig_job_rail in
 *     the step after both ranks' offers (MPI_Win_free of the rails both
 *     released, MPI_Comm_create_group on the pair's first rail,
 *     MPI_Win_allocate[_shared]), if the peer dies within that step (both
 *     ranks enter it only once both agreed to, so a job that fails
 *     around it leaves neither there): the transport's watcher then ends
 *     the process 1 s after it saw the peer die, with status 70 and an
 *     error line naming the call and the peer, rather than let it wait
 *     for the batch system's time limit; MPI_Finalize, which frees the
 *     windows of the jobs closed whole (MPI_Win_free, a barrier:
 *     rig_job_close leaves it there so as to call no collective after its
 *     closing barrier).
 *   - calls that a death never blocks: rig_job_close (its closing barrier
 *     is an MPI_Ibarrier that gives up on a rank that left, and nothing
 *     collective follows it), rig_job_rail's exchanges (sends and receives
 *     tested against the job's failure), the UCX transport's rig_job_rail,
 *     every wait of an end, rig_end_ready, rig_job_fail, rig_job_failed,
 *     rig_job_failure, rig_end_failure.
 *   - MPI_Finalize after a rank died never returns (Open MPI 4.1, even
 *     under --enable-recovery); without --enable-recovery Open MPI's
 *     mpirun ends every rank when one dies.  rig_job_close says whether a
 *     rank died (looking last at the ranks of its node); a rank on another
 *     node that dies after the close, or during it unseen by keepalive,
 *     still makes MPI_Finalize wait.
 * So a code ends like this (mpi_tests/failure/test_neverhang.c does):
 *
 *     bool failed = rig_job_failed(job);
 *     if (!rig_job_close(job)) {  // a rank died: MPI_Finalize would hang
 *         fflush(NULL);
 *         exit(EXIT_FAILURE);     // not MPI_Finalize
 *     }
 *     MPI_Finalize();
 *     return failed ? EXIT_FAILURE : EXIT_SUCCESS;
 *
 * (mpirun --enable-recovery of Open MPI 4.1 reports 0 however the
 * survivors exit: say the outcome in your output as well.)
 *
 * Settings: rig_job_options, each overridable by a RIG_* environment
 * variable, which wins (rig_settings() lists them, rig_info prints them):
 *   RIG_TRANSPORT   "ucx" | "mpi": MPI one-sided calls alone, one window
 *                   per rail (MPI_Win_allocate[_shared] on the pair's
 *                   communicator); rig_end_ready then calls MPI on the
 *                   caller's thread (below MPI_THREAD_MULTIPLE, treat it as
 *                   an MPI call, as rig_job_failed then too), a peer's
 *                   death is seen on its node only (a pidfd, by every
 *                   rank of that node) and reaches other nodes when a
 *                   rank of that node next calls rig, and windows are
 *                   freed when both ranks released a rail (the pair's
 *                   next rig_job_rail) or at rig_job_close.  RIG_NUMA,
 *                   RIG_CUDA and RIG_SHM_STORES apply to "ucx" only.
 *   RIG_NUMA        "auto" (bind ends to the rank's NUMA node) | "off"
 *   RIG_CUDA        "auto" (cuMemHostRegister when a GPU is present) | "off"
 *   RIG_SHM_STORES  "auto" (plain stores to mapped same-node peers) | "off"
 *                   (always UCX puts; for testing the network path)
 *   RIG_KEEPALIVE_MS 500: how often peers on other nodes are checked for
 *                   failure (UCX keepalive, TCP keepalive); same-node
 *                   peers are watched through their process (a pidfd)
 *   RIG_PEER_TIMEOUT_MS 500: a rank on another node silent this long is
 *                   lost (rig's own TCP link to it; 0: not watched)
 *   RIG_LANE_BYTES  1048576: runs to a rank on another node whose two
 *                   copies fit go over rig's own TCP connection to it (a
 *                   plain recv finds them), larger ones as UCX active
 *                   messages; 0: UCX for every run
 *
 * Threads and MPI: rig_job_open and rig_job_close are collective and call
 * MPI; rig_job_rail calls MPI point-to-point on the job's own communicator,
 * so concurrent calls from several threads need MPI_THREAD_MULTIPLE.  The
 * progress thread never calls MPI.  Everything else may be called from any
 * thread.
 *
 * Errors follow rig/remote_abi.h: false plus a malloc'd *err starting with a
 * reason word (invalid:, failed:, system:, nomem:, unsupported:). */
#ifndef RIG_JOB_H
#define RIG_JOB_H

#include <rig/api.h>
#include <rig/provider.h>
#include <rig/remote_abi.h>

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rig_job rig_job;

/* Options of rig_job_open; rig_job_options_init fills the defaults.  Each
 * is overridden by its environment variable (named beside it) when set. */
typedef struct {
    /* "ucx" (default) or "mpi" (see RIG_TRANSPORT above).  RIG_TRANSPORT. */
    const char *transport;
    /* Bind end memory to the NUMA node of the rank's cores.  RIG_NUMA. */
    rig_switch numa;
    /* Register end memory with cuMemHostRegister.  RIG_CUDA. */
    rig_switch cuda;
    /* Carry rails to same-node peers by plain stores into mapped memory;
     * RIG_OFF forces UCX puts everywhere.  RIG_SHM_STORES. */
    rig_switch shm_stores;
} rig_job_options;

/* Fills *opt with the defaults ("ucx", RIG_AUTO everywhere).  opt must not
 * be NULL.  Any thread. */
RIG_API void rig_job_options_init(rig_job_options *opt);

/* Opens a job on comm (duplicated; the caller keeps comm).  Collective over
 * comm: every rank calls it, and either all succeed or all return false
 * (each naming its own cause, or "failed: rank N could not open: ..." for a
 * peer's).  opt may be NULL (defaults).  MPI must be initialised.  Errors:
 * "invalid:" for a NULL out, MPI_COMM_NULL or a malformed option or RIG_*
 * variable, "unsupported:" for a transport this build lacks or comm an
 * intercommunicator, "system:" for a failed UCX, hwloc or MPI call,
 * "nomem:".  *out is set only on success; close it with rig_job_close. */
RIG_API bool rig_job_open(MPI_Comm comm, const rig_job_options *opt,
                          rig_job **out, char **err);

/* This rank's rank in the job's communicator and the job's size; -1 for
 * NULL. */
RIG_API int rig_job_rank(const rig_job *job);
RIG_API int rig_job_size(const rig_job *job);

/* Every function below checks its job: NULL, a job already closed, or a
 * pointer that is no open job of this process gets "invalid:" (or -1,
 * NULL, false, nothing done, as each says) and a warning logged once --
 * never a read of freed memory, so rig_job_close twice is harmless.  The
 * one thing rig cannot tell is a stale pointer to a closed job whose
 * address a later rig_job_open got again: that is the new job. */

/* Makes a rail between this rank and peer that carries send[0..nsend) from
 * this rank and receive[0..nreceive) to it.  peer calls it too, naming this
 * rank, with the lists swapped; calls between a pair are matched in order.
 * Blocks until the peer's matching call.  Both ranks get the same outcome:
 * "invalid:" with the rig_check_transfers message (of either side's lists,
 * "invalid: rank 2's lists: ..." for the peer's), or naming the first
 * difference between one's send and the other's receive; "failed:" for a
 * failed or closed job, or the peer's failure to make its end (naming
 * it); "system:"/"nomem:" naming the call that failed making this end.
 * Errors found before contacting the peer, which therefore cannot tell it,
 * are the caller's programming errors: "invalid:" for a NULL job or out, a
 * peer out of range or equal to this rank, a NULL list with a nonzero
 * count.  *out (one reference; release with rig_rail_release) is set only
 * on success; nothing half-made is left behind on failure.  Any thread
 * (see MPI above). */
RIG_API bool rig_job_rail(rig_job *job, int peer, const rig_transfer *send,
                          size_t nsend, const rig_transfer *receive,
                          size_t nreceive, rig_rail **out, char **err);

/* One rail of rig_job_rails, as rig_job_rail takes it: the peer, and the
 * lists this rank sends and receives. */
typedef struct {
    int peer;
    const rig_transfer *send;
    size_t nsend;
    const rig_transfer *receive;
    size_t nreceive;
} rig_job_rail_request;

/* Makes every rail this rank names, in one call: the neighbour graph of a
 * stencil code.  out[i] (one reference; release with rig_rail_release) is
 * the rail of reqs[i].
 *
 * Collective over the job's communicator: every rank calls it (n may be
 * 0), one call at a time per job, and no rig_job_rail naming one of its
 * peers may run meanwhile.  Each rank lists its own requests in any
 * order: every request naming a peer must be matched by one of that
 * peer's naming this rank, with the lists swapped, and two or more rails
 * between one pair are matched in the order each side lists them (the
 * k-th request of rank a naming b with the k-th of b naming a).  No
 * order of the lists can deadlock: rig makes the rails in one order of
 * the pairs that every rank shares.  It continues each pair's rails of
 * rig_job_rail (ids as that call gives them).
 *
 * All or nothing across the job: either every rank gets all its rails,
 * or every rank returns false and keeps none (the rails made are
 * released), so that no rank is left waiting for a peer that refused.
 * This rank's own errors name the request, in rig_job_rail's words per
 * rail: "invalid: request 2 (peer 5): send[0] has length 0" (a peer out
 * of range or this rank, a NULL list with a nonzero count, the
 * rig_check_transfers message -- all found before any rail is made --
 * or lists that differ from the peer's, which both sides name),
 * "failed:", "system:" or "nomem:" (making the rail's end, the peer's
 * end, the job); "invalid: rank 3 names this rank in 1 request, this
 * rank names it in 2 (request 4 is one)" for counts that do not match;
 * "invalid:" for a NULL out or reqs with n > 0.  The other ranks
 * then return "failed: rank R refused its requests (...)" or "failed:
 * rank R could not make the rail of its request I".  A failed job, or a
 * rank that dies or fails the job while the call waits: "failed: <why>"
 * within 2 s of the death (with RIG_TRANSPORT=mpi, rig_job_rail's limit
 * above holds for each rail).  A rank that cannot take its part in the
 * agreement (no memory for it, an MPI call of it failing) fails the job
 * rather than leave the others waiting: "nomem:"/"system:" there,
 * "failed:" elsewhere.  A job that is not open: "invalid:" at
 * once, on this rank alone (the others cannot be told).  out[0..n) is
 * written only on success.  Calls MPI on the calling thread (non-blocking
 * collectives on a communicator of the job's own, then rig_job_rail's
 * exchanges): the thread rules of rig_job_rail. */
RIG_API bool rig_job_rails(rig_job *job, const rig_job_rail_request *reqs,
                           size_t n, rig_rail **out, char **err);

/* The rank at the other end of a rail of this job, or -1 for NULL
 * arguments or a rail this job did not make.  Any thread. */
RIG_API int rig_job_rail_peer(const rig_job *job, const rig_rail *rail);

/* The host record of rank's machine, valid until rig_job_close; NULL for a
 * NULL job or a rank out of range.  Its rail function makes a rail between
 * that rank and this one (peer NULL) through rig_job_rail, with the lists
 * seen from that rank (bad lists refused at once, before that rank is
 * met, also when the record's function is called directly); rails between
 * two other ranks are "unsupported:" here (rig/remote.h's records make
 * them).  Its machine is "<hostname>:<rank>".  threads() answers 0 (no
 * programs are loaded by this layer).  Any thread. */
RIG_API const rig_host *rig_job_host(const rig_job *job, int rank);

/* The job's dynamic MPI window: every end of the job is attached to it at
 * the address of its memory (see rig_job_rail_disp), so MPI RMA reaches
 * it.  The window belongs to the job (do not free it), may be used until
 * rig_job_close (rig frees it at MPI_Finalize) and returns MPI errors
 * (MPI_ERRORS_RETURN).  False with "invalid:" for a job that is not open
 * or a NULL out.  Any thread.
 *
 * Why a dynamic window: ends must be allocated by UCX for same-node peers
 * to map them (MPI_Win_allocate memory is MPI's), and rails are made pair
 * by pair, so ends are attached locally (MPI_Win_attach) rather than
 * allocated by a collective call.  With Open MPI 4.1 run with osc rdma
 * (--mca osc ^ucx: osc ucx crashes on dynamic windows with UCX 1.13, in
 * posix rkey unpack); osc rdma reaches attached memory through CMA (about
 * 2.5 us a put).  osc rdma attaches at most osc_rdma_max_attach regions
 * (64 by default; rig reads it through MPI_T and stays within it): raise
 * it (--mca osc_rdma_max_attach 4096) for more rails; ends past the limit
 * work as rails but are not in the window.  Do not attach memory of your
 * own to this window. */
RIG_API bool rig_job_window(const rig_job *job, MPI_Win *out, char **err);

/* Where the peer's end of a rail sits in the job's window: its counts,
 * outbound and inbound areas as displacements (their addresses, as
 * MPI_Get_address gives them at the peer) at rank out->rank.  False with
 * "invalid:" for NULL arguments or a rail this job did not make (or
 * released), "unsupported:" when the peer could not attach its end (see
 * rig_job_window).  Any thread. */
typedef struct {
    int rank;
    MPI_Aint counts;
    MPI_Aint outbound;
    MPI_Aint inbound;
} rig_job_peer_end;
RIG_API bool rig_job_rail_disp(const rig_job *job, const rig_rail *rail,
                               rig_job_peer_end *out, char **err);

/* Fails the job here: every count of every live end of the job is raised
 * to RIG_COUNT_FAILED for good, every rank of the job is told (their ends
 * fail too), and later rig_job_rail calls fail with "failed: <why>".  why
 * may be NULL.  Idempotent; any thread; not collective.  A job that is
 * not open: nothing (logged). */
RIG_API void rig_job_fail(rig_job *job, const char *why);

/* Whether the job failed (here, or told by a peer); false for a job that
 * is not open.  It agrees with the counts: once a wait on an end of the
 * job returned false (a count at RIG_COUNT_FAILED), rig_job_failed is
 * true; and once it returned true, every count of every end this rank
 * holds is at RIG_COUNT_FAILED.  (Between two ends there is no such
 * instant: a peer raises the count of its rail first, and this rank's
 * other ends follow when this rank takes the failure in -- at once when
 * its own thread notices, or when it calls rig_job_failed.)  Any thread
 * (with RIG_TRANSPORT=mpi below MPI_THREAD_MULTIPLE, an MPI call). */
RIG_API bool rig_job_failed(const rig_job *job);

/* Why the job failed: the first reason this rank learned ("failed: rank 1
 * died (pid 21252, seen by rank 0)"; for a rank on another machine, or
 * one whose link was cut, "failed: rank 1 is unreachable (its endpoint
 * failed: Endpoint timeout, seen by rank 0)"), the same words on every rank
 * that learned it from the rank that saw it -- except that where this rank
 * itself saw rank X end, a reason X told before it ended is the earlier
 * cause and is answered instead -- malloc'd (the caller frees it);
 * NULL when it has not failed, for a job that is not open, or when out of
 * memory.  When this rank saw the failure only in a count a peer raised,
 * the reason is on its way: it waits for it up to 1 s, then answers a
 * stand-in ("failed: rank 0's end of rail N was failed by rank 2 (the
 * reason is on its way)").  Any thread (as rig_job_failed). */
RIG_API char *rig_job_failure(const rig_job *job);

/* The same for code that holds only an end (a program, a callback): why
 * the job whose rail e belongs to failed, as rig_job_failure says it, for
 * as long as e is held -- after rig_job_close too (then without waiting).
 * NULL when that job has not failed, when e is NULL, not held, or not an
 * end of a job's rail (another provider's), or when out of memory.  Any
 * thread. */
RIG_API char *rig_end_failure(const rig_end *e);

/* Closes the job: stops every transfer of every rail (ends stay readable
 * and ready only advances the count), stops the progress thread, frees the
 * window and the ends no one holds; an end still held (a rail or an end
 * reference) keeps its memory until released.  Collective over the job's
 * communicator, which must still be usable (MPI not finalized); a rank
 * that left the job (died, or finalized MPI without closing) is not
 * waited for, even if it dies during the close: the close then returns
 * within 2 s of the death.
 *
 * No MPI collective follows the closing barrier (a rank that gave its
 * part and then died would block it): the window's MPI_Win_free waits
 * for MPI_Finalize, which frees it (and every window of the job) first.
 *
 * True when no rank of the job died: MPI_Finalize may follow (the job
 * may still have failed -- rig_job_failed before the close says so --
 * and a rank that finalized MPI without closing is there for
 * MPI_Finalize).  False when a rank died, even during the close, so that
 * MPI_Finalize would wait for it for ever: end the process without it
 * (exit, above); false also for NULL or a job that is not open (nothing
 * done; logged).  No other call may use job concurrently or after. */
RIG_API bool rig_job_close(rig_job *job);

/* Prints the transport section of rig_info to out: the transport a job
 * would pick (or why the settings do not resolve), then every transport of
 * this build with what it found: for UCX its version, the transport
 * resources a job would use, the NUMA node ends go to and whether CUDA
 * registration is available; for MPI RMA the MPI library, the method and
 * the thread level.  Needs no MPI.  False with "invalid:" for a NULL out,
 * "system:" naming a failed UCX or hwloc call.  Any thread. */
RIG_API bool rig_transport_info(FILE *out, char **err);

#ifdef __cplusplus
}
#endif

#endif
