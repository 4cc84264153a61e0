/* SPDX-License-Identifier: BSD-3-Clause */
/* The rig methods: messages carried by one bidirectional rail, over the
 * UCX transport ("rig") and over the MPI RMA transport ("rig_mpi"). */
#include "bench.h"
#include "rig_bench.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    rig_job *job;
    rig_rail *rail;
    rig_end *end;
    size_t out, in, n;
    uint8_t *obase, *ibase; /* copy 0 of the outbound and inbound areas */
    size_t ocopy, icopy;    /* bytes of one copy */
    uint64_t readied, got;
    size_t got_run; /* transfers in the last run received by recv_run */
} rig_link;

static rig_job *g_job;

rig_job *bench_rig_job(void)
{
    return g_job;
}

void bench_rig_lists(size_t size, size_t n, rig_transfer *t)
{
    for (size_t j = 0; j < n; j++) {
        t[j].src = (int64_t)(j * size);
        t[j].dst = (int64_t)(j * size);
        t[j].length = (int64_t)size;
    }
}

static rig_rail *rail_on(rig_job *job, size_t out, size_t in, size_t n)
{
    rig_transfer *s = calloc(n, sizeof(*s));
    rig_transfer *r = calloc(n, sizeof(*r));
    if (s == NULL || r == NULL) {
        bench_die("nomem: %zu transfers", n);
    }
    bench_rig_lists(out, n, s);
    bench_rig_lists(in, n, r);
    rig_rail *rail = NULL;
    char *err = NULL;
    if (!rig_job_rail(job, bench_peer(), s, n, r, n, &rail, &err)) {
        bench_die("%s (rig_job_rail of %zu x %zu bytes)", err, n, out);
    }
    free(s);
    free(r);
    return rail;
}

rig_rail *bench_rig_rail(size_t out, size_t in, size_t n)
{
    return rail_on(g_job, out, in, n);
}

/* transport NULL: the default (UCX), whose job the other benchmarks share
 * through bench_rig_job. */
static bool open_on(const char *transport, void **state, char **err)
{
    rig_link *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        bench_die("nomem: rig state");
    }
    rig_job_options o;
    rig_job_options_init(&o);
    if (transport != NULL) {
        o.transport = transport;
    }
    if (!rig_job_open(MPI_COMM_WORLD, &o, &l->job, err)) {
        free(l);
        return false;
    }
    if (transport == NULL) {
        g_job = l->job;
    }
    *state = l;
    return true;
}

static bool rig_open(void **state, char **err)
{
    return open_on(NULL, state, err);
}

static bool rig_mpi_open(void **state, char **err)
{
    /* Across nodes the MPI transport's MPI_Win_flush waits for the target
     * to enter MPI (Open MPI's osc over TCP), which a rank polling a
     * rail's counts never does: the run would hang (issue 14) until the
     * transport refuses such a job itself. */
    MPI_Comm node;
    int here = 0, all = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                        &node);
    MPI_Comm_size(node, &here);
    MPI_Comm_free(&node);
    MPI_Comm_size(MPI_COMM_WORLD, &all);
    if (here != all) {
        *err = strdup("unsupported: the MPI RMA transport across nodes "
                      "(its flush needs the target inside MPI; issue 14)");
        return false;
    }
    return open_on("mpi", state, err);
}

static void rig_close(void *state)
{
    rig_link *l = state;
    if (g_job == l->job) {
        g_job = NULL;
    }
    rig_job_close(l->job);
    free(l);
}

static bool rig_setup(void *state, size_t out, size_t in, size_t n, char **err)
{
    (void)err;
    rig_link *l = state;
    l->out = out;
    l->in = in;
    l->n = n;
    l->rail = rail_on(l->job, out, in, n);
    l->end = rig_rail_local(l->rail);
    if (l->end == NULL) {
        bench_die("failed: rig rail %lld has no local end",
                  (long long)rig_rail_id(l->rail));
    }
    rig_area o = rig_end_outbound(l->end), i = rig_end_inbound(l->end);
    l->obase = o.base;
    l->ocopy = o.len / 2;
    l->ibase = i.base;
    l->icopy = i.len / 2;
    for (size_t k = 0; k < 2; k++) {
        for (size_t j = 0; j < n; j++) {
            bench_pattern(l->obase + k * l->ocopy + j * out, out);
        }
    }
    l->readied = l->got = 0;
    l->got_run = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    return true;
}

static void rig_teardown(void *state)
{
    rig_link *l = state;
    if (l->readied > 0 && !rig_end_wait_sent(l->end, l->readied)) {
        bench_die("failed: rig rail ended while sending");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    rig_rail_release(l->rail);
    l->rail = NULL;
    l->end = NULL;
}

static void rig_recv_post(void *state, size_t count)
{
    (void)state;
    (void)count;
}

/* Transfer seq's place: its index j in the list and the copy k it is in.
 * One transfer a run (the latency rows) needs no division: the floor it
 * is compared with does none, and two 64-bit divisions a message cost
 * about as much as a tenth of an 8 B round trip. */
static void rig_place(const rig_link *l, uint64_t seq, size_t *j, unsigned *k)
{
    if (l->n == 1) {
        *j = 0;
        *k = (unsigned)((seq - 1) & 1);
    } else {
        *j = (size_t)((seq - 1) % l->n);
        *k = (unsigned)(((seq - 1) / l->n) % 2);
    }
}

static void rig_send(void *state, uint64_t seq, bool signal)
{
    rig_link *l = state;
    size_t j;
    unsigned k;
    rig_place(l, seq, &j, &k);
    /* The same bytes were last sent two runs ago. */
    if (seq > 2 * l->n && !rig_end_wait_sent(l->end, seq - 2 * l->n)) {
        bench_die("failed: rig rail failed while sending %llu",
                  (unsigned long long)seq);
    }
    bench_stamp(l->obase + k * l->ocopy + j * l->out, l->out, seq);
    if (signal) {
        rig_end_ready(l->end, seq);
        l->readied = seq;
    }
}

static void rig_send_wait(void *state)
{
    rig_link *l = state;
    if (l->readied > 0 && !rig_end_wait_sent(l->end, l->readied)) {
        bench_die("failed: rig rail failed while sending");
    }
}

static const uint8_t *rig_msg(const rig_link *l, uint64_t seq)
{
    size_t j;
    unsigned k;
    rig_place(l, seq, &j, &k);
    return l->ibase + k * l->icopy + j * l->in;
}

static uint64_t rig_arrived_of(const void *ctx)
{
    return rig_end_arrived(((const rig_link *)ctx)->end);
}

static void rig_recv_wait(void *state, uint64_t seq)
{
    rig_link *l = state;
    if (!rig_end_wait_arrived(l->end, seq)) {
        bench_die("failed: rig rail failed while waiting for %llu",
                  (unsigned long long)seq);
    }
    l->got = seq;
    l->got_run = 0;
    bench_check_live("rig", rig_msg(l, seq), l->in, seq, rig_arrived_of, l,
                     2 * l->n);
}

/* A run at once: the copy it fills was last sent two runs ago, so one
 * wait covers every transfer; one ready carries them all. */
static void rig_send_run(void *state, uint64_t first, size_t n)
{
    rig_link *l = state;
    uint64_t last = first + n - 1;
    if (last > 2 * l->n && !rig_end_wait_sent(l->end, last - 2 * l->n)) {
        bench_die("failed: rig rail failed while sending %llu",
                  (unsigned long long)last);
    }
    /* One place for the run (not two divisions per transfer: they would
     * cost more than the transfers). */
    size_t j;
    unsigned k;
    rig_place(l, first, &j, &k);
    for (uint64_t seq = first; seq <= last; seq++) {
        bench_stamp(l->obase + k * l->ocopy + j * l->out, l->out, seq);
        if (++j == l->n) {
            j = 0;
            k ^= 1;
        }
    }
    rig_end_ready(l->end, last);
    l->readied = last;
}

/* A ping-pong's run: once `arrived` covers it, the peer waits for our
 * answer before it writes these bytes again, so the stamps are exact.  The
 * first and last transfer's stamps are checked, the lines that one
 * transfer of the run's size has checked (its first and last bytes);
 * rig_recv_check checks every byte of the whole last run. */
static void rig_recv_run(void *state, uint64_t first, size_t n)
{
    rig_link *l = state;
    uint64_t last = first + n - 1;
    if (!rig_end_wait_arrived(l->end, last)) {
        bench_die("failed: rig rail failed while waiting for %llu",
                  (unsigned long long)last);
    }
    bench_check_stamp("rig", rig_msg(l, first), l->in, first, first);
    bench_check_stamp("rig", rig_msg(l, last), l->in, last, last);
    l->got = last;
    l->got_run = n;
}

static void rig_recv_check(void *state)
{
    rig_link *l = state;
    if (l->got > 0) {
        bench_check_all("rig", rig_msg(l, l->got), l->in, l->got,
                        rig_end_arrived(l->end) + 2 * l->n);
    }
    /* After runs: every other transfer of the last one, exactly. */
    if (l->got_run > 1) {
        for (uint64_t seq = l->got - l->got_run + 1; seq < l->got; seq++) {
            bench_check_all("rig", rig_msg(l, seq), l->in, seq, seq);
        }
    }
}

const bench_method bench_rig = {
    .name = "rig",
    .about = "a rig rail: rig_end_ready + rig_end_wait_arrived",
    .baseline = false,
    .open = rig_open,
    .close = rig_close,
    .setup = rig_setup,
    .teardown = rig_teardown,
    .recv_post = rig_recv_post,
    .send = rig_send,
    .send_wait = rig_send_wait,
    .recv_wait = rig_recv_wait,
    .recv_check = rig_recv_check,
    .send_run = rig_send_run,
    .recv_run = rig_recv_run,
};

/* The same over the MPI RMA transport (RIG_TRANSPORT, when set, decides
 * for both columns). */
const bench_method bench_rig_mpi = {
    .name = "rig_mpi",
    .about = "a rig rail over MPI RMA (transport \"mpi\")",
    .baseline = false,
    .open = rig_mpi_open,
    .close = rig_close,
    .setup = rig_setup,
    .teardown = rig_teardown,
    .recv_post = rig_recv_post,
    .send = rig_send,
    .send_wait = rig_send_wait,
    .recv_wait = rig_recv_wait,
    .recv_check = rig_recv_check,
    .send_run = rig_send_run,
    .recv_run = rig_recv_run,
};
