/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA backend's state, shared by its files: cuda_backend.c (open,
 * caps, contexts, the mailbox, the ops table), cuda_launch.c (kernels,
 * streams, launches, their ends) and cuda_occupancy.c (what fits on the
 * SMs).  MPS isolation's side is cuda_mps_internal.h.  Only src/mesh/cuda
 * includes this.
 *
 * Threads: one thread drives a backend at a time (mesh/backend.h), so none
 * of this is locked. */
#ifndef MESH_CUDA_BACKEND_INTERNAL_H
#define MESH_CUDA_BACKEND_INTERNAL_H

#include "cuda_mps_internal.h"

#include "../mesh_internal.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct cuda_backend cuda_backend;

typedef struct mesh_cuda_ends mesh_cuda_ends;

/* A kernel of the blink path: its image in the backend's context. */
typedef struct cuda_kernel {
    mesh_cuda_image im; /* first: its usage is the kernel ops' */
    cuda_backend *be;
    char *entry;
    mesh_cuda_ends *ends;     /* its rail ends (cuda_ends.c); NULL: none */
    struct cuda_kernel *next; /* on the retired list */
} cuda_kernel;

/* A slot's stream: one of the pool's (blink), or none (an MPS worker
 * launches on a stream of its own). */
typedef struct {
    cuda_backend *be;
    int pool;     /* index into be->pool; -1: an MPS worker's */
    bool over;    /* the last launch ended cleanly (before any loss) */
    bool faulted; /* crashed has reported the slot's end */
    CUresult fault;
} cuda_stream;

/* An SM's limits, read at open: what admission estimates a kernel's
 * resident blocks per SM from, before any module is loaded. */
typedef struct {
    uint32_t regs;       /* 32-bit registers per SM */
    uint32_t regs_block; /* ... per block */
    uint32_t threads;    /* resident threads per SM */
    uint32_t blocks;     /* resident blocks per SM */
    uint32_t shared;     /* shared bytes per SM */
    uint32_t reserved;   /* shared bytes the driver reserves per block */
} cuda_sm_limits;

/* A slot's running launch, as the occupancy budget counts it. */
typedef struct {
    uint32_t nodes;  /* 0: none */
    uint32_t per_sm; /* resident blocks per SM of its kernel */
} cuda_occ;

/* The environment's CUDA_DEVICE_MAX_CONNECTIONS when it is not set. */
#define MESH_CUDA_CONNECTIONS_DEFAULT 8u

struct cuda_backend {
    mesh_backend pub;
    mesh_settings set;
    mesh_cu_lib cu;
    CUdevice dev;
    uint32_t ordinal;
    CUcontext ctx; /* NULL in MPS isolation: the backend is no client */
    bool primary;  /* ctx is the retained primary context */
    CUgreenCtx green;
    mesh_caps caps;
    cuda_sm_limits sm;
    mesh_compiler *comp;
    uint32_t isolation;
    mesh_cuda_mps *mps; /* MPS isolation's daemon and workers; NULL: blink */
    mesh_cuda_mailbox mbox;
    mesh_control_block *mb; /* mbox.mb */
    /* The hardware queues the driver gives the context (cuda_launch.c). */
    uint32_t conns;
    /* The blink path's streams, made at open, one per hardware queue;
     * pool_slot[i] is the slot holding stream i, MESH_NO_SLOT: free. */
    CUstream pool[MESH_PROG_SLOTS];
    uint32_t pool_slot[MESH_PROG_SLOTS];
    uint32_t npool;
    /* Images unloaded while other kernels of the context may still run,
     * freed once none does (cuda_launch.c). */
    cuda_kernel *retired;
    /* The context's sticky error (CUDA_SUCCESS: none), and the slot whose
     * query saw it first (MESH_NO_SLOT: another call). */
    CUresult lost;
    uint32_t lost_slot;
    cuda_occ occ[MESH_PROG_SLOTS];
};

/* ---- cuda_backend.c ----------------------------------------------------- */

/* Pushes the backend's context on the calling thread; every op that calls
 * the driver brackets itself with mesh_cuda_push and mesh_cuda_pop, so
 * that no context of rig's stays current on the caller's thread (a UCX
 * built with CUDA registers host memory itself in ucp_mem_map when one
 * is, uct_cuda_copy_mem_reg).  False ("system: ") when the push fails; no
 * pop then. */
bool mesh_cuda_push(const cuda_backend *be, char **err);
void mesh_cuda_pop(const cuda_backend *be);

/* ---- cuda_launch.c: the backend's ops for kernels and streams ----------- */

bool mesh_cuda_load(const mesh_backend *b, mesh_prepared *p, mesh_kernel **out,
                    char **err);
bool mesh_cuda_unload(const mesh_backend *b, mesh_kernel *k, char **err);
bool mesh_cuda_new_stream(const mesh_backend *b, uint32_t slot,
                          const mesh_kernel *k, mesh_stream **out, char **err);
bool mesh_cuda_launch(const mesh_backend *b, const mesh_stream *st,
                      const mesh_kernel *k, uint32_t nodes, uint64_t dev,
                      uint32_t slot, char **err);
bool mesh_cuda_query(const mesh_backend *b, const mesh_stream *st,
                     const mesh_kernel *k, bool *done, char **err);
char *mesh_cuda_crashed(const mesh_backend *b, const mesh_stream *st,
                        const mesh_kernel *k);

/* The connection count the driver gives a context made now: the
 * environment's CUDA_DEVICE_MAX_CONNECTIONS read as the driver does. */
uint32_t mesh_cuda_connections(void);

/* Makes the pool of streams (the context pushed).  Errors: a driver
 * call's. */
bool mesh_cuda_pool_make(cuda_backend *be, char **err);
/* Frees retired images (waiting for nothing: a kernel still running keeps
 * its image, logged) and destroys the pool's streams (the context
 * pushed): before the context goes. */
void mesh_cuda_pool_free(cuda_backend *be);

/* Records r when it is sticky: the context is lost (slot: where it was
 * seen, MESH_NO_SLOT: elsewhere). */
void mesh_cuda_note(cuda_backend *be, CUresult r, uint32_t slot);
/* False with "load: " saying why when the context is lost; what names the
 * program or the call refused. */
bool mesh_cuda_usable(const cuda_backend *be, const char *what, char **err);

/* Whether slot s could take a stream now (blink: a free stream of the
 * pool; MPS: always).  False with "limits: " naming what. */
bool mesh_cuda_stream_free(const cuda_backend *be, uint32_t slot,
                           const char *what, char **err);

/* ---- cuda_ends.c: a program's rail ends ---------------------------------- */

/* The ends p's host bound (none: *out NULL): registered, their table
 * registered, the watcher started.  The context is pushed.  Errors: a
 * driver call's, "nomem: ", "limits: ", "system: ". */
bool mesh_cuda_ends_make(cuda_backend *be, const mesh_prepared *p,
                         mesh_cuda_ends **out, char **err);
/* The table's device address (PX_ENDS); 0 for NULL. */
uint64_t mesh_cuda_ends_dev(const mesh_cuda_ends *ce);
/* Stops the watcher after one last pass (the kernel is over). */
void mesh_cuda_ends_stop(mesh_cuda_ends *ce);
/* Stops, unregisters what it registered, frees (NULL: nothing). */
void mesh_cuda_ends_free(mesh_cuda_ends *ce);

/* ---- cuda_occupancy.c --------------------------------------------------- */

/* The admit op: nodes nodes of p fit in slot beside the running launches,
 * judged from the compiler's figures. */
bool mesh_cuda_admit(const mesh_backend *b, const mesh_prepared *p,
                     uint32_t nodes, uint32_t slot, char **err);

/* Whether nodes nodes of a kernel of per_sm resident blocks per SM fit in
 * slot beside the other slots' launches: false with "limits: " (what names
 * the program, may be NULL). */
bool mesh_cuda_occ_fits(const cuda_backend *be, uint32_t slot, uint32_t nodes,
                        uint32_t per_sm, const char *what, char **err);

#endif
