/* SPDX-License-Identifier: BSD-3-Clause */
/* Child processes of the executors: tables a cleanup kills, reaping by pid. */
#include "child_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

bool mesh_child_add(mesh_child_table *t, pid_t pid)
{
    atomic_store(&t->owner, getpid());
    for (size_t i = 0; i < t->cap; i++) {
        pid_t want = 0;
        if (atomic_compare_exchange_strong(&t->pids[i], &want, pid)) {
            return true;
        }
    }
    return false;
}

static void forget(mesh_child_table *t, pid_t pid)
{
    for (size_t i = 0; t != NULL && i < t->cap; i++) {
        pid_t want = pid;
        if (atomic_compare_exchange_strong(&t->pids[i], &want, 0)) {
            return;
        }
    }
}

bool mesh_child_reap(mesh_child_table *t, pid_t pid, int *status)
{
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    int r = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT);
    if (r == 0 && si.si_pid == 0) {
        return false; /* still running */
    }
    /* Gone (or reaped behind our back: ECHILD): forget it before reaping,
     * so a cleanup never signals a recycled pid. */
    forget(t, pid);
    int st = 0;
    if (r == 0) {
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
    }
    *status = st;
    return true;
}

void mesh_child_sleep_ms(uint32_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

bool mesh_child_reap_within(mesh_child_table *t, pid_t pid, uint32_t ms,
                            int *status)
{
    uint32_t waited = 0, nap = 1;
    for (;;) {
        if (mesh_child_reap(t, pid, status)) {
            return true;
        }
        if (waited >= ms) {
            return false;
        }
        mesh_child_sleep_ms(nap);
        waited += nap;
        nap = nap < 8 ? nap * 2 : nap;
    }
}

void mesh_child_kill_all(mesh_child_table *t, uint32_t reap_ms)
{
    if (atomic_load(&t->owner) != getpid()) {
        return;
    }
    for (size_t i = 0; i < t->cap; i++) {
        pid_t pid = reap_ms > 0 ? atomic_load(&t->pids[i])
                                : atomic_exchange(&t->pids[i], 0);
        if (pid > 0) {
            kill(pid, SIGKILL);
        }
    }
    for (size_t i = 0; reap_ms > 0 && i < t->cap; i++) {
        pid_t pid = atomic_load(&t->pids[i]);
        int st = 0;
        if (pid > 0 && !mesh_child_reap_within(t, pid, reap_ms, &st)) {
            forget(t, pid); /* stuck in the kernel: left to init */
        }
    }
}

char *mesh_child_why(int status)
{
    char *why = NULL;
    int n = -1;
    if (WIFSIGNALED(status)) {
        n = asprintf(&why, "killed by signal %d", WTERMSIG(status));
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        n = asprintf(&why, "exited with status %d", WEXITSTATUS(status));
    }
    return n < 0 ? NULL : why;
}

bool mesh_child_write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}
