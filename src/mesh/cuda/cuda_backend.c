/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA backend: open, caps, contexts, the mailbox and the ops table.
 *
 * Decisions the spec leaves open, each from CUDA 13's cuda.h or NVIDIA's
 * documentation:
 * - One device per backend (RIG_MESH_CUDA_DEVICE, default 0), driven
 *   through its primary context, or through a green context of
 *   RIG_MESH_CUDA_SMS SMs when that is set.  The SM split rounds the count
 *   up to the device's partition granularity ("On Compute Architecture
 *   9.0+: The minimum count is 8 SMs and must be a multiple of 8") and may
 *   make fewer groups than asked: the group made is checked, and caps'
 *   green and sms say what was given.
 * - The driver must run what nvJitLink compiles: cubins of nvJitLink N.x
 *   need a driver of CUDA N or later (minor version compatibility holds
 *   within a major release only), so open compares cuDriverGetVersion
 *   with nvJitLinkVersion and refuses up front ("unsupported: ") instead
 *   of failing a load after a blink.  It refuses a device with a run time
 *   limit on kernels (CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT, a display
 *   watchdog: resident kernels would be killed) and one in the Prohibited
 *   compute mode ("No contexts can be created on this device").
 * - No context of rig's stays current on the caller's thread: every op
 *   that calls the driver pushes the backend's context and pops it
 *   (mesh_cuda_push).  A UCX built with CUDA registers host memory itself
 *   in ucp_mem_map whenever a context is current (uct_cuda_copy_mem_reg),
 *   and rails' end registration then meets
 *   CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED.  make_current only checks
 *   that the context can be made current here.
 * - The mailbox is a memfd mapping registered with cuMemHostRegister
 *   (DEVICEMAP | PORTABLE): pinned host memory the kernels reach by a
 *   device address, and a file another process (an MPS worker) can map and
 *   register too.
 * - Blink: module_scope answers "the whole context", so the driver halts
 *   every resident program through the mailbox before a module change and
 *   relaunches them after; scratch lives in device memory owned by the
 *   kernel, so a program's state survives its relaunch.
 * - Kernels, streams, launches and faults are cuda_launch.c's; what fits
 *   on the SMs (admit and the launch's budget) is cuda_occupancy.c's.
 * - MPS (RIG_MESH_CUDA_ISOLATION=mps): a private control daemon and one
 *   worker process per program, each an MPS client with its own context
 *   (cuda_mps.c has the decisions).  The backend itself makes no context
 *   then: one would make its process a plain client of the GPU beside the
 *   MPS server, which under the Exclusive-Process compute mode ("Only one
 *   context used by a single process can be present on this device")
 *   keeps the server, and every worker, from starting.  It reads the caps
 *   with device attributes and maps the mailbox without registering it
 *   (each worker registers its own mapping).  MPS takes the whole device:
 *   RIG_MESH_CUDA_SMS (a green context) is refused with it. */
#include "cuda_backend_internal.h"

#include "../../util/util_internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool mesh_cuda_built(void)
{
    return true;
}

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
                       "unsupported", "cuDevSmResourceSplitByCount", err)) {
        return false;
    }
    /* "This may lead to fewer groups created than purely dividing the
     * total SM count by the minCount due to cluster requirements or
     * alignment and granularity requirements for the minCount" (cuda.h):
     * none at all when the rounded count exceeds the device. */
    if (groups != 1 || part.type != CU_DEV_RESOURCE_TYPE_SM ||
        part.sm.smCount < want || part.sm.smCount > be->caps.sms_total) {
        return rig_err(err,
                       "unsupported: RIG_MESH_CUDA_SMS=%u: the device's SMs "
                       "split into %u group%s of %u SMs (partitions of at "
                       "least %u, a multiple of %u, out of %u)",
                       want, groups, groups == 1 ? "" : "s",
                       groups > 0 ? part.sm.smCount : 0,
                       all.sm.minSmPartitionSize, all.sm.smCoscheduledAlignment,
                       all.sm.smCount);
    }
    if (part.sm.smCount != want) {
        rig_log(RIG_LOG_INFO,
                "mesh: cuda: RIG_MESH_CUDA_SMS=%u gives a green context of "
                "%u SMs (the device's partition granularity)",
                want, part.sm.smCount);
    }
    if (!mesh_cu_check(cu, cu->cuDevResourceGenerateDesc_p(&desc, &part, 1),
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

bool mesh_cuda_push(const cuda_backend *be, char **err)
{
    return mesh_cu_check(&be->cu, be->cu.cuCtxPushCurrent_p(be->ctx), NULL,
                         "cuCtxPushCurrent", err);
}

void mesh_cuda_pop(const cuda_backend *be)
{
    CUcontext popped = NULL;
    be->cu.cuCtxPopCurrent_p(&popped);
}

/* Whether the backend's context can be made current on this thread: the
 * ops make it current themselves, for their own duration. */
static bool cuda_make_current(const mesh_backend *b, char **err)
{
    const cuda_backend *be = b->self;
    if (be->ctx == NULL) {
        return true; /* MPS: the workers' contexts are their own */
    }
    if (!mesh_cuda_push(be, err)) {
        return false;
    }
    mesh_cuda_pop(be);
    return true;
}

/* ---- the mailbox -------------------------------------------------------- */

static bool mailbox_make(cuda_backend *be, char **err)
{
    bool reg = be->ctx != NULL;
    if (reg && !mesh_cuda_push(be, err)) {
        return false;
    }
    bool ok = mesh_cuda_mailbox_map(&be->cu, -1, reg, &be->mbox, err);
    if (reg) {
        mesh_cuda_pop(be);
    }
    if (!ok) {
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
    bool pushed = be->mbox.registered && mesh_cuda_push(be, NULL);
    mesh_cuda_mailbox_unmap(&be->cu, &be->mbox);
    if (pushed) {
        mesh_cuda_pop(be);
    }
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
    if (be->mps != NULL) {
        /* The workers' contexts have the limit; the backend has none. */
        return mesh_cuda_mps_stack(be->mps, out, err);
    }
    if (!mesh_cuda_push(be, err)) {
        return false;
    }
    bool ok =
        mesh_cu_check(&be->cu, be->cu.cuCtxGetLimit_p(out, CU_LIMIT_STACK_SIZE),
                      NULL, "cuCtxGetLimit(CU_LIMIT_STACK_SIZE)", err);
    mesh_cuda_pop(be);
    return ok;
}

static bool cuda_set_stack_limit(const mesh_backend *b, size_t bytes,
                                 char **err)
{
    const cuda_backend *be = b->self;
    if (be->mps != NULL) {
        mesh_cuda_mps_set_stack(be->mps, bytes);
        return true;
    }
    if (!mesh_cuda_push(be, err)) {
        return false;
    }
    /* The driver resizes every thread's stack: it waits for the context's
     * work, so the driver calls it with no program running. */
    CUresult r = be->cu.cuCtxSetLimit_p(CU_LIMIT_STACK_SIZE, bytes);
    mesh_cuda_pop(be);
    return mesh_cu_check(&be->cu, r,
                         r == CUDA_ERROR_INVALID_VALUE ? "limits" : NULL,
                         "cuCtxSetLimit(CU_LIMIT_STACK_SIZE)", err);
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
    /* Images and streams before the context they belong to. */
    if (be->ctx != NULL) {
        mesh_cuda_pool_free(be);
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

/* What open refuses before it makes a context: a driver older than the
 * nvJitLink that compiles for it, a watchdog, the Prohibited compute
 * mode. */
static bool check_device(cuda_backend *be, char **err)
{
    const mesh_cu_lib *cu = &be->cu;
    int drv = 0, mode = 0, watchdog = 0;
    unsigned njl_major = 0, njl_minor = 0;
    if (!mesh_cu_check(cu, cu->cuDriverGetVersion_p(&drv), NULL,
                       "cuDriverGetVersion", err) ||
        !attr(cu, be->dev, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, "compute mode",
              &mode, err) ||
        !attr(cu, be->dev, CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT,
              "kernel exec timeout", &watchdog, err)) {
        return false;
    }
    mesh_cuda_compiler_version(be->comp, &njl_major, &njl_minor);
    if ((unsigned)drv / 1000u < njl_major) {
        return rig_err(err,
                       "unsupported: the CUDA driver supports CUDA %d.%d "
                       "(cuDriverGetVersion %d); cubins from nvJitLink %u.%u "
                       "need a %u.x driver or newer",
                       drv / 1000, drv % 1000 / 10, drv, njl_major, njl_minor,
                       njl_major);
    }
    if (watchdog != 0) {
        return rig_err(err,
                       "unsupported: CUDA device %u has a run time limit on "
                       "kernels (CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT, a "
                       "display watchdog): resident programs would be "
                       "killed",
                       be->ordinal);
    }
    if (mode == CU_COMPUTEMODE_PROHIBITED) {
        return rig_err(err,
                       "unsupported: CUDA device %u is in the Prohibited "
                       "compute mode: no context can be made on it",
                       be->ordinal);
    }
    return true;
}

static const mesh_backend_ops cuda_ops = {
    .caps = cuda_caps,
    .isolated = cuda_isolated,
    .resident = cuda_resident,
    .isolation = cuda_isolation,
    .mailbox = cuda_mailbox,
    .make_current = cuda_make_current,
    .compiler = cuda_compiler,
    .load = mesh_cuda_load,
    .new_stream = mesh_cuda_new_stream,
    .launch = mesh_cuda_launch,
    .query = mesh_cuda_query,
    .unload = mesh_cuda_unload,
    .stack_limit = cuda_stack_limit,
    .set_stack_limit = cuda_set_stack_limit,
    .module_scope = cuda_module_scope,
    .crashed = mesh_cuda_crashed,
    .online_timeout_ms = cuda_online_timeout_ms,
    .admit = mesh_cuda_admit,
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
    be->ordinal = ord;
    be->lost_slot = MESH_NO_SLOT;
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
    mesh_cuda_limits lim = {.max_threads = be->caps.max_tg_threads,
                            .max_shared = be->caps.max_shared};
    if (!mesh_cuda_compiler_make(be->caps.arch, NULL, &lim, &be->comp, err) ||
        !check_device(be, err)) {
        goto err_destroy;
    }
    if (isolation != MESH_ISOLATION_MPS) {
        if (sms != 0) {
            if (!make_green(be, sms, err)) {
                goto err_destroy;
            }
        } else {
            if (!mesh_cu_check(
                    &be->cu,
                    be->cu.cuDevicePrimaryCtxRetain_p(&be->ctx, be->dev), NULL,
                    "cuDevicePrimaryCtxRetain", err)) {
                goto err_destroy;
            }
            be->primary = true;
        }
        if (!mesh_cuda_push(be, err)) {
            goto err_destroy;
        }
        bool ok = mesh_cuda_pool_make(be, err);
        mesh_cuda_pop(be);
        if (!ok) {
            goto err_destroy;
        }
    }
    if (!mailbox_make(be, err)) {
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
