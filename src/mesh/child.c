/* SPDX-License-Identifier: BSD-3-Clause */
/* Child processes of the executors: tables a cleanup kills, reaping by pid,
 * and the keeper that runs each program in a tree that ends whole. */
#include "child_internal.h"

#include "../util/util_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

void mesh_child_sleep_ns(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
                          .tv_nsec = (long)(ns % 1000000000u)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void mesh_child_sleep_ms(uint32_t ms)
{
    mesh_child_sleep_ns((uint64_t)ms * 1000000u);
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

/* ---- the keeper ----------------------------------------------------------
 *
 * Why a keeper process per program, and not the host: only a child
 * subreaper (PR_SET_CHILD_SUBREAPER) sees the processes a program leaves
 * behind once their parent is gone, and making the application's process a
 * subreaper would change what happens to every orphan of its own children.
 * Why an executable of its own: a forked copy of the host would keep the
 * host's whole address space, and every page the host writes afterwards
 * would be copied.  The keeper (src/mesh/keeper/keeper.c, about 20 KiB) is
 * built with rig and carried in librig (keeper_image.c); it runs from a
 * sealed memfd made once per process, so nothing needs installing.  A
 * cgroup would end a tree without a keeper, but needs a delegated cgroup
 * the user rarely has. */

/* The keeper's image (keeper_image.c). */
extern const unsigned char mesh_keeper_image[]
    __attribute__((visibility("hidden")));
extern const unsigned char mesh_keeper_image_end[]
    __attribute__((visibility("hidden")));

/* The keeper's sealed memfd, at a descriptor >= KEEPER_FD_MIN so that the
 * dup2s onto 3..6 before its exec never cover it; -1 until made. */
#define KEEPER_FD_MIN 10
static int keeper_fd = -1;
static int keeper_errno;
static pthread_once_t keeper_once = PTHREAD_ONCE_INIT;

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

static void keeper_make(void)
{
    uintptr_t lo = (uintptr_t)mesh_keeper_image;
    uintptr_t hi = (uintptr_t)mesh_keeper_image_end;
    if (hi <= lo) {
        keeper_errno = ENOEXEC; /* an empty image: a broken build */
        return;
    }
    /* MFD_EXEC: kernels with vm.memfd_noexec make memfds without it
     * non-executable; older kernels refuse the flag. */
    int fd = memfd_create("rig-mesh-keeper",
                          MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
    if (fd < 0 && errno == EINVAL) {
        fd = memfd_create("rig-mesh-keeper", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    }
    if (fd < 0) {
        keeper_errno = errno;
        return;
    }
    size_t n = (size_t)(hi - lo);
    int high = -1;
    if (!mesh_child_write_all(fd, mesh_keeper_image, n) ||
        fcntl(fd, F_ADD_SEALS,
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0 ||
        (high = fcntl(fd, F_DUPFD_CLOEXEC, KEEPER_FD_MIN)) < 0) {
        keeper_errno = errno;
        close(fd);
        return;
    }
    close(fd);
    keeper_fd = high;
}

bool mesh_child_spawn(const mesh_child_spec *s, pid_t *keeper, char **err)
{
    if (s == NULL || s->argv == NULL || s->argv[0] == NULL || s->envp == NULL ||
        keeper == NULL ||
        (s->exec_fd != -1 &&
         (s->exec_fd < 3 || s->exec_fd > 6 || s->fds[s->exec_fd - 3] < 0))) {
        return rig_err(err, "invalid: mesh_child_spawn: bad spec");
    }
    pthread_once(&keeper_once, keeper_make);
    if (keeper_fd < 0) {
        return rig_err(err, "system: making the keeper's memfd failed: %s",
                       strerror(keeper_errno));
    }
    size_t argc = 0;
    while (s->argv[argc] != NULL) {
        argc++;
    }
    char head[4][32];
    snprintf(head[0], sizeof(head[0]), "%ld", (long)getpid());
    snprintf(head[1], sizeof(head[1]), "%zu", s->stack_bytes);
    int mask = 0;
    for (int i = 0; i < 4; i++) {
        mask |= s->fds[i] >= 0 ? 1 << i : 0;
    }
    snprintf(head[2], sizeof(head[2]), "%d", mask);
    snprintf(head[3], sizeof(head[3]), "%d", s->exec_fd);
    char **argv = calloc(argc + 6, sizeof(char *));
    if (argv == NULL) {
        return rig_err(err, "nomem: starting %s", s->argv[0]);
    }
    argv[0] = "rig-mesh-keeper";
    for (int i = 0; i < 4; i++) {
        argv[1 + i] = head[i];
    }
    for (size_t i = 0; i < argc; i++) {
        argv[5 + i] = s->argv[i];
    }
    /* Sources below 7 would be covered by the dup2s onto 3..6: move them. */
    int src[4], moved[4] = {-1, -1, -1, -1};
    bool ok = true;
    for (int i = 0; i < 4; i++) {
        src[i] = s->fds[i];
        if (src[i] >= 0 && src[i] < 7) {
            moved[i] = fcntl(src[i], F_DUPFD_CLOEXEC, KEEPER_FD_MIN);
            src[i] = moved[i];
            ok = ok && moved[i] >= 0;
        }
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    if (s->log != NULL) {
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, s->log,
                                         O_WRONLY | O_CREAT | O_TRUNC, 0600);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    }
    for (int i = 0; i < 4; i++) {
        if (src[i] >= 0) {
            posix_spawn_file_actions_adddup2(&fa, src[i], 3 + i);
        }
    }
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", keeper_fd);
    int rc = ok ? posix_spawn(keeper, path, &fa, &attr, argv, s->envp) : errno;
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    for (int i = 0; i < 4; i++) {
        if (moved[i] >= 0) {
            close(moved[i]);
        }
    }
    free(argv);
    if (rc != 0) {
        return rig_err(err, "system: starting the keeper of %s failed: %s",
                       s->argv[0], strerror(rc));
    }
    return true;
}

void mesh_child_term(pid_t keeper)
{
    if (keeper > 0) {
        kill(keeper, SIGTERM);
    }
}

void mesh_child_end(pid_t keeper)
{
    if (keeper > 0) {
        kill(keeper, SIGUSR1);
    }
}

void mesh_child_end_all(mesh_child_table *t)
{
    if (atomic_load(&t->owner) != getpid()) {
        return;
    }
    for (size_t i = 0; i < t->cap; i++) {
        mesh_child_end(atomic_load(&t->pids[i]));
    }
}
