/* SPDX-License-Identifier: BSD-3-Clause */
/* What the rig method lends benchmarks that use rails directly. */
#ifndef RIG_BENCH_RIG_H
#define RIG_BENCH_RIG_H

#include <rig/job.h>

#include <stddef.h>

/* The job the rig method opened, or NULL when it is left out. */
rig_job *bench_rig_job(void);

/* t[0..n): n transfers of size bytes, transfer j at byte j * size. */
void bench_rig_lists(size_t size, size_t n, rig_transfer *t);

/* A bidirectional rail to the peer: n transfers of out bytes out, n of in
 * bytes in (the peer calls it with out and in swapped); aborts on error. */
rig_rail *bench_rig_rail(size_t out, size_t in, size_t n);

#endif
