/* SPDX-License-Identifier: BSD-3-Clause */
/* A program's rail ends on the host side: where an end's memory is, the
 * bindings' checks and copies, and the table nodes read (mesh/ends.h,
 * mesh/abi/ends.h).
 *
 * Where an end is.  UCX allocates an end with ucp_mem_map(ALLOCATE) so
 * that a same-node peer maps it; measured with UCX 1.13.1 here, that
 * allocation is a System V segment (UCX's first allocator, md:sysv),
 * mapped as "/SYSV<key> (deleted)" with the segment's id as the mapping's
 * inode (Linux's ipc/shm.c gives the segment's file the id as its inode
 * number).  Another process of the user attaches it by that id, which
 * Linux allows even once the segment is marked for removal -- what UCX's
 * own peers do through ucp_rkey_ptr.  So a node reaches an end without a
 * change to the transport and without a copy, and an agent's carrier and
 * its node's share one memory. */
#include "mesh_internal.h"

#include "mesh/ends.h"

#include "../util/util_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/shm.h>
#include <unistd.h>

/* ---- where an end is ------------------------------------------------- */

/* The mapping of /proc/self/maps that holds addr: [*lo, *hi), its offset
 * into what it maps, its inode and whether it is a System V segment. */
static bool mapping_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi,
                       uint64_t *off, uint64_t *inode, bool *sysv, char **err)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (f == NULL) {
        return rig_err(err, "system: opening /proc/self/maps failed: %s",
                       strerror(errno));
    }
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        uintptr_t a = 0, b = 0;
        uint64_t o = 0, ino = 0;
        int name = 0;
        if (sscanf(line,
                   "%" SCNxPTR "-%" SCNxPTR " %*s %" SCNx64 " %*s %" SCNu64
                   " %n",
                   &a, &b, &o, &ino, &name) < 4 ||
            addr < a || addr >= b) {
            continue;
        }
        found = true;
        *lo = a;
        *hi = b;
        *off = o;
        *inode = ino;
        *sysv = name > 0 && strncmp(line + name, "/SYSV", 5) == 0;
    }
    fclose(f);
    if (!found) {
        return rig_err(err, "unsupported: address %p is in no mapping",
                       (void *)addr);
    }
    return true;
}

bool mesh_end_place_of(const rig_end *e, mesh_end_place *out, char **err)
{
    if (e == NULL || out == NULL) {
        return rig_err(err, "invalid: %s is NULL", e == NULL ? "e" : "out");
    }
    rig_area c = rig_end_counts(e), o = rig_end_outbound(e),
             in = rig_end_inbound(e);
    uintptr_t lo = 0, hi = 0;
    uint64_t off = 0, inode = 0;
    bool sysv = false;
    if (!mapping_of((uintptr_t)c.base, &lo, &hi, &off, &inode, &sysv, err)) {
        return false;
    }
    if (!sysv || inode > INT32_MAX) {
        return rig_err(err,
                       "unsupported: the end at %p is not in a System V "
                       "segment (its transport allocated it elsewhere)",
                       (void *)c.base);
    }
    /* Every area in the same mapping. */
    rig_area all[3] = {c, o, in};
    for (int i = 0; i < 3; i++) {
        uintptr_t a = (uintptr_t)all[i].base;
        if (all[i].len > 0 && (a < lo || a > hi || all[i].len > hi - a)) {
            return rig_err(err,
                           "unsupported: the end at %p spans more than one "
                           "segment",
                           (void *)c.base);
        }
    }
    struct shmid_ds ds;
    if (shmctl((int)inode, IPC_STAT, &ds) != 0) {
        return rig_err(err,
                       "unsupported: the end at %p is in System V segment "
                       "%" PRIu64 ", which shmctl cannot see: %s",
                       (void *)c.base, inode, strerror(errno));
    }
    uintptr_t base = lo - (uintptr_t)off;
    out->shm = (int32_t)inode;
    out->bytes = (uint64_t)ds.shm_segsz;
    out->counts_at = (uint64_t)((uintptr_t)c.base - base);
    out->outbound_at =
        o.len > 0 ? (uint64_t)((uintptr_t)o.base - base) : out->counts_at;
    out->inbound_at =
        in.len > 0 ? (uint64_t)((uintptr_t)in.base - base) : out->counts_at;
    return true;
}

/* ---- bindings ------------------------------------------------------------ */

uint64_t mesh_ends_mask(const mesh_ends *ends)
{
    uint64_t m = 0;
    for (size_t i = 0; ends != NULL && i < ends->n; i++) {
        if (ends->b[i].input < MESH_INPUTS) {
            m |= (uint64_t)1 << ends->b[i].input;
        }
    }
    return m;
}

bool mesh_ends_check(const mesh_ends *ends, uint64_t reads, uint64_t writes,
                     char **err)
{
    if (ends == NULL || ends->n == 0) {
        return true;
    }
    if (ends->b == NULL) {
        return rig_err(err, "invalid: ends->b is NULL with %zu bindings",
                       ends->n);
    }
    uint64_t seen = 0;
    for (size_t i = 0; i < ends->n; i++) {
        const mesh_end_binding *b = &ends->b[i];
        if (b->input >= MESH_INPUTS) {
            return rig_err(err, "invalid: input %u is not below %u", b->input,
                           MESH_INPUTS);
        }
        uint64_t bit = (uint64_t)1 << b->input;
        if ((seen & bit) != 0) {
            return rig_err(err, "invalid: input %u is bound twice", b->input);
        }
        seen |= bit;
        if (((reads | writes) & bit) == 0) {
            return rig_err(err,
                           "invalid: input %u is neither read nor written by "
                           "the program (its manifest's \"reads\" and "
                           "\"writes\")",
                           b->input);
        }
        if (b->end == NULL) {
            return rig_err(err, "invalid: input %u has no end", b->input);
        }
        char *why = NULL;
        if (!rig_check_transfers(b->send, b->nsend, b->receive, b->nreceive,
                                 &why)) {
            const char *w = why != NULL ? why : "?";
            if (strncmp(w, "invalid: ", 9) == 0) {
                w += 9;
            }
            bool r = rig_err(err, "invalid: input %u's lists: %s", b->input, w);
            free(why);
            return r;
        }
        if ((writes & bit) != 0 && b->nsend == 0) {
            return rig_err(err,
                           "invalid: the program writes input %u, whose end "
                           "(rail %lld) sends nothing",
                           b->input, (long long)b->id);
        }
        if ((reads & bit) != 0 && b->nreceive == 0) {
            return rig_err(err,
                           "invalid: the program reads input %u, whose end "
                           "(rail %lld) receives nothing",
                           b->input, (long long)b->id);
        }
    }
    return true;
}

static bool list_dup(const rig_transfer *t, size_t n, const rig_transfer **out)
{
    *out = NULL;
    if (n == 0) {
        return true;
    }
    rig_transfer *c = malloc(n * sizeof(*c));
    if (c == NULL) {
        return false;
    }
    memcpy(c, t, n * sizeof(*c));
    *out = c;
    return true;
}

void mesh_ends_free(mesh_ends *e)
{
    if (e == NULL) {
        return;
    }
    for (size_t i = 0; e->b != NULL && i < e->n; i++) {
        free((void *)e->b[i].send);
        free((void *)e->b[i].receive);
        rig_end_release(e->b[i].end);
    }
    free((void *)e->b);
    e->b = NULL;
    e->n = 0;
}

bool mesh_ends_dup(mesh_ends *dst, const mesh_ends *src, char **err)
{
    memset(dst, 0, sizeof(*dst));
    if (src == NULL || src->n == 0) {
        return true;
    }
    mesh_end_binding *b = calloc(src->n, sizeof(*b));
    if (b == NULL) {
        return rig_err(err, "nomem: %zu bindings", src->n);
    }
    dst->b = b;
    for (size_t i = 0; i < src->n; i++) {
        b[i] = src->b[i];
        b[i].send = NULL;
        b[i].receive = NULL;
        b[i].end = rig_end_retain(src->b[i].end);
        dst->n = i + 1;
        if (!list_dup(src->b[i].send, src->b[i].nsend, &b[i].send) ||
            !list_dup(src->b[i].receive, src->b[i].nreceive, &b[i].receive)) {
            mesh_ends_free(dst);
            return rig_err(err, "nomem: input %u's lists", src->b[i].input);
        }
    }
    return true;
}

/* ---- the table ----------------------------------------------------------- */

size_t mesh_ends_table_bytes(const mesh_ends *ends)
{
    size_t n = sizeof(mesh_ends_table);
    for (size_t i = 0; ends != NULL && i < ends->n; i++) {
        n += (ends->b[i].nsend + ends->b[i].nreceive) *
             sizeof(mesh_end_transfer);
    }
    return (n + 4095) & ~(size_t)4095;
}

/* The ranks this node's launcher started here, or 0 when none says. */
static long local_ranks(void)
{
    static const char *const vars[] = {
        "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
        "MV2_COMM_WORLD_LOCAL_SIZE", "PALS_LOCAL_SIZE", NULL};
    for (size_t i = 0; vars[i] != NULL; i++) {
        const char *v = getenv(vars[i]);
        long n = v != NULL ? strtol(v, NULL, 10) : 0;
        if (n > 0) {
            return n;
        }
    }
    return 0;
}

/* How the nodes wait: as the host's waits are told to (RIG_WAIT); auto
 * yields from the first miss when the node is oversubscribed -- every
 * rank of this node running as many busy nodes as this launch has more
 * than the CPUs this process may use (spinning then starves the peer a
 * node waits for; measured: a stencil 1.5x MPI's, against 0.8x with
 * yields) -- and spins first otherwise. */
static uint32_t wait_mode(uint32_t nodes)
{
    const char *v = getenv("RIG_WAIT");
    if (v != NULL && strcmp(v, "spin") == 0) {
        return MESH_WAIT_SPIN;
    }
    if (v != NULL && strcmp(v, "yield") == 0) {
        return MESH_WAIT_YIELD;
    }
    if (v != NULL && strcmp(v, "block") == 0) {
        return MESH_WAIT_BLOCK;
    }
    cpu_set_t set;
    long cpus = sched_getaffinity(0, sizeof(set), &set) == 0
                    ? (long)CPU_COUNT(&set)
                    : sysconf(_SC_NPROCESSORS_ONLN);
    long ranks = local_ranks();
    if (cpus > 0 && (ranks > 0 ? ranks : 1) * (long)nodes > cpus) {
        return MESH_WAIT_YIELD;
    }
    return MESH_WAIT_AUTO;
}

static uint64_t put_list(mesh_ends_table *t, uint64_t *at,
                         const rig_transfer *l, size_t n)
{
    uint64_t here = *at;
    if (n > 0) {
        memcpy((uint8_t *)t + here, l, n * sizeof(mesh_end_transfer));
    }
    *at += n * sizeof(mesh_end_transfer);
    return here;
}

/* Whether a RIG_* switch is not set off (unset, auto and on are on). */
static bool switch_on(const char *name)
{
    const char *v = getenv(name);
    return v == NULL || (strcmp(v, "off") != 0 && strcmp(v, "0") != 0 &&
                         strcmp(v, "no") != 0 && strcmp(v, "n") != 0);
}

bool mesh_ends_table_fill(mesh_ends_table *t, size_t bytes,
                          const mesh_ends *ends, uint64_t reads,
                          uint64_t writes, uint32_t nodes, bool places,
                          char **err)
{
    _Static_assert(sizeof(mesh_end_transfer) == sizeof(rig_transfer),
                   "the table's transfers are rig_transfers");
    memset(t, 0, bytes);
    uint64_t at = MESH_ENDS_LISTS_AT;
    /* RIG_SHM_STORES=off: the transport carries by puts only (testing the
     * network path), and so do the nodes' ends: their host carries.
     * RIG_MESH_NODE_STORES=off: the host's ferry carries, by the
     * transport's own means (measuring the node's stores against it). */
    bool stores =
        switch_on("RIG_SHM_STORES") && switch_on("RIG_MESH_NODE_STORES");
    for (size_t i = 0; ends != NULL && i < ends->n; i++) {
        const mesh_end_binding *b = &ends->b[i];
        mesh_end_entry *en = &t->e[b->input];
        uint64_t bit = (uint64_t)1 << b->input;
        rig_area o = rig_end_outbound(b->end), in = rig_end_inbound(b->end);
        en->id = b->id;
        en->peer = b->peer;
        en->here = b->here;
        en->flags = MESH_END_BOUND;
        en->flags |= b->nsend > 0 ? MESH_END_SENDS : 0;
        en->flags |= b->nreceive > 0 ? MESH_END_RECEIVES : 0;
        en->flags |= (reads & bit) != 0 ? MESH_END_READS : 0;
        en->flags |= (writes & bit) != 0 ? MESH_END_WRITES : 0;
        en->out_copy = o.len / 2;
        en->in_copy = in.len / 2;
        en->shm = -1;
        en->peer_shm = -1;
        if (places) {
            mesh_end_place pl;
            if (!mesh_end_place_of(b->end, &pl, err)) {
                return rig_err_wrap(err, "input %u (rail %lld)", b->input,
                                    (long long)b->id);
            }
            en->shm = pl.shm;
            en->shm_bytes = pl.bytes;
            en->counts_at = pl.counts_at;
            en->outbound_at = pl.outbound_at;
            en->inbound_at = pl.inbound_at;
        }
        if (b->nsend > 0 && b->peer_place.shm >= 0 && stores) {
            en->flags |= MESH_END_MAPPED;
            en->peer_shm = b->peer_place.shm;
            en->peer_bytes = b->peer_place.bytes;
            en->peer_counts_at = b->peer_place.counts_at;
            en->peer_inbound_at = b->peer_place.inbound_at;
            en->peer_in_copy = rig_copy_bytes(b->send, b->nsend, RIG_BY_DST);
        }
        en->nsend = (uint32_t)b->nsend;
        en->nreceive = (uint32_t)b->nreceive;
        en->send_at = put_list(t, &at, b->send, b->nsend);
        en->receive_at = put_list(t, &at, b->receive, b->nreceive);
        /* The carrier goes on from what was carried (`sent` is the
         * carrier's alone); a failed end carries nothing anyway. */
        uint64_t sent = rig_end_sent(b->end);
        if (b->nsend > 0 && sent != RIG_COUNT_FAILED) {
            en->carried = sent;
            en->next_run = sent / b->nsend;
            en->next_j = sent % b->nsend;
        }
        t->h.bound |= bit;
    }
    t->h.abi = MESH_RT_ABI_VERSION;
    t->h.bytes = bytes;
    t->h.wait = wait_mode(nodes);
    atomic_store_explicit(&t->h.magic, MESH_ENDS_MAGIC, memory_order_release);
    return true;
}
