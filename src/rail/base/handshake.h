/* SPDX-License-Identifier: BSD-3-Clause */
/* The pair protocol: how the two ranks of a rail make it, for every
 * transport.
 *
 * Two exchanges on the job's communicator, each a send and a receive
 * tested with backoff.  The offer: each side checks its lists, makes its
 * end (the transport's make) and sends its status, its lists and the
 * end's descriptor.  Both then decide the same way from the same two
 * offers -- either side's error, or the first difference between one's
 * send and the other's receive -- so both return the same outcome and
 * neither waits for a peer that gave up.  Then each side connects its end
 * to the peer's (connect: the rail is made, not yet handed out), attaches
 * it to the job's window and sends the answer: whether it connected, where
 * its end sits in the job's window, and what else the transport's finish
 * needs.  Connecting is the last step that can fail; when both sides
 * connected, each finishes (the end joins its transport's list) and hands
 * the rail out, else each discards what it made.  Calls between a pair are
 * matched in order; the rail's id, in both offers, catches calls to one
 * peer from several threads.  While waiting, a failed job ends the wait
 * (the peer may never answer).
 *
 * Released rails.  An end's memory may be freed only once neither side
 * can touch it: its own rank released it, and so did the peer (whose
 * carrier may write into it until then).  The pair agrees in its next
 * offers: each lists the rails with the other that it released (and has
 * quiesced: nothing of its own still in flight to the peer's end), and
 * both, having both lists, free the rails in both (their ids ascending,
 * the same at both ranks) before deciding on the new rail.  A failed job
 * frees nothing this way (the peer may be gone); close frees the rest.
 * So a pair that remakes rails holds at most the ends of its last
 * round, and the job's window keeps room. */
#ifndef RIG_HANDSHAKE_H
#define RIG_HANDSHAKE_H

#include "transport.h"

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Tags on the job's communicator: the pair protocol's, then the
 * transports' own from RIG_TAG_TRANSPORT on. */
enum {
    RIG_TAG_OFFER = 0x7269,
    RIG_TAG_ANSWER = 0x726a,
    RIG_TAG_TRANSPORT = 0x7270
};

/* Where an end's memory is: its base (page-aligned) and layout. */
typedef struct {
    void *base;
    const rig_end_layout *layout;
} rig_handshake_mem;

/* What the protocol learned of an end, for the transport to keep: whether
 * it is in the job's window (detach it when it goes), and the peer's end. */
typedef struct {
    bool attached;
    rig_rail_far far;
} rig_handshake_end;

/* The steps of one end that a transport gives the protocol.  self is the
 * transport, end what make returned. */
typedef struct {
    /* Makes this side's end of rail id to peer, for lists that passed
     * rig_check_transfers; *desc (valid until connect or discard; may be
     * empty) is what the peer's connect needs.  Errors: "nomem:",
     * "system:", "unsupported:". */
    bool (*make)(void *self, int peer, int64_t id, const rig_transfer *send,
                 size_t nsend, const rig_transfer *receive, size_t nreceive,
                 void **end, const void **desc, size_t *desc_len, char **err);
    /* Connects end to the peer's (its desc) and makes the ABI end and rail
     * (*rail, one reference, not handed out yet); *mem is where the end
     * is; *answer (valid until finish or discard; may be empty) is what
     * the peer's finish needs.  Both ranks call it once both offers
     * agree (a collective over the pair may happen here). */
    bool (*connect)(void *end, const void *desc, size_t desc_len,
                    rig_rail **rail, rig_handshake_mem *mem,
                    const void **answer, size_t *answer_len, char **err);
    /* Both sides connected: the end takes the peer's answer and what the
     * protocol learned (he), joins its transport's list and from then on
     * belongs to its release hook and to close. */
    void (*finish)(void *end, const void *answer, size_t answer_len,
                   const rig_handshake_end *he);
    /* Undoes make, or connect when its rail was never handed out (rail is
     * that rail, or NULL).  together: the peer discards its side at the
     * same step (both answers were swapped); false when the exchange
     * failed (the job failed, the peer may be gone): then nothing that
     * needs the peer may be done. */
    void (*discard)(void *end, rig_rail *rail, bool together);
    /* The rails with peer that this side released and has quiesced
     * (above), ids ascending in *ids (malloc'd, NULL when none), for the
     * offer.  None when it cannot tell (no memory). */
    void (*released)(void *self, int peer, int64_t **ids, size_t *n);
    /* Frees this side's ends of the rails ids[0..n) with peer, released
     * by both: the same ids in the same order at both ranks, right after
     * the offers (a collective over the pair may happen here). */
    void (*free_released)(void *self, int peer, const int64_t *ids, size_t n);
} rig_handshake_ops;

/* One transport's use of the protocol. */
typedef struct {
    const rig_handshake_ops *ops;
    void *self;         /* the transport, handed to make and failed */
    MPI_Comm comm;      /* the job's communicator */
    int rank;           /* this rank in it */
    rig_window *window; /* the job's window */
    /* The failure that ends a wait for the peer, or NULL; polled. */
    const char *(*failed)(void *self);
} rig_handshake;

/* rig_job_rail's exchange for rail id between this rank and peer (see
 * rig_transport_rail_fn): both ranks get the same outcome.  Errors: those
 * of rig_job_rail. */
bool rig_handshake_rail(const rig_handshake *h, int peer, int64_t id,
                        const rig_transfer *send, size_t nsend,
                        const rig_transfer *receive, size_t nreceive,
                        rig_rail **out, char **err);

#endif
