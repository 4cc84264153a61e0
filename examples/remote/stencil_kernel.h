/* SPDX-License-Identifier: BSD-3-Clause */
/* The 2-D heat diffusion stencil every version of examples/remote/stencil
 * runs: the native program, the wasm module, the controller's serial
 * check and the plain MPI code.  One header, so that every version makes
 * the same operations in the same order and the results agree bit for
 * bit (build with -ffp-contract=off: a fused multiply-add would round
 * differently).  Freestanding: the wasm module has no libc.
 *
 * The grid has rows x cols points; row 0 is held at 1.0 (a hot edge), the
 * other edges at 0.0, and the interior starts from a fixed pattern.  A
 * step (Jacobi) computes every interior point from the last step's:
 *     u' = u + a * ((north + south) + (west + east) - 4 u),  a = 0.1.
 * The interior rows are cut in blocks, one per machine; a block keeps a
 * ghost row above and below (its neighbours' edge rows, or the grid's
 * fixed edge), so that a block of n rows is n + 2 rows of cols values. */
#ifndef STENCIL_KERNEL_H
#define STENCIL_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#define STENCIL_ALPHA 0.1
#define STENCIL_MAGIC 0x4c434e53u /* "SNCL" */

/* What the controller tells each machine's program (over the rail from the
 * controller's machine to it), once per launch. */
typedef struct {
    uint32_t magic;
    uint32_t rows, cols; /* the grid, edges included */
    uint32_t steps;
    uint32_t row0, nrows; /* this block: interior rows [row0, row0 + nrows) */
    uint32_t launch;      /* launches before this one on these rails */
    uint32_t pad;
    uint64_t base; /* halo counts readied before this launch */
} stencil_params;

/* The program's inputs (its manifest's "reads" and "writes"). */
#define STENCIL_NORTH 0u  /* the halo rail to the block above */
#define STENCIL_SOUTH 1u  /* the halo rail to the block below */
#define STENCIL_RESULT 2u /* the rail to the controller's machine */

/* The starting value of point (i, j). */
static inline double stencil_init(uint32_t i, uint32_t j, uint32_t rows,
                                  uint32_t cols)
{
    if (i == 0) {
        return 1.0;
    }
    if (i + 1 == rows || j == 0 || j + 1 == cols) {
        return 0.0;
    }
    return (double)((i * 37u + j * 11u) % 97u) / 97.0;
}

/* Fills a block: rows [row0 - 1, row0 + n] of the grid into n + 2 rows. */
static inline void stencil_fill(double *b, uint32_t row0, uint32_t n,
                                uint32_t rows, uint32_t cols)
{
    for (uint32_t i = 0; i < n + 2; i++) {
        for (uint32_t j = 0; j < cols; j++) {
            b[(size_t)i * cols + j] = stencil_init(row0 - 1 + i, j, rows, cols);
        }
    }
}

/* One step of rows 1..n of a block: out from in (ghost rows 0 and n + 1
 * are read, not written; edge columns are copied). */
static inline void stencil_step(const double *in, double *out, uint32_t n,
                                uint32_t cols)
{
    for (uint32_t i = 1; i <= n; i++) {
        const double *up = in + (size_t)(i - 1) * cols;
        const double *me = in + (size_t)i * cols;
        const double *dn = in + (size_t)(i + 1) * cols;
        double *o = out + (size_t)i * cols;
        o[0] = me[0];
        for (uint32_t j = 1; j + 1 < cols; j++) {
            o[j] =
                me[j] + STENCIL_ALPHA * ((up[j] + dn[j]) +
                                         (me[j - 1] + me[j + 1]) - 4.0 * me[j]);
        }
        o[cols - 1] = me[cols - 1];
    }
}

/* Block k (0-based) of `blocks` over the interior rows of the grid: its
 * first row and row count. */
static inline void stencil_block(uint32_t rows, uint32_t blocks, uint32_t k,
                                 uint32_t *row0, uint32_t *n)
{
    uint32_t interior = rows - 2;
    uint32_t per = interior / blocks, extra = interior % blocks;
    *row0 = 1 + k * per + (k < extra ? k : extra);
    *n = per + (k < extra ? 1 : 0);
}

#endif
