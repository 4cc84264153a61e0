/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: arbitrary bytes as a wasm program's module, through the
 * wasm backend's prepare.  Aborts when a refusal lacks its reason word;
 * modules that pass the checks really go through wasm2c and the C compiler
 * (the cache makes repeats cheap), and those that compile are loaded. */
#include "mesh/wasm/wasm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static mesh_wasm_tools tools;
static int ready; /* 1: tools open; -1: no wasm2c here */

static void must(int cond)
{
    if (!cond) {
        abort();
    }
}

/* The words a prepare's refusal may start with. */
static int reason_ok(const char *e)
{
    static const char *const words[] = {
        "manifest: ", "abi: ",     "unsupported: ", "missing: ",
        "hash: ",     "compile: ", "limits: ",      "load: ",
        "system: ",   "nomem: ",   "timeout: "};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (strncmp(e, words[i], strlen(words[i])) == 0) {
            return 1;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (ready == 0) {
        char dir[] = "/tmp/rig-fuzz-wasm.XXXXXX";
        must(mkdtemp(dir) != NULL);
        setenv("RIG_WASM_CACHE", dir, 1);
        setenv("RIG_WASM_COMPILE_TIMEOUT_MS", "20000", 1);
        char *err = NULL;
        ready = mesh_wasm_tools_open(&tools, &err) ? 1 : -1;
        if (ready < 0) {
            fprintf(stderr, "fuzz_wasm: %s\n", err);
            must(strncmp(err, "unsupported: ", 13) == 0);
            free(err);
        }
    }
    if (ready < 0) {
        return 0;
    }
    static const char json[] =
        "{\"name\": \"f\", \"abi\": 1, \"backends\": [\"wasm\"], "
        "\"entry\": \"f\"}";
    mesh_payload p;
    char *err = NULL;
    must(mesh_payload_init(&p, "f", &err));
    must(mesh_payload_add(&p, "manifest.json", json, strlen(json), &err));
    must(mesh_payload_add(&p, "f.wasm", data, size, &err));
    mesh_prepared out;
    mesh_wasm_image *img = NULL;
    if (mesh_wasm_prepare(&tools, &p, NULL, &out, &img, &err)) {
        must(img != NULL && img->mod != NULL);
        mesh_wasm_image_free(img, false);
        mesh_prepared_free(&out);
    } else {
        must(err != NULL && reason_ok(err));
        free(err);
    }
    return 0;
}
