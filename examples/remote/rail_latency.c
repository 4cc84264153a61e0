/* SPDX-License-Identifier: BSD-3-Clause */
/* A rail's one-way latency (8 bytes) driven by programs on two agents,
 * against the same rail driven by the agents' own host code.
 *
 *   mpirun -np 3 rail_latency [--rounds 5] [--programs DIR]
 *
 * Host-driven: ranks 1 and 2 make a rail with rig_job_rail and ping-pong
 * 8 bytes over it with rig_end_ready / rig_end_wait_arrived, as many
 * round trips as the program below, rank 1 timing them.  Program-driven:
 * rank 0, the controller, makes the same rail between agents 1 and 2
 * (host->rail), loads examples/remote/latency_node.c on both with input 0
 * bound to their ends, launches it, and reads the pinger's time.  Rounds
 * alternate: host-driven before the remote layer opens and after it
 * closes, program-driven in between; the medians are printed as one-way
 * latency (round trip / 2) and their ratio.  A benchmark: numbers on a
 * loaded machine are noisy; run it on a quiet one. */
#include <rig/remote.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef STENCIL_PROGRAMS
#define STENCIL_PROGRAMS "examples/remote/programs"
#endif
/* The round trips of a round: latency.json's argument; before them,
 * WARMUP untimed ones (latency_node.c says why). */
#define TRIPS 20000u
#define WARMUP 256u

static int me, size;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, char *err)
{
    fprintf(stderr, "rail_latency: rank %d: %s: %s\n", me, what,
            err != NULL ? err : "?");
    free(err);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Waits for r in naps.  Rank 0 waits so between host-driven rounds, as
 * the controller waits for the program-driven rounds (rig_remote_wait
 * naps between its queries).  MPI_Barrier would keep it runnable --
 * Open MPI polls, and yields when oversubscribed -- making three busy
 * processes against the program-driven rounds' two (the nodes), so the
 * two halves would not share the cores alike. */
static void napping_wait(MPI_Request *r)
{
    for (int flag = 0;;) {
        MPI_Test(r, &flag, MPI_STATUS_IGNORE);
        if (flag) {
            return;
        }
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

static void napping_barrier(void)
{
    MPI_Request r;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    napping_wait(&r);
}

/* Ranks 1 and 2: rounds of TRIPS round trips over rail r, as the
 * program does them; rank 1's one-way latencies (ns) into out. */
static void host_rounds(rig_rail *r, int rounds, double *out)
{
    rig_end *e = rig_rail_local(r);
    bool ping = me == 1;
    for (int k = 0; k < rounds; k++) {
        napping_barrier();
        uint64_t base = rig_end_sent(e);
        uint64_t t0 = now_ns();
        for (uint64_t i = 0; i < WARMUP + TRIPS; i++) {
            uint64_t c = base + i + 1;
            if (i == WARMUP) {
                t0 = now_ns();
            }
            uint64_t v = c * 2654435761u;
            if ((c > 2 && !rig_end_wait_sent(e, c - 2)) ||
                (!ping && !rig_end_wait_arrived(e, c))) {
                die("host-driven round", strdup("failed: the rail failed"));
            }
            uint64_t *out_c =
                (uint64_t *)rig_area_copy(rig_end_outbound(e), (c - 1) % 2)
                    .base;
            const uint64_t *in =
                (const uint64_t *)rig_area_copy(rig_end_inbound(e), (c - 1) % 2)
                    .base;
            if (!ping) {
                v = *in;
            }
            *out_c = v;
            rig_end_ready(e, c);
            if (ping && (!rig_end_wait_arrived(e, c) || *in != v)) {
                die("host-driven round", strdup("a wrong answer"));
            }
        }
        if (ping) {
            out[k] = (double)(now_ns() - t0) / (2.0 * TRIPS);
        }
    }
}

/* Every rank: the host-driven rounds between ranks 1 and 2 (rank 0 only
 * takes rank 1's figures). */
static void host_phase(rig_job *job, int rounds, double *out)
{
    rig_transfer t = {0, 0, 8};
    rig_rail *r = NULL;
    char *err = NULL;
    if (me == 1 || me == 2) {
        if (!rig_job_rail(job, 3 - me, &t, 1, &t, 1, &r, &err)) {
            die("rig_job_rail", err);
        }
        host_rounds(r, rounds, out);
        rig_rail_release(r);
    } else {
        for (int k = 0; k < rounds; k++) {
            napping_barrier();
        }
    }
    if (me == 1) {
        MPI_Send(out, rounds, MPI_DOUBLE, 0, 601, MPI_COMM_WORLD);
    } else if (me == 0) {
        MPI_Request r; /* the last round runs meanwhile */
        MPI_Irecv(out, rounds, MPI_DOUBLE, 1, 601, MPI_COMM_WORLD, &r);
        napping_wait(&r);
    }
}

/* The controller: rounds of the programs; one-way latencies into out. */
static void program_phase(rig_remote *rm, const char *programs, int rounds,
                          double *out)
{
    char *err = NULL;
    rig_transfer t = {0, 0, 8};
    rig_rail *r = NULL;
    if (!rig_host_rail(rig_remote_host(rm, 1), rig_remote_host(rm, 2), &t, 1,
                       &t, 1, &r, &err)) {
        die("host->rail", err);
    }
    rig_remote_end ends[2] = {{1, 0, r}, {2, 0, r}};
    int64_t p = 0;
    int two[2] = {1, 2};
    if (!rig_remote_load_catalog_ends(rm, programs, "latency", two, 2, ends, 2,
                                      &p, &err)) {
        die("loading latency", err);
    }
    for (int k = 0; k < rounds; k++) {
        if (!rig_remote_launch(rm, p, 1, &err) ||
            !rig_remote_wait(rm, p, 120000, &err)) {
            die("a program-driven round", err);
        }
        rig_remote_status *s = NULL;
        size_t n = 0;
        if (!rig_remote_query(rm, p, &s, &n, &err)) {
            die("querying latency", err);
        }
        for (size_t i = 0; i < n; i++) {
            if (s[i].state != RIG_REMOTE_DONE || s[i].points[1] != TRIPS ||
                s[i].points[2] != 0) {
                die("a program-driven round",
                    strdup("failed: a program did not finish its trips"));
            }
            if (s[i].rank == 1) {
                out[k] = (double)s[i].points[0] / (2.0 * TRIPS);
            }
        }
        rig_remote_status_free(s, n);
        if (!rig_remote_halt(rm, p, &err)) {
            die("halting latency", err);
        }
    }
    if (!rig_remote_unload(rm, p, &err)) {
        die("unloading latency", err);
    }
    rig_rail_release(r);
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = 5;
    const char *programs = STENCIL_PROGRAMS;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--rounds") == 0) {
            rounds = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--programs") == 0) {
            programs = argv[i + 1];
        }
    }
    if (size != 3 || rounds < 1 || rounds > 1000) {
        if (me == 0) {
            fprintf(stderr, "usage: mpirun -np 3 rail_latency [--rounds R] "
                            "[--programs DIR]\n");
        }
        MPI_Finalize();
        return 2;
    }
    char *err = NULL;
    rig_job *job = NULL;
    if (!rig_job_open(MPI_COMM_WORLD, NULL, &job, &err)) {
        die("rig_job_open", err);
    }
    double *host = calloc(2 * (size_t)rounds, sizeof(double));
    double *prog = calloc((size_t)rounds, sizeof(double));
    if (host == NULL || prog == NULL) {
        die("tables", strdup("nomem"));
    }
    host_phase(job, rounds, host);
    rig_remote *rm = NULL;
    if (!rig_remote_open(job, MPI_COMM_WORLD, NULL, &rm, &err)) {
        die("rig_remote_open", err);
    }
    if (me == 0) {
        program_phase(rm, programs, rounds, prog);
    } else if (!rig_remote_serve(rm, &err)) {
        die("serving", err);
    }
    rig_remote_close(rm);
    host_phase(job, rounds, host + rounds);
    if (me == 0) {
        double h = median(host, 2 * (size_t)rounds);
        double p = median(prog, (size_t)rounds);
        printf("rail latency, 8 B one way, agents 1 and 2 (medians of %d and "
               "%d rounds of %u round trips):\n"
               "  host-driven (rig_end_ready, the agent's thread): %.3f us\n"
               "  program-driven (mesh_end_ready, a native node):  %.3f us\n"
               "  program / host: %.2fx\n",
               2 * rounds, rounds, TRIPS, h / 1e3, p / 1e3, p / h);
    }
    free(host);
    free(prog);
    rig_job_close(job);
    MPI_Finalize();
    return 0;
}
