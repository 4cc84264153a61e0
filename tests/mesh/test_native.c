/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the native backend through the driver: real worker
 * processes from the test catalog (tests/mesh/worker_prog.c). */
#include "mesh/driver.h"
#include "mesh/executors.h"

#include "../test_util.h"

#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HALT_MS 200

#include "real_signals.h"
#define GRACE_MS 300

static mesh_backend *b;
static mesh_driver *d;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Live (not zombie) children of this process, from /proc. */
static int children(void)
{
    DIR *dir = opendir("/proc");
    int n = 0;
    struct dirent *e;
    pid_t self = getpid();
    while (dir != NULL && (e = readdir(dir)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') {
            continue;
        }
        char path[300], buf[512];
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL) {
            continue;
        }
        size_t got = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[got] = '\0';
        char *rp = strrchr(buf, ')');
        char state = 0;
        int ppid = 0;
        if (rp != NULL && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 &&
            ppid == self && state != 'Z') {
            n++;
        }
    }
    if (dir != NULL) {
        closedir(dir);
    }
    return n;
}

static int open_fds(void)
{
    DIR *dir = opendir("/proc/self/fd");
    int n = 0;
    while (dir != NULL && readdir(dir) != NULL) {
        n++;
    }
    if (dir != NULL) {
        closedir(dir);
    }
    return n;
}

static bool start(const char *name, uint32_t nodes, uint32_t *slot, char **err)
{
    mesh_payload p;
    mesh_prepared pr;
    if (!mesh_payload_read(MESH_TEST_PROGRAMS, name, &p, err)) {
        return false;
    }
    uint64_t h = mesh_payload_hash(&p);
    if (!mesh_driver_prepare(d, &p, &h, MESH_TEST_PROGRAMS, &pr, err)) {
        return false;
    }
    return mesh_driver_start(d, &pr, nodes, slot, err);
}

static int suite_init(void)
{
    mesh_backend_options o = {
        .online_timeout_ms = 5000, .halt_ms = HALT_MS, .grace_ms = GRACE_MS};
    char *err = NULL;
    if (!mesh_backend_open(MESH_BACKEND_NATIVE, &o, &b, &err) ||
        !mesh_driver_open(b, &d, &err)) {
        fprintf(stderr, "native backend: %s\n", err != NULL ? err : "?");
        free(err);
        return 1;
    }
    return 0;
}

static int suite_clean(void)
{
    mesh_driver_close(d);
    mesh_backend_destroy(b);
    return 0;
}

static void test_caps(void)
{
    const mesh_caps *c = b->ops->caps(b);
    T_EQ_U(c->kind, MESH_BACKEND_NATIVE);
    T_TRUE(c->sms_total >= 1 && c->sms >= 1 && c->sms <= c->sms_total);
    T_TRUE(c->name != NULL && c->name[0] != '\0');
    T_TRUE(c->arch != NULL && strcmp(c->arch, mesh_native_target()) == 0);
    T_TRUE(b->ops->isolated(b));
    T_TRUE(!b->ops->resident(b));
    T_TRUE(mesh_backend_owns_halt(b));
    T_EQ_U(b->ops->isolation(b), MESH_ISOLATION_PROCESS);
    uint32_t scope = 0;
    T_TRUE(b->ops->module_scope(b, true, 5, &scope) && scope == 5);
    T_TRUE(b->ops->module_scope(b, false, 5, &scope) && scope == MESH_NO_SLOT);
    uint8_t *host = NULL;
    uint64_t dev = 0;
    char *err = NULL;
    T_OK(b->ops->mailbox(b, &host, &dev, &err), err);
    const mesh_control_block *cb = (const mesh_control_block *)host;
    T_EQ_U(atomic_load(&((mesh_control_block *)cb)->h.magic), MESH_CB_MAGIC);
    T_EQ_U(cb->h.abi, MESH_RT_ABI_VERSION);
    T_EQ_U(cb->h.backend, MESH_BACKEND_WORD(MESH_BACKEND_NATIVE, 0));
    T_EQ_U(cb->h.isolation, MESH_ISOLATION_PROCESS);
    T_EQ_U(cb->h.slots, MESH_PROG_SLOTS);
    T_EQ_U(cb->h.host_pid, getpid());
    size_t stack = 0;
    T_OK(b->ops->stack_limit(b, &stack, &err), err);
    T_TRUE(stack > 0);
    T_ERR(b->ops->set_stack_limit(b, 100, &err), err, "invalid: ");
}

static void test_lifecycle(void)
{
    uint32_t slot = 99;
    char *err = NULL;
    T_OK(start("t_ok", 4, &slot, &err), err);
    if (slot == 99) {
        return;
    }
    uint8_t *host = NULL;
    uint64_t dev = 0;
    T_OK(b->ops->mailbox(b, &host, &dev, &err), err);
    mesh_cb_slot *w = &((mesh_control_block *)host)->slot[slot];
    T_EQ_U(atomic_load(&w->online), 4);
    T_EQ_U(atomic_load(&w->nodes), 4);
    T_EQ_U(atomic_load(&w->state), MESH_SLOT_RUNNING);
    T_EQ_U(children(), 4);
    /* The nodes make progress (point 0 counts their steps). */
    uint64_t t0 = now_ms();
    while (mesh_driver_point(d, slot, 0) < 5 && now_ms() - t0 < 10000) {
        usleep(1000);
    }
    T_TRUE(mesh_driver_point(d, slot, 0) >= 5);
    mesh_run_state st = MESH_RUN_DONE;
    char *why = NULL;
    T_OK(mesh_driver_poll(d, slot, &st, &why, &err), err);
    T_EQ_U(st, MESH_RUN_RUNNING);
    T_TRUE(why == NULL);
    /* Stopping: the nodes obey P_HALT well before SIGTERM. */
    t0 = now_ms();
    T_OK(mesh_driver_stop(d, slot, &err), err);
    T_TRUE(now_ms() - t0 < HALT_MS);
    T_EQ_U(atomic_load(&w->exited), 4);
    T_EQ_U(children(), 0);
    T_ERR(mesh_driver_poll(d, slot, &st, NULL, &err), err, "invalid: ");
}

static void test_done(void)
{
    uint32_t slot = 99;
    char *err = NULL;
    T_OK(start("t_finish", 0, &slot, &err), err);
    if (slot == 99) {
        return;
    }
    mesh_run_state st = MESH_RUN_RUNNING;
    char *why = NULL;
    T_OK(mesh_driver_wait(d, slot, 10000, &st, &why, &err), err);
    T_EQ_U(st, MESH_RUN_DONE);
    T_TRUE(why == NULL);
    T_EQ_U(children(), 0);
    uint8_t *host = NULL;
    uint64_t dev = 0;
    T_OK(b->ops->mailbox(b, &host, &dev, &err), err);
    mesh_cb_slot *w = &((mesh_control_block *)host)->slot[slot];
    T_EQ_U(atomic_load(&w->exited), 3); /* the manifest's 3 nodes */
    T_EQ_U(atomic_load(&w->state), MESH_SLOT_DONE);
    T_EQ_U(atomic_load(&w->scratch_bytes), 4096);
    /* The nodes shared the scratch with the host. */
    const uint64_t *scratch =
        (const uint64_t *)(uintptr_t)atomic_load(&w->scratch);
    T_TRUE(scratch != NULL);
    if (scratch != NULL) {
        T_EQ_U(scratch[0], 111);
        T_EQ_U(scratch[1], 222);
        T_EQ_U(scratch[2], 333);
    }
    T_EQ_U(mesh_driver_point(d, slot, 0), 20);
    T_OK(mesh_driver_stop(d, slot, &err), err);
}

static void test_crash(void)
{
    uint32_t slot = 99;
    char *err = NULL;
    T_OK(start("t_crash", 4, &slot, &err), err);
    if (slot == 99) {
        return;
    }
    mesh_run_state st = MESH_RUN_RUNNING;
    char *why = NULL;
    T_OK(mesh_driver_wait(d, slot, 10000, &st, &why, &err), err);
    T_EQ_U(st, MESH_RUN_CRASHED);
    if (why == NULL || strcmp(why, "node 2 killed by signal 11") != 0) {
        T_FAILF("why: \"%s\"", why != NULL ? why : "(null)");
    }
    free(why);
    /* Reported once: later polls say crashed without a new reason. */
    why = NULL;
    T_OK(mesh_driver_poll(d, slot, &st, &why, &err), err);
    T_EQ_U(st, MESH_RUN_CRASHED);
    T_TRUE(why == NULL);
    T_EQ_U(children(), 3);
    T_OK(mesh_driver_stop(d, slot, &err), err);
    T_EQ_U(children(), 0);
}

static void test_stubborn(void)
{
    uint32_t slot = 99;
    char *err = NULL;
    T_OK(start("t_stubborn", 2, &slot, &err), err);
    if (slot == 99) {
        return;
    }
    T_EQ_U(children(), 2);
    uint64_t t0 = now_ms();
    T_OK(mesh_driver_stop(d, slot, &err), err);
    uint64_t took = now_ms() - t0;
    /* Halt and SIGTERM were ignored: SIGKILL after the grace period. */
    if (took < HALT_MS + GRACE_MS || took > HALT_MS + GRACE_MS + 3000) {
        T_FAILF("stopping took %llu ms; expected about %u",
                (unsigned long long)took, HALT_MS + GRACE_MS);
    }
    T_EQ_U(children(), 0);
}

static void test_never_online(void)
{
    mesh_backend_options o = {
        .online_timeout_ms = 300, .halt_ms = 50, .grace_ms = 50};
    mesh_backend *b2 = NULL;
    mesh_driver *d2 = NULL;
    char *err = NULL;
    T_OK(mesh_backend_open(MESH_BACKEND_NATIVE, &o, &b2, &err), err);
    T_OK(mesh_driver_open(b2, &d2, &err), err);
    if (d2 == NULL) {
        mesh_backend_destroy(b2);
        return;
    }
    mesh_payload p;
    mesh_prepared pr;
    uint32_t slot = 99;
    T_OK(mesh_payload_read(MESH_TEST_PROGRAMS, "t_never", &p, &err), err);
    T_OK(mesh_driver_prepare(d2, &p, NULL, NULL, &pr, &err), err);
    uint64_t t0 = now_ms();
    T_ERR(mesh_driver_start(d2, &pr, 2, &slot, &err), err,
          "timeout: program t_never: 0 of 2 nodes online after 300 ms");
    uint64_t took = now_ms() - t0;
    T_TRUE(took >= 300 && took < 300 + 3000);
    T_EQ_U(slot, 99);
    T_EQ_U(children(), 0);
    T_TRUE(mesh_driver_program(d2, 0) == NULL);
    mesh_driver_close(d2);
    mesh_backend_destroy(b2);
}

static void test_bad_calls(void)
{
    uint32_t slot = 99;
    char *err = NULL;
    T_ERR(start("t_ok", MESH_MANIFEST_MAX_NODES + 1, &slot, &err), err,
          "limits: ");
    T_ERR(start("t_gpu", 1, &slot, &err), err,
          "unsupported: program t_gpu does not list backend native");
    T_ERR(mesh_driver_stop(d, 3, &err), err, "invalid: ");
    T_ERR(mesh_driver_stop(d, 300, &err), err, "invalid: ");
    T_ERR(mesh_driver_start(NULL, NULL, 1, &slot, &err), err, "invalid: ");
    T_EQ_U(children(), 0);
}

/* Cleanup kills every worker left, on exit() and on a fatal signal: a
 * child starts nodes and ends without stopping them; this process, as
 * subreaper, inherits the nodes and sees how they died. */
static void orphan_case(bool by_signal)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        mesh_backend *cb = NULL;
        mesh_driver *cd = NULL;
        uint32_t slot = 0;
        char *err = NULL;
        mesh_payload p;
        mesh_prepared pr;
        if (!mesh_backend_open(MESH_BACKEND_NATIVE, NULL, &cb, &err) ||
            !mesh_driver_open(cb, &cd, &err) ||
            !mesh_payload_read(MESH_TEST_PROGRAMS, "t_ok", &p, &err) ||
            !mesh_driver_prepare(cd, &p, NULL, NULL, &pr, &err) ||
            !mesh_driver_start(cd, &pr, 2, &slot, &err)) {
            _exit(90);
        }
        if (by_signal) {
            raise(SIGSEGV);
        }
        exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (by_signal) {
        T_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
    } else {
        T_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    int killed = 0, reaped = 0;
    uint64_t t0 = now_ms();
    while (reaped < 2 && now_ms() - t0 < 10000) {
        int ns = 0;
        pid_t r = waitpid(-1, &ns, WNOHANG);
        if (r > 0) {
            reaped++;
            killed += WIFSIGNALED(ns) && WTERMSIG(ns) == SIGKILL;
        } else {
            usleep(1000);
        }
    }
    T_EQ_U(reaped, 2);
    T_EQ_U(killed, 2);
}

static void test_cleanup_kills(void)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
        printf("skipped: no PR_SET_CHILD_SUBREAPER (%s)\n", strerror(errno));
        return;
    }
    orphan_case(false);
    orphan_case(true);
    prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
    T_EQ_U(children(), 0);
}

/* 200 load/launch/unload cycles leak no process, fd or memory. */
static void test_cycles(void)
{
    mesh_payload tmpl;
    char *err = NULL;
    T_OK(mesh_payload_read(MESH_TEST_PROGRAMS, "t_ok", &tmpl, &err), err);
    if (tmpl.name == NULL) {
        return;
    }
    size_t heap0 = 0;
    int fds0 = 0, failures = 0;
    for (int i = 0; i < 205 && failures < 3; i++) {
        if (i == 5) { /* after warm-up: lazily allocated state exists */
            heap0 = mallinfo2().uordblks;
            fds0 = open_fds();
        }
        mesh_payload p;
        mesh_prepared pr;
        uint32_t slot = 99;
        bool ok = mesh_payload_copy(&p, &tmpl, &err) &&
                  mesh_driver_prepare(d, &p, NULL, NULL, &pr, &err) &&
                  mesh_driver_start(d, &pr, 1, &slot, &err) &&
                  mesh_driver_stop(d, slot, &err);
        if (!ok) {
            T_FAILF("cycle %d: %s", i, err != NULL ? err : "?");
            free(err);
            err = NULL;
            failures++;
        }
    }
    mesh_payload_free(&tmpl);
    T_EQ_U(children(), 0);
    T_EQ_U(open_fds(), fds0);
    size_t heap1 = mallinfo2().uordblks;
    if (heap1 > heap0 + 4096) {
        T_FAILF("heap grew by %zu bytes over 200 cycles", heap1 - heap0);
    } else {
        CU_PASS("no heap growth");
    }
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite s = CU_add_suite("mesh_native", suite_init, suite_clean);
    CU_add_test(s, "caps and mailbox", test_caps);
    CU_add_test(s, "4 nodes online, progress, stop", test_lifecycle);
    CU_add_test(s, "nodes done, scratch shared", test_done);
    CU_add_test(s, "a crashing node reported once", test_crash);
    CU_add_test(s, "a node ignoring halt is killed", test_stubborn);
    CU_add_test(s, "nodes never online: timeout", test_never_online);
    CU_add_test(s, "bad calls", test_bad_calls);
    CU_add_test(s, "cleanup kills workers on exit and signals",
                test_cleanup_kills);
    CU_add_test(s, "200 cycles without leaks", test_cycles);
    return t_run_registry();
}
