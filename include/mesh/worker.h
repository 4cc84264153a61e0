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

/* Counts this node as exited cleanly (P_EXITED), unmaps and frees w
 * (NULL: nothing). */
void mesh_worker_detach(mesh_worker *w);

#pragma GCC visibility pop

#endif
