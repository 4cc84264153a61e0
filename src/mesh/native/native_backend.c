/* SPDX-License-Identifier: BSD-3-Clause */
/* The native backend: programs that are executables, one process per node
 * (the mesh_backend ops; native_internal.h has the decisions). */
#include "native_internal.h"

#include "../child_internal.h"

#include "../../util/util_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static native_backend *nb_of(const mesh_backend *b)
{
    return (native_backend *)b->self;
}

/* ---- the backend's ops -------------------------------------------------- */

static const mesh_caps *op_caps(const mesh_backend *b)
{
    return &nb_of(b)->caps;
}

static bool op_true(const mesh_backend *b)
{
    (void)b;
    return true;
}

static bool op_false(const mesh_backend *b)
{
    (void)b;
    return false;
}

static uint32_t op_isolation(const mesh_backend *b)
{
    (void)b;
    return MESH_ISOLATION_PROCESS;
}

static bool op_mailbox(const mesh_backend *b, uint8_t **host, uint64_t *dev,
                       char **err)
{
    if (host == NULL || dev == NULL) {
        return rig_err(err, "invalid: native mailbox: NULL argument");
    }
    *host = (uint8_t *)nb_of(b)->cb;
    *dev = (uint64_t)(uintptr_t)nb_of(b)->cb;
    return true;
}

static bool op_make_current(const mesh_backend *b, char **err)
{
    (void)b;
    (void)err;
    return true;
}

static const mesh_compiler *op_compiler(const mesh_backend *b)
{
    return &nb_of(b)->comp;
}

static bool op_load(const mesh_backend *b, mesh_prepared *p, mesh_kernel **out,
                    char **err)
{
    if (p == NULL || out == NULL) {
        return rig_err(err, "invalid: native load: NULL argument");
    }
    native_image *im = mesh_native_image_of(p->kernel);
    if (im == NULL) {
        return rig_err(err,
                       "load: program %s has no native image (prepared "
                       "for %s)",
                       p->manifest.name != NULL ? p->manifest.name : "?",
                       mesh_backend_name(p->exec) != NULL
                           ? mesh_backend_name(p->exec)
                           : "another backend");
    }
    if (im->scratch_bytes > 0 && im->scratch == NULL) {
        /* Sealed: a node that shrank the file would make the host's reads
         * of the scratch fault. */
        im->scratch_fd =
            memfd_create("rig-mesh-scratch", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (im->scratch_fd < 0 ||
            ftruncate(im->scratch_fd, (off_t)im->scratch_bytes) != 0 ||
            fcntl(im->scratch_fd, F_ADD_SEALS,
                  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
            return rig_err(err,
                           "load: scratch of %llu bytes for program %s: "
                           "%s",
                           (unsigned long long)im->scratch_bytes, im->name,
                           strerror(errno));
        }
        void *map = mmap(NULL, im->scratch_bytes, PROT_READ | PROT_WRITE,
                         MAP_SHARED, im->scratch_fd, 0);
        if (map == MAP_FAILED) {
            return rig_err(err,
                           "load: mapping the scratch of program %s: "
                           "%s",
                           im->name, strerror(errno));
        }
        im->scratch = map;
    }
    mesh_ends_free(&im->ends);
    if (!mesh_ends_dup(&im->ends, p->ends, err)) {
        return false;
    }
    im->reads = p->manifest.reads;
    im->writes = p->manifest.writes;
    im->nb = nb_of(b);
    *out = p->kernel;
    p->kernel = NULL;
    return true;
}

static bool op_new_stream(const mesh_backend *b, uint32_t slot,
                          const mesh_kernel *k, mesh_stream **out, char **err)
{
    (void)b;
    (void)k;
    if (out == NULL || slot >= MESH_PROG_SLOTS) {
        return rig_err(err,
                       "invalid: native stream: slot %u (of %u) or "
                       "NULL out",
                       slot, MESH_PROG_SLOTS);
    }
    mesh_stream *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return rig_err(err, "nomem: native stream");
    }
    s->exec = MESH_BACKEND_NATIVE;
    s->slot = slot;
    *out = s;
    return true;
}

static bool op_launch(const mesh_backend *b, const mesh_stream *st,
                      const mesh_kernel *k, uint32_t nodes, uint64_t dev,
                      uint32_t slot, char **err)
{
    (void)dev;
    native_backend *nb = nb_of(b);
    native_image *im = mesh_native_image_of(k);
    if (im == NULL || st == NULL || im->nb != nb) {
        return rig_err(err, "invalid: native launch: no native kernel "
                            "loaded by this backend");
    }
    if (slot >= MESH_PROG_SLOTS || st->slot != slot) {
        return rig_err(err,
                       "invalid: native launch: slot %u (stream's %u, "
                       "%u slots)",
                       slot, st->slot, MESH_PROG_SLOTS);
    }
    if (nodes == 0 || nodes > MESH_MANIFEST_MAX_NODES) {
        return rig_err(err, "limits: program %s: %u nodes, not within 1..%u",
                       im->name, nodes, MESH_MANIFEST_MAX_NODES);
    }
    if (nb->slots[slot] != NULL && nb->slots[slot] != im) {
        return rig_err(err,
                       "invalid: native launch: slot %u holds program "
                       "%s",
                       slot, nb->slots[slot]->name);
    }
    if (im->node != NULL) {
        mesh_native_nodes_reap(im);
    }
    if (im->live > 0) {
        return rig_err(err,
                       "invalid: program %s still has %u live node(s) "
                       "in slot %u",
                       im->name, im->live, slot);
    }
    return mesh_native_nodes_start(nb, im, slot, nodes, err);
}

static bool op_query(const mesh_backend *b, const mesh_stream *st,
                     const mesh_kernel *k, bool *done, char **err)
{
    (void)b;
    (void)st;
    native_image *im = mesh_native_image_of(k);
    if (im == NULL || done == NULL) {
        return rig_err(err, "invalid: native query: no native kernel");
    }
    if (im->node != NULL) {
        mesh_native_nodes_reap(im);
        mesh_native_words_gather(im);
    }
    *done = im->live == 0;
    return true;
}

static char *op_crashed(const mesh_backend *b, const mesh_stream *st,
                        const mesh_kernel *k)
{
    (void)b;
    (void)st;
    native_image *im = mesh_native_image_of(k);
    return im != NULL ? mesh_native_nodes_crashed(im) : NULL;
}

static void op_gather(const mesh_backend *b, uint32_t slot)
{
    native_backend *nb = nb_of(b);
    if (slot < MESH_PROG_SLOTS && nb->slots[slot] != NULL) {
        mesh_native_words_gather(nb->slots[slot]);
    }
}

static bool op_unload(const mesh_backend *b, mesh_kernel *k, char **err)
{
    native_backend *nb = nb_of(b);
    native_image *im = mesh_native_image_of(k);
    if (k == NULL) {
        return rig_err(err, "invalid: native unload: kernel is NULL");
    }
    if (im == NULL) {
        mesh_kernel_drop(k);
        return rig_err(err, "invalid: native unload: not a native kernel");
    }
    if (im->live > 0) {
        mesh_native_nodes_stop(im, nb->s.halt_ms, nb->s.grace_ms);
    }
    /* No node rings any more: the ferry's last pass carries what they
     * readied. */
    mesh_native_ends_stop(im);
    /* The last word of the nodes: the slot says how they left. */
    mesh_native_words_gather(im);
    mesh_kernel_drop(k);
    return true;
}

static bool op_stack_limit(const mesh_backend *b, size_t *out, char **err)
{
    if (out == NULL) {
        return rig_err(err, "invalid: native stack_limit: out is NULL");
    }
    if (nb_of(b)->stack_limit > 0) {
        *out = nb_of(b)->stack_limit;
        return true;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_STACK, &rl) != 0) {
        return rig_err(err, "system: getrlimit(RLIMIT_STACK) failed: %s",
                       strerror(errno));
    }
    *out = rl.rlim_cur == RLIM_INFINITY ? SIZE_MAX : (size_t)rl.rlim_cur;
    return true;
}

static bool op_set_stack_limit(const mesh_backend *b, size_t bytes, char **err)
{
    if (bytes < 64u * 1024u) {
        return rig_err(err,
                       "invalid: native stack limit %zu is below 64 "
                       "KiB",
                       bytes);
    }
    nb_of(b)->stack_limit = bytes;
    return true;
}

static bool op_module_scope(const mesh_backend *b, bool has_slot, uint32_t slot,
                            uint32_t *scope)
{
    (void)b;
    *scope = has_slot && slot < MESH_PROG_SLOTS ? slot : MESH_NO_SLOT;
    return true;
}

static uint32_t op_online_timeout_ms(const mesh_backend *b)
{
    return nb_of(b)->s.online_timeout_ms;
}

static void op_destroy(mesh_backend *b)
{
    native_backend *nb = nb_of(b);
    for (uint32_t i = 0; i < MESH_PROG_SLOTS; i++) {
        if (nb->slots[i] != NULL) {
            /* A kernel outliving its backend: its nodes must not. */
            mesh_native_nodes_stop(nb->slots[i], 0, 0);
            mesh_native_words_free(nb->slots[i]);
            nb->slots[i]->nb = NULL;
        }
    }
    free(nb->cb);
    mesh_caps_free(&nb->caps);
    free(nb);
}

static const mesh_backend_ops native_ops = {
    .caps = op_caps,
    .isolated = op_true,
    .resident = op_false,
    .isolation = op_isolation,
    .mailbox = op_mailbox,
    .make_current = op_make_current,
    .compiler = op_compiler,
    .load = op_load,
    .new_stream = op_new_stream,
    .launch = op_launch,
    .query = op_query,
    .unload = op_unload,
    .stack_limit = op_stack_limit,
    .set_stack_limit = op_set_stack_limit,
    .module_scope = op_module_scope,
    .crashed = op_crashed,
    .gather = op_gather,
    .owns_halt = op_true,
    .reads_live = op_false,
    .sample = NULL,
    .online_timeout_ms = op_online_timeout_ms,
    .destroy = op_destroy,
};

/* ---- opening ------------------------------------------------------------ */

/* Cores of the machine, those this process may run on, the CPU's model. */
static void probe_caps(mesh_caps *c)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    c->sms_total = online > 0 ? (uint32_t)online : 1;
    c->sms = c->sms_total;
    const char *model = NULL;
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) == 0) {
        if (hwloc_topology_load(t) == 0) {
            int cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
            hwloc_bitmap_t bound = hwloc_bitmap_alloc();
            if (cores > 0) {
                c->sms_total = (uint32_t)cores;
                c->sms = (uint32_t)cores;
                if (bound != NULL &&
                    hwloc_get_cpubind(t, bound, HWLOC_CPUBIND_PROCESS) == 0) {
                    uint32_t n = 0;
                    for (int i = 0; i < cores; i++) {
                        hwloc_obj_t o =
                            hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, i);
                        if (o != NULL &&
                            hwloc_bitmap_intersects(o->cpuset, bound)) {
                            n++;
                        }
                    }
                    c->sms = n > 0 ? n : c->sms;
                }
            }
            hwloc_bitmap_free(bound);
            hwloc_obj_t pkg = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, 0);
            if (pkg != NULL) {
                model = hwloc_obj_get_info_by_name(pkg, "CPUModel");
            }
        }
        c->name = strdup(model != NULL ? model : "cpu");
        hwloc_topology_destroy(t);
    } else {
        c->name = strdup("cpu");
    }
    c->kind = MESH_BACKEND_NATIVE;
    c->arch = strdup(mesh_native_target());
}

bool mesh_native_open(const mesh_settings *s, mesh_backend **out, char **err)
{
    native_backend *nb = calloc(1, sizeof(*nb));
    if (nb == NULL) {
        return rig_err(err, "nomem: native backend");
    }
    nb->s = *s;
    nb->base.ops = &native_ops;
    nb->base.self = nb;
    nb->comp.ops = &mesh_native_compiler_ops;
    nb->comp.self = nb;
    probe_caps(&nb->caps);
    /* The mailbox is the host's own memory: nodes reach their words
     * through pages of their own (native_words.c). */
    nb->cb = aligned_alloc(64, MESH_CB_BYTES);
    if (nb->caps.name == NULL || nb->caps.arch == NULL || nb->cb == NULL) {
        op_destroy(&nb->base);
        return rig_err(err, "nomem: native backend");
    }
    memset(nb->cb, 0, MESH_CB_BYTES);
    mesh_cb_header *h = &nb->cb->h;
    h->abi = MESH_RT_ABI_VERSION;
    h->backend = mesh_caps_word(&nb->caps);
    h->isolation = MESH_ISOLATION_PROCESS;
    h->slots = MESH_PROG_SLOTS;
    h->slot_bytes = MESH_CB_SLOT_BYTES;
    h->header_bytes = MESH_CB_HEADER_BYTES;
    h->host_pid = (uint32_t)getpid();
    h->sms_total = nb->caps.sms_total;
    h->sms = nb->caps.sms;
    h->size = MESH_CB_BYTES;
    snprintf(h->arch, sizeof(h->arch), "%s", nb->caps.arch);
    atomic_store_explicit(&h->magic, MESH_CB_MAGIC, memory_order_release);
    mesh_backend_on_cleanup(MESH_CLEANUP_NATIVE, mesh_native_nodes_cleanup);
    *out = &nb->base;
    return true;
}
