/* SPDX-License-Identifier: BSD-3-Clause */
/* mesh_bench: what the executors' isolation costs, through the driver.
 *
 *   native launch   mesh_driver_start of a prepared program (t_ok) until
 *                   every node is online; mesh_driver_stop apart (1 and 4
 *                   nodes);
 *   native point    round trip: the host stores n in the program's scratch,
 *                   the node (t_echo) raises point 0 to n, the host reads
 *                   it with mesh_driver_point;
 *   wasm launch     as native, 1 and 4 nodes of a module that returns at
 *                   once (tests/wasm/programs/quick.wat);
 *   wasm kernel     a compute-bound module (benchmarks/mesh_kernel.wat:
 *                   calls and loop heads, no import in the hot path) from
 *                   online to done, 1 node.
 *
 * Medians (and the 90th percentile) of --rounds runs.  Not a test: build
 * it with `make benchmarks/mesh_bench` in a build tree (it uses that tree's
 * test catalog) and run it on a quiet machine:
 *
 *   ./benchmarks/mesh_bench --rounds 200 --kernel-rounds 5
 *
 *   mesh_bench [--rounds N] [--kernel-rounds N] [--programs DIR]
 *              [--host-mib N] [--no-native] [--no-wasm]
 *
 * --host-mib N makes the host resident in N MiB first, as an application
 * would be: what starting a process costs grows with the host's page
 * tables when the host forks. */
#include "mesh/driver.h"
#include "mesh/executors.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : (x > y ? 1 : 0);
}

static void report(const char *what, double *v, int n, const char *unit,
                   double scale)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    printf("%-44s %10.2f %10.2f  %s (median, p90 of %d)\n", what,
           v[n / 2] * scale, v[(n * 9) / 10 < n ? (n * 9) / 10 : n - 1] * scale,
           unit, n);
}

static int die(const char *what, char *err)
{
    fprintf(stderr, "mesh_bench: %s: %s\n", what, err != NULL ? err : "?");
    free(err);
    return 1;
}

/* Prepares a copy of tmpl and starts it with nodes nodes. */
static bool start(mesh_driver *d, const mesh_payload *tmpl, uint32_t nodes,
                  uint32_t *slot, char **err)
{
    mesh_payload p;
    mesh_prepared pr;
    return mesh_payload_copy(&p, tmpl, err) &&
           mesh_driver_prepare(d, &p, NULL, NULL, &pr, err) &&
           mesh_driver_start(d, &pr, nodes, slot, err);
}

/* Launch: start (prepared outside the timing) until every node is online;
 * then stop, timed apart. */
static int bench_launch(mesh_driver *d, const mesh_payload *tmpl,
                        uint32_t nodes, int rounds, const char *label)
{
    double *t = calloc((size_t)rounds, sizeof(double));
    double *u = calloc((size_t)rounds, sizeof(double));
    char *err = NULL;
    for (int i = 0; i < rounds; i++) {
        mesh_payload p;
        mesh_prepared pr;
        uint32_t slot = 0;
        if (!mesh_payload_copy(&p, tmpl, &err) ||
            !mesh_driver_prepare(d, &p, NULL, NULL, &pr, &err)) {
            free(t);
            free(u);
            return die(label, err);
        }
        double t0 = now_us();
        if (!mesh_driver_start(d, &pr, nodes, &slot, &err)) {
            free(t);
            free(u);
            return die(label, err);
        }
        double t1 = now_us();
        if (!mesh_driver_stop(d, slot, &err)) {
            free(t);
            free(u);
            return die(label, err);
        }
        t[i] = t1 - t0;
        u[i] = now_us() - t1;
    }
    char what[128];
    snprintf(what, sizeof(what), "%s: start to online", label);
    report(what, t, rounds, "ms", 1e-3);
    snprintf(what, sizeof(what), "%s: stop", label);
    report(what, u, rounds, "ms", 1e-3);
    free(t);
    free(u);
    return 0;
}

static int bench_point(mesh_driver *d, mesh_backend *b,
                       const mesh_payload *tmpl, int rounds)
{
    char *err = NULL;
    uint32_t slot = 0;
    if (!start(d, tmpl, 1, &slot, &err)) {
        return die("native point", err);
    }
    uint8_t *host = NULL;
    uint64_t dev = 0;
    if (!b->ops->mailbox(b, &host, &dev, &err)) {
        return die("native point: mailbox", err);
    }
    mesh_cb_slot *w = &((mesh_control_block *)host)->slot[slot];
    _Atomic uint64_t *word =
        (_Atomic uint64_t *)(uintptr_t)atomic_load(&w->scratch);
    int n = rounds * 100;
    double *t = calloc((size_t)n, sizeof(double));
    for (int i = 0; i < n; i++) {
        uint64_t v = (uint64_t)i + 1;
        double t0 = now_us();
        atomic_store_explicit(word, v, memory_order_release);
        while (mesh_driver_point(d, slot, 0) < v) {
        }
        t[i] = now_us() - t0;
    }
    report("native point round trip (1 node)", t, n, "us", 1.0);
    free(t);
    if (!mesh_driver_stop(d, slot, &err)) {
        return die("native point: stop", err);
    }
    return 0;
}

static int bench_native(const char *programs, int rounds)
{
    mesh_backend *b = NULL;
    mesh_driver *d = NULL;
    char *err = NULL;
    mesh_payload ok, echo;
    if (!mesh_backend_open(MESH_BACKEND_NATIVE, NULL, &b, &err) ||
        !mesh_driver_open(b, &d, &err) ||
        !mesh_payload_read(programs, "t_ok", &ok, &err) ||
        !mesh_payload_read(programs, "t_echo", &echo, &err)) {
        return die("native", err);
    }
    int rc = bench_launch(d, &ok, 1, rounds, "native, 1 node") ||
             bench_launch(d, &ok, 4, rounds, "native, 4 nodes") ||
             bench_point(d, b, &echo, rounds);
    mesh_payload_free(&ok);
    mesh_payload_free(&echo);
    mesh_driver_close(d);
    mesh_backend_destroy(b);
    return rc;
}

/* A payload of one module, assembled from wat by wat2wasm. */
static bool wasm_payload(const char *name, const char *wat, mesh_payload *p,
                         char **err)
{
    char out[] = "/tmp/mesh_bench.XXXXXX";
    int fd = mkstemp(out);
    if (fd < 0) {
        *err = strdup("system: mkstemp failed");
        return false;
    }
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "'%s' '%s' -o '%s'", MESH_BENCH_WAT2WASM, wat,
             out);
    FILE *f = system(cmd) == 0 ? fdopen(fd, "rb") : NULL;
    uint8_t buf[1 << 16];
    size_t len = f != NULL ? fread(buf, 1, sizeof(buf), f) : 0;
    if (f != NULL) {
        fclose(f);
    } else {
        close(fd);
    }
    unlink(out);
    char json[256], file[128];
    snprintf(json, sizeof(json),
             "{\"name\": \"%s\", \"abi\": 1, \"backends\": [\"wasm\"]}", name);
    snprintf(file, sizeof(file), "%s.wasm", name);
    if (len == 0) {
        *err = strdup("system: wat2wasm failed");
        return false;
    }
    return mesh_payload_init(p, name, err) &&
           mesh_payload_add(p, "manifest.json", json, strlen(json), err) &&
           mesh_payload_add(p, file, buf, len, err);
}

static int bench_wasm(int rounds, int kernel_rounds)
{
    mesh_backend *b = NULL;
    mesh_driver *d = NULL;
    char *err = NULL;
    if (!mesh_backend_open(MESH_BACKEND_WASM, NULL, &b, &err)) {
        printf("wasm: %s\n", err != NULL ? err : "?");
        free(err);
        return 0;
    }
    mesh_payload quick, kernel;
    char wat[4096];
    snprintf(wat, sizeof(wat), "%s/tests/wasm/programs/quick.wat",
             MESH_BENCH_SRCDIR);
    char kwat[4096];
    snprintf(kwat, sizeof(kwat), "%s/benchmarks/mesh_kernel.wat",
             MESH_BENCH_SRCDIR);
    if (!mesh_driver_open(b, &d, &err) ||
        !wasm_payload("quick", wat, &quick, &err) ||
        !wasm_payload("mesh_kernel", kwat, &kernel, &err)) {
        return die("wasm", err);
    }
    int rc = bench_launch(d, &quick, 1, rounds, "wasm, 1 node") ||
             bench_launch(d, &quick, 4, rounds, "wasm, 4 nodes");
    double *t = calloc((size_t)kernel_rounds, sizeof(double));
    uint64_t sum = 0;
    for (int i = 0; rc == 0 && i < kernel_rounds; i++) {
        uint32_t slot = 0;
        mesh_run_state st = MESH_RUN_RUNNING;
        if (!start(d, &kernel, 1, &slot, &err)) {
            rc = die("wasm kernel", err);
            break;
        }
        double t0 = now_us();
        if (!mesh_driver_wait(d, slot, 600000, &st, NULL, &err) ||
            st != MESH_RUN_DONE) {
            rc = die("wasm kernel: wait", err);
            break;
        }
        t[i] = now_us() - t0;
        sum = mesh_driver_point(d, slot, 0);
        if (!mesh_driver_stop(d, slot, &err)) {
            rc = die("wasm kernel: stop", err);
        }
    }
    if (rc == 0) {
        report("wasm compute kernel, online to done", t, kernel_rounds, "ms",
               1e-3);
        printf("%-44s %016" PRIx64 "\n", "  (its checksum)", sum);
    }
    free(t);
    mesh_payload_free(&quick);
    mesh_payload_free(&kernel);
    mesh_driver_close(d);
    mesh_backend_destroy(b);
    return rc;
}

int main(int argc, char **argv)
{
    int rounds = 50, kernel_rounds = 5;
    const char *programs = MESH_BENCH_PROGRAMS;
    bool native = true, wasm = true;
    size_t host_mib = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--kernel-rounds") == 0 && i + 1 < argc) {
            kernel_rounds = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--programs") == 0 && i + 1 < argc) {
            programs = argv[++i];
        } else if (strcmp(argv[i], "--host-mib") == 0 && i + 1 < argc) {
            host_mib = (size_t)atol(argv[++i]);
        } else if (strcmp(argv[i], "--no-native") == 0) {
            native = false;
        } else if (strcmp(argv[i], "--no-wasm") == 0) {
            wasm = false;
        } else {
            fprintf(stderr,
                    "usage: mesh_bench [--rounds N] [--kernel-rounds N] "
                    "[--programs DIR] [--host-mib N] [--no-native] "
                    "[--no-wasm]\n");
            return 2;
        }
    }
    if (rounds < 1 || kernel_rounds < 1) {
        fprintf(stderr, "mesh_bench: rounds must be at least 1\n");
        return 2;
    }
    char *ballast = NULL;
    if (host_mib > 0) {
        ballast = malloc(host_mib << 20);
        if (ballast == NULL) {
            fprintf(stderr, "mesh_bench: no %zu MiB\n", host_mib);
            return 1;
        }
        memset(ballast, 1, host_mib << 20);
    }
    printf("# mesh_bench: %d rounds (kernel: %d), host resident in %zu MiB "
           "more\n",
           rounds, kernel_rounds, host_mib);
    printf("%-44s %10s %10s\n", "# what", "median", "p90");
    int rc = 0;
    if (native) {
        rc = bench_native(programs, rounds);
    }
    if (rc == 0 && wasm) {
        rc = bench_wasm(rounds, kernel_rounds);
    }
    free(ballast);
    return rc;
}
