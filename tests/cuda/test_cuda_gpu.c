/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA backend on a GPU, or on the stand-in driver: caps, lifecycle,
 * blink, occupancy and admission, hardware queues, closing with programs
 * resident, shared memory, green contexts, faults, leaks.
 *
 *   test_cuda_gpu            every case but "fault"
 *   test_cuda_gpu CASE...    those cases ("fault" loses the context: it
 *                            runs alone, in a process of its own)
 *   test_cuda_gpu open       opens the backend and prints "open: ok" or
 *                            "open: <why>" (the refusal tests' probe)
 *
 * Exits 77 only where there is no GPU to test: no driver, no device.  The
 * backend was found at build time, so any other refusal to open is a
 * failure (the stand-in driver is a driver).  Each case prints "GPU <case>:
 * <detail>" lines and "RESULT <case>: PASS|FAIL|SKIP" for
 * mpi_tests/gpu/device-check.sh; a case that cannot run its check here
 * reports SKIP, and the program then exits 77, never 0.  Programs come
 * from the build tree's catalog of the examples (CUDA_CATALOG_DIR) and
 * tests/cuda/data. */
#include "mesh/cuda/cuda_backend_internal.h"

#include "util/util_internal.h"

#include "mesh/driver.h"
#include "mesh/executors.h"
#include "mesh/loader.h"
#include "mesh/mesh_internal.h"
#include "cuda_test_util.h"
#include "test_util.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static mesh_backend *be;
static mesh_cu_lib cu;
static CUcontext primary; /* the device's, for the test's own queries */

/* Runs a driver call with the device's primary context pushed. */
#define WITH_PRIMARY(call)                                                     \
    do {                                                                       \
        CUcontext p_;                                                          \
        cu.cuCtxPushCurrent_p(primary);                                        \
        call;                                                                  \
        cu.cuCtxPopCurrent_p(&p_);                                             \
    } while (0)

static bool prepare_with(mesh_backend *b, const char *dir, const char *name,
                         mesh_prepared *p)
{
    char *err = NULL;
    mesh_payload src;
    T_OK(mesh_payload_read(dir, name, &src, &err), err);
    if (err != NULL) {
        return false;
    }
    const mesh_compiler *c = b->ops->compiler(b);
    T_OK(c->ops->prepare(c, &src, NULL, NULL, p, &err), err);
    return err == NULL;
}

static bool prepare(const char *name, mesh_prepared *p)
{
    return prepare_with(be, CUDA_CATALOG_DIR, name, p);
}

/* A payload of the PTX of program from (in dir) under another manifest;
 * false with *err (may be NULL) when the compiler refuses it. */
static bool prepare_ptx_as(const char *dir, const char *from, const char *name,
                           const char *manifest, mesh_prepared *p, char **err)
{
    mesh_payload cat, src;
    char *e = NULL;
    T_OK(mesh_payload_read(dir, from, &cat, &e), e);
    if (e != NULL) {
        return false;
    }
    char from_ptx[80];
    snprintf(from_ptx, sizeof(from_ptx), "%s.ptx", from);
    const mesh_payload_file *f = mesh_payload_find(&cat, from_ptx);
    char ptx_name[80];
    snprintf(ptx_name, sizeof(ptx_name), "%s.ptx", name);
    bool ok = f != NULL && mesh_payload_init(&src, name, &e) &&
              mesh_payload_add(&src, "manifest.json", manifest,
                               strlen(manifest), &e) &&
              mesh_payload_add(&src, ptx_name, f->data, f->len, &e);
    mesh_payload_free(&cat);
    T_OK(ok, e);
    if (!ok) {
        return false;
    }
    const mesh_compiler *c = be->ops->compiler(be);
    ok = c->ops->prepare(c, &src, NULL, NULL, p, &e);
    if (!ok && err != NULL) {
        *err = e;
    } else if (!ok) {
        T_OK(false, e);
    }
    return ok;
}

/* A counter under another manifest: threads, shared bytes, scratch. */
static bool prepare_counter_scratch(const char *name, uint32_t threads,
                                    uint32_t shared, uint64_t scratch,
                                    mesh_prepared *p, char **err)
{
    char man[320];
    snprintf(man, sizeof(man),
             "{\"name\": \"%s\", \"abi\": 1, \"backends\": [\"cuda\"], "
             "\"entry\": \"counter\", \"threads\": %u, \"scratch\": %llu, "
             "\"shared\": %u}",
             name, threads, (unsigned long long)scratch, shared);
    return prepare_ptx_as(CUDA_CATALOG_DIR, "counter", name, man, p, err);
}

static bool prepare_counter(const char *name, uint32_t threads, uint32_t shared,
                            mesh_prepared *p, char **err)
{
    return prepare_counter_scratch(name, threads, shared, 64, p, err);
}

/* Starts a counter; false (the test failed) when it does not start. */
static bool start_counter(mesh_driver *d, const char *name, uint32_t threads,
                          uint32_t shared, uint32_t nodes, uint32_t *slot)
{
    mesh_prepared p;
    char *err = NULL;
    if (!prepare_counter(name, threads, shared, &p, NULL)) {
        return false;
    }
    bool ok = mesh_driver_start(d, &p, nodes, slot, &err);
    T_OK(ok, err);
    return ok;
}

/* ---- the device and the backend ----------------------------------------- */

static const char *mode_name(int m)
{
    switch (m) {
    case CU_COMPUTEMODE_DEFAULT:
        return "Default";
    case CU_COMPUTEMODE_PROHIBITED:
        return "Prohibited";
    case CU_COMPUTEMODE_EXCLUSIVE_PROCESS:
        return "Exclusive-Process";
    default:
        return "unknown";
    }
}

/* What a first GPU run must show before anything else. */
static void test_environment(void)
{
    const cuda_backend *cb = be->self;
    int drv = 0, mode = -1, atomics = -1, hostptr = -1, watchdog = -1;
    cu.cuDriverGetVersion_p(&drv);
    cu.cuDeviceGetAttribute_p(&mode, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, cb->dev);
    cu.cuDeviceGetAttribute_p(
        &atomics, CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, cb->dev);
    cu.cuDeviceGetAttribute_p(
        &hostptr, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
        cb->dev);
    cu.cuDeviceGetAttribute_p(&watchdog,
                              CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT, cb->dev);
    unsigned jmaj = 0, jmin = 0;
    mesh_cuda_compiler_version(cb->comp, &jmaj, &jmin);
    const char *conns = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    printf("GPU environment: driver CUDA %d.%d (%d), nvJitLink %u.%u\n",
           drv / 1000, drv % 1000 / 10, drv, jmaj, jmin);
    printf("GPU environment: compute mode %s, host-native atomics %s, "
           "CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM %d, watchdog "
           "(KERNEL_EXEC_TIMEOUT) %s\n",
           mode_name(mode), atomics == 1 ? "yes" : "no", hostptr,
           watchdog == 1 ? "on" : "off");
    printf("GPU environment: %u hardware queues (CUDA_DEVICE_MAX_CONNECTIONS "
           "%s), %u streams in the pool\n",
           cb->conns, conns != NULL ? conns : "unset", cb->npool);
    T_TRUE(drv / 1000 >= (int)jmaj);
    T_TRUE(mode == CU_COMPUTEMODE_DEFAULT ||
           mode == CU_COMPUTEMODE_EXCLUSIVE_PROCESS);
    T_EQ_U(watchdog, 0);
    T_EQ_U(cb->conns, mesh_cuda_connections());
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

/* No op leaves a context of the backend's current on the calling thread
 * (a UCX built with CUDA would register host memory under it). */
static void test_context(void)
{
    CUcontext c = (CUcontext)1;
    char *err = NULL;
    T_OK(be->ops->make_current(be, &err), err);
    cu.cuCtxGetCurrent_p(&c);
    T_TRUE(c == NULL);
    mesh_driver *d = NULL;
    uint32_t s = 0;
    T_OK(mesh_driver_open(be, &d, &err), err);
    if (d != NULL && start_counter(d, "ctx", 32, 0, 2, &s)) {
        wait_point_above(d, s, 0);
        mesh_run_state state;
        T_OK(mesh_driver_poll(d, s, &state, NULL, &err), err);
        T_OK(mesh_driver_stop(d, s, &err), err);
    }
    mesh_driver_close(d);
    c = (CUcontext)1;
    cu.cuCtxGetCurrent_p(&c);
    printf("GPU context: %s current on the caller's thread after make_current, "
           "start, poll, stop and close\n",
           c == NULL ? "none" : "a context is");
    T_TRUE(c == NULL);
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
    double online_ms = cuda_lifecycle(be, st, k, w, slot, nodes, dev, &a, &b);
    printf("GPU lifecycle: online in %.1f ms, count %llu -> %llu, halted\n",
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
    T_OK(mesh_driver_wait(d, slot, CUDA_TEST_GUARD_MS, &state, NULL, &err),
         err);
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
    uint64_t c1 = wait_point_above(d, sa, 0);
    /* Loading B halts A, changes the module and relaunches A. */
    T_OK(mesh_driver_start(d, &b, 0, &sb, &err), err);
    uint64_t c2 = mesh_driver_point(d, sa, 0);
    uint64_t c3 = wait_point_above(d, sa, c2);
    mesh_run_state state = MESH_RUN_RUNNING;
    T_OK(mesh_driver_poll(d, sa, &state, NULL, &err), err);
    T_EQ_U(state, MESH_RUN_RUNNING);
    T_TRUE(c1 > 0 && c3 > c2 && c2 >= c1);
    /* Unloading B blinks again. */
    T_OK(mesh_driver_wait(d, sb, CUDA_TEST_GUARD_MS, &state, NULL, &err), err);
    T_OK(mesh_driver_stop(d, sb, &err), err);
    uint64_t c4 = wait_point_above(d, sa, c3);
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

/* ---- what fits ---------------------------------------------------------- */

/* Programs that cannot be resident beside a running one are refused
 * before the blink: the running one is neither halted nor relaunched (its
 * slot's launch word does not move).  One that fits still starts. */
static void test_occupancy(void)
{
    const mesh_caps *c = be->ops->caps(be);
    mesh_driver *d = NULL;
    mesh_prepared g;
    char *err = NULL;
    uint32_t sa = 0, sb = 0, sc = 0;
    uint8_t *host = NULL;
    uint64_t dev = 0;
    /* Shared memory past half an SM's (below the limit, which includes
     * the kernel's own static shared memory): one node per SM. */
    const uint32_t big = c->max_shared - 1024u;
    uint32_t n1 = c->sms * 3 / 4, n2 = c->sms / 2;
    if (n1 > MESH_MANIFEST_MAX_NODES) {
        t_skip("%u SMs exceed the node limit %u", c->sms,
               MESH_MANIFEST_MAX_NODES);
        return;
    }
    T_OK(mesh_driver_open(be, &d, &err), err);
    if (d == NULL || !start_counter(d, "big", 32, big, n1, &sa)) {
        mesh_driver_close(d);
        return;
    }
    T_OK(be->ops->mailbox(be, &host, &dev, &err), err);
    const mesh_cb_slot *wa = &((const mesh_control_block *)host)->slot[sa];
    const uint32_t launched = atomic_load(&wa->launch);
    uint64_t c1 = wait_point_above(d, sa, 0);
    mesh_prepared b;
    if (!prepare_counter("big2", 32, big, &b, NULL)) {
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
                       &g, NULL)) {
        ok = mesh_driver_start(d, &g, 1, &sb, &err);
        printf("GPU occupancy: greedy, 1 node of 1024 threads: %s\n",
               ok ? "ADMITTED" : err);
        T_ERR(ok, err, "limits: program greedy: not one node");
    }
    T_EQ_U(atomic_load(&wa->launch), launched);
    T_TRUE(wait_point_above(d, sa, c1) > c1);
    /* A program on the SMs left is admitted (and blinks the running one). */
    if (start_counter(d, "small", 32, 0, c->sms - n1, &sc)) {
        T_EQ_U(atomic_load(&wa->launch), launched + 1);
        T_OK(mesh_driver_stop(d, sc, &err), err);
    }
    uint64_t c2 = mesh_driver_point(d, sa, 0);
    T_TRUE(wait_point_above(d, sa, c2) > c2);
    T_OK(mesh_driver_stop(d, sa, &err), err);
    mesh_driver_close(d);
}

/* Residency is per SM: a program of one node per SM on all SMs but two
 * beside a small one on four (which the scheduler may spread over four
 * SMs first) cannot all be resident, though the fractions of SMs they use
 * add up to less than the device.  Refused; one that leaves the small
 * one's SMs free is admitted and every node of both comes online. */
static void test_fragmentation(void)
{
    const mesh_caps *c = be->ops->caps(be);
    /* The whole of an SM's shared memory: one node per SM, none beside. */
    const uint32_t whole = c->max_shared - 8u; /* the counter's 8 static */
    const uint32_t ns = c->sms >= 8 ? 4 : c->sms / 2;
    mesh_driver *d = NULL;
    char *err = NULL;
    uint32_t ss = 0, sb = 0;
    if (c->sms < 4 || c->sms - 2 > MESH_MANIFEST_MAX_NODES) {
        t_skip("%u SMs", c->sms);
        return;
    }
    T_OK(mesh_driver_open(be, &d, &err), err);
    if (d == NULL || !start_counter(d, "small", 32, 0, 4, &ss)) {
        mesh_driver_close(d);
        return;
    }
    mesh_prepared p;
    if (!prepare_counter("whole", 32, whole, &p, NULL)) {
        mesh_driver_close(d);
        return;
    }
    bool ok = mesh_driver_start(d, &p, c->sms - 2, &sb, &err);
    printf("GPU fragmentation: %u nodes of one per SM beside 4 small ones on "
           "%u SMs: %s\n",
           c->sms - 2, c->sms, ok ? "ADMITTED" : err);
    T_ERR(ok, err, "limits: program whole: ");
    T_OK(mesh_driver_stop(d, ss, &err), err);
    /* ns small nodes and sms - ns whole ones: one SM each, always room. */
    if (start_counter(d, "small", 32, 0, ns, &ss) &&
        start_counter(d, "whole", 32, whole, c->sms - ns, &sb)) {
        uint64_t a = wait_point_above(d, ss, 0);
        uint64_t b = wait_point_above(d, sb, 0);
        printf("GPU fragmentation: %u small and %u whole-SM nodes resident, "
               "counting (%llu, %llu)\n",
               ns, c->sms - ns, (unsigned long long)a, (unsigned long long)b);
        T_TRUE(a > 0 && b > 0);
        T_OK(mesh_driver_stop(d, sb, &err), err);
        T_OK(mesh_driver_stop(d, ss, &err), err);
    }
    mesh_driver_close(d);
}

/* 49,148 B of dynamic shared memory: under 48 KiB alone, over it with the
 * kernel's static shared memory, which the per-function limit counts. */
static void test_shared(void)
{
    const mesh_caps *c = be->ops->caps(be);
    mesh_driver *d = NULL;
    char *err = NULL;
    uint32_t s = 0;
    T_OK(mesh_driver_open(be, &d, &err), err);
    if (d != NULL && start_counter(d, "shared", 32, 49148, 1, &s)) {
        uint64_t v = wait_point_above(d, s, 0);
        printf("GPU shared: 49148 B of dynamic shared memory: started, "
               "counting (%llu)\n",
               (unsigned long long)v);
        T_TRUE(v > 0);
        T_OK(mesh_driver_stop(d, s, &err), err);
    }
    mesh_driver_close(d);
    /* All of the opt-in limit as dynamic memory leaves none for the
     * kernel's own: refused by the compiler, before any blink. */
    mesh_prepared p;
    bool ok = prepare_counter("toomuch", 32, c->max_shared, &p, &err);
    printf("GPU shared: %u B (the whole per-node limit) and the kernel's "
           "own: %s\n",
           c->max_shared, ok ? "ACCEPTED" : err);
    if (ok) {
        mesh_prepared_free(&p);
    }
    T_ERR(ok, err, "limits: program toomuch asks for");
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
            mesh_prepared p;
            mesh_kernel *k = NULL;
            char *err = NULL;
            uint32_t exact = 0;
            if (!prepare_counter("shape", threads[t], shared[h], &p, NULL)) {
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

/* ---- hardware queues ---------------------------------------------------- */

/* 12 programs started one after another, each start blinking the others:
 * every one that starts keeps counting.  With fewer hardware queues than
 * 12 (CUDA_DEVICE_MAX_CONNECTIONS, 8 unless set), the first that would
 * share one is refused, naming the variable. */
static void test_connections(void)
{
    const uint32_t want = 12;
    const cuda_backend *cb = be->self;
    uint32_t fits = cb->conns < want ? cb->conns : want;
    mesh_driver *d = NULL;
    char *err = NULL;
    uint32_t slot[12] = {0};
    uint32_t started = 0;
    T_OK(mesh_driver_open(be, &d, &err), err);
    for (uint32_t i = 0; d != NULL && i < fits; i++) {
        char name[16];
        snprintf(name, sizeof(name), "c%u", i);
        if (!start_counter(d, name, 32, 0, 2, &slot[i])) {
            break;
        }
        started++;
        /* Each program started so far counts after this start's blink. */
        for (uint32_t j = 0; j <= i; j++) {
            uint64_t v = mesh_driver_point(d, slot[j], 0);
            if (wait_point_above(d, slot[j], v) <= v) {
                T_FAILF("program c%u stopped counting after c%u started", j, i);
            }
        }
    }
    T_EQ_U(started, fits);
    printf("GPU connections: %u queues (CUDA_DEVICE_MAX_CONNECTIONS %s): %u "
           "programs started one after another, all counting\n",
           cb->conns,
           getenv("CUDA_DEVICE_MAX_CONNECTIONS") != NULL
               ? getenv("CUDA_DEVICE_MAX_CONNECTIONS")
               : "unset",
           started);
    if (fits < want && started == fits) {
        mesh_prepared p;
        if (prepare_counter("one-more", 32, 0, &p, NULL)) {
            uint32_t s = 0;
            bool ok = mesh_driver_start(d, &p, 2, &s, &err);
            printf("GPU connections: program %u: %s\n", fits + 1,
                   ok ? "STARTED" : err);
            T_ERR(ok, err, "limits: program one-more: ");
        }
        for (uint32_t j = 0; j < started; j++) {
            uint64_t v = mesh_driver_point(d, slot[j], 0);
            T_TRUE(wait_point_above(d, slot[j], v) > v);
        }
    }
    for (uint32_t i = 0; i < started; i++) {
        T_OK(mesh_driver_stop(d, slot[i], &err), err);
    }
    mesh_driver_close(d);
}

/* ---- closing with programs resident ------------------------------------- */

static void close_alarm(int sig)
{
    (void)sig;
    static const char msg[] =
        "FAIL close 3: mesh_driver_close still runs after 30 s\n";
    if (write(1, msg, sizeof(msg) - 1) < 0) {
        _exit(1);
    }
    _exit(1);
}

/* Closing the driver with three programs resident: each is halted and
 * unloaded in turn while the later ones still run, and their memory is
 * freed all the same once none runs.  A 30 s alarm ends the process if
 * close hangs. */
static void test_close(void)
{
    mesh_driver *d = NULL;
    char *err = NULL;
    uint32_t s[3] = {0};
    size_t free0 = 0, free1 = 0, free2 = 0, total = 0;
    CUresult r = CUDA_SUCCESS;
    WITH_PRIMARY(r = cu.cuMemGetInfo_p(&free0, &total));
    T_OK(mesh_cu_check(&cu, r, NULL, "cuMemGetInfo", &err), err);
    T_OK(mesh_driver_open(be, &d, &err), err);
    bool ok = d != NULL;
    for (int i = 0; ok && i < 3; i++) {
        /* 8 MiB of scratch each: one leaked shows past the slack below. */
        char name[16];
        mesh_prepared p;
        snprintf(name, sizeof(name), "resident%d", i);
        ok = prepare_counter_scratch(name, 32, 0, 8u << 20, &p, NULL) &&
             mesh_driver_start(d, &p, 2, &s[i], &err);
        T_OK(ok, err);
    }
    for (int i = 0; ok && i < 3; i++) {
        T_TRUE(wait_point_above(d, s[i], 0) > 0);
    }
    WITH_PRIMARY(cu.cuMemGetInfo_p(&free1, &total));
    struct sigaction sa = {.sa_handler = close_alarm}, old;
    sigaction(SIGALRM, &sa, &old);
    alarm(30);
    uint64_t t0 = rig_now_ns();
    mesh_driver_close(d);
    double ms = (double)(rig_now_ns() - t0) / 1e6;
    alarm(0);
    sigaction(SIGALRM, &old, NULL);
    WITH_PRIMARY(cu.cuMemGetInfo_p(&free2, &total));
    printf("GPU close 3: closed with 3 programs running in %.1f ms; free "
           "%zu -> %zu -> %zu KiB\n",
           ms, free0 >> 10, free1 >> 10, free2 >> 10);
    T_TRUE(ok);
    /* Three scratches and modules were freed, not leaked (4 MiB of slack
     * for what the driver allocates for itself). */
    T_TRUE(free2 + (4u << 20) >= free0);
    T_TRUE(free1 + (24u << 20) <= free0);
}

/* ---- green contexts ------------------------------------------------------ */

/* A backend on a green context of want SMs: caps say what the split gave
 * (rounded up to the device's granularity), a counter runs on it, and the
 * backend goes without leaving its streams behind. */
static void green(uint32_t want)
{
    const mesh_caps *whole = be->ops->caps(be);
    char v[16];
    char *err = NULL;
    mesh_backend *g = NULL;
    snprintf(v, sizeof(v), "%u", want);
    setenv("RIG_MESH_CUDA_SMS", v, 1);
    bool ok = mesh_backend_open(MESH_BACKEND_CUDA, NULL, &g, &err);
    unsetenv("RIG_MESH_CUDA_SMS");
    if (want > whole->sms_total) {
        printf("GPU green %u: %s\n", want, ok ? "OPENED" : err);
        T_ERR(ok, err, "limits: RIG_MESH_CUDA_SMS=");
        mesh_backend_destroy(g);
        return;
    }
    T_OK(ok, err);
    if (!ok) {
        return;
    }
    const mesh_caps *c = g->ops->caps(g);
    T_TRUE(c->green);
    T_TRUE(c->sms >= want && c->sms <= c->sms_total);
    mesh_driver *d = NULL;
    mesh_prepared p;
    uint32_t s = 0;
    uint64_t a = 0;
    T_OK(mesh_driver_open(g, &d, &err), err);
    if (d != NULL && prepare_with(g, CUDA_CATALOG_DIR, "counter", &p)) {
        /* As many nodes as the green context has SMs, so it is used. */
        bool started = mesh_driver_start(d, &p, c->sms, &s, &err);
        T_OK(started, err);
        if (started) {
            a = wait_point_above(d, s, 0);
            T_TRUE(a > 0);
            T_OK(mesh_driver_stop(d, s, &err), err);
        }
    }
    mesh_driver_close(d);
    printf("GPU green %u: a green context of %u of %u SMs; a counter on %u "
           "nodes counted to %llu\n",
           want, c->sms, c->sms_total, c->sms, (unsigned long long)a);
    mesh_backend_destroy(g);
}

static void test_green_16(void)
{
    green(16);
}

static void test_green_1(void)
{
    green(1);
}

/* ---- leaks --------------------------------------------------------------- */

static void test_leak(void)
{
    char *err = NULL;
    mesh_prepared p;
    if (!prepare_ptx_as(CUDA_CATALOG_DIR, "counter", "leaky",
                        "{\"name\": \"leaky\", \"abi\": 1, \"backends\": "
                        "[\"cuda\"], \"entry\": \"counter\", "
                        "\"scratch\": 1048576}",
                        &p, NULL)) {
        return;
    }
    size_t free0 = 0, free1 = 0, total = 0;
    CUresult r = CUDA_SUCCESS;
    WITH_PRIMARY(r = cu.cuMemGetInfo_p(&free0, &total));
    T_OK(mesh_cu_check(&cu, r, NULL, "cuMemGetInfo", &err), err);
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
    WITH_PRIMARY(r = cu.cuMemGetInfo_p(&free1, &total));
    T_OK(mesh_cu_check(&cu, r, NULL, "cuMemGetInfo", &err), err);
    long long lost = (long long)free0 - (long long)free1;
    printf("GPU leak: %d load/unload cycles, free %zu -> %zu MiB (%lld KiB "
           "lost)\n",
           cycles, free0 >> 20, free1 >> 20, lost / 1024);
    T_EQ_U(cycles, 100);
    /* 100 leaked scratches would be 100 MiB. */
    T_TRUE(lost < 8ll * 1024 * 1024);
    mesh_prepared_free(&p);
}

/* ---- a fault (alone: it loses the context) ------------------------------ */

/* A kernel that faults next to a counter: both are reported crashed (the
 * fault is sticky, the context and every program in it lost), and a later
 * start is refused with the reason. */
static void test_fault(void)
{
    mesh_driver *d = NULL;
    mesh_prepared f;
    char *err = NULL;
    uint32_t sc = 0, sf = 0;
    T_OK(mesh_driver_open(be, &d, &err), err);
    if (d == NULL || !start_counter(d, "counter", 32, 0, 2, &sc)) {
        mesh_driver_close(d);
        return;
    }
    if (!prepare_with(be, CUDA_TEST_DATA, "fault", &f)) {
        mesh_driver_close(d);
        return;
    }
    T_OK(mesh_driver_start(d, &f, 0, &sf, &err), err);
    mesh_run_state state = MESH_RUN_RUNNING;
    char *why_f = NULL, *why_c = NULL;
    T_OK(mesh_driver_wait(d, sf, CUDA_TEST_GUARD_MS, &state, &why_f, &err),
         err);
    T_EQ_U(state, MESH_RUN_CRASHED);
    T_OK(mesh_driver_wait(d, sc, CUDA_TEST_GUARD_MS, &state, &why_c, &err),
         err);
    T_EQ_U(state, MESH_RUN_CRASHED);
    printf("GPU fault: the faulting program: %s\n",
           why_f != NULL ? why_f : "(no reason)");
    printf("GPU fault: the counter beside it: %s\n",
           why_c != NULL ? why_c : "(no reason)");
    T_TRUE(why_f != NULL && strstr(why_f, "CUDA_ERROR_") != NULL);
    T_TRUE(why_c != NULL && strstr(why_c, "CUDA_ERROR_") != NULL);
    free(why_f);
    free(why_c);
    mesh_prepared p;
    if (prepare("counter", &p)) {
        uint32_t s = 0;
        bool ok = mesh_driver_start(d, &p, 2, &s, &err);
        printf("GPU fault: a later start: %s\n", ok ? "STARTED" : err);
        T_ERR(ok, err, "load: program counter: the CUDA context is lost");
    }
    T_OK(mesh_driver_stop(d, sf, &err), err);
    T_OK(mesh_driver_stop(d, sc, &err), err);
    mesh_driver_close(d);
}

/* ---- rails: a kernel drives a rail end ------------------------------------
 */

#define RAILS_TRIPS 2000u

static uint64_t rails_value(uint64_t c)
{
    return c * 2654435761ull + 7ull;
}

typedef struct {
    rig_end *end;
    uint64_t c;
} rails_ready_arg;

static void CUDA_CB rails_host_ready(void *p)
{
    rails_ready_arg *a = p;
    rig_end_ready(a->end, a->c);
}

/* The host's side at end b of what the kernel sends on a: count c's value
 * arrived bit for bit. */
static bool rails_arrived(rig_end *b, uint64_t c)
{
    bool timed_out = false;
    if (!rig_end_wait_arrived_for(b, c, CUDA_TEST_GUARD_MS, &timed_out)) {
        T_FAILF("count %llu never arrived (%s)", (unsigned long long)c,
                timed_out ? "hang guard" : "the rail failed");
        return false;
    }
    uint64_t v;
    memcpy(&v, rig_area_copy(rig_end_inbound(b), (unsigned)((c - 1) % 2)).base,
           8);
    if (v != rails_value(c)) {
        T_FAILF("count %llu brought %llx, not %llx", (unsigned long long)c,
                (unsigned long long)v, (unsigned long long)rails_value(c));
        return false;
    }
    return true;
}

/* Rails driven by a kernel (examples/cuda/rails): the resident kernel
 * writes through the end's device address and raises its point, which the
 * backend's watcher turns into ready; then the same messages signalled by
 * cuStreamWriteValue64 after a kernel and a host poll, and by
 * cuLaunchHostFunc: one-way times side by side. */
static void test_rails(void)
{
    char *err = NULL;
    rig_transfer t = {0, 0, 8};
    rig_rail *ra = NULL, *rb = NULL;
    T_OK(rig_loopback_make(7, &t, 1, &t, 1, &ra, &rb, &err), err);
    if (ra == NULL) {
        return;
    }
    rig_end *a = rig_rail_local(ra), *b = rig_rail_local(rb);
    mesh_end_binding bind = {.input = 0,
                             .id = 7,
                             .peer = 1,
                             .here = 0,
                             .end = a,
                             .send = &t,
                             .nsend = 1,
                             .receive = &t,
                             .nreceive = 1,
                             .peer_place = {.shm = -1}};
    mesh_ends ends = {.b = &bind, .n = 1};
    mesh_driver *d = NULL;
    mesh_prepared p;
    uint32_t slot = 0;
    T_OK(mesh_driver_open(be, &d, &err), err);
    if (d == NULL || !prepare("rails", &p)) {
        mesh_driver_close(d);
        rig_rail_release(ra);
        rig_rail_release(rb);
        return;
    }
    p.ends = &ends;
    T_OK(mesh_driver_start(d, &p, 1, &slot, &err), err);
    /* (a) points: the host answers each ping with its complement. */
    uint64_t t0 = rig_now_ns();
    bool ok = err == NULL;
    for (uint64_t c = 1; ok && c <= RAILS_TRIPS; c++) {
        ok = rails_arrived(b, c);
        uint64_t back = ~rails_value(c);
        memcpy(rig_area_copy(rig_end_outbound(b), (unsigned)((c - 1) % 2)).base,
               &back, 8);
        rig_end_ready(b, c);
    }
    double points_us = (double)(rig_now_ns() - t0) / 1e3 / (2.0 * RAILS_TRIPS);
    if (ok) {
        T_TRUE(wait_point_above(d, slot, RAILS_TRIPS - 1) >= RAILS_TRIPS);
        T_EQ_U(mesh_driver_point(d, slot, 1), 0); /* no wrong answer */
        T_EQ_U(mesh_driver_point(d, slot, 2), 0); /* no failure */
    }
    T_OK(mesh_driver_stop(d, slot, &err), err);
    mesh_driver_close(d);

    /* (b) and (c): a kernel per message, on a stream of the test's own,
     * finding end a through a table of the test's in slot 31. */
    const cuda_backend *cb = be->self;
    if (!ok || !cu.signals || cb->mps != NULL) {
        if (ok) {
            printf("GPU rails: points %.2f us one way; the driver lacks "
                   "cuStreamWriteValue64 or cuLaunchHostFunc (or MPS)\n",
                   points_us);
        }
        mesh_prepared_free(&p);
        rig_rail_release(ra);
        rig_rail_release(rb);
        return;
    }
    mesh_prepared q;
    T_TRUE(prepare("rails", &q));
    uint8_t *host = NULL;
    uint64_t mb_dev = 0;
    T_OK(be->ops->mailbox(be, &host, &mb_dev, &err), err);
    mesh_control_block *mb = (mesh_control_block *)(void *)host;
    mesh_ends_table *table = NULL;
    T_EQ_U(posix_memalign((void **)&table, 4096, 4096), 0);
    memset(table, 0, 4096);
    uintptr_t lo = (uintptr_t)rig_end_counts(a).base & ~(uintptr_t)4095;
    uintptr_t hi =
        ((uintptr_t)rig_end_inbound(a).base + rig_end_inbound(a).len + 4095) &
        ~(uintptr_t)4095;
    CUmodule mod = NULL;
    CUfunction once = NULL;
    CUstream stream = NULL;
    CUdeviceptr scratch = 0, table_dev = 0, c_dev = 0, o_dev = 0, i_dev = 0;
    CUresult r = CUDA_SUCCESS;
    uint64_t base = rig_end_ready_count(a);
    WITH_PRIMARY({
        r = cu.cuMemHostRegister_p((void *)lo, hi - lo,
                                   CU_MEMHOSTREGISTER_DEVICEMAP |
                                       CU_MEMHOSTREGISTER_PORTABLE);
        if (r == CUDA_SUCCESS) {
            r = cu.cuMemHostRegister_p(table, 4096,
                                       CU_MEMHOSTREGISTER_DEVICEMAP |
                                           CU_MEMHOSTREGISTER_PORTABLE);
        }
        if (r == CUDA_SUCCESS) {
            cu.cuMemHostGetDevicePointer_p(&table_dev, table, 0);
            cu.cuMemHostGetDevicePointer_p(&c_dev, rig_end_counts(a).base, 0);
            cu.cuMemHostGetDevicePointer_p(&o_dev, rig_end_outbound(a).base, 0);
            cu.cuMemHostGetDevicePointer_p(&i_dev, rig_end_inbound(a).base, 0);
            r = cu.cuModuleLoadData_p(&mod, q.code);
        }
        if (r == CUDA_SUCCESS) {
            r = cu.cuModuleGetFunction_p(&once, mod, "rails_once");
        }
        if (r == CUDA_SUCCESS) {
            r = cu.cuStreamCreate_p(&stream, CU_STREAM_NON_BLOCKING);
        }
        if (r == CUDA_SUCCESS) {
            r = cu.cuMemAlloc_p(&scratch, 64);
        }
        if (r == CUDA_SUCCESS) {
            r = cu.cuMemcpyHtoD_p(scratch, &base, 8);
        }
    });
    T_EQ_U(r, CUDA_SUCCESS);
    mesh_end_entry *en = &table->e[0];
    en->flags = MESH_END_BOUND | MESH_END_SENDS | MESH_END_RECEIVES;
    en->out_copy = rig_end_outbound(a).len / 2;
    en->in_copy = rig_end_inbound(a).len / 2;
    en->dev_counts = c_dev;
    en->dev_outbound = o_dev;
    en->dev_inbound = i_dev;
    CUdeviceptr point_dev = table_dev + MESH_E_ENTRIES + MESH_EE_POINT;
    atomic_store(&mb->slot[31].ends, (uint64_t)table_dev);
    CUdeviceptr mbp = mb_dev;
    unsigned int sl = 31;
    void *params[] = {&mbp, &sl, &scratch};
    double ms[2] = {0, 0};
    for (int method = 0; r == CUDA_SUCCESS && ok && method < 2; method++) {
        uint64_t from = rig_end_ready_count(a);
        t0 = rig_now_ns();
        for (uint64_t c = from + 1; ok && c <= from + RAILS_TRIPS; c++) {
            rails_ready_arg arg = {a, c};
            WITH_PRIMARY({
                r = cu.cuLaunchKernel_p(once, 1, 1, 1, 1, 1, 1, 0, stream,
                                        params, NULL);
                if (r == CUDA_SUCCESS && method == 0) {
                    r = cu.cuStreamWriteValue64_p(stream, point_dev, c, 0);
                } else if (r == CUDA_SUCCESS) {
                    r = cu.cuLaunchHostFunc_p(stream, rails_host_ready, &arg);
                }
            });
            if (r != CUDA_SUCCESS) {
                break;
            }
            if (method == 0) {
                /* The host polls the value the stream wrote, then readies. */
                uint64_t tw = rig_now_ns();
                while (atomic_load(&en->point) < c &&
                       rig_now_ns() - tw < CUDA_TEST_GUARD_MS * 1000000ull) {
                    rig_cpu_relax();
                }
                rig_end_ready(a, c);
            }
            ok = rails_arrived(b, c);
            if (method == 1) {
                /* arg lives on this stack until the function ran. */
                WITH_PRIMARY(cu.cuStreamSynchronize_p(stream));
            }
        }
        ms[method] = (double)(rig_now_ns() - t0) / 1e3 / RAILS_TRIPS;
    }
    T_EQ_U(r, CUDA_SUCCESS);
    atomic_store(&mb->slot[31].ends, 0);
    WITH_PRIMARY({
        if (stream != NULL) {
            cu.cuStreamSynchronize_p(stream);
            cu.cuStreamDestroy_p(stream);
        }
        if (scratch != 0) {
            cu.cuMemFree_p(scratch);
        }
        if (mod != NULL) {
            cu.cuModuleUnload_p(mod);
        }
        cu.cuMemHostUnregister_p(table);
        cu.cuMemHostUnregister_p((void *)lo);
    });
    free(table);
    if (ok && r == CUDA_SUCCESS) {
        printf("GPU rails: a kernel's message to the host's peer end, 8 B, "
               "%u each: kernel point -> watcher -> ready %.2f us one way "
               "(resident kernel); kernel + cuStreamWriteValue64 + host poll "
               "%.2f us per message; kernel + cuLaunchHostFunc %.2f us per "
               "message\n",
               RAILS_TRIPS, points_us, ms[0], ms[1]);
    }
    mesh_prepared_free(&q);
    mesh_prepared_free(&p);
    rig_rail_release(ra);
    rig_rail_release(rb);
}

CUDA_TEST(test_rails, "rails")
CUDA_TEST(test_environment, "environment")
CUDA_TEST(test_caps, "caps")
CUDA_TEST(test_context, "context")
CUDA_TEST(test_lifecycle, "lifecycle")
CUDA_TEST(test_pattern, "pattern")
CUDA_TEST(test_blink, "blink")
CUDA_TEST(test_mps, "mps")
CUDA_TEST(test_occupancy, "occupancy")
CUDA_TEST(test_fragmentation, "fragmentation")
CUDA_TEST(test_shared, "shared 49148")
CUDA_TEST(test_admit_args, "admit arguments")
CUDA_TEST(test_admit_bound, "admit bound")
CUDA_TEST(test_connections, "connections")
CUDA_TEST(test_close, "close 3")
CUDA_TEST(test_green_16, "green 16")
CUDA_TEST(test_green_1, "green 1")
CUDA_TEST(test_leak, "leak")
CUDA_TEST(test_fault, "fault")

static const struct {
    const char *name;
    void (*fn)(void);
    bool alone; /* only when named */
} cases[] = {
    {"environment", test_environment_run, false},
    {"caps", test_caps_run, false},
    {"context", test_context_run, false},
    {"lifecycle", test_lifecycle_run, false},
    {"pattern", test_pattern_run, false},
    {"blink", test_blink_run, false},
    {"mps", test_mps_run, false},
    {"occupancy", test_occupancy_run, false},
    {"fragmentation", test_fragmentation_run, false},
    {"shared 49148", test_shared_run, false},
    {"admit arguments", test_admit_args_run, false},
    {"admit bound", test_admit_bound_run, false},
    {"connections", test_connections_run, false},
    {"close 3", test_close_run, false},
    {"green 16", test_green_16_run, false},
    {"green 1", test_green_1_run, false},
    {"leak", test_leak_run, false},
    {"rails", test_rails_run, false},
    {"fault", test_fault_run, true},
};

/* Whether a refusal to open means there is no GPU to test here. */
static bool no_gpu(const char *why)
{
    return why != NULL &&
           (strncmp(why, "unsupported: no CUDA driver", 27) == 0 ||
            strstr(why, "CUDA_ERROR_NO_DEVICE") != NULL ||
            strstr(why, "(the driver reports 0)") != NULL);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    char *err = NULL;
    /* Referenced here, the backend's strong hooks replace the table's weak
     * stubs in this statically linked test. */
    if (!mesh_cuda_built()) {
        printf("SKIP: the CUDA backend is not built\n");
        return 77;
    }
    bool ok = mesh_backend_open(MESH_BACKEND_CUDA, NULL, &be, &err);
    if (argc == 2 && strcmp(argv[1], "open") == 0) {
        printf("open: %s\n", ok ? "ok" : err);
        free(err);
        mesh_backend_destroy(be);
        return 0;
    }
    if (!ok && no_gpu(err)) {
        printf("SKIP: no GPU to test here: %s\n", err);
        free(err);
        return 77;
    }
    if (!ok) {
        printf("FAIL: the CUDA backend is built and a driver is here, but "
               "the backend does not open: %s\n",
               err);
        free(err);
        return 1;
    }
    if (!mesh_cu_lib_open(&cu, &err) ||
        !mesh_cu_check(&cu,
                       cu.cuDevicePrimaryCtxRetain_p(
                           &primary, ((const cuda_backend *)be->self)->dev),
                       NULL, "cuDevicePrimaryCtxRetain", &err)) {
        printf("FAIL: %s\n", err);
        free(err);
        mesh_backend_destroy(be);
        return 1;
    }
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite s = CU_add_suite("cuda_gpu", NULL, NULL);
    unsigned n = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (t_wanted(argc, argv, cases[i].name, cases[i].alone)) {
            CU_add_test(s, cases[i].name, cases[i].fn);
            n++;
        }
    }
    if (n == 0) {
        printf("FAIL: no case named %s\n", argv[1]);
        CU_cleanup_registry();
        return 1;
    }
    int rc = t_run_registry();
    CUdevice dev = ((const cuda_backend *)be->self)->dev;
    mesh_backend_destroy(be);
    cu.cuDevicePrimaryCtxRelease_p(dev);
    mesh_cu_lib_close(&cu);
    return t_finish(rc);
}
