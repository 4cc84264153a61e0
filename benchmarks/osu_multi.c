/* SPDX-License-Identifier: BSD-3-Clause */
/* rig_osu_multi: latency against transfers per run and against rails open.
 *
 * Table 1: a ping-pong of runs of n transfers of SIZE bytes (-m SIZE, 8 by
 * default), one signal per run, for n = 1 .. 256, beside rig carrying the
 * same bytes as one transfer of n * SIZE.  Table 2: the 8-byte ping-pong
 * on the newest of k rails open, and round-robin over all k, for k = 1 ..
 * 1,024 (-M sets the largest k). */
#include "patterns.h"
#include "rig_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUN 256

static void print_multi_header(const bench_opts *o)
{
    if (bench_rank != 0) {
        return;
    }
    printf("\n# OSU MPI Multi-Transfer Latency Test v7.4 (rig: runs of n "
           "transfers of %zu bytes,\n# one signal per run, against one "
           "transfer of the same total size)\n",
           o->min_size);
    printf("%-10s", "# Run");
    for (int i = 0; i < o->nmethods; i++) {
        if (o->all || i == 0) {
            printf("%20s", o->methods[i]->name);
        }
    }
    printf("%20s%10s   (Avg Latency(us))\n", "rig.single", "ratio");
}

/* A rail's 8-byte ping-pong: this rank's message c goes out as transfer
 * 0 of copy (c - 1) % 2; content checked. */
static void rail_ping(rig_end *e, uint64_t c)
{
    rig_area out = rig_end_outbound(e), in = rig_end_inbound(e);
    unsigned k = (unsigned)((c - 1) % 2);
    if (bench_rank == 0) {
        if (c > 2 && !rig_end_wait_sent(e, c - 2)) {
            bench_die("failed: rail failed while sending");
        }
        bench_stamp(out.base + k * (out.len / 2), 8, c);
        rig_end_ready(e, c);
        if (!rig_end_wait_arrived(e, c)) {
            bench_die("failed: rail failed while waiting");
        }
        bench_check_stamp("rig", in.base + k * (in.len / 2), 8, c, c);
    } else {
        if (!rig_end_wait_arrived(e, c)) {
            bench_die("failed: rail failed while waiting");
        }
        bench_check_stamp("rig", in.base + k * (in.len / 2), 8, c, c);
        if (c > 2 && !rig_end_wait_sent(e, c - 2)) {
            bench_die("failed: rail failed while sending");
        }
        bench_stamp(out.base + k * (out.len / 2), 8, c);
        rig_end_ready(e, c);
    }
}

/* Ping-pong over rails[0..k): the newest only (rr false) or each in turn.
 * Returns the half round trip in microseconds. */
static double rails_latency(rig_rail **rails, uint64_t *counts, size_t k,
                            bool rr, int iters, int skip)
{
    double t0 = 0;
    for (int i = -skip; i < iters; i++) {
        if (i == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = bench_now();
        }
        size_t r = rr ? (size_t)(i + skip) % k : k - 1;
        rail_ping(rig_rail_local(rails[r]), ++counts[r]);
    }
    return (bench_now() - t0) * 1e6 / (2.0 * iters);
}

int main(int argc, char **argv)
{
    /* -M (the most rails) is ours: take it out before OSU's options. */
    size_t max_rails = 1024;
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "-M") == 0) {
            max_rails = strtoul(argv[i + 1], NULL, 10);
            memmove(&argv[i], &argv[i + 2],
                    sizeof(char *) * (size_t)(argc - i - 1));
            argc -= 2;
            break;
        }
    }
    bench_opts o;
    bench_init(&argc, &argv, &o, 8, 8, false);
    size_t s = o.min_size;
    int iters = o.iterations > 0 ? o.iterations : 10000;
    int skip = o.warmup >= 0 ? o.warmup : 1000;

    print_multi_header(&o);
    int rig = o.methods[0] == &bench_rig ? 0 : -1;
    for (size_t n = 1; n <= MAX_RUN; n *= 2) {
        bench_result res[BENCH_MAX_METHODS], one = {0};
        int it = s * n > 8192 ? iters / 10 : iters;
        int sk = s * n > 8192 ? skip / 10 : skip;
        for (int i = 0; i < o.nmethods; i++) {
            res[i] =
                bench_latency(o.methods[i], o.state[i], s, n, it, sk, false);
        }
        if (rig == 0) {
            one =
                bench_latency(&bench_rig, o.state[0], s * n, 1, it, sk, false);
        }
        if (bench_rank == 0) {
            printf("%-10zu", n);
            for (int i = 0; i < o.nmethods; i++) {
                if (o.all || i == 0) {
                    printf("%20.2f", res[i].avg);
                }
            }
            if (rig == 0) {
                printf("%20.2f%10.2f\n", one.avg, res[0].avg / one.avg);
            } else {
                printf("%20s%10s\n", "-", "-");
            }
            fflush(stdout);
        }
    }

    if (rig == 0 && max_rails > 0) {
        if (bench_rank == 0) {
            printf("\n# OSU MPI Rails-Open Latency Test v7.4 (rig: 8-byte "
                   "ping-pong with k rails open)\n");
            printf("%-10s%20s%20s%10s   (Avg Latency(us))\n", "# Rails",
                   "newest", "round_robin", "ratio");
        }
        rig_rail **rails = calloc(max_rails, sizeof(*rails));
        uint64_t *counts = calloc(max_rails, sizeof(*counts));
        if (rails == NULL || counts == NULL) {
            bench_die("nomem: %zu rails", max_rails);
        }
        size_t open = 0;
        double base = 0;
        for (size_t k = 1; k <= max_rails; k *= 2) {
            while (open < k) {
                rails[open++] = bench_rig_rail(8, 8, 1);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            double lat = rails_latency(rails, counts, k, false, iters, skip);
            double rr = rails_latency(rails, counts, k, true, iters, skip);
            if (k == 1) {
                base = lat;
            }
            if (bench_rank == 0) {
                printf("%-10zu%20.2f%20.2f%10.2f\n", k, lat, rr, lat / base);
                fflush(stdout);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        for (size_t i = 0; i < open; i++) {
            rig_rail_release(rails[i]);
        }
        free(rails);
        free(counts);
    }
    bench_fini(&o);
    return 0;
}
