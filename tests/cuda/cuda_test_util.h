/* SPDX-License-Identifier: BSD-3-Clause */
/* What the CUDA tests share: naps and hang guards, the life of one counting
 * launch driven through the backend's ops as the driver would (blink or
 * MPS), cases that report RESULT lines and skips, and the stand-in
 * driver's record of what a real driver would not forgive.
 *
 * Time is only ever a hang guard here: a wait that should take
 * milliseconds is allowed CUDA_TEST_GUARD_MS (10 s, far past 10x the
 * expected time even on a loaded machine). */
#ifndef RIG_TEST_CUDA_UTIL_H
#define RIG_TEST_CUDA_UTIL_H

#include "util/util_internal.h"
#include "mesh/driver.h"
#include "mesh/mesh_internal.h"
#include "test_util.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define CUDA_TEST_GUARD_MS 10000u

static inline void nap_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits until progress point 0 of slot exceeds above (at most the guard);
 * returns the last value read. */
static inline uint64_t wait_point_above(const mesh_driver *d, uint32_t slot,
                                        uint64_t above)
{
    uint64_t t0 = rig_now_ns(), v = mesh_driver_point(d, slot, 0);
    while (v <= above &&
           rig_now_ns() - t0 < (uint64_t)CUDA_TEST_GUARD_MS * 1000000u) {
        nap_ms(1);
        v = mesh_driver_point(d, slot, 0);
    }
    return v;
}

/* The same for a point word read directly. */
static inline uint64_t wait_word_above(_Atomic uint64_t *w, uint64_t above)
{
    uint64_t t0 = rig_now_ns(), v = atomic_load(w);
    while (v <= above &&
           rig_now_ns() - t0 < (uint64_t)CUDA_TEST_GUARD_MS * 1000000u) {
        nap_ms(1);
        v = atomic_load(w);
    }
    return v;
}

/* ---- cases, results and skips ------------------------------------------- */

static const char *t_case_name = "";
static bool t_case_skipped;
static char t_skips[4096];

/* Marks the running case skipped, with why: the case reports SKIP, and
 * the program ends with 77 (when nothing failed) after listing its skips:
 * a skipped check is never a pass. */
static inline void t_skip(const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    t_case_skipped = true;
    size_t used = strlen(t_skips);
    snprintf(t_skips + used, sizeof(t_skips) - used, "SKIP: %s: %s\n",
             t_case_name, why);
    printf("SKIP %s: %s\n", t_case_name, why);
}

/* The stand-in driver's violations so far (0 on a real driver, which has
 * no such record); their text in buf. */
static inline int cuda_mock_violations(char *buf, size_t len)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    int (*f)(char *, size_t) =
        lib != NULL
            ? (int (*)(char *, size_t))dlsym(lib, "mock_cuda_violations")
            : NULL;
    int n = f != NULL ? f(buf, len) : 0;
    if (lib != NULL) {
        dlclose(lib);
    }
    return n;
}

/* A case: runs fn, fails it on new violations of the stand-in, and prints
 * "RESULT <name>: PASS|FAIL|SKIP" for mpi_tests/gpu/device-check.sh. */
#define CUDA_TEST(fn, name)                                                    \
    static void fn##_run(void)                                                 \
    {                                                                          \
        unsigned f0 = CU_get_number_of_failures();                             \
        int v0 = cuda_mock_violations(NULL, 0);                                \
        t_case_name = name;                                                    \
        t_case_skipped = false;                                                \
        putchar('\n'); /* after CUnit's "Test: ...": lines of their own */     \
        fn();                                                                  \
        char vbuf[4096] = "";                                                  \
        int v1 = cuda_mock_violations(vbuf, sizeof(vbuf));                     \
        if (v1 != v0) {                                                        \
            T_FAILF("the stand-in driver recorded %d violation(s): %s",        \
                    v1 - v0, vbuf);                                            \
        }                                                                      \
        printf("RESULT %s: %s\n", name,                                        \
               CU_get_number_of_failures() != f0 ? "FAIL"                      \
               : t_case_skipped                  ? "SKIP"                      \
                                                 : "PASS");                                     \
    }

/* The exit status of a run: t_run_registry's, or 77 after listing the
 * skips when nothing failed but something was skipped. */
static inline int t_finish(int rc)
{
    if (rc == 0 && t_skips[0] != '\0') {
        fputs(t_skips, stdout);
        return 77;
    }
    return rc;
}

/* Whether a case of that name was asked for (argv[1..]: the names; none:
 * every case but those marked alone, which run only when named). */
static inline bool t_wanted(int argc, char **argv, const char *name, bool alone)
{
    if (argc <= 1) {
        return !alone;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], name) == 0) {
            return true;
        }
    }
    return false;
}

/* ---- a counting launch -------------------------------------------------- */

/* A counting program's launch on slot (whose words are w): the words
 * reset, `nodes` launched, all online, the count rising and the launch not
 * done; then halted, done with every node exited, and no crash (each wait
 * bounded by the guard).  *a and *b: the count before and after it rose.
 * Returns the milliseconds the nodes took to come online. */
static inline double cuda_lifecycle(const mesh_backend *be, mesh_stream *st,
                                    mesh_kernel *k, mesh_cb_slot *w,
                                    uint32_t slot, uint32_t nodes, uint64_t dev,
                                    uint64_t *a, uint64_t *b)
{
    char *err = NULL;
    const uint64_t guard = (uint64_t)CUDA_TEST_GUARD_MS * 1000000u;
    atomic_store(&w->halt, 0);
    atomic_store(&w->online, 0);
    atomic_store(&w->exited, 0);
    atomic_store(&w->points[0], 0);
    atomic_store(&w->nodes, nodes);
    atomic_fetch_add(&w->launch, 1);
    T_OK(be->ops->launch(be, st, k, nodes, dev, slot, &err), err);
    uint64_t t0 = rig_now_ns();
    while (atomic_load(&w->online) < nodes && rig_now_ns() - t0 < guard) {
        nap_ms(1);
    }
    double took = (double)(rig_now_ns() - t0) / 1e6;
    T_EQ_U(atomic_load(&w->online), nodes);
    *a = wait_word_above(&w->points[0], 0);
    *b = wait_word_above(&w->points[0], *a);
    T_TRUE(*b > *a);
    bool done = true;
    T_OK(be->ops->query(be, st, k, &done, &err), err);
    T_TRUE(!done);
    atomic_store(&w->halt, 1);
    t0 = rig_now_ns();
    while (!done && rig_now_ns() - t0 < guard) {
        T_OK(be->ops->query(be, st, k, &done, &err), err);
        nap_ms(1);
    }
    T_TRUE(done);
    T_EQ_U(atomic_load(&w->exited), nodes);
    T_TRUE(be->ops->crashed(be, st, k) == NULL);
    return took;
}

#endif
