/* SPDX-License-Identifier: BSD-3-Clause */
/* A native program for the tests; argv[1] picks how its nodes behave.
 *
 *   ok        online, then steps (point 0 = steps) until halted
 *   finish N  online, N steps, writes (node + 1) * 111 to scratch[node]
 *   crash     as ok, but node 2 (or the last) dies by SIGSEGV soon after
 *             all nodes are online
 *   stubborn  online, then ignores P_HALT and SIGTERM
 *   never     never goes online; leaves when halted
 *   echo      online, then raises point 0 to scratch word 0 whenever the
 *             host changes it, until halted (benchmarks/mesh_bench.c)
 *
 * Every mode leaves by itself after 30 s, so a failed test leaks nothing
 * for long. */
#include "mesh/worker.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GUARD_MS 30000

#include "real_signals.h"

static void nap(void)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000L};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "ok";
    mesh_worker *w = NULL;
    char *err = NULL;
    if (!mesh_worker_attach(&w, &err)) {
        fprintf(stderr, "worker_prog: %s\n", err != NULL ? err : "?");
        free(err);
        return 2;
    }
    uint32_t node = mesh_worker_node(w);
    uint32_t nodes = mesh_worker_nodes(w);
    if (strcmp(mode, "stubborn") == 0) {
        signal(SIGTERM, SIG_IGN);
    }
    if (strcmp(mode, "never") != 0) {
        mesh_worker_online(w);
    }
    if (strcmp(mode, "echo") == 0) {
        size_t bytes = 0;
        _Atomic uint64_t *word = mesh_worker_scratch(w, &bytes);
        uint64_t seen = 0;
        while (word != NULL && !mesh_worker_halted(w)) {
            uint64_t v = atomic_load_explicit(word, memory_order_acquire);
            if (v != seen) {
                seen = v;
                mesh_worker_point(w, 0, v);
            }
        }
        mesh_worker_detach(w);
        return word != NULL ? 0 : 3;
    }
    long steps = strcmp(mode, "finish") == 0 && argc > 2 ? atol(argv[2]) : -1;
    uint32_t victim = nodes > 2 ? 2 : nodes - 1;
    /* The victim dies only once the launch is up (slow starts: TSan). */
    for (long i = 0; strcmp(mode, "crash") == 0 && node == victim &&
                     mesh_worker_online_nodes(w) < nodes && i < GUARD_MS;
         i++) {
        nap();
    }
    for (long i = 0; i < GUARD_MS; i++) {
        if (steps >= 0 && i >= steps) {
            break;
        }
        if (strcmp(mode, "stubborn") != 0 && mesh_worker_halted(w)) {
            break;
        }
        if (strcmp(mode, "crash") == 0 && node == victim && i == 20) {
            raise(SIGSEGV);
        }
        mesh_worker_point(w, 0, (uint64_t)i + 1);
        nap();
    }
    if (strcmp(mode, "finish") == 0) {
        size_t bytes = 0;
        uint64_t *scratch = mesh_worker_scratch(w, &bytes);
        if (scratch == NULL || bytes < (node + 1) * sizeof(uint64_t)) {
            mesh_worker_fail(w, 1);
            return 3;
        }
        scratch[node] = (node + 1) * 111u;
    }
    mesh_worker_detach(w);
    return 0;
}
