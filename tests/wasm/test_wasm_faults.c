/* SPDX-License-Identifier: BSD-3-Clause */
/* CUnit tests of the wasm backend that valgrind cannot run: programs that
 * fault on purpose (traps through the guard pages, nodes ended by revoking
 * their memory), which it reports, and the process's memory over many
 * launches, which its allocator changes.  Hence a program of their own. */
#include "wasm_test_util.h"

/* ---- tests ------------------------------------------------------------ */

static void test_trap_once(void)
{
    char *err = NULL;
    mesh_prepared p;
    running r;
    bool ok = prepare_on(B, "examples/wasm/trap/trap.wat", "trap",
                         ", \"entry\": \"trap\"", &p, &err);
    T_OK(ok, err);
    if (!ok || !launch(&p, 2, 3, &r, true)) {
        return;
    }
    char *why = NULL;
    uint64_t until = now_ms() + T_TIMEOUT_MS;
    while ((why = B->ops->crashed(B, r.st, r.k)) == NULL && now_ms() < until) {
        nap_ms(1);
    }
    T_TRUE(why != NULL &&
           strcmp(why, "node 1 trapped: out of bounds memory access") == 0);
    if (why != NULL) {
        printf("\n  crashed: %s\n", why);
    }
    free(why);
    why = B->ops->crashed(B, r.st, r.k);
    T_TRUE(why == NULL); /* once */
    free(why);
    /* The other nodes go on. */
    bool done = true;
    T_TRUE(B->ops->query(B, r.st, r.k, &done, NULL) && !done);
    T_TRUE(point_rises(2));
    T_OK(unload(&r, &err), err);
    T_EQ_U(atomic_load(&words(2)->exited), 2);
}
/* Every node traps at once (released together by the halt), on every
 * lane, by three paths: guard page, stack guard, the code's own check. */
static void test_simultaneous_traps(void)
{
    char *err = NULL;
    uint32_t cores = B->ops->caps(B)->sms;
    uint32_t nodes = cores * 2 > 6 ? cores * 2 : 6;
    unsigned rounds = 20;
    for (unsigned i = 0; i < rounds; i++) {
        mesh_prepared p;
        running r;
        bool ok = prepare_on(B, "tests/wasm/programs/alltrap.wat", "alltrap",
                             "", &p, &err);
        T_OK(ok, err);
        if (!ok || !launch(&p, 3, nodes, &r, true)) {
            return;
        }
        atomic_store_explicit(&words(3)->halt, 1, memory_order_release);
        T_TRUE(wait_done(&r, T_TIMEOUT_MS));
        T_EQ_U(atomic_load(&words(3)->exited), 0);
        /* Each node trapped its own way: OOB, stack exhausted, div 0. */
        static const uint32_t want[3] = {MESH_WASM_TRAP_OOB,
                                         MESH_WASM_TRAP_EXHAUSTION, 3};
        for (uint32_t n = 0; n < nodes; n++) {
            uint32_t got = mesh_wasm_node_trap(B, 3, n);
            if (got != want[n % 3]) {
                T_FAILF("round %u node %u: trap %u (%s), want %u", i, n, got,
                        mesh_wasm_trap_str(got), want[n % 3]);
            }
        }
        char *why = B->ops->crashed(B, r.st, r.k);
        T_TRUE(why != NULL && strstr(why, " trapped: ") != NULL);
        if (i == 0 && why != NULL) {
            printf("\n  %u nodes trapped at once; first: %s\n", nodes, why);
        }
        free(why);
        T_OK(unload(&r, &err), err);
    }
}
/* 200 launch/unload cycles do not grow the process's memory (valgrind's
 * own allocator would make this meaningless: this program is not run
 * under it). */
static void test_cycles_memory(void)
{
    cycles_case(200, true);
}

/* A node that only touches its memory is ended by revoking it. */
static void test_spin_mem(void)
{
    halt_case("spin_mem", 4, 2);
}

int main(void)
{
    mesh_settings s = SETTINGS;
    if (!wasm_test_open(&s)) {
        return 1;
    }
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite su = CU_add_suite("wasm_faults", NULL, NULL);
    CU_add_test(su, "a trap reported once", test_trap_once);
    CU_add_test(su, "simultaneous traps", test_simultaneous_traps);
    CU_add_test(su, "a node touching only memory is ended", test_spin_mem);
    CU_add_test(su, "launch/unload cycles keep memory flat",
                test_cycles_memory);
    int rc = t_run_registry();
    if (!wasm_test_close()) {
        rc = rc ? rc : 1;
    }
    mesh_backend_destroy(B);
    return rc;
}
