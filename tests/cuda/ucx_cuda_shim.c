/* SPDX-License-Identifier: BSD-3-Clause */
/* An LD_PRELOAD stand-in for what a UCX built with CUDA does to host memory.
 *
 * Such a UCX registers host memory itself in ucp_mem_map, with
 * cuMemHostRegister(PORTABLE), whenever a CUDA context is current on the
 * calling thread, and unregisters it in ucp_mem_unmap (openucx/ucx
 * src/uct/cuda/cuda_copy/cuda_copy_md.c, uct_cuda_copy_mem_reg and
 * _dereg).  The UCX of a test machine is usually built without CUDA; this
 * library, put in front of it, does the same, so that rails' own
 * registration of end memory meets CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
 * as it would on a GPU cluster.  It works with the stand-in driver and a
 * real one.  With CUDA_SHIM_LOG set, each registration and
 * unregistration appends a line to that file:
 *   register <address> <bytes> <CUresult>
 *   unregister <address> <CUresult> */
#include <cuda.h>
#include <ucp/api/ucp.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define SHIM_EXPORT __attribute__((visibility("default")))
#define SHIM_MAX 4096

typedef ucs_status_t (*map_fn)(ucp_context_h, const ucp_mem_map_params_t *,
                               ucp_mem_h *);
typedef ucs_status_t (*unmap_fn)(ucp_context_h, ucp_mem_h);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    ucp_mem_h memh;
    void *address;
} regs[SHIM_MAX];

/* Appends line to $CUDA_SHIM_LOG, when set. */
static void note(const char *line)
{
    const char *path = getenv("CUDA_SHIM_LOG");
    FILE *f = path != NULL ? fopen(path, "a") : NULL;
    if (f != NULL) {
        fputs(line, f);
        fclose(f);
    }
}

SHIM_EXPORT ucs_status_t ucp_mem_map(ucp_context_h c,
                                     const ucp_mem_map_params_t *params,
                                     ucp_mem_h *memh)
{
    map_fn real = (map_fn)dlsym(RTLD_NEXT, "ucp_mem_map");
    ucs_status_t st = real(c, params, memh);
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (st != UCS_OK || lib == NULL) {
        if (lib != NULL) {
            dlclose(lib);
        }
        return st;
    }
    CUresult (*current)(CUcontext *) =
        (CUresult(*)(CUcontext *))dlsym(lib, "cuCtxGetCurrent");
    CUresult (*reg)(void *, size_t, unsigned) =
        (CUresult(*)(void *, size_t, unsigned))dlsym(lib,
                                                     "cuMemHostRegister_v2");
    CUcontext ctx = NULL;
    ucp_mem_attr_t a = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS |
                                      UCP_MEM_ATTR_FIELD_LENGTH};
    /* Found at run time: a process without UCX never gets here, and this
     * library, preloaded everywhere, pulls no UCX into the others. */
    ucs_status_t (*query)(const ucp_mem_h, ucp_mem_attr_t *) = (ucs_status_t(*)(
        const ucp_mem_h, ucp_mem_attr_t *))dlsym(RTLD_DEFAULT, "ucp_mem_query");
    if (current != NULL && reg != NULL && query != NULL &&
        current(&ctx) == CUDA_SUCCESS && ctx != NULL &&
        query(*memh, &a) == UCS_OK) {
        CUresult r = reg(a.address, a.length, CU_MEMHOSTREGISTER_PORTABLE);
        char line[128];
        snprintf(line, sizeof(line), "register %p %zu %d\n", a.address,
                 a.length, (int)r);
        note(line);
        pthread_mutex_lock(&lock);
        for (int i = 0; r == CUDA_SUCCESS && i < SHIM_MAX; i++) {
            if (regs[i].memh == NULL) {
                regs[i].memh = *memh;
                regs[i].address = a.address;
                break;
            }
        }
        pthread_mutex_unlock(&lock);
    }
    dlclose(lib);
    return st;
}

SHIM_EXPORT ucs_status_t ucp_mem_unmap(ucp_context_h c, ucp_mem_h memh)
{
    void *address = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < SHIM_MAX; i++) {
        if (regs[i].memh == memh) {
            address = regs[i].address;
            regs[i].memh = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    void *lib =
        address != NULL ? dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (lib != NULL) {
        /* UCX's dereg runs in whatever context is current; the device's
         * primary one stands in for it here. */
        CUresult (*retain)(CUcontext *, CUdevice) = (CUresult(*)(
            CUcontext *, CUdevice))dlsym(lib, "cuDevicePrimaryCtxRetain");
        CUresult (*release)(CUdevice) =
            (CUresult(*)(CUdevice))dlsym(lib, "cuDevicePrimaryCtxRelease_v2");
        CUresult (*push)(CUcontext) =
            (CUresult(*)(CUcontext))dlsym(lib, "cuCtxPushCurrent_v2");
        CUresult (*pop)(CUcontext *) =
            (CUresult(*)(CUcontext *))dlsym(lib, "cuCtxPopCurrent_v2");
        CUresult (*unreg)(void *) =
            (CUresult(*)(void *))dlsym(lib, "cuMemHostUnregister");
        CUcontext ctx = NULL, prev = NULL;
        if (retain != NULL && release != NULL && push != NULL && pop != NULL &&
            unreg != NULL && retain(&ctx, 0) == CUDA_SUCCESS) {
            push(ctx);
            CUresult r = unreg(address);
            pop(&prev);
            release(0);
            char line[128];
            snprintf(line, sizeof(line), "unregister %p %d\n", address, (int)r);
            note(line);
        }
        dlclose(lib);
    }
    unmap_fn real = (unmap_fn)dlsym(RTLD_NEXT, "ucp_mem_unmap");
    return real(c, memh);
}
