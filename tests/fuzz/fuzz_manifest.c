/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: the manifest parser and mesh_check_manifest on
 * arbitrary bytes.  Aborts when an accepted manifest breaks a rule of
 * mesh/manifest.h, a copy differs, or a refusal lacks its reason word.
 *
 * Build (tests/fuzz/run.sh, with M the mesh sources but print_target.c):
 *   clang -g -O1 -std=gnu11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined
 *     -Iinclude -I<build> tests/fuzz/fuzz_manifest.c $M
 *     src/mesh/native/native.c src/util/util.c -ljansson -lxxhash -lhwloc
 *     -pthread */
#include "mesh/backend.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void must(int cond)
{
    if (!cond) {
        abort();
    }
}

static int starts(const char *s, const char *prefix)
{
    return s != NULL && strncmp(s, prefix, strlen(prefix)) == 0;
}

static void check_accepted(const mesh_manifest *m)
{
    must(mesh_manifest_name_ok(m->name) && mesh_manifest_name_ok(m->entry) &&
         mesh_manifest_file_ok(m->ptx) && mesh_manifest_file_ok(m->wasm));
    must(m->abi >= 1 && m->abi <= INT32_MAX);
    must(m->nbackends >= 1 && m->nbackends <= MESH_BACKEND_COUNT);
    for (size_t i = 0; i < m->nbackends; i++) {
        must(m->backends[i] < MESH_BACKEND_COUNT);
        for (size_t j = 0; j < i; j++) {
            must(m->backends[i] != m->backends[j]);
        }
    }
    must(m->threads >= 1 && m->threads <= MESH_MANIFEST_MAX_THREADS);
    must(m->nodes >= 1 && m->nodes <= MESH_MANIFEST_MAX_NODES);
    must(m->scratch <= MESH_MANIFEST_MAX_SCRATCH);
    must(m->shared <= MESH_MANIFEST_MAX_SHARED && m->reg_cap <= 255);
    must(m->reads <= (1ull << 53));
    must(m->nargs <= MESH_MANIFEST_MAX_ARGS &&
         (m->nargs == 0) == (m->args == NULL));
    for (size_t i = 0; i < m->nargs; i++) {
        must(m->args[i] != NULL && strlen(m->args[i]) <= MESH_MANIFEST_MAX_ARG);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mesh_manifest m;
    char *err = NULL;
    if (!mesh_manifest_parse((const char *)data, size, &m, &err)) {
        must(starts(err, "manifest: "));
        free(err);
        return 0;
    }
    must(err == NULL);
    check_accepted(&m);
    mesh_manifest c;
    must(mesh_manifest_copy(&c, &m, NULL));
    must(strcmp(c.name, m.name) == 0 && c.nodes == m.nodes &&
         c.nargs == m.nargs && c.scratch == m.scratch);
    mesh_manifest_free(&c);

    /* As a payload's manifest: accepted for a listed backend (abi 1), or
     * refused with a load reason. */
    mesh_payload p;
    if (mesh_payload_init(&p, m.name, NULL) &&
        mesh_payload_add(&p, "manifest.json", data, size, NULL)) {
        for (uint32_t k = 0; k < MESH_BACKEND_COUNT; k++) {
            mesh_manifest out;
            err = NULL;
            if (mesh_check_manifest(&p, k, &out, &err)) {
                must(m.abi == MESH_RT_ABI_VERSION &&
                     mesh_manifest_lists(&m, k));
                mesh_manifest_free(&out);
            } else {
                must(starts(err, "abi: ") || starts(err, "unsupported: "));
                must(m.abi != MESH_RT_ABI_VERSION ||
                     !mesh_manifest_lists(&m, k));
                free(err);
            }
        }
        must(mesh_payload_hash(&p) != 0 || size == 0);
    }
    mesh_payload_free(&p);
    mesh_manifest_free(&m);
    return 0;
}
