/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal declarations of the native backend, one file per concern:
 *
 *   native_backend.c  the mesh_backend ops, opening, the caps;
 *   native_compile.c  the compiler: the binary into a sealed memfd, and the
 *                     image (mesh_kernel) it makes;
 *   native_nodes.c    a launch's nodes: each a program under a keeper
 *                     (src/mesh/child.c), reaped, reported, stopped;
 *   native_words.c    the nodes' own pages: made, gathered and checked into
 *                     the slot's words, halts copied into them;
 *   native_ends.c     the launch's rail ends: the table its nodes map, the
 *                     ferry that readies ends whose peers nodes cannot
 *                     reach.
 *
 * Decisions the spec leaves open (the why of each is where it is made):
 * - A node maps no part of the mailbox: only a page of its own
 *   (mesh_cb_node), the program's scratch and its binary; the mailbox is
 *   the host's memory.  A node can break only its own words, and the host
 *   checks them before it counts them.
 * - Every node runs under a keeper of its own: whatever a node starts ends
 *   when it ends, when it is stopped, and when the host goes.
 * - prepare copies the hashed binary into a sealed memfd, run with fexecve,
 *   so a node runs exactly the bytes that were hashed even if the catalog
 *   changes on disk afterwards.
 * - A node that exits non-zero, dies by a signal or breaks its words is a
 *   crash; crashed reports the first of a launch once ("node 2 killed by
 *   signal 11").
 * - unload stores P_HALT (copied into the nodes' pages), gives the nodes
 *   halt_ms to leave, then SIGTERM, then after grace_ms ends their trees.
 * - Every live keeper's pid sits in a process-wide lock-free table; the
 *   cleanup registered at MESH_CLEANUP_NATIVE ends them all on any exit
 *   path (only in the process that started them, not in a forked child);
 *   a keeper whose host is gone ends its tree by itself.
 * - The words of a slot are the driver's to reset before a launch; the
 *   backend starts, watches and stops processes and gathers their words. */
#ifndef MESH_NATIVE_INTERNAL_H
#define MESH_NATIVE_INTERNAL_H

#include "../mesh_internal.h"

#include "mesh/backend.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct native_backend native_backend;

/* One node of a launch. */
typedef struct {
    pid_t pid;           /* its keeper; 0: reaped */
    int status;          /* the keeper's (the node's) wait status, reaped */
    mesh_cb_node *words; /* its page as the host maps it; NULL: none */
} native_node;

/* A prepared program: its binary, and the nodes of its last launch. */
typedef struct {
    native_backend *nb; /* set at load */
    char *name;
    char **argv; /* entry, manifest args, NULL */
    int exe_fd;
    uint64_t scratch_bytes;
    int scratch_fd;
    void *scratch;
    uint32_t slot;
    uint32_t nodes;
    native_node *node; /* nodes entries */
    uint32_t live;     /* keepers not yet reaped */
    bool launched;
    bool crash_reported;
    /* Why a node's words failed the host's checks (malloc'd), reported as
     * the launch's crash; NULL: none did. */
    char *broken;
    /* The highest value each point was seen at: P_POINTS never go down. */
    uint64_t points[MESH_POINTS];
    /* The error gathered into P_ERROR for this launch. */
    bool error_seen;
    /* The rail ends the host bound (copied at load), the manifest's masks,
     * and this launch's table and ferry (native_ends.c). */
    mesh_ends ends;
    uint64_t reads, writes;
    int ends_fd;
    mesh_ends_table *table;
    size_t table_bytes;
    pthread_t ferry;
    bool ferry_on;
    atomic_bool ferry_stop;
} native_image;

struct native_backend {
    mesh_backend base;
    mesh_compiler comp;
    mesh_caps caps;
    mesh_settings s;
    mesh_control_block *cb; /* the host's memory */
    size_t stack_limit;     /* 0: the host's */
    native_image *slots[MESH_PROG_SLOTS];
};

/* ---- native_compile.c ------------------------------------------------- */

extern const mesh_compiler_ops mesh_native_compiler_ops;
/* The image behind k, or NULL when k is not a native kernel. */
native_image *mesh_native_image_of(const mesh_kernel *k);
/* Stops the image's nodes (at once), frees it and its slot. */
void mesh_native_image_free(native_image *im);

/* ---- native_nodes.c --------------------------------------------------- */

/* Starts nodes nodes of im in slot (a page each, a keeper each).  On an
 * error the nodes started are stopped.  Errors: "system: ", "nomem: ",
 * "limits: " (the table of live nodes is full). */
bool mesh_native_nodes_start(native_backend *nb, native_image *im,
                             uint32_t slot, uint32_t nodes, char **err);
/* Reaps the image's ended nodes without blocking. */
void mesh_native_nodes_reap(native_image *im);
/* Stops every live node: P_HALT, halt_ms, SIGTERM, grace_ms, the end of
 * their trees.  Returns once all are reaped (bounded). */
void mesh_native_nodes_stop(native_image *im, uint32_t halt_ms,
                            uint32_t grace_ms);
/* The launch's first crash, once (malloc'd); NULL otherwise. */
char *mesh_native_nodes_crashed(native_image *im);
/* The exit cleanup: ends every keeper's tree.  Async-signal-safe. */
void mesh_native_nodes_cleanup(void);

/* ---- native_words.c --------------------------------------------------- */

/* Makes node's page for a launch of nodes nodes in slot: a sealed memfd
 * (*fd, at a descriptor >= 10) mapped by the host (*words), its host words
 * filled.  Errors: "system: ". */
bool mesh_native_words_make(uint32_t slot, uint32_t node, uint32_t nodes,
                            int *fd, mesh_cb_node **words, char **err);
/* Unmaps the pages of im's last launch. */
void mesh_native_words_free(native_image *im);
/* Reads every node's page of im's launch, checks it, and publishes the
 * counts, the first error and the points' maxima in the slot's words; a
 * page that fails the checks sets im->broken.  Copies P_HALT and the
 * online count into the pages. */
void mesh_native_words_gather(native_image *im);
/* Copies P_HALT = 1 into every page of im's launch. */
void mesh_native_words_halt(native_image *im);

/* ---- native_ends.c ---------------------------------------------------- */

/* Makes the launch's table of ends (im->ends_fd, im->table) and starts the
 * ferry when an end needs it; nothing without ends.  Errors: "system: ",
 * mesh_end_place_of's. */
bool mesh_native_ends_start(native_image *im, char **err);
/* Stops the ferry and frees the table (nothing when there is none). */
void mesh_native_ends_stop(native_image *im);

#endif
