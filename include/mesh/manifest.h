/* SPDX-License-Identifier: BSD-3-Clause */
/* mesh/manifest.h: a program's manifest (manifest.json in its catalog dir).
 *
 * A program of the catalog is a directory <programs root>/<name> holding
 * manifest.json and the images of the backends it lists (see mesh/loader.h).
 * The manifest is one JSON object; keys not listed here are refused (a typo
 * must not silently fall back to a default).  Example:
 *
 *   {"name": "pi", "abi": 1, "backends": ["native"], "entry": "pi",
 *    "threads": 1, "nodes": 4, "scratch": 4096}
 *
 *   name      string, required: the program's name, equal to its directory's
 *             name; 1..63 of [A-Za-z0-9_.-], not starting with '.' or '-'.
 *   abi       integer, required: the runtime ABI it was built against
 *             (MESH_RT_ABI_VERSION); 1..2^31-1 here, equality is checked by
 *             mesh_check_manifest.
 *   backends  array of backend names ("native", "cuda", "wasm", "metal"),
 *             required, non-empty, no repeats: the executors that may run it,
 *             in order of preference.
 *   entry     string, default = name: native, the executable's file name
 *             under <target triple>/; cuda, the kernel's function; wasm, the
 *             exported function.  Same alphabet as name.
 *   threads   integer 1..1024, default 1: threads per step of one node
 *             (CUDA block size; CPU executors' threads per node).
 *   nodes     integer 1..MESH_MANIFEST_MAX_NODES, default 1: the nodes a
 *             launch starts unless the driver is told otherwise.
 *   scratch   integer 0..MESH_MANIFEST_MAX_SCRATCH bytes, default 0: memory
 *             shared by the program's nodes (PX_SCRATCH).
 *   shared    integer 0..1048576 bytes, default 0: shared memory per node
 *             (CUDA).
 *   reg_cap   integer 0..255, default 0 (none): CUDA's register cap.
 *   ptx       string, default "<name>.ptx": the PTX file in the program's
 *             dir (CUDA).  A plain file name: the alphabet of name, up to
 *             MESH_MANIFEST_MAX_FILE bytes.
 *   wasm      string, default "<name>.wasm": the module file (wasm).
 *   reads     integer 0..2^53, default 0: the reads mask, bit i = the
 *             program reads input (rail end) i: it waits for the end's
 *             `arrived` and reads its inbound (mesh/abi/ends.h).
 *   writes    integer 0..2^53, default 0: the writes mask, bit i = the
 *             program writes input i: it fills the end's outbound and
 *             readies it.  Inputs are the bits below MESH_INPUTS (32) of
 *             the two masks; a host binds each to a rail end per machine
 *             (rig/remote.h, rig_remote_load_ends).
 *   args      array of strings, at most 64, each at most 4095 bytes,
 *             default none: extra arguments of a native executable.
 *   description  string, ignored: for people.
 *
 * Every error starts with "manifest: " and names the key and the rule. */
#ifndef MESH_MANIFEST_H
#define MESH_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(default)

/* Limits of the rules above. */
#define MESH_MANIFEST_MAX_NAME 63u
#define MESH_MANIFEST_MAX_FILE 255u
#define MESH_MANIFEST_MAX_THREADS 1024u
#define MESH_MANIFEST_MAX_NODES 256u
#define MESH_MANIFEST_MAX_SCRATCH (1ull << 30)
#define MESH_MANIFEST_MAX_SHARED (1u << 20)
#define MESH_MANIFEST_MAX_ARGS 64u
#define MESH_MANIFEST_MAX_ARG 4095u
/* The most bytes a manifest may have. */
#define MESH_MANIFEST_MAX_BYTES (64u * 1024u)

/* A parsed manifest.  Every pointer is owned by the manifest and released by
 * mesh_manifest_free; defaults are filled in, so no field is "unset". */
typedef struct {
    char *name;
    uint32_t abi;
    /* MESH_BACKEND_* kinds in order of preference, nbackends >= 1. */
    uint32_t backends[4];
    size_t nbackends;
    char *entry;
    uint32_t threads;
    uint32_t nodes;
    uint64_t scratch;
    uint32_t shared;
    uint32_t reg_cap;
    char *ptx;
    char *wasm;
    uint64_t reads;
    uint64_t writes;
    char **args;
    size_t nargs;
} mesh_manifest;

/* Parses len bytes of JSON (need not be NUL-terminated) into *out.  Any
 * thread.  Errors ("manifest: ..."): not JSON, not an object, a missing
 * required key, a key of the wrong type or out of range, an unknown key, a
 * name that is no plain file name, more than MESH_MANIFEST_MAX_BYTES.
 * *out is set only on success; the caller frees it with mesh_manifest_free.
 * json may be NULL only when len is 0 (then it is an error). */
bool mesh_manifest_parse(const char *json, size_t len, mesh_manifest *out,
                         char **err);

/* Deep-copies src into *dst.  False with "nomem: ..." (then *dst is
 * untouched) or "invalid: ..." for NULL arguments. */
bool mesh_manifest_copy(mesh_manifest *dst, const mesh_manifest *src,
                        char **err);

/* Releases what m owns and zeroes it (NULL: nothing).  Idempotent. */
void mesh_manifest_free(mesh_manifest *m);

/* Whether m lists backend kind. */
bool mesh_manifest_lists(const mesh_manifest *m, uint32_t kind);

/* Whether s is a valid program name by the rule of "name". */
bool mesh_manifest_name_ok(const char *s);
/* Whether s is a valid file name by the rule of "ptx" and "wasm". */
bool mesh_manifest_file_ok(const char *s);

#pragma GCC visibility pop

#endif
