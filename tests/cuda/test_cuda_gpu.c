/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA backend on a GPU: caps, lifecycle, blink, MPS, occupancy and
 * admission, leaks.
 *
 * Exits 77 with the reason where the backend does not open (no driver, no
 * device).  Each test prints "GPU <test>: <detail>" lines that
 * mpi_tests/gpu/device-check.sh collects.  Programs come from the build
 * tree's catalog of the examples (CUDA_CATALOG_DIR). */
#include "mesh/cuda/cuda_internal.h"

#include "util/util_internal.h"

#include "mesh/driver.h"
#include "mesh/mesh_internal.h"
#include "mesh/executors.h"
#include "mesh/loader.h"
#include "cuda_test_util.h"
#include "test_util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static mesh_backend *be;
static mesh_cu_lib cu;

static bool prepare(const char *name, mesh_prepared *p)
{
    char *err = NULL;
    mesh_payload src;
    T_OK(mesh_payload_read(CUDA_CATALOG_DIR, name, &src, &err), err);
    if (err != NULL) {
        return false;
    }
    const mesh_compiler *c = be->ops->compiler(be);
    T_OK(c->ops->prepare(c, &src, NULL, NULL, p, &err), err);
    return err == NULL;
}

/* A payload of the PTX of program from (in dir) under another manifest. */
static bool prepare_ptx_as(const char *dir, const char *from, const char *name,
                           const char *manifest, mesh_prepared *p)
{
    char *err = NULL;
    mesh_payload cat, src;
    T_OK(mesh_payload_read(dir, from, &cat, &err), err);
    if (err != NULL) {
        return false;
    }
    char from_ptx[80];
    snprintf(from_ptx, sizeof(from_ptx), "%s.ptx", from);
    const mesh_payload_file *f = mesh_payload_find(&cat, from_ptx);
    char ptx_name[80];
    snprintf(ptx_name, sizeof(ptx_name), "%s.ptx", name);
    bool ok = f != NULL && mesh_payload_init(&src, name, &err) &&
              mesh_payload_add(&src, "manifest.json", manifest,
                               strlen(manifest), &err) &&
              mesh_payload_add(&src, ptx_name, f->data, f->len, &err);
    mesh_payload_free(&cat);
    T_OK(ok, err);
    if (!ok) {
        return false;
    }
    const mesh_compiler *c = be->ops->compiler(be);
    T_OK(c->ops->prepare(c, &src, NULL, NULL, p, &err), err);
    return err == NULL;
}

/* A payload of the counter's PTX under another manifest. */
static bool prepare_counter_as(const char *name, const char *manifest,
                               mesh_prepared *p)
{
    return prepare_ptx_as(CUDA_CATALOG_DIR, "counter", name, manifest, p);
}

static void test_caps(void)
{
    const mesh_caps *c = be->ops->caps(be);
    char arch[32];
    snprintf(arch, sizeof(arch), "sm_%d%d", c->cc_major, c->cc_minor);
    printf("GPU caps: %s cc %d.%d %s, %u/%u SMs, %u blocks/SM, %u threads, "
           "%u B shared\n",
           c->name, c->cc_major, c->cc_minor, c->arch, c->sms, c->sms_total,
           c->blocks_per_sm, c->max_tg_threads, c->max_shared);
    T_EQ_U(c->kind, MESH_BACKEND_CUDA);
    T_TRUE(c->name != NULL && c->name[0] != '\0');
    T_TRUE(c->cc_major >= 7);
    T_TRUE(c->sms_total > 0 && c->sms == c->sms_total && !c->green);
    T_TRUE(c->blocks_per_sm >= 16 && c->blocks_per_sm <= 64);
    T_EQ_U(c->max_tg_threads, 1024);
    T_TRUE(c->max_shared >= 48u * 1024u);
    T_TRUE(c->arch != NULL && strcmp(c->arch, arch) == 0);
    T_TRUE(be->ops->resident(be));
    T_TRUE(!be->ops->isolated(be));
    T_EQ_U(be->ops->isolation(be), MESH_ISOLATION_BLINK);
    uint32_t scope = 7;
    T_TRUE(!be->ops->module_scope(be, true, 3, &scope));
    uint8_t *host = NULL;
    uint64_t dev = 0;
    char *err = NULL;
    T_OK(be->ops->mailbox(be, &host, &dev, &err), err);
    const mesh_control_block *mb = (const void *)host;
    T_EQ_U(atomic_load(&mb->h.magic), MESH_CB_MAGIC);
    T_EQ_U(mb->h.sms_total, c->sms_total);
    T_TRUE(strcmp(mb->h.arch, c->arch) == 0);
    T_TRUE(dev != 0);
    size_t stack = 0;
    T_OK(be->ops->stack_limit(be, &stack, &err), err);
    T_TRUE(stack > 0);
    T_OK(be->ops->set_stack_limit(be, stack, &err), err);
}

/* The lifecycle through the backend's ops alone. */
static void test_lifecycle(void)
{
    mesh_prepared p;
    if (!prepare("counter", &p)) {
        return;
    }
    char *err = NULL;
    mesh_kernel *k = NULL;
    mesh_stream *st = NULL;
    uint8_t *host = NULL;
    uint64_t dev = 0;
    const uint32_t slot = 5, nodes = 4;
    T_OK(be->ops->mailbox(be, &host, &dev, &err), err);
    mesh_cb_slot *w = &((mesh_control_block *)(void *)host)->slot[slot];
    T_OK(be->ops->load(be, &p, &k, &err), err);
    if (k == NULL) {
        mesh_prepared_free(&p);
        return;
    }
    uint32_t regs = 0, local = 1, blocks = 0, abi = 0;
    T_OK(mesh_kernel_regs(k, &regs, &err), err);
    T_OK(mesh_kernel_local_bytes(k, &local, &err), err);
    T_OK(mesh_kernel_max_blocks_per_sm(k, &blocks, &err), err);
    T_OK(mesh_kernel_global_u32(k, "MESH_RT_ABI", &abi, &err), err);
    T_ERR(mesh_kernel_global_u32(k, "NO_SUCH", &abi, &err), err, "missing: ");
    T_TRUE(regs > 0 && blocks > 0);
    T_EQ_U(abi, MESH_RT_ABI_VERSION);
    T_TRUE(mesh_kernel_scratch(k) != 0);
    printf("GPU lifecycle: %u regs, %u local B, %u blocks/SM, compiled in "
           "%.1f ms\n",
           regs, local, blocks, p.compile_ms);
    T_OK(be->ops->new_stream(be, slot, k, &st, &err), err);
    uint64_t a = 0, b = 0;
    double online_ms =
        cuda_lifecycle(be, st, k, w, slot, nodes, dev,
                       be->ops->online_timeout_ms(be), 2000, &a, &b);
    printf("GPU lifecycle: online in %.1f ms, count %llu -> %llu in 100 ms, "
           "halted\n",
           online_ms, (unsigned long long)a, (unsigned long long)b);
    T_OK(be->ops->unload(be, k, &err), err);
    mesh_stream_drop(st);
    mesh_prepared_free(&p);
}

/* The pattern program writes its scratch; read it back. */
static void test_pattern(void)
{
    mesh_driver *d = NULL;
    mesh_prepared p;
    char *err = NULL;
    uint32_t slot = 0;
    T_OK(mesh_driver_open(be, &d, &err), err);
    if (d == NULL || !prepare("pattern", &p)) {
        mesh_driver_close(d);
        return;
    }
    uint64_t words = p.manifest.scratch / 4;
    T_OK(mesh_driver_start(d, &p, 0, &slot, &err), err);
    mesh_run_state state = MESH_RUN_RUNNING;
    T_OK(mesh_driver_wait(d, slot, 2000, &state, NULL, &err), err);
    T_EQ_U(state, MESH_RUN_DONE);
    T_EQ_U(mesh_driver_point(d, slot, 0), words);
    printf("GPU pattern: %s, point 0 = %llu of %llu words\n",
           state == MESH_RUN_DONE ? "done" : "not done",
           (unsigned long long)mesh_driver_point(d, slot, 0),
           (unsigned long long)words);
    T_OK(mesh_driver_stop(d, slot, &err), err);
    mesh_driver_close(d);
}

static void test_blink(void)
{
    mesh_driver *d = NULL;
    mesh_prepared a, b;
    char *err = NULL;
    uint32_t sa = 0, sb = 0;
    T_OK(mesh_driver_open(be, &d, &err), err);
    if (d == NULL || !prepare("counter", &a)) {
        mesh_driver_close(d);
        return;
    }
    T_OK(mesh_driver_start(d, &a, 4, &sa, &err), err);
    if (err != NULL || !prepare("pattern", &b)) {
        mesh_driver_close(d);
        return;
    }
    nap_ms(300);
    uint64_t c1 = mesh_driver_point(d, sa, 0);
    /* Loading B halts A, changes the module and relaunches A. */
    T_OK(mesh_driver_start(d, &b, 0, &sb, &err), err);
    uint64_t c2 = mesh_driver_point(d, sa, 0);
    nap_ms(20);
    uint64_t c3 = mesh_driver_point(d, sa, 0);
    mesh_run_state state = MESH_RUN_RUNNING;
    T_OK(mesh_driver_poll(d, sa, &state, NULL, &err), err);
    T_EQ_U(state, MESH_RUN_RUNNING);
    T_TRUE(c1 > 0 && c3 > c1);
    /* Unloading B blinks again. */
    T_OK(mesh_driver_wait(d, sb, 2000, &state, NULL, &err), err);
    T_OK(mesh_driver_stop(d, sb, &err), err);
    nap_ms(20);
    uint64_t c4 = mesh_driver_point(d, sa, 0);
    T_TRUE(c4 > c3);
    printf("GPU blink: count %llu before B, %llu at relaunch, %llu after, "
           "%llu after B's unload\n",
           (unsigned long long)c1, (unsigned long long)c2,
           (unsigned long long)c3, (unsigned long long)c4);
    T_OK(mesh_driver_stop(d, sa, &err), err);
    mesh_driver_close(d);
}

static void test_mps(void)
{
    char *err = NULL;
    mesh_backend *m = NULL;
    setenv("RIG_MESH_CUDA_ISOLATION", "mps", 1);
    bool ok = mesh_backend_open(MESH_BACKEND_CUDA, NULL, &m, &err);
    unsetenv("RIG_MESH_CUDA_ISOLATION");
    if (ok) {
        T_TRUE(m->ops->isolated(m));
        T_EQ_U(m->ops->isolation(m), MESH_ISOLATION_MPS);
        printf("GPU mps: opened\n");
        mesh_backend_destroy(m);
        return;
    }
    printf("GPU mps: %s\n", err != NULL ? err : "(null)");
    T_ERR(ok, err, "unsupported: MPS isolation");
}

/* Programs that cannot be resident beside a running one are refused
 * before the blink: the running one is neither halted nor relaunched (its
 * slot's launch word does not move).  One that fits still starts. */
static void test_occupancy(void)
{
    const mesh_caps *c = be->ops->caps(be);
    mesh_driver *d = NULL;
    mesh_prepared a, b, g, small;
    char *err = NULL;
    uint32_t sa = 0, sb = 0, sc = 0;
    uint8_t *host = NULL;
    uint64_t dev = 0;
    /* Shared memory past half an SM's (below the limit, which includes
     * the kernel's own static shared memory): one node per SM. */
    char man[256];
    snprintf(man, sizeof(man),
             "{\"name\": \"%s\", \"abi\": 1, \"backends\": [\"cuda\"], "
             "\"entry\": \"counter\", \"threads\": 32, \"scratch\": 64, "
             "\"shared\": %u}",
             "big", c->max_shared - 1024u);
    uint32_t n1 = c->sms * 3 / 4, n2 = c->sms / 2;
    if (n1 > MESH_MANIFEST_MAX_NODES) {
        printf("GPU occupancy: skipped (%u SMs exceed the node limit)\n",
               c->sms);
        return;
    }
    T_OK(mesh_driver_open(be, &d, &err), err);
    if (d == NULL || !prepare_counter_as("big", man, &a)) {
        mesh_driver_close(d);
        return;
    }
    T_OK(mesh_driver_start(d, &a, n1, &sa, &err), err);
    T_OK(be->ops->mailbox(be, &host, &dev, &err), err);
    if (err != NULL) {
        mesh_driver_close(d);
        return;
    }
    const mesh_cb_slot *wa = &((const mesh_control_block *)host)->slot[sa];
    const uint32_t launched = atomic_load(&wa->launch);
    nap_ms(50);
    uint64_t c1 = mesh_driver_point(d, sa, 0);
    snprintf(man, sizeof(man),
             "{\"name\": \"%s\", \"abi\": 1, \"backends\": [\"cuda\"], "
             "\"entry\": \"counter\", \"threads\": 32, \"scratch\": 64, "
             "\"shared\": %u}",
             "big2", c->max_shared - 1024u);
    if (!prepare_counter_as("big2", man, &b)) {
        mesh_driver_close(d);
        return;
    }
    bool ok = mesh_driver_start(d, &b, n2, &sb, &err);
    printf("GPU occupancy: %u + %u nodes of 1 per SM on %u SMs: %s\n", n1, n2,
           c->sms, ok ? "ADMITTED" : err);
    T_ERR(ok, err, "limits: program big2: ");
    T_EQ_U(atomic_load(&wa->launch), launched);
    T_EQ_U(atomic_load(&wa->halt), 0);
    /* Not one node fits: greedy's registers for 1024 threads. */
    if (prepare_ptx_as(CUDA_TEST_DATA, "greedy", "greedy",
                       "{\"name\": \"greedy\", \"abi\": 1, \"backends\": "
                       "[\"cuda\"], \"entry\": \"greedy\", \"threads\": 1024}",
                       &g)) {
        ok = mesh_driver_start(d, &g, 1, &sb, &err);
        printf("GPU occupancy: greedy, 1 node of 1024 threads: %s\n",
               ok ? "ADMITTED" : err);
        T_ERR(ok, err, "limits: program greedy: not one node");
    }
    T_EQ_U(atomic_load(&wa->launch), launched);
    nap_ms(20);
    T_TRUE(mesh_driver_point(d, sa, 0) > c1);
    /* A program that fits is admitted (and blinks the running one). */
    if (prepare("counter", &small)) {
        T_OK(mesh_driver_start(d, &small, 0, &sc, &err), err);
        if (err == NULL) {
            T_EQ_U(atomic_load(&wa->launch), launched + 1);
            T_OK(mesh_driver_stop(d, sc, &err), err);
        }
    }
    uint64_t c2 = mesh_driver_point(d, sa, 0);
    nap_ms(20);
    T_TRUE(mesh_driver_point(d, sa, 0) > c2);
    T_OK(mesh_driver_stop(d, sa, &err), err);
    mesh_driver_close(d);
}

/* The most nodes admit lets start with nothing running (its estimate of
 * blocks per SM times the SMs), found by bisection. */
static uint32_t admitted_max(const mesh_prepared *p)
{
    uint32_t lo = 0, hi = 1u << 24;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        char *err = NULL;
        if (be->ops->admit(be, p, mid, 0, &err)) {
            lo = mid;
        } else {
            free(err);
            hi = mid - 1;
        }
    }
    return lo;
}

/* admit never lets through more nodes than launch's exact check (the
 * loaded kernel's occupancy) does, for counters of several shapes. */
static void test_admit_bound(void)
{
    const mesh_caps *c = be->ops->caps(be);
    const uint32_t threads[] = {32, 256, 1024};
    const uint32_t shared[] = {0, 20000, c->max_shared / 2 - 2048,
                               c->max_shared - 1024};
    for (size_t t = 0; t < 3; t++) {
        for (size_t h = 0; h < 4; h++) {
            char man[256];
            snprintf(man, sizeof(man),
                     "{\"name\": \"shape\", \"abi\": 1, \"backends\": "
                     "[\"cuda\"], \"entry\": \"counter\", \"threads\": %u, "
                     "\"scratch\": 64, \"shared\": %u}",
                     threads[t], shared[h]);
            mesh_prepared p;
            mesh_kernel *k = NULL;
            char *err = NULL;
            uint32_t exact = 0;
            if (!prepare_counter_as("shape", man, &p)) {
                continue;
            }
            uint32_t most = admitted_max(&p);
            T_OK(be->ops->load(be, &p, &k, &err), err);
            if (k != NULL) {
                T_OK(mesh_kernel_max_blocks_per_sm(k, &exact, &err), err);
                T_OK(be->ops->unload(be, k, &err), err);
            }
            printf("GPU admit: %u threads, %u B shared, %u registers: "
                   "admits %u nodes, launch allows %u (%u per SM)\n",
                   threads[t], shared[h], p.regs, most, exact * c->sms, exact);
            T_TRUE(most >= 1);
            if (most > exact * c->sms) {
                T_FAILF("admit lets %u nodes through; launch allows %u", most,
                        exact * c->sms);
            }
            mesh_prepared_free(&p);
        }
    }
}

/* The admit op checks its arguments. */
static void test_admit_args(void)
{
    mesh_prepared p;
    char *err = NULL;
    T_TRUE(be->ops->admit != NULL);
    if (be->ops->admit == NULL || !prepare("counter", &p)) {
        return;
    }
    T_TRUE(p.regs > 0);
    T_OK(be->ops->admit(be, &p, 1, 0, &err), err);
    T_ERR(be->ops->admit(be, NULL, 1, 0, &err), err, "invalid: cuda admit");
    T_ERR(be->ops->admit(be, &p, 0, 0, &err), err, "invalid: cuda admit");
    T_ERR(be->ops->admit(be, &p, 1, MESH_PROG_SLOTS, &err), err,
          "invalid: cuda admit");
    T_ERR(be->ops->admit(NULL, &p, 1, 0, &err), err, "invalid: cuda admit");
    p.exec = MESH_BACKEND_NATIVE;
    T_ERR(be->ops->admit(be, &p, 1, 0, &err), err,
          "invalid: cuda admit: program counter was not compiled");
    p.exec = MESH_BACKEND_CUDA;
    /* No register count known: admitted, the launch's check decides. */
    p.regs = 0;
    T_OK(be->ops->admit(be, &p, MESH_MANIFEST_MAX_NODES, 0, &err), err);
    mesh_prepared_free(&p);
}

static void test_leak(void)
{
    char *err = NULL;
    mesh_prepared p;
    if (!prepare_counter_as("leaky",
                            "{\"name\": \"leaky\", \"abi\": 1, \"backends\": "
                            "[\"cuda\"], \"entry\": \"counter\", "
                            "\"scratch\": 1048576}",
                            &p)) {
        return;
    }
    size_t free0 = 0, free1 = 0, total = 0;
    T_OK(be->ops->make_current(be, &err), err);
    T_OK(mesh_cu_check(&cu, cu.cuMemGetInfo_p(&free0, &total), NULL,
                       "cuMemGetInfo", &err),
         err);
    int cycles = 0;
    for (int i = 0; i < 100; i++) {
        mesh_kernel *k = NULL;
        mesh_stream *st = NULL;
        if (!be->ops->load(be, &p, &k, &err) ||
            !be->ops->new_stream(be, 9, k, &st, &err)) {
            T_OK(false, err);
            mesh_kernel_drop(k);
            break;
        }
        mesh_stream_drop(st);
        T_OK(be->ops->unload(be, k, &err), err);
        cycles++;
    }
    T_OK(be->ops->make_current(be, &err), err);
    T_OK(mesh_cu_check(&cu, cu.cuMemGetInfo_p(&free1, &total), NULL,
                       "cuMemGetInfo", &err),
         err);
    long long lost = (long long)free0 - (long long)free1;
    printf("GPU leak: %d load/unload cycles, free %zu -> %zu MiB (%lld KiB "
           "lost)\n",
           cycles, free0 >> 20, free1 >> 20, lost / 1024);
    T_EQ_U(cycles, 100);
    /* 100 leaked scratches would be 100 MiB. */
    T_TRUE(lost < 8ll * 1024 * 1024);
    mesh_prepared_free(&p);
}

/* Runs a test and prints "RESULT <name>: PASS|FAIL" for device-check.sh. */
#define GPU_TEST(fn, name)                                                     \
    static void fn##_run(void)                                                 \
    {                                                                          \
        unsigned f0 = CU_get_number_of_failures();                             \
        fn();                                                                  \
        printf("RESULT %s: %s\n", name,                                        \
               CU_get_number_of_failures() == f0 ? "PASS" : "FAIL");           \
    }
GPU_TEST(test_caps, "caps")
GPU_TEST(test_lifecycle, "lifecycle")
GPU_TEST(test_pattern, "pattern")
GPU_TEST(test_blink, "blink")
GPU_TEST(test_mps, "mps")
GPU_TEST(test_occupancy, "occupancy")
GPU_TEST(test_leak, "leak")
GPU_TEST(test_admit_args, "admit arguments")
GPU_TEST(test_admit_bound, "admit bound")

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    char *err = NULL;
    /* Referenced here, the backend's strong hooks replace the table's weak
     * stubs in this statically linked test. */
    if (!mesh_cuda_built()) {
        printf("SKIP: the CUDA backend is not built\n");
        return 77;
    }
    if (!mesh_backend_open(MESH_BACKEND_CUDA, NULL, &be, &err)) {
        printf("SKIP: the CUDA backend does not open here: %s\n", err);
        free(err);
        return 77;
    }
    if (!mesh_cu_lib_open(&cu, &err)) {
        printf("SKIP: %s\n", err);
        free(err);
        mesh_backend_destroy(be);
        return 77;
    }
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite s = CU_add_suite("cuda_gpu", NULL, NULL);
    CU_add_test(s, "caps", test_caps_run);
    CU_add_test(s, "lifecycle", test_lifecycle_run);
    CU_add_test(s, "pattern", test_pattern_run);
    CU_add_test(s, "blink", test_blink_run);
    CU_add_test(s, "mps", test_mps_run);
    CU_add_test(s, "occupancy", test_occupancy_run);
    CU_add_test(s, "leak", test_leak_run);
    CU_add_test(s, "admit arguments", test_admit_args_run);
    CU_add_test(s, "admit bound", test_admit_bound_run);
    int rc = t_run_registry();
    mesh_backend_destroy(be);
    mesh_cu_lib_close(&cu);
    return rc;
}
