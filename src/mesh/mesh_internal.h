/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal declarations of the executors layer: the backends' constructors. */
#ifndef MESH_INTERNAL_H
#define MESH_INTERNAL_H

#include "mesh/ends.h"
#include "mesh/executors.h"

#include <stdbool.h>
#include <stdint.h>

/* Settings resolved from mesh_backend_options and RIG_MESH_*. */
typedef struct {
    uint32_t online_timeout_ms;
    uint32_t halt_ms;
    uint32_t grace_ms;
} mesh_settings;

/* A backend constructor of the table (one per kind).  s is resolved (no
 * zero field); *out is set only on success; errors as mesh_backend_open. */
typedef bool (*mesh_open_fn)(const mesh_settings *s, mesh_backend **out,
                             char **err);

bool mesh_native_open(const mesh_settings *s, mesh_backend **out, char **err);

/* Whether <dir>/rel is a file the loader would take as a native binary: a
 * regular file beneath dir (no link out of it) that this process may
 * execute (loader.c). */
bool mesh_catalog_runs(const char *dir, const char *rel);

/* The GPU and wasm backends' hooks.  src/mesh/cuda and src/mesh/wasm define
 * them (strong symbols) when they are built; table.c carries weak stubs
 * that answer "unsupported: " and say "not built", so the table is whole
 * whether or not those folders are compiled in.  A backend that is built
 * but finds no hardware still answers "unsupported: " from its open. */
bool mesh_cuda_open(const mesh_settings *s, mesh_backend **out, char **err);
bool mesh_cuda_built(void);
bool mesh_wasm_open(const mesh_settings *s, mesh_backend **out, char **err);
bool mesh_wasm_built(void);

/* ---- a program's ends (ends.c) ----------------------------------------- */

/* Deep copy of src (bindings and lists) into *dst, with a reference of
 * the executor's own on every end (an executor may outlive the host's
 * hold: a wasm lane abandoned at unload still runs); NULL or empty src: an
 * empty dst.  "nomem: ". */
bool mesh_ends_dup(mesh_ends *dst, const mesh_ends *src, char **err);
/* Frees what mesh_ends_dup made, releases its references, and empties e
 * (NULL: nothing). */
void mesh_ends_free(mesh_ends *e);
/* Bytes of the table (mesh/abi/ends.h) for ends, a multiple of 4096. */
size_t mesh_ends_table_bytes(const mesh_ends *ends);
/* Fills the table t of bytes bytes (mesh_ends_table_bytes) for ends and
 * the manifest's masks, the carriers' state from each end's `sent`, the
 * nodes' wait mode for a launch of nodes nodes, and publishes its magic
 * last.  places: find each end's segment
 * (mesh_end_place_of; its errors), for nodes in other processes. */
bool mesh_ends_table_fill(mesh_ends_table *t, size_t bytes,
                          const mesh_ends *ends, uint64_t reads,
                          uint64_t writes, uint32_t nodes, bool places,
                          char **err);

#endif
