/* SPDX-License-Identifier: BSD-3-Clause */
/* What the wasm backend's test programs share: assembling and preparing a
 * module, launching it on a slot as the driver would, waiting for it.
 * Included once by each test program (its state is static). */
#ifndef RIG_WASM_TEST_UTIL_H
#define RIG_WASM_TEST_UTIL_H

#include "mesh/wasm/wasm_internal.h"

#include "../test_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SRC WASM_TEST_SRCDIR
#define T_TIMEOUT_MS 10000u
/* The backend's settings in the tests: online timeout, halt, grace.  Both
 * periods are long so that on a loaded machine a lane only slow to be
 * scheduled is not taken for one that ignores the halt; nodes that obey
 * or are ended end at once. */
#define HALT_MS 1000u
#define GRACE_MS 5000u
#define SETTINGS                                                               \
    {                                                                          \
        10000, HALT_MS, GRACE_MS                                               \
    }

static mesh_backend *B;
static mesh_control_block *CB;
static char tmp_dir[256];

/* ---- helpers ---------------------------------------------------------- */

static inline uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline void nap_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Assembles wat (a path under the source tree) into bytes. */
static inline uint8_t *assemble(const char *wat, size_t *len)
{
    char out[512], cmd[2048];
    snprintf(out, sizeof(out), "%s/%s.wasm", tmp_dir, strrchr(wat, '/') + 1);
    snprintf(cmd, sizeof(cmd), "'%s' '%s/%s' -o '%s'", WASM_TEST_WAT2WASM, SRC,
             wat, out);
    if (system(cmd) != 0) {
        return NULL;
    }
    return read_all(out, len);
}

/* A payload for program name: a manifest and module bytes. */
static inline bool make_payload(const char *name, const char *extra,
                                const uint8_t *wasm, size_t len,
                                mesh_payload *p)
{
    char json[512], file[128];
    char *err = NULL;
    snprintf(json, sizeof(json),
             "{\"name\": \"%s\", \"abi\": 1, \"backends\": [\"wasm\"]%s}", name,
             extra);
    snprintf(file, sizeof(file), "%s.wasm", name);
    bool ok = mesh_payload_init(p, name, &err) &&
              mesh_payload_add(p, "manifest.json", json, strlen(json), &err) &&
              (wasm == NULL || mesh_payload_add(p, file, wasm, len, &err));
    if (!ok) {
        T_FAILF("payload %s: %s", name, err ? err : "?");
        free(err);
    }
    return ok;
}

/* Prepares test program tests/wasm/programs/<name>.wat (or an example). */
static inline bool prepare_on(mesh_backend *b, const char *wat,
                              const char *name, const char *extra,
                              mesh_prepared *out, char **err)
{
    size_t len = 0;
    uint8_t *wasm = assemble(wat, &len);
    if (wasm == NULL) {
        T_FAILF("wat2wasm %s failed", wat);
        return false;
    }
    mesh_payload p;
    bool ok = make_payload(name, extra, wasm, len, &p);
    free(wasm);
    if (!ok) {
        return false;
    }
    const mesh_compiler *c = b->ops->compiler(b);
    return c->ops->prepare(c, &p, NULL, NULL, out, err);
}

/* A program loaded and launched in slot, its nodes online. */
typedef struct {
    mesh_kernel *k;
    mesh_stream *st;
    uint32_t slot;
} running;

static inline mesh_cb_slot *words(uint32_t slot)
{
    return &CB->slot[slot];
}

static inline bool launch(mesh_prepared *p, uint32_t slot, uint32_t nodes,
                          running *r, bool wait_online)
{
    char *err = NULL;
    memset(r, 0, sizeof(*r));
    r->slot = slot;
    bool ok = B->ops->load(B, p, &r->k, &err) &&
              B->ops->new_stream(B, slot, r->k, &r->st, &err);
    mesh_prepared_free(p);
    if (!ok) {
        T_FAILF("load: %s", err ? err : "?");
        free(err);
        return false;
    }
    /* What the driver does before a launch. */
    mesh_cb_slot *w = words(slot);
    atomic_store(&w->halt, 0);
    atomic_store(&w->nodes, nodes);
    atomic_store(&w->online, 0);
    atomic_store(&w->exited, 0);
    atomic_store(&w->error, 0);
    for (unsigned i = 0; i < MESH_POINTS; i++) {
        atomic_store(&w->points[i], 0);
    }
    atomic_store(&w->scratch, mesh_kernel_scratch(r->k));
    atomic_fetch_add_explicit(&w->launch, 1, memory_order_release);
    if (!B->ops->launch(B, r->st, r->k, nodes, 0, slot, &err)) {
        T_FAILF("launch: %s", err ? err : "?");
        free(err);
        return false;
    }
    uint64_t until = now_ms() + T_TIMEOUT_MS;
    while (wait_online && atomic_load(&w->online) < nodes) {
        if (now_ms() > until) {
            T_FAILF("only %u of %u nodes online", atomic_load(&w->online),
                    nodes);
            return false;
        }
        nap_ms(1);
    }
    return true;
}

static inline bool wait_done(running *r, uint32_t ms)
{
    uint64_t until = now_ms() + ms;
    for (;;) {
        bool done = false;
        char *err = NULL;
        if (!B->ops->query(B, r->st, r->k, &done, &err)) {
            T_FAILF("query: %s", err ? err : "?");
            free(err);
            return false;
        }
        if (done) {
            return true;
        }
        if (now_ms() > until) {
            return false;
        }
        nap_ms(1);
    }
}

/* Point 0 of slot (the highest count of its nodes) rises past its value
 * now: some node still runs.  Waits at most T_TIMEOUT_MS (a node that
 * trapped may have left the maximum ahead of the others). */
static inline bool point_rises(uint32_t slot)
{
    uint64_t before = atomic_load(&words(slot)->points[0]);
    uint64_t until = now_ms() + T_TIMEOUT_MS;
    while (atomic_load(&words(slot)->points[0]) <= before) {
        if (now_ms() > until) {
            return false;
        }
        nap_ms(1);
    }
    return true;
}

static inline bool unload(running *r, char **err)
{
    bool ok = B->ops->unload(B, r->k, err);
    mesh_stream_drop(r->st);
    memset(r, 0, sizeof(*r));
    return ok;
}

static inline unsigned count_dir(const char *path)
{
    unsigned n = 0;
    DIR *d = opendir(path);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        n += e->d_name[0] != '.';
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

/* A program whose nodes ignore the halt, launched in slot and unloaded:
 * the host waits the halt period, then ends them at their next check
 * (stubborn: an import call; spin_mem: a memory access) or interrupts
 * their lanes (never, recurse); nothing is abandoned, and the lanes are
 * reused, not replaced.  The upper bound is only a hang guard: that the
 * nodes ended within halt + grace is what unload's success says. */
static inline void halt_case(const char *prog, uint32_t slot, uint32_t nodes)
{
    char wat[128], *err = NULL;
    snprintf(wat, sizeof(wat), "tests/wasm/programs/%s.wat", prog);
    mesh_prepared p;
    running r;
    bool ok = prepare_on(B, wat, prog, "", &p, &err);
    T_OK(ok, err);
    uint32_t alive0 = 0, lost0 = 0;
    mesh_wasm_lane_counts(B, &alive0, &lost0);
    if (!ok || !launch(&p, slot, nodes, &r, true)) {
        return;
    }
    /* It runs: the nodes did not end by themselves. */
    nap_ms(20);
    bool done = true;
    T_TRUE(B->ops->query(B, r.st, r.k, &done, NULL) && !done);
    uint64_t t0 = now_ms();
    if (!unload(&r, &err)) {
        T_FAILF("%s: unload: %s", prog, err != NULL ? err : "?");
        free(err);
    }
    uint64_t took = now_ms() - t0;
    if (took < HALT_MS || took > 10 * (HALT_MS + GRACE_MS)) {
        T_FAILF("%s: unloading took %llu ms", prog, (unsigned long long)took);
    }
    T_EQ_U(atomic_load(&words(slot)->exited), 0);
    uint32_t alive = 0, lost = 0;
    mesh_wasm_lane_counts(B, &alive, &lost);
    T_EQ_U(lost, lost0);
    /* Its lanes are back: a launch of as many nodes makes no new lane. */
    T_TRUE(
        prepare_on(B, "tests/wasm/programs/quick.wat", "quick", "", &p, &err));
    if (launch(&p, slot, nodes, &r, false)) {
        T_TRUE(wait_done(&r, T_TIMEOUT_MS));
        T_OK(unload(&r, &err), err);
    }
    uint32_t alive2 = 0;
    mesh_wasm_lane_counts(B, &alive2, &lost);
    T_EQ_U(alive2, alive);
}

static inline long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "VmRSS: %ld", &kib) == 1) {
            break;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return kib;
}

/* cycles launch/unload cycles of quick in slot 7 leak no thread, no
 * descriptor, no lane, no file, and (rss) no memory. */
static inline void cycles_case(unsigned cycles, bool rss_too)
{
    unsigned threads0 = 0, fds0 = 0, files0 = 0, alive0 = 0;
    long rss0 = 0;
    for (unsigned i = 0; i < cycles; i++) {
        char *err = NULL;
        mesh_prepared p;
        running r;
        bool ok = prepare_on(B, "tests/wasm/programs/quick.wat", "quick", "",
                             &p, &err);
        if (!ok) {
            T_OK(ok, err);
            return;
        }
        if (!launch(&p, 7, 2, &r, false) || !wait_done(&r, T_TIMEOUT_MS)) {
            T_FAILF("cycle %u did not finish", i);
            return;
        }
        if (atomic_load(&words(7)->exited) != 2) {
            T_FAILF("cycle %u: %u nodes exited", i,
                    atomic_load(&words(7)->exited));
        }
        if (!unload(&r, &err)) {
            T_OK(false, err);
            return;
        }
        if (i == 0) {
            uint32_t lost;
            threads0 = count_dir("/proc/self/task");
            fds0 = count_dir("/proc/self/fd");
            files0 = count_dir(tmp_dir);
            rss0 = rss_kib();
            mesh_wasm_lane_counts(B, &alive0, &lost);
        }
    }
    uint32_t alive, lost;
    mesh_wasm_lane_counts(B, &alive, &lost);
    long rss = rss_kib();
    printf("\n  %u cycles: threads %u -> %u, fds %u -> %u, lanes %u -> %u, "
           "rss %ld -> %ld KiB\n",
           cycles, threads0, count_dir("/proc/self/task"), fds0,
           count_dir("/proc/self/fd"), alive0, alive, rss0, rss);
    T_EQ_U(count_dir("/proc/self/task"), threads0);
    T_EQ_U(count_dir("/proc/self/fd"), fds0);
    T_EQ_U(alive, alive0);
    T_EQ_U(count_dir(tmp_dir), files0);
    if (rss_too) {
        T_TRUE(rss - rss0 < 16 * 1024);
    }
}
/* Opens the backend B of the test program, with the module cache of the
 * build tree, and a scratch directory tmp_dir.  The backend was built, so
 * it must open: a refusal is a failure, not a skip.  False: say why. */
static inline bool wasm_test_open(const mesh_settings *s)
{
    char *err = NULL;
    snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/rig-test-wasm.XXXXXX");
    if (mkdtemp(tmp_dir) == NULL) {
        perror("mkdtemp");
        return false;
    }
    /* Modules compile once per build tree, not once per run. */
    char cache[4096], cwd[3000];
    if (getcwd(cwd, sizeof(cwd)) == NULL) {
        return false;
    }
    snprintf(cache, sizeof(cache), "%s/tests/wasm/cache.d", cwd);
    setenv("RIG_WASM_CACHE", cache, 0);
    if (!mesh_wasm_backend_open(s, &B, &err)) {
        printf("FAIL: the wasm backend was built but does not open: %s\n",
               err != NULL ? err : "?");
        free(err);
        rmdir(tmp_dir);
        return false;
    }
    uint8_t *host;
    uint64_t dev;
    B->ops->mailbox(B, &host, &dev, NULL);
    CB = (mesh_control_block *)host;
    return true;
}

/* Removes tmp_dir; false if that failed. */
static inline bool wasm_test_close(void)
{
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
    return system(cmd) == 0;
}

#endif
