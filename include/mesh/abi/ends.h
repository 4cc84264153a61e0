/* SPDX-License-Identifier: BSD-3-Clause */
/* mesh/abi/ends.h: the table of a program's rail ends, shared with its
 * nodes.
 *
 * Inputs.  A program names the rails it uses by *input*: a number 0..31
 * (MESH_INPUTS) that its manifest states (mesh/manifest.h): bit i of
 * "reads" says that the program reads input i's inbound (it waits for
 * `arrived` and reads the bytes), bit i of "writes" that it writes input
 * i's outbound and readies it.  Which rail an input is on a machine is
 * the host's to say when it loads the program there (rig/remote.h:
 * rig_remote_load_ends binds each input of each machine to that
 * machine's end of a rail); an input may be bound on one machine and not
 * on another (a stencil's first block has no upper neighbour).  The slot's
 * P_READS (mesh/abi/control_block.h) is the mask of the inputs bound on
 * this machine: bit i set means input i has an end here.  A program finds
 * an end by its input or by its rail's id (the id the controller's rail
 * has, rig_rail_id); both lookups give the same end.
 *
 * The table.  What a native node needs to reach its ends without the host
 * is one table per launch, in a memfd the node inherits (MESH_ENDS_FD,
 * mesh/worker.h), mapped read-write by every node of the launch: a header
 * (mesh_ends_header), MESH_INPUTS entries (mesh_end_entry, one per input,
 * flags 0 when it is not bound), then the transfer lists the entries
 * point at.  An end's memory is the System V shared memory segment its
 * transport allocated (UCX allocates ends that way, so that a same-node
 * peer maps them): a node attaches the segment by its id (shmat) and
 * finds the counts and areas at the entry's offsets, so that it reads and
 * writes them with plain loads and stores, as the host process does.
 *
 * Readying.  ready(c) on an end stores `ready` (release, never lowered,
 * never moved off RIG_COUNT_FAILED) and then carries, by one of two
 * means, fixed per entry by the host:
 * - MESH_END_MAPPED: the peer's end is on this node and the entry names
 *   its segment: the node itself copies every transfer up to c into the
 *   peer's inbound, stores the peer's `arrived` (release) and its own
 *   `sent`, as the host's transport would; no syscall, no host.  One node
 *   carries at a time: the entry's `wakes` counter is the lock (the node
 *   that moves it off 0 carries, the others only count; see
 *   src/rail/base/carrier.h), and `carried`, `next_run` and `next_j` are
 *   the carrier's state, which the host starts at the end's `sent`.
 *   (RIG_SHM_STORES=off or RIG_MESH_NODE_STORES=off on the host: never
 *   mapped, for testing and measuring the other way.)
 * - otherwise the host carries: the node raises the header's `bell`
 *   (seq_cst fetch_add) and, when the host's ferry says it sleeps
 *   (`asleep`, seq_cst), wakes it (FUTEX_WAKE on `bell`); the ferry then
 *   calls the end's ready function with the count it finds.  The futex
 *   costs a syscall only when the ferry was idle.
 * A device that cannot call anything (CUDA) raises the entry's `point`
 * instead, and host code that watches the point readies the end (the
 * spec's "host code that waits for its point and calls it").
 *
 * Failure.  A failed job raises the end's counts to RIG_COUNT_FAILED in
 * the shared segment, which the node sees like the host does; a wait of
 * a node also ends when its slot is halted.  A program that crashes
 * fails its ends (the host raises their counts and the peers' on the
 * same node; rig/remote.h says what happens across nodes).
 *
 * Trust.  The table is the host's account for the launch; a node may
 * write over it (it maps it read-write for the carrier's state), which
 * breaks only that node's own rails: the segments it attaches are its
 * own ends' and, for MESH_END_MAPPED entries, the peer ends' of those
 * same rails.
 *
 * Layout.  Naturally aligned little-endian words; the header is 128
 * bytes, each entry 256 (the host's words in its first three cache
 * lines, the nodes' in the last); the lists start at MESH_ENDS_LISTS_AT.
 * Offsets for non-C code are the MESH_E_* below. */
#ifndef MESH_ABI_ENDS_H
#define MESH_ABI_ENDS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Inputs a program may have (bits 0..31 of its manifest's masks). */
#define MESH_INPUTS 32u
/* E_MAGIC: "ENDS" in memory order (little-endian u32). */
#define MESH_ENDS_MAGIC 0x53444e45u

/* An entry's flags. */
#define MESH_END_BOUND 1u    /* the input has an end here */
#define MESH_END_SENDS 2u    /* the end sends (nsend > 0) */
#define MESH_END_RECEIVES 4u /* the end receives (nreceive > 0) */
#define MESH_END_READS 8u    /* the manifest reads the input */
#define MESH_END_WRITES 16u  /* the manifest writes the input */
#define MESH_END_MAPPED 32u  /* nodes carry into the peer's segment */

/* E_WAIT's values. */
#define MESH_WAIT_AUTO 0u
#define MESH_WAIT_SPIN 1u
#define MESH_WAIT_YIELD 2u
#define MESH_WAIT_BLOCK 3u

/* One transfer as the lists hold it (rig_transfer's layout). */
typedef struct {
    int64_t src, dst, length;
} mesh_end_transfer;

typedef struct mesh_ends_header {
    /* E_MAGIC: MESH_ENDS_MAGIC, stored last (release). */
    _Atomic uint32_t magic;
    /* E_ABI: MESH_RT_ABI_VERSION. */
    uint32_t abi;
    /* E_BYTES: of the whole table. */
    uint64_t bytes;
    /* E_BOUND: inputs bound here (the slot's P_READS). */
    uint64_t bound;
    /* E_WAIT: how the nodes' waits share the CPU, as the host's do
     * (RIG_WAIT, or the host's guess for auto: YIELD when the node's
     * ranks times the launch's nodes outnumber its CPUs):
     * MESH_WAIT_AUTO spins about 4096 polls, then yields the core
     * between polls for 2 ms, then sleeps 50 us between polls; SPIN
     * never gives the core away; YIELD yields from the first miss (an
     * oversubscribed node) and sleeps after 2 ms; BLOCK sleeps after a
     * few polls. */
    uint32_t wait;
    uint8_t host_pad_[36];
    /* E_BELL: raised by a node after a ready the host carries; E_ASLEEP:
     * 1 while the host's ferry waits for it (a futex on E_BELL). */
    _Atomic uint32_t bell;
    _Atomic uint32_t asleep;
    uint8_t bell_pad_[56];
} mesh_ends_header;

typedef struct mesh_end_entry {
    /* Written by the host before the launch. */

    /* The rail's id, the machine at the other end and this one (job
     * ranks; 0 is the controller). */
    int64_t id;
    int32_t peer, here;
    uint32_t flags; /* MESH_END_* */
    /* This end: its segment's System V id and size, and where its counts
     * and areas are in it; the bytes of one copy of each area. */
    int32_t shm;
    uint64_t shm_bytes;
    uint64_t counts_at, outbound_at, inbound_at;
    uint64_t out_copy, in_copy;
    /* MESH_END_MAPPED: the peer end's segment, its counts and inbound in
     * it, and the bytes of one copy of its inbound. */
    int32_t peer_shm;
    uint32_t pad0_;
    uint64_t peer_bytes, peer_counts_at, peer_inbound_at, peer_in_copy;
    /* The lists, at byte offsets of the table (mesh_end_transfer each). */
    uint32_t nsend, nreceive;
    uint64_t send_at, receive_at;
    /* CUDA: the device addresses of the counts and areas; 0 elsewhere. */
    uint64_t dev_counts, dev_outbound, dev_inbound;
    uint8_t host_pad_[32];

    /* Written by the nodes (and a device's point by the device). */

    /* The carrier's lock (a count of wakes) and its state. */
    _Atomic uint64_t wakes;
    uint64_t carried, next_run, next_j;
    /* A device's ready point (CUDA): the count it readied; the host's
     * watcher calls ready with it. */
    _Atomic uint64_t point;
    uint8_t node_pad_[24];
} mesh_end_entry;

typedef struct mesh_ends_table {
    mesh_ends_header h;
    mesh_end_entry e[MESH_INPUTS];
} mesh_ends_table;

/* Where the lists start. */
#define MESH_ENDS_LISTS_AT ((uint64_t)sizeof(mesh_ends_table))

/* ---- byte offsets for non-C code (PTX, wasm) -------------------------- */

#define MESH_E_MAGIC 0u
#define MESH_E_ABI 4u
#define MESH_E_BYTES 8u
#define MESH_E_BOUND 16u
#define MESH_E_WAIT 24u
#define MESH_E_BELL 64u
#define MESH_E_ASLEEP 68u
#define MESH_E_ENTRIES 128u
#define MESH_E_ENTRY_BYTES 256u
/* Entry i is at MESH_E_ENTRIES + i * MESH_E_ENTRY_BYTES +: */
#define MESH_EE_ID 0u
#define MESH_EE_PEER 8u
#define MESH_EE_HERE 12u
#define MESH_EE_FLAGS 16u
#define MESH_EE_OUT_COPY 56u
#define MESH_EE_IN_COPY 64u
#define MESH_EE_DEV_COUNTS 136u
#define MESH_EE_DEV_OUTBOUND 144u
#define MESH_EE_DEV_INBOUND 152u
#define MESH_EE_WAKES 192u
#define MESH_EE_POINT 224u

_Static_assert(sizeof(mesh_end_transfer) == 24, "transfer size");
_Static_assert(sizeof(mesh_ends_header) == 128 &&
                   offsetof(mesh_ends_header, wait) == MESH_E_WAIT &&
                   offsetof(mesh_ends_header, bell) == MESH_E_BELL &&
                   offsetof(mesh_ends_header, asleep) == MESH_E_ASLEEP,
               "E_* offsets");
_Static_assert(sizeof(mesh_end_entry) == MESH_E_ENTRY_BYTES &&
                   offsetof(mesh_end_entry, flags) == MESH_EE_FLAGS &&
                   offsetof(mesh_end_entry, out_copy) == MESH_EE_OUT_COPY &&
                   offsetof(mesh_end_entry, in_copy) == MESH_EE_IN_COPY &&
                   offsetof(mesh_end_entry, dev_counts) == MESH_EE_DEV_COUNTS &&
                   offsetof(mesh_end_entry, dev_inbound) ==
                       MESH_EE_DEV_INBOUND &&
                   offsetof(mesh_end_entry, wakes) == MESH_EE_WAKES &&
                   offsetof(mesh_end_entry, point) == MESH_EE_POINT,
               "EE_* offsets");
_Static_assert(offsetof(mesh_ends_table, e) == MESH_E_ENTRIES,
               "entries follow the header");

#endif
