/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA backend in MPS isolation: one worker process per program.
 *
 * Run by tests/cuda/test_cuda_mps.sh (the stand-in libcuda and a fake
 * nvidia-cuda-mps-control) and by mpi_tests/gpu/device-check.sh on a GPU
 * with MPS.  Exits 77 with the reason only where MPS isolation cannot be
 * had here (no driver, no device, no control program, no worker
 * program); any other refusal to open is a failure.  Workers are found
 * as this process's children named rig-cuda-worker in /proc.  Cases print
 * "MPS <case>: <detail>" and "RESULT <case>: PASS|FAIL|SKIP".
 *
 *   test_cuda_mps              the tests ("mps fault" last: the server
 *                              recovers once its clients are gone)
 *   test_cuda_mps exit|signal|destroy
 *                              starts a program, then exits (or dies by
 *                              SIGTERM, or destroys the backend and exits)
 *                              without stopping it: the cleanup's turn (or
 *                              destroy's); prints "worker <pid>" first */
#include "mesh/cuda/cuda_mps_internal.h"

#include "util/util_internal.h"

#include "mesh/driver.h"
#include "mesh/executors.h"
#include "mesh/loader.h"
#include "mesh/mesh_internal.h"
#include "cuda_test_util.h"
#include "test_util.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static mesh_backend *be;

/* This process's children named rig-cuda-worker (zombies too): how many,
 * and up to max of their pids. */
static unsigned workers(pid_t *pids, unsigned max)
{
    unsigned n = 0;
    DIR *d = opendir("/proc");
    if (d == NULL) {
        return 0;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[300], buf[512];
        if (e->d_name[0] < '0' || e->d_name[0] > '9') {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL) {
            continue;
        }
        size_t len = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[len] = '\0';
        char *open = strchr(buf, '('), *close = strrchr(buf, ')');
        if (open == NULL || close == NULL || close < open) {
            continue;
        }
        int ppid = 0;
        char state = 0;
        if (sscanf(close + 1, " %c %d", &state, &ppid) != 2 ||
            ppid != (int)getpid() ||
            strncmp(open + 1, "rig-cuda-worker)", 16) != 0) {
            continue;
        }
        if (pids != NULL && n < max) {
            pids[n] = (pid_t)atoi(e->d_name);
        }
        n++;
    }
    closedir(d);
    return n;
}

/* Prepares a catalog program; false with *err when prepare refuses it. */
static bool prepare_quiet(mesh_driver *d, const char *name, mesh_prepared *p,
                          char **err)
{
    mesh_payload src;
    if (!mesh_payload_read(CUDA_CATALOG_DIR, name, &src, err)) {
        return false;
    }
    return mesh_driver_prepare(d, &src, NULL, NULL, p, err);
}

static bool prepare(mesh_driver *d, const char *name, mesh_prepared *p)
{
    char *err = NULL;
    bool ok = prepare_quiet(d, name, p, &err);
    T_OK(ok, err);
    return ok;
}

static void test_open(void)
{
    T_TRUE(be->ops->isolated(be));
    T_TRUE(be->ops->resident(be));
    T_EQ_U(be->ops->isolation(be), MESH_ISOLATION_MPS);
    uint32_t scope = 99;
    T_TRUE(be->ops->module_scope(be, true, 3, &scope));
    T_EQ_U(scope, 3);
    T_TRUE(be->ops->module_scope(be, false, 0, &scope));
    T_EQ_U(scope, MESH_NO_SLOT);
    uint8_t *host = NULL;
    uint64_t dev = 0;
    char *err = NULL;
    T_OK(be->ops->mailbox(be, &host, &dev, &err), err);
    const mesh_control_block *mb = (const void *)host;
    T_EQ_U(mb->h.isolation, MESH_ISOLATION_MPS);
    T_EQ_U(workers(NULL, 0), 0);
    /* The backend makes no context of its own in MPS isolation. */
    CUcontext c = (CUcontext)1;
    mesh_cu_lib cu;
    if (mesh_cu_lib_open(&cu, &err)) {
        cu.cuCtxGetCurrent_p(&c);
        mesh_cu_lib_close(&cu);
    }
    free(err);
    err = NULL;
    T_TRUE(c == NULL);
    size_t stack = 0;
    T_ERR(be->ops->stack_limit(be, &stack, &err), err,
          "unsupported: MPS isolation: the stack limit is a worker's");
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    printf("MPS open: isolated, scope of slot 3 is slot %u; "
           "CUDA_VISIBLE_DEVICES %s\n",
           3u, cvd != NULL ? cvd : "unset");
}

/* The lifecycle through the backend's ops: prepare starts the worker with
 * the module loaded, load takes it, unload ends it. */
static void test_lifecycle(void)
{
    mesh_driver *d = NULL;
    mesh_prepared p;
    char *err = NULL;
    T_OK(mesh_driver_open(be, &d, &err), err);
    if (d == NULL || !prepare(d, "counter", &p)) {
        mesh_driver_close(d);
        return;
    }
    T_TRUE(p.kernel != NULL && mesh_cuda_mps_kernel(p.kernel));
    pid_t pid = p.kernel != NULL ? mesh_cuda_mps_pid(p.kernel) : -1;
    pid_t seen[4] = {0};
    T_EQ_U(workers(seen, 4), 1);
    T_EQ_U(seen[0], pid);
    mesh_kernel *k = NULL, *held = p.kernel;
    mesh_stream *st = NULL;
    uint8_t *host = NULL;
    uint64_t dev = 0;
    const uint32_t slot = 5, nodes = 4;
    T_OK(be->ops->mailbox(be, &host, &dev, &err), err);
    mesh_cb_slot *w = &((mesh_control_block *)(void *)host)->slot[slot];
    T_OK(be->ops->load(be, &p, &k, &err), err);
    T_TRUE(k == held && p.kernel == NULL);
    if (k == NULL) {
        mesh_prepared_free(&p);
        mesh_driver_close(d);
        return;
    }
    uint32_t abi = 0, blocks = 0;
    T_OK(mesh_kernel_global_u32(k, "MESH_RT_ABI", &abi, &err), err);
    T_EQ_U(abi, MESH_RT_ABI_VERSION);
    T_ERR(mesh_kernel_global_u32(k, "NO_SUCH", &abi, &err), err, "missing: ");
    T_OK(mesh_kernel_max_blocks_per_sm(k, &blocks, &err), err);
    T_TRUE(blocks > 0);
    T_TRUE(mesh_kernel_scratch(k) != 0);
    T_OK(be->ops->new_stream(be, slot, k, &st, &err), err);
    uint64_t a = 0, b = 0;
    cuda_lifecycle(be, st, k, w, slot, nodes, dev, &a, &b);
    /* The worker's own view of the launch's PX words. */
    T_EQ_U(atomic_load(&w->scratch), mesh_kernel_scratch(k));
    T_OK(be->ops->unload(be, k, &err), err);
    mesh_stream_drop(st);
    T_EQ_U(workers(NULL, 0), 0);
    T_TRUE(kill(pid, 0) != 0 && errno == ESRCH);
    printf("MPS lifecycle: worker %d, count %llu -> %llu, unloaded\n", (int)pid,
           (unsigned long long)a, (unsigned long long)b);
    mesh_prepared_free(&p);
    mesh_driver_close(d);
}

/* Watches slot's halt word until stop is set. */
typedef struct {
    _Atomic uint32_t *halt;
    atomic_bool stop;
    atomic_uint max;
} halt_watch;

static void *watch_halt(void *arg)
{
    halt_watch *h = arg;
    while (!atomic_load(&h->stop)) {
        uint32_t v = atomic_load(h->halt);
        if (v > atomic_load(&h->max)) {
            atomic_store(&h->max, v);
        }
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Two programs, two workers; loading and unloading one leaves the other
 * running (no halt, no relaunch). */
static void test_isolation(void)
{
    mesh_driver *d = NULL;
    mesh_prepared a, b;
    char *err = NULL;
    uint32_t sa = 0, sb = 0;
    T_OK(mesh_driver_open(be, &d, &err), err);
    if (d == NULL || !prepare(d, "counter", &a)) {
        mesh_driver_close(d);
        return;
    }
    pid_t pa = mesh_cuda_mps_pid(a.kernel);
    T_OK(mesh_driver_start(d, &a, 4, &sa, &err), err);
    if (err != NULL) {
        mesh_driver_close(d);
        return;
    }
    uint8_t *host = NULL;
    uint64_t dev = 0;
    T_OK(be->ops->mailbox(be, &host, &dev, &err), err);
    mesh_cb_slot *wa = &((mesh_control_block *)(void *)host)->slot[sa];
    uint64_t c1 = wait_point_above(d, sa, 0);
    uint32_t launches = atomic_load(&wa->launch);
    halt_watch h = {.halt = &wa->halt};
    pthread_t t;
    T_EQ_U(pthread_create(&t, NULL, watch_halt, &h), 0);
    bool ok = prepare(d, "pattern", &b);
    pid_t pb = ok ? mesh_cuda_mps_pid(b.kernel) : -1;
    pid_t seen[4] = {0};
    T_EQ_U(workers(seen, 4), 2);
    T_TRUE(pa > 0 && pb > 0 && pa != pb);
    T_TRUE((seen[0] == pa && seen[1] == pb) ||
           (seen[0] == pb && seen[1] == pa));
    if (ok) {
        ok = mesh_driver_start(d, &b, 0, &sb, &err);
        T_OK(ok, err);
    }
    uint64_t c2 = wait_point_above(d, sa, c1);
    mesh_run_state state = MESH_RUN_RUNNING;
    if (!ok) {
        atomic_store(&h.stop, true);
        pthread_join(t, NULL);
        mesh_driver_close(d);
        return;
    }
    T_OK(mesh_driver_wait(d, sb, CUDA_TEST_GUARD_MS, &state, NULL, &err), err);
    T_EQ_U(state, MESH_RUN_DONE);
    T_TRUE(mesh_driver_point(d, sb, 0) > 0);
    T_OK(mesh_driver_stop(d, sb, &err), err);
    T_TRUE(kill(pb, 0) != 0 && errno == ESRCH);
    T_EQ_U(workers(NULL, 0), 1);
    uint64_t c3 = wait_point_above(d, sa, c2);
    atomic_store(&h.stop, true);
    pthread_join(t, NULL);
    /* A never halted, never relaunched, kept counting throughout. */
    T_EQ_U(atomic_load(&h.max), 0);
    T_EQ_U(atomic_load(&wa->launch), launches);
    T_TRUE(c1 > 0 && c2 > c1 && c3 > c2);
    T_OK(mesh_driver_poll(d, sa, &state, NULL, &err), err);
    T_EQ_U(state, MESH_RUN_RUNNING);
    printf("MPS isolation: workers %d and %d; A's count %llu before B, %llu "
           "after B's load, %llu after B's unload; A's halt word stayed "
           "%u\n",
           (int)pa, (int)pb, (unsigned long long)c1, (unsigned long long)c2,
           (unsigned long long)c3, atomic_load(&h.max));
    T_OK(mesh_driver_stop(d, sa, &err), err);
    T_EQ_U(workers(NULL, 0), 0);
    mesh_driver_close(d);
}

static void test_cycles(void)
{
    mesh_driver *d = NULL;
    char *err = NULL;
    T_OK(mesh_driver_open(be, &d, &err), err);
    int cycles = 0;
    for (int i = 0; d != NULL && i < 20; i++) {
        mesh_prepared p;
        uint32_t s = 0;
        if (!prepare(d, "counter", &p)) {
            break;
        }
        bool ok = mesh_driver_start(d, &p, 2, &s, &err);
        T_OK(ok, err);
        if (!ok) {
            break;
        }
        ok = mesh_driver_stop(d, s, &err);
        T_OK(ok, err);
        cycles += ok;
    }
    T_EQ_U(cycles, 20);
    T_EQ_U(workers(NULL, 0), 0);
    printf("MPS cycles: %d load/unload cycles, %u workers left\n", cycles,
           workers(NULL, 0));
    mesh_driver_close(d);
}

static void test_crash(void)
{
    mesh_driver *d = NULL;
    mesh_prepared p;
    char *err = NULL;
    uint32_t s = 0;
    T_OK(mesh_driver_open(be, &d, &err), err);
    if (d == NULL || !prepare(d, "counter", &p)) {
        mesh_driver_close(d);
        return;
    }
    pid_t pid = mesh_cuda_mps_pid(p.kernel);
    T_OK(mesh_driver_start(d, &p, 2, &s, &err), err);
    if (err != NULL) {
        mesh_driver_close(d);
        return;
    }
    T_EQ_U(kill(pid, SIGKILL), 0);
    mesh_run_state state = MESH_RUN_RUNNING;
    char *why = NULL;
    T_OK(mesh_driver_wait(d, s, CUDA_TEST_GUARD_MS, &state, &why, &err), err);
    T_EQ_U(state, MESH_RUN_CRASHED);
    T_TRUE(why != NULL && strstr(why, "killed by signal 9 (SIGKILL)") != NULL);
    printf("MPS crash: %s\n", why != NULL ? why : "(no reason)");
    free(why);
    T_EQ_U(workers(NULL, 0), 0);
    T_OK(mesh_driver_stop(d, s, &err), err);
    mesh_driver_close(d);
}

/* A worker whose image does not load: prepare's error is the worker's,
 * with its load reason, and the worker is gone.  (The stand-in driver
 * knows no kernel greedy; a GPU loads it, and then dropping the prepared
 * program ends its worker.) */
static void test_refusal(void)
{
    mesh_driver *d = NULL;
    mesh_payload src;
    mesh_prepared p;
    char *err = NULL;
    T_OK(mesh_driver_open(be, &d, &err), err);
    T_OK(mesh_payload_read(CUDA_TEST_DATA, "greedy", &src, &err), err);
    if (d == NULL || err != NULL) {
        mesh_driver_close(d);
        return;
    }
    bool ok = mesh_driver_prepare(d, &src, NULL, NULL, &p, &err);
    printf("MPS refusal: greedy: %s\n", ok ? "loaded" : err);
    if (ok) {
        pid_t pid = mesh_cuda_mps_pid(p.kernel);
        T_TRUE(pid > 0);
        T_EQ_U(workers(NULL, 0), 1);
        mesh_prepared_free(&p);
        T_TRUE(kill(pid, 0) != 0 && errno == ESRCH);
    } else {
        const char *a = "load: program greedy: ", *b = "limits: program greedy";
        T_TRUE(err != NULL && (strncmp(err, a, strlen(a)) == 0 ||
                               strncmp(err, b, strlen(b)) == 0));
        free(err);
    }
    T_EQ_U(workers(NULL, 0), 0);
    mesh_driver_close(d);
}

/* The stack limit is the workers': set for those started later, and read
 * back from the last one started. */
static void test_stack(void)
{
    mesh_driver *d = NULL;
    mesh_prepared p;
    char *err = NULL;
    size_t stack = 0;
    T_OK(mesh_driver_open(be, &d, &err), err);
    if (d == NULL || !prepare(d, "counter", &p)) {
        mesh_driver_close(d);
        return;
    }
    T_OK(be->ops->stack_limit(be, &stack, &err), err);
    T_TRUE(stack > 0);
    T_OK(be->ops->set_stack_limit(be, stack * 2, &err), err);
    size_t now = 0;
    T_OK(be->ops->stack_limit(be, &now, &err), err);
    T_EQ_U(now, stack * 2);
    printf("MPS stack: a worker's stack limit %zu B; set to %zu B for the "
           "next\n",
           stack, now);
    T_OK(be->ops->set_stack_limit(be, stack, &err), err);
    mesh_prepared_free(&p);
    mesh_driver_close(d);
}

/* A fatal fault in one worker reaches every client of the MPS server: the
 * program beside it is reported crashed too, and the server takes no new
 * program until both are stopped; then it does again. */
static void test_fault(void)
{
    mesh_driver *d = NULL;
    mesh_prepared a, f, c;
    mesh_payload src;
    char *err = NULL;
    uint32_t sa = 0, sf = 0, sc = 0;
    T_OK(mesh_driver_open(be, &d, &err), err);
    if (d == NULL || !prepare(d, "counter", &a)) {
        mesh_driver_close(d);
        return;
    }
    T_OK(mesh_driver_start(d, &a, 2, &sa, &err), err);
    T_OK(mesh_payload_read(CUDA_TEST_DATA, "fault", &src, &err), err);
    bool ok = err == NULL && mesh_driver_prepare(d, &src, NULL, NULL, &f, &err);
    T_OK(ok, err);
    if (ok) {
        T_OK(mesh_driver_start(d, &f, 0, &sf, &err), err);
    }
    mesh_run_state state = MESH_RUN_RUNNING;
    char *why_f = NULL, *why_a = NULL;
    T_OK(mesh_driver_wait(d, sf, CUDA_TEST_GUARD_MS, &state, &why_f, &err),
         err);
    T_EQ_U(state, MESH_RUN_CRASHED);
    T_OK(mesh_driver_wait(d, sa, CUDA_TEST_GUARD_MS, &state, &why_a, &err),
         err);
    T_EQ_U(state, MESH_RUN_CRASHED);
    printf("MPS fault: the faulting program: %s\n",
           why_f != NULL ? why_f : "(no reason)");
    printf("MPS fault: the program beside it: %s\n",
           why_a != NULL ? why_a : "(no reason)");
    T_TRUE(why_f != NULL && strstr(why_f, "CUDA_ERROR_") != NULL);
    T_TRUE(why_a != NULL && strstr(why_a, "CUDA_ERROR_") != NULL);
    free(why_f);
    free(why_a);
    ok = prepare_quiet(d, "counter", &c, &err);
    printf("MPS fault: a new program while they are loaded: %s\n",
           ok ? "PREPARED" : err);
    if (ok) {
        mesh_prepared_free(&c);
    }
    T_ERR(ok, err, "load: program counter: the MPS server takes no new");
    T_OK(mesh_driver_stop(d, sf, &err), err);
    T_OK(mesh_driver_stop(d, sa, &err), err);
    T_EQ_U(workers(NULL, 0), 0);
    /* Every client of the fault is gone: the server takes programs again. */
    if (prepare(d, "counter", &c)) {
        T_OK(mesh_driver_start(d, &c, 2, &sc, &err), err);
        uint64_t v = wait_point_above(d, sc, 0);
        printf("MPS fault: once both are stopped, a new program counts "
               "(%llu)\n",
               (unsigned long long)v);
        T_TRUE(v > 0);
        T_OK(mesh_driver_stop(d, sc, &err), err);
    }
    mesh_driver_close(d);
}

/* Leaves a running program behind for the cleanup (how: exit, signal) or
 * for the backend's destroy (destroy). */
static int leave(const char *how)
{
    mesh_driver *d = NULL;
    mesh_prepared p;
    char *err = NULL;
    uint32_t s = 0;
    mesh_payload src;
    if (!mesh_driver_open(be, &d, &err) ||
        !mesh_payload_read(CUDA_CATALOG_DIR, "counter", &src, &err) ||
        !mesh_driver_prepare(d, &src, NULL, NULL, &p, &err)) {
        printf("FAIL: %s\n", err);
        return 1;
    }
    pid_t pid = mesh_cuda_mps_pid(p.kernel);
    if (!mesh_driver_start(d, &p, 2, &s, &err)) {
        printf("FAIL: %s\n", err);
        return 1;
    }
    printf("worker %d\n", (int)pid);
    fflush(stdout);
    if (strcmp(how, "signal") == 0) {
        raise(SIGTERM);
    } else if (strcmp(how, "destroy") == 0) {
        /* The backend goes first; the driver's kernel outlives it. */
        mesh_backend_destroy(be);
    }
    exit(0);
}

CUDA_TEST(test_open, "mps open")
CUDA_TEST(test_lifecycle, "mps lifecycle")
CUDA_TEST(test_isolation, "mps isolation")
CUDA_TEST(test_cycles, "mps cycles")
CUDA_TEST(test_crash, "mps crash")
CUDA_TEST(test_refusal, "mps refusal")
CUDA_TEST(test_stack, "mps stack")
CUDA_TEST(test_fault, "mps fault")

/* Whether a refusal to open means MPS isolation cannot be had here. */
static bool no_mps(const char *why)
{
    return why != NULL &&
           (strncmp(why, "unsupported: no CUDA driver", 27) == 0 ||
            strstr(why, "CUDA_ERROR_NO_DEVICE") != NULL ||
            strstr(why, "(the driver reports 0)") != NULL ||
            strncmp(why, "unsupported: MPS isolation needs", 32) == 0);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    char *err = NULL;
    if (!mesh_cuda_built()) {
        printf("SKIP: the CUDA backend is not built\n");
        return 77;
    }
    setenv("RIG_MESH_CUDA_ISOLATION", "mps", 1);
    if (!mesh_backend_open(MESH_BACKEND_CUDA, NULL, &be, &err)) {
        bool skip = no_mps(err);
        printf("%s: the CUDA backend in MPS isolation does not open here: "
               "%s\n",
               skip ? "SKIP" : "FAIL", err);
        free(err);
        return skip ? 77 : 1;
    }
    if (argc > 1) {
        return leave(argv[1]);
    }
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite s = CU_add_suite("cuda_mps", NULL, NULL);
    CU_add_test(s, "open", test_open_run);
    CU_add_test(s, "lifecycle", test_lifecycle_run);
    CU_add_test(s, "isolation", test_isolation_run);
    CU_add_test(s, "cycles", test_cycles_run);
    CU_add_test(s, "crash", test_crash_run);
    CU_add_test(s, "refusal", test_refusal_run);
    CU_add_test(s, "stack", test_stack_run);
    CU_add_test(s, "fault", test_fault_run);
    int rc = t_run_registry();
    mesh_backend_destroy(be);
    return t_finish(rc);
}
