/* SPDX-License-Identifier: BSD-3-Clause */
/* The structures shared by the UCX transport's files. */
#ifndef RIG_UCX_INTERNAL_H
#define RIG_UCX_INTERNAL_H

#include "rail_internal.h"
#include "util_internal.h"

#include <hwloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <ucp/api/ucp.h>

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
    void *rkey; /* packed rkey (ucp_rkey_buffer_release) */
    size_t rkey_len;
} rig_endmem;

/* Allocates len bytes (a multiple of the page) from UCX, binds them to the
 * transport's NUMA node, zeroes them, registers them with CUDA when asked
 * and packs their rkey.  Called under the worker lock. */
bool rig_endmem_alloc(rig_ucx *u, size_t len, rig_endmem *m, char **err);
/* Undoes rig_endmem_alloc; under the worker lock (or when no other thread
 * uses the transport). */
void rig_endmem_free(rig_ucx *u, rig_endmem *m);

/* ---- the transport ------------------------------------------------------ */

/* A batch of puts of one wake on the put path: the puts up to count c and
 * the put of `arrived` (whose source is `value`). */
typedef struct {
    uint64_t c;
    uint64_t value;
    unsigned pending; /* requests not completed yet */
    struct rig_uend *end;
} rig_batch;

#define RIG_BATCHES 32

struct rig_uend {
    /* The wake lock: the number of wakes since the carrier last looked; the
     * thread that moves it off 0 carries (see end.c). */
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
    uint8_t *peer_in;                    /* mapped peer inbound, or NULL */
    atomic_uint_least64_t *peer_arrived; /* mapped peer arrived, or NULL */
    size_t in_copy;                      /* bytes of one peer inbound copy */
    rig_ucx *ucx;
    uint8_t *peer_counts_map; /* mapped peer counts, or NULL */

    /* The put path (under the worker lock). */
    ucp_ep_h ep;
    ucp_rkey_h rkey;
    uint64_t peer_base, peer_counts, peer_out, peer_in_addr;
    rig_batch batch[RIG_BATCHES]; /* ring: batches not yet sent */
    unsigned batch_head, batch_n;

    /* Cold. */
    int peer;
    int64_t id;
    rig_transfer *receive;
    size_t nreceive;
    rig_end_layout layout;
    rig_endmem mem;
    void *desc; /* packed descriptor for the peer */
    size_t desc_len;
    rig_end *end;                 /* the ABI end while held, else NULL */
    rig_rail *rail;               /* its rail (borrowed) */
    bool held;                    /* the ABI end is alive */
    bool in_job;                  /* the job still counts it (until close) */
    bool attached;                /* in the job's window */
    bool peer_attached;           /* the peer's end is in its window */
    bool listed;                  /* in the transport's list (connected) */
    struct rig_uend *next, *prev; /* the transport's list */
};

struct rig_ucx {
    rig_rail_settings set;
    int rank, size;
    ucp_context_h context;
    ucp_worker_h worker;
    void *address;
    size_t address_len;
    pthread_mutex_t worker_lock;

    /* Peers: worker addresses and endpoints (made on first use). */
    uint8_t **peer_addr;
    size_t *peer_addr_len;
    ucp_ep_h *ep;

    /* Topology and where ends go. */
    hwloc_topology_t topo;
    hwloc_nodeset_t nodeset; /* NULL: not bound */
    rig_cuda *cuda;

    /* Ends, under list_lock. */
    pthread_mutex_t list_lock;
    struct rig_uend *ends;
    long refs; /* 1 for the job + 1 per end not yet freed; list_lock */

    /* Failure. */
    _Atomic(char *) pending_why;    /* for the progress thread to fail */
    _Atomic(char *) pending_remote; /* told by a peer (not sent on) */
    atomic_bool failed;
    char *fail_why;         /* set once, before failed */
    bool fail_origin;       /* the failure started here: tell every rank */
    atomic_bool tell_peers; /* the progress thread still has to */
    atomic_bool told;       /* every rank was told (or did not need to) */
    atomic_bool closing;    /* endpoint errors are expected now */

    /* Watching peers (failure.c); set once by rig_ucx_watch. */
    uint64_t keepalive_ms;
    int wake_ms;       /* the progress thread's period, -1: none needed */
    bool poll_pids;    /* same-node peers without a pidfd: kill(pid, 0) */
    int32_t *pid;      /* same-node peers' pids, else 0 */
    int *pidfd;        /* same-node peers' pidfds, else -1 */
    atomic_bool *dead; /* peers seen dead */
    atomic_int gone;   /* a rank known to have left the job, or -1 */

    /* The progress thread. */
    pthread_t thread;
    bool thread_started;
    int efd;     /* the worker's event fd */
    int eventfd; /* wakes the thread */
    int epfd;
    atomic_bool stop;
    atomic_long outstanding; /* batches with requests in flight */
};

/* The endpoint to peer, made on first use; under the worker lock. */
bool rig_ucx_ep(rig_ucx *u, int peer, ucp_ep_h *out, char **err);
/* Wakes the progress thread (any thread, async-signal-safe). */
void rig_ucx_kick(rig_ucx *u);
/* Drops one reference; the last frees the transport.  Takes list_lock. */
void rig_ucx_unref(rig_ucx *u);
/* Hands a failure to the progress thread, which fails the job: for
 * callers that hold the worker lock or run inside a wake.  Any thread. */
void rig_ucx_fail_later(rig_ucx *u, const char *fmt, ...) RIG_PRINTF(2, 3);
/* Frees an end no one uses any more (memory, rkey, descriptor) and drops
 * its reference on the transport.  No lock held. */
void rig_uend_free(struct rig_uend *e);
/* Tells e's peer that the job failed: its counts of this rail go to FAILED.
 * Worker lock held. */
void rig_uend_tell_failed(struct rig_uend *e);

/* ---- failure detection and propagation (failure.c) --------------------- */

/* Sets UCX keepalive (ucp) and TCP keepalive (environment) to the period. */
bool rig_fail_config(ucp_config_t *cfg, uint64_t keepalive_ms, char **err);
/* Registers the failure message's handler on the worker. */
bool rig_fail_init(rig_ucx *u, char **err);
/* Sends why to every rank but this one and the dead, waiting (at most 1 s)
 * for the sends.  Worker lock held. */
void rig_fail_broadcast(rig_ucx *u, const char *why);
/* The progress thread's epoll reported fd: true when it is a peer's pidfd
 * (the peer died; the job fails). */
bool rig_fail_event(rig_ucx *u, int fd);
/* Polls same-node peers that have no pidfd (every wake_ms). */
void rig_fail_poll(rig_ucx *u);
/* Closes the pidfds; at close. */
void rig_fail_unwatch(rig_ucx *u);

/* A UCX status as text, for messages. */
const char *rig_ucs_str(ucs_status_t st);

#endif
