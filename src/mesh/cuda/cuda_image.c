/* SPDX-License-Identifier: BSD-3-Clause */
/* A program's image in a context and the mailbox: what the blink path and
 * the MPS workers both run.
 *
 * One copy of the code that loads a module, checks MESH_RT_ABI, measures
 * occupancy, allocates scratch, hands a launch its parameters (mailbox,
 * slot, scratch) and registers the mailbox, so that a program runs the same
 * in the backend's own context and in an MPS worker's. */
#include "cuda_internal.h"

#include "../../util/util_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the image ---------------------------------------------------------- */

bool mesh_cuda_image_global_u32(const mesh_cu_lib *cu,
                                const mesh_cuda_image *im, const char *name,
                                uint32_t *out, char **err)
{
    CUdeviceptr p = 0;
    size_t n = 0;
    CUresult r = cu->cuModuleGetGlobal_p(&p, &n, im->mod, name);
    if (r == CUDA_ERROR_NOT_FOUND) {
        return rig_err(err, "missing: the image has no global %s", name);
    }
    if (!mesh_cu_check(cu, r, NULL, "cuModuleGetGlobal", err)) {
        return false;
    }
    if (n != sizeof(uint32_t)) {
        return rig_err(err, "invalid: global %s has %zu bytes, not 4", name, n);
    }
    return mesh_cu_check(cu, cu->cuMemcpyDtoH_p(out, p, sizeof(*out)), NULL,
                         "cuMemcpyDtoH", err);
}

bool mesh_cuda_image_load(const mesh_cu_lib *cu, const mesh_cuda_image_spec *s,
                          mesh_cuda_image *im, char **err)
{
    const char *name = s->name;
    CUresult r = cu->cuModuleLoadData_p(&im->mod, s->code);
    if (r != CUDA_SUCCESS) {
        im->mod = NULL;
        return rig_err(err, "load: program %s: cuModuleLoadData failed: %s",
                       name, mesh_cu_name(cu, r));
    }
    r = cu->cuModuleGetFunction_p(&im->fn, im->mod, s->entry);
    if (r != CUDA_SUCCESS) {
        return rig_err(err,
                       "load: program %s: no kernel %s "
                       "(cuModuleGetFunction: %s)",
                       name, s->entry, mesh_cu_name(cu, r));
    }
    uint32_t abi = 0;
    if (!mesh_cuda_image_global_u32(cu, im, "MESH_RT_ABI", &abi, err)) {
        return rig_err_wrap(err, "abi: program %s", name);
    }
    if (abi != MESH_RT_ABI_VERSION) {
        return rig_err(err,
                       "abi: program %s's image has MESH_RT_ABI %u; "
                       "this runtime is %u",
                       name, abi, MESH_RT_ABI_VERSION);
    }
    int regs = 0, local = 0, blocks = 0;
    if (!mesh_cu_check(
            cu,
            cu->cuFuncGetAttribute_p(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, im->fn),
            NULL, "cuFuncGetAttribute(NUM_REGS)", err) ||
        !mesh_cu_check(cu,
                       cu->cuFuncGetAttribute_p(
                           &local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, im->fn),
                       NULL, "cuFuncGetAttribute(LOCAL_SIZE_BYTES)", err)) {
        return false;
    }
    /* A function may use CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
     * of dynamic shared memory, "If the user-specified dynamic shared
     * memory size is larger than this value, the launch will fail"; its
     * default leaves room for the static shared memory under 48 KiB, so
     * the test is against the function's own limit, not 48 KiB.  Raising
     * it is refused when it and the static size exceed the opt-in limit
     * (cuda.h, cuFuncGetAttribute and cuFuncSetAttribute). */
    int max_dyn = 0, stat = 0;
    if (!mesh_cu_check(
            cu,
            cu->cuFuncGetAttribute_p(
                &max_dyn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                im->fn),
            NULL, "cuFuncGetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", err) ||
        !mesh_cu_check(cu,
                       cu->cuFuncGetAttribute_p(
                           &stat, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, im->fn),
                       NULL, "cuFuncGetAttribute(SHARED_SIZE_BYTES)", err)) {
        return false;
    }
    if (s->shared > (uint32_t)max_dyn) {
        r = cu->cuFuncSetAttribute_p(
            im->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            (int)s->shared);
        if (r != CUDA_SUCCESS) {
            return rig_err(err,
                           "limits: program %s: %u bytes of dynamic shared "
                           "memory and the kernel's %d static ones exceed "
                           "what a node may have "
                           "(cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"
                           ": %s)",
                           name, s->shared, stat, mesh_cu_name(cu, r));
        }
    }
    if (!mesh_cu_check(cu,
                       cu->cuOccupancyMaxActiveBlocksPerMultiprocessor_p(
                           &blocks, im->fn, (int)s->threads, (size_t)s->shared),
                       NULL, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                       err)) {
        return false;
    }
    if (blocks <= 0) {
        return rig_err(err,
                       "limits: program %s: not one node of %u threads "
                       "(%d registers, %u B shared) fits on an SM",
                       name, s->threads, regs, s->shared);
    }
    im->use.regs = (uint32_t)regs;
    im->use.local = (uint32_t)local;
    im->use.max_blocks = (uint32_t)blocks;
    if (s->scratch > 0) {
        CUdeviceptr dev = 0;
        r = cu->cuMemAlloc_p(&dev, (size_t)s->scratch);
        im->use.scratch = r == CUDA_SUCCESS ? (uint64_t)dev : 0;
        if (r == CUDA_ERROR_OUT_OF_MEMORY) {
            return rig_err(err,
                           "limits: program %s: no %llu bytes of device "
                           "memory for its scratch",
                           name, (unsigned long long)s->scratch);
        }
        if (!mesh_cu_check(cu, r, NULL, "cuMemAlloc", err) ||
            !mesh_cu_check(cu, cu->cuMemsetD8_p(dev, 0, (size_t)s->scratch),
                           NULL, "cuMemsetD8", err)) {
            return false;
        }
    }
    if (!mesh_cu_check(cu,
                       cu->cuEventCreate_p(&im->last, CU_EVENT_DISABLE_TIMING),
                       NULL, "cuEventCreate", err)) {
        im->last = NULL;
        return false;
    }
    im->scratch_bytes = s->scratch;
    im->threads = s->threads;
    im->shared = s->shared;
    im->reg_cap = s->reg_cap;
    return true;
}

bool mesh_cuda_image_launch(const mesh_cu_lib *cu, const mesh_cuda_image *im,
                            CUstream stream, mesh_control_block *mb,
                            CUdeviceptr mb_dev, uint32_t slot, uint32_t nodes,
                            char **err)
{
    /* PX_* words: what the executor hands the program. */
    mesh_cb_slot *s = &mb->slot[slot];
    atomic_store_explicit(&s->scratch, im->use.scratch, memory_order_release);
    atomic_store_explicit(&s->scratch_bytes, im->scratch_bytes,
                          memory_order_release);
    atomic_store_explicit(&s->reg_cap, im->reg_cap, memory_order_release);
    CUdeviceptr mbp = mb_dev;
    unsigned int sl = slot;
    CUdeviceptr scratch = (CUdeviceptr)im->use.scratch;
    void *params[] = {&mbp, &sl, &scratch};
    CUresult r = cu->cuLaunchKernel_p(im->fn, nodes, 1, 1, im->threads, 1, 1,
                                      im->shared, stream, params, NULL);
    if (r != CUDA_SUCCESS) {
        return mesh_cu_check(cu, r,
                             r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES ||
                                     r == CUDA_ERROR_INVALID_VALUE
                                 ? "limits"
                                 : "load",
                             "cuLaunchKernel", err);
    }
    r = cu->cuEventRecord_p(im->last, stream);
    if (r != CUDA_SUCCESS) {
        rig_log(RIG_LOG_WARN,
                "mesh: cuda: cuEventRecord failed: %s; unload "
                "will not wait for slot %u",
                mesh_cu_name(cu, r), slot);
    }
    return true;
}

/* Unloading a module under a running kernel is undefined (cuda.h,
 * cuModuleUnload's \note_destroy_ub): release waits for this first.  A
 * sticky error answers every query: the kernel is gone with its context. */
bool mesh_cuda_image_idle(const mesh_cu_lib *cu, const mesh_cuda_image *im,
                          uint32_t wait_ms)
{
    if (im->last == NULL) {
        return true;
    }
    uint64_t limit = (uint64_t)wait_ms * 1000000u;
    uint64_t t0 = rig_now_ns();
    rig_backoff bo = {0};
    while (cu->cuEventQuery_p(im->last) == CUDA_ERROR_NOT_READY) {
        if (rig_now_ns() - t0 >= limit) {
            return false;
        }
        rig_backoff_step(&bo);
    }
    return true;
}

bool mesh_cuda_image_release(const mesh_cu_lib *cu, mesh_cuda_image *im,
                             uint32_t wait_ms)
{
    if (!mesh_cuda_image_idle(cu, im, wait_ms)) {
        return false;
    }
    if (im->last != NULL) {
        cu->cuEventDestroy_p(im->last);
        im->last = NULL;
    }
    if (im->use.scratch != 0) {
        cu->cuMemFree_p((CUdeviceptr)im->use.scratch);
        im->use.scratch = 0;
    }
    if (im->mod != NULL) {
        cu->cuModuleUnload_p(im->mod);
        im->mod = NULL;
    }
    return true;
}

/* ---- the mailbox -------------------------------------------------------- */

bool mesh_cuda_mailbox_map(const mesh_cu_lib *cu, int fd, bool reg,
                           mesh_cuda_mailbox *out, char **err)
{
    const size_t bytes = MESH_CUDA_MAILBOX_BYTES;
    bool make = fd < 0;
    if (make) {
        fd = memfd_create("rig-cuda-mailbox", MFD_CLOEXEC);
        if (fd < 0) {
            return rig_err(err, "system: memfd_create failed: %s",
                           strerror(errno));
        }
        if (ftruncate(fd, (off_t)bytes) != 0) {
            rig_err(err, "system: ftruncate of the mailbox failed: %s",
                    strerror(errno));
            goto err_close;
        }
    } else {
        /* A shorter file maps, then faults (SIGBUS) on the first access. */
        struct stat st;
        if (fstat(fd, &st) != 0 || st.st_size < (off_t)bytes) {
            rig_err(err, "invalid: fd %d is not a CUDA mailbox", fd);
            goto err_close;
        }
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        rig_err(err, "system: mmap of the mailbox failed: %s", strerror(errno));
        goto err_close;
    }
    mesh_control_block *mb = p;
    if (make) {
        memset(p, 0, bytes);
    } else if (atomic_load_explicit(&mb->h.magic, memory_order_acquire) !=
                   MESH_CB_MAGIC ||
               mb->h.abi != MESH_RT_ABI_VERSION) {
        rig_err(err,
                "abi: the mailbox (fd %d) has magic %08x and ABI %u; this "
                "runtime is %u",
                fd, (unsigned)atomic_load(&mb->h.magic), mb->h.abi,
                MESH_RT_ABI_VERSION);
        goto err_unmap;
    }
    CUdeviceptr dev = 0;
    if (reg) {
        if (!mesh_cu_check(
                cu,
                cu->cuMemHostRegister_p(p, bytes,
                                        CU_MEMHOSTREGISTER_DEVICEMAP |
                                            CU_MEMHOSTREGISTER_PORTABLE),
                NULL, "cuMemHostRegister", err)) {
            goto err_unmap;
        }
        if (!mesh_cu_check(cu, cu->cuMemHostGetDevicePointer_p(&dev, p, 0),
                           NULL, "cuMemHostGetDevicePointer", err)) {
            cu->cuMemHostUnregister_p(p);
            goto err_unmap;
        }
    }
    out->fd = fd;
    out->mb = mb;
    out->dev = dev;
    out->registered = reg;
    return true;
err_unmap:
    munmap(p, bytes);
err_close:
    close(fd);
    return false;
}

void mesh_cuda_mailbox_unmap(const mesh_cu_lib *cu, mesh_cuda_mailbox *m)
{
    if (m->mb != NULL) {
        if (m->registered) {
            cu->cuMemHostUnregister_p(m->mb);
        }
        munmap(m->mb, MESH_CUDA_MAILBOX_BYTES);
        m->mb = NULL;
        m->registered = false;
    }
    if (m->fd >= 0) {
        close(m->fd);
        m->fd = -1;
    }
}

/* ---- the kernel ops both paths share ---------------------------------- */

static const mesh_cuda_usage *usage_of(const mesh_kernel *k)
{
    return k != NULL ? k->self : NULL;
}

bool mesh_cuda_k_regs(const mesh_kernel *k, uint32_t *out, char **err)
{
    const mesh_cuda_usage *u = usage_of(k);
    if (u == NULL || out == NULL) {
        return rig_err(err, "invalid: cuda kernel regs: NULL argument");
    }
    *out = u->regs;
    return true;
}

bool mesh_cuda_k_local_bytes(const mesh_kernel *k, uint32_t *out, char **err)
{
    const mesh_cuda_usage *u = usage_of(k);
    if (u == NULL || out == NULL) {
        return rig_err(err, "invalid: cuda kernel local bytes: NULL argument");
    }
    *out = u->local;
    return true;
}

bool mesh_cuda_k_max_blocks(const mesh_kernel *k, uint32_t *out, char **err)
{
    const mesh_cuda_usage *u = usage_of(k);
    if (u == NULL || out == NULL) {
        return rig_err(err,
                       "invalid: cuda kernel blocks per SM: NULL argument");
    }
    *out = u->max_blocks;
    return true;
}

uint64_t mesh_cuda_k_scratch(const mesh_kernel *k)
{
    const mesh_cuda_usage *u = usage_of(k);
    return u != NULL ? u->scratch : 0;
}
