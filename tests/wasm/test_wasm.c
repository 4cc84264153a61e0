/* SPDX-License-Identifier: BSD-3-Clause */
/* CUnit tests of the wasm backend: compile and cache, imports, lanes,
 * halting, refusals, process trees of the compilers, true reports, and
 * launch/unload cycles that leak nothing.  No program here faults on
 * purpose (valgrind runs this); those are in test_wasm_faults.c. */
#include "wasm_test_util.h"

#include "mesh/driver.h"

#include <errno.h>
#include <hwloc.h>
#include <signal.h>

static bool under_valgrind;

/* ---- tests ------------------------------------------------------------ */

static void test_caps(void)
{
    const mesh_caps *c = B->ops->caps(B);
    T_EQ_U(c->kind, MESH_BACKEND_WASM);
    T_TRUE(c->sms >= 1 && c->sms <= c->sms_total);
    T_TRUE(strncmp(c->name, "wasm2c ", 7) == 0);
    T_EQ_U(B->ops->isolation(B), MESH_ISOLATION_LANES);
    T_TRUE(B->ops->isolated(B));
    T_TRUE(!B->ops->compiler(B)->ops->needs_ptx(B->ops->compiler(B)));
    uint32_t scope = 0;
    T_TRUE(B->ops->module_scope(B, true, 3, &scope));
    T_EQ_U(scope, 3);
    T_EQ_U(atomic_load(&CB->h.magic), MESH_CB_MAGIC);
}
static void test_compile_cache(void)
{
    char dir[300], *err = NULL;
    snprintf(dir, sizeof(dir), "%s/cache", tmp_dir);
    setenv("RIG_WASM_CACHE", dir, 1);
    mesh_settings s = SETTINGS;
    mesh_backend *b = NULL;
    bool ok = mesh_wasm_backend_open(&s, &b, &err);
    unsetenv("RIG_WASM_CACHE");
    T_OK(ok, err);
    if (!ok) {
        return;
    }
    uint64_t c0 = mesh_wasm_compiles();
    mesh_prepared p1, p2;
    T_OK(prepare_on(b, "examples/wasm/counter/counter.wat", "counter",
                    ", \"entry\": \"counter\"", &p1, &err),
         err);
    T_EQ_U(mesh_wasm_compiles(), c0 + 1);
    T_TRUE(p1.compile_ms > 0.0);
    T_TRUE(p1.kernel != NULL);
    T_EQ_U(p1.exec, MESH_BACKEND_WASM);
    /* The object is in the cache under the payload's hash. */
    char hash[32];
    snprintf(hash, sizeof(hash), "%016llx-", (unsigned long long)p1.hash);
    DIR *d = opendir(dir);
    unsigned found = 0, others = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, hash, strlen(hash)) == 0) {
            found++;
        } else if (e->d_name[0] != '.') {
            others++;
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    T_EQ_U(found, 1);
    T_EQ_U(others, 0); /* no work directory left behind */
    /* The second prepare of the same program compiles nothing. */
    T_OK(prepare_on(b, "examples/wasm/counter/counter.wat", "counter",
                    ", \"entry\": \"counter\"", &p2, &err),
         err);
    T_EQ_U(mesh_wasm_compiles(), c0 + 1);
    T_EQ_U(p2.hash, p1.hash);
    mesh_prepared_free(&p1);
    mesh_prepared_free(&p2);
    mesh_backend_destroy(b);
}
/* Issue 20, case 3: a compile past its timeout ends with everything the
 * compiler started (cc's cc1; here a child and a daemon of a C compiler
 * that hangs) and leaves no file behind: not its temporary files, not the
 * work directory. */
static void test_compile_timeout(void)
{
    char dir[300], cc[4096], pids[320], *err = NULL;
    snprintf(dir, sizeof(dir), "%s/hang-cache", tmp_dir);
    snprintf(cc, sizeof(cc), "%s/tests/wasm/hang_cc.sh", SRC);
    snprintf(pids, sizeof(pids), "%s/cc-pids", tmp_dir);
    setenv("RIG_WASM_CACHE", dir, 1);
    setenv("RIG_WASM_CC", cc, 1);
    setenv("RIG_WASM_COMPILE_TIMEOUT_MS", "1000", 1);
    setenv("RIG_TEST_CC_PIDS", pids, 1);
    mesh_settings s = SETTINGS;
    mesh_backend *b = NULL;
    bool ok = mesh_wasm_backend_open(&s, &b, &err);
    unsetenv("RIG_WASM_CC");
    unsetenv("RIG_WASM_COMPILE_TIMEOUT_MS");
    T_OK(ok, err);
    if (!ok) {
        unsetenv("RIG_WASM_CACHE");
        return;
    }
    mesh_prepared p;
    T_ERR(prepare_on(b, "tests/wasm/programs/quick.wat", "quick", "", &p, &err),
          err, "timeout: ");
    FILE *f = fopen(pids, "r");
    int child = 0, daemon = 0;
    T_TRUE(f != NULL && fscanf(f, "%d %d", &child, &daemon) == 2);
    if (f != NULL) {
        fclose(f);
    }
    int pid[2] = {child, daemon};
    for (int i = 0; i < 2; i++) {
        if (pid[i] <= 0 || kill(pid[i], 0) == 0 || errno != ESRCH) {
            T_FAILF("the compiler's %s (pid %d) outlived the timeout",
                    i == 0 ? "child" : "daemon", pid[i]);
            if (pid[i] > 0) {
                kill(pid[i], SIGKILL);
            }
        } else {
            CU_PASS("gone");
        }
    }
    /* Nothing left in the cache: no work directory, no temporary file. */
    T_EQ_U(count_dir(dir), 0);
    unlink(pids);
    mesh_backend_destroy(b);
    unsetenv("RIG_WASM_CACHE");
    unsetenv("RIG_TEST_CC_PIDS");
    rmdir(dir);
}

/* Issue 20, case 7: a node that comes online and traps at once is a crash
 * after going online, every time (44 of 400 were reported as before). */
static void test_trap_after_online(void)
{
    mesh_driver *d = NULL;
    char *err = NULL;
    T_OK(mesh_driver_open(B, &d, &err), err);
    if (d == NULL) {
        return;
    }
    size_t len = 0;
    uint8_t *wasm = assemble("tests/wasm/programs/flash.wat", &len);
    T_TRUE(wasm != NULL);
    unsigned rounds = under_valgrind ? 40 : 400, wrong = 0;
    for (unsigned i = 0; wasm != NULL && i < rounds; i++) {
        mesh_payload pl;
        mesh_prepared p;
        uint32_t slot = 99;
        mesh_run_state st = MESH_RUN_RUNNING;
        char *why = NULL;
        bool ok = make_payload("flash", "", wasm, len, &pl) &&
                  mesh_driver_prepare(d, &pl, NULL, NULL, &p, &err) &&
                  mesh_driver_start(d, &p, 1, &slot, &err) &&
                  mesh_driver_wait(d, slot, T_TIMEOUT_MS, &st, &why, &err);
        if (!ok || st != MESH_RUN_CRASHED || why == NULL ||
            strcmp(why, "node 0 trapped: unreachable executed") != 0) {
            if (wrong++ < 3) {
                T_FAILF("launch %u: %s (state %d, why \"%s\")", i,
                        err != NULL ? err : "started", (int)st,
                        why != NULL ? why : "(null)");
            }
        }
        free(why);
        free(err);
        err = NULL;
        if (slot != 99) {
            mesh_driver_stop(d, slot, NULL);
        }
    }
    free(wasm);
    T_EQ_U(wrong, 0);
    mesh_driver_close(d);
}

/* Nodes that ignore the halt but call an import are ended there. */
static void test_ignore_halt(void)
{
    halt_case("stubborn", 4, 2);
}

static void test_refusals(void)
{
    char *err = NULL;
    mesh_prepared p;
    T_ERR(prepare_on(B, "tests/wasm/programs/bad_import.wat", "bad_import", "",
                     &p, &err),
          err, "unsupported: ");
    /* The message names the culprit. */
    prepare_on(B, "tests/wasm/programs/bad_import.wat", "bad_import", "", &p,
               &err);
    T_TRUE(err != NULL && strstr(err, "env.printf") != NULL);
    free(err);
    err = NULL;
    T_ERR(prepare_on(B, "tests/wasm/programs/no_entry.wat", "no_entry", "", &p,
                     &err),
          err, "compile: ");
    prepare_on(B, "tests/wasm/programs/no_entry.wat", "no_entry", "", &p, &err);
    T_TRUE(err != NULL && strstr(err, "exports no function \"no_entry\""));
    free(err);
    err = NULL;

    const mesh_compiler *c = B->ops->compiler(B);
    mesh_payload pl;
    static const uint8_t junk[] = {0, 'a', 's', 'm', 1, 0, 0, 0, 1, 9, 9};
    make_payload("junk", "", junk, sizeof(junk), &pl);
    T_ERR(c->ops->prepare(c, &pl, NULL, NULL, &p, &err), err, "compile: ");
    make_payload("nomod", "", NULL, 0, &pl);
    T_ERR(c->ops->prepare(c, &pl, NULL, NULL, &p, &err), err, "missing: ");
    make_payload("threads", ", \"threads\": 4", junk, sizeof(junk), &pl);
    T_ERR(c->ops->prepare(c, &pl, NULL, NULL, &p, &err), err, "limits: ");
    uint64_t wrong = 1;
    make_payload("junk", "", junk, sizeof(junk), &pl);
    T_ERR(c->ops->prepare(c, &pl, &wrong, NULL, &p, &err), err, "hash: ");
    /* A program that does not list wasm. */
    const char *json =
        "{\"name\": \"nat\", \"abi\": 1, \"backends\": [\"native\"]}";
    mesh_payload_init(&pl, "nat", NULL);
    mesh_payload_add(&pl, "manifest.json", json, strlen(json), NULL);
    T_ERR(c->ops->prepare(c, &pl, NULL, NULL, &p, &err), err, "unsupported: ");
}
static void test_iface(void)
{
    char *err = NULL;
    mesh_prepared p;
    running r;
    bool ok = prepare_on(B, "tests/wasm/programs/iface.wat", "iface",
                         ", \"scratch\": 4096", &p, &err);
    T_OK(ok, err);
    if (!ok || !launch(&p, 5, 3, &r, true)) {
        return;
    }
    T_TRUE(wait_done(&r, T_TIMEOUT_MS));
    mesh_cb_slot *w = words(5);
    T_EQ_U(atomic_load(&w->online), 3);
    T_EQ_U(atomic_load(&w->exited), 3);
    T_EQ_U(atomic_load(&w->points[0]), 100);
    T_EQ_U(atomic_load(&w->points[1]), 4096);
    T_EQ_U(atomic_load(&w->points[2]), 7);
    T_EQ_U(atomic_load(&w->error), MESH_NODE_ERR_PROGRAM);
    T_EQ_U(atomic_load(&w->error_node), 0);
    T_EQ_U(atomic_load(&w->error_arg), 42);
    const uint32_t *s = (const uint32_t *)(uintptr_t)mesh_kernel_scratch(r.k);
    for (uint32_t n = 0; n < 3; n++) {
        T_EQ_U(s[n * 4 + 0], 5);
        T_EQ_U(s[n * 4 + 1], n);
        T_EQ_U(s[n * 4 + 2], 3);
        T_EQ_U(s[n * 4 + 3], 0);
    }
    char *why = B->ops->crashed(B, r.st, r.k);
    T_TRUE(why == NULL);
    free(why);
    T_OK(unload(&r, &err), err);
}
static void test_scratch_oob(void)
{
    char *err = NULL;
    mesh_prepared p;
    running r;
    bool ok = prepare_on(B, "tests/wasm/programs/scratch_oob.wat",
                         "scratch_oob", ", \"scratch\": 64", &p, &err);
    T_OK(ok, err);
    if (!ok || !launch(&p, 6, 1, &r, true)) {
        return;
    }
    T_TRUE(wait_done(&r, T_TIMEOUT_MS));
    char *why = B->ops->crashed(B, r.st, r.k);
    T_TRUE(why != NULL &&
           strcmp(why, "node 0 trapped: out of bounds memory access") == 0);
    free(why);
    T_OK(unload(&r, &err), err);
}
/* 4 nodes online on lanes; the first min(4, cores) on distinct cores, as
 * hwloc reports the lanes' bindings; the halt is honoured. */
static void test_lanes_and_halt(void)
{
    char *err = NULL;
    mesh_prepared p;
    running r;
    bool ok = prepare_on(B, "examples/wasm/counter/counter.wat", "counter",
                         ", \"entry\": \"counter\"", &p, &err);
    T_OK(ok, err);
    if (!ok || !launch(&p, 1, 4, &r, true)) {
        return;
    }
    uint32_t cores = B->ops->caps(B)->sms;
    uint32_t distinct = cores < 4 ? cores : 4;
    char *bind[4] = {0};
    hwloc_bitmap_t seen = hwloc_bitmap_alloc();
    for (uint32_t n = 0; n < 4; n++) {
        uint64_t until = now_ms() + T_TIMEOUT_MS;
        while (!mesh_wasm_node_binding(B, 1, n, &bind[n], NULL) &&
               now_ms() < until) {
            nap_ms(1);
        }
        T_TRUE(bind[n] != NULL);
    }
    for (uint32_t n = 0; n < distinct && bind[n] != NULL; n++) {
        hwloc_bitmap_t set = hwloc_bitmap_alloc();
        hwloc_bitmap_list_sscanf(set, bind[n]);
        if (hwloc_bitmap_intersects(set, seen)) {
            T_FAILF("node %u's lane is bound to %s, shared with an earlier "
                    "node (of the first %u)",
                    n, bind[n], distinct);
        }
        T_TRUE(!hwloc_bitmap_iszero(set));
        hwloc_bitmap_or(seen, seen, set);
        hwloc_bitmap_free(set);
    }
    printf("\n  lanes of 4 nodes on %u cores bound to: %s | %s | %s | %s\n",
           cores, bind[0], bind[1], bind[2], bind[3]);
    hwloc_bitmap_free(seen);
    for (int n = 0; n < 4; n++) {
        free(bind[n]);
    }
    T_TRUE(point_rises(1));
    bool done = true;
    T_TRUE(B->ops->query(B, r.st, r.k, &done, NULL) && !done);
    uint64_t t0 = now_ms();
    T_OK(unload(&r, &err), err);
    /* The nodes returned (exited counts them), within the halt period;
     * the time is only a hang guard. */
    T_TRUE(now_ms() - t0 < 10 * HALT_MS);
    T_EQ_U(atomic_load(&words(1)->exited), 4);
}
/* 200 launch/unload cycles leave threads, descriptors, lanes and files
 * as they were (test_wasm_faults checks the memory, not under valgrind). */
static void test_cycles(void)
{
    cycles_case(under_valgrind ? 10 : 200, false);
}

int main(void)
{
    under_valgrind = getenv("RIG_UNDER_VALGRIND") != NULL;
    mesh_settings s = SETTINGS;
    if (!wasm_test_open(&s)) {
        return 1;
    }
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite su = CU_add_suite("wasm", NULL, NULL);
    CU_add_test(su, "caps and mailbox", test_caps);
    CU_add_test(su, "compile and cache", test_compile_cache);
    CU_add_test(su, "a compile timeout ends the compiler's tree",
                test_compile_timeout);
    CU_add_test(su, "refusals", test_refusals);
    CU_add_test(su, "imports end to end", test_iface);
    CU_add_test(su, "scratch out of bounds traps", test_scratch_oob);
    CU_add_test(su, "lanes online, bound, halted", test_lanes_and_halt);
    CU_add_test(su, "nodes ignoring the halt", test_ignore_halt);
    CU_add_test(su, "traps after online reported so", test_trap_after_online);
    CU_add_test(su, "launch/unload cycles", test_cycles);
    int rc = t_run_registry();
    if (!wasm_test_close()) {
        rc = rc ? rc : 1;
    }
    mesh_backend_destroy(B);
    return rc;
}
