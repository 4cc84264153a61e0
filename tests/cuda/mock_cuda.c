/* SPDX-License-Identifier: BSD-3-Clause */
/* A stand-in libcuda.so.1 that runs the example kernels on host threads.
 *
 * Only for tests/cuda/test_cuda_mock.sh: it lets the backend's host side
 * (dlopen list, caps, mailbox, load/launch/query/unload, blink through the
 * driver, occupancy, unload's wait, cuMemGetInfo accounting) run end to
 * end on a machine without a GPU.  It is no model of a GPU: "kernels" are
 * C emulations of examples/cuda/counter and pattern, one thread per launch
 * that plays every node, and device memory is host memory.  What it cannot
 * tell (the PTX's behaviour, real residency, mapped-memory coherence) is
 * left to mpi_tests/gpu/device-check.sh on hardware. */
#include <cuda.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MOCK_EXPORT __attribute__((visibility("default")))
#define MOCK_TOTAL (16ull << 30)

struct CUctx_st {
    int unused;
};
struct CUfunc_st {
    char name[64];
    struct CUfunc_st *next; /* the module's functions, as CUDA owns them */
};
struct CUmod_st {
    uint32_t abi;
    struct CUfunc_st *funcs;
};
struct CUevent_st {
    struct CUstream_st *stream;
    uint64_t gen;
};
typedef struct {
    unsigned char *mb;
    unsigned slot, nodes;
    void *scratch;
    int kind; /* 0 counter, 1 pattern */
} launch_args;
struct CUstream_st {
    pthread_t thread;
    bool started;
    atomic_bool done;
    uint64_t gen; /* launches started */
    launch_args a;
};

static struct CUctx_st primary;
static atomic_ullong allocated;
static size_t stack_limit = 1024;

#define SLOT(mb, s, off) ((mb) + 256u + (s)*256u + (off))

static void *run_kernel(void *p)
{
    struct CUstream_st *s = p;
    launch_args *a = &s->a;
    _Atomic uint32_t *online = (void *)SLOT(a->mb, a->slot, 64u);
    _Atomic uint32_t *exited = (void *)SLOT(a->mb, a->slot, 68u);
    _Atomic uint32_t *halt = (void *)SLOT(a->mb, a->slot, 4u);
    _Atomic uint64_t *point = (void *)SLOT(a->mb, a->slot, 128u);
    atomic_fetch_add(online, a->nodes);
    if (a->kind == 0) {
        uint64_t *count = a->scratch;
        while (atomic_load(halt) == 0) {
            if (count != NULL) {
                uint64_t c = ++count[0];
                uint64_t old = atomic_load(point);
                while (old < c &&
                       !atomic_compare_exchange_weak(point, &old, c)) {
                }
            }
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    } else {
        uint64_t bytes = *(uint64_t *)SLOT(a->mb, a->slot, 32u);
        uint32_t *w = a->scratch;
        for (uint64_t i = 0; i < bytes / 4; i++) {
            w[i] = (uint32_t)i * 2654435761u + 1u;
        }
        atomic_store(point, bytes / 4);
    }
    atomic_fetch_add(exited, a->nodes);
    atomic_store(&s->done, true);
    return NULL;
}

static void join(struct CUstream_st *s)
{
    if (s->started) {
        pthread_join(s->thread, NULL);
        s->started = false;
    }
}

MOCK_EXPORT CUresult CUDAAPI cuInit(unsigned int f)
{
    (void)f;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuDriverGetVersion(int *v)
{
    *v = CUDA_VERSION;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuGetErrorName(CUresult e, const char **s)
{
    *s = e == CUDA_ERROR_NOT_READY ? "CUDA_ERROR_NOT_READY" : "CUDA_ERROR_MOCK";
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuDeviceGetCount(int *n)
{
    *n = 1;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice *d, int o)
{
    if (o != 0) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *d = 0;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuDeviceGetName(char *n, int len, CUdevice d)
{
    (void)d;
    strncpy(n, "Mock GPU", (size_t)len);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int *v, CUdevice_attribute a,
                                                  CUdevice d)
{
    (void)d;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        *v = 9;
        break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        *v = 0;
        break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        *v = 4;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
        *v = 32;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *v = 1024;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
        *v = 232448;
        break;
    /* An H100's SM: what the backend's admission check estimates from. */
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
        *v = 65536;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
        *v = 2048;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
        *v = 233472;
        break;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK:
        *v = 1024;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuDeviceTotalMem(size_t *b, CUdevice d)
{
    (void)d;
    *b = MOCK_TOTAL;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    (void)d;
    *c = &primary;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d)
{
    (void)d;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext c)
{
    return c == &primary ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
MOCK_EXPORT CUresult CUDAAPI cuCtxSynchronize(void)
{
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuCtxGetLimit(size_t *v, CUlimit l)
{
    (void)l;
    *v = stack_limit;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuCtxSetLimit(CUlimit l, size_t v)
{
    (void)l;
    stack_limit = v;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuMemGetInfo(size_t *f, size_t *t)
{
    *t = MOCK_TOTAL;
    *f = MOCK_TOTAL - atomic_load(&allocated);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr *p, size_t n)
{
    size_t *b = calloc(1, n + 16);
    if (b == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    b[0] = n;
    atomic_fetch_add(&allocated, n);
    *p = (CUdeviceptr)(uintptr_t)(b + 2);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr p)
{
    size_t *b = (size_t *)(uintptr_t)p - 2;
    atomic_fetch_sub(&allocated, b[0]);
    free(b);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuMemsetD8(CUdeviceptr p, unsigned char c,
                                        size_t n)
{
    memset((void *)(uintptr_t)p, c, n);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuMemcpyDtoH(void *d, CUdeviceptr s, size_t n)
{
    memcpy(d, (void *)(uintptr_t)s, n);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr d, const void *s,
                                          size_t n)
{
    memcpy((void *)(uintptr_t)d, s, n);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuMemHostRegister(void *p, size_t n,
                                               unsigned int f)
{
    (void)p;
    (void)n;
    (void)f;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuMemHostUnregister(void *p)
{
    (void)p;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr *d, void *p,
                                                       unsigned int f)
{
    (void)f;
    *d = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuModuleLoadData(CUmodule *m, const void *img)
{
    if (memcmp(img, "\177ELF", 4) != 0) {
        return CUDA_ERROR_INVALID_IMAGE;
    }
    *m = calloc(1, sizeof(**m));
    (*m)->abi = 1;
    atomic_fetch_add(&allocated, 4096);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuModuleUnload(CUmodule m)
{
    atomic_fetch_sub(&allocated, 4096);
    while (m->funcs != NULL) {
        struct CUfunc_st *f = m->funcs;
        m->funcs = f->next;
        free(f);
    }
    free(m);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule m,
                                                 const char *name)
{
    if (strcmp(name, "counter") != 0 && strcmp(name, "pattern") != 0) {
        return CUDA_ERROR_NOT_FOUND;
    }
    *f = calloc(1, sizeof(**f));
    strncpy((*f)->name, name, sizeof((*f)->name) - 1);
    (*f)->next = m->funcs;
    m->funcs = *f;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr *p, size_t *n,
                                               CUmodule m, const char *name)
{
    if (strcmp(name, "MESH_RT_ABI") != 0) {
        return CUDA_ERROR_NOT_FOUND;
    }
    *p = (CUdeviceptr)(uintptr_t)&m->abi;
    *n = 4;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuFuncGetAttribute(int *v, CUfunction_attribute a,
                                                CUfunction f)
{
    (void)f;
    *v = a == CU_FUNC_ATTRIBUTE_NUM_REGS ? 10 : 0;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuFuncSetAttribute(CUfunction f,
                                                CUfunction_attribute a, int v)
{
    (void)f;
    (void)a;
    return v <= 232448 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
MOCK_EXPORT CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(
    int *n, CUfunction f, int threads, size_t shared)
{
    (void)f;
    int by_shared = (int)(233472 / (shared + 1024));
    int by_threads = 2048 / threads;
    *n = by_shared < by_threads ? by_shared : by_threads;
    *n = *n > 32 ? 32 : *n;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuStreamCreate(CUstream *s, unsigned int f)
{
    (void)f;
    *s = calloc(1, sizeof(**s));
    atomic_store(&(*s)->done, true);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuStreamQuery(CUstream s)
{
    return atomic_load(&s->done) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
MOCK_EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream s)
{
    join(s);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuStreamDestroy(CUstream s)
{
    join(s);
    free(s);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned int f)
{
    (void)f;
    *e = calloc(1, sizeof(**e));
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s)
{
    e->stream = s;
    e->gen = s->gen;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuEventQuery(CUevent e)
{
    /* Only the stream's latest launch is tracked: enough for one kernel
     * per stream, as the backend launches. */
    if (e->stream == NULL || e->stream->gen != e->gen) {
        return CUDA_SUCCESS;
    }
    return atomic_load(&e->stream->done) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
MOCK_EXPORT CUresult CUDAAPI cuEventDestroy(CUevent e)
{
    free(e);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx,
                                            unsigned gy, unsigned gz,
                                            unsigned bx, unsigned by,
                                            unsigned bz, unsigned shared,
                                            CUstream s, void **params,
                                            void **extra)
{
    (void)gy;
    (void)gz;
    (void)bx;
    (void)by;
    (void)bz;
    (void)shared;
    (void)extra;
    if (!atomic_load(&s->done)) {
        return CUDA_ERROR_LAUNCH_FAILED; /* no queueing in this mock */
    }
    join(s); /* the previous launch of the stream is over */
    s->a.mb = (unsigned char *)(uintptr_t) * (CUdeviceptr *)params[0];
    s->a.slot = *(unsigned *)params[1];
    s->a.scratch = (void *)(uintptr_t) * (CUdeviceptr *)params[2];
    s->a.nodes = gx;
    s->a.kind = strcmp(f->name, "counter") == 0 ? 0 : 1;
    atomic_store(&s->done, false);
    s->gen++;
    if (pthread_create(&s->thread, NULL, run_kernel, s) != 0) {
        atomic_store(&s->done, true);
        return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    }
    s->started = true;
    return CUDA_SUCCESS;
}
