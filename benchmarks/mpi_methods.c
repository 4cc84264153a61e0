/* SPDX-License-Identifier: BSD-3-Clause */
/* The MPI baselines: MPI_Send/MPI_Recv, persistent requests, MPI_Put. */
#include "bench.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Requests in a ring: one per message in flight. */
#define RING BENCH_MAX_WINDOW
/* Buffers of one direction: bench_copies per transfer of a run, as a rail
 * keeps two copies of its landing areas (OSU keeps one buffer), capped at
 * 64 MiB; messages beyond them share them in turn (as OSU's share their
 * one), and stamps are checked against a window instead. */
#define BUF_CAP ((size_t)64 << 20)
#define TAG 77

/* ---- two-sided: mpi and persistent -------------------------------------- */

typedef struct {
    bool persistent;
    const char *name;
    size_t out, in;
    size_t oslots, islots; /* buffers per direction */
    uint8_t *sbuf, *rbuf;
    MPI_Request sreq[RING], rreq[RING];
    uint64_t sent, done;  /* sends started, sends completed */
    uint64_t posted, got; /* receives posted, receives waited for */
    size_t got_run;       /* messages in the last run of recv_run */
} p2p;

static size_t slots_for(size_t size, size_t n)
{
    size_t k = (size_t)bench_copies * n;
    size_t cap = size == 0 ? k : BUF_CAP / size;
    if (k > cap) {
        k = cap;
    }
    if (k > RING) {
        k = RING;
    }
    return k == 0 ? 1 : k;
}

static bool p2p_open_as(void **state, bool persistent, const char *name,
                        char **err)
{
    (void)err;
    p2p *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        bench_die("nomem: %s state", name);
    }
    p->persistent = persistent;
    p->name = name;
    *state = p;
    return true;
}

static bool mpi_open(void **state, char **err)
{
    return p2p_open_as(state, false, "mpi", err);
}

static bool persistent_open(void **state, char **err)
{
    return p2p_open_as(state, true, "persistent", err);
}

static void p2p_close(void *state)
{
    free(state);
}

static bool p2p_setup(void *state, size_t out, size_t in, size_t n, char **err)
{
    (void)err;
    p2p *p = state;
    p->out = out;
    p->in = in;
    p->oslots = slots_for(out, n);
    p->islots = slots_for(in, n);
    p->sbuf = aligned_alloc(4096, (p->oslots * out + 4095) / 4096 * 4096);
    p->rbuf = aligned_alloc(4096, (p->islots * in + 4095) / 4096 * 4096);
    if (p->sbuf == NULL || p->rbuf == NULL) {
        bench_die("nomem: %s buffers of %zu bytes", p->name, out);
    }
    for (size_t k = 0; k < p->oslots; k++) {
        bench_pattern(p->sbuf + k * out, out);
    }
    memset(p->rbuf, 0, p->islots * in);
    p->sent = p->done = p->posted = p->got = 0;
    p->got_run = 0;
    for (int i = 0; i < RING; i++) {
        p->sreq[i] = p->rreq[i] = MPI_REQUEST_NULL;
        if (!p->persistent) {
            continue;
        }
        bench_mpi_check(MPI_Send_init(p->sbuf + (size_t)i % p->oslots * out,
                                      (int)out, MPI_BYTE, bench_peer(), TAG,
                                      MPI_COMM_WORLD, &p->sreq[i]),
                        "MPI_Send_init");
        bench_mpi_check(MPI_Recv_init(p->rbuf + (size_t)i % p->islots * in,
                                      (int)in, MPI_BYTE, bench_peer(), TAG,
                                      MPI_COMM_WORLD, &p->rreq[i]),
                        "MPI_Recv_init");
    }
    return true;
}

static void p2p_teardown(void *state)
{
    p2p *p = state;
    for (int i = 0; i < RING; i++) {
        if (p->sreq[i] != MPI_REQUEST_NULL) {
            MPI_Request_free(&p->sreq[i]);
        }
        if (p->rreq[i] != MPI_REQUEST_NULL) {
            MPI_Request_free(&p->rreq[i]);
        }
    }
    free(p->sbuf);
    free(p->rbuf);
    p->sbuf = p->rbuf = NULL;
}

/* Starts requests [from, from + count) of a ring (persistent). */
static void start_range(MPI_Request *ring, uint64_t from, size_t count)
{
    size_t at = (size_t)(from % RING);
    while (count > 0) {
        size_t k = RING - at < count ? RING - at : count;
        bench_mpi_check(MPI_Startall((int)k, ring + at), "MPI_Startall");
        count -= k;
        at = 0;
    }
}

/* Waits for requests [from, from + count) of a ring. */
static void wait_range(MPI_Request *ring, uint64_t from, size_t count)
{
    size_t at = (size_t)(from % RING);
    while (count > 0) {
        size_t k = RING - at < count ? RING - at : count;
        bench_mpi_check(MPI_Waitall((int)k, ring + at, MPI_STATUSES_IGNORE),
                        "MPI_Waitall");
        count -= k;
        at = 0;
    }
}

static void p2p_recv_post(void *state, size_t count)
{
    p2p *p = state;
    if (bench_pingpong && !p->persistent) {
        return; /* MPI_Recv in recv_wait */
    }
    if (p->posted - p->got + count > RING) {
        bench_die("invalid: %s: more than %d receives posted", p->name, RING);
    }
    if (p->persistent) {
        start_range(p->rreq, p->posted, count);
    } else {
        for (size_t i = 0; i < count; i++) {
            uint64_t q = p->posted + i;
            bench_mpi_check(MPI_Irecv(p->rbuf + q % p->islots * p->in,
                                      (int)p->in, MPI_BYTE, bench_peer(), TAG,
                                      MPI_COMM_WORLD, &p->rreq[q % RING]),
                            "MPI_Irecv");
        }
    }
    p->posted += count;
}

static void p2p_send(void *state, uint64_t seq, bool signal)
{
    (void)signal;
    p2p *p = state;
    uint8_t *buf = p->sbuf + (seq - 1) % p->oslots * p->out;
    /* A buffer still in flight keeps its stamp (MPI forbids writing it). */
    if (p->sent - p->done < p->oslots) {
        bench_stamp(buf, p->out, seq);
    }
    if (bench_pingpong && !p->persistent) {
        bench_mpi_check(MPI_Send(buf, (int)p->out, MPI_BYTE, bench_peer(), TAG,
                                 MPI_COMM_WORLD),
                        "MPI_Send");
        p->sent++;
        p->done++;
        return;
    }
    if (p->sent - p->done >= RING) {
        bench_die("invalid: %s: more than %d sends in flight", p->name, RING);
    }
    MPI_Request *r = &p->sreq[(seq - 1) % RING];
    if (p->persistent) {
        bench_mpi_check(MPI_Start(r), "MPI_Start");
    } else {
        bench_mpi_check(MPI_Isend(buf, (int)p->out, MPI_BYTE, bench_peer(), TAG,
                                  MPI_COMM_WORLD, r),
                        "MPI_Isend");
    }
    p->sent++;
}

static void p2p_send_wait(void *state)
{
    p2p *p = state;
    wait_range(p->sreq, p->done, (size_t)(p->sent - p->done));
    p->done = p->sent;
}

/* Receives posted: the newest message a shared buffer may hold, less the
 * ring.  Single-copy transports write buffers from the sender's side. */
static uint64_t p2p_posted(const void *ctx)
{
    return ((const p2p *)ctx)->posted;
}

static void p2p_recv_wait(void *state, uint64_t seq)
{
    p2p *p = state;
    uint8_t *buf = p->rbuf + (seq - 1) % p->islots * p->in;
    if (bench_pingpong && !p->persistent) {
        bench_mpi_check(MPI_Recv(buf, (int)p->in, MPI_BYTE, bench_peer(), TAG,
                                 MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                        "MPI_Recv");
        p->posted = seq;
    } else {
        bench_mpi_check(MPI_Wait(&p->rreq[(seq - 1) % RING], MPI_STATUS_IGNORE),
                        "MPI_Wait");
    }
    p->got = seq;
    p->got_run = 0;
    /* Shared buffers hold the stamp of some message of the last ring. */
    uint64_t lo = p->islots >= RING || seq <= RING ? seq : seq - RING;
    if (p->islots < RING && seq <= RING) {
        lo = 1;
    }
    if (p->islots >= RING) {
        bench_check_stamp(p->name, buf, p->in, seq, seq);
    } else {
        bench_check_live(p->name, buf, p->in, lo, p2p_posted, p, RING);
    }
}

static void p2p_recv_check(void *state)
{
    p2p *p = state;
    if (p->got == 0) {
        return;
    }
    uint64_t seq = p->got;
    uint8_t *buf = p->rbuf + (seq - 1) % p->islots * p->in;
    uint64_t lo = p->islots >= RING ? seq : (seq > RING ? seq - RING : 1);
    bench_check_all(p->name, buf, p->in, lo,
                    p->islots >= RING ? seq : p->posted + RING);
    /* After runs: every other message of the last one, exactly, as rig's
     * check does. */
    if (p->got_run > 1) {
        for (uint64_t q = seq - p->got_run + 1; q < seq; q++) {
            bench_check_all(p->name, p->rbuf + (q - 1) % p->islots * p->in,
                            p->in, q, q);
        }
    }
}

/* A run at once, as rig's run mode does: n messages sent... */
static void p2p_send_run(void *state, uint64_t first, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        p2p_send(state, first + j, j + 1 == n);
    }
}

/* ... and received with one wait for the run and the same checks as
 * rig's: the stamps of its first and last message (every byte of the last
 * run is checked at the end, by p2p_recv_check).  In a ping-pong no
 * message of the next run is sent before this one is answered, so each
 * message's buffer holds exactly its stamp. */
static void p2p_recv_run(void *state, uint64_t first, size_t n)
{
    p2p *p = state;
    uint64_t last = first + n - 1;
    wait_range(p->rreq, first - 1, n);
    p->got = last;
    p->got_run = n;
    bench_check_stamp(p->name, p->rbuf + (first - 1) % p->islots * p->in, p->in,
                      first, first);
    bench_check_stamp(p->name, p->rbuf + (last - 1) % p->islots * p->in, p->in,
                      last, last);
}

const bench_method bench_mpi = {
    .name = "mpi",
    .about = "MPI_Send/MPI_Recv; MPI_Isend/MPI_Irecv in windows",
    .baseline = true,
    .open = mpi_open,
    .close = p2p_close,
    .setup = p2p_setup,
    .teardown = p2p_teardown,
    .recv_post = p2p_recv_post,
    .send = p2p_send,
    .send_wait = p2p_send_wait,
    .recv_wait = p2p_recv_wait,
    .recv_check = p2p_recv_check,
    .send_run = p2p_send_run,
    .recv_run = p2p_recv_run,
};

const bench_method bench_persistent = {
    .name = "persistent",
    .about = "MPI_Send_init/MPI_Recv_init, MPI_Startall/MPI_Waitall",
    .baseline = true,
    .open = persistent_open,
    .close = p2p_close,
    .setup = p2p_setup,
    .teardown = p2p_teardown,
    .recv_post = p2p_recv_post,
    .send = p2p_send,
    .send_wait = p2p_send_wait,
    .recv_wait = p2p_recv_wait,
    .recv_check = p2p_recv_check,
    .send_run = p2p_send_run,
    .recv_run = p2p_recv_run,
};

/* ---- one-sided: put ----------------------------------------------------- */

/* Messages land in slots of the receiver's window; the flag (the number of
 * the last message signalled) sits in its own cache line after them. */
typedef struct {
    size_t out, in;
    size_t oslots, islots;
    MPI_Win win;
    uint8_t *base;  /* this rank's window: islots * in, then the flag */
    size_t flag_at; /* byte offset of the flag in both windows */
    size_t peer_flag_at;
    uint8_t *sbuf;
    uint64_t flagsrc[2]; /* origin of the flag puts, alternately */
    uint64_t sent, got;
    bool pending;     /* a flag put not flushed yet */
    unsigned rereads; /* flag reads of the check under way */
} put_link;

static bool put_open(void **state, char **err)
{
    (void)err;
    put_link *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        bench_die("nomem: put state");
    }
    p->win = MPI_WIN_NULL;
    *state = p;
    return true;
}

static void put_close(void *state)
{
    free(state);
}

/* The put method stores bench_copies slots per transfer of a run (two,
 * like a rail). */
static size_t put_slots(size_t size, size_t n)
{
    size_t k = (size_t)bench_copies * n;
    size_t cap = size == 0 ? k : BUF_CAP / size;
    if (cap < 1) {
        cap = 1;
    }
    return k < cap ? k : cap;
}

static bool put_setup(void *state, size_t out, size_t in, size_t n, char **err)
{
    (void)err;
    put_link *p = state;
    p->out = out;
    p->in = in;
    p->oslots = put_slots(out, n);
    p->islots = put_slots(in, n);
    p->flag_at = (p->islots * in + 63) / 64 * 64;
    size_t peer_flag = (p->oslots * out + 63) / 64 * 64;
    p->peer_flag_at = peer_flag;
    bench_mpi_check(MPI_Win_allocate((MPI_Aint)(p->flag_at + 64), 1,
                                     MPI_INFO_NULL, MPI_COMM_WORLD, &p->base,
                                     &p->win),
                    "MPI_Win_allocate");
    memset(p->base, 0, p->flag_at + 64);
    p->sbuf = aligned_alloc(4096, (p->oslots * out + 4095) / 4096 * 4096);
    if (p->sbuf == NULL) {
        bench_die("nomem: put buffers of %zu bytes", out);
    }
    for (size_t k = 0; k < p->oslots; k++) {
        bench_pattern(p->sbuf + k * out, out);
    }
    p->sent = p->got = 0;
    p->pending = false;
    MPI_Barrier(MPI_COMM_WORLD);
    bench_mpi_check(MPI_Win_lock_all(MPI_MODE_NOCHECK, p->win),
                    "MPI_Win_lock_all");
    return true;
}

static void put_teardown(void *state)
{
    put_link *p = state;
    bench_mpi_check(MPI_Win_unlock_all(p->win), "MPI_Win_unlock_all");
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&p->win);
    free(p->sbuf);
    p->sbuf = NULL;
}

static void put_recv_post(void *state, size_t count)
{
    (void)state;
    (void)count;
}

static void put_send(void *state, uint64_t seq, bool signal)
{
    put_link *p = state;
    size_t k = (size_t)((seq - 1) % p->oslots);
    uint8_t *buf = p->sbuf + k * p->out;
    bench_stamp(buf, p->out, seq);
    bench_mpi_check(MPI_Put(buf, (int)p->out, MPI_BYTE, bench_peer(),
                            (MPI_Aint)(k * p->out), (int)p->out, MPI_BYTE,
                            p->win),
                    "MPI_Put");
    p->sent = seq;
    if (!signal) {
        return;
    }
    /* The data must be complete at the target before the flag is. */
    bench_mpi_check(MPI_Win_flush(bench_peer(), p->win), "MPI_Win_flush");
    uint64_t *f = &p->flagsrc[seq % 2];
    *f = seq;
    bench_mpi_check(MPI_Put(f, 8, MPI_BYTE, bench_peer(),
                            (MPI_Aint)p->peer_flag_at, 8, MPI_BYTE, p->win),
                    "MPI_Put");
    p->pending = true;
}

static void put_send_wait(void *state)
{
    put_link *p = state;
    bench_mpi_check(MPI_Win_flush(bench_peer(), p->win), "MPI_Win_flush");
    p->pending = false;
}

static uint64_t put_flag(const put_link *p)
{
    return atomic_load_explicit((_Atomic uint64_t *)(p->base + p->flag_at),
                                memory_order_acquire);
}

/* Progress for components whose puts need the target's (Open MPI's osc
 * rdma over vader moves large puts single-copy, from the origin, but
 * small ones, the flag's, as messages the target must take in). */
static void put_progress(put_link *p)
{
    int flag = 0;
    MPI_Win_sync(p->win);
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag,
               MPI_STATUS_IGNORE);
}

/* The flag, for a check of a slot a newer message may be landing in: from
 * the second read of a check on, with progress, or a flag that only the
 * target's progress advances would stay behind the data for good. */
static uint64_t put_flag_of(const void *ctx)
{
    put_link *p = (put_link *)(uintptr_t)ctx;
    if (p->rereads++ > 0) {
        put_progress(p);
    }
    return put_flag(p);
}

static void put_recv_wait(void *state, uint64_t seq)
{
    put_link *p = state;
    uint64_t f;
    unsigned spins = 0;
    while ((f = put_flag(p)) < seq) {
        if (++spins % 64 == 0) {
            put_progress(p);
        }
    }
    p->got = seq;
    const uint8_t *buf = p->base + (seq - 1) % p->islots * p->in;
    (void)f;
    p->rereads = 0;
    bench_check_live("put", buf, p->in, seq, put_flag_of, p, 2 * p->islots);
}

static void put_recv_check(void *state)
{
    put_link *p = state;
    if (p->got == 0) {
        return;
    }
    const uint8_t *buf = p->base + (p->got - 1) % p->islots * p->in;
    bench_check_all("put", buf, p->in, p->got, put_flag(p) + 2 * p->islots);
}

const bench_method bench_put = {
    .name = "put",
    .about = "MPI_Put + MPI_Win_flush + a flag put",
    .baseline = true,
    .open = put_open,
    .close = put_close,
    .setup = put_setup,
    .teardown = put_teardown,
    .recv_post = put_recv_post,
    .send = put_send,
    .send_wait = put_send_wait,
    .recv_wait = put_recv_wait,
    .recv_check = put_recv_check,
};
