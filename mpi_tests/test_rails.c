/* SPDX-License-Identifier: BSD-3-Clause */
/* Rails between ranks carry bytes exactly: ping-pong, random transfer sets,
 * all pairs, many rails, ready from threads, ready_fn, the MPI window.
 *
 * Run by mpitest.sh at 2, 3 and 4 ranks, over shared memory and over
 * RIG_UCX_TLS=tcp,self.  Arguments: --small N (ping-pong runs at sizes up to
 * 64 B, default 10000), --sets N (random transfer sets, default 30). */
#include "mpitest.h"

#include <pthread.h>
#include <time.h>

static rig_job *job;
static int rank, size;
static long small_runs = 10000;
static long sets = 30;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static uint8_t *copy_of(rig_area a, unsigned k)
{
    return rig_area_copy(a, k).base;
}

/* ---- ping-pong ----------------------------------------------------------- */

static long runs_for(size_t bytes, bool full)
{
    if (!full) {
        return bytes <= 65536 ? 50 : 4;
    }
    if (bytes <= 64) {
        return small_runs;
    }
    if (bytes <= 4096) {
        return 1000;
    }
    if (bytes <= 65536) {
        return 200;
    }
    return bytes <= 1048576 ? 30 : 10;
}

/* One rail per size; the lower rank starts.  Returns the mean half round
 * trip of the last size in microseconds. */
static double pingpong(int peer, size_t bytes, long runs)
{
    rig_transfer t = {0, 0, (int64_t)bytes};
    rig_rail *rail;
    T_OK(rig_job_rail(job, peer, &t, 1, &t, 1, &rail, &t_err));
    rig_end *e = rig_rail_local(rail);
    rig_area out = rig_end_outbound(e), in = rig_end_inbound(e);
    T_EQ(out.len, 2 * ((bytes + 255) / 256 * 256));
    T_EQ(in.len, out.len);
    T_EQ((uintptr_t)out.base % 4096, 0);
    T_EQ((uintptr_t)in.base % 4096, 0);
    bool first = rank < peer;
    unsigned me = (unsigned)rank, them = (unsigned)peer;
    double t0 = now_us();
    for (long it = 0; it < runs; it++) {
        unsigned k = (unsigned)(it % 2);
        uint64_t c = (uint64_t)it + 1;
        if (!first) {
            T_ASSERT(rig_end_wait_arrived(e, c));
            T_LANDED(copy_of(in, k), 0, bytes, it, them);
        }
        if (it >= 2) {
            T_ASSERT(rig_end_wait_sent(e, c - 2));
        }
        t_fill(copy_of(out, k), bytes, (uint64_t)it, me);
        rig_end_ready(e, c);
        if (first) {
            T_ASSERT(rig_end_wait_arrived(e, c));
            T_LANDED(copy_of(in, k), 0, bytes, it, them);
        }
    }
    double half = (now_us() - t0) / (2.0 * (double)runs);
    T_ASSERT(rig_end_wait_sent(e, (uint64_t)runs));
    T_EQ(rig_end_ready_count(e), runs);
    T_EQ(rig_end_sent(e), runs);
    T_EQ(rig_end_arrived(e), runs);
    rig_rail_release(rail);
    return half;
}

static double mpi_pingpong(int peer, long runs)
{
    uint64_t buf = 0;
    double t0 = now_us();
    for (long it = 0; it < runs; it++) {
        if (rank < peer) {
            MPI_Send(&buf, 8, MPI_BYTE, peer, 9, MPI_COMM_WORLD);
            MPI_Recv(&buf, 8, MPI_BYTE, peer, 9, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&buf, 8, MPI_BYTE, peer, 9, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            MPI_Send(&buf, 8, MPI_BYTE, peer, 9, MPI_COMM_WORLD);
        }
    }
    return (now_us() - t0) / (2.0 * (double)runs);
}

/* The cost of rig_end_ready on the calling thread (an 8-byte transfer,
 * carried inline when the peer's end is mapped).  Informational. */
static void ready_cost(int peer)
{
    const long n = 20000;
    rig_transfer t = {0, 0, 8};
    rig_rail *rail;
    T_OK(rig_job_rail(job, peer, &t, 1, &t, 1, &rail, &t_err));
    rig_end *e = rig_rail_local(rail);
    double t0 = now_us();
    for (long c = 1; c <= n; c++) {
        rig_end_ready(e, (uint64_t)c);
    }
    double ns = (now_us() - t0) * 1e3 / (double)n;
    T_ASSERT(rig_end_wait_sent(e, (uint64_t)n));
    T_ASSERT(rig_end_wait_arrived(e, (uint64_t)n));
    printf("info: rank %d: rig_end_ready of one 8-byte transfer: %.0f ns\n",
           rank, ns);
    MPI_Sendrecv(MPI_BOTTOM, 0, MPI_BYTE, peer, 7, MPI_BOTTOM, 0, MPI_BYTE,
                 peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    rig_rail_release(rail);
}

static void test_pingpong(void)
{
    long total = 0;
    for (int r = 0; r < t_rounds(size); r++) {
        int peer = t_partner(rank, size, r);
        if (peer >= 0) {
            for (size_t b = 1; b <= ((size_t)4 << 20); b *= 2) {
                long runs = runs_for(b, r == 0);
                double half = pingpong(peer, b, runs);
                total += runs;
                if (b == 8 && r == 0 && rank < peer) {
                    double mpi = mpi_pingpong(peer, runs);
                    printf("info: ranks %d-%d 8-byte half round trip: rail "
                           "%.2f us, MPI_Send/Recv %.2f us\n",
                           rank, peer, half, mpi);
                } else if (b == 8 && r == 0) {
                    mpi_pingpong(peer, runs);
                }
                if (b == 8 && r == 0) {
                    ready_cost(peer);
                }
            }
        }
        t_barrier();
    }
    if (rank == 0) {
        printf("ok: ping-pong, 1 B to 4 MiB, %ld runs at rank 0\n", total);
    }
}

/* ---- random transfer sets ----------------------------------------------- */

/* n in [1, 64] transfers, random src in a 4 KiB window (sources may
 * overlap), destinations disjoint with random gaps, lengths 1 to 512 and
 * sometimes to 8 KiB.  A third of the lists are packed instead: transfers
 * back to back in both src and dst (which the rail carries as one copy
 * when a whole stretch is readied), with a gap now and then that splits
 * them into several stretches. */
static size_t random_list(uint64_t *s, rig_transfer *t)
{
    size_t n = 1 + t_rand(s) % 64;
    bool packed = t_rand(s) % 3 == 0;
    int64_t cursor = (int64_t)(t_rand(s) % 300);
    int64_t src = (int64_t)(t_rand(s) % 300);
    for (size_t j = 0; j < n; j++) {
        int64_t len = (t_rand(s) % 8 == 0) ? 1 + (int64_t)(t_rand(s) % 8192)
                                           : 1 + (int64_t)(t_rand(s) % 512);
        if (packed) {
            int64_t gap =
                t_rand(s) % 8 == 0 ? 1 + (int64_t)(t_rand(s) % 64) : 0;
            t[j].src = src + gap;
            t[j].dst = cursor + gap;
            src = t[j].src + len;
        } else {
            t[j].src = (int64_t)(t_rand(s) % 4096);
            t[j].dst = cursor + (int64_t)(t_rand(s) % 64);
        }
        t[j].length = len;
        cursor = t[j].dst + len;
    }
    return n;
}

/* Readies run r's counts in random steps, some through ready_fn. */
static void ready_run(rig_end *e, uint64_t *s, uint64_t r, size_t n)
{
    uint64_t c = r * n, end = (r + 1) * n;
    rig_ready_fn fn = rig_end_ready_fn(e);
    void *counts = rig_end_counts(e).base;
    while (c < end) {
        uint64_t step = 1 + t_rand(s) % (end - c);
        if (t_rand(s) % 4 == 0) {
            step = end - c; /* the whole run at once */
        }
        c += step;
        if (t_rand(s) % 3 == 0) {
            fn(counts, c);
        } else {
            rig_end_ready(e, c);
        }
    }
}

static long random_pair(int peer, long set, long runs)
{
    int lo = rank < peer ? rank : peer, hi = rank < peer ? peer : rank;
    uint64_t seed = ((uint64_t)set << 32) ^ ((uint64_t)lo << 16) ^ (uint64_t)hi;
    rig_transfer a[64], b[64];
    size_t na = random_list(&seed, a), nb = random_list(&seed, b);
    const rig_transfer *send = rank == lo ? a : b;
    const rig_transfer *recv = rank == lo ? b : a;
    size_t ns = rank == lo ? na : nb, nr = rank == lo ? nb : na;
    rig_rail *rail;
    T_OK(rig_job_rail(job, peer, send, ns, recv, nr, &rail, &t_err));
    rig_end *e = rig_rail_local(rail);
    T_EQ(rig_end_outbound(e).len, 2 * rig_copy_bytes(send, ns, RIG_BY_SRC));
    T_EQ(rig_end_inbound(e).len, 2 * rig_copy_bytes(recv, nr, RIG_BY_DST));
    uint64_t rs = seed ^ (uint64_t)rank * 977;
    for (long r = 0; r < runs; r++) {
        unsigned k = (unsigned)(r % 2);
        if (r >= 2) {
            T_ASSERT(rig_end_wait_sent(e, (uint64_t)(r - 1) * ns));
        }
        rig_area out = rig_area_copy(rig_end_outbound(e), k);
        t_fill(out.base, out.len, (uint64_t)r, (unsigned)rank);
        ready_run(e, &rs, (uint64_t)r, ns);
        T_ASSERT(rig_end_wait_arrived(e, (uint64_t)(r + 1) * nr));
        uint8_t *in = copy_of(rig_end_inbound(e), k);
        for (size_t j = 0; j < nr; j++) {
            T_LANDED(in + recv[j].dst, recv[j].src, recv[j].length, (uint64_t)r,
                     (unsigned)peer);
        }
    }
    T_ASSERT(rig_end_wait_sent(e, (uint64_t)runs * ns));
    T_EQ(rig_end_ready_count(e), (uint64_t)runs * ns);
    T_EQ(rig_end_sent(e), (uint64_t)runs * ns);
    T_EQ(rig_end_arrived(e), (uint64_t)runs * nr);
    /* Keep the peer from finding its last run overwritten: both done. */
    MPI_Sendrecv(MPI_BOTTOM, 0, MPI_BYTE, peer, 7, MPI_BOTTOM, 0, MPI_BYTE,
                 peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    rig_rail_release(rail);
    return runs;
}

static void test_random(void)
{
    long total = 0;
    for (int r = 0; r < t_rounds(size); r++) {
        int peer = t_partner(rank, size, r);
        for (long s = 0; peer >= 0 && s < sets; s++) {
            total += random_pair(peer, s * 16 + r, 20);
        }
        t_barrier();
    }
    if (rank == 0) {
        printf("ok: random transfer sets, %ld runs at rank 0\n", total);
    }
}

/* ---- all pairs ----------------------------------------------------------- */

static void test_allpairs(void)
{
    rig_rail **rails = calloc((size_t)size, sizeof(*rails));
    T_ASSERT(rails != NULL);
    /* One global order of pairs: no cycle of waits. */
    for (int a = 0; a < size; a++) {
        for (int b = a + 1; b < size; b++) {
            if (rank != a && rank != b) {
                continue;
            }
            int peer = rank == a ? b : a;
            rig_transfer t[2] = {{0, 0, 24}, {100, 40, 1000}};
            T_OK(rig_job_rail(job, peer, t, 2, t, 2, &rails[peer], &t_err));
            T_EQ(rig_job_rail_peer(job, rails[peer]), peer);
        }
    }
    /* Ids: equal at both ends, unique in the job. */
    int64_t *ids = calloc((size_t)size * (size_t)size, sizeof(int64_t));
    int64_t *mine = calloc((size_t)size, sizeof(int64_t));
    T_ASSERT(ids != NULL && mine != NULL);
    for (int p = 0; p < size; p++) {
        mine[p] = p == rank ? -1 : rig_rail_id(rails[p]);
    }
    MPI_Allgather(mine, size, MPI_INT64_T, ids, size, MPI_INT64_T,
                  MPI_COMM_WORLD);
    for (int a = 0; a < size; a++) {
        for (int b = 0; b < size; b++) {
            if (a == b) {
                continue;
            }
            T_EQ(ids[a * size + b], ids[b * size + a]);
            for (int c = 0; c < size; c++) {
                for (int d = 0; d < size; d++) {
                    if (c != d && !((a == c && b == d) || (a == d && b == c))) {
                        T_ASSERT(ids[a * size + b] != ids[c * size + d]);
                    }
                }
            }
        }
    }
    for (long r = 0; r < 100; r++) {
        unsigned k = (unsigned)(r % 2);
        for (int p = 0; p < size; p++) {
            if (p == rank) {
                continue;
            }
            rig_end *e = rig_rail_local(rails[p]);
            if (r >= 2) {
                T_ASSERT(rig_end_wait_sent(e, (uint64_t)(r - 1) * 2));
            }
            rig_area out = rig_area_copy(rig_end_outbound(e), k);
            t_fill(out.base, out.len, (uint64_t)r, (unsigned)rank);
            rig_end_ready(e, (uint64_t)(r + 1) * 2);
        }
        for (int p = 0; p < size; p++) {
            if (p == rank) {
                continue;
            }
            rig_end *e = rig_rail_local(rails[p]);
            T_ASSERT(rig_end_wait_arrived(e, (uint64_t)(r + 1) * 2));
            uint8_t *in = copy_of(rig_end_inbound(e), k);
            T_LANDED(in, 0, 24, r, (unsigned)p);
            T_LANDED(in + 40, 100, 1000, r, (unsigned)p);
        }
    }
    t_barrier();
    for (int p = 0; p < size; p++) {
        rig_rail_release(rails[p]);
    }
    free(mine);
    free(ids);
    free(rails);
    if (rank == 0) {
        printf("ok: all-pairs rails at %d ranks, 100 runs each\n", size);
    }
}

/* ---- 1,000 rails between one pair ---------------------------------------- */

static void test_many(void)
{
    enum { N = 1000 };
    if (rank < 2) {
        int peer = 1 - rank;
        rig_rail **rails = calloc(N, sizeof(*rails));
        int64_t *ids = calloc(N, sizeof(int64_t));
        int64_t *theirs = calloc(N, sizeof(int64_t));
        T_ASSERT(rails != NULL && ids != NULL && theirs != NULL);
        for (int i = 0; i < N; i++) {
            /* Different shapes, so a mix-up of rails shows. */
            rig_transfer t = {i % 7, 8 * (i % 5), 8 + i % 13};
            T_OK(rig_job_rail(job, peer, &t, 1, &t, 1, &rails[i], &t_err));
            ids[i] = rig_rail_id(rails[i]);
            for (int j = 0; j < i; j++) {
                T_ASSERT(ids[j] != ids[i]);
            }
        }
        MPI_Sendrecv(ids, N, MPI_INT64_T, peer, 3, theirs, N, MPI_INT64_T, peer,
                     3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 0; i < N; i++) {
            T_EQ(ids[i], theirs[i]);
            rig_end *e = rig_rail_local(rails[i]);
            rig_area out = rig_area_copy(rig_end_outbound(e), 0);
            t_fill(out.base, out.len, (uint64_t)i, (unsigned)rank);
            rig_end_ready(e, 1);
        }
        for (int i = 0; i < N; i++) {
            rig_end *e = rig_rail_local(rails[i]);
            T_ASSERT(rig_end_wait_arrived(e, 1));
            uint8_t *in = copy_of(rig_end_inbound(e), 0);
            T_LANDED(in + 8 * (i % 5), i % 7, 8 + i % 13, (uint64_t)i,
                     (unsigned)peer);
        }
        MPI_Sendrecv(MPI_BOTTOM, 0, MPI_BYTE, peer, 7, MPI_BOTTOM, 0, MPI_BYTE,
                     peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 0; i < N; i++) {
            rig_rail_release(rails[i]);
        }
        free(theirs);
        free(ids);
        free(rails);
    }
    t_barrier();
    if (rank == 0) {
        printf("ok: 1000 rails between ranks 0 and 1\n");
    }
}

/* ---- ready from 4 threads ------------------------------------------------ */

enum { NT = 4, TN = 64 };

typedef struct {
    rig_end *e;
    int t;
    pthread_barrier_t *bar;
    long runs;
} thread_arg;

static void *ready_thread(void *p)
{
    thread_arg *a = p;
    for (long r = 0; r < a->runs; r++) {
        pthread_barrier_wait(a->bar); /* run r is written */
        for (int j = a->t; j < TN; j += NT) {
            rig_end_ready(a->e, (uint64_t)r * TN + (uint64_t)j + 1);
        }
        pthread_barrier_wait(a->bar); /* every count of run r readied */
    }
    return NULL;
}

static void test_threads(void)
{
    int peer = t_partner(rank, size, 0);
    if (peer >= 0) {
        rig_transfer t[TN];
        for (int j = 0; j < TN; j++) {
            t[j] = (rig_transfer){8 * j, 8 * (TN - 1 - j), 8};
        }
        rig_rail *rail;
        T_OK(rig_job_rail(job, peer, t, TN, t, TN, &rail, &t_err));
        rig_end *e = rig_rail_local(rail);
        const long runs = 300;
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, NT + 1);
        pthread_t th[NT];
        thread_arg args[NT];
        for (int i = 0; i < NT; i++) {
            args[i] = (thread_arg){e, i, &bar, runs};
            pthread_create(&th[i], NULL, ready_thread, &args[i]);
        }
        for (long r = 0; r < runs; r++) {
            unsigned k = (unsigned)(r % 2);
            if (r >= 2) {
                T_ASSERT(rig_end_wait_sent(e, (uint64_t)(r - 1) * TN));
            }
            rig_area out = rig_area_copy(rig_end_outbound(e), k);
            t_fill(out.base, out.len, (uint64_t)r, (unsigned)rank);
            pthread_barrier_wait(&bar);
            pthread_barrier_wait(&bar);
            T_ASSERT(rig_end_wait_arrived(e, (uint64_t)(r + 1) * TN));
            uint8_t *in = copy_of(rig_end_inbound(e), k);
            for (int j = 0; j < TN; j++) {
                T_LANDED(in + t[j].dst, t[j].src, 8, r, (unsigned)peer);
            }
        }
        for (int i = 0; i < NT; i++) {
            pthread_join(th[i], NULL);
        }
        pthread_barrier_destroy(&bar);
        T_ASSERT(rig_end_wait_sent(e, (uint64_t)runs * TN));
        T_EQ(rig_end_arrived(e), (uint64_t)runs * TN);
        MPI_Sendrecv(MPI_BOTTOM, 0, MPI_BYTE, peer, 7, MPI_BOTTOM, 0, MPI_BYTE,
                     peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        rig_rail_release(rail);
    }
    t_barrier();
    if (rank == 0) {
        printf("ok: ready from %d threads at once\n", NT);
    }
}

static char *window_missing; /* why the job has no window */

/* The peer's end of rail, read through the job's window win. */
static void read_through_window(MPI_Win win, rig_rail *rail, int peer,
                                long runs)
{
    rig_end *e = rig_rail_local(rail);
    rig_job_peer_end pe;
    T_OK(rig_job_rail_disp(job, rail, &pe, &t_err));
    T_EQ(pe.rank, peer);
    uint64_t their[3] = {0, 0, 0};
    uint8_t bytes[64];
    MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win);
    MPI_Get(&their[0], 8, MPI_BYTE, peer, pe.counts + RIG_READY_AT, 8, MPI_BYTE,
            win);
    MPI_Get(&their[1], 8, MPI_BYTE, peer, pe.counts + RIG_SENT_AT, 8, MPI_BYTE,
            win);
    MPI_Get(&their[2], 8, MPI_BYTE, peer, pe.counts + RIG_ARRIVED_AT, 8,
            MPI_BYTE, win);
    MPI_Get(bytes, 64, MPI_BYTE, peer,
            pe.inbound + (MPI_Aint)rig_end_inbound(e).len / 2, 64, MPI_BYTE,
            win);
    MPI_Win_unlock(peer, win);
    T_EQ(their[0], runs);
    T_EQ(their[1], runs);
    T_EQ(their[2], runs);
    T_LANDED(bytes, 0, 64, runs - 1, (unsigned)rank);
    MPI_Sendrecv(MPI_BOTTOM, 0, MPI_BYTE, peer, 7, MPI_BOTTOM, 0, MPI_BYTE,
                 peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* ---- ready_fn only through the pointer, and the MPI window --------------- */

static void test_ready_fn_and_window(void)
{
    int peer = t_partner(rank, size, 0);
    if (peer >= 0) {
        rig_transfer t = {0, 0, 64};
        rig_rail *rail;
        T_OK(rig_job_rail(job, peer, &t, 1, &t, 1, &rail, &t_err));
        rig_end *e = rig_rail_local(rail);
        void (*volatile fn)(void *, uint64_t) = rig_end_ready_fn(e);
        void *counts = rig_end_counts(e).base;
        T_ASSERT(fn != NULL);
        const long runs = 200;
        for (long r = 0; r < runs; r++) {
            unsigned k = (unsigned)(r % 2);
            if (r >= 2) {
                T_ASSERT(rig_end_wait_sent(e, (uint64_t)r - 1));
            }
            t_fill(copy_of(rig_end_outbound(e), k), 64, (uint64_t)r,
                   (unsigned)rank);
            fn(counts, (uint64_t)r + 1);
            T_ASSERT(rig_end_wait_arrived(e, (uint64_t)r + 1));
            T_LANDED(copy_of(rig_end_inbound(e), k), 0, 64, r, (unsigned)peer);
        }
        T_ASSERT(rig_end_wait_sent(e, runs));
        MPI_Sendrecv(MPI_BOTTOM, 0, MPI_BYTE, peer, 7, MPI_BOTTOM, 0, MPI_BYTE,
                     peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

        /* The peer's end through the job's window: its counts and the
         * bytes this rank carried last into its inbound.  A job without a
         * window (MPI offered no component for it) says so instead. */
        MPI_Win win;
        char *no_window = NULL;
        if (rig_job_window(job, &win, &no_window)) {
            read_through_window(win, rail, peer, runs);
        } else {
            T_ASSERT(no_window != NULL &&
                     strncmp(no_window, "unsupported: ", 13) == 0);
            rig_job_peer_end pe;
            T_ERR(rig_job_rail_disp(job, rail, &pe, &t_err),
                  "unsupported:", "no MPI window", NULL);
            window_missing = no_window;
        }
        rig_rail_release(rail);
    }
    t_barrier();
    if (rank == 0) {
        if (window_missing == NULL) {
            printf("ok: ready_fn through its pointer; ends read through the "
                   "job's MPI window\n");
        } else {
            printf("ok: ready_fn through its pointer; no MPI window, and "
                   "rig says why: %s\n",
                   window_missing);
        }
    }
    free(window_missing);
    window_missing = NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    t_rank = rank;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--small") == 0) {
            small_runs = atol(argv[i + 1]);
        } else if (strcmp(argv[i], "--sets") == 0) {
            sets = atol(argv[i + 1]);
        }
    }
    if (size < 2) {
        printf("SKIP: needs at least 2 ranks\n");
        MPI_Finalize();
        return 0;
    }
    job = t_job_open();
    test_ready_fn_and_window();
    test_pingpong();
    test_random();
    test_allpairs();
    test_threads();
    test_many();
    rig_job_close(job);
    MPI_Finalize();
    if (rank == 0) {
        printf("PASS\n");
    }
    return 0;
}
