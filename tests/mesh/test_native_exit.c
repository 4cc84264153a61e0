/* SPDX-License-Identifier: BSD-3-Clause */
/* The native backend's nodes, and all they start, end with their host: a
 * child process (the host) starts programs whose nodes leave children and
 * a daemon behind, then ends by exit(), by a fatal signal, or by SIGKILL
 * (no cleanup of its own runs).  This process, a child subreaper, inherits
 * whatever outlives the host and checks that nothing does.  Without
 * PR_SET_CHILD_SUBREAPER it cannot tell: it skips (exit 77). */
#include "mesh/driver.h"
#include "mesh/executors.h"

#include "../test_util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "real_signals.h"

static char pids_dir[64];

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static bool start(mesh_driver *d, const char *name, uint32_t nodes)
{
    mesh_payload p;
    mesh_prepared pr;
    uint32_t slot = 0;
    return mesh_payload_read(MESH_TEST_PROGRAMS, name, &p, NULL) &&
           mesh_driver_prepare(d, &p, NULL, NULL, &pr, NULL) &&
           mesh_driver_start(d, &pr, nodes, &slot, NULL);
}

/* Kills what is left of this process's children (a failed case). */
static void kill_leftovers(void)
{
    char path[64], buf[4096];
    snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
    FILE *f = fopen(path, "r");
    size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f != NULL) {
        fclose(f);
    }
    buf[n] = '\0';
    for (char *p = buf, *end = NULL;; p = end) {
        long pid = strtol(p, &end, 10);
        if (end == p) {
            break;
        }
        kill((pid_t)pid, SIGKILL);
    }
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

typedef enum { BY_EXIT, BY_SIGNAL, BY_SIGKILL } host_end;

/* The host: a program with a tree per node (2 nodes) and t_ok (1 node),
 * then its end.  Exit 90: a start failed. */
static _Noreturn void host(host_end how, int ready)
{
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    mesh_backend *b = NULL;
    mesh_driver *d = NULL;
    if (!mesh_backend_open(MESH_BACKEND_NATIVE, NULL, &b, NULL) ||
        !mesh_driver_open(b, &d, NULL) || !start(d, "t_spawn_run", 2) ||
        !start(d, "t_ok", 1)) {
        _exit(90);
    }
    if (write(ready, "r", 1) != 1) {
        _exit(91);
    }
    if (how == BY_SIGNAL) {
        raise(SIGSEGV);
    } else if (how == BY_SIGKILL) {
        /* The parent kills it: no cleanup of the host runs. */
        for (;;) {
            pause();
        }
    }
    exit(0);
}

static void host_case(host_end how)
{
    static const char *const names[] = {"exit()", "SIGSEGV", "SIGKILL"};
    const char *name = names[how];
    int pipefd[2];
    if (pipe(pipefd) != 0) {
        T_FAILF("pipe: %s", strerror(errno));
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        host(how, pipefd[1]);
    }
    close(pipefd[1]);
    char c = 0;
    bool ready = read(pipefd[0], &c, 1) == 1;
    close(pipefd[0]);
    if (!ready) {
        T_FAILF("%s: the host did not start its programs", name);
    }
    if (how == BY_SIGKILL) {
        kill(pid, SIGKILL);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (how == BY_EXIT) {
        T_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    } else {
        T_TRUE(WIFSIGNALED(st) &&
               WTERMSIG(st) == (how == BY_SIGNAL ? SIGSEGV : SIGKILL));
    }
    /* Everything the host left is re-parented here: its 3 keepers, each
     * ending its node's tree and then itself; a process that outlived its
     * keeper would be re-parented here too, and linger for 30 s. */
    int reaped = 0, killed = 0;
    uint64_t t0 = now_ms();
    for (;;) {
        int ns = 0;
        pid_t r = waitpid(-1, &ns, WNOHANG);
        if (r > 0) {
            reaped++;
            killed += WIFSIGNALED(ns) && WTERMSIG(ns) == SIGKILL;
        } else if (r < 0 && errno == ECHILD) {
            break;
        } else if (now_ms() - t0 > 10000) {
            T_FAILF("%s: processes outlive the host by 10 s", name);
            kill_leftovers();
            break;
        } else {
            usleep(1000);
        }
    }
    T_EQ_U(reaped, 3);
    T_EQ_U(killed, 3);
    /* The nodes' children and daemons: gone. */
    for (int n = 0; n < 2; n++) {
        char path[128];
        snprintf(path, sizeof(path), "%s/node%d", pids_dir, n);
        FILE *f = fopen(path, "r");
        int p[3] = {0, 0, 0};
        bool ok = f != NULL && fscanf(f, "%d %d %d", &p[0], &p[1], &p[2]) == 3;
        if (f != NULL) {
            fclose(f);
        }
        unlink(path);
        T_TRUE(ok);
        for (int i = 0; ok && i < 3; i++) {
            if (kill(p[i], 0) == 0 || errno != ESRCH) {
                T_FAILF("%s: pid %d of node %d's tree outlived the host", name,
                        p[i], n);
                kill(p[i], SIGKILL);
            }
        }
    }
}

static void test_exit(void)
{
    host_case(BY_EXIT);
}

static void test_signal(void)
{
    host_case(BY_SIGNAL);
}

static void test_sigkill(void)
{
    host_case(BY_SIGKILL);
}

int main(void)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
        printf("SKIP: no PR_SET_CHILD_SUBREAPER (%s): orphans cannot be "
               "watched\n",
               strerror(errno));
        return 77;
    }
    snprintf(pids_dir, sizeof(pids_dir), "/tmp/rig-test-exit.XXXXXX");
    if (mkdtemp(pids_dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    setenv("RIG_TEST_PIDS", pids_dir, 1);
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite s = CU_add_suite("mesh_native_exit", NULL, NULL);
    CU_add_test(s, "the host exits: its nodes' trees end", test_exit);
    CU_add_test(s, "the host dies of a signal: the trees end", test_signal);
    CU_add_test(s, "the host is SIGKILLed: the trees end", test_sigkill);
    int rc = t_run_registry();
    rmdir(pids_dir);
    return rc;
}
