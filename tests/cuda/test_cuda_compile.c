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
#include <unistd.h>

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

/* use NULL: no info log asked for. */
static bool compile_file(const char *path, const char *arch, uint32_t cap,
                         const char *kernel, mesh_cubin_info *info,
                         mesh_njl_usage *use)
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
    char *log = NULL;
    T_OK(mesh_njl_compile(&j, arch, cap, path, ptx, ptx_len, &cubin, &cubin_len,
                          use != NULL ? &log : NULL, &err),
         err);
    if (cubin != NULL) {
        T_TRUE(cubin_len > 64 && memcmp(cubin, "\177ELF", 4) == 0);
        T_OK(mesh_cubin_inspect(cubin, cubin_len, kernel, info, &err), err);
        ok = err == NULL;
    }
    if (use != NULL) {
        bool parsed = mesh_njl_usage_parse(log, kernel, use);
        if (!parsed) {
            T_FAILF("no usage of %s in the info log: %s", kernel,
                    log != NULL ? log : "(null)");
        }
        ok = ok && parsed;
    }
    free(log);
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
                            0, "counter", &info, NULL));
        T_TRUE(info.regs > 0 && info.regs <= 255);
        T_TRUE(info.has_abi);
        T_EQ_U(info.abi, MESH_RT_ABI_VERSION);
        memset(&info, 0, sizeof(info));
        T_TRUE(compile_file(CUDA_EXAMPLES_DIR "/pattern/pattern.ptx", archs[i],
                            0, "pattern", &info, NULL));
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
                            "greedy", &free_regs, NULL));
        T_TRUE(compile_file(CUDA_TEST_DATA "/greedy/greedy.ptx", archs[i], 32,
                            "greedy", &capped, NULL));
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

/* ptxas of the toolkit the nvJitLink under test comes from (its
 * lib64/../bin), malloc'd; NULL where there is none. */
static char *ptxas_path(void)
{
    mesh_njl_lib j;
    char *err = NULL, *ptxas = NULL;
    if (!mesh_njl_lib_open(&j, NULL, &err)) {
        free(err);
        return NULL;
    }
    const char *slash = strrchr(j.path, '/');
    if (slash != NULL && asprintf(&ptxas, "%.*s/../bin/ptxas",
                                  (int)(slash - j.path), j.path) < 0) {
        ptxas = NULL;
    }
    mesh_njl_lib_close(&j);
    if (ptxas != NULL && access(ptxas, X_OK) != 0) {
        free(ptxas);
        ptxas = NULL;
    }
    return ptxas;
}

/* Runs ptxas -v on path: the registers and static shared bytes it reports
 * for kernel.  Read here on its own, not with the reader under test. */
static bool ptxas_usage(const char *ptxas, const char *path, const char *arch,
                        uint32_t cap, const char *kernel, uint32_t *regs,
                        uint32_t *smem)
{
    char *cmd = NULL;
    char capopt[32] = "";
    if (cap != 0) {
        snprintf(capopt, sizeof(capopt), "-maxrregcount=%u", cap);
    }
    if (asprintf(&cmd, "'%s' -v -arch=%s %s -o /dev/null '%s' 2>&1", ptxas,
                 arch, capopt, path) < 0) {
        return false;
    }
    FILE *f = popen(cmd, "r");
    free(cmd);
    if (f == NULL) {
        return false;
    }
    char line[512], want[160];
    snprintf(want, sizeof(want), "Compiling entry function '%s'", kernel);
    bool entry = false, found = false;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, "Compiling entry function") != NULL) {
            entry = strstr(line, want) != NULL;
        }
        const char *used = strstr(line, "Used ");
        if (entry && !found && used != NULL &&
            sscanf(used, "Used %u registers", regs) == 1) {
            const char *sm = strstr(used, "bytes smem");
            *smem = 0;
            while (sm != NULL && sm > used && sm[-1] == ' ') {
                sm--;
            }
            while (sm != NULL && sm > used && sm[-1] >= '0' && sm[-1] <= '9') {
                sm--;
            }
            if (sm != NULL) {
                *smem = (uint32_t)strtoul(sm, NULL, 10);
            }
            found = true;
        }
    }
    return pclose(f) == 0 && found;
}

/* The registers read from nvJitLink's -verbose log are ptxas -v's for the
 * same PTX (checked with ptxas 13.0 by hand, sm_90: counter 10, pattern
 * 16, greedy 215, and 32 under -maxrregcount=32) and the cubin's
 * EIATTR_REGCOUNT; a cap is honoured. */
static void test_usage_vs_ptxas(void)
{
    static const struct {
        const char *path, *kernel;
        uint32_t cap;
    } cases[] = {
        {CUDA_EXAMPLES_DIR "/counter/counter.ptx", "counter", 0},
        {CUDA_EXAMPLES_DIR "/pattern/pattern.ptx", "pattern", 0},
        {CUDA_TEST_DATA "/greedy/greedy.ptx", "greedy", 0},
        {CUDA_TEST_DATA "/greedy/greedy.ptx", "greedy", 32},
    };
    static const char *const archs[] = {"sm_90", "sm_80"};
    char *ptxas = ptxas_path();
    if (ptxas == NULL) {
        printf("  (no ptxas beside nvJitLink: compared with the cubin "
               "only)\n");
    }
    for (size_t a = 0; a < 2; a++) {
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            mesh_cubin_info info;
            mesh_njl_usage use;
            memset(&info, 0, sizeof(info));
            memset(&use, 0, sizeof(use));
            if (!compile_file(cases[i].path, archs[a], cases[i].cap,
                              cases[i].kernel, &info, &use)) {
                continue;
            }
            T_TRUE(use.regs > 0);
            T_EQ_U(use.regs, info.regs);
            if (cases[i].cap != 0 && use.regs > cases[i].cap) {
                T_FAILF("cap %u not honoured: %u registers", cases[i].cap,
                        use.regs);
            }
            uint32_t pregs = 0, psmem = 0;
            bool ran = ptxas != NULL &&
                       ptxas_usage(ptxas, cases[i].path, archs[a], cases[i].cap,
                                   cases[i].kernel, &pregs, &psmem);
            T_TRUE(ptxas == NULL || ran);
            /* Static shared memory is not compared: the linker behind
             * nvJitLink packs the variables (pattern: 12 B, as its cubin's
             * .nv.shared section says) where ptxas alone pads (16 B). */
            if (ran) {
                T_EQ_U(use.regs, pregs);
            }
            printf("  %s %s cap %u: log %u registers, %u B smem, %u B stack; "
                   "cubin %u; ptxas -v %u registers, %u B smem\n",
                   archs[a], cases[i].kernel, cases[i].cap, use.regs,
                   use.shared, use.stack, info.regs, pregs, psmem);
        }
    }
    free(ptxas);
}

/* The log reader on logs written here: the entry named, not the others;
 * ptxas's lines, not the linker's summary; unknown formats refused. */
static void test_usage_parse(void)
{
    static const char two[] =
        "ptxas info    : 4 bytes gmem\n"
        "ptxas info    : Compiling entry function 'other' for 'sm_90'\n"
        "ptxas info    : Function properties for other\n"
        "ptxas         .     16 bytes stack frame, 0 bytes spill stores\n"
        "ptxas info    : Used 40 registers, used 0 barriers, 64 bytes smem\n"
        "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
        "ptxas info    : Function properties for helper\n"
        "ptxas         .     99 bytes stack frame, 0 bytes spill stores\n"
        "ptxas info    : Function properties for k\n"
        "ptxas         .     24 bytes stack frame, 8 bytes spill stores\n"
        "ptxas info    : Used 12 registers, used 1 barriers, 128 bytes smem, "
        "376 bytes cmem[0]\n"
        "info    : Function properties for 'k':\n"
        "info    : used 99 registers, 0 stack, 1152 bytes smem\n";
    mesh_njl_usage u = {7, 7, 7};
    T_TRUE(mesh_njl_usage_parse(two, "k", &u));
    T_EQ_U(u.regs, 12);
    T_EQ_U(u.shared, 128);
    T_EQ_U(u.stack, 24);
    T_TRUE(mesh_njl_usage_parse(two, "other", &u));
    T_EQ_U(u.regs, 40);
    T_EQ_U(u.shared, 64);
    T_EQ_U(u.stack, 16);
    /* A prefix of a name is not the name. */
    u.regs = 7;
    T_TRUE(!mesh_njl_usage_parse(two, "oth", &u));
    T_TRUE(!mesh_njl_usage_parse(two, "kk", &u));
    T_EQ_U(u.regs, 7);
    /* No smem item: none; only the linker's summary: unknown. */
    T_TRUE(mesh_njl_usage_parse(
        "ptxas info    : Compiling entry function 'g' for 'sm_80'\n"
        "ptxas info    : Used 255 registers, used 0 barriers",
        "g", &u));
    T_EQ_U(u.regs, 255);
    T_EQ_U(u.shared, 0);
    T_EQ_U(u.stack, 0);
    T_TRUE(!mesh_njl_usage_parse(
        "info    : Function properties for 'g':\n"
        "info    : used 10 registers, 0 stack, 1032 bytes smem\n",
        "g", &u));
    T_TRUE(!mesh_njl_usage_parse("", "g", &u));
    T_TRUE(!mesh_njl_usage_parse(NULL, "g", &u));
    T_TRUE(!mesh_njl_usage_parse(two, NULL, &u));
    T_TRUE(!mesh_njl_usage_parse(two, "", &u));
    T_TRUE(!mesh_njl_usage_parse(two, "k", NULL));
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
    /* What the admission check reads: the cubin's registers, ptxas's. */
    mesh_cubin_info info;
    T_OK(mesh_cubin_inspect(p.code, p.code_len, "counter", &info, &err), err);
    T_TRUE(p.regs > 0);
    T_EQ_U(p.regs, info.regs);
    T_TRUE(p.shared_static > 0); /* the kernel's __shared__ words */
    printf("  prepared counter: %u registers, %u B static shared, %u B "
           "stack\n",
           p.regs, p.shared_static, p.local_bytes);
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
        T_EQ_U(p.regs, info.regs);
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
    CU_add_test(s, "registers from the log = ptxas -v", test_usage_vs_ptxas);
    CU_add_test(s, "info log reader", test_usage_parse);
    CU_add_test(s, "broken PTX refused", test_broken);
    CU_add_test(s, "cubin reader refuses garbage", test_inspect_garbage);
    CU_add_test(s, "prepare an example", test_prepare_example);
    CU_add_test(s, "prepare refusals", test_prepare_refusals);
    int rc = t_run_registry();
    mesh_cuda_compiler_close(sm90);
    return rc;
}
