/* SPDX-License-Identifier: BSD-3-Clause */
/* The UCX transport: its object, its ends, and what its files share.
 *
 * Files, by concern (the MPI transport names its files alike):
 *   transport.c  the object: UCX context and worker, open, wire, stop,
 *                close, endpoints, rig_info, the ops table
 *   progress.c   the progress thread
 *   end.c        ends: the pair protocol's steps, release, the list
 *   carrier.c    wake and carrying: mapped stores, run messages
 *   lane.c       rig's own TCP connections for small runs across nodes
 *   failure.c    failing, watching peers, telling every rank
 *   memory.c     end memory (UCX-allocated, NUMA-bound, CUDA-registered)
 *   cuda.c       libcuda, loaded at run time
 *
 * Locks, in the only order they nest (rig_lock checks it in builds
 * without NDEBUG):
 *   1. list_lock   (UCX_LOCK_LIST)    the list of ends, refs, failure
 *   2. worker_lock (UCX_LOCK_WORKER)  every UCX call on the worker or
 *                                     context, and the network path's state
 *   3. the job window's lock (RIG_WINDOW_LOCK_LEVEL, window.h)
 * A thread holding the worker lock never takes the list lock: code that
 * runs inside ucp_worker_progress (endpoint errors, the failure message)
 * hands its work to the progress thread instead.  The mapped fast path
 * takes no lock. */
#ifndef RIG_UCX_INTERNAL_H
#define RIG_UCX_INTERNAL_H

#include "../base/failure.h"
#include "../base/handshake.h"
#include "../base/liveness.h"
#include "../base/transport.h"

#include "../../util/util_internal.h"

#include <hwloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/uio.h>
#include <ucp/api/ucp.h>

#define UCX_LOCK_LIST 20
#define UCX_LOCK_WORKER 30

typedef struct rig_ucx rig_ucx;
typedef struct rig_uend rig_uend;

/* ---- libcuda, loaded at run time (cuda.c) ------------------------------ */

typedef struct rig_cuda rig_cuda;

/* Loads libcuda and finds a GPU; NULL (quietly) when there is none. */
rig_cuda *rig_cuda_load(void);
void rig_cuda_unload(rig_cuda *c);
/* Registers (pins and maps for every context) [p, p + len).  Memory UCX
 * registered already (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) is
 * accepted when it is mapped for the GPU; *owned then is false: not ours
 * to unregister. */
bool rig_cuda_register(rig_cuda *c, void *p, size_t len, bool *owned,
                       char **err);
void rig_cuda_unregister(rig_cuda *c, void *p);
/* A line for rig_info: "yes (N GPUs)" or why not. */
void rig_cuda_describe(char *buf, size_t len);

/* ---- end memory (memory.c) --------------------------------------------- */

typedef struct {
    ucp_mem_h memh;
    uint8_t *base;
    size_t len;
    bool cuda;  /* registered with cuMemHostRegister by rig (not UCX) */
    bool own;   /* a System V segment of rig's, registered (shmdt) */
    void *rkey; /* packed rkey (ucp_rkey_buffer_release) */
    size_t rkey_len;
} rig_endmem;

/* Allocates len bytes (a multiple of the page) from UCX, binds them to the
 * transport's NUMA node, zeroes them, registers them with CUDA when asked
 * and packs their rkey.  Worker lock held. */
bool rig_endmem_alloc(rig_ucx *u, size_t len, rig_endmem *m, char **err);
/* Undoes rig_endmem_alloc; worker lock held (or no other thread uses the
 * transport). */
void rig_endmem_free(rig_ucx *u, rig_endmem *m);

/* ---- ends --------------------------------------------------------------- */

/* What a run message says (carrier.c): the receiver's rail, the counts
 * it carries, its place in the end's sequence. */
typedef struct {
    int64_t id;     /* the rail (the same id at both ends) */
    uint64_t first; /* the count after the previous message's; 0: a
                     * failure notice */
    uint64_t from;  /* the first count whose bytes it holds (first, or
                     * later when ready jumped: rig_carry_from) */
    uint64_t count; /* the last count carried: `arrived` once it landed */
    uint32_t seq;   /* the end's messages, numbered from 0 */
    uint32_t pad;   /* on a lane, the bytes that follow (lane.c) */
} rig_run_hdr;

/* A message of one wake on the network path: the transfers up to count
 * c, sent as one active message or lane frame whose sources are iov. */
typedef struct rig_batch {
    uint64_t c;
    unsigned pending; /* requests not completed yet */
    rig_uend *end;
    rig_run_hdr hdr;   /* valid until the send completes */
    ucp_dt_iov_t *iov; /* the sources: iov_inline, or malloc'd */
    size_t niov;
    ucp_dt_iov_t iov_inline[4];
    struct rig_batch *lane_next; /* a lane's queue (lane.c) */
} rig_batch;

#define RIG_BATCHES 32

struct rig_uend {
    /* The wake lock (carrier.h): the number of wakes since the carrier
     * last looked; the thread that moves it off 0 carries. */
    _Alignas(64) atomic_uint_fast64_t wakes;
    /* Read by the carrier (under the wake lock). */
    _Alignas(64) uint64_t carried; /* every count <= carried is carried */
    uint8_t *counts;               /* this end's counts */
    const uint8_t *out;            /* this end's outbound, copy 0 */
    size_t out_copy;               /* bytes of one outbound copy */
    rig_transfer *send;
    size_t nsend;
    /* span[j]: the transfers from j on that sit back to back in both src
     * and dst, and their bytes; carried as one copy or put when a wake
     * finds them all readied (a whole run of a halo, say). */
    struct rig_span {
        size_t count;
        size_t bytes;
    } * span;
    uint64_t next_run; /* run and transfer of count carried + 1 */
    size_t next_j;
    uint8_t *peer_in; /* mapped peer inbound, or NULL */
    size_t in_copy;   /* bytes of one peer inbound copy */
    rig_ucx *ucx;
    uint8_t *peer_counts_map; /* mapped peer counts, or NULL */

    /* The network path (worker lock): messages sent, and received. */
    ucp_ep_h ep;
    ucp_rkey_h rkey;
    uint64_t peer_counts, peer_in_addr;
    rig_batch batch[RIG_BATCHES]; /* ring: batches not yet sent */
    unsigned batch_head, batch_n;
    uint32_t tx_seq;    /* the next message's number */
    bool ring_full;     /* a wake found the ring full: carry on retire */
    bool lane;          /* runs go over the peer's lane (lane.c), for good */
    uint64_t rx_next;   /* the first count of the next message */
    uint32_t rx_seq;    /* the next message to arrive */
    uint32_t rx_retire; /* the next message whose landing moves arrived */
    uint64_t rx_done[RIG_BATCHES]; /* landed messages' counts, by seq */
    struct rig_span *rspan;        /* back-to-back transfers by dst (receive) */
    rig_uend *index_next;          /* the transport's index by id */
    bool indexed;
    /* Handed to the progress thread by a carrier that found the worker
     * lock taken (atomic: any thread pushes, the thread pops). */
    atomic_bool queued;
    rig_uend *queue_next;

    /* Cold. */
    int peer;
    int64_t id;
    rig_transfer *receive;
    size_t nreceive;
    rig_end_layout layout;
    rig_endmem mem;
    void *desc; /* packed descriptor for the peer */
    size_t desc_len;
    rig_end *end;          /* the ABI end while held, else NULL */
    rig_rail *rail;        /* its rail (borrowed) */
    rig_handshake_end hs;  /* the window and the peer's end (list lock) */
    bool held;             /* the ABI end is alive (list lock) */
    bool in_job;           /* the job still counts it (until close) */
    bool listed;           /* in the transport's list (finished) */
    rig_uend *next, *prev; /* the transport's list */
};

/* ---- the transport ------------------------------------------------------ */

struct rig_ucx {
    rig_transport super;
    int rank, size;
    rig_switch numa, cuda_switch, shm_stores;
    ucp_context_h context;
    ucp_worker_h worker;
    void *address;
    size_t address_len;
    pthread_mutex_t worker_lock;
    rig_handshake handshake; /* the pair protocol's view of this transport */
    rig_window *window;      /* the job's, from wire */

    /* Peers: worker addresses and endpoints (made on first use; closed
     * for good, ep_closed, once the peer is lost: worker lock). */
    uint8_t **peer_addr;
    size_t *peer_addr_len;
    ucp_ep_h *ep;
    bool *ep_closed;

    /* Topology and where ends go. */
    hwloc_topology_t topo;
    hwloc_nodeset_t nodeset; /* NULL: not bound */
    rig_cuda *cuda;
    /* Whether UCX's own allocations are System V segments (memory.c):
     * 0 not known yet, 1 yes, -1 no (then rig makes them).  Worker lock. */
    int alloc_sysv;

    /* Ends, under list_lock. */
    pthread_mutex_t list_lock;
    rig_uend *ends;
    long refs; /* 1 for the job + 1 per end not yet freed; list_lock */
    void (*freed)(void *arg); /* the job's hook, when the last ref goes */
    void *freed_arg;

    /* Failure (failure.c): the shared state (why, who left, peers'
     * processes), and how this transport spreads it. */
    rig_failure fail;
    _Atomic(char *) pending_why;    /* for the progress thread to fail */
    _Atomic(char *) pending_remote; /* told by a peer (not sent on) */
    bool fail_origin;               /* the failure started here: tell every rank
                                     * (list lock; set once, with the reason) */
    atomic_bool tell_peers;         /* the progress thread still has to */
    atomic_bool told;         /* every rank was told (or did not need to) */
    atomic_bool closing;      /* endpoint errors are expected now: they only
                               * mark their rank gone */
    uint64_t keepalive_ms;    /* RIG_KEEPALIVE_MS */
    uint64_t peer_timeout_ms; /* RIG_PEER_TIMEOUT_MS (liveness.h) */
    /* The links to ranks on other nodes, with their own thread (wire to
     * close). */
    _Atomic(rig_liveness *) links;
    int wake_ms; /* the progress thread's period, -1: none needed (wire) */

    /* The network path's receiving side (carrier.c): ends by rail id,
     * for run messages (worker lock). */
    rig_uend **index;
    size_t index_cap; /* a power of two */
    /* Ends whose carrier found the worker lock taken, for the progress
     * thread to carry (a lock-free stack). */
    _Atomic(rig_uend *) handoff;

    /* The progress thread (progress.c). */
    pthread_t thread;
    bool thread_started;
    int efd;     /* the worker's event fd */
    int eventfd; /* wakes the thread */
    int epfd;
    atomic_bool stop;
    atomic_long outstanding; /* batches with requests in flight */
    atomic_bool net_path;    /* an end was connected without a mapping */
    /* When a waiter last drove the worker (rig_ucx_drive): the thread
     * stands back meanwhile (and after a wait that found its count
     * there: rig_waited_ns). */
    _Atomic uint64_t driven_ns;
    /* A count moved inside ucp_worker_progress (a run landed, a send
     * completed): rig_ucx_drive stops there, so that its waiter looks at
     * its count without a further, empty progress call (a syscall).
     * Under the worker lock. */
    bool moved;
    /* Lanes (lane.c): per rank, NULL when there are none; lane_at lists
     * the lanes_n ranks that have one.  Worker lock. */
    struct rig_lane *lanes;
    int *lane_at;
    int lanes_n;
    int lanes_used;            /* lanes an end reads (rig_lane_use) */
    int lane_used;             /* the last of them */
    int lane_epfd;             /* the lanes' epoll set, in epfd */
    atomic_bool lanes_watched; /* lane_epfd is in epfd */
    atomic_bool lanes_lost;    /* a lane broke: rig_lanes_report */
    uint64_t lane_bytes;       /* RIG_LANE_BYTES */
    atomic_bool am_net;        /* an end sends UCX run messages across
                                * nodes (set under the worker lock, read
                                * by the progress thread without it) */
    uint64_t worker_look_ns;   /* a drive's last ucp_worker_progress */
    /* When the last drive began, and the run of drives (each within
     * DRIVE_SPIN_NS of the previous one) it belongs to (progress.c;
     * worker lock). */
    uint64_t drive_last_ns, drive_run_ns;
};

static inline rig_ucx *rig_ucx_of(rig_transport *t)
{
    return (rig_ucx *)t;
}

/* A UCX status as text, for messages. */
const char *rig_ucs_str(ucs_status_t st);

/* ---- transport.c -------------------------------------------------------- */

/* The ops table (the registry, src/rail/transports.c, lists it). */
extern const rig_transport_ops rig_ucx_ops;
/* Sets name=value on rig's UCX configuration (ucp_config_modify) unless
 * one of user_vars (NULL-ended) is set in the environment -- the user's
 * value wins -- or the UCX_TLS in force on rig's context (RIG_UCX_TLS,
 * else UCX_TLS) leaves out every transport of tls (NULL-ended
 * names and aliases): UCX would warn of a setting no interface took.
 * "system:" when UCX refuses the value. */
bool rig_ucx_config_set(ucp_config_t *cfg, const char *name, const char *value,
                        const char *const *user_vars, const char *const *tls,
                        char **err);

/* The endpoint to peer, made on first use; "failed:" once it was closed
 * for good.  Worker lock held. */
bool rig_ucx_ep(rig_ucx *u, int peer, ucp_ep_h *out, char **err);
/* Closes (forced) the endpoints to every rank that left the job, for good
 * (ep_closed), so that nothing a lost peer sent lands here later: its
 * retransmissions meet a closed socket.  Worker lock not held. */
void rig_ucx_eps_drop_left(rig_ucx *u);
/* Drops one reference; the last frees the transport.  Takes list_lock. */
void rig_ucx_unref(rig_ucx *u);

/* ---- progress.c --------------------------------------------------------- */

/* Starts the progress thread (after the worker exists); stops it. */
bool rig_progress_start(rig_ucx *u, char **err);
void rig_progress_stop(rig_ucx *u);
/* Wakes the progress thread (any thread, async-signal-safe). */
void rig_ucx_kick(rig_ucx *u);
/* Progresses the worker once, under its lock, so that the failure
 * messages already here are taken in: before this rank records its own
 * sighting of a peer's end (../base/failure.h, "The reason").  Any thread
 * that holds no lock of this transport. */
void rig_ucx_take_told(rig_ucx *u);
/* The network path's ends' progress hook (rig_end_desc.progress, arg: the
 * transport): a waiting thread progresses the worker when its lock is
 * free.  Any thread, never blocks; nothing once the worker is gone. */
void rig_ucx_drive(void *arg);

/* ---- end.c -------------------------------------------------------------- */

/* The pair protocol's steps for UCX ends. */
extern const rig_handshake_ops rig_uend_handshake;
/* Whether e is the ABI end of a held end of u (the ops table's owns). */
bool rig_ucx_owns(rig_transport *t, const rig_end *e);
/* Frees an end no one uses any more (memory, rkey, descriptor) and drops
 * its reference on the transport.  No lock held. */
void rig_uend_free(rig_uend *e);
/* Takes e out of the transport's list; list lock held. */
void rig_uend_unlink(rig_ucx *u, rig_uend *e);
/* The end of rail r if this transport made it and it is held; list lock
 * held. */
rig_uend *rig_uend_find(rig_ucx *u, const rig_rail *r);

/* Registers cb (with u as its argument) as the handler of the whole
 * active messages of id on u's worker (transport.c). */
bool rig_ucx_am_handler(rig_ucx *u, unsigned id, ucp_am_recv_callback_t cb,
                        char **err);

/* ---- carrier.c ---------------------------------------------------------- */

/* Registers the run message's handler on the worker. */
bool rig_carrier_init(rig_ucx *u, char **err);
/* The ABI end's wake (rig/provider.h, step 3). */
void rig_uend_wake(void *self, uint64_t c);
/* Carries for the ends handed to the progress thread (progress thread, no
 * lock held). */
void rig_carrier_handoffs(rig_ucx *u);
/* Enters e in the index of ends (when its rail is connected: the peer may
 * send at once) and takes it out (before it is freed).  Worker lock
 * held. */
bool rig_uend_index_add(rig_uend *e, char **err);
void rig_uend_index_del(rig_uend *e);
/* Tells e's peer that the job failed: its counts of this rail go to FAILED.
 * Worker lock held. */
void rig_uend_fail_peer(rig_uend *e);

/* Lands a run message (its header h, len bytes of data) that came as an
 * eager active message or on a lane; drops it once the job failed.
 * Worker lock held. */
void rig_carrier_run_in(rig_ucx *u, const rig_run_hdr *h, const void *data,
                        size_t len);
/* A lane wrote b's frame whole (or gave it up): its `sent` moves.  Worker
 * lock held. */
void rig_carrier_lane_sent(rig_batch *b);

/* A lane frame whose bytes land straight in the inbound copies, read by
 * read (lane.c): where the rest goes; none left (left 0) once it is whole
 * or its lane broke.  Worker lock held for all of rig_landing_*. */
typedef struct {
    rig_uend *e;  /* NULL: dropped (the rest is read and let go) */
    uint32_t seq; /* the frame's header */
    uint64_t count;
    ucp_dt_iov_t *iov; /* the pieces (malloc'd); NULL: the one piece */
    ucp_dt_iov_t one;
    size_t n;    /* pieces */
    size_t at;   /* the first piece not full */
    size_t off;  /* its bytes filled */
    size_t left; /* the frame's bytes still to come */
} rig_landing;

/* Opens the landing of the frame h (len bytes), of which the first `have`
 * came already (data: copied now).  A frame the carrier drops
 * (rig_carrier_run_in's reasons) opens as dropped. */
void rig_landing_open(rig_ucx *u, const rig_run_hdr *h, size_t len,
                      const uint8_t *data, size_t have, rig_landing *l);
/* Drops the rest when the job failed, is closing or the rail failed: no
 * byte lands after that (carrier.c: no stale bytes). */
void rig_landing_check(rig_ucx *u, rig_landing *l);
/* n more bytes came into the pieces (or were let go): true once the
 * frame is whole, `arrived` moved and l freed. */
bool rig_landing_advance(rig_landing *l, size_t n);
/* The pieces still to fill, as at most max entries of v; their number. */
size_t rig_landing_iov(const rig_landing *l, struct iovec *v, size_t max);
/* Lets the rest go (its end is freed, its lane broke). */
void rig_landing_drop(rig_landing *l);

/* ---- lane.c ------------------------------------------------------------- */

typedef struct rig_lane rig_lane;

/* RIG_LANE_BYTES: the most bytes two runs of an end may hold to go over
 * its peer's lane (0: no lanes).  "invalid:" when above 16 MiB. */
bool rig_lane_setting(uint64_t *bytes, char **err);
/* Takes the data connections links made (wire) as the lanes, read
 * (whatever RIG_LANE_BYTES says: it governs sending) and watched by the
 * progress thread from then on.  No lock held. */
bool rig_lanes_open(rig_ucx *u, rig_liveness *links, char **err);
/* Closes every lane; no other thread uses the transport any more. */
void rig_lanes_close(rig_ucx *u);
/* Whether runs of the transfers t[0..n) between e and its peer go over a
 * lane: there is one, and two such runs fit RIG_LANE_BYTES.  Worker lock
 * held. */
bool rig_lane_fits(const rig_uend *e, const rig_transfer *t, size_t n);
/* Writes b's frame (its header and pieces) on the lane to peer: true
 * when it needs no more (written, or the lane is lost and the job
 * fails), false when it waits in the lane's queue (then
 * rig_carrier_lane_sent follows).  Worker lock held. */
bool rig_lane_send(rig_ucx *u, int peer, rig_batch *b);
/* An end with peer is on the network path: its lane, if any, is read by
 * every look from now on.  Worker lock held. */
void rig_lane_use(rig_ucx *u, int peer);
/* e is freed: a frame landing in it on a lane is let go.  Worker lock
 * held. */
void rig_lanes_forget(rig_ucx *u, const rig_uend *e);
/* Writes what waits, on every lane, and lands what came: on every lane
 * the lanes' epoll set reports when `all` (the progress thread, whose
 * epoll watches the set), else on the lanes ends read (rig_lane_use).
 * The frames moved.  Worker lock held. */
unsigned rig_lanes_poll(rig_ucx *u, bool all);
/* A rank left the job: its lane's loss is not reported.  Worker lock
 * held. */
void rig_lanes_drop(rig_ucx *u, int peer);
/* Tells the transport of lanes that broke (rig_ucx_link_lost) while the
 * job still stands a bound (RIG_PEER_TIMEOUT_MS) later.  The progress
 * thread, no lock held. */
void rig_lanes_report(rig_ucx *u);

/* ---- failure.c ---------------------------------------------------------- */

/* Sets UCX keepalive (ucp) and TCP keepalive (interfaces) to the period,
 * through cfg; a user's UCX_* variable wins. */
bool rig_fail_config(ucp_config_t *cfg, uint64_t keepalive_ms, char **err);
/* Registers the failure message's handler on the worker. */
bool rig_fail_init(rig_ucx *u, char **err);
/* Watches every peer for death (wire): pidfds of same-node peers in the
 * progress thread's epoll, keepalive for the others. */
bool rig_fail_watch(rig_ucx *u, const rig_transport_wiring *w, char **err);
/* The progress thread's epoll reported fd: true when it is a peer's pidfd
 * (the peer died; the job fails). */
bool rig_fail_event(rig_ucx *u, int fd);
/* Polls same-node peers that have no pidfd (every wake_ms). */
void rig_fail_poll(rig_ucx *u);
/* The progress thread's turn: failures handed over, peers to tell.  True
 * when it told them (the endpoints of ranks that left then close). */
bool rig_fail_progress(rig_ucx *u);
/* rig_failure_peer_gone's sink (the failure state's on_gone): rank r
 * left, the job fails with why and every rank is told.  No lock held. */
void rig_ucx_peer_gone(void *self, int r, const char *why);
/* A link to rank r on another node was lost (liveness.h): how says what
 * was seen; closed: the peer closed it (its process ended, or, while
 * closing, it finished its own close).  The links' thread; no lock
 * held. */
void rig_ucx_link_lost(void *self, int r, const char *how, bool closed);
/* Rank r's endpoint failed, or its connection closed, while this rank
 * closes: it left having finished its close, unless it shares this node,
 * where its process watch decides.  Any thread. */
void rig_ucx_left_closing(rig_ucx *u, int r);
/* Hands a failure to the progress thread, which fails the job: for callers
 * that hold the worker lock or run inside a wake.  Any thread. */
void rig_ucx_fail_later(rig_ucx *u, const char *fmt, ...) RIG_PRINTF(2, 3);
/* Waits (at most 1 s) until every rank was told of this rank's failure. */
void rig_ucx_flush_fail(rig_ucx *u);

/* The ops table's failure slots. */
void rig_ucx_fail(rig_transport *t, const char *why);
const char *rig_ucx_failed(rig_transport *t, bool *known);
int rig_ucx_gone(rig_transport *t, bool *died);
void rig_ucx_finalize(rig_transport *t, const char *why);

#endif
