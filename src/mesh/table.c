/* SPDX-License-Identifier: BSD-3-Clause */
/* The table of backends indexed by kind, and opening one of them.
 *
 * Metal has a row so that its kind keeps its number and name; opening it is
 * "unsupported: " like any backend that is not built.  cuda and wasm are
 * reached through the hooks of mesh_internal.h (weak stubs here). */
#include "mesh_internal.h"

#include "../util/util_internal.h"

#include <stdlib.h>
#include <string.h>

/* Weak stubs of the hooks in mesh_internal.h: the real backends override
 * them at link time. */
__attribute__((weak)) bool mesh_cuda_open(const mesh_settings *s,
                                          mesh_backend **out, char **err)
{
    (void)s;
    (void)out;
    return rig_err(err, "unsupported: backend cuda is not built into this "
                        "rig");
}

__attribute__((weak)) bool mesh_cuda_built(void)
{
    return false;
}

__attribute__((weak)) bool mesh_wasm_open(const mesh_settings *s,
                                          mesh_backend **out, char **err)
{
    (void)s;
    (void)out;
    return rig_err(err, "unsupported: backend wasm is not built into this "
                        "rig");
}

__attribute__((weak)) bool mesh_wasm_built(void)
{
    return false;
}

static bool metal_open(const mesh_settings *s, mesh_backend **out, char **err)
{
    (void)s;
    (void)out;
    return rig_err(err, "unsupported: backend metal is not ported (Metal "
                        "Shading Language is C++)");
}

typedef struct {
    const char *name;
    mesh_open_fn open;
} mesh_table_row;

static const mesh_table_row mesh_table[MESH_BACKEND_COUNT] = {
    [MESH_BACKEND_CUDA] = {.name = "cuda", .open = mesh_cuda_open},
    [MESH_BACKEND_METAL] = {.name = "metal", .open = metal_open},
    [MESH_BACKEND_WASM] = {.name = "wasm", .open = mesh_wasm_open},
    [MESH_BACKEND_NATIVE] = {.name = "native", .open = mesh_native_open},
};

const char *mesh_backend_name(uint32_t kind)
{
    return kind < MESH_BACKEND_COUNT ? mesh_table[kind].name : NULL;
}

bool mesh_backend_kind(const char *name, uint32_t *kind)
{
    if (name == NULL) {
        return false;
    }
    for (uint32_t k = 0; k < MESH_BACKEND_COUNT; k++) {
        if (strcmp(name, mesh_table[k].name) == 0) {
            if (kind != NULL) {
                *kind = k;
            }
            return true;
        }
    }
    return false;
}

bool mesh_backend_built(uint32_t kind)
{
    switch (kind) {
    case MESH_BACKEND_NATIVE:
        return true;
    case MESH_BACKEND_CUDA:
        return mesh_cuda_built();
    case MESH_BACKEND_WASM:
        return mesh_wasm_built();
    default:
        return false;
    }
}

static bool setting(const char *env, uint32_t given, uint32_t dflt,
                    uint32_t *out, char **err)
{
    if (given != 0) {
        *out = given;
        return true;
    }
    uint64_t v = 0;
    if (!rig_env_u64(env, dflt, &v, err)) {
        return false;
    }
    if (v == 0 || v > 3600u * 1000u) {
        return rig_err(err, "invalid: %s=%llu is not within 1..3600000 ms", env,
                       (unsigned long long)v);
    }
    *out = (uint32_t)v;
    return true;
}

/* Required ops are checked once, here, never in the hot path. */
static bool check_ops(uint32_t kind, const mesh_backend *b, char **err)
{
    const mesh_backend_ops *o = b->ops;
    const char *missing = NULL;
    if (o == NULL) {
        missing = "ops";
    } else if (o->caps == NULL) {
        missing = "caps";
    } else if (o->isolated == NULL) {
        missing = "isolated";
    } else if (o->resident == NULL) {
        missing = "resident";
    } else if (o->isolation == NULL) {
        missing = "isolation";
    } else if (o->mailbox == NULL) {
        missing = "mailbox";
    } else if (o->make_current == NULL) {
        missing = "make_current";
    } else if (o->compiler == NULL) {
        missing = "compiler";
    } else if (o->load == NULL) {
        missing = "load";
    } else if (o->new_stream == NULL) {
        missing = "new_stream";
    } else if (o->launch == NULL) {
        missing = "launch";
    } else if (o->query == NULL) {
        missing = "query";
    } else if (o->unload == NULL) {
        missing = "unload";
    } else if (o->stack_limit == NULL) {
        missing = "stack_limit";
    } else if (o->set_stack_limit == NULL) {
        missing = "set_stack_limit";
    } else if (o->module_scope == NULL) {
        missing = "module_scope";
    } else if (o->destroy == NULL) {
        missing = "destroy";
    }
    if (missing != NULL) {
        return rig_err(err, "invalid: backend %s lacks required op %s",
                       mesh_table[kind].name, missing);
    }
    return true;
}

bool mesh_backend_open(uint32_t kind, const mesh_backend_options *opt,
                       mesh_backend **out, char **err)
{
    if (out == NULL) {
        return rig_err(err, "invalid: mesh_backend_open: out is NULL");
    }
    if (kind >= MESH_BACKEND_COUNT) {
        return rig_err(err,
                       "unsupported: backend kind %u is unknown (known: "
                       "0..%u)",
                       kind, MESH_BACKEND_COUNT - 1);
    }
    mesh_backend_options none = {0};
    if (opt == NULL) {
        opt = &none;
    }
    mesh_settings s;
    if (!setting("RIG_MESH_ONLINE_TIMEOUT_MS", opt->online_timeout_ms, 2000,
                 &s.online_timeout_ms, err) ||
        !setting("RIG_MESH_HALT_MS", opt->halt_ms, 500, &s.halt_ms, err) ||
        !setting("RIG_MESH_GRACE_MS", opt->grace_ms, 1000, &s.grace_ms, err)) {
        return false;
    }
    mesh_backend *b = NULL;
    if (!mesh_table[kind].open(&s, &b, err)) {
        return false;
    }
    if (!check_ops(kind, b, err)) {
        mesh_backend_destroy(b);
        return false;
    }
    *out = b;
    return true;
}
