/* SPDX-License-Identifier: BSD-3-Clause */
/* Options, timing, statistics, OSU-format output and data checks. */
#include "bench.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int bench_rank = -1;
const char *bench_prog = "rig_osu";
bool bench_pingpong = false;
int bench_copies = 2;

/* Every method, rig first: the order of the columns and of the
 * measurements in a round.  Next to rig come the methods its targets
 * compare it with most closely (the floors for latency, raw UCX for
 * bandwidth), so that a pair is measured moments apart in every round. */
static const bench_method *const all_methods[] = {
    &bench_rig,     &bench_floor, &bench_floor2,     &bench_ucx, &bench_ucx_am,
    &bench_rig_mpi, &bench_mpi,   &bench_persistent, &bench_put,
};
#define NALL (sizeof(all_methods) / sizeof(all_methods[0]))

_Noreturn void bench_die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: rank %d: ", bench_prog, bench_rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort();
}

void bench_mpi_check(int rc, const char *call)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        bench_die("system: %s failed: %s", call, msg);
    }
}

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- options ------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: %s [options]\n"
            "  -m MIN:MAX   message sizes in bytes (MIN: or :MAX alone too)\n"
            "  -i N         iterations per size (default: OSU's)\n"
            "  -x N         warm-up iterations per size (default: OSU's)\n"
            "  -W N         window: messages in flight (bw, bibw, mr)\n"
            "  -f           full statistics: min, max, p50, p99 columns\n"
            "  -b LIST      print these methods side by side (comma-"
            "separated,\n"
            "               or all): rig rig_mpi floor floor2 mpi\n"
            "               persistent put ucx ucx_am (floor, floor2: "
            "latency\n"
            "               only; ucx_am only when named)\n"
            "               default: rig, the best baseline and their "
            "ratio\n"
            "  -r N         measure each size in N rounds (1 to %d), "
            "the methods\n"
            "               interleaved in each, in alternating order; "
            "print\n"
            "               each method's median\n"
            "  -B N         copies of each message the baselines keep per\n"
            "               direction: 2 (a rail's footprint, default) or 1\n"
            "               (OSU's one buffer)\n"
            "  -h           this help\n",
            bench_prog, BENCH_MAX_ROUNDS);
}

static bool parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s) {
        return false;
    }
    if (*end == 'K' || *end == 'k') {
        v <<= 10;
        end++;
    } else if (*end == 'M' || *end == 'm') {
        v <<= 20;
        end++;
    }
    if (*end != '\0') {
        return false;
    }
    *out = (size_t)v;
    return true;
}

static bool parse_range(const char *arg, size_t *lo, size_t *hi)
{
    char buf[64];
    if (strlen(arg) >= sizeof(buf)) {
        return false;
    }
    strcpy(buf, arg);
    char *colon = strchr(buf, ':');
    if (colon == NULL) {
        /* OSU: a single number is the maximum. */
        return parse_size(buf, hi);
    }
    *colon = '\0';
    if (buf[0] != '\0' && !parse_size(buf, lo)) {
        return false;
    }
    if (colon[1] != '\0' && !parse_size(colon + 1, hi)) {
        return false;
    }
    return true;
}

static int parse_int(const char *s, int min)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > 1 << 30) {
        return -1;
    }
    return (int)v;
}

static const bench_method *find_method(const char *name)
{
    for (size_t i = 0; i < NALL; i++) {
        if (strcmp(all_methods[i]->name, name) == 0) {
            return all_methods[i];
        }
    }
    return NULL;
}

/* The floors belong to the latency benchmark only. */
static bool is_floor(const bench_method *m)
{
    return m == &bench_floor || m == &bench_floor2;
}

/* Whether a method runs without -b naming it (by default, or in -b all). */
static bool by_default(const bench_method *m, bool floor)
{
    return (!is_floor(m) || floor) && !m->named_only;
}

static _Noreturn void bad_option(const char *what)
{
    if (bench_rank == 0) {
        fprintf(stderr, "%s: invalid: %s\n", bench_prog, what);
        usage(stderr);
    }
    MPI_Finalize();
    exit(2);
}

void bench_init(int *argc, char ***argv, bench_opts *o, size_t def_min,
                size_t def_max, bool floor)
{
    int size = 0;
    const char *slash = strrchr((*argv)[0], '/');
    bench_prog = slash != NULL ? slash + 1 : (*argv)[0];
    bench_mpi_check(MPI_Init(argc, argv), "MPI_Init");
    MPI_Comm_rank(MPI_COMM_WORLD, &bench_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    memset(o, 0, sizeof(*o));
    o->min_size = def_min;
    o->max_size = def_max;
    o->warmup = -1;
    o->window = 64;
    o->rounds = 1;
    o->copies = 2;
    bool want[NALL];
    for (size_t i = 0; i < NALL; i++) {
        want[i] = by_default(all_methods[i], floor);
    }

    int c;
    opterr = 0;
    while ((c = getopt(*argc, *argv, "m:i:x:W:fb:r:B:h")) != -1) {
        switch (c) {
        case 'm':
            if (!parse_range(optarg, &o->min_size, &o->max_size) ||
                o->min_size > o->max_size) {
                bad_option("-m wants MIN:MAX with MIN <= MAX");
            }
            break;
        case 'i':
            if ((o->iterations = parse_int(optarg, 1)) < 0) {
                bad_option("-i wants a positive number");
            }
            break;
        case 'x':
            if ((o->warmup = parse_int(optarg, 0)) < 0) {
                bad_option("-x wants a number >= 0");
            }
            break;
        case 'W':
            if ((o->window = parse_int(optarg, 1)) < 0 ||
                o->window > BENCH_MAX_WINDOW) {
                bad_option("-W wants a number from 1 to 256");
            }
            break;
        case 'r':
            if ((o->rounds = parse_int(optarg, 1)) < 0 ||
                o->rounds > BENCH_MAX_ROUNDS) {
                bad_option("-r wants a number from 1 to 64");
            }
            break;
        case 'B':
            if ((o->copies = parse_int(optarg, 1)) < 0 || o->copies > 2) {
                bad_option("-B wants 1 or 2");
            }
            bench_copies = o->copies;
            break;
        case 'f':
            o->full = true;
            break;
        case 'b': {
            o->all = true;
            for (size_t i = 0; i < NALL; i++) {
                want[i] = all_methods[i] == &bench_rig;
            }
            char *list = strdup(optarg);
            char *save = NULL;
            for (char *t = strtok_r(list, ",", &save); t != NULL;
                 t = strtok_r(NULL, ",", &save)) {
                if (strcmp(t, "all") == 0) {
                    for (size_t i = 0; i < NALL; i++) {
                        want[i] = want[i] || by_default(all_methods[i], floor);
                    }
                    continue;
                }
                const bench_method *m = find_method(t);
                if (m == NULL || (is_floor(m) && !floor)) {
                    free(list);
                    bad_option("-b names an unknown method");
                }
                for (size_t i = 0; i < NALL; i++) {
                    want[i] = want[i] || all_methods[i] == m;
                }
            }
            free(list);
            break;
        }
        case 'h':
            if (bench_rank == 0) {
                usage(stdout);
            }
            MPI_Finalize();
            exit(0);
        default:
            bad_option("unknown option or missing argument");
        }
    }
    if (size != 2) {
        if (bench_rank == 0) {
            fprintf(stderr,
                    "%s: invalid: this benchmark needs exactly 2 "
                    "ranks, not %d\n",
                    bench_prog, size);
        }
        MPI_Finalize();
        exit(2);
    }

    for (size_t i = 0; i < NALL; i++) {
        if (!want[i]) {
            continue;
        }
        char *err = NULL;
        void *st = NULL;
        bool ok = all_methods[i]->open(&st, &err);
        /* Both ranks must agree on the set of methods. */
        int mine = ok ? 1 : 0, both = 0;
        MPI_Allreduce(&mine, &both, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (both == 0) {
            if (bench_rank == 0 || !ok) {
                fprintf(stderr, "%s: %s left out: %s\n", bench_prog,
                        all_methods[i]->name,
                        err != NULL ? err : "failed: on the other rank");
            }
            if (ok) {
                all_methods[i]->close(st);
            }
            free(err);
            continue;
        }
        o->methods[o->nmethods] = all_methods[i];
        o->state[o->nmethods] = st;
        o->nmethods++;
    }
    if (o->nmethods == 0) {
        bench_die("failed: no method could run");
    }
}

void bench_fini(bench_opts *o)
{
    for (int i = o->nmethods - 1; i >= 0; i--) {
        o->methods[i]->close(o->state[i]);
    }
    fflush(stdout);
    MPI_Finalize();
}

/* OSU's LARGE_MESSAGE_SIZE. */
#define LARGE_SIZE 8192

int bench_iters(const bench_opts *o, size_t size, int small, int large)
{
    if (o->iterations > 0) {
        return o->iterations;
    }
    return size > LARGE_SIZE ? large : small;
}

int bench_skip(const bench_opts *o, size_t size, int small, int large)
{
    if (o->warmup >= 0) {
        return o->warmup;
    }
    return size > LARGE_SIZE ? large : small;
}

/* ---- statistics --------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bench_summarize(bench_result *r, double *samples, int n, double avg)
{
    r->avg = avg;
    r->valid = true;
    if (samples == NULL || n == 0) {
        r->min = r->max = r->p50 = r->p99 = avg;
        return;
    }
    qsort(samples, (size_t)n, sizeof(double), cmp_double);
    r->min = samples[0];
    r->max = samples[n - 1];
    r->p50 = samples[n / 2];
    r->p99 = samples[(int)((double)(n - 1) * 0.99)];
}

/* ---- output ------------------------------------------------------------- */

static const char *unit_name(bench_unit unit)
{
    switch (unit) {
    case BENCH_LATENCY:
        return "Latency(us)";
    case BENCH_BANDWIDTH:
        return "Bandwidth (MB/s)";
    default:
        return "Messages/s";
    }
}

static bool better(bench_unit unit, double a, double b)
{
    return unit == BENCH_LATENCY ? a < b : a > b;
}

void bench_print_header(const bench_opts *o, const char *title, bench_unit unit,
                        const char *first_col)
{
    if (bench_rank != 0) {
        return;
    }
    printf("\n# OSU MPI %s Test v7.4 (rig: rails side by side with MPI and "
           "raw UCX)\n",
           title);
    printf("# Methods:");
    for (int i = 0; i < o->nmethods; i++) {
        printf(" %s (%s)%s", o->methods[i]->name, o->methods[i]->about,
               i + 1 < o->nmethods ? ";" : "");
    }
    printf("\n# Footprint: every baseline keeps %d cop%s of each message "
           "of a run per direction (%s)\n",
           bench_copies, bench_copies == 1 ? "y" : "ies",
           bench_copies == 1 ? "OSU's one buffer, -B 1"
                             : "a rail's two copies; -B 1 for OSU's one");
    if (o->rounds > 1) {
        printf("# Rounds: %d per size, every method in each, in alternating "
               "order (the order above, then backwards); each value is the "
               "median of its method's %d rounds\n",
               o->rounds, o->rounds);
    } else {
        printf("# Rounds: 1 per size (-r N: N rounds, methods interleaved, "
               "medians)\n");
    }
    const char *stats[] = {"min", "max", "p50", "p99"};
    if (!o->all) {
        if (unit == BENCH_LATENCY) {
            printf("%-10s%20s", first_col, "Avg Latency(us)");
        } else if (unit == BENCH_BANDWIDTH) {
            printf("%-10s%20s", first_col, "Bandwidth (MB/s)");
        } else {
            printf("%-10s%20s", first_col, "Messages/s");
        }
        if (o->full) {
            for (int s = 0; s < 4; s++) {
                printf("%20s", stats[s]);
            }
        }
        printf("%20s%10s  %s\n", "Best baseline", "Ratio", "Baseline");
    } else {
        printf("%-10s", first_col);
        for (int i = 0; i < o->nmethods; i++) {
            char col[64];
            snprintf(col, sizeof(col), "%s", o->methods[i]->name);
            printf("%20s", col);
            if (o->full) {
                for (int s = 0; s < 4; s++) {
                    snprintf(col, sizeof(col), "%s.%s", o->methods[i]->name,
                             stats[s]);
                    printf("%20s", col);
                }
            }
        }
        printf("   (%s)\n", unit_name(unit));
    }
    fflush(stdout);
}

static void print_value(bool valid, double v)
{
    if (valid) {
        printf("%20.2f", v);
    } else {
        printf("%20s", "-");
    }
}

void bench_print_row(const bench_opts *o, bench_unit unit, size_t key,
                     const bench_result *res)
{
    if (bench_rank != 0) {
        return;
    }
    printf("%-10zu", key);
    if (o->all) {
        for (int i = 0; i < o->nmethods; i++) {
            print_value(res[i].valid, res[i].avg);
            if (o->full) {
                print_value(res[i].valid, res[i].min);
                print_value(res[i].valid, res[i].max);
                print_value(res[i].valid, res[i].p50);
                print_value(res[i].valid, res[i].p99);
            }
        }
        printf("\n");
        fflush(stdout);
        return;
    }
    /* Default: the first method (rig when it runs), the best baseline. */
    print_value(res[0].valid, res[0].avg);
    if (o->full) {
        print_value(res[0].valid, res[0].min);
        print_value(res[0].valid, res[0].max);
        print_value(res[0].valid, res[0].p50);
        print_value(res[0].valid, res[0].p99);
    }
    int best = -1;
    for (int i = 1; i < o->nmethods; i++) {
        if (o->methods[i]->baseline && res[i].valid &&
            (best < 0 || better(unit, res[i].avg, res[best].avg))) {
            best = i;
        }
    }
    if (best < 0) {
        printf("%20s%10s  %s\n", "-", "-", "-");
    } else {
        print_value(true, res[best].avg);
        if (res[0].valid && res[best].avg > 0) {
            printf("%10.2f", res[0].avg / res[best].avg);
        } else {
            printf("%10s", "-");
        }
        printf("  %s\n", o->methods[best]->name);
    }
    fflush(stdout);
}

/* ---- stamps ------------------------------------------------------------- */

/* Bytes of the stamp at each end of a message. */
static size_t stamp_len(size_t size)
{
    return size < 8 ? size : 8;
}

static uint8_t pattern_byte(size_t i)
{
    return (uint8_t)(i * 131u + 17u);
}

void bench_pattern(uint8_t *msg, size_t size)
{
    size_t n = stamp_len(size);
    size_t end = size >= 16 ? size - 8 : size;
    for (size_t i = n; i < end; i++) {
        msg[i] = pattern_byte(i);
    }
}

/* Whether msg's stamp is in [lo, hi] and not torn; *v: its number. */
static bool stamp_ok(const uint8_t *msg, size_t size, uint64_t lo, uint64_t hi,
                     uint64_t *v)
{
    size_t n = stamp_len(size);
    uint64_t a = 0, b = 0;
    memcpy(&a, msg, n);
    uint64_t mask = n >= 8 ? UINT64_MAX : ((uint64_t)1 << (8 * n)) - 1;
    uint64_t off = (a - lo) & mask;
    if (n == 0 || off > hi - lo) {
        return false;
    }
    if (size >= 16) {
        memcpy(&b, msg + size - 8, 8);
        if (b != a) {
            return false;
        }
    }
    *v = lo + off;
    return true;
}

uint64_t bench_check_live(const char *method, const uint8_t *msg, size_t size,
                          uint64_t lo, uint64_t (*flag)(const void *ctx),
                          const void *ctx, uint64_t ahead)
{
    size_t n = stamp_len(size);
    uint64_t mask = n >= 8 ? UINT64_MAX : ((uint64_t)1 << (8 * n)) - 1;
    uint64_t prev_f = 0, prev_a = 0, prev_b = 0, v = 0;
    /* The message it waited for, whole: as the floor checks, with no
     * look at the flag (a call through a pointer on every message). */
    if (stamp_ok(msg, size, lo, lo, &v)) {
        return v;
    }
    double since = 0;
    for (int tries = 0;; tries++) {
        uint64_t f = flag(ctx), a = 0, b = 0;
        if (stamp_ok(msg, size, lo, f + ahead, &v)) {
            return v;
        }
        memcpy(&a, msg, n);
        b = a;
        if (size >= 16) {
            memcpy(&b, msg + size - 8, 8);
        }
        /* A writer may be part-way through a message not signalled yet
         * (and may be preempted there): wait while the bytes or the flag
         * move, or a stamp is past the flag; a wrong state that stays put
         * for a while is what arrived. */
        uint64_t va = lo + ((a - lo) & mask), vb = lo + ((b - lo) & mask);
        bool moved = tries == 0 || f != prev_f || a != prev_a || b != prev_b;
        if (moved) {
            since = bench_now();
        } else {
            /* A writer descheduled mid-message on a loaded machine leaves
             * a torn state still for tens of milliseconds: only a second
             * of stillness (ten for a message not signalled yet) means
             * the bytes are wrong. */
            double still = bench_now() - since;
            bool unsignalled = va > f || vb > f;
            if ((!unsignalled && still > 1.0) || still > 10.0) {
                return bench_check_stamp(method, msg, size, lo, f + ahead);
            }
        }
        prev_f = f;
        prev_a = a;
        prev_b = b;
    }
}

uint64_t bench_check_stamp(const char *method, const uint8_t *msg, size_t size,
                           uint64_t lo, uint64_t hi)
{
    size_t n = stamp_len(size);
    uint64_t v = 0, w = 0;
    memcpy(&v, msg, n);
    /* A short stamp holds seq modulo 2^(8n): compare in that ring. */
    uint64_t mask = n >= 8 ? UINT64_MAX : ((uint64_t)1 << (8 * n)) - 1;
    uint64_t off = (v - lo) & mask;
    if (n == 0 || off > hi - lo) {
        bench_die("wrong data: %s, %zu-byte message %llu: stamp %llu, "
                  "expected %llu..%llu",
                  method, size, (unsigned long long)lo, (unsigned long long)v,
                  (unsigned long long)(lo & mask),
                  (unsigned long long)(hi & mask));
    }
    if (size >= 16) {
        memcpy(&w, msg + size - 8, 8);
        if (w != v) {
            bench_die("wrong data: %s, %zu-byte message %llu: torn, stamp "
                      "%llu at the start and %llu at the end",
                      method, size, (unsigned long long)lo,
                      (unsigned long long)v, (unsigned long long)w);
        }
    }
    return lo + off;
}

void bench_check_all(const char *method, const uint8_t *msg, size_t size,
                     uint64_t lo, uint64_t hi)
{
    bench_check_stamp(method, msg, size, lo, hi);
    size_t n = stamp_len(size);
    size_t end = size >= 16 ? size - 8 : size;
    for (size_t i = n; i < end; i++) {
        if (msg[i] != pattern_byte(i)) {
            bench_die("wrong data: %s, %zu-byte message %llu: byte %zu holds "
                      "0x%02x, expected 0x%02x",
                      method, size, (unsigned long long)lo, i, msg[i],
                      pattern_byte(i));
        }
    }
}
