/* SPDX-License-Identifier: BSD-3-Clause */
/* Links between the ranks of a job on different nodes, kept alive by
 * rig itself: one TCP connection per pair of ranks on different nodes,
 * made at wire, that fails as soon as the peer stops answering.
 *
 * Why.  Nothing below rig notices a silent peer in time: UCX 1.13's
 * keepalive over TCP only writes into its socket, and TCP retransmits
 * unacknowledged data for about 15 minutes (tcp_retries2) before it gives
 * up, and never sends keepalive probes while data is unacknowledged.  A
 * cut link left both sides of a rail waiting forever.
 *
 * How.  Each link has TCP_USER_TIMEOUT set to the bound
 * (RIG_PEER_TIMEOUT_MS, default 500): the kernel aborts the connection
 * when data it sent stays unacknowledged that long.  Every eighth of the
 * bound one byte goes out on every link (and what the peer wrote is
 * drained), and a link whose bytes wait with no acknowledgement for longer
 * than the bound counts as lost even when the kernel could not send them
 * at all (a local queue that drops them, which TCP_USER_TIMEOUT judges
 * late).  So a cut link or a host that went down is seen within about
 * 1.125 bounds, both directions of a cut included (the side whose packets
 * are lost times out, and so does the side whose acknowledgements are
 * lost).  A peer that dies
 * is seen at once: its kernel closes the connection (FIN or RST).  A
 * stopped process (SIGSTOP, a debugger) is not a lost one: its kernel
 * still acknowledges, so the link holds -- unlike a heartbeat that the
 * peer's process must answer.
 *
 * Each pair also gets a second connection, made the same way, for the
 * transport's own bytes (the UCX transport's lanes, ../ucx/lane.c); so do
 * pairs on one node when both ask (data_local: a transport that cannot
 * map a same-node peer's memory), over loopback and with no link.
 *
 * A thread of its own watches the links (epoll on them, the heartbeat on
 * time), so that nothing the transport does -- a long progress call, a
 * lock held while a big run is posted -- delays a verdict; it reports a
 * lost link through the transport's callback, with its reason.  Ranks on
 * this node (the job's wiring says which) get no link: their processes
 * are watched directly (failure.h).
 *
 * Making the links.  Every rank listens on a TCP port of its own (any
 * address), and the job gathers every rank's port and IPv4 addresses (its
 * interfaces that are up, loopback last).  Of each pair the higher rank
 * connects to every address of the lower at once; both sides check a
 * greeting that names the job (a number rank 0 drew) and the two ranks, so
 * that an address that leads elsewhere (another job, another rank, a
 * private address every host has) is refused; the first connection the
 * lower rank accepts is the link.  Bounded: 10 s for the whole job.
 *
 * Threads: rig_liveness_open and _close on the thread that wires or closes
 * the job; the callback on the links' thread. */
#ifndef RIG_LIVENESS_H
#define RIG_LIVENESS_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rig_liveness rig_liveness;

/* RIG_PEER_TIMEOUT_MS: the bound after which a silent peer on another
 * node counts as lost (default 500; 0 turns the links off).  "invalid:"
 * when malformed or above an hour. */
bool rig_liveness_setting(uint64_t *bound_ms, char **err);

/* Called on the links' thread with a rank whose link was lost, once per
 * rank: how says what was seen ("did not answer for 1000 ms on its link
 * (10.0.0.2): ...", worded for rig_failure_peer_gone); closed: the peer
 * closed the link (FIN or RST: its process ended, or it closed the job).
 * It must not call rig_liveness_*. */
typedef void (*rig_liveness_lost_fn)(void *arg, int r, const char *how,
                                     bool closed);

/* Makes this rank's links to every rank not on its node (local[r] false)
 * and starts their thread, which calls lost(arg, r, why) when the link to
 * r is lost; collective over comm (rank and size are this rank's and
 * comm's).  Each such pair also makes a second connection, made and
 * checked as the link is (TCP_NODELAY, the bound as TCP_USER_TIMEOUT),
 * for the transport's own bytes: this file never reads or watches it;
 * rig_liveness_take_data hands it over (and _close closes it if not).
 * With data_local, a pair of ranks on this node that both ask for it gets
 * such a data connection too, and no link (their processes are watched
 * directly): for a transport that cannot map a same-node peer's memory.
 * With bound_ms 0 no connection is made, but the call is still
 * collective.
 * Errors: "system:" naming the rank that could not be reached and why (or
 * the call that failed), "failed:" for a peer that could not take part,
 * "nomem:".  *out is set only on success. */
bool rig_liveness_open(MPI_Comm comm, int rank, int size, const bool *local,
                       bool data_local, uint64_t bound_ms,
                       rig_liveness_lost_fn lost, void *arg, rig_liveness **out,
                       char **err);

/* The number of links (ranks on other nodes watched). */
int rig_liveness_count(const rig_liveness *l);

/* The data connection to rank r (nonblocking), now the caller's to close;
 * -1 when there is none (a rank on this node without data_local, links
 * off, not asked for, or taken already). */
int rig_liveness_take_data(rig_liveness *l, int r);

/* Stops the thread (no callback runs after it returns), closes every link
 * and frees l.  NULL is ignored. */
void rig_liveness_close(rig_liveness *l);

#endif
