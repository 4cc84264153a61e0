/* SPDX-License-Identifier: BSD-3-Clause */
/* A CUDA program's rail ends: the table its kernel reads at PX_ENDS, the
 * ends' memory registered with the driver, and the watcher that turns the
 * device's points into ready.
 *
 * A kernel cannot call ready (spec 000: "work of a device that cannot
 * call the function, such as a GPU's, is followed by host code that waits
 * for its point and calls it").  It writes its outbound bytes through the
 * end's device address, then raises its entry's point to the count (a
 * system-scope fence and atomic max, examples/cuda/mesh_node.cuh); the
 * watcher, a host thread of the program's load, polls the points of the
 * inputs the program writes and calls the end's ready with each new
 * count.  It polls as a waiting rank does -- spins, then yields, then
 * naps of 20 us once idle for 2 ms -- so a program that sends rarely
 * costs little, and one that streams is followed within a poll.  The
 * other ways a GPU's work can signal the host -- cuStreamWriteValue64
 * after a kernel and a host poll, or cuLaunchHostFunc -- need a kernel
 * that ends, one launch per message; tests/cuda/test_cuda_gpu.c's "rails"
 * case measures the three side by side (mpi_tests/gpu/device-check.sh).
 *
 * Memory.  The end's memory is the transport's: UCX registers it with
 * cuMemHostRegister where a GPU is present (src/rail/ucx/memory.c); an end
 * that is not registered yet (no GPU when the job opened, RIG_CUDA=off, a
 * loopback rail) is registered here, DEVICEMAP | PORTABLE, and
 * unregistered when the kernel goes.  The table is page-aligned host
 * memory registered alike.  Blink isolation only: an MPS worker's kernel
 * runs in another process, which would have to map the ends there. */
#include "cuda_backend_internal.h"

#include "../../util/util_internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REG_MAX (2 * MESH_INPUTS) /* ends' ranges and the table */

struct mesh_cuda_ends {
    cuda_backend *be;
    mesh_ends ends; /* the bindings (a reference on each end) */
    mesh_ends_table *table;
    size_t table_bytes;
    CUdeviceptr table_dev;
    void *reg[REG_MAX]; /* ranges this registered (cuMemHostUnregister) */
    size_t nreg;
    pthread_t watcher;
    bool watching;
    atomic_bool stop;
};

/* ---- the watcher -----------------------------------------------------------
 */

static void *watch_main(void *arg)
{
    mesh_cuda_ends *ce = arg;
    uint64_t last[MESH_INPUTS];
    for (size_t i = 0; i < ce->ends.n; i++) {
        last[i] = rig_end_ready_count(ce->ends.b[i].end);
    }
    uint32_t idle = 0;
    uint64_t idle_since = 0;
    for (;;) {
        bool stop = atomic_load(&ce->stop);
        bool moved = false;
        for (size_t i = 0; i < ce->ends.n; i++) {
            const mesh_end_binding *b = &ce->ends.b[i];
            mesh_end_entry *en = &ce->table->e[b->input];
            if ((en->flags & (MESH_END_WRITES | MESH_END_SENDS)) !=
                (MESH_END_WRITES | MESH_END_SENDS)) {
                continue;
            }
            /* Acquire: the device fenced its bytes before the point. */
            uint64_t p = atomic_load_explicit(&en->point, memory_order_acquire);
            if (p != RIG_COUNT_FAILED && p > last[i]) {
                rig_end_ready(b->end, p);
                last[i] = p;
                moved = true;
            }
        }
        if (stop) {
            return NULL; /* the last pass ran after the kernel's end */
        }
        if (moved) {
            idle = 0;
            idle_since = 0;
            continue;
        }
        if (++idle < 4096) {
            rig_cpu_relax();
            continue;
        }
        uint64_t now = rig_now_ns();
        if (idle_since == 0) {
            idle_since = now;
        }
        if (now - idle_since < 2000000u) {
            sched_yield();
        } else {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
}

/* ---- memory
 * ------------------------------------------------------------------ */

/* The device address of host address p, registering [lo, hi) first when
 * it is not registered yet.  Context pushed. */
static bool dev_of(mesh_cuda_ends *ce, void *p, uintptr_t lo, uintptr_t hi,
                   CUdeviceptr *out, char **err)
{
    const mesh_cu_lib *cu = &ce->be->cu;
    if (p == NULL) {
        *out = 0;
        return true;
    }
    if (cu->cuMemHostGetDevicePointer_p(out, p, 0) == CUDA_SUCCESS) {
        return true;
    }
    if (ce->nreg == REG_MAX) {
        return rig_err(err, "limits: more than %u ranges of ends to register",
                       REG_MAX);
    }
    void *base = (void *)lo;
    CUresult r = cu->cuMemHostRegister_p(base, hi - lo,
                                         CU_MEMHOSTREGISTER_DEVICEMAP |
                                             CU_MEMHOSTREGISTER_PORTABLE);
    if (r != CUDA_SUCCESS) {
        return mesh_cu_check(cu, r, NULL, "cuMemHostRegister of an end", err);
    }
    ce->reg[ce->nreg++] = base;
    return mesh_cu_check(cu, cu->cuMemHostGetDevicePointer_p(out, p, 0), NULL,
                         "cuMemHostGetDevicePointer of an end", err);
}

/* [lo, hi): the pages of an end's three areas. */
static void end_range(const rig_end *e, uintptr_t *lo, uintptr_t *hi)
{
    rig_area a[3] = {rig_end_counts(e), rig_end_outbound(e),
                     rig_end_inbound(e)};
    uintptr_t l = UINTPTR_MAX, h = 0;
    for (int i = 0; i < 3; i++) {
        if (a[i].base == NULL || a[i].len == 0) {
            continue;
        }
        uintptr_t s = (uintptr_t)a[i].base, t = s + a[i].len;
        l = s < l ? s : l;
        h = t > h ? t : h;
    }
    *lo = l & ~(uintptr_t)4095;
    *hi = (h + 4095) & ~(uintptr_t)4095;
}

void mesh_cuda_ends_free(mesh_cuda_ends *ce)
{
    if (ce == NULL) {
        return;
    }
    mesh_cuda_ends_stop(ce);
    if (ce->nreg > 0 && mesh_cuda_push(ce->be, NULL)) {
        for (size_t i = ce->nreg; i-- > 0;) {
            ce->be->cu.cuMemHostUnregister_p(ce->reg[i]);
        }
        mesh_cuda_pop(ce->be);
    }
    free(ce->table);
    mesh_ends_free(&ce->ends);
    free(ce);
}

void mesh_cuda_ends_stop(mesh_cuda_ends *ce)
{
    if (ce != NULL && ce->watching) {
        atomic_store(&ce->stop, true);
        pthread_join(ce->watcher, NULL);
        ce->watching = false;
    }
}

uint64_t mesh_cuda_ends_dev(const mesh_cuda_ends *ce)
{
    return ce != NULL ? (uint64_t)ce->table_dev : 0;
}

bool mesh_cuda_ends_make(cuda_backend *be, const mesh_prepared *p,
                         mesh_cuda_ends **out, char **err)
{
    *out = NULL;
    if (p->ends == NULL || p->ends->n == 0) {
        return true;
    }
    mesh_cuda_ends *ce = calloc(1, sizeof(*ce));
    if (ce == NULL) {
        return rig_err(err, "nomem: a CUDA program's ends");
    }
    ce->be = be;
    atomic_init(&ce->stop, false);
    if (!mesh_ends_dup(&ce->ends, p->ends, err)) {
        free(ce);
        return false;
    }
    ce->table_bytes = mesh_ends_table_bytes(&ce->ends);
    int rc = posix_memalign((void **)&ce->table, 4096, ce->table_bytes);
    if (rc != 0) {
        ce->table = NULL;
        mesh_cuda_ends_free(ce);
        return rig_err(err, "nomem: the table of a CUDA program's ends");
    }
    if (!mesh_ends_table_fill(ce->table, ce->table_bytes, &ce->ends,
                              p->manifest.reads, p->manifest.writes,
                              p->manifest.nodes, false, err)) {
        mesh_cuda_ends_free(ce);
        return false;
    }
    /* Points start at the counts readied already: a launch goes on. */
    bool ok = true;
    for (size_t i = 0; ok && i < ce->ends.n; i++) {
        const mesh_end_binding *b = &ce->ends.b[i];
        mesh_end_entry *en = &ce->table->e[b->input];
        uint64_t r = rig_end_ready_count(b->end);
        atomic_store(&en->point, r != RIG_COUNT_FAILED ? r : 0);
        uintptr_t lo, hi;
        end_range(b->end, &lo, &hi);
        CUdeviceptr c = 0, o = 0, in = 0;
        ok = dev_of(ce, rig_end_counts(b->end).base, lo, hi, &c, err) &&
             dev_of(ce, rig_end_outbound(b->end).base, lo, hi, &o, err) &&
             dev_of(ce, rig_end_inbound(b->end).base, lo, hi, &in, err);
        en->dev_counts = c;
        en->dev_outbound = o;
        en->dev_inbound = in;
    }
    /* The table last, with every device address in it. */
    if (ok && ce->nreg == REG_MAX) {
        ok = rig_err(err, "limits: too many ranges of ends to register");
    }
    if (ok) {
        CUresult r = be->cu.cuMemHostRegister_p(
            ce->table, ce->table_bytes,
            CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
        ok = mesh_cu_check(&be->cu, r, NULL, "cuMemHostRegister of the ends",
                           err);
        if (ok) {
            ce->reg[ce->nreg++] = ce->table;
            ok = mesh_cu_check(&be->cu,
                               be->cu.cuMemHostGetDevicePointer_p(
                                   &ce->table_dev, ce->table, 0),
                               NULL, "cuMemHostGetDevicePointer", err);
        }
    }
    if (ok) {
        rc = pthread_create(&ce->watcher, NULL, watch_main, ce);
        ok = rc == 0 ||
             rig_err(err, "system: the ends' watcher: %s", strerror(rc));
        ce->watching = rc == 0;
    }
    if (!ok) {
        mesh_cuda_ends_free(ce);
        return false;
    }
    *out = ce;
    return true;
}
