/* SPDX-License-Identifier: BSD-3-Clause */
/* Rails' end memory registered with CUDA while a CUDA context is current,
 * beside the CUDA backend.
 *
 * A UCX built with CUDA registers host memory itself in ucp_mem_map when a
 * context is current on the calling thread; rails' own cuMemHostRegister of
 * that memory then gets CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, which
 * must not fail the rail (RIG_CUDA=on makes a registration failure fatal):
 * the memory is registered, which is what GPUs borrowing it need.  And the
 * CUDA backend must leave the caller's current context as it found it.
 *
 * Run on 2 ranks by tests/cuda/test_cuda_endreg.sh (the stand-in driver,
 * and tests/cuda/ucx_cuda_shim.c preloaded to play a UCX built with CUDA)
 * and by mpi_tests/gpu/device-check.sh (a real driver, the same shim).
 * Each rank: opens the CUDA backend and runs a program on it; makes the
 * device's primary context current, as a CUDA application does; opens a
 * job with RIG_CUDA=on and makes a rail to its peer (ends registered
 * there), carries data both ways, and checks a GPU reaches the inbound
 * end (cuMemHostGetDevicePointer).  Prints "ENDREG: ..." and rank 0
 * "RESULT end registration: PASS"; "SKIP: why" without a GPU. */
#include "mpitest.h"

#include <mesh/driver.h>
#include <mesh/executors.h>
#include <rig/job.h>

#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ENDREG_BYTES 4096
#define ENDREG_RUNS 16

static int rank, size;

/* The driver functions the test calls itself. */
static struct {
    CUresult (*init)(unsigned);
    CUresult (*get)(CUdevice *, int);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*release)(CUdevice);
    CUresult (*push)(CUcontext);
    CUresult (*pop)(CUcontext *);
    CUresult (*current)(CUcontext *);
    CUresult (*devptr)(CUdeviceptr *, void *, unsigned);
} cu;

static bool cuda_load(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        return false;
    }
    cu.init = (CUresult(*)(unsigned))dlsym(lib, "cuInit");
    cu.get = (CUresult(*)(CUdevice *, int))dlsym(lib, "cuDeviceGet");
    cu.retain = (CUresult(*)(CUcontext *, CUdevice))dlsym(
        lib, "cuDevicePrimaryCtxRetain");
    cu.release =
        (CUresult(*)(CUdevice))dlsym(lib, "cuDevicePrimaryCtxRelease_v2");
    cu.push = (CUresult(*)(CUcontext))dlsym(lib, "cuCtxPushCurrent_v2");
    cu.pop = (CUresult(*)(CUcontext *))dlsym(lib, "cuCtxPopCurrent_v2");
    cu.current = (CUresult(*)(CUcontext *))dlsym(lib, "cuCtxGetCurrent");
    cu.devptr = (CUresult(*)(CUdeviceptr *, void *, unsigned))dlsym(
        lib, "cuMemHostGetDevicePointer_v2");
    return cu.init != NULL && cu.get != NULL && cu.retain != NULL &&
           cu.release != NULL && cu.push != NULL && cu.pop != NULL &&
           cu.current != NULL && cu.devptr != NULL && cu.init(0) == 0;
}

/* A counter on the backend for a moment, with ctx current on this thread
 * throughout: the backend must leave it current. */
static void run_program(mesh_backend *be, CUcontext ctx)
{
    mesh_driver *d = NULL;
    mesh_payload src;
    mesh_prepared p;
    uint32_t slot = 0;
    T_OK(mesh_driver_open(be, &d, &t_err));
    T_OK(mesh_payload_read(CUDA_CATALOG_DIR, "counter", &src, &t_err));
    T_OK(mesh_driver_prepare(d, &src, NULL, NULL, &p, &t_err));
    T_OK(mesh_driver_start(d, &p, 2, &slot, &t_err));
    for (int i = 0; i < 100000 && mesh_driver_point(d, slot, 0) == 0; i++) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    T_ASSERT(mesh_driver_point(d, slot, 0) > 0);
    T_OK(mesh_driver_stop(d, slot, &t_err));
    mesh_driver_close(d);
    CUcontext now = NULL;
    cu.current(&now);
    if (now != ctx) {
        T_FAIL("the CUDA backend left context %p current; the caller's "
               "was %p",
               (void *)now, (void *)ctx);
    }
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    t_rank = rank;
    if (size != 2) {
        T_FAIL("run on 2 ranks, not %d", size);
    }
    mesh_backend *be = NULL;
    char *why = NULL;
    int have =
        cuda_load() && mesh_backend_open(MESH_BACKEND_CUDA, NULL, &be, &why);
    int all = 0;
    MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
        if (rank == 0) {
            printf("SKIP: no CUDA backend here: %s\n",
                   why != NULL ? why
                               : "unsupported: no CUDA driver (no usable "
                                 "libcuda.so.1)");
        }
        free(why);
        mesh_backend_destroy(be);
        MPI_Finalize();
        return 0;
    }
    /* The device's primary context current, as a CUDA application has it
     * (cudaSetDevice); rails and the backend must both live with that. */
    CUdevice dev = 0;
    CUcontext ctx = NULL;
    T_ASSERT(cu.get(&dev, 0) == 0 && cu.retain(&ctx, dev) == 0);
    T_ASSERT(cu.push(ctx) == 0);
    run_program(be, ctx);

    rig_job_options o;
    rig_job_options_init(&o);
    o.cuda = RIG_ON;
    rig_job *job = NULL;
    T_OK(rig_job_open(MPI_COMM_WORLD, &o, &job, &t_err));
    int peer = 1 - rank;
    rig_transfer t = {0, 0, ENDREG_BYTES};
    rig_rail *r = NULL;
    T_OK(rig_job_rail(job, peer, &t, 1, &t, 1, &r, &t_err));
    rig_end *e = rig_rail_local(r);
    for (uint64_t it = 0; it < ENDREG_RUNS; it++) {
        if (it >= 2) {
            T_ASSERT(rig_end_wait_sent(e, it - 1));
        }
        uint8_t *out = rig_area_copy(rig_end_outbound(e), it % 2).base;
        memset(out, (int)(it * 2 + (uint64_t)rank + 1), ENDREG_BYTES);
        rig_end_ready(e, it + 1);
        T_ASSERT(rig_end_wait_arrived(e, it + 1));
        const uint8_t *in = rig_area_copy(rig_end_inbound(e), it % 2).base;
        for (size_t i = 0; i < ENDREG_BYTES; i++) {
            if (in[i] != (uint8_t)(it * 2 + (uint64_t)peer + 1)) {
                T_FAIL("run %llu byte %zu is %u, not %u",
                       (unsigned long long)it, i, in[i],
                       (unsigned)(it * 2 + (uint64_t)peer + 1));
            }
        }
    }
    T_ASSERT(rig_end_wait_sent(e, ENDREG_RUNS));
    /* A GPU reaches the inbound end: it is registered (by UCX or rails). */
    CUdeviceptr dp = 0;
    CUresult rr = cu.devptr(&dp, rig_end_inbound(e).base, 0);
    if (rr != 0) {
        T_FAIL("cuMemHostGetDevicePointer of the inbound end failed: %d",
               (int)rr);
    }
    printf("ENDREG: rank %d: a rail with RIG_CUDA=on and a context current "
           "carried %d runs; its inbound end is at device address %#llx\n",
           rank, ENDREG_RUNS, (unsigned long long)dp);
    MPI_Barrier(MPI_COMM_WORLD);
    rig_rail_release(r);
    rig_job_close(job);
    CUcontext popped = NULL;
    cu.pop(&popped);
    cu.release(dev);
    mesh_backend_destroy(be);
    if (rank == 0) {
        printf("RESULT end registration: PASS\n");
    }
    MPI_Finalize();
    return 0;
}
