/* SPDX-License-Identifier: BSD-3-Clause */
/* The spec's free functions: caps, labels, wrappers, defaults, picking. */
#include "mesh/backend.h"
#include "mesh/executors.h"

#include "mesh_internal.h"

#include "../util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- caps and labels ---------------------------------------------------- */

uint32_t mesh_caps_word(const mesh_caps *c)
{
    return c == NULL ? 0 : MESH_BACKEND_WORD(c->kind, c->family);
}

const char *mesh_caps_backend_name(const mesh_caps *c)
{
    const char *n = c == NULL ? NULL : mesh_backend_name(c->kind);
    return n != NULL ? n : "unknown";
}

static char *dup_or_null(const char *s)
{
    return s == NULL ? NULL : strdup(s);
}

void mesh_caps_copy(mesh_caps *dst, const mesh_caps *src)
{
    if (dst == NULL || src == NULL || dst == src) {
        return;
    }
    *dst = *src;
    dst->name = dup_or_null(src->name);
    dst->arch = dup_or_null(src->arch);
}

void mesh_caps_free(mesh_caps *c)
{
    if (c == NULL) {
        return;
    }
    free(c->name);
    free(c->arch);
    memset(c, 0, sizeof(*c));
}

char *mesh_backend_label(uint32_t word)
{
    uint32_t kind = MESH_BACKEND_WORD_KIND(word);
    uint32_t family = MESH_BACKEND_WORD_FAMILY(word);
    char *s = NULL;
    int n;
    if (kind == MESH_BACKEND_METAL) {
        n = asprintf(&s, "metal-apple%u", family);
    } else if (kind < MESH_BACKEND_COUNT) {
        n = asprintf(&s, "%s", mesh_backend_name(kind));
    } else {
        n = asprintf(&s, "backend%u", kind);
    }
    return n < 0 ? NULL : s;
}

/* ---- kernels and streams ------------------------------------------------ */

#define CHECK_KERNEL(k, out, what)                                             \
    do {                                                                       \
        if ((k) == NULL || (k)->ops == NULL || (out) == NULL) {                \
            return rig_err(err, "invalid: %s: %s", what,                       \
                           (k) == NULL        ? "kernel is NULL"               \
                           : (k)->ops == NULL ? "kernel has no ops"            \
                                              : "out is NULL");                \
        }                                                                      \
    } while (0)

bool mesh_kernel_regs(const mesh_kernel *k, uint32_t *out, char **err)
{
    CHECK_KERNEL(k, out, "mesh_kernel_regs");
    if (k->ops->regs == NULL) {
        *out = 0;
        return true;
    }
    return k->ops->regs(k, out, err);
}

bool mesh_kernel_local_bytes(const mesh_kernel *k, uint32_t *out, char **err)
{
    CHECK_KERNEL(k, out, "mesh_kernel_local_bytes");
    if (k->ops->local_bytes == NULL) {
        *out = 0;
        return true;
    }
    return k->ops->local_bytes(k, out, err);
}

bool mesh_kernel_max_blocks_per_sm(const mesh_kernel *k, uint32_t *out,
                                   char **err)
{
    CHECK_KERNEL(k, out, "mesh_kernel_max_blocks_per_sm");
    if (k->ops->max_blocks_per_sm == NULL) {
        *out = 1;
        return true;
    }
    return k->ops->max_blocks_per_sm(k, out, err);
}

uint64_t mesh_kernel_scratch(const mesh_kernel *k)
{
    if (k == NULL || k->ops == NULL || k->ops->scratch == NULL) {
        return 0;
    }
    return k->ops->scratch(k);
}

bool mesh_kernel_global_u32(const mesh_kernel *k, const char *name,
                            uint32_t *out, char **err)
{
    CHECK_KERNEL(k, out, "mesh_kernel_global_u32");
    if (name == NULL) {
        return rig_err(err, "invalid: mesh_kernel_global_u32: name is NULL");
    }
    if (k->ops->global_u32 == NULL) {
        return rig_err(err, "missing: the image has no global %s", name);
    }
    return k->ops->global_u32(k, name, out, err);
}

void mesh_kernel_drop(mesh_kernel *k)
{
    if (k == NULL) {
        return;
    }
    if (k->ops != NULL && k->ops->drop != NULL) {
        k->ops->drop(k);
    }
    free(k);
}

void mesh_stream_drop(mesh_stream *s)
{
    if (s == NULL) {
        return;
    }
    if (s->drop != NULL) {
        s->drop(s);
    }
    free(s);
}

void mesh_prepared_free(mesh_prepared *p)
{
    if (p == NULL) {
        return;
    }
    mesh_manifest_free(&p->manifest);
    free(p->code);
    mesh_payload_free(&p->src);
    mesh_kernel_drop(p->kernel);
    memset(p, 0, sizeof(*p));
}

/* ---- the trait's defaults ----------------------------------------------- */

char *mesh_backend_crashed(const mesh_backend *b, const mesh_stream *st,
                           const mesh_kernel *k)
{
    if (b == NULL || b->ops == NULL || b->ops->crashed == NULL) {
        return NULL;
    }
    return b->ops->crashed(b, st, k);
}

bool mesh_backend_owns_halt(const mesh_backend *b)
{
    if (b == NULL || b->ops == NULL || b->ops->owns_halt == NULL) {
        return false;
    }
    return b->ops->owns_halt(b);
}

bool mesh_backend_reads_live(const mesh_backend *b)
{
    if (b == NULL || b->ops == NULL || b->ops->reads_live == NULL) {
        return false;
    }
    return b->ops->reads_live(b);
}

void mesh_backend_sample(const mesh_backend *b)
{
    if (b != NULL && b->ops != NULL && b->ops->sample != NULL) {
        b->ops->sample(b);
    }
}

uint32_t mesh_backend_online_timeout_ms(const mesh_backend *b)
{
    if (b == NULL || b->ops == NULL || b->ops->online_timeout_ms == NULL) {
        return 2000;
    }
    return b->ops->online_timeout_ms(b);
}

bool mesh_backend_admit(const mesh_backend *b, const mesh_prepared *p,
                        uint32_t nodes, uint32_t slot, char **err)
{
    if (p == NULL || nodes == 0 || slot >= MESH_PROG_SLOTS) {
        return rig_err(err,
                       "invalid: mesh_backend_admit: %s (nodes %u, slot "
                       "%u)",
                       p == NULL ? "prepared is NULL" : "no nodes or no slot",
                       nodes, slot);
    }
    if (b == NULL || b->ops == NULL || b->ops->admit == NULL) {
        return true;
    }
    return b->ops->admit(b, p, nodes, slot, err);
}

void mesh_backend_gather(const mesh_backend *b, uint32_t slot)
{
    if (b != NULL && b->ops != NULL && b->ops->gather != NULL &&
        slot < MESH_PROG_SLOTS) {
        b->ops->gather(b, slot);
    }
}

void mesh_backend_destroy(mesh_backend *b)
{
    if (b != NULL && b->ops != NULL && b->ops->destroy != NULL) {
        b->ops->destroy(b);
    }
}

/* ---- picking an executor ------------------------------------------------ */

static void list_kinds(char *buf, size_t cap, const uint32_t *k, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < cap; i++) {
        const char *name = mesh_backend_name(k[i]);
        int w = name != NULL ? snprintf(buf + used, cap - used, "%s%s",
                                        i > 0 ? ", " : "", name)
                             : snprintf(buf + used, cap - used, "%skind %u",
                                        i > 0 ? ", " : "", k[i]);
        if (w < 0) {
            break;
        }
        used += (size_t)w;
    }
    if (n == 0) {
        snprintf(buf, cap, "nothing");
    }
}

bool mesh_pick_exec(const mesh_manifest *m, const uint32_t *have, size_t nhave,
                    uint32_t *exec, char **err)
{
    if (m == NULL || exec == NULL || (have == NULL && nhave > 0)) {
        return rig_err(err, "invalid: mesh_pick_exec: %s is NULL",
                       m == NULL      ? "manifest"
                       : exec == NULL ? "exec"
                                      : "have");
    }
    for (size_t i = 0; i < m->nbackends; i++) {
        for (size_t j = 0; j < nhave; j++) {
            if (m->backends[i] == have[j]) {
                *exec = have[j];
                return true;
            }
        }
    }
    char lists[128], runs[128];
    list_kinds(lists, sizeof(lists), m->backends, m->nbackends);
    list_kinds(runs, sizeof(runs), have, nhave);
    return rig_err(err,
                   "unsupported: program %s lists %s; this machine runs "
                   "%s",
                   m->name != NULL ? m->name : "(unnamed)", lists, runs);
}

bool mesh_runs_here(const char *dir, const mesh_manifest *m,
                    const uint32_t *have, size_t nhave)
{
    uint32_t exec = 0;
    if (dir == NULL || m == NULL ||
        !mesh_pick_exec(m, have, nhave, &exec, NULL)) {
        return false;
    }
    if (exec != MESH_BACKEND_NATIVE) {
        return true;
    }
    char *rel = NULL;
    if (asprintf(&rel, "%s/%s", mesh_native_target(),
                 m->entry != NULL ? m->entry : m->name) < 0) {
        return false;
    }
    bool ok = mesh_catalog_runs(dir, rel);
    free(rel);
    return ok;
}

bool mesh_check_manifest(const mesh_payload *src, uint32_t kind,
                         mesh_manifest *out, char **err)
{
    if (src == NULL || out == NULL) {
        return rig_err(err, "invalid: mesh_check_manifest: %s is NULL",
                       src == NULL ? "src" : "out");
    }
    const mesh_payload_file *f = mesh_payload_find(src, "manifest.json");
    if (f == NULL) {
        return rig_err(err, "manifest: program %s has no manifest.json",
                       src->name != NULL ? src->name : "(unnamed)");
    }
    mesh_manifest m;
    if (!mesh_manifest_parse((const char *)f->data, f->len, &m, err)) {
        return false;
    }
    if (src->name != NULL && strcmp(m.name, src->name) != 0) {
        rig_err(err,
                "manifest: name \"%s\" does not match the program's "
                "directory \"%s\"",
                m.name, src->name);
        goto err_free;
    }
    if (m.abi != MESH_RT_ABI_VERSION) {
        rig_err(err,
                "abi: program %s was built for runtime ABI %u; this "
                "runtime is %u",
                m.name, m.abi, MESH_RT_ABI_VERSION);
        goto err_free;
    }
    if (!mesh_manifest_lists(&m, kind)) {
        char lists[128];
        list_kinds(lists, sizeof(lists), m.backends, m.nbackends);
        const char *name = mesh_backend_name(kind);
        if (name != NULL) {
            rig_err(err,
                    "unsupported: program %s does not list backend %s "
                    "(it lists %s)",
                    m.name, name, lists);
        } else {
            rig_err(err,
                    "unsupported: program %s does not list backend "
                    "kind %u (it lists %s)",
                    m.name, kind, lists);
        }
        goto err_free;
    }
    *out = m;
    return true;
err_free:
    mesh_manifest_free(&m);
    return false;
}

bool mesh_prepare_any(const mesh_compiler_entry *comps, size_t n,
                      mesh_payload *src, const uint64_t *expect,
                      const char *root, mesh_prepared *out, char **err)
{
    if (src == NULL) {
        return rig_err(err, "invalid: mesh_prepare_any: src is NULL");
    }
    if ((comps == NULL && n > 0) || out == NULL) {
        mesh_payload_free(src);
        return rig_err(err, "invalid: mesh_prepare_any: %s is NULL",
                       out == NULL ? "out" : "comps");
    }
    const mesh_payload_file *f = mesh_payload_find(src, "manifest.json");
    mesh_manifest m;
    if (f == NULL) {
        rig_err(err, "manifest: program %s has no manifest.json",
                src->name != NULL ? src->name : "(unnamed)");
        mesh_payload_free(src);
        return false;
    }
    if (!mesh_manifest_parse((const char *)f->data, f->len, &m, err)) {
        mesh_payload_free(src);
        return false;
    }
    uint32_t have[MESH_BACKEND_COUNT * 2];
    size_t nhave = 0;
    for (size_t i = 0; i < n && nhave < sizeof(have) / sizeof(have[0]); i++) {
        if (comps[i].comp != NULL) {
            have[nhave++] = comps[i].kind;
        }
    }
    uint32_t exec = 0;
    bool picked = mesh_pick_exec(&m, have, nhave, &exec, err);
    mesh_manifest_free(&m);
    if (!picked) {
        mesh_payload_free(src);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        const mesh_compiler *c = comps[i].comp;
        if (comps[i].kind == exec && c != NULL) {
            if (c->ops == NULL || c->ops->prepare == NULL) {
                mesh_payload_free(src);
                return rig_err(err,
                               "invalid: the %s compiler has no "
                               "prepare",
                               mesh_backend_name(exec));
            }
            return c->ops->prepare(c, src, expect, root, out, err);
        }
    }
    mesh_payload_free(src);
    return rig_err(err, "unsupported: no compiler for %s",
                   mesh_backend_name(exec));
}

/* ---- native binaries ---------------------------------------------------- */

char *mesh_native_binary(const char *dir, const char *name)
{
    if (dir == NULL || name == NULL) {
        return NULL;
    }
    char *s = NULL;
    if (asprintf(&s, "%s/%s/%s", dir, mesh_native_target(), name) < 0) {
        return NULL;
    }
    return s;
}
