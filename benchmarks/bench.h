/* SPDX-License-Identifier: BSD-3-Clause */
/* The shared core of rig's OSU-style benchmarks: options, methods, checks.
 *
 * Concepts.
 *
 * A *method* moves numbered messages between the two ranks of the run:
 * rig's rails, MPI_Send/MPI_Recv, persistent MPI requests, MPI_Put with a
 * flag, the same put-fence-counter protocol on raw UCX, and the floor (one
 * cache line stored and polled through UCX-mapped memory).  Every method
 * answers the same five calls, so each benchmark is written once and runs
 * every method side by side, interleaved at every size.
 *
 * A *link* is a method set up for one size: this rank sends messages of
 * `out` bytes and receives messages of `in` bytes, numbered from 1 in each
 * direction, laid out in runs of n messages (a rail of n transfers).
 *
 * Every message carries its number (its *stamp*) at its ends and a fixed
 * pattern between them; receivers check the stamp of every message and the
 * whole of the last ones, and a wrong byte aborts the run naming the method,
 * the size and the message, so that a fast wrong result is never printed. */
#ifndef RIG_BENCH_H
#define RIG_BENCH_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- methods ------------------------------------------------------------ */

/* A method's link.  Calls are made by both ranks of the run, in matching
 * patterns; sequence numbers start at 1 in each direction after setup. */
typedef struct bench_method bench_method;

/* Opens the method for the run (collective over MPI_COMM_WORLD); false
 * with *err when this method cannot run here (then it is left out). */
typedef bool (*bench_open_fn)(void **state, char **err);
/* Closes what open made (collective). */
typedef void (*bench_close_fn)(void *state);
/* Sets up a link: send messages of out bytes, receive messages of in bytes,
 * in runs of n (collective: both ranks call it, each with its own view). */
typedef bool (*bench_setup_fn)(void *state, size_t out, size_t in, size_t n,
                               char **err);
/* Tears the link down (collective). */
typedef void (*bench_teardown_fn)(void *state);
/* Makes ready to receive the next count messages (pre-posts receives). */
typedef void (*bench_recv_post_fn)(void *state, size_t count);
/* Sends message seq.  signal false: more of the same run follow at once,
 * and the method may signal their arrival with the last one only. */
typedef void (*bench_send_fn)(void *state, uint64_t seq, bool signal);
/* Waits until every message sent so far may be reused at the source. */
typedef void (*bench_send_wait_fn)(void *state);
/* Waits for message seq and checks its stamp. */
typedef void (*bench_recv_wait_fn)(void *state, uint64_t seq);
/* Checks every byte of the last message received (end of a size). */
typedef void (*bench_recv_check_fn)(void *state);
/* Optional, for ping-pongs of runs: sends messages first..first + n - 1
 * with one signal, and waits for such a run and checks every message's
 * stamp -- what a program that reads a whole run does, where the
 * message-by-message calls would time the harness instead. */
typedef void (*bench_send_run_fn)(void *state, uint64_t first, size_t n);
typedef void (*bench_recv_run_fn)(void *state, uint64_t first, size_t n);

struct bench_method {
    const char *name;  /* column name: rig, floor, mpi, persistent, ... */
    const char *about; /* one line for the header */
    bool baseline;     /* competes for "best baseline" */
    bool named_only;   /* run only when -b names it (not by default or all) */
    size_t max_size;   /* largest message; 0: no limit */
    bench_open_fn open;
    bench_close_fn close;
    bench_setup_fn setup;
    bench_teardown_fn teardown;
    bench_recv_post_fn recv_post;
    bench_send_fn send;
    bench_send_wait_fn send_wait;
    bench_recv_wait_fn recv_wait;
    bench_recv_check_fn recv_check;
    bench_send_run_fn send_run; /* NULL: send message by message */
    bench_recv_run_fn recv_run; /* NULL: recv_wait message by message */
};

extern const bench_method bench_rig;
extern const bench_method bench_rig_mpi;
extern const bench_method bench_floor;
extern const bench_method bench_floor2;
extern const bench_method bench_mpi;
extern const bench_method bench_persistent;
extern const bench_method bench_put;
extern const bench_method bench_ucx;
extern const bench_method bench_ucx_am;

/* ---- the run ------------------------------------------------------------ */

/* What a benchmark measures and how it prints. */
typedef enum {
    BENCH_LATENCY,   /* microseconds, lower is better */
    BENCH_BANDWIDTH, /* MB/s, higher is better */
    BENCH_RATE       /* messages per second, higher is better */
} bench_unit;

#define BENCH_MAX_METHODS 8
/* The most messages in flight in one direction (-W). */
#define BENCH_MAX_WINDOW 256
/* The most rounds of each measurement (-r). */
#define BENCH_MAX_ROUNDS 64

/* The options of every benchmark (OSU's, plus -b and -r). */
typedef struct {
    size_t min_size, max_size; /* -m min:max */
    int iterations;            /* -i; 0: OSU's default for the size */
    int warmup;                /* -x; -1: OSU's default */
    int window;                /* -W window size (bw, bibw, mr) */
    bool full;                 /* -f: min, max, p50, p99 columns */
    bool all;                  /* -b given: print every selected method */
    int rounds;                /* -r: rounds of each measurement, methods
                                * interleaved; the median is kept */
    int copies;                /* -B: bench_copies */
    const bench_method *methods[BENCH_MAX_METHODS];
    void *state[BENCH_MAX_METHODS];
    int nmethods;
} bench_opts;

/* One measurement of one method at one size: the average, and with -f the
 * distribution of per-iteration samples. */
typedef struct {
    double avg, min, max, p50, p99;
    bool valid;
} bench_result;

extern int bench_rank;
extern const char *bench_prog;
/* Copies each baseline keeps of every transfer of a run, per direction:
 * 2, the footprint of a rail (two copies of its landing areas), or 1 with
 * -B 1, the footprint of OSU's benchmarks (one buffer each way).  Messages
 * beyond them reuse the copies in turn, as OSU's reuse their one buffer. */
extern int bench_copies;
/* Set by the latency benchmark: one message in flight at a time, and the
 * mpi method uses blocking MPI_Send and MPI_Recv. */
extern bool bench_pingpong;

/* MPI_Init, options (usage on -h and on errors), methods opened.  floor
 * says whether the floor method belongs to this benchmark. */
void bench_init(int *argc, char ***argv, bench_opts *o, size_t def_min,
                size_t def_max, bool floor);
/* Methods closed, MPI_Finalize. */
void bench_fini(bench_opts *o);

/* OSU's iteration and warm-up counts for a size (large sizes scaled down),
 * or the user's -i / -x. */
int bench_iters(const bench_opts *o, size_t size, int small, int large);
int bench_skip(const bench_opts *o, size_t size, int small, int large);

/* Monotonic time in seconds (vDSO: no syscall). */
double bench_now(void);

/* Fills *r from samples[0..n) (any order) and total seconds / scale. */
void bench_summarize(bench_result *r, double *samples, int n, double avg);

/* Prints the header (title, the methods, the footprint, the rounds, then
 * the column names) and the row of one size.  Default: the first method
 * (rig), the best baseline, their ratio and the baseline's name; -b: every
 * method. */
void bench_print_header(const bench_opts *o, const char *title, bench_unit unit,
                        const char *first_col);
void bench_print_row(const bench_opts *o, bench_unit unit, size_t key,
                     const bench_result *res);

/* ---- stamps and checks -------------------------------------------------- */

/* Writes message seq's stamp into msg[0..size): its first min(size, 8)
 * bytes, and from 16 bytes on its last 8 too.  Inline: a run of small
 * messages stamps each, and a call apiece would be timed. */
static inline void bench_stamp(uint8_t *msg, size_t size, uint64_t seq)
{
    if (size >= 8) {
        memcpy(msg, &seq, 8);
    } else {
        memcpy(msg, &seq, size);
    }
    if (size >= 16) {
        memcpy(msg + size - 8, &seq, 8);
    }
}
/* Writes the fixed pattern between the stamps of msg[0..size). */
void bench_pattern(uint8_t *msg, size_t size);
/* Checks that msg's stamp is a message number in [lo, hi] (aborting with
 * the method, size and seq otherwise); returns the stamp. */
uint64_t bench_check_stamp(const char *method, const uint8_t *msg, size_t size,
                           uint64_t lo, uint64_t hi);
/* As bench_check_stamp while a writer may still be changing msg (one-sided
 * streams, shared buffers): hi is flag(ctx) + ahead, read before the
 * stamp; a check that fails is retried while the flag or the stamp move,
 * and aborts only when a wrong state stays put. */
uint64_t bench_check_live(const char *method, const uint8_t *msg, size_t size,
                          uint64_t lo, uint64_t (*flag)(const void *ctx),
                          const void *ctx, uint64_t ahead);
/* Checks the pattern and the stamp of msg (as above) byte by byte. */
void bench_check_all(const char *method, const uint8_t *msg, size_t size,
                     uint64_t lo, uint64_t hi);

/* Aborts the run (MPI_Abort) with a message starting with a reason word. */
_Noreturn void bench_die(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/* Aborts when an MPI call failed, naming it. */
void bench_mpi_check(int rc, const char *call);

/* The peer rank of this one (the run has exactly two). */
static inline int bench_peer(void)
{
    return 1 - bench_rank;
}

#endif
