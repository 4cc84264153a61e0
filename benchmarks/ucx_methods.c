/* SPDX-License-Identifier: BSD-3-Clause */
/* The raw UCX baselines, without rig: put-fence-counter, active messages
 * and the floor. */
#include "bench.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

/* ---- one UCX context, worker and endpoint for both methods -------------- */

typedef struct {
    int refs;
    ucp_context_h context;
    ucp_worker_h worker;
    ucp_ep_h ep;
} shared_ucx;

static shared_ucx g_ucx;

static void ucs_check(ucs_status_t st, const char *call)
{
    if (st != UCS_OK) {
        bench_die("system: %s failed: %s", call, ucs_status_string(st));
    }
}

/* Exchanges a blob with the peer (both ranks call it). */
static void *swap_blob(const void *mine, size_t len, size_t *peer_len)
{
    uint64_t l = len, pl = 0;
    MPI_Sendrecv(&l, 1, MPI_UINT64_T, bench_peer(), 1, &pl, 1, MPI_UINT64_T,
                 bench_peer(), 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    void *out = malloc(pl == 0 ? 1 : pl);
    if (out == NULL) {
        bench_die("nomem: %llu bytes from the peer", (unsigned long long)pl);
    }
    MPI_Sendrecv(mine, (int)len, MPI_BYTE, bench_peer(), 2, out, (int)pl,
                 MPI_BYTE, bench_peer(), 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    *peer_len = pl;
    return out;
}

static void wait_request(void *req, const char *call)
{
    if (req == NULL) {
        return;
    }
    if (UCS_PTR_IS_ERR(req)) {
        ucs_check(UCS_PTR_STATUS(req), call);
    }
    ucs_status_t st;
    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        ucp_worker_progress(g_ucx.worker);
    }
    ucp_request_free(req);
    ucs_check(st, call);
}

static bool shared_open(char **err)
{
    (void)err;
    if (g_ucx.refs++ > 0) {
        return true;
    }
    ucp_config_t *cfg = NULL;
    ucs_check(ucp_config_read(NULL, NULL, &cfg), "ucp_config_read");
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features = UCP_FEATURE_RMA | UCP_FEATURE_AM,
    };
    ucs_check(ucp_init(&params, cfg, &g_ucx.context), "ucp_init");
    ucp_config_release(cfg);
    ucp_worker_params_t wp = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE,
    };
    ucs_check(ucp_worker_create(g_ucx.context, &wp, &g_ucx.worker),
              "ucp_worker_create");
    ucp_address_t *addr = NULL;
    size_t len = 0, plen = 0;
    ucs_check(ucp_worker_get_address(g_ucx.worker, &addr, &len),
              "ucp_worker_get_address");
    void *peer = swap_blob(addr, len, &plen);
    ucp_worker_release_address(g_ucx.worker, addr);
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
        .address = peer,
        .err_mode = UCP_ERR_HANDLING_MODE_NONE,
    };
    ucs_check(ucp_ep_create(g_ucx.worker, &ep, &g_ucx.ep), "ucp_ep_create");
    free(peer);
    ucp_request_param_t rp = {.op_attr_mask = 0};
    wait_request(ucp_ep_flush_nbx(g_ucx.ep, &rp), "ucp_ep_flush_nbx");
    MPI_Barrier(MPI_COMM_WORLD);
    return true;
}

static void shared_close(void)
{
    if (--g_ucx.refs > 0) {
        return;
    }
    /* Every put acknowledged before the endpoints go: over TCP a put's
     * acknowledgement is a message the peer's progress sends, and a
     * worker destroyed with some unanswered warned "2 pending operations
     * were not flushed" (2 simulated hosts).  Both ranks flush at once,
     * each progressing its worker, so each answers the other's. */
    ucp_request_param_t fp = {.op_attr_mask = 0};
    wait_request(ucp_ep_flush_nbx(g_ucx.ep, &fp), "ucp_ep_flush_nbx");
    MPI_Barrier(MPI_COMM_WORLD);
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
        .flags = UCP_EP_CLOSE_FLAG_FORCE,
    };
    void *req = ucp_ep_close_nbx(g_ucx.ep, &rp);
    if (req != NULL && !UCS_PTR_IS_ERR(req)) {
        while (ucp_request_check_status(req) == UCS_INPROGRESS) {
            ucp_worker_progress(g_ucx.worker);
        }
        ucp_request_free(req);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ucp_worker_destroy(g_ucx.worker);
    ucp_cleanup(g_ucx.context);
    memset(&g_ucx, 0, sizeof(g_ucx));
}

/* Memory UCX allocates (so that a same-node peer maps it), and the peer's
 * matching region: its address, rkey and, when mapped, local pointer. */
typedef struct {
    ucp_mem_h memh;
    uint8_t *base;
    size_t len;
    uint64_t peer_addr;
    ucp_rkey_h rkey;
    uint8_t *peer_ptr; /* NULL when the peer's memory is not mapped */
} region;

static void region_make(region *r, size_t len)
{
    ucp_mem_map_params_t mp = {
        .field_mask =
            UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS,
        .length = len,
        .flags = UCP_MEM_MAP_ALLOCATE,
    };
    ucs_check(ucp_mem_map(g_ucx.context, &mp, &r->memh), "ucp_mem_map");
    ucp_mem_attr_t attr = {
        .field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH,
    };
    ucs_check(ucp_mem_query(r->memh, &attr), "ucp_mem_query");
    r->base = attr.address;
    r->len = len;
    memset(r->base, 0, len);

    void *packed = NULL;
    size_t plen = 0, peer_len = 0;
    ucs_check(ucp_rkey_pack(g_ucx.context, r->memh, &packed, &plen),
              "ucp_rkey_pack");
    /* The blob: our address, then the packed rkey. */
    uint8_t *blob = malloc(8 + plen);
    if (blob == NULL) {
        bench_die("nomem: rkey blob");
    }
    uint64_t a = (uint64_t)(uintptr_t)r->base;
    memcpy(blob, &a, 8);
    memcpy(blob + 8, packed, plen);
    ucp_rkey_buffer_release(packed);
    uint8_t *peer = swap_blob(blob, 8 + plen, &peer_len);
    free(blob);
    memcpy(&r->peer_addr, peer, 8);
    ucs_check(ucp_ep_rkey_unpack(g_ucx.ep, peer + 8, &r->rkey),
              "ucp_ep_rkey_unpack");
    free(peer);
    void *ptr = NULL;
    r->peer_ptr =
        ucp_rkey_ptr(r->rkey, r->peer_addr, &ptr) == UCS_OK ? ptr : NULL;
}

static void region_free(region *r)
{
    /* The peer must be done with our memory first. */
    MPI_Barrier(MPI_COMM_WORLD);
    ucp_rkey_destroy(r->rkey);
    ucp_mem_unmap(g_ucx.context, r->memh);
    memset(r, 0, sizeof(*r));
}

/* ---- ucx: put, fence, counter put --------------------------------------- */

typedef struct {
    size_t out, in;
    size_t oslots, islots;
    region win; /* inbound slots, then the counter's line */
    region src; /* outbound slots, then the counter's source */
    size_t flag_at, peer_flag_at;
    unsigned pending; /* requests not completed */
    uint64_t got;
    unsigned rereads; /* flag reads of the check under way */
} ucx_link;

#define BUF_CAP ((size_t)64 << 20)

static size_t ucx_slots(size_t size, size_t n)
{
    size_t k = (size_t)bench_copies * n;
    size_t cap = size == 0 ? k : BUF_CAP / size;
    if (cap < 1) {
        cap = 1;
    }
    return k < cap ? k : cap;
}

static bool ucx_open(void **state, char **err)
{
    if (!shared_open(err)) {
        return false;
    }
    ucx_link *u = calloc(1, sizeof(*u));
    if (u == NULL) {
        bench_die("nomem: ucx state");
    }
    *state = u;
    return true;
}

static void ucx_close(void *state)
{
    free(state);
    shared_close();
}

static bool ucx_setup(void *state, size_t out, size_t in, size_t n, char **err)
{
    (void)err;
    ucx_link *u = state;
    u->out = out;
    u->in = in;
    u->oslots = ucx_slots(out, n);
    u->islots = ucx_slots(in, n);
    u->flag_at = (u->islots * in + 63) / 64 * 64;
    u->peer_flag_at = (u->oslots * out + 63) / 64 * 64;
    region_make(&u->win, u->flag_at + 64);
    region_make(&u->src, u->peer_flag_at + 64);
    for (size_t k = 0; k < u->oslots; k++) {
        bench_pattern(u->src.base + k * out, out);
    }
    u->pending = 0;
    u->got = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    return true;
}

static void ucx_drain(ucx_link *u)
{
    while (u->pending > 0) {
        ucp_worker_progress(g_ucx.worker);
    }
}

static void ucx_teardown(void *state)
{
    ucx_link *u = state;
    ucx_drain(u);
    region_free(&u->src);
    region_free(&u->win);
}

static void ucx_recv_post(void *state, size_t count)
{
    (void)state;
    (void)count;
}

static void put_done(void *req, ucs_status_t st, void *user)
{
    ucx_link *u = user;
    ucs_check(st, "ucp_put_nbx (completion)");
    u->pending--;
    ucp_request_free(req);
}

static void ucx_put(ucx_link *u, const void *buf, size_t len, uint64_t at)
{
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                        UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMH,
        .cb.send = put_done,
        .user_data = u,
        .memh = u->src.memh,
    };
    /* The window's rkey covers both regions' peers: src is never a
     * target, so puts go to the peer's win. */
    void *req = ucp_put_nbx(g_ucx.ep, buf, len, u->win.peer_addr + at,
                            u->win.rkey, &rp);
    if (UCS_PTR_IS_ERR(req)) {
        ucs_check(UCS_PTR_STATUS(req), "ucp_put_nbx");
    }
    if (req != NULL) {
        u->pending++;
    }
}

static void ucx_send(void *state, uint64_t seq, bool signal)
{
    ucx_link *u = state;
    size_t k = (size_t)((seq - 1) % u->oslots);
    uint8_t *buf = u->src.base + k * u->out;
    if (u->pending > 0) {
        ucx_drain(u); /* the source of an earlier put may be in use */
    }
    bench_stamp(buf, u->out, seq);
    ucx_put(u, buf, u->out, k * u->out);
    if (!signal) {
        return;
    }
    ucs_check(ucp_worker_fence(g_ucx.worker), "ucp_worker_fence");
    uint64_t *f = (uint64_t *)(u->src.base + u->peer_flag_at + 8 * (seq % 2));
    *f = seq;
    ucx_put(u, f, 8, u->peer_flag_at);
}

static void ucx_send_wait(void *state)
{
    ucx_drain(state);
}

static uint64_t ucx_flag(const ucx_link *u)
{
    return atomic_load_explicit((_Atomic uint64_t *)(u->win.base + u->flag_at),
                                memory_order_acquire);
}

/* The flag, for a check of a slot a newer message may be landing in: from
 * the second read of a check on, with progress (transports such as TCP
 * need the target's to land a put). */
static uint64_t ucx_flag_of(const void *ctx)
{
    ucx_link *u = (ucx_link *)(uintptr_t)ctx;
    if (u->rereads++ > 0) {
        ucp_worker_progress(g_ucx.worker);
    }
    return ucx_flag(u);
}

static void ucx_recv_wait(void *state, uint64_t seq)
{
    ucx_link *u = state;
    uint64_t f;
    unsigned spins = 0;
    while ((f = ucx_flag(u)) < seq) {
        if (++spins % 64 == 0) {
            ucp_worker_progress(g_ucx.worker);
        }
    }
    u->got = seq;
    const uint8_t *buf = u->win.base + (seq - 1) % u->islots * u->in;
    (void)f;
    u->rereads = 0;
    bench_check_live("ucx", buf, u->in, seq, ucx_flag_of, u, 2 * u->islots);
}

static void ucx_recv_check(void *state)
{
    ucx_link *u = state;
    if (u->got == 0) {
        return;
    }
    const uint8_t *buf = u->win.base + (u->got - 1) % u->islots * u->in;
    bench_check_all("ucx", buf, u->in, u->got, ucx_flag(u) + 2 * u->islots);
}

const bench_method bench_ucx = {
    .name = "ucx",
    .about = "raw UCX: ucp_put_nbx + ucp_worker_fence + counter put",
    .baseline = true,
    .open = ucx_open,
    .close = ucx_close,
    .setup = ucx_setup,
    .teardown = ucx_teardown,
    .recv_post = ucx_recv_post,
    .send = ucx_send,
    .send_wait = ucx_send_wait,
    .recv_wait = ucx_recv_wait,
    .recv_check = ucx_recv_check,
};

/* ---- ucx_am: one active message a message ------------------------------ */

/* What rig's rails do across nodes (src/rail/ucx/carrier.c), on raw UCX
 * with its defaults: each message one ucp_am_send_nbx, eager (as rig's
 * runs), its number in the header; the receiver's handler copies the
 * bytes into the message's slot and raises the count it polls.  The
 * transport's own cost, beside which rig's rails across hosts are read. */

#define AM_ID 0x6d61 /* "am" */

typedef struct {
    size_t out, in;
    size_t oslots, islots;
    uint8_t *src;     /* outbound slots */
    uint64_t *hdr;    /* their headers: UCX reads one until its send ends */
    uint8_t *dst;     /* inbound slots */
    uint64_t arrived; /* the last message landed (the handler's) */
    unsigned pending; /* sends not completed */
    uint64_t got;
    unsigned rereads;
} am_link;

static ucs_status_t am_handler(void *arg, const void *header, size_t hlen,
                               void *data, size_t len,
                               const ucp_am_recv_param_t *param)
{
    am_link *a = arg;
    uint64_t seq = 0;
    if (hlen != sizeof(seq) || len != a->in ||
        (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
        bench_die("failed: ucx_am: a message of %zu bytes (header %zu) "
                  "where %zu were sent eagerly",
                  len, hlen, a->in);
    }
    memcpy(&seq, header, sizeof(seq));
    memcpy(a->dst + (seq - 1) % a->islots * a->in, data, len);
    a->arrived = seq;
    return UCS_OK;
}

static void am_handler_set(am_link *a)
{
    ucp_am_handler_param_t p = {
        .field_mask =
            UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
            UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG,
        .id = AM_ID,
        .flags = UCP_AM_FLAG_WHOLE_MSG,
        .cb = am_handler,
        .arg = a,
    };
    ucs_check(ucp_worker_set_am_recv_handler(g_ucx.worker, &p),
              "ucp_worker_set_am_recv_handler");
}

static bool am_open(void **state, char **err)
{
    if (!shared_open(err)) {
        return false;
    }
    am_link *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        bench_die("nomem: ucx_am state");
    }
    am_handler_set(a);
    *state = a;
    return true;
}

static void am_close(void *state)
{
    free(state);
    shared_close();
}

static bool am_setup(void *state, size_t out, size_t in, size_t n, char **err)
{
    (void)err;
    am_link *a = state;
    a->out = out;
    a->in = in;
    a->oslots = ucx_slots(out, n);
    a->islots = ucx_slots(in, n);
    a->src = calloc(a->oslots, out > 0 ? out : 1);
    a->hdr = calloc(a->oslots, sizeof(*a->hdr));
    a->dst = calloc(a->islots, in > 0 ? in : 1);
    if (a->src == NULL || a->hdr == NULL || a->dst == NULL) {
        bench_die("nomem: ucx_am slots");
    }
    for (size_t k = 0; k < a->oslots; k++) {
        bench_pattern(a->src + k * out, out);
    }
    a->arrived = 0;
    a->pending = 0;
    a->got = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    return true;
}

static void am_drain(am_link *a)
{
    while (a->pending > 0) {
        ucp_worker_progress(g_ucx.worker);
    }
}

static void am_teardown(void *state)
{
    am_link *a = state;
    am_drain(a);
    /* The peer's last messages landed before the slots go. */
    MPI_Barrier(MPI_COMM_WORLD);
    free(a->src);
    free(a->hdr);
    free(a->dst);
    a->src = a->dst = NULL;
    a->hdr = NULL;
}

static void am_sent(void *req, ucs_status_t st, void *user)
{
    am_link *a = user;
    ucs_check(st, "ucp_am_send_nbx (completion)");
    a->pending--;
    ucp_request_free(req);
}

static void am_send(void *state, uint64_t seq, bool signal)
{
    (void)signal; /* every message says its own number */
    am_link *a = state;
    size_t k = (size_t)((seq - 1) % a->oslots);
    uint8_t *buf = a->src + k * a->out;
    if (a->pending > 0) {
        am_drain(a); /* an earlier send may still read its slot */
    }
    bench_stamp(buf, a->out, seq);
    a->hdr[k] = seq;
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                        UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS,
        .cb.send = am_sent,
        .user_data = a,
        .flags = UCP_AM_SEND_FLAG_EAGER,
    };
    void *req = ucp_am_send_nbx(g_ucx.ep, AM_ID, &a->hdr[k], sizeof(a->hdr[k]),
                                buf, a->out, &rp);
    if (UCS_PTR_IS_ERR(req)) {
        ucs_check(UCS_PTR_STATUS(req), "ucp_am_send_nbx");
    }
    if (req != NULL) {
        a->pending++;
    }
}

static void am_send_wait(void *state)
{
    am_drain(state);
}

/* The count, for a check of a slot a newer message may be landing in:
 * from the second read of a check on, with progress (the handler lands
 * messages only inside it). */
static uint64_t am_count_of(const void *ctx)
{
    am_link *a = (am_link *)(uintptr_t)ctx;
    if (a->rereads++ > 0) {
        ucp_worker_progress(g_ucx.worker);
    }
    return a->arrived;
}

static void am_recv_wait(void *state, uint64_t seq)
{
    am_link *a = state;
    while (a->arrived < seq) {
        ucp_worker_progress(g_ucx.worker);
    }
    a->got = seq;
    a->rereads = 0;
    bench_check_live("ucx_am", a->dst + (seq - 1) % a->islots * a->in, a->in,
                     seq, am_count_of, a, 2 * a->islots);
}

static void am_recv_check(void *state)
{
    am_link *a = state;
    if (a->got == 0) {
        return;
    }
    bench_check_all("ucx_am", a->dst + (a->got - 1) % a->islots * a->in, a->in,
                    a->got, a->arrived + 2 * a->islots);
}

const bench_method bench_ucx_am = {
    .name = "ucx_am",
    .about = "raw UCX active messages: ucp_am_send_nbx (eager) into a "
             "handler that copies",
    .baseline = true,
    .named_only = true,
    .open = am_open,
    .close = am_close,
    .setup = am_setup,
    .teardown = am_teardown,
    .recv_post = ucx_recv_post,
    .send = am_send,
    .send_wait = am_send_wait,
    .recv_wait = am_recv_wait,
    .recv_check = am_recv_check,
};

/* ---- floor: one cache line, stored and polled --------------------------- */

/* floor: the message in bytes [0, FLOOR_MAX) of one line, its number at
 * FLOOR_MAX of the same line.  floor2: the number alone in the line at
 * FLOOR2_FLAG, where a rig end keeps `arrived` (the spec gives each count
 * a line of its own): the least a count and its data can cost. */
#define FLOOR_MAX 56
#define FLOOR2_FLAG 256

typedef struct {
    size_t out, in;
    size_t flag_at;
    region line;
    uint64_t got;
} floor_link;

static bool floor_open_at(void **state, size_t flag_at, char **err)
{
    if (!shared_open(err)) {
        return false;
    }
    floor_link *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        bench_die("nomem: floor state");
    }
    /* Both ranks must see each other's memory mapped. */
    f->flag_at = flag_at;
    region_make(&f->line, 4096);
    int mine = f->line.peer_ptr != NULL ? 1 : 0, both = 0;
    MPI_Allreduce(&mine, &both, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (both == 0) {
        region_free(&f->line);
        free(f);
        shared_close();
        *err = strdup("unsupported: ucp_rkey_ptr cannot map the peer's "
                      "memory (not on one node?)");
        return false;
    }
    *state = f;
    return true;
}

static bool floor_open(void **state, char **err)
{
    return floor_open_at(state, FLOOR_MAX, err);
}

static bool floor2_open(void **state, char **err)
{
    return floor_open_at(state, FLOOR2_FLAG, err);
}

static void floor_close(void *state)
{
    floor_link *f = state;
    region_free(&f->line);
    free(f);
    shared_close();
}

static bool floor_setup(void *state, size_t out, size_t in, size_t n,
                        char **err)
{
    (void)err;
    floor_link *f = state;
    if (out > FLOOR_MAX || in > FLOOR_MAX || n != 1) {
        bench_die("invalid: floor carries one message of at most %d bytes",
                  FLOOR_MAX);
    }
    f->out = out;
    f->in = in;
    f->got = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    memset(f->line.base, 0, f->flag_at + 8);
    /* The sender writes the pattern once, straight into our line. */
    MPI_Barrier(MPI_COMM_WORLD);
    bench_pattern(f->line.peer_ptr, out);
    MPI_Barrier(MPI_COMM_WORLD);
    return true;
}

static void floor_teardown(void *state)
{
    (void)state;
    MPI_Barrier(MPI_COMM_WORLD);
}

static void floor_nop(void *state, size_t count)
{
    (void)state;
    (void)count;
}

static void floor_send(void *state, uint64_t seq, bool signal)
{
    (void)signal;
    floor_link *f = state;
    uint8_t *line = f->line.peer_ptr;
    bench_stamp(line, f->out, seq);
    atomic_store_explicit((_Atomic uint64_t *)(line + f->flag_at), seq,
                          memory_order_release);
}

static void floor_send_wait(void *state)
{
    (void)state;
}

static uint64_t floor_flag(const floor_link *f)
{
    return atomic_load_explicit((_Atomic uint64_t *)(f->line.base + f->flag_at),
                                memory_order_acquire);
}

static void floor_recv_wait(void *state, uint64_t seq)
{
    floor_link *f = state;
    uint64_t v;
    while ((v = floor_flag(f)) < seq) {
        /* Spin: this is the limit of the machine. */
    }
    f->got = seq;
    bench_check_stamp("floor", f->line.base, f->in, seq, v);
}

static void floor_recv_check(void *state)
{
    floor_link *f = state;
    if (f->got > 0) {
        bench_check_all("floor", f->line.base, f->in, f->got, floor_flag(f));
    }
}

const bench_method bench_floor = {
    .name = "floor",
    .about = "one cache line stored and polled through ucp_rkey_ptr",
    .baseline = false,
    .max_size = FLOOR_MAX,
    .open = floor_open,
    .close = floor_close,
    .setup = floor_setup,
    .teardown = floor_teardown,
    .recv_post = floor_nop,
    .send = floor_send,
    .send_wait = floor_send_wait,
    .recv_wait = floor_recv_wait,
    .recv_check = floor_recv_check,
};

const bench_method bench_floor2 = {
    .name = "floor2",
    .about = "the data's line and the count's line apart, as a rig end "
             "keeps them",
    .baseline = false,
    .max_size = FLOOR_MAX,
    .open = floor2_open,
    .close = floor_close,
    .setup = floor_setup,
    .teardown = floor_teardown,
    .recv_post = floor_nop,
    .send = floor_send,
    .send_wait = floor_send_wait,
    .recv_wait = floor_recv_wait,
    .recv_check = floor_recv_check,
};
