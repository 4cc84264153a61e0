/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA backend's kernels and streams: load, unload, launch, query and
 * a launch's abnormal end, for both isolation modes.
 *
 * Decisions the spec leaves open, each from CUDA 13's cuda.h or NVIDIA's
 * documentation:
 * - Blink: a kernel is its image in the backend's context (cuda_image.c,
 *   the code an MPS worker runs too); MPS: a kernel is a worker
 *   (cuda_mps.c), taken from the prepared program at load, and launch,
 *   query, crashed and unload are handed to it.  One kernel ops table
 *   serves both (mesh_cuda_usage.mps tells which).
 * - Streams: the driver gives a context CUDA_DEVICE_MAX_CONNECTIONS
 *   hardware queues ("1 to 32 (default 8)", CUDA programming guide, 5.2
 *   CUDA environment variables) and streams beyond them share one; work
 *   queued behind a resident kernel on a shared queue may wait for it
 *   ("Even if the green contexts have disjoint SM partitions, it is not
 *   guaranteed that the kernels launched in them will run concurrently
 *   ... due to other resources (like HW connections, see
 *   CUDA_DEVICE_MAX_CONNECTIONS) that could cause a dependency", cuda.h,
 *   green contexts).  A resident kernel never ends by itself, so a
 *   relaunch behind it would never come online.  The blink path therefore
 *   makes, at open, one stream per queue, in a row, keeps them for the
 *   backend's life, and admits no more loaded programs than there are
 *   queues
 *   ("limits: " naming CUDA_DEVICE_MAX_CONNECTIONS, which the user may
 *   raise to 32 before the process starts; rig sets no environment).  That
 *   the driver hands queues to streams round robin as they are made is
 *   NVIDIA's account of Hyper-Q, not a promise of cuda.h: the device check
 *   (mpi_tests/gpu/device-check.sh, "connections") is where it shows.  An
 *   MPS worker has a context, and queues, of its own.
 * - Unload: cuMemFree "may perform implicit synchronization" (cuda.h), so
 *   freeing one program's scratch may wait for every kernel of the
 *   context, and a resident kernel that is not halted never ends: the
 *   driver's close halts and unloads slot after slot.  An image unloaded
 *   while another launch of the context may still run is retired instead,
 *   and retired images are freed once no launch runs (at the next unload
 *   or load, or at destroy).
 * - A kernel fault is not one slot's: ILLEGAL_ADDRESS, LAUNCH_FAILED and
 *   the other sticky errors leave "the process in an inconsistent state
 *   and any further CUDA work will return the same error. To continue
 *   using CUDA, the process must be terminated and relaunched" (cuda.h).
 *   The first one seen marks the context lost: every slot's launch is
 *   reported done and crashed (the faulting slot's by its fault, the
 *   others' as ended with the context), and every later load, launch and
 *   admit is refused ("load: ... the CUDA context is lost").  MPS keeps
 *   its own account (cuda_mps.c). */
#include "cuda_backend_internal.h"

#include "../../util/util_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the context's state ------------------------------------------------ */

uint32_t mesh_cuda_connections(void)
{
    const char *v = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    if (v == NULL || v[0] == '\0') {
        return MESH_CUDA_CONNECTIONS_DEFAULT;
    }
    char *end = NULL;
    unsigned long n = strtoul(v, &end, 10);
    if (end == v || *end != '\0' || n == 0) {
        return MESH_CUDA_CONNECTIONS_DEFAULT;
    }
    return n > 32 ? 32 : (uint32_t)n;
}

void mesh_cuda_note(cuda_backend *be, CUresult r, uint32_t slot)
{
    if (be->lost != CUDA_SUCCESS || !mesh_cu_sticky(r)) {
        return;
    }
    be->lost = r;
    be->lost_slot = slot;
    rig_log(RIG_LOG_ERROR,
            "mesh: cuda: the context is lost to %s (first seen %s%u): every "
            "program of it ended, and the process must restart to run "
            "programs on this GPU again",
            mesh_cu_name(&be->cu, r), slot < MESH_PROG_SLOTS ? "in slot " : "",
            slot < MESH_PROG_SLOTS ? slot : 0);
}

bool mesh_cuda_usable(const cuda_backend *be, const char *what, char **err)
{
    if (be->lost == CUDA_SUCCESS) {
        return true;
    }
    char where[32] = "";
    if (be->lost_slot < MESH_PROG_SLOTS) {
        snprintf(where, sizeof(where), " in slot %u", be->lost_slot);
    }
    return rig_err(err,
                   "load: %s: the CUDA context is lost to %s%s, a sticky "
                   "fault (\"the process must be terminated and "
                   "relaunched\", cuda.h): restart the process to run "
                   "programs on this GPU",
                   what, mesh_cu_name(&be->cu, be->lost), where);
}

/* Whether a launch of the context may still run; notes a sticky error.
 * Queries run with the context pushed, as every call of the backend's. */
static bool ctx_busy(cuda_backend *be)
{
    bool busy = false;
    if (be->npool == 0 || !mesh_cuda_push(be, NULL)) {
        return false;
    }
    for (uint32_t i = 0; i < be->npool; i++) {
        CUresult r = be->cu.cuStreamQuery_p(be->pool[i]);
        if (r == CUDA_ERROR_NOT_READY) {
            busy = true;
        } else {
            mesh_cuda_note(be, r, MESH_NO_SLOT);
        }
    }
    mesh_cuda_pop(be);
    return busy && be->lost == CUDA_SUCCESS;
}

/* Frees retired images once no launch of the context runs (a lost
 * context runs none; its calls fail at once). */
static void reap(cuda_backend *be)
{
    if (be->retired == NULL || ctx_busy(be) || !mesh_cuda_push(be, NULL)) {
        return;
    }
    cuda_kernel *keep = NULL;
    while (be->retired != NULL) {
        cuda_kernel *ck = be->retired;
        be->retired = ck->next;
        if (!mesh_cuda_image_release(&be->cu, &ck->im, 0)) {
            ck->next = keep; /* its own launch still runs */
            keep = ck;
            continue;
        }
        mesh_cuda_ends_free(ck->ends);
        free(ck->entry);
        free(ck);
    }
    be->retired = keep;
    mesh_cuda_pop(be);
}

bool mesh_cuda_pool_make(cuda_backend *be, char **err)
{
    be->conns = mesh_cuda_connections();
    uint32_t n = be->conns < MESH_PROG_SLOTS ? be->conns : MESH_PROG_SLOTS;
    for (uint32_t i = 0; i < n; i++) {
        if (!mesh_cu_check(
                &be->cu,
                be->cu.cuStreamCreate_p(&be->pool[i], CU_STREAM_NON_BLOCKING),
                NULL, "cuStreamCreate", err)) {
            be->pool[i] = NULL;
            return false;
        }
        be->pool_slot[i] = MESH_NO_SLOT;
        be->npool = i + 1;
    }
    return true;
}

void mesh_cuda_pool_free(cuda_backend *be)
{
    reap(be);
    for (cuda_kernel *ck = be->retired; ck != NULL; ck = ck->next) {
        rig_log(RIG_LOG_ERROR,
                "mesh: cuda: kernel %s still runs at the backend's end; its "
                "module and scratch stay with the context",
                ck->entry != NULL ? ck->entry : "?");
    }
    while (be->retired != NULL) {
        cuda_kernel *ck = be->retired;
        be->retired = ck->next;
        free(ck->entry);
        free(ck);
    }
    /* Before the context goes: a green context does not destroy its
     * streams, and any use of them after it fails ("Users must explicitly
     * destroy all such streams before invoking cuGreenCtxDestroy",
     * cuda.h).  cuStreamDestroy returns at once; a stream still at work is
     * released once it is done. */
    for (uint32_t i = 0; i < be->npool; i++) {
        be->cu.cuStreamDestroy_p(be->pool[i]);
        be->pool[i] = NULL;
    }
    be->npool = 0;
}

bool mesh_cuda_stream_free(const cuda_backend *be, uint32_t slot,
                           const char *what, char **err)
{
    if (be->mps != NULL) {
        return true;
    }
    uint32_t held = 0;
    for (uint32_t i = 0; i < be->npool; i++) {
        if (be->pool_slot[i] == MESH_NO_SLOT || be->pool_slot[i] == slot) {
            return true;
        }
        held++;
    }
    return rig_err(err,
                   "limits: %s: %u programs are loaded, one per hardware "
                   "queue of the CUDA context (CUDA_DEVICE_MAX_CONNECTIONS=%u"
                   "%s); another would share a queue with a resident kernel "
                   "and wait behind it: set CUDA_DEVICE_MAX_CONNECTIONS (up "
                   "to 32) before the process starts, or use MPS isolation",
                   what, held, be->conns,
                   getenv("CUDA_DEVICE_MAX_CONNECTIONS") == NULL
                       ? ", the driver's default"
                       : "");
}

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
    if (!mesh_cuda_push(ck->be, err)) {
        return false;
    }
    bool ok = mesh_cuda_image_global_u32(&ck->be->cu, &ck->im, name, out, err);
    mesh_cuda_pop(ck->be);
    return ok;
}

/* Unloads ck: waits at most the halt and grace times for its own last
 * launch (unloading a module under a running kernel is undefined), then
 * retires it, freed at once when no other launch of the context runs.
 * True when its own launch is over. */
static bool kernel_retire(cuda_kernel *ck)
{
    cuda_backend *be = ck->be;
    unsigned ms = be->set.halt_ms + be->set.grace_ms;
    bool idle = true;
    if (mesh_cuda_push(be, NULL)) {
        idle = mesh_cuda_image_idle(&be->cu, &ck->im, ms);
        mesh_cuda_pop(be);
    }
    if (!idle) {
        rig_log(RIG_LOG_ERROR,
                "mesh: cuda: kernel %s still runs %u ms after its halt; its "
                "module and scratch are freed once it ends",
                ck->entry != NULL ? ck->entry : "?", ms);
    } else {
        /* No point will rise any more: the watcher's last pass. */
        mesh_cuda_ends_stop(ck->ends);
    }
    ck->next = be->retired;
    be->retired = ck;
    reap(be);
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
    kernel_retire(ck);
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
 * worker runs too (cuda_image.c).  The context is pushed. */
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
    const char *name = p->manifest.name != NULL ? p->manifest.name : "?";
    if (p->exec != MESH_BACKEND_CUDA || p->code == NULL) {
        return rig_err(err,
                       "invalid: cuda load: program %s was not "
                       "compiled by the CUDA compiler",
                       name);
    }
    if (p->ends != NULL && p->ends->n > 0 && be->mps != NULL) {
        return rig_err(err,
                       "unsupported: program %s names rail ends, which the "
                       "CUDA executor hands to kernels in blink isolation "
                       "only (an MPS worker runs in a process of its own)",
                       name);
    }
    if (p->kernel != NULL) {
        /* Prepared already: an MPS worker, started with the module loaded. */
        if (be->mps == NULL || !mesh_cuda_mps_kernel(p->kernel)) {
            return rig_err(err,
                           "invalid: cuda load: program %s's kernel is not "
                           "an MPS worker of this backend",
                           name);
        }
        *out = p->kernel;
        p->kernel = NULL;
        return true;
    }
    if (be->mps != NULL) {
        return rig_err(err,
                       "invalid: cuda load: program %s was not prepared by "
                       "this backend's MPS compiler",
                       name);
    }
    char what[160];
    snprintf(what, sizeof(what), "program %s", name);
    if (!mesh_cuda_usable(be, what, err)) {
        return false;
    }
    /* With every program halted for the module change, images retired
     * meanwhile can go now. */
    reap(be);
    mesh_kernel *k = calloc(1, sizeof(*k));
    cuda_kernel *ck = calloc(1, sizeof(*ck));
    if (k == NULL || ck == NULL) {
        free(k);
        free(ck);
        return rig_err(err, "nomem: a CUDA kernel");
    }
    ck->be = be;
    if (!mesh_cuda_push(be, err)) {
        free(ck);
        free(k);
        return false;
    }
    bool ok = kernel_load(be, p, ck, err) &&
              mesh_cuda_ends_make(be, p, &ck->ends, err);
    mesh_cuda_pop(be);
    if (!ok) {
        kernel_retire(ck);
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
    unsigned ms = ck->be->set.halt_ms + ck->be->set.grace_ms;
    bool idle = kernel_retire(ck);
    k->self = NULL;
    free(k);
    if (!idle) {
        return rig_err(err,
                       "timeout: the kernel still ran %u ms after its "
                       "halt; its module and scratch are freed once it ends",
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
    cuda_backend *be = cs->be;
    if (s->slot < MESH_PROG_SLOTS) {
        be->occ[s->slot] = (cuda_occ){0};
    }
    /* The stream goes back to the pool; a launch still on it keeps it
     * from the next taker until it ends (mesh_cuda_new_stream). */
    if (cs->pool >= 0) {
        be->pool_slot[cs->pool] = MESH_NO_SLOT;
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
    int pool = -1;
    if (!mesh_cuda_mps_kernel(k)) {
        char what[32];
        snprintf(what, sizeof(what), "slot %u", slot);
        if (!mesh_cuda_usable(be, what, err) ||
            !mesh_cuda_stream_free(be, slot, what, err)) {
            return false;
        }
        if (!mesh_cuda_push(be, err)) {
            return false;
        }
        for (uint32_t i = 0; pool < 0 && i < be->npool; i++) {
            if (be->pool_slot[i] == MESH_NO_SLOT &&
                be->cu.cuStreamQuery_p(be->pool[i]) != CUDA_ERROR_NOT_READY) {
                pool = (int)i;
            }
        }
        mesh_cuda_pop(be);
        if (pool < 0) {
            return rig_err(err,
                           "limits: slot %u: every free stream of the CUDA "
                           "context still runs a kernel that outlived its "
                           "halt",
                           slot);
        }
    }
    mesh_stream *s = calloc(1, sizeof(*s));
    cuda_stream *cs = calloc(1, sizeof(*cs));
    if (s == NULL || cs == NULL) {
        free(s);
        free(cs);
        return rig_err(err, "nomem: a CUDA stream");
    }
    if (pool >= 0) {
        be->pool_slot[pool] = slot;
    }
    cs->be = be;
    cs->pool = pool;
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
    if ((ck == NULL && !mps) || (!mps && cs->pool < 0)) {
        return rig_err(err, "invalid: cuda launch: not a CUDA kernel and "
                            "stream of this backend");
    }
    char what[32];
    snprintf(what, sizeof(what), "slot %u", slot);
    if (!mps && !mesh_cuda_usable(be, what, err)) {
        return false;
    }
    uint32_t per_sm = 0;
    if (!mesh_kernel_max_blocks_per_sm(k, &per_sm, err)) {
        return false;
    }
    /* admit checked the same budget from the compiler's figures, before
     * the blink; this exact check, from the loaded module's occupancy,
     * stays as the second guard (and the only one where admit could not
     * estimate).  An MPS worker's kernel shares the device's SMs alike. */
    if (!mesh_cuda_occ_fits(be, slot, nodes, per_sm, NULL, err)) {
        return false;
    }
    if (mps) {
        /* The worker hands the kernel its own device address of the
         * mailbox, not dev (the backend's). */
        if (!mesh_cuda_mps_launch(k, slot, nodes, err)) {
            return false;
        }
    } else {
        if (!mesh_cuda_push(be, err)) {
            return false;
        }
        atomic_store_explicit(&be->mb->slot[slot].ends,
                              mesh_cuda_ends_dev(ck->ends),
                              memory_order_release);
        bool ok =
            mesh_cuda_image_launch(&be->cu, &ck->im, be->pool[cs->pool], be->mb,
                                   (CUdeviceptr)dev, slot, nodes, err);
        mesh_cuda_pop(be);
        if (!ok) {
            ctx_busy(be); /* notes a sticky error the launch met */
            return false;
        }
    }
    be->occ[slot] = (cuda_occ){.nodes = nodes, .per_sm = per_sm};
    cs->over = false;
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
    } else if (be->lost == CUDA_SUCCESS && cs->pool >= 0) {
        if (!mesh_cuda_push(be, err)) {
            return false;
        }
        CUresult r = be->cu.cuStreamQuery_p(be->pool[cs->pool]);
        mesh_cuda_pop(be);
        if (r == CUDA_ERROR_NOT_READY) {
            *done = false;
            return true;
        }
        if (r != CUDA_SUCCESS && cs->fault == CUDA_SUCCESS) {
            cs->fault = r; /* crashed reports it */
        }
        cs->over = r == CUDA_SUCCESS;
        mesh_cuda_note(be, r, st->slot);
    }
    /* A launch that ended by itself gives its SMs back, and so does every
     * launch of a lost context.  One halted keeps them: it is about to be
     * unloaded (which releases them) or relaunched by a blink, and a
     * program loaded meanwhile must not take its place. */
    if (st->slot < MESH_PROG_SLOTS &&
        (be->lost != CUDA_SUCCESS ||
         atomic_load_explicit(&be->mb->slot[st->slot].halt,
                              memory_order_acquire) == 0)) {
        be->occ[st->slot] = (cuda_occ){0};
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
    /* A launch that had ended cleanly before the context was lost did
     * not end with it. */
    if (cs->faulted ||
        (cs->fault == CUDA_SUCCESS && (be->lost == CUDA_SUCCESS || cs->over))) {
        return NULL;
    }
    cs->faulted = true;
    char *why = NULL;
    int n = 0;
    if (be->lost == CUDA_SUCCESS) {
        n = asprintf(&why, "the kernel of slot %u faulted: %s", st->slot,
                     mesh_cu_name(&be->cu, cs->fault));
    } else if (be->lost_slot == st->slot) {
        n = asprintf(&why,
                     "the kernel of slot %u faulted: %s; the fault is "
                     "sticky: the CUDA context is lost with every program "
                     "in it",
                     st->slot, mesh_cu_name(&be->cu, be->lost));
    } else {
        char where[32] = "";
        if (be->lost_slot < MESH_PROG_SLOTS) {
            snprintf(where, sizeof(where), " (first seen in slot %u)",
                     be->lost_slot);
        }
        n = asprintf(&why,
                     "the kernel of slot %u ended with the CUDA context, "
                     "lost to %s%s",
                     st->slot, mesh_cu_name(&be->cu, be->lost), where);
    }
    return n < 0 ? NULL : why;
}
