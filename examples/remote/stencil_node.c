/* SPDX-License-Identifier: BSD-3-Clause */
/* The stencil's native program: one block of the grid, halos with its
 * neighbours over rails, no controller involved (examples/remote/README.md).
 *
 * Inputs (stencil_kernel.h): STENCIL_NORTH and STENCIL_SOUTH, the halo
 * rails to the blocks above and below (unbound at the grid's edges), each
 * one row of doubles each way; STENCIL_RESULT, the rail to the
 * controller's machine, which brings the launch's stencil_params and
 * takes the block's rows back.  Per step s (counts from the params'
 * base): send the edge rows (after the copy's last send went), take the
 * neighbours' rows into the ghost rows, compute. */
#include "stencil_kernel.h"

#include "mesh/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sends row `row` of blk over e as run c - 1's copy, count c. */
static bool send_row(mesh_end *e, const double *row, size_t bytes, uint64_t c)
{
    if (c > 2 && !mesh_end_wait_sent(e, c - 2)) {
        return false;
    }
    size_t have = 0;
    void *out = mesh_end_outbound(e, (unsigned)((c - 1) % 2), &have);
    if (out == NULL || have < bytes) {
        return false;
    }
    memcpy(out, row, bytes);
    mesh_end_ready(e, c);
    return true;
}

static bool take_row(mesh_end *e, double *row, size_t bytes, uint64_t c)
{
    if (!mesh_end_wait_arrived(e, c)) {
        return false;
    }
    size_t have = 0;
    const void *in = mesh_end_inbound(e, (unsigned)((c - 1) % 2), &have);
    if (in == NULL || have < bytes) {
        return false;
    }
    memcpy(row, in, bytes);
    return true;
}

static int finish(mesh_worker *w, int code, const char *why)
{
    if (why != NULL) {
        fprintf(stderr, "stencil_node: %s\n", why);
        mesh_worker_fail(w, (uint32_t)code);
    }
    mesh_worker_detach(w);
    return code;
}

int main(void)
{
    mesh_worker *w = NULL;
    char *err = NULL;
    if (!mesh_worker_attach(&w, &err)) {
        fprintf(stderr, "stencil_node: %s\n", err != NULL ? err : "?");
        free(err);
        return 2;
    }
    mesh_worker_online(w);
    mesh_end *res = mesh_worker_input(w, STENCIL_RESULT);
    mesh_end *north = mesh_worker_input(w, STENCIL_NORTH);
    mesh_end *south = mesh_worker_input(w, STENCIL_SOUTH);
    if (res == NULL) {
        return finish(w, 3, "no result rail is bound");
    }
    /* Launch L's parameters come as the result rail's count L + 1, and
     * each launch sent one result: `sent` counts the launches before. */
    uint64_t launches = mesh_end_sent(res) + 1;
    stencil_params p;
    size_t have = 0;
    if (!mesh_end_wait_arrived(res, launches)) {
        return finish(w, 4, "no parameters came");
    }
    const void *in =
        mesh_end_inbound(res, (unsigned)((launches - 1) % 2), &have);
    if (in == NULL || have < sizeof(p)) {
        return finish(w, 5, "the parameters do not fit");
    }
    memcpy(&p, in, sizeof(p));
    if (p.magic != STENCIL_MAGIC || p.launch + 1 != launches || p.cols < 3 ||
        p.nrows == 0) {
        return finish(w, 6, "bad parameters");
    }
    size_t cols = p.cols, n = p.nrows, row = cols * sizeof(double);
    double *a = malloc((n + 2) * row), *b = malloc((n + 2) * row);
    if (a == NULL || b == NULL) {
        return finish(w, 7, "no memory for the block");
    }
    stencil_fill(a, p.row0, p.nrows, p.rows, p.cols);
    memcpy(b, a, (n + 2) * row); /* ghost and edge values in both */
    for (uint32_t s = 0; s < p.steps; s++) {
        uint64_t c = p.base + s + 1;
        bool ok =
            (north == NULL || send_row(north, a + cols, row, c)) &&
            (south == NULL || send_row(south, a + n * cols, row, c)) &&
            (north == NULL || take_row(north, a, row, c)) &&
            (south == NULL || take_row(south, a + (n + 1) * cols, row, c));
        if (!ok) {
            free(a);
            free(b);
            return finish(w, 8, "a halo rail failed (or the slot halted)");
        }
        stencil_step(a, b, p.nrows, p.cols);
        double *t = a;
        a = b;
        b = t;
        mesh_worker_point(w, 0, s + 1);
    }
    /* The block's rows to the controller: count launches, copy of it. */
    size_t out_bytes = 0;
    void *out =
        mesh_end_outbound(res, (unsigned)((launches - 1) % 2), &out_bytes);
    if (out == NULL || out_bytes < n * row) {
        free(a);
        free(b);
        return finish(w, 9, "the result does not fit its rail");
    }
    memcpy(out, a + cols, n * row);
    mesh_end_ready(res, launches);
    bool sent = mesh_end_wait_sent(res, launches);
    free(a);
    free(b);
    return sent ? finish(w, 0, NULL) : finish(w, 10, "the result never went");
}
