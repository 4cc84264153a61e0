/* SPDX-License-Identifier: BSD-3-Clause */
/* MPS isolation of the CUDA backend: one worker process per program, and
 * the commands the backend sends it.
 *
 * Decisions the spec leaves open:
 * - A private MPS control daemon per backend (cuda_mps_daemon.c) and one
 *   worker, rig-cuda-worker (cuda_mps_programs.c finds it), per prepared
 *   program, started by prepare on the JIT thread with the daemon's
 *   environment, so that its context is a client of this daemon; it loads
 *   the image (cuda_image.c, the blink path's code) and maps the mailbox
 *   memfd itself (cuda_worker.c).  prepared->kernel is the worker: load
 *   takes it, and launch, query, global_u32 and unload are commands to it
 *   over a socket (cuda_mps_internal.h: fixed-size records, one reply
 *   each).  The backend's own process stays a plain client of the device
 *   (caps, the mailbox's registration), so MPS needs the GPU in the
 *   Default compute mode.
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
 * - set_stack_limit applies to workers started afterwards (the driver sets
 *   it with no program running). */
#include "cuda_mps_internal.h"

#include "../../util/util_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* A worker's first reply: a cold MPS server start and a module load. */
#define MPS_START_MS 30000u
/* Any other reply. */
#define MPS_REPLY_MS 5000u

/* ---- the backend's MPS side --------------------------------------------- */

typedef struct mps_worker mps_worker;

struct mesh_cuda_mps {
    mesh_compiler pub;
    const mesh_compiler *inner;
    mesh_cuda_mps_daemon *d;
    char *worker;
    int mailbox_fd;
    uint32_t device;
    uint32_t wait_ms;
    _Atomic size_t stack;      /* set for the workers; 0: the driver's */
    _Atomic size_t stack_seen; /* the last worker's; 0: none yet */
    pthread_mutex_t lock;      /* guards live, fault, fault_slot */
    mps_worker *live;          /* workers started and not yet stopped */
    int32_t fault;             /* a sticky fault seen; 0: none */
    uint32_t fault_slot;
    char fault_name[64];
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
    uint32_t slot; /* of the last launch */
    int32_t fault;
    char fault_name[64];
};

static const mesh_compiler_ops mps_compiler_ops;

bool mesh_cuda_mps_open(const mesh_compiler *inner, int mailbox_fd,
                        uint32_t device, uint32_t wait_ms, mesh_cuda_mps **out,
                        char **err)
{
    char *ctl = NULL;
    if (inner == NULL || out == NULL) {
        return rig_err(err, "invalid: mesh_cuda_mps_open: NULL argument");
    }
    if (!mesh_cuda_mps_find(&ctl, err)) {
        return false;
    }
    mesh_cuda_mps *m = calloc(1, sizeof(*m));
    if (m == NULL ||
        (m->worker = strdup(mesh_cuda_mps_worker_path())) == NULL) {
        free(m);
        free(ctl);
        return rig_err(err, "nomem: MPS isolation");
    }
    if (!mesh_cuda_mps_daemon_start(ctl, &m->d, err)) {
        free(m->worker);
        free(m);
        return false;
    }
    m->pub.ops = &mps_compiler_ops;
    m->pub.self = m;
    m->inner = inner;
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

bool mesh_cuda_mps_stack(mesh_cuda_mps *m, size_t *out, char **err)
{
    size_t v = atomic_load(&m->stack);
    if (v == 0) {
        v = atomic_load(&m->stack_seen);
    }
    if (v == 0) {
        return rig_err(err, "unsupported: MPS isolation: the stack limit is "
                            "a worker's context's, and no worker has started "
                            "yet");
    }
    *out = v;
    return true;
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
    if (!mesh_child_reap_within(mesh_cuda_mps_workers(), w->pid, 1000, &st)) {
        kill(w->pid, SIGKILL);
        mesh_child_reap_within(mesh_cuda_mps_workers(), w->pid, 10000, &st);
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
            if (!mesh_child_reap_within(mesh_cuda_mps_workers(), w->pid,
                                        wait_ms + 1000, &st)) {
                kill(w->pid, SIGKILL);
                mesh_child_reap_within(mesh_cuda_mps_workers(), w->pid, 10000,
                                       &st);
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

static mps_worker *worker_of(const mesh_kernel *k)
{
    if (k == NULL || k->ops != &mesh_cuda_kernel_ops || k->self == NULL) {
        return NULL;
    }
    mps_worker *w = k->self;
    return w->use.mps ? w : NULL;
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

bool mesh_cuda_mps_global_u32(const mesh_kernel *k, const char *name,
                              uint32_t *out, char **err)
{
    mps_worker *w = worker_of(k);
    mesh_mps_cmd c = {.op = MESH_MPS_GLOBAL};
    if (w == NULL || out == NULL || name == NULL ||
        strlen(name) >= sizeof(c.name)) {
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

void mesh_cuda_mps_drop(mesh_kernel *k)
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
    pthread_mutex_lock(&m->lock);
    int32_t fault = m->fault;
    uint32_t fault_slot = m->fault_slot;
    char fault_name[64];
    memcpy(fault_name, m->fault_name, sizeof(fault_name));
    if (fault != 0 && m->live == NULL) {
        /* "When all the existing clients associated with the affected
         * GPUs have exited, the MPS server will recreate the GPU contexts
         * on the affected GPUs and resume processing client requests"
         * (MPS documentation, error containment). */
        m->fault = 0;
        fault = 0;
    }
    pthread_mutex_unlock(&m->lock);
    if (fault != 0) {
        rig_err(err,
                "load: program %s: the MPS server takes no new program "
                "after the fatal fault %s in slot %u until every program "
                "loaded before it has been stopped",
                man->name, fault_name, fault_slot);
        goto out;
    }
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
    argv[0] = strdup(MESH_MPS_WORKER_NAME);
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
        worker_exec(m->worker, argv, mesh_cuda_mps_daemon_env(m->d),
                    m->mailbox_fd, sv[1], cubin);
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
    if (!mesh_child_add(mesh_cuda_mps_workers(), pid)) {
        kill(pid, SIGKILL);
        worker_gone(w);
        rig_err(err, "limits: more than %zu MPS workers",
                mesh_cuda_mps_workers()->cap);
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
    w->use.mps = true;
    if (r.stack != 0) {
        atomic_store(&m->stack_seen, (size_t)r.stack);
    }
    k->ops = &mesh_cuda_kernel_ops;
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
    w->slot = slot;
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
        mesh_cuda_mps *m = w->m;
        if (m != NULL && mesh_cu_sticky((CUresult)r.fault)) {
            pthread_mutex_lock(&m->lock);
            if (m->fault == 0) {
                m->fault = r.fault;
                m->fault_slot = w->slot;
                memcpy(m->fault_name, w->fault_name, sizeof(m->fault_name));
            }
            pthread_mutex_unlock(&m->lock);
        }
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
    if (!w->gone && mesh_child_reap(mesh_cuda_mps_workers(), w->pid, &st)) {
        w->gone = true;
        w->status = st;
    }
    char *why = NULL;
    int n = 0;
    if (w->fault != 0 && mesh_cu_sticky((CUresult)w->fault)) {
        n = asprintf(&why,
                     "the kernel of slot %u faulted: %s (a fatal fault "
                     "under MPS ends every client of the GPU; the server "
                     "takes new programs once those are stopped)",
                     slot, w->fault_name);
    } else if (w->fault != 0) {
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
    mesh_cuda_mps_daemon_stop(m->d);
    pthread_mutex_destroy(&m->lock);
    free(m->worker);
    free(m);
}
