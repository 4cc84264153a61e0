/* SPDX-License-Identifier: BSD-3-Clause */
/* 2-D heat diffusion over the controller's rails, checked against a serial
 * computation and timed against the same stencil in plain MPI.
 *
 *   mpirun -np 4 stencil [--steps 1000] [--rows 386] [--cols 512]
 *                        [--executor native|wasm] [--repeat 3]
 *                        [--programs DIR] [--compare DIR] [--no-mpi]
 *                        [--no-rails] [--verbose]
 *
 * Rank 0 is the controller, every other rank an agent (rig/remote.h).
 * The controller makes a halo rail between each pair of neighbouring
 * agents and a result rail from each agent to its own machine, loads one
 * stencil program (stencil_node.c, or the wasm module of stencil_wasm.c)
 * onto every agent with its inputs bound to those rails, and launches it:
 * the programs exchange halos for --steps steps with no controller
 * involvement; the controller then reads every block from the result
 * rails and checks the grid bit for bit against its own serial
 * computation.  Every rank also runs the same stencil as a plain MPI
 * code (MPI_Isend/MPI_Irecv halos between ranks 1..N-1, the same blocks,
 * rank 0 handing out the start and gathering the rows), checked the same
 * way.  Each is timed by rank 0, start handed out to last row in.  They
 * run in --repeat rounds of one rails run and one MPI run, the order
 * alternating (a rails round opens the remote layer, loads, launches once
 * and closes the layer, so that no agent serves during the MPI run):
 * the two runs of a round share that moment's load of the machine.  The
 * medians of each and of the rounds' ratios are printed (--verbose: every
 * round too):
 *
 *   stencil ok: native, 3 blocks of a 386 x 512 grid, 1000 steps:
 *   rails 123.4 us/step, MPI 130.2 us/step (0.95x MPI's; medians of 3);
 *   paired by round: 0.94x (0.90-0.99x)
 *
 * Exit status 0 when every grid matched, 1 otherwise. */
#include "stencil_kernel.h"

#include <rig/remote.h>
#include <rig/wait.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef STENCIL_PROGRAMS
#define STENCIL_PROGRAMS "examples/remote/programs"
#endif

#define TAG_PARAMS 501
#define TAG_ROWS 502
#define TAG_NORTH 503
#define TAG_SOUTH 504

typedef struct {
    uint32_t steps, rows, cols, repeat;
    const char *executor, *programs, *compare;
    bool rails, mpi, verbose;
} options;

static int me, size;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, char *err)
{
    fprintf(stderr, "stencil: rank %d: %s: %s\n", me, what,
            err != NULL ? err : "?");
    free(err);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static bool parse(int argc, char **argv, options *o)
{
    *o = (options){.steps = 1000,
                   .rows = 386,
                   .cols = 512,
                   .repeat = 3,
                   .executor = "native",
                   .programs = STENCIL_PROGRAMS,
                   .rails = true,
                   .mpi = true};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--no-mpi") == 0) {
            o->mpi = false;
            continue;
        }
        if (strcmp(a, "--no-rails") == 0) {
            o->rails = false;
            continue;
        }
        if (strcmp(a, "--verbose") == 0) {
            o->verbose = true;
            continue;
        }
        if (v == NULL) {
            return false;
        }
        i++;
        if (strcmp(a, "--steps") == 0) {
            o->steps = (uint32_t)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--rows") == 0) {
            o->rows = (uint32_t)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--cols") == 0) {
            o->cols = (uint32_t)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--repeat") == 0) {
            o->repeat = (uint32_t)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--executor") == 0) {
            o->executor = v;
        } else if (strcmp(a, "--programs") == 0) {
            o->programs = v;
        } else if (strcmp(a, "--compare") == 0) {
            o->compare = v;
        } else {
            return false;
        }
    }
    return (o->rails || o->mpi) && (o->compare == NULL || o->rails) &&
           o->steps > 0 && o->cols >= 3 && o->repeat > 0 && o->repeat < 1000 &&
           (strcmp(o->executor, "native") == 0 ||
            strcmp(o->executor, "wasm") == 0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, uint32_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The serial computation: the interior after steps steps. */
static double *serial(const options *o)
{
    size_t cells = (size_t)o->rows * o->cols;
    double *a = malloc(cells * sizeof(double));
    double *b = malloc(cells * sizeof(double));
    if (a == NULL || b == NULL) {
        die("serial grid", strdup("nomem"));
    }
    stencil_fill(a, 1, o->rows - 2, o->rows, o->cols);
    memcpy(b, a, cells * sizeof(double));
    for (uint32_t s = 0; s < o->steps; s++) {
        stencil_step(a, b, o->rows - 2, o->cols);
        double *t = a;
        a = b;
        b = t;
    }
    free(b);
    return a;
}

/* Rows [row0, row0 + n) of got against the serial grid: the first
 * differing point, or -1. */
static long differs(const double *ref, const options *o, uint32_t row0,
                    uint32_t n, const double *got)
{
    const double *want = ref + (size_t)row0 * o->cols;
    if (memcmp(want, got, (size_t)n * o->cols * sizeof(double)) == 0) {
        return -1;
    }
    for (size_t i = 0; i < (size_t)n * o->cols; i++) {
        if (memcmp(&want[i], &got[i], sizeof(double)) != 0) {
            return (long)i;
        }
    }
    return -1;
}

/* ---- over rails ------------------------------------------------------------
 */

/* Rank 0 has nothing to do while the blocks run, and on a node with
 * fewer cores than processes its waiting must not take a core from them:
 * in both runs it sleeps about 1 ms between looks at the rows (noticing
 * the end up to 1 ms late: 1 us a step over 1,000 steps).  The rails run
 * waits with rig_wait_all in the block mode (rig/wait.h: sleeps doubling
 * from 20 us to 1 ms; a look reads the counts and drives nothing), the
 * MPI run tests with MPI_Testall every 1 ms (MPI_Waitall polls without
 * pause, which costs the MPI run's blocks a core's share).
 * Both used to look every 50 us after 4,096 looks, each rails look a
 * rig_end_wait_arrived_for of no time, which drives the transport: with
 * 2 blocks on 2 cores the rails run then took 1.1-1.7x the MPI run's
 * time per step, the MPI run's looks costing its blocks much less. */
#define NAP_NS 1000000L

static void nap(void)
{
    struct timespec ts = {0, NAP_NS};
    nanosleep(&ts, NULL);
}

/* Waits until every agent's rows arrived on its result rail; false when
 * a rail failed. */
static bool wait_rows(rig_rail *const *results, uint32_t agents)
{
    rig_goal *g = calloc(agents, sizeof(*g));
    if (g == NULL) {
        die("waiting for the blocks", strdup("nomem"));
    }
    for (uint32_t k = 1; k <= agents; k++) {
        g[k - 1] = rig_goal_arrived(rig_rail_local(results[k]), 1);
    }
    rig_wait_mode_set(RIG_WAIT_BLOCK, NULL);
    rig_reach r = rig_wait_all(g, agents, NULL);
    rig_wait_mode_set(RIG_WAIT_AUTO, NULL);
    free(g);
    return r == RIG_REACHED;
}

/* The controller's part of one rails round: the rails made, the program
 * loaded, launched once and timed (us/step into *us), the grid checked,
 * everything released; false when the grid differed. */
static bool controller(rig_remote *rm, const options *o, const double *ref,
                       double *us)
{
    char *err = NULL;
    uint32_t agents = (uint32_t)size - 1;
    uint32_t exec = strcmp(o->executor, "wasm") == 0 ? MESH_BACKEND_WASM
                                                     : MESH_BACKEND_NATIVE;
    for (uint32_t k = 1; k <= agents; k++) {
        const rig_remote_machine *m = rig_remote_machine_of(rm, (int)k);
        if (!m->executors[exec].runs) {
            fprintf(stderr, "stencil: machine %s does not run %s: %s\n",
                    m->name, o->executor, m->executors[exec].why);
            return false;
        }
    }
    size_t row_bytes = (size_t)o->cols * sizeof(double);
    rig_transfer halo = {0, 0, (int64_t)row_bytes};
    rig_transfer params = {0, 0, sizeof(stencil_params)};
    rig_rail **halos = calloc(agents, sizeof(*halos));
    rig_rail **results = calloc(agents + 1, sizeof(*results));
    rig_remote_end *ends = calloc(3 * agents, sizeof(*ends));
    uint32_t *row0 = calloc(agents + 1, sizeof(*row0));
    uint32_t *n = calloc(agents + 1, sizeof(*n));
    if (halos == NULL || results == NULL || ends == NULL || row0 == NULL ||
        n == NULL) {
        die("the controller's tables", strdup("nomem"));
    }
    size_t nends = 0;
    for (uint32_t k = 1; k <= agents; k++) {
        stencil_block(o->rows, agents, k - 1, &row0[k], &n[k]);
        if (k < agents && !rig_host_rail(rig_remote_host(rm, (int)k),
                                         rig_remote_host(rm, (int)k + 1), &halo,
                                         1, &halo, 1, &halos[k], &err)) {
            die("a halo rail", err);
        }
        /* The block's rows go to the controller, the params come back. */
        rig_transfer rows = {0, 0, (int64_t)(n[k] * row_bytes)};
        if (!rig_host_rail(rig_remote_host(rm, (int)k), NULL, &rows, 1, &params,
                           1, &results[k], &err)) {
            die("a result rail", err);
        }
        if (k > 1) {
            ends[nends++] =
                (rig_remote_end){(int)k, STENCIL_NORTH, halos[k - 1]};
        }
        if (k < agents) {
            ends[nends++] = (rig_remote_end){(int)k, STENCIL_SOUTH, halos[k]};
        }
        ends[nends++] = (rig_remote_end){(int)k, STENCIL_RESULT, results[k]};
    }
    int64_t prog = 0;
    const char *name = exec == MESH_BACKEND_WASM ? "stencil_wasm" : "stencil";
    if (!rig_remote_load_catalog_ends(rm, o->programs, name, NULL, 0, ends,
                                      nends, &prog, &err)) {
        die("loading the stencil", err);
    }
    bool same = true;
    if (!rig_remote_launch(rm, prog, 1, &err)) {
        die("launching the stencil", err);
    }
    /* Every program is online and waits for its parameters. */
    uint64_t t0 = now_ns();
    for (uint32_t k = 1; k <= agents; k++) {
        rig_end *e = rig_rail_local(results[k]);
        stencil_params p = {.magic = STENCIL_MAGIC,
                            .rows = o->rows,
                            .cols = o->cols,
                            .steps = o->steps,
                            .row0 = row0[k],
                            .nrows = n[k],
                            .launch = 0,
                            .base = 0};
        memcpy(rig_area_copy(rig_end_outbound(e), 0).base, &p, sizeof(p));
        rig_end_ready(e, 1);
    }
    if (!wait_rows(results, agents)) {
        die("waiting for the blocks", strdup("failed: a rail failed"));
    }
    *us = (double)(now_ns() - t0) / 1e3 / o->steps;
    for (uint32_t k = 1; k <= agents; k++) {
        rig_area in =
            rig_area_copy(rig_end_inbound(rig_rail_local(results[k])), 0);
        long at = differs(ref, o, row0[k], n[k], (const double *)in.base);
        if (at >= 0) {
            fprintf(stderr,
                    "stencil: rails: block %u differs from the serial grid "
                    "at row %lu, column %lu\n",
                    k, row0[k] + (unsigned long)at / o->cols,
                    (unsigned long)at % o->cols);
            same = false;
        }
    }
    if (!rig_remote_wait(rm, prog, 60000, &err) ||
        !rig_remote_halt(rm, prog, &err)) {
        die("the stencil's end", err);
    }
    if (!rig_remote_unload(rm, prog, &err)) {
        die("unloading the stencil", err);
    }
    for (uint32_t k = 1; k <= agents; k++) {
        if (k < agents) {
            rig_rail_release(halos[k]);
        }
        rig_rail_release(results[k]);
    }
    free(halos);
    free(results);
    free(ends);
    free(row0);
    free(n);
    return same;
}

/* ---- in plain MPI ---------------------------------------------------------
 */

/* Rank k >= 1: one run of its block, halos with ranks k - 1 and k + 1 of
 * the agents' communicator (ranks 1.. of the world as 0..). */
static void mpi_block(MPI_Comm work, const options *o)
{
    stencil_params p;
    MPI_Recv(&p, (int)sizeof(p), MPI_BYTE, 0, TAG_PARAMS, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    int k, blocks;
    MPI_Comm_rank(work, &k);
    MPI_Comm_size(work, &blocks);
    size_t cols = o->cols, n = p.nrows;
    double *a = malloc((n + 2) * cols * sizeof(double));
    double *b = malloc((n + 2) * cols * sizeof(double));
    if (a == NULL || b == NULL) {
        die("an MPI block", strdup("nomem"));
    }
    stencil_fill(a, p.row0, p.nrows, o->rows, o->cols);
    memcpy(b, a, (n + 2) * cols * sizeof(double));
    int up = k > 0 ? k - 1 : MPI_PROC_NULL;
    int down = k + 1 < blocks ? k + 1 : MPI_PROC_NULL;
    for (uint32_t s = 0; s < o->steps; s++) {
        MPI_Request r[4];
        MPI_Irecv(a, (int)cols, MPI_DOUBLE, up, TAG_SOUTH, work, &r[0]);
        MPI_Irecv(a + (n + 1) * cols, (int)cols, MPI_DOUBLE, down, TAG_NORTH,
                  work, &r[1]);
        MPI_Isend(a + cols, (int)cols, MPI_DOUBLE, up, TAG_NORTH, work, &r[2]);
        MPI_Isend(a + n * cols, (int)cols, MPI_DOUBLE, down, TAG_SOUTH, work,
                  &r[3]);
        MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
        stencil_step(a, b, p.nrows, o->cols);
        double *t = a;
        a = b;
        b = t;
    }
    MPI_Send(a + cols, (int)(n * cols), MPI_DOUBLE, 0, TAG_ROWS,
             MPI_COMM_WORLD);
    free(a);
    free(b);
}

/* Waits for reqs: a look every NAP_NS (see nap). */
static void wait_all(int n, MPI_Request *reqs)
{
    for (;;) {
        int flag = 0;
        MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE);
        if (flag) {
            return;
        }
        nap();
    }
}

/* Rank 0 of one MPI round: us/step into *us; false when the grid
 * differed. */
static bool mpi_root(const options *o, const double *ref, double *us)
{
    uint32_t blocks = (uint32_t)size - 1;
    stencil_params *p = calloc(blocks, sizeof(*p));
    double **rows = calloc(blocks, sizeof(*rows));
    MPI_Request *reqs = calloc(2 * (size_t)blocks, sizeof(*reqs));
    if (p == NULL || rows == NULL || reqs == NULL) {
        die("the MPI runs", strdup("nomem"));
    }
    bool same = true;
    for (uint32_t k = 0; k < blocks; k++) {
        stencil_block(o->rows, blocks, k, &p[k].row0, &p[k].nrows);
        p[k].magic = STENCIL_MAGIC;
        rows[k] = malloc((size_t)p[k].nrows * o->cols * sizeof(double));
        if (rows[k] == NULL) {
            die("the MPI runs", strdup("nomem"));
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t t0 = now_ns();
    for (uint32_t k = 0; k < blocks; k++) {
        MPI_Irecv(rows[k], (int)(p[k].nrows * o->cols), MPI_DOUBLE, (int)k + 1,
                  TAG_ROWS, MPI_COMM_WORLD, &reqs[k]);
        MPI_Isend(&p[k], (int)sizeof(p[k]), MPI_BYTE, (int)k + 1, TAG_PARAMS,
                  MPI_COMM_WORLD, &reqs[blocks + k]);
    }
    wait_all(2 * (int)blocks, reqs);
    *us = (double)(now_ns() - t0) / 1e3 / o->steps;
    for (uint32_t k = 0; k < blocks; k++) {
        long at = differs(ref, o, p[k].row0, p[k].nrows, rows[k]);
        if (at >= 0) {
            fprintf(stderr,
                    "stencil: MPI: block %u differs from the serial grid at "
                    "row %lu, column %lu\n",
                    k + 1, p[k].row0 + (unsigned long)at / o->cols,
                    (unsigned long)at % o->cols);
            same = false;
        }
        free(rows[k]);
    }
    free(rows);
    free(p);
    free(reqs);
    return same;
}

/* One rails round on every rank: the remote layer opened, the controller's
 * run (controller) while the agents serve, the layer closed -- so that
 * the MPI round after it runs with no agent serving. */
static bool rails_round(rig_job *job, const options *o, const double *ref,
                        double *us)
{
    char *err = NULL;
    rig_remote *rm = NULL;
    if (!rig_remote_open(job, MPI_COMM_WORLD, NULL, &rm, &err)) {
        die("rig_remote_open", err);
    }
    bool same = true;
    if (me == 0) {
        same = controller(rm, o, ref, us);
    } else if (!rig_remote_serve(rm, &err)) {
        die("serving the controller", err);
    }
    rig_remote_close(rm);
    return same;
}

/* One MPI round on every rank. */
static bool mpi_round(MPI_Comm work, const options *o, const double *ref,
                      double *us)
{
    if (me == 0) {
        return mpi_root(o, ref, us);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    mpi_block(work, o);
    return true;
}

/* The median of v's n values, v left in round order. */
static double median_of(const double *v, uint32_t n)
{
    double *c = malloc(n * sizeof(*c));
    if (c == NULL) {
        die("the report", strdup("nomem"));
    }
    memcpy(c, v, n * sizeof(*c));
    double m = median(c, n);
    free(c);
    return m;
}

/* The median over n rounds of a[i] / b[i], and the lowest and highest. */
static double paired(const double *a, const double *b, uint32_t n, double *lo,
                     double *hi)
{
    double *q = malloc(n * sizeof(*q));
    if (q == NULL) {
        die("the report", strdup("nomem"));
    }
    for (uint32_t i = 0; i < n; i++) {
        q[i] = a[i] / b[i];
    }
    double m = median(q, n); /* sorts q */
    *lo = q[0];
    *hi = q[n - 1];
    free(q);
    return m;
}

static void report(const options *o, const double *rails, const double *mpi)
{
    uint32_t n = o->repeat;
    printf("stencil ok: %s, %d blocks of a %u x %u grid, %u steps: ",
           o->executor, size - 1, o->rows, o->cols, o->steps);
    if (o->rails && o->mpi) {
        double rm = median_of(rails, n), mm = median_of(mpi, n), lo, hi;
        double qm = paired(rails, mpi, n, &lo, &hi);
        printf("rails %.2f us/step, MPI %.2f us/step (%.2fx MPI's; medians "
               "of %u); paired by round: %.2fx (%.2f-%.2fx)\n",
               rm, mm, rm / mm, n, qm, lo, hi);
    } else if (o->rails) {
        printf("rails %.2f us/step (median of %u)\n", median_of(rails, n), n);
    } else {
        printf("MPI %.2f us/step (median of %u)\n", median_of(mpi, n), n);
    }
}

/* --compare: the other programs' rails runs against the first's. */
static void report_compare(const options *o, const double *rails,
                           const double *cmp)
{
    uint32_t n = o->repeat;
    double lo, hi, qm = paired(cmp, rails, n, &lo, &hi);
    printf("compared: %s: rails %.2f us/step (median of %u); against %s "
           "paired by round: %.2fx (%.2f-%.2fx)\n",
           o->compare, median_of(cmp, n), n, o->programs, qm, lo, hi);
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    options o;
    if (!parse(argc, argv, &o)) {
        if (me == 0) {
            fprintf(stderr,
                    "usage: stencil [--steps N] [--rows R] [--cols C] "
                    "[--executor native|wasm] [--repeat K] [--programs DIR] "
                    "[--compare DIR] [--no-mpi] [--no-rails] [--verbose]\n");
        }
        MPI_Finalize();
        return 2;
    }
    if (size < 2 || o.rows < (uint32_t)size + 1) {
        if (me == 0) {
            fprintf(stderr,
                    "stencil: needs 2 ranks or more, and a grid of at least "
                    "one interior row per agent\n");
        }
        MPI_Finalize();
        return 2;
    }
    char *err = NULL;
    rig_job *job = NULL;
    if (!rig_job_open(MPI_COMM_WORLD, NULL, &job, &err)) {
        die("rig_job_open", err);
    }
    double *rails = calloc(o.repeat, sizeof(*rails));
    double *mpi = calloc(o.repeat, sizeof(*mpi));
    double *cmp = calloc(o.repeat, sizeof(*cmp));
    if (rails == NULL || mpi == NULL || cmp == NULL) {
        die("the rounds", strdup("nomem"));
    }
    double *ref = me == 0 ? serial(&o) : NULL;
    MPI_Comm work = MPI_COMM_NULL;
    if (o.mpi) {
        MPI_Comm_split(MPI_COMM_WORLD, me > 0 ? 1 : MPI_UNDEFINED, me, &work);
    }
    /* Rounds: a rails run and an MPI run each (and a rails run of the
     * --compare programs), the order rotating, so that the runs of a
     * round share the machine's load of that moment and none always goes
     * first. */
    bool same = true;
    options other = o;
    other.programs = o.compare;
    int runs = o.compare != NULL ? 3 : 2;
    for (uint32_t rep = 0; rep < o.repeat; rep++) {
        for (int k = 0; k < runs; k++) {
            int which = (k + (int)rep) % runs;
            if (which == 0 && o.rails) {
                same = rails_round(job, &o, ref, &rails[rep]) && same;
            } else if (which == 1 && o.mpi) {
                same = mpi_round(work, &o, ref, &mpi[rep]) && same;
            } else if (which == 2) {
                same = rails_round(job, &other, ref, &cmp[rep]) && same;
            }
        }
        if (me == 0 && o.verbose) {
            printf("round %u: rails %.2f us/step, MPI %.2f us/step (%.2fx)",
                   rep, rails[rep], mpi[rep],
                   o.mpi && o.rails ? rails[rep] / mpi[rep] : 0.0);
            if (o.compare != NULL) {
                printf(", compared %.2f us/step (%.2fx the rails')", cmp[rep],
                       cmp[rep] / rails[rep]);
            }
            printf("\n");
            fflush(stdout);
        }
    }
    if (work != MPI_COMM_NULL) {
        MPI_Comm_free(&work);
    }
    int ok = same ? 1 : 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (me == 0) {
        if (ok) {
            report(&o, rails, mpi);
            if (o.compare != NULL) {
                report_compare(&o, rails, cmp);
            }
        } else {
            printf("stencil FAILED: a grid differs from the serial one\n");
        }
    }
    free(rails);
    free(mpi);
    free(cmp);
    free(ref);
    rig_job_close(job);
    MPI_Finalize();
    return ok ? 0 : 1;
}
