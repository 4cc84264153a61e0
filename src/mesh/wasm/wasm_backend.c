/* SPDX-License-Identifier: BSD-3-Clause */
/* The wasm backend: wasm2c modules run on lease lanes (mesh_backend ops). */
#include "wasm_internal.h"

#include "../../util/util_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    mesh_caps caps;
    mesh_settings set;
    mesh_wasm_tools tools;
    mesh_wasm_pool *pool;
    mesh_control_block *cb;
    mesh_compiler comp;
    /* The kernel launched last in each slot (for mesh_wasm_node_binding). */
    struct wasm_kernel *in_slot[MESH_PROG_SLOTS];
} wasm_backend;

/* A loaded program: its module, scratch and current launch. */
typedef struct wasm_kernel {
    wasm_backend *b;
    mesh_wasm_image *img;
    uint8_t *scratch;
    uint64_t scratch_bytes;
    mesh_wasm_run *run;
    uint32_t slot;
    uint32_t abi;
    /* The rail ends the host bound (copied at load, a reference each) and
     * the same by input, as the imports find them. */
    mesh_ends ends;
    const mesh_end_binding *by_input[MESH_INPUTS];
} wasm_kernel;

static const mesh_kernel_ops kernel_ops;

/* ---- kernels ---------------------------------------------------------- */

static uint64_t k_scratch(const mesh_kernel *k)
{
    const wasm_kernel *wk = k->self;
    return (uint64_t)(uintptr_t)wk->scratch;
}

static bool k_global_u32(const mesh_kernel *k, const char *name, uint32_t *out,
                         char **err)
{
    const wasm_kernel *wk = k->self;
    if (name != NULL && strcmp(name, "MESH_RT_ABI") == 0) {
        *out = wk->abi;
        return true;
    }
    return rig_err(err, "missing: a wasm image has no u32 global %s",
                   name ? name : "(null)");
}

/* Ends the kernel's launch and frees it; false with "timeout: " when a
 * node had to be abandoned (its code and memory then stay). */
static bool kernel_end(wasm_kernel *wk, char **err)
{
    bool abandoned = false, ok = true;
    if (wk->run != NULL) {
        ok = mesh_wasm_run_stop(wk->run, wk->b->set.halt_ms,
                                wk->b->set.grace_ms, &abandoned, err);
        if (!abandoned) {
            mesh_wasm_run_free(wk->run);
        }
    }
    if (wk->b != NULL && wk->slot < MESH_PROG_SLOTS &&
        wk->b->in_slot[wk->slot] == wk) {
        wk->b->in_slot[wk->slot] = NULL;
    }
    if (wk->scratch != NULL && !abandoned) {
        munmap(wk->scratch, wk->scratch_bytes);
    }
    /* An abandoned node may still use its ends: they stay, for good. */
    if (!abandoned) {
        mesh_ends_free(&wk->ends);
    }
    mesh_wasm_image_free(wk->img, abandoned);
    free(wk);
    return ok;
}

static void k_drop(mesh_kernel *k)
{
    if (k->self != NULL) {
        kernel_end(k->self, NULL);
        k->self = NULL;
    }
}

static const mesh_kernel_ops kernel_ops = {
    .exec = MESH_BACKEND_WASM,
    .regs = NULL,
    .local_bytes = NULL,
    .max_blocks_per_sm = NULL,
    .scratch = k_scratch,
    .global_u32 = k_global_u32,
    .drop = k_drop,
};

/* ---- the compiler ----------------------------------------------------- */

static bool c_needs_ptx(const mesh_compiler *c)
{
    (void)c;
    return false;
}

static bool c_prepare(const mesh_compiler *c, mesh_payload *src,
                      const uint64_t *expect, const char *root,
                      mesh_prepared *out, char **err)
{
    (void)root;
    if (c == NULL || src == NULL || out == NULL) {
        mesh_payload_free(src);
        return rig_err(err, "invalid: wasm prepare: NULL argument");
    }
    wasm_backend *b = c->self;
    mesh_wasm_image *img = NULL;
    mesh_prepared p;
    if (!mesh_wasm_prepare(&b->tools, src, expect, &p, &img, err)) {
        return false;
    }
    wasm_kernel *wk = calloc(1, sizeof(*wk));
    mesh_kernel *k = calloc(1, sizeof(*k));
    if (wk == NULL || k == NULL) {
        free(wk);
        free(k);
        mesh_wasm_image_free(img, false);
        mesh_prepared_free(&p);
        return rig_err(err, "nomem: a wasm kernel");
    }
    wk->b = b;
    wk->img = img;
    wk->slot = MESH_NO_SLOT;
    wk->abi = p.manifest.abi;
    k->ops = &kernel_ops;
    k->self = wk;
    p.kernel = k;
    *out = p;
    return true;
}

static const mesh_compiler_ops compiler_ops = {
    .needs_ptx = c_needs_ptx,
    .prepare = c_prepare,
};

/* ---- the backend ------------------------------------------------------ */

static const mesh_caps *b_caps(const mesh_backend *b)
{
    return &((wasm_backend *)b->self)->caps;
}

static bool b_true(const mesh_backend *b)
{
    (void)b;
    return true;
}

static bool b_false(const mesh_backend *b)
{
    (void)b;
    return false;
}

static uint32_t b_isolation(const mesh_backend *b)
{
    (void)b;
    return MESH_ISOLATION_LANES;
}

static bool b_mailbox(const mesh_backend *b, uint8_t **host, uint64_t *dev,
                      char **err)
{
    wasm_backend *wb = b->self;
    if (host == NULL || dev == NULL) {
        return rig_err(err, "invalid: wasm mailbox: NULL argument");
    }
    *host = (uint8_t *)wb->cb;
    *dev = (uint64_t)(uintptr_t)wb->cb;
    return true;
}

static bool b_make_current(const mesh_backend *b, char **err)
{
    (void)b;
    (void)err;
    return true;
}

static const mesh_compiler *b_compiler(const mesh_backend *b)
{
    return &((wasm_backend *)b->self)->comp;
}

static bool b_load(const mesh_backend *b, mesh_prepared *p, mesh_kernel **out,
                   char **err)
{
    if (p == NULL || out == NULL) {
        return rig_err(err, "invalid: wasm load: NULL argument");
    }
    mesh_kernel *k = p->kernel;
    if (k == NULL || k->ops != &kernel_ops ||
        ((wasm_kernel *)k->self)->b != b->self) {
        return rig_err(err, "load: the image was not prepared by this wasm "
                            "backend");
    }
    wasm_kernel *wk = k->self;
    mesh_ends_free(&wk->ends);
    memset(wk->by_input, 0, sizeof(wk->by_input));
    if (!mesh_ends_dup(&wk->ends, p->ends, err)) {
        return false;
    }
    for (size_t i = 0; i < wk->ends.n; i++) {
        if (wk->ends.b[i].input < MESH_INPUTS) {
            wk->by_input[wk->ends.b[i].input] = &wk->ends.b[i];
        }
    }
    if (wk->scratch == NULL && wk->img->scratch_bytes > 0) {
        void *s = mmap(NULL, wk->img->scratch_bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (s == MAP_FAILED) {
            return rig_err(err,
                           "load: mmap of %llu scratch bytes for %s "
                           "failed: %s",
                           (unsigned long long)wk->img->scratch_bytes,
                           wk->img->name, strerror(errno));
        }
        wk->scratch = s;
        wk->scratch_bytes = wk->img->scratch_bytes;
    }
    p->kernel = NULL;
    *out = k;
    return true;
}

static void stream_drop(mesh_stream *s)
{
    (void)s;
}

static bool b_new_stream(const mesh_backend *b, uint32_t slot,
                         const mesh_kernel *k, mesh_stream **out, char **err)
{
    (void)b;
    (void)k;
    if (out == NULL || slot >= MESH_PROG_SLOTS) {
        return rig_err(err, "invalid: wasm stream for slot %u", slot);
    }
    mesh_stream *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return rig_err(err, "nomem: a wasm stream");
    }
    s->exec = MESH_BACKEND_WASM;
    s->slot = slot;
    s->drop = stream_drop;
    *out = s;
    return true;
}

static bool b_launch(const mesh_backend *b, const mesh_stream *st,
                     const mesh_kernel *k, uint32_t nodes, uint64_t dev,
                     uint32_t slot, char **err)
{
    (void)st;
    (void)dev;
    wasm_backend *wb = b->self;
    if (k == NULL || k->ops != &kernel_ops || slot >= MESH_PROG_SLOTS ||
        nodes == 0) {
        return rig_err(err,
                       "invalid: wasm launch: bad kernel, slot %u or "
                       "%u nodes",
                       slot, nodes);
    }
    wasm_kernel *wk = k->self;
    if (!mesh_wasm_run_done(wk->run)) {
        return rig_err(err,
                       "invalid: program %s in slot %u still runs its "
                       "last launch",
                       wk->img->name, slot);
    }
    mesh_wasm_run_free(wk->run);
    wk->run = NULL;
    mesh_wasm_job job = {
        .mod = wk->img->mod,
        .code_lo = wk->img->code_lo,
        .code_hi = wk->img->code_hi,
        .name = wk->img->name,
        .words = &wb->cb->slot[slot],
        .slot = slot,
        .scratch = wk->scratch,
        .scratch_bytes = wk->scratch_bytes,
        .ends = wk->by_input,
    };
    if (!mesh_wasm_run_start(wb->pool, &job, nodes, &wk->run, err)) {
        return false;
    }
    wk->slot = slot;
    wb->in_slot[slot] = wk;
    return true;
}

static bool b_query(const mesh_backend *b, const mesh_stream *st,
                    const mesh_kernel *k, bool *done, char **err)
{
    (void)b;
    (void)st;
    if (k == NULL || k->ops != &kernel_ops || done == NULL) {
        return rig_err(err, "invalid: wasm query: bad kernel");
    }
    *done = mesh_wasm_run_done(((wasm_kernel *)k->self)->run);
    return true;
}

static char *b_crashed(const mesh_backend *b, const mesh_stream *st,
                       const mesh_kernel *k)
{
    (void)b;
    (void)st;
    if (k == NULL || k->ops != &kernel_ops) {
        return NULL;
    }
    return mesh_wasm_run_crashed(((wasm_kernel *)k->self)->run);
}

static bool b_unload(const mesh_backend *b, mesh_kernel *k, char **err)
{
    (void)b;
    if (k == NULL) {
        return true;
    }
    bool ok = true;
    if (k->ops == &kernel_ops && k->self != NULL) {
        ok = kernel_end(k->self, err);
        k->self = NULL;
    }
    free(k);
    return ok;
}

static bool b_stack_limit(const mesh_backend *b, size_t *out, char **err)
{
    if (out == NULL) {
        return rig_err(err, "invalid: wasm stack_limit: NULL");
    }
    *out = mesh_wasm_pool_stack(((wasm_backend *)b->self)->pool);
    return true;
}

static bool b_set_stack_limit(const mesh_backend *b, size_t bytes, char **err)
{
    if (bytes < (64u << 10) || bytes > (1ull << 30)) {
        return rig_err(err,
                       "invalid: a lane stack of %zu bytes (64 KiB to "
                       "1 GiB)",
                       bytes);
    }
    mesh_wasm_pool_set_stack(((wasm_backend *)b->self)->pool, bytes);
    return true;
}

static bool b_module_scope(const mesh_backend *b, bool has_slot, uint32_t slot,
                           uint32_t *scope)
{
    (void)b;
    /* Lanes: a change touches only its own slot; a load or free, none. */
    *scope = has_slot ? slot : MESH_NO_SLOT;
    return true;
}

static void b_destroy(mesh_backend *b)
{
    if (b == NULL) {
        return;
    }
    wasm_backend *wb = b->self;
    if (wb != NULL) {
        mesh_wasm_pool_close(wb->pool, wb->set.grace_ms);
        mesh_wasm_tools_close(&wb->tools);
        mesh_caps_free(&wb->caps);
        free(wb->cb);
        free(wb);
    }
    free(b);
}

/* RIG_MESH_ONLINE_TIMEOUT_MS (mesh/executors.h), as the native backend. */
static uint32_t b_online_timeout_ms(const mesh_backend *b)
{
    const wasm_backend *wb = b->self;
    return wb->set.online_timeout_ms;
}

static const mesh_backend_ops backend_ops = {
    .caps = b_caps,
    .isolated = b_true,
    .resident = b_false,
    .isolation = b_isolation,
    .mailbox = b_mailbox,
    .make_current = b_make_current,
    .compiler = b_compiler,
    .load = b_load,
    .new_stream = b_new_stream,
    .launch = b_launch,
    .query = b_query,
    .unload = b_unload,
    .stack_limit = b_stack_limit,
    .set_stack_limit = b_set_stack_limit,
    .module_scope = b_module_scope,
    .crashed = b_crashed,
    .owns_halt = b_true,
    .reads_live = NULL,
    .sample = NULL,
    .online_timeout_ms = b_online_timeout_ms,
    .destroy = b_destroy,
};

bool mesh_wasm_backend_open(const mesh_settings *s, mesh_backend **out,
                            char **err)
{
    if (s == NULL || out == NULL) {
        return rig_err(err, "invalid: mesh_wasm_backend_open: NULL "
                            "argument");
    }
    uint64_t max_cores;
    if (!rig_env_u64("RIG_WASM_CORES", 0, &max_cores, err)) {
        return false;
    }
    wasm_backend *wb = calloc(1, sizeof(*wb));
    mesh_backend *b = calloc(1, sizeof(*b));
    if (wb == NULL || b == NULL) {
        free(wb);
        free(b);
        return rig_err(err, "nomem: the wasm backend");
    }
    b->ops = &backend_ops;
    b->self = wb;
    wb->set = *s;
    wb->comp.ops = &compiler_ops;
    wb->comp.self = wb;
    if (!mesh_wasm_tools_open(&wb->tools, err)) {
        goto err_destroy;
    }
    uint32_t total = 0, used = 0;
    if (!mesh_wasm_pool_open(max_cores > UINT32_MAX ? UINT32_MAX
                                                    : (uint32_t)max_cores,
                             &wb->pool, &total, &used, err)) {
        goto err_destroy;
    }
    wb->cb = aligned_alloc(64, MESH_CB_BYTES);
    char name[96];
    snprintf(name, sizeof(name), "wasm2c %s", wb->tools.version);
    wb->caps = (mesh_caps){
        .kind = MESH_BACKEND_WASM,
        .name = strdup(name),
        .sms_total = total,
        .sms = used,
        .max_tg_threads = 1,
        .arch = strdup("wasm32"),
    };
    if (wb->cb == NULL || wb->caps.name == NULL || wb->caps.arch == NULL) {
        rig_err(err, "nomem: the wasm backend");
        goto err_destroy;
    }
    memset(wb->cb, 0, MESH_CB_BYTES);
    mesh_cb_header *h = &wb->cb->h;
    h->abi = MESH_RT_ABI_VERSION;
    h->backend = MESH_BACKEND_WORD(MESH_BACKEND_WASM, 0);
    h->isolation = MESH_ISOLATION_LANES;
    h->slots = MESH_PROG_SLOTS;
    h->slot_bytes = MESH_CB_SLOT_BYTES;
    h->header_bytes = MESH_CB_HEADER_BYTES;
    h->host_pid = (uint32_t)getpid();
    h->sms_total = total;
    h->sms = used;
    h->max_tg_threads = 1;
    h->size = MESH_CB_BYTES;
    snprintf(h->arch, sizeof(h->arch), "wasm32");
    atomic_store_explicit(&h->magic, MESH_CB_MAGIC, memory_order_release);
    /* The exit cleanup first (it installs the fatal-signal handler when
     * none is there), then ours, which hands it every fault not a lane's. */
    mesh_backend_on_cleanup(MESH_CLEANUP_WASM, mesh_wasm_kill_children);
    if (!mesh_wasm_glue_install(err)) {
        goto err_destroy;
    }
    *out = b;
    return true;
err_destroy:
    b_destroy(b);
    return false;
}

bool mesh_wasm_node_binding(const mesh_backend *b, uint32_t slot, uint32_t node,
                            char **out, char **err)
{
    if (b == NULL || b->ops != &backend_ops || slot >= MESH_PROG_SLOTS ||
        out == NULL) {
        return rig_err(err, "invalid: mesh_wasm_node_binding: bad argument");
    }
    wasm_kernel *wk = ((wasm_backend *)b->self)->in_slot[slot];
    if (wk == NULL) {
        return rig_err(err, "invalid: no wasm program in slot %u", slot);
    }
    return mesh_wasm_run_binding(wk->run, node, out, err);
}

uint32_t mesh_wasm_node_trap(const mesh_backend *b, uint32_t slot,
                             uint32_t node)
{
    if (b == NULL || b->ops != &backend_ops || slot >= MESH_PROG_SLOTS) {
        return 0;
    }
    wasm_kernel *wk = ((wasm_backend *)b->self)->in_slot[slot];
    return wk != NULL ? mesh_wasm_run_trap(wk->run, node) : 0;
}

void mesh_wasm_lane_counts(const mesh_backend *b, uint32_t *alive,
                           uint32_t *lost)
{
    *alive = 0;
    *lost = 0;
    if (b != NULL && b->ops == &backend_ops) {
        mesh_wasm_pool_counts(((wasm_backend *)b->self)->pool, alive, lost);
    }
}

/* ---- the executors table's hooks (mesh_internal.h) -------------------- */

/* Strong definitions: they replace the table's weak stubs. */
bool mesh_wasm_built(void)
{
    return true;
}

bool mesh_wasm_open(const mesh_settings *s, mesh_backend **out, char **err)
{
    return mesh_wasm_backend_open(s, out, err);
}
