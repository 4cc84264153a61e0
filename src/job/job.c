/* SPDX-License-Identifier: BSD-3-Clause */
/* Jobs on an MPI communicator: opening, rails between ranks, host records,
 * the job's window, failing and closing.
 *
 * Making a rail is one exchange between the two ranks, then an ack.  Each
 * side checks its lists, makes its end (memory, rkey, window attach) and
 * sends one message: its status, its lists and its end's descriptor.  Both
 * then decide the same way from the same two messages -- either side's
 * error, or the first difference between one's send and the other's
 * receive -- so both return the same outcome and neither waits for a peer
 * that gave up.  The ack covers connecting to the peer's end, the last step
 * that can fail.  Waits test with backoff (no core spinning for a late
 * peer).  A rail's id is (pair << 32) | k for the k-th rail of the pair,
 * pair = lo * size + hi: the same at both ends, unique in the job, and
 * needing no communication. */
#include "config.h"

#include "rig/job.h"

#include "mpi_rma.h"
#include "rail_internal.h"
#include "util_internal.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RIG_TAG_RAIL 0x7269
#define RIG_TAG_ACK 0x726a
#define RIG_WIRE_MAGIC 0x72696731u /* "rig1" */
#define RIG_MACHINE_MAX 300

typedef struct {
    rig_host host;
    rig_job *job;
    int rank;
    char machine[RIG_MACHINE_MAX];
} hostrec;

struct rig_job {
    MPI_Comm comm;
    int rank, size;
    rig_ucx *ucx;
    rig_mpi *mpi; /* transport "mpi" (src/rail/mpi_rma.c); ucx is NULL */
    MPI_Win win;
    pthread_mutex_t lock; /* seq, attached */
    uint64_t *seq;        /* rails made so far with each peer */
    uint64_t attached;    /* ends attached to the window */
    uint64_t attach_limit;
    hostrec *hosts;
    int self_key; /* MPI_COMM_SELF attribute: finalize without close */
};

/* The message of one side of a rail. */
typedef struct {
    uint32_t magic;
    int32_t status;
    uint32_t attached; /* the sender's end is in its window */
    uint32_t pad;
    uint64_t seq;
    uint64_t nsend, nreceive;
    uint64_t desc_len, msg_len;
} wire_head;

static uint64_t attach_limit(void);

static bool mpi_fail(char **err, int rc, const char *call)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS) {
        snprintf(s, sizeof(s), "MPI error %d", rc);
    }
    return rig_err(err, "system: %s failed: %s", call, s);
}

/* ---- options ------------------------------------------------------------- */

void rig_job_options_init(rig_job_options *opt)
{
    if (opt == NULL) {
        return;
    }
    memset(opt, 0, sizeof(*opt));
    opt->transport = "ucx";
    opt->numa = RIG_AUTO;
    opt->cuda = RIG_AUTO;
    opt->shm_stores = RIG_AUTO;
}

/* ---- host records -------------------------------------------------------- */

static bool host_rail(const rig_host *h, const rig_host *peer,
                      const rig_transfer *send, size_t nsend,
                      const rig_transfer *receive, size_t nreceive,
                      rig_rail **out, char **err);

static size_t host_threads(const rig_host *h, int64_t program, int32_t **out)
{
    (void)h;
    (void)program;
    if (out != NULL) {
        *out = NULL;
    }
    return 0;
}

static bool host_rail(const rig_host *h, const rig_host *peer,
                      const rig_transfer *send, size_t nsend,
                      const rig_transfer *receive, size_t nreceive,
                      rig_rail **out, char **err)
{
    if (h == NULL || h->rail != host_rail) {
        return rig_err(err, "invalid: not a host record of a job");
    }
    const hostrec *rec = h->impl;
    rig_job *job = rec->job;
    if (peer != NULL) {
        if (peer->rail != host_rail ||
            ((const hostrec *)peer->impl)->job != job) {
            return rig_err(err, "foreign: peer %s is not of this job",
                           peer->machine != NULL ? peer->machine : "?");
        }
        int pr = ((const hostrec *)peer->impl)->rank;
        if (pr == rec->rank) {
            return rig_err(err, "invalid: peer is this host (%s)",
                           rec->machine);
        }
        if (pr != job->rank) {
            return rig_err(err,
                           "unsupported: a rail between ranks %d and %d "
                           "made from rank %d needs the controller",
                           rec->rank, pr, job->rank);
        }
    }
    if (rec->rank == job->rank) {
        return rig_err(err, "invalid: peer is this host (%s)", rec->machine);
    }
    /* h's machine sends send: this rank receives it. */
    return rig_job_rail(job, rec->rank, receive, nreceive, send, nsend, out,
                        err);
}

const rig_host *rig_job_host(const rig_job *job, int rank)
{
    if (job == NULL || rank < 0 || rank >= job->size) {
        return NULL;
    }
    return &job->hosts[rank].host;
}

static bool hosts_make(rig_job *job, char **err)
{
    char name[256] = {0};
    if (gethostname(name, sizeof(name) - 1) != 0) {
        snprintf(name, sizeof(name), "unknown");
    }
    char *all = calloc((size_t)job->size, sizeof(name));
    job->hosts = calloc((size_t)job->size, sizeof(*job->hosts));
    if (all == NULL || job->hosts == NULL) {
        free(all);
        return rig_err(err, "nomem: host records for %d ranks", job->size);
    }
    int rc = MPI_Allgather(name, (int)sizeof(name), MPI_CHAR, all,
                           (int)sizeof(name), MPI_CHAR, job->comm);
    if (rc != MPI_SUCCESS) {
        free(all);
        return mpi_fail(err, rc, "MPI_Allgather");
    }
    for (int r = 0; r < job->size; r++) {
        hostrec *h = &job->hosts[r];
        all[(size_t)(r + 1) * sizeof(name) - 1] = '\0';
        snprintf(h->machine, sizeof(h->machine), "%s:%d",
                 all + (size_t)r * sizeof(name), r);
        h->job = job;
        h->rank = r;
        h->host.machine = h->machine;
        h->host.rail = host_rail;
        h->host.threads = host_threads;
        h->host.impl = h;
    }
    free(all);
    return true;
}

/* Tells the waits (rig/wait.h) how many ranks of the job share this
 * kernel's CPUs and how many PUs their bindings cover together, so that
 * RIG_WAIT=auto yields on an oversubscribed node whatever the launcher
 * says.  Ranks on one kernel (the boot id, rig_node_key's first field)
 * share its CPUs, whatever their host names or namespaces; a binding is
 * the sched_getaffinity mask, which is hwloc's cpubind on Linux (the first
 * 1,024 PUs: beyond them each rank counts its own). */
typedef struct {
    uint64_t kernel; /* FNV-1a of the boot id */
    uint64_t pus;
    uint64_t mask[16];
} cpu_share;

static bool wait_hint(rig_job *job, char **err)
{
    cpu_share me = {.kernel = 0xcbf29ce484222325ull};
    char key[128];
    rig_node_key(key, sizeof(key));
    for (const char *c = key; *c != '\0' && *c != '/'; c++) {
        me.kernel = (me.kernel ^ (uint8_t)*c) * 0x100000001b3ull;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        me.pus = (uint64_t)CPU_COUNT(&set);
        for (int i = 0; i < 16 * 64 && i < CPU_SETSIZE; i++) {
            if (CPU_ISSET(i, &set)) {
                me.mask[i / 64] |= 1ull << (i % 64);
            }
        }
    }
    cpu_share *all = calloc((size_t)job->size, sizeof(*all));
    if (all == NULL) {
        return rig_err(err, "nomem: CPU shares of %d ranks", job->size);
    }
    int rc = MPI_Allgather(&me, (int)sizeof(me), MPI_BYTE, all, (int)sizeof(me),
                           MPI_BYTE, job->comm);
    if (rc != MPI_SUCCESS) {
        free(all);
        return mpi_fail(err, rc, "MPI_Allgather");
    }
    int local = 0;
    uint64_t pus = 0, beyond = 0, mask[16] = {0};
    for (int r = 0; r < job->size; r++) {
        if (all[r].kernel != me.kernel) {
            continue;
        }
        local++;
        uint64_t listed = 0;
        for (int w = 0; w < 16; w++) {
            mask[w] |= all[r].mask[w];
            listed += (uint64_t)__builtin_popcountll(all[r].mask[w]);
        }
        beyond += all[r].pus > listed ? all[r].pus - listed : 0;
    }
    for (int w = 0; w < 16; w++) {
        pus += (uint64_t)__builtin_popcountll(mask[w]);
    }
    free(all);
    pus += beyond;
    if (pus > 0) {
        rig_wait_node(local, pus > INT_MAX ? INT_MAX : (int)pus);
    }
    return true;
}

/* ---- open ---------------------------------------------------------------- */

static bool exchange_addresses(rig_job *job, char **err)
{
    const void *addr;
    size_t len;
    rig_ucx_address(job->ucx, &addr, &len);
    int n = job->size;
    int *lens = calloc((size_t)n, sizeof(int));
    int *displs = calloc((size_t)n, sizeof(int));
    size_t *zl = calloc((size_t)n, sizeof(size_t));
    size_t *zo = calloc((size_t)n, sizeof(size_t));
    uint8_t *all = NULL;
    bool ok = false;
    if (lens == NULL || displs == NULL || zl == NULL || zo == NULL) {
        rig_err(err, "nomem: address tables for %d ranks", n);
        goto out_free;
    }
    int mine = (int)len;
    int rc = MPI_Allgather(&mine, 1, MPI_INT, lens, 1, MPI_INT, job->comm);
    if (rc != MPI_SUCCESS) {
        mpi_fail(err, rc, "MPI_Allgather");
        goto out_free;
    }
    size_t total = 0;
    for (int r = 0; r < n; r++) {
        displs[r] = (int)total;
        zo[r] = total;
        zl[r] = (size_t)lens[r];
        total += (size_t)lens[r];
    }
    all = malloc(total > 0 ? total : 1);
    if (all == NULL) {
        rig_err(err, "nomem: %zu bytes of worker addresses", total);
        goto out_free;
    }
    rc = MPI_Allgatherv(addr, mine, MPI_BYTE, all, lens, displs, MPI_BYTE,
                        job->comm);
    if (rc != MPI_SUCCESS) {
        mpi_fail(err, rc, "MPI_Allgatherv");
        goto out_free;
    }
    ok = rig_ucx_set_peers(job->ucx, all, zo, zl, err);

out_free:
    free(all);
    free(zo);
    free(zl);
    free(displs);
    free(lens);
    return ok;
}

/* All ranks learn whether every rank got here; false (with this rank's own
 * error, or the first failing rank's number) if one did not. */
/* ---- failure: watching peers and MPI_Finalize ---------------------------- */

/* Every rank's pid and node key, so that each watches its same-node peers
 * through pidfds (see src/rail/failure.c). */
typedef struct {
    int32_t pid;
    char key[124];
} node_id;

static bool watch_peers(rig_job *job, char **err)
{
    node_id me = {.pid = (int32_t)getpid()};
    rig_node_key(me.key, sizeof(me.key));
    node_id *all = calloc((size_t)job->size, sizeof(*all));
    int32_t *pids = calloc((size_t)job->size, sizeof(*pids));
    bool *local = calloc((size_t)job->size, sizeof(*local));
    bool ok = false;
    if (all == NULL || pids == NULL || local == NULL) {
        rig_err(err, "nomem: node ids of %d ranks", job->size);
        goto out;
    }
    int rc = MPI_Allgather(&me, (int)sizeof(me), MPI_BYTE, all, (int)sizeof(me),
                           MPI_BYTE, job->comm);
    if (rc != MPI_SUCCESS) {
        mpi_fail(err, rc, "MPI_Allgather");
        goto out;
    }
    for (int r = 0; r < job->size; r++) {
        all[r].key[sizeof(all[r].key) - 1] = '\0';
        pids[r] = all[r].pid;
        local[r] = strcmp(all[r].key, me.key) == 0;
    }
    ok = rig_ucx_watch(job->ucx, pids, local, err);
out:
    free(local);
    free(pids);
    free(all);
    return ok;
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first: a rank that ends
 * MPI with its job open fails the job and tells every rank, so that peers
 * see a failure instead of waiting for it. */
static int finalize_hook(MPI_Comm comm, int key, void *val, void *extra)
{
    (void)comm;
    (void)key;
    (void)extra;
    rig_job *job = val;
    if (job == NULL || job->self_key == MPI_KEYVAL_INVALID) {
        return MPI_SUCCESS; /* rig_job_close is removing it */
    }
    char why[128];
    snprintf(why, sizeof(why),
             "failed: rank %d finalized MPI without closing its job",
             job->rank);
    rig_ucx_left(job->ucx, job->rank);
    rig_ucx_fail(job->ucx, why);
    rig_ucx_flush_fail(job->ucx);
    job->self_key = MPI_KEYVAL_INVALID; /* the keyval goes with MPI */
    return MPI_SUCCESS;
}

static void watch_finalize(rig_job *job)
{
    rig_finalize_watch(finalize_hook, job, &job->self_key);
}

static void unwatch_finalize(rig_job *job)
{
    rig_finalize_unwatch(&job->self_key);
}

static bool agree(rig_job *job, bool ok, char **err)
{
    int bad = ok ? INT_MAX : job->rank;
    int first = INT_MAX;
    int rc = MPI_Allreduce(&bad, &first, 1, MPI_INT, MPI_MIN, job->comm);
    if (rc != MPI_SUCCESS) {
        if (ok) {
            mpi_fail(err, rc, "MPI_Allreduce");
        }
        return false;
    }
    if (first == INT_MAX) {
        return true;
    }
    if (ok) {
        rig_err(err, "failed: rank %d could not open the job", first);
    }
    return false;
}

static void job_free(rig_job *job)
{
    free(job->hosts);
    free(job->seq);
    pthread_mutex_destroy(&job->lock);
    free(job);
}

bool rig_job_open(MPI_Comm comm, const rig_job_options *opt, rig_job **out,
                  char **err)
{
    if (out == NULL) {
        return rig_err(err, "invalid: out is NULL");
    }
    if (comm == MPI_COMM_NULL) {
        return rig_err(err, "invalid: comm is MPI_COMM_NULL");
    }
    int flag = 0;
    MPI_Initialized(&flag);
    if (!flag) {
        return rig_err(err, "invalid: MPI is not initialized");
    }
    MPI_Finalized(&flag);
    if (flag) {
        return rig_err(err, "invalid: MPI is finalized");
    }
    int rc = MPI_Comm_test_inter(comm, &flag);
    if (rc != MPI_SUCCESS) {
        return mpi_fail(err, rc, "MPI_Comm_test_inter");
    }
    if (flag) {
        return rig_err(err, "unsupported: comm is an intercommunicator");
    }
    rig_job *job = calloc(1, sizeof(*job));
    if (job == NULL) {
        return rig_err(err, "nomem: calloc(%zu) failed", sizeof(*job));
    }
    pthread_mutex_init(&job->lock, NULL);
    job->win = MPI_WIN_NULL;
    rc = MPI_Comm_dup(comm, &job->comm);
    if (rc != MPI_SUCCESS) {
        job_free(job);
        return mpi_fail(err, rc, "MPI_Comm_dup");
    }
    MPI_Comm_set_errhandler(job->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(job->comm, &job->rank);
    MPI_Comm_size(job->comm, &job->size);

    rig_rail_settings set;
    bool ok = rig_rail_settings_resolve(opt, &set, err);
    if (ok) {
        job->seq = calloc((size_t)job->size, sizeof(*job->seq));
        if (job->seq == NULL) {
            ok = rig_err(err, "nomem: rail counters for %d ranks", job->size);
        }
    }
    if (ok && (int64_t)job->size * job->size >= ((int64_t)1 << 31)) {
        ok = rig_err(err, "unsupported: %d ranks (rail ids fit 46340)",
                     job->size);
    }
    if (ok && !set.mpi) {
        ok = rig_ucx_open(&set, job->rank, job->size, &job->ucx, err);
    }
    if (!agree(job, ok, err)) {
        goto err_ucx;
    }
    ok = set.mpi || exchange_addresses(job, err);
    if (ok) {
        job->attach_limit = attach_limit();
        rc = MPI_Win_create_dynamic(MPI_INFO_NULL, job->comm, &job->win);
        if (rc != MPI_SUCCESS) {
            job->win = MPI_WIN_NULL;
            ok = mpi_fail(err, rc, "MPI_Win_create_dynamic");
        } else {
            /* A full attachment table must not abort the job. */
            MPI_Win_set_errhandler(job->win, MPI_ERRORS_RETURN);
        }
    }
    if (ok && set.mpi) {
        ok = rig_mpi_open(job->comm, job->win, job->attach_limit, &job->mpi,
                          err);
    }
    if (ok) {
        ok = hosts_make(job, err);
    }
    if (ok) {
        ok = wait_hint(job, err);
    }
    if (ok && !set.mpi) {
        ok = watch_peers(job, err);
    }
    if (!agree(job, ok, err)) {
        goto err_ucx;
    }
    if (!set.mpi) {
        watch_finalize(job);
    }
    *out = job;
    return true;

err_ucx:
    if (job->win != MPI_WIN_NULL) {
        MPI_Win_free(&job->win);
    }
    if (job->ucx != NULL) {
        rig_ucx_stop(job->ucx);
        rig_ucx_close(job->ucx, NULL, NULL);
    }
    if (job->mpi != NULL) {
        rig_mpi_stop(job->mpi);
        rig_mpi_close(job->mpi);
    }
    MPI_Comm_free(&job->comm);
    job_free(job);
    return false;
}

int rig_job_rank(const rig_job *job)
{
    return job != NULL ? job->rank : -1;
}

int rig_job_size(const rig_job *job)
{
    return job != NULL ? job->size : -1;
}

/* ---- rails --------------------------------------------------------------- */

/* Sends buf to peer and receives the peer's message of the same tag, both
 * tested with backoff; *in is malloc'd. */
static bool swap(rig_job *job, int peer, int tag, const void *buf, size_t len,
                 void **in, size_t *inlen, char **err)
{
    MPI_Request req;
    int rc = MPI_Isend(buf, (int)len, MPI_BYTE, peer, tag, job->comm, &req);
    if (rc != MPI_SUCCESS) {
        return mpi_fail(err, rc, "MPI_Isend");
    }
    rig_backoff b = {0};
    int flag = 0;
    MPI_Message msg;
    MPI_Status st;
    for (;;) {
        rc = MPI_Improbe(peer, tag, job->comm, &flag, &msg, &st);
        if (rc != MPI_SUCCESS || flag) {
            break;
        }
        const char *failed = rig_ucx_failed(job->ucx);
        if (failed != NULL) {
            /* The peer may never answer (dead, or failed before it got
             * here); the job is over. */
            MPI_Cancel(&req);
            MPI_Request_free(&req);
            return rig_err(err, "%s", failed);
        }
        rig_backoff_step(&b);
    }
    if (rc != MPI_SUCCESS) {
        MPI_Cancel(&req);
        MPI_Request_free(&req);
        return mpi_fail(err, rc, "MPI_Improbe");
    }
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    void *m = malloc(count > 0 ? (size_t)count : 1);
    if (m == NULL) {
        /* Still receive it, or the pair's next message would match. */
        char dummy[1];
        MPI_Mrecv(dummy, 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        return rig_err(err, "nomem: %d-byte message from rank %d", count, peer);
    }
    rc = MPI_Mrecv(m, count, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        free(m);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        return mpi_fail(err, rc, "MPI_Mrecv");
    }
    b.spins = 0;
    for (;;) {
        rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag) {
            break;
        }
        const char *failed = rig_ucx_failed(job->ucx);
        if (failed != NULL) {
            free(m);
            MPI_Cancel(&req);
            MPI_Request_free(&req);
            return rig_err(err, "%s", failed);
        }
        rig_backoff_step(&b);
    }
    if (rc != MPI_SUCCESS) {
        free(m);
        return mpi_fail(err, rc, "MPI_Test");
    }
    *in = m;
    *inlen = (size_t)count;
    return true;
}

/* One side's message, parsed in place. */
typedef struct {
    wire_head h;
    const rig_transfer *send, *receive;
    const void *desc;
    const char *msg;
} side;

static bool parse(const void *buf, size_t len, side *s)
{
    if (len < sizeof(wire_head)) {
        return false;
    }
    memcpy(&s->h, buf, sizeof(s->h));
    const wire_head *h = &s->h;
    if (h->magic != RIG_WIRE_MAGIC || h->nsend > (1u << 30) ||
        h->nreceive > (1u << 30)) {
        return false;
    }
    size_t need = sizeof(wire_head) +
                  (size_t)(h->nsend + h->nreceive) * sizeof(rig_transfer) +
                  (size_t)h->desc_len + (size_t)h->msg_len;
    if (need != len) {
        return false;
    }
    const uint8_t *p = (const uint8_t *)buf + sizeof(wire_head);
    s->send = (const rig_transfer *)p;
    p += h->nsend * sizeof(rig_transfer);
    s->receive = (const rig_transfer *)p;
    p += h->nreceive * sizeof(rig_transfer);
    s->desc = p;
    p += h->desc_len;
    s->msg = (const char *)p;
    return true;
}

static void *pack(int status, bool attached, uint64_t seq,
                  const rig_transfer *send, size_t nsend,
                  const rig_transfer *receive, size_t nreceive,
                  const void *desc, size_t desc_len, const char *msg,
                  size_t *len)
{
    size_t msg_len = msg != NULL ? strlen(msg) + 1 : 0;
    if (status == RIG_RAIL_LISTS) {
        nsend = nreceive = 0; /* may be unreadable */
    }
    wire_head h = {
        .magic = RIG_WIRE_MAGIC,
        .status = status,
        .attached = attached ? 1 : 0,
        .seq = seq,
        .nsend = nsend,
        .nreceive = nreceive,
        .desc_len = desc_len,
        .msg_len = msg_len,
    };
    *len = sizeof(h) + (nsend + nreceive) * sizeof(rig_transfer) + desc_len +
           msg_len;
    uint8_t *buf = malloc(*len);
    if (buf == NULL) {
        return NULL;
    }
    uint8_t *p = buf;
    memcpy(p, &h, sizeof(h));
    p += sizeof(h);
    if (nsend > 0) {
        memcpy(p, send, nsend * sizeof(rig_transfer));
    }
    p += nsend * sizeof(rig_transfer);
    if (nreceive > 0) {
        memcpy(p, receive, nreceive * sizeof(rig_transfer));
    }
    p += nreceive * sizeof(rig_transfer);
    if (desc_len > 0) {
        memcpy(p, desc, desc_len);
    }
    p += desc_len;
    if (msg_len > 0) {
        memcpy(p, msg, msg_len);
    }
    return buf;
}

static void detach(void *arg, void *base)
{
    rig_job *job = arg;
    MPI_Win_detach(job->win, base);
}

static int attach_warned;

/* How many regions the job's window may hold: Open MPI's osc rdma takes
 * osc_rdma_max_attach (64 by default), and in 4.1 an attach past it fails
 * leaving the window's region lock held, so that every later attach or
 * detach hangs.  rig therefore never asks for more.  UINT64_MAX when the
 * MPI has no such variable. */
static uint64_t attach_limit(void)
{
    uint64_t limit = UINT64_MAX;
    int provided;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
        return limit;
    }
    int idx, count;
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_get_index("osc_rdma_max_attach", &idx) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) == MPI_SUCCESS) {
        uint64_t v[2] = {0, 0}; /* an unsigned int, read little or big */
        unsigned int u = 0;
        if (count == 1 && MPI_T_cvar_read(h, v) == MPI_SUCCESS) {
            memcpy(&u, v, sizeof(u));
            limit = u;
        }
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    return limit;
}

/* Attaches e's memory to the job's window while the window has room; past
 * that the rail still works, its end is only not reachable through the
 * window. */
static bool attach(rig_job *job, rig_uend *e)
{
    void *base;
    size_t len;
    rig_uend_memory(e, &base, &len);
    pthread_mutex_lock(&job->lock);
    bool room = job->attached < job->attach_limit;
    int rc = MPI_SUCCESS;
    if (room) {
        rc = MPI_Win_attach(job->win, base, (MPI_Aint)len);
        if (rc == MPI_SUCCESS) {
            job->attached++;
        } else {
            job->attach_limit = job->attached; /* never again */
        }
    }
    pthread_mutex_unlock(&job->lock);
    if (room && rc == MPI_SUCCESS) {
        return true;
    }
    char *why = NULL;
    if (room) {
        mpi_fail(&why, rc, "MPI_Win_attach");
    } else {
        rig_err(&why,
                "unsupported: the job's window holds %llu ends, "
                "its most (Open MPI's osc_rdma_max_attach)",
                (unsigned long long)job->attach_limit);
    }
    rig_log_once(&attach_warned, RIG_LOG_WARN,
                 "%s: later ends are not reachable through rig_job_window "
                 "(Open MPI: raise osc_rdma_max_attach)",
                 why != NULL ? why : "nomem");
    free(why);
    return false;
}

static void unattach(rig_job *job, rig_uend *e, bool attached)
{
    if (attached) {
        void *base;
        size_t len;
        rig_uend_memory(e, &base, &len);
        MPI_Win_detach(job->win, base);
        pthread_mutex_lock(&job->lock);
        job->attached--;
        pthread_mutex_unlock(&job->lock);
    }
}

static bool ack(rig_job *job, int peer, bool ok, bool *peer_ok, char **err)
{
    int mine = ok ? 1 : 0;
    void *in = NULL;
    size_t inlen = 0;
    if (!swap(job, peer, RIG_TAG_ACK, &mine, sizeof(mine), &in, &inlen, err)) {
        return false;
    }
    int theirs = 0;
    if (inlen == sizeof(theirs)) {
        memcpy(&theirs, in, sizeof(theirs));
    }
    free(in);
    *peer_ok = theirs == 1;
    return true;
}

bool rig_job_rail(rig_job *job, int peer, const rig_transfer *send,
                  size_t nsend, const rig_transfer *receive, size_t nreceive,
                  rig_rail **out, char **err)
{
    if (job == NULL) {
        return rig_err(err, "invalid: job is NULL");
    }
    if (out == NULL) {
        return rig_err(err, "invalid: out is NULL");
    }
    if (peer < 0 || peer >= job->size) {
        return rig_err(err, "invalid: peer %d is out of range [0, %d)", peer,
                       job->size);
    }
    if (peer == job->rank) {
        return rig_err(err, "invalid: peer %d is this rank", peer);
    }
    if ((send == NULL && nsend > 0) || (receive == NULL && nreceive > 0)) {
        return rig_err(err, "invalid: %s is NULL with %zu transfers",
                       send == NULL && nsend > 0 ? "send" : "receive",
                       send == NULL && nsend > 0 ? nsend : nreceive);
    }
    /* A failed job makes no rail, and the peer may be gone: no contact. */
    const char *failed_now =
        job->mpi != NULL ? rig_mpi_failed(job->mpi) : rig_ucx_failed(job->ucx);
    if (failed_now != NULL) {
        return rig_err(err, "%s", failed_now);
    }
    pthread_mutex_lock(&job->lock);
    uint64_t seq = job->seq[peer]++;
    pthread_mutex_unlock(&job->lock);
    int lo = job->rank < peer ? job->rank : peer;
    int hi = job->rank < peer ? peer : job->rank;
    int64_t id =
        (((int64_t)lo * job->size + hi) << 32) | (int64_t)(seq & 0xffffffffu);
    if (job->mpi != NULL) {
        return rig_mpi_rail(job->mpi, peer, id, send, nsend, receive, nreceive,
                            out, err);
    }

    /* This side: check, make the end, attach it. */
    int status = RIG_RAIL_OK;
    char *mine = NULL;
    rig_uend *e = NULL;
    bool attached = false;
    const char *failed = rig_ucx_failed(job->ucx);
    if (failed != NULL) {
        status = RIG_RAIL_FAILED;
        rig_err(&mine, "%s", failed);
    } else if (!rig_check_transfers(send, nsend, receive, nreceive, &mine)) {
        status = RIG_RAIL_LISTS;
    } else if (!rig_uend_make(job->ucx, peer, id, send, nsend, receive,
                              nreceive, &e, &mine)) {
        status = RIG_RAIL_END;
    } else {
        attached = attach(job, e);
    }
    const void *desc = NULL;
    size_t desc_len = 0;
    if (e != NULL) {
        rig_uend_desc(e, &desc, &desc_len);
    }
    size_t len = 0;
    void *buf = pack(status, attached, seq, send, nsend, receive, nreceive,
                     desc, desc_len, mine, &len);
    if (buf == NULL) {
        /* Tell the peer at least that this side failed. */
        status = RIG_RAIL_END;
        free(mine);
        mine = strdup("nomem: rail message");
        buf = pack(RIG_RAIL_END, false, seq, NULL, 0, NULL, 0, NULL, 0, NULL,
                   &len);
    }
    void *in = NULL;
    size_t inlen = 0;
    /* A reason already found (a failed job, bad lists) is the one to
     * report: the exchange's own error, if any, must not replace it. */
    bool ok = buf != NULL && swap(job, peer, RIG_TAG_RAIL, buf, len, &in,
                                  &inlen, mine == NULL ? &mine : NULL);
    free(buf);
    if (buf == NULL || !ok) {
        goto err_end;
    }

    /* Both sides decide alike from the two messages. */
    side them;
    bool parsed = parse(in, inlen, &them);
    if (status != RIG_RAIL_OK) {
        goto err_end; /* mine holds this side's error */
    }
    if (!parsed) {
        rig_err(&mine, "invalid: rank %d sent a malformed rail message", peer);
        goto err_end;
    }
    if (them.h.seq != seq) {
        rig_err(&mine,
                "invalid: rail %llu with rank %d met its rail %llu "
                "(calls to one peer from several threads?)",
                (unsigned long long)seq, peer, (unsigned long long)them.h.seq);
        goto err_end;
    }
    if (them.h.status != RIG_RAIL_OK) {
        rig_rail_peer_refused(peer, them.h.status,
                              them.h.msg_len > 0 ? them.msg : "(no reason)",
                              &mine);
        goto err_end;
    }
    rig_rail_lists me = {send, receive, nsend, nreceive};
    rig_rail_lists th = {them.send, them.receive, them.h.nsend,
                         them.h.nreceive};
    bool me_lo = job->rank == lo;
    if (!rig_rail_lists_match(lo, me_lo ? &me : &th, hi, me_lo ? &th : &me,
                              &mine)) {
        goto err_end;
    }

    /* Connect, then agree that both did. */
    rig_uend_set_attached(e, attached, them.h.attached != 0);
    rig_rail *rail = NULL;
    ok = rig_uend_connect(e, them.desc, (size_t)them.h.desc_len, &rail, &mine);
    bool peer_ok = false;
    if (!ack(job, peer, ok, &peer_ok, ok ? &mine : NULL)) {
        ok = false;
    } else if (ok && !peer_ok) {
        rig_err(&mine,
                "failed: rank %d could not connect to this rank's "
                "end of rail %lld",
                peer, (long long)id);
        ok = false;
    }
    if (!ok) {
        if (rail != NULL) {
            unattach(job, e, attached);
            rig_uend_discard(e, rail);
            e = NULL;
        }
        goto err_end;
    }
    free(in);
    *out = rail;
    return true;

err_end:
    if (e != NULL) {
        unattach(job, e, attached);
        rig_uend_discard(e, NULL);
    }
    free(in);
    if (err != NULL) {
        *err = mine;
    } else {
        free(mine);
    }
    return false;
}

int rig_job_rail_peer(const rig_job *job, const rig_rail *rail)
{
    if (job == NULL || rail == NULL) {
        return -1;
    }
    if (job->mpi != NULL) {
        return rig_mpi_rail_peer(job->mpi, rail);
    }
    rig_uend *e = rig_ucx_find(job->ucx, rail);
    return e != NULL ? rig_uend_peer(e) : -1;
}

bool rig_job_window(const rig_job *job, MPI_Win *out, char **err)
{
    if (job == NULL || out == NULL) {
        return rig_err(err, "invalid: %s is NULL", job == NULL ? "job" : "out");
    }
    *out = job->win;
    return true;
}

bool rig_job_rail_disp(const rig_job *job, const rig_rail *rail,
                       rig_job_peer_end *out, char **err)
{
    if (job == NULL || rail == NULL || out == NULL) {
        return rig_err(err, "invalid: %s is NULL",
                       job == NULL    ? "job"
                       : rail == NULL ? "rail"
                                      : "out");
    }
    if (job->mpi != NULL) {
        return rig_mpi_rail_disp(job->mpi, rail, out, err);
    }
    rig_uend *e = rig_ucx_find(job->ucx, rail);
    if (e == NULL) {
        return rig_err(err, "invalid: rail %lld is not a rail of this job",
                       (long long)rig_rail_id(rail));
    }
    bool theirs = false;
    rig_uend_attached(e, &theirs);
    if (!theirs) {
        return rig_err(err,
                       "unsupported: rank %d's end of rail %lld is not "
                       "attached to the window (Open MPI's "
                       "osc_rdma_max_attach)",
                       rig_uend_peer(e), (long long)rig_rail_id(rail));
    }
    uint64_t c, o, i;
    rig_uend_peer_addrs(e, &c, &o, &i);
    out->rank = rig_uend_peer(e);
    out->counts = (MPI_Aint)c;
    out->outbound = (MPI_Aint)o;
    out->inbound = (MPI_Aint)i;
    return true;
}

/* ---- failure and closing ------------------------------------------------- */

void rig_job_fail(rig_job *job, const char *why)
{
    if (job == NULL) {
        return;
    }
    char *msg = NULL;
    rig_err(&msg, "failed: rig_job_fail on rank %d: %s", job->rank,
            why != NULL ? why : "(no reason given)");
    if (job->mpi != NULL) {
        rig_mpi_fail(job->mpi, msg);
    } else {
        rig_ucx_fail(job->ucx, msg);
    }
    free(msg);
}

bool rig_job_failed(const rig_job *job)
{
    if (job != NULL && job->mpi != NULL) {
        return rig_mpi_failed(job->mpi) != NULL;
    }
    return job != NULL && rig_ucx_failed(job->ucx) != NULL;
}

static int ucx_gone(void *arg)
{
    return rig_ucx_gone(((rig_job *)arg)->ucx);
}

/* A barrier that gives up once a rank is known to have left the job. */
static bool close_barrier(rig_job *job)
{
    return rig_barrier_unless_gone(job->comm, job->rank, ucx_gone, job);
}

void rig_job_close(rig_job *job)
{
    if (job == NULL) {
        return;
    }
    if (job->mpi != NULL) {
        /* Every rank stopped carrying before any window goes; without a
         * rank that left, the collective frees are abandoned. */
        rig_mpi_stop(job->mpi);
        bool all = rig_mpi_barrier(job->mpi);
        rig_mpi_close(job->mpi);
        if (all) {
            MPI_Win_free(&job->win);
            MPI_Comm_free(&job->comm);
        }
        job_free(job);
        return;
    }
    unwatch_finalize(job);
    rig_ucx_stop(job->ucx);
    /* Every rank stopped carrying before any memory or endpoint goes.  A
     * rank that left the job (died, or finalized MPI) never arrives: then
     * the window and communicator are abandoned (freeing them is
     * collective) and only local resources go. */
    bool all = close_barrier(job);
    rig_ucx_close(job->ucx, detach, job);
    if (all) {
        MPI_Win_free(&job->win);
        MPI_Comm_free(&job->comm);
    }
    job_free(job);
}

/* ---- rig_info ------------------------------------------------------------ */

bool rig_transport_info(FILE *out, char **err)
{
    if (out == NULL) {
        return rig_err(err, "invalid: out is NULL");
    }
    fprintf(out, "transport (rails between MPI ranks):\n");
    /* The RIG_* values themselves are in rig_settings() (rig_info prints
     * them all); here only whether they resolve. */
    rig_rail_settings sel;
    char *why = NULL;
    if (!rig_rail_settings_resolve(NULL, &sel, &why)) {
        fprintf(out, "  settings error:  %s\n", why != NULL ? why : "nomem");
        free(why);
    } else if (sel.mpi) {
        fprintf(out, "  selected:        mpi (MPI RMA; RIG_TRANSPORT)\n");
        rig_mpi_info(out);
        fprintf(out, "  (ucx, not selected:)\n");
    } else {
        fprintf(out, "  selected:        ucx\n");
    }
    if (!rig_ucx_info(out, err)) {
        return false;
    }
    return true;
}
