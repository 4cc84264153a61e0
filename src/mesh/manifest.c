/* SPDX-License-Identifier: BSD-3-Clause */
/* The manifest parser (jansson): every rule of mesh/manifest.h, strictly. */
#include "mesh/manifest.h"
#include "mesh/abi/backend.h"
#include "mesh/executors.h"

#include "../util/util_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static bool plain_ok(const char *s, size_t max)
{
    if (s == NULL || s[0] == '\0' || s[0] == '.' || s[0] == '-') {
        return false;
    }
    size_t n = 0;
    for (const char *p = s; *p != '\0'; p++, n++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
        if (!ok || n >= max) {
            return false;
        }
    }
    return true;
}

bool mesh_manifest_name_ok(const char *s)
{
    return plain_ok(s, MESH_MANIFEST_MAX_NAME);
}

bool mesh_manifest_file_ok(const char *s)
{
    return plain_ok(s, MESH_MANIFEST_MAX_FILE);
}

void mesh_manifest_free(mesh_manifest *m)
{
    if (m == NULL) {
        return;
    }
    free(m->name);
    free(m->entry);
    free(m->ptx);
    free(m->wasm);
    for (size_t i = 0; i < m->nargs; i++) {
        free(m->args[i]);
    }
    free(m->args);
    memset(m, 0, sizeof(*m));
}

bool mesh_manifest_lists(const mesh_manifest *m, uint32_t kind)
{
    if (m == NULL) {
        return false;
    }
    for (size_t i = 0; i < m->nbackends; i++) {
        if (m->backends[i] == kind) {
            return true;
        }
    }
    return false;
}

/* An integer key in lo..hi; absent: dflt (or an error when required). */
static bool get_uint(json_t *root, const char *key, bool required, uint64_t lo,
                     uint64_t hi, uint64_t dflt, uint64_t *out, char **err)
{
    json_t *v = json_object_get(root, key);
    if (v == NULL) {
        if (required) {
            return rig_err(err, "manifest: required key \"%s\" is missing",
                           key);
        }
        *out = dflt;
        return true;
    }
    if (!json_is_integer(v)) {
        return rig_err(err, "manifest: \"%s\" must be an integer", key);
    }
    json_int_t x = json_integer_value(v);
    if (x < 0 || (uint64_t)x < lo || (uint64_t)x > hi) {
        return rig_err(err, "manifest: \"%s\" is %lld, not within %llu..%llu",
                       key, (long long)x, (unsigned long long)lo,
                       (unsigned long long)hi);
    }
    *out = (uint64_t)x;
    return true;
}

/* A name-like string key (max: MESH_MANIFEST_MAX_NAME or _FILE); absent:
 * a copy of dflt (NULL dflt: required). */
static bool get_name(json_t *root, const char *key, const char *dflt,
                     size_t max, char **out, char **err)
{
    json_t *v = json_object_get(root, key);
    const char *s = dflt;
    if (v == NULL && dflt == NULL) {
        return rig_err(err, "manifest: required key \"%s\" is missing", key);
    }
    if (v != NULL) {
        if (!json_is_string(v)) {
            return rig_err(err, "manifest: \"%s\" must be a string", key);
        }
        s = json_string_value(v);
        if (strlen(s) != json_string_length(v) || !plain_ok(s, max)) {
            return rig_err(err,
                           "manifest: \"%s\" must be 1..%zu of "
                           "[A-Za-z0-9_.-], not starting with '.' or "
                           "'-'",
                           key, max);
        }
    }
    *out = strdup(s);
    if (*out == NULL) {
        return rig_err(err, "nomem: manifest \"%s\"", key);
    }
    return true;
}

static bool get_backends(json_t *root, mesh_manifest *m, char **err)
{
    json_t *v = json_object_get(root, "backends");
    if (v == NULL) {
        return rig_err(err, "manifest: required key \"backends\" is missing");
    }
    if (!json_is_array(v)) {
        return rig_err(err, "manifest: \"backends\" must be an array of "
                            "backend names");
    }
    size_t n = json_array_size(v);
    if (n == 0) {
        return rig_err(err, "manifest: \"backends\" is empty");
    }
    if (n > MESH_BACKEND_COUNT) {
        return rig_err(err,
                       "manifest: \"backends\" has %zu entries; there "
                       "are %u backends",
                       n, MESH_BACKEND_COUNT);
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        uint32_t kind = 0;
        if (!json_is_string(e)) {
            return rig_err(err,
                           "manifest: \"backends\"[%zu] must be a "
                           "string",
                           i);
        }
        if (!mesh_backend_kind(json_string_value(e), &kind) ||
            strlen(json_string_value(e)) != json_string_length(e)) {
            return rig_err(err,
                           "manifest: \"backends\"[%zu] \"%s\" is not "
                           "a backend (cuda, metal, wasm, native)",
                           i, json_string_value(e));
        }
        if (mesh_manifest_lists(m, kind)) {
            return rig_err(err, "manifest: \"backends\"[%zu] repeats \"%s\"", i,
                           json_string_value(e));
        }
        m->backends[m->nbackends++] = kind;
    }
    return true;
}

static bool get_args(json_t *root, mesh_manifest *m, char **err)
{
    json_t *v = json_object_get(root, "args");
    if (v == NULL) {
        return true;
    }
    if (!json_is_array(v)) {
        return rig_err(err, "manifest: \"args\" must be an array of strings");
    }
    size_t n = json_array_size(v);
    if (n > MESH_MANIFEST_MAX_ARGS) {
        return rig_err(err,
                       "manifest: \"args\" has %zu entries, more than "
                       "%u",
                       n, MESH_MANIFEST_MAX_ARGS);
    }
    if (n == 0) {
        return true;
    }
    m->args = calloc(n, sizeof(char *));
    if (m->args == NULL) {
        return rig_err(err, "nomem: manifest \"args\"");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_string(e)) {
            return rig_err(err, "manifest: \"args\"[%zu] must be a string", i);
        }
        const char *s = json_string_value(e);
        if (strlen(s) != json_string_length(e)) {
            return rig_err(err, "manifest: \"args\"[%zu] holds a NUL byte", i);
        }
        if (strlen(s) > MESH_MANIFEST_MAX_ARG) {
            return rig_err(err,
                           "manifest: \"args\"[%zu] is longer than %u "
                           "bytes",
                           i, MESH_MANIFEST_MAX_ARG);
        }
        m->args[i] = strdup(s);
        if (m->args[i] == NULL) {
            return rig_err(err, "nomem: manifest \"args\"");
        }
        m->nargs = i + 1;
    }
    return true;
}

static const char *const known_keys[] = {
    "name",  "abi",     "backends", "entry",   "threads",
    "nodes", "scratch", "shared",   "reg_cap", "ptx",
    "wasm",  "reads",   "writes",   "args",    "description",
};

static bool check_keys(json_t *root, char **err)
{
    const char *key;
    json_t *value;
    json_object_foreach(root, key, value)
    {
        bool known = false;
        for (size_t i = 0; i < sizeof(known_keys) / sizeof(known_keys[0]);
             i++) {
            if (strcmp(key, known_keys[i]) == 0) {
                known = true;
                break;
            }
        }
        if (!known) {
            return rig_err(err, "manifest: unknown key \"%.64s\"", key);
        }
    }
    json_t *d = json_object_get(root, "description");
    if (d != NULL && !json_is_string(d)) {
        return rig_err(err, "manifest: \"description\" must be a string");
    }
    return true;
}

static bool with_suffix(const char *name, const char *suffix, char **out,
                        char **err)
{
    if (asprintf(out, "%s%s", name, suffix) < 0) {
        *out = NULL;
        return rig_err(err, "nomem: manifest");
    }
    return true;
}

static bool parse_object(json_t *root, mesh_manifest *m, char **err)
{
    uint64_t x = 0;
    if (!check_keys(root, err) ||
        !get_name(root, "name", NULL, MESH_MANIFEST_MAX_NAME, &m->name, err)) {
        return false;
    }
    if (!get_uint(root, "abi", true, 1, INT32_MAX, 0, &x, err)) {
        return false;
    }
    m->abi = (uint32_t)x;
    if (!get_backends(root, m, err) ||
        !get_name(root, "entry", m->name, MESH_MANIFEST_MAX_NAME, &m->entry,
                  err)) {
        return false;
    }
    if (!get_uint(root, "threads", false, 1, MESH_MANIFEST_MAX_THREADS, 1, &x,
                  err)) {
        return false;
    }
    m->threads = (uint32_t)x;
    if (!get_uint(root, "nodes", false, 1, MESH_MANIFEST_MAX_NODES, 1, &x,
                  err)) {
        return false;
    }
    m->nodes = (uint32_t)x;
    if (!get_uint(root, "scratch", false, 0, MESH_MANIFEST_MAX_SCRATCH, 0,
                  &m->scratch, err)) {
        return false;
    }
    if (!get_uint(root, "shared", false, 0, MESH_MANIFEST_MAX_SHARED, 0, &x,
                  err)) {
        return false;
    }
    m->shared = (uint32_t)x;
    if (!get_uint(root, "reg_cap", false, 0, 255, 0, &x, err)) {
        return false;
    }
    m->reg_cap = (uint32_t)x;
    if (!get_uint(root, "reads", false, 0, 1ull << 53, 0, &m->reads, err) ||
        !get_uint(root, "writes", false, 0, 1ull << 53, 0, &m->writes, err)) {
        return false;
    }
    char *dflt = NULL;
    if (!with_suffix(m->name, ".ptx", &dflt, err)) {
        return false;
    }
    bool ok = get_name(root, "ptx", dflt, MESH_MANIFEST_MAX_FILE, &m->ptx, err);
    free(dflt);
    if (!ok || !with_suffix(m->name, ".wasm", &dflt, err)) {
        return false;
    }
    ok = get_name(root, "wasm", dflt, MESH_MANIFEST_MAX_FILE, &m->wasm, err);
    free(dflt);
    return ok && get_args(root, m, err);
}

bool mesh_manifest_parse(const char *json, size_t len, mesh_manifest *out,
                         char **err)
{
    if (out == NULL || (json == NULL && len > 0)) {
        return rig_err(err, "invalid: mesh_manifest_parse: %s is NULL",
                       out == NULL ? "out" : "json");
    }
    if (len == 0) {
        return rig_err(err, "manifest: empty");
    }
    if (len > MESH_MANIFEST_MAX_BYTES) {
        return rig_err(err, "manifest: %zu bytes, more than %u", len,
                       MESH_MANIFEST_MAX_BYTES);
    }
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL) {
        return rig_err(err, "manifest: not JSON: %s at line %d column %d",
                       je.text, je.line, je.column);
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return rig_err(err, "manifest: not a JSON object");
    }
    mesh_manifest m;
    memset(&m, 0, sizeof(m));
    bool ok = parse_object(root, &m, err);
    json_decref(root);
    if (!ok) {
        mesh_manifest_free(&m);
        return false;
    }
    *out = m;
    return true;
}

static bool dup_field(const char *s, char **out)
{
    *out = s == NULL ? NULL : strdup(s);
    return s == NULL || *out != NULL;
}

bool mesh_manifest_copy(mesh_manifest *dst, const mesh_manifest *src,
                        char **err)
{
    if (dst == NULL || src == NULL) {
        return rig_err(err, "invalid: mesh_manifest_copy: %s is NULL",
                       dst == NULL ? "dst" : "src");
    }
    mesh_manifest m = *src;
    m.name = m.entry = m.ptx = m.wasm = NULL;
    m.args = NULL;
    m.nargs = 0;
    bool ok = dup_field(src->name, &m.name) &&
              dup_field(src->entry, &m.entry) && dup_field(src->ptx, &m.ptx) &&
              dup_field(src->wasm, &m.wasm);
    if (ok && src->nargs > 0) {
        m.args = calloc(src->nargs, sizeof(char *));
        ok = m.args != NULL;
        for (size_t i = 0; ok && i < src->nargs; i++) {
            ok = dup_field(src->args[i], &m.args[i]);
            m.nargs = i + 1;
        }
    }
    if (!ok) {
        mesh_manifest_free(&m);
        return rig_err(err, "nomem: copying manifest %s",
                       src->name != NULL ? src->name : "(unnamed)");
    }
    *dst = m;
    return true;
}
