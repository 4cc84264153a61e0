/* SPDX-License-Identifier: BSD-3-Clause */
/* The transport ops table: every operation a transport of rails provides
 * to a job.
 *
 * A *transport* is a provider of rails (rig/provider.h) for a whole job:
 * it opens on the job's communicator, makes rails pair by pair, fails,
 * stops and closes.  The job layer (src/job/) sees a transport only
 * through this table, picked by name from the registry
 * (src/rail/transports.h); it never branches on which one it has.  Each
 * transport lives in a folder of its own under src/rail/ (ucx/, mpi/) and
 * builds on the shared base (this folder): the pair protocol
 * (handshake.h), the carrier's helpers (carrier.h), the job's window
 * (window.h) and the failure state (failure.h).
 *
 * A transport object starts with a rig_transport, whose ops points at its
 * table; the job calls the inline wrappers below.  Slots marked required
 * are checked once, when the registry is first used (rig_transport_check),
 * never on a call; an optional slot left NULL means the default its
 * comment gives.
 *
 * Threads: open, wire and close run on the thread that opens or closes the
 * job; rail on any thread (one at a time per peer); rail_far, owns, fail,
 * failed, gone and stop on any thread, concurrently with everything but
 * close.  MPI calls follow each transport's rule, stated in rig/job.h.
 *
 * Lifetime: a transport outlives its close while an end it made is held
 * (the spec's ends live while reachable); it frees itself when the last
 * goes, and then calls the job's freed hook (rig_transport_params), so
 * that the job's own record lives exactly as long.  After close only
 * owns and failed are called, and they call no MPI. */
#ifndef RIG_TRANSPORT_H
#define RIG_TRANSPORT_H

#include "rig/provider.h"

#include "window.h"

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct rig_transport_ops rig_transport_ops;

/* The head of every transport object. */
typedef struct rig_transport {
    const rig_transport_ops *ops;
} rig_transport;

/* What the job hands a transport at open. */
typedef struct {
    MPI_Comm comm;   /* the job's own communicator, MPI_ERRORS_RETURN; the
                      * transport sends on it with the tags of handshake.h
                      * and its own from RIG_TAG_TRANSPORT on, and never
                      * frees it */
    int rank, size;  /* this rank's and the job's size */
    rig_switch numa; /* rig_job_options (RIG_* applied): each transport */
    rig_switch cuda; /* documents which ones it honours */
    rig_switch shm_stores;
    /* Called once, from the thread that frees the transport (close, or
     * the release of the last end held past it), just before it frees
     * itself, with no lock of its own held: the job drops every way to
     * reach it.  Not called when open fails. */
    void (*freed)(void *arg);
    void *freed_arg;
} rig_transport_params;

/* What the job learned of every rank at open, for wire. */
typedef struct {
    rig_window *window; /* the job's window, where ends attach (valid until
                         * close returns) */
    const int32_t *pid; /* pid[r]: rank r's process id */
    const bool *local;  /* local[r]: rank r shares this rank's kernel and
                         * pid namespace (its pid means something here) */
} rig_transport_wiring;

/* The other end of a rail, as rig_job_rail_peer and rig_job_rail_disp
 * report it. */
typedef struct {
    int rank;       /* the peer */
    bool attached;  /* its end is in the job's window at the peer */
    int64_t counts; /* its areas' addresses (MPI_Get_address at the peer) */
    int64_t outbound;
    int64_t inbound;
} rig_rail_far;

/* ---- the slots, one by one ---------------------------------------------- */

/* open (required): makes this rank's transport of a job.  Not collective:
 * the job agrees on every rank's outcome before any collective.  Reads
 * the transport's own RIG_* settings.  Errors: "invalid:" (a malformed
 * setting), "unsupported:" (a switch set to on that this machine cannot
 * honour), "system:", "nomem:".  *out is set only on success. */
typedef bool (*rig_transport_open_fn)(const rig_transport_params *p,
                                      rig_transport **out, char **err);

/* wire (required): collective over the job, once every rank opened: swap
 * what the transport needs of every rank (addresses) and start watching
 * peers for death.  Errors as open's, and "failed:" for a peer already
 * gone.  The job agrees on the outcome; on failure it calls close. */
typedef bool (*rig_transport_wire_fn)(rig_transport *t,
                                      const rig_transport_wiring *w,
                                      char **err);

/* rail (required): rig_job_rail once the job checked its arguments (peer
 * in range and not this rank, lists non-NULL where counted) and numbered
 * the rail: id = (pair << 32) | k for the k-th rail of the pair, the same
 * at both ends.  Both ranks get the same outcome, in rig_job_rail's words;
 * nothing half-made is left on failure.  The in-tree transports run the
 * shared pair protocol (rig_handshake_rail). */
typedef bool (*rig_transport_rail_fn)(rig_transport *t, int peer, int64_t id,
                                      const rig_transfer *send, size_t nsend,
                                      const rig_transfer *receive,
                                      size_t nreceive, rig_rail **out,
                                      char **err);

/* rail_far (required): the other end of rail r, while r is a rail this
 * transport made and its end is held; false (out untouched) otherwise. */
typedef bool (*rig_transport_rail_far_fn)(rig_transport *t, const rig_rail *r,
                                          rig_rail_far *out);

/* owns (required): whether e is the local end of a rail this transport
 * made that is still held.  After close too (see Lifetime). */
typedef bool (*rig_transport_owns_fn)(rig_transport *t, const rig_end *e);

/* fail (required): fails the job here: the failure state first, then
 * every count of every live end to RIG_COUNT_FAILED for good, the peers
 * told, later rails refused.  why is a message with its reason word
 * ("failed: ..."); the first why wins.  Idempotent. */
typedef void (*rig_transport_fail_fn)(rig_transport *t, const char *why);

/* failed (required): the first reason the job failed -- here, or as a
 * peer told it -- or NULL while it has not.  A failure this rank has not
 * taken in yet but that a peer already raised into a count of one of its
 * ends is taken in first, so that: once any count of a held end is at
 * RIG_COUNT_FAILED, failed answers non-NULL; and once failed answered
 * non-NULL, every count of every end this rank holds is there.  *known
 * (may be NULL) is false while the answer is a stand-in ("failed: ...
 * failed by its peer") because the reason itself is still on its way.
 * After close (ends held past it) it only reads the state. */
typedef const char *(*rig_transport_failed_fn)(rig_transport *t, bool *known);

/* gone (required): a rank known to have left the job (it died, or
 * finalized MPI with the job open), or -1; *died (may be NULL): whether a
 * rank that left died (then MPI_Finalize would wait for it for good; a
 * rank that finalized is there for it).  A collective with a rank gone
 * would never complete: the closing barrier polls this and gives up.  It
 * looks at same-node peers' processes on the calling thread too. */
typedef int (*rig_transport_gone_fn)(rig_transport *t, bool *died);

/* finalize (optional): MPI_Finalize is running on this rank with the job
 * open (the job learns it from an MPI_COMM_SELF attribute): fail the job
 * with why, tell every rank that this one left (so that their closes do
 * not wait for it), and from then on touch no MPI object.  NULL: fail. */
typedef void (*rig_transport_finalize_fn)(rig_transport *t, const char *why);

/* stop (required): the first step of closing, not collective: every end
 * stops (ready only advances the count, no wake runs any more). */
typedef void (*rig_transport_stop_fn)(rig_transport *t);

/* close (required): the last step of closing, after every rank stopped or
 * gave up waiting for a rank that left; all says whether every rank
 * reached the job's closing barrier (when false, skip collectives that a
 * gone rank would have to join).  Detaches every end from the job's
 * window and frees what no one holds; an end still held keeps its memory
 * (and the transport) until released.  A rank that dies during close must
 * not block it (a collective with a peer is preceded by a wait that gives
 * up on a peer gone).  Returns whether a rank that left the job died, as
 * a last look (same-node processes included) finds it: MPI_Finalize would
 * wait for such a rank for good.  The job calls only owns and failed
 * afterwards. */
typedef bool (*rig_transport_close_fn)(rig_transport *t, bool all);

/* info (optional): this transport's lines of rig_info ("  Name: value"),
 * with no job and without needing MPI initialised.  Errors: "system:".
 * NULL: nothing to say. */
typedef bool (*rig_transport_info_fn)(FILE *out, char **err);

struct rig_transport_ops {
    const char *name;  /* required: what RIG_TRANSPORT names */
    const char *about; /* required: one line for rig_info */
    rig_transport_open_fn open;
    rig_transport_wire_fn wire;
    rig_transport_rail_fn rail;
    rig_transport_rail_far_fn rail_far;
    rig_transport_owns_fn owns;
    rig_transport_fail_fn fail;
    rig_transport_failed_fn failed;
    rig_transport_gone_fn gone;
    rig_transport_finalize_fn finalize;
    rig_transport_stop_fn stop;
    rig_transport_close_fn close;
    rig_transport_info_fn info;
};

/* ---- the job's calls ---------------------------------------------------- */

static inline bool rig_transport_open(const rig_transport_ops *ops,
                                      const rig_transport_params *p,
                                      rig_transport **out, char **err)
{
    return ops->open(p, out, err);
}

static inline bool rig_transport_wire(rig_transport *t,
                                      const rig_transport_wiring *w, char **err)
{
    return t->ops->wire(t, w, err);
}

static inline bool rig_transport_rail(rig_transport *t, int peer, int64_t id,
                                      const rig_transfer *send, size_t nsend,
                                      const rig_transfer *receive,
                                      size_t nreceive, rig_rail **out,
                                      char **err)
{
    return t->ops->rail(t, peer, id, send, nsend, receive, nreceive, out, err);
}

static inline bool rig_transport_rail_far(rig_transport *t, const rig_rail *r,
                                          rig_rail_far *out)
{
    return t->ops->rail_far(t, r, out);
}

static inline bool rig_transport_owns(rig_transport *t, const rig_end *e)
{
    return t->ops->owns(t, e);
}

static inline void rig_transport_fail(rig_transport *t, const char *why)
{
    t->ops->fail(t, why);
}

static inline const char *rig_transport_failed(rig_transport *t, bool *known)
{
    return t->ops->failed(t, known);
}

static inline int rig_transport_gone(rig_transport *t, bool *died)
{
    return t->ops->gone(t, died);
}

static inline void rig_transport_finalize(rig_transport *t, const char *why)
{
    if (t->ops->finalize != NULL) {
        t->ops->finalize(t, why);
    } else {
        t->ops->fail(t, why);
    }
}

static inline void rig_transport_stop(rig_transport *t)
{
    t->ops->stop(t);
}

static inline bool rig_transport_close(rig_transport *t, bool all)
{
    return t->ops->close(t, all);
}

static inline bool rig_transport_describe(const rig_transport_ops *ops,
                                          FILE *out, char **err)
{
    return ops->info == NULL || ops->info(out, err);
}

#endif
