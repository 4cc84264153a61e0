/* SPDX-License-Identifier: BSD-3-Clause */
/* mesh/loader.h: a program's payload -- its catalog directory and its bytes.
 *
 * The catalog is a directory (the `--programs` root) with one directory per
 * program:
 *
 *   <root>/<name>/manifest.json                  the manifest (mesh/manifest.h)
 *   <root>/<name>/<target triple>/<entry>        native: the executable for
 *                                                each target it was built for
 *   <root>/<name>/<ptx>                          cuda: the PTX
 *   <root>/<name>/<wasm>                         wasm: the module
 *
 * A payload is the set of those files read into memory, each with its path
 * relative to the program's directory: files[0] is always "manifest.json",
 * the others follow sorted by path.  It is what the controller hands to
 * every machine (F_LOAD), so a machine prepares exactly the bytes that were
 * hashed, never a file that changed on disk since.
 *
 * Identity: mesh_payload_hash is XXH3-64 (seed 0) over, for each file in
 * order, its path, a NUL byte, its length as 8 little-endian bytes, and its
 * bytes.  The same files give the same hash on every machine and every run;
 * any changed byte, path, or file set gives another. */
#ifndef MESH_LOADER_H
#define MESH_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(default)

/* The most files of a payload, the most bytes of one file and of all. */
#define MESH_PAYLOAD_MAX_FILES 64u
#define MESH_PAYLOAD_MAX_FILE_BYTES (256u * 1024u * 1024u)
#define MESH_PAYLOAD_MAX_BYTES (1024ull * 1024u * 1024u)

/* One file of a payload; path is relative ("x86_64-unknown-linux-gnu/pi"). */
typedef struct {
    char *path;
    uint8_t *data;
    size_t len;
} mesh_payload_file;

/* A program's payload.  All owned; mesh_payload_free releases them. */
typedef struct {
    /* The program's catalog directory "<root>/<name>"; NULL for a payload
     * built in memory (received from a peer). */
    char *dir;
    /* The program's name (the directory's). */
    char *name;
    mesh_payload_file *files;
    size_t nfiles;
} mesh_payload;

/* Reads program name of catalog root into *out: manifest.json, then for
 * each backend the manifest lists the files it names that exist (native:
 * "<triple>/<entry>" of every target directory; cuda: the PTX; wasm: the
 * module).  Files are read without leaving the program's directory: a
 * link that stays inside it is followed, one that leads out is refused
 * (where the kernel lacks openat2, Linux < 5.6, no link is followed), and
 * nothing of a file outside is read or quoted.  A FIFO or device is
 * refused without waiting on it; every file is measured before any is
 * read.  Any thread.  Errors: "invalid: " for a bad root or name,
 * "missing: " when the directory or manifest.json is absent, a file is a
 * link out, not a regular file, or a native binary lacks the execute bit
 * exec needs, "manifest: " when the manifest does not parse, "limits: "
 * past the MESH_PAYLOAD_MAX_*, "system: " for a failed read.  *out is set
 * only on success. */
bool mesh_payload_read(const char *root, const char *name, mesh_payload *out,
                       char **err);

/* Starts an empty in-memory payload for program name (dir NULL).  Errors:
 * "invalid: " for a bad name, "nomem: ". */
bool mesh_payload_init(mesh_payload *p, const char *name, char **err);

/* Adds a copy of len bytes as file path (relative, no "..", no leading
 * '/', no repeats), keeping the order rule ("manifest.json" first, then by
 * path).  Errors: "invalid: ", "limits: " (past a MESH_PAYLOAD_MAX_*),
 * "nomem: "; p is unchanged then. */
bool mesh_payload_add(mesh_payload *p, const char *path, const void *data,
                      size_t len, char **err);

/* Deep copy. Errors: "invalid: ", "nomem: " (then *dst is untouched). */
bool mesh_payload_copy(mesh_payload *dst, const mesh_payload *src, char **err);

/* The file at path, or NULL. */
const mesh_payload_file *mesh_payload_find(const mesh_payload *p,
                                           const char *path);

/* The payload's identity (see above).  0 for NULL. */
uint64_t mesh_payload_hash(const mesh_payload *p);

/* Releases what p owns and zeroes it (NULL: nothing).  Idempotent. */
void mesh_payload_free(mesh_payload *p);

#pragma GCC visibility pop

#endif
