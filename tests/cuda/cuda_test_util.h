/* SPDX-License-Identifier: BSD-3-Clause */
/* What the CUDA tests share: a nap, and the life of one counting launch,
 * driven through the backend's ops as the driver would (blink or MPS). */
#ifndef RIG_TEST_CUDA_UTIL_H
#define RIG_TEST_CUDA_UTIL_H

#include "util/util_internal.h"
#include "mesh/mesh_internal.h"
#include "test_util.h"

#include <stdatomic.h>
#include <time.h>

static inline void nap_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A counting program's launch on slot (whose words are w): the words
 * reset, `nodes` launched, all online within online_ms, the count rising
 * over 100 ms and the launch not done; then halted, done within halt_ms
 * with every node exited, and no crash.  *a and *b: the count before and
 * after the 100 ms.  Returns the milliseconds the nodes took to come
 * online. */
static inline double cuda_lifecycle(const mesh_backend *be, mesh_stream *st,
                                    mesh_kernel *k, mesh_cb_slot *w,
                                    uint32_t slot, uint32_t nodes, uint64_t dev,
                                    uint32_t online_ms, uint32_t halt_ms,
                                    uint64_t *a, uint64_t *b)
{
    char *err = NULL;
    atomic_store(&w->halt, 0);
    atomic_store(&w->online, 0);
    atomic_store(&w->exited, 0);
    atomic_store(&w->points[0], 0);
    atomic_store(&w->nodes, nodes);
    atomic_fetch_add(&w->launch, 1);
    T_OK(be->ops->launch(be, st, k, nodes, dev, slot, &err), err);
    uint64_t t0 = rig_now_ns();
    while (atomic_load(&w->online) < nodes &&
           rig_now_ns() - t0 < (uint64_t)online_ms * 1000000u) {
        nap_ms(1);
    }
    double took = (double)(rig_now_ns() - t0) / 1e6;
    T_EQ_U(atomic_load(&w->online), nodes);
    *a = atomic_load(&w->points[0]);
    nap_ms(100);
    *b = atomic_load(&w->points[0]);
    T_TRUE(*b > *a);
    bool done = true;
    T_OK(be->ops->query(be, st, k, &done, &err), err);
    T_TRUE(!done);
    atomic_store(&w->halt, 1);
    t0 = rig_now_ns();
    while (!done && rig_now_ns() - t0 < (uint64_t)halt_ms * 1000000u) {
        T_OK(be->ops->query(be, st, k, &done, &err), err);
        nap_ms(1);
    }
    T_TRUE(done);
    T_EQ_U(atomic_load(&w->exited), nodes);
    T_TRUE(be->ops->crashed(be, st, k) == NULL);
    return took;
}

#endif
