/* SPDX-License-Identifier: BSD-3-Clause */
/* MPS isolation of the CUDA backend: a private MPS control daemon and one
 * worker process per program.
 *
 * Decisions the spec leaves open:
 * - The daemon: nvidia-cuda-mps-control (PATH, then the toolkit's bin) is
 *   started once per backend with -d, CUDA_MPS_PIPE_DIRECTORY and
 *   CUDA_MPS_LOG_DIRECTORY naming the folders pipe/ and log/ of a private
 *   folder (mkdtemp, 0700) rig-mps.XXXXXX under the job's temporary folder:
 *   $TMPDIR when it is an absolute path (batch systems set it per job),
 *   else /tmp.  Open waits until the daemon's pipe/control exists.  It is
 *   stopped by running the control program once more with the same
 *   environment and "quit" on its stdin, and the folder is removed, at
 *   destroy and in the cleanup.  The backend's own process stays a plain
 *   client of the device (caps, the mailbox's registration), so MPS needs
 *   the GPU in the Default compute mode.
 * - The workers: rig-cuda-worker ($RIG_MESH_CUDA_WORKER, else
 *   RIG_PKGLIBEXECDIR, where `make install` puts it), one per prepared
 *   program, started by prepare on the JIT thread with the daemon's
 *   environment, so that its context is a client of this daemon; it loads
 *   the image (cuda_image.c, the blink path's code) and maps the mailbox
 *   memfd itself (cuda_worker.c).  prepared->kernel is the worker: load
 *   takes it, and launch, query, global_u32 and unload are commands to it
 *   over a socket (cuda_mps_internal.h: fixed-size records, one reply
 *   each).  Without either program MPS answers "unsupported: " naming it.
 * - A module change is the worker's alone: isolated is true and
 *   module_scope bounds a change to its slot.  The occupancy budget is the
 *   backend's, as with blink (the worker reports its blocks per SM).
 * - A worker that dies is a crash: query reports its launch done and
 *   crashed says why once ("... killed by signal 9 (SIGKILL)"); a kernel
 *   fault is reported as in blink.  A worker whose backend is gone (the
 *   socket's end) exits.
 * - unload sends EXIT: the worker waits for its halted kernel (halt_ms +
 *   grace_ms), frees the image and exits; one that does not is SIGKILLed.
 *   destroy SIGKILLs the workers of kernels that outlive the backend (as
 *   the native backend's destroy), then quits the daemon.
 * - Live workers' pids sit in a process-wide table (src/mesh/child.c); the
 *   cleanup registered at MESH_CLEANUP_MPS (after the native nodes) kills
 *   and reaps them, then quits every daemon this process started and
 *   removes its folder: async-signal-safe, as the cleanup may run in a
 *   signal handler, so the quit's argv and environment are built at open.
 * - set_stack_limit applies to workers started afterwards (the driver sets
 *   it with no program running). */
#include "cuda_mps_internal.h"

#include "../../util/util_internal.h"
#include "../child_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#ifndef RIG_PKGLIBEXECDIR
#define RIG_PKGLIBEXECDIR "/usr/local/libexec/rig"
#endif

#define MPS_WORKER_NAME "rig-cuda-worker"
#define MPS_DAEMONS 8
/* A worker's first reply: a cold MPS server start and a module load. */
#define MPS_START_MS 30000u
/* Any other reply. */
#define MPS_REPLY_MS 5000u
/* The control program's -d and quit. */
#define MPS_CONTROL_MS 10000u

/* ---- the daemons (process-wide, for the cleanup) ------------------------ */

enum { DAEMON_FREE = 0, DAEMON_SETUP, DAEMON_RUNNING, DAEMON_STOPPING };

typedef struct {
    _Atomic int state;
    pid_t owner;
    char root[PATH_MAX];
    char pipe[PATH_MAX];
    char log[PATH_MAX];
    char ctl[PATH_MAX];
    char *argv[3];
    char **envp; /* the environment with ours: -d, quit, the workers */
} mps_daemon;

static mps_daemon daemons[MPS_DAEMONS];
MESH_CHILD_TABLE(workers, MPS_DAEMONS * 4 * MESH_PROG_SLOTS);

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

static void daemon_release(mps_daemon *d)
{
    for (size_t i = 0; d->envp != NULL && d->envp[i] != NULL; i++) {
        free(d->envp[i]);
    }
    free(d->envp);
    d->envp = NULL;
    atomic_store(&d->state, DAEMON_FREE);
}

/* ---- finding the programs ----------------------------------------------- */

/* Where nvidia-cuda-mps-control is: PATH, then the toolkit's and the
 * driver's usual folders (malloc'd), or NULL. */
static char *control_path(void)
{
    const char *path = getenv("PATH");
    char *dirs = NULL;
    if (asprintf(&dirs, "%s:%s/bin:/usr/bin:/usr/local/bin",
                 path != NULL ? path : "", RIG_CUDA_DIR) < 0) {
        return NULL;
    }
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d != NULL;
         d = strtok_r(NULL, ":", &save)) {
        char *f = NULL;
        if (d[0] == '\0' || asprintf(&f, "%s/nvidia-cuda-mps-control", d) < 0) {
            continue;
        }
        if (access(f, X_OK) == 0) {
            free(dirs);
            return f;
        }
        free(f);
    }
    free(dirs);
    return NULL;
}

static const char *worker_path(void)
{
    const char *w = getenv("RIG_MESH_CUDA_WORKER");
    return w != NULL && w[0] != '\0' ? w
                                     : RIG_PKGLIBEXECDIR "/" MPS_WORKER_NAME;
}

static bool check(char **ctl, char **err)
{
    char *c = control_path();
    if (c == NULL) {
        return rig_err(err,
                       "unsupported: MPS isolation needs "
                       "nvidia-cuda-mps-control, which is not on PATH "
                       "nor in %s/bin",
                       RIG_CUDA_DIR);
    }
    const char *w = worker_path();
    if (access(w, X_OK) != 0) {
        int e = errno;
        free(c);
        return rig_err(err,
                       "unsupported: MPS isolation needs its worker "
                       "program %s (RIG_MESH_CUDA_WORKER): %s",
                       w, strerror(e));
    }
    if (strlen(c) >= PATH_MAX) {
        free(c);
        return rig_err(err, "unsupported: the control program's path is "
                            "too long");
    }
    if (ctl != NULL) {
        *ctl = c;
    } else {
        free(c);
    }
    return true;
}

bool mesh_cuda_mps_check(char **err)
{
    return check(NULL, err);
}

/* ---- the backend's MPS context ------------------------------------------ */

typedef struct mps_worker mps_worker;

struct mesh_cuda_mps {
    mesh_compiler pub;
    const mesh_compiler *inner;
    mps_daemon *d;
    char *worker;
    int mailbox_fd;
    uint32_t device;
    uint32_t wait_ms;
    _Atomic size_t stack;
    pthread_mutex_t lock;
    mps_worker *live; /* workers started and not yet stopped */
};

struct mps_worker {
    mesh_cuda_usage use; /* first: the kernel ops read it (the reply's) */
    mesh_cuda_mps *m;    /* NULL once the backend closed */
    mps_worker *next;
    char *name;
    pid_t pid;
    int sock;
    bool gone;
    int status;
    bool crash_reported;
    int32_t fault;
    char fault_name[64];
};

/* The environment with CUDA_MPS_* of d (malloc'd strings). */
static char **daemon_env(const mps_daemon *d)
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
            strncmp(environ[i], "CUDA_MPS_LOG_DIRECTORY=", 23) == 0) {
            continue;
        }
        ok = (env[at++] = strdup(environ[i])) != NULL;
    }
    if (!ok) {
        for (size_t i = 0; i < at; i++) {
            free(env[i]);
        }
        free(env);
        return NULL;
    }
    return env;
}

/* Makes the folders, starts the daemon, waits for its control pipe. */
static bool daemon_start(mps_daemon *d, char *ctl, char **err)
{
    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || tmp[0] != '/') {
        tmp = "/tmp";
    }
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
    d->envp = daemon_env(d);
    if (d->envp == NULL) {
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

static const mesh_compiler_ops mps_compiler_ops;

bool mesh_cuda_mps_open(const mesh_compiler *inner, int mailbox_fd,
                        uint32_t device, uint32_t wait_ms, mesh_cuda_mps **out,
                        char **err)
{
    char *ctl = NULL;
    if (inner == NULL || out == NULL) {
        return rig_err(err, "invalid: mesh_cuda_mps_open: NULL argument");
    }
    if (!check(&ctl, err)) {
        return false;
    }
    mesh_cuda_mps *m = calloc(1, sizeof(*m));
    if (m == NULL || (m->worker = strdup(worker_path())) == NULL) {
        free(m);
        free(ctl);
        return rig_err(err, "nomem: MPS isolation");
    }
    mps_daemon *d = NULL;
    for (size_t i = 0; d == NULL && i < MPS_DAEMONS; i++) {
        int want = DAEMON_FREE;
        if (atomic_compare_exchange_strong(&daemons[i].state, &want,
                                           DAEMON_SETUP)) {
            d = &daemons[i];
        }
    }
    if (d == NULL) {
        free(m->worker);
        free(m);
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
        free(m->worker);
        free(m);
        return false;
    }
    m->pub.ops = &mps_compiler_ops;
    m->pub.self = m;
    m->inner = inner;
    m->d = d;
    m->mailbox_fd = mailbox_fd;
    m->device = device;
    m->wait_ms = wait_ms;
    pthread_mutex_init(&m->lock, NULL);
    *out = m;
    return true;
}

void mesh_cuda_mps_set_stack(mesh_cuda_mps *m, size_t bytes)
{
    atomic_store(&m->stack, bytes);
}

const mesh_compiler *mesh_cuda_mps_compiler(mesh_cuda_mps *m)
{
    return &m->pub;
}

/* ---- talking to a worker ------------------------------------------------ */

/* Notes that w is gone, reaping it (it closed its socket: it is ending). */
static void worker_gone(mps_worker *w)
{
    if (w->gone) {
        return;
    }
    int st = 0;
    if (!mesh_child_reap_within(&workers, w->pid, 1000, &st)) {
        kill(w->pid, SIGKILL);
        mesh_child_reap_within(&workers, w->pid, 10000, &st);
    }
    w->gone = true;
    w->status = st;
}

/* "killed by signal 9 (SIGKILL)" (malloc'd) for w's end. */
static char *worker_why(const mps_worker *w)
{
    char *what = mesh_child_why(w->status);
    char *why = NULL;
    int n = -1;
    if (what != NULL && WIFSIGNALED(w->status)) {
        const char *sig = sigabbrev_np(WTERMSIG(w->status));
        n = asprintf(&why, "%s (SIG%s)", what, sig != NULL ? sig : "?");
    } else {
        n = asprintf(&why, "%s", what != NULL ? what : "exited");
    }
    free(what);
    return n < 0 ? NULL : why;
}

/* Sends c and waits at most ms for its reply.  A worker that is gone:
 * "load: " with why. */
static bool call(mps_worker *w, const mesh_mps_cmd *c, mesh_mps_reply *r,
                 uint32_t ms, char **err)
{
    if (!w->gone) {
        ssize_t n = -1;
        do {
            n = send(w->sock, c, sizeof(*c), MSG_NOSIGNAL);
        } while (n < 0 && errno == EINTR);
        if (n == (ssize_t)sizeof(*c)) {
            struct pollfd p = {.fd = w->sock, .events = POLLIN};
            int k = 0;
            do {
                k = poll(&p, 1, (int)ms);
            } while (k < 0 && errno == EINTR);
            if (k == 0) {
                return rig_err(err,
                               "timeout: program %s: its MPS worker (pid "
                               "%d) did not answer within %u ms",
                               w->name, (int)w->pid, ms);
            }
            do {
                n = recv(w->sock, r, sizeof(*r), 0);
            } while (n < 0 && errno == EINTR);
            if (n == (ssize_t)sizeof(*r) && r->op == c->op) {
                return true;
            }
        }
        worker_gone(w);
    }
    char *why = worker_why(w);
    rig_err(err, "load: program %s: its MPS worker (pid %d) %s", w->name,
            (int)w->pid, why != NULL ? why : "is gone");
    free(why);
    return false;
}

/* A worker's refusal, r->err (text that starts with its reason word), as
 * *err; true when r says ok. */
static bool reply_ok(mesh_mps_reply *r, char **err)
{
    if (r->ok != 0) {
        return true;
    }
    r->err[sizeof(r->err) - 1] = '\0';
    return rig_err(err, "%s", r->err);
}

/* Ends w: EXIT, its reply, its end; SIGKILL past the wait.  False with
 * the worker's timeout when its kernel still ran. */
static bool worker_stop(mps_worker *w, uint32_t wait_ms, char **err)
{
    bool ok = true;
    if (!w->gone) {
        mesh_mps_cmd c = {.op = MESH_MPS_EXIT};
        mesh_mps_reply r;
        char *e = NULL;
        if (call(w, &c, &r, wait_ms + MPS_REPLY_MS, &e)) {
            ok = reply_ok(&r, err);
        }
        free(e);
        int st = 0;
        if (!w->gone) {
            if (!mesh_child_reap_within(&workers, w->pid, wait_ms + 1000,
                                        &st)) {
                kill(w->pid, SIGKILL);
                mesh_child_reap_within(&workers, w->pid, 10000, &st);
            }
            w->gone = true;
            w->status = st;
        }
    }
    if (w->sock >= 0) {
        close(w->sock);
        w->sock = -1;
    }
    return ok;
}

/* Takes w off its backend's list. */
static void worker_unlink(mps_worker *w)
{
    mesh_cuda_mps *m = w->m;
    if (m == NULL) {
        return;
    }
    pthread_mutex_lock(&m->lock);
    for (mps_worker **p = &m->live; *p != NULL; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            break;
        }
    }
    pthread_mutex_unlock(&m->lock);
    w->m = NULL;
}

static void worker_free(mps_worker *w)
{
    if (w == NULL) {
        return;
    }
    worker_unlink(w);
    free(w->name);
    free(w);
}

/* ---- the kernel --------------------------------------------------------- */

static const mesh_kernel_ops mps_kernel_ops;

static mps_worker *worker_of(const mesh_kernel *k)
{
    return k != NULL && k->ops == &mps_kernel_ops ? k->self : NULL;
}

bool mesh_cuda_mps_kernel(const mesh_kernel *k)
{
    return worker_of(k) != NULL;
}

pid_t mesh_cuda_mps_pid(const mesh_kernel *k)
{
    mps_worker *w = worker_of(k);
    return w != NULL && !w->gone ? w->pid : -1;
}

static bool k_global_u32(const mesh_kernel *k, const char *name, uint32_t *out,
                         char **err)
{
    mps_worker *w = worker_of(k);
    mesh_mps_cmd c = {.op = MESH_MPS_GLOBAL};
    if (name == NULL || strlen(name) >= sizeof(c.name)) {
        return rig_err(err, "invalid: global name %s", name ? name : "NULL");
    }
    memcpy(c.name, name, strlen(name) + 1);
    mesh_mps_reply r;
    if (!call(w, &c, &r, MPS_REPLY_MS, err) || !reply_ok(&r, err)) {
        return false;
    }
    *out = r.value;
    return true;
}

static void k_drop(mesh_kernel *k)
{
    mps_worker *w = worker_of(k);
    if (w == NULL) {
        return;
    }
    uint32_t wait = w->m != NULL ? w->m->wait_ms : 0;
    worker_stop(w, wait, NULL);
    worker_free(w);
    k->self = NULL;
}

static const mesh_kernel_ops mps_kernel_ops = {
    .exec = MESH_BACKEND_CUDA,
    .regs = mesh_cuda_k_regs,
    .local_bytes = mesh_cuda_k_local_bytes,
    .max_blocks_per_sm = mesh_cuda_k_max_blocks,
    .scratch = mesh_cuda_k_scratch,
    .global_u32 = k_global_u32,
    .drop = k_drop,
};

/* ---- starting a worker -------------------------------------------------- */

/* In the child between fork and exec: async-signal-safe calls only. */
static void worker_exec(const char *path, char **argv, char **envp, int mb,
                        int sock, int cubin)
{
    int a = fcntl(mb, F_DUPFD, 10);
    int b = fcntl(sock, F_DUPFD, 10);
    int c = fcntl(cubin, F_DUPFD, 10);
    if (a < 0 || b < 0 || c < 0 || dup2(a, MESH_MPS_FD_MAILBOX) < 0 ||
        dup2(b, MESH_MPS_FD_SOCK) < 0 || dup2(c, MESH_MPS_FD_CUBIN) < 0) {
        _exit(126);
    }
    if (close_range(MESH_MPS_FD_CUBIN + 1, ~0u, 0) != 0) {
        for (int fd = MESH_MPS_FD_CUBIN + 1; fd < 1024; fd++) {
            close(fd);
        }
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(path, argv, envp);
    _exit(127);
}

/* Starts p's worker and waits for its image to be loaded. */
static bool worker_start(mesh_cuda_mps *m, const mesh_prepared *p,
                         mesh_kernel **out, char **err)
{
    const mesh_manifest *man = &p->manifest;
    mps_worker *w = calloc(1, sizeof(*w));
    mesh_kernel *k = calloc(1, sizeof(*k));
    char *argv[MESH_MPS_ARGS + 1] = {NULL};
    int sv[2] = {-1, -1};
    int cubin = -1;
    bool ok = false;
    if (w == NULL || k == NULL || (w->name = strdup(man->name)) == NULL) {
        rig_err(err, "nomem: program %s's MPS worker", man->name);
        goto out;
    }
    w->sock = -1;
    w->pid = -1;
    cubin = memfd_create(man->name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (cubin < 0 || !mesh_child_write_all(cubin, p->code, p->code_len) ||
        fcntl(cubin, F_ADD_SEALS,
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
        rig_err(err, "load: program %s: the cubin's memfd: %s", man->name,
                strerror(errno));
        goto out;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        rig_err(err, "load: program %s: socketpair failed: %s", man->name,
                strerror(errno));
        goto out;
    }
    argv[0] = strdup(MPS_WORKER_NAME);
    bool args =
        argv[0] != NULL &&
        asprintf(&argv[MESH_MPS_ARG_DEVICE], "%u", m->device) >= 0 &&
        (argv[MESH_MPS_ARG_NAME] = strdup(man->name)) != NULL &&
        (argv[MESH_MPS_ARG_ENTRY] = strdup(man->entry)) != NULL &&
        asprintf(&argv[MESH_MPS_ARG_THREADS], "%u", man->threads) >= 0 &&
        asprintf(&argv[MESH_MPS_ARG_SHARED], "%u", man->shared) >= 0 &&
        asprintf(&argv[MESH_MPS_ARG_SCRATCH], "%llu",
                 (unsigned long long)man->scratch) >= 0 &&
        asprintf(&argv[MESH_MPS_ARG_REG_CAP], "%u", p->reg_cap) >= 0 &&
        asprintf(&argv[MESH_MPS_ARG_STACK], "%zu", atomic_load(&m->stack)) >=
            0 &&
        asprintf(&argv[MESH_MPS_ARG_WAIT_MS], "%u", m->wait_ms) >= 0;
    if (!args) {
        rig_err(err, "nomem: program %s's MPS worker", man->name);
        goto out;
    }
    pid_t pid = fork();
    if (pid == 0) {
        worker_exec(m->worker, argv, m->d->envp, m->mailbox_fd, sv[1], cubin);
    }
    if (pid < 0) {
        rig_err(err, "load: program %s: fork failed: %s", man->name,
                strerror(errno));
        goto out;
    }
    w->pid = pid;
    w->sock = sv[0];
    sv[0] = -1;
    w->m = m;
    if (!mesh_child_add(&workers, pid)) {
        kill(pid, SIGKILL);
        worker_gone(w);
        rig_err(err, "limits: more than %zu MPS workers", workers.cap);
        goto out;
    }
    pthread_mutex_lock(&m->lock);
    w->next = m->live;
    m->live = w;
    pthread_mutex_unlock(&m->lock);
    close(sv[1]);
    sv[1] = -1;
    /* The worker speaks first: its image is loaded, or why not. */
    struct pollfd pfd = {.fd = w->sock, .events = POLLIN};
    mesh_mps_reply r;
    ssize_t n = -1;
    int ready = 0;
    do {
        ready = poll(&pfd, 1, (int)MPS_START_MS);
    } while (ready < 0 && errno == EINTR);
    if (ready > 0) {
        do {
            n = recv(w->sock, &r, sizeof(r), 0);
        } while (n < 0 && errno == EINTR);
    }
    if (ready == 0) {
        rig_err(err,
                "timeout: program %s: its MPS worker did not load the "
                "image within %u ms",
                man->name, MPS_START_MS);
        goto out;
    }
    if (n != (ssize_t)sizeof(r) || r.op != MESH_MPS_LOAD) {
        worker_gone(w);
        char *why = worker_why(w);
        rig_err(err, "load: program %s: its MPS worker %s (%s) before loading",
                man->name, why != NULL ? why : "ended", m->worker);
        free(why);
        goto out;
    }
    if (!reply_ok(&r, err)) {
        goto out;
    }
    w->use.regs = r.regs;
    w->use.local = r.local;
    w->use.max_blocks = r.max_blocks;
    w->use.scratch = r.scratch;
    k->ops = &mps_kernel_ops;
    k->self = w;
    *out = k;
    ok = true;
out:
    if (!ok && w != NULL) {
        if (w->pid > 0) {
            worker_stop(w, m->wait_ms, NULL);
        }
        worker_free(w);
        free(k);
    } else if (!ok) {
        free(k);
    }
    for (int i = 0; i <= MESH_MPS_ARGS; i++) {
        free(argv[i]);
    }
    if (sv[0] >= 0) {
        close(sv[0]);
    }
    if (sv[1] >= 0) {
        close(sv[1]);
    }
    if (cubin >= 0) {
        close(cubin);
    }
    return ok;
}

/* ---- the compiler ------------------------------------------------------- */

static bool mps_needs_ptx(const mesh_compiler *c)
{
    const mesh_cuda_mps *m = c->self;
    return m->inner->ops->needs_ptx(m->inner);
}

static bool mps_prepare(const mesh_compiler *c, mesh_payload *src,
                        const uint64_t *expect, const char *root,
                        mesh_prepared *out, char **err)
{
    mesh_cuda_mps *m = c->self;
    if (!m->inner->ops->prepare(m->inner, src, expect, root, out, err)) {
        return false;
    }
    mesh_kernel *k = NULL;
    if (!worker_start(m, out, &k, err)) {
        mesh_prepared_free(out);
        return false;
    }
    out->kernel = k;
    return true;
}

static const mesh_compiler_ops mps_compiler_ops = {
    .needs_ptx = mps_needs_ptx,
    .prepare = mps_prepare,
};

/* ---- the backend's ops -------------------------------------------------- */

bool mesh_cuda_mps_launch(const mesh_kernel *k, uint32_t slot, uint32_t nodes,
                          char **err)
{
    mps_worker *w = worker_of(k);
    mesh_mps_cmd c = {.op = MESH_MPS_LAUNCH, .slot = slot, .nodes = nodes};
    mesh_mps_reply r;
    if (!call(w, &c, &r, MPS_REPLY_MS, err) || !reply_ok(&r, err)) {
        return false;
    }
    w->fault = 0;
    w->crash_reported = false;
    return true;
}

bool mesh_cuda_mps_query(const mesh_kernel *k, bool *done, char **err)
{
    mps_worker *w = worker_of(k);
    (void)err;
    mesh_mps_cmd c = {.op = MESH_MPS_QUERY};
    mesh_mps_reply r;
    char *e = NULL;
    if (!call(w, &c, &r, MPS_REPLY_MS, &e)) {
        if (!w->gone) {
            /* No answer in time: the worker is stuck; report it. */
            if (err != NULL) {
                *err = e;
            } else {
                free(e);
            }
            return false;
        }
        free(e);
        *done = true; /* crashed says why */
        return true;
    }
    if (r.fault != 0 && w->fault == 0) {
        w->fault = r.fault;
        size_t n = strnlen(r.err, sizeof(w->fault_name) - 1);
        memcpy(w->fault_name, r.err, n);
        w->fault_name[n] = '\0';
    }
    *done = r.done != 0;
    return true;
}

char *mesh_cuda_mps_crashed(const mesh_kernel *k, uint32_t slot)
{
    mps_worker *w = worker_of(k);
    if (w == NULL || w->crash_reported) {
        return NULL;
    }
    int st = 0;
    if (!w->gone && mesh_child_reap(&workers, w->pid, &st)) {
        w->gone = true;
        w->status = st;
    }
    char *why = NULL;
    int n = 0;
    if (w->fault != 0) {
        n = asprintf(&why, "the kernel of slot %u faulted: %s", slot,
                     w->fault_name);
    } else if (w->gone) {
        char *what = worker_why(w);
        n = asprintf(&why, "the MPS worker of slot %u (pid %d) %s", slot,
                     (int)w->pid, what != NULL ? what : "ended");
        free(what);
    } else {
        return NULL;
    }
    w->crash_reported = true;
    return n < 0 ? NULL : why;
}

bool mesh_cuda_mps_unload(mesh_kernel *k, char **err)
{
    mps_worker *w = worker_of(k);
    bool ok = true;
    if (w != NULL) {
        ok = worker_stop(w, w->m != NULL ? w->m->wait_ms : 0, err);
        worker_free(w);
    }
    free(k);
    return ok;
}

void mesh_cuda_mps_close(mesh_cuda_mps *m)
{
    if (m == NULL) {
        return;
    }
    /* Kernels that outlive the backend: their workers must not. */
    for (;;) {
        pthread_mutex_lock(&m->lock);
        mps_worker *w = m->live;
        if (w != NULL) {
            m->live = w->next;
            w->m = NULL;
        }
        pthread_mutex_unlock(&m->lock);
        if (w == NULL) {
            break;
        }
        /* At once, as the native backend's destroy: the kernel ends with
         * the worker's context; no one is left to halt it. */
        if (!w->gone) {
            kill(w->pid, SIGKILL);
            worker_gone(w);
        }
        close(w->sock);
        w->sock = -1;
    }
    daemon_stop(m->d);
    daemon_release(m->d);
    pthread_mutex_destroy(&m->lock);
    free(m->worker);
    free(m);
}
