/* SPDX-License-Identifier: BSD-3-Clause */
/* How a wasm module should reach its rail ends: copies through the
 * mesh.end_* imports (what rig does) against stores into the module's own
 * memory, the best a mapping of the end's pages into that memory could do
 * (no copy at all).  In one process, no MPI: the wasm executor runs
 * ends_bench_wasm.c's entries on a lease lane, input 0 bound to one end of
 * a loopback rail (whose ready carries on the calling thread, the same in
 * both), and this program times each launch, less an empty one's.
 *
 *   ends_bench [--rounds 5]     (built where a wasm32 C compiler is)
 *
 * Prints ns per send for 8 B and 4 KiB, both ways, and their difference:
 * the import's price. */
#include <mesh/driver.h>
#include <mesh/executors.h>
#include <mesh/loader.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef ENDS_BENCH_PROGRAMS
#define ENDS_BENCH_PROGRAMS "examples/remote/programs"
#endif
#define ITERS 200000u /* ends_bench_wasm.c's */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, char *err)
{
    fprintf(stderr, "ends_bench: %s: %s\n", what, err != NULL ? err : "?");
    free(err);
    exit(1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One launch of program name with input 0 bound to end: its ns. */
static double once(mesh_driver *d, const char *name, const mesh_ends *ends)
{
    char *err = NULL;
    mesh_payload src;
    if (!mesh_payload_read(ENDS_BENCH_PROGRAMS, name, &src, &err)) {
        die(name, err);
    }
    mesh_prepared p;
    if (!mesh_driver_prepare(d, &src, NULL, NULL, &p, &err)) {
        die(name, err);
    }
    p.ends = ends;
    uint32_t slot = 0;
    uint64_t t0 = now_ns();
    if (!mesh_driver_start(d, &p, 1, &slot, &err)) {
        die(name, err);
    }
    mesh_run_state st;
    char *why = NULL;
    if (!mesh_driver_wait(d, slot, 600000, &st, &why, &err)) {
        die(name, err);
    }
    double ns = (double)(now_ns() - t0);
    if (st != MESH_RUN_DONE) {
        die(name, why);
    }
    if (!mesh_driver_stop(d, slot, &err)) {
        die(name, err);
    }
    return ns;
}

int main(int argc, char **argv)
{
    int rounds =
        argc > 2 && strcmp(argv[1], "--rounds") == 0 ? atoi(argv[2]) : 5;
    if (rounds < 1 || rounds > 100) {
        fprintf(stderr, "usage: ends_bench [--rounds R]\n");
        return 2;
    }
    char *err = NULL;
    mesh_backend *b = NULL;
    mesh_driver *d = NULL;
    if (!mesh_backend_open(MESH_BACKEND_WASM, NULL, &b, &err) ||
        !mesh_driver_open(b, &d, &err)) {
        die("the wasm executor", err);
    }
    rig_transfer t4k = {0, 0, 4096};
    rig_rail *ra = NULL, *rb = NULL;
    if (!rig_loopback_make(1, &t4k, 1, &t4k, 1, &ra, &rb, &err)) {
        die("a loopback rail", err);
    }
    mesh_end_binding bind = {.input = 0,
                             .id = 1,
                             .peer = 1,
                             .here = 0,
                             .end = rig_rail_local(ra),
                             .send = &t4k,
                             .nsend = 1,
                             .receive = &t4k,
                             .nreceive = 1,
                             .peer_place = {.shm = -1}};
    mesh_ends ends = {.b = &bind, .n = 1};
    static const char *const names[] = {"ebench_none", "ebench_copy8",
                                        "ebench_store8", "ebench_copy4k",
                                        "ebench_store4k"};
    double ns[5][100];
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 5; k++) {
            ns[k][r] = once(d, names[k], &ends);
        }
    }
    double med[5];
    for (int k = 0; k < 5; k++) {
        qsort(ns[k], (size_t)rounds, sizeof(double), cmp_double);
        med[k] = ns[k][rounds / 2];
    }
    double per[5];
    for (int k = 1; k < 5; k++) {
        per[k] = (med[k] - med[0]) / ITERS;
    }
    printf("wasm end access, ns per send (medians of %d launches of %u "
           "sends, less an empty launch's %.2f ms):\n"
           "  8 B:   import copy %.1f, stores in place %.1f: the copy costs "
           "%.1f ns\n"
           "  4 KiB: import copy %.1f, stores in place %.1f: the copy costs "
           "%.1f ns\n",
           rounds, ITERS, med[0] / 1e6, per[1], per[2], per[1] - per[2], per[3],
           per[4], per[3] - per[4]);
    mesh_driver_close(d);
    mesh_backend_destroy(b);
    rig_rail_release(ra);
    rig_rail_release(rb);
    mesh_backend_cleanup();
    return 0;
}
