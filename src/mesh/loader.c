/* SPDX-License-Identifier: BSD-3-Clause */
/* Payloads: reading a program of the catalog, building one, hashing it. */
#include "mesh/loader.h"
#include "mesh/backend.h"

#include "../util/util_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

static const char manifest_path[] = "manifest.json";

void mesh_payload_free(mesh_payload *p)
{
    if (p == NULL) {
        return;
    }
    for (size_t i = 0; i < p->nfiles; i++) {
        free(p->files[i].path);
        free(p->files[i].data);
    }
    free(p->files);
    free(p->dir);
    free(p->name);
    memset(p, 0, sizeof(*p));
}

bool mesh_payload_init(mesh_payload *p, const char *name, char **err)
{
    if (p == NULL) {
        return rig_err(err, "invalid: mesh_payload_init: payload is NULL");
    }
    if (!mesh_manifest_name_ok(name)) {
        return rig_err(err, "invalid: program name \"%s\" is no plain name",
                       name != NULL ? name : "(null)");
    }
    memset(p, 0, sizeof(*p));
    p->name = strdup(name);
    if (p->name == NULL) {
        return rig_err(err, "nomem: payload %s", name);
    }
    return true;
}

/* A relative path of plain components: no "", ".", ".." and no '/' ends. */
static bool path_ok(const char *path)
{
    if (path == NULL || path[0] == '\0' || path[0] == '/' ||
        strlen(path) > 255) {
        return false;
    }
    const char *p = path;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash != NULL ? (size_t)(slash - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') ||
            (n == 2 && p[0] == '.' && p[1] == '.')) {
            return false;
        }
        if (slash == NULL) {
            return true;
        }
        p = slash + 1;
    }
}

/* manifest.json sorts first, the rest by strcmp. */
static int path_cmp(const char *a, const char *b)
{
    bool ma = strcmp(a, manifest_path) == 0;
    bool mb = strcmp(b, manifest_path) == 0;
    if (ma || mb) {
        return ma && mb ? 0 : (ma ? -1 : 1);
    }
    return strcmp(a, b);
}

bool mesh_payload_add(mesh_payload *p, const char *path, const void *data,
                      size_t len, char **err)
{
    if (p == NULL || (data == NULL && len > 0)) {
        return rig_err(err, "invalid: mesh_payload_add: %s is NULL",
                       p == NULL ? "payload" : "data");
    }
    if (!path_ok(path)) {
        return rig_err(err,
                       "invalid: payload file path \"%s\" is not a "
                       "relative path of plain names",
                       path != NULL ? path : "(null)");
    }
    if (p->nfiles >= MESH_PAYLOAD_MAX_FILES) {
        return rig_err(err, "limits: program %s has more than %u files",
                       p->name, MESH_PAYLOAD_MAX_FILES);
    }
    if (len > MESH_PAYLOAD_MAX_FILE_BYTES) {
        return rig_err(err,
                       "limits: %s of program %s has %zu bytes, more "
                       "than %u",
                       path, p->name, len, MESH_PAYLOAD_MAX_FILE_BYTES);
    }
    size_t at = 0;
    while (at < p->nfiles && path_cmp(p->files[at].path, path) < 0) {
        at++;
    }
    if (at < p->nfiles && strcmp(p->files[at].path, path) == 0) {
        return rig_err(err, "invalid: program %s already has file %s", p->name,
                       path);
    }
    mesh_payload_file f = {
        .path = strdup(path), .data = malloc(len > 0 ? len : 1), .len = len};
    mesh_payload_file *files =
        realloc(p->files, (p->nfiles + 1) * sizeof(*files));
    if (f.path == NULL || f.data == NULL || files == NULL) {
        free(f.path);
        free(f.data);
        if (files != NULL) {
            p->files = files;
        }
        return rig_err(err, "nomem: payload file %s", path);
    }
    if (len > 0) {
        memcpy(f.data, data, len);
    }
    p->files = files;
    memmove(&files[at + 1], &files[at], (p->nfiles - at) * sizeof(*files));
    files[at] = f;
    p->nfiles++;
    return true;
}

bool mesh_payload_copy(mesh_payload *dst, const mesh_payload *src, char **err)
{
    if (dst == NULL || src == NULL) {
        return rig_err(err, "invalid: mesh_payload_copy: %s is NULL",
                       dst == NULL ? "dst" : "src");
    }
    mesh_payload p;
    if (!mesh_payload_init(&p, src->name, err)) {
        return false;
    }
    if (src->dir != NULL && (p.dir = strdup(src->dir)) == NULL) {
        mesh_payload_free(&p);
        return rig_err(err, "nomem: payload %s", src->name);
    }
    for (size_t i = 0; i < src->nfiles; i++) {
        if (!mesh_payload_add(&p, src->files[i].path, src->files[i].data,
                              src->files[i].len, err)) {
            mesh_payload_free(&p);
            return false;
        }
    }
    *dst = p;
    return true;
}

const mesh_payload_file *mesh_payload_find(const mesh_payload *p,
                                           const char *path)
{
    if (p == NULL || path == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < p->nfiles; i++) {
        if (strcmp(p->files[i].path, path) == 0) {
            return &p->files[i];
        }
    }
    return NULL;
}

uint64_t mesh_payload_hash(const mesh_payload *p)
{
    if (p == NULL) {
        return 0;
    }
    XXH3_state_t *s = XXH3_createState();
    if (s == NULL) {
        return 0;
    }
    XXH3_64bits_reset(s);
    for (size_t i = 0; i < p->nfiles; i++) {
        const mesh_payload_file *f = &p->files[i];
        uint8_t len[8];
        for (int b = 0; b < 8; b++) {
            len[b] = (uint8_t)((uint64_t)f->len >> (8 * b));
        }
        XXH3_64bits_update(s, f->path, strlen(f->path) + 1);
        XXH3_64bits_update(s, len, sizeof(len));
        XXH3_64bits_update(s, f->data, f->len);
    }
    uint64_t h = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return h;
}

/* Reads a whole regular file; "missing: " when absent. */
static bool read_file(const char *path, const char *what, uint8_t **data,
                      size_t *len, char **err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) {
            return rig_err(err, "missing: %s (%s)", what, path);
        }
        return rig_err(err, "system: open %s failed: %s", path,
                       strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return rig_err(err, "missing: %s (%s is not a regular file)", what,
                       path);
    }
    if ((uint64_t)st.st_size > MESH_PAYLOAD_MAX_FILE_BYTES) {
        close(fd);
        return rig_err(err, "limits: %s has %lld bytes, more than %u", path,
                       (long long)st.st_size, MESH_PAYLOAD_MAX_FILE_BYTES);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n > 0 ? n : 1);
    if (buf == NULL) {
        close(fd);
        return rig_err(err, "nomem: reading %s", path);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            free(buf);
            close(fd);
            return rig_err(err, "system: read %s failed: %s", path,
                           strerror(e));
        }
        got += (size_t)r;
    }
    close(fd);
    *data = buf;
    *len = n;
    return true;
}

/* Adds <dir>/<rel> when it exists; a missing file is not an error. */
static bool add_if_present(mesh_payload *p, const char *rel, char **err)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s", p->dir, rel) < 0) {
        return rig_err(err, "nomem: payload %s", p->name);
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
        mesh_payload_find(p, rel) != NULL) {
        free(path);
        return true;
    }
    uint8_t *data = NULL;
    size_t len = 0;
    bool ok = read_file(path, rel, &data, &len, err) &&
              mesh_payload_add(p, rel, data, len, err);
    free(data);
    free(path);
    return ok;
}

/* native: "<triple>/<entry>" of every target directory. */
static bool add_native(mesh_payload *p, const char *entry, char **err)
{
    DIR *d = opendir(p->dir);
    if (d == NULL) {
        return rig_err(err, "system: opendir %s failed: %s", p->dir,
                       strerror(errno));
    }
    bool ok = true;
    struct dirent *e;
    while (ok && (e = readdir(d)) != NULL) {
        if (!mesh_manifest_name_ok(e->d_name)) {
            continue;
        }
        char *rel = NULL;
        if (asprintf(&rel, "%s/%s", e->d_name, entry) < 0) {
            ok = rig_err(err, "nomem: payload %s", p->name);
            break;
        }
        ok = add_if_present(p, rel, err);
        free(rel);
    }
    closedir(d);
    return ok;
}

bool mesh_payload_read(const char *root, const char *name, mesh_payload *out,
                       char **err)
{
    if (out == NULL) {
        return rig_err(err, "invalid: mesh_payload_read: out is NULL");
    }
    if (root == NULL || root[0] == '\0') {
        return rig_err(err, "invalid: mesh_payload_read: no programs root");
    }
    if (!mesh_manifest_name_ok(name)) {
        return rig_err(err, "invalid: program name \"%s\" is no plain name",
                       name != NULL ? name : "(null)");
    }
    mesh_payload p;
    if (!mesh_payload_init(&p, name, err)) {
        return false;
    }
    if (asprintf(&p.dir, "%s/%s", root, name) < 0) {
        p.dir = NULL;
        mesh_payload_free(&p);
        return rig_err(err, "nomem: payload %s", name);
    }
    struct stat st;
    if (stat(p.dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        rig_err(err, "missing: program %s is not in the catalog (%s)", name,
                p.dir);
        goto err_free;
    }
    char *mpath = NULL;
    if (asprintf(&mpath, "%s/%s", p.dir, manifest_path) < 0) {
        rig_err(err, "nomem: payload %s", name);
        goto err_free;
    }
    uint8_t *data = NULL;
    size_t len = 0;
    bool ok = read_file(mpath, "manifest.json", &data, &len, err);
    free(mpath);
    if (!ok) {
        goto err_free;
    }
    mesh_manifest m;
    ok = mesh_manifest_parse((const char *)data, len, &m, err);
    if (ok && !mesh_payload_add(&p, manifest_path, data, len, err)) {
        mesh_manifest_free(&m);
        ok = false;
    }
    free(data);
    if (!ok) {
        goto err_free;
    }
    for (size_t i = 0; ok && i < m.nbackends; i++) {
        switch (m.backends[i]) {
        case MESH_BACKEND_NATIVE:
            ok = add_native(&p, m.entry, err);
            break;
        case MESH_BACKEND_CUDA:
            ok = add_if_present(&p, m.ptx, err);
            break;
        case MESH_BACKEND_WASM:
            ok = add_if_present(&p, m.wasm, err);
            break;
        default:
            break;
        }
    }
    mesh_manifest_free(&m);
    if (!ok) {
        goto err_free;
    }
    *out = p;
    return true;
err_free:
    mesh_payload_free(&p);
    return false;
}
