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
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#define HALT_MS 1000

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
    /* Stopping: the nodes obey P_HALT (they detach cleanly, which a node
     * ended by SIGTERM would not); the time is only a hang guard. */
    t0 = now_ms();
    T_OK(mesh_driver_stop(d, slot, &err), err);
    T_TRUE(now_ms() - t0 < 10 * HALT_MS);
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
    /* Halt and SIGTERM were ignored: SIGKILL after the grace period (the
     * upper bound is a hang guard). */
    if (took < HALT_MS + GRACE_MS || took > 10 * (HALT_MS + GRACE_MS)) {
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
    T_TRUE(took >= 300 && took < 10 * 300);
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

static mesh_control_block *mailbox(void)
{
    uint8_t *host = NULL;
    uint64_t dev = 0;
    b->ops->mailbox(b, &host, &dev, NULL);
    return (mesh_control_block *)host;
}

/* Issue 20, case 1: a node writes over every word of the host it can
 * reach.  That is its own page only: it is reported, while another
 * program runs on untouched, the header stays, and launches go on. */
static void test_corrupt(void)
{
    uint32_t victim = 99, bad = 99;
    char *err = NULL;
    T_OK(start("t_ok", 2, &victim, &err), err);
    T_OK(start("t_corrupt", 1, &bad, &err), err);
    if (victim == 99 || bad == 99) {
        return;
    }
    mesh_run_state st = MESH_RUN_RUNNING;
    char *why = NULL;
    T_OK(mesh_driver_wait(d, bad, 10000, &st, &why, &err), err);
    T_EQ_U(st, MESH_RUN_CRASHED);
    static const char want[] = "node 0 broke its words (N_ONLINE 4294967295";
    if (why == NULL || strncmp(why, want, strlen(want)) != 0) {
        T_FAILF("why: \"%s\"", why != NULL ? why : "(null)");
    }
    free(why);
    /* What the broken page said counts for nothing: online is the host's
     * own count, not 0xffffffff, points stayed where they were. */
    mesh_control_block *cb = mailbox();
    T_TRUE(atomic_load(&cb->slot[bad].online) <= 1);
    T_TRUE(mesh_driver_point(d, bad, 0) <= 20);
    /* The other program runs on; the header is whole. */
    T_EQ_U(atomic_load(&cb->h.magic), MESH_CB_MAGIC);
    T_EQ_U(cb->h.host_pid, getpid());
    T_EQ_U(cb->h.abi, MESH_RT_ABI_VERSION);
    T_EQ_U(atomic_load(&cb->slot[victim].halt), 0);
    T_EQ_U(atomic_load(&cb->slot[victim].online), 2);
    T_EQ_U(atomic_load(&cb->slot[victim].state), MESH_SLOT_RUNNING);
    T_OK(mesh_driver_poll(d, victim, &st, &why, &err), err);
    T_EQ_U(st, MESH_RUN_RUNNING);
    uint64_t p0 = mesh_driver_point(d, victim, 0);
    uint64_t t0 = now_ms();
    while (mesh_driver_point(d, victim, 0) <= p0 && now_ms() - t0 < 10000) {
        usleep(1000);
    }
    T_TRUE(mesh_driver_point(d, victim, 0) > p0);
    T_OK(mesh_driver_stop(d, bad, &err), err);
    T_OK(mesh_driver_stop(d, victim, &err), err);
    /* The backend takes new launches. */
    uint32_t again = 99;
    T_OK(start("t_ok", 1, &again, &err), err);
    if (again != 99) {
        T_OK(mesh_driver_stop(d, again, &err), err);
    }
    T_EQ_U(children(), 0);
}

/* Issue 20, case 6: one node cannot make the launch look up.  Node 1 goes
 * online 500 ms late; node 0 goes online twice (the API twice), or says
 * N_ONLINE = 2 in its page. */
static void test_online_per_node(void)
{
    uint32_t slot = 99;
    char *err = NULL;
    uint64_t t0 = now_ms();
    T_OK(start("t_online2", 2, &slot, &err), err);
    uint64_t took = now_ms() - t0;
    if (took < 500) {
        T_FAILF("started after %llu ms, before node 1 was online (500 ms)",
                (unsigned long long)took);
    }
    if (slot != 99) {
        T_EQ_U(atomic_load(&mailbox()->slot[slot].online), 2);
        T_OK(mesh_driver_stop(d, slot, &err), err);
    }
    slot = 99;
    T_ERR(start("t_online2_hostile", 2, &slot, &err), err,
          "load: program t_online2_hostile: node 0 broke its words "
          "(N_ONLINE 2,");
    T_EQ_U(slot, 99);
    T_EQ_U(children(), 0);
}

/* Whether pid is gone (reaped: no such process). */
static bool gone(pid_t pid)
{
    return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

static char pids_dir[64];

/* The pids node n of the last spawn case wrote; false if it wrote none. */
static bool tree_pids(uint32_t n, pid_t pids[3])
{
    char path[128];
    snprintf(path, sizeof(path), "%s/node%u", pids_dir, n);
    FILE *f = fopen(path, "r");
    int a = 0, c = 0, e = 0;
    bool ok = f != NULL && fscanf(f, "%d %d %d", &a, &c, &e) == 3;
    if (f != NULL) {
        fclose(f);
    }
    unlink(path);
    pids[0] = a;
    pids[1] = c;
    pids[2] = e;
    return ok && a > 0 && c > 0 && e > 0;
}

/* Every process node n's tree had is gone. */
static void tree_gone(const char *how, uint32_t n)
{
    pid_t pids[3];
    if (!tree_pids(n, pids)) {
        T_FAILF("%s: node %u wrote no pids", how, n);
        return;
    }
    for (int i = 0; i < 3; i++) {
        if (!gone(pids[i])) {
            T_FAILF("%s: node %u's %s (pid %d) outlived it", how, n,
                    i < 2 ? "child" : "daemon", (int)pids[i]);
            kill(pids[i], SIGKILL);
        } else {
            CU_PASS("gone");
        }
    }
}

/* Issue 20, case 2: whatever a node starts -- two children, a daemon that
 * left its session -- ends with it: when it exits, when it is unloaded,
 * when it crashes, when its launch times out. */
static void test_process_trees(void)
{
    snprintf(pids_dir, sizeof(pids_dir), "/tmp/rig-test-trees.XXXXXX");
    if (mkdtemp(pids_dir) == NULL) {
        T_FAILF("mkdtemp: %s", strerror(errno));
        return;
    }
    setenv("RIG_TEST_PIDS", pids_dir, 1);
    uint32_t slot = 99;
    char *err = NULL;
    mesh_run_state st = MESH_RUN_RUNNING;
    char *why = NULL;

    /* It exits: done only once its tree is gone. */
    T_OK(start("t_spawn_exit", 1, &slot, &err), err);
    if (slot != 99) {
        T_OK(mesh_driver_wait(d, slot, 10000, &st, &why, &err), err);
        T_EQ_U(st, MESH_RUN_DONE);
        tree_gone("exit", 0);
        T_OK(mesh_driver_stop(d, slot, &err), err);
    }
    /* Unloaded while it runs (2 nodes, a tree each). */
    slot = 99;
    T_OK(start("t_spawn_run", 2, &slot, &err), err);
    if (slot != 99) {
        T_OK(mesh_driver_stop(d, slot, &err), err);
        tree_gone("unload", 0);
        tree_gone("unload", 1);
    }
    /* It crashes. */
    slot = 99;
    T_OK(start("t_spawn_crash", 1, &slot, &err), err);
    if (slot != 99) {
        T_OK(mesh_driver_wait(d, slot, 10000, &st, &why, &err), err);
        T_EQ_U(st, MESH_RUN_CRASHED);
        T_TRUE(why != NULL && strcmp(why, "node 0 killed by signal 11") == 0);
        free(why);
        why = NULL;
        tree_gone("crash", 0);
        T_OK(mesh_driver_stop(d, slot, &err), err);
    }
    /* It never comes online: the launch times out. */
    mesh_backend_options o = {
        .online_timeout_ms = 1000, .halt_ms = 50, .grace_ms = 50};
    mesh_backend *b2 = NULL;
    mesh_driver *d2 = NULL;
    T_OK(mesh_backend_open(MESH_BACKEND_NATIVE, &o, &b2, &err), err);
    T_OK(mesh_driver_open(b2, &d2, &err), err);
    mesh_payload p;
    mesh_prepared pr;
    slot = 99;
    if (d2 != NULL &&
        mesh_payload_read(MESH_TEST_PROGRAMS, "t_spawn_never", &p, &err) &&
        mesh_driver_prepare(d2, &p, NULL, NULL, &pr, &err)) {
        T_ERR(mesh_driver_start(d2, &pr, 1, &slot, &err), err, "timeout: ");
        tree_gone("timeout", 0);
    } else {
        T_OK(false, err);
    }
    mesh_driver_close(d2);
    mesh_backend_destroy(b2);
    unsetenv("RIG_TEST_PIDS");
    rmdir(pids_dir);
    T_EQ_U(children(), 0);
}

/* Issue 20, case 7: a node that comes online and crashes at once is a
 * crash after going online, every time (9 in 100 were reported as one
 * before, when the crash was seen before the online count). */
static void test_crash_after_online(void)
{
    mesh_payload tmpl;
    char *err = NULL;
    T_OK(mesh_payload_read(MESH_TEST_PROGRAMS, "t_flash", &tmpl, &err), err);
    if (tmpl.name == NULL) {
        return;
    }
    int wrong = 0;
    for (int i = 0; i < 100; i++) {
        mesh_payload p;
        mesh_prepared pr;
        uint32_t slot = 99;
        mesh_run_state st = MESH_RUN_RUNNING;
        char *why = NULL;
        bool ok = mesh_payload_copy(&p, &tmpl, &err) &&
                  mesh_driver_prepare(d, &p, NULL, NULL, &pr, &err) &&
                  mesh_driver_start(d, &pr, 1, &slot, &err) &&
                  mesh_driver_wait(d, slot, 10000, &st, &why, &err);
        if (!ok || st != MESH_RUN_CRASHED || why == NULL ||
            strcmp(why, "node 0 killed by signal 11") != 0) {
            if (wrong++ < 3) {
                T_FAILF("launch %d: %s (state %d, why \"%s\")", i,
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
    mesh_payload_free(&tmpl);
    T_EQ_U(wrong, 0);
    T_EQ_U(children(), 0);
}

/* Issue 20, case 7: a node linked with UCX (through librig) crashes
 * without UCX's backtrace in the user's log: nodes run with
 * UCX_HANDLE_ERRORS=none.  The host runs in a child whose stderr (which
 * the node shares) is a file. */
static void test_no_ucx_backtrace(void)
{
    char log[] = "/tmp/rig-test-ucx.XXXXXX";
    int fd = mkstemp(log);
    if (fd < 0) {
        T_FAILF("mkstemp: %s", strerror(errno));
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 2);
        mesh_backend *cb = NULL;
        mesh_driver *cd = NULL;
        mesh_payload p;
        mesh_prepared pr;
        uint32_t slot = 0;
        mesh_run_state st = MESH_RUN_RUNNING;
        char *why = NULL, *e = NULL;
        bool ok =
            mesh_backend_open(MESH_BACKEND_NATIVE, NULL, &cb, &e) &&
            mesh_driver_open(cb, &cd, &e) &&
            mesh_payload_read(MESH_TEST_PROGRAMS, "t_ucx_crash", &p, &e) &&
            mesh_driver_prepare(cd, &p, NULL, NULL, &pr, &e) &&
            mesh_driver_start(cd, &pr, 1, &slot, &e) &&
            mesh_driver_wait(cd, slot, 10000, &st, &why, &e);
        if (!ok) {
            fprintf(stderr, "host: %s\n", e != NULL ? e : "?");
        }
        _exit(ok && st == MESH_RUN_CRASHED && why != NULL &&
                      strcmp(why, "node 0 killed by signal 11") == 0
                  ? 0
                  : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    T_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char buf[8192];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    unlink(log);
    buf[n > 0 ? n : 0] = '\0';
    if (strstr(buf, "Caught signal") != NULL ||
        strstr(buf, "backtrace") != NULL) {
        T_FAILF("the node's crash printed UCX's handler output: %.300s", buf);
    } else {
        CU_PASS("no UCX backtrace");
    }
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
    CU_add_test(s, "a program corrupts only its own words", test_corrupt);
    CU_add_test(s, "online is counted per node", test_online_per_node);
    CU_add_test(s, "what a node starts ends with it", test_process_trees);
    CU_add_test(s, "100 crashes after online reported so",
                test_crash_after_online);
    CU_add_test(s, "no UCX backtrace from a crashing node",
                test_no_ucx_backtrace);
    CU_add_test(s, "200 cycles without leaks", test_cycles);
    return t_run_registry();
}
