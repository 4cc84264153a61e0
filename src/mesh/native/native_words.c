/* SPDX-License-Identifier: BSD-3-Clause */
/* The native nodes' own pages: made per launch, gathered and checked.
 *
 * Why a page per node and no mapping of the mailbox: a process given the
 * mailbox's memfd could map it writable however the host maps it (or open
 * it again through /proc), and one writable mapping of the block reaches
 * every slot and the header.  A memfd of its own, one page, is all a node
 * can reach; it is sealed against shrinking (a shrunk file would make the
 * host's reads fault) and growing.  The host reads the pages, takes only
 * values a node may write (0 or 1 for a flag, a known error code), counts
 * a node online only by its own page, and keeps the points' maxima in its
 * own memory, so what a node writes can neither hurt another program nor
 * make its own report lie about another node. */
#include "native_internal.h"

#include "../../util/util_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t page_bytes(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > (long)MESH_CB_NODE_BYTES ? (size_t)p : MESH_CB_NODE_BYTES;
}

bool mesh_native_words_make(uint32_t slot, uint32_t node, uint32_t nodes,
                            int *fd, mesh_cb_node **words, char **err)
{
    size_t bytes = page_bytes();
    int raw = memfd_create("rig-mesh-node", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    int f = raw >= 0 ? fcntl(raw, F_DUPFD_CLOEXEC, 10) : -1;
    int e = errno;
    if (raw >= 0) {
        close(raw);
    }
    if (f < 0 || ftruncate(f, (off_t)bytes) != 0 ||
        fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        e = f < 0 ? e : errno;
        if (f >= 0) {
            close(f);
        }
        return rig_err(err, "system: the page of node %u failed: %s", node,
                       strerror(e));
    }
    mesh_cb_node *w =
        mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    if (w == MAP_FAILED) {
        e = errno;
        close(f);
        return rig_err(err, "system: mapping the page of node %u failed: %s",
                       node, strerror(e));
    }
    w->abi = MESH_RT_ABI_VERSION;
    w->host_pid = (uint32_t)getpid();
    w->slot = slot;
    w->node = node;
    w->nodes = nodes;
    atomic_store_explicit(&w->magic, MESH_CB_NODE_MAGIC, memory_order_release);
    *fd = f;
    *words = w;
    return true;
}

void mesh_native_words_free(native_image *im)
{
    size_t bytes = page_bytes();
    for (uint32_t i = 0; im->node != NULL && i < im->nodes; i++) {
        if (im->node[i].words != NULL) {
            munmap(im->node[i].words, bytes);
            im->node[i].words = NULL;
        }
    }
}

void mesh_native_words_halt(native_image *im)
{
    for (uint32_t i = 0; im->node != NULL && i < im->nodes; i++) {
        if (im->node[i].words != NULL) {
            atomic_store_explicit(&im->node[i].words->halt, 1,
                                  memory_order_release);
        }
    }
}

/* Whether node i's words are what a node may write; else im->broken says
 * why (the first node found so, once). */
static bool words_ok(native_image *im, uint32_t i, uint32_t online,
                     uint32_t exited, uint32_t error)
{
    if (online <= 1 && exited <= 1 && error <= MESH_NODE_ERR_PROGRAM) {
        return true;
    }
    if (im->broken == NULL &&
        asprintf(&im->broken,
                 "node %u broke its words (N_ONLINE %u, N_EXITED %u, "
                 "N_ERROR %u; a node may write 0 or 1, 0 or 1, 0 to %u)",
                 i, online, exited, error, MESH_NODE_ERR_PROGRAM) < 0) {
        im->broken = NULL;
    }
    return false;
}

void mesh_native_words_gather(native_image *im)
{
    if (im->nb == NULL || im->slot >= MESH_PROG_SLOTS || im->node == NULL) {
        return;
    }
    mesh_cb_slot *s = &im->nb->cb->slot[im->slot];
    uint32_t online = 0, exited = 0;
    for (uint32_t i = 0; i < im->nodes; i++) {
        mesh_cb_node *n = im->node[i].words;
        if (n == NULL) {
            continue;
        }
        uint32_t on = atomic_load_explicit(&n->online, memory_order_acquire);
        uint32_t ex = atomic_load_explicit(&n->exited, memory_order_acquire);
        uint32_t er = atomic_load_explicit(&n->error, memory_order_acquire);
        if (!words_ok(im, i, on, ex, er)) {
            continue; /* nothing of a broken page counts */
        }
        online += on;
        exited += ex;
        if (er != MESH_NODE_OK && !im->error_seen) {
            im->error_seen = true;
            uint32_t arg =
                atomic_load_explicit(&n->error_arg, memory_order_acquire);
            atomic_store_explicit(&s->error_node, i, memory_order_relaxed);
            atomic_store_explicit(&s->error_arg, arg, memory_order_relaxed);
            atomic_store_explicit(&s->error, er, memory_order_release);
        }
        for (uint32_t k = 0; k < MESH_POINTS; k++) {
            uint64_t v =
                atomic_load_explicit(&n->points[k], memory_order_acquire);
            if (v > im->points[k]) {
                im->points[k] = v;
            }
        }
    }
    for (uint32_t k = 0; k < MESH_POINTS; k++) {
        atomic_store_explicit(&s->points[k], im->points[k],
                              memory_order_release);
    }
    atomic_store_explicit(&s->exited, exited, memory_order_release);
    uint32_t was =
        atomic_exchange_explicit(&s->online, online, memory_order_acq_rel);
    uint32_t halt = atomic_load_explicit(&s->halt, memory_order_acquire);
    for (uint32_t i = 0; i < im->nodes && (was != online || halt != 0); i++) {
        mesh_cb_node *n = im->node[i].words;
        if (n != NULL) {
            atomic_store_explicit(&n->online_nodes, online,
                                  memory_order_release);
            if (halt != 0) {
                atomic_store_explicit(&n->halt, 1, memory_order_release);
            }
        }
    }
}
