/* SPDX-License-Identifier: BSD-3-Clause */
/* The native compiler: the payload's binary for this target into a sealed
 * memfd, and the image (mesh_kernel) that holds it. */
#include "native_internal.h"

#include "../child_internal.h"

#include "../../util/util_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- the image (mesh_kernel) ------------------------------------------ */

void mesh_native_image_free(native_image *im)
{
    if (im == NULL) {
        return;
    }
    if (im->live > 0) {
        mesh_native_nodes_stop(im, 0, 0);
    }
    mesh_native_words_free(im);
    mesh_native_ends_stop(im);
    mesh_ends_free(&im->ends);
    if (im->nb != NULL && im->slot < MESH_PROG_SLOTS &&
        im->nb->slots[im->slot] == im) {
        im->nb->slots[im->slot] = NULL;
    }
    if (im->scratch != NULL) {
        munmap(im->scratch, im->scratch_bytes);
    }
    if (im->scratch_fd >= 0) {
        close(im->scratch_fd);
    }
    if (im->exe_fd >= 0) {
        close(im->exe_fd);
    }
    for (size_t i = 0; im->argv != NULL && im->argv[i] != NULL; i++) {
        free(im->argv[i]);
    }
    free(im->argv);
    free(im->name);
    free(im->node);
    free(im->broken);
    free(im);
}

static uint64_t kernel_scratch(const mesh_kernel *k)
{
    native_image *im = k->self;
    return (uint64_t)(uintptr_t)im->scratch;
}

static void kernel_drop(mesh_kernel *k)
{
    mesh_native_image_free(k->self);
    k->self = NULL;
}

static bool kernel_max_blocks(const mesh_kernel *k, uint32_t *out, char **err)
{
    (void)k;
    (void)err;
    *out = 1;
    return true;
}

static const mesh_kernel_ops native_kernel_ops = {
    .exec = MESH_BACKEND_NATIVE,
    .regs = NULL,
    .local_bytes = NULL,
    .max_blocks_per_sm = kernel_max_blocks,
    .scratch = kernel_scratch,
    .global_u32 = NULL,
    .drop = kernel_drop,
};

native_image *mesh_native_image_of(const mesh_kernel *k)
{
    return k != NULL && k->ops == &native_kernel_ops ? k->self : NULL;
}

/* ---- the compiler ----------------------------------------------------- */

static bool comp_needs_ptx(const mesh_compiler *c)
{
    (void)c;
    return false;
}

static bool make_image(const mesh_manifest *m, const mesh_payload_file *f,
                       native_image **out, char **err)
{
    native_image *im = calloc(1, sizeof(*im));
    if (im == NULL) {
        return rig_err(err, "nomem: program %s", m->name);
    }
    im->exe_fd = -1;
    im->scratch_fd = -1;
    im->ends_fd = -1;
    im->slot = MESH_NO_SLOT;
    im->scratch_bytes = m->scratch;
    im->name = strdup(m->name);
    im->argv = calloc(m->nargs + 2, sizeof(char *));
    if (im->name == NULL || im->argv == NULL ||
        (im->argv[0] = strdup(m->entry)) == NULL) {
        mesh_native_image_free(im);
        return rig_err(err, "nomem: program %s", m->name);
    }
    for (size_t i = 0; i < m->nargs; i++) {
        if ((im->argv[i + 1] = strdup(m->args[i])) == NULL) {
            mesh_native_image_free(im);
            return rig_err(err, "nomem: program %s", m->name);
        }
    }
    int fd = memfd_create(m->name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        int e = errno;
        mesh_native_image_free(im);
        return rig_err(err, "system: memfd_create for program %s failed: %s",
                       m->name, strerror(e));
    }
    /* At 10 or above, as every descriptor a keeper hands on (child.c). */
    im->exe_fd = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    close(fd);
    if (im->exe_fd < 0 || !mesh_child_write_all(im->exe_fd, f->data, f->len) ||
        fcntl(im->exe_fd, F_ADD_SEALS,
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
        int e = errno;
        mesh_native_image_free(im);
        return rig_err(err,
                       "system: copying program %s into a memfd "
                       "failed: %s",
                       m->name, strerror(e));
    }
    *out = im;
    return true;
}

static bool comp_prepare(const mesh_compiler *c, mesh_payload *src,
                         const uint64_t *expect, const char *root,
                         mesh_prepared *out, char **err)
{
    (void)c;
    (void)root;
    if (src == NULL) {
        return rig_err(err, "invalid: native prepare: src is NULL");
    }
    uint64_t t0 = rig_now_ns();
    mesh_manifest m;
    mesh_kernel *k = NULL;
    native_image *im = NULL;
    uint8_t *code = NULL;
    char *rel = NULL;
    if (out == NULL) {
        rig_err(err, "invalid: native prepare: out is NULL");
        goto err_src;
    }
    if (!mesh_check_manifest(src, MESH_BACKEND_NATIVE, &m, err)) {
        goto err_src;
    }
    uint64_t hash = mesh_payload_hash(src);
    if (expect != NULL && *expect != hash) {
        rig_err(err, "hash: program %s hashes to %016llx, expected %016llx",
                m.name, (unsigned long long)hash, (unsigned long long)*expect);
        goto err_manifest;
    }
    if (asprintf(&rel, "%s/%s", mesh_native_target(), m.entry) < 0) {
        rel = NULL;
        rig_err(err, "nomem: program %s", m.name);
        goto err_manifest;
    }
    const mesh_payload_file *f = mesh_payload_find(src, rel);
    if (f == NULL) {
        rig_err(err, "missing: program %s has no binary for %s (%s)", m.name,
                mesh_native_target(), rel);
        goto err_manifest;
    }
    if (f->len < 4 || memcmp(f->data, "\177ELF", 4) != 0) {
        rig_err(err, "compile: %s of program %s is not an ELF executable", rel,
                m.name);
        goto err_manifest;
    }
    code = malloc(f->len);
    k = malloc(sizeof(*k));
    if (code == NULL || k == NULL) {
        rig_err(err, "nomem: program %s", m.name);
        goto err_manifest;
    }
    if (!make_image(&m, f, &im, err)) {
        goto err_manifest;
    }
    memcpy(code, f->data, f->len);
    k->ops = &native_kernel_ops;
    k->self = im;
    memset(out, 0, sizeof(*out));
    out->manifest = m;
    out->hash = hash;
    out->code = code;
    out->code_len = f->len;
    out->src = *src;
    memset(src, 0, sizeof(*src));
    out->kernel = k;
    out->exec = MESH_BACKEND_NATIVE;
    out->reg_cap = 0;
    out->compile_ms = (double)(rig_now_ns() - t0) / 1e6;
    free(rel);
    return true;
err_manifest:
    free(rel);
    free(code);
    free(k);
    mesh_manifest_free(&m);
err_src:
    mesh_payload_free(src);
    return false;
}

const mesh_compiler_ops mesh_native_compiler_ops = {
    .needs_ptx = comp_needs_ptx,
    .prepare = comp_prepare,
};
