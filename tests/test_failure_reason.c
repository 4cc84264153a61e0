/* SPDX-License-Identifier: BSD-3-Clause */
/* The reason a job failed, as the transports keep it (src/rail/base):
 * the first reason stays, except that this rank's sighting of rank X's
 * end yields to a reason X itself told (sent before it ended). */
#include "../src/rail/base/failure.h"

#include "test_util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void never_gone(void *self, int rank, const char *why)
{
    (void)self;
    (void)rank;
    (void)why;
}

static void setup(rig_failure *f)
{
    char *err = NULL;
    if (!rig_failure_init(f, 1, 3, never_gone, NULL, &err)) {
        T_FAILF("rig_failure_init: %s", err);
        free(err);
        exit(1);
    }
}

#define T_REASON(f, want)                                                      \
    do {                                                                       \
        const char *t_r_ = rig_failure_reason(f);                              \
        if (t_r_ == NULL || strcmp(t_r_, want) != 0) {                         \
            T_FAILF("reason \"%s\", want \"%s\"", t_r_ ? t_r_ : "(none)",      \
                    want);                                                     \
        } else {                                                               \
            CU_PASS(want);                                                     \
        }                                                                      \
    } while (0)

static const char *sight0 = "failed: rank 0 died (seen by rank 1)";
static const char *told0 = "failed: rank 2 died (seen by rank 0)";

static void test_told_beats_sighting(void)
{
    rig_failure f;
    setup(&f);
    T_TRUE(rig_failure_set_sighted(&f, sight0, 0));
    T_TRUE(rig_failure_sighted(&f) == 0);
    const char *held = rig_failure_reason(&f); /* a reader holds it */
    /* Another rank's word does not replace it; rank 0's does, once. */
    T_TRUE(!rig_failure_told(&f, 2, "failed: from rank 2"));
    T_REASON(&f, sight0);
    T_TRUE(rig_failure_told(&f, 0, told0));
    T_REASON(&f, told0);
    T_TRUE(rig_failure_sighted(&f) == -1);
    T_TRUE(strcmp(held, sight0) == 0); /* still readable */
    T_TRUE(!rig_failure_told(&f, 0, "failed: a second word"));
    T_REASON(&f, told0);
    T_TRUE(rig_failure_failed(&f) && rig_failure_known(&f));
    rig_failure_fini(&f);
}

static void test_other_reasons_stay(void)
{
    rig_failure f;
    setup(&f);
    /* No reason yet: a told one is the first. */
    T_TRUE(rig_failure_told(&f, 0, told0));
    T_TRUE(!rig_failure_set_sighted(&f, sight0, 0));
    T_REASON(&f, told0);
    rig_failure_fini(&f);
    /* A reason that is no sighting is never replaced. */
    setup(&f);
    T_TRUE(rig_failure_set(&f, "failed: rig_job_fail"));
    T_TRUE(!rig_failure_told(&f, 0, told0));
    T_TRUE(rig_failure_sighted(&f) == -1);
    T_REASON(&f, "failed: rig_job_fail");
    rig_failure_fini(&f);
    /* A stand-in is no reason: the told one is the first. */
    setup(&f);
    rig_failure_seen(&f, "failed: a count was raised");
    T_TRUE(!rig_failure_known(&f));
    T_TRUE(rig_failure_told(&f, 0, told0));
    T_REASON(&f, told0);
    rig_failure_fini(&f);
}

/* The sighting and the told reason from two threads at once: whichever
 * comes first, the told one is the reason. */
static rig_failure race_f;
static pthread_barrier_t race_go;

static void *sight_thread(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&race_go);
    rig_failure_set_sighted(&race_f, sight0, 0);
    return NULL;
}

static void test_race(void)
{
    int wrong = 0;
    for (int i = 0; i < 2000; i++) {
        setup(&race_f);
        pthread_barrier_init(&race_go, NULL, 2);
        pthread_t th;
        if (pthread_create(&th, NULL, sight_thread, NULL) != 0) {
            T_FAILF("pthread_create failed");
            return;
        }
        pthread_barrier_wait(&race_go);
        rig_failure_told(&race_f, 0, told0);
        pthread_join(th, NULL);
        pthread_barrier_destroy(&race_go);
        const char *r = rig_failure_reason(&race_f);
        wrong += r == NULL || strcmp(r, told0) != 0;
        rig_failure_fini(&race_f);
    }
    T_TRUE(wrong == 0);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite s = CU_add_suite("failure reason", NULL, NULL);
    CU_add_test(s, "a told reason replaces a sighting of its sender's end",
                test_told_beats_sighting);
    CU_add_test(s, "any other first reason stays", test_other_reasons_stay);
    CU_add_test(s, "a sighting and a told reason racing", test_race);
    return t_run_registry();
}
