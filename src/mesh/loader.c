/* SPDX-License-Identifier: BSD-3-Clause */
/* Payloads: reading a program of the catalog, building one, hashing it. */
#include "mesh/loader.h"
#include "mesh/backend.h"

#include "mesh_internal.h"

#include "../util/util_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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
    uint64_t total = len;
    for (size_t i = 0; i < p->nfiles; i++) {
        total += p->files[i].len;
    }
    if (total > MESH_PAYLOAD_MAX_BYTES) {
        return rig_err(err,
                       "limits: program %s would have more than %llu bytes "
                       "with %s",
                       p->name, (unsigned long long)MESH_PAYLOAD_MAX_BYTES,
                       path);
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

/* ---- reading the catalog ----------------------------------------------
 *
 * A program's files are read without leaving its directory, without
 * blocking and within a budget:
 * - every file is opened beneath the program's directory (openat2 with
 *   RESOLVE_BENEATH: a link that stays inside is followed, one that leads
 *   out is refused; on a kernel without openat2, Linux < 5.6, no link is
 *   followed at all), so a manifest or a binary that is a link to a system
 *   file is never read, and no error message can quote one;
 * - with O_NONBLOCK, then fstat: a FIFO or a device is refused, not waited
 *   on;
 * - every file is opened and measured before any is read: more than
 *   MESH_PAYLOAD_MAX_FILES files, a file above MESH_PAYLOAD_MAX_FILE_BYTES
 *   or all of them above MESH_PAYLOAD_MAX_BYTES is refused before a byte
 *   is read (twelve target folders linking to one large binary are twelve
 *   large files);
 * - a native binary without the execute bit this process would need is
 *   refused, as exec would refuse it. */

#ifndef RESOLVE_BENEATH
#define RESOLVE_BENEATH 0x08
#endif
#ifndef RESOLVE_NO_MAGICLINKS
#define RESOLVE_NO_MAGICLINKS 0x02
#endif

struct rig_open_how {
    uint64_t flags, mode, resolve;
};

/* 1: openat2 works; 0: not tried yet; -1: the kernel lacks it. */
static _Atomic int have_openat2;

/* Opens rel beneath dir (never out of it); -1 with errno: ENOENT/ENOTDIR
 * absent, EXDEV or ELOOP a link out (or any link, without openat2). */
static int open_beneath(int dir, const char *rel, int flags)
{
    if (atomic_load(&have_openat2) >= 0) {
#ifdef SYS_openat2
        struct rig_open_how how = {.flags = (uint64_t)flags,
                                   .resolve =
                                       RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
        int fd = (int)syscall(SYS_openat2, dir, rel, &how, sizeof(how));
        if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) {
            atomic_store(&have_openat2, 1);
            return fd;
        }
#endif
        atomic_store(&have_openat2, -1);
    }
    /* One plain component at a time, none a link. */
    char *path = strdup(rel);
    if (path == NULL) {
        errno = ENOMEM;
        return -1;
    }
    int at = dir, fd = -1;
    for (char *c = path;;) {
        char *slash = strchr(c, '/');
        if (slash != NULL) {
            *slash = '\0';
        }
        int f = slash != NULL ? O_RDONLY | O_DIRECTORY | O_CLOEXEC : flags;
        fd = openat(at, c, f | O_NOFOLLOW);
        int e = errno;
        struct stat st;
        if (fd < 0 && e == ENOTDIR &&
            fstatat(at, c, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISLNK(st.st_mode)) {
            e = ELOOP; /* a link where a directory was opened */
        }
        if (at != dir) {
            close(at);
        }
        errno = e;
        if (fd < 0 || slash == NULL) {
            break;
        }
        at = fd;
        c = slash + 1;
    }
    free(path);
    return fd;
}

/* Whether this process may execute a file of st, as exec checks. */
static bool may_exec(const struct stat *st)
{
    uid_t uid = geteuid();
    if (uid == 0) {
        return (st->st_mode & (S_IXUSR | S_IXGRP | S_IXOTH)) != 0;
    }
    if (st->st_uid == uid) {
        return (st->st_mode & S_IXUSR) != 0;
    }
    bool member = st->st_gid == getegid();
    gid_t groups[256];
    int n = getgroups(256, groups);
    for (int i = 0; !member && i < n; i++) {
        member = groups[i] == st->st_gid;
    }
    return (st->st_mode & (member ? S_IXGRP : S_IXOTH)) != 0;
}

/* A program being read: its directory and the files found so far. */
typedef struct {
    mesh_payload *p;
    int dir;
    struct {
        char *rel;
        int fd;
        size_t len;
    } found[MESH_PAYLOAD_MAX_FILES];
    size_t nfound;
    uint64_t total;
} reading;

/* Opens <dir>/rel and measures it against the limits, without reading
 * it.  A file that is absent is no error (*found false), unless must.
 * Errors: "missing: " (a link out, not a regular file, no execute bit for
 * exec, absent when must), "limits: ", "system: ", "nomem: ". */
static bool find(reading *r, const char *rel, bool exec, bool must, char **err)
{
    const char *name = r->p->name;
    for (size_t i = 0; i < r->nfound; i++) {
        if (strcmp(r->found[i].rel, rel) == 0) {
            return true;
        }
    }
    int fd =
        open_beneath(r->dir, rel, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        if ((e == ENOENT || e == ENOTDIR) && !must) {
            return true;
        }
        if (e == ENOENT || e == ENOTDIR) {
            return rig_err(err, "missing: program %s has no %s (%s/%s)", name,
                           rel, r->p->dir, rel);
        }
        if (e == EXDEV || e == ELOOP) {
            return rig_err(err,
                           "missing: program %s: %s is a link out of its "
                           "directory%s; it is not read",
                           name, rel,
                           atomic_load(&have_openat2) < 0
                               ? " (this kernel has no openat2: no link is "
                                 "followed)"
                               : "");
        }
        return rig_err(err, "system: open %s/%s failed: %s", r->p->dir, rel,
                       strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return rig_err(err, "missing: program %s: %s is not a regular file",
                       name, rel);
    }
    if (exec && !may_exec(&st)) {
        close(fd);
        return rig_err(err,
                       "missing: program %s: %s has no execute bit for this "
                       "user; exec would refuse it",
                       name, rel);
    }
    if ((uint64_t)st.st_size > MESH_PAYLOAD_MAX_FILE_BYTES) {
        close(fd);
        return rig_err(
            err, "limits: program %s: %s has %lld bytes, more than %u", name,
            rel, (long long)st.st_size, MESH_PAYLOAD_MAX_FILE_BYTES);
    }
    if (r->nfound + r->p->nfiles >= MESH_PAYLOAD_MAX_FILES) {
        close(fd);
        return rig_err(err, "limits: program %s has more than %u files", name,
                       MESH_PAYLOAD_MAX_FILES);
    }
    if (r->total + (uint64_t)st.st_size > MESH_PAYLOAD_MAX_BYTES) {
        close(fd);
        return rig_err(err,
                       "limits: program %s: its files have more than %llu "
                       "bytes (at %s)",
                       name, (unsigned long long)MESH_PAYLOAD_MAX_BYTES, rel);
    }
    char *copy = strdup(rel);
    if (copy == NULL) {
        close(fd);
        return rig_err(err, "nomem: payload %s", name);
    }
    r->found[r->nfound].rel = copy;
    r->found[r->nfound].fd = fd;
    r->found[r->nfound].len = (size_t)st.st_size;
    r->nfound++;
    r->total += (uint64_t)st.st_size;
    return true;
}

/* Reads all len bytes of fd (the size fstat gave: a file that changed
 * since is read as far as that). */
static bool read_all(int fd, uint8_t **data, size_t len, const char *what,
                     char **err)
{
    uint8_t *buf = malloc(len > 0 ? len : 1);
    if (buf == NULL) {
        return rig_err(err, "nomem: reading %s", what);
    }
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            free(buf);
            return rig_err(err, "system: read %s failed: %s", what,
                           strerror(e));
        }
        got += (size_t)n;
    }
    *data = buf;
    return true;
}

/* Reads every file found into the payload, and forgets them. */
static bool read_found(reading *r, char **err)
{
    bool ok = true;
    for (size_t i = 0; i < r->nfound; i++) {
        uint8_t *data = NULL;
        if (ok) {
            ok = read_all(r->found[i].fd, &data, r->found[i].len,
                          r->found[i].rel, err) &&
                 mesh_payload_add(r->p, r->found[i].rel, data, r->found[i].len,
                                  err);
        }
        free(data);
        close(r->found[i].fd);
        free(r->found[i].rel);
    }
    r->nfound = 0;
    return ok;
}

static void forget_found(reading *r)
{
    for (size_t i = 0; i < r->nfound; i++) {
        close(r->found[i].fd);
        free(r->found[i].rel);
    }
    r->nfound = 0;
}

/* native: "<triple>/<entry>" of every target directory. */
static bool find_native(reading *r, const char *entry, char **err)
{
    int fd = dup(r->dir);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0) {
            close(fd);
        }
        return rig_err(err, "system: opendir %s failed: %s", r->p->dir,
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
            ok = rig_err(err, "nomem: payload %s", r->p->name);
            break;
        }
        ok = find(r, rel, true, false, err);
        free(rel);
    }
    closedir(d);
    return ok;
}

/* Opens program name's directory beneath root into *dir. */
static bool open_program(const char *root, const char *name, int *dir,
                         char **err)
{
    int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) {
        return rig_err(err,
                       "missing: program %s: the catalog %s cannot be "
                       "opened: %s",
                       name, root, strerror(errno));
    }
    int fd = open_beneath(rootfd, name,
                          O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
    int e = errno;
    close(rootfd);
    if (fd >= 0) {
        *dir = fd;
        return true;
    }
    if (e == EXDEV || e == ELOOP) {
        return rig_err(err,
                       "missing: program %s is a link out of the catalog %s; "
                       "it is not read",
                       name, root);
    }
    return rig_err(err, "missing: program %s is not in the catalog (%s/%s)",
                   name, root, name);
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
    reading *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        mesh_payload_free(&p);
        return rig_err(err, "nomem: payload %s", name);
    }
    r->p = &p;
    r->dir = -1;
    mesh_manifest m;
    bool ok = open_program(root, name, &r->dir, err) &&
              find(r, manifest_path, false, true, err);
    if (ok && r->found[0].len > MESH_MANIFEST_MAX_BYTES) {
        ok = rig_err(err,
                     "manifest: program %s: manifest.json has %zu bytes, "
                     "more than %u",
                     name, r->found[0].len, MESH_MANIFEST_MAX_BYTES);
    }
    ok = ok && read_found(r, err);
    const mesh_payload_file *mf =
        ok ? mesh_payload_find(&p, manifest_path) : NULL;
    ok = ok && mesh_manifest_parse((const char *)mf->data, mf->len, &m, err);
    if (ok) {
        r->total = mf->len;
        for (size_t i = 0; ok && i < m.nbackends; i++) {
            switch (m.backends[i]) {
            case MESH_BACKEND_NATIVE:
                ok = find_native(r, m.entry, err);
                break;
            case MESH_BACKEND_CUDA:
                ok = find(r, m.ptx, false, false, err);
                break;
            case MESH_BACKEND_WASM:
                ok = find(r, m.wasm, false, false, err);
                break;
            default:
                break;
            }
        }
        ok = ok && read_found(r, err);
        mesh_manifest_free(&m);
    }
    forget_found(r);
    if (r->dir >= 0) {
        close(r->dir);
    }
    free(r);
    if (!ok) {
        mesh_payload_free(&p);
        return false;
    }
    *out = p;
    return true;
}

bool mesh_catalog_runs(const char *dir, const char *rel)
{
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0) {
        return false;
    }
    int fd = open_beneath(d, rel, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    close(d);
    struct stat st;
    bool ok =
        fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && may_exec(&st);
    if (fd >= 0) {
        close(fd);
    }
    return ok;
}
