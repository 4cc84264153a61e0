/* SPDX-License-Identifier: BSD-3-Clause */
/* libcuda and nvJitLink loaded at run time, and their codes as messages. */
#include "cuda_internal.h"

#include "../../util/util_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MESH_STR(x) #x
#define MESH_XSTR(x) MESH_STR(x)

/* Both libraries stay mapped once loaded (RTLD_NODELETE): nvJitLink
 * carries its own C++ runtime, whose static pools an unload would leak
 * (valgrind: 72 KiB definitely lost per dlclose), and neither is meant to
 * be unloaded while a process may still hold its objects.  dlclose then
 * only drops the reference. */

/* ---- libcuda ------------------------------------------------------------ */

bool mesh_cu_lib_open(mesh_cu_lib *cu, char **err)
{
    if (cu == NULL) {
        return rig_err(err, "invalid: mesh_cu_lib_open: cu is NULL");
    }
    /* The system's driver only: the toolkit's lib64/stubs/libcuda.so is a
     * link-time stand-in that fails every call. */
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (lib == NULL) {
        const char *why = dlerror();
        return rig_err(err,
                       "unsupported: no CUDA driver (dlopen "
                       "libcuda.so.1: %s)",
                       why != NULL ? why : "not found");
    }
    mesh_cu_lib c;
    memset(&c, 0, sizeof(c));
    c.lib = lib;
#define MESH_CU_SYM(f)                                                         \
    c.f##_p = (__typeof__(f) *)dlsym(lib, MESH_XSTR(f));                       \
    if (c.f##_p == NULL) {                                                     \
        rig_err(err, "unsupported: the CUDA driver lacks %s (too old?)",       \
                MESH_XSTR(f));                                                 \
        goto err_close;                                                        \
    }
    MESH_CU_FUNCS(MESH_CU_SYM)
#undef MESH_CU_SYM
    c.green = true;
#define MESH_CU_OPT(f)                                                         \
    c.f##_p = (__typeof__(f) *)dlsym(lib, MESH_XSTR(f));                       \
    c.green = c.green && c.f##_p != NULL;
    MESH_CU_GREEN_FUNCS(MESH_CU_OPT)
#undef MESH_CU_OPT
    c.signals = true;
#define MESH_CU_SIG(f)                                                         \
    c.f##_p = (__typeof__(f) *)dlsym(lib, MESH_XSTR(f));                       \
    c.signals = c.signals && c.f##_p != NULL;
    MESH_CU_SIGNAL_FUNCS(MESH_CU_SIG)
#undef MESH_CU_SIG
    CUresult r = c.cuInit_p(0);
    if (r != CUDA_SUCCESS) {
        rig_err(err,
                "unsupported: no usable CUDA device (cuInit failed: "
                "%s)",
                mesh_cu_name(&c, r));
        goto err_close;
    }
    *cu = c;
    return true;
err_close:
    dlclose(lib);
    return false;
}

void mesh_cu_lib_close(mesh_cu_lib *cu)
{
    if (cu == NULL || cu->lib == NULL) {
        return;
    }
    dlclose(cu->lib);
    memset(cu, 0, sizeof(*cu));
}

const char *mesh_cu_name(const mesh_cu_lib *cu, CUresult r)
{
    const char *s = NULL;
    if (r == CUDA_SUCCESS) {
        return "CUDA_SUCCESS";
    }
    if (cu != NULL && cu->cuGetErrorName_p != NULL &&
        cu->cuGetErrorName_p(r, &s) == CUDA_SUCCESS && s != NULL) {
        return s;
    }
    return "unknown CUresult";
}

bool mesh_cu_check(const mesh_cu_lib *cu, CUresult r, const char *reason,
                   const char *call, char **err)
{
    if (r == CUDA_SUCCESS) {
        return true;
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY && reason == NULL) {
        reason = "nomem";
    }
    return rig_err(err, "%s: %s failed: %s (%d)",
                   reason != NULL ? reason : "system", call,
                   mesh_cu_name(cu, r), (int)r);
}

bool mesh_cu_sticky(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
#if CUDA_VERSION >= 12080
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
#endif
        return true;
    default:
        return false;
    }
}

/* ---- nvJitLink ---------------------------------------------------------- */

const char *mesh_njl_dir(const char *dir)
{
    if (dir != NULL && dir[0] != '\0') {
        return dir;
    }
    const char *env = getenv("MESH_NVJITLINK_DIR");
    if (env != NULL && env[0] != '\0') {
        return env;
    }
    return MESH_NVJITLINK_DIR;
}

bool mesh_njl_lib_open(mesh_njl_lib *j, const char *dir, char **err)
{
    if (j == NULL) {
        return rig_err(err, "invalid: mesh_njl_lib_open: j is NULL");
    }
    dir = mesh_njl_dir(dir);
    static const char *const names[] = {MESH_NJL_SONAME, "libnvJitLink.so"};
    void *lib = NULL;
    char *path = NULL;
    char why[256] = "";
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        free(path);
        if (asprintf(&path, "%s/%s", dir, names[i]) < 0) {
            return rig_err(err, "nomem: nvJitLink path");
        }
        lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (lib != NULL) {
            break;
        }
        if (i == 0) {
            const char *e = dlerror();
            snprintf(why, sizeof(why), "%s", e != NULL ? e : "not found");
        }
    }
    if (lib == NULL) {
        free(path);
        return rig_err(err,
                       "unsupported: no nvJitLink in %s (set "
                       "MESH_NVJITLINK_DIR): %s",
                       dir, why);
    }
    mesh_njl_lib n;
    memset(&n, 0, sizeof(n));
    n.lib = lib;
    n.path = path;
#define MESH_NJL_SYM(f)                                                        \
    n.f = (__typeof__(MESH_NJL_VERSIONED(f)) *)dlsym(                          \
        lib, "__nvJitLink" #f MESH_NJL_SUFFIX);                                \
    if (n.f == NULL) {                                                         \
        n.f = (__typeof__(MESH_NJL_VERSIONED(f)) *)dlsym(lib, "nvJitLink" #f); \
    }                                                                          \
    if (n.f == NULL) {                                                         \
        rig_err(err, "unsupported: %s lacks nvJitLink%s", path, #f);           \
        goto err_close;                                                        \
    }
    MESH_NJL_FUNCS(MESH_NJL_SYM)
#undef MESH_NJL_SYM
    n.Version = (nvJitLinkResult(*)(unsigned int *, unsigned int *))dlsym(
        lib, "nvJitLinkVersion");
    *j = n;
    return true;
err_close:
    dlclose(lib);
    free(path);
    return false;
}

void mesh_njl_lib_close(mesh_njl_lib *j)
{
    if (j == NULL || j->lib == NULL) {
        return;
    }
    dlclose(j->lib);
    free(j->path);
    memset(j, 0, sizeof(*j));
}

void mesh_njl_version(const mesh_njl_lib *j, unsigned *major, unsigned *minor)
{
    unsigned a = 0, b = 0;
    if (j == NULL || j->Version == NULL ||
        j->Version(&a, &b) != NVJITLINK_SUCCESS || a == 0) {
        /* The versioned symbols the loader asks for first are those of
         * this major release. */
        a = CUDA_VERSION / 1000;
        b = 0;
    }
    *major = a;
    *minor = b;
}

const char *mesh_njl_name(nvJitLinkResult r)
{
    switch (r) {
#define MESH_NJL_CASE(c)                                                       \
    case c:                                                                    \
        return #c;
        MESH_NJL_CASE(NVJITLINK_SUCCESS)
        MESH_NJL_CASE(NVJITLINK_ERROR_UNRECOGNIZED_OPTION)
        MESH_NJL_CASE(NVJITLINK_ERROR_MISSING_ARCH)
        MESH_NJL_CASE(NVJITLINK_ERROR_INVALID_INPUT)
        MESH_NJL_CASE(NVJITLINK_ERROR_PTX_COMPILE)
        MESH_NJL_CASE(NVJITLINK_ERROR_NVVM_COMPILE)
        MESH_NJL_CASE(NVJITLINK_ERROR_INTERNAL)
        MESH_NJL_CASE(NVJITLINK_ERROR_THREADPOOL)
        MESH_NJL_CASE(NVJITLINK_ERROR_UNRECOGNIZED_INPUT)
        MESH_NJL_CASE(NVJITLINK_ERROR_FINALIZE)
#if CUDA_VERSION >= 13000
        MESH_NJL_CASE(NVJITLINK_ERROR_NULL_INPUT)
        MESH_NJL_CASE(NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS)
        MESH_NJL_CASE(NVJITLINK_ERROR_INCORRECT_INPUT_TYPE)
        MESH_NJL_CASE(NVJITLINK_ERROR_ARCH_MISMATCH)
        MESH_NJL_CASE(NVJITLINK_ERROR_OUTDATED_LIBRARY)
        MESH_NJL_CASE(NVJITLINK_ERROR_MISSING_FATBIN)
        MESH_NJL_CASE(NVJITLINK_ERROR_UNRECOGNIZED_ARCH)
        MESH_NJL_CASE(NVJITLINK_ERROR_UNSUPPORTED_ARCH)
        MESH_NJL_CASE(NVJITLINK_ERROR_LTO_NOT_ENABLED)
#endif
#undef MESH_NJL_CASE
    }
    return "unknown nvJitLinkResult";
}

bool mesh_njl_check(nvJitLinkResult r, const char *reason, const char *call,
                    const char *log, char **err)
{
    if (r == NVJITLINK_SUCCESS) {
        return true;
    }
    bool has_log = log != NULL && log[0] != '\0';
    return rig_err(err, "%s: %s failed: %s (%d)%s%s",
                   reason != NULL ? reason : "system", call, mesh_njl_name(r),
                   (int)r, has_log ? ": " : "", has_log ? log : "");
}
