/* SPDX-License-Identifier: BSD-3-Clause */
/* The native backend: programs that are executables, one process per node.
 *
 * Decisions the spec leaves open:
 * - The mailbox is a memfd (sealed against resizing) mapped by the host and
 *   by every node; a program's scratch is a memfd of its own, made at load.
 *   Nodes inherit both as fds 3 and 4 (mesh/worker.h has the protocol).
 * - prepare copies the hashed binary into a sealed memfd and launch runs it
 *   with fexecve, so a node runs exactly the bytes that were hashed even if
 *   the catalog changes on disk afterwards.
 * - A node that exits non-zero or dies by a signal is a crash; crashed
 *   reports the first such node of a launch once ("node 2 killed by signal
 *   11").
 * - unload stores P_HALT, gives the nodes halt_ms to leave, then SIGTERM,
 *   then SIGKILL after grace_ms.  Children are reaped only by pid (waitid),
 *   so the application's other children are left alone.
 * - Every live node's pid sits in a process-wide lock-free table; the
 *   cleanup registered at MESH_CLEANUP_NATIVE SIGKILLs them all on any exit
 *   path (only in the process that started them, not in a forked child).
 *   Nodes also watch the host's pid and leave when it is gone.
 * - The words of a slot are the driver's to reset before a launch; the
 *   backend only starts, watches and stops processes. */
#include "../child_internal.h"
#include "../mesh_internal.h"

#include "mesh/backend.h"

#include "../../util/util_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Fds a node gets (mesh/worker.h) and the one launch executes. */
#define NODE_FD_MAILBOX 3
#define NODE_FD_SCRATCH 4
#define NODE_FD_EXE 5

/* ---- the process-wide table of live nodes ------------------------------- */

#define LIVE_MAX (MESH_PROG_SLOTS * MESH_MANIFEST_MAX_NODES)

MESH_CHILD_TABLE(live, LIVE_MAX);

/* Async-signal-safe (mesh_child_kill_all). */
static void native_cleanup(void)
{
    mesh_child_kill_all(&live, 0);
}

/* ---- types -------------------------------------------------------------- */

typedef struct native_backend native_backend;

typedef struct {
    native_backend *nb; /* set at load */
    char *name;
    char **argv; /* entry, manifest args, NULL */
    int exe_fd;
    uint64_t scratch_bytes;
    int scratch_fd;
    void *scratch;
    uint32_t slot;
    uint32_t nodes;
    pid_t *pids; /* 0: reaped */
    int *status;
    uint32_t live;
    bool launched;
    bool crash_reported;
} native_image;

struct native_backend {
    mesh_backend base;
    mesh_compiler comp;
    mesh_caps caps;
    mesh_settings s;
    int mailbox_fd;
    mesh_control_block *cb;
    size_t stack_limit; /* 0: the host's */
    native_image *slots[MESH_PROG_SLOTS];
};

static native_backend *nb_of(const mesh_backend *b)
{
    return (native_backend *)b->self;
}

/* ---- nodes -------------------------------------------------------------- */

/* Reaps the image's exited nodes without blocking. */
static void reap(native_image *im)
{
    for (uint32_t i = 0; i < im->nodes && im->live > 0; i++) {
        pid_t pid = im->pids[i];
        int status = 0;
        if (pid <= 0 || !mesh_child_reap(&live, pid, &status)) {
            continue;
        }
        im->status[i] = status;
        im->pids[i] = 0;
        im->live--;
    }
}

static void signal_live(native_image *im, int sig)
{
    for (uint32_t i = 0; i < im->nodes; i++) {
        if (im->pids[i] > 0) {
            kill(im->pids[i], sig);
        }
    }
}

/* Reaps until no node lives or ms passed; true when none lives. */
static bool reap_within(native_image *im, uint32_t ms)
{
    uint64_t deadline = rig_now_ns() + (uint64_t)ms * 1000000u;
    uint32_t nap = 1;
    for (;;) {
        reap(im);
        if (im->live == 0) {
            return true;
        }
        if (rig_now_ns() >= deadline) {
            return false;
        }
        mesh_child_sleep_ms(nap);
        nap = nap < 8 ? nap * 2 : nap;
    }
}

/* Stops every live node: halt word, SIGTERM, SIGKILL. */
static void stop_nodes(native_image *im, uint32_t halt_ms, uint32_t grace_ms)
{
    reap(im);
    if (im->live == 0) {
        return;
    }
    if (im->nb != NULL && im->slot < MESH_PROG_SLOTS) {
        atomic_store_explicit(&im->nb->cb->slot[im->slot].halt, 1,
                              memory_order_release);
    }
    if (halt_ms > 0 && reap_within(im, halt_ms)) {
        return;
    }
    signal_live(im, SIGTERM);
    if (grace_ms > 0 && reap_within(im, grace_ms)) {
        return;
    }
    rig_log(RIG_LOG_INFO,
            "mesh: program %s: %u node(s) ignored halt and "
            "SIGTERM; killing them",
            im->name, im->live);
    signal_live(im, SIGKILL);
    /* SIGKILL cannot be ignored; the guard only covers a node stuck in
     * the kernel, which is then left to init. */
    if (!reap_within(im, 10000)) {
        rig_log(RIG_LOG_ERROR,
                "mesh: program %s: %u node(s) survive "
                "SIGKILL",
                im->name, im->live);
    }
}

static void image_free(native_image *im)
{
    if (im == NULL) {
        return;
    }
    if (im->live > 0) {
        stop_nodes(im, 0, 0);
    }
    if (im->nb != NULL && im->slot < MESH_PROG_SLOTS &&
        im->nb->slots[im->slot] == im) {
        im->nb->slots[im->slot] = NULL;
    }
    if (im->scratch != NULL) {
        munmap(im->scratch, im->scratch_bytes);
    }
    if (im->scratch_fd >= 0) {
        close(im->scratch_fd);
    }
    if (im->exe_fd >= 0) {
        close(im->exe_fd);
    }
    for (size_t i = 0; im->argv != NULL && im->argv[i] != NULL; i++) {
        free(im->argv[i]);
    }
    free(im->argv);
    free(im->name);
    free(im->pids);
    free(im->status);
    free(im);
}

/* ---- the kernel --------------------------------------------------------- */

static uint64_t kernel_scratch(const mesh_kernel *k)
{
    native_image *im = k->self;
    return (uint64_t)(uintptr_t)im->scratch;
}

static void kernel_drop(mesh_kernel *k)
{
    image_free(k->self);
    k->self = NULL;
}

static bool kernel_max_blocks(const mesh_kernel *k, uint32_t *out, char **err)
{
    (void)k;
    (void)err;
    *out = 1;
    return true;
}

static const mesh_kernel_ops native_kernel_ops = {
    .exec = MESH_BACKEND_NATIVE,
    .regs = NULL,
    .local_bytes = NULL,
    .max_blocks_per_sm = kernel_max_blocks,
    .scratch = kernel_scratch,
    .global_u32 = NULL,
    .drop = kernel_drop,
};

static native_image *image_of(const mesh_kernel *k)
{
    return k != NULL && k->ops == &native_kernel_ops ? k->self : NULL;
}

/* ---- the compiler ------------------------------------------------------- */

static bool comp_needs_ptx(const mesh_compiler *c)
{
    (void)c;
    return false;
}

static bool make_image(const mesh_manifest *m, const mesh_payload_file *f,
                       native_image **out, char **err)
{
    native_image *im = calloc(1, sizeof(*im));
    if (im == NULL) {
        return rig_err(err, "nomem: program %s", m->name);
    }
    im->exe_fd = -1;
    im->scratch_fd = -1;
    im->slot = MESH_NO_SLOT;
    im->scratch_bytes = m->scratch;
    im->name = strdup(m->name);
    im->argv = calloc(m->nargs + 2, sizeof(char *));
    if (im->name == NULL || im->argv == NULL ||
        (im->argv[0] = strdup(m->entry)) == NULL) {
        image_free(im);
        return rig_err(err, "nomem: program %s", m->name);
    }
    for (size_t i = 0; i < m->nargs; i++) {
        if ((im->argv[i + 1] = strdup(m->args[i])) == NULL) {
            image_free(im);
            return rig_err(err, "nomem: program %s", m->name);
        }
    }
    im->exe_fd = memfd_create(m->name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (im->exe_fd < 0) {
        int e = errno;
        image_free(im);
        return rig_err(err, "system: memfd_create for program %s failed: %s",
                       m->name, strerror(e));
    }
    if (!mesh_child_write_all(im->exe_fd, f->data, f->len) ||
        fcntl(im->exe_fd, F_ADD_SEALS,
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
        int e = errno;
        image_free(im);
        return rig_err(err,
                       "system: copying program %s into a memfd "
                       "failed: %s",
                       m->name, strerror(e));
    }
    *out = im;
    return true;
}

static bool comp_prepare(const mesh_compiler *c, mesh_payload *src,
                         const uint64_t *expect, const char *root,
                         mesh_prepared *out, char **err)
{
    (void)c;
    (void)root;
    if (src == NULL) {
        return rig_err(err, "invalid: native prepare: src is NULL");
    }
    uint64_t t0 = rig_now_ns();
    mesh_manifest m;
    mesh_kernel *k = NULL;
    native_image *im = NULL;
    uint8_t *code = NULL;
    char *rel = NULL;
    if (out == NULL) {
        rig_err(err, "invalid: native prepare: out is NULL");
        goto err_src;
    }
    if (!mesh_check_manifest(src, MESH_BACKEND_NATIVE, &m, err)) {
        goto err_src;
    }
    uint64_t hash = mesh_payload_hash(src);
    if (expect != NULL && *expect != hash) {
        rig_err(err, "hash: program %s hashes to %016llx, expected %016llx",
                m.name, (unsigned long long)hash, (unsigned long long)*expect);
        goto err_manifest;
    }
    if (asprintf(&rel, "%s/%s", mesh_native_target(), m.entry) < 0) {
        rel = NULL;
        rig_err(err, "nomem: program %s", m.name);
        goto err_manifest;
    }
    const mesh_payload_file *f = mesh_payload_find(src, rel);
    if (f == NULL) {
        rig_err(err, "missing: program %s has no binary for %s (%s)", m.name,
                mesh_native_target(), rel);
        goto err_manifest;
    }
    if (f->len < 4 || memcmp(f->data, "\177ELF", 4) != 0) {
        rig_err(err, "compile: %s of program %s is not an ELF executable", rel,
                m.name);
        goto err_manifest;
    }
    code = malloc(f->len);
    k = malloc(sizeof(*k));
    if (code == NULL || k == NULL) {
        rig_err(err, "nomem: program %s", m.name);
        goto err_manifest;
    }
    if (!make_image(&m, f, &im, err)) {
        goto err_manifest;
    }
    memcpy(code, f->data, f->len);
    k->ops = &native_kernel_ops;
    k->self = im;
    memset(out, 0, sizeof(*out));
    out->manifest = m;
    out->hash = hash;
    out->code = code;
    out->code_len = f->len;
    out->src = *src;
    memset(src, 0, sizeof(*src));
    out->kernel = k;
    out->exec = MESH_BACKEND_NATIVE;
    out->reg_cap = 0;
    out->compile_ms = (double)(rig_now_ns() - t0) / 1e6;
    free(rel);
    return true;
err_manifest:
    free(rel);
    free(code);
    free(k);
    mesh_manifest_free(&m);
err_src:
    mesh_payload_free(src);
    return false;
}

static const mesh_compiler_ops native_compiler_ops = {
    .needs_ptx = comp_needs_ptx,
    .prepare = comp_prepare,
};

/* ---- the backend's ops -------------------------------------------------- */

static const mesh_caps *op_caps(const mesh_backend *b)
{
    return &nb_of(b)->caps;
}

static bool op_true(const mesh_backend *b)
{
    (void)b;
    return true;
}

static bool op_false(const mesh_backend *b)
{
    (void)b;
    return false;
}

static uint32_t op_isolation(const mesh_backend *b)
{
    (void)b;
    return MESH_ISOLATION_PROCESS;
}

static bool op_mailbox(const mesh_backend *b, uint8_t **host, uint64_t *dev,
                       char **err)
{
    if (host == NULL || dev == NULL) {
        return rig_err(err, "invalid: native mailbox: NULL argument");
    }
    *host = (uint8_t *)nb_of(b)->cb;
    *dev = (uint64_t)(uintptr_t)nb_of(b)->cb;
    return true;
}

static bool op_make_current(const mesh_backend *b, char **err)
{
    (void)b;
    (void)err;
    return true;
}

static const mesh_compiler *op_compiler(const mesh_backend *b)
{
    return &nb_of(b)->comp;
}

static bool op_load(const mesh_backend *b, mesh_prepared *p, mesh_kernel **out,
                    char **err)
{
    if (p == NULL || out == NULL) {
        return rig_err(err, "invalid: native load: NULL argument");
    }
    native_image *im = image_of(p->kernel);
    if (im == NULL) {
        return rig_err(err,
                       "load: program %s has no native image (prepared "
                       "for %s)",
                       p->manifest.name != NULL ? p->manifest.name : "?",
                       mesh_backend_name(p->exec) != NULL
                           ? mesh_backend_name(p->exec)
                           : "another backend");
    }
    if (im->scratch_bytes > 0 && im->scratch == NULL) {
        im->scratch_fd = memfd_create("rig-mesh-scratch", MFD_CLOEXEC);
        if (im->scratch_fd < 0 ||
            ftruncate(im->scratch_fd, (off_t)im->scratch_bytes) != 0) {
            return rig_err(err,
                           "load: scratch of %llu bytes for program %s: "
                           "%s",
                           (unsigned long long)im->scratch_bytes, im->name,
                           strerror(errno));
        }
        void *map = mmap(NULL, im->scratch_bytes, PROT_READ | PROT_WRITE,
                         MAP_SHARED, im->scratch_fd, 0);
        if (map == MAP_FAILED) {
            return rig_err(err,
                           "load: mapping the scratch of program %s: "
                           "%s",
                           im->name, strerror(errno));
        }
        im->scratch = map;
    }
    im->nb = nb_of(b);
    *out = p->kernel;
    p->kernel = NULL;
    return true;
}

static bool op_new_stream(const mesh_backend *b, uint32_t slot,
                          const mesh_kernel *k, mesh_stream **out, char **err)
{
    (void)b;
    (void)k;
    if (out == NULL || slot >= MESH_PROG_SLOTS) {
        return rig_err(err,
                       "invalid: native stream: slot %u (of %u) or "
                       "NULL out",
                       slot, MESH_PROG_SLOTS);
    }
    mesh_stream *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return rig_err(err, "nomem: native stream");
    }
    s->exec = MESH_BACKEND_NATIVE;
    s->slot = slot;
    *out = s;
    return true;
}

/* The environment of node i: the host's without MESH_*, then ours. */
static char **node_env(const native_image *im, uint32_t slot, uint32_t node,
                       uint32_t nodes)
{
    size_t n = 0;
    while (environ != NULL && environ[n] != NULL) {
        n++;
    }
    char **env = calloc(n + 6, sizeof(char *));
    if (env == NULL) {
        return NULL;
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "MESH_", 5) != 0) {
            env[at++] = environ[i];
        }
    }
    char *own[5] = {NULL};
    int ok = asprintf(&own[0], "MESH_MAILBOX_FD=%d", NODE_FD_MAILBOX) >= 0 &&
             asprintf(&own[1], "MESH_SLOT=%u", slot) >= 0 &&
             asprintf(&own[2], "MESH_NODE=%u", node) >= 0 &&
             asprintf(&own[3], "MESH_NODES=%u", nodes) >= 0 &&
             (im->scratch_fd < 0 ||
              asprintf(&own[4], "MESH_SCRATCH_FD=%d", NODE_FD_SCRATCH) >= 0);
    if (!ok) {
        for (int i = 0; i < 5; i++) {
            free(own[i]);
        }
        free(env);
        return NULL;
    }
    for (int i = 0; i < 5; i++) {
        if (own[i] != NULL) {
            env[at++] = own[i];
        }
    }
    env[at] = NULL;
    return env;
}

static void node_env_free(char **env)
{
    if (env == NULL) {
        return;
    }
    for (size_t i = 0; env[i] != NULL; i++) {
        if (strncmp(env[i], "MESH_", 5) == 0) {
            free(env[i]);
        }
    }
    free(env);
}

/* In the child between fork and exec: async-signal-safe calls only. */
static void node_exec(const native_backend *nb, const native_image *im,
                      char **env)
{
    int m = fcntl(nb->mailbox_fd, F_DUPFD, 10);
    int s = im->scratch_fd >= 0 ? fcntl(im->scratch_fd, F_DUPFD, 10) : -1;
    int x = fcntl(im->exe_fd, F_DUPFD, 10);
    if (m < 0 || x < 0 || (im->scratch_fd >= 0 && s < 0) ||
        dup2(m, NODE_FD_MAILBOX) < 0 || dup2(x, NODE_FD_EXE) < 0 ||
        (s >= 0 && dup2(s, NODE_FD_SCRATCH) < 0)) {
        _exit(126);
    }
    if (s < 0) {
        close(NODE_FD_SCRATCH);
    }
    if (close_range(NODE_FD_EXE + 1, ~0u, 0) != 0) {
        for (int fd = NODE_FD_EXE + 1; fd < 1024; fd++) {
            close(fd);
        }
    }
    fcntl(NODE_FD_EXE, F_SETFD, FD_CLOEXEC);
    if (nb->stack_limit > 0) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_STACK, &rl) == 0) {
            rl.rlim_cur = (rlim_t)nb->stack_limit;
            setrlimit(RLIMIT_STACK, &rl);
        }
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    fexecve(NODE_FD_EXE, im->argv, env);
    /* Where execveat is missing or intercepted (valgrind): the same memfd
     * by its /proc path; the kernel opens it before closing fd 5. */
    static const char proc_exe[] = "/proc/self/fd/5";
    _Static_assert(NODE_FD_EXE == 5, "proc_exe names NODE_FD_EXE");
    execve(proc_exe, im->argv, env);
    _exit(127);
}

static bool op_launch(const mesh_backend *b, const mesh_stream *st,
                      const mesh_kernel *k, uint32_t nodes, uint64_t dev,
                      uint32_t slot, char **err)
{
    (void)dev;
    native_backend *nb = nb_of(b);
    native_image *im = image_of(k);
    if (im == NULL || st == NULL || im->nb != nb) {
        return rig_err(err, "invalid: native launch: no native kernel "
                            "loaded by this backend");
    }
    if (slot >= MESH_PROG_SLOTS || st->slot != slot) {
        return rig_err(err,
                       "invalid: native launch: slot %u (stream's %u, "
                       "%u slots)",
                       slot, st->slot, MESH_PROG_SLOTS);
    }
    if (nodes == 0 || nodes > MESH_MANIFEST_MAX_NODES) {
        return rig_err(err, "limits: program %s: %u nodes, not within 1..%u",
                       im->name, nodes, MESH_MANIFEST_MAX_NODES);
    }
    if (nb->slots[slot] != NULL && nb->slots[slot] != im) {
        return rig_err(err,
                       "invalid: native launch: slot %u holds program "
                       "%s",
                       slot, nb->slots[slot]->name);
    }
    reap(im);
    if (im->live > 0) {
        return rig_err(err,
                       "invalid: program %s still has %u live node(s) "
                       "in slot %u",
                       im->name, im->live, slot);
    }
    pid_t *pids = calloc(nodes, sizeof(pid_t));
    int *status = calloc(nodes, sizeof(int));
    if (pids == NULL || status == NULL) {
        free(pids);
        free(status);
        return rig_err(err, "nomem: launching program %s", im->name);
    }
    free(im->pids);
    free(im->status);
    im->pids = pids;
    im->status = status;
    im->nodes = nodes;
    im->slot = slot;
    im->launched = true;
    im->crash_reported = false;
    nb->slots[slot] = im;
    for (uint32_t i = 0; i < nodes; i++) {
        char **env = node_env(im, slot, i, nodes);
        if (env == NULL) {
            stop_nodes(im, 0, 0);
            return rig_err(err, "nomem: launching program %s", im->name);
        }
        pid_t pid = fork();
        if (pid == 0) {
            node_exec(nb, im, env);
        }
        int e = errno;
        node_env_free(env);
        if (pid < 0) {
            stop_nodes(im, 0, 0);
            return rig_err(err,
                           "system: fork for node %u of program %s "
                           "failed: %s",
                           i, im->name, strerror(e));
        }
        im->pids[i] = pid;
        im->live++;
        if (!mesh_child_add(&live, pid)) {
            stop_nodes(im, 0, 0);
            return rig_err(err, "limits: more than %u live native nodes",
                           (unsigned)LIVE_MAX);
        }
    }
    return true;
}

static bool op_query(const mesh_backend *b, const mesh_stream *st,
                     const mesh_kernel *k, bool *done, char **err)
{
    (void)b;
    (void)st;
    native_image *im = image_of(k);
    if (im == NULL || done == NULL) {
        return rig_err(err, "invalid: native query: no native kernel");
    }
    reap(im);
    *done = im->live == 0;
    return true;
}

static char *op_crashed(const mesh_backend *b, const mesh_stream *st,
                        const mesh_kernel *k)
{
    (void)b;
    (void)st;
    native_image *im = image_of(k);
    if (im == NULL || im->crash_reported || !im->launched) {
        return NULL;
    }
    reap(im);
    for (uint32_t i = 0; i < im->nodes; i++) {
        if (im->pids[i] != 0) {
            continue;
        }
        char *what = mesh_child_why(im->status[i]);
        if (what == NULL) {
            continue;
        }
        char *why = NULL;
        int n = asprintf(&why, "node %u %s", i, what);
        free(what);
        im->crash_reported = true;
        return n < 0 ? NULL : why;
    }
    return NULL;
}

static bool op_unload(const mesh_backend *b, mesh_kernel *k, char **err)
{
    native_backend *nb = nb_of(b);
    native_image *im = image_of(k);
    if (k == NULL) {
        return rig_err(err, "invalid: native unload: kernel is NULL");
    }
    if (im == NULL) {
        mesh_kernel_drop(k);
        return rig_err(err, "invalid: native unload: not a native kernel");
    }
    if (im->live > 0) {
        stop_nodes(im, nb->s.halt_ms, nb->s.grace_ms);
    }
    mesh_kernel_drop(k);
    return true;
}

static bool op_stack_limit(const mesh_backend *b, size_t *out, char **err)
{
    if (out == NULL) {
        return rig_err(err, "invalid: native stack_limit: out is NULL");
    }
    if (nb_of(b)->stack_limit > 0) {
        *out = nb_of(b)->stack_limit;
        return true;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_STACK, &rl) != 0) {
        return rig_err(err, "system: getrlimit(RLIMIT_STACK) failed: %s",
                       strerror(errno));
    }
    *out = rl.rlim_cur == RLIM_INFINITY ? SIZE_MAX : (size_t)rl.rlim_cur;
    return true;
}

static bool op_set_stack_limit(const mesh_backend *b, size_t bytes, char **err)
{
    if (bytes < 64u * 1024u) {
        return rig_err(err,
                       "invalid: native stack limit %zu is below 64 "
                       "KiB",
                       bytes);
    }
    nb_of(b)->stack_limit = bytes;
    return true;
}

static bool op_module_scope(const mesh_backend *b, bool has_slot, uint32_t slot,
                            uint32_t *scope)
{
    (void)b;
    *scope = has_slot && slot < MESH_PROG_SLOTS ? slot : MESH_NO_SLOT;
    return true;
}

static uint32_t op_online_timeout_ms(const mesh_backend *b)
{
    return nb_of(b)->s.online_timeout_ms;
}

static void op_destroy(mesh_backend *b)
{
    native_backend *nb = nb_of(b);
    for (uint32_t i = 0; i < MESH_PROG_SLOTS; i++) {
        if (nb->slots[i] != NULL) {
            /* A kernel outliving its backend: its nodes must not. */
            stop_nodes(nb->slots[i], 0, 0);
            nb->slots[i]->nb = NULL;
        }
    }
    if (nb->cb != NULL) {
        munmap(nb->cb, MESH_CB_BYTES);
    }
    if (nb->mailbox_fd >= 0) {
        close(nb->mailbox_fd);
    }
    mesh_caps_free(&nb->caps);
    free(nb);
}

static const mesh_backend_ops native_ops = {
    .caps = op_caps,
    .isolated = op_true,
    .resident = op_false,
    .isolation = op_isolation,
    .mailbox = op_mailbox,
    .make_current = op_make_current,
    .compiler = op_compiler,
    .load = op_load,
    .new_stream = op_new_stream,
    .launch = op_launch,
    .query = op_query,
    .unload = op_unload,
    .stack_limit = op_stack_limit,
    .set_stack_limit = op_set_stack_limit,
    .module_scope = op_module_scope,
    .crashed = op_crashed,
    .owns_halt = op_true,
    .reads_live = op_false,
    .sample = NULL,
    .online_timeout_ms = op_online_timeout_ms,
    .destroy = op_destroy,
};

/* ---- opening ------------------------------------------------------------ */

/* Cores of the machine, those this process may run on, the CPU's model. */
static void probe_caps(mesh_caps *c)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    c->sms_total = online > 0 ? (uint32_t)online : 1;
    c->sms = c->sms_total;
    const char *model = NULL;
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) == 0) {
        if (hwloc_topology_load(t) == 0) {
            int cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
            hwloc_bitmap_t bound = hwloc_bitmap_alloc();
            if (cores > 0) {
                c->sms_total = (uint32_t)cores;
                c->sms = (uint32_t)cores;
                if (bound != NULL &&
                    hwloc_get_cpubind(t, bound, HWLOC_CPUBIND_PROCESS) == 0) {
                    uint32_t n = 0;
                    for (int i = 0; i < cores; i++) {
                        hwloc_obj_t o =
                            hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, i);
                        if (o != NULL &&
                            hwloc_bitmap_intersects(o->cpuset, bound)) {
                            n++;
                        }
                    }
                    c->sms = n > 0 ? n : c->sms;
                }
            }
            hwloc_bitmap_free(bound);
            hwloc_obj_t pkg = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, 0);
            if (pkg != NULL) {
                model = hwloc_obj_get_info_by_name(pkg, "CPUModel");
            }
        }
        c->name = strdup(model != NULL ? model : "cpu");
        hwloc_topology_destroy(t);
    } else {
        c->name = strdup("cpu");
    }
    c->kind = MESH_BACKEND_NATIVE;
    c->arch = strdup(mesh_native_target());
}

bool mesh_native_open(const mesh_settings *s, mesh_backend **out, char **err)
{
    native_backend *nb = calloc(1, sizeof(*nb));
    if (nb == NULL) {
        return rig_err(err, "nomem: native backend");
    }
    nb->s = *s;
    nb->mailbox_fd = -1;
    nb->base.ops = &native_ops;
    nb->base.self = nb;
    nb->comp.ops = &native_compiler_ops;
    nb->comp.self = nb;
    probe_caps(&nb->caps);
    if (nb->caps.name == NULL || nb->caps.arch == NULL) {
        op_destroy(&nb->base);
        return rig_err(err, "nomem: native caps");
    }
    nb->mailbox_fd =
        memfd_create("rig-mesh-mailbox", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (nb->mailbox_fd < 0 ||
        ftruncate(nb->mailbox_fd, (off_t)MESH_CB_BYTES) != 0 ||
        fcntl(nb->mailbox_fd, F_ADD_SEALS,
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        int e = errno;
        op_destroy(&nb->base);
        return rig_err(err, "system: native mailbox memfd failed: %s",
                       strerror(e));
    }
    void *map = mmap(NULL, MESH_CB_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED,
                     nb->mailbox_fd, 0);
    if (map == MAP_FAILED) {
        int e = errno;
        op_destroy(&nb->base);
        return rig_err(err, "system: mapping the native mailbox failed: %s",
                       strerror(e));
    }
    nb->cb = map;
    mesh_cb_header *h = &nb->cb->h;
    h->abi = MESH_RT_ABI_VERSION;
    h->backend = mesh_caps_word(&nb->caps);
    h->isolation = MESH_ISOLATION_PROCESS;
    h->slots = MESH_PROG_SLOTS;
    h->slot_bytes = MESH_CB_SLOT_BYTES;
    h->header_bytes = MESH_CB_HEADER_BYTES;
    h->host_pid = (uint32_t)getpid();
    h->sms_total = nb->caps.sms_total;
    h->sms = nb->caps.sms;
    h->size = MESH_CB_BYTES;
    snprintf(h->arch, sizeof(h->arch), "%s", nb->caps.arch);
    atomic_store_explicit(&h->magic, MESH_CB_MAGIC, memory_order_release);
    mesh_backend_on_cleanup(MESH_CLEANUP_NATIVE, native_cleanup);
    *out = &nb->base;
    return true;
}
