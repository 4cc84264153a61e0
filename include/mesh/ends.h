/* SPDX-License-Identifier: BSD-3-Clause */
/* mesh/ends.h: a program's rail ends, as a host hands them to an executor.
 *
 * A host (the remote layer's agent, rig/remote.h) that loads a program
 * binds its inputs (mesh/abi/ends.h) to rail ends of its own process:
 * one mesh_end_binding per bound input, in mesh_prepared's `ends`.  The
 * executor that loads the program copies the bindings (the lists too) and
 * gives the program its ends its own way:
 *   native  a table in a memfd (mesh/abi/ends.h) and the ends' System V
 *           segments, which the nodes attach (mesh/worker.h); for a peer
 *           end on another node, a ferry thread of the host readies the
 *           end when a node rings;
 *   wasm    the mesh.end_* imports (mesh/wasm.h), which copy between the
 *           module's memory and the end's areas and call its ready;
 *   cuda    the same table in registered host memory with the ends'
 *           device addresses, at PX_ENDS, and a host thread that readies
 *           an end when the kernel raises the entry's point (blink
 *           isolation; MPS refuses ends with "unsupported: ").
 * The host keeps every bound end alive (a reference) until its load of
 * the program returned; the executor takes references of its own for as
 * long as it may use the ends (until the program is unloaded, or for
 * good where a node it could not stop may still run).
 *
 * Needs rig/remote_abi.h (ends) and nothing else of rig. */
#ifndef MESH_ENDS_H
#define MESH_ENDS_H

#include "mesh/abi/ends.h"

#include <rig/remote_abi.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(default)

/* Where an end's memory sits in a System V shared memory segment, which
 * another process of this node attaches by id (shmat) to reach the end
 * with plain loads and stores. */
typedef struct {
    int32_t shm;    /* the segment's id; -1: none (not known or not one) */
    uint64_t bytes; /* the segment's size */
    uint64_t counts_at, outbound_at, inbound_at; /* in the segment */
} mesh_end_place;

/* Finds the System V segment that holds e's counts and areas (as
 * /proc/self/maps names it: UCX allocates ends there, mesh/abi/ends.h)
 * and where they are in it.  Any thread.  Errors: "invalid: " for NULL
 * arguments; "unsupported: " when the end's memory is not in one segment
 * (another transport, or UCX set to allocate elsewhere: then only
 * in-process executors can use the end); "system: " for an unreadable
 * /proc/self/maps.  *out is set only on success. */
bool mesh_end_place_of(const rig_end *e, mesh_end_place *out, char **err);

/* One input of a program bound to an end of this process. */
typedef struct {
    uint32_t input;           /* 0..MESH_INPUTS-1 */
    int64_t id;               /* the rail's id (what programs look it up by) */
    int32_t peer;             /* the machine at the other end (a job rank) */
    int32_t here;             /* this machine */
    rig_end *end;             /* this machine's end; borrowed (above) */
    const rig_transfer *send; /* what this end sends and receives */
    size_t nsend;
    const rig_transfer *receive;
    size_t nreceive;
    /* The peer's end when it is on this node (its segment), so that
     * native nodes carry into it with stores; shm -1 otherwise. */
    mesh_end_place peer_place;
} mesh_end_binding;

/* A program's bindings: at most one per input. */
typedef struct {
    const mesh_end_binding *b;
    size_t n;
} mesh_ends;

/* The mask of the inputs ends binds (bit i: input i), what the slot's
 * P_READS says; 0 for NULL. */
uint64_t mesh_ends_mask(const mesh_ends *ends);

/* Checks ends against a program's manifest masks (reads, writes): every
 * input below MESH_INPUTS, bound once, named by the manifest, with an
 * end that is not NULL, lists that pass rig_check_transfers, and, for an
 * input the manifest writes, an end that sends (reads: one that
 * receives).  Errors: "invalid: " naming the input and the rule.  NULL or
 * empty ends: true. */
bool mesh_ends_check(const mesh_ends *ends, uint64_t reads, uint64_t writes,
                     char **err);

#pragma GCC visibility pop

#endif
