/* SPDX-License-Identifier: BSD-3-Clause */
/* Issue 20, case 4: wasm nodes that never check -- a loop that calls no
 * import and touches no memory, a self-recursion the C compiler turns into
 * one -- stop within the halt and grace periods: the backend interrupts
 * their lanes with a signal, and the lanes are reused.  Not under valgrind
 * (the unwinding is a fault handler's) nor ThreadSanitizer, which holds an
 * asynchronous signal back until the thread calls into code it built, and
 * module code never does: there it skips (exit 77). */
#include "wasm_test_util.h"

#if defined(__SANITIZE_THREAD__)
#define T_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define T_TSAN 1
#endif
#endif

/* ---- tests ------------------------------------------------------------ */

/* Issue 20, case 4: a loop that calls no import and touches no memory,
 * and a self-recursion the C compiler turns into one, stop within the
 * halt and grace periods, and their lanes are reused. */
static void test_never_checks(void)
{
    halt_case("never", 8, 2);
}

static void test_recursion(void)
{
    halt_case("recurse", 9, 1);
}

int main(void)
{
#ifdef T_TSAN
    printf("SKIP: ThreadSanitizer holds the halt signal back from module "
           "code it did not build\n");
    return 77;
#endif
    mesh_settings s = SETTINGS;
    if (!wasm_test_open(&s)) {
        return 1;
    }
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite su = CU_add_suite("wasm_halt", NULL, NULL);
    CU_add_test(su, "a loop that never checks is halted", test_never_checks);
    CU_add_test(su, "a recursion that never checks is halted", test_recursion);
    int rc = t_run_registry();
    if (!wasm_test_close()) {
        rc = rc ? rc : 1;
    }
    mesh_backend_destroy(B);
    return rc;
}
