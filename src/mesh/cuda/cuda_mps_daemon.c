/* SPDX-License-Identifier: BSD-3-Clause */
/* MPS isolation's private control daemons: their folders, their start and
 * quit, and the process-wide cleanup that kills the workers and quits the
 * daemons on any exit path.
 *
 * Decisions the spec leaves open:
 * - nvidia-cuda-mps-control is started once per backend with -d,
 *   CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY naming the folders
 *   pipe/ and log/ of a private folder (mkdtemp, 0700) rig-mps.XXXXXX under
 *   the job's temporary folder: $TMPDIR when it is an absolute path (batch
 *   systems set it per job; /tmp when it is too long for the sockets the
 *   pipe folder holds), else /tmp.  Start waits until the daemon's
 *   pipe/control exists.  It is stopped by running the control program once
 *   more with the same environment and "quit" on its stdin, and the folder
 *   is removed, at the backend's destroy and in the cleanup.
 * - Live workers' pids sit in a process-wide table (src/mesh/child.c); the
 *   cleanup registered at MESH_CLEANUP_MPS (after the native nodes) kills
 *   and reaps them, then quits every daemon this process started and
 *   removes its folder: async-signal-safe, as the cleanup may run in a
 *   signal handler, so the quit's argv and environment are built at start.
 * - The workers' environment is the daemon's less CUDA_VISIBLE_DEVICES
 *   (daemon_env). */
#include "cuda_mps_internal.h"

#include "../../util/util_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Backends in MPS isolation one process may have at once. */
#define MPS_DAEMONS 8
/* The control program's -d and quit. */
#define MPS_CONTROL_MS 10000u
/* The longest name of a file the daemon and server make in the pipe
 * folder ("control", "control_privileged", ...), with room to spare. */
#define MPS_PIPE_NAME_MAX 32u

/* ---- the daemons (process-wide, for the cleanup) ------------------------ */

enum { DAEMON_FREE = 0, DAEMON_SETUP, DAEMON_RUNNING, DAEMON_STOPPING };

struct mesh_cuda_mps_daemon {
    _Atomic int state;
    pid_t owner;
    char root[PATH_MAX];
    char pipe[PATH_MAX];
    char log[PATH_MAX];
    char ctl[PATH_MAX];
    char *argv[3];
    char **envp;   /* the environment with ours: -d and quit */
    char **client; /* ... less CUDA_VISIBLE_DEVICES: the workers' */
};
typedef struct mesh_cuda_mps_daemon mps_daemon;

static mps_daemon daemons[MPS_DAEMONS];
MESH_CHILD_TABLE(workers, MPS_DAEMONS * 4 * MESH_PROG_SLOTS);

mesh_child_table *mesh_cuda_mps_workers(void)
{
    return &workers;
}

/* Removes dir and what it holds (depth levels down); async-signal-safe. */
static void remove_tree(const char *dir, int depth)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        char buf[4096];
        bool removed = true;
        while (removed) {
            ssize_t n = getdents64(fd, buf, sizeof(buf));
            if (n <= 0) {
                break;
            }
            removed = false;
            for (ssize_t at = 0; at < n;) {
                struct dirent64 *e = (struct dirent64 *)(void *)(buf + at);
                at += e->d_reclen;
                const char *name = e->d_name;
                if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
                    continue;
                }
                if (unlinkat(fd, name, 0) == 0) {
                    removed = true;
                    continue;
                }
                if (errno != EISDIR || depth <= 0) {
                    continue;
                }
                char sub[PATH_MAX];
                size_t a = strlen(dir), b = strlen(name);
                if (a + b + 2 <= sizeof(sub)) {
                    memcpy(sub, dir, a);
                    sub[a] = '/';
                    memcpy(sub + a + 1, name, b + 1);
                    remove_tree(sub, depth - 1);
                    removed = true;
                }
            }
            /* Entries went: read the folder again from its start. */
            lseek(fd, 0, SEEK_SET);
        }
        close(fd);
    }
    rmdir(dir);
}

/* Runs the control program with stdin_text on its stdin (NULL: /dev/null)
 * and args; its exit status in *status.  False when it does not start or
 * end within MPS_CONTROL_MS (then it is killed).  Async-signal-safe. */
static bool run_control(mps_daemon *d, const char *arg, const char *stdin_text,
                        int *status)
{
    int p[2] = {-1, -1};
    if (stdin_text != NULL) {
        /* Written before the fork: no SIGPIPE if the program never reads. */
        if (pipe2(p, O_CLOEXEC) != 0) {
            return false;
        }
        size_t n = strlen(stdin_text);
        if (write(p[1], stdin_text, n) != (ssize_t)n) {
            close(p[0]);
            close(p[1]);
            return false;
        }
        close(p[1]);
    }
    char *argv[3] = {d->ctl, (char *)arg, NULL};
    /* _Fork: fork without its atfork handlers, async-signal-safe. */
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 34)
    pid_t pid = _Fork();
#else
    pid_t pid = fork();
#endif
    if (pid == 0) {
        int in = p[0] >= 0 ? p[0] : open("/dev/null", O_RDONLY);
        if (in < 0 || dup2(in, 0) < 0) {
            _exit(126);
        }
        if (close_range(3, ~0u, 0) != 0) {
            for (int fd = 3; fd < 1024; fd++) {
                close(fd);
            }
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(d->ctl, arg != NULL ? argv : d->argv, d->envp);
        _exit(127);
    }
    if (p[0] >= 0) {
        close(p[0]);
    }
    if (pid < 0) {
        return false;
    }
    if (!mesh_child_reap_within(NULL, pid, MPS_CONTROL_MS, status)) {
        kill(pid, SIGKILL);
        mesh_child_reap_within(NULL, pid, MPS_CONTROL_MS, status);
        return false;
    }
    return true;
}

/* Quits d's daemon and removes its folder, once; async-signal-safe. */
static void daemon_stop(mps_daemon *d)
{
    int want = DAEMON_RUNNING;
    if (d->owner != getpid() ||
        !atomic_compare_exchange_strong(&d->state, &want, DAEMON_STOPPING)) {
        return;
    }
    int status = 0;
    run_control(d, NULL, "quit\n", &status);
    remove_tree(d->root, 3);
}

/* MESH_CLEANUP_MPS: the workers, then the daemons. */
static void mps_cleanup(void)
{
    mesh_child_kill_all(&workers, 2000);
    for (size_t i = 0; i < MPS_DAEMONS; i++) {
        daemon_stop(&daemons[i]);
    }
}

static void env_free(char **env)
{
    for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
        free(env[i]);
    }
    free(env);
}

static void daemon_release(mps_daemon *d)
{
    env_free(d->envp);
    d->envp = NULL;
    env_free(d->client);
    d->client = NULL;
    atomic_store(&d->state, DAEMON_FREE);
}

/* ---- starting one ------------------------------------------------------ */

/* The environment with CUDA_MPS_* of d (malloc'd strings); for a client
 * (a worker), without CUDA_VISIBLE_DEVICES: "When CUDA_VISIBLE_DEVICES is
 * set before launching the control daemon, the devices will be remapped
 * by the MPS server. ... keeping CUDA_VISIBLE_DEVICES set to "0,2" when
 * launching the client would lead to an error" (MPS documentation,
 * environment variables).  The daemon keeps it, so the server sees the
 * devices the backend sees, in its order: the backend's ordinal is the
 * workers' too. */
static char **daemon_env(const mps_daemon *d, bool client)
{
    size_t n = 0;
    while (environ != NULL && environ[n] != NULL) {
        n++;
    }
    char **env = calloc(n + 3, sizeof(char *));
    if (env == NULL) {
        return NULL;
    }
    /* asprintf leaves its pointer undefined on failure. */
    char *pipe_var = NULL, *log_var = NULL;
    if (asprintf(&pipe_var, "CUDA_MPS_PIPE_DIRECTORY=%s", d->pipe) < 0) {
        free(env);
        return NULL;
    }
    if (asprintf(&log_var, "CUDA_MPS_LOG_DIRECTORY=%s", d->log) < 0) {
        free(pipe_var);
        free(env);
        return NULL;
    }
    env[0] = pipe_var;
    env[1] = log_var;
    size_t at = 2;
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        if (strncmp(environ[i], "CUDA_MPS_PIPE_DIRECTORY=", 24) == 0 ||
            strncmp(environ[i], "CUDA_MPS_LOG_DIRECTORY=", 23) == 0 ||
            (client && strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21) == 0)) {
            continue;
        }
        ok = (env[at++] = strdup(environ[i])) != NULL;
    }
    if (!ok) {
        env_free(env);
        return NULL;
    }
    return env;
}

/* The folder the daemon's folders go in: the job's temporary folder
 * ($TMPDIR when it is an absolute path), else /tmp.  The pipe folder
 * holds the daemon's Unix sockets, whose paths have at most 107 bytes
 * (sun_path of unix(7) is 108 with its NUL): under a $TMPDIR too long for
 * that, /tmp (what Open MPI's PMIx and others fall back to). */
static const char *daemon_tmp(void)
{
    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || tmp[0] != '/') {
        return "/tmp";
    }
    size_t room = sizeof(((struct sockaddr_un *)NULL)->sun_path) - 1;
    size_t need =
        strlen(tmp) + strlen("/rig-mps.XXXXXX/pipe/") + MPS_PIPE_NAME_MAX;
    if (need > room) {
        rig_log(RIG_LOG_INFO,
                "mesh: cuda: TMPDIR %s would make the MPS pipe folder's "
                "socket paths longer than %zu bytes: the daemon's folders "
                "go under /tmp",
                tmp, room);
        return "/tmp";
    }
    return tmp;
}

static bool daemon_start(mps_daemon *d, char *ctl, char **err)
{
    const char *tmp = daemon_tmp();
    snprintf(d->ctl, sizeof(d->ctl), "%s", ctl);
    free(ctl);
    d->argv[0] = d->ctl;
    d->argv[1] = NULL;
    if ((size_t)snprintf(d->root, sizeof(d->root), "%s/rig-mps.XXXXXX", tmp) >=
        sizeof(d->root) - 16) {
        return rig_err(err, "system: TMPDIR %s is too long", tmp);
    }
    if (mkdtemp(d->root) == NULL) {
        return rig_err(err, "system: mkdtemp %s failed: %s", d->root,
                       strerror(errno));
    }
    int np = snprintf(d->pipe, sizeof(d->pipe), "%s/pipe", d->root);
    int nl = snprintf(d->log, sizeof(d->log), "%s/log", d->root);
    if (np < 0 || nl < 0 || mkdir(d->pipe, 0700) != 0 ||
        mkdir(d->log, 0700) != 0) {
        rig_err(err, "system: mkdir in %s failed: %s", d->root,
                strerror(errno));
        goto err_remove;
    }
    d->envp = daemon_env(d, false);
    d->client = daemon_env(d, true);
    if (d->envp == NULL || d->client == NULL) {
        rig_err(err, "nomem: the MPS daemon's environment");
        goto err_remove;
    }
    d->owner = getpid();
    int status = 0;
    if (!run_control(d, "-d", NULL, &status) || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        char *why = mesh_child_why(status);
        rig_err(err, "system: %s -d failed: %s", d->ctl,
                why != NULL ? why : "it did not end in time");
        free(why);
        goto err_remove;
    }
    /* -d returns once the daemon forked; clients need its pipe. */
    char control[PATH_MAX + 16];
    snprintf(control, sizeof(control), "%s/control", d->pipe);
    uint32_t waited = 0;
    while (access(control, F_OK) != 0) {
        if (waited >= MPS_CONTROL_MS) {
            rig_err(err,
                    "system: the MPS control daemon made no %s within "
                    "%u ms",
                    control, MPS_CONTROL_MS);
            atomic_store(&d->state, DAEMON_RUNNING);
            daemon_stop(d); /* it may come up still */
            return false;
        }
        mesh_child_sleep_ms(10);
        waited += 10;
    }
    atomic_store(&d->state, DAEMON_RUNNING);
    return true;
err_remove:
    remove_tree(d->root, 3);
    return false;
}

bool mesh_cuda_mps_daemon_start(char *ctl, mesh_cuda_mps_daemon **out,
                                char **err)
{
    mps_daemon *d = NULL;
    for (size_t i = 0; d == NULL && i < MPS_DAEMONS; i++) {
        int want = DAEMON_FREE;
        if (atomic_compare_exchange_strong(&daemons[i].state, &want,
                                           DAEMON_SETUP)) {
            d = &daemons[i];
        }
    }
    if (d == NULL) {
        free(ctl);
        return rig_err(err,
                       "limits: more than %d CUDA backends in MPS "
                       "isolation in one process",
                       MPS_DAEMONS);
    }
    /* Before the daemon starts: any exit from here on stops it. */
    mesh_backend_on_cleanup(MESH_CLEANUP_MPS, mps_cleanup);
    if (!daemon_start(d, ctl, err)) {
        daemon_release(d);
        return false;
    }
    *out = d;
    return true;
}

void mesh_cuda_mps_daemon_stop(mesh_cuda_mps_daemon *d)
{
    if (d == NULL) {
        return;
    }
    daemon_stop(d);
    daemon_release(d);
}

char **mesh_cuda_mps_daemon_env(const mesh_cuda_mps_daemon *d)
{
    return d->client;
}
