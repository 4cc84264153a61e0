/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of manifests, mesh_check_manifest and payloads (hashes). */
#include "mesh/backend.h"

#include "../test_util.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define FULL                                                                   \
    "{\"name\": \"heat\", \"abi\": 1, \"backends\": [\"cuda\", \"native\"], "  \
    "\"entry\": \"heat_main\", \"threads\": 256, \"nodes\": 8, "               \
    "\"scratch\": 65536, \"shared\": 4096, \"reg_cap\": 64, "                  \
    "\"ptx\": \"heat2.ptx\", \"wasm\": \"heat2.wasm\", \"reads\": 5, "         \
    "\"args\": [\"--steps\", \"10\"], \"description\": \"2-D heat\"}"

#define BASE "\"name\": \"p\", \"abi\": 1, \"backends\": [\"native\"]"

static bool starts_with_load_reason(const char *msg)
{
#define X(w) #w ": ",
    static const char *const reasons[] = {MESH_LOAD_REASONS(X)};
#undef X
    for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
        if (msg != NULL && strncmp(msg, reasons[i], strlen(reasons[i])) == 0) {
            return true;
        }
    }
    return false;
}

static void test_full(void)
{
    mesh_manifest m;
    char *err = NULL;
    T_OK(mesh_manifest_parse(FULL, strlen(FULL), &m, &err), err);
    if (m.name == NULL) {
        return;
    }
    T_TRUE(strcmp(m.name, "heat") == 0);
    T_EQ_U(m.abi, 1);
    T_EQ_U(m.nbackends, 2);
    T_EQ_U(m.backends[0], MESH_BACKEND_CUDA);
    T_EQ_U(m.backends[1], MESH_BACKEND_NATIVE);
    T_TRUE(strcmp(m.entry, "heat_main") == 0);
    T_EQ_U(m.threads, 256);
    T_EQ_U(m.nodes, 8);
    T_EQ_U(m.scratch, 65536);
    T_EQ_U(m.shared, 4096);
    T_EQ_U(m.reg_cap, 64);
    T_TRUE(strcmp(m.ptx, "heat2.ptx") == 0);
    T_TRUE(strcmp(m.wasm, "heat2.wasm") == 0);
    T_EQ_U(m.reads, 5);
    T_EQ_U(m.nargs, 2);
    T_TRUE(m.nargs == 2 && strcmp(m.args[0], "--steps") == 0 &&
           strcmp(m.args[1], "10") == 0);
    T_TRUE(mesh_manifest_lists(&m, MESH_BACKEND_CUDA));
    T_TRUE(!mesh_manifest_lists(&m, MESH_BACKEND_WASM));

    mesh_manifest c;
    T_OK(mesh_manifest_copy(&c, &m, &err), err);
    T_TRUE(c.name != m.name && strcmp(c.name, m.name) == 0);
    T_TRUE(c.nargs == 2 && c.args != m.args && strcmp(c.args[1], "10") == 0);
    T_EQ_U(c.scratch, m.scratch);
    mesh_manifest_free(&m);
    T_TRUE(m.name == NULL && m.nargs == 0);
    mesh_manifest_free(&m); /* idempotent */
    mesh_manifest_free(&c);
}

static void test_defaults(void)
{
    const char *j = "{" BASE "}";
    mesh_manifest m;
    char *err = NULL;
    T_OK(mesh_manifest_parse(j, strlen(j), &m, &err), err);
    if (m.name == NULL) {
        return;
    }
    T_TRUE(strcmp(m.entry, "p") == 0);
    T_EQ_U(m.threads, 1);
    T_EQ_U(m.nodes, 1);
    T_EQ_U(m.scratch, 0);
    T_EQ_U(m.shared, 0);
    T_EQ_U(m.reg_cap, 0);
    T_EQ_U(m.reads, 0);
    T_EQ_U(m.nargs, 0);
    T_TRUE(strcmp(m.ptx, "p.ptx") == 0);
    T_TRUE(strcmp(m.wasm, "p.wasm") == 0);
    mesh_manifest_free(&m);
}

/* Every rule broken once: the error starts with "manifest: " and names
 * the culprit. */
static void test_rules(void)
{
    static const struct {
        const char *json;
        const char *names;
    } bad[] = {
        {"", "empty"},
        {"{", "not JSON"},
        {"[1, 2]", "not a JSON object"},
        {"{\"abi\": 1, \"backends\": [\"native\"]}", "\"name\""},
        {"{\"name\": 7, \"abi\": 1, \"backends\": [\"native\"]}", "\"name\""},
        {"{\"name\": \"\", \"abi\": 1, \"backends\": [\"native\"]}", "name"},
        {"{\"name\": \"../x\", \"abi\": 1, \"backends\": [\"native\"]}",
         "\"name\""},
        {"{\"name\": \".hidden\", \"abi\": 1, \"backends\": [\"native\"]}",
         "\"name\""},
        {"{\"name\": \"a234567890123456789012345678901234567890123456789012"
         "345678901234\", \"abi\": 1, \"backends\": [\"native\"]}",
         "\"name\""},
        {"{\"name\": \"p\", \"backends\": [\"native\"]}", "\"abi\""},
        {"{\"name\": \"p\", \"abi\": \"1\", \"backends\": [\"native\"]}",
         "\"abi\""},
        {"{\"name\": \"p\", \"abi\": 0, \"backends\": [\"native\"]}",
         "\"abi\""},
        {"{\"name\": \"p\", \"abi\": 1.5, \"backends\": [\"native\"]}",
         "\"abi\""},
        {"{\"name\": \"p\", \"abi\": 1}", "\"backends\""},
        {"{\"name\": \"p\", \"abi\": 1, \"backends\": \"native\"}",
         "\"backends\""},
        {"{\"name\": \"p\", \"abi\": 1, \"backends\": []}", "\"backends\""},
        {"{\"name\": \"p\", \"abi\": 1, \"backends\": [\"vulkan\"]}", "vulkan"},
        {"{\"name\": \"p\", \"abi\": 1, \"backends\": [3]}", "\"backends\""},
        {"{\"name\": \"p\", \"abi\": 1, \"backends\": [\"native\", "
         "\"native\"]}",
         "repeats"},
        {"{\"name\": \"p\", \"abi\": 1, \"backends\": [\"native\", \"cuda\", "
         "\"wasm\", \"metal\", \"native\"]}",
         "\"backends\""},
        {"{" BASE ", \"entry\": \"a/b\"}", "\"entry\""},
        {"{" BASE ", \"threads\": 0}", "\"threads\""},
        {"{" BASE ", \"threads\": 1025}", "\"threads\""},
        {"{" BASE ", \"nodes\": 0}", "\"nodes\""},
        {"{" BASE ", \"nodes\": 257}", "\"nodes\""},
        {"{" BASE ", \"nodes\": -1}", "\"nodes\""},
        {"{" BASE ", \"scratch\": 1073741825}", "\"scratch\""},
        {"{" BASE ", \"scratch\": true}", "\"scratch\""},
        {"{" BASE ", \"shared\": 1048577}", "\"shared\""},
        {"{" BASE ", \"reg_cap\": 256}", "\"reg_cap\""},
        {"{" BASE ", \"ptx\": \"/etc/passwd\"}", "\"ptx\""},
        {"{" BASE ", \"wasm\": \"..\"}", "\"wasm\""},
        {"{" BASE ", \"reads\": 9007199254740993}", "\"reads\""},
        {"{" BASE ", \"args\": \"-v\"}", "\"args\""},
        {"{" BASE ", \"args\": [1]}", "\"args\"[0]"},
        {"{" BASE ", \"args\": [\"a\\u0000b\"]}", "not JSON"},
        {"{" BASE ", \"description\": 3}", "\"description\""},
        {"{" BASE ", \"nodez\": 3}", "unknown key \"nodez\""},
        {"{" BASE ", \"name\": \"q\"}", "not JSON"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mesh_manifest m;
        char *err = NULL;
        bool ok =
            mesh_manifest_parse(bad[i].json, strlen(bad[i].json), &m, &err);
        if (ok) {
            T_FAILF("rule %zu: %s parsed", i, bad[i].json);
            mesh_manifest_free(&m);
            continue;
        }
        if (err == NULL || strncmp(err, "manifest: ", 10) != 0 ||
            strstr(err, bad[i].names) == NULL) {
            T_FAILF("rule %zu: %s: error \"%s\" lacks \"manifest: \" or "
                    "\"%s\"",
                    i, bad[i].json, err != NULL ? err : "(null)", bad[i].names);
        } else {
            CU_PASS("rule");
        }
        T_TRUE(starts_with_load_reason(err));
        free(err);
    }
    /* Too long, and args past their limits. */
    size_t n = MESH_MANIFEST_MAX_BYTES + 1;
    char *big = malloc(n);
    memset(big, ' ', n);
    mesh_manifest m;
    char *err = NULL;
    T_ERR(mesh_manifest_parse(big, n, &m, &err), err, "manifest: ");
    free(big);
    char args[2048] = "{" BASE ", \"args\": [";
    for (int i = 0; i < 65; i++) {
        strcat(args, i > 0 ? ", \"x\"" : "\"x\"");
    }
    strcat(args, "]}");
    T_ERR(mesh_manifest_parse(args, strlen(args), &m, &err), err,
          "manifest: \"args\" has 65");
    T_ERR(mesh_manifest_parse(NULL, 3, &m, &err), err, "invalid: ");
}

static void test_names(void)
{
    T_TRUE(mesh_manifest_name_ok("pi"));
    T_TRUE(mesh_manifest_name_ok("a.b-c_D9"));
    T_TRUE(!mesh_manifest_name_ok(NULL));
    T_TRUE(!mesh_manifest_name_ok(""));
    T_TRUE(!mesh_manifest_name_ok("."));
    T_TRUE(!mesh_manifest_name_ok("-rf"));
    T_TRUE(!mesh_manifest_name_ok("a b"));
    T_TRUE(!mesh_manifest_name_ok("a/b"));
}

static void make_payload(mesh_payload *p, const char *manifest)
{
    char *err = NULL;
    T_OK(mesh_payload_init(p, "p", &err), err);
    T_OK(mesh_payload_add(p, "manifest.json", manifest, strlen(manifest), &err),
         err);
}

static void test_check_manifest(void)
{
    mesh_payload p;
    mesh_manifest m;
    char *err = NULL;
    make_payload(&p, "{" BASE "}");
    T_OK(mesh_check_manifest(&p, MESH_BACKEND_NATIVE, &m, &err), err);
    mesh_manifest_free(&m);
    T_ERR(mesh_check_manifest(&p, MESH_BACKEND_CUDA, &m, &err), err,
          "unsupported: program p does not list backend cuda");
    T_ERR(mesh_check_manifest(&p, 7, &m, &err), err, "unsupported: ");
    T_ERR(mesh_check_manifest(NULL, MESH_BACKEND_NATIVE, &m, &err), err,
          "invalid: ");
    mesh_payload_free(&p);

    make_payload(&p, "{\"name\": \"p\", \"abi\": 2, \"backends\": "
                     "[\"native\"]}");
    T_ERR(mesh_check_manifest(&p, MESH_BACKEND_NATIVE, &m, &err), err,
          "abi: program p was built for runtime ABI 2");
    mesh_payload_free(&p);

    make_payload(&p, "{\"name\": \"q\", \"abi\": 1, \"backends\": "
                     "[\"native\"]}");
    T_ERR(mesh_check_manifest(&p, MESH_BACKEND_NATIVE, &m, &err), err,
          "manifest: name \"q\" does not match");
    mesh_payload_free(&p);

    T_OK(mesh_payload_init(&p, "p", &err), err);
    T_ERR(mesh_check_manifest(&p, MESH_BACKEND_NATIVE, &m, &err), err,
          "manifest: program p has no manifest.json");
    mesh_payload_free(&p);
}

/* A fixed payload: its hash must never change (peers and caches key on
 * it).  The constant was computed once by this implementation. */
#define GOLDEN_HASH 0x6a4247db2d6c3a4dull

static void golden(mesh_payload *p)
{
    char *err = NULL;
    T_OK(mesh_payload_init(p, "p", &err), err);
    T_OK(mesh_payload_add(p, "x86_64-unknown-linux-gnu/p", "\177ELF....", 8,
                          &err),
         err);
    T_OK(mesh_payload_add(p, "manifest.json", "{" BASE "}",
                          strlen("{" BASE "}"), &err),
         err);
    T_OK(mesh_payload_add(p, "p.ptx", "", 0, &err), err);
}

static void test_hash(void)
{
    mesh_payload p, q;
    char *err = NULL;
    golden(&p);
    T_EQ_U(p.nfiles, 3);
    T_TRUE(strcmp(p.files[0].path, "manifest.json") == 0);
    T_TRUE(strcmp(p.files[1].path, "p.ptx") == 0);
    uint64_t h = mesh_payload_hash(&p);
    if (h != GOLDEN_HASH) {
        T_FAILF("hash %016llx != golden %016llx", (unsigned long long)h,
                GOLDEN_HASH);
    }
    T_EQ_U(mesh_payload_hash(&p), h); /* stable */
    /* The documented format, hashed in one shot: path, NUL, le64 length,
     * bytes, for each file in order. */
    uint8_t canon[512];
    size_t n = 0;
    for (size_t f = 0; f < p.nfiles; f++) {
        size_t pl = strlen(p.files[f].path) + 1;
        memcpy(canon + n, p.files[f].path, pl);
        n += pl;
        for (int i = 0; i < 8; i++) {
            canon[n++] = (uint8_t)((uint64_t)p.files[f].len >> (8 * i));
        }
        memcpy(canon + n, p.files[f].data, p.files[f].len);
        n += p.files[f].len;
    }
    T_EQ_U(XXH3_64bits(canon, n), h);
    T_OK(mesh_payload_copy(&q, &p, &err), err);
    T_EQ_U(mesh_payload_hash(&q), h);
    mesh_payload_free(&q);

    /* Any single flipped bit of any file changes it. */
    size_t flips = 0, changed = 0;
    for (size_t f = 0; f < p.nfiles; f++) {
        for (size_t i = 0; i < p.files[f].len; i++) {
            for (int b = 0; b < 8; b++) {
                p.files[f].data[i] ^= (uint8_t)(1u << b);
                changed += mesh_payload_hash(&p) != h;
                flips++;
                p.files[f].data[i] ^= (uint8_t)(1u << b);
            }
        }
    }
    T_EQ_U(changed, flips);
    T_EQ_U(mesh_payload_hash(&p), h);
    /* A renamed file, a moved byte between files, an added empty file. */
    p.files[1].path[0] = 'q';
    T_TRUE(mesh_payload_hash(&p) != h);
    p.files[1].path[0] = 'p';
    T_OK(mesh_payload_add(&p, "zz", "", 0, &err), err);
    T_TRUE(mesh_payload_hash(&p) != h);
    mesh_payload_free(&p);
    T_EQ_U(mesh_payload_hash(NULL), 0);

    /* Paths are plain and unique. */
    golden(&p);
    T_ERR(mesh_payload_add(&p, "../etc/passwd", "x", 1, &err), err,
          "invalid: ");
    T_ERR(mesh_payload_add(&p, "/abs", "x", 1, &err), err, "invalid: ");
    T_ERR(mesh_payload_add(&p, "a//b", "x", 1, &err), err, "invalid: ");
    T_ERR(mesh_payload_add(&p, "p.ptx", "x", 1, &err), err, "invalid: ");
    T_EQ_U(p.nfiles, 3);
    T_EQ_U(mesh_payload_hash(&p), h);
    mesh_payload_free(&p);
    T_ERR(mesh_payload_init(&p, "a/b", &err), err, "invalid: ");
}

static void test_read(void)
{
    mesh_payload p, q;
    char *err = NULL;
    T_OK(mesh_payload_read(MESH_TEST_PROGRAMS, "t_ok", &p, &err), err);
    if (p.name == NULL) {
        return;
    }
    T_EQ_U(p.nfiles, 2);
    char *bin = NULL;
    T_TRUE(asprintf(&bin, "%s/t_ok", mesh_native_target()) > 0);
    T_TRUE(mesh_payload_find(&p, bin) != NULL);
    T_TRUE(p.dir != NULL && strstr(p.dir, "/t_ok") != NULL);
    /* The same files built in memory hash the same. */
    T_OK(mesh_payload_init(&q, "t_ok", &err), err);
    for (size_t i = p.nfiles; i > 0; i--) {
        T_OK(mesh_payload_add(&q, p.files[i - 1].path, p.files[i - 1].data,
                              p.files[i - 1].len, &err),
             err);
    }
    T_EQ_U(mesh_payload_hash(&q), mesh_payload_hash(&p));
    mesh_payload_free(&q);
    mesh_payload_free(&p);
    free(bin);

    T_ERR(mesh_payload_read(MESH_TEST_PROGRAMS, "t_nothere", &p, &err), err,
          "missing: program t_nothere");
    T_ERR(mesh_payload_read(MESH_TEST_PROGRAMS, "../programs", &p, &err), err,
          "invalid: ");
    T_ERR(mesh_payload_read(NULL, "t_ok", &p, &err), err, "invalid: ");
    /* t_gpu lists cuda and wasm but has neither file: only its manifest. */
    T_OK(mesh_payload_read(MESH_TEST_PROGRAMS, "t_gpu", &p, &err), err);
    T_EQ_U(p.nfiles, 1);
    mesh_payload_free(&p);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite s = CU_add_suite("mesh_manifest", NULL, NULL);
    CU_add_test(s, "full manifest", test_full);
    CU_add_test(s, "defaults", test_defaults);
    CU_add_test(s, "every rule broken once", test_rules);
    CU_add_test(s, "names", test_names);
    CU_add_test(s, "check_manifest", test_check_manifest);
    CU_add_test(s, "hash stability and sensitivity", test_hash);
    CU_add_test(s, "catalog read", test_read);
    return t_run_registry();
}
