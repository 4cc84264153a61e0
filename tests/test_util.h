/* SPDX-License-Identifier: BSD-3-Clause */
/* Assertions for the CUnit tests that print both values when they fail. */
#ifndef RIG_TEST_UTIL_H
#define RIG_TEST_UTIL_H

#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T_FAILF(...)                                                           \
    do {                                                                       \
        char t_msg_[512];                                                      \
        snprintf(t_msg_, sizeof(t_msg_), __VA_ARGS__);                         \
        CU_assertImplementation(CU_FALSE, __LINE__, t_msg_, __FILE__, "",      \
                                CU_FALSE);                                     \
    } while (0)

#define T_EQ_U(a, b)                                                           \
    do {                                                                       \
        unsigned long long t_a_ = (unsigned long long)(a);                     \
        unsigned long long t_b_ = (unsigned long long)(b);                     \
        if (t_a_ != t_b_) {                                                    \
            T_FAILF("%s == %s: %llu != %llu", #a, #b, t_a_, t_b_);             \
        } else {                                                               \
            CU_PASS(#a " == " #b);                                             \
        }                                                                      \
    } while (0)

#define T_TRUE(x)                                                              \
    do {                                                                       \
        if (!(x)) {                                                            \
            T_FAILF("expected true: %s", #x);                                  \
        } else {                                                               \
            CU_PASS(#x);                                                       \
        }                                                                      \
    } while (0)

/* The call failed and *err starts with want (then err is freed). */
#define T_ERR(ok, err, want)                                                   \
    do {                                                                       \
        bool t_ok_ = (ok);                                                     \
        if (t_ok_) {                                                           \
            T_FAILF("%s succeeded; expected an error starting \"%s\"", #ok,    \
                    (want));                                                   \
        } else if ((err) == NULL ||                                            \
                   strncmp((err), (want), strlen(want)) != 0) {                \
            T_FAILF("%s: error \"%s\" does not start with \"%s\"", #ok,        \
                    (err) != NULL ? (err) : "(null)", (want));                 \
        } else {                                                               \
            CU_PASS(#ok);                                                      \
        }                                                                      \
        free(err);                                                             \
        (err) = NULL;                                                          \
    } while (0)

/* The call succeeded (else print its error). */
#define T_OK(ok, err)                                                          \
    do {                                                                       \
        if (!(ok)) {                                                           \
            T_FAILF("%s failed: %s", #ok, (err) != NULL ? (err) : "(null)");   \
            free(err);                                                         \
            (err) = NULL;                                                      \
        } else {                                                               \
            CU_PASS(#ok);                                                      \
        }                                                                      \
    } while (0)

/* Runs the registry in verbose mode; the exit status is the failure count
 * (capped), so `make check` fails on any failed assertion. */
static inline int t_run_registry(void)
{
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed =
        CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned run = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    if (run == 0) {
        fprintf(stderr, "no test ran\n");
        return 1;
    }
    return failed > 0 ? 1 : 0;
}

#endif
