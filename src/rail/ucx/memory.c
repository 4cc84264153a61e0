/* SPDX-License-Identifier: BSD-3-Clause */
/* End memory: allocated by UCX, bound to a NUMA node, registered with CUDA.
 *
 * UCX allocates it (ucp_mem_map with UCP_MEM_MAP_ALLOCATE) because only
 * memory UCX allocates as shared memory is mapped by a same-node peer
 * (ucp_rkey_ptr), which then moves bytes with plain stores; memory rig
 * allocated itself and registered falls back to CMA, a syscall per put.
 * The pages are bound before they are first touched, so they land on the
 * node; the memset that zeroes the counts touches every page. */
#include "ucx_internal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static int bind_warned;
static int cuda_warned;

bool rig_endmem_alloc(rig_ucx *u, size_t len, rig_endmem *m, char **err)
{
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
    uint8_t *base = a.address;
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
    m->rkey = rkey;
    m->rkey_len = rkey_len;
    return true;

err_unregister:
    if (cuda) {
        rig_cuda_unregister(u->cuda, base);
    }
err_unmap:
    ucp_mem_unmap(u->context, memh);
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
    memset(m, 0, sizeof(*m));
}
