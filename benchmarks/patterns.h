/* SPDX-License-Identifier: BSD-3-Clause */
/* The OSU measurement patterns over the methods of bench.h. */
#ifndef RIG_BENCH_PATTERNS_H
#define RIG_BENCH_PATTERNS_H

#include "bench.h"

/* Ping-pong of runs of n messages of size bytes (only the last of a run
 * signalled): the half round trip in microseconds.  Collective. */
bench_result bench_latency(const bench_method *m, void *st, size_t size,
                           size_t n, int iters, int skip, bool full);

/* Windows of w messages of size bytes in runs of n: rank 0 sends and rank
 * 1 acknowledges each window (both false), or both send and receive (both
 * true).  Messages per second, both directions counted.  Collective. */
bench_result bench_stream(const bench_method *m, void *st, size_t size,
                          size_t n, int w, int iters, int skip, bool both,
                          bool full);

/* The round with the median average (sorts rounds[0..n)). */
bench_result bench_median_of(bench_result *rounds, int n);

/* The mains of rig_osu_latency, and of rig_osu_bw (both false, rate
 * false), rig_osu_bibw (both true) and rig_osu_mr (rate true). */
int bench_main_latency(int argc, char **argv);
int bench_main_stream(int argc, char **argv, bool both, bool rate);

#endif
