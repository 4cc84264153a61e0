/* SPDX-License-Identifier: BSD-3-Clause */
/* The wasm executor hands a module its rail ends (mesh/wasm.h, the
 * mesh.end_* imports): a module answers a host over a loopback rail,
 * bytes and counts exact, and every import that breaks a rule traps.
 * Traps fault on purpose through the guard pages: not under valgrind. */
#include "wasm_test_util.h"

#define RUNS 100u
#define LEN 64

static rig_transfer t64 = {0, 0, LEN};

/* A loopback rail: *a bound to input 0 as ends says; *b the host's. */
static bool rail(rig_rail **a, rig_rail **b, mesh_end_binding *bind,
                 mesh_ends *ends)
{
    char *err = NULL;
    T_OK(rig_loopback_make(42, &t64, 1, &t64, 1, a, b, &err), err);
    if (*a == NULL) {
        return false;
    }
    *bind = (mesh_end_binding){.input = 0,
                               .id = 42,
                               .peer = 1,
                               .here = 2,
                               .end = rig_rail_local(*a),
                               .send = &t64,
                               .nsend = 1,
                               .receive = &t64,
                               .nreceive = 1,
                               .peer_place = {.shm = -1}};
    *ends = (mesh_ends){.b = bind, .n = 1};
    return true;
}

static void test_answer(void)
{
    rig_rail *ra = NULL, *rb = NULL;
    mesh_end_binding bind;
    mesh_ends ends;
    if (!rail(&ra, &rb, &bind, &ends)) {
        return;
    }
    char *err = NULL;
    mesh_prepared p;
    running r;
    bool ok = prepare_on(B, "tests/wasm/programs/ends.wat", "ends",
                         ", \"reads\": 1, \"writes\": 1", &p, &err);
    T_OK(ok, err);
    p.ends = &ends;
    if (!ok || !launch(&p, 3, 1, &r, true)) {
        rig_rail_release(ra);
        rig_rail_release(rb);
        return;
    }
    /* The host's rail may go: the executor holds its own reference. */
    rig_rail_release(ra);
    rig_end *b = rig_rail_local(rb);
    for (uint64_t c = 1; c <= RUNS; c++) {
        uint8_t *out = rig_area_copy(rig_end_outbound(b), (c - 1) % 2).base;
        for (int i = 0; i < LEN; i++) {
            out[i] = (uint8_t)(c * 3 + (uint64_t)i);
        }
        rig_end_ready(b, c);
        bool timed_out = false;
        T_TRUE(rig_end_wait_arrived_for(b, c, T_TIMEOUT_MS, &timed_out));
        const uint8_t *in = rig_area_copy(rig_end_inbound(b), (c - 1) % 2).base;
        int bad = 0;
        for (int i = 0; i < LEN; i++) {
            bad += in[i] != (uint8_t)(c * 3 + (uint64_t)i + 1);
        }
        T_EQ_U(bad, 0);
    }
    T_TRUE(wait_done(&r, T_TIMEOUT_MS));
    mesh_cb_slot *w = words(3);
    T_EQ_U(atomic_load(&w->points[0]), RUNS);
    T_EQ_U(atomic_load(&w->points[1]), 42);
    T_EQ_U(atomic_load(&w->points[2]), 101); /* bound(0), not 3, 256 B */
    T_EQ_U(atomic_load(&w->points[3]), 10);  /* id 42: input 0; 43: none */
    T_EQ_U(rig_end_arrived(b), RUNS);
    char *why = B->ops->crashed(B, r.st, r.k);
    T_TRUE(why == NULL);
    free(why);
    T_OK(unload(&r, &err), err);
    rig_rail_release(rb);
}

/* Each rule broken traps the node, "out of bounds memory access". */
static void test_traps(void)
{
    static const char *const entries[] = {"oob_range", "oob_input", "oob_copy",
                                          "oob_mem"};
    for (int i = 0; i < 4; i++) {
        rig_rail *ra = NULL, *rb = NULL;
        mesh_end_binding bind;
        mesh_ends ends;
        if (!rail(&ra, &rb, &bind, &ends)) {
            return;
        }
        char *err = NULL, extra[128];
        snprintf(extra, sizeof(extra),
                 ", \"reads\": 1, \"writes\": 1, \"entry\": \"%s\"",
                 entries[i]);
        mesh_prepared p;
        running r;
        bool ok = prepare_on(B, "tests/wasm/programs/ends.wat", "ends", extra,
                             &p, &err);
        T_OK(ok, err);
        p.ends = &ends;
        if (!ok || !launch(&p, 4, 1, &r, true)) {
            rig_rail_release(ra);
            rig_rail_release(rb);
            return;
        }
        T_TRUE(wait_done(&r, T_TIMEOUT_MS));
        char *why = B->ops->crashed(B, r.st, r.k);
        if (why == NULL ||
            strcmp(why, "node 0 trapped: out of bounds memory access") != 0) {
            T_FAILF("%s: %s", entries[i], why != NULL ? why : "no trap");
        }
        free(why);
        T_EQ_U(rig_end_ready_count(rig_rail_local(ra)), 0); /* no send */
        T_OK(unload(&r, &err), err);
        rig_rail_release(ra);
        rig_rail_release(rb);
    }
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
    CU_pSuite su = CU_add_suite("wasm_ends", NULL, NULL);
    CU_add_test(su, "a module answers over its rail end", test_answer);
    CU_add_test(su, "imports that break a rule trap", test_traps);
    int rc = t_run_registry();
    if (!wasm_test_close()) {
        rc = rc ? rc : 1;
    }
    mesh_backend_destroy(B);
    return rc;
}
