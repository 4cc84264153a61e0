/* SPDX-License-Identifier: BSD-3-Clause */
/* mesh/worker.h: the worker-side API a native program uses in its nodes.
 *
 * The native backend starts each node of a launch as a process running the
 * program's executable, with its page of words (mesh_cb_node in
 * mesh/abi/control_block.h) and the program's scratch inherited as file
 * descriptors, and these environment variables:
 *
 *   MESH_MAILBOX_FD   the node's page of words (a memfd); a node maps no
 *                     other part of the host's mailbox
 *   MESH_SCRATCH_FD   the scratch memfd, absent when the program has none
 *   MESH_SLOT         the program's slot, 0..31
 *   MESH_NODE         this node's index, 0..nodes-1
 *   MESH_NODES        the nodes of the launch
 *   MESH_ENDS_FD      the table of the program's rail ends (a memfd,
 *                     mesh/abi/ends.h), absent when no input of the
 *                     program is bound on this machine
 *   UCX_HANDLE_ERRORS none: a node that links UCX does not print UCX's
 *                     backtrace when it crashes (the crash is reported)
 *
 * A node's life: mesh_worker_attach, mesh_worker_online (the driver waits
 * for every node's), work in steps, polling mesh_worker_halted between them
 * and raising progress points, then mesh_worker_detach and exit 0.  A node
 * that never goes online fails its launch with "timeout: "; one that dies,
 * exits non-zero or writes its page's words with values a node may not
 * write is reported as crashed.  The API is for one thread of the node at
 * a time, except mesh_worker_halted and mesh_worker_point, which any thread
 * may call.
 *
 * Everything a node starts ends with it.  Each node runs in a process
 * group of its own under a keeper (a small process of rig's, the node's
 * parent) that is a child subreaper: when the node ends, is stopped or its
 * host goes, the keeper kills the node's process group and every process
 * the node left behind (a child it did not wait for, a daemon that left
 * its session), so a program must not expect anything it started to
 * outlive its node.
 *
 * Nodes run as the host's user and are not sandboxed against what any
 * process of that user may do: signal the host, ptrace it or write its
 * memory through /proc where the system allows that (kernel.yama), open
 * the descriptors the host holds (another program's scratch among them)
 * through /proc.  What rig guarantees is that the memory it shares with a
 * node reaches only that node's words and its program's scratch, and that
 * it checks what the node writes there.
 *
 * Rails.  A program reaches the rail ends its host bound to its inputs
 * (mesh/abi/ends.h says what an input is and how the manifest's "reads"
 * and "writes" state them) through mesh_end: found by input
 * (mesh_worker_input) or by the rail's id (mesh_worker_end), its areas
 * and counts are the end's own memory, attached at mesh_worker_attach,
 * so a node reads and writes them with plain loads and stores.  The
 * attach maps every page of them (and of a same-node peer's end it
 * carries into) at once, so that the first stores of a launch take no
 * page fault each: a node is a new process at every launch.
 * mesh_end_ready carries to a peer on this node with plain stores, as the
 * host's transport would (no syscall, no host); to a peer elsewhere it
 * rings the host, which carries (a syscall only when the host's ferry
 * was idle).  The run loop is the one of rig/remote_abi.h, per iteration
 * it (runs count from 0, n transfers sent and m received per run):
 *
 *     if (it >= 2 && !mesh_end_wait_sent(e, (it - 1) * n)) break;
 *     write copy it % 2 of mesh_end_outbound(e, ...);
 *     mesh_end_ready(e, (it + 1) * n);
 *     if (!mesh_end_wait_arrived(e, (it + 1) * m)) break;
 *     read copy it % 2 of mesh_end_inbound(e, ...);
 *
 * A wait returns false when the rail failed (the job failed, or the
 * program at the other end crashed) or the slot was halted: the node
 * should then wrap up.  An end is valid until mesh_worker_detach; the
 * host keeps the end itself alive while the program is loaded.
 *
 * Programs link this API from librig, or, to be a self-contained
 * executable, from the static libmesh_worker of the build tree. */
#ifndef MESH_WORKER_H
#define MESH_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(default)

typedef struct mesh_worker mesh_worker;

/* Attaches this process to its page of words from the environment above
 * (and closes the page's and the scratch's descriptors).  Errors:
 * "invalid: " (a variable missing or malformed, a page that is not this
 * node's), "system: " (mmap), "abi: " (the host runs another
 * MESH_RT_ABI_VERSION; the node also reports it in N_ERROR so the launch
 * fails with that reason).  *out is released with mesh_worker_detach. */
bool mesh_worker_attach(mesh_worker **out, char **err);

/* Marks this node online (P_ONLINE), once; later calls do nothing. */
void mesh_worker_online(mesh_worker *w);

/* Whether the host asked the slot to halt (P_HALT, copied into the node's
 * page), or the node's parent is gone: the node should wrap up and exit. */
bool mesh_worker_halted(const mesh_worker *w);

/* Raises progress point i (< MESH_POINTS) to at least value (release):
 * what this node wrote before is visible to whoever reads the point.
 * Returns false for i out of range. */
bool mesh_worker_point(mesh_worker *w, uint32_t i, uint64_t value);

/* Reports the program's own failure code (P_ERROR, MESH_NODE_ERR_PROGRAM;
 * code goes to P_ERROR_ARG); the first report of the slot sticks. */
void mesh_worker_fail(mesh_worker *w, uint32_t code);

/* This node's slot, index and the launch's node count. */
uint32_t mesh_worker_slot(const mesh_worker *w);
uint32_t mesh_worker_node(const mesh_worker *w);
uint32_t mesh_worker_nodes(const mesh_worker *w);

/* Nodes of the launch online so far (P_ONLINE as the host counted it and
 * copied it into the node's page, acquire): a program may wait for all of
 * them before it depends on its peers. */
uint32_t mesh_worker_online_nodes(const mesh_worker *w);

/* The program's scratch, shared by its nodes (NULL and 0 when none). */
void *mesh_worker_scratch(const mesh_worker *w, size_t *bytes);

/* Counts this node as exited cleanly (P_EXITED), unmaps and frees w and
 * its ends (NULL: nothing). */
void mesh_worker_detach(mesh_worker *w);

/* ---- rail ends ---------------------------------------------------------- */

typedef struct mesh_end mesh_end;

/* The inputs bound to an end on this machine (the slot's P_READS): bit i
 * is set when input i has one.  0 for NULL. */
uint64_t mesh_worker_inputs(const mesh_worker *w);

/* The end bound to input (0..MESH_INPUTS-1), or NULL when the input has
 * none here (or w is NULL).  Valid until mesh_worker_detach. */
mesh_end *mesh_worker_input(mesh_worker *w, uint32_t input);

/* The end of the rail whose id is id, among those bound here, or NULL. */
mesh_end *mesh_worker_end(mesh_worker *w, int64_t id);

/* The rail's id (rig_rail_id of the controller's rail), the machine at the
 * other end and this one, as job ranks (0: the controller's machine); -1
 * for NULL. */
int64_t mesh_end_id(const mesh_end *e);
int32_t mesh_end_peer(const mesh_end *e);
int32_t mesh_end_here(const mesh_end *e);

/* The input the end is bound to; MESH_INPUTS for NULL. */
uint32_t mesh_end_input(const mesh_end *e);

/* Copy k (0 or 1) of the end's outbound, which the node writes, and of
 * its inbound, which it reads, with their bytes in *bytes (may be NULL);
 * NULL (and 0) for an empty direction, k > 1 or NULL. */
void *mesh_end_outbound(const mesh_end *e, unsigned k, size_t *bytes);
const void *mesh_end_inbound(const mesh_end *e, unsigned k, size_t *bytes);

/* Acquire loads of the end's counts (0 for NULL). */
uint64_t mesh_end_sent(const mesh_end *e);
uint64_t mesh_end_arrived(const mesh_end *e);

/* Advances `ready` to at least c (release) and carries every transfer up
 * to c (above).  Any thread of the node; c == 0 or c >= INT64_MAX, or a
 * NULL end, is ignored; on a failed rail the count stays failed. */
void mesh_end_ready(mesh_end *e, uint64_t c);

/* Wait until `arrived` (resp. `sent`) >= c, sharing the CPU as the host's
 * waits do (its RIG_WAIT, the table's E_WAIT: by default spin about 4096
 * looks, then yield the core between looks for 2 ms, then sleep 50 us
 * between looks).  True when reached; false when the rail failed, the
 * slot was halted (mesh_worker_halted), or e is NULL.  Any thread. */
bool mesh_end_wait_arrived(const mesh_end *e, uint64_t c);
bool mesh_end_wait_sent(const mesh_end *e, uint64_t c);

/* Whether the end's counts were raised to failure (INT64_MAX). */
bool mesh_end_failed(const mesh_end *e);

#pragma GCC visibility pop

#endif
