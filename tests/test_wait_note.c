/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of what a wait that finds its count there at once tells the
 * transports (src/abi/wait.c, note_waited): it drives nothing, and it
 * moves rig_waited_ns -- the stamp that keeps rig's UCX progress thread
 * standing back (src/rail/ucx/progress.c) -- for an end whose transport
 * moves only when driven, outside the block mode and bulk runs.  Linked
 * with the ABI layer itself: the stamp is internal. */
#include "config.h"

#include "../src/util/util_internal.h"
#include "rig/remote_abi.h"
#include "rig/wait.h"
#include "test_util.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

/* An end whose counts are raised by the test itself; with a progress
 * hook (a driven transport) that counts its calls, or without. */
typedef struct {
    _Alignas(128) uint8_t counts[RIG_COUNTS_BYTES];
    rig_end *e;
    atomic_uint calls;
} end_t;

static void hook(void *arg)
{
    end_t *t = arg;
    atomic_fetch_add(&t->calls, 1);
}

static void no_wake(void *self, uint64_t c)
{
    (void)self;
    (void)c;
}

/* inbound: bytes of its inbound area (two copies), NULL-based when 0. */
static void end_make(end_t *t, bool driven, uint8_t *inbound, size_t bytes)
{
    memset(t->counts, 0, sizeof(t->counts));
    atomic_store(&t->calls, 0);
    rig_end_desc d = {.counts = {t->counts, sizeof(t->counts)},
                      .inbound = {inbound, bytes},
                      .wake = no_wake,
                      .self = t,
                      .progress = driven ? hook : NULL,
                      .progress_arg = t};
    char *err = NULL;
    T_OK(rig_end_make(&d, &t->e, &err), err);
    rig_count_advance(t->counts, RIG_ARRIVED_AT, 3);
    rig_count_advance(t->counts, RIG_SENT_AT, 3);
}

static void set_mode(rig_wait_mode m)
{
    char *err = NULL;
    T_OK(rig_wait_mode_set(m, &err), err);
}

static uint64_t stamp(void)
{
    return atomic_load(&rig_waited_ns);
}

/* Clears the stamp: the next note moves it whatever its grain. */
static void stamp_clear(void)
{
    atomic_store(&rig_waited_ns, 0);
}

static void test_noted(void)
{
    set_mode(RIG_WAIT_AUTO);
    end_t t;
    end_make(&t, true, NULL, 0);
    const rig_wait_mode modes[] = {RIG_WAIT_AUTO, RIG_WAIT_SPIN,
                                   RIG_WAIT_YIELD};
    for (size_t m = 0; m < 3; m++) {
        set_mode(modes[m]);
        /* Each call that finds its count: noted, nothing driven. */
        stamp_clear();
        T_TRUE(rig_end_wait_arrived(t.e, 3));
        T_TRUE(stamp() != 0);
        stamp_clear();
        T_TRUE(rig_end_test_sent(t.e, 2) == RIG_REACHED);
        T_TRUE(stamp() != 0);
        stamp_clear();
        rig_goal g[2] = {{t.e, RIG_ARRIVED_AT, 3}, {t.e, RIG_SENT_AT, 1}};
        size_t which = 9;
        T_TRUE(rig_wait_all(g, 2, &which) == RIG_REACHED);
        T_EQ_U(which, 2);
        T_TRUE(stamp() != 0);
        stamp_clear();
        T_TRUE(rig_wait_any(g, 2, &which) == RIG_REACHED);
        T_EQ_U(which, 0);
        T_TRUE(stamp() != 0);
        T_EQ_U(atomic_load(&t.calls), 0);
    }
    /* A miss drives (the transport notes that itself): not noted here. */
    set_mode(RIG_WAIT_AUTO);
    stamp_clear();
    T_TRUE(rig_end_test_arrived(t.e, 4) == RIG_NOT_YET);
    T_EQ_U(atomic_load(&t.calls), 1);
    T_EQ_U(stamp(), 0);
    rig_end_release(t.e);
}

static void test_not_noted(void)
{
    /* No hook: its counts move without the waiter. */
    set_mode(RIG_WAIT_AUTO);
    end_t t;
    end_make(&t, false, NULL, 0);
    stamp_clear();
    T_TRUE(rig_end_wait_arrived(t.e, 3));
    T_EQ_U(stamp(), 0);
    rig_end_release(t.e);

    /* Block: its waits leave the driving to the transport's thread. */
    set_mode(RIG_WAIT_BLOCK);
    end_make(&t, true, NULL, 0);
    stamp_clear();
    T_TRUE(rig_end_wait_arrived(t.e, 3));
    T_TRUE(rig_end_test_arrived(t.e, 3) == RIG_REACHED);
    T_EQ_U(stamp(), 0);
    T_EQ_U(atomic_load(&t.calls), 0);
    rig_end_release(t.e);
    set_mode(RIG_WAIT_AUTO);

    /* Bulk runs (a copy of RIG_WAIT_BULK_BYTES, 1 MiB, or more): their
     * waits hand the transport to its thread. */
    size_t bytes = 2u << 20;
    uint8_t *in = malloc(bytes);
    T_TRUE(in != NULL);
    if (in == NULL) {
        return;
    }
    end_make(&t, true, in, bytes);
    stamp_clear();
    T_TRUE(rig_end_wait_arrived(t.e, 3));
    T_EQ_U(stamp(), 0);
    rig_end_release(t.e);
    free(in);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    /* No launcher, no oversubscription: auto spins, as on a dedicated
     * node; the tests set each mode they need. */
    unsetenv("RIG_WAIT");
    unsetenv("RIG_WAIT_BULK_BYTES");
    CU_pSuite s = CU_add_suite("waits that find their count", NULL, NULL);
    CU_add_test(s, "noted for a driven end in auto, spin and yield",
                test_noted);
    CU_add_test(s, "not noted without a hook, in block, for bulk runs",
                test_not_noted);
    return t_run_registry();
}
