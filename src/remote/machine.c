/* SPDX-License-Identifier: BSD-3-Clause */
/* A machine's description (the spec's F_JOIN) and the table of them.
 *
 * An agent describes its machine once, at open: host name, the agent's
 * pid, NUMA nodes and cores (hwloc), and for every executor kind either
 * its caps (the executor opened here and stays open while the agent
 * serves) or the reason it does not run.  The controller describes its
 * own host the same way without opening any executor.  The table is the
 * descriptions of all ranks back to back, in rank order, as rank 0
 * broadcasts it; every rank parses the same bytes into the same machines.
 *
 * Layout of one description (host byte order: one job runs one ABI):
 *   u32 magic, i32 rank, i32 pid, str hostname, u32 numa, u32 cores,
 *   str node (boot id, IPC namespace, host name: machines with the same
 *   one share System V shared memory), then per kind 0..MESH_BACKEND_COUNT-1:
 * u32 runs; if it runs, its caps (u32 kind, str name, i32 cc_major, i32
 * cc_minor, u32 sms_total, u32 sms, u32 green, u32 blocks_per_sm, u32 family,
 * u32 max_tg_threads, u32 max_shared, str arch) and i64 device; else str why.
 */
#include "remote_internal.h"

#include "../util/util_internal.h"

#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RM_STR_MAX 4096u

static void topology(uint32_t *numa, uint32_t *cores)
{
    *numa = 1;
    *cores = 1;
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) {
        return;
    }
    if (hwloc_topology_load(topo) == 0) {
        int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
        int c = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
        *numa = n > 0 ? (uint32_t)n : 1;
        *cores = c > 0 ? (uint32_t)c : 1;
    }
    hwloc_topology_destroy(topo);
}

/* This node's key: processes with equal keys share a kernel (boot id),
 * System V shared memory (the IPC namespace) and a host name, so that one
 * attaches the other's segments by id. */
static void node_key(char *out, size_t len, const char *host)
{
    rig_node_key(out, len, "ipc", host);
}

/* The CUDA ordinal the backend opened (RIG_MESH_CUDA_DEVICE, mesh/cuda.h). */
static int64_t cuda_ordinal(void)
{
    const char *s = getenv("RIG_MESH_CUDA_DEVICE");
    if (s == NULL || s[0] == '\0') {
        return 0;
    }
    char *end = NULL;
    long v = strtol(s, &end, 10);
    return end != s && *end == '\0' && v >= 0 ? (int64_t)v : 0;
}

static void put_caps(rm_buf *b, const mesh_caps *c)
{
    rm_buf_u32(b, c->kind);
    rm_buf_str(b, c->name);
    rm_buf_u32(b, (uint32_t)c->cc_major);
    rm_buf_u32(b, (uint32_t)c->cc_minor);
    rm_buf_u32(b, c->sms_total);
    rm_buf_u32(b, c->sms);
    rm_buf_u32(b, c->green ? 1 : 0);
    rm_buf_u32(b, c->blocks_per_sm);
    rm_buf_u32(b, c->family);
    rm_buf_u32(b, c->max_tg_threads);
    rm_buf_u32(b, c->max_shared);
    rm_buf_str(b, c->arch);
}

static void get_caps(rm_rd *r, mesh_caps *c)
{
    c->kind = rm_rd_u32(r);
    c->name = rm_rd_str(r, RM_STR_MAX);
    c->cc_major = (int32_t)rm_rd_u32(r);
    c->cc_minor = (int32_t)rm_rd_u32(r);
    c->sms_total = rm_rd_u32(r);
    c->sms = rm_rd_u32(r);
    c->green = rm_rd_u32(r) != 0;
    c->blocks_per_sm = rm_rd_u32(r);
    c->family = rm_rd_u32(r);
    c->max_tg_threads = rm_rd_u32(r);
    c->max_shared = rm_rd_u32(r);
    c->arch = rm_rd_str(r, RM_STR_MAX);
}

/* Opens executor kind on this agent, keeping it; false with why. */
static bool open_executor(rig_remote *rm, uint32_t kind, char **why)
{
    mesh_backend *b = NULL;
    if (!mesh_backend_open(kind, NULL, &b, why)) {
        return false;
    }
    mesh_driver *d = NULL;
    if (!mesh_driver_open(b, &d, why)) {
        mesh_backend_destroy(b);
        return false;
    }
    rm->backends[kind] = b;
    rm->drivers[kind] = d;
    return true;
}

bool rm_describe(rig_remote *rm, uint32_t executors, const char *by,
                 rm_buf *out, char **err)
{
    char host[256] = {0};
    if (gethostname(host, sizeof(host) - 1) != 0) {
        snprintf(host, sizeof(host), "unknown");
    }
    uint32_t numa, cores;
    topology(&numa, &cores);
    rm_buf_u32(out, RM_MAGIC);
    rm_buf_u32(out, (uint32_t)rm->rank);
    rm_buf_u32(out, (uint32_t)getpid());
    rm_buf_str(out, host);
    rm_buf_u32(out, numa);
    rm_buf_u32(out, cores);
    char node[400];
    node_key(node, sizeof(node), host);
    rm_buf_str(out, node);
    for (uint32_t k = 0; k < MESH_BACKEND_COUNT; k++) {
        char *why = NULL;
        bool runs = false;
        if (rm->rank == 0) {
            rig_err(&why, "unsupported: the controller runs no programs");
        } else if ((executors & (1u << k)) == 0) {
            rig_err(&why, "unsupported: left out by %s", by);
        } else {
            runs = open_executor(rm, k, &why);
        }
        rm_buf_u32(out, runs ? 1 : 0);
        if (runs) {
            put_caps(out, rm->backends[k]->ops->caps(rm->backends[k]));
            rm_buf_u64(out, k == MESH_BACKEND_CUDA ? (uint64_t)cuda_ordinal()
                                                   : (uint64_t)-1);
        } else {
            rm_buf_str(out, why != NULL ? why : "unsupported: (no reason)");
        }
        free(why);
    }
    if (out->oom) {
        return rig_err(err, "nomem: this machine's description");
    }
    return true;
}

static void machine_free(rig_remote_machine *m)
{
    free((char *)m->name);
    free((char *)m->hostname);
    free((char *)m->node);
    for (uint32_t k = 0; k < MESH_BACKEND_COUNT; k++) {
        free((char *)m->executors[k].why);
        mesh_caps_free(&m->executors[k].caps);
    }
    memset(m, 0, sizeof(*m));
}

void rm_table_free(rig_remote *rm)
{
    if (rm->machines == NULL) {
        return;
    }
    for (int r = 0; r < rm->size; r++) {
        machine_free(&rm->machines[r]);
    }
    free(rm->machines);
    rm->machines = NULL;
}

static bool parse_one(rm_rd *r, int rank, rig_remote_machine *m)
{
    if (rm_rd_u32(r) != RM_MAGIC || (int)rm_rd_u32(r) != rank) {
        return false;
    }
    m->rank = rank;
    m->pid = (int32_t)rm_rd_u32(r);
    char *host = rm_rd_str(r, 255);
    m->hostname = host;
    m->numa_nodes = rm_rd_u32(r);
    m->cores = rm_rd_u32(r);
    m->node = rm_rd_str(r, 400);
    if (host != NULL) {
        char *name = NULL;
        if (asprintf(&name, "%s:%d", host, rank) < 0) {
            name = NULL;
        }
        m->name = name;
    }
    for (uint32_t k = 0; k < MESH_BACKEND_COUNT && !r->bad; k++) {
        rig_remote_executor *e = &m->executors[k];
        e->kind = k;
        e->device = -1;
        e->runs = rm_rd_u32(r) != 0;
        if (e->runs) {
            get_caps(r, &e->caps);
            e->device = (int64_t)rm_rd_u64(r);
            if (e->caps.kind != k) {
                r->bad = true;
            }
        } else {
            e->why = rm_rd_str(r, RM_STR_MAX);
        }
    }
    return !r->bad && m->name != NULL && m->node != NULL;
}

bool rm_table_parse(rig_remote *rm, const uint8_t *table, size_t len,
                    char **err)
{
    rm->machines = calloc((size_t)rm->size, sizeof(*rm->machines));
    if (rm->machines == NULL) {
        return rig_err(err, "nomem: the table of %d machines", rm->size);
    }
    rm_rd r = {.p = table, .len = len};
    for (int k = 0; k < rm->size; k++) {
        if (!parse_one(&r, k, &rm->machines[k])) {
            rm_table_free(rm);
            return rig_err(err,
                           "invalid: the machine table is malformed at "
                           "rank %d's description",
                           k);
        }
    }
    if (r.at != r.len) {
        rm_table_free(rm);
        return rig_err(err, "invalid: the machine table has %zu extra bytes",
                       r.len - r.at);
    }
    return true;
}

char *rm_runs_list(const rig_remote_machine *m)
{
    /* Most to least common, as people name them. */
    static const uint32_t order[] = {MESH_BACKEND_NATIVE, MESH_BACKEND_WASM,
                                     MESH_BACKEND_CUDA, MESH_BACKEND_METAL};
    rm_buf b = {0};
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        if (!m->executors[order[i]].runs) {
            continue;
        }
        if (b.len > 0) {
            rm_buf_put(&b, ", ", 2);
        }
        const char *n = mesh_backend_name(order[i]);
        rm_buf_put(&b, n, strlen(n));
    }
    if (b.len == 0) {
        rm_buf_put(&b, "nothing", 7);
    }
    rm_buf_put(&b, "", 1);
    if (b.oom) {
        rm_buf_free(&b);
        return NULL;
    }
    return (char *)b.p;
}
