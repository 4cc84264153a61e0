/* SPDX-License-Identifier: BSD-3-Clause */
/* The wasm backend's compilers end with their host: a child process (the
 * host) prepares a module with a C compiler that hangs with a child and a
 * daemon (tests/wasm/hang_cc.sh), and exits, or is SIGKILLed, while it
 * runs.  This process, a child subreaper, inherits whatever outlives the
 * host and checks that nothing does.  Without PR_SET_CHILD_SUBREAPER it
 * cannot tell: it skips (exit 77). */
#include "mesh/driver.h"
#include "mesh/executors.h"

#include "../test_util.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[64], pids[128];

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void *prepare(void *arg)
{
    mesh_driver *d = arg;
    char path[4096];
    snprintf(path, sizeof(path), "%s/examples/wasm/counter/counter.wasm",
             WASM_TEST_SRCDIR);
    FILE *f = fopen(path, "rb");
    static uint8_t wasm[65536];
    size_t len = f != NULL ? fread(wasm, 1, sizeof(wasm), f) : 0;
    if (f != NULL) {
        fclose(f);
    }
    const char *json = "{\"name\": \"counter\", \"abi\": 1, \"backends\": "
                       "[\"wasm\"], \"entry\": \"counter\"}";
    mesh_payload p;
    mesh_prepared pr;
    if (len > 0 && mesh_payload_init(&p, "counter", NULL) &&
        mesh_payload_add(&p, "manifest.json", json, strlen(json), NULL) &&
        mesh_payload_add(&p, "counter.wasm", wasm, len, NULL)) {
        /* Blocks while the compiler hangs: the host ends meanwhile. */
        mesh_driver_prepare(d, &p, NULL, NULL, &pr, NULL);
    }
    return NULL;
}

/* The host: a compile that hangs, then its end once the compiler wrote its
 * pids.  Exit 90: the backend did not open. */
static _Noreturn void host(bool sigkill, int ready)
{
    mesh_backend *b = NULL;
    mesh_driver *d = NULL;
    if (!mesh_backend_open(MESH_BACKEND_WASM, NULL, &b, NULL) ||
        !mesh_driver_open(b, &d, NULL)) {
        _exit(90);
    }
    pthread_t t;
    pthread_create(&t, NULL, prepare, d);
    for (int i = 0; i < 30000 && access(pids, R_OK) != 0; i++) {
        usleep(1000);
    }
    if (write(ready, "r", 1) != 1) {
        _exit(91);
    }
    if (sigkill) {
        for (;;) {
            pause();
        }
    }
    exit(0);
}

static void host_case(bool sigkill)
{
    const char *name = sigkill ? "SIGKILL" : "exit()";
    unlink(pids);
    int pipefd[2];
    if (pipe(pipefd) != 0) {
        T_FAILF("pipe: %s", strerror(errno));
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        host(sigkill, pipefd[1]);
    }
    close(pipefd[1]);
    char c = 0;
    T_TRUE(read(pipefd[0], &c, 1) == 1);
    close(pipefd[0]);
    if (sigkill) {
        kill(pid, SIGKILL);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    T_TRUE(sigkill ? WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL
                   : WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* The compile's keeper ends the compiler's tree, then itself; what
     * outlived it would be re-parented here, and linger for 10 minutes. */
    uint64_t t0 = now_ms();
    int reaped = 0;
    for (;;) {
        pid_t r = waitpid(-1, NULL, WNOHANG);
        if (r > 0) {
            reaped++;
        } else if (r < 0 && errno == ECHILD) {
            break;
        } else if (now_ms() - t0 > 10000) {
            T_FAILF("%s: processes outlive the host by 10 s", name);
            break;
        } else {
            usleep(1000);
        }
    }
    /* The keeper, re-parented here -- unless the host's own exit ended
     * and reaped it first (exit() runs the library's cleanup; seen under
     * AddressSanitizer).  Either way nothing may outlive it: below. */
    T_TRUE(reaped <= 1);
    FILE *f = fopen(pids, "r");
    int p[2] = {0, 0};
    T_TRUE(f != NULL && fscanf(f, "%d %d", &p[0], &p[1]) == 2);
    if (f != NULL) {
        fclose(f);
    }
    for (int i = 0; i < 2; i++) {
        if (p[i] <= 0 || kill(p[i], 0) == 0 || errno != ESRCH) {
            T_FAILF("%s: the compiler's %s (pid %d) outlived the host", name,
                    i == 0 ? "child" : "daemon", p[i]);
            if (p[i] > 0) {
                kill(p[i], SIGKILL);
            }
        } else {
            CU_PASS("gone");
        }
    }
}

static void test_exit(void)
{
    host_case(false);
}

static void test_sigkill(void)
{
    host_case(true);
}

int main(void)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
        printf("SKIP: no PR_SET_CHILD_SUBREAPER (%s): orphans cannot be "
               "watched\n",
               strerror(errno));
        return 77;
    }
    snprintf(dir, sizeof(dir), "/tmp/rig-test-wasm-exit.XXXXXX");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char cache[128], cc[4096];
    snprintf(cache, sizeof(cache), "%s/cache", dir);
    snprintf(pids, sizeof(pids), "%s/cc-pids", dir);
    snprintf(cc, sizeof(cc), "%s/tests/wasm/hang_cc.sh", WASM_TEST_SRCDIR);
    setenv("RIG_WASM_CACHE", cache, 1);
    setenv("RIG_WASM_CC", cc, 1);
    setenv("RIG_TEST_CC_PIDS", pids, 1);
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite s = CU_add_suite("wasm_exit", NULL, NULL);
    CU_add_test(s, "the host exits during a compile: the compiler ends",
                test_exit);
    CU_add_test(s,
                "the host is SIGKILLed during a compile: the compiler "
                "ends",
                test_sigkill);
    int rc = t_run_registry();
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) {
        rc = rc ? rc : 1;
    }
    return rc;
}
