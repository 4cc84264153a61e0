/* SPDX-License-Identifier: BSD-3-Clause */
/* rail_latency's program: ping-pong of 8 bytes over input 0, timed by the
 * lower-ranked machine.
 *
 * `latency_node N`: N round trips.  The machine whose rank is lower than
 * its peer's pings (writes 8 bytes, readies, waits for the answer), the
 * other answers; the counts of a launch start from the end's `sent`, so a
 * program may be launched again on the same rail.  WARMUP untimed round
 * trips come first: the two nodes start on two machines at different
 * times (a command each, a process each), and the pinger's first wait
 * would otherwise time the peer's start (ms, against a round of about
 * 10 ms); the host-driven rounds start after a barrier.  Point 0: the
 * pinger's nanoseconds for the N timed round trips; point 1: the timed
 * round trips done; point 2: 1 when a byte came back wrong or a wait
 * failed. */
#include "mesh/worker.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Untimed round trips before the timed ones (rail_latency.c does as
 * many in its host-driven rounds). */
#define WARMUP 256u

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000;
    mesh_worker *w = NULL;
    char *err = NULL;
    if (!mesh_worker_attach(&w, &err)) {
        fprintf(stderr, "latency_node: %s\n", err != NULL ? err : "?");
        free(err);
        return 2;
    }
    mesh_worker_online(w);
    mesh_end *e = mesh_worker_input(w, 0);
    if (e == NULL) {
        mesh_worker_detach(w);
        return 3;
    }
    bool ping = mesh_end_here(e) < mesh_end_peer(e);
    uint64_t base = mesh_end_sent(e), bad = 0;
    uint64_t t0 = now_ns();
    for (uint64_t i = 0; i < WARMUP + n && bad == 0; i++) {
        uint64_t c = base + i + 1;
        if (i == WARMUP) {
            t0 = now_ns();
        }
        uint64_t v = c * 2654435761u;
        if (c > 2 && !mesh_end_wait_sent(e, c - 2)) {
            bad = 1;
            break;
        }
        if (!ping && !mesh_end_wait_arrived(e, c)) {
            bad = 1;
            break;
        }
        uint64_t *out = mesh_end_outbound(e, (unsigned)((c - 1) % 2), NULL);
        const uint64_t *in = mesh_end_inbound(e, (unsigned)((c - 1) % 2), NULL);
        if (!ping) {
            v = *in; /* answer with what came */
        }
        *out = v;
        mesh_end_ready(e, c);
        if (ping && (!mesh_end_wait_arrived(e, c) || *in != v)) {
            bad = 1;
        }
        if (i >= WARMUP) {
            mesh_worker_point(w, 1, i + 1 - WARMUP);
        }
    }
    uint64_t ns = now_ns() - t0;
    if (ping) {
        mesh_worker_point(w, 0, ns);
    }
    mesh_worker_point(w, 2, bad);
    mesh_worker_detach(w);
    return 0;
}
