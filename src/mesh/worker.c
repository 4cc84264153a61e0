/* SPDX-License-Identifier: BSD-3-Clause */
/* The worker side of the native backend: a node attaches to its page and
 * to its rail ends.
 *
 * A node maps only its own page of words (mesh_cb_node), its program's
 * scratch, the table of its program's ends (mesh/abi/ends.h) and the
 * System V segments that table names: the host copies into the page what
 * the node must read and checks what the node writes there.
 *
 * An end's ready carries as the host's transport does for a same-node
 * peer (src/rail/ucx/carrier.c): the transfers' bytes copied into the
 * peer's mapped inbound, back-to-back transfers as one copy, then one
 * release store of the peer's `arrived` and of this end's `sent`.  The
 * carrier's lock and state sit in the shared table, so that the nodes of
 * a launch (processes) carry one at a time and a later launch goes on
 * where this one stopped.
 *
 * libc only (no librig helper), so that the same file builds both into
 * librig and into the static libmesh_worker that test and example programs
 * link to be self-contained executables. */
#include "mesh/worker.h"
#include "mesh/abi/control_block.h"
#include "mesh/abi/ends.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Count offsets of an end's counts area (rig/remote_abi.h). */
#define W_READY_AT 0
#define W_SENT_AT 128
#define W_ARRIVED_AT 256
#define W_COUNTS_BYTES 384
#define W_FAILED ((uint64_t)INT64_MAX)

/* Back-to-back transfers from j on, carried as one copy when all of them
 * are readied. */
typedef struct {
    size_t count;
    size_t bytes;
} w_span;

struct mesh_end {
    struct mesh_worker *w;
    mesh_end_entry *en; /* its entry in the shared table */
    uint32_t input;
    uint8_t *seg, *counts, *out, *in; /* its own segment, attached */
    size_t out_copy, in_copy;
    const mesh_end_transfer *send;
    size_t nsend;
    w_span *span;
    bool mapped;
    uint8_t *peer_seg, *peer_counts, *peer_in; /* MESH_END_MAPPED */
    size_t peer_in_copy;
};

struct mesh_worker {
    mesh_cb_node *me; /* this node's page */
    uint32_t slot, node, nodes;
    void *scratch;
    size_t scratch_bytes;
    pid_t parent; /* who started the node; another one means it is gone */
    bool online;
    mesh_ends_table *ends; /* the table, or NULL */
    size_t ends_bytes;
    uint64_t bound;
    mesh_end end[MESH_INPUTS];
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

/* ---- the ends' memory ------------------------------------------------- */

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Maps the len bytes at p into this process's page tables now, as if
 * written, so that the node's first stores into an end (and a mapped
 * carry's into the peer's) take no page fault each: the host zeroed the
 * pages when it made the end, but a node is a new process each launch and
 * its mapping starts empty.  Per 4 KiB page on the development machine (a
 * virtual machine): a fault on first write 10 us, the populate 0.4 us --
 * 1.5 MiB of a stencil block's result went from 8 ms to 4 ms between the
 * node's last step and the rows' arrival.  An older kernel refuses the
 * advice (EINVAL) and the node faults as before. */
static void populate(void *p, uint64_t len)
{
    (void)madvise(p, (size_t)len, MADV_POPULATE_WRITE);
}

/* Attaches System V segment id, which must hold at least need bytes. */
static uint8_t *seg_attach(int32_t id, uint64_t need, const char *whose,
                           uint32_t input, char **err)
{
    struct shmid_ds ds;
    if (id < 0 || shmctl(id, IPC_STAT, &ds) != 0) {
        werr(err, "system: input %u: %s end's segment %d: shmctl failed: %s",
             input, whose, id, strerror(errno));
        return NULL;
    }
    if ((uint64_t)ds.shm_segsz < need) {
        werr(err,
             "invalid: input %u: %s end's segment %d has %zu bytes, not "
             "the %llu its end needs",
             input, whose, id, (size_t)ds.shm_segsz, (unsigned long long)need);
        return NULL;
    }
    void *p = shmat(id, NULL, 0);
    if (p == (void *)-1) {
        werr(err, "system: input %u: attaching %s end's segment %d: %s", input,
             whose, id, strerror(errno));
        return NULL;
    }
    populate(p, need);
    return p;
}

static void ends_detach(mesh_worker *w)
{
    for (uint32_t i = 0; i < MESH_INPUTS; i++) {
        mesh_end *e = &w->end[i];
        if (e->seg != NULL) {
            shmdt(e->seg);
        }
        if (e->peer_seg != NULL) {
            shmdt(e->peer_seg);
        }
        free(e->span);
        memset(e, 0, sizeof(*e));
    }
    if (w->ends != NULL) {
        munmap(w->ends, w->ends_bytes);
        w->ends = NULL;
    }
    w->bound = 0;
}

/* A list of n transfers at byte offset at of the table, inside it. */
static const mesh_end_transfer *list_at(const mesh_worker *w, uint64_t at,
                                        uint32_t n)
{
    if (at < MESH_ENDS_LISTS_AT || at > w->ends_bytes ||
        (uint64_t)n * sizeof(mesh_end_transfer) > w->ends_bytes - at ||
        at % 8 != 0) {
        return NULL;
    }
    return (const mesh_end_transfer *)((const uint8_t *)w->ends + at);
}

/* Whether [at, at + len) lies inside bytes. */
static bool inside(uint64_t at, uint64_t len, uint64_t bytes)
{
    return at <= bytes && len <= bytes - at;
}

static bool end_attach(mesh_worker *w, uint32_t i, char **err)
{
    mesh_end_entry *en = &w->ends->e[i];
    mesh_end *e = &w->end[i];
    e->w = w;
    e->en = en;
    e->input = i;
    uint64_t out_len = 2 * en->out_copy, in_len = 2 * en->in_copy;
    if (!inside(en->counts_at, W_COUNTS_BYTES, en->shm_bytes) ||
        !inside(en->outbound_at, out_len, en->shm_bytes) ||
        !inside(en->inbound_at, in_len, en->shm_bytes) ||
        en->counts_at % 64 != 0) {
        return werr(err, "invalid: input %u: its end lies outside its segment",
                    i);
    }
    e->seg = seg_attach(en->shm, en->shm_bytes, "its", i, err);
    if (e->seg == NULL) {
        return false;
    }
    e->counts = e->seg + en->counts_at;
    e->out = out_len > 0 ? e->seg + en->outbound_at : NULL;
    e->in = in_len > 0 ? e->seg + en->inbound_at : NULL;
    e->out_copy = (size_t)en->out_copy;
    e->in_copy = (size_t)en->in_copy;
    e->nsend = en->nsend;
    e->send = list_at(w, en->send_at, en->nsend);
    if (en->nsend > 0 && e->send == NULL) {
        return werr(err,
                    "invalid: input %u: its send list is outside the "
                    "table",
                    i);
    }
    for (size_t j = 0; j < e->nsend; j++) {
        const mesh_end_transfer *t = &e->send[j];
        if (t->src < 0 || t->dst < 0 || t->length <= 0 ||
            !inside((uint64_t)t->src, (uint64_t)t->length, e->out_copy)) {
            return werr(err,
                        "invalid: input %u: send[%zu] lies outside an "
                        "outbound copy",
                        i, j);
        }
    }
    if ((en->flags & MESH_END_MAPPED) == 0 || e->nsend == 0) {
        return true;
    }
    uint64_t peer_in_len = 2 * en->peer_in_copy;
    if (!inside(en->peer_counts_at, W_COUNTS_BYTES, en->peer_bytes) ||
        !inside(en->peer_inbound_at, peer_in_len, en->peer_bytes) ||
        en->peer_counts_at % 64 != 0) {
        return werr(err,
                    "invalid: input %u: the peer's end lies outside its "
                    "segment",
                    i);
    }
    for (size_t j = 0; j < e->nsend; j++) {
        const mesh_end_transfer *t = &e->send[j];
        if (!inside((uint64_t)t->dst, (uint64_t)t->length, en->peer_in_copy)) {
            return werr(err,
                        "invalid: input %u: send[%zu] lands outside the "
                        "peer's inbound copy",
                        i, j);
        }
    }
    e->peer_seg =
        seg_attach(en->peer_shm, en->peer_bytes, "the peer's", i, err);
    if (e->peer_seg == NULL) {
        return false;
    }
    e->peer_counts = e->peer_seg + en->peer_counts_at;
    e->peer_in = e->peer_seg + en->peer_inbound_at;
    e->peer_in_copy = (size_t)en->peer_in_copy;
    e->span = calloc(e->nsend, sizeof(*e->span));
    if (e->span == NULL) {
        return werr(err, "nomem: input %u: %zu spans", i, e->nsend);
    }
    for (size_t j = e->nsend; j-- > 0;) {
        const mesh_end_transfer *t = &e->send[j];
        e->span[j].count = 1;
        e->span[j].bytes = (size_t)t->length;
        if (j + 1 < e->nsend && t[1].src == t->src + t->length &&
            t[1].dst == t->dst + t->length) {
            e->span[j].count += e->span[j + 1].count;
            e->span[j].bytes += e->span[j + 1].bytes;
        }
    }
    e->mapped = true;
    return true;
}

/* Maps the table of MESH_ENDS_FD and attaches every bound end. */
static bool ends_attach(mesh_worker *w, char **err)
{
    uint32_t fd = 0;
    if (!env_u32("MESH_ENDS_FD", &fd, err)) {
        return false;
    }
    struct stat st;
    if (fstat((int)fd, &st) != 0) {
        return werr(err, "system: MESH_ENDS_FD=%u: fstat failed: %s", fd,
                    strerror(errno));
    }
    if (st.st_size < (off_t)sizeof(mesh_ends_table)) {
        return werr(err,
                    "invalid: MESH_ENDS_FD=%u is not a table of ends (%lld "
                    "bytes)",
                    fd, (long long)st.st_size);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                     MAP_SHARED, (int)fd, 0);
    if (map == MAP_FAILED) {
        return werr(err, "system: mapping the table of ends (fd %u): %s", fd,
                    strerror(errno));
    }
    close((int)fd);
    w->ends = map;
    w->ends_bytes = (size_t)st.st_size;
    if (atomic_load_explicit(&w->ends->h.magic, memory_order_acquire) !=
            MESH_ENDS_MAGIC ||
        w->ends->h.abi != MESH_RT_ABI_VERSION ||
        w->ends->h.bytes != (uint64_t)st.st_size) {
        return werr(err,
                    "invalid: MESH_ENDS_FD=%u is not a table of ends of "
                    "runtime ABI %u",
                    fd, MESH_RT_ABI_VERSION);
    }
    for (uint32_t i = 0; i < MESH_INPUTS; i++) {
        if ((w->ends->e[i].flags & MESH_END_BOUND) == 0) {
            continue;
        }
        if (!end_attach(w, i, err)) {
            return false;
        }
        w->bound |= (uint64_t)1 << i;
    }
    return true;
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
    if (getenv("MESH_ENDS_FD") != NULL && !ends_attach(w, err)) {
        report(me, MESH_NODE_ERR_ATTACH, 1);
        ends_detach(w);
        if (w->scratch != NULL) {
            munmap(w->scratch, w->scratch_bytes);
        }
        munmap(map, MESH_CB_NODE_BYTES);
        free(w);
        return false;
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
    ends_detach(w);
    atomic_store_explicit(&w->me->exited, 1, memory_order_release);
    if (w->scratch != NULL) {
        munmap(w->scratch, w->scratch_bytes);
    }
    munmap(w->me, MESH_CB_NODE_BYTES);
    free(w);
}

/* ---- rail ends ---------------------------------------------------------- */

uint64_t mesh_worker_inputs(const mesh_worker *w)
{
    return w != NULL ? w->bound : 0;
}

mesh_end *mesh_worker_input(mesh_worker *w, uint32_t input)
{
    if (w == NULL || input >= MESH_INPUTS ||
        (w->bound & ((uint64_t)1 << input)) == 0) {
        return NULL;
    }
    return &w->end[input];
}

mesh_end *mesh_worker_end(mesh_worker *w, int64_t id)
{
    if (w == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; i < MESH_INPUTS; i++) {
        if ((w->bound & ((uint64_t)1 << i)) != 0 && w->end[i].en->id == id) {
            return &w->end[i];
        }
    }
    return NULL;
}

int64_t mesh_end_id(const mesh_end *e)
{
    return e != NULL ? e->en->id : -1;
}

int32_t mesh_end_peer(const mesh_end *e)
{
    return e != NULL ? e->en->peer : -1;
}

int32_t mesh_end_here(const mesh_end *e)
{
    return e != NULL ? e->en->here : -1;
}

uint32_t mesh_end_input(const mesh_end *e)
{
    return e != NULL ? e->input : MESH_INPUTS;
}

void *mesh_end_outbound(const mesh_end *e, unsigned k, size_t *bytes)
{
    bool ok = e != NULL && e->out != NULL && k < 2;
    if (bytes != NULL) {
        *bytes = ok ? e->out_copy : 0;
    }
    return ok ? e->out + k * e->out_copy : NULL;
}

const void *mesh_end_inbound(const mesh_end *e, unsigned k, size_t *bytes)
{
    bool ok = e != NULL && e->in != NULL && k < 2;
    if (bytes != NULL) {
        *bytes = ok ? e->in_copy : 0;
    }
    return ok ? e->in + k * e->in_copy : NULL;
}

static _Atomic uint64_t *count_at(uint8_t *counts, size_t at)
{
    return (_Atomic uint64_t *)(void *)(counts + at);
}

static uint64_t count_load(const mesh_end *e, size_t at)
{
    return e != NULL ? atomic_load_explicit(count_at(e->counts, at),
                                            memory_order_acquire)
                     : 0;
}

/* Raises the count to c (release): never lowers it, never moves it off
 * failure.  Returns what it held before. */
static uint64_t count_raise(uint8_t *counts, size_t at, uint64_t c)
{
    _Atomic uint64_t *p = count_at(counts, at);
    uint64_t cur = atomic_load_explicit(p, memory_order_relaxed);
    while (cur < c && cur != W_FAILED &&
           !atomic_compare_exchange_weak_explicit(
               p, &cur, c, memory_order_release, memory_order_relaxed)) {
    }
    return cur;
}

uint64_t mesh_end_sent(const mesh_end *e)
{
    return count_load(e, W_SENT_AT);
}

uint64_t mesh_end_arrived(const mesh_end *e)
{
    return count_load(e, W_ARRIVED_AT);
}

bool mesh_end_failed(const mesh_end *e)
{
    return e != NULL && (count_load(e, W_READY_AT) == W_FAILED ||
                         count_load(e, W_SENT_AT) == W_FAILED ||
                         count_load(e, W_ARRIVED_AT) == W_FAILED);
}

/* Copies every transfer up to `ready` into the peer's inbound, then stores
 * the peer's `arrived` and this end's `sent`.  The caller holds the
 * entry's wake lock. */
static void carry(mesh_end *e)
{
    mesh_end_entry *en = e->en;
    uint64_t ready = count_load(e, W_READY_AT);
    if (ready == W_FAILED || ready <= en->carried) {
        return;
    }
    const size_t n = e->nsend;
    uint64_t run = en->next_run;
    size_t j = (size_t)en->next_j;
    if (j >= n) {
        j = 0; /* a table written over: start the run again */
    }
    for (uint64_t c = en->carried; c < ready;) {
        const mesh_end_transfer *t = &e->send[j];
        size_t k = (size_t)(run & 1);
        size_t m = e->span[j].count;
        if (m <= 1 || m > ready - c) {
            m = 1;
        }
        memcpy(e->peer_in + k * e->peer_in_copy + (size_t)t->dst,
               e->out + k * e->out_copy + (size_t)t->src,
               m == 1 ? (size_t)t->length : e->span[j].bytes);
        c += m;
        j += m;
        if (j == n) {
            j = 0;
            run++;
        }
    }
    count_raise(e->peer_counts, W_ARRIVED_AT, ready);
    en->next_run = run;
    en->next_j = j;
    en->carried = ready;
    count_raise(e->counts, W_SENT_AT, ready);
}

static long futex(_Atomic uint32_t *uaddr, int op, uint32_t val,
                  const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)uaddr, op, val, ts, NULL, 0);
}

void mesh_end_ready(mesh_end *e, uint64_t c)
{
    if (e == NULL || c == 0 || c >= W_FAILED) {
        return;
    }
    if (count_raise(e->counts, W_READY_AT, c) == W_FAILED || e->nsend == 0) {
        return;
    }
    if (!e->mapped) {
        /* The host carries: ring, and wake its ferry if it sleeps.  Both
         * sides are seq_cst: either the ferry sees the new bell, or this
         * sees it asleep (a store-then-load handshake). */
        mesh_ends_header *h = &e->w->ends->h;
        atomic_fetch_add(&h->bell, 1);
        if (atomic_load(&h->asleep) != 0) {
            futex(&h->bell, FUTEX_WAKE, 1, NULL);
        }
        return;
    }
    /* One carrier at a time (src/rail/base/carrier.c's wake lock): the
     * node that moves the counter off 0 carries until no wake came in. */
    _Atomic uint64_t *wakes = &e->en->wakes;
    uint64_t seen =
        atomic_fetch_add_explicit(wakes, 1, memory_order_acq_rel) + 1;
    if (seen != 1) {
        return;
    }
    for (;;) {
        carry(e);
        if (atomic_compare_exchange_strong_explicit(
                wakes, &seen, 0, memory_order_acq_rel, memory_order_acquire)) {
            return;
        }
    }
}

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* How a wait shares the CPU (the table's E_WAIT, mesh/abi/ends.h): spin
 * looks with a pause, then yield the core between looks, then sleep
 * between looks so that a node that waits long costs little.  The slot's
 * halt is read every WAIT_HALT_EVERY looks; whether the parent is gone
 * (getppid, a system call) as often once the wait yields or sleeps, and
 * every WAIT_PARENT_EVERY looks while it spins, so that a spinning wait
 * stays a loop of loads (as the host's waits are) and still notices a
 * lost parent within a millisecond or so. */
#define WAIT_SPINS 4096u
#define WAIT_YIELD_NS 2000000ull
#define WAIT_SLEEP_NS 50000L
#define WAIT_HALT_EVERY 256u
#define WAIT_PARENT_EVERY 16384u

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* mesh_worker_halted for a wait at look `spin` of its spins (0 once it
 * yields or sleeps): the parent only every WAIT_PARENT_EVERY spins. */
static bool wait_halted(const mesh_worker *w, uint32_t spin)
{
    if (atomic_load_explicit(&w->me->halt, memory_order_acquire) != 0) {
        return true;
    }
    return (spin == 0 || spin % WAIT_PARENT_EVERY == WAIT_PARENT_EVERY - 1) &&
           getppid() != w->parent;
}

static bool wait_count(const mesh_end *e, size_t at, uint64_t c)
{
    if (e == NULL) {
        return false;
    }
    uint32_t mode = e->w->ends->h.wait;
    uint32_t spins = mode == MESH_WAIT_SPIN    ? UINT32_MAX
                     : mode == MESH_WAIT_AUTO  ? WAIT_SPINS
                     : mode == MESH_WAIT_BLOCK ? 16u
                                               : 0u;
    uint64_t yield_ns = mode == MESH_WAIT_BLOCK ? 0 : WAIT_YIELD_NS;
    _Atomic uint64_t *p = count_at(e->counts, at);
    uint64_t since = 0;
    for (uint32_t look = 0;; look++) {
        uint64_t v = atomic_load_explicit(p, memory_order_acquire);
        if (v == W_FAILED) {
            return false;
        }
        if (v >= c) {
            return true;
        }
        if (look % WAIT_HALT_EVERY == WAIT_HALT_EVERY - 1 &&
            wait_halted(e->w, look < spins ? look : 0)) {
            return false;
        }
        if (look < spins) {
            relax();
            continue;
        }
        if (since == 0) {
            since = now_ns();
        }
        if (since != UINT64_MAX && (look & 63u) == 0 &&
            now_ns() - since >= yield_ns) {
            since = UINT64_MAX; /* a long wait: sleep from now on */
        }
        if (since == UINT64_MAX) {
            struct timespec ts = {0, WAIT_SLEEP_NS};
            nanosleep(&ts, NULL);
        } else {
            sched_yield();
        }
    }
}

bool mesh_end_wait_arrived(const mesh_end *e, uint64_t c)
{
    return wait_count(e, W_ARRIVED_AT, c);
}

bool mesh_end_wait_sent(const mesh_end *e, uint64_t c)
{
    return wait_count(e, W_SENT_AT, c);
}
