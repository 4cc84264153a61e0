/* SPDX-License-Identifier: BSD-3-Clause */
/* Reads a wasm module's sections: its imports, exports and memory. */
#include "wasm_internal.h"

#include "../../util/util_internal.h"

#include "mesh/wasm.h"

#include <stdlib.h>
#include <string.h>

/* Value types of the binary format. */
#define VT_I32 0x7f
#define VT_I64 0x7e

/* The most types, imports and exports rig reads: far beyond any program,
 * small enough that a hostile count cannot make us loop for long. */
#define MAX_ITEMS 100000u

/* One of rig's imports: its name and type (params, then results). */
typedef struct {
    const char *name;
    const char *params;
    const char *results;
} host_import;

/* mesh/wasm.h's functions, as value-type strings ('i' i32, 'I' i64). */
static const host_import host_imports[] = {
    {"online", "", ""},
    {"slot", "", "i"},
    {"node", "", "i"},
    {"nodes", "", "i"},
    {"halted", "", "i"},
    {"point", "iI", "i"},
    {"fail", "i", ""},
    {"scratch_size", "", "I"},
    {"scratch_read", "iIi", ""},
    {"scratch_write", "Iii", ""},
    {"end_bound", "i", "i"},
    {"end_id", "i", "I"},
    {"end_peer", "i", "i"},
    {"end_here", "i", "i"},
    {"end_bytes", "ii", "I"},
    {"end_write", "iiIii", ""},
    {"end_read", "iiIii", ""},
    {"end_ready", "iI", ""},
    {"end_wait_arrived", "iI", "i"},
    {"end_wait_sent", "iI", "i"},
    {"end_find", "I", "i"},
    {"end_arrived", "i", "I"},
    {"end_sent", "i", "I"},
};

typedef struct {
    const uint8_t *p, *end;
    const uint8_t *base;
} rd;

typedef struct {
    uint32_t off;     /* where the type's bytes start */
    uint32_t nparams; /* counts */
    uint32_t nresults;
} functype;

static bool bad(char **err, const rd *r, const char *what)
{
    return rig_err(err,
                   "compile: the module is not valid wasm: %s at byte "
                   "%zu",
                   what, (size_t)(r->p - r->base));
}

static bool rd_u8(rd *r, uint8_t *out, char **err)
{
    if (r->p >= r->end) {
        return bad(err, r, "unexpected end");
    }
    *out = *r->p++;
    return true;
}

/* An unsigned LEB128 of at most 32 bits. */
static bool rd_u32(rd *r, uint32_t *out, char **err)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 35; shift += 7) {
        uint8_t b = 0;
        if (!rd_u8(r, &b, err)) {
            return false;
        }
        v |= (uint64_t)(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            if (v > UINT32_MAX) {
                return bad(err, r, "integer too large");
            }
            *out = (uint32_t)v;
            return true;
        }
    }
    return bad(err, r, "integer representation too long");
}

static bool rd_skip(rd *r, uint32_t n, char **err)
{
    if ((size_t)(r->end - r->p) < n) {
        return bad(err, r, "unexpected end");
    }
    r->p += n;
    return true;
}

/* A name: its bytes stay in the module (not NUL-terminated). */
static bool rd_name(rd *r, const uint8_t **s, uint32_t *n, char **err)
{
    if (!rd_u32(r, n, err)) {
        return false;
    }
    *s = r->p;
    return rd_skip(r, *n, err);
}

static bool rd_count(rd *r, uint32_t *n, char **err)
{
    if (!rd_u32(r, n, err)) {
        return false;
    }
    if (*n > MAX_ITEMS || *n > (size_t)(r->end - r->p)) {
        return bad(err, r, "count too large");
    }
    return true;
}

static bool rd_limits(rd *r, uint32_t *min, bool *shared, char **err)
{
    uint8_t flags = 0;
    uint32_t max;
    if (!rd_u8(r, &flags, err) || !rd_u32(r, min, err)) {
        return false;
    }
    if (flags > 3) {
        return bad(err, r, "bad limits flags");
    }
    *shared = (flags & 2) != 0;
    return (flags & 1) == 0 || rd_u32(r, &max, err);
}

static bool name_is(const uint8_t *s, uint32_t n, const char *want)
{
    return strlen(want) == n && memcmp(s, want, n) == 0;
}

/* The type's value types as a string of 'i', 'I', 'f', 'F', '?'. */
static void type_str(const uint8_t *base, uint32_t off, uint32_t n, char *buf,
                     size_t cap)
{
    size_t k = 0;
    for (uint32_t i = 0; i < n && k + 1 < cap; i++) {
        uint8_t v = base[off + i];
        buf[k++] = v == VT_I32   ? 'i'
                   : v == VT_I64 ? 'I'
                   : v == 0x7d   ? 'f'
                   : v == 0x7c   ? 'F'
                                 : '?';
    }
    buf[k] = '\0';
}

static bool read_types(rd *r, functype **types, uint32_t *ntypes, char **err)
{
    uint32_t n;
    if (!rd_count(r, &n, err)) {
        return false;
    }
    functype *t = calloc(n ? n : 1, sizeof(*t));
    if (t == NULL) {
        return rig_err(err, "nomem: module types");
    }
    for (uint32_t i = 0; i < n; i++) {
        uint8_t form = 0;
        if (!rd_u8(r, &form, err)) {
            goto err_free;
        }
        if (form != 0x60) {
            bad(err, r, "bad function type");
            goto err_free;
        }
        if (!rd_count(r, &t[i].nparams, err)) {
            goto err_free;
        }
        t[i].off = (uint32_t)(r->p - r->base);
        if (!rd_skip(r, t[i].nparams, err) ||
            !rd_count(r, &t[i].nresults, err) ||
            !rd_skip(r, t[i].nresults, err)) {
            goto err_free;
        }
    }
    free(*types);
    *types = t;
    *ntypes = n;
    return true;
err_free:
    free(t);
    return false;
}

/* Whether type t is params -> results in 'i'/'I' letters. */
static bool type_is(const rd *r, const functype *t, const char *params,
                    const char *results)
{
    char p[16], q[16];
    if (t->nparams != strlen(params) || t->nresults != strlen(results)) {
        return false;
    }
    type_str(r->base, t->off, t->nparams, p, sizeof(p));
    type_str(r->base, t->off + t->nparams + 1, t->nresults, q, sizeof(q));
    return strcmp(p, params) == 0 && strcmp(q, results) == 0;
}

static bool check_import(const rd *r, const functype *types, uint32_t ntypes,
                         const uint8_t *mod, uint32_t nmod,
                         const uint8_t *field, uint32_t nfield, uint32_t type,
                         char **err)
{
    if (!name_is(mod, nmod, MESH_WASM_IMPORT_MODULE)) {
        return rig_err(err,
                       "unsupported: the module imports %.*s.%.*s, which "
                       "rig does not provide (only the \"%s\" functions of "
                       "mesh/wasm.h)",
                       (int)(nmod > 64 ? 64 : nmod), (const char *)mod,
                       (int)(nfield > 64 ? 64 : nfield), (const char *)field,
                       MESH_WASM_IMPORT_MODULE);
    }
    for (size_t i = 0; i < sizeof(host_imports) / sizeof(host_imports[0]);
         i++) {
        const host_import *h = &host_imports[i];
        if (!name_is(field, nfield, h->name)) {
            continue;
        }
        if (type >= ntypes) {
            return rig_err(err, "compile: import %s.%s has type %u of %u",
                           MESH_WASM_IMPORT_MODULE, h->name, type, ntypes);
        }
        if (!type_is(r, &types[type], h->params, h->results)) {
            return rig_err(err,
                           "unsupported: the module imports %s.%s with "
                           "another type than rig's (see mesh/wasm.h)",
                           MESH_WASM_IMPORT_MODULE, h->name);
        }
        return true;
    }
    return rig_err(err,
                   "unsupported: the module imports %s.%.*s, which rig "
                   "does not provide (see mesh/wasm.h)",
                   MESH_WASM_IMPORT_MODULE, (int)(nfield > 64 ? 64 : nfield),
                   (const char *)field);
}

typedef struct {
    functype *types;
    uint32_t ntypes;
    uint32_t *ifunc_type; /* imported functions' types */
    uint32_t nifuncs;
    uint32_t *func_type; /* defined functions' types */
    uint32_t nfuncs;
    int64_t entry_func; /* -1: not exported */
    bool entry_other;   /* exported, but not as a function */
} mod_state;

static bool read_imports(rd *r, mod_state *s, mesh_wasm_info *info, char **err)
{
    uint32_t n;
    if (!rd_count(r, &n, err)) {
        return false;
    }
    free(s->ifunc_type);
    s->ifunc_type = calloc(n ? n : 1, sizeof(uint32_t));
    s->nifuncs = 0;
    if (s->ifunc_type == NULL) {
        return rig_err(err, "nomem: module imports");
    }
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *mod, *field;
        uint32_t nmod, nfield, type;
        uint8_t kind = 0;
        if (!rd_name(r, &mod, &nmod, err) ||
            !rd_name(r, &field, &nfield, err) || !rd_u8(r, &kind, err)) {
            return false;
        }
        if (kind != 0) {
            static const char *const kinds[] = {"function", "table", "memory",
                                                "global"};
            return rig_err(err,
                           "unsupported: the module imports a %s "
                           "(%.*s.%.*s); rig provides only the functions "
                           "of mesh/wasm.h",
                           kind < 4 ? kinds[kind] : "thing",
                           (int)(nmod > 64 ? 64 : nmod), (const char *)mod,
                           (int)(nfield > 64 ? 64 : nfield),
                           (const char *)field);
        }
        if (!rd_u32(r, &type, err) ||
            !check_import(r, s->types, s->ntypes, mod, nmod, field, nfield,
                          type, err)) {
            return false;
        }
        s->ifunc_type[s->nifuncs++] = type;
        info->imports_mesh = true;
    }
    return true;
}

static bool read_funcs(rd *r, mod_state *s, char **err)
{
    uint32_t n;
    if (!rd_count(r, &n, err)) {
        return false;
    }
    free(s->func_type);
    s->func_type = calloc(n ? n : 1, sizeof(uint32_t));
    if (s->func_type == NULL) {
        return rig_err(err, "nomem: module functions");
    }
    for (uint32_t i = 0; i < n; i++) {
        if (!rd_u32(r, &s->func_type[i], err)) {
            return false;
        }
    }
    s->nfuncs = n;
    return true;
}

static bool read_memories(rd *r, mesh_wasm_info *info, char **err)
{
    uint32_t n, min;
    bool shared = false;
    if (!rd_count(r, &n, err)) {
        return false;
    }
    if (n > 1) {
        return rig_err(err,
                       "unsupported: the module defines %u memories "
                       "(rig runs one)",
                       n);
    }
    if (n == 1) {
        if (!rd_limits(r, &min, &shared, err)) {
            return false;
        }
        if (shared) {
            return rig_err(err, "unsupported: the module's memory is shared "
                                "(threads are not enabled)");
        }
        if (min > 65536) {
            return bad(err, r, "memory larger than 4 GiB");
        }
        info->has_memory = true;
        info->min_pages = min;
    }
    return true;
}

static bool read_exports(rd *r, mod_state *s, const char *entry, char **err)
{
    uint32_t n;
    if (!rd_count(r, &n, err)) {
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *name;
        uint32_t nname, index;
        uint8_t kind = 0;
        if (!rd_name(r, &name, &nname, err) || !rd_u8(r, &kind, err) ||
            !rd_u32(r, &index, err)) {
            return false;
        }
        if (name_is(name, nname, entry)) {
            if (kind == 0) {
                s->entry_func = index;
            } else {
                s->entry_other = true;
            }
        }
    }
    return true;
}

static bool check_entry(const rd *r, const mod_state *s, const char *entry,
                        char **err)
{
    if (s->entry_func < 0) {
        return rig_err(err,
                       "compile: the module exports no function \"%s\" "
                       "(the manifest's entry)%s",
                       entry, s->entry_other ? "; it is not a function" : "");
    }
    uint64_t f = (uint64_t)s->entry_func;
    uint32_t type;
    if (f < s->nifuncs) {
        type = s->ifunc_type[f];
    } else if (f - s->nifuncs < s->nfuncs) {
        type = s->func_type[f - s->nifuncs];
    } else {
        return rig_err(err,
                       "compile: the module's export \"%s\" names "
                       "function %llu, which does not exist",
                       entry, (unsigned long long)f);
    }
    if (type >= s->ntypes || !type_is(r, &s->types[type], "", "")) {
        return rig_err(err,
                       "compile: the entry \"%s\" must take no "
                       "parameters and return nothing",
                       entry);
    }
    return true;
}

bool mesh_wasm_inspect(const uint8_t *bytes, size_t len, const char *entry,
                       mesh_wasm_info *out, char **err)
{
    static const uint8_t head[8] = {0, 'a', 's', 'm', 1, 0, 0, 0};
    if ((bytes == NULL && len > 0) || entry == NULL || out == NULL) {
        return rig_err(err, "invalid: mesh_wasm_inspect: NULL argument");
    }
    if (len < 8 || memcmp(bytes, head, 4) != 0) {
        return rig_err(err, "compile: the module is not wasm (no \\0asm "
                            "magic)");
    }
    if (memcmp(bytes + 4, head + 4, 4) != 0) {
        return rig_err(err,
                       "compile: the module is wasm version %u; rig "
                       "runs version 1",
                       (unsigned)bytes[4]);
    }
    rd r = {bytes + 8, bytes + len, bytes};
    mod_state s = {.entry_func = -1};
    mesh_wasm_info info = {0};
    bool ok = false;
    uint8_t last = 0;
    while (r.p < r.end) {
        uint8_t id;
        uint32_t size;
        if (!rd_u8(&r, &id, err) || !rd_u32(&r, &size, err)) {
            goto out_free;
        }
        if ((size_t)(r.end - r.p) < size) {
            bad(err, &r, "section runs past the end");
            goto out_free;
        }
        /* Known sections come once each and in order; 12 (data count)
         * sits between 10 and 11 in the binary's order. */
        uint8_t rank = id == 12 ? 10 : id > 9 ? id + 1 : id;
        if (id > 12 || (id != 0 && rank <= last)) {
            bad(err, &r, id > 12 ? "unknown section" : "section out of order");
            goto out_free;
        }
        if (id != 0) {
            last = rank;
        }
        rd sec = {r.p, r.p + size, bytes};
        bool sok = true;
        switch (id) {
        case 1:
            sok = read_types(&sec, &s.types, &s.ntypes, err);
            break;
        case 2:
            sok = read_imports(&sec, &s, &info, err);
            break;
        case 3:
            sok = read_funcs(&sec, &s, err);
            break;
        case 5:
            sok = read_memories(&sec, &info, err);
            break;
        case 7:
            sok = read_exports(&sec, &s, entry, err);
            break;
        default:
            sec.p = sec.end;
            break;
        }
        if (!sok) {
            goto out_free;
        }
        if (sec.p != sec.end) {
            bad(err, &sec, "section size mismatch");
            goto out_free;
        }
        r.p += size;
    }
    if (!check_entry(&r, &s, entry, err)) {
        goto out_free;
    }
    *out = info;
    ok = true;
out_free:
    free(s.types);
    free(s.ifunc_type);
    free(s.func_type);
    return ok;
}
