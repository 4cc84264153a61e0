/* SPDX-License-Identifier: BSD-3-Clause */
/* Lease lanes: threads bound to cores that run wasm nodes, and the imports.
 *
 * A lane is a thread with its own stack (a guard below it: a fault there is
 * "call stack exhausted"), its own alternate signal stack and its own trap
 * state, bound with hwloc to one core.  Lanes are made on demand and kept:
 * a launch leases one idle lane per node, preferring the cores with the
 * fewest leased lanes, so min(nodes, cores) nodes get distinct cores. */
#include "wasm_internal.h"

#include "../../util/util_internal.h"

#include "mesh/wasm.h"

#include <errno.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define GUARD_BYTES (64u << 10)
#define ALTSTACK_BYTES (64u << 10)

typedef struct wasm_lane wasm_lane;

/* A node of a run: the context its imports get. */
typedef struct {
    mesh_wasm_run *run;
    uint32_t node;
    wasm_lane *lane;
    bool online;
    uint32_t trap; /* 0: returned cleanly */
    char *binding;
} wasm_node;

struct mesh_wasm_run {
    mesh_wasm_pool *pool;
    mesh_wasm_job job;
    uint32_t nodes;
    _Atomic uint32_t left;
    wasm_node *node;
    pthread_mutex_t lock;
    char *crash; /* the first trap's story */
    bool told;
};

struct wasm_lane {
    mesh_wasm_pool *pool;
    pthread_t thread;
    pthread_cond_t cv;
    uint32_t core;
    wasm_node *job; /* leased: the node to run; NULL: idle */
    bool leased, quit, lost, exited;
    char *binding; /* the cpuset hwloc reported, "0" */
    uint8_t *stack;
    size_t stack_bytes; /* with the guard */
    mesh_wasm_trap_state ts;
};

struct mesh_wasm_pool {
    pthread_mutex_t lock;
    pthread_cond_t exited_cv;
    hwloc_topology_t topo;
    uint32_t ncores;
    hwloc_bitmap_t *core_set;
    uint32_t *core_load;
    wasm_lane **lanes;
    uint32_t nlanes;
    uint32_t lost;
    size_t stack_bytes;
};

/* ---- the imports (mesh/wasm.h) ---------------------------------------- */

/* Every import is a check: a node the host ended traps here. */
static wasm_node *check(void *ctx)
{
    mesh_wasm_trap_state *ts = mesh_wasm_glue_lane();
    if (ts != NULL && atomic_load(&ts->killed)) {
        mesh_wasm_trap(MESH_WASM_TRAP_HALTED);
    }
    return ctx;
}

void mesh_wasm_imp_online(void *ctx)
{
    wasm_node *n = check(ctx);
    if (!n->online) {
        n->online = true;
        atomic_fetch_add_explicit(&n->run->job.words->online, 1,
                                  memory_order_release);
    }
}

uint32_t mesh_wasm_imp_slot(void *ctx)
{
    return check(ctx)->run->job.slot;
}

uint32_t mesh_wasm_imp_node(void *ctx)
{
    return check(ctx)->node;
}

uint32_t mesh_wasm_imp_nodes(void *ctx)
{
    return check(ctx)->run->nodes;
}

uint32_t mesh_wasm_imp_halted(void *ctx)
{
    wasm_node *n = check(ctx);
    return atomic_load_explicit(&n->run->job.words->halt,
                                memory_order_acquire) != 0;
}

uint32_t mesh_wasm_imp_point(void *ctx, uint32_t i, uint64_t value)
{
    wasm_node *n = check(ctx);
    if (i >= MESH_POINTS) {
        return 0;
    }
    _Atomic uint64_t *p = &n->run->job.words->points[i];
    uint64_t cur = atomic_load_explicit(p, memory_order_relaxed);
    while (cur < value &&
           !atomic_compare_exchange_weak_explicit(
               p, &cur, value, memory_order_release, memory_order_relaxed)) {
    }
    return 1;
}

void mesh_wasm_imp_fail(void *ctx, uint32_t code)
{
    wasm_node *n = check(ctx);
    mesh_cb_slot *w = n->run->job.words;
    uint32_t ok = MESH_NODE_OK;
    if (atomic_compare_exchange_strong(&w->error, &ok, MESH_NODE_ERR_PROGRAM)) {
        atomic_store(&w->error_node, n->node);
        atomic_store(&w->error_arg, code);
    }
}

uint64_t mesh_wasm_imp_scratch_size(void *ctx)
{
    return check(ctx)->run->job.scratch_bytes;
}

/* The scratch range [off, off+len) and memory range [at, at+len), or a
 * trap (out of bounds). */
static void ranges(wasm_node *n, uint64_t off, uint32_t at, uint32_t len,
                   uint8_t **scr, uint8_t **mem)
{
    mesh_wasm_trap_state *ts = mesh_wasm_glue_lane();
    uint64_t have = n->run->job.scratch_bytes;
    if (ts == NULL || ts->mem == NULL || (uint64_t)at + len > ts->mem->size ||
        off > have || len > have - off) {
        mesh_wasm_trap(MESH_WASM_TRAP_OOB);
    }
    *scr = n->run->job.scratch + off;
    *mem = ts->mem->data + at;
}

void mesh_wasm_imp_scratch_read(void *ctx, uint32_t dst, uint64_t off,
                                uint32_t len)
{
    wasm_node *n = check(ctx);
    uint8_t *scr, *mem;
    ranges(n, off, dst, len, &scr, &mem);
    memcpy(mem, scr, len);
}

void mesh_wasm_imp_scratch_write(void *ctx, uint64_t off, uint32_t src,
                                 uint32_t len)
{
    wasm_node *n = check(ctx);
    uint8_t *scr, *mem;
    ranges(n, off, src, len, &scr, &mem);
    memcpy(scr, mem, len);
}

/* ---- the ends' imports ------------------------------------------------- */

/* Input's binding, or NULL when it has none here (or is past the
 * inputs). */
static const mesh_end_binding *end_or_null(wasm_node *n, uint32_t input)
{
    if (input >= MESH_INPUTS || n->run->job.ends == NULL) {
        return NULL;
    }
    return n->run->job.ends[input];
}

/* Input's binding, or a trap: a program that uses an input it did not
 * get bound is out of bounds. */
static const mesh_end_binding *end_of(wasm_node *n, uint32_t input)
{
    const mesh_end_binding *b = end_or_null(n, input);
    if (b == NULL) {
        mesh_wasm_trap(MESH_WASM_TRAP_OOB);
    }
    return b;
}

uint32_t mesh_wasm_imp_end_bound(void *ctx, uint32_t input)
{
    return end_or_null(check(ctx), input) != NULL;
}

uint64_t mesh_wasm_imp_end_id(void *ctx, uint32_t input)
{
    const mesh_end_binding *b = end_or_null(check(ctx), input);
    return b != NULL ? (uint64_t)b->id : UINT64_MAX;
}

uint32_t mesh_wasm_imp_end_peer(void *ctx, uint32_t input)
{
    const mesh_end_binding *b = end_or_null(check(ctx), input);
    return b != NULL ? (uint32_t)b->peer : UINT32_MAX;
}

uint32_t mesh_wasm_imp_end_here(void *ctx, uint32_t input)
{
    const mesh_end_binding *b = end_or_null(check(ctx), input);
    return b != NULL ? (uint32_t)b->here : UINT32_MAX;
}

uint64_t mesh_wasm_imp_end_bytes(void *ctx, uint32_t input, uint32_t dir)
{
    const mesh_end_binding *b = end_or_null(check(ctx), input);
    if (b == NULL || dir > 1) {
        return 0;
    }
    rig_area a = dir == 0 ? rig_end_outbound(b->end) : rig_end_inbound(b->end);
    return a.len / 2;
}

uint32_t mesh_wasm_imp_end_find(void *ctx, uint64_t id)
{
    wasm_node *n = check(ctx);
    for (uint32_t i = 0; i < MESH_INPUTS; i++) {
        const mesh_end_binding *b = end_or_null(n, i);
        if (b != NULL && (uint64_t)b->id == id) {
            return i;
        }
    }
    return UINT32_MAX;
}

/* Copy k of area a at [off, off + len), and linear memory at [at, at +
 * len), or a trap. */
static void end_ranges(rig_area a, uint32_t k, uint64_t off, uint32_t at,
                       uint32_t len, uint8_t **end, uint8_t **mem)
{
    mesh_wasm_trap_state *ts = mesh_wasm_glue_lane();
    uint64_t copy = a.len / 2;
    if (ts == NULL || ts->mem == NULL || k > 1 ||
        (uint64_t)at + len > ts->mem->size || off > copy || len > copy - off) {
        mesh_wasm_trap(MESH_WASM_TRAP_OOB);
    }
    *end = a.base + k * copy + off;
    *mem = ts->mem->data + at;
}

void mesh_wasm_imp_end_write(void *ctx, uint32_t input, uint32_t copy,
                             uint64_t off, uint32_t src, uint32_t len)
{
    const mesh_end_binding *b = end_of(check(ctx), input);
    uint8_t *e, *m;
    end_ranges(rig_end_outbound(b->end), copy, off, src, len, &e, &m);
    memcpy(e, m, len);
}

void mesh_wasm_imp_end_read(void *ctx, uint32_t input, uint32_t copy,
                            uint64_t off, uint32_t dst, uint32_t len)
{
    const mesh_end_binding *b = end_of(check(ctx), input);
    uint8_t *e, *m;
    end_ranges(rig_end_inbound(b->end), copy, off, dst, len, &e, &m);
    memcpy(m, e, len);
}

void mesh_wasm_imp_end_ready(void *ctx, uint32_t input, uint64_t c)
{
    const mesh_end_binding *b = end_of(check(ctx), input);
    /* rig_end_ready ignores (and logs once) a count out of range. */
    rig_end_ready(b->end, c);
}

/* Waits in slices, so that a halt (or the host's end of the node) is seen
 * within one: 1 reached, 0 failed or halted. */
static uint32_t end_wait(void *ctx, uint32_t input, uint64_t c, bool arrived)
{
    wasm_node *n = check(ctx);
    const mesh_end_binding *b = end_of(n, input);
    for (;;) {
        bool timed_out = false;
        bool ok = arrived ? rig_end_wait_arrived_for(b->end, c, 10, &timed_out)
                          : rig_end_wait_sent_for(b->end, c, 10, &timed_out);
        if (ok) {
            return 1;
        }
        if (!timed_out) {
            return 0; /* failed */
        }
        check(ctx);
        if (atomic_load_explicit(&n->run->job.words->halt,
                                 memory_order_acquire) != 0) {
            return 0;
        }
    }
}

uint32_t mesh_wasm_imp_end_wait_arrived(void *ctx, uint32_t input, uint64_t c)
{
    return end_wait(ctx, input, c, true);
}

uint32_t mesh_wasm_imp_end_wait_sent(void *ctx, uint32_t input, uint64_t c)
{
    return end_wait(ctx, input, c, false);
}

uint64_t mesh_wasm_imp_end_arrived(void *ctx, uint32_t input)
{
    return rig_end_arrived(end_of(check(ctx), input)->end);
}

uint64_t mesh_wasm_imp_end_sent(void *ctx, uint32_t input)
{
    return rig_end_sent(end_of(check(ctx), input)->end);
}

/* ---- running a node --------------------------------------------------- */

static void run_node(wasm_lane *lane, wasm_node *node)
{
    mesh_wasm_run *run = node->run;
    const mesh_wasm_module *mod = run->job.mod;
    mesh_wasm_trap_state *ts = &lane->ts;
    volatile uint32_t code = 0;

    atomic_store(&ts->killed, 0);
    ts->mem = NULL;
    ts->mem_base = NULL;
    ts->code_lo = run->job.code_lo;
    ts->code_hi = run->job.code_hi;
    void *inst = calloc(1, mod->instance_size ? mod->instance_size : 1);
    if (inst == NULL) {
        code = MESH_WASM_TRAP_NOMEM;
    } else {
        int jumped = sigsetjmp(ts->jmp, 1);
        if (jumped == 0) {
            ts->armed = 1;
            mod->instantiate(inst, node);
            mod->entry(inst);
            ts->armed = 0;
        } else {
            ts->armed = 0;
            code = (uint32_t)jumped;
        }
        mod->free(inst);
        free(inst);
    }
    node->trap = code;
    if (code == 0) {
        atomic_fetch_add_explicit(&run->job.words->exited, 1,
                                  memory_order_release);
    } else if (code != MESH_WASM_TRAP_HALTED) {
        pthread_mutex_lock(&run->lock);
        if (run->crash == NULL) {
            char buf[160];
            snprintf(buf, sizeof(buf), "node %u trapped: %s", node->node,
                     mesh_wasm_trap_str(code));
            run->crash = strdup(buf);
        }
        pthread_mutex_unlock(&run->lock);
    }
    /* The last touch of the run: after it, unload may free the module. */
    atomic_fetch_sub_explicit(&run->left, 1, memory_order_release);
}

static void *lane_main(void *arg)
{
    wasm_lane *lane = arg;
    mesh_wasm_pool *p = lane->pool;

    /* Bind, then ask hwloc what the binding is: that is what we report. */
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    char *binding = NULL;
    if (set != NULL) {
        if (hwloc_set_cpubind(p->topo, p->core_set[lane->core],
                              HWLOC_CPUBIND_THREAD) != 0) {
            rig_log(RIG_LOG_WARN,
                    "wasm: binding a lane to core %u failed: "
                    "%s",
                    lane->core, strerror(errno));
        }
        if (hwloc_get_cpubind(p->topo, set, HWLOC_CPUBIND_THREAD) == 0) {
            hwloc_bitmap_list_asprintf(&binding, set);
        }
        hwloc_bitmap_free(set);
    }

    /* Our own signal stack: a fault on the wasm stack (exhaustion) needs
     * one, and lanes must not share it. */
    stack_t ss = {0};
    void *alt = malloc(ALTSTACK_BYTES);
    if (alt != NULL) {
        ss.ss_sp = alt;
        ss.ss_size = ALTSTACK_BYTES;
        if (sigaltstack(&ss, NULL) != 0) {
            free(alt);
            alt = NULL;
        }
    }
    mesh_wasm_glue_set_lane(&lane->ts);

    pthread_mutex_lock(&p->lock);
    lane->binding = binding;
    for (;;) {
        while (lane->job == NULL && !lane->quit) {
            pthread_cond_wait(&lane->cv, &p->lock);
        }
        if (lane->job == NULL) {
            break;
        }
        wasm_node *node = lane->job;
        node->binding = lane->binding ? strdup(lane->binding) : NULL;
        pthread_mutex_unlock(&p->lock);
        run_node(lane, node);
        pthread_mutex_lock(&p->lock);
        lane->job = NULL;
        lane->leased = false;
        p->core_load[lane->core]--;
    }
    pthread_mutex_unlock(&p->lock);

    mesh_wasm_glue_set_lane(NULL);
    if (alt != NULL) {
        ss.ss_flags = SS_DISABLE;
        ss.ss_sp = NULL;
        ss.ss_size = ALTSTACK_BYTES;
        sigaltstack(&ss, NULL);
        free(alt);
    }
    pthread_mutex_lock(&p->lock);
    lane->exited = true;
    pthread_cond_broadcast(&p->exited_cv);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void lane_free(wasm_lane *lane)
{
    pthread_cond_destroy(&lane->cv);
    pthread_mutex_destroy(&lane->ts.lock);
    if (lane->stack != NULL) {
        munmap(lane->stack, lane->stack_bytes);
    }
    free(lane->binding);
    free(lane);
}

/* Makes a lane bound to core (pool locked). */
static bool lane_make(mesh_wasm_pool *p, uint32_t core, wasm_lane **out,
                      char **err)
{
    if (p->nlanes >= MESH_WASM_MAX_LANES) {
        return rig_err(err, "limits: the wasm backend runs at most %u lanes",
                       MESH_WASM_MAX_LANES);
    }
    wasm_lane *lane = calloc(1, sizeof(*lane));
    if (lane == NULL) {
        return rig_err(err, "nomem: a wasm lane");
    }
    lane->pool = p;
    lane->core = core;
    pthread_cond_init(&lane->cv, NULL);
    pthread_mutex_init(&lane->ts.lock, NULL);
    lane->stack_bytes = p->stack_bytes + GUARD_BYTES;
    lane->stack = mmap(NULL, lane->stack_bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (lane->stack == MAP_FAILED) {
        lane->stack = NULL;
        lane_free(lane);
        return rig_err(err, "system: mmap of a lane stack failed: %s",
                       strerror(errno));
    }
    /* The guard: the lowest bytes; the stack grows down into it. */
    mprotect(lane->stack, GUARD_BYTES, PROT_NONE);
    lane->ts.guard_lo = lane->stack;
    lane->ts.guard_hi = lane->stack + GUARD_BYTES;

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstack(&attr, lane->stack + GUARD_BYTES, p->stack_bytes);
    /* Lanes run with every signal but the faults blocked: signals meant
     * for the application go to its own threads. */
    sigset_t all, old;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    if (mesh_wasm_glue_halt_signal() != 0) {
        sigdelset(&all, mesh_wasm_glue_halt_signal());
    }
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&lane->thread, &attr, lane_main, lane);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        lane_free(lane);
        return rig_err(err,
                       "system: pthread_create of a wasm lane failed: "
                       "%s",
                       strerror(rc));
    }
    p->lanes[p->nlanes++] = lane;
    *out = lane;
    return true;
}

/* ---- the pool --------------------------------------------------------- */

bool mesh_wasm_pool_open(uint32_t max_cores, mesh_wasm_pool **out,
                         uint32_t *total, uint32_t *used, char **err)
{
    mesh_wasm_pool *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return rig_err(err, "nomem: the wasm lane pool");
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->exited_cv, NULL);
    p->stack_bytes = MESH_WASM_STACK_BYTES;
    if (hwloc_topology_init(&p->topo) != 0 ||
        hwloc_topology_load(p->topo) != 0) {
        rig_err(err, "system: hwloc could not load the topology: %s",
                strerror(errno));
        goto err_free;
    }
    hwloc_obj_type_t type = HWLOC_OBJ_CORE;
    int n = hwloc_get_nbobjs_by_type(p->topo, type);
    if (n <= 0) {
        type = HWLOC_OBJ_PU;
        n = hwloc_get_nbobjs_by_type(p->topo, type);
    }
    if (n <= 0) {
        rig_err(err, "system: hwloc reports no core");
        goto err_free;
    }
    *total = (uint32_t)n;
    p->ncores =
        max_cores > 0 && max_cores < (uint32_t)n ? max_cores : (uint32_t)n;
    p->core_set = calloc(p->ncores, sizeof(*p->core_set));
    p->core_load = calloc(p->ncores, sizeof(*p->core_load));
    p->lanes = calloc(MESH_WASM_MAX_LANES, sizeof(*p->lanes));
    if (p->core_set == NULL || p->core_load == NULL || p->lanes == NULL) {
        rig_err(err, "nomem: the wasm lane pool");
        goto err_free;
    }
    for (uint32_t i = 0; i < p->ncores; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(p->topo, type, i);
        p->core_set[i] = hwloc_bitmap_dup(o->cpuset);
        if (p->core_set[i] == NULL) {
            rig_err(err, "nomem: a core's cpuset");
            goto err_free;
        }
    }
    *used = p->ncores;
    *out = p;
    return true;
err_free:
    mesh_wasm_pool_close(p, 0);
    return false;
}

void mesh_wasm_pool_close(mesh_wasm_pool *p, uint32_t grace_ms)
{
    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&p->lock);
    for (uint32_t i = 0; i < p->nlanes; i++) {
        p->lanes[i]->quit = true;
        pthread_cond_signal(&p->lanes[i]->cv);
    }
    /* Wait for the lanes to end, guarded: a busy lane gets grace_ms. */
    uint64_t until = rig_now_ns() + (uint64_t)grace_ms * 1000000u;
    for (uint32_t i = 0; i < p->nlanes; i++) {
        wasm_lane *lane = p->lanes[i];
        while (!lane->exited && !lane->lost && rig_now_ns() < until) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 10000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&p->exited_cv, &p->lock, &ts);
        }
        if (lane->exited) {
            pthread_mutex_unlock(&p->lock);
            pthread_join(lane->thread, NULL);
            pthread_mutex_lock(&p->lock);
            lane_free(lane);
        } else {
            /* Abandoned: it still runs, on its own stack; leave it all. */
            pthread_detach(lane->thread);
        }
        p->lanes[i] = NULL;
    }
    pthread_mutex_unlock(&p->lock);
    for (uint32_t i = 0; p->core_set != NULL && i < p->ncores; i++) {
        hwloc_bitmap_free(p->core_set[i]);
    }
    free(p->core_set);
    free(p->core_load);
    free(p->lanes);
    if (p->topo != NULL) {
        hwloc_topology_destroy(p->topo);
    }
    pthread_cond_destroy(&p->exited_cv);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void mesh_wasm_pool_counts(const mesh_wasm_pool *p, uint32_t *alive,
                           uint32_t *lost)
{
    mesh_wasm_pool *mp = (mesh_wasm_pool *)p;
    pthread_mutex_lock(&mp->lock);
    *alive = p->nlanes - p->lost;
    *lost = p->lost;
    pthread_mutex_unlock(&mp->lock);
}

size_t mesh_wasm_pool_stack(const mesh_wasm_pool *p)
{
    return p->stack_bytes;
}

void mesh_wasm_pool_set_stack(mesh_wasm_pool *p, size_t bytes)
{
    pthread_mutex_lock(&p->lock);
    p->stack_bytes = (bytes + 4095) & ~(size_t)4095;
    pthread_mutex_unlock(&p->lock);
}

/* ---- runs ------------------------------------------------------------- */

/* An idle lane on the least loaded core, or a new one there (locked). */
static bool lease(mesh_wasm_pool *p, wasm_lane **out, char **err)
{
    uint32_t best = 0;
    for (uint32_t c = 1; c < p->ncores; c++) {
        if (p->core_load[c] < p->core_load[best]) {
            best = c;
        }
    }
    wasm_lane *lane = NULL;
    for (uint32_t i = 0; i < p->nlanes; i++) {
        wasm_lane *l = p->lanes[i];
        if (!l->leased && !l->lost && !l->quit && l->core == best) {
            lane = l;
            break;
        }
    }
    if (lane == NULL && !lane_make(p, best, &lane, err)) {
        return false;
    }
    lane->leased = true;
    p->core_load[best]++;
    *out = lane;
    return true;
}

bool mesh_wasm_run_start(mesh_wasm_pool *p, const mesh_wasm_job *job,
                         uint32_t nodes, mesh_wasm_run **out, char **err)
{
    if (p == NULL || job == NULL || job->mod == NULL || nodes == 0 ||
        out == NULL) {
        return rig_err(err, "invalid: mesh_wasm_run_start: bad argument");
    }
    if (nodes > MESH_WASM_MAX_LANES) {
        return rig_err(err,
                       "limits: %u nodes; the wasm backend runs at "
                       "most %u lanes",
                       nodes, MESH_WASM_MAX_LANES);
    }
    mesh_wasm_run *r = calloc(1, sizeof(*r));
    wasm_node *nd = calloc(nodes, sizeof(*nd));
    if (r == NULL || nd == NULL) {
        free(r);
        free(nd);
        return rig_err(err, "nomem: a wasm launch of %u nodes", nodes);
    }
    r->pool = p;
    r->job = *job;
    r->nodes = nodes;
    r->node = nd;
    pthread_mutex_init(&r->lock, NULL);
    atomic_store(&r->left, nodes);

    pthread_mutex_lock(&p->lock);
    uint32_t got = 0;
    for (; got < nodes; got++) {
        nd[got].run = r;
        nd[got].node = got;
        if (!lease(p, &nd[got].lane, err)) {
            break;
        }
    }
    if (got < nodes) {
        for (uint32_t i = 0; i < got; i++) {
            nd[i].lane->leased = false;
            p->core_load[nd[i].lane->core]--;
        }
        pthread_mutex_unlock(&p->lock);
        pthread_mutex_destroy(&r->lock);
        free(nd);
        free(r);
        return false;
    }
    for (uint32_t i = 0; i < nodes; i++) {
        nd[i].lane->job = &nd[i];
        atomic_fetch_add(&nd[i].lane->ts.gen, 1);
        pthread_cond_signal(&nd[i].lane->cv);
    }
    pthread_mutex_unlock(&p->lock);
    *out = r;
    return true;
}

bool mesh_wasm_run_done(const mesh_wasm_run *r)
{
    return r == NULL || atomic_load_explicit(&((mesh_wasm_run *)r)->left,
                                             memory_order_acquire) == 0;
}

char *mesh_wasm_run_crashed(mesh_wasm_run *r)
{
    char *why = NULL;
    if (r == NULL) {
        return NULL;
    }
    pthread_mutex_lock(&r->lock);
    if (r->crash != NULL && !r->told) {
        why = strdup(r->crash);
        r->told = why != NULL;
    }
    pthread_mutex_unlock(&r->lock);
    return why;
}

static bool wait_done(const mesh_wasm_run *r, uint32_t ms)
{
    uint64_t until = rig_now_ns() + (uint64_t)ms * 1000000u;
    while (!mesh_wasm_run_done(r)) {
        if (rig_now_ns() >= until) {
            return false;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return true;
}

bool mesh_wasm_run_stop(mesh_wasm_run *r, uint32_t halt_ms, uint32_t grace_ms,
                        bool *abandoned, char **err)
{
    *abandoned = false;
    if (r == NULL) {
        return true;
    }
    atomic_store_explicit(&r->job.words->halt, 1, memory_order_release);
    if (wait_done(r, halt_ms)) {
        return true;
    }
    mesh_wasm_pool *p = r->pool;
    pthread_mutex_lock(&p->lock);
    for (uint32_t i = 0; i < r->nodes; i++) {
        wasm_lane *lane = r->node[i].lane;
        if (lane->job == &r->node[i]) {
            mesh_wasm_glue_kill(&lane->ts);
        }
    }
    pthread_mutex_unlock(&p->lock);
    /* A node that never checks: interrupt its lane, every millisecond,
     * until the signal finds it in its own code (wasm_glue.c). */
    uint64_t until = rig_now_ns() + (uint64_t)grace_ms * 1000000u;
    while (!mesh_wasm_run_done(r) && rig_now_ns() < until) {
        pthread_mutex_lock(&p->lock);
        for (uint32_t i = 0; i < r->nodes; i++) {
            wasm_lane *lane = r->node[i].lane;
            if (lane->job == &r->node[i]) {
                mesh_wasm_glue_interrupt(lane->thread, &lane->ts);
            }
        }
        pthread_mutex_unlock(&p->lock);
        wait_done(r, 1);
    }
    if (mesh_wasm_run_done(r)) {
        return true;
    }
    char names[256] = "";
    size_t k = 0;
    pthread_mutex_lock(&p->lock);
    for (uint32_t i = 0; i < r->nodes; i++) {
        wasm_lane *lane = r->node[i].lane;
        if (lane->job == &r->node[i] && !lane->lost) {
            lane->lost = true;
            p->lost++;
            if (k + 16 < sizeof(names)) {
                k += (size_t)snprintf(names + k, sizeof(names) - k, "%s%u",
                                      k ? ", " : "", i);
            }
        }
    }
    pthread_mutex_unlock(&p->lock);
    *abandoned = true;
    return rig_err(err,
                   "timeout: node %s of %s ignored the halt and could not be "
                   "interrupted within %u ms; its lane is abandoned",
                   names, r->job.name ? r->job.name : "?", halt_ms + grace_ms);
}

void mesh_wasm_run_free(mesh_wasm_run *r)
{
    if (r == NULL) {
        return;
    }
    for (uint32_t i = 0; i < r->nodes; i++) {
        free(r->node[i].binding);
    }
    free(r->node);
    free(r->crash);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

bool mesh_wasm_run_binding(const mesh_wasm_run *r, uint32_t node, char **out,
                           char **err)
{
    if (r == NULL || node >= r->nodes || out == NULL) {
        return rig_err(err, "invalid: no node %u in the launch", node);
    }
    mesh_wasm_pool *p = r->pool;
    pthread_mutex_lock(&p->lock);
    const char *b = r->node[node].binding;
    *out = b != NULL ? strdup(b) : NULL;
    pthread_mutex_unlock(&p->lock);
    if (*out == NULL) {
        return rig_err(err, "missing: node %u has no binding yet", node);
    }
    return true;
}

uint32_t mesh_wasm_run_trap(const mesh_wasm_run *r, uint32_t node)
{
    return r != NULL && node < r->nodes && mesh_wasm_run_done(r)
               ? r->node[node].trap
               : 0;
}
