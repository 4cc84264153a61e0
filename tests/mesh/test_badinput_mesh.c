/* SPDX-License-Identifier: BSD-3-Clause */
/* Bad input to every public function of the executors (include/mesh):
 * tables of calls (tests/badinput_util.h). */
#include "config.h"

#include "mesh/backend.h"
#include "mesh/driver.h"
#include "mesh/executors.h"
#include "mesh/loader.h"
#include "mesh/manifest.h"
#include "mesh/worker.h"
#ifdef RIG_HAVE_CUDA
#include "mesh/cuda.h"
#endif
#include "../badinput_util.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- include/mesh: fallible functions -------------------------------- */

static const char manifest_ok[] =
    "{\"name\": \"p\", \"abi\": 1, \"backends\": [\"native\"]}";

static const mesh_kernel_ops no_ops = {.exec = MESH_BACKEND_NATIVE};
static const mesh_kernel kernel_bare = {&no_ops, NULL};
static const mesh_kernel kernel_no_ops = {NULL, NULL};

static bool c_k_regs_null(char **e)
{
    uint32_t v;
    return mesh_kernel_regs(NULL, &v, e);
}
static bool c_k_regs_ops(char **e)
{
    uint32_t v;
    return mesh_kernel_regs(&kernel_no_ops, &v, e);
}
static bool c_k_regs_out(char **e)
{
    return mesh_kernel_regs(&kernel_bare, NULL, e);
}
static bool c_k_local_null(char **e)
{
    uint32_t v;
    return mesh_kernel_local_bytes(NULL, &v, e);
}
static bool c_k_local_out(char **e)
{
    return mesh_kernel_local_bytes(&kernel_bare, NULL, e);
}
static bool c_k_blocks_null(char **e)
{
    uint32_t v;
    return mesh_kernel_max_blocks_per_sm(NULL, &v, e);
}
static bool c_k_blocks_out(char **e)
{
    return mesh_kernel_max_blocks_per_sm(&kernel_bare, NULL, e);
}
static bool c_k_global_null(char **e)
{
    uint32_t v;
    return mesh_kernel_global_u32(NULL, "MESH_RT_ABI", &v, e);
}
static bool c_k_global_name(char **e)
{
    uint32_t v;
    return mesh_kernel_global_u32(&kernel_bare, NULL, &v, e);
}
static bool c_k_global_out(char **e)
{
    return mesh_kernel_global_u32(&kernel_bare, "MESH_RT_ABI", NULL, e);
}
static bool c_k_global_missing(char **e)
{
    uint32_t v;
    return mesh_kernel_global_u32(&kernel_bare, "MESH_RT_ABI", &v, e);
}

static mesh_manifest manifest_native(void)
{
    mesh_manifest m;
    memset(&m, 0, sizeof(m));
    m.backends[0] = MESH_BACKEND_NATIVE;
    m.nbackends = 1;
    return m;
}

static const uint32_t have_native[1] = {MESH_BACKEND_NATIVE};
static const uint32_t have_cuda[1] = {MESH_BACKEND_CUDA};

static bool c_pick_m(char **e)
{
    uint32_t x;
    return mesh_pick_exec(NULL, have_native, 1, &x, e);
}
static bool c_pick_exec(char **e)
{
    mesh_manifest m = manifest_native();
    return mesh_pick_exec(&m, have_native, 1, NULL, e);
}
static bool c_pick_have(char **e)
{
    mesh_manifest m = manifest_native();
    uint32_t x;
    return mesh_pick_exec(&m, NULL, 2, &x, e);
}
static bool c_pick_none(char **e)
{
    mesh_manifest m = manifest_native();
    uint32_t x;
    return mesh_pick_exec(&m, have_cuda, 1, &x, e);
}

/* A payload of program p holding the manifest (or none). */
static bool payload_make(mesh_payload *p, bool with_manifest)
{
    if (!mesh_payload_init(p, "p", NULL)) {
        return false;
    }
    if (with_manifest && !mesh_payload_add(p, "manifest.json", manifest_ok,
                                           sizeof(manifest_ok) - 1, NULL)) {
        mesh_payload_free(p);
        return false;
    }
    return true;
}

static bool c_check_src(char **e)
{
    mesh_manifest m;
    return mesh_check_manifest(NULL, MESH_BACKEND_NATIVE, &m, e);
}
static bool c_check_out(char **e)
{
    mesh_payload p;
    if (!payload_make(&p, true)) {
        return true;
    }
    bool ok = mesh_check_manifest(&p, MESH_BACKEND_NATIVE, NULL, e);
    mesh_payload_free(&p);
    return ok;
}
static bool c_check_nomanifest(char **e)
{
    mesh_payload p;
    mesh_manifest m;
    if (!payload_make(&p, false)) {
        return true;
    }
    bool ok = mesh_check_manifest(&p, MESH_BACKEND_NATIVE, &m, e);
    mesh_payload_free(&p);
    return ok;
}
static bool c_check_kind(char **e)
{
    mesh_payload p;
    mesh_manifest m;
    if (!payload_make(&p, true)) {
        return true;
    }
    bool ok = mesh_check_manifest(&p, 77, &m, e);
    if (ok) {
        mesh_manifest_free(&m);
    }
    mesh_payload_free(&p);
    return ok;
}

static bool c_prep_src(char **e)
{
    mesh_prepared out;
    return mesh_prepare_any(NULL, 0, NULL, NULL, NULL, &out, e);
}
/* mesh_prepare_any takes the payload whatever happens. */
static bool c_prep_out(char **e)
{
    mesh_payload p;
    if (!payload_make(&p, true)) {
        return true;
    }
    return mesh_prepare_any(NULL, 0, &p, NULL, NULL, NULL, e);
}
static bool c_prep_comps(char **e)
{
    mesh_payload p;
    mesh_prepared out;
    if (!payload_make(&p, true)) {
        return true;
    }
    return mesh_prepare_any(NULL, 3, &p, NULL, NULL, &out, e);
}
static bool c_prep_none(char **e)
{
    mesh_payload p;
    mesh_prepared out;
    if (!payload_make(&p, true)) {
        return true;
    }
    return mesh_prepare_any(NULL, 0, &p, NULL, NULL, &out, e);
}

static bool c_mparse_out(char **e)
{
    return mesh_manifest_parse(manifest_ok, sizeof(manifest_ok) - 1, NULL, e);
}
static bool c_mparse_json(char **e)
{
    mesh_manifest m;
    return mesh_manifest_parse(NULL, 5, &m, e);
}
static bool c_mparse_empty(char **e)
{
    mesh_manifest m;
    return mesh_manifest_parse(NULL, 0, &m, e);
}
static bool c_mparse_big(char **e)
{
    mesh_manifest m;
    return mesh_manifest_parse(manifest_ok, MESH_MANIFEST_MAX_BYTES + 1, &m, e);
}
static bool c_mcopy_dst(char **e)
{
    mesh_manifest m = manifest_native();
    return mesh_manifest_copy(NULL, &m, e);
}
static bool c_mcopy_src(char **e)
{
    mesh_manifest m;
    return mesh_manifest_copy(&m, NULL, e);
}

static bool c_pread_out(char **e)
{
    return mesh_payload_read("/nonexistent", "p", NULL, e);
}
static bool c_pread_root(char **e)
{
    mesh_payload p;
    return mesh_payload_read(NULL, "p", &p, e);
}
static bool c_pread_root_empty(char **e)
{
    mesh_payload p;
    return mesh_payload_read("", "p", &p, e);
}
static bool c_pread_name(char **e)
{
    mesh_payload p;
    return mesh_payload_read("/nonexistent", NULL, &p, e);
}
static bool c_pread_dotdot(char **e)
{
    mesh_payload p;
    return mesh_payload_read("/nonexistent", "..", &p, e);
}
static bool c_pread_missing(char **e)
{
    mesh_payload p;
    return mesh_payload_read("/nonexistent", "p", &p, e);
}
static bool c_pinit_p(char **e)
{
    return mesh_payload_init(NULL, "p", e);
}
static bool c_pinit_name(char **e)
{
    mesh_payload p;
    return mesh_payload_init(&p, NULL, e);
}
static bool c_pinit_slash(char **e)
{
    mesh_payload p;
    return mesh_payload_init(&p, "a/b", e);
}
static bool c_padd_p(char **e)
{
    return mesh_payload_add(NULL, "x", "y", 1, e);
}
/* Adds to a fresh payload, which is freed whatever happens. */
static bool padd(const char *path, const void *data, size_t len, char **e)
{
    mesh_payload p;
    if (!payload_make(&p, true)) {
        return true;
    }
    bool ok = mesh_payload_add(&p, path, data, len, e);
    mesh_payload_free(&p);
    return ok;
}
static bool c_padd_data(char **e)
{
    return padd("x", NULL, 4, e);
}
static bool c_padd_path(char **e)
{
    return padd(NULL, "y", 1, e);
}
static bool c_padd_abs(char **e)
{
    return padd("/etc/passwd", "y", 1, e);
}
static bool c_padd_dotdot(char **e)
{
    return padd("a/../b", "y", 1, e);
}
static bool c_padd_twice(char **e)
{
    return padd("manifest.json", "{}", 2, e);
}
static bool c_padd_big(char **e)
{
    return padd("x", "y", (size_t)MESH_PAYLOAD_MAX_FILE_BYTES + 1, e);
}
static bool c_pcopy_dst(char **e)
{
    mesh_payload p;
    memset(&p, 0, sizeof(p));
    return mesh_payload_copy(NULL, &p, e);
}
static bool c_pcopy_src(char **e)
{
    mesh_payload p;
    return mesh_payload_copy(&p, NULL, e);
}

static bool c_open_out(char **e)
{
    return mesh_backend_open(MESH_BACKEND_NATIVE, NULL, NULL, e);
}
static bool c_open_kind(char **e)
{
    mesh_backend *b = NULL;
    return mesh_backend_open(99, NULL, &b, e);
}
/* A malformed setting, with the options' zero deferring to it. */
static bool open_env(const char *var, const char *value, char **e)
{
    mesh_backend *b = NULL;
    setenv(var, value, 1);
    bool ok = mesh_backend_open(MESH_BACKEND_NATIVE, NULL, &b, e);
    unsetenv(var);
    if (ok) {
        mesh_backend_destroy(b);
    }
    return ok;
}
static bool c_open_env_halt(char **e)
{
    return open_env("RIG_MESH_HALT_MS", "soon", e);
}
static bool c_open_env_grace(char **e)
{
    return open_env("RIG_MESH_GRACE_MS", "0", e);
}
static bool c_open_env_online(char **e)
{
    return open_env("RIG_MESH_ONLINE_TIMEOUT_MS", "-1", e);
}

/* One native backend and driver for the driver cases (NULL: none here). */
static mesh_backend *native_b;
static mesh_driver *native_d;

static bool c_dopen_b(char **e)
{
    mesh_driver *d = NULL;
    return mesh_driver_open(NULL, &d, e);
}
static bool c_dopen_ops(char **e)
{
    mesh_backend b = {NULL, NULL};
    mesh_driver *d = NULL;
    return mesh_driver_open(&b, &d, e);
}
static bool c_dopen_out(char **e)
{
    mesh_backend b = {NULL, NULL};
    return mesh_driver_open(native_b != NULL ? native_b : &b, NULL, e);
}
static bool c_dprep_d(char **e)
{
    mesh_payload p;
    mesh_prepared out;
    if (!payload_make(&p, true)) {
        return true;
    }
    return mesh_driver_prepare(NULL, &p, NULL, NULL, &out, e);
}
static bool c_dprep_src(char **e)
{
    mesh_prepared out;
    return mesh_driver_prepare(native_d, NULL, NULL, NULL, &out, e);
}
static bool c_dprep_out(char **e)
{
    mesh_payload p;
    if (!payload_make(&p, true)) {
        return true;
    }
    return mesh_driver_prepare(native_d, &p, NULL, NULL, NULL, e);
}
/* A zeroed prepared image: mesh_driver_start consumes it. */
static bool c_dstart_d(char **e)
{
    mesh_prepared p;
    uint32_t slot;
    memset(&p, 0, sizeof(p));
    return mesh_driver_start(NULL, &p, 1, &slot, e);
}
static bool c_dstart_p(char **e)
{
    uint32_t slot;
    return mesh_driver_start(native_d, NULL, 1, &slot, e);
}
static bool c_dstart_slot(char **e)
{
    mesh_prepared p;
    memset(&p, 0, sizeof(p));
    return mesh_driver_start(native_d, &p, 1, NULL, e);
}
static bool c_dstart_nodes(char **e)
{
    mesh_prepared p;
    uint32_t slot;
    memset(&p, 0, sizeof(p));
    if (native_d == NULL) {
        return c_dstart_d(e);
    }
    p.manifest.name = strdup("p");
    return mesh_driver_start(native_d, &p, MESH_MANIFEST_MAX_NODES + 1, &slot,
                             e);
}
static bool c_dpoll_d(char **e)
{
    mesh_run_state st;
    char *why = NULL;
    return mesh_driver_poll(NULL, 0, &st, &why, e);
}
static bool c_dpoll_state(char **e)
{
    return mesh_driver_poll(native_d, 0, NULL, NULL, e);
}
static bool c_dpoll_slot(char **e)
{
    mesh_run_state st;
    if (native_d == NULL) {
        return c_dpoll_d(e);
    }
    return mesh_driver_poll(native_d, MESH_PROG_SLOTS, &st, NULL, e);
}
static bool c_dpoll_empty(char **e)
{
    mesh_run_state st;
    if (native_d == NULL) {
        return c_dpoll_d(e);
    }
    return mesh_driver_poll(native_d, 3, &st, NULL, e);
}
static bool c_dwait_d(char **e)
{
    mesh_run_state st;
    return mesh_driver_wait(NULL, 0, 10, &st, NULL, e);
}
static bool c_dwait_slot(char **e)
{
    mesh_run_state st;
    char *why = NULL;
    if (native_d == NULL) {
        return c_dwait_d(e);
    }
    return mesh_driver_wait(native_d, UINT32_MAX, 10, &st, &why, e);
}
static bool c_dstop_d(char **e)
{
    return mesh_driver_stop(NULL, 0, e);
}
static bool c_dstop_slot(char **e)
{
    if (native_d == NULL) {
        return c_dstop_d(e);
    }
    return mesh_driver_stop(native_d, 99, e);
}
static bool c_dstop_empty(char **e)
{
    if (native_d == NULL) {
        return c_dstop_d(e);
    }
    return mesh_driver_stop(native_d, 0, e);
}

/* mesh_worker_attach with the given mailbox fd and slot variables. */
static bool attach_env(const char *fd, const char *slot, char **e)
{
    mesh_worker *w = NULL;
    const char *vars[4] = {"MESH_MAILBOX_FD", "MESH_SLOT", "MESH_NODE",
                           "MESH_NODES"};
    const char *vals[4] = {fd, slot, "0", "1"};
    for (int i = 0; i < 4; i++) {
        if (vals[i] != NULL) {
            setenv(vars[i], vals[i], 1);
        }
    }
    bool ok = mesh_worker_attach(&w, e);
    for (int i = 0; i < 4; i++) {
        unsetenv(vars[i]);
    }
    if (ok) {
        mesh_worker_detach(w);
    }
    return ok;
}
static bool c_wattach_out(char **e)
{
    return mesh_worker_attach(NULL, e);
}
static bool c_wattach_unset(char **e)
{
    return attach_env(NULL, "0", e);
}
static bool c_wattach_slot_word(char **e)
{
    return attach_env("0", "seven", e);
}
static bool c_wattach_slot_range(char **e)
{
    return attach_env("0", "32", e);
}
/* An empty file as the mailbox: it maps, but touching it faults. */
static bool c_wattach_short(char **e)
{
    int fd = memfd_create("t_badinput", MFD_CLOEXEC);
    char num[16];
    if (fd < 0) {
        return true;
    }
    snprintf(num, sizeof(num), "%d", fd);
    bool ok = attach_env(num, "0", e);
    close(fd);
    return ok;
}

#ifdef RIG_HAVE_CUDA
static bool c_cuda_describe(char **e)
{
    return mesh_cuda_describe(NULL, e);
}
static bool c_cuda_comp_out(char **e)
{
    return mesh_cuda_compiler_open("sm_90", NULL, NULL, e);
}
static bool c_cuda_comp_arch(char **e)
{
    mesh_compiler *c = NULL;
    return mesh_cuda_compiler_open(NULL, NULL, &c, e);
}
static bool c_cuda_comp_arch_bad(char **e)
{
    mesh_compiler *c = NULL;
    return mesh_cuda_compiler_open("gfx90a", "/nonexistent", &c, e);
}
#endif

static const bad_case mesh_bad[] = {
    {"kernel_regs NULL kernel", c_k_regs_null, "invalid: ", "kernel"},
    {"kernel_regs kernel without ops", c_k_regs_ops, "invalid: ", "ops"},
    {"kernel_regs NULL out", c_k_regs_out, "invalid: ", "out"},
    {"kernel_local_bytes NULL kernel", c_k_local_null, "invalid: ", "kernel"},
    {"kernel_local_bytes NULL out", c_k_local_out, "invalid: ", "out"},
    {"kernel_max_blocks NULL kernel", c_k_blocks_null, "invalid: ", "kernel"},
    {"kernel_max_blocks NULL out", c_k_blocks_out, "invalid: ", "out"},
    {"kernel_global_u32 NULL kernel", c_k_global_null, "invalid: ", "kernel"},
    {"kernel_global_u32 NULL name", c_k_global_name, "invalid: ", "name"},
    {"kernel_global_u32 NULL out", c_k_global_out, "invalid: ", "out"},
    {"kernel_global_u32 no op", c_k_global_missing, "missing: ", "MESH_RT_ABI"},
    {"pick_exec NULL manifest", c_pick_m, "invalid: ", "manifest"},
    {"pick_exec NULL exec", c_pick_exec, "invalid: ", "exec"},
    {"pick_exec NULL have", c_pick_have, "invalid: ", "have"},
    {"pick_exec no match", c_pick_none, "unsupported: ", "cuda"},
    {"check_manifest NULL src", c_check_src, "invalid: ", "src"},
    {"check_manifest NULL out", c_check_out, "invalid: ", "out"},
    {"check_manifest no manifest", c_check_nomanifest,
     "manifest: ", "manifest.json"},
    {"check_manifest kind 77", c_check_kind, "unsupported: ", "77"},
    {"prepare_any NULL src", c_prep_src, "invalid: ", "src"},
    {"prepare_any NULL out", c_prep_out, "invalid: ", "out"},
    {"prepare_any NULL comps", c_prep_comps, "invalid: ", "comps"},
    {"prepare_any no compiler", c_prep_none, "unsupported: ", "native"},
    {"manifest_parse NULL out", c_mparse_out, "invalid: ", "out"},
    {"manifest_parse NULL json", c_mparse_json, "invalid: ", "json"},
    {"manifest_parse empty", c_mparse_empty, "manifest: ", "empty"},
    {"manifest_parse too big", c_mparse_big, "manifest: ", "bytes"},
    {"manifest_copy NULL dst", c_mcopy_dst, "invalid: ", "dst"},
    {"manifest_copy NULL src", c_mcopy_src, "invalid: ", "src"},
    {"payload_read NULL out", c_pread_out, "invalid: ", "out"},
    {"payload_read NULL root", c_pread_root, "invalid: ", "root"},
    {"payload_read empty root", c_pread_root_empty, "invalid: ", "root"},
    {"payload_read NULL name", c_pread_name, "invalid: ", "name"},
    {"payload_read name ..", c_pread_dotdot, "invalid: ", "name"},
    {"payload_read absent", c_pread_missing, "missing: ", "p"},
    {"payload_init NULL payload", c_pinit_p, "invalid: ", "payload"},
    {"payload_init NULL name", c_pinit_name, "invalid: ", "name"},
    {"payload_init name a/b", c_pinit_slash, "invalid: ", "name"},
    {"payload_add NULL payload", c_padd_p, "invalid: ", "payload"},
    {"payload_add NULL data", c_padd_data, "invalid: ", "data"},
    {"payload_add NULL path", c_padd_path, "invalid: ", "path"},
    {"payload_add absolute path", c_padd_abs, "invalid: ", "path"},
    {"payload_add path with ..", c_padd_dotdot, "invalid: ", "path"},
    {"payload_add twice", c_padd_twice, "invalid: ", "manifest.json"},
    {"payload_add too big", c_padd_big, "limits: ", "bytes"},
    {"payload_copy NULL dst", c_pcopy_dst, "invalid: ", "dst"},
    {"payload_copy NULL src", c_pcopy_src, "invalid: ", "src"},
    {"backend_open NULL out", c_open_out, "invalid: ", "out"},
    {"backend_open kind 99", c_open_kind, "unsupported: ", "kind"},
    {"backend_open RIG_MESH_HALT_MS", c_open_env_halt,
     "invalid: ", "RIG_MESH_HALT_MS"},
    {"backend_open RIG_MESH_GRACE_MS", c_open_env_grace,
     "invalid: ", "RIG_MESH_GRACE_MS"},
    {"backend_open RIG_MESH_ONLINE_TIMEOUT_MS", c_open_env_online,
     "invalid: ", "RIG_MESH_ONLINE_TIMEOUT_MS"},
    {"driver_open NULL backend", c_dopen_b, "invalid: ", "backend"},
    {"driver_open backend without ops", c_dopen_ops, "invalid: ", "ops"},
    {"driver_open NULL out", c_dopen_out, "invalid: ", "out"},
    {"driver_prepare NULL driver", c_dprep_d, "invalid: ", "driver"},
    {"driver_prepare NULL src", c_dprep_src, "invalid: ", "src"},
    {"driver_prepare NULL out", c_dprep_out, "invalid: ", "out"},
    {"driver_start NULL driver", c_dstart_d, "invalid: ", "driver"},
    {"driver_start NULL prepared", c_dstart_p, "invalid: ", "prepared"},
    {"driver_start NULL slot", c_dstart_slot, "invalid: ", "slot"},
    {"driver_start too many nodes", c_dstart_nodes, "limits: ", "nodes"},
    {"driver_poll NULL driver", c_dpoll_d, "invalid: ", "driver"},
    {"driver_poll NULL state", c_dpoll_state, "invalid: ", "state"},
    {"driver_poll slot 32", c_dpoll_slot, "invalid: ", "slot"},
    {"driver_poll empty slot", c_dpoll_empty, "invalid: ", "slot"},
    {"driver_wait NULL driver", c_dwait_d, "invalid: ", "driver"},
    {"driver_wait slot UINT32_MAX", c_dwait_slot, "invalid: ", "slot"},
    {"driver_stop NULL driver", c_dstop_d, "invalid: ", "driver"},
    {"driver_stop slot 99", c_dstop_slot, "invalid: ", "slot"},
    {"driver_stop empty slot", c_dstop_empty, "invalid: ", "slot"},
    {"worker_attach NULL out", c_wattach_out, "invalid: ", "out"},
    {"worker_attach no MESH_MAILBOX_FD", c_wattach_unset,
     "invalid: ", "MESH_MAILBOX_FD"},
    {"worker_attach MESH_SLOT=seven", c_wattach_slot_word,
     "invalid: ", "MESH_SLOT"},
    {"worker_attach slot 32", c_wattach_slot_range, "invalid: ", "slot"},
    {"worker_attach empty mailbox", c_wattach_short,
     "invalid: ", "MESH_MAILBOX_FD"},
#ifdef RIG_HAVE_CUDA
    {"cuda_describe NULL out", c_cuda_describe, "invalid: ", "out"},
    {"cuda_compiler_open NULL out", c_cuda_comp_out, "invalid: ", "out"},
    {"cuda_compiler_open NULL arch", c_cuda_comp_arch, "invalid: ", "arch"},
    {"cuda_compiler_open arch gfx90a", c_cuda_comp_arch_bad,
     "invalid: ", "arch"},
#endif
};

/* ---- include/mesh: neutral values ------------------------------------ */

static bool n_caps(void)
{
    mesh_caps c;
    memset(&c, 0, sizeof(c));
    c.kind = 99;
    mesh_caps_copy(NULL, &c);
    mesh_caps_copy(&c, NULL);
    mesh_caps_free(NULL);
    char *label = mesh_backend_label(UINT32_MAX);
    bool ok = label != NULL && strncmp(label, "backend", 7) == 0;
    free(label);
    return ok && mesh_caps_word(NULL) == 0 &&
           strcmp(mesh_caps_backend_name(NULL), "unknown") == 0 &&
           strcmp(mesh_caps_backend_name(&c), "unknown") == 0;
}
static bool n_kernel_stream(void)
{
    mesh_kernel_drop(NULL);
    mesh_stream_drop(NULL);
    mesh_prepared_free(NULL);
    return mesh_kernel_scratch(NULL) == 0 &&
           mesh_kernel_scratch(&kernel_no_ops) == 0 &&
           mesh_kernel_scratch(&kernel_bare) == 0 &&
           mesh_kernel_native(NULL) == NULL;
}
static bool n_backend_defaults(void)
{
    mesh_backend none = {NULL, NULL};
    mesh_backend_sample(NULL);
    mesh_backend_sample(&none);
    mesh_backend_destroy(NULL);
    mesh_backend_destroy(&none);
    mesh_backend_gather(NULL, 0);
    mesh_backend_gather(&none, 0);
    mesh_backend_gather(native_b, MESH_PROG_SLOTS);
    mesh_backend_gather(native_b, UINT32_MAX);
    mesh_backend_gather(native_b, 0); /* no program there: nothing */
    mesh_backend_on_cleanup(MESH_CLEANUP_NATIVE, NULL);
    return mesh_backend_crashed(NULL, NULL, NULL) == NULL &&
           mesh_backend_crashed(&none, NULL, NULL) == NULL &&
           !mesh_backend_owns_halt(NULL) && !mesh_backend_reads_live(NULL) &&
           mesh_backend_online_timeout_ms(NULL) == 2000 &&
           mesh_backend_online_timeout_ms(&none) == 2000 &&
           !mesh_backend_admit(NULL, NULL, 1, 0, NULL) &&
           !mesh_backend_admit(&none, NULL, 1, 0, NULL);
}
static bool n_runs_here(void)
{
    mesh_manifest m = manifest_native();
    return !mesh_runs_here(NULL, &m, have_native, 1) &&
           !mesh_runs_here("/nonexistent", NULL, have_native, 1) &&
           !mesh_runs_here("/nonexistent", &m, NULL, 1) &&
           !mesh_runs_here("/nonexistent", &m, have_native, 0);
}
static bool n_native(void)
{
    return mesh_native_binary(NULL, "p") == NULL &&
           mesh_native_binary("/d", NULL) == NULL &&
           mesh_native_target() != NULL;
}
static bool n_manifest(void)
{
    mesh_manifest_free(NULL);
    return !mesh_manifest_lists(NULL, MESH_BACKEND_NATIVE) &&
           !mesh_manifest_name_ok(NULL) && !mesh_manifest_name_ok("") &&
           !mesh_manifest_name_ok(".hidden") && !mesh_manifest_file_ok(NULL) &&
           !mesh_manifest_file_ok("a/b");
}
static bool n_payload(void)
{
    mesh_payload p;
    memset(&p, 0, sizeof(p));
    mesh_payload_free(NULL);
    return mesh_payload_find(NULL, "manifest.json") == NULL &&
           mesh_payload_find(&p, NULL) == NULL && mesh_payload_hash(NULL) == 0;
}
static bool n_table(void)
{
    uint32_t k = 12345;
    return !mesh_backend_built(UINT32_MAX) &&
           mesh_backend_name(UINT32_MAX) == NULL &&
           !mesh_backend_kind(NULL, &k) && !mesh_backend_kind("bogus", &k) &&
           k == 12345 && mesh_backend_kind("native", NULL);
}
static bool n_driver(void)
{
    mesh_driver_close(NULL);
    return mesh_driver_point(NULL, 0, 0) == 0 &&
           mesh_driver_point(native_d, MESH_PROG_SLOTS, 0) == 0 &&
           mesh_driver_point(native_d, 0, UINT32_MAX) == 0 &&
           mesh_driver_program(NULL, 0) == NULL &&
           mesh_driver_program(native_d, MESH_PROG_SLOTS) == NULL &&
           mesh_driver_program(native_d, 0) == NULL;
}
static bool n_worker(void)
{
    size_t bytes = 7;
    mesh_worker_online(NULL);
    mesh_worker_fail(NULL, 1);
    mesh_worker_detach(NULL);
    return mesh_worker_halted(NULL) && !mesh_worker_point(NULL, 0, 1) &&
           mesh_worker_slot(NULL) == MESH_PROG_SLOTS &&
           mesh_worker_node(NULL) == 0 && mesh_worker_nodes(NULL) == 0 &&
           mesh_worker_online_nodes(NULL) == 0 &&
           mesh_worker_scratch(NULL, &bytes) == NULL && bytes == 0 &&
           mesh_worker_scratch(NULL, NULL) == NULL;
}
#ifdef RIG_HAVE_CUDA
static bool n_cuda(void)
{
    mesh_cuda_compiler_close(NULL);
    return true;
}
#endif

static const neutral_case mesh_neutral[] = {
    {"caps NULL / unknown kind", n_caps},
    {"kernel, stream, prepared NULL", n_kernel_stream},
    {"backend defaults on NULL", n_backend_defaults},
    {"runs_here NULL", n_runs_here},
    {"native_binary NULL", n_native},
    {"manifest NULL / bad names", n_manifest},
    {"payload NULL", n_payload},
    {"backend table out of range", n_table},
    {"driver NULL / out of range", n_driver},
    {"worker NULL", n_worker},
#ifdef RIG_HAVE_CUDA
    {"cuda compiler_close NULL", n_cuda},
#endif
};

static int mesh_setup(void)
{
    char *err = NULL;
    if (!mesh_backend_open(MESH_BACKEND_NATIVE, NULL, &native_b, &err) ||
        !mesh_driver_open(native_b, &native_d, &err)) {
        fprintf(stderr, "the native backend: %s\n", err);
        free(err);
        return 1;
    }
    return 0;
}

static int mesh_teardown(void)
{
    mesh_driver_close(native_d);
    mesh_backend_destroy(native_b);
    native_d = NULL;
    native_b = NULL;
    return 0;
}

static void test_mesh_bad(void)
{
    run_bad(mesh_bad, NCASES(mesh_bad));
}

static void test_mesh_neutral(void)
{
    run_neutral(mesh_neutral, NCASES(mesh_neutral));
}
/* Rail ends (mesh/ends.h, mesh/worker.h): NULL, out of range, and every
 * rule of mesh_ends_check, each refused naming the input and the rule. */
static void test_ends_bad(void)
{
    char *err = NULL;
    /* The worker's side on NULL: neutral values, nothing touched. */
    T_EQ_U(mesh_worker_inputs(NULL), 0);
    T_TRUE(mesh_worker_input(NULL, 0) == NULL);
    T_TRUE(mesh_worker_end(NULL, 1) == NULL);
    T_EQ_U(mesh_end_id(NULL), (uint64_t)-1);
    T_TRUE(mesh_end_peer(NULL) == -1);
    T_TRUE(mesh_end_here(NULL) == -1);
    T_EQ_U(mesh_end_input(NULL), MESH_INPUTS);
    size_t bytes = 7;
    T_TRUE(mesh_end_outbound(NULL, 0, &bytes) == NULL && bytes == 0);
    bytes = 7;
    T_TRUE(mesh_end_inbound(NULL, 1, &bytes) == NULL && bytes == 0);
    T_EQ_U(mesh_end_sent(NULL), 0);
    T_EQ_U(mesh_end_arrived(NULL), 0);
    mesh_end_ready(NULL, 1);
    T_TRUE(!mesh_end_wait_arrived(NULL, 1));
    T_TRUE(!mesh_end_wait_sent(NULL, 1));
    T_TRUE(!mesh_end_failed(NULL));
    /* The host's side. */
    mesh_end_place pl;
    T_ERR(mesh_end_place_of(NULL, &pl, &err), err, "invalid: ");
    free(err);
    err = NULL;
    rig_transfer t = {0, 0, 64}, z = {0, 0, 0};
    rig_rail *ra = NULL, *rb = NULL;
    T_OK(rig_loopback_make(5, &t, 1, &t, 1, &ra, &rb, &err), err);
    rig_end *e = rig_rail_local(ra);
    T_ERR(mesh_end_place_of(e, NULL, &err), err, "invalid: ");
    free(err);
    err = NULL;
    /* A loopback end is malloc'd: in no System V segment. */
    T_ERR(mesh_end_place_of(e, &pl, &err), err, "unsupported: ");
    free(err);
    err = NULL;
    T_EQ_U(mesh_ends_mask(NULL), 0);
    T_TRUE(mesh_ends_check(NULL, 0, 0, &err));
    mesh_end_binding b[2] = {
        {.input = 0,
         .id = 5,
         .end = e,
         .send = &t,
         .nsend = 1,
         .receive = &t,
         .nreceive = 1},
        {.input = 0,
         .id = 5,
         .end = e,
         .send = &t,
         .nsend = 1,
         .receive = &t,
         .nreceive = 1},
    };
    mesh_ends ends = {.b = b, .n = 1};
    T_EQ_U(mesh_ends_mask(&ends), 1);
    T_TRUE(mesh_ends_check(&ends, 1, 1, &err));
    mesh_ends none = {.b = NULL, .n = 2};
    T_ERR(mesh_ends_check(&none, 1, 1, &err), err,
          "invalid: ends->b is NULL with 2 bindings");
    free(err);
    err = NULL;
    T_ERR(mesh_ends_check(&ends, 2, 2, &err), err,
          "invalid: input 0 is neither read nor written");
    free(err);
    err = NULL;
    b[0].input = MESH_INPUTS;
    T_ERR(mesh_ends_check(&ends, ~0ull, ~0ull, &err), err,
          "invalid: input 32 is not below 32");
    free(err);
    err = NULL;
    b[0].input = 0;
    ends.n = 2;
    T_ERR(mesh_ends_check(&ends, 1, 1, &err), err,
          "invalid: input 0 is bound twice");
    free(err);
    err = NULL;
    ends.n = 1;
    b[0].end = NULL;
    T_ERR(mesh_ends_check(&ends, 1, 1, &err), err,
          "invalid: input 0 has no end");
    free(err);
    err = NULL;
    b[0].end = e;
    b[0].send = &z;
    T_ERR(mesh_ends_check(&ends, 1, 1, &err), err,
          "invalid: input 0's lists: send[0] has length 0");
    free(err);
    err = NULL;
    b[0].send = NULL;
    b[0].nsend = 0;
    T_ERR(mesh_ends_check(&ends, 0, 1, &err), err,
          "invalid: the program writes input 0, whose end (rail 5) sends "
          "nothing");
    free(err);
    err = NULL;
    b[0].send = &t;
    b[0].nsend = 1;
    b[0].receive = NULL;
    b[0].nreceive = 0;
    T_ERR(mesh_ends_check(&ends, 1, 0, &err), err,
          "invalid: the program reads input 0, whose end (rail 5) receives "
          "nothing");
    free(err);
    rig_rail_release(ra);
    rig_rail_release(rb);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite mesh = CU_add_suite("include/mesh", mesh_setup, mesh_teardown);
    CU_add_test(mesh, "bad arguments", test_mesh_bad);
    CU_add_test(mesh, "neutral values", test_mesh_neutral);
    CU_add_test(mesh, "rail ends", test_ends_bad);
    printf("bad input cases: %zu of mesh, %zu neutral\n", NCASES(mesh_bad),
           NCASES(mesh_neutral));
    return t_run_registry();
}
