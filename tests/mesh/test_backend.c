/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the spec's free functions, the backend table, the cleanup
 * registry and the driver's module scope and admission (with a fake
 * backend). */
#include "mesh/driver.h"
#include "mesh/executors.h"

#include "../test_util.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "real_signals.h"

/* ---- labels, caps, wrappers, defaults ----------------------------------- */

static void expect_label(uint32_t word, const char *want)
{
    char *l = mesh_backend_label(word);
    if (l == NULL || strcmp(l, want) != 0) {
        T_FAILF("label of %#x: \"%s\" != \"%s\"", word,
                l != NULL ? l : "(null)", want);
    } else {
        CU_PASS(want);
    }
    free(l);
}

static void test_labels(void)
{
    expect_label(MESH_BACKEND_WORD(MESH_BACKEND_CUDA, 0), "cuda");
    expect_label(MESH_BACKEND_WORD(MESH_BACKEND_WASM, 0), "wasm");
    expect_label(MESH_BACKEND_WORD(MESH_BACKEND_NATIVE, 0), "native");
    expect_label(MESH_BACKEND_WORD(MESH_BACKEND_METAL, 9), "metal-apple9");
    expect_label(MESH_BACKEND_WORD(7, 0), "backend7");

    mesh_caps c = {.kind = MESH_BACKEND_METAL,
                   .name = "M3",
                   .family = 9,
                   .arch = "apple9"};
    T_EQ_U(mesh_caps_word(&c), (9u << 8) | MESH_BACKEND_METAL);
    T_TRUE(strcmp(mesh_caps_backend_name(&c), "metal") == 0);
    c.kind = 12;
    T_TRUE(strcmp(mesh_caps_backend_name(&c), "unknown") == 0);
    c.kind = MESH_BACKEND_CUDA;
    mesh_caps d;
    mesh_caps_copy(&d, &c);
    T_TRUE(d.name != c.name && strcmp(d.name, "M3") == 0);
    T_TRUE(d.arch != c.arch && strcmp(d.arch, "apple9") == 0);
    T_EQ_U(d.family, 9);
    mesh_caps_free(&d);
    T_TRUE(d.name == NULL && d.arch == NULL && d.kind == 0);
    T_EQ_U(mesh_caps_word(NULL), 0);

    uint32_t k = 99;
    T_TRUE(mesh_backend_kind("wasm", &k) && k == MESH_BACKEND_WASM);
    T_TRUE(!mesh_backend_kind("vulkan", &k));
    T_TRUE(mesh_backend_name(MESH_BACKEND_COUNT) == NULL);
}

static int drops;
static void count_drop(mesh_kernel *k)
{
    (void)k;
    drops++;
}
static void count_stream_drop(mesh_stream *s)
{
    (void)s;
    drops++;
}

static void test_wrappers(void)
{
    static const mesh_kernel_ops empty = {.exec = MESH_BACKEND_WASM,
                                          .drop = count_drop};
    mesh_kernel *k = malloc(sizeof(*k));
    k->ops = &empty;
    k->self = NULL;
    uint32_t v = 77;
    char *err = NULL;
    T_OK(mesh_kernel_regs(k, &v, &err), err);
    T_EQ_U(v, 0);
    T_OK(mesh_kernel_local_bytes(k, &v, &err), err);
    T_EQ_U(v, 0);
    T_OK(mesh_kernel_max_blocks_per_sm(k, &v, &err), err);
    T_EQ_U(v, 1);
    T_EQ_U(mesh_kernel_scratch(k), 0);
    T_ERR(mesh_kernel_global_u32(k, "MESH_RT_ABI", &v, &err), err, "missing: ");
    T_ERR(mesh_kernel_regs(NULL, &v, &err), err, "invalid: ");
    T_TRUE(mesh_kernel_native(k) == NULL);
    T_EQ_U(mesh_kernel_exec(k), MESH_BACKEND_WASM);
    drops = 0;
    mesh_kernel_drop(k);
    T_EQ_U(drops, 1);
    mesh_kernel_drop(NULL);

    mesh_stream *s = calloc(1, sizeof(*s));
    s->drop = count_stream_drop;
    mesh_stream_drop(s);
    T_EQ_U(drops, 2);
    mesh_stream_drop(NULL);

    /* A prepared still holding its kernel drops it. */
    mesh_prepared p;
    memset(&p, 0, sizeof(p));
    p.kernel = malloc(sizeof(*p.kernel));
    p.kernel->ops = &empty;
    p.code = malloc(4);
    mesh_prepared_free(&p);
    T_EQ_U(drops, 3);
    T_TRUE(p.kernel == NULL && p.code == NULL);

    /* The trait's defaults for NULL ops. */
    static const mesh_backend_ops none = {0};
    mesh_backend b = {.ops = &none};
    T_TRUE(mesh_backend_crashed(&b, NULL, NULL) == NULL);
    T_TRUE(!mesh_backend_owns_halt(&b));
    T_TRUE(!mesh_backend_reads_live(&b));
    T_EQ_U(mesh_backend_online_timeout_ms(&b), 2000);
    mesh_backend_sample(&b);
    mesh_backend_destroy(NULL);

    /* admit: true without the op; its arguments checked either way. */
    memset(&p, 0, sizeof(p));
    T_OK(mesh_backend_admit(&b, &p, 1, 0, &err), err);
    T_OK(mesh_backend_admit(NULL, &p, 1, 0, &err), err);
    T_ERR(mesh_backend_admit(&b, NULL, 1, 0, &err), err,
          "invalid: mesh_backend_admit: prepared is NULL");
    T_ERR(mesh_backend_admit(&b, &p, 0, 0, &err), err, "invalid: ");
    T_ERR(mesh_backend_admit(&b, &p, 1, MESH_PROG_SLOTS, &err), err,
          "invalid: ");
}

/* ---- picking ------------------------------------------------------------ */

static mesh_manifest manifest_of(const char *backends)
{
    char json[256];
    snprintf(json, sizeof(json),
             "{\"name\": \"p\", \"abi\": 1, \"backends\": [%s]}", backends);
    mesh_manifest m;
    memset(&m, 0, sizeof(m));
    char *err = NULL;
    T_OK(mesh_manifest_parse(json, strlen(json), &m, &err), err);
    return m;
}

static void test_pick(void)
{
    static const uint32_t native[] = {MESH_BACKEND_NATIVE};
    static const uint32_t gpu_first[] = {MESH_BACKEND_CUDA,
                                         MESH_BACKEND_NATIVE};
    static const uint32_t wasm_native[] = {MESH_BACKEND_WASM,
                                           MESH_BACKEND_NATIVE};
    uint32_t exec = 99;
    char *err = NULL;
    mesh_manifest m = manifest_of("\"cuda\", \"native\"");
    T_OK(mesh_pick_exec(&m, native, 1, &exec, &err), err);
    T_EQ_U(exec, MESH_BACKEND_NATIVE);
    T_OK(mesh_pick_exec(&m, gpu_first, 2, &exec, &err), err);
    T_EQ_U(exec, MESH_BACKEND_CUDA);
    /* The manifest's order wins over the machine's. */
    T_OK(mesh_pick_exec(&m, wasm_native, 2, &exec, &err), err);
    T_EQ_U(exec, MESH_BACKEND_NATIVE);
    exec = 99;
    T_ERR(mesh_pick_exec(&m, NULL, 0, &exec, &err), err,
          "unsupported: program p lists cuda, native; this machine runs "
          "nothing");
    T_EQ_U(exec, 99);
    mesh_manifest_free(&m);
    m = manifest_of("\"wasm\"");
    T_ERR(mesh_pick_exec(&m, gpu_first, 2, &exec, &err), err,
          "unsupported: program p lists wasm; this machine runs cuda, "
          "native");
    T_ERR(mesh_pick_exec(NULL, gpu_first, 2, &exec, &err), err, "invalid: ");
    mesh_manifest_free(&m);
}

static void test_runs_here(void)
{
    static const uint32_t native[] = {MESH_BACKEND_NATIVE};
    static const uint32_t cuda[] = {MESH_BACKEND_CUDA};
    const char *ok_dir = MESH_TEST_PROGRAMS "/t_ok";
    const char *gpu_dir = MESH_TEST_PROGRAMS "/t_gpu";
    mesh_manifest m = manifest_of("\"native\"");
    free(m.entry);
    m.entry = strdup("t_ok");
    T_TRUE(mesh_runs_here(ok_dir, &m, native, 1));
    /* Same manifest, a directory without the binary. */
    T_TRUE(!mesh_runs_here(gpu_dir, &m, native, 1));
    T_TRUE(!mesh_runs_here(ok_dir, &m, cuda, 1));
    T_TRUE(!mesh_runs_here(NULL, &m, native, 1));
    mesh_manifest_free(&m);
    m = manifest_of("\"cuda\", \"wasm\"");
    T_TRUE(mesh_runs_here(gpu_dir, &m, cuda, 1));
    T_TRUE(!mesh_runs_here(gpu_dir, &m, native, 1));
    mesh_manifest_free(&m);

    char *bin = mesh_native_binary("/cat/pi", "pi");
    char want[256];
    snprintf(want, sizeof(want), "/cat/pi/%s/pi", mesh_native_target());
    T_TRUE(bin != NULL && strcmp(bin, want) == 0);
    free(bin);
    T_TRUE(mesh_native_binary(NULL, "pi") == NULL);
    T_TRUE(strstr(mesh_native_target(), "-linux-") != NULL);
}

/* ---- the table ---------------------------------------------------------- */

static void test_table(void)
{
    mesh_backend *b = NULL;
    char *err = NULL;
    T_TRUE(mesh_backend_built(MESH_BACKEND_NATIVE));
    T_TRUE(!mesh_backend_built(MESH_BACKEND_METAL));
    T_TRUE(!mesh_backend_built(42));
    T_ERR(mesh_backend_open(MESH_BACKEND_METAL, NULL, &b, &err), err,
          "unsupported: backend metal");
    T_ERR(mesh_backend_open(42, NULL, &b, &err), err, "unsupported: ");
    T_ERR(mesh_backend_open(MESH_BACKEND_NATIVE, NULL, NULL, &err), err,
          "invalid: ");
    /* cuda and wasm: either built (and then maybe without hardware) or
     * stubs; never a crash, and a refusal is "unsupported: ". */
    uint32_t others[] = {MESH_BACKEND_CUDA, MESH_BACKEND_WASM};
    for (int i = 0; i < 2; i++) {
        if (mesh_backend_open(others[i], NULL, &b, &err)) {
            mesh_backend_destroy(b);
            CU_PASS("opened");
        } else {
            T_ERR(false, err, "unsupported: ");
        }
    }
    setenv("RIG_MESH_GRACE_MS", "soon", 1);
    T_ERR(mesh_backend_open(MESH_BACKEND_NATIVE, NULL, &b, &err), err,
          "invalid: RIG_MESH_GRACE_MS=soon");
    setenv("RIG_MESH_GRACE_MS", "0", 1);
    T_ERR(mesh_backend_open(MESH_BACKEND_NATIVE, NULL, &b, &err), err,
          "invalid: RIG_MESH_GRACE_MS=0");
    unsetenv("RIG_MESH_GRACE_MS");
    setenv("RIG_MESH_ONLINE_TIMEOUT_MS", "1234", 1);
    T_OK(mesh_backend_open(MESH_BACKEND_NATIVE, NULL, &b, &err), err);
    unsetenv("RIG_MESH_ONLINE_TIMEOUT_MS");
    if (b != NULL) {
        T_EQ_U(mesh_backend_online_timeout_ms(b), 1234);
        mesh_backend_destroy(b);
    }
}

/* ---- prepare_any -------------------------------------------------------- */

static void test_prepare_any(void)
{
    mesh_backend *b = NULL;
    char *err = NULL;
    T_OK(mesh_backend_open(MESH_BACKEND_NATIVE, NULL, &b, &err), err);
    if (b == NULL) {
        return;
    }
    mesh_compiler_entry comps[] = {
        {.kind = MESH_BACKEND_NATIVE, .comp = b->ops->compiler(b)}};
    mesh_payload p, q;
    mesh_prepared out;
    T_OK(mesh_payload_read(MESH_TEST_PROGRAMS, "t_ok", &p, &err), err);
    uint64_t h = mesh_payload_hash(&p);
    T_OK(mesh_payload_copy(&q, &p, &err), err);
    T_OK(mesh_prepare_any(comps, 1, &p, &h, MESH_TEST_PROGRAMS, &out, &err),
         err);
    T_TRUE(p.files == NULL); /* moved */
    T_EQ_U(out.exec, MESH_BACKEND_NATIVE);
    T_EQ_U(out.hash, h);
    T_TRUE(out.kernel != NULL && mesh_kernel_native(out.kernel) != NULL);
    T_TRUE(out.code_len > 4 && memcmp(out.code, "\177ELF", 4) == 0);
    T_TRUE(mesh_prepared_dir(&out) != NULL);
    mesh_prepared_free(&out);

    /* A wrong expected hash. */
    uint64_t wrong = h ^ 1;
    T_OK(mesh_payload_copy(&p, &q, &err), err);
    T_ERR(mesh_prepare_any(comps, 1, &p, &wrong, NULL, &out, &err), err,
          "hash: program t_ok hashes to");
    T_TRUE(p.files == NULL); /* freed on failure */

    /* A binary that is not an executable. */
    T_OK(mesh_payload_init(&p, "t_ok", &err), err);
    T_OK(mesh_payload_add(&p, "manifest.json", q.files[0].data, q.files[0].len,
                          &err),
         err);
    char rel[128];
    snprintf(rel, sizeof(rel), "%s/t_ok", mesh_native_target());
    T_OK(mesh_payload_add(&p, rel, "#!/bin/sh\n", 10, &err), err);
    T_ERR(mesh_prepare_any(comps, 1, &p, NULL, NULL, &out, &err), err,
          "compile: ");

    /* No binary for this target. */
    T_OK(mesh_payload_init(&p, "t_ok", &err), err);
    T_OK(mesh_payload_add(&p, "manifest.json", q.files[0].data, q.files[0].len,
                          &err),
         err);
    T_OK(mesh_payload_add(&p, "sparc64-unknown-linux-gnu/t_ok", "\177ELF", 4,
                          &err),
         err);
    T_ERR(mesh_prepare_any(comps, 1, &p, NULL, NULL, &out, &err), err,
          "missing: program t_ok has no binary for");
    mesh_payload_free(&q);

    /* A program for cuda and wasm only. */
    T_OK(mesh_payload_read(MESH_TEST_PROGRAMS, "t_gpu", &p, &err), err);
    T_ERR(mesh_prepare_any(comps, 1, &p, NULL, NULL, &out, &err), err,
          "unsupported: program t_gpu lists cuda, wasm; this machine runs "
          "native");
    T_ERR(mesh_prepare_any(comps, 1, NULL, NULL, NULL, &out, &err), err,
          "invalid: ");
    mesh_backend_destroy(b);
}

/* ---- the cleanup registry ----------------------------------------------- */

static int order_log[16];
static int order_n;
static void log_a(void)
{
    order_log[order_n++] = 20;
}
static void log_b(void)
{
    order_log[order_n++] = 10;
}
static void log_c(void)
{
    order_log[order_n++] = 15;
}
static void log_d(void)
{
    order_log[order_n++] = 16;
}

static void test_cleanup_order(void)
{
    order_n = 0;
    mesh_backend_cleanup(); /* whatever is pending from elsewhere */
    order_n = 0;
    mesh_backend_on_cleanup(MESH_CLEANUP_MPS, log_a);
    mesh_backend_on_cleanup(MESH_CLEANUP_NATIVE, log_b);
    mesh_backend_on_cleanup(MESH_CLEANUP_WASM, log_c);
    mesh_backend_on_cleanup(MESH_CLEANUP_NATIVE, log_b); /* pending: once */
    mesh_backend_on_cleanup(MESH_CLEANUP_WASM, log_d);   /* ties: in order */
    mesh_backend_on_cleanup(MESH_CLEANUP_WASM, NULL);
    mesh_backend_cleanup();
    T_EQ_U(order_n, 4);
    T_EQ_U(order_log[0], 10);
    T_EQ_U(order_log[1], 15);
    T_EQ_U(order_log[2], 16);
    T_EQ_U(order_log[3], 20);
    mesh_backend_cleanup(); /* each registration runs once */
    T_EQ_U(order_n, 4);
    mesh_backend_on_cleanup(MESH_CLEANUP_NATIVE, log_b); /* a new one */
    mesh_backend_cleanup();
    T_EQ_U(order_n, 5);
    T_EQ_U(order_log[4], 10);
}

static int mark_fd = -1;
static void write_mark(void)
{
    if (write(mark_fd, "X", 1) != 1) {
        _exit(99);
    }
}

/* Forks a child that registers write_mark and then ends by how(); returns
 * the child's wait status and whether the mark came through. */
static void child_ends(void (*how)(void), int *status, bool *marked)
{
    int fds[2];
    *marked = false;
    *status = -1;
    if (pipe(fds) != 0) {
        T_FAILF("pipe failed");
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        mark_fd = fds[1];
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        mesh_backend_on_cleanup(MESH_CLEANUP_NATIVE, write_mark);
        how();
        _exit(98); /* how() must not return */
    }
    close(fds[1]);
    char c = 0;
    *marked = read(fds[0], &c, 1) == 1 && c == 'X';
    close(fds[0]);
    waitpid(pid, status, 0);
}

static void end_exit(void)
{
    exit(3);
}
static void end_segv(void)
{
    raise(SIGSEGV);
}
static void end_term(void)
{
    kill(getpid(), SIGTERM);
    pause();
}
static void end_abort(void)
{
    abort();
}

static void test_cleanup_exit_paths(void)
{
    int st;
    bool marked;
    child_ends(end_exit, &st, &marked);
    T_TRUE(marked);
    T_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    child_ends(end_segv, &st, &marked);
    T_TRUE(marked);
    T_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
    child_ends(end_term, &st, &marked);
    T_TRUE(marked);
    T_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    child_ends(end_abort, &st, &marked);
    T_TRUE(marked);
    T_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
}

/* ---- the driver over a fake backend: module scope ------------------------ */

typedef struct {
    mesh_control_block cb;
    mesh_caps caps;
    mesh_compiler comp;
    bool isolated;
    int launches[MESH_PROG_SLOTS];
    bool refuse; /* admit says no */
    int admits;
    uint32_t admit_nodes, admit_slot;
} fake;

static fake *fk(const mesh_backend *b)
{
    return b->self;
}
static const mesh_caps *f_caps(const mesh_backend *b)
{
    return &fk(b)->caps;
}
static bool f_isolated(const mesh_backend *b)
{
    return fk(b)->isolated;
}
static bool f_false(const mesh_backend *b)
{
    (void)b;
    return false;
}
static uint32_t f_isolation(const mesh_backend *b)
{
    return fk(b)->isolated ? MESH_ISOLATION_MPS : MESH_ISOLATION_BLINK;
}
static bool f_mailbox(const mesh_backend *b, uint8_t **h, uint64_t *d,
                      char **err)
{
    (void)err;
    *h = (uint8_t *)&fk(b)->cb;
    *d = 0;
    return true;
}
static bool f_current(const mesh_backend *b, char **err)
{
    (void)b;
    (void)err;
    return true;
}
static const mesh_compiler *f_compiler(const mesh_backend *b)
{
    return &fk(b)->comp;
}
static const mesh_kernel_ops f_kops = {.exec = MESH_BACKEND_CUDA};
static bool f_prepare(const mesh_compiler *c, mesh_payload *src,
                      const uint64_t *expect, const char *root,
                      mesh_prepared *out, char **err)
{
    (void)c;
    (void)expect;
    (void)root;
    memset(out, 0, sizeof(*out));
    if (!mesh_check_manifest(src, MESH_BACKEND_CUDA, &out->manifest, err)) {
        mesh_payload_free(src);
        return false;
    }
    out->hash = mesh_payload_hash(src);
    out->src = *src;
    memset(src, 0, sizeof(*src));
    out->kernel = malloc(sizeof(mesh_kernel));
    out->kernel->ops = &f_kops;
    out->kernel->self = NULL;
    out->exec = MESH_BACKEND_CUDA;
    return true;
}
static const mesh_compiler_ops f_cops = {.prepare = f_prepare};
static bool f_load(const mesh_backend *b, mesh_prepared *p, mesh_kernel **out,
                   char **err)
{
    (void)b;
    (void)err;
    *out = p->kernel;
    p->kernel = NULL;
    return true;
}
static bool f_stream(const mesh_backend *b, uint32_t slot, const mesh_kernel *k,
                     mesh_stream **out, char **err)
{
    (void)b;
    (void)k;
    (void)err;
    *out = calloc(1, sizeof(mesh_stream));
    (*out)->slot = slot;
    return true;
}
/* The fake's nodes go online at once and stop when halted. */
static bool f_launch(const mesh_backend *b, const mesh_stream *st,
                     const mesh_kernel *k, uint32_t nodes, uint64_t dev,
                     uint32_t slot, char **err)
{
    (void)st;
    (void)k;
    (void)dev;
    (void)err;
    fk(b)->launches[slot]++;
    atomic_store(&fk(b)->cb.slot[slot].online, nodes);
    return true;
}
static bool f_query(const mesh_backend *b, const mesh_stream *st,
                    const mesh_kernel *k, bool *done, char **err)
{
    (void)k;
    (void)err;
    *done = atomic_load(&fk(b)->cb.slot[st->slot].halt) != 0;
    return true;
}
static bool f_unload(const mesh_backend *b, mesh_kernel *k, char **err)
{
    (void)b;
    (void)err;
    mesh_kernel_drop(k);
    return true;
}
static bool f_stack(const mesh_backend *b, size_t *out, char **err)
{
    (void)b;
    (void)err;
    *out = 1024;
    return true;
}
static bool f_set_stack(const mesh_backend *b, size_t n, char **err)
{
    (void)b;
    (void)n;
    (void)err;
    return true;
}
static bool f_scope(const mesh_backend *b, bool has_slot, uint32_t slot,
                    uint32_t *scope)
{
    if (!fk(b)->isolated) {
        return false;
    }
    *scope = has_slot ? slot : MESH_NO_SLOT;
    return true;
}
static bool f_admit(const mesh_backend *b, const mesh_prepared *p,
                    uint32_t nodes, uint32_t slot, char **err)
{
    fake *f = fk(b);
    f->admits++;
    f->admit_nodes = nodes;
    f->admit_slot = slot;
    /* Asked before anything halts: every running slot still runs. */
    for (uint32_t i = 0; i < MESH_PROG_SLOTS; i++) {
        T_EQ_U(atomic_load(&f->cb.slot[i].halt), 0);
    }
    if (f->refuse) {
        if (err != NULL && asprintf(err, "limits: program %s does not fit",
                                    p->manifest.name) < 0) {
            *err = NULL;
        }
        return false;
    }
    return true;
}
static void f_destroy(mesh_backend *b)
{
    (void)b;
}

static const mesh_backend_ops fake_ops = {
    .caps = f_caps,
    .isolated = f_isolated,
    .resident = f_false,
    .isolation = f_isolation,
    .mailbox = f_mailbox,
    .make_current = f_current,
    .compiler = f_compiler,
    .load = f_load,
    .new_stream = f_stream,
    .launch = f_launch,
    .query = f_query,
    .unload = f_unload,
    .stack_limit = f_stack,
    .set_stack_limit = f_set_stack,
    .module_scope = f_scope,
    .admit = f_admit,
    .destroy = f_destroy,
};

static bool fake_prepare(mesh_driver *d, const char *name, mesh_prepared *pr)
{
    char json[160];
    snprintf(json, sizeof(json),
             "{\"name\": \"%s\", \"abi\": 1, \"backends\": [\"cuda\"]}", name);
    mesh_payload p;
    char *err = NULL;
    T_OK(mesh_payload_init(&p, name, &err), err);
    T_OK(mesh_payload_add(&p, "manifest.json", json, strlen(json), &err), err);
    bool ok = mesh_driver_prepare(d, &p, NULL, NULL, pr, &err);
    T_OK(ok, err);
    return ok;
}

static bool fake_start(mesh_driver *d, const char *name, uint32_t *slot)
{
    char json[160];
    snprintf(json, sizeof(json),
             "{\"name\": \"%s\", \"abi\": 1, \"backends\": [\"cuda\"]}", name);
    mesh_payload p;
    mesh_prepared pr;
    char *err = NULL;
    T_OK(mesh_payload_init(&p, name, &err), err);
    T_OK(mesh_payload_add(&p, "manifest.json", json, strlen(json), &err), err);
    if (!mesh_driver_prepare(d, &p, NULL, NULL, &pr, &err)) {
        T_OK(false, err);
        return false;
    }
    bool ok = mesh_driver_start(d, &pr, 2, slot, &err);
    T_OK(ok, err);
    return ok;
}

static void scope_case(bool isolated)
{
    fake *f = calloc(1, sizeof(*f));
    f->isolated = isolated;
    f->caps.kind = MESH_BACKEND_CUDA;
    f->comp.ops = &f_cops;
    mesh_backend b = {.ops = &fake_ops, .self = f};
    mesh_driver *d = NULL;
    char *err = NULL;
    uint32_t a = 99, c = 99;
    T_OK(mesh_driver_open(&b, &d, &err), err);
    if (d == NULL || !fake_start(d, "pa", &a) || !fake_start(d, "pb", &c)) {
        mesh_driver_close(d);
        free(f);
        return;
    }
    T_EQ_U(a, 0);
    T_EQ_U(c, 1);
    T_TRUE(strcmp(mesh_driver_program(d, 1), "pb") == 0);
    /* Loading pb blinks pa only when the backend is not isolated. */
    T_EQ_U(f->launches[0], isolated ? 1 : 2);
    T_EQ_U(f->launches[1], 1);
    T_EQ_U(atomic_load(&f->cb.slot[0].halt), 0);
    T_EQ_U(atomic_load(&f->cb.slot[0].state), MESH_SLOT_RUNNING);
    T_OK(mesh_driver_stop(d, 0, &err), err);
    T_EQ_U(f->launches[1], isolated ? 1 : 2);
    T_EQ_U(atomic_load(&f->cb.slot[0].state), MESH_SLOT_FREE);
    T_ERR(mesh_driver_stop(d, 0, &err), err, "invalid: ");
    mesh_driver_close(d);
    free(f);
}

static void test_scope_isolated(void)
{
    scope_case(true);
}
static void test_scope_blink(void)
{
    scope_case(false);
}

/* A program the backend does not admit halts nothing and takes no slot. */
static void test_admit_refused(void)
{
    fake *f = calloc(1, sizeof(*f));
    f->caps.kind = MESH_BACKEND_CUDA;
    f->comp.ops = &f_cops;
    mesh_backend b = {.ops = &fake_ops, .self = f};
    mesh_driver *d = NULL;
    mesh_prepared pr;
    char *err = NULL;
    uint32_t a = 99, c = 99;
    T_OK(mesh_driver_open(&b, &d, &err), err);
    if (d == NULL || !fake_start(d, "pa", &a)) {
        mesh_driver_close(d);
        free(f);
        return;
    }
    T_EQ_U(f->admits, 1);
    T_EQ_U(f->launches[0], 1);
    uint32_t launch_word = atomic_load(&f->cb.slot[0].launch);
    f->refuse = true;
    if (fake_prepare(d, "pb", &pr)) {
        T_ERR(mesh_driver_start(d, &pr, 3, &c, &err), err,
              "limits: program pb does not fit");
    }
    T_EQ_U(c, 99);
    T_EQ_U(f->admits, 2);
    T_EQ_U(f->admit_nodes, 3);
    T_EQ_U(f->admit_slot, 1);
    /* pa was neither halted nor relaunched; slot 1 stayed free. */
    T_EQ_U(f->launches[0], 1);
    T_EQ_U(atomic_load(&f->cb.slot[0].launch), launch_word);
    T_EQ_U(atomic_load(&f->cb.slot[0].halt), 0);
    T_EQ_U(atomic_load(&f->cb.slot[0].state), MESH_SLOT_RUNNING);
    T_EQ_U(f->launches[1], 0);
    T_TRUE(mesh_driver_program(d, 1) == NULL);
    /* Admitted again, the next program blinks pa as a blink backend does. */
    f->refuse = false;
    T_TRUE(fake_start(d, "pc", &c));
    T_EQ_U(c, 1);
    T_EQ_U(f->launches[0], 2);
    T_EQ_U(f->launches[1], 1);
    mesh_driver_close(d);
    free(f);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite s = CU_add_suite("mesh_backend", NULL, NULL);
    CU_add_test(s, "cleanup order and once-only", test_cleanup_order);
    CU_add_test(s, "cleanup on every exit path", test_cleanup_exit_paths);
    CU_add_test(s, "labels and caps", test_labels);
    CU_add_test(s, "wrappers and defaults", test_wrappers);
    CU_add_test(s, "pick_exec", test_pick);
    CU_add_test(s, "runs_here and native binaries", test_runs_here);
    CU_add_test(s, "backend table", test_table);
    CU_add_test(s, "prepare_any", test_prepare_any);
    CU_add_test(s, "module scope: isolated", test_scope_isolated);
    CU_add_test(s, "module scope: blink", test_scope_blink);
    CU_add_test(s, "admit refuses before the blink", test_admit_refused);
    return t_run_registry();
}
