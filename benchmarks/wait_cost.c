/* SPDX-License-Identifier: BSD-3-Clause */
/* rig_wait_cost: what a wait costs in each wait mode (rig/wait.h): how late
 * it notices an arrival from the peer, and the CPU it burns meanwhile.
 *
 * Two ranks on one node and one rail.  For each mode (spin, yield, block,
 * auto; only RIG_WAIT's when it is set, since it wins) and each gap (how
 * long the sender makes the receiver wait: 0.1, 1, 10 and 100 ms), rank 0
 * sleeps the gap, writes the time into the run and signals it; rank 1
 * waits for it with rig_run_inbound and reads the time: the difference is
 * how late it noticed (the clock is the node's, CLOCK_MONOTONIC, so the
 * ranks must share a node).  Rank 1 also reads its thread's CPU time
 * around each wait: the share of the gap it burnt.  The arrival is a
 * peer's store or put, which wakes no sleeping wait, so in block mode the
 * delay is bounded by the sleep period (RIG_WAIT_SLEEP_US).
 *
 * Output: one row per mode and gap, median and worst delay (us) and the
 * median CPU share (%).  Usage: mpirun -np 2 rig_wait_cost [-i waits]. */
#include <rig/job.h>
#include <rig/wait.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int g_rank = -1;

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static _Noreturn void die(const char *what)
{
    fprintf(stderr, "rig_wait_cost: rank %d: %s\n", g_rank, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort();
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    int size = 0, iters = 20, c;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((c = getopt(argc, argv, "i:")) != -1) {
        if (c == 'i' && atoi(optarg) > 0) {
            iters = atoi(optarg) > 1000 ? 1000 : atoi(optarg);
        } else {
            if (g_rank == 0) {
                fprintf(stderr, "Usage: rig_wait_cost [-i waits]\n");
            }
            MPI_Finalize();
            return 2;
        }
    }
    if (size != 2) {
        if (g_rank == 0) {
            fprintf(stderr, "rig_wait_cost: invalid: needs 2 ranks, not %d\n",
                    size);
        }
        MPI_Finalize();
        return 2;
    }
    rig_job *job = NULL;
    rig_rail *rail = NULL;
    char *err = NULL;
    rig_transfer t = {0, 0, 8};
    if (!rig_job_open(MPI_COMM_WORLD, NULL, &job, &err) ||
        !rig_job_rail(job, 1 - g_rank, &t, 1, &t, 1, &rail, &err)) {
        die(err);
    }
    rig_runs runs = {.end = rig_rail_local(rail), .nsend = 1, .nreceive = 1};
    static const rig_wait_mode modes[] = {RIG_WAIT_SPIN, RIG_WAIT_YIELD,
                                          RIG_WAIT_BLOCK, RIG_WAIT_AUTO};
    static const double gaps[] = {1e-4, 1e-3, 1e-2, 1e-1};
    const char *env = getenv("RIG_WAIT");
    bool fixed = env != NULL && env[0] != '\0';
    if (g_rank == 0) {
        printf("\n# rig wait cost: how late a wait notices a peer's arrival, "
               "and the CPU it burns meanwhile (median of %d waits)\n",
               iters);
        printf("%-8s%10s%14s%14s%12s   (mode as set; %s)\n", "# Mode",
               "Gap(ms)", "Late(us)", "Worst(us)", "CPU(%)",
               fixed ? "RIG_WAIT set: its mode only" : "rig_wait_mode_set");
    }
    uint64_t r = 0;
    double *late = malloc(sizeof(double) * (size_t)iters);
    double *cpu = malloc(sizeof(double) * (size_t)iters);
    if (late == NULL || cpu == NULL) {
        die("nomem");
    }
    for (size_t m = 0; m < 4; m++) {
        if (fixed && m > 0) {
            break;
        }
        if (!fixed && !rig_wait_mode_set(modes[m], &err)) {
            die(err);
        }
        const char *why = "";
        rig_wait_mode now = rig_wait_mode_now(&why);
        for (size_t g = 0; g < 4; g++) {
            MPI_Barrier(MPI_COMM_WORLD);
            for (int i = 0; i < iters; i++, r++) {
                rig_area a;
                if (g_rank == 0) {
                    if (rig_run_outbound(&runs, r, &a) != RIG_REACHED) {
                        die("failed: outbound");
                    }
                    struct timespec nap = {0, (long)(gaps[g] * 1e9)};
                    nanosleep(&nap, NULL);
                    double sent = clock_s(CLOCK_MONOTONIC);
                    memcpy(a.base, &sent, 8);
                    if (rig_run_ready(&runs, r) != RIG_REACHED) {
                        die("failed: ready");
                    }
                } else {
                    double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
                    double w0 = clock_s(CLOCK_MONOTONIC);
                    if (rig_run_inbound(&runs, r, &a) != RIG_REACHED) {
                        die("failed: inbound");
                    }
                    double w1 = clock_s(CLOCK_MONOTONIC);
                    double c1 = clock_s(CLOCK_THREAD_CPUTIME_ID);
                    double sent = 0;
                    memcpy(&sent, a.base, 8);
                    late[i] = (w1 - sent) * 1e6;
                    cpu[i] = w1 > w0 ? 100.0 * (c1 - c0) / (w1 - w0) : 0;
                }
                /* Rank 1 is in its wait before rank 0 sleeps. */
                MPI_Barrier(MPI_COMM_WORLD);
            }
            if (g_rank == 1) {
                qsort(late, (size_t)iters, sizeof(double), cmp_double);
                qsort(cpu, (size_t)iters, sizeof(double), cmp_double);
                double row[3] = {late[iters / 2], late[iters - 1],
                                 cpu[iters / 2]};
                MPI_Send(row, 3, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD);
            } else {
                double row[3];
                MPI_Recv(row, 3, MPI_DOUBLE, 1, 7, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                printf("%-8s%10.1f%14.1f%14.1f%12.1f\n",
                       rig_wait_mode_name(now), gaps[g] * 1e3, row[0], row[1],
                       row[2]);
                fflush(stdout);
            }
        }
        (void)why;
    }
    free(late);
    free(cpu);
    MPI_Barrier(MPI_COMM_WORLD);
    rig_rail_release(rail);
    rig_job_close(job);
    MPI_Finalize();
    return 0;
}
