/* SPDX-License-Identifier: BSD-3-Clause */
/* The lifecycle above a backend: prepare, load, launch, online, stop.
 *
 * Backend-neutral: it uses the ops of mesh_backend and the mailbox words
 * only.  The driver owns the words of a slot: it resets them before every
 * launch and publishes P_LAUNCH last (release), as control_block.h says. */
#include "mesh/driver.h"
#include "mesh/executors.h"

#include "../util/util_internal.h"
#include "child_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mesh_kernel *k;
    mesh_stream *st;
    char *name;
    uint32_t nodes;
    bool crashed;
    bool done;
    /* A crash seen while the launch came up, after every node was online:
     * the launch started, and poll reports this (malloc'd). */
    char *why;
} drv_slot;

struct mesh_driver {
    mesh_backend *b;
    mesh_control_block *cb;
    uint64_t dev;
    drv_slot slots[MESH_PROG_SLOTS];
};

/* The nap between two looks at a launch coming up, waited for since
 * since: an eighth of the time waited so far, from 20 us to 1 ms.  A
 * native launch comes up in one to two milliseconds (a keeper and the
 * program spawned, the program's attach): naps of 1, 2 and 4 ms saw a
 * launch that was up after 1.2 ms at 3 ms, and an agent's launch on a
 * loaded machine at 7 ms.  Looking at an eighth of the wait costs at most
 * an eighth more than the launch took, and a launch that takes long is
 * looked at once a millisecond, as before. */
static uint64_t online_nap_ns(uint64_t since)
{
    uint64_t ns = (rig_now_ns() - since) / 8;
    return ns < 20000u ? 20000u : ns > 1000000u ? 1000000u : ns;
}

bool mesh_driver_open(mesh_backend *b, mesh_driver **out, char **err)
{
    if (b == NULL || b->ops == NULL || out == NULL) {
        return rig_err(err, "invalid: mesh_driver_open: %s",
                       b == NULL        ? "backend is NULL"
                       : b->ops == NULL ? "backend has no ops"
                                        : "out is NULL");
    }
    mesh_driver *d = calloc(1, sizeof(*d));
    if (d == NULL) {
        return rig_err(err, "nomem: mesh driver");
    }
    uint8_t *host = NULL;
    if (!b->ops->mailbox(b, &host, &d->dev, err)) {
        free(d);
        return false;
    }
    d->b = b;
    d->cb = (mesh_control_block *)host;
    *out = d;
    return true;
}

/* ---- the JIT thread ----------------------------------------------------- */

typedef struct {
    const mesh_compiler *comp;
    mesh_payload *src;
    const uint64_t *expect;
    const char *root;
    mesh_prepared *out;
    char *err;
    bool ok;
} jit_job;

static void *jit_main(void *arg)
{
    jit_job *j = arg;
    j->ok = j->comp->ops->prepare(j->comp, j->src, j->expect, j->root, j->out,
                                  &j->err);
    return NULL;
}

bool mesh_driver_prepare(mesh_driver *d, mesh_payload *src,
                         const uint64_t *expect, const char *root,
                         mesh_prepared *out, char **err)
{
    if (d == NULL || src == NULL || out == NULL) {
        mesh_payload_free(src);
        return rig_err(err, "invalid: mesh_driver_prepare: %s is NULL",
                       d == NULL     ? "driver"
                       : src == NULL ? "src"
                                     : "out");
    }
    const mesh_compiler *comp = d->b->ops->compiler(d->b);
    if (comp == NULL || comp->ops == NULL || comp->ops->prepare == NULL) {
        mesh_payload_free(src);
        return rig_err(err, "unsupported: backend %s has no compiler",
                       mesh_caps_backend_name(d->b->ops->caps(d->b)));
    }
    jit_job j = {
        .comp = comp, .src = src, .expect = expect, .root = root, .out = out};
    pthread_t t;
    int rc = pthread_create(&t, NULL, jit_main, &j);
    if (rc != 0) {
        mesh_payload_free(src);
        return rig_err(err, "system: starting the JIT thread failed: %s",
                       strerror(rc));
    }
    pthread_join(t, NULL);
    if (!j.ok) {
        if (err != NULL) {
            *err = j.err;
        } else {
            free(j.err);
        }
    }
    return j.ok;
}

/* ---- launching ---------------------------------------------------------- */

static bool running(const mesh_driver *d, uint32_t s)
{
    return d->slots[s].k != NULL && !d->slots[s].done;
}

/* Resets slot s's words and publishes the launch, then starts its nodes. */
static bool launch_slot(mesh_driver *d, uint32_t s, const mesh_prepared *p,
                        char **err)
{
    drv_slot *ds = &d->slots[s];
    mesh_cb_slot *w = &d->cb->slot[s];
    atomic_store_explicit(&w->state, MESH_SLOT_LAUNCHING, memory_order_relaxed);
    atomic_store_explicit(&w->halt, 0, memory_order_relaxed);
    atomic_store_explicit(&w->nodes, ds->nodes, memory_order_relaxed);
    atomic_store_explicit(&w->online, 0, memory_order_relaxed);
    atomic_store_explicit(&w->exited, 0, memory_order_relaxed);
    atomic_store_explicit(&w->error, MESH_NODE_OK, memory_order_relaxed);
    atomic_store_explicit(&w->error_node, 0, memory_order_relaxed);
    atomic_store_explicit(&w->error_arg, 0, memory_order_relaxed);
    for (uint32_t i = 0; i < MESH_POINTS; i++) {
        atomic_store_explicit(&w->points[i], 0, memory_order_relaxed);
    }
    atomic_store_explicit(&w->scratch, mesh_kernel_scratch(ds->k),
                          memory_order_relaxed);
    if (p != NULL) {
        atomic_store_explicit(&w->scratch_bytes, p->manifest.scratch,
                              memory_order_relaxed);
        atomic_store_explicit(&w->reg_cap, p->reg_cap, memory_order_relaxed);
        /* P_READS: the inputs with an end here (mesh/abi/ends.h). */
        atomic_store_explicit(&w->reads, mesh_ends_mask(p->ends),
                              memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&w->launch, 1, memory_order_release);
    ds->crashed = false;
    ds->done = false;
    free(ds->why);
    ds->why = NULL;
    return d->b->ops->launch(d->b, ds->st, ds->k, ds->nodes, d->dev, s, err);
}

/* The slot's online count, gathered: a count above the launch's nodes is
 * not one a backend may give (it would start a launch not up). */
static bool read_online(mesh_driver *d, uint32_t s, uint32_t *online,
                        char **err)
{
    mesh_backend_gather(d->b, s);
    *online =
        atomic_load_explicit(&d->cb->slot[s].online, memory_order_acquire);
    if (*online > d->slots[s].nodes) {
        return rig_err(err,
                       "load: program %s: P_ONLINE says %u nodes are online; "
                       "it has %u",
                       d->slots[s].name, *online, d->slots[s].nodes);
    }
    return true;
}

/* Waits until every node of slot s is online.  Whether a launch came up is
 * read again after a crash or the end is seen: a node may come online and
 * crash (or end) between the first read and that, and then the launch did
 * start, and its crash is reported as one after going online. */
static bool wait_online(mesh_driver *d, uint32_t s, char **err)
{
    drv_slot *ds = &d->slots[s];
    mesh_cb_slot *w = &d->cb->slot[s];
    uint32_t limit = mesh_backend_online_timeout_ms(d->b);
    uint64_t since = rig_now_ns();
    uint64_t deadline = since + (uint64_t)limit * 1000000u;
    for (;;) {
        uint32_t online = 0;
        if (!read_online(d, s, &online, err)) {
            return false;
        }
        if (online == ds->nodes) {
            atomic_store_explicit(&w->state, MESH_SLOT_RUNNING,
                                  memory_order_release);
            return true;
        }
        uint32_t e = atomic_load_explicit(&w->error, memory_order_acquire);
        if (e != MESH_NODE_OK) {
            uint32_t node =
                atomic_load_explicit(&w->error_node, memory_order_acquire);
            uint32_t arg =
                atomic_load_explicit(&w->error_arg, memory_order_acquire);
            if (e == MESH_NODE_ERR_ABI) {
                return rig_err(err,
                               "abi: program %s: node %u was built for "
                               "runtime ABI %u; this runtime is %u",
                               ds->name, node, arg, MESH_RT_ABI_VERSION);
            }
            return rig_err(err,
                           "load: program %s: node %u reported error "
                           "%u (%u) before going online",
                           ds->name, node, e, arg);
        }
        char *why = mesh_backend_crashed(d->b, ds->st, ds->k);
        if (why != NULL) {
            if (!read_online(d, s, &online, err)) {
                free(why);
                return false;
            }
            if (online == ds->nodes) {
                ds->crashed = true;
                ds->why = why;
                atomic_store_explicit(&w->state, MESH_SLOT_RUNNING,
                                      memory_order_release);
                return true;
            }
            rig_err(err, "load: program %s: %s with %u of %u nodes online",
                    ds->name, why, online, ds->nodes);
            free(why);
            return false;
        }
        bool done = false;
        if (!d->b->ops->query(d->b, ds->st, ds->k, &done, err)) {
            return false;
        }
        if (done) {
            if (!read_online(d, s, &online, err)) {
                return false;
            }
            if (online == ds->nodes) {
                atomic_store_explicit(&w->state, MESH_SLOT_RUNNING,
                                      memory_order_release);
                return true;
            }
            /* A crash is told before the end: the query may have reaped
             * it only now. */
            why = mesh_backend_crashed(d->b, ds->st, ds->k);
            if (why != NULL) {
                rig_err(err, "load: program %s: %s with %u of %u nodes online",
                        ds->name, why, online, ds->nodes);
                free(why);
                return false;
            }
            return rig_err(err,
                           "load: program %s: its nodes ended with %u "
                           "of %u online",
                           ds->name, online, ds->nodes);
        }
        if (rig_now_ns() >= deadline) {
            return rig_err(err,
                           "timeout: program %s: %u of %u nodes online "
                           "after %u ms",
                           ds->name, online, ds->nodes, limit);
        }
        mesh_child_sleep_ns(online_nap_ns(since));
    }
}

/* Halts slot s's launch and waits (bounded) until it is over. */
static void halt_slot(mesh_driver *d, uint32_t s)
{
    drv_slot *ds = &d->slots[s];
    atomic_store_explicit(&d->cb->slot[s].halt, 1, memory_order_release);
    uint64_t deadline =
        rig_now_ns() +
        (uint64_t)mesh_backend_online_timeout_ms(d->b) * 1000000u;
    while (rig_now_ns() < deadline) {
        bool done = false;
        if (!d->b->ops->query(d->b, ds->st, ds->k, &done, NULL) || done) {
            return;
        }
        mesh_child_sleep_ms(1);
    }
}

/* The slots a module change of slot s disturbs, halted; *paused marks them
 * (bit i: slot i) for resume_scope. */
static void pause_scope(mesh_driver *d, bool has_slot, uint32_t s,
                        uint64_t *paused)
{
    *paused = 0;
    uint32_t scope = MESH_NO_SLOT;
    bool bounded = d->b->ops->module_scope(d->b, has_slot, s, &scope);
    for (uint32_t i = 0; i < MESH_PROG_SLOTS; i++) {
        if (!running(d, i) || (has_slot && i == s)) {
            continue;
        }
        if (!bounded || i == scope) {
            halt_slot(d, i);
            *paused |= 1ull << i;
        }
    }
}

static void resume_scope(mesh_driver *d, uint64_t paused)
{
    for (uint32_t i = 0; i < MESH_PROG_SLOTS; i++) {
        if ((paused & (1ull << i)) == 0 || d->slots[i].k == NULL) {
            continue;
        }
        char *e = NULL;
        if (!launch_slot(d, i, NULL, &e) || !wait_online(d, i, &e)) {
            rig_log(RIG_LOG_ERROR,
                    "mesh: relaunching program %s in slot %u "
                    "after a module change: %s",
                    d->slots[i].name, i, e != NULL ? e : "?");
            d->slots[i].crashed = true;
            free(e);
        }
    }
}

static void release_slot(mesh_driver *d, uint32_t s, char **err, bool *ok)
{
    drv_slot *ds = &d->slots[s];
    if (ds->k != NULL && !d->b->ops->unload(d->b, ds->k, err)) {
        *ok = false;
    }
    mesh_stream_drop(ds->st);
    free(ds->name);
    free(ds->why);
    memset(ds, 0, sizeof(*ds));
    atomic_store_explicit(&d->cb->slot[s].state, MESH_SLOT_FREE,
                          memory_order_release);
}

bool mesh_driver_start(mesh_driver *d, mesh_prepared *p, uint32_t nodes,
                       uint32_t *slot, char **err)
{
    if (d == NULL || p == NULL || slot == NULL) {
        mesh_prepared_free(p);
        return rig_err(err, "invalid: mesh_driver_start: %s is NULL",
                       d == NULL   ? "driver"
                       : p == NULL ? "prepared"
                                   : "slot");
    }
    if (nodes == 0) {
        nodes = p->manifest.nodes;
    }
    if (nodes == 0 || nodes > MESH_MANIFEST_MAX_NODES) {
        rig_err(err, "limits: program %s: %u nodes, not within 1..%u",
                p->manifest.name, nodes, MESH_MANIFEST_MAX_NODES);
        mesh_prepared_free(p);
        return false;
    }
    uint32_t s = 0;
    while (s < MESH_PROG_SLOTS && d->slots[s].k != NULL) {
        s++;
    }
    if (s == MESH_PROG_SLOTS) {
        rig_err(err, "limits: program %s: all %u slots are taken",
                p->manifest.name, MESH_PROG_SLOTS);
        mesh_prepared_free(p);
        return false;
    }
    /* Refused before anything halts: a program that cannot run must not
     * blink the running ones. */
    if (!mesh_backend_admit(d->b, p, nodes, s, err)) {
        mesh_prepared_free(p);
        return false;
    }
    drv_slot *ds = &d->slots[s];
    ds->name = strdup(p->manifest.name != NULL ? p->manifest.name : "?");
    if (ds->name == NULL) {
        mesh_prepared_free(p);
        return rig_err(err, "nomem: mesh driver");
    }
    ds->nodes = nodes;
    if (!d->b->ops->make_current(d->b, err)) {
        free(ds->name);
        ds->name = NULL;
        mesh_prepared_free(p);
        return false;
    }
    uint64_t paused = 0;
    pause_scope(d, true, s, &paused);
    bool ok = d->b->ops->load(d->b, p, &ds->k, err) &&
              d->b->ops->new_stream(d->b, s, ds->k, &ds->st, err);
    if (ok) {
        atomic_store_explicit(&d->cb->slot[s].state, MESH_SLOT_LOADED,
                              memory_order_release);
        ok = launch_slot(d, s, p, err) && wait_online(d, s, err);
    }
    mesh_prepared_free(p);
    if (!ok) {
        bool ignored = true;
        release_slot(d, s, NULL, &ignored);
        resume_scope(d, paused);
        return false;
    }
    resume_scope(d, paused);
    *slot = s;
    return true;
}

bool mesh_driver_poll(mesh_driver *d, uint32_t slot, mesh_run_state *state,
                      char **why, char **err)
{
    if (why != NULL) {
        *why = NULL;
    }
    if (d == NULL || state == NULL) {
        return rig_err(err, "invalid: mesh_driver_poll: %s is NULL",
                       d == NULL ? "driver" : "state");
    }
    if (slot >= MESH_PROG_SLOTS || d->slots[slot].k == NULL) {
        return rig_err(err,
                       "invalid: mesh_driver_poll: no program in slot "
                       "%u",
                       slot);
    }
    drv_slot *ds = &d->slots[slot];
    bool done = false;
    if (!d->b->ops->query(d->b, ds->st, ds->k, &done, err)) {
        return false;
    }
    mesh_backend_gather(d->b, slot);
    char *crash = ds->why;
    ds->why = NULL;
    if (crash == NULL) {
        crash = mesh_backend_crashed(d->b, ds->st, ds->k);
    }
    if (crash != NULL) {
        ds->crashed = true;
        if (why != NULL) {
            *why = crash;
        } else {
            free(crash);
        }
    }
    if (done && !ds->done) {
        ds->done = true;
        atomic_store_explicit(&d->cb->slot[slot].state,
                              ds->crashed ? MESH_SLOT_FAILED : MESH_SLOT_DONE,
                              memory_order_release);
    }
    *state = ds->crashed ? MESH_RUN_CRASHED
                         : (done ? MESH_RUN_DONE : MESH_RUN_RUNNING);
    return true;
}

bool mesh_driver_wait(mesh_driver *d, uint32_t slot, uint32_t timeout_ms,
                      mesh_run_state *state, char **why, char **err)
{
    if (why != NULL) {
        *why = NULL;
    }
    uint64_t deadline = rig_now_ns() + (uint64_t)timeout_ms * 1000000u;
    uint32_t nap = 1;
    for (;;) {
        char *w = NULL;
        if (!mesh_driver_poll(d, slot, state, &w, err)) {
            return false;
        }
        if (w != NULL) {
            if (why != NULL && *why == NULL) {
                *why = w;
            } else {
                free(w);
            }
        }
        if (*state != MESH_RUN_RUNNING) {
            return true;
        }
        if (rig_now_ns() >= deadline) {
            return rig_err(err,
                           "timeout: program %s in slot %u still runs "
                           "after %u ms",
                           d->slots[slot].name, slot, timeout_ms);
        }
        mesh_child_sleep_ms(nap);
        nap = nap < 8 ? nap * 2 : nap;
    }
}

uint64_t mesh_driver_point(const mesh_driver *d, uint32_t slot, uint32_t i)
{
    if (d == NULL || slot >= MESH_PROG_SLOTS || i >= MESH_POINTS) {
        return 0;
    }
    mesh_backend_gather(d->b, slot);
    return atomic_load_explicit(&d->cb->slot[slot].points[i],
                                memory_order_acquire);
}

const char *mesh_driver_program(const mesh_driver *d, uint32_t slot)
{
    if (d == NULL || slot >= MESH_PROG_SLOTS) {
        return NULL;
    }
    return d->slots[slot].name;
}

bool mesh_driver_stop(mesh_driver *d, uint32_t slot, char **err)
{
    if (d == NULL) {
        return rig_err(err, "invalid: mesh_driver_stop: driver is NULL");
    }
    if (slot >= MESH_PROG_SLOTS || d->slots[slot].k == NULL) {
        return rig_err(err,
                       "invalid: mesh_driver_stop: no program in slot "
                       "%u",
                       slot);
    }
    uint64_t paused = 0;
    pause_scope(d, true, slot, &paused);
    if (!mesh_backend_owns_halt(d->b)) {
        /* The executor cannot stop nodes itself: they must obey P_HALT. */
        halt_slot(d, slot);
    } else {
        atomic_store_explicit(&d->cb->slot[slot].halt, 1, memory_order_release);
    }
    bool ok = true;
    release_slot(d, slot, err, &ok);
    resume_scope(d, paused);
    return ok;
}

void mesh_driver_close(mesh_driver *d)
{
    if (d == NULL) {
        return;
    }
    for (uint32_t i = 0; i < MESH_PROG_SLOTS; i++) {
        if (d->slots[i].k != NULL) {
            bool ok = true;
            /* No relaunches while everything goes. */
            atomic_store_explicit(&d->cb->slot[i].halt, 1,
                                  memory_order_release);
            release_slot(d, i, NULL, &ok);
        }
    }
    free(d);
}
