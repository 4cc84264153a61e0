/* SPDX-License-Identifier: BSD-3-Clause */
/* rig_remote_bench: the controller's images and loads beside bare MPI and
 * the same steps on one machine, in one run.
 *
 *   mpirun -np 4 --oversubscribe --mca osc ^ucx,pt2pt \
 *       benchmarks/rig_remote_bench [-r ROUNDS] [-s MIB] [--programs DIR]
 *
 * (from the build directory, after `make check` or
 * `make mpi_tests/remote/programs.stamp` laid out the test catalog; on a
 * loaded machine give the agents' nodes time with
 * -x RIG_MESH_ONLINE_TIMEOUT_MS=20000)
 *
 * Rank 0 is the controller, the other ranks its agents (native executor
 * only).  Each round opens the layer, and, interleaved:
 *   image   rig_remote_load of a payload of -s MiB (default 64: the small
 *           program rtiny plus a data file) onto every agent, twice: its
 *           time is the slowest agent's, from its load command to its last
 *           image byte (rig_remote_load_info.receive_ms).  The first image
 *           load of the layer ("cold") receives into fresh memory; the second
 *           ("warm") into the staging memory the agents kept from the
 *           first (RIG_REMOTE_KEEP_BYTES), as a controller that loads
 *           programs one after another finds it;
 *   bcast   a bare MPI_Bcast of the same bytes from rank 0 to every rank,
 *           timed on each rank from a barrier, the slowest kept: into a
 *           buffer used before (beside "warm"), and into fresh memory
 *           (beside "cold");
 *   load, launch
 *           rig_remote_load of rtiny (one native node that goes online
 *           and waits for the halt) onto every agent, then
 *           rig_remote_launch until every node on every agent is online;
 *   local   the same two steps on rank 0's own machine alone, once the
 *           agents have gone idle (their waits asleep):
 *           mesh_driver_prepare, then mesh_driver_start;
 *   every   the same two steps run by every agent at once on its own
 *           machine (a native executor each opened for it, rtiny read
 *           from the catalog), each step started from a barrier and timed
 *           on each agent, the slowest kept, while rank 0 waits for
 *           the times in an MPI_Ireduce, paced as the controller waits
 *           for replies (reduce_paced): the like-for-like baseline of the
 *           remote steps, in which every agent prepares and starts at
 *           once and the controller waits for them.  "local" is one
 *           process alone on idle cores; when several agents share the
 *           cores (more agents than cores, as -np 4 on 2 cores), the
 *           remote steps share them too, and only "every" does the same
 *           work on the same cores (on a cluster, each agent has its
 *           machine and the two agree);
 *   every, seen
 *           the same, on rank 0's clock: from its go to the slowest
 *           agent's time in its hands, which counts what the agents' own
 *           clocks leave out -- an agent's wait for a core, when more
 *           agents than cores queue for them -- as a remote step's clock
 *           does; it holds one round trip of the two a remote step may
 *           add, so the remote step is held to it plus one rt;
 *   rt      a round trip of MPI_Bcast and MPI_Gather of 64 B (rank 0),
 *           and rt_p, the same with rtiny's bytes in the MPI_Bcast (what
 *           a load's first round trip must carry).
 * A round's order: an untimed load and unload of rtiny, then load,
 * launch, local, and the images last.  The first command of a session
 * pays one-time costs (the agents' first prepare on executors opened for
 * the session, their first reply: load 0.38-0.59 ms against 0.10 after
 * the warm-up, -np 2), which the baselines, on an executor opened once
 * for the run, pay in round 0 only.  And a launch right after a 64 MiB
 * image's load and unload took 0.5-0.8 ms longer in the agent's own
 * mesh_driver_start (a second launch did not, nor did a 20 ms pause
 * help; the cause is not found), a predecessor the baselines never have:
 * with the images first, the launch at 1 agent read 1.1-1.4 ms over
 * "every, rank 0's clock", with them last 0.1-0.8 ms under it.
 * It prints the median of each over the rounds, the image bandwidth ratio
 * (target: warm image >= 0.9 x bcast) and whether each remote step costs
 * at most the local one plus 2 round trips, against both baselines
 * ("local" and "every"), and the median over the rounds of each round's
 * remote step less its "every" step (paired by round), and the parts of
 * the remote load that are CPU work, not waits (rig_remote_load_info:
 * check_ms, receive_ms, prepare_ms).  The first line
 * gives the machine's load average (/proc/loadavg) at the start and the
 * last at the end: figures taken beside other work say little about
 * quiet machines.  RIG_BENCH_VERBOSE=1 prints
 * each round's steps by phase.  With more agents than cores the agents'
 * own steps share the cores (on a cluster each has its machine): run with
 * -np 2 too.  Machines are loaded when others share them: re-run
 * on a quiet one for the record. */
#include <mesh/driver.h>
#include <mesh/executors.h>
#include <rig/remote.h>

#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef REMOTE_PROGRAMS
#define REMOTE_PROGRAMS "mpi_tests/remote/programs"
#endif

static int rank, size;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void die(const char *what, char *err)
{
    fprintf(stderr, "rig_remote_bench: rank %d: %s: %s\n", rank, what,
            err != NULL ? err : "?");
    free(err);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The median of 16 round trips from rank 0: an MPI_Bcast of bytes from buf
 * (64 zero bytes when buf is NULL), then an MPI_Gather of 64 B. */
static double round_trip_ms(void *buf, int bytes, int rank, int size)
{
    double rts[16];
    for (int k = 0; k < 16; k++) {
        char small[64] = {0}, *all = NULL;
        if (rank == 0) {
            all = malloc((size_t)size * sizeof(small));
        }
        MPI_Barrier(MPI_COMM_WORLD);
        double u0 = now_ms();
        if (buf != NULL) {
            MPI_Bcast(buf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        } else {
            MPI_Bcast(small, (int)sizeof(small), MPI_BYTE, 0, MPI_COMM_WORLD);
        }
        MPI_Gather(small, (int)sizeof(small), MPI_BYTE, all, (int)sizeof(small),
                   MPI_BYTE, 0, MPI_COMM_WORLD);
        rts[k] = now_ms() - u0;
        free(all);
    }
    return median(rts, 16);
}

/* The machine's load averages (1, 5 and 15 min) as /proc/loadavg has
 * them, or "?". */
static void loadavg(char *out, size_t len)
{
    snprintf(out, len, "?");
    FILE *f = fopen("/proc/loadavg", "r");
    if (f == NULL) {
        return;
    }
    double a = 0, b = 0, c = 0;
    if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3) {
        snprintf(out, len, "%.2f %.2f %.2f", a, b, c);
    }
    fclose(f);
}

/* The local steps on this rank's own machine, in ms: the load,
 * mesh_driver_prepare of a copy of rtiny into *prep (the copy made before
 * it, untimed: it is the caller's, which may wait between them), and the
 * launch, mesh_driver_start of *prep, then the stop (untimed).  "local"
 * runs them on rank 0 alone, "every" on every agent at once. */
static void tiny_copy(const mesh_payload *tiny, mesh_payload *copy)
{
    char *err = NULL;
    if (!mesh_payload_copy(copy, tiny, &err)) {
        die("copying rtiny", err);
    }
}

static double local_load(mesh_driver *d, mesh_payload *copy,
                         mesh_prepared *prep)
{
    char *err = NULL;
    double t0 = now_ms();
    if (!mesh_driver_prepare(d, copy, NULL, NULL, prep, &err)) {
        die("mesh_driver_prepare", err);
    }
    return now_ms() - t0;
}

/* The launch of *prep until every node is online, timed; the launch stays
 * up in *slot for local_stop, outside the clocks. */
static double local_launch(mesh_driver *d, mesh_prepared *prep, uint32_t *slot)
{
    char *err = NULL;
    double t0 = now_ms();
    if (!mesh_driver_start(d, prep, 1, slot, &err)) {
        die("mesh_driver_start", err);
    }
    return now_ms() - t0;
}

static void local_stop(mesh_driver *d, uint32_t slot)
{
    char *err = NULL;
    if (!mesh_driver_stop(d, slot, &err)) {
        die("mesh_driver_stop", err);
    }
}

/* rank 0's MPI_Reduce of the slowest time, waited for as the controller
 * waits for its agents' replies (src/remote/wait.c, RM_PACE_REPLY): tests
 * and yields for 100 us, then naps of a sixteenth of the wait so far,
 * 20-100 us.  A blocking MPI_Reduce tests without a pause, and on this
 * 2-core VM that slowed the agent's launch beside it from 7.4 to 11.3 ms
 * (-np 2, a core each): a baseline that spins is slower than the remote
 * step it is the measure of. */
static void reduce_paced(double *mine, double *slowest)
{
    MPI_Request rq;
    MPI_Ireduce(mine, slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD, &rq);
    double t0 = now_ms();
    for (;;) {
        int done = 0;
        MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
        if (done) {
            return;
        }
        double waited = now_ms() - t0;
        if (waited < 0.1) {
            sched_yield();
            continue;
        }
        double nap = waited / 16 < 0.02  ? 0.02
                     : waited / 16 > 0.1 ? 0.1
                                         : waited / 16;
        struct timespec ts = {0, (long)(nap * 1e6)};
        nanosleep(&ts, NULL);
    }
}

/* One of the local steps on every agent at once ("every"): each agent
 * times its own step, started on rank 0's go after a barrier; rank 0
 * keeps the slowest.  step 0:
 * the load into *prep; step 1: the launch of *prep.  *seen gets the same
 * step on rank 0's clock ("every, seen"): rank 0 says go (an MPI_Bcast
 * of one byte, after the barrier), the agents start on it, and the clock
 * stops when the slowest agent's time is in rank 0's hands (an
 * MPI_Ireduce, reduce_paced) -- the shape of a remote step (a command out, the
 * work, the replies in), with one round trip of messages in it.  The agents'
 * own clocks leave out the time an agent waits for a core before its step and
 * between its slices: with more agents than cores (-np 4 on 2) the agents'
 * steps queue for the cores, and only rank 0's clock sees the whole of it, as
 * it sees the whole of a remote step.  (Timing rank 0 from the barrier alone
 * read less than the slowest agent's own time at -np 3: rank 0 left the barrier
 * after the agents.) */
static double every_step(int step, mesh_driver *d, const mesh_payload *tiny,
                         mesh_prepared *prep, double *seen)
{
    mesh_payload copy;
    if (rank != 0 && step == 0) {
        tiny_copy(tiny, &copy);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_ms();
    char go = 1;
    MPI_Bcast(&go, 1, MPI_CHAR, 0, MPI_COMM_WORLD);
    double mine = 0, slowest = 0;
    uint32_t slot = 0;
    if (rank != 0) {
        mine = step == 0 ? local_load(d, &copy, prep)
                         : local_launch(d, prep, &slot);
    }
    reduce_paced(&mine, &slowest);
    *seen = now_ms() - t0;
    if (rank != 0 && step == 1) {
        local_stop(d, slot); /* after the clock, as a remote launch's halt */
    }
    return slowest;
}

/* rtiny's payload with a data file that makes it `bytes` long. */
static void big_payload(const char *root, size_t bytes, mesh_payload *out)
{
    char *err = NULL;
    if (!mesh_payload_read(root, "rtiny", out, &err)) {
        die("reading rtiny", err);
    }
    size_t have = 0;
    for (size_t i = 0; i < out->nfiles; i++) {
        have += out->files[i].len;
    }
    size_t fill = bytes > have ? bytes - have : 1;
    uint8_t *blob = malloc(fill);
    if (blob == NULL) {
        die("allocating the image", NULL);
    }
    for (size_t i = 0; i < fill; i++) {
        blob[i] = (uint8_t)(i * 131u + 7u);
    }
    if (!mesh_payload_add(out, "data/image", blob, fill, &err)) {
        die("making the image", err);
    }
    free(blob);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = 10;
    bool verbose = getenv("RIG_BENCH_VERBOSE") != NULL;
    size_t mib = 64;
    const char *root = REMOTE_PROGRAMS;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) {
            mib = (size_t)atol(argv[++i]);
        } else if (strcmp(argv[i], "--programs") == 0 && i + 1 < argc) {
            root = argv[++i];
        } else {
            if (rank == 0) {
                fprintf(stderr, "usage: rig_remote_bench [-r ROUNDS] [-s MIB] "
                                "[--programs DIR]\n");
            }
            MPI_Finalize();
            return 2;
        }
    }
    if (size < 2 || rounds < 1 || mib < 1) {
        if (rank == 0) {
            fprintf(stderr, "rig_remote_bench: needs 2 ranks or more, -r >= 1 "
                            "and -s >= 1\n");
        }
        MPI_Finalize();
        return 2;
    }
    size_t bytes = mib << 20;
    char *err = NULL;
    rig_job *job = NULL;
    if (!rig_job_open(MPI_COMM_WORLD, NULL, &job, &err)) {
        die("rig_job_open", err);
    }
    /* Rank 0: the image.  Every rank: rtiny, and a native executor of its
     * own for the local steps ("local" on rank 0, "every" on agents). */
    mesh_payload image = {0}, tiny = {0};
    mesh_backend *b = NULL;
    mesh_driver *d = NULL;
    if (rank == 0) {
        big_payload(root, bytes, &image);
    }
    if (!mesh_payload_read(root, "rtiny", &tiny, &err)) {
        die("reading rtiny", err);
    }
    /* A loaded machine must not abort the run: 20 s to be online. */
    mesh_backend_options bo = {.online_timeout_ms = 20000};
    if (!mesh_backend_open(MESH_BACKEND_NATIVE, &bo, &b, &err) ||
        !mesh_driver_open(b, &d, &err)) {
        die("opening the native executor", err);
    }
    char load_start[64];
    loadavg(load_start, sizeof(load_start));
    /* rtiny's bytes, for a round trip that carries them as a load must. */
    uint64_t tiny_bytes = 0;
    for (size_t i = 0; rank == 0 && i < tiny.nfiles; i++) {
        tiny_bytes += tiny.files[i].len;
    }
    MPI_Bcast(&tiny_bytes, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    uint8_t *tbuf = calloc(tiny_bytes > 0 ? (size_t)tiny_bytes : 1, 1);
    uint8_t *buf = malloc(bytes);
    if (buf == NULL) {
        die("allocating the broadcast buffer", NULL);
    }
    memset(buf, rank, bytes);
    double *s_image = calloc((size_t)rounds, sizeof(double));
    double *s_cold = calloc((size_t)rounds, sizeof(double));
    double *s_bcast = calloc((size_t)rounds, sizeof(double));
    double *s_fresh = calloc((size_t)rounds, sizeof(double));
    double *s_load = calloc((size_t)rounds, sizeof(double));
    double *s_launch = calloc((size_t)rounds, sizeof(double));
    double *s_lprep = calloc((size_t)rounds, sizeof(double));
    double *s_lstart = calloc((size_t)rounds, sizeof(double));
    double *s_rt = calloc((size_t)rounds, sizeof(double));
    double *s_rtp = calloc((size_t)rounds, sizeof(double));
    double *s_total = calloc((size_t)rounds, sizeof(double));
    double *s_eprep = calloc((size_t)rounds, sizeof(double));
    double *s_estart = calloc((size_t)rounds, sizeof(double));
    double *s_dload = calloc((size_t)rounds, sizeof(double));
    double *s_dlaunch = calloc((size_t)rounds, sizeof(double));
    double *s_sprep = calloc((size_t)rounds, sizeof(double));
    double *s_sstart = calloc((size_t)rounds, sizeof(double));
    double *s_sdload = calloc((size_t)rounds, sizeof(double));
    double *s_sdlaunch = calloc((size_t)rounds, sizeof(double));
    double *s_tcheck = calloc((size_t)rounds, sizeof(double));
    double *s_trecv = calloc((size_t)rounds, sizeof(double));
    double *s_tprep = calloc((size_t)rounds, sizeof(double));
    rig_remote_options opt;
    rig_remote_options_init(&opt);
    opt.executors = 1u << MESH_BACKEND_NATIVE;
    for (int r = 0; r < rounds; r++) {
        rig_remote *rm = NULL;
        if (!rig_remote_open(job, MPI_COMM_WORLD, &opt, &rm, &err)) {
            die("rig_remote_open", err);
        }
        if (rank != 0) {
            if (!rig_remote_serve(rm, &err)) {
                die("rig_remote_serve", err);
            }
        } else {
            rig_remote_load_info info;
            int64_t p = 0;
            /* Untimed: the session's first command pays its one-time
             * costs (the agents' first prepare on executors opened for
             * this session, their first reply), which the baselines, on
             * an executor opened once for the run, pay in round 0 only. */
            if (!rig_remote_load(rm, &tiny, NULL, 0, &info, &p, &err) ||
                !rig_remote_unload(rm, p, &err)) {
                die("loading rtiny (warm-up)", err);
            }
            double t0 = now_ms();
            if (!rig_remote_load(rm, &tiny, NULL, 0, &info, &p, &err)) {
                die("loading rtiny", err);
            }
            double t1 = now_ms();
            if (!rig_remote_launch(rm, p, 1, &err)) {
                die("launching rtiny", err);
            }
            double t2 = now_ms();
            if (!rig_remote_unload(rm, p, &err)) {
                die("unloading rtiny", err);
            }
            s_load[r] = t1 - t0;
            s_tcheck[r] = info.check_ms;
            s_trecv[r] = info.receive_ms;
            s_tprep[r] = info.prepare_ms;
            if (verbose) {
                printf("round %d: tiny load %.3f ms: controller to command "
                       "sent %.3f (hash %.3f), agent receive %.3f, agent "
                       "prepare %.3f, the rest (messages, waking, "
                       "records) %.3f\n",
                       r, t1 - t0, info.check_ms, info.hash_ms, info.receive_ms,
                       info.prepare_ms,
                       t1 - t0 - info.check_ms - info.receive_ms -
                           info.prepare_ms);
            }
            s_launch[r] = t2 - t1;
            /* The same steps here alone, once the agents' waits have gone
             * to sleep (they stay hot for a few ms after a command). */
            usleep(50000);
            mesh_payload copy;
            mesh_prepared prep;
            tiny_copy(&tiny, &copy);
            s_lprep[r] = local_load(d, &copy, &prep);
            uint32_t slot = 0;
            s_lstart[r] = local_launch(d, &prep, &slot);
            local_stop(d, slot);
            if (verbose) {
                printf("round %d: launch %.3f ms; here alone: load %.3f ms, "
                       "launch %.3f ms\n",
                       r, t2 - t1, s_lprep[r], s_lstart[r]);
            }
            for (int w = 0; w < 2; w++) {
                if (!rig_remote_load(rm, &image, NULL, 0, &info, &p, &err) ||
                    !rig_remote_unload(rm, p, &err)) {
                    die("loading the image", err);
                }
                (w == 0 ? s_cold : s_image)[r] = info.receive_ms;
                if (w == 1) {
                    s_total[r] = info.total_ms;
                }
                if (verbose) {
                    printf("round %d: image (%s): agent receive %.3f ms, "
                           "controller send %.3f ms, agent prepare %.3f ms, "
                           "total %.3f ms\n",
                           r, w == 0 ? "cold" : "warm", info.receive_ms,
                           info.send_ms, info.prepare_ms, info.total_ms);
                }
            }
        }
        rig_remote_close(rm);
        /* The same steps on every agent at once, the controller waiting. */
        mesh_prepared eprep;
        s_eprep[r] = every_step(0, d, &tiny, &eprep, &s_sprep[r]);
        s_estart[r] = every_step(1, d, &tiny, &eprep, &s_sstart[r]);
        if (rank == 0) {
            s_dload[r] = s_load[r] - s_eprep[r];
            s_dlaunch[r] = s_launch[r] - s_estart[r];
            s_sdload[r] = s_load[r] - s_sprep[r];
            s_sdlaunch[r] = s_launch[r] - s_sstart[r];
            if (verbose) {
                printf("round %d: on every agent at once, the slowest: load "
                       "%.3f ms, launch %.3f ms; on rank 0's clock: load "
                       "%.3f ms, launch %.3f ms\n",
                       r, s_eprep[r], s_estart[r], s_sprep[r], s_sstart[r]);
            }
        }
        /* The bare broadcast of the same bytes, and a small round trip. */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_ms();
        MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        double mine = now_ms() - t0, slowest = 0;
        MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        s_bcast[r] = slowest;
        /* The same into fresh memory, as an agent takes an image: its
         * pages are touched for the first time by the broadcast. */
        uint8_t *fresh = malloc(bytes);
        if (fresh == NULL) {
            die("allocating a fresh buffer", NULL);
        }
        if (rank == 0) {
            memcpy(fresh, buf, bytes);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = now_ms();
        MPI_Bcast(fresh, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        mine = now_ms() - t0;
        MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        s_fresh[r] = slowest;
        free(fresh);
        s_rt[r] = round_trip_ms(NULL, 0, rank, size);
        s_rtp[r] = round_trip_ms(tbuf, (int)tiny_bytes, rank, size);
    }
    if (rank == 0) {
        double image_ms = median(s_image, rounds);
        double bcast_ms = median(s_bcast, rounds);
        double rt = median(s_rt, rounds);
        double load = median(s_load, rounds), launch = median(s_launch, rounds);
        double lprep = median(s_lprep, rounds);
        double lstart = median(s_lstart, rounds);
        double mb = (double)bytes / 1e6;
        printf("# rig_remote_bench: %d agents, %zu MiB image, %d rounds, "
               "medians; load average %s at the start\n",
               size - 1, mib, rounds, load_start);
        printf("%-34s%12s%14s\n", "# step", "ms", "MB/s");
        double cold_ms = median(s_cold, rounds);
        double fresh_ms = median(s_fresh, rounds);
        printf("%-34s%12.2f%14.1f\n", "image to every agent (warm)", image_ms,
               mb / (image_ms / 1e3));
        printf("%-34s%12.2f%14.1f\n", "MPI_Bcast of the same bytes", bcast_ms,
               mb / (bcast_ms / 1e3));
        printf("%-34s%12.2f%14.1f\n", "image to every agent (cold)", cold_ms,
               mb / (cold_ms / 1e3));
        printf("%-34s%12.2f%14.1f\n", "MPI_Bcast into fresh memory", fresh_ms,
               mb / (fresh_ms / 1e3));
        printf("%-34s%12.2f\n", "whole rig_remote_load of the image",
               median(s_total, rounds));
        double rtp = median(s_rtp, rounds);
        printf("%-34s%12.3f\n", "MPI_Bcast+MPI_Gather 64 B (rt)", rt);
        printf("%-34s%12.3f\n", "the same, Bcast of rtiny (rt_p)", rtp);
        printf("%-34s%12.3f\n", "load rtiny, every agent", load);
        /* Its parts that are CPU work, not waits: what the controller does
         * before its command leaves (checks, hash, the message), and the
         * slowest agent's receipt and prepare. */
        printf("%-34s%12.3f\n", "  controller before the command",
               median(s_tcheck, rounds));
        printf("%-34s%12.3f\n", "  agent receipt (slowest)",
               median(s_trecv, rounds));
        printf("%-34s%12.3f\n", "  agent prepare (slowest)",
               median(s_tprep, rounds));
        double eprep = median(s_eprep, rounds);
        double estart = median(s_estart, rounds);
        double dload = median(s_dload, rounds);
        double dlaunch = median(s_dlaunch, rounds);
        printf("%-34s%12.3f\n", "load rtiny, here alone", lprep);
        printf("%-34s%12.3f\n", "load rtiny, local on every agent", eprep);
        double sprep = median(s_sprep, rounds);
        double sstart = median(s_sstart, rounds);
        printf("%-34s%12.3f\n", "load rtiny, every, rank 0's clock", sprep);
        printf("%-34s%12.3f\n", "launch -> all online, every agent", launch);
        printf("%-34s%12.3f\n", "launch -> all online, here alone", lstart);
        printf("%-34s%12.3f\n", "launch, local on every agent", estart);
        printf("%-34s%12.3f\n", "launch, every, rank 0's clock", sstart);
        double ratio = bcast_ms / image_ms;
        printf("image bandwidth (warm) / MPI_Bcast's: %.2f (target >= 0.90: "
               "%s)\n",
               ratio, ratio >= 0.9 ? "met" : "missed");
        printf("image bandwidth (cold) / MPI_Bcast's into fresh memory: "
               "%.2f\n",
               fresh_ms / cold_ms);
        printf("load: %.3f ms vs local + 2 rt = %.3f ms (%s)\n", load,
               lprep + 2 * rt, load <= lprep + 2 * rt ? "met" : "missed");
        /* A load moves the program: its first round trip carries the
         * program's bytes, as rt_p does. */
        printf("load: %.3f ms vs local + rt_p + rt = %.3f ms (%s)\n", load,
               lprep + rtp + rt, load <= lprep + rtp + rt ? "met" : "missed");
        printf("launch: %.3f ms vs local + 2 rt = %.3f ms (%s)\n", launch,
               lstart + 2 * rt, launch <= lstart + 2 * rt ? "met" : "missed");
        /* The like-for-like baseline: the same steps by every agent at
         * once on the same cores ("every"), beside the one above (rank 0
         * alone on idle cores), which is kept for comparison with earlier
         * runs. */
        printf("load: %.3f ms vs every + 2 rt = %.3f ms (%s); paired by "
               "round: remote - every = %.3f ms vs 2 rt = %.3f ms (%s)\n",
               load, eprep + 2 * rt, load <= eprep + 2 * rt ? "met" : "missed",
               dload, 2 * rt, dload <= 2 * rt ? "met" : "missed");
        printf("load: %.3f ms vs every + rt_p + rt = %.3f ms (%s)\n", load,
               eprep + rtp + rt, load <= eprep + rtp + rt ? "met" : "missed");
        printf("launch: %.3f ms vs every + 2 rt = %.3f ms (%s); paired by "
               "round: remote - every = %.3f ms vs 2 rt = %.3f ms (%s)\n",
               launch, estart + 2 * rt,
               launch <= estart + 2 * rt ? "met" : "missed", dlaunch, 2 * rt,
               dlaunch <= 2 * rt ? "met" : "missed");
        /* The same, against the whole of the agents' local steps: the
         * baseline that, like the remote steps, counts an agent's wait
         * for a core (every_step).  It holds one round trip (its go and
         * its MPI_Reduce) of the 2 a remote step may add: 1 rt more. */
        double sdload = median(s_sdload, rounds);
        double sdlaunch = median(s_sdlaunch, rounds);
        printf("load: %.3f ms vs every seen + rt = %.3f ms (%s); paired "
               "by round: remote - every seen = %.3f ms vs rt = %.3f ms "
               "(%s)\n",
               load, sprep + rt, load <= sprep + rt ? "met" : "missed", sdload,
               rt, sdload <= rt ? "met" : "missed");
        printf("launch: %.3f ms vs every seen + rt = %.3f ms (%s); paired "
               "by round: remote - every seen = %.3f ms vs rt = %.3f ms "
               "(%s)\n",
               launch, sstart + rt, launch <= sstart + rt ? "met" : "missed",
               sdlaunch, rt, sdlaunch <= rt ? "met" : "missed");
        char load_end[64];
        loadavg(load_end, sizeof(load_end));
        printf("# load average %s at the end\n", load_end);
        mesh_payload_free(&image);
    }
    mesh_driver_close(d);
    mesh_backend_destroy(b);
    mesh_payload_free(&tiny);
    free(s_image);
    free(s_cold);
    free(s_bcast);
    free(s_fresh);
    free(s_load);
    free(s_launch);
    free(s_lprep);
    free(s_lstart);
    free(s_rt);
    free(s_rtp);
    free(tbuf);
    free(s_total);
    free(s_eprep);
    free(s_estart);
    free(s_dload);
    free(s_dlaunch);
    free(s_sprep);
    free(s_sstart);
    free(s_sdload);
    free(s_sdlaunch);
    free(s_tcheck);
    free(s_trecv);
    free(s_tprep);
    free(buf);
    rig_job_close(job);
    MPI_Finalize();
    return 0;
}
