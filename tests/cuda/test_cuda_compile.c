/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA backend without a GPU: the dlopen path, nvJitLink, prepare.
 *
 * nvJitLink compiles for any arch with no device present, so everything
 * here runs on a machine without a GPU; the no-driver assertions turn into
 * a check that the driver does open where one is installed. */
#include "mesh/cuda/cuda_internal.h"

#include "mesh/executors.h"
#include "mesh/loader.h"
#include "mesh/mesh_internal.h"
#include "test_util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mesh_compiler *sm90;

static bool read_file(const char *path, uint8_t **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return false;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    bool ok = b != NULL && fread(b, 1, (size_t)n, f) == (size_t)n;
    fclose(f);
    if (!ok) {
        free(b);
        return false;
    }
    b[n] = '\0';
    *data = b;
    *len = (size_t)n;
    return true;
}

/* An in-memory payload: manifest plus one PTX file (ptx may be NULL). */
static void payload(mesh_payload *p, const char *name, const char *manifest,
                    const char *ptx_name, const void *ptx, size_t ptx_len)
{
    char *err = NULL;
    T_OK(mesh_payload_init(p, name, &err), err);
    T_OK(mesh_payload_add(p, "manifest.json", manifest, strlen(manifest), &err),
         err);
    if (ptx != NULL) {
        T_OK(mesh_payload_add(p, ptx_name, ptx, ptx_len, &err), err);
    }
}

static bool compile_file(const char *path, const char *arch, uint32_t cap,
                         const char *kernel, mesh_cubin_info *info)
{
    mesh_njl_lib j;
    char *err = NULL;
    uint8_t *ptx = NULL, *cubin = NULL;
    size_t ptx_len = 0, cubin_len = 0;
    bool ok = false;
    T_TRUE(read_file(path, &ptx, &ptx_len));
    T_OK(mesh_njl_lib_open(&j, NULL, &err), err);
    if (ptx == NULL || j.lib == NULL) {
        goto out;
    }
    T_OK(mesh_njl_compile(&j, arch, cap, path, ptx, ptx_len, &cubin, &cubin_len,
                          NULL, &err),
         err);
    if (cubin != NULL) {
        T_TRUE(cubin_len > 64 && memcmp(cubin, "\177ELF", 4) == 0);
        T_OK(mesh_cubin_inspect(cubin, cubin_len, kernel, info, &err), err);
        ok = err == NULL;
    }
    mesh_njl_lib_close(&j);
out:
    free(ptx);
    free(cubin);
    return ok;
}

/* ---- the dlopen path ---------------------------------------------------- */

static void test_no_driver(void)
{
    mesh_cu_lib cu;
    char *err = NULL;
    if (mesh_cu_lib_open(&cu, &err)) {
        /* A machine with a driver: it must also have worked. */
        T_TRUE(cu.cuInit_p != NULL && cu.cuLaunchKernel_p != NULL);
        mesh_cu_lib_close(&cu);
        printf("  (a CUDA driver is installed: no-driver path not "
               "exercised)\n");
        return;
    }
    T_ERR(false, err, "unsupported: ");
    mesh_backend *b = NULL;
    mesh_settings s = {
        .online_timeout_ms = 2000, .halt_ms = 500, .grace_ms = 1000};
    T_ERR(mesh_cuda_open(&s, &b, &err), err, "unsupported: ");
    T_TRUE(b == NULL);
    T_TRUE(mesh_cuda_built());
    T_ERR(mesh_backend_open(MESH_BACKEND_CUDA, NULL, &b, &err), err,
          "unsupported: ");
    /* Every other backend still works. */
    T_OK(mesh_backend_open(MESH_BACKEND_NATIVE, NULL, &b, &err), err);
    mesh_backend_destroy(b);
}

static void test_describe(void)
{
    char *err = NULL, *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    T_TRUE(f != NULL);
    T_OK(mesh_cuda_describe(f, &err), err);
    fclose(f);
    /* Either GPUs ("sm_") or the reason there are none. */
    T_TRUE(text != NULL &&
           (strstr(text, "sm_") != NULL || strstr(text, "none (") != NULL));
    printf("  describe: %s", text != NULL ? text : "(null)\n");
    free(text);
    T_ERR(mesh_cuda_describe(NULL, &err), err, "invalid: ");
}

static void test_njl_missing(void)
{
    mesh_njl_lib j;
    char *err = NULL;
    T_ERR(mesh_njl_lib_open(&j, "/nonexistent/nvjitlink", &err), err,
          "unsupported: no nvJitLink in /nonexistent/nvjitlink");
    setenv("MESH_NVJITLINK_DIR", "/nonexistent/env", 1);
    T_TRUE(strcmp(mesh_njl_dir(NULL), "/nonexistent/env") == 0);
    T_TRUE(strcmp(mesh_njl_dir("/given"), "/given") == 0);
    mesh_compiler *c = NULL;
    T_ERR(mesh_cuda_compiler_open("sm_90", NULL, &c, &err), err,
          "unsupported: ");
    unsetenv("MESH_NVJITLINK_DIR");
    T_TRUE(strcmp(mesh_njl_dir(NULL), MESH_NVJITLINK_DIR) == 0);
    T_ERR(mesh_cuda_compiler_open("gfx90a", NULL, &c, &err), err, "invalid: ");
    T_ERR(mesh_cuda_compiler_open("sm_9", NULL, &c, &err), err, "invalid: ");
    T_ERR(mesh_cuda_compiler_open("sm_90", NULL, NULL, &err), err, "invalid: ");
}

/* ---- nvJitLink ---------------------------------------------------------- */

static void test_compile_examples(void)
{
    static const char *const archs[] = {"sm_90", "sm_80"};
    for (size_t i = 0; i < 2; i++) {
        mesh_cubin_info info;
        memset(&info, 0, sizeof(info));
        T_TRUE(compile_file(CUDA_EXAMPLES_DIR "/counter/counter.ptx", archs[i],
                            0, "counter", &info));
        T_TRUE(info.regs > 0 && info.regs <= 255);
        T_TRUE(info.has_abi);
        T_EQ_U(info.abi, MESH_RT_ABI_VERSION);
        memset(&info, 0, sizeof(info));
        T_TRUE(compile_file(CUDA_EXAMPLES_DIR "/pattern/pattern.ptx", archs[i],
                            0, "pattern", &info));
        T_TRUE(info.regs > 0);
        T_EQ_U(info.abi, MESH_RT_ABI_VERSION);
    }
}

static void test_reg_cap(void)
{
    static const char *const archs[] = {"sm_90", "sm_80"};
    for (size_t i = 0; i < 2; i++) {
        mesh_cubin_info free_regs, capped;
        memset(&free_regs, 0, sizeof(free_regs));
        memset(&capped, 0, sizeof(capped));
        T_TRUE(compile_file(CUDA_TEST_DATA "/greedy/greedy.ptx", archs[i], 0,
                            "greedy", &free_regs));
        T_TRUE(compile_file(CUDA_TEST_DATA "/greedy/greedy.ptx", archs[i], 32,
                            "greedy", &capped));
        printf("  %s greedy: %u registers free, %u capped at 32\n", archs[i],
               free_regs.regs, capped.regs);
        if (free_regs.regs <= 32) {
            T_FAILF("greedy needs only %u registers: not a cap test",
                    free_regs.regs);
        }
        T_TRUE(capped.regs > 0);
        if (capped.regs > 32) {
            T_FAILF("cap 32 not honoured: %u registers", capped.regs);
        }
    }
}

static void test_broken(void)
{
    mesh_njl_lib j;
    char *err = NULL;
    uint8_t *ptx = NULL, *cubin = NULL;
    size_t ptx_len = 0, cubin_len = 0;
    T_TRUE(read_file(CUDA_TEST_DATA "/broken/broken.ptx", &ptx, &ptx_len));
    T_OK(mesh_njl_lib_open(&j, NULL, &err), err);
    if (ptx == NULL || j.lib == NULL) {
        free(ptx);
        return;
    }
    bool ok = mesh_njl_compile(&j, "sm_90", 0, "broken.ptx", ptx, ptx_len,
                               &cubin, &cubin_len, NULL, &err);
    T_TRUE(!ok && cubin == NULL);
    printf("  broken: %s\n", err != NULL ? err : "(null)");
    /* nvJitLink's own log names the culprit. */
    T_TRUE(err != NULL && strstr(err, "undeclared") != NULL);
    T_ERR(ok, err, "compile: nvJitLink");
    mesh_njl_lib_close(&j);
    free(ptx);
}

static void test_inspect_garbage(void)
{
    static const uint8_t junk[64] = "\177ELF not really";
    mesh_cubin_info info;
    char *err = NULL;
    T_ERR(mesh_cubin_inspect(junk, sizeof(junk), "k", &info, &err), err,
          "compile: ");
    T_ERR(mesh_cubin_inspect(junk, 3, "k", &info, &err), err, "compile: ");
    T_ERR(mesh_cubin_inspect(NULL, 3, "k", &info, &err), err, "invalid: ");
}

/* ---- prepare ------------------------------------------------------------ */

static void test_prepare_example(void)
{
    char *err = NULL;
    mesh_payload src;
    T_OK(mesh_payload_read(CUDA_EXAMPLES_DIR, "counter", &src, &err), err);
    if (err != NULL) {
        return;
    }
    uint64_t hash = mesh_payload_hash(&src);
    T_TRUE(sm90->ops->needs_ptx(sm90));
    mesh_prepared p;
    T_OK(sm90->ops->prepare(sm90, &src, &hash, NULL, &p, &err), err);
    if (err != NULL) {
        return;
    }
    T_EQ_U(p.exec, MESH_BACKEND_CUDA);
    T_EQ_U(p.hash, hash);
    T_TRUE(p.code != NULL && p.code_len > 64 &&
           memcmp(p.code, "\177ELF", 4) == 0);
    T_TRUE(p.compile_ms > 0.0);
    T_TRUE(p.kernel == NULL);
    T_EQ_U(p.manifest.threads, 32);
    T_EQ_U(p.manifest.nodes, 4);
    T_TRUE(strcmp(p.manifest.entry, "counter") == 0);
    T_TRUE(mesh_payload_find(&p.src, "counter.ptx") != NULL);
    T_TRUE(src.files == NULL); /* moved */
    mesh_prepared_free(&p);
}

static void test_prepare_refusals(void)
{
    char *err = NULL;
    uint8_t *ptx = NULL, *broken = NULL, *greedy = NULL;
    size_t ptx_len = 0, broken_len = 0, greedy_len = 0;
    T_TRUE(read_file(CUDA_EXAMPLES_DIR "/counter/counter.ptx", &ptx, &ptx_len));
    T_TRUE(
        read_file(CUDA_TEST_DATA "/broken/broken.ptx", &broken, &broken_len));
    T_TRUE(
        read_file(CUDA_TEST_DATA "/greedy/greedy.ptx", &greedy, &greedy_len));
    if (ptx == NULL || broken == NULL || greedy == NULL) {
        goto out;
    }
    mesh_payload src;
    mesh_prepared p;
    const char *ok_manifest = "{\"name\": \"counter\", \"abi\": 1, "
                              "\"backends\": [\"cuda\"]}";

    /* The expected hash is not the payload's. */
    uint64_t wrong = 42;
    payload(&src, "counter", ok_manifest, "counter.ptx", ptx, ptx_len);
    T_ERR(sm90->ops->prepare(sm90, &src, &wrong, NULL, &p, &err), err,
          "hash: ");

    /* No PTX in the payload. */
    payload(&src, "counter", ok_manifest, NULL, NULL, 0);
    T_ERR(sm90->ops->prepare(sm90, &src, NULL, NULL, &p, &err), err,
          "missing: program counter has no PTX file counter.ptx");

    /* Lists only native. */
    payload(&src, "counter",
            "{\"name\": \"counter\", \"abi\": 1, \"backends\": "
            "[\"native\"]}",
            "counter.ptx", ptx, ptx_len);
    T_ERR(sm90->ops->prepare(sm90, &src, NULL, NULL, &p, &err), err,
          "unsupported: ");

    /* Manifest built for another ABI. */
    payload(&src, "counter",
            "{\"name\": \"counter\", \"abi\": 2, \"backends\": [\"cuda\"]}",
            "counter.ptx", ptx, ptx_len);
    T_ERR(sm90->ops->prepare(sm90, &src, NULL, NULL, &p, &err), err, "abi: ");

    /* Image built for another ABI: MESH_RT_ABI = 7. */
    char *at = strstr((char *)ptx, ".u32 MESH_RT_ABI = 1;");
    T_TRUE(at != NULL);
    if (at != NULL) {
        char *seven = strdup((char *)ptx);
        seven[(at - (char *)ptx) + strlen(".u32 MESH_RT_ABI = ")] = '7';
        payload(&src, "counter", ok_manifest, "counter.ptx", seven, ptx_len);
        T_ERR(sm90->ops->prepare(sm90, &src, NULL, NULL, &p, &err), err,
              "abi: program counter's image has MESH_RT_ABI 7");
        free(seven);
    }

    /* The entry is not a kernel of the image. */
    payload(&src, "counter",
            "{\"name\": \"counter\", \"abi\": 1, \"backends\": [\"cuda\"], "
            "\"entry\": \"nope\"}",
            "counter.ptx", ptx, ptx_len);
    T_ERR(sm90->ops->prepare(sm90, &src, NULL, NULL, &p, &err), err,
          "compile: program counter: the image has no kernel nope");

    /* PTX that does not compile: nvJitLink's message. */
    payload(&src, "broken",
            "{\"name\": \"broken\", \"abi\": 1, \"backends\": [\"cuda\"]}",
            "broken.ptx", broken, broken_len);
    bool ok = sm90->ops->prepare(sm90, &src, NULL, NULL, &p, &err);
    T_TRUE(err != NULL && strstr(err, "frobnicate") != NULL);
    T_ERR(ok, err, "compile: program broken for sm_90: nvJitLink");

    /* The manifest's register cap reaches the compiler. */
    payload(&src, "greedy",
            "{\"name\": \"greedy\", \"abi\": 1, \"backends\": [\"cuda\"], "
            "\"reg_cap\": 40}",
            "greedy.ptx", greedy, greedy_len);
    T_OK(sm90->ops->prepare(sm90, &src, NULL, NULL, &p, &err), err);
    if (err == NULL) {
        mesh_cubin_info info;
        T_EQ_U(p.reg_cap, 40);
        T_OK(mesh_cubin_inspect(p.code, p.code_len, "greedy", &info, &err),
             err);
        T_TRUE(info.regs > 0 && info.regs <= 40);
        mesh_prepared_free(&p);
    }

    /* A device's limits. */
    mesh_compiler *small = NULL;
    mesh_cuda_limits lim = {.max_threads = 256, .max_shared = 1024};
    T_OK(mesh_cuda_compiler_make("sm_90", NULL, &lim, &small, &err), err);
    if (small != NULL) {
        payload(&src, "counter",
                "{\"name\": \"counter\", \"abi\": 1, \"backends\": "
                "[\"cuda\"], \"threads\": 512}",
                "counter.ptx", ptx, ptx_len);
        T_ERR(small->ops->prepare(small, &src, NULL, NULL, &p, &err), err,
              "limits: program counter asks for 512 threads");
        payload(&src, "counter",
                "{\"name\": \"counter\", \"abi\": 1, \"backends\": "
                "[\"cuda\"], \"shared\": 4096}",
                "counter.ptx", ptx, ptx_len);
        T_ERR(small->ops->prepare(small, &src, NULL, NULL, &p, &err), err,
              "limits: program counter asks for 4096 bytes");
        mesh_cuda_compiler_close(small);
    }
out:
    free(ptx);
    free(broken);
    free(greedy);
}

int main(void)
{
    char *err = NULL;
    if (!mesh_cuda_compiler_open("sm_90", NULL, &sm90, &err)) {
        printf("SKIP: no nvJitLink (%s)\n", err);
        free(err);
        return 77;
    }
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite s = CU_add_suite("cuda_compile", NULL, NULL);
    CU_add_test(s, "no driver: unsupported", test_no_driver);
    CU_add_test(s, "describe", test_describe);
    CU_add_test(s, "nvJitLink missing", test_njl_missing);
    CU_add_test(s, "compile examples sm_90 sm_80", test_compile_examples);
    CU_add_test(s, "register cap honoured", test_reg_cap);
    CU_add_test(s, "broken PTX refused", test_broken);
    CU_add_test(s, "cubin reader refuses garbage", test_inspect_garbage);
    CU_add_test(s, "prepare an example", test_prepare_example);
    CU_add_test(s, "prepare refusals", test_prepare_refusals);
    int rc = t_run_registry();
    mesh_cuda_compiler_close(sm90);
    return rc;
}
