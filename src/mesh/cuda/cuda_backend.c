/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA backend: caps, mailbox, resident kernels, blink and MPS isolation.
 *
 * Decisions the spec leaves open:
 * - One device per backend (RIG_MESH_CUDA_DEVICE, default 0), driven
 *   through its primary context, or through a green context of
 *   RIG_MESH_CUDA_SMS SMs when that is set (caps' green and sms then say so).
 * - The mailbox is a memfd mapping registered with cuMemHostRegister
 *   (DEVICEMAP | PORTABLE): pinned host memory the kernels reach by a
 *   device address, and a file another process (an MPS worker) can map and
 *   register too.
 * - Blink: module_scope answers "the whole context", so the driver halts
 *   every resident program through the mailbox before a module change and
 *   relaunches them after; scratch lives in device memory owned by the
 *   kernel, so a program's state survives its relaunch.
 * - Occupancy: nodes that cannot all be resident beside the other slots'
 *   launches are refused ("limits: "): a launch of n nodes of a kernel
 *   that fits m blocks per SM takes n/m SMs, and the launches may take at
 *   most the SMs programs run on (caps.sms).  Resident nodes that cannot
 *   all be scheduled would never all come online.  A launch holds its
 *   share until it ends by itself or its stream is dropped (unload); a
 *   halted one keeps it, since a blink relaunches it.  The refusal comes
 *   first from admit, which the driver calls before the blink halts
 *   anything: m is estimated there, without a module, from the registers,
 *   static shared memory the compiler read from ptxas's log and the SM's
 *   limits read at open, each rule rounded against the kernel so as not
 *   to exceed the driver's figure (what admit passes, launch passes too;
 *   tests/cuda/test_cuda_gpu.c "admit bound" checks it).  launch repeats
 *   the check with the loaded kernel's exact occupancy as a second guard;
 *   it alone refuses where the compiler knew no register count, and then
 *   after the halt.
 * - A kernel that faults (CUDA_ERROR_ILLEGAL_ADDRESS, ...) ends its launch:
 *   query reports done and crashed the driver's error name, once.
 * - MPS (RIG_MESH_CUDA_ISOLATION=mps): a private control daemon and one
 *   worker process per program, each an MPS client with its own context
 *   (cuda_mps.c has the decisions).  This file keeps the caps, the mailbox
 *   and the occupancy budget for both modes and hands a worker's kernel to
 *   cuda_mps.c at load, launch, query, crashed and unload.  The image and
 *   mailbox code both run is in cuda_image.c.  MPS takes the whole device:
 *   RIG_MESH_CUDA_SMS (a green context) is refused with it. */
#include "cuda_mps_internal.h"

#include "../../util/util_internal.h"
#include "../mesh_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

bool mesh_cuda_built(void)
{
    return true;
}

#define OCC_ONE 1000000ull /* fixed point of one SM */

typedef struct cuda_backend cuda_backend;

typedef struct {
    mesh_cuda_image im; /* first: its usage is the kernel ops' */
    cuda_backend *be;
    char *entry;
} cuda_kernel;

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
    /* Occupancy of each slot's running launch, in OCC_ONE per SM. */
    uint64_t occ[MESH_PROG_SLOTS];
};

/* ---- caps --------------------------------------------------------------- */

static bool attr(const mesh_cu_lib *cu, CUdevice dev, CUdevice_attribute a,
                 const char *what, int *out, char **err)
{
    CUresult r = cu->cuDeviceGetAttribute_p(out, a, dev);
    if (r != CUDA_SUCCESS) {
        char call[96];
        snprintf(call, sizeof(call), "cuDeviceGetAttribute(%s)", what);
        return mesh_cu_check(cu, r, NULL, call, err);
    }
    return true;
}

/* The caps of device ordinal ord, whole device (not green). */
static bool probe_caps(const mesh_cu_lib *cu, int ord, CUdevice *dev,
                       mesh_caps *out, char **err)
{
    CUdevice d;
    char name[256];
    int major = 0, minor = 0, sms = 0, bps = 0, thr = 0, shm = 0;
    if (!mesh_cu_check(cu, cu->cuDeviceGet_p(&d, ord), NULL, "cuDeviceGet",
                       err) ||
        !mesh_cu_check(cu, cu->cuDeviceGetName_p(name, sizeof(name), d), NULL,
                       "cuDeviceGetName", err) ||
        !attr(cu, d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cc major",
              &major, err) ||
        !attr(cu, d, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cc minor",
              &minor, err) ||
        !attr(cu, d, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SMs", &sms,
              err) ||
        !attr(cu, d, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR,
              "blocks per SM", &bps, err) ||
        !attr(cu, d, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
              "threads per block", &thr, err) ||
        !attr(cu, d, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
              "shared per block", &shm, err)) {
        return false;
    }
    mesh_caps c;
    memset(&c, 0, sizeof(c));
    c.kind = MESH_BACKEND_CUDA;
    c.cc_major = major;
    c.cc_minor = minor;
    c.sms_total = (uint32_t)sms;
    c.sms = (uint32_t)sms;
    c.blocks_per_sm = (uint32_t)bps;
    c.max_tg_threads = (uint32_t)thr;
    c.max_shared = (uint32_t)shm;
    name[sizeof(name) - 1] = '\0';
    c.name = strdup(name);
    if (asprintf(&c.arch, "sm_%d%d", major, minor) < 0) {
        c.arch = NULL;
    }
    if (c.name == NULL || c.arch == NULL) {
        mesh_caps_free(&c);
        return rig_err(err, "nomem: caps");
    }
    *dev = d;
    *out = c;
    return true;
}

/* The SM limits of dev (the caps' blocks per SM among them). */
static bool probe_sm(const mesh_cu_lib *cu, CUdevice dev, uint32_t blocks,
                     cuda_sm_limits *out, char **err)
{
    int regs = 0, regs_block = 0, threads = 0, shared = 0, reserved = 0;
    if (!attr(cu, dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
              "registers per SM", &regs, err) ||
        !attr(cu, dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK,
              "registers per block", &regs_block, err) ||
        !attr(cu, dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
              "threads per SM", &threads, err) ||
        !attr(cu, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
              "shared per SM", &shared, err) ||
        !attr(cu, dev, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK,
              "reserved shared per block", &reserved, err)) {
        return false;
    }
    if (regs <= 0 || regs_block <= 0 || threads <= 0 || shared <= 0 ||
        reserved < 0) {
        return rig_err(err,
                       "system: the CUDA driver reports an SM of %d "
                       "registers (%d per block), %d threads, %d B shared "
                       "(%d reserved per block)",
                       regs, regs_block, threads, shared, reserved);
    }
    out->regs = (uint32_t)regs;
    out->regs_block = (uint32_t)regs_block;
    out->threads = (uint32_t)threads;
    out->blocks = blocks;
    out->shared = (uint32_t)shared;
    out->reserved = (uint32_t)reserved;
    return true;
}

bool mesh_cuda_describe(FILE *out, char **err)
{
    if (out == NULL) {
        return rig_err(err, "invalid: mesh_cuda_describe: out is NULL");
    }
    mesh_cu_lib cu;
    char *why = NULL;
    if (!mesh_cu_lib_open(&cu, &why)) {
        /* "unsupported: <why>" -> "none (<why>)" */
        const char *w = why != NULL ? why : "unknown";
        if (strncmp(w, "unsupported: ", 13) == 0) {
            w += 13;
        }
        fprintf(out, "none (%s)\n", w);
        free(why);
        return true;
    }
    int n = 0;
    bool ok = mesh_cu_check(&cu, cu.cuDeviceGetCount_p(&n), NULL,
                            "cuDeviceGetCount", err);
    if (ok && n == 0) {
        fprintf(out, "none (the CUDA driver reports no device)\n");
    }
    for (int i = 0; ok && i < n; i++) {
        mesh_caps c;
        CUdevice d;
        size_t mem = 0;
        ok = probe_caps(&cu, i, &d, &c, err) &&
             mesh_cu_check(&cu, cu.cuDeviceTotalMem_p(&mem, d), NULL,
                           "cuDeviceTotalMem", err);
        if (ok) {
            fprintf(out,
                    "%d: %s, cc %d.%d (%s), %u SMs, %u blocks/SM, "
                    "%u threads and %u B shared per node, %zu MiB%s\n",
                    i, c.name, c.cc_major, c.cc_minor, c.arch, c.sms_total,
                    c.blocks_per_sm, c.max_tg_threads, c.max_shared, mem >> 20,
                    cu.green ? ", green contexts" : "");
            mesh_caps_free(&c);
        }
    }
    mesh_cu_lib_close(&cu);
    return ok;
}

/* ---- settings ----------------------------------------------------------- */

static bool settings(uint32_t *ord, uint32_t *isolation, uint32_t *sms,
                     char **err)
{
    uint64_t v = 0;
    if (!rig_env_u64("RIG_MESH_CUDA_DEVICE", 0, &v, err)) {
        return false;
    }
    if (v > 1024) {
        return rig_err(err, "invalid: RIG_MESH_CUDA_DEVICE=%llu",
                       (unsigned long long)v);
    }
    *ord = (uint32_t)v;
    if (!rig_env_u64("RIG_MESH_CUDA_SMS", 0, &v, err)) {
        return false;
    }
    if (v > 100000) {
        return rig_err(err, "invalid: RIG_MESH_CUDA_SMS=%llu",
                       (unsigned long long)v);
    }
    *sms = (uint32_t)v;
    const char *iso = getenv("RIG_MESH_CUDA_ISOLATION");
    if (iso == NULL || iso[0] == '\0' || strcmp(iso, "blink") == 0) {
        *isolation = MESH_ISOLATION_BLINK;
    } else if (strcmp(iso, "mps") == 0) {
        *isolation = MESH_ISOLATION_MPS;
    } else {
        return rig_err(err,
                       "invalid: RIG_MESH_CUDA_ISOLATION=%s (blink or "
                       "mps)",
                       iso);
    }
    return true;
}

/* ---- contexts ----------------------------------------------------------- */

static bool make_green(cuda_backend *be, uint32_t want, char **err)
{
    const mesh_cu_lib *cu = &be->cu;
    if (!cu->green) {
        return rig_err(err,
                       "unsupported: RIG_MESH_CUDA_SMS=%u asks for a "
                       "green context; this CUDA driver has none",
                       want);
    }
    if (want > be->caps.sms_total) {
        return rig_err(err,
                       "limits: RIG_MESH_CUDA_SMS=%u but the device has "
                       "%u SMs",
                       want, be->caps.sms_total);
    }
    CUdevResource all, part, rest;
    CUdevResourceDesc desc;
    unsigned int groups = 1;
    memset(&all, 0, sizeof(all));
    memset(&part, 0, sizeof(part));
    memset(&rest, 0, sizeof(rest));
    if (!mesh_cu_check(cu,
                       cu->cuDeviceGetDevResource_p(be->dev, &all,
                                                    CU_DEV_RESOURCE_TYPE_SM),
                       "unsupported", "cuDeviceGetDevResource", err) ||
        !mesh_cu_check(cu,
                       cu->cuDevSmResourceSplitByCount_p(&part, &groups, &all,
                                                         &rest, 0, want),
                       "unsupported", "cuDevSmResourceSplitByCount", err) ||
        !mesh_cu_check(cu, cu->cuDevResourceGenerateDesc_p(&desc, &part, 1),
                       "unsupported", "cuDevResourceGenerateDesc", err) ||
        !mesh_cu_check(cu,
                       cu->cuGreenCtxCreate_p(&be->green, desc, be->dev,
                                              CU_GREEN_CTX_DEFAULT_STREAM),
                       NULL, "cuGreenCtxCreate", err)) {
        return false;
    }
    if (!mesh_cu_check(cu, cu->cuCtxFromGreenCtx_p(&be->ctx, be->green), NULL,
                       "cuCtxFromGreenCtx", err)) {
        cu->cuGreenCtxDestroy_p(be->green);
        be->green = NULL;
        return false;
    }
    be->caps.green = true;
    be->caps.sms = part.sm.smCount;
    return true;
}

static bool cuda_make_current(const mesh_backend *b, char **err)
{
    const cuda_backend *be = b->self;
    return mesh_cu_check(&be->cu, be->cu.cuCtxSetCurrent_p(be->ctx), NULL,
                         "cuCtxSetCurrent", err);
}

/* ---- the mailbox -------------------------------------------------------- */

static bool mailbox_make(cuda_backend *be, char **err)
{
    if (!mesh_cuda_mailbox_map(&be->cu, -1, &be->mbox, err)) {
        return false;
    }
    mesh_control_block *mb = be->mbox.mb;
    mesh_cb_header *h = &mb->h;
    h->abi = MESH_RT_ABI_VERSION;
    h->backend = mesh_caps_word(&be->caps);
    h->isolation = be->isolation;
    h->slots = MESH_PROG_SLOTS;
    h->slot_bytes = MESH_CB_SLOT_BYTES;
    h->header_bytes = MESH_CB_HEADER_BYTES;
    h->host_pid = (uint32_t)getpid();
    h->sms_total = be->caps.sms_total;
    h->sms = be->caps.sms;
    h->max_tg_threads = be->caps.max_tg_threads;
    h->max_shared = be->caps.max_shared;
    h->blocks_per_sm = be->caps.blocks_per_sm;
    h->cc_major = be->caps.cc_major;
    h->cc_minor = be->caps.cc_minor;
    h->family = 0;
    h->size = MESH_CB_BYTES;
    snprintf(h->arch, sizeof(h->arch), "%s", be->caps.arch);
    atomic_store_explicit(&h->magic, MESH_CB_MAGIC, memory_order_release);
    be->mb = mb;
    return true;
}

static void mailbox_free(cuda_backend *be)
{
    mesh_cuda_mailbox_unmap(&be->cu, &be->mbox);
    be->mb = NULL;
}

static bool cuda_mailbox(const mesh_backend *b, uint8_t **host, uint64_t *dev,
                         char **err)
{
    const cuda_backend *be = b->self;
    if (host == NULL || dev == NULL) {
        return rig_err(err, "invalid: cuda mailbox: NULL argument");
    }
    *host = (uint8_t *)be->mb;
    *dev = (uint64_t)be->mbox.dev;
    return true;
}

/* ---- simple ops --------------------------------------------------------- */

static const mesh_caps *cuda_caps(const mesh_backend *b)
{
    return &((const cuda_backend *)b->self)->caps;
}

static bool cuda_isolated(const mesh_backend *b)
{
    return ((const cuda_backend *)b->self)->isolation == MESH_ISOLATION_MPS;
}

static bool cuda_resident(const mesh_backend *b)
{
    (void)b;
    return true;
}

static uint32_t cuda_isolation(const mesh_backend *b)
{
    return ((const cuda_backend *)b->self)->isolation;
}

static const mesh_compiler *cuda_compiler(const mesh_backend *b)
{
    const cuda_backend *be = b->self;
    return be->mps != NULL ? mesh_cuda_mps_compiler(be->mps) : be->comp;
}

static bool cuda_module_scope(const mesh_backend *b, bool has_slot,
                              uint32_t slot, uint32_t *scope)
{
    const cuda_backend *be = b->self;
    if (be->isolation != MESH_ISOLATION_MPS) {
        return false; /* blink: the whole context halts */
    }
    if (scope != NULL) {
        *scope = has_slot && slot < MESH_PROG_SLOTS ? slot : MESH_NO_SLOT;
    }
    return true;
}

static uint32_t cuda_online_timeout_ms(const mesh_backend *b)
{
    return ((const cuda_backend *)b->self)->set.online_timeout_ms;
}

static bool cuda_stack_limit(const mesh_backend *b, size_t *out, char **err)
{
    const cuda_backend *be = b->self;
    if (out == NULL) {
        return rig_err(err, "invalid: cuda stack_limit: out is NULL");
    }
    if (!cuda_make_current(b, err)) {
        return false;
    }
    return mesh_cu_check(&be->cu,
                         be->cu.cuCtxGetLimit_p(out, CU_LIMIT_STACK_SIZE), NULL,
                         "cuCtxGetLimit(CU_LIMIT_STACK_SIZE)", err);
}

static bool cuda_set_stack_limit(const mesh_backend *b, size_t bytes,
                                 char **err)
{
    const cuda_backend *be = b->self;
    if (!cuda_make_current(b, err)) {
        return false;
    }
    /* The driver resizes every thread's stack: it waits for the context's
     * work, so the driver calls it with no program running. */
    CUresult r = be->cu.cuCtxSetLimit_p(CU_LIMIT_STACK_SIZE, bytes);
    if (!mesh_cu_check(&be->cu, r,
                       r == CUDA_ERROR_INVALID_VALUE ? "limits" : NULL,
                       "cuCtxSetLimit(CU_LIMIT_STACK_SIZE)", err)) {
        return false;
    }
    if (be->mps != NULL) {
        mesh_cuda_mps_set_stack(be->mps, bytes);
    }
    return true;
}

/* ---- kernels ------------------------------------------------------------ */

static const mesh_kernel_ops cuda_kernel_ops;

/* The blink path's kernel behind k, or NULL (an MPS worker's). */
static cuda_kernel *kernel_of(const mesh_kernel *k)
{
    return k != NULL && k->ops == &cuda_kernel_ops ? k->self : NULL;
}

static bool k_global_u32(const mesh_kernel *k, const char *name, uint32_t *out,
                         char **err)
{
    cuda_kernel *ck = kernel_of(k);
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
    cuda_kernel *ck = kernel_of(k);
    if (ck == NULL) {
        return;
    }
    kernel_release(ck);
    free(ck);
    k->self = NULL;
}

static const mesh_kernel_ops cuda_kernel_ops = {
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

static bool cuda_load(const mesh_backend *b, mesh_prepared *p,
                      mesh_kernel **out, char **err)
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
    if (!cuda_make_current(b, err)) {
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
    k->ops = &cuda_kernel_ops;
    k->self = ck;
    *out = k;
    return true;
}

static bool cuda_unload(const mesh_backend *b, mesh_kernel *k, char **err)
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

/* ---- occupancy ---------------------------------------------------------- */

static uint64_t round_up(uint64_t v, uint64_t unit)
{
    return (v + unit - 1) / unit * unit;
}

/* The occupancy budget: every node of every running launch resident.  A
 * launch of nodes nodes of per_sm blocks per SM in slot fits beside the
 * other slots' launches; *want is its share, *used theirs (OCC_ONE per
 * SM). */
static bool occ_fits(const cuda_backend *be, uint32_t slot, uint32_t nodes,
                     uint32_t per_sm, uint64_t *want, uint64_t *used)
{
    *want = per_sm > 0 ? (uint64_t)nodes * OCC_ONE / per_sm : UINT64_MAX;
    *used = 0;
    for (uint32_t i = 0; i < MESH_PROG_SLOTS; i++) {
        *used += i == slot ? 0 : be->occ[i];
    }
    uint64_t cap = (uint64_t)be->caps.sms * OCC_ONE;
    return *used <= cap && *want <= cap - *used;
}

/* Resident blocks per SM of a kernel of threads threads, regs registers
 * per thread and shared bytes per block (static and dynamic), by the SM's
 * limits alone (0: not one).  It must never exceed what the driver's
 * occupancy calculation gives at load, so each rule rounds against the
 * kernel: registers go to warps in units of 256 per warp, and to the SM's
 * four sub-partitions a whole warp at a time (a block's request is checked
 * as if its warps filled all four); shared memory goes in units of 128
 * bytes, plus the driver's reserve per block, out of the SM's largest
 * carveout. */
static uint32_t est_blocks(const cuda_sm_limits *sm, uint32_t threads,
                           uint32_t regs, uint64_t shared)
{
    const uint64_t warp = 32, reg_unit = 256, parts = 4, shm_unit = 128;
    uint64_t warps = (threads + warp - 1) / warp;
    if (warps == 0 || regs == 0 || regs > 255) {
        return 0;
    }
    uint64_t warp_regs = round_up((uint64_t)regs * warp, reg_unit);
    if (warp_regs * round_up(warps, parts) > sm->regs_block) {
        return 0;
    }
    uint64_t by_regs = sm->regs / parts / warp_regs * parts / warps;
    uint64_t by_threads = sm->threads / (warps * warp);
    uint64_t block_shm = round_up(shared + sm->reserved, shm_unit);
    uint64_t by_shared = sm->shared / block_shm;
    uint64_t n = sm->blocks;
    n = by_regs < n ? by_regs : n;
    n = by_threads < n ? by_threads : n;
    n = by_shared < n ? by_shared : n;
    return (uint32_t)n;
}

/* Whether nodes nodes of p fit beside the running launches, judged from
 * the compiler's figures (nothing is loaded): called by the driver before
 * it halts anything, so that a refusal blinks no running program. */
static bool cuda_admit(const mesh_backend *b, const mesh_prepared *p,
                       uint32_t nodes, uint32_t slot, char **err)
{
    if (b == NULL || b->self == NULL || p == NULL || nodes == 0 ||
        slot >= MESH_PROG_SLOTS) {
        return rig_err(err,
                       "invalid: cuda admit: bad backend, program, nodes "
                       "%u or slot %u",
                       nodes, slot);
    }
    const cuda_backend *be = b->self;
    const mesh_manifest *m = &p->manifest;
    const char *name = m->name != NULL ? m->name : "?";
    if (p->exec != MESH_BACKEND_CUDA) {
        return rig_err(err,
                       "invalid: cuda admit: program %s was not compiled "
                       "by the CUDA compiler",
                       name);
    }
    if (m->threads == 0) {
        return rig_err(err, "invalid: cuda admit: program %s has no threads",
                       name);
    }
    if (p->regs == 0) {
        /* The compiler could not read the register count (a log format
         * this rig does not know): admitted; launch's exact check still
         * refuses what does not fit, but only after the blink. */
        return true;
    }
    uint64_t shared = (uint64_t)p->shared_static + m->shared;
    uint32_t per_sm = est_blocks(&be->sm, m->threads, p->regs, shared);
    if (per_sm == 0) {
        return rig_err(err,
                       "limits: program %s: not one node of %u threads "
                       "(%u registers, %llu B shared) fits on an SM",
                       name, m->threads, p->regs, (unsigned long long)shared);
    }
    uint64_t want = 0, used = 0;
    if (!occ_fits(be, slot, nodes, per_sm, &want, &used)) {
        return rig_err(err,
                       "limits: program %s: %u nodes of %u threads (%u "
                       "per SM) do not fit beside the running programs "
                       "(%.2f of %u SMs in use)",
                       name, nodes, m->threads, per_sm, (double)used / OCC_ONE,
                       be->caps.sms);
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

static bool cuda_new_stream(const mesh_backend *b, uint32_t slot,
                            const mesh_kernel *k, mesh_stream **out, char **err)
{
    cuda_backend *be = b->self;
    if (out == NULL || slot >= MESH_PROG_SLOTS) {
        return rig_err(err, "invalid: cuda new_stream: slot %u or out", slot);
    }
    if (!cuda_make_current(b, err)) {
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

static bool cuda_launch(const mesh_backend *b, const mesh_stream *st,
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
    uint64_t want = 0, used = 0;
    if (!occ_fits(be, slot, nodes, per_sm, &want, &used)) {
        return rig_err(err,
                       "limits: %u nodes (%u per SM) do not fit beside the "
                       "running programs (%.2f of %u SMs in use)",
                       nodes, per_sm, (double)used / OCC_ONE, be->caps.sms);
    }
    if (mps) {
        /* The worker hands the kernel its own device address of the
         * mailbox, not dev (the backend's). */
        if (!mesh_cuda_mps_launch(k, slot, nodes, err)) {
            return false;
        }
    } else if (!cuda_make_current(b, err) ||
               !mesh_cuda_image_launch(&be->cu, &ck->im, cs->stream, be->mb,
                                       (CUdeviceptr)dev, slot, nodes, err)) {
        return false;
    }
    be->occ[slot] = want;
    cs->faulted = false;
    cs->fault = CUDA_SUCCESS;
    return true;
}

static bool cuda_query(const mesh_backend *b, const mesh_stream *st,
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
        if (!cuda_make_current(b, err)) {
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

static char *cuda_crashed(const mesh_backend *b, const mesh_stream *st,
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

/* ---- open and destroy --------------------------------------------------- */

static void cuda_destroy(mesh_backend *b)
{
    if (b == NULL || b->self == NULL) {
        return;
    }
    cuda_backend *be = b->self;
    /* The workers first (they map the mailbox), then the daemon. */
    mesh_cuda_mps_close(be->mps);
    be->mps = NULL;
    if (be->ctx != NULL) {
        be->cu.cuCtxSetCurrent_p(be->ctx);
    }
    mailbox_free(be);
    mesh_cuda_compiler_close(be->comp);
    if (be->green != NULL) {
        be->cu.cuGreenCtxDestroy_p(be->green);
    }
    if (be->primary) {
        be->cu.cuDevicePrimaryCtxRelease_p(be->dev);
    }
    mesh_caps_free(&be->caps);
    mesh_cu_lib_close(&be->cu);
    free(be);
}

static const mesh_backend_ops cuda_ops = {
    .caps = cuda_caps,
    .isolated = cuda_isolated,
    .resident = cuda_resident,
    .isolation = cuda_isolation,
    .mailbox = cuda_mailbox,
    .make_current = cuda_make_current,
    .compiler = cuda_compiler,
    .load = cuda_load,
    .new_stream = cuda_new_stream,
    .launch = cuda_launch,
    .query = cuda_query,
    .unload = cuda_unload,
    .stack_limit = cuda_stack_limit,
    .set_stack_limit = cuda_set_stack_limit,
    .module_scope = cuda_module_scope,
    .crashed = cuda_crashed,
    .online_timeout_ms = cuda_online_timeout_ms,
    .admit = cuda_admit,
    .destroy = cuda_destroy,
};

bool mesh_cuda_open(const mesh_settings *s, mesh_backend **out, char **err)
{
    if (s == NULL || out == NULL) {
        return rig_err(err, "invalid: mesh_cuda_open: NULL argument");
    }
    uint32_t ord = 0, isolation = 0, sms = 0;
    if (!settings(&ord, &isolation, &sms, err)) {
        return false;
    }
    cuda_backend *be = calloc(1, sizeof(*be));
    if (be == NULL) {
        return rig_err(err, "nomem: the CUDA backend");
    }
    be->pub.ops = &cuda_ops;
    be->pub.self = be;
    be->set = *s;
    be->isolation = isolation;
    be->mbox.fd = -1;
    if (isolation == MESH_ISOLATION_MPS && sms != 0) {
        free(be);
        return rig_err(err,
                       "unsupported: RIG_MESH_CUDA_SMS=%u (a green context) "
                       "with MPS isolation: MPS workers use the whole device",
                       sms);
    }
    if (isolation == MESH_ISOLATION_MPS && !mesh_cuda_mps_check(err)) {
        free(be);
        return false;
    }
    if (!mesh_cu_lib_open(&be->cu, err)) {
        free(be);
        return false;
    }
    int n = 0;
    if (!mesh_cu_check(&be->cu, be->cu.cuDeviceGetCount_p(&n), "unsupported",
                       "cuDeviceGetCount", err)) {
        goto err_destroy;
    }
    if ((int)ord >= n) {
        rig_err(err, "unsupported: no CUDA device %u (the driver reports %d)",
                ord, n);
        goto err_destroy;
    }
    if (!probe_caps(&be->cu, (int)ord, &be->dev, &be->caps, err) ||
        !probe_sm(&be->cu, be->dev, be->caps.blocks_per_sm, &be->sm, err)) {
        goto err_destroy;
    }
    if (sms != 0) {
        if (!make_green(be, sms, err)) {
            goto err_destroy;
        }
    } else {
        if (!mesh_cu_check(&be->cu,
                           be->cu.cuDevicePrimaryCtxRetain_p(&be->ctx, be->dev),
                           NULL, "cuDevicePrimaryCtxRetain", err)) {
            goto err_destroy;
        }
        be->primary = true;
    }
    if (!cuda_make_current(&be->pub, err) || !mailbox_make(be, err)) {
        goto err_destroy;
    }
    mesh_cuda_limits lim = {.max_threads = be->caps.max_tg_threads,
                            .max_shared = be->caps.max_shared};
    if (!mesh_cuda_compiler_make(be->caps.arch, NULL, &lim, &be->comp, err)) {
        goto err_destroy;
    }
    if (isolation == MESH_ISOLATION_MPS &&
        !mesh_cuda_mps_open(be->comp, be->mbox.fd, ord,
                            be->set.halt_ms + be->set.grace_ms, &be->mps,
                            err)) {
        goto err_destroy;
    }
    *out = &be->pub;
    return true;
err_destroy:
    cuda_destroy(&be->pub);
    return false;
}
