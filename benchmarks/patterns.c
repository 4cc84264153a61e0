/* SPDX-License-Identifier: BSD-3-Clause */
/* The OSU measurement patterns, written once over the method calls. */
#include "patterns.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Samples of one measurement (rank 0), kept across calls. */
static double *g_samples;
static int g_nsamples;

static double *samples(int n)
{
    if (n > g_nsamples) {
        free(g_samples);
        g_samples = malloc((size_t)n * sizeof(double));
        if (g_samples == NULL) {
            bench_die("nomem: %d samples", n);
        }
        g_nsamples = n;
    }
    return g_samples;
}

/* One ping-pong iteration of runs of n messages; seq counts both ways. */
static void pingpong(const bench_method *m, void *st, size_t n, uint64_t *seq)
{
    m->recv_post(st, n);
    if (n > 1 && m->send_run != NULL && m->recv_run != NULL) {
        if (bench_rank == 0) {
            m->send_run(st, *seq + 1, n);
            m->send_wait(st);
            m->recv_run(st, *seq + 1, n);
        } else {
            m->recv_run(st, *seq + 1, n);
            m->send_run(st, *seq + 1, n);
            m->send_wait(st);
        }
    } else if (bench_rank == 0) {
        for (size_t j = 0; j < n; j++) {
            m->send(st, *seq + j + 1, j + 1 == n);
        }
        m->send_wait(st);
        for (size_t j = 0; j < n; j++) {
            m->recv_wait(st, *seq + j + 1);
        }
    } else {
        for (size_t j = 0; j < n; j++) {
            m->recv_wait(st, *seq + j + 1);
        }
        for (size_t j = 0; j < n; j++) {
            m->send(st, *seq + j + 1, j + 1 == n);
        }
        m->send_wait(st);
    }
    *seq += n;
}

bench_result bench_latency(const bench_method *m, void *st, size_t size,
                           size_t n, int iters, int skip, bool full)
{
    bench_result r = {0};
    char *err = NULL;
    if (!m->setup(st, size, size, n, &err)) {
        bench_die("%s", err);
    }
    uint64_t seq = 0;
    for (int i = 0; i < skip; i++) {
        pingpong(m, st, n, &seq);
    }
    double *s = full ? samples(iters) : NULL;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    for (int i = 0; i < iters; i++) {
        double a = full ? bench_now() : 0;
        pingpong(m, st, n, &seq);
        if (full) {
            s[i] = (bench_now() - a) * 1e6 / 2;
        }
    }
    double t = bench_now() - t0;
    m->recv_check(st);
    m->teardown(st);
    bench_summarize(&r, s, full ? iters : 0, t * 1e6 / (2.0 * iters));
    return r;
}

/* One window: rank 0 sends w messages (runs of n), rank 1 acknowledges;
 * both: both send w and receive w. */
static void window(const bench_method *m, void *st, int w, bool both,
                   uint64_t *seq, uint64_t *ack)
{
    if (both) {
        m->recv_post(st, (size_t)w);
        for (int j = 0; j < w; j++) {
            m->send(st, *seq + (uint64_t)j + 1, true);
        }
        m->send_wait(st);
        for (int j = 0; j < w; j++) {
            m->recv_wait(st, *seq + (uint64_t)j + 1);
        }
    } else if (bench_rank == 0) {
        m->recv_post(st, 1);
        for (int j = 0; j < w; j++) {
            m->send(st, *seq + (uint64_t)j + 1, true);
        }
        m->send_wait(st);
        m->recv_wait(st, *ack + 1);
    } else {
        m->recv_post(st, (size_t)w);
        for (int j = 0; j < w; j++) {
            m->recv_wait(st, *seq + (uint64_t)j + 1);
        }
        m->send(st, *ack + 1, true);
        m->send_wait(st);
    }
    *seq += (uint64_t)w;
    *ack += 1;
}

bench_result bench_stream(const bench_method *m, void *st, size_t size,
                          size_t n, int w, int iters, int skip, bool both,
                          bool full)
{
    bench_result r = {0};
    char *err = NULL;
    /* The acknowledgement travels back in a message of 8 bytes or less. */
    size_t back = both ? size : (size < 8 ? size : 8);
    size_t out = bench_rank == 0 ? size : back;
    size_t in = bench_rank == 0 ? back : size;
    if (!m->setup(st, out, in, n, &err)) {
        bench_die("%s", err);
    }
    uint64_t seq = 0, ack = 0;
    for (int i = 0; i < skip; i++) {
        window(m, st, w, both, &seq, &ack);
    }
    double *s = full ? samples(iters) : NULL;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = bench_now();
    for (int i = 0; i < iters; i++) {
        double a = full ? bench_now() : 0;
        window(m, st, w, both, &seq, &ack);
        if (full) {
            s[i] = bench_now() - a;
        }
    }
    double t = bench_now() - t0;
    m->recv_check(st);
    m->teardown(st);
    /* Per-iteration samples become rates (the slowest is the min). */
    double per = (double)w * (both ? 2.0 : 1.0);
    if (full) {
        for (int i = 0; i < iters; i++) {
            s[i] = per / s[i];
        }
    }
    bench_summarize(&r, s, full ? iters : 0, per * iters / t);
    return r;
}

/* The median of q[0..n) (sorts it; for an even n the upper middle, as
 * bench_median_of). */
static double bench_median(double *q, int n)
{
    for (int i = 1; i < n; i++) {
        double x = q[i];
        int j = i - 1;
        while (j >= 0 && q[j] > x) {
            q[j + 1] = q[j];
            j--;
        }
        q[j + 1] = x;
    }
    return q[n / 2];
}

bench_result bench_median_of(bench_result *rounds, int n)
{
    /* Insertion sort by avg: n is small. */
    for (int i = 1; i < n; i++) {
        bench_result x = rounds[i];
        int j = i - 1;
        while (j >= 0 && rounds[j].avg > x.avg) {
            rounds[j + 1] = rounds[j];
            j--;
        }
        rounds[j + 1] = x;
    }
    return rounds[n / 2];
}

/* Measures every method at one key in o->rounds rounds, each round every
 * method once, forwards in even rounds and backwards in odd ones: a
 * machine whose speed drifts (this VM's memory bandwidth moves within
 * milliseconds) then slows every method alike on average, and no method
 * always runs first after the setup or after a given other.  res[i]: the
 * round of method i with the median average.  paired[i]: the median over
 * rounds of rig's average over method i's in the same round (rig is
 * methods[0]; 0 when rig is not, or i's size is out of range), the ratio
 * with the drift between rounds taken out. */
static void sweep_one(const bench_opts *o, size_t size, bench_result *res,
                      double *paired,
                      bench_result (*measure)(const bench_method *m, void *st,
                                              size_t size, const void *arg),
                      const void *arg)
{
    static bench_result rounds[BENCH_MAX_METHODS][BENCH_MAX_ROUNDS];
    int nr = o->rounds;
    for (int r = 0; r < nr; r++) {
        for (int k = 0; k < o->nmethods; k++) {
            int i = r % 2 == 0 ? k : o->nmethods - 1 - k;
            const bench_method *m = o->methods[i];
            if (m->max_size != 0 && size > m->max_size) {
                rounds[i][r].valid = false;
                continue;
            }
            rounds[i][r] = measure(m, o->state[i], size, arg);
        }
    }
    bool rig = o->methods[0] == &bench_rig && rounds[0][0].valid;
    for (int i = 0; i < o->nmethods; i++) {
        double q[BENCH_MAX_ROUNDS];
        paired[i] = 0;
        if (rig && rounds[i][0].valid) {
            for (int r = 0; r < nr; r++) {
                q[r] = rounds[i][r].avg > 0
                           ? rounds[0][r].avg / rounds[i][r].avg
                           : 0;
            }
            paired[i] = bench_median(q, nr);
        }
    }
    for (int i = 0; i < o->nmethods; i++) {
        res[i] =
            rounds[i][0].valid ? bench_median_of(rounds[i], nr) : rounds[i][0];
    }
}

typedef struct {
    const bench_opts *o;
    bool both;
    bool rate;
} stream_arg;

static bench_result measure_latency(const bench_method *m, void *st,
                                    size_t size, const void *arg)
{
    const bench_opts *o = arg;
    return bench_latency(m, st, size, 1, bench_iters(o, size, 10000, 1000),
                         bench_skip(o, size, 1000, 10), o->full);
}

static bench_result measure_stream(const bench_method *m, void *st, size_t size,
                                   const void *arg)
{
    const stream_arg *a = arg;
    const bench_opts *o = a->o;
    /* mr: a run is the window (a rail of w transfers); bw: runs of one. */
    size_t n = a->rate ? (size_t)o->window : 1;
    bench_result r =
        bench_stream(m, st, size, n, o->window, bench_iters(o, size, 100, 20),
                     bench_skip(o, size, 10, 2), a->both, o->full);
    if (!a->rate) {
        /* Messages per second into MB/s (OSU's MB: 10^6 bytes). */
        double k = (double)size / 1e6;
        r.avg *= k;
        r.min *= k;
        r.max *= k;
        r.p50 *= k;
        r.p99 *= k;
    }
    return r;
}

/* Sizes whose latencies are also printed in nanoseconds: at a tenth of a
 * microsecond, the table's two decimals cannot tell a 1.2 ratio. */
#define NS_MAX_SIZE 64
#define NS_ROWS 8

/* The small sizes again, in nanoseconds, as comment lines ("# ns ...")
 * that OSU's parsers skip: every selected method, whatever -b printed. */
static void print_ns_rows(const bench_opts *o, const size_t *sizes,
                          bench_result (*rows)[BENCH_MAX_METHODS], int n)
{
    if (bench_rank != 0 || n == 0) {
        return;
    }
    printf("# Avg Latency(ns) of the sizes up to %d bytes\n# ns %-10s",
           NS_MAX_SIZE, "Size");
    for (int i = 0; i < o->nmethods; i++) {
        printf("%12s", o->methods[i]->name);
    }
    printf("\n");
    for (int r = 0; r < n; r++) {
        printf("# ns %-10zu", sizes[r]);
        for (int i = 0; i < o->nmethods; i++) {
            if (rows[r][i].valid) {
                printf("%12.1f", rows[r][i].avg * 1e3);
            } else {
                printf("%12s", "-");
            }
        }
        printf("\n");
    }
    fflush(stdout);
}

/* Rows of paired ratios kept for the end of a table: one per size. */
#define PAIRED_ROWS 64

/* After the table, as comment lines ("# paired ...") that OSU's parsers
 * skip: per size, rig over every other method, the median over rounds of
 * the ratio of the same round's values.  With -r 1 there is nothing to
 * pair (the table's own ratio says the same). */
static void print_paired_rows(const bench_opts *o, bench_unit unit,
                              const size_t *sizes,
                              double (*rows)[BENCH_MAX_METHODS], int n)
{
    if (bench_rank != 0 || n == 0 || o->rounds < 2 ||
        o->methods[0] != &bench_rig || o->nmethods < 2) {
        return;
    }
    printf("# Paired by round: rig's value over each method's in the same "
           "round, the median over the %d rounds (%s: rig is faster)\n"
           "# paired %-10s",
           o->rounds, unit == BENCH_LATENCY ? "below 1" : "above 1", "Size");
    for (int i = 1; i < o->nmethods; i++) {
        printf("%12s", o->methods[i]->name);
    }
    printf("\n");
    for (int r = 0; r < n; r++) {
        printf("# paired %-10zu", sizes[r]);
        for (int i = 1; i < o->nmethods; i++) {
            if (rows[r][i] > 0) {
                printf("%12.3f", rows[r][i]);
            } else {
                printf("%12s", "-");
            }
        }
        printf("\n");
    }
    fflush(stdout);
}

int bench_main_latency(int argc, char **argv)
{
    bench_opts o;
    bench_pingpong = true;
    bench_init(&argc, &argv, &o, 1, (size_t)4 << 20, true);
    bench_print_header(&o, "Latency", BENCH_LATENCY, "# Size");
    size_t ns_sizes[NS_ROWS];
    bench_result ns_rows[NS_ROWS][BENCH_MAX_METHODS];
    int nns = 0;
    static size_t pr_sizes[PAIRED_ROWS];
    static double pr_rows[PAIRED_ROWS][BENCH_MAX_METHODS];
    int npr = 0;
    for (size_t size = o.min_size; size <= o.max_size; size *= 2) {
        bench_result res[BENCH_MAX_METHODS];
        double paired[BENCH_MAX_METHODS];
        sweep_one(&o, size, res, paired, measure_latency, &o);
        bench_print_row(&o, BENCH_LATENCY, size, res);
        if (npr < PAIRED_ROWS) {
            pr_sizes[npr] = size;
            memcpy(pr_rows[npr++], paired, sizeof(paired));
        }
        if (size <= NS_MAX_SIZE && nns < NS_ROWS) {
            ns_sizes[nns] = size;
            memcpy(ns_rows[nns++], res, sizeof(res));
        }
        if (size == 0) {
            break;
        }
    }
    print_ns_rows(&o, ns_sizes, ns_rows, nns);
    print_paired_rows(&o, BENCH_LATENCY, pr_sizes, pr_rows, npr);
    bench_fini(&o);
    return 0;
}

int bench_main_stream(int argc, char **argv, bool both, bool rate)
{
    bench_opts o;
    /* mr gives every transfer of a run its own bytes: 64 x 1 MiB x 2. */
    bench_init(&argc, &argv, &o, 1, rate ? (size_t)1 << 20 : (size_t)4 << 20,
               false);
    stream_arg a = {.o = &o, .both = both, .rate = rate};
    const char *title = rate   ? "Multiple Bandwidth / Message Rate"
                        : both ? "Bi-Directional Bandwidth"
                               : "Bandwidth";
    bench_unit unit = rate ? BENCH_RATE : BENCH_BANDWIDTH;
    bench_print_header(&o, title, unit, "# Size");
    static size_t pr_sizes[PAIRED_ROWS];
    static double pr_rows[PAIRED_ROWS][BENCH_MAX_METHODS];
    int npr = 0;
    for (size_t size = o.min_size; size <= o.max_size; size *= 2) {
        bench_result res[BENCH_MAX_METHODS];
        double paired[BENCH_MAX_METHODS];
        sweep_one(&o, size, res, paired, measure_stream, &a);
        bench_print_row(&o, unit, size, res);
        if (npr < PAIRED_ROWS) {
            pr_sizes[npr] = size;
            memcpy(pr_rows[npr++], paired, sizeof(paired));
        }
        if (size == 0) {
            break;
        }
    }
    print_paired_rows(&o, unit, pr_sizes, pr_rows, npr);
    bench_fini(&o);
    return 0;
}
