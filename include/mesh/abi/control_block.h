/* SPDX-License-Identifier: BSD-3-Clause */
/* mesh/abi/control_block.h: the mailbox an executor shares with its programs.
 *
 * The mailbox (control block) is one region of memory that the host (the
 * driver and the backend, in the rig process) and the running programs (the
 * nodes: CUDA blocks, wasm lanes) both reach; native worker processes each
 * get a page of their own instead (below).  CUDA keeps it in pinned host
 * memory the kernels reach by a device address.  It holds:
 *
 * - a header (the S_* words), written by the host once, before any program
 *   runs, and read-only afterwards: magic, runtime ABI, backend word and the
 *   executor's caps, isolation word;
 * - MESH_PROG_SLOTS (32) program slots (the P_* words), one per loaded
 *   program; MESH_NO_SLOT (32) means none.  A slot's words are split into
 *   a host-owned line (the host writes, nodes read) and node-owned lines
 *   (nodes write, the host reads), so no word has two writers except the
 *   counters nodes bump with atomic read-modify-writes.
 *
 * Where nodes are processes of their own (native), they do not map this
 * block at all: each node maps one page of its own, a mesh_cb_node (the
 * N_* words, below), where the host copies what the node must read (its
 * slot's P_HALT and P_ONLINE) and the node writes what it reports.  The
 * host reads every node's page, checks it, and keeps the slot's
 * node-owned words itself: P_ONLINE counts the nodes whose page says
 * online, P_POINTS[i] is the highest value a node raised (it never goes
 * down), P_ERROR the first error it saw.  A node can then corrupt only its
 * own page: not the header, not another program's slot, not another
 * node's online word.  The in-process executors (wasm, CUDA) have nodes
 * write the slot's words themselves, through their imports or kernels.
 *
 * Memory orders.  A writer publishes with a release store (or a release
 * read-modify-write); a reader acquires.  The host fills a slot's host words
 * (PX_SCRATCH, P_NODES, ...) and resets its node words while no node of the
 * slot runs, then publishes P_LAUNCH (release) before it starts the nodes;
 * nodes read P_LAUNCH (acquire) first.  Nodes bump P_ONLINE (release) once
 * they are ready; the host polls it (acquire) to tell a launch is up.  The
 * host stores P_HALT = 1 (release) to ask the nodes to stop; nodes poll it
 * (acquire) between steps.  Progress points only grow: a node raises
 * P_POINTS[i] with a release compare-and-swap to the maximum; the host reads
 * them (acquire), and what a node wrote before raising a point is visible to
 * whoever acquires it (a rail's ready count, say).  A native node and its
 * page follow the same orders; the host publishes what it gathered from
 * the pages in the slot with release stores, and copies P_HALT into the
 * pages with release stores.
 *
 * Layout.  Every word is naturally aligned and little-endian (every
 * supported target is); the header is 256 bytes, each slot 256 bytes, so
 * the whole block is 256 + 32 * 256 = 8448 bytes.  The byte offsets below
 * (MESH_S_*, MESH_P_*, MESH_N_*) are for code that cannot use these C types
 * (PTX, wasm, another language); the static assertions keep them and the
 * structs in step. */
#ifndef MESH_ABI_CONTROL_BLOCK_H
#define MESH_ABI_CONTROL_BLOCK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* ---- constants -------------------------------------------------------- */

/* S_MAGIC: "MESH" in memory order (little-endian u32). */
#define MESH_CB_MAGIC 0x4853454du
/* The runtime ABI: the layout of this block and the worker protocol.  A
 * manifest's "abi" and an image's MESH_RT_ABI global must equal it. */
#define MESH_RT_ABI_VERSION 1u
/* Program slots in a mailbox (PROG_SLOTS). */
#define MESH_PROG_SLOTS 32u
/* Progress points per slot (P_POINTS). */
#define MESH_POINTS 8u
/* Bytes of the header and of one slot. */
#define MESH_CB_HEADER_BYTES 256u
#define MESH_CB_SLOT_BYTES 256u
/* Bytes of the whole block. */
#define MESH_CB_BYTES                                                          \
    (MESH_CB_HEADER_BYTES + MESH_PROG_SLOTS * MESH_CB_SLOT_BYTES)

/* P_STATE values: the host's account of a slot. */
#define MESH_SLOT_FREE 0u      /* no program */
#define MESH_SLOT_LOADED 1u    /* a program is loaded, no launch yet */
#define MESH_SLOT_LAUNCHING 2u /* nodes started, not all online */
#define MESH_SLOT_RUNNING 3u   /* all nodes online */
#define MESH_SLOT_DONE 4u      /* the last launch is over */
#define MESH_SLOT_FAILED 5u    /* the last launch ended abnormally */

/* P_ERROR values a node reports (the first one sticks). */
#define MESH_NODE_OK 0u
#define MESH_NODE_ERR_ABI 1u     /* built for another MESH_RT_ABI_VERSION */
#define MESH_NODE_ERR_ATTACH 2u  /* could not map its scratch, bad slot */
#define MESH_NODE_ERR_PROGRAM 3u /* the program's own failure */

/* ---- the header (S_*): written by the host before any launch ---------- */

typedef struct mesh_cb_header {
    /* S_MAGIC: MESH_CB_MAGIC, stored last (release) once the header is
     * filled; a node that reads anything else refuses to attach. */
    _Atomic uint32_t magic;
    /* S_ABI: MESH_RT_ABI_VERSION of the host. */
    uint32_t abi;
    /* S_BACKEND: the executor's backend word (MESH_BACKEND_WORD). */
    uint32_t backend;
    /* S_ISOLATION: MESH_ISOLATION_*. */
    uint32_t isolation;
    /* S_SLOTS, S_SLOT_BYTES, S_HEADER_BYTES: the geometry, so that a node
     * built against a later ABI can tell. */
    uint32_t slots;
    uint32_t slot_bytes;
    uint32_t header_bytes;
    /* S_HOST_PID: the host's process id (native nodes watch it). */
    uint32_t host_pid;
    /* S_CAPS: the executor's caps (mesh_caps, see mesh/backend.h). */
    uint32_t sms_total;
    uint32_t sms;
    uint32_t max_tg_threads;
    uint32_t max_shared;
    uint32_t blocks_per_sm;
    int32_t cc_major;
    int32_t cc_minor;
    uint32_t family;
    /* S_SIZE: bytes of the whole block (MESH_CB_BYTES). */
    uint64_t size;
    /* S_ARCH: what code is compiled for, NUL-terminated ("sm_90",
     * "x86_64-unknown-linux-gnu"). */
    char arch[64];
    uint8_t reserved_[MESH_CB_HEADER_BYTES - 136];
} mesh_cb_header;

/* ---- a program slot (P_* and PX_*) ------------------------------------ */

typedef struct mesh_cb_slot {
    /* Host-owned line: the host writes (release), nodes read (acquire). */

    /* P_STATE: MESH_SLOT_*. */
    _Atomic uint32_t state;
    /* P_HALT: 1 asks the slot's nodes to stop; reset to 0 at launch. */
    _Atomic uint32_t halt;
    /* P_NODES: nodes of the current launch. */
    _Atomic uint32_t nodes;
    /* PX_REG_CAP: the register cap the image was compiled with; 0: none. */
    _Atomic uint32_t reg_cap;
    /* P_LAUNCH: launch generation, raised by one per launch (release)
     * after the other host words and the node words are reset. */
    _Atomic uint64_t launch;
    /* PX_SCRATCH: the program's scratch as the host sees it (its device
     * address on CUDA; the host mapping's address on native, where nodes
     * map the scratch themselves); 0: none. */
    _Atomic uint64_t scratch;
    /* PX_SCRATCH_BYTES: its size. */
    _Atomic uint64_t scratch_bytes;
    /* P_READS: the reads mask, bit i = input i of the program (a rail
     * end it reads or writes, mesh/abi/ends.h) is bound to an end on
     * this machine; P_VIEW: peer view generation, raised when the mask
     * changes (never while nodes run: no executor reads it live). */
    _Atomic uint64_t reads;
    _Atomic uint64_t view;
    /* PX_ENDS: the table of the program's rail ends (mesh/abi/ends.h) as
     * its nodes reach it: its device address on CUDA; 0 on the CPU
     * executors (a native node maps it from MESH_ENDS_FD, a wasm module
     * uses imports) and for a program without ends. */
    _Atomic uint64_t ends;

    /* Node-owned line: nodes write with atomic read-modify-writes (native:
     * the host, from what it gathered of the nodes' pages). */

    /* P_ONLINE: nodes of the current launch that are up (fetch_add,
     * release; once per node). */
    _Atomic uint32_t online;
    /* P_EXITED: nodes that detached cleanly (fetch_add, release). */
    _Atomic uint32_t exited;
    /* P_ERROR: the first MESH_NODE_ERR_* a node reported (compare-and-
     * swap from MESH_NODE_OK); P_ERROR_NODE: that node's index; P_ERROR_ARG:
     * a detail (for ERR_ABI the node's MESH_RT_ABI_VERSION). */
    _Atomic uint32_t error;
    _Atomic uint32_t error_node;
    _Atomic uint32_t error_arg;
    uint8_t node_pad_[44];

    /* P_POINTS: progress points, each only raised (release CAS to max). */
    _Atomic uint64_t points[MESH_POINTS];
    uint8_t points_pad_[64];
} mesh_cb_slot;

/* The whole mailbox. */
typedef struct mesh_control_block {
    mesh_cb_header h;
    mesh_cb_slot slot[MESH_PROG_SLOTS];
} mesh_control_block;

/* ---- a native node's own page (N_*) ----------------------------------- */

/* N_MAGIC: "NODE" in memory order (little-endian u32). */
#define MESH_CB_NODE_MAGIC 0x45444f4eu

typedef struct mesh_cb_node {
    /* Written by the host before the node starts. */

    /* N_MAGIC: MESH_CB_NODE_MAGIC, stored last (release); a node that
     * reads anything else refuses to attach. */
    _Atomic uint32_t magic;
    /* N_ABI: MESH_RT_ABI_VERSION of the host; N_HOST_PID: its pid. */
    uint32_t abi;
    uint32_t host_pid;
    /* N_SLOT, N_NODE, N_NODES: where the node runs (as its environment
     * says). */
    uint32_t slot;
    uint32_t node;
    uint32_t nodes;

    /* Written by the host while the node runs (release). */

    /* N_HALT: the slot's P_HALT, copied. */
    _Atomic uint32_t halt;
    /* N_ONLINE_NODES: the slot's P_ONLINE, copied while the launch comes
     * up. */
    _Atomic uint32_t online_nodes;
    uint8_t host_pad_[32];

    /* Written by the node (release), read and checked by the host. */

    /* N_ONLINE: 1 once the node is up, else 0. */
    _Atomic uint32_t online;
    /* N_EXITED: 1 once the node detached cleanly, else 0. */
    _Atomic uint32_t exited;
    /* N_ERROR: the node's first MESH_NODE_ERR_* (compare-and-swap from
     * MESH_NODE_OK); N_ERROR_ARG: its detail. */
    _Atomic uint32_t error;
    _Atomic uint32_t error_arg;
    uint8_t node_pad_[48];
    /* N_POINTS: the node's progress points (release CAS to the max). */
    _Atomic uint64_t points[MESH_POINTS];
    uint8_t points_pad_[64];
} mesh_cb_node;

/* Bytes of a node's words (its page is larger). */
#define MESH_CB_NODE_BYTES 256u

/* ---- byte offsets for non-C code -------------------------------------- */

#define MESH_S_MAGIC 0u
#define MESH_S_ABI 4u
#define MESH_S_BACKEND 8u
#define MESH_S_ISOLATION 12u
#define MESH_S_SLOTS 16u
#define MESH_S_HOST_PID 28u
#define MESH_S_CAPS 32u
#define MESH_S_SIZE 64u
#define MESH_S_ARCH 72u
/* Slot i's words are at MESH_CB_HEADER_BYTES + i * MESH_CB_SLOT_BYTES +: */
#define MESH_P_STATE 0u
#define MESH_P_HALT 4u
#define MESH_P_NODES 8u
#define MESH_PX_REG_CAP 12u
#define MESH_P_LAUNCH 16u
#define MESH_PX_SCRATCH 24u
#define MESH_PX_SCRATCH_BYTES 32u
#define MESH_P_READS 40u
#define MESH_P_VIEW 48u
#define MESH_PX_ENDS 56u
#define MESH_P_ONLINE 64u
#define MESH_P_EXITED 68u
#define MESH_P_ERROR 72u
#define MESH_P_ERROR_NODE 76u
#define MESH_P_ERROR_ARG 80u
#define MESH_P_POINTS 128u

/* A native node's page: */
#define MESH_N_MAGIC 0u
#define MESH_N_ABI 4u
#define MESH_N_HOST_PID 8u
#define MESH_N_SLOT 12u
#define MESH_N_NODE 16u
#define MESH_N_NODES 20u
#define MESH_N_HALT 24u
#define MESH_N_ONLINE_NODES 28u
#define MESH_N_ONLINE 64u
#define MESH_N_EXITED 68u
#define MESH_N_ERROR 72u
#define MESH_N_ERROR_ARG 76u
#define MESH_N_POINTS 128u

_Static_assert(sizeof(_Atomic uint64_t) == 8 && sizeof(_Atomic uint32_t) == 4,
               "mailbox atomics must be plain words");
_Static_assert(sizeof(mesh_cb_header) == MESH_CB_HEADER_BYTES,
               "mailbox header size");
_Static_assert(sizeof(mesh_cb_slot) == MESH_CB_SLOT_BYTES, "slot size");
_Static_assert(sizeof(mesh_control_block) == MESH_CB_BYTES, "mailbox size");
_Static_assert(offsetof(mesh_cb_header, host_pid) == MESH_S_HOST_PID &&
                   offsetof(mesh_cb_header, sms_total) == MESH_S_CAPS &&
                   offsetof(mesh_cb_header, size) == MESH_S_SIZE &&
                   offsetof(mesh_cb_header, arch) == MESH_S_ARCH,
               "S_* offsets");
_Static_assert(offsetof(mesh_cb_slot, launch) == MESH_P_LAUNCH &&
                   offsetof(mesh_cb_slot, scratch) == MESH_PX_SCRATCH &&
                   offsetof(mesh_cb_slot, view) == MESH_P_VIEW &&
                   offsetof(mesh_cb_slot, ends) == MESH_PX_ENDS &&
                   offsetof(mesh_cb_slot, online) == MESH_P_ONLINE &&
                   offsetof(mesh_cb_slot, error_arg) == MESH_P_ERROR_ARG &&
                   offsetof(mesh_cb_slot, points) == MESH_P_POINTS,
               "P_* offsets");
_Static_assert(sizeof(mesh_cb_node) == MESH_CB_NODE_BYTES &&
                   offsetof(mesh_cb_node, nodes) == MESH_N_NODES &&
                   offsetof(mesh_cb_node, halt) == MESH_N_HALT &&
                   offsetof(mesh_cb_node, online) == MESH_N_ONLINE &&
                   offsetof(mesh_cb_node, error_arg) == MESH_N_ERROR_ARG &&
                   offsetof(mesh_cb_node, points) == MESH_N_POINTS,
               "N_* offsets");

#endif
