/* SPDX-License-Identifier: BSD-3-Clause */
/* The UCX transport of rails: its object, end memory, and UCX rail ends.
 *
 * The transport knows nothing of MPI: the job layer exchanges the blobs it
 * packs (worker addresses, end descriptors) and calls it back.  Locks, in
 * the order they may nest: the worker lock (every UCX call on the worker or
 * context), then the list lock (the transport's list of ends).  The fast
 * path of a mapped rail takes neither. */
#ifndef RIG_RAIL_INTERNAL_H
#define RIG_RAIL_INTERNAL_H

#include "rig/job.h"
#include "rig/remote_abi.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The transport's settings, resolved from rig_job_options and RIG_*. */
typedef struct {
    bool mpi; /* transport "mpi" (src/rail/mpi_rma.c), else "ucx" */
    rig_switch numa;
    rig_switch cuda;
    rig_switch shm_stores;
    uint64_t keepalive_ms; /* RIG_KEEPALIVE_MS (failure.c) */
} rig_rail_settings;

/* Resolves opt (NULL: defaults) and the RIG_* variables into *out; false
 * with "invalid: RIG_NAME=..." or "invalid: transport ..." */
bool rig_rail_settings_resolve(const rig_job_options *opt,
                               rig_rail_settings *out, char **err);

/* ---- the rail handshake, both transports ----------------------------- */

/* The status word of one side's rail message. */
enum {
    RIG_RAIL_OK = 0,
    RIG_RAIL_LISTS = 1, /* its lists fail rig_check_transfers */
    RIG_RAIL_END = 2,   /* it could not make its end */
    RIG_RAIL_FAILED = 3 /* its job has failed */
};

/* One side's lists as it stated them. */
typedef struct {
    const rig_transfer *send, *receive;
    uint64_t nsend, nreceive;
} rig_rail_lists;

/* True iff what lo sends is what hi receives and the other way round;
 * else "invalid: rail between ranks LO and HI: ..." naming the first
 * difference, the same text at both ranks. */
bool rig_rail_lists_match(int lo, const rig_rail_lists *l, int hi,
                          const rig_rail_lists *h, char **err);

/* Sets *err to why peer refused (status RIG_RAIL_LISTS, _FAILED or _END,
 * with its reason) and returns false. */
bool rig_rail_peer_refused(int peer, int status, const char *why, char **err);

/* A provider's wake with one carrier at a time: the first waker calls
 * carry(arg) until no wake arrived meanwhile; later wakers only bump the
 * counter and return, so a thread never waits on another. */
void rig_wake_serial(atomic_uint_fast64_t *wakes, void (*carry)(void *),
                     void *arg);

/* What a wake must carry: the ready count when it is past *carried and not
 * failed, else 0.  A rail that sends nothing has nothing to carry: its
 * readies are logged once and taken as carried (returns 0).  Both
 * transports' carriers start with it. */
uint64_t rig_carry_due(const uint8_t *counts, uint64_t *carried, size_t nsend,
                       int64_t id);

/* MPI_Ibarrier on comm that gives up (false) once gone(arg) names a rank
 * that left the job (>= 0), so closing never waits for a dead rank; rank
 * is this one's, for the log line.  False also when MPI fails. */
bool rig_barrier_unless_gone(MPI_Comm comm, int rank, int (*gone)(void *),
                             void *arg);

/* ---- noticing MPI_Finalize ------------------------------------------ */

/* MPI_Finalize first deletes MPI_COMM_SELF's attributes, so an attribute
 * with a delete callback tells a layer that MPI is going away with its job
 * still open.  rig_finalize_watch sets one with hook (MPI's delete
 * function type) and arg; *key is MPI_KEYVAL_INVALID if MPI refused.
 * rig_finalize_unwatch sets *key to MPI_KEYVAL_INVALID first -- the hook
 * runs once more as the attribute is deleted and must do nothing when it
 * finds its key invalid -- then deletes the attribute and frees the key. */
void rig_finalize_watch(MPI_Comm_delete_attr_function *hook, void *arg,
                        int *key);
void rig_finalize_unwatch(int *key);

/* ---- the transport of one job ---------------------------------------- */

typedef struct rig_ucx rig_ucx;

/* Opens the UCX context and worker, loads the hwloc topology, finds the
 * NUMA node for end memory, loads libcuda when asked and present, and
 * starts the progress thread.  rank and size are the job's. */
bool rig_ucx_open(const rig_rail_settings *s, int rank, int size, rig_ucx **out,
                  char **err);

/* This worker's address (valid until close). */
void rig_ucx_address(const rig_ucx *u, const void **addr, size_t *len);

/* Stores the worker address of every rank: addrs is the concatenation,
 * rank r's at offs[r] with lens[r] bytes. */
bool rig_ucx_set_peers(rig_ucx *u, const uint8_t *addrs, const size_t *offs,
                       const size_t *lens, char **err);

/* Fails every live end of the transport (counts raised to FAILED), tells
 * the peers of those ends through the progress thread, and makes later
 * rails fail.  First why wins.  Any thread, idempotent. */
void rig_ucx_fail(rig_ucx *u, const char *why);
/* The failure's reason (NULL while not failed); valid until close. */
const char *rig_ucx_failed(const rig_ucx *u);

/* The key of this node for rig_ucx_watch: ranks with equal keys share a
 * kernel and a PID namespace (boot id, pid namespace, host name). */
void rig_node_key(char *out, size_t len);
/* Watches every peer for death: pids[r] is rank r's process id and
 * local[r] whether it is on this node (equal node keys).  After
 * rig_ucx_set_peers; once. */
bool rig_ucx_watch(rig_ucx *u, const int32_t *pids, const bool *local,
                   char **err);
/* Waits (at most 1 s) until every rank was told of this rank's failure:
 * for a process about to end (MPI_Finalize without rig_job_close). */
void rig_ucx_flush_fail(rig_ucx *u);
/* Records that rank left the job (died, or finalized MPI without closing
 * it): collective calls cannot complete any more.  The first one sticks
 * and travels with this rank's failure message. */
void rig_ucx_left(rig_ucx *u, int rank);
/* A rank known (here or from a failure message) to have left, or -1. */
int rig_ucx_gone(const rig_ucx *u);

/* Stops every rail: each live end stops (ready only advances the count),
 * no wake runs any more.  First step of closing; not collective. */
void rig_ucx_stop(rig_ucx *u);
/* Releases what the job held: the ends no one holds are freed (the others
 * when released), the endpoints closed, the progress thread stopped, the
 * worker destroyed; the context goes with the last end.  detach is called
 * for every end still attached (the job detaches it from its window). */
void rig_ucx_close(rig_ucx *u, void (*detach)(void *arg, void *base),
                   void *arg);

/* The transport section of rig_info (no job needed). */
bool rig_ucx_info(FILE *out, char **err);

/* ---- UCX rail ends ---------------------------------------------------- */

typedef struct rig_uend rig_uend;

/* Makes this rank's end of a rail to peer: one allocation of the layout's
 * size from UCX (shared memory a same-node peer maps), NUMA-bound, CUDA-
 * registered when asked, with its packed rkey.  Not yet connected.  The
 * lists must have passed rig_check_transfers. */
bool rig_uend_make(rig_ucx *u, int peer, int64_t id, const rig_transfer *send,
                   size_t nsend, const rig_transfer *receive, size_t nreceive,
                   rig_uend **out, char **err);

/* The end's memory (for the job's window) and its packed descriptor for the
 * peer (valid until the end is connected or discarded). */
void rig_uend_memory(const rig_uend *e, void **base, size_t *len);
void rig_uend_desc(const rig_uend *e, const void **desc, size_t *len);
/* The peer's end addresses, after connect. */
void rig_uend_peer_addrs(const rig_uend *e, uint64_t *counts,
                         uint64_t *outbound, uint64_t *inbound);
int rig_uend_peer(const rig_uend *e);
/* Whether this end (mine) and the peer's end (theirs) are attached to the
 * job's window: Open MPI limits a dynamic window's attachments
 * (osc_rdma_max_attach), and a rail works without it. */
void rig_uend_set_attached(rig_uend *e, bool mine, bool theirs);
bool rig_uend_attached(const rig_uend *e, bool *theirs);

/* Connects e to the peer's end from its descriptor and makes the ABI end
 * and rail (one reference, returned in *out).  On failure e is unchanged
 * (discard it). */
bool rig_uend_connect(rig_uend *e, const void *desc, size_t len, rig_rail **out,
                      char **err);

/* Undoes rig_uend_make, or rig_uend_connect when its rail was never handed
 * out (rail is that rail or NULL); the peer must not use it any more. */
void rig_uend_discard(rig_uend *e, rig_rail *rail);

/* The end of a rail made by this transport, or NULL. */
rig_uend *rig_ucx_find(rig_ucx *u, const rig_rail *r);

#endif
