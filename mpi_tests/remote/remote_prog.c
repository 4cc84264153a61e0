/* SPDX-License-Identifier: BSD-3-Clause */
/* A native program for the remote layer's tests; argv[1] picks how its
 * nodes behave.
 *
 *   sum N   every node goes online, waits for all, then adds
 *           j * (node + 1) for j = 1..N and raises progress point `node`
 *           (nodes < 8) to the sum: (node + 1) * N * (N + 1) / 2
 *   spin    online, then raises point 0 every millisecond until halted
 *   crash   as spin, but node 2 (or the last) dies by SIGSEGV once every
 *           node is online
 *
 * Every mode also ends when the host is gone and by itself after 60 s, so
 * that a failed test leaves nothing behind for long. */
#include "mesh/worker.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GUARD_MS 60000

static void nap(void)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000L};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "spin";
    mesh_worker *w = NULL;
    char *err = NULL;
    if (!mesh_worker_attach(&w, &err)) {
        fprintf(stderr, "remote_prog: %s\n", err != NULL ? err : "?");
        free(err);
        return 2;
    }
    uint32_t node = mesh_worker_node(w);
    uint32_t nodes = mesh_worker_nodes(w);
    mesh_worker_online(w);
    for (long i = 0; mesh_worker_online_nodes(w) < nodes && i < GUARD_MS; i++) {
        if (mesh_worker_halted(w)) {
            mesh_worker_detach(w);
            return 0;
        }
        nap();
    }
    if (strcmp(mode, "sum") == 0) {
        uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000;
        uint64_t s = 0;
        for (uint64_t j = 1; j <= n; j++) {
            s += j * (node + 1);
        }
        if (node < 8) {
            mesh_worker_point(w, node, s);
        }
        mesh_worker_detach(w);
        return 0;
    }
    uint32_t victim = nodes > 2 ? 2 : nodes - 1;
    if (strcmp(mode, "crash") == 0 && node == victim) {
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
    }
    for (long i = 0; i < GUARD_MS && !mesh_worker_halted(w); i++) {
        mesh_worker_point(w, 0, (uint64_t)i + 1);
        nap();
    }
    mesh_worker_detach(w);
    return 0;
}
