/* SPDX-License-Identifier: BSD-3-Clause */
/* rig_osu_ready: the cost of one rig_end_ready that completes inline.
 *
 * Rank 0 readies an 8-byte transfer to rank 1 again and again, through
 * rig_end_ready and through the end's C ready function, and prints the
 * median and p99 nanoseconds of one call (timed in batches of BATCH calls,
 * so the clock's own cost is spread thin).  Rank 1 checks that the last
 * count and bytes arrived.  -i sets the number of batches; -i 0 skips the
 * timing (a baseline for counting syscalls with strace -c). */
#include "patterns.h"
#include "rig_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 64

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Times batches of ready calls; returns the median and p99 ns per call. */
static void time_ready(rig_end *e, rig_ready_fn fn, uint64_t *c, int batches,
                       double *p50, double *p99)
{
    double *ns = malloc(sizeof(double) * (size_t)(batches > 0 ? batches : 1));
    void *counts = rig_end_counts(e).base;
    if (ns == NULL) {
        bench_die("nomem: %d batches", batches);
    }
    for (int b = 0; b < batches; b++) {
        double t0 = bench_now();
        for (int i = 0; i < BATCH; i++) {
            /* The bytes stay the same: each call carries them again. */
            ++*c;
            if (fn != NULL) {
                fn(counts, *c);
            } else {
                rig_end_ready(e, *c);
            }
        }
        ns[b] = (bench_now() - t0) * 1e9 / BATCH;
    }
    qsort(ns, (size_t)(batches > 0 ? batches : 1), sizeof(double), cmp_double);
    *p50 = batches > 0 ? ns[batches / 2] : 0;
    *p99 = batches > 0 ? ns[(int)((batches - 1) * 0.99)] : 0;
    free(ns);
}

int main(int argc, char **argv)
{
    bench_opts o;
    int batches = 20000;
    /* -i 0 is allowed here: strip it before OSU's options see it. */
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "-i") == 0) {
            batches = atoi(argv[i + 1]);
            memmove(&argv[i], &argv[i + 2],
                    sizeof(char *) * (size_t)(argc - i - 1));
            argc -= 2;
            break;
        }
    }
    bench_init(&argc, &argv, &o, 8, 8, false);
    if (o.methods[0] != &bench_rig) {
        bench_die("unsupported: rig's rails could not run here");
    }
    rig_rail *rail = bench_rig_rail(8, 8, 1);
    rig_end *e = rig_rail_local(rail);
    rig_area out = rig_end_outbound(e), in = rig_end_inbound(e);
    uint64_t c = 0;
    double p50[2] = {0}, p99[2] = {0};
    if (bench_rank == 0) {
        /* Both copies carry a stamp the receiver can check. */
        bench_stamp(out.base, 8, 0x5eed);
        bench_stamp(out.base + out.len / 2, 8, 0x5eed);
        /* Warm up, then the two ways of calling ready. */
        time_ready(e, NULL, &c, batches / 10, &p50[0], &p99[0]);
        time_ready(e, NULL, &c, batches, &p50[0], &p99[0]);
        time_ready(e, rig_end_ready_fn(e), &c, batches, &p50[1], &p99[1]);
        if (c > 0 && !rig_end_wait_sent(e, c)) {
            bench_die("failed: rail failed while readying");
        }
    }
    MPI_Bcast(&c, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (bench_rank == 1 && c > 0) {
        if (!rig_end_wait_arrived(e, c)) {
            bench_die("failed: rail failed while waiting for %llu",
                      (unsigned long long)c);
        }
        bench_check_stamp("rig", in.base, 8, 0x5eed, 0x5eed);
        bench_check_stamp("rig", in.base + in.len / 2, 8, 0x5eed, 0x5eed);
    }
    if (bench_rank == 0) {
        printf("\n# OSU MPI rig ready() Cost Test v7.4 (rig: one 8-byte "
               "transfer that completes inline)\n");
        printf("%-24s%20s%20s\n", "# Call", "Median (ns)", "p99 (ns)");
        printf("%-24s%20.1f%20.1f\n", "rig_end_ready", p50[0], p99[0]);
        printf("%-24s%20.1f%20.1f\n", "ready_fn", p50[1], p99[1]);
        printf("# %llu calls carried, content checked at the receiver\n",
               (unsigned long long)c);
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    rig_rail_release(rail);
    bench_fini(&o);
    return 0;
}
