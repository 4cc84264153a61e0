/* SPDX-License-Identifier: BSD-3-Clause */
/* Internals of the CUDA backend: the run-time loaded libraries, the
 * compiler, the cubin reader.  Only src/mesh/cuda includes this.
 *
 * libcuda and nvJitLink are never linked: each user (a backend, a
 * compiler) dlopens what it needs into a table of function pointers built
 * from one X-macro list, so one build runs with and without a GPU.  A
 * CUresult or nvJitLinkResult never leaves src/mesh/cuda: mesh_cu_check and
 * mesh_njl_check turn them into messages that name the call and the
 * code's name ("system: cuMemHostRegister failed: CUDA_ERROR_INVALID_VALUE").
 *
 * A program's image in a context and the mailbox (cuda_image.c) are one
 * copy of code that both the backend (blink) and rig-cuda-worker (an MPS
 * worker, cuda_worker.c) run.
 */
#ifndef MESH_CUDA_INTERNAL_H
#define MESH_CUDA_INTERNAL_H

#include "config.h"

#include "mesh/backend.h"
#include "mesh/cuda.h"

#include <cuda.h>
#include <nvJitLink.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- libcuda ------------------------------------------------------------ */

/* The driver functions the backend needs (all must resolve).  cuda.h maps
 * several names to their _v2 symbols; the loader spells the mapped name. */
#define MESH_CU_FUNCS(X)                                                       \
    X(cuInit)                                                                  \
    X(cuDriverGetVersion)                                                      \
    X(cuGetErrorName)                                                          \
    X(cuDeviceGetCount)                                                        \
    X(cuDeviceGet)                                                             \
    X(cuDeviceGetName)                                                         \
    X(cuDeviceGetAttribute)                                                    \
    X(cuDeviceTotalMem)                                                        \
    X(cuDevicePrimaryCtxRetain)                                                \
    X(cuDevicePrimaryCtxRelease)                                               \
    X(cuCtxSetCurrent)                                                         \
    X(cuCtxGetCurrent)                                                         \
    X(cuCtxPushCurrent)                                                        \
    X(cuCtxPopCurrent)                                                         \
    X(cuCtxSynchronize)                                                        \
    X(cuCtxGetLimit)                                                           \
    X(cuCtxSetLimit)                                                           \
    X(cuMemGetInfo)                                                            \
    X(cuMemAlloc)                                                              \
    X(cuMemFree)                                                               \
    X(cuMemsetD8)                                                              \
    X(cuMemcpyDtoH)                                                            \
    X(cuMemcpyHtoD)                                                            \
    X(cuMemHostRegister)                                                       \
    X(cuMemHostUnregister)                                                     \
    X(cuMemHostGetDevicePointer)                                               \
    X(cuModuleLoadData)                                                        \
    X(cuModuleUnload)                                                          \
    X(cuModuleGetFunction)                                                     \
    X(cuModuleGetGlobal)                                                       \
    X(cuFuncGetAttribute)                                                      \
    X(cuFuncSetAttribute)                                                      \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                             \
    X(cuStreamCreate)                                                          \
    X(cuStreamQuery)                                                           \
    X(cuStreamSynchronize)                                                     \
    X(cuStreamDestroy)                                                         \
    X(cuEventCreate)                                                           \
    X(cuEventRecord)                                                           \
    X(cuEventQuery)                                                            \
    X(cuEventDestroy)                                                          \
    X(cuLaunchKernel)

/* Green contexts (CUDA 12.4 drivers and later): optional; without them an
 * SM partition is "unsupported: ". */
#define MESH_CU_GREEN_FUNCS(X)                                                 \
    X(cuDeviceGetDevResource)                                                  \
    X(cuDevSmResourceSplitByCount)                                             \
    X(cuDevResourceGenerateDesc)                                               \
    X(cuGreenCtxCreate)                                                        \
    X(cuGreenCtxDestroy)                                                       \
    X(cuCtxFromGreenCtx)

/* Stream operations that signal the host after a kernel: optional (the
 * rails measurements of tests/cuda/test_cuda_gpu.c use them; the backend
 * signals by points, cuda_ends.c). */
#define MESH_CU_SIGNAL_FUNCS(X)                                                \
    X(cuStreamWriteValue64)                                                    \
    X(cuLaunchHostFunc)

/* A dlopen'd libcuda. */
typedef struct {
    void *lib;
    bool green;   /* the green functions resolved */
    bool signals; /* the signal functions resolved */
#define MESH_CU_MEMBER(f) __typeof__(f) *f##_p;
    MESH_CU_FUNCS(MESH_CU_MEMBER)
    MESH_CU_GREEN_FUNCS(MESH_CU_MEMBER)
    MESH_CU_SIGNAL_FUNCS(MESH_CU_MEMBER)
#undef MESH_CU_MEMBER
} mesh_cu_lib;

/* Loads libcuda.so.1 from the system's library path (never the toolkit's
 * stubs) and cuInit(0)s it.  Errors: "unsupported: " with why (no driver,
 * a symbol missing, cuInit failing, e.g. CUDA_ERROR_NO_DEVICE); *cu is
 * unchanged then.  Release with mesh_cu_lib_close. */
bool mesh_cu_lib_open(mesh_cu_lib *cu, char **err);
void mesh_cu_lib_close(mesh_cu_lib *cu);

/* The name of r ("CUDA_ERROR_OUT_OF_MEMORY"); cu may be NULL. */
const char *mesh_cu_name(const mesh_cu_lib *cu, CUresult r);

/* True for CUDA_SUCCESS; else false with "<reason>: <call> failed: <NAME>"
 * (reason NULL: "system"). */
bool mesh_cu_check(const mesh_cu_lib *cu, CUresult r, const char *reason,
                   const char *call, char **err);

/* Whether r is one of the errors cuda.h calls sticky: "This leaves the
 * process in an inconsistent state and any further CUDA work will return
 * the same error. To continue using CUDA, the process must be terminated
 * and relaunched" (ILLEGAL_ADDRESS, LAUNCH_FAILED, LAUNCH_TIMEOUT,
 * HARDWARE_STACK_ERROR, ILLEGAL_INSTRUCTION, MISALIGNED_ADDRESS,
 * INVALID_ADDRESS_SPACE, INVALID_PC, TENSOR_MEMORY_LEAK; ASSERT: "the
 * context cannot be used anymore"). */
bool mesh_cu_sticky(CUresult r);

/* ---- nvJitLink ---------------------------------------------------------- */

/* nvJitLink exports each function under a versioned name
 * (__nvJitLinkCreate_13_0) that nvJitLink.h's inline wrappers call; the
 * loader asks for the versioned name of the headers it was built with,
 * then the plain one. */
#define MESH_NJL_FUNCS(X)                                                      \
    X(Create)                                                                  \
    X(Destroy)                                                                 \
    X(AddData)                                                                 \
    X(Complete)                                                                \
    X(GetLinkedCubinSize)                                                      \
    X(GetLinkedCubin)                                                          \
    X(GetErrorLogSize)                                                         \
    X(GetErrorLog)                                                             \
    X(GetInfoLogSize)                                                          \
    X(GetInfoLog)

#if CUDA_VERSION >= 13000
#define MESH_NJL_VERSIONED(n) __nvJitLink##n##_13_0
#define MESH_NJL_SUFFIX "_13_0"
#define MESH_NJL_SONAME "libnvJitLink.so.13"
#else
#define MESH_NJL_VERSIONED(n) __nvJitLink##n##_12_0
#define MESH_NJL_SUFFIX "_12_0"
#define MESH_NJL_SONAME "libnvJitLink.so.12"
#endif

/* A dlopen'd nvJitLink. */
typedef struct {
    void *lib;
    char *path; /* what was opened */
#define MESH_NJL_MEMBER(n) __typeof__(MESH_NJL_VERSIONED(n)) *n;
    MESH_NJL_FUNCS(MESH_NJL_MEMBER)
#undef MESH_NJL_MEMBER
    /* nvJitLinkVersion (unversioned, CUDA 12.3 and later); NULL: none. */
    nvJitLinkResult (*Version)(unsigned int *major, unsigned int *minor);
} mesh_njl_lib;

/* The nvJitLink directory: dir if not NULL, else $MESH_NVJITLINK_DIR, else
 * the MESH_NVJITLINK_DIR default. */
const char *mesh_njl_dir(const char *dir);

/* Loads nvJitLink from mesh_njl_dir(dir).  Errors: "unsupported: " (not
 * there, a symbol missing).  Release with mesh_njl_lib_close. */
bool mesh_njl_lib_open(mesh_njl_lib *j, const char *dir, char **err);
void mesh_njl_lib_close(mesh_njl_lib *j);

/* nvJitLink's version: nvJitLinkVersion's, else the major version of the
 * headers whose versioned symbols the loader found (minor 0). */
void mesh_njl_version(const mesh_njl_lib *j, unsigned *major, unsigned *minor);

/* The name of r ("NVJITLINK_ERROR_PTX_COMPILE"). */
const char *mesh_njl_name(nvJitLinkResult r);

/* True for NVJITLINK_SUCCESS; else false with "<reason>: <call> failed:
 * <NAME>" and, when log is not empty, ": " and the log. */
bool mesh_njl_check(nvJitLinkResult r, const char *reason, const char *call,
                    const char *log, char **err);

/* Compiles len bytes of PTX (name for messages) into a cubin for arch
 * ("sm_90"), capping registers at reg_cap (0: no cap).  *cubin is
 * malloc'd; *info (may be NULL) gets nvJitLink's info log (malloc'd, may
 * be empty), for which the compile runs with -verbose: the log then holds
 * ptxas's resource lines (mesh_njl_usage_parse).  Errors: "compile: " with
 * nvJitLink's error log, "nomem: ", "invalid: ". */
bool mesh_njl_compile(const mesh_njl_lib *j, const char *arch, uint32_t reg_cap,
                      const char *name, const void *ptx, size_t len,
                      uint8_t **cubin, size_t *cubin_len, char **info,
                      char **err);

/* What ptxas reported for one entry kernel. */
typedef struct {
    uint32_t regs;   /* registers per thread */
    uint32_t shared; /* static shared bytes per block (the kernel's own) */
    uint32_t stack;  /* stack frame bytes per thread */
} mesh_njl_usage;

/* Reads kernel's resources from an info log of mesh_njl_compile: ptxas's
 * "Used N registers, ..., M bytes smem" line after "Compiling entry
 * function '<kernel>'", and the stack frame line of its function
 * properties.  False (*out unchanged) for NULL or empty arguments, or when
 * the log reports no such line for kernel (a format this reader does not
 * know). */
bool mesh_njl_usage_parse(const char *log, const char *kernel,
                          mesh_njl_usage *out);

/* ---- the cubin ---------------------------------------------------------- */

/* What a cubin says about one kernel. */
typedef struct {
    uint32_t regs; /* registers per thread (EIATTR_REGCOUNT) */
    bool has_abi;  /* the image defines MESH_RT_ABI ... */
    uint32_t abi;  /* ... with this initial value */
} mesh_cubin_info;

/* Reads kernel's register count and the MESH_RT_ABI global from an ELF
 * cubin.  Errors: "compile: " (not a 64-bit ELF, truncated, no kernel of
 * that name). */
bool mesh_cubin_inspect(const uint8_t *cubin, size_t len, const char *kernel,
                        mesh_cubin_info *out, char **err);

/* ---- the compiler ------------------------------------------------------- */

/* Limits a compiler checks manifests against (0: unchecked). */
typedef struct {
    uint32_t max_threads;
    uint32_t max_shared;
} mesh_cuda_limits;

/* Makes the compiler for arch with limits lim (NULL: unchecked) from the
 * nvJitLink of dir (NULL: mesh_njl_dir's choice). */
bool mesh_cuda_compiler_make(const char *arch, const char *njl_dir,
                             const mesh_cuda_limits *lim, mesh_compiler **out,
                             char **err);

/* The version of the nvJitLink a compiler of mesh_cuda_compiler_make
 * links with (mesh_njl_version). */
void mesh_cuda_compiler_version(const mesh_compiler *c, unsigned *major,
                                unsigned *minor);

/* ---- a loaded image (cuda_image.c) -------------------------------------- */

/* What to load: a program's cubin and the manifest's shape. */
typedef struct {
    const char *name;  /* the program, for messages */
    const char *entry; /* the kernel */
    const void *code;  /* the cubin */
    uint32_t threads;  /* per node */
    uint32_t shared;   /* dynamic shared bytes per node */
    uint64_t scratch;  /* bytes of device scratch, 0: none */
    uint32_t reg_cap;  /* PX_REG_CAP */
} mesh_cuda_image_spec;

/* What a loaded image uses, as its mesh_kernel reports it.  Both kernels'
 * self (the blink path's and an MPS worker's) begin with one, so that one
 * kernel ops table (mesh_cuda_kernel_ops) serves both. */
typedef struct {
    uint32_t regs;       /* registers per thread */
    uint32_t local;      /* local (stack) bytes per thread */
    uint32_t max_blocks; /* resident blocks per SM (occupancy) */
    uint64_t scratch;    /* the scratch's device address, 0: none */
    bool mps;            /* an MPS worker's kernel (cuda_mps.c); else blink */
} mesh_cuda_usage;

/* The kernel ops over k->self's leading mesh_cuda_usage. */
bool mesh_cuda_k_regs(const mesh_kernel *k, uint32_t *out, char **err);
bool mesh_cuda_k_local_bytes(const mesh_kernel *k, uint32_t *out, char **err);
bool mesh_cuda_k_max_blocks(const mesh_kernel *k, uint32_t *out, char **err);
uint64_t mesh_cuda_k_scratch(const mesh_kernel *k);

/* A module loaded in the current context, with what a launch needs.  The
 * blink path holds one per kernel in the backend's context; an MPS worker
 * holds one in its own. */
typedef struct {
    mesh_cuda_usage use; /* first: see mesh_cuda_usage */
    CUmodule mod;
    CUfunction fn;
    uint64_t scratch_bytes;
    uint32_t threads;
    uint32_t shared;
    uint32_t reg_cap;
    /* Recorded after each launch: release waits for it (bounded). */
    CUevent last;
} mesh_cuda_image;

/* Loads s into the current context: module, entry, the MESH_RT_ABI check,
 * attributes (the dynamic shared memory limit raised when s->shared needs
 * it), occupancy, zeroed scratch.  Errors start with a LOAD_REASONS word
 * ("load: ", "abi: ", "limits: ") or are a driver call's ("system: ",
 * "nomem: "); on failure *im holds what was made: release it. */
bool mesh_cuda_image_load(const mesh_cu_lib *cu, const mesh_cuda_image_spec *s,
                          mesh_cuda_image *im, char **err);

/* A u32 global of the image.  Errors: "missing: " (no such global),
 * "invalid: " (not 4 bytes), a driver call's. */
bool mesh_cuda_image_global_u32(const mesh_cu_lib *cu,
                                const mesh_cuda_image *im, const char *name,
                                uint32_t *out, char **err);

/* Stores slot's PX_* words in the mailbox mb (host address) and launches
 * nodes nodes on stream with the kernel's parameters (mailbox device
 * address mb_dev, slot, scratch), then records im->last.  Errors:
 * "limits: " (the driver's launch refusals), "load: ". */
bool mesh_cuda_image_launch(const mesh_cu_lib *cu, const mesh_cuda_image *im,
                            CUstream stream, mesh_control_block *mb,
                            CUdeviceptr mb_dev, uint32_t slot, uint32_t nodes,
                            char **err);

/* Whether the image's last launch is over, waiting at most wait_ms (0:
 * asks once). */
bool mesh_cuda_image_idle(const mesh_cu_lib *cu, const mesh_cuda_image *im,
                          uint32_t wait_ms);

/* Waits at most wait_ms for the last launch, then frees scratch, event and
 * module (the context made current).  False when the launch still ran:
 * module and scratch stay (a leak, not a fault).  cuMemFree "may perform
 * implicit synchronization" (cuda.h): with other kernels of the context
 * resident it may wait for them, so the blink path calls it only when the
 * context is idle (cuda_launch.c). */
bool mesh_cuda_image_release(const mesh_cu_lib *cu, mesh_cuda_image *im,
                             uint32_t wait_ms);

/* ---- the mailbox (cuda_image.c) ----------------------------------------- */

/* The mailbox's bytes, a whole number of pages. */
#define MESH_CUDA_MAILBOX_BYTES                                                \
    (((size_t)MESH_CB_BYTES + 4095u) & ~(size_t)4095u)

/* A mailbox mapping, registered with cuMemHostRegister (DEVICEMAP |
 * PORTABLE) so that kernels of the current context reach it at dev. */
typedef struct {
    int fd; /* the memfd; -1: none */
    mesh_control_block *mb;
    CUdeviceptr dev;
    bool registered;
} mesh_cuda_mailbox;

/* Makes a zeroed mailbox memfd (fd < 0) or maps the mailbox fd (an MPS
 * worker: the block must carry MESH_CB_MAGIC and this MESH_RT_ABI), then,
 * when reg, registers it in the current context (a backend in MPS
 * isolation has none: its workers register their own mappings).  *out is
 * set only on success; it then owns fd. */
bool mesh_cuda_mailbox_map(const mesh_cu_lib *cu, int fd, bool reg,
                           mesh_cuda_mailbox *out, char **err);
void mesh_cuda_mailbox_unmap(const mesh_cu_lib *cu, mesh_cuda_mailbox *m);

#endif
