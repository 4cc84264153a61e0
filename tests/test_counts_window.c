/* SPDX-License-Identifier: BSD-3-Clause */
/* The mapped carrier's window around `arrived` (src/abi/counts.c): a failed
 * count is never lowered, and a carrier stalled in its window holds a
 * failure up for a bounded time only.  Linked to the ABI's objects: the
 * window is internal to librig. */
#include "config.h"

#include "../src/abi/abi_internal.h"
#include "../src/util/util_internal.h"
#include "rig/remote_abi.h"
#include "test_util.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

typedef struct {
    alignas(64) uint8_t counts[RIG_COUNTS_BYTES];
    atomic_bool stop;
    atomic_bool failed; /* set once the failure's rig_count_advance returned */
    atomic_long lowered, after_fail, carried;
    pthread_barrier_t go;
} race;

/* One carrier, as the wake lock makes it: windows with rising counts. */
static void *carrier(void *p)
{
    race *r = p;
    pthread_barrier_wait(&r->go);
    for (uint64_t c = 1; !atomic_load(&r->stop) && c < 50000000; c++) {
        if (rig_count_window_open(r->counts)) {
            rig_count_window_close(r->counts, c);
            atomic_fetch_add(&r->carried, 1);
        }
        if (atomic_load(&r->failed) &&
            rig_count_load(r->counts, RIG_ARRIVED_AT) != RIG_COUNT_FAILED) {
            atomic_fetch_add(&r->after_fail, 1);
        }
    }
    return NULL;
}

/* A reader: once it saw RIG_COUNT_FAILED, every later load sees it too. */
static void *reader(void *p)
{
    race *r = p;
    bool seen = false;
    uint64_t last = 0;
    pthread_barrier_wait(&r->go);
    while (!atomic_load(&r->stop)) {
        uint64_t v = rig_count_load(r->counts, RIG_ARRIVED_AT);
        if (v < last || (seen && v != RIG_COUNT_FAILED)) {
            atomic_fetch_add(&r->lowered, 1);
        }
        seen = seen || v == RIG_COUNT_FAILED;
        last = v;
    }
    return NULL;
}

static void *failer(void *p)
{
    race *r = p;
    pthread_barrier_wait(&r->go);
    /* Fail in the middle of the carrier's stores, however late the
     * machine's load lets it start. */
    while (atomic_load(&r->carried) < 1000) {
        usleep(100);
    }
    rig_count_advance(r->counts, RIG_ARRIVED_AT, RIG_COUNT_FAILED);
    atomic_store(&r->failed, true);
    usleep(3000);
    atomic_store(&r->stop, true);
    return NULL;
}

/* A carrier storing as fast as it can, a failure, a reader: the count is
 * never seen lower, and stays at RIG_COUNT_FAILED once failure returned. */
static void test_window_race(void)
{
    for (int round = 0; round < 20; round++) {
        static race r;
        memset(&r, 0, sizeof(r));
        pthread_barrier_init(&r.go, NULL, 3);
        pthread_t th[3];
        pthread_create(&th[0], NULL, carrier, &r);
        pthread_create(&th[1], NULL, reader, &r);
        pthread_create(&th[2], NULL, failer, &r);
        for (int t = 0; t < 3; t++) {
            pthread_join(th[t], NULL);
        }
        pthread_barrier_destroy(&r.go);
        T_EQ_U(atomic_load(&r.lowered), 0);
        T_EQ_U(atomic_load(&r.after_fail), 0);
        T_EQ_U(rig_count_load(r.counts, RIG_ARRIVED_AT), RIG_COUNT_FAILED);
        T_TRUE(atomic_load(&r.carried) >= 1000);
        /* Windows opened after the failure carry nothing. */
        T_TRUE(!rig_count_window_open(r.counts));
    }
}

typedef struct {
    uint8_t *counts;
    double took;
} fail_arg;

static void *fail_now(void *p)
{
    fail_arg *a = p;
    uint64_t t0 = rig_now_ns();
    rig_count_advance(a->counts, RIG_ARRIVED_AT, RIG_COUNT_FAILED);
    a->took = (double)(rig_now_ns() - t0) * 1e-9;
    return NULL;
}

/* A carrier stalled inside its window (descheduled, stopped) holds a
 * failure up for a bounded time, not for good; its own close then raises
 * the count again after its store. */
static void test_window_stalled(void)
{
    alignas(64) static uint8_t counts[RIG_COUNTS_BYTES];
    memset(counts, 0, sizeof(counts));
    T_TRUE(rig_count_window_open(counts));
    rig_count_window_close(counts, 5);
    T_EQ_U(rig_count_load(counts, RIG_ARRIVED_AT), 5);
    T_TRUE(rig_count_window_open(counts));
    fail_arg a = {counts, 0};
    pthread_t th;
    pthread_create(&th, NULL, fail_now, &a);
    pthread_join(th, NULL); /* the carrier "stalls" until failure gave up */
    /* Bounded (0.2 s in counts.c; 10x as a guard against load). */
    T_TRUE(a.took > 0.1 && a.took < 2.0);
    T_EQ_U(rig_count_load(counts, RIG_ARRIVED_AT), RIG_COUNT_FAILED);
    rig_count_window_close(counts, 6); /* the stalled store lands late */
    T_EQ_U(rig_count_load(counts, RIG_ARRIVED_AT), RIG_COUNT_FAILED);
    T_TRUE(!rig_count_window_open(counts));
    /* A window that closes in time: failure waits for it, no claim. */
    memset(counts, 0, sizeof(counts));
    T_TRUE(rig_count_window_open(counts));
    a.took = 0;
    pthread_create(&th, NULL, fail_now, &a);
    usleep(20000);
    rig_count_window_close(counts, 7);
    pthread_join(th, NULL);
    T_TRUE(a.took < 2.0);
    T_EQ_U(rig_count_load(counts, RIG_ARRIVED_AT), RIG_COUNT_FAILED);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite s = CU_add_suite("counts window", NULL, NULL);
    CU_add_test(s, "a failed arrived is never lowered by a mapped carrier",
                test_window_race);
    CU_add_test(s, "a stalled carrier holds failure up for a bounded time",
                test_window_stalled);
    return t_run_registry();
}
