/* SPDX-License-Identifier: BSD-3-Clause */
/* rig_stencil: an application benchmark, a 2-D stencil whose halos go over
 * rails or over MPI, iterations per second side by side.
 *
 * The kernel: a star stencil of radius 2 on an N x N grid of doubles,
 * split over a 2-D grid of ranks (MPI_Dims_create).  Each iteration every
 * rank exchanges halos of width 2 with its (up to 4) neighbours, adds the
 * stencil of `in` to `out` at every point 2 or more away from the grid's
 * edge, and adds 1 to `in`.  With in(x, y) = x + y at the start and
 * weights +-1/(2kR) at distance k, each iteration adds exactly 2 to every
 * such point of out (all values are exact in binary), so after T
 * iterations every point must hold 2T: a halo that is late, stale or in
 * the wrong copy gives another value.  Every method is checked after every
 * measurement, point by point.
 *
 * Methods (columns):
 *   rig         one rail per neighbour (one transfer each way: the strip),
 *               all made by one rig_job_rails call,
 *               packed into and unpacked from the rail's copies through
 *               the run helpers of rig/wait.h; the inbound strips are
 *               unpacked in the order they arrive (rig_wait_any)
 *   isend       MPI_Irecv/MPI_Isend of packed strips, MPI_Waitall
 *   persistent  MPI_Recv_init/MPI_Send_init once; MPI_Startall, MPI_Waitall
 *   neighbor    MPI_Neighbor_alltoallw on the Cartesian communicator with
 *               subarray datatypes straight from and into the grid
 * Every method packs what it sends and unpacks what it receives as a code
 * would: rails and the two-sided methods copy strips (rails into and out
 * of their two copies, MPI into one buffer per neighbour and direction),
 * neighbor lets MPI's datatypes do it.
 *
 * Output, in the style of the OSU tables: one row per grid size, the
 * iterations per second of each method (the median of -r rounds of about
 * 30 ms each, methods interleaved in every round, forwards and backwards
 * in turn, each pair of rounds starting with another), MPI's best, and
 * the ratio: for each MPI method the median over rounds of rig / that
 * method in the same round (paired, so that load that drifts between
 * rounds on a shared machine cancels), and of those the lowest, whose
 * method is MPI's best.  After the table, comment lines ("# paired ...")
 * give that paired ratio against each MPI method.
 *
 * With -e, the halo exchange alone: each iteration exchanges the halos as
 * above and then adds 1 to the strips the rank sends, no arithmetic
 * else; after T iterations every halo point must hold its neighbour's
 * in(x, y) + T - 1.  Where compute is most of an iteration (1024 x 1024:
 * 97-99%) the application's ratio moves with noise far more than with
 * the exchange; this shows the exchange's own cost, the same packing,
 * the same checking.
 *
 * Usage: mpirun -np P rig_stencil [-n N[,N...]] [-i iters] [-x warmup]
 *        [-r rounds] [-b methods] [-e]
 * (run.sh runs it at 2 ranks, one per core, and at 4 ranks on 2 cores). */
#include <rig/job.h>
#include <rig/wait.h>

#include <errno.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define R 2 /* the stencil's radius and the halos' width */
#define MAX_SIZES 8

/* Directions in the order MPI_Neighbor_alltoallw uses for a 2-D
 * Cartesian communicator: dimension 0 (y) down, up; dimension 1 (x) left,
 * right. */
enum { D_S, D_N, D_W, D_E, NDIR };

static int g_rank = -1;

static _Noreturn void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "rig_stencil: rank %d: ", g_rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort();
}

static void mpi_check(int rc, const char *call)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        die("system: %s failed: %s", call, msg);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the grid ------------------------------------------------------------ */

typedef struct {
    MPI_Comm cart;
    int dims[2], coords[2]; /* [0]: y, [1]: x */
    int nb[NDIR];           /* neighbour ranks; MPI_PROC_NULL at an edge */
    int n;                  /* global edge */
    int nx, ny;             /* this rank's block */
    int x0, y0;             /* its first global column and row */
    int stride;             /* nx + 2R */
    double *in, *out;       /* (ny + 2R) x stride; out's halo unused */
    size_t strip[NDIR];     /* bytes of the strip to/from each side */
} grid;

static double *at(const grid *g, double *a, int x, int y)
{
    return a + (size_t)(y + R) * (size_t)g->stride + (size_t)(x + R);
}

/* Rows or columns of this rank's share of n: the first n % p get one
 * more. */
static void share(int n, int p, int c, int *len, int *first)
{
    int base = n / p, extra = n % p;
    *len = base + (c < extra ? 1 : 0);
    *first = c * base + (c < extra ? c : extra);
}

static void grid_make(grid *g, int n)
{
    memset(g, 0, sizeof(*g));
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int periods[2] = {0, 0};
    mpi_check(MPI_Dims_create(size, 2, g->dims), "MPI_Dims_create");
    /* No reordering: cart ranks are world ranks, which the rig job uses. */
    mpi_check(MPI_Cart_create(MPI_COMM_WORLD, 2, g->dims, periods, 0, &g->cart),
              "MPI_Cart_create");
    int me = 0;
    MPI_Comm_rank(g->cart, &me);
    MPI_Cart_coords(g->cart, me, 2, g->coords);
    MPI_Cart_shift(g->cart, 0, 1, &g->nb[D_S], &g->nb[D_N]);
    MPI_Cart_shift(g->cart, 1, 1, &g->nb[D_W], &g->nb[D_E]);
    g->n = n;
    share(n, g->dims[1], g->coords[1], &g->nx, &g->x0);
    share(n, g->dims[0], g->coords[0], &g->ny, &g->y0);
    if (g->nx < R || g->ny < R) {
        die("invalid: a %d x %d grid over %d x %d ranks leaves blocks "
            "under %d points wide",
            n, n, g->dims[1], g->dims[0], R);
    }
    g->stride = g->nx + 2 * R;
    size_t cells = (size_t)(g->ny + 2 * R) * (size_t)g->stride;
    g->in = aligned_alloc(64, (cells * sizeof(double) + 63) / 64 * 64);
    g->out = aligned_alloc(64, (cells * sizeof(double) + 63) / 64 * 64);
    if (g->in == NULL || g->out == NULL) {
        die("nomem: a block of %zu points", cells);
    }
    g->strip[D_S] = g->strip[D_N] = (size_t)R * (size_t)g->nx * sizeof(double);
    g->strip[D_W] = g->strip[D_E] = (size_t)R * (size_t)g->ny * sizeof(double);
}

static void grid_free(grid *g)
{
    free(g->in);
    free(g->out);
    MPI_Comm_free(&g->cart);
}

/* in(x, y) = x + y over the block, halos 0; out = 0. */
static void grid_reset(grid *g)
{
    size_t cells = (size_t)(g->ny + 2 * R) * (size_t)g->stride;
    memset(g->in, 0, cells * sizeof(double));
    memset(g->out, 0, cells * sizeof(double));
    for (int y = 0; y < g->ny; y++) {
        for (int x = 0; x < g->nx; x++) {
            *at(g, g->in, x, y) = (double)(g->x0 + x) + (double)(g->y0 + y);
        }
    }
}

/* One iteration's arithmetic, after the halos came in. */
static void grid_compute(grid *g)
{
    /* Points 2 or more away from the global edge. */
    int xa = g->x0 < R ? R - g->x0 : 0;
    int ya = g->y0 < R ? R - g->y0 : 0;
    int xb = g->x0 + g->nx > g->n - R ? g->n - R - g->x0 : g->nx;
    int yb = g->y0 + g->ny > g->n - R ? g->n - R - g->y0 : g->ny;
    const size_t s = (size_t)g->stride;
    for (int y = ya; y < yb; y++) {
        const double *row = at(g, g->in, 0, y);
        double *o = at(g, g->out, 0, y);
        for (int x = xa; x < xb; x++) {
            const double *p = row + x;
            o[x] += 0.25 * (p[1] - p[-1]) + 0.125 * (p[2] - p[-2]) +
                    0.25 * (p[s] - p[-(ptrdiff_t)s]) +
                    0.125 * (p[2 * s] - p[-2 * (ptrdiff_t)s]);
        }
    }
    for (int y = 0; y < g->ny; y++) {
        double *row = at(g, g->in, 0, y);
        for (int x = 0; x < g->nx; x++) {
            row[x] += 1.0;
        }
    }
}

/* Every point away from the edge must hold 2 * iters; aborts naming the
 * first that does not. */
static void grid_check(const grid *g, const char *method, int iters)
{
    double want = 2.0 * iters;
    for (int y = 0; y < g->ny; y++) {
        int gy = g->y0 + y;
        for (int x = 0; x < g->nx; x++) {
            int gx = g->x0 + x;
            if (gx < R || gy < R || gx >= g->n - R || gy >= g->n - R) {
                continue;
            }
            double v = *at(g, g->out, x, y);
            if (v != want) {
                die("wrong result: %s, %d x %d grid, %d iterations: point "
                    "(%d, %d) holds %.17g, expected %.17g",
                    method, g->n, g->n, iters, gx, gy, v, want);
            }
        }
    }
}

/* The exchange alone (-e): adds 1 to every point of the strips this rank
 * sends (those next to a side with a neighbour), each point once. */
static void grid_touch(grid *g)
{
    bool w = g->nb[D_W] != MPI_PROC_NULL, e = g->nb[D_E] != MPI_PROC_NULL;
    int e0 = g->nx - R > (w ? R : 0) ? g->nx - R : (w ? R : 0);
    for (int y = 0; y < g->ny; y++) {
        double *row = at(g, g->in, 0, y);
        if ((y < R && g->nb[D_S] != MPI_PROC_NULL) ||
            (y >= g->ny - R && g->nb[D_N] != MPI_PROC_NULL)) {
            for (int x = 0; x < g->nx; x++) {
                row[x] += 1.0;
            }
            continue;
        }
        for (int x = 0; w && x < R; x++) {
            row[x] += 1.0;
        }
        for (int x = e0; e && x < g->nx; x++) {
            row[x] += 1.0;
        }
    }
}

/* After iters exchanges alone, every halo point beyond a side with a
 * neighbour holds the neighbour's in(x, y) + iters - 1: the last exchange
 * carried the strip before the last touch.  Aborts naming the first that
 * does not. */
static void grid_check_halos(const grid *g, const char *method, int iters)
{
    for (int d = 0; d < NDIR; d++) {
        if (g->nb[d] == MPI_PROC_NULL) {
            continue;
        }
        bool rows = d == D_S || d == D_N;
        int len = rows ? g->nx : g->ny;
        for (int k = 0; k < R; k++) {
            for (int j = 0; j < len; j++) {
                int x = rows ? j : d == D_W ? -R + k : g->nx + k;
                int y = !rows ? j : d == D_S ? -R + k : g->ny + k;
                double want = (double)(g->x0 + x) + (double)(g->y0 + y) +
                              (double)(iters - 1);
                double v = *at(g, g->in, x, y);
                if (v != want) {
                    die("wrong result: %s, %d x %d grid, %d exchanges alone: "
                        "halo point (%d, %d) holds %.17g, expected %.17g",
                        method, g->n, g->n, iters, g->x0 + x, g->y0 + y, v,
                        want);
                }
            }
        }
    }
}

/* Copies the strip of the block next to side d into buf (pack) or buf
 * into the halo beyond side d (unpack). */
static void strip_copy(grid *g, int d, double *buf, bool pack)
{
    if (d == D_S || d == D_N) {
        int y = pack ? (d == D_S ? 0 : g->ny - R) : (d == D_S ? -R : g->ny);
        for (int k = 0; k < R; k++) {
            double *row = at(g, g->in, 0, y + k);
            size_t bytes = (size_t)g->nx * sizeof(double);
            if (pack) {
                memcpy(buf + (size_t)k * (size_t)g->nx, row, bytes);
            } else {
                memcpy(row, buf + (size_t)k * (size_t)g->nx, bytes);
            }
        }
        return;
    }
    int x = pack ? (d == D_W ? 0 : g->nx - R) : (d == D_W ? -R : g->nx);
    for (int y = 0; y < g->ny; y++) {
        double *p = at(g, g->in, x, y);
        for (int k = 0; k < R; k++) {
            if (pack) {
                buf[(size_t)y * R + (size_t)k] = p[k];
            } else {
                p[k] = buf[(size_t)y * R + (size_t)k];
            }
        }
    }
}

/* ---- methods ------------------------------------------------------------- */

typedef struct method method;
struct method {
    const char *name;
    bool mpi; /* competes for MPI's best */
    void (*setup)(method *m, grid *g);
    void (*exchange)(method *m, grid *g, int it);
    void (*teardown)(method *m, grid *g);
    void *state;
};

/* rig: a rail per neighbour. */
typedef struct {
    rig_job *job;
    rig_rail *rail[NDIR];
    rig_runs runs[NDIR];
    uint64_t run; /* the next run: counts go on across measurements */
} rig_state;

static rig_job *g_job;

/* The rails to the neighbours, made in one collective call, listed in
 * the order of the sides: rig_job_rails matches them across ranks
 * whatever the order (a grid without wrap-around has one rail per pair,
 * so no two requests name the same peer). */
static void rails_make(rig_state *s, grid *g)
{
    rig_job_rail_request req[NDIR];
    rig_transfer t[NDIR]; /* each rail's one transfer each way */
    rig_rail *made[NDIR];
    int side[NDIR], k = 0;
    for (int d = 0; d < NDIR; d++) {
        if (g->nb[d] == MPI_PROC_NULL) {
            continue;
        }
        t[d] = (rig_transfer){0, 0, (int64_t)g->strip[d]};
        req[k] = (rig_job_rail_request){.peer = g->nb[d],
                                        .send = &t[d],
                                        .nsend = 1,
                                        .receive = &t[d],
                                        .nreceive = 1};
        side[k++] = d;
    }
    char *err = NULL;
    if (!rig_job_rails(s->job, req, (size_t)k, made, &err)) {
        die("%s (the rails to the neighbours)", err);
    }
    for (int i = 0; i < k; i++) {
        int d = side[i];
        s->rail[d] = made[i];
        s->runs[d] = (rig_runs){
            .end = rig_rail_local(made[i]), .nsend = 1, .nreceive = 1};
    }
}

static void rig_setup(method *m, grid *g)
{
    rig_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        die("nomem: rig state");
    }
    s->job = g_job;
    rails_make(s, g);
    m->state = s;
}

static void rig_die(rig_reach r, const char *what, int d)
{
    die("failed: rig: %s on side %d: %s", what, d,
        r == RIG_FAILED ? "the job failed" : "refused");
}

static void rig_exchange(method *m, grid *g, int it)
{
    (void)it;
    rig_state *s = m->state;
    uint64_t r = s->run++;
    rig_goal goal[NDIR];
    int side[NDIR], k = 0;
    for (int d = 0; d < NDIR; d++) {
        if (s->rail[d] == NULL) {
            continue;
        }
        rig_area out;
        rig_reach got = rig_run_outbound(&s->runs[d], r, &out);
        if (got != RIG_REACHED) {
            rig_die(got, "outbound", d);
        }
        strip_copy(g, d, (double *)(void *)out.base, true);
        if ((got = rig_run_ready(&s->runs[d], r)) != RIG_REACHED) {
            rig_die(got, "ready", d);
        }
        goal[k] = rig_goal_arrived(s->runs[d].end, r + 1);
        side[k++] = d;
    }
    /* Unpack each strip as it arrives.  Run r is read here, before run r
     * + 1 is signalled: the rule of a symmetric exchange (rig/wait.h). */
    while (k > 0) {
        size_t i = 0;
        rig_reach got = rig_wait_any(goal, (size_t)k, &i);
        if (got != RIG_REACHED) {
            rig_die(got, "arrival", side[i]);
        }
        rig_area in;
        if ((got = rig_run_inbound(&s->runs[side[i]], r, &in)) != RIG_REACHED) {
            rig_die(got, "inbound", side[i]);
        }
        strip_copy(g, side[i], (double *)(void *)in.base, false);
        goal[i] = goal[k - 1];
        side[i] = side[k - 1];
        k--;
    }
}

static void rig_teardown(method *m, grid *g)
{
    (void)g;
    rig_state *s = m->state;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int d = 0; d < NDIR; d++) {
        rig_rail_release(s->rail[d]);
    }
    free(s);
    m->state = NULL;
}

/* isend and persistent: a send and a receive buffer per neighbour. */
typedef struct {
    double *sbuf[NDIR], *rbuf[NDIR];
    MPI_Request req[2 * NDIR]; /* receives, then sends */
    int nreq;
    bool persistent;
} p2p_state;

/* The tag of a message that travels towards side d of its sender. */
static int tag_to(int d)
{
    return 100 + d;
}

/* The side a message from side d of this rank was sent towards. */
static int opposite(int d)
{
    return d ^ 1;
}

static void p2p_setup_as(method *m, grid *g, bool persistent)
{
    p2p_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        die("nomem: p2p state");
    }
    s->persistent = persistent;
    for (int d = 0; d < NDIR; d++) {
        s->sbuf[d] = malloc(g->strip[d]);
        s->rbuf[d] = malloc(g->strip[d]);
        if (s->sbuf[d] == NULL || s->rbuf[d] == NULL) {
            die("nomem: strips");
        }
    }
    if (persistent) {
        int n = 0;
        for (int d = 0; d < NDIR; d++) {
            mpi_check(MPI_Recv_init(s->rbuf[d], (int)(g->strip[d] / 8),
                                    MPI_DOUBLE, g->nb[d], tag_to(opposite(d)),
                                    g->cart, &s->req[n++]),
                      "MPI_Recv_init");
        }
        for (int d = 0; d < NDIR; d++) {
            mpi_check(MPI_Send_init(s->sbuf[d], (int)(g->strip[d] / 8),
                                    MPI_DOUBLE, g->nb[d], tag_to(d), g->cart,
                                    &s->req[n++]),
                      "MPI_Send_init");
        }
        s->nreq = n;
    }
    m->state = s;
}

static void isend_setup(method *m, grid *g)
{
    p2p_setup_as(m, g, false);
}

static void persistent_setup(method *m, grid *g)
{
    p2p_setup_as(m, g, true);
}

static void p2p_exchange(method *m, grid *g, int it)
{
    (void)it;
    p2p_state *s = m->state;
    if (s->persistent) {
        mpi_check(MPI_Startall(NDIR, s->req), "MPI_Startall");
        for (int d = 0; d < NDIR; d++) {
            if (g->nb[d] != MPI_PROC_NULL) {
                strip_copy(g, d, s->sbuf[d], true);
            }
        }
        mpi_check(MPI_Startall(NDIR, s->req + NDIR), "MPI_Startall");
    } else {
        for (int d = 0; d < NDIR; d++) {
            mpi_check(MPI_Irecv(s->rbuf[d], (int)(g->strip[d] / 8), MPI_DOUBLE,
                                g->nb[d], tag_to(opposite(d)), g->cart,
                                &s->req[d]),
                      "MPI_Irecv");
        }
        for (int d = 0; d < NDIR; d++) {
            if (g->nb[d] != MPI_PROC_NULL) {
                strip_copy(g, d, s->sbuf[d], true);
            }
            mpi_check(MPI_Isend(s->sbuf[d], (int)(g->strip[d] / 8), MPI_DOUBLE,
                                g->nb[d], tag_to(d), g->cart,
                                &s->req[NDIR + d]),
                      "MPI_Isend");
        }
    }
    mpi_check(MPI_Waitall(2 * NDIR, s->req, MPI_STATUSES_IGNORE),
              "MPI_Waitall");
    for (int d = 0; d < NDIR; d++) {
        if (g->nb[d] != MPI_PROC_NULL) {
            strip_copy(g, d, s->rbuf[d], false);
        }
    }
}

static void p2p_teardown(method *m, grid *g)
{
    (void)g;
    p2p_state *s = m->state;
    for (int i = 0; i < s->nreq; i++) {
        MPI_Request_free(&s->req[i]);
    }
    for (int d = 0; d < NDIR; d++) {
        free(s->sbuf[d]);
        free(s->rbuf[d]);
    }
    free(s);
    m->state = NULL;
}

/* neighbor: subarray types straight from and into the grid. */
typedef struct {
    MPI_Datatype stype[NDIR], rtype[NDIR];
    int counts[NDIR];
    MPI_Aint displs[NDIR];
} nbr_state;

static MPI_Datatype strip_type(const grid *g, int d, bool pack)
{
    int sizes[2] = {g->ny + 2 * R, g->stride};
    int sub[2], start[2];
    if (d == D_S || d == D_N) {
        sub[0] = R;
        sub[1] = g->nx;
        start[0] =
            R + (pack ? (d == D_S ? 0 : g->ny - R) : (d == D_S ? -R : g->ny));
        start[1] = R;
    } else {
        sub[0] = g->ny;
        sub[1] = R;
        start[0] = R;
        start[1] =
            R + (pack ? (d == D_W ? 0 : g->nx - R) : (d == D_W ? -R : g->nx));
    }
    MPI_Datatype t;
    mpi_check(MPI_Type_create_subarray(2, sizes, sub, start, MPI_ORDER_C,
                                       MPI_DOUBLE, &t),
              "MPI_Type_create_subarray");
    mpi_check(MPI_Type_commit(&t), "MPI_Type_commit");
    return t;
}

static void nbr_setup(method *m, grid *g)
{
    nbr_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        die("nomem: neighbor state");
    }
    for (int d = 0; d < NDIR; d++) {
        s->stype[d] = strip_type(g, d, true);
        s->rtype[d] = strip_type(g, d, false);
        s->counts[d] = 1;
        s->displs[d] = 0;
    }
    m->state = s;
}

static void nbr_exchange(method *m, grid *g, int it)
{
    (void)it;
    nbr_state *s = m->state;
    /* Disjoint regions of one array: the send strips and the halos. */
    mpi_check(MPI_Neighbor_alltoallw(g->in, s->counts, s->displs, s->stype,
                                     g->in, s->counts, s->displs, s->rtype,
                                     g->cart),
              "MPI_Neighbor_alltoallw");
}

static void nbr_teardown(method *m, grid *g)
{
    (void)g;
    nbr_state *s = m->state;
    for (int d = 0; d < NDIR; d++) {
        MPI_Type_free(&s->stype[d]);
        MPI_Type_free(&s->rtype[d]);
    }
    free(s);
    m->state = NULL;
}

static method all_methods[] = {
    {"rig", false, rig_setup, rig_exchange, rig_teardown, NULL},
    {"isend", true, isend_setup, p2p_exchange, p2p_teardown, NULL},
    {"persistent", true, persistent_setup, p2p_exchange, p2p_teardown, NULL},
    {"neighbor", true, nbr_setup, nbr_exchange, nbr_teardown, NULL},
};
#define NMETHODS (int)(sizeof(all_methods) / sizeof(all_methods[0]))

/* ---- the run ------------------------------------------------------------- */

/* Iterations per second of T iterations after a warm-up, the slowest
 * rank's time; the result is checked.  Collective; m is set up. */
static double measure(method *m, grid *g, int iters, int warmup, bool alone)
{
    void (*step)(grid *) = alone ? grid_touch : grid_compute;
    grid_reset(g);
    for (int it = 0; it < warmup; it++) {
        m->exchange(m, g, it);
        step(g);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    for (int it = warmup; it < warmup + iters; it++) {
        m->exchange(m, g, it);
        step(g);
    }
    double t = now_s() - t0, slowest = 0;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (alone) {
        grid_check_halos(g, m->name, warmup + iters);
    } else {
        grid_check(g, m->name, warmup + iters);
    }
    return iters / slowest;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int parse_int(const char *s, int min, const char *what)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > 1 << 30) {
        if (g_rank == 0) {
            fprintf(stderr, "rig_stencil: invalid: %s wants a number >= %d\n",
                    what, min);
        }
        MPI_Finalize();
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    mpi_check(MPI_Init(&argc, &argv), "MPI_Init");
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int sizes[MAX_SIZES] = {128, 256, 512, 1024}, nsizes = 4;
    int iters = 0, warmup = -1, rounds = 15;
    bool alone = false; /* -e: the halo exchange alone */
    bool want[NMETHODS];
    for (int i = 0; i < NMETHODS; i++) {
        want[i] = true;
    }
    int c;
    while ((c = getopt(argc, argv, "n:i:x:r:b:eh")) != -1) {
        switch (c) {
        case 'n': {
            nsizes = 0;
            char *list = strdup(optarg), *save = NULL;
            for (char *t = strtok_r(list, ",", &save); t != NULL;
                 t = strtok_r(NULL, ",", &save)) {
                if (nsizes == MAX_SIZES) {
                    break;
                }
                sizes[nsizes++] = parse_int(t, 2 * R + 1, "-n");
            }
            free(list);
            break;
        }
        case 'i':
            iters = parse_int(optarg, 1, "-i");
            break;
        case 'x':
            warmup = parse_int(optarg, 0, "-x");
            break;
        case 'r':
            rounds = parse_int(optarg, 1, "-r");
            break;
        case 'e':
            alone = true;
            break;
        case 'b': {
            for (int i = 0; i < NMETHODS; i++) {
                want[i] = false;
            }
            char *list = strdup(optarg), *save = NULL;
            for (char *t = strtok_r(list, ",", &save); t != NULL;
                 t = strtok_r(NULL, ",", &save)) {
                bool found = false;
                for (int i = 0; i < NMETHODS; i++) {
                    if (strcmp(t, all_methods[i].name) == 0 ||
                        strcmp(t, "all") == 0) {
                        want[i] = found = true;
                    }
                }
                if (!found) {
                    if (g_rank == 0) {
                        fprintf(stderr,
                                "rig_stencil: invalid: -b: no method %s "
                                "(rig isend persistent neighbor all)\n",
                                t);
                    }
                    MPI_Finalize();
                    exit(2);
                }
            }
            free(list);
            break;
        }
        default:
            if (g_rank == 0) {
                fprintf(c == 'h' ? stdout : stderr,
                        "Usage: rig_stencil [-n N[,N...]] [-i iterations] "
                        "[-x warmup] [-r rounds] [-b methods] [-e]\n"
                        "  -e: the halo exchange alone, no arithmetic\n"
                        "  methods: rig isend persistent neighbor (all)\n");
            }
            MPI_Finalize();
            exit(c == 'h' ? 0 : 2);
        }
    }
    if (rounds > 64) {
        rounds = 64;
    }
    char *err = NULL;
    if (want[0] && !rig_job_open(MPI_COMM_WORLD, NULL, &g_job, &err)) {
        die("%s (rig_job_open)", err);
    }

    grid g;
    grid_make(&g, sizes[0]);
    if (g_rank == 0) {
        const char *why = "";
        rig_wait_mode wm = rig_wait_mode_now(&why);
        printf("\n# rig stencil: 2-D star stencil of radius %d, halos of "
               "width %d, %d ranks (%d x %d), iterations per second%s\n",
               R, R, size, g.dims[1], g.dims[0],
               alone ? "; the halo exchange alone (-e: no arithmetic, the "
                       "strips sent touched)"
                     : "");
        printf("# rig waits: %s (%s)\n", rig_wait_mode_name(wm), why);
        printf("# Methods: rig (a rail per neighbour, run helpers, "
               "rig_wait_any); isend (MPI_Irecv/MPI_Isend, packed); "
               "persistent (MPI_Recv_init/MPI_Send_init, MPI_Startall); "
               "neighbor (MPI_Neighbor_alltoallw, subarray types)\n");
        printf("%-10s", "# Grid");
        for (int i = 0; i < NMETHODS; i++) {
            if (want[i]) {
                printf("%14s", all_methods[i].name);
            }
        }
        printf("%14s%10s   (iterations/s, median of %d rounds; ratio: "
               "paired by round, against the MPI method it beats least)\n",
               "best_mpi", "ratio", rounds);
        fflush(stdout);
    }
    grid_free(&g);

    double paired[MAX_SIZES][NMETHODS];
    /* The middle half of rig's per-round ratios against MPI's best: how
     * far one sitting's rounds spread around the median. */
    double spread[MAX_SIZES][2];
    for (int si = 0; si < nsizes; si++) {
        grid_make(&g, sizes[si]);
        /* About 30 ms of compute per measurement at 2 ranks: many short
         * rounds sample a noisy machine's load finely.  An exchange alone
         * takes 1-60 us here: 1,000 of them take 1-60 ms. */
        int it = iters;
        if (it == 0) {
            double pts = (double)sizes[si] * sizes[si] / size;
            it = alone ? 1000 : (int)(6e6 / pts);
            it = it < 20 ? 20 : it > 5000 ? 5000 : it;
        }
        int wu = warmup >= 0 ? warmup : it / 10;
        double res[NMETHODS][64];
        for (int i = 0; i < NMETHODS; i++) {
            if (want[i]) {
                all_methods[i].setup(&all_methods[i], &g);
            }
        }
        /* Rounds go forwards and backwards in turn, each pair of rounds
         * starting one method further on: no method always runs first
         * (after the barrier) or after a given other, and a machine that
         * drifts within a pair of rounds slows every method alike on
         * average (this VM's memory bandwidth and its scheduling of 4
         * ranks on 2 cores move within milliseconds). */
        for (int r = 0; r < rounds; r++) {
            for (int k = 0; k < NMETHODS; k++) {
                int j = r % 2 == 0 ? k : NMETHODS - 1 - k;
                int i = (j + r / 2) % NMETHODS;
                if (want[i]) {
                    res[i][r] = measure(&all_methods[i], &g, it, wu, alone);
                }
            }
        }
        for (int i = 0; i < NMETHODS; i++) {
            if (want[i]) {
                all_methods[i].teardown(&all_methods[i], &g);
            }
        }
        /* Ratios pair each round's rig with the same round's MPI method,
         * so that load drifting between rounds cancels: per method, the
         * median over rounds of rig / it.  MPI's best is the method with
         * the lowest such ratio (not each round's fastest MPI: a maximum
         * of three noisy values is biased against rig). */
        double ratio[NMETHODS], median[NMETHODS], quart[NMETHODS][2];
        int best = -1;
        for (int i = 0; i < NMETHODS; i++) {
            double tmp[64];
            if (!want[i]) {
                continue;
            }
            for (int r = 0; r < rounds; r++) {
                tmp[r] = want[0] && res[i][r] > 0 ? res[0][r] / res[i][r] : 0;
            }
            qsort(tmp, (size_t)rounds, sizeof(double), cmp_double);
            ratio[i] = tmp[rounds / 2];
            quart[i][0] = tmp[rounds / 4];
            quart[i][1] = tmp[rounds - 1 - rounds / 4];
            /* A copy: res[0] (rig's rounds) must stay in round order for
             * the pairs of the methods after it. */
            memcpy(tmp, res[i], (size_t)rounds * sizeof(double));
            qsort(tmp, (size_t)rounds, sizeof(double), cmp_double);
            median[i] = tmp[rounds / 2];
            if (all_methods[i].mpi &&
                (best < 0 || (want[0] ? ratio[i] < ratio[best]
                                      : median[i] > median[best]))) {
                best = i;
            }
        }
        if (g_rank == 0) {
            printf("%-10d", sizes[si]);
            for (int i = 0; i < NMETHODS; i++) {
                if (want[i]) {
                    printf("%14.1f", median[i]);
                }
            }
            if (best >= 0) {
                printf("%14.1f", median[best]);
            } else {
                printf("%14s", "-");
            }
            if (want[0] && best >= 0) {
                printf("%10.2f\n", ratio[best]);
            } else {
                printf("%10s\n", "-");
            }
            fflush(stdout);
        }
        for (int i = 0; i < NMETHODS; i++) {
            paired[si][i] = want[0] && want[i] ? ratio[i] : 0;
        }
        spread[si][0] = want[0] && best >= 0 ? quart[best][0] : 0;
        spread[si][1] = want[0] && best >= 0 ? quart[best][1] : 0;
        grid_free(&g);
    }
    /* The paired ratio against every MPI method, as comment lines that
     * the table's parsers skip: how far apart the MPI methods are. */
    if (g_rank == 0 && want[0]) {
        printf("# Paired by round: rig's iterations/s over each MPI "
               "method's in the same round, the median over the %d "
               "rounds\n# paired %-10s",
               rounds, "Grid");
        for (int i = 1; i < NMETHODS; i++) {
            if (want[i]) {
                printf("%12s", all_methods[i].name);
            }
        }
        printf("\n");
        for (int si = 0; si < nsizes; si++) {
            printf("# paired %-10d", sizes[si]);
            for (int i = 1; i < NMETHODS; i++) {
                if (want[i]) {
                    printf("%12.3f", paired[si][i]);
                }
            }
            printf("\n");
        }
        /* A ratio near 1.0 whose middle half straddles it is a tie in
         * that sitting, not a win or a loss. */
        bool any_mpi = false;
        for (int i = 1; i < NMETHODS; i++) {
            any_mpi = any_mpi || want[i];
        }
        if (any_mpi) {
            printf("# Spread: the middle half of the %d rounds' ratios "
                   "against MPI's best (the ratio column's method): the "
                   "lower and upper quartiles\n# spread %-10s%12s%12s\n",
                   rounds, "Grid", "q1", "q3");
            for (int si = 0; si < nsizes; si++) {
                printf("# spread %-10d%12.3f%12.3f\n", sizes[si], spread[si][0],
                       spread[si][1]);
            }
        }
        fflush(stdout);
    }
    if (g_job != NULL) {
        rig_job_close(g_job);
    }
    MPI_Finalize();
    return 0;
}
