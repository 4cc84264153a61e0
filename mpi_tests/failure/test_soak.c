/* SPDX-License-Identifier: BSD-3-Clause */
/* Soak: many runs over the 3 rails of 3 ranks; nothing lost, duplicated,
 * torn or landed in the wrong copy, and resident memory flat.
 *
 * Usage: test_soak [--runs N] (default 10000).  Every rank has a rail to
 * each other rank; each run sends two transfers each way whose payload
 * carries the run's sequence number, the sender, the rail, the copy and a
 * checksum over all of it, so a lost or repeated run (wrong sequence), a
 * torn one (bad checksum) or one in the wrong copy is caught on arrival.
 * Resident memory is read from /proc/self/statm after a warm-up (a tenth
 * of the runs) and at the end: growth must stay under 1 MiB. */
#include "../mpitest.h"

#include <time.h>
#include <unistd.h>

#define NT 2 /* transfers per run per direction */
static const rig_transfer xfers[NT] = {{0, 0, 200}, {256, 512, 1000}};

typedef struct {
    uint64_t seq;
    uint32_t from, copy;
    int64_t rail;
    uint32_t len, pad;
} head;

static uint64_t fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 1099511628211ull;
    }
    return h;
}

/* Fills [p, p + len): header, pattern, checksum in the last 8 bytes. */
static void fill(uint8_t *p, uint32_t len, uint64_t seq, int from, int64_t rail,
                 unsigned copy)
{
    head h = {seq, (uint32_t)from, copy, rail, len, 0};
    memcpy(p, &h, sizeof(h));
    for (uint32_t i = sizeof(h); i < len - 8; i++) {
        p[i] = (uint8_t)(seq * 31 + i * 7 + (uint64_t)from);
    }
    uint64_t sum = fnv(p, len - 8);
    memcpy(p + len - 8, &sum, 8);
}

static void check(const uint8_t *p, uint32_t len, uint64_t seq, int from,
                  int64_t rail, unsigned copy)
{
    head h;
    memcpy(&h, p, sizeof(h));
    uint64_t sum;
    memcpy(&sum, p + len - 8, 8);
    if (sum != fnv(p, len - 8)) {
        T_FAIL("run %llu from rank %d: torn payload (bad checksum)",
               (unsigned long long)seq, from);
    }
    if (h.seq != seq) {
        T_FAIL("run %llu from rank %d: holds run %llu (%s)",
               (unsigned long long)seq, from, (unsigned long long)h.seq,
               h.seq < seq ? "lost" : "duplicated or early");
    }
    T_EQ(h.from, from);
    T_EQ(h.rail, rail);
    T_EQ(h.copy, copy);
    T_EQ(h.len, len);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static long rss_kib(void)
{
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) {
            res = 0;
        }
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint64_t runs = 10000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
            runs = strtoull(argv[++i], NULL, 10);
        }
    }
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 3) {
        if (t_rank == 0) {
            printf("FAIL: test_soak needs 3 ranks, not %d\n", size);
        }
        MPI_Finalize();
        return 1;
    }
    rig_job *job;
    T_OK(rig_job_open(MPI_COMM_WORLD, NULL, &job, &t_err));
    int me = t_rank;
    /* Pairs in one global order: (0,1), (0,2), (1,2). */
    static const int pairs[3][2] = {{0, 1}, {0, 2}, {1, 2}};
    rig_rail *rail[3] = {NULL, NULL, NULL}; /* by peer */
    for (int i = 0; i < 3; i++) {
        if (me == pairs[i][0] || me == pairs[i][1]) {
            int peer = me == pairs[i][0] ? pairs[i][1] : pairs[i][0];
            T_OK(rig_job_rail(job, peer, xfers, NT, xfers, NT, &rail[peer],
                              &t_err));
        }
    }
    long rss_warm = 0;
    uint64_t warm = runs / 10;
    uint64_t t0 = now_ns();
    for (uint64_t it = 0; it < runs; it++) {
        unsigned k = (unsigned)(it % 2);
        for (int p = 0; p < 3; p++) {
            if (rail[p] == NULL) {
                continue;
            }
            rig_end *e = rig_rail_local(rail[p]);
            if (it >= 2) {
                T_ASSERT(rig_end_wait_sent(e, (it - 1) * NT));
            }
            rig_area out = rig_end_outbound(e);
            size_t copy = out.len / 2;
            for (int j = 0; j < NT; j++) {
                fill(out.base + k * copy + (size_t)xfers[j].src,
                     (uint32_t)xfers[j].length, it, me, rig_rail_id(rail[p]),
                     k);
            }
            rig_end_ready(e, (it + 1) * NT);
        }
        for (int p = 0; p < 3; p++) {
            if (rail[p] == NULL) {
                continue;
            }
            rig_end *e = rig_rail_local(rail[p]);
            T_ASSERT(rig_end_wait_arrived(e, (it + 1) * NT));
            rig_area in = rig_end_inbound(e);
            size_t copy = in.len / 2;
            for (int j = 0; j < NT; j++) {
                check(in.base + k * copy + (size_t)xfers[j].dst,
                      (uint32_t)xfers[j].length, it, p, rig_rail_id(rail[p]),
                      k);
            }
        }
        if (it + 1 == warm) {
            rss_warm = rss_kib();
        }
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    long rss_end = rss_kib();
    for (int p = 0; p < 3; p++) {
        if (rail[p] != NULL) {
            T_EQ(rig_end_arrived(rig_rail_local(rail[p])), runs * NT);
        }
    }
    printf("rank %d: %llu runs x 2 rails x %d transfers each way in %.1f s "
           "(%.1f us a run); RSS %ld KiB after warm-up, %ld KiB at the end "
           "(growth %ld KiB, bound 1024)\n",
           me, (unsigned long long)runs, NT, secs, secs * 1e6 / (double)runs,
           rss_warm, rss_end, rss_end - rss_warm);
    T_ASSERT(rss_end - rss_warm < 1024);
    for (int p = 0; p < 3; p++) {
        rig_rail_release(rail[p]);
    }
    rig_job_close(job);
    printf("rank %d: PASS soak\n", me);
    MPI_Finalize();
    return 0;
}
