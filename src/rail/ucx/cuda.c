/* SPDX-License-Identifier: BSD-3-Clause */
/* libcuda loaded at run time, for registering end memory with the GPUs.
 *
 * libcuda stays off librig's link line: one build runs with and without a
 * GPU.  Without CUDA headers at build time, or without libcuda or a GPU at
 * run time, there is nothing to register and rails work the same. */
#include "config.h"

#include "ucx_internal.h"

#include <stdio.h>
#include <stdlib.h>

#if defined(RIG_HAVE_CUDA)

#include <cuda.h>
#include <dlfcn.h>

#define RIG_STR(x) #x
#define RIG_XSTR(x) RIG_STR(x)

/* The driver functions rig uses; cuda.h maps some names to their _v2
 * symbols, which RIG_XSTR spells out for dlsym. */
#define RIG_CUDA_FUNCS(X)                                                      \
    X(cuInit)                                                                  \
    X(cuDeviceGetCount)                                                        \
    X(cuDeviceGet)                                                             \
    X(cuDevicePrimaryCtxRetain)                                                \
    X(cuDevicePrimaryCtxRelease)                                               \
    X(cuCtxPushCurrent)                                                        \
    X(cuCtxPopCurrent)                                                         \
    X(cuMemHostRegister)                                                       \
    X(cuMemHostUnregister)                                                     \
    X(cuMemHostGetDevicePointer)                                               \
    X(cuGetErrorName)

struct rig_cuda {
    void *lib;
    CUdevice dev;
    CUcontext ctx;
    int ngpu;
#define RIG_CUDA_MEMBER(f) __typeof__(f) *f##_p;
    RIG_CUDA_FUNCS(RIG_CUDA_MEMBER)
#undef RIG_CUDA_MEMBER
};

static const char *cu_name(const rig_cuda *c, CUresult r)
{
    const char *s = NULL;
    if (c->cuGetErrorName_p(r, &s) != CUDA_SUCCESS || s == NULL) {
        return "unknown CUresult";
    }
    return s;
}

static rig_cuda *cuda_open(int *ngpu)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        return NULL;
    }
    rig_cuda *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        dlclose(lib);
        return NULL;
    }
    c->lib = lib;
#define RIG_CUDA_SYM(f)                                                        \
    c->f##_p = (__typeof__(f) *)dlsym(lib, RIG_XSTR(f));                       \
    if (c->f##_p == NULL) {                                                    \
        goto err_close;                                                        \
    }
    RIG_CUDA_FUNCS(RIG_CUDA_SYM)
#undef RIG_CUDA_SYM
    int n = 0;
    if (c->cuInit_p(0) != CUDA_SUCCESS ||
        c->cuDeviceGetCount_p(&n) != CUDA_SUCCESS || n <= 0) {
        goto err_close;
    }
    c->ngpu = n;
    *ngpu = n;
    return c;

err_close:
    dlclose(lib);
    free(c);
    return NULL;
}

rig_cuda *rig_cuda_load(void)
{
    int n = 0;
    rig_cuda *c = cuda_open(&n);
    if (c == NULL) {
        return NULL;
    }
    if (c->cuDeviceGet_p(&c->dev, 0) != CUDA_SUCCESS ||
        c->cuDevicePrimaryCtxRetain_p(&c->ctx, c->dev) != CUDA_SUCCESS) {
        dlclose(c->lib);
        free(c);
        return NULL;
    }
    return c;
}

void rig_cuda_unload(rig_cuda *c)
{
    if (c == NULL) {
        return;
    }
    c->cuDevicePrimaryCtxRelease_p(c->dev);
    /* libcuda stays loaded: unloading a driver library that set up
     * threads and handlers is not safe. */
    free(c);
}

bool rig_cuda_register(rig_cuda *c, void *p, size_t len, bool *owned,
                       char **err)
{
    CUresult r = c->cuCtxPushCurrent_p(c->ctx);
    if (r != CUDA_SUCCESS) {
        return rig_err(err, "system: cuCtxPushCurrent failed: %s",
                       cu_name(c, r));
    }
    r = c->cuMemHostRegister_p(
        p, len, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    bool mine = r == CUDA_SUCCESS;
    if (r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
        /* A UCX built with CUDA registers host memory itself in
         * ucp_mem_map when a context is current (uct_cuda_copy_mem_reg,
         * PORTABLE): registered is what GPUs need, if it is mapped for
         * them; the registration is UCX's to undo. */
        CUdeviceptr d = 0;
        r = c->cuMemHostGetDevicePointer_p(&d, p, 0);
    }
    CUcontext prev;
    c->cuCtxPopCurrent_p(&prev);
    if (r != CUDA_SUCCESS) {
        return rig_err(err, "system: cuMemHostRegister(%zu bytes) failed: %s",
                       len, cu_name(c, r));
    }
    *owned = mine;
    return true;
}

void rig_cuda_unregister(rig_cuda *c, void *p)
{
    if (c->cuCtxPushCurrent_p(c->ctx) != CUDA_SUCCESS) {
        return;
    }
    CUresult r = c->cuMemHostUnregister_p(p);
    if (r != CUDA_SUCCESS) {
        rig_log(RIG_LOG_WARN, "cuMemHostUnregister failed: %s", cu_name(c, r));
    }
    CUcontext prev;
    c->cuCtxPopCurrent_p(&prev);
}

void rig_cuda_describe(char *buf, size_t len)
{
    int n = 0;
    rig_cuda *c = cuda_open(&n);
    if (c == NULL) {
        snprintf(buf, len, "no (no libcuda.so.1 or no GPU)");
        return;
    }
    snprintf(buf, len,
             "yes (%d GPU%s; ends registered with "
             "cuMemHostRegister)",
             n, n == 1 ? "" : "s");
    free(c);
}

#else /* !RIG_HAVE_CUDA */

rig_cuda *rig_cuda_load(void)
{
    return NULL;
}

void rig_cuda_unload(rig_cuda *c)
{
    (void)c;
}

bool rig_cuda_register(rig_cuda *c, void *p, size_t len, bool *owned,
                       char **err)
{
    (void)c;
    (void)p;
    (void)len;
    (void)owned;
    return rig_err(err, "unsupported: built without CUDA headers");
}

void rig_cuda_unregister(rig_cuda *c, void *p)
{
    (void)c;
    (void)p;
}

void rig_cuda_describe(char *buf, size_t len)
{
    snprintf(buf, len, "no (built without CUDA headers)");
}

#endif
