/* SPDX-License-Identifier: BSD-3-Clause */
/* rig_job_rails: every rail a rank names, made in one call, matched across
 * ranks whatever order each lists them in.
 *
 * Usage: test_together MODE [N]
 *   --graph (2-4)        a ring, a 2-D grid's edges (4 ranks), pairs with
 *                        two and three rails, random pairs and one-way
 *                        rails, listed in a random order per rank (pairs'
 *                        own rails in the same relative order at both
 *                        ends); bytes land where the lists say, ids agree
 *                        at both ends, a second call continues the pairs'
 *                        sequences, a rank may name nobody
 *   --bad (3)            bad input in one rank's request: that rank gets
 *                        "invalid:" naming the request, every other rank
 *                        "failed:" naming it, nobody hangs, no rail is
 *                        kept; then the same graph made right works
 *   --kill-before (3)    rank 2 dies before its call: ranks 0 and 1 wait
 *                        for it in the call's first exchange
 *   --kill-during [N [M]] (3) rank 2 dies while every rank is inside the
 *                        call (N rails per pair, default 300: the walk is
 *                        long enough for the death to land in it; M rails
 *                        between ranks 0 and 1, default N: with M large
 *                        their meetings, first in the walk's order, last
 *                        past the death, which then finds rank 2 waiting
 *                        for its first meeting, ranks 0 and 1 meeting)
 * The survivors of a kill must return "failed: ... rank 2 died" (or, over
 * UCX, "rank 2 is unreachable": mpitest.h's t_names_death) within
 * 2 s of the death, and end as rig/job.h says a failed job must.
 * mpitest.sh's timeout catches a hang. */
#include "mpitest.h"

#include <rig/wait.h>

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#define MAX_EDGES 4096
#define RUNS 4
#define TAG_TIME 4343
#define BOUND_MS 2000.0 /* the bound */

static rig_job *job;
static int me, size;
static const char *mode = "";

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double ms_since(uint64_t t0, uint64_t t1)
{
    return t1 > t0 ? (double)(t1 - t0) / 1e6 : 0.0;
}

/* ---- the graph ----------------------------------------------------------- */

/* Edge e carries L(e, 0) from a to b and L(e, 1) from b to a. */
typedef struct {
    int a, b;
} edge;

static edge edges[MAX_EDGES];
static int nedges;

static rig_transfer lists[MAX_EDGES][2][3];
static size_t nlist[MAX_EDGES][2];

static void list_make(int e)
{
    for (int d = 0; d < 2; d++) {
        /* Every fifth edge is one-way: nothing from b to a. */
        size_t n = d == 1 && e % 5 == 4 ? 0 : 1 + (size_t)((e + d) % 3);
        nlist[e][d] = n;
        for (size_t j = 0; j < n; j++) {
            lists[e][d][j] = (rig_transfer){
                .src = (int64_t)(64 * j + (size_t)(e % 4) * 8),
                .dst = (int64_t)(128 * j + (size_t)d * 16),
                .length = 8 + (int64_t)((e * 7 + (int)j * 3 + d) % 40),
            };
        }
    }
}

static void edge_add(int a, int b)
{
    if (nedges >= MAX_EDGES) {
        T_FAIL("more than %d edges", MAX_EDGES);
    }
    edges[nedges] = (edge){a, b};
    list_make(nedges);
    nedges++;
}

/* The same edges at every rank: a ring (two rails between the ranks of 2),
 * a 2 x 2 grid's edges at 4 ranks (pairs with two rails), a pair with
 * three, random pairs; among ranks [0, among) only. */
static void graph_make(int among, uint64_t seed)
{
    nedges = 0;
    if (among < 2) {
        return;
    }
    for (int r = 0; r < among; r++) {
        edge_add(r, (r + 1) % among);
    }
    if (among == 4) {
        edge_add(0, 2);
        edge_add(3, 1);
        edge_add(1, 0);
        edge_add(2, 3);
    }
    edge_add(among - 1, 0);
    for (int k = 0; k < 4; k++) {
        int a = (int)(t_rand(&seed) % (uint64_t)among);
        int b = (int)(t_rand(&seed) % (uint64_t)(among - 1));
        edge_add(a, b >= a ? b + 1 : b);
    }
}

/* This rank's requests: one per edge it is an end of, in a random order
 * of this rank's own; the rails of one pair in the same relative order
 * at both ends (ascending edges, or descending for some pairs). */
static size_t requests_make(rig_job_rail_request *q, int *edge_of,
                            uint64_t seed)
{
    size_t n = 0;
    for (int e = 0; e < nedges; e++) {
        int d = edges[e].a == me ? 0 : edges[e].b == me ? 1 : -1;
        if (d < 0) {
            continue;
        }
        int peer = d == 0 ? edges[e].b : edges[e].a;
        q[n] = (rig_job_rail_request){
            .peer = peer,
            .send = lists[e][d],
            .nsend = nlist[e][d],
            .receive = lists[e][1 - d],
            .nreceive = nlist[e][1 - d],
        };
        edge_of[n++] = e;
    }
    /* Shuffle (Fisher-Yates, this rank's seed). */
    seed ^= (uint64_t)me * 0x9E3779B97F4A7C15ull;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(t_rand(&seed) % i);
        rig_job_rail_request tq = q[i - 1];
        q[i - 1] = q[j];
        q[j] = tq;
        int te = edge_of[i - 1];
        edge_of[i - 1] = edge_of[j];
        edge_of[j] = te;
    }
    /* Within each pair, put the edges back in the pair's order, in the
     * places the shuffle gave that pair's requests. */
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++) {
            if (q[j].peer != q[i].peer) {
                continue;
            }
            int lo = me < q[i].peer ? me : q[i].peer;
            int hi = me + q[i].peer - lo;
            bool descending = (lo + hi) % 2 == 1;
            if (descending ? edge_of[j] > edge_of[i]
                           : edge_of[j] < edge_of[i]) {
                rig_job_rail_request tq = q[i];
                q[i] = q[j];
                q[j] = tq;
                int te = edge_of[i];
                edge_of[i] = edge_of[j];
                edge_of[j] = te;
            }
        }
    }
    return n;
}

/* RUNS runs over every rail: bytes land where the lists say. */
static void carry(rig_rail **rails, const rig_job_rail_request *q,
                  const int *edge_of, size_t n)
{
    for (uint64_t r = 0; r < RUNS; r++) {
        for (size_t i = 0; i < n; i++) {
            if (q[i].nsend == 0) {
                continue;
            }
            int e = edge_of[i];
            unsigned salt = (unsigned)(2 * e + (edges[e].a == me ? 0 : 1));
            rig_runs s = {.end = rig_rail_local(rails[i]),
                          .nsend = q[i].nsend,
                          .nreceive = q[i].nreceive};
            rig_area out;
            T_EQ(rig_run_outbound(&s, r, &out), RIG_REACHED);
            t_fill(out.base, out.len, r, salt);
            T_EQ(rig_run_ready(&s, r), RIG_REACHED);
        }
        for (size_t i = 0; i < n; i++) {
            if (q[i].nreceive == 0) {
                continue;
            }
            int e = edge_of[i];
            unsigned salt = (unsigned)(2 * e + (edges[e].a == me ? 1 : 0));
            rig_runs s = {.end = rig_rail_local(rails[i]),
                          .nsend = q[i].nsend,
                          .nreceive = q[i].nreceive};
            rig_area in;
            T_EQ(rig_run_inbound(&s, r, &in), RIG_REACHED);
            for (size_t j = 0; j < q[i].nreceive; j++) {
                const rig_transfer *t = &q[i].receive[j];
                T_LANDED(in.base + t->dst, t->src, t->length, r, salt);
            }
        }
        /* Every rank read run r before any signals run r + 1 (one-way
         * rails have no answer to wait for). */
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

/* Both ends of every edge hold the same rail id, and no two edges do. */
static void ids_agree(rig_rail **rails, const int *edge_of, size_t n)
{
    size_t len = (2 * (size_t)nedges + 1) * sizeof(int64_t);
    int64_t *id = malloc(len);
    int64_t *all = malloc(len);
    T_ASSERT(id != NULL && all != NULL);
    for (int i = 0; i < 2 * nedges; i++) {
        id[i] = -1;
    }
    for (size_t i = 0; i < n; i++) {
        int e = edge_of[i];
        id[2 * e + (edges[e].a == me ? 0 : 1)] = rig_rail_id(rails[i]);
        T_EQ(rig_job_rail_peer(job, rails[i]),
             edges[e].a == me ? edges[e].b : edges[e].a);
    }
    MPI_Allreduce(id, all, 2 * nedges, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    for (int e = 0; e < nedges; e++) {
        T_ASSERT(all[2 * e] >= 0);
        T_EQ(all[2 * e], all[2 * e + 1]);
        for (int f = 0; f < e; f++) {
            if (all[2 * f] == all[2 * e]) {
                T_FAIL("edges %d and %d share rail id %lld", f, e,
                       (long long)all[2 * e]);
            }
        }
    }
    free(id);
    free(all);
}

/* Makes this rank's rails of the graph, carries, checks; returns how
 * many this rank has. */
static size_t graph_round(int among, uint64_t seed)
{
    static rig_job_rail_request q[MAX_EDGES];
    static int edge_of[MAX_EDGES];
    static rig_rail *rails[MAX_EDGES];
    graph_make(among, seed);
    size_t n = requests_make(q, edge_of, seed + 1);
    memset(rails, 0, sizeof(rails));
    /* A rank with nothing to make may pass NULL lists. */
    T_OK(rig_job_rails(job, n > 0 ? q : NULL, n, n > 0 ? rails : NULL, &t_err));
    for (size_t i = 0; i < n; i++) {
        T_ASSERT(rails[i] != NULL);
    }
    ids_agree(rails, edge_of, n);
    carry(rails, q, edge_of, n);
    MPI_Barrier(MPI_COMM_WORLD);
    for (size_t i = 0; i < n; i++) {
        rig_rail_release(rails[i]);
    }
    return n;
}

static void test_graph(void)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        size_t n = graph_round(size, seed);
        printf("rank %d: seed %llu: %zu rails of %d edges\n", me,
               (unsigned long long)seed, n, nedges);
    }
    /* The last rank names nobody (n = 0) but takes part. */
    size_t n = graph_round(size - 1, 7);
    T_ASSERT(me != size - 1 || n == 0);
}

/* ---- bad input ----------------------------------------------------------- */

/* A triangle's requests, in the order of the peers (me + 1, me + 2). */
static const rig_transfer t8[1] = {{0, 0, 8}};
static const rig_transfer t16[1] = {{0, 0, 16}};
static const rig_transfer t_len0[1] = {{0, 0, 0}};

static size_t triangle(rig_job_rail_request *q)
{
    for (int k = 0; k < 2; k++) {
        q[k] = (rig_job_rail_request){.peer = (me + 1 + k) % 3,
                                      .send = t8,
                                      .nsend = 1,
                                      .receive = t8,
                                      .nreceive = 1};
    }
    return 2;
}

typedef struct {
    const char *name;
    int who; /* the rank whose input is bad */
    /* Changes that rank's requests (and *out, *n); may touch others'. */
    void (*spoil)(rig_job_rail_request *q, size_t *n, rig_rail ***out,
                  const rig_job_rail_request **reqs);
    const char *mine;    /* what the bad rank's error has ("invalid: ") */
    const char *partner; /* the message at rank partner_rank, or NULL */
    int partner_rank;
    const char *others; /* what every other rank's has ("failed: ") */
} bad_case;

static void sp_len0(rig_job_rail_request *q, size_t *n, rig_rail ***out,
                    const rig_job_rail_request **reqs)
{
    (void)n, (void)out, (void)reqs;
    q[1].send = t_len0;
}
static void sp_range(rig_job_rail_request *q, size_t *n, rig_rail ***out,
                     const rig_job_rail_request **reqs)
{
    (void)n, (void)out, (void)reqs;
    q[0].peer = 7;
}
static void sp_self(rig_job_rail_request *q, size_t *n, rig_rail ***out,
                    const rig_job_rail_request **reqs)
{
    (void)n, (void)out, (void)reqs;
    q[1].peer = me;
}
static void sp_negative(rig_job_rail_request *q, size_t *n, rig_rail ***out,
                        const rig_job_rail_request **reqs)
{
    (void)n, (void)out, (void)reqs;
    q[1].peer = -1;
}
static void sp_null_list(rig_job_rail_request *q, size_t *n, rig_rail ***out,
                         const rig_job_rail_request **reqs)
{
    (void)n, (void)out, (void)reqs;
    q[0].send = NULL;
    q[0].nsend = 2;
}
static void sp_null_out(rig_job_rail_request *q, size_t *n, rig_rail ***out,
                        const rig_job_rail_request **reqs)
{
    (void)q, (void)n, (void)reqs;
    *out = NULL;
}
static void sp_null_reqs(rig_job_rail_request *q, size_t *n, rig_rail ***out,
                         const rig_job_rail_request **reqs)
{
    (void)q, (void)n, (void)out;
    *reqs = NULL;
}
/* Rank 0 names rank 1 twice, rank 1 names it once. */
static void sp_count(rig_job_rail_request *q, size_t *n, rig_rail ***out,
                     const rig_job_rail_request **reqs)
{
    (void)out, (void)reqs;
    q[2] = q[0]; /* q[0] names rank 1 */
    *n = 3;
}
/* Rank 2 does not name rank 0 (its q[0] names 0). */
static void sp_none(rig_job_rail_request *q, size_t *n, rig_rail ***out,
                    const rig_job_rail_request **reqs)
{
    (void)out, (void)reqs;
    q[0] = q[1];
    *n = 1;
}
/* Rank 0 sends 16 bytes to rank 1, which expects 8: found in the walk. */
static void sp_differ(rig_job_rail_request *q, size_t *n, rig_rail ***out,
                      const rig_job_rail_request **reqs)
{
    (void)n, (void)out, (void)reqs;
    q[0].send = t16;
}

static const bad_case bad_cases[] = {
    {"length 0", 1, sp_len0,
     "invalid: request 1 (peer 0): send[0] has length 0", NULL, -1,
     "failed: rank 1 refused its request 1"},
    {"peer out of range", 2, sp_range,
     "invalid: request 0: peer 7 is out of range [0, 3)", NULL, -1,
     "failed: rank 2 refused its request 0"},
    {"peer -1", 0, sp_negative, "invalid: request 1: peer -1 is out of range",
     NULL, -1, "failed: rank 0 refused its request 1"},
    {"peer is this rank", 0, sp_self, "invalid: request 1: peer 0 is this rank",
     NULL, -1, "failed: rank 0 refused its request 1"},
    {"NULL list", 1, sp_null_list,
     "invalid: request 0 (peer 2): send is NULL with 2 transfers", NULL, -1,
     "failed: rank 1 refused its request 0"},
    {"NULL out", 2, sp_null_out, "invalid: out is NULL with n > 0", NULL, -1,
     "failed: rank 2 refused its requests"},
    {"NULL reqs", 0, sp_null_reqs, "invalid: reqs is NULL with n > 0", NULL, -1,
     "failed: rank 0 refused its requests"},
    {"counts differ", 0, sp_count,
     "invalid: rank 1 names this rank in 1 request, this rank names it in 2 "
     "(request 0 is one)",
     "invalid: rank 0 names this rank in 2 requests, this rank names it in 1 "
     "(request 1 is one)",
     1, "failed: rank 0 refused its requests"},
    {"a peer named by none", 2, sp_none,
     "invalid: rank 0 names this rank in 1 request, this rank names it in "
     "none",
     "invalid: rank 2 names this rank in 0 requests, this rank names it in 1 "
     "(request 1 is one)",
     0, "failed: rank 0 refused its requests"},
    {"lists differ", 0, sp_differ,
     "invalid: request 0 (peer 1): rail between ranks 0 and 1: send[0] of "
     "rank 0",
     "invalid: request 1 (peer 0): rail between ranks 0 and 1: send[0] of "
     "rank 0",
     1, "failed: rank 0 could not make the rail of its request 0"},
};

/* One case at every rank; with_err false: err NULL (the same outcome,
 * no message). */
static void bad_run(const bad_case *c, bool with_err)
{
    rig_job_rail_request q[3];
    size_t n = triangle(q);
    rig_rail *rails[3] = {NULL, NULL, NULL};
    rig_rail **out = rails;
    const rig_job_rail_request *reqs = q;
    if (me == c->who) {
        c->spoil(q, &n, &out, &reqs);
    }
    char *err = NULL;
    uint64_t t0 = now_ns();
    bool ok = rig_job_rails(job, reqs, n, out, with_err ? &err : NULL);
    double ms = ms_since(t0, now_ns());
    if (ok) {
        T_FAIL("%s: rig_job_rails succeeded", c->name);
    }
    for (int i = 0; i < 3; i++) {
        T_ASSERT(rails[i] == NULL); /* written only on success */
    }
    if (!with_err) {
        return;
    }
    const char *want = me == c->who ? c->mine
                       : c->partner != NULL && me == c->partner_rank
                           ? c->partner
                           : c->others;
    if (err == NULL || strncmp(err, want, strlen(want)) != 0) {
        T_FAIL("%s: rank %d's message \"%s\" does not start with \"%s\"",
               c->name, me, err != NULL ? err : "(none)", want);
    }
    printf("rank %d: %s: %.1f ms: %s\n", me, c->name, ms, err);
    free(err);
}

static void test_bad(void)
{
    /* A job that is not open: refused here, at once, alone. */
    rig_job_rail_request q[3];
    size_t n = triangle(q);
    rig_rail *rails[3] = {NULL, NULL, NULL};
    T_ERR(rig_job_rails(NULL, q, n, rails, &t_err), "invalid:", "job", NULL);
    T_ASSERT(!rig_job_rails(NULL, q, n, rails, NULL));
    T_ASSERT(rails[0] == NULL);

    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        bad_run(&bad_cases[i], true);
        bad_run(&bad_cases[i], false);
    }
    /* Nobody was left out of step: the graph made right works, and the
     * pairs' rails still meet their own (ids agree at both ends). */
    T_OK(rig_job_rails(job, q, n, rails, &t_err));
    int64_t id[2] = {rig_rail_id(rails[0]), rig_rail_id(rails[1])};
    int64_t peer_id[2];
    /* rails[0] names me + 1, whose rails[1] names me (me + 1 + 2 = me). */
    MPI_Sendrecv(&id[0], 1, MPI_INT64_T, (me + 1) % 3, 9, &peer_id[1], 1,
                 MPI_INT64_T, (me + 2) % 3, 9, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    T_EQ(peer_id[1], id[1]);
    rig_runs s[2];
    for (int k = 0; k < 2; k++) {
        s[k] = (rig_runs){
            .end = rig_rail_local(rails[k]), .nsend = 1, .nreceive = 1};
        rig_area out;
        T_EQ(rig_run_outbound(&s[k], 0, &out), RIG_REACHED);
        memset(out.base, me * 4 + k, 8);
        T_EQ(rig_run_ready(&s[k], 0), RIG_REACHED);
    }
    for (int k = 0; k < 2; k++) {
        rig_area in;
        T_EQ(rig_run_inbound(&s[k], 0, &in), RIG_REACHED);
        int from = q[k].peer;
        /* the peer's rail to me is its k' with (from + 1 + k') % 3 == me */
        int kk = ((me - from - 1) % 3 + 3) % 3;
        T_EQ(in.base[0], (uint8_t)(from * 4 + kk));
        T_EQ(in.base[7], (uint8_t)(from * 4 + kk));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    rig_rail_release(rails[0]);
    rig_rail_release(rails[1]);
}

/* ---- a death during the call --------------------------------------------- */

/* The death's time, announced by the victim once every other rank is
 * about to enter its call: each survivor tells the victim the time it
 * enters (enter_ns, taken before its word leaves) and takes the victim's
 * time after its own call returned (the receive is posted before, so the
 * word lands while the call drives MPI).  The victim dies delay_ns after
 * it heard from the last survivor: so every survivor is inside its call
 * when the death comes however late the machine's load let it get there
 * -- an announced time that a loaded survivor reached after the death
 * made the check that it was inside fail (a survivor may well be 20 ms
 * late under load), and a death before the call is another case. */
#define TAG_ENTER 4344

static uint64_t victim_time(int victim, uint64_t delay_ns)
{
    for (int r = 0; r < size; r++) {
        if (r != victim) {
            uint64_t entered = 0;
            MPI_Recv(&entered, 1, MPI_UINT64_T, r, TAG_ENTER, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        }
    }
    uint64_t t = now_ns() + delay_ns;
    for (int r = 0; r < size; r++) {
        if (r != victim) {
            MPI_Send(&t, 1, MPI_UINT64_T, r, TAG_TIME, MPI_COMM_WORLD);
        }
    }
    return t;
}

static void survivor_enters(int victim, uint64_t enter_ns, uint64_t *t,
                            MPI_Request *req)
{
    MPI_Irecv(t, 1, MPI_UINT64_T, victim, TAG_TIME, MPI_COMM_WORLD, req);
    MPI_Send(&enter_ns, 1, MPI_UINT64_T, victim, TAG_ENTER, MPI_COMM_WORLD);
}

/* The victim's time, sent before it died (a hang guard of 10 s). */
static uint64_t survivor_time(uint64_t *t, MPI_Request *req)
{
    int done = 0;
    uint64_t until = now_ns() + 10000000000u;
    while (MPI_Test(req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done &&
           now_ns() < until) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (!done) {
        T_FAIL("no death time from rank 2");
    }
    return *t;
}

static void die_at(uint64_t t)
{
    fflush(NULL);
    for (uint64_t n = now_ns(); n < t; n = now_ns()) {
        uint64_t d = t - n;
        struct timespec ts = {(time_t)(d / 1000000000u),
                              (long)(d % 1000000000u)};
        nanosleep(&ts, NULL);
    }
    raise(SIGKILL);
    for (;;) {
        pause();
    }
}

static void *killer(void *arg)
{
    die_at(*(uint64_t *)arg);
    return NULL;
}

/* per_pair rails between every two ranks (first_pair between ranks 0 and
 * 1), listed by peer (descending: unlike the walk's order). */
static size_t all_pairs(rig_job_rail_request *q, int per_pair, int first_pair)
{
    size_t n = 0;
    for (int p = size - 1; p >= 0; p--) {
        int rails = p + me == 1 ? first_pair : per_pair;
        for (int k = 0; p != me && k < rails; k++) {
            q[n++] = (rig_job_rail_request){.peer = p,
                                            .send = t8,
                                            .nsend = 1,
                                            .receive = t8,
                                            .nreceive = 1};
        }
    }
    return n;
}

static void test_kill(bool during, int per_pair, int first_pair)
{
    static rig_job_rail_request q[MAX_EDGES];
    static rig_rail *rails[MAX_EDGES];
    size_t n = all_pairs(q, per_pair, first_pair);
    if (me == 2) {
        uint64_t t_kill = victim_time(2, during ? 20000000u : 200000000u);
        if (!during) {
            die_at(t_kill);
        }
        pthread_t th;
        T_ASSERT(pthread_create(&th, NULL, killer, &t_kill) == 0);
        rig_job_rails(job, q, n, rails, NULL);
        die_at(t_kill); /* the call ended first: die anyway */
    }
    char *msg = NULL;
    uint64_t t_kill = 0;
    MPI_Request req;
    uint64_t t0 = now_ns();
    survivor_enters(2, t0, &t_kill, &req);
    T_ERR(rig_job_rails(job, q, n, rails, &t_err), "failed:", "", &msg);
    uint64_t t1 = now_ns();
    if (!t_names_death(msg, 2, t_transport_ucx())) {
        T_FAIL("rig_job_rails: \"%s\" does not name rank 2's death", msg);
    }
    t_kill = survivor_time(&t_kill, &req);
    T_ASSERT(t0 < t_kill); /* it was inside the call when the death came */
    double ms = ms_since(t_kill, t1);
    printf("UNBLOCK %s rank %d: rig_job_rails failed %.1f ms after the death "
           "(%.1f ms in the call): %s\n",
           mode, me, ms, ms_since(t0, t1), msg);
    free(msg);
    T_ASSERT(ms < BOUND_MS);
    for (size_t i = 0; i < n; i++) {
        T_ASSERT(rails[i] == NULL);
    }
    T_ASSERT(rig_job_failed(job));
    /* A later call fails at once, posting nothing. */
    t0 = now_ns();
    T_ERR(rig_job_rails(job, q, n, rails, &t_err), "failed:", "", &msg);
    if (!t_names_death(msg, 2, t_transport_ucx())) {
        T_FAIL("a later rig_job_rails: \"%s\" does not name rank 2's death",
               msg);
    }
    free(msg);
    T_ASSERT(ms_since(t0, now_ns()) < BOUND_MS);
    /* The close gives up on the dead rank: no MPI_Finalize (rig/job.h). */
    t0 = now_ns();
    T_ASSERT(!rig_job_close(job));
    T_ASSERT(ms_since(t0, now_ns()) < BOUND_MS);
    printf("rank %d: PASS %s\n", me, mode);
    fflush(NULL);
    exit(EXIT_SUCCESS);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    me = t_rank;
    setvbuf(stdout, NULL, _IOLBF, 0);
    mode = argc > 1 ? argv[1] : "--graph";
    long arg = argc > 2 ? atol(argv[2]) : 0;
    long arg2 = argc > 3 ? atol(argv[3]) : 0;
    bool graph = strcmp(mode, "--graph") == 0;
    bool three = strcmp(mode, "--bad") == 0 ||
                 strcmp(mode, "--kill-before") == 0 ||
                 strcmp(mode, "--kill-during") == 0;
    if ((!graph && !three) || (graph && (size < 2 || size > 4)) ||
        (three && size != 3)) {
        if (me == 0) {
            printf("FAIL: mode \"%s\" unknown, or wrong rank count %d\n", mode,
                   size);
        }
        MPI_Finalize();
        return 1;
    }
    job = t_job_open();
    if (graph) {
        test_graph();
    } else if (strcmp(mode, "--bad") == 0) {
        test_bad();
    } else {
        long per_pair = arg > 0 ? arg : 300;
        long first_pair = arg2 > 0 ? arg2 : per_pair;
        /* Rank 0's requests: per_pair naming rank 2, first_pair rank 1. */
        if (per_pair > MAX_EDGES || first_pair > MAX_EDGES ||
            per_pair + (per_pair > first_pair ? per_pair : first_pair) >
                MAX_EDGES) {
            T_FAIL("at most %d rails per rank", MAX_EDGES);
        }
        test_kill(strcmp(mode, "--kill-during") == 0, (int)per_pair,
                  (int)first_pair);
    }
    T_ASSERT(rig_job_close(job));
    printf("rank %d: PASS %s\n", me, mode);
    MPI_Finalize();
    return 0;
}
