/* SPDX-License-Identifier: BSD-3-Clause */
/* mesh/executors.h: the table of backends and how to open one.
 *
 * Every kind of mesh/abi/backend.h has an entry, whether or not it is built:
 * a backend compiled out, not ported, or without its hardware answers
 * mesh_backend_open with "unsupported: <why>", and the others work.  Today
 * native is implemented; cuda and wasm are stubs their issues fill in.
 *
 * Settings (documented defaults, overridable by the environment):
 *   RIG_MESH_ONLINE_TIMEOUT_MS  nodes of a launch must be online within it
 *                               (2000)
 *   RIG_MESH_HALT_MS            unload: how long nodes get to obey P_HALT
 *                               before SIGTERM (500)
 *   RIG_MESH_GRACE_MS           unload: how long after SIGTERM before
 *                               SIGKILL (1000) */
#ifndef MESH_EXECUTORS_H
#define MESH_EXECUTORS_H

#include "mesh/backend.h"

#include <stdbool.h>
#include <stdint.h>

#pragma GCC visibility push(default)

/* Options of mesh_backend_open; zero means "the default" (or the
 * environment's RIG_MESH_* value) for every field. */
typedef struct {
    uint32_t online_timeout_ms;
    uint32_t halt_ms;
    uint32_t grace_ms;
} mesh_backend_options;

/* Opens the backend of kind (MESH_BACKEND_*): probes its hardware, makes
 * its mailbox, registers its cleanup.  opt may be NULL (defaults).  Any
 * thread; the backend is then driven by one thread at a time and released
 * with mesh_backend_destroy.  Errors: "unsupported: " (kind unknown, not
 * built, no hardware), "invalid: " (a malformed RIG_MESH_* setting, NULL
 * out), "system: ", "nomem: ".  *out is set only on success. */
bool mesh_backend_open(uint32_t kind, const mesh_backend_options *opt,
                       mesh_backend **out, char **err);

/* Whether kind is built into this library (it may still lack hardware). */
bool mesh_backend_built(uint32_t kind);

/* The name of kind ("native"), or NULL past the table. */
const char *mesh_backend_name(uint32_t kind);

/* The kind named name ("cuda", "native"); false for an unknown name. */
bool mesh_backend_kind(const char *name, uint32_t *kind);

#pragma GCC visibility pop

#endif
