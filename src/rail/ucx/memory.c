/* SPDX-License-Identifier: BSD-3-Clause */
/* End memory: allocated by UCX, bound to a NUMA node, registered with CUDA.
 *
 * UCX allocates it (ucp_mem_map with UCP_MEM_MAP_ALLOCATE) because only
 * memory UCX allocates as shared memory is mapped by a same-node peer
 * (ucp_rkey_ptr), which then moves bytes with plain stores; memory rig
 * allocated itself and registered falls back to CMA, a syscall per put.
 * The pages are bound before they are first touched, so they land on the
 * node; the memset that zeroes the counts touches every page.
 *
 * An end is always in a System V segment, as the programs that drive it
 * need (their nodes attach it by id, ../../mesh/ends.c).  UCX 1.13's
 * allocation is one when its sysv memory domain is in the context; when
 * UCX_TLS leaves shared memory out (UCX_TLS=tcp,self: then no peer maps
 * an end anyway), rig makes the segment itself and registers it. */
#include "ucx_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/shm.h>
#include <unistd.h>

static int bind_warned;
static int cuda_warned;

/* Whether addr is in a System V segment's mapping (/proc/self/maps names
 * it "/SYSV<key> (deleted)").  False when the maps cannot be read. */
static bool in_sysv(const void *addr)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (f == NULL) {
        return false;
    }
    char line[4096];
    bool found = false, sysv = false;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        uintptr_t a = 0, b = 0;
        int name = 0;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %*s %*s %*s %*s %n", &a, &b,
                   &name) < 2 ||
            (uintptr_t)addr < a || (uintptr_t)addr >= b) {
            continue;
        }
        found = true;
        sysv = name > 0 && strncmp(line + name, "/SYSV", 5) == 0;
    }
    fclose(f);
    return sysv;
}

/* A System V segment of len bytes of rig's own, registered with UCX: the
 * segment is marked for removal at once (Linux still lets the user's
 * processes attach it by id, and it goes with the last detach). */
static bool own_segment(rig_ucx *u, size_t len, ucp_mem_h *memh, void **out,
                        char **err)
{
    int id = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
    if (id < 0) {
        return rig_err(err, "%s: shmget(%zu bytes) failed: %s",
                       errno == ENOMEM ? "nomem" : "system", len,
                       strerror(errno));
    }
    void *base = shmat(id, NULL, 0);
    int e = errno;
    shmctl(id, IPC_RMID, NULL);
    if (base == (void *)-1) {
        return rig_err(err, "system: shmat of %zu bytes failed: %s", len,
                       strerror(e));
    }
    ucp_mem_map_params_t p = {
        .field_mask =
            UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
        .address = base,
        .length = len,
    };
    ucs_status_t st = ucp_mem_map(u->context, &p, memh);
    if (st != UCS_OK) {
        shmdt(base);
        return rig_err(err, "system: ucp_mem_map of %zu bytes failed: %s", len,
                       rig_ucs_str(st));
    }
    *out = base;
    return true;
}

static bool endmem_finish(rig_ucx *u, size_t len, ucp_mem_h memh, uint8_t *base,
                          bool own, rig_endmem *m, char **err);

bool rig_endmem_alloc(rig_ucx *u, size_t len, rig_endmem *m, char **err)
{
    uint8_t *base = NULL;
    bool own = false;
    /* UCX picks its allocator from the context: once known, no look at
     * /proc/self/maps per end. */
    if (u->alloc_sysv < 0) {
        ucp_mem_h mh = NULL;
        void *seg = NULL;
        if (!own_segment(u, len, &mh, &seg, err)) {
            return false;
        }
        return endmem_finish(u, len, mh, seg, true, m, err);
    }
    ucp_mem_map_params_t p = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                      UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_FLAGS,
        .address = NULL,
        .length = len,
        .flags = UCP_MEM_MAP_ALLOCATE,
    };
    ucp_mem_h memh;
    ucs_status_t st = ucp_mem_map(u->context, &p, &memh);
    if (st != UCS_OK) {
        return rig_err(err, "%s: ucp_mem_map(%zu bytes) failed: %s",
                       st == UCS_ERR_NO_MEMORY ? "nomem" : "system", len,
                       rig_ucs_str(st));
    }
    ucp_mem_attr_t a = {
        .field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH,
    };
    st = ucp_mem_query(memh, &a);
    if (st != UCS_OK) {
        rig_err(err, "system: ucp_mem_query failed: %s", rig_ucs_str(st));
        goto err_unmap;
    }
    long page = sysconf(_SC_PAGESIZE);
    if (a.length < len || ((uintptr_t)a.address % (uintptr_t)page) != 0) {
        rig_err(err,
                "system: ucp_mem_map gave %zu bytes at %p, not %zu "
                "page-aligned bytes",
                a.length, a.address, len);
        goto err_unmap;
    }
    base = a.address;
    if (u->alloc_sysv == 0) {
        u->alloc_sysv = in_sysv(base) ? 1 : -1;
    }
    if (u->alloc_sysv < 0) {
        ucp_mem_unmap(u->context, memh);
        void *seg = NULL;
        if (!own_segment(u, len, &memh, &seg, err)) {
            return false;
        }
        base = seg;
        own = true;
    }
    return endmem_finish(u, len, memh, base, own, m, err);

err_unmap:
    ucp_mem_unmap(u->context, memh);
    return false;
}

/* Binds, zeroes, registers with CUDA and packs the rkey of the len bytes
 * at base (memh; own: rig's segment); undoes all of it on failure. */
static bool endmem_finish(rig_ucx *u, size_t len, ucp_mem_h memh, uint8_t *base,
                          bool own, rig_endmem *m, char **err)
{
    ucs_status_t st;
    if (u->nodeset != NULL &&
        hwloc_set_area_membind(
            u->topo, base, len, u->nodeset, HWLOC_MEMBIND_BIND,
            HWLOC_MEMBIND_BYNODESET | HWLOC_MEMBIND_MIGRATE) != 0) {
        int e = errno;
        if (u->numa == RIG_ON) {
            rig_err(err, "system: hwloc_set_area_membind failed: %s",
                    strerror(e));
            goto err_unmap;
        }
        rig_log_once(&bind_warned, RIG_LOG_WARN,
                     "hwloc_set_area_membind failed (%s): end memory is "
                     "not NUMA-bound (RIG_NUMA=off silences this)",
                     strerror(e));
    }
    memset(base, 0, len);
    bool cuda = false;
    if (u->cuda != NULL) {
        char *why = NULL;
        bool owned = false;
        if (rig_cuda_register(u->cuda, base, len, &owned, &why)) {
            cuda = owned;
        } else if (u->cuda_switch == RIG_ON) {
            if (err != NULL) {
                *err = why;
            } else {
                free(why);
            }
            goto err_unmap;
        } else {
            rig_log_once(&cuda_warned, RIG_LOG_WARN,
                         "%s: GPUs cannot borrow end memory (RIG_CUDA=off "
                         "silences this)",
                         why != NULL ? why : "nomem");
            free(why);
        }
    }
    void *rkey = NULL;
    size_t rkey_len = 0;
    st = ucp_rkey_pack(u->context, memh, &rkey, &rkey_len);
    if (st != UCS_OK) {
        rig_err(err, "system: ucp_rkey_pack failed: %s", rig_ucs_str(st));
        goto err_unregister;
    }
    m->memh = memh;
    m->base = base;
    m->len = len;
    m->cuda = cuda;
    m->own = own;
    m->rkey = rkey;
    m->rkey_len = rkey_len;
    return true;

err_unregister:
    if (cuda) {
        rig_cuda_unregister(u->cuda, base);
    }
err_unmap:
    ucp_mem_unmap(u->context, memh);
    if (own) {
        shmdt(base);
    }
    return false;
}

void rig_endmem_free(rig_ucx *u, rig_endmem *m)
{
    if (m->memh == NULL) {
        return;
    }
    if (m->rkey != NULL) {
        ucp_rkey_buffer_release(m->rkey);
    }
    if (m->cuda) {
        rig_cuda_unregister(u->cuda, m->base);
    }
    ucp_mem_unmap(u->context, m->memh);
    if (m->own) {
        shmdt(m->base);
    }
    memset(m, 0, sizeof(*m));
}
