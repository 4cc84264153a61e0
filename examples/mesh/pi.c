/* SPDX-License-Identifier: BSD-3-Clause */
/* A native mesh program: nodes integrate 4 / (1 + x^2) over [0, 1] = pi.
 *
 * Each node takes its share of the intervals, leaves its partial sum in the
 * program's scratch (shared by the nodes), raises progress point 0 as it
 * goes, and the last node to finish adds the sums up and prints pi.  Run it
 * with `mesh_run --programs examples/mesh/programs pi --nodes 4`. */
#include "mesh/worker.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define INTERVALS 4000000L

/* The scratch: partial sums, then the count of nodes done. */
typedef struct {
    double partial[256];
    atomic_uint done;
} pi_scratch;

int main(void)
{
    mesh_worker *w = NULL;
    char *err = NULL;
    if (!mesh_worker_attach(&w, &err)) {
        fprintf(stderr, "pi: %s\n", err != NULL ? err : "?");
        free(err);
        return 2;
    }
    mesh_worker_online(w);
    uint32_t node = mesh_worker_node(w), nodes = mesh_worker_nodes(w);
    size_t bytes = 0;
    pi_scratch *s = mesh_worker_scratch(w, &bytes);
    if (s == NULL || bytes < sizeof(*s) || nodes > 256) {
        fprintf(stderr, "pi: needs %zu bytes of scratch and <= 256 nodes\n",
                sizeof(*s));
        mesh_worker_fail(w, 1);
        return 3;
    }
    long lo = INTERVALS * (long)node / (long)nodes;
    long hi = INTERVALS * ((long)node + 1) / (long)nodes;
    double h = 1.0 / (double)INTERVALS, sum = 0.0;
    for (long i = lo; i < hi; i++) {
        double x = h * ((double)i + 0.5);
        sum += 4.0 / (1.0 + x * x);
        if ((i & 0xffff) == 0) {
            if (mesh_worker_halted(w)) {
                mesh_worker_detach(w);
                return 0;
            }
            mesh_worker_point(w, 0, (uint64_t)(i - lo));
        }
    }
    s->partial[node] = sum * h;
    /* Release our partial sum; the last node acquires everyone's. */
    if (atomic_fetch_add_explicit(&s->done, 1, memory_order_acq_rel) ==
        nodes - 1) {
        double pi = 0.0;
        for (uint32_t i = 0; i < nodes; i++) {
            pi += s->partial[i];
        }
        printf("pi = %.12f (%ld intervals on %u nodes, error %.1e)\n", pi,
               INTERVALS, nodes, fabs(pi - M_PI));
        fflush(stdout);
    }
    mesh_worker_detach(w);
    return 0;
}
