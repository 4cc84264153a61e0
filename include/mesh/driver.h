/* SPDX-License-Identifier: BSD-3-Clause */
/* mesh/driver.h: the program lifecycle above a backend, backend-neutral.
 *
 * A driver owns a backend's 32 program slots and runs programs through the
 * spec's lifecycle using only mesh_backend ops and mailbox words:
 *
 *   prepare   the backend's compiler, on a JIT thread of its own, with the
 *             expected hash when one is given (a peer's F_LOAD);
 *   start     module scope (halting the slots a module change disturbs:
 *             only the slot itself on an isolated backend, every running
 *             slot on a blinking one, which are relaunched after), load,
 *             new stream, launch, and wait until P_ONLINE counts every node
 *             (failing with "timeout: " past the backend's online timeout);
 *             the node-owned words are read only after the backend's
 *             gather, and checked (P_ONLINE above the launch's nodes fails
 *             the launch);
 *   poll      query and crashed: running, done, or crashed with a reason;
 *   stop      P_HALT, then unload (which, for a backend that owns halt,
 *             also stops the nodes), freeing the slot.
 *
 * One thread drives a driver at a time (it is the backend's thread).  The
 * driver borrows the backend; close the driver before destroying it. */
#ifndef MESH_DRIVER_H
#define MESH_DRIVER_H

#include "mesh/backend.h"

#include <stdbool.h>
#include <stdint.h>

#pragma GCC visibility push(default)

typedef struct mesh_driver mesh_driver;

/* Makes a driver for backend b (borrowed).  Errors: "invalid: ",
 * "nomem: ", the backend's mailbox errors. */
bool mesh_driver_open(mesh_backend *b, mesh_driver **out, char **err);

/* Prepares *src with the backend's compiler on a JIT thread and waits for
 * it.  Takes ownership of *src; expect may be NULL; root is the programs
 * root (may be NULL when src->dir is set).  Errors: the compiler's (a
 * LOAD_REASONS word), "system: " when the thread cannot start.  *out is
 * freed with mesh_prepared_free (or consumed by mesh_driver_start). */
bool mesh_driver_prepare(mesh_driver *d, mesh_payload *src,
                         const uint64_t *expect, const char *root,
                         mesh_prepared *out, char **err);

/* Loads prepared p into a free slot and launches nodes nodes (0: the
 * manifest's), then waits until all are online.  Consumes p (freed whatever
 * happens).  On success *slot is the program's slot.  Errors: "limits: "
 * (no free slot, nodes above MESH_MANIFEST_MAX_NODES, the backend's admit
 * refusing: then no running program was halted), "timeout: " (not all
 * nodes online in time; the program is unloaded), "load: " (a node crashed
 * or ended, or reported an error, before every node was online: "load:
 * program p: node 1 killed by signal 11 with 1 of 4 nodes online"), the
 * backend's errors.  A launch whose nodes all came online has started,
 * even when a node crashed right after: mesh_driver_poll then reports that
 * crash. */
bool mesh_driver_start(mesh_driver *d, mesh_prepared *p, uint32_t nodes,
                       uint32_t *slot, char **err);

/* How a slot's launch stands. */
typedef enum {
    MESH_RUN_RUNNING,
    MESH_RUN_DONE,
    MESH_RUN_CRASHED
} mesh_run_state;

/* Polls slot: *state and, when it crashed, *why (malloc'd, reported once;
 * why may be NULL).  Errors: "invalid: " (no program in slot), the
 * backend's query errors. */
bool mesh_driver_poll(mesh_driver *d, uint32_t slot, mesh_run_state *state,
                      char **why, char **err);

/* Polls slot until it is done or crashed, at most timeout_ms (sleeping
 * between polls).  Errors: as mesh_driver_poll, "timeout: ". */
bool mesh_driver_wait(mesh_driver *d, uint32_t slot, uint32_t timeout_ms,
                      mesh_run_state *state, char **why, char **err);

/* Reads progress point i of slot (acquire); 0 for a bad slot or i. */
uint64_t mesh_driver_point(const mesh_driver *d, uint32_t slot, uint32_t i);

/* The manifest's name of the program in slot, or NULL. */
const char *mesh_driver_program(const mesh_driver *d, uint32_t slot);

/* Halts and unloads the program of slot, freeing it.  Errors: "invalid: "
 * (no program there), the backend's unload errors (the slot is freed
 * anyway). */
bool mesh_driver_stop(mesh_driver *d, uint32_t slot, char **err);

/* Stops every program and frees d (NULL: nothing). */
void mesh_driver_close(mesh_driver *d);

#pragma GCC visibility pop

#endif
