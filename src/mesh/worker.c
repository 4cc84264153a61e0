/* SPDX-License-Identifier: BSD-3-Clause */
/* The worker side of the native backend: a node attaches to its page.
 *
 * A node maps only its own page of words (mesh_cb_node) and its program's
 * scratch: the host copies there what the node must read and checks what
 * the node writes there.
 *
 * libc only (no librig helper), so that the same file builds both into
 * librig and into the static libmesh_worker that test and example programs
 * link to be self-contained executables. */
#include "mesh/worker.h"
#include "mesh/abi/control_block.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct mesh_worker {
    mesh_cb_node *me; /* this node's page */
    uint32_t slot, node, nodes;
    void *scratch;
    size_t scratch_bytes;
    pid_t parent; /* who started the node; another one means it is gone */
    bool online;
};

static bool werr(char **err, const char *fmt, ...)
{
    if (err == NULL) {
        return false;
    }
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(err, fmt, ap) < 0) {
        *err = NULL;
    }
    va_end(ap);
    return false;
}

static bool env_u32(const char *name, uint32_t *out, char **err)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0') {
        return werr(err, "invalid: %s is not set (is this a mesh node?)", name);
    }
    char *end = NULL;
    errno = 0;
    unsigned long x = strtoul(v, &end, 10);
    if (errno != 0 || *end != '\0' || v[0] == '-' || x > UINT32_MAX) {
        return werr(err, "invalid: %s=%s is not an unsigned integer", name, v);
    }
    *out = (uint32_t)x;
    return true;
}

static void report(mesh_cb_node *me, uint32_t code, uint32_t arg)
{
    uint32_t want = MESH_NODE_OK;
    if (atomic_compare_exchange_strong_explicit(&me->error, &want, code,
                                                memory_order_acq_rel,
                                                memory_order_acquire)) {
        atomic_store_explicit(&me->error_arg, arg, memory_order_release);
    }
}

bool mesh_worker_attach(mesh_worker **out, char **err)
{
    if (out == NULL) {
        return werr(err, "invalid: mesh_worker_attach: out is NULL");
    }
    uint32_t mfd = 0, slot = 0, node = 0, nodes = 0, sfd = 0;
    if (!env_u32("MESH_MAILBOX_FD", &mfd, err) ||
        !env_u32("MESH_SLOT", &slot, err) ||
        !env_u32("MESH_NODE", &node, err) ||
        !env_u32("MESH_NODES", &nodes, err)) {
        return false;
    }
    bool has_scratch = getenv("MESH_SCRATCH_FD") != NULL;
    if (has_scratch && !env_u32("MESH_SCRATCH_FD", &sfd, err)) {
        return false;
    }
    if (slot >= MESH_PROG_SLOTS || nodes == 0 || node >= nodes) {
        return werr(err, "invalid: node %u of %u in slot %u is out of range",
                    node, nodes, slot);
    }
    /* A shorter file maps, then faults (SIGBUS) on the first access. */
    struct stat mst;
    if (fstat((int)mfd, &mst) != 0) {
        return werr(err, "system: MESH_MAILBOX_FD=%u: fstat failed: %s", mfd,
                    strerror(errno));
    }
    if (mst.st_size < (off_t)MESH_CB_NODE_BYTES) {
        return werr(err,
                    "invalid: MESH_MAILBOX_FD=%u is not a mesh node's page "
                    "(%lld bytes)",
                    mfd, (long long)mst.st_size);
    }
    void *map = mmap(NULL, MESH_CB_NODE_BYTES, PROT_READ | PROT_WRITE,
                     MAP_SHARED, (int)mfd, 0);
    if (map == MAP_FAILED) {
        return werr(err, "system: mapping the node's page (fd %u) failed: %s",
                    mfd, strerror(errno));
    }
    close((int)mfd);
    mesh_cb_node *me = map;
    if (atomic_load_explicit(&me->magic, memory_order_acquire) !=
            MESH_CB_NODE_MAGIC ||
        me->slot != slot || me->node != node || me->nodes != nodes) {
        munmap(map, MESH_CB_NODE_BYTES);
        return werr(err,
                    "invalid: MESH_MAILBOX_FD=%u is not the page of node %u "
                    "of %u in slot %u",
                    mfd, node, nodes, slot);
    }
    if (me->abi != MESH_RT_ABI_VERSION) {
        report(me, MESH_NODE_ERR_ABI, MESH_RT_ABI_VERSION);
        uint32_t host_abi = me->abi;
        munmap(map, MESH_CB_NODE_BYTES);
        return werr(err,
                    "abi: this program was built for runtime ABI %u; "
                    "the host runs %u",
                    MESH_RT_ABI_VERSION, host_abi);
    }
    mesh_worker *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        munmap(map, MESH_CB_NODE_BYTES);
        return werr(err, "nomem: mesh worker");
    }
    w->me = me;
    w->slot = slot;
    w->node = node;
    w->nodes = nodes;
    w->parent = getppid();
    if (has_scratch) {
        struct stat st;
        void *sm = MAP_FAILED;
        if (fstat((int)sfd, &st) == 0 && st.st_size > 0) {
            sm = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                      MAP_SHARED, (int)sfd, 0);
        }
        if (sm == MAP_FAILED) {
            int e = errno;
            report(me, MESH_NODE_ERR_ATTACH, 0);
            munmap(map, MESH_CB_NODE_BYTES);
            free(w);
            return werr(err,
                        "system: mapping the scratch (fd %u) failed: "
                        "%s",
                        sfd, strerror(e));
        }
        close((int)sfd);
        w->scratch = sm;
        w->scratch_bytes = (size_t)st.st_size;
    }
    *out = w;
    return true;
}

void mesh_worker_online(mesh_worker *w)
{
    if (w == NULL || w->online) {
        return;
    }
    w->online = true;
    atomic_store_explicit(&w->me->online, 1, memory_order_release);
}

bool mesh_worker_halted(const mesh_worker *w)
{
    if (w == NULL) {
        return true;
    }
    return atomic_load_explicit(&w->me->halt, memory_order_acquire) != 0 ||
           getppid() != w->parent;
}

bool mesh_worker_point(mesh_worker *w, uint32_t i, uint64_t value)
{
    if (w == NULL || i >= MESH_POINTS) {
        return false;
    }
    _Atomic uint64_t *p = &w->me->points[i];
    uint64_t cur = atomic_load_explicit(p, memory_order_relaxed);
    while (cur < value &&
           !atomic_compare_exchange_weak_explicit(
               p, &cur, value, memory_order_release, memory_order_relaxed)) {
    }
    return true;
}

void mesh_worker_fail(mesh_worker *w, uint32_t code)
{
    if (w != NULL) {
        report(w->me, MESH_NODE_ERR_PROGRAM, code);
    }
}

uint32_t mesh_worker_slot(const mesh_worker *w)
{
    return w != NULL ? w->slot : MESH_PROG_SLOTS;
}

uint32_t mesh_worker_node(const mesh_worker *w)
{
    return w != NULL ? w->node : 0;
}

uint32_t mesh_worker_nodes(const mesh_worker *w)
{
    return w != NULL ? w->nodes : 0;
}

uint32_t mesh_worker_online_nodes(const mesh_worker *w)
{
    return w != NULL ? atomic_load_explicit(&w->me->online_nodes,
                                            memory_order_acquire)
                     : 0;
}

void *mesh_worker_scratch(const mesh_worker *w, size_t *bytes)
{
    if (bytes != NULL) {
        *bytes = w != NULL ? w->scratch_bytes : 0;
    }
    return w != NULL ? w->scratch : NULL;
}

void mesh_worker_detach(mesh_worker *w)
{
    if (w == NULL) {
        return;
    }
    atomic_store_explicit(&w->me->exited, 1, memory_order_release);
    if (w->scratch != NULL) {
        munmap(w->scratch, w->scratch_bytes);
    }
    munmap(w->me, MESH_CB_NODE_BYTES);
    free(w);
}
