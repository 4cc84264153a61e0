/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA backend's kernels and streams: load, unload, launch, query and
 * a launch's abnormal end, for both isolation modes.
 *
 * Decisions the spec leaves open:
 * - Blink: a kernel is its image in the backend's context (cuda_image.c,
 *   the code an MPS worker runs too); MPS: a kernel is a worker
 *   (cuda_mps.c), taken from the prepared program at load, and launch,
 *   query, crashed and unload are handed to it.  One kernel ops table
 *   serves both (mesh_cuda_usage.mps tells which).
 * - A kernel that faults (CUDA_ERROR_ILLEGAL_ADDRESS, ...) ends its launch:
 *   query reports done and crashed the driver's error name, once. */
#include "cuda_backend_internal.h"

#include "../../abi/util_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- kernels ------------------------------------------------------------ */

/* The blink path's kernel behind k, or NULL (an MPS worker's). */
static cuda_kernel *kernel_of(const mesh_kernel *k)
{
    if (k == NULL || k->ops != &mesh_cuda_kernel_ops || k->self == NULL) {
        return NULL;
    }
    cuda_kernel *ck = k->self;
    return ck->im.use.mps ? NULL : ck;
}

static bool k_global_u32(const mesh_kernel *k, const char *name, uint32_t *out,
                         char **err)
{
    if (mesh_cuda_mps_kernel(k)) {
        return mesh_cuda_mps_global_u32(k, name, out, err);
    }
    cuda_kernel *ck = kernel_of(k);
    if (ck == NULL || name == NULL || out == NULL) {
        return rig_err(err, "invalid: cuda kernel global_u32: NULL argument");
    }
    const mesh_cu_lib *cu = &ck->be->cu;
    if (!mesh_cu_check(cu, cu->cuCtxSetCurrent_p(ck->be->ctx), NULL,
                       "cuCtxSetCurrent", err)) {
        return false;
    }
    return mesh_cuda_image_global_u32(cu, &ck->im, name, out, err);
}

/* Releases the module and scratch once the last launch is over, waiting
 * at most the halt and grace times: unloading a module under a running
 * kernel is undefined.  A kernel still running past the wait keeps them:
 * a leak, not a fault. */
static bool kernel_release(cuda_kernel *ck)
{
    const mesh_cu_lib *cu = &ck->be->cu;
    cu->cuCtxSetCurrent_p(ck->be->ctx);
    unsigned ms = ck->be->set.halt_ms + ck->be->set.grace_ms;
    bool idle = mesh_cuda_image_release(cu, &ck->im, ms);
    if (!idle) {
        rig_log(RIG_LOG_ERROR,
                "mesh: cuda: kernel %s still runs %u ms after its halt; its "
                "module and scratch stay allocated",
                ck->entry != NULL ? ck->entry : "?", ms);
    }
    free(ck->entry);
    ck->entry = NULL;
    return idle;
}

static void k_drop(mesh_kernel *k)
{
    if (mesh_cuda_mps_kernel(k)) {
        mesh_cuda_mps_drop(k);
        return;
    }
    cuda_kernel *ck = kernel_of(k);
    if (ck == NULL) {
        return;
    }
    kernel_release(ck);
    free(ck);
    k->self = NULL;
}

const mesh_kernel_ops mesh_cuda_kernel_ops = {
    .exec = MESH_BACKEND_CUDA,
    .regs = mesh_cuda_k_regs,
    .local_bytes = mesh_cuda_k_local_bytes,
    .max_blocks_per_sm = mesh_cuda_k_max_blocks,
    .scratch = mesh_cuda_k_scratch,
    .global_u32 = k_global_u32,
    .drop = k_drop,
};

/* Module, function, ABI, attributes, occupancy, scratch: the code an MPS
 * worker runs too (cuda_image.c). */
static bool kernel_load(const cuda_backend *be, const mesh_prepared *p,
                        cuda_kernel *ck, char **err)
{
    const mesh_manifest *m = &p->manifest;
    mesh_cuda_image_spec spec = {
        .name = m->name,
        .entry = m->entry,
        .code = p->code,
        .threads = m->threads,
        .shared = m->shared,
        .scratch = m->scratch,
        .reg_cap = p->reg_cap,
    };
    if (!mesh_cuda_image_load(&be->cu, &spec, &ck->im, err)) {
        return false;
    }
    ck->entry = strdup(m->entry);
    if (ck->entry == NULL) {
        return rig_err(err, "nomem: kernel entry");
    }
    return true;
}

bool mesh_cuda_load(const mesh_backend *b, mesh_prepared *p, mesh_kernel **out,
                    char **err)
{
    cuda_backend *be = b->self;
    if (p == NULL || out == NULL) {
        return rig_err(err, "invalid: cuda load: NULL argument");
    }
    if (p->exec != MESH_BACKEND_CUDA || p->code == NULL) {
        return rig_err(err,
                       "invalid: cuda load: program %s was not "
                       "compiled by the CUDA compiler",
                       p->manifest.name != NULL ? p->manifest.name : "?");
    }
    if (p->kernel != NULL) {
        /* Prepared already: an MPS worker, started with the module loaded. */
        if (be->mps == NULL || !mesh_cuda_mps_kernel(p->kernel)) {
            return rig_err(err,
                           "invalid: cuda load: program %s's kernel is not "
                           "an MPS worker of this backend",
                           p->manifest.name != NULL ? p->manifest.name : "?");
        }
        *out = p->kernel;
        p->kernel = NULL;
        return true;
    }
    if (!mesh_cuda_current(be, err)) {
        return false;
    }
    mesh_kernel *k = calloc(1, sizeof(*k));
    cuda_kernel *ck = calloc(1, sizeof(*ck));
    if (k == NULL || ck == NULL) {
        free(k);
        free(ck);
        return rig_err(err, "nomem: a CUDA kernel");
    }
    ck->be = be;
    if (!kernel_load(be, p, ck, err)) {
        kernel_release(ck);
        free(ck);
        free(k);
        return false;
    }
    k->ops = &mesh_cuda_kernel_ops;
    k->self = ck;
    *out = k;
    return true;
}

bool mesh_cuda_unload(const mesh_backend *b, mesh_kernel *k, char **err)
{
    (void)b;
    if (mesh_cuda_mps_kernel(k)) {
        return mesh_cuda_mps_unload(k, err);
    }
    cuda_kernel *ck = kernel_of(k);
    if (k == NULL || ck == NULL) {
        free(k);
        return true;
    }
    bool idle = kernel_release(ck);
    unsigned ms = ck->be->set.halt_ms + ck->be->set.grace_ms;
    free(ck);
    k->self = NULL;
    free(k);
    if (!idle) {
        return rig_err(err,
                       "timeout: the kernel still ran %u ms after its "
                       "halt; its module stays loaded",
                       ms);
    }
    return true;
}

/* ---- streams and launches ----------------------------------------------- */

static void stream_drop(mesh_stream *s)
{
    cuda_stream *cs = s->self;
    if (cs == NULL) {
        return;
    }
    const mesh_cu_lib *cu = &cs->be->cu;
    cu->cuCtxSetCurrent_p(cs->be->ctx);
    if (s->slot < MESH_PROG_SLOTS) {
        cs->be->occ[s->slot] = 0;
    }
    if (cs->stream != NULL) {
        cu->cuStreamDestroy_p(cs->stream);
    }
    free(cs);
    s->self = NULL;
}

bool mesh_cuda_new_stream(const mesh_backend *b, uint32_t slot,
                          const mesh_kernel *k, mesh_stream **out, char **err)
{
    cuda_backend *be = b->self;
    if (out == NULL || slot >= MESH_PROG_SLOTS) {
        return rig_err(err, "invalid: cuda new_stream: slot %u or out", slot);
    }
    if (!mesh_cuda_current(be, err)) {
        return false;
    }
    mesh_stream *s = calloc(1, sizeof(*s));
    cuda_stream *cs = calloc(1, sizeof(*cs));
    if (s == NULL || cs == NULL) {
        free(s);
        free(cs);
        return rig_err(err, "nomem: a CUDA stream");
    }
    /* An MPS worker launches on a stream of its own. */
    if (!mesh_cuda_mps_kernel(k) &&
        !mesh_cu_check(
            &be->cu,
            be->cu.cuStreamCreate_p(&cs->stream, CU_STREAM_NON_BLOCKING), NULL,
            "cuStreamCreate", err)) {
        free(s);
        free(cs);
        return false;
    }
    cs->be = be;
    s->exec = MESH_BACKEND_CUDA;
    s->slot = slot;
    s->self = cs;
    s->drop = stream_drop;
    *out = s;
    return true;
}

bool mesh_cuda_launch(const mesh_backend *b, const mesh_stream *st,
                      const mesh_kernel *k, uint32_t nodes, uint64_t dev,
                      uint32_t slot, char **err)
{
    cuda_backend *be = b->self;
    if (st == NULL || st->self == NULL || k == NULL || k->self == NULL ||
        slot >= MESH_PROG_SLOTS || nodes == 0) {
        return rig_err(err,
                       "invalid: cuda launch: bad stream, kernel, slot "
                       "%u or nodes %u",
                       slot, nodes);
    }
    cuda_kernel *ck = kernel_of(k);
    cuda_stream *cs = st->self;
    bool mps = mesh_cuda_mps_kernel(k);
    if (ck == NULL && !mps) {
        return rig_err(err, "invalid: cuda launch: not a CUDA kernel");
    }
    uint32_t per_sm = 0;
    if (!mesh_kernel_max_blocks_per_sm(k, &per_sm, err)) {
        return false;
    }
    /* admit checked the same budget from the compiler's figures, before
     * the blink; this exact check, from the loaded module's occupancy,
     * stays as the second guard (and the only one where admit could not
     * estimate).  An MPS worker's kernel shares the device's SMs alike. */
    uint64_t want = 0;
    if (!mesh_cuda_occ_fits(be, slot, nodes, per_sm, NULL, &want, err)) {
        return false;
    }
    if (mps) {
        /* The worker hands the kernel its own device address of the
         * mailbox, not dev (the backend's). */
        if (!mesh_cuda_mps_launch(k, slot, nodes, err)) {
            return false;
        }
    } else if (!mesh_cuda_current(be, err) ||
               !mesh_cuda_image_launch(&be->cu, &ck->im, cs->stream, be->mb,
                                       (CUdeviceptr)dev, slot, nodes, err)) {
        return false;
    }
    be->occ[slot] = want;
    cs->faulted = false;
    cs->fault = CUDA_SUCCESS;
    return true;
}

bool mesh_cuda_query(const mesh_backend *b, const mesh_stream *st,
                     const mesh_kernel *k, bool *done, char **err)
{
    cuda_backend *be = b->self;
    if (st == NULL || st->self == NULL || done == NULL) {
        return rig_err(err, "invalid: cuda query: NULL argument");
    }
    cuda_stream *cs = st->self;
    if (mesh_cuda_mps_kernel(k)) {
        /* The worker's answer; a fault or its end, crashed reports. */
        if (!mesh_cuda_mps_query(k, done, err)) {
            return false;
        }
        if (!*done) {
            return true;
        }
    } else {
        if (!mesh_cuda_current(be, err)) {
            return false;
        }
        CUresult r = be->cu.cuStreamQuery_p(cs->stream);
        if (r == CUDA_ERROR_NOT_READY) {
            *done = false;
            return true;
        }
        if (r != CUDA_SUCCESS && cs->fault == CUDA_SUCCESS) {
            cs->fault = r; /* crashed reports it */
        }
    }
    /* A launch that ended by itself gives its SMs back.  One halted keeps
     * them: it is about to be unloaded (which releases them) or relaunched
     * by a blink, and a program loaded meanwhile must not take its place. */
    if (st->slot < MESH_PROG_SLOTS &&
        atomic_load_explicit(&be->mb->slot[st->slot].halt,
                             memory_order_acquire) == 0) {
        be->occ[st->slot] = 0;
    }
    *done = true;
    return true;
}

char *mesh_cuda_crashed(const mesh_backend *b, const mesh_stream *st,
                        const mesh_kernel *k)
{
    const cuda_backend *be = b->self;
    if (st == NULL || st->self == NULL) {
        return NULL;
    }
    if (mesh_cuda_mps_kernel(k)) {
        return mesh_cuda_mps_crashed(k, st->slot);
    }
    cuda_stream *cs = st->self;
    if (cs->fault == CUDA_SUCCESS || cs->faulted) {
        return NULL;
    }
    cs->faulted = true;
    char *why = NULL;
    if (asprintf(&why, "the kernel of slot %u faulted: %s", st->slot,
                 mesh_cu_name(&be->cu, cs->fault)) < 0) {
        return NULL;
    }
    return why;
}
