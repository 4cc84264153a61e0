/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA backend's state, shared by its files: cuda_backend.c (open,
 * caps, contexts, the mailbox, the ops table), cuda_launch.c (kernels,
 * streams, launches, their ends) and cuda_occupancy.c (what fits on the
 * SMs).  MPS isolation's side is cuda_mps_internal.h.  Only src/mesh/cuda
 * includes this. */
#ifndef MESH_CUDA_BACKEND_INTERNAL_H
#define MESH_CUDA_BACKEND_INTERNAL_H

#include "cuda_mps_internal.h"

#include "../mesh_internal.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct cuda_backend cuda_backend;

/* A kernel of the blink path: its image in the backend's context. */
typedef struct {
    mesh_cuda_image im; /* first: its usage is the kernel ops' */
    cuda_backend *be;
    char *entry;
} cuda_kernel;

/* A slot's stream. */
typedef struct {
    cuda_backend *be;
    CUstream stream; /* NULL: an MPS worker's (its own stream) */
    bool faulted;    /* crashed has reported the fault */
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

/* The fixed point of one SM in the occupancy budget. */
#define MESH_CUDA_OCC_ONE 1000000ull

struct cuda_backend {
    mesh_backend pub;
    mesh_settings set;
    mesh_cu_lib cu;
    CUdevice dev;
    CUcontext ctx;
    bool primary; /* ctx is the retained primary context */
    CUgreenCtx green;
    mesh_caps caps;
    cuda_sm_limits sm;
    mesh_compiler *comp;
    uint32_t isolation;
    mesh_cuda_mps *mps; /* MPS isolation's daemon and workers; NULL: blink */
    mesh_cuda_mailbox mbox;
    mesh_control_block *mb; /* mbox.mb */
    /* Occupancy of each slot's running launch, in MESH_CUDA_OCC_ONE per
     * SM. */
    uint64_t occ[MESH_PROG_SLOTS];
};

/* ---- cuda_backend.c ----------------------------------------------------- */

/* Makes the backend's context current on the calling thread. */
bool mesh_cuda_current(const cuda_backend *be, char **err);

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

/* ---- cuda_occupancy.c --------------------------------------------------- */

/* The admit op: nodes nodes of p fit in slot beside the running launches,
 * judged from the compiler's figures. */
bool mesh_cuda_admit(const mesh_backend *b, const mesh_prepared *p,
                     uint32_t nodes, uint32_t slot, char **err);

/* Whether nodes nodes of a kernel of per_sm resident blocks per SM fit in
 * slot beside the other slots' launches: false with "limits: " (what
 * names the program, may be NULL).  *want (may be NULL) is the launch's
 * share of the budget. */
bool mesh_cuda_occ_fits(const cuda_backend *be, uint32_t slot, uint32_t nodes,
                        uint32_t per_sm, const char *what, uint64_t *want,
                        char **err);

#endif
