/* SPDX-License-Identifier: BSD-3-Clause */
/* Jobs on an MPI communicator: options, host records, opening, rails
 * between ranks, the job's window, failing, closing and rig_info.
 *
 * The job knows its transport only through the ops table
 * (../rail/base/transport.h), picked by name from the registry
 * (../rail/transports.h): it never asks which one it has.  What it does
 * itself is what every transport shares: the options and RIG_* switches,
 * the agreement of all ranks at open, the host records and every rank's
 * pid and node (one gather, for the transports' watchers), the job's
 * window, the numbering of rails, noticing MPI_Finalize, and the closing
 * barrier that gives up on a rank that left.  A rail's id is
 * (pair << 32) | k for the k-th rail of the pair, pair = lo * size + hi:
 * the same at both ends, unique in the job, and needing no
 * communication.
 *
 * The jobs of the process.  Every public call checks its job against the
 * list of this process's job records (under jobs_lock, comparing
 * pointers only), so that a NULL, a closed job or a pointer that is no
 * job gets "invalid:" (or -1, NULL, false) instead of a read of freed
 * memory.  A record lives while the user has not closed the job or the
 * transport has not freed itself (an end held past close keeps it, and
 * rig_end_failure finds that end's job through it): two references,
 * dropped by close and by the transport's freed hook. */
#include "config.h"

#include "rig/job.h"

#include "job_internal.h"

#include "../rail/base/failure.h"
#include "../rail/base/transport.h"
#include "../rail/base/window.h"
#include "../rail/transports.h"
#include "../util/util_internal.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RIG_MACHINE_MAX 300
#define JOBS_LOCK_LEVEL 5 /* jobs_lock: before every other lock */
#define JOB_LOCK_LEVEL 10 /* job->lock: alone, before any transport's */

/* A rank that left during the closing barrier is given up on only after
 * this long: a rank that finished its close (and so the barrier) may drop
 * its endpoints or exit while this rank's barrier is still completing,
 * and is then taken for gone; a barrier that completes in the grace is
 * whole.  A death during close costs it once. */
#define CLOSE_GRACE_NS 100000000ull
/* The same when no rank is known dead, only gone while closing (its
 * endpoints or links dropped): most likely it finished its close, so this
 * rank's barrier completes as soon as MPI progresses it, which on a
 * loaded node can take longer than the grace above -- and giving up would
 * abandon windows that rank frees at MPI_Finalize, where both then wait
 * for good.  Bounded all the same (a death on another node can look like
 * this). */
#define CLOSE_CLOSED_GRACE_NS 5000000000ull

typedef struct {
    rig_host host;
    rig_job *job;
    int rank;
    char machine[RIG_MACHINE_MAX];
} hostrec;

struct rig_job {
    MPI_Comm comm;
    MPI_Comm rails_comm; /* rig_job_rails' collectives alone (together.c) */
    int rank, size;
    rig_transport *t;
    rig_window *window;
    pthread_mutex_t lock; /* seq; JOB_LOCK_LEVEL */
    uint64_t *seq;        /* rails made so far with each peer */
    hostrec *hosts;
    int32_t *pid; /* every rank's process id */
    bool *local;  /* every rank: shares this rank's kernel and pid space */
    int self_key; /* MPI_COMM_SELF attribute: finalize without close */
    /* jobs_lock: */
    rig_job *next_job; /* the list of job records */
    int refs;          /* close + the transport (see above) */
    bool closed;       /* rig_job_close began */
};

static pthread_mutex_t jobs_lock = PTHREAD_MUTEX_INITIALIZER;
static rig_job *jobs;
static int bad_job_logged;

/* ---- the jobs of the process ----------------------------------------------
 */

static void job_free(rig_job *job);

/* Whether job is a record of this process; jobs_lock held. */
static bool job_listed(const rig_job *job)
{
    const rig_job *j = jobs;
    while (j != NULL && j != job) {
        j = j->next_job;
    }
    return j != NULL;
}

/* job as a caller handed it: an open job of this process; else false with
 * "invalid:" naming why (and logged once, for callers without err). */
static bool job_check(const rig_job *job, const char *fn, char **err)
{
    if (job == NULL) {
        return rig_err(err, "invalid: job is NULL");
    }
    rig_lock(&jobs_lock, JOBS_LOCK_LEVEL);
    bool listed = job_listed(job);
    bool closed = listed && job->closed;
    rig_unlock(&jobs_lock, JOBS_LOCK_LEVEL);
    if (listed && !closed) {
        return true;
    }
    const char *what = closed ? "was closed"
                              : "is not a job of this process (closed and "
                                "gone, or never opened)";
    rig_log_once(&bad_job_logged, RIG_LOG_WARN,
                 "%s: job %p %s: the call is ignored", fn, (const void *)job,
                 what);
    return rig_err(err, "invalid: job %p %s", (const void *)job, what);
}

static void job_unref(rig_job *job)
{
    rig_lock(&jobs_lock, JOBS_LOCK_LEVEL);
    bool last = --job->refs == 0;
    if (last) {
        rig_job **pp = &jobs;
        while (*pp != NULL && *pp != job) {
            pp = &(*pp)->next_job;
        }
        if (*pp == job) {
            *pp = job->next_job;
        }
    }
    rig_unlock(&jobs_lock, JOBS_LOCK_LEVEL);
    if (last) {
        job_free(job);
    }
}

/* The transport's freed hook: it is gone. */
static void transport_freed(void *arg)
{
    job_unref(arg);
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

static bool parse_switch(const char *name, rig_switch *v, char **err)
{
    const char *s = getenv(name);
    if (s == NULL || s[0] == '\0') {
        return true;
    }
    if (strcmp(s, "auto") == 0) {
        *v = RIG_AUTO;
    } else if (strcmp(s, "on") == 0 || strcmp(s, "y") == 0 ||
               strcmp(s, "yes") == 0 || strcmp(s, "1") == 0) {
        *v = RIG_ON;
    } else if (strcmp(s, "off") == 0 || strcmp(s, "n") == 0 ||
               strcmp(s, "no") == 0 || strcmp(s, "0") == 0) {
        *v = RIG_OFF;
    } else {
        return rig_err(err, "invalid: %s=%s is not auto, on or off", name, s);
    }
    return true;
}

static bool switch_ok(rig_switch v)
{
    return v == RIG_AUTO || v == RIG_OFF || v == RIG_ON;
}

/* opt (NULL: defaults) with its RIG_* variables applied: the transport and
 * the switches every transport is handed. */
static bool options_resolve(const rig_job_options *opt,
                            const rig_transport_ops **ops,
                            rig_transport_params *p, char **err)
{
    rig_job_options o;
    if (opt != NULL) {
        o = *opt;
    } else {
        rig_job_options_init(&o);
    }
    if (!switch_ok(o.numa) || !switch_ok(o.cuda) || !switch_ok(o.shm_stores)) {
        return rig_err(err,
                       "invalid: rig_job_options.%s is not a switch "
                       "(RIG_AUTO, RIG_OFF or RIG_ON)",
                       !switch_ok(o.numa)   ? "numa"
                       : !switch_ok(o.cuda) ? "cuda"
                                            : "shm_stores");
    }
    const char *env = getenv("RIG_TRANSPORT");
    bool by_env = env != NULL && env[0] != '\0';
    const char *name = by_env ? env : o.transport != NULL ? o.transport : "ucx";
    if (!rig_transport_find(name, by_env ? "RIG_TRANSPORT" : "transport", ops,
                            err) ||
        !parse_switch("RIG_NUMA", &o.numa, err) ||
        !parse_switch("RIG_CUDA", &o.cuda, err) ||
        !parse_switch("RIG_SHM_STORES", &o.shm_stores, err)) {
        return false;
    }
    p->numa = o.numa;
    p->cuda = o.cuda;
    p->shm_stores = o.shm_stores;
    return true;
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
    /* Compiled code calls the record's function directly: bad lists are
     * refused here, at once, as rig_host_rail refuses them, not after the
     * peer was met (the pair protocol would only tell both sides then). */
    if (out == NULL) {
        return rig_err(err, "invalid: out is NULL");
    }
    if ((send == NULL && nsend > 0) || (receive == NULL && nreceive > 0)) {
        return rig_err(err, "invalid: %s is NULL with %zu transfers",
                       send == NULL && nsend > 0 ? "send" : "receive",
                       send == NULL && nsend > 0 ? nsend : nreceive);
    }
    if (!rig_check_transfers(send, nsend, receive, nreceive, err)) {
        return false;
    }
    /* h's machine sends send: this rank receives it. */
    return rig_job_rail(job, rec->rank, receive, nreceive, send, nsend, out,
                        err);
}

const rig_host *rig_job_host(const rig_job *job, int rank)
{
    if (!job_check(job, "rig_job_host", NULL) || rank < 0 ||
        rank >= job->size) {
        return NULL;
    }
    return &job->hosts[rank].host;
}

/* This node's key: ranks with equal keys share a kernel and a pid
 * namespace (boot id, pid namespace, host name), so that one's pid means
 * the other's process. */
static void node_key(char *out, size_t len)
{
    char host[64] = {0};
    if (gethostname(host, sizeof(host) - 1) != 0) {
        snprintf(host, sizeof(host), "?");
    }
    rig_node_key(out, len, "pid", host);
}

/* What every rank says of itself at open. */
typedef struct {
    char name[256]; /* host name */
    int32_t pid;
    char key[124];     /* node_key */
    uint64_t pus;      /* PUs of its binding (sched_getaffinity) */
    uint64_t mask[16]; /* the first 1,024 of them */
} rank_id;

/* This rank's binding: the sched_getaffinity mask, which is hwloc's
 * cpubind on Linux (the first 1,024 PUs in mask; pus counts them all). */
static void binding(rank_id *me)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        return;
    }
    me->pus = (uint64_t)CPU_COUNT(&set);
    for (int i = 0; i < 16 * 64 && i < CPU_SETSIZE; i++) {
        if (CPU_ISSET(i, &set)) {
            me->mask[i / 64] |= 1ull << (i % 64);
        }
    }
}

/* Tells the waits (rig/wait.h) how many ranks of the job share this
 * kernel's CPUs and how many PUs their bindings cover together, so that
 * RIG_WAIT=auto yields on an oversubscribed node whatever the launcher
 * says.  Ranks on one kernel (the boot id, node_key's first field) share
 * its CPUs, whatever their host names or namespaces. */
static void wait_hint(const rank_id *all, int n, const rank_id *me)
{
    size_t boot = strcspn(me->key, "/");
    int local = 0;
    uint64_t pus = 0, beyond = 0, mask[16] = {0};
    for (int r = 0; r < n; r++) {
        if (strncmp(all[r].key, me->key, boot) != 0 ||
            all[r].key[boot] != '/') {
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
    pus += beyond;
    if (pus > 0) {
        rig_wait_node(local, pus > INT_MAX ? INT_MAX : (int)pus);
    }
}

/* One gather: the host records, every rank's pid and whether it shares
 * this node, and how many ranks share this kernel's CPUs (the waits'
 * hint). */
static bool ranks_learn(rig_job *job, char **err)
{
    rank_id me = {.pid = (int32_t)getpid()};
    if (gethostname(me.name, sizeof(me.name) - 1) != 0) {
        snprintf(me.name, sizeof(me.name), "unknown");
    }
    node_key(me.key, sizeof(me.key));
    binding(&me);
    size_t n = (size_t)job->size;
    rank_id *all = calloc(n, sizeof(*all));
    job->hosts = calloc(n, sizeof(*job->hosts));
    job->pid = calloc(n, sizeof(*job->pid));
    job->local = calloc(n, sizeof(*job->local));
    if (all == NULL || job->hosts == NULL || job->pid == NULL ||
        job->local == NULL) {
        free(all);
        return rig_err(err, "nomem: host records for %d ranks", job->size);
    }
    int rc = MPI_Allgather(&me, (int)sizeof(me), MPI_BYTE, all, (int)sizeof(me),
                           MPI_BYTE, job->comm);
    if (rc != MPI_SUCCESS) {
        free(all);
        return rig_err_mpi(err, rc, "MPI_Allgather");
    }
    for (int r = 0; r < job->size; r++) {
        rank_id *id = &all[r];
        id->name[sizeof(id->name) - 1] = '\0';
        id->key[sizeof(id->key) - 1] = '\0';
        job->pid[r] = id->pid;
        job->local[r] = strcmp(id->key, me.key) == 0;
        hostrec *h = &job->hosts[r];
        snprintf(h->machine, sizeof(h->machine), "%s:%d", id->name, r);
        h->job = job;
        h->rank = r;
        h->host.machine = h->machine;
        h->host.rail = host_rail;
        h->host.threads = host_threads;
        h->host.impl = h;
    }
    wait_hint(all, job->size, &me);
    free(all);
    return true;
}

/* ---- noticing MPI_Finalize ----------------------------------------------- */

/* MPI_Finalize first deletes MPI_COMM_SELF's attributes, so an attribute
 * with a delete callback tells the job that MPI is going away with the job
 * still open: the rank fails the job and tells every rank that it left, so
 * that peers see a failure instead of waiting for it.  The hook runs once
 * more when rig_job_close deletes the attribute, and then does nothing
 * (self_key is invalid by then). */
static int finalize_hook(MPI_Comm comm, int key, void *val, void *extra)
{
    (void)comm;
    (void)key;
    (void)extra;
    rig_job *job = val;
    rig_lock(&jobs_lock, JOBS_LOCK_LEVEL);
    bool open = job != NULL && job_listed(job) && !job->closed;
    rig_unlock(&jobs_lock, JOBS_LOCK_LEVEL);
    if (!open || job->self_key == MPI_KEYVAL_INVALID) {
        return MPI_SUCCESS; /* rig_job_close is removing it */
    }
    char why[128];
    snprintf(why, sizeof(why),
             "failed: rank %d finalized MPI without closing its job",
             job->rank);
    rig_transport_finalize(job->t, why);
    job->self_key = MPI_KEYVAL_INVALID; /* the keyval goes with MPI */
    return MPI_SUCCESS;
}

static void finalize_watch(rig_job *job)
{
    job->self_key = MPI_KEYVAL_INVALID;
    int key;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, finalize_hook, &key,
                               NULL) != MPI_SUCCESS) {
        return;
    }
    job->self_key = key;
    if (MPI_Comm_set_attr(MPI_COMM_SELF, key, job) != MPI_SUCCESS) {
        MPI_Comm_free_keyval(&key);
        job->self_key = MPI_KEYVAL_INVALID;
    }
}

static void finalize_unwatch(rig_job *job)
{
    int key = job->self_key;
    if (key == MPI_KEYVAL_INVALID) {
        return;
    }
    job->self_key = MPI_KEYVAL_INVALID; /* the hook, run by the delete,
                                         * does nothing */
    MPI_Comm_delete_attr(MPI_COMM_SELF, key);
    MPI_Comm_free_keyval(&key);
}

/* ---- open ---------------------------------------------------------------- */

/* All ranks learn whether every rank got here; false (with this rank's own
 * error, or the first failing rank's number) if one did not. */
static bool agree(rig_job *job, bool ok, char **err)
{
    int bad = ok ? INT_MAX : job->rank;
    int first = INT_MAX;
    int rc = MPI_Allreduce(&bad, &first, 1, MPI_INT, MPI_MIN, job->comm);
    if (rc != MPI_SUCCESS) {
        if (ok) {
            rig_err_mpi(err, rc, "MPI_Allreduce");
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
    free(job->pid);
    free(job->local);
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
        return rig_err_mpi(err, rc, "MPI_Comm_test_inter");
    }
    if (flag) {
        return rig_err(err, "unsupported: comm is an intercommunicator");
    }
    rig_job *job = calloc(1, sizeof(*job));
    if (job == NULL) {
        return rig_err(err, "nomem: calloc(%zu) failed", sizeof(*job));
    }
    pthread_mutex_init(&job->lock, NULL);
    job->self_key = MPI_KEYVAL_INVALID;
    rc = MPI_Comm_dup(comm, &job->comm);
    if (rc != MPI_SUCCESS) {
        job_free(job);
        return rig_err_mpi(err, rc, "MPI_Comm_dup");
    }
    MPI_Comm_set_errhandler(job->comm, MPI_ERRORS_RETURN);
    /* rig_job_rails' own: its collectives, which a rank may abandon when
     * the job fails, never meet the closing barrier's. */
    rc = MPI_Comm_dup(job->comm, &job->rails_comm);
    if (rc != MPI_SUCCESS) {
        MPI_Comm_free(&job->comm);
        job_free(job);
        return rig_err_mpi(err, rc, "MPI_Comm_dup");
    }
    MPI_Comm_set_errhandler(job->rails_comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(job->comm, &job->rank);
    MPI_Comm_size(job->comm, &job->size);

    /* This rank alone first: settings, the transport's own opening. */
    const rig_transport_ops *ops = NULL;
    rig_transport_params p = {
        .comm = job->comm,
        .rank = job->rank,
        .size = job->size,
        .freed = transport_freed,
        .freed_arg = job,
    };
    bool ok = options_resolve(opt, &ops, &p, err);
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
    if (ok) {
        ok = rig_transport_open(ops, &p, &job->t, err);
    }
    /* Then together: the window, who is who, the transport's wiring. */
    if (!agree(job, ok, err)) {
        goto err_close;
    }
    ok = rig_window_open(job->comm, &job->window, err) && ranks_learn(job, err);
    if (ok) {
        rig_transport_wiring w = {
            .window = job->window,
            .pid = job->pid,
            .local = job->local,
        };
        ok = rig_transport_wire(job->t, &w, err);
    }
    if (!agree(job, ok, err)) {
        goto err_close;
    }
    job->refs = 2; /* the user's, until close; the transport's */
    rig_lock(&jobs_lock, JOBS_LOCK_LEVEL);
    job->next_job = jobs;
    jobs = job;
    rig_unlock(&jobs_lock, JOBS_LOCK_LEVEL);
    finalize_watch(job);
    *out = job;
    return true;

err_close:
    if (job->t != NULL) {
        rig_transport_stop(job->t);
        job->refs = 1; /* the transport's freed hook frees the record */
        job->closed = true;
        /* Every rank is here (agree is collective): the window's free
         * is; the record (never listed) goes with the transport.  A
         * rank whose peer failed its own opening has no window yet. */
        rig_window *w = job->window;
        MPI_Comm comm = job->comm, rails_comm = job->rails_comm;
        rig_window_end(w, true);
        (void)rig_transport_close(job->t, true);
        rig_window_close(w, true);
        MPI_Comm_free(&comm);
        MPI_Comm_free(&rails_comm);
        return false;
    }
    rig_window_close(job->window, true);
    MPI_Comm_free(&job->comm);
    MPI_Comm_free(&job->rails_comm);
    job_free(job);
    return false;
}

bool rig_job_parts_of(rig_job *job, const char *fn, rig_job_parts *out,
                      char **err)
{
    if (!job_check(job, fn, err)) {
        return false;
    }
    *out = (rig_job_parts){.comm = job->comm,
                           .rails_comm = job->rails_comm,
                           .rank = job->rank,
                           .size = job->size,
                           .t = job->t};
    return true;
}

int rig_job_rank(const rig_job *job)
{
    return job_check(job, "rig_job_rank", NULL) ? job->rank : -1;
}

int rig_job_size(const rig_job *job)
{
    return job_check(job, "rig_job_size", NULL) ? job->size : -1;
}

/* ---- rails --------------------------------------------------------------- */

bool rig_job_rail(rig_job *job, int peer, const rig_transfer *send,
                  size_t nsend, const rig_transfer *receive, size_t nreceive,
                  rig_rail **out, char **err)
{
    if (!job_check(job, "rig_job_rail", err)) {
        return false;
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
    if (rig_transport_failed(job->t, NULL) != NULL) {
        return rig_err(err, "%s",
                       rig_failure_settled(job->t, RIG_REASON_WAIT_NS));
    }
    rig_lock(&job->lock, JOB_LOCK_LEVEL);
    uint64_t seq = job->seq[peer]++;
    rig_unlock(&job->lock, JOB_LOCK_LEVEL);
    int lo = job->rank < peer ? job->rank : peer;
    int hi = job->rank < peer ? peer : job->rank;
    int64_t id =
        (((int64_t)lo * job->size + hi) << 32) | (int64_t)(seq & 0xffffffffu);
    return rig_transport_rail(job->t, peer, id, send, nsend, receive, nreceive,
                              out, err);
}

int rig_job_rail_peer(const rig_job *job, const rig_rail *rail)
{
    rig_rail_far far;
    if (!job_check(job, "rig_job_rail_peer", NULL) || rail == NULL ||
        !rig_transport_rail_far(job->t, rail, &far)) {
        return -1;
    }
    return far.rank;
}

bool rig_job_window(const rig_job *job, MPI_Win *out, char **err)
{
    if (!job_check(job, "rig_job_window", err)) {
        return false;
    }
    if (out == NULL) {
        return rig_err(err, "invalid: out is NULL");
    }
    const char *missing = rig_window_missing(job->window);
    if (missing != NULL) {
        return rig_err(err, "%s", missing);
    }
    *out = rig_window_win(job->window);
    return true;
}

bool rig_job_rail_disp(const rig_job *job, const rig_rail *rail,
                       rig_job_peer_end *out, char **err)
{
    if (!job_check(job, "rig_job_rail_disp", err)) {
        return false;
    }
    if (rail == NULL || out == NULL) {
        return rig_err(err, "invalid: %s is NULL",
                       rail == NULL ? "rail" : "out");
    }
    rig_rail_far far;
    if (!rig_transport_rail_far(job->t, rail, &far)) {
        return rig_err(err, "invalid: rail %lld is not a rail of this job",
                       (long long)rig_rail_id(rail));
    }
    const char *missing = rig_window_missing(job->window);
    if (missing != NULL) {
        return rig_err(err, "%s", missing);
    }
    if (!far.attached) {
        const char *osc = rig_window_component(job->window);
        return rig_err(
            err,
            "unsupported: rank %d's end of rail %lld is not "
            "attached to the window (it was full: osc %s%s)",
            far.rank, (long long)rig_rail_id(rail), osc != NULL ? osc : "?",
            osc != NULL && strcmp(osc, "rdma") == 0 ? ", osc_rdma_max_attach"
                                                    : "");
    }
    out->rank = far.rank;
    out->counts = (MPI_Aint)far.counts;
    out->outbound = (MPI_Aint)far.outbound;
    out->inbound = (MPI_Aint)far.inbound;
    return true;
}

/* ---- failure and closing ------------------------------------------------- */

void rig_job_fail(rig_job *job, const char *why)
{
    if (!job_check(job, "rig_job_fail", NULL)) {
        return;
    }
    char *msg = NULL;
    rig_err(&msg, "failed: rig_job_fail on rank %d: %s", job->rank,
            why != NULL ? why : "(no reason given)");
    rig_transport_fail(job->t, msg != NULL ? msg : "failed: rig_job_fail");
    free(msg);
}

bool rig_job_failed(const rig_job *job)
{
    return job_check(job, "rig_job_failed", NULL) &&
           rig_transport_failed(job->t, NULL) != NULL;
}

/* The reason t's job failed, malloc'd, or NULL; a stand-in (the reason
 * on its way) is waited for a while, unless the job is closed (then
 * nothing more comes). */
static char *failure_of(rig_transport *t, bool closed)
{
    const char *why = rig_failure_settled(t, closed ? 0 : RIG_REASON_WAIT_NS);
    return why != NULL ? strdup(why) : NULL;
}

char *rig_job_failure(const rig_job *job)
{
    if (!job_check(job, "rig_job_failure", NULL)) {
        return NULL;
    }
    return failure_of(job->t, false);
}

char *rig_end_failure(const rig_end *e)
{
    if (e == NULL) {
        return NULL;
    }
    /* An end held keeps its transport, and so its job's record, alive:
     * the record found stays valid after the lock is let go. */
    rig_lock(&jobs_lock, JOBS_LOCK_LEVEL);
    rig_job *job = jobs;
    while (job != NULL && !rig_transport_owns(job->t, e)) {
        job = job->next_job;
    }
    bool closed = job != NULL && job->closed;
    rig_unlock(&jobs_lock, JOBS_LOCK_LEVEL);
    return job != NULL ? failure_of(job->t, closed) : NULL;
}

/* Whether a rank of the job died (as opposed to leaving by finishing its
 * close): once the closing barrier completed, only a death stops the
 * collective frees. */
static bool close_died(rig_job *job)
{
    bool died = false;
    rig_transport_gone(job->t, &died);
    return died;
}

/* MPI_Ibarrier on the job's communicator that gives up (false) once the
 * transport names a rank that left the job, so closing never waits for a
 * dead rank.  A rank that left before this rank's close began is gone
 * for sure; one that leaves during the barrier may instead have finished
 * its own close, so it is given up on only after CLOSE_GRACE_NS.  False
 * also when MPI fails. */
static bool close_barrier(rig_job *job)
{
    if (rig_transport_gone(job->t, NULL) >= 0) {
        return false;
    }
    MPI_Request req;
    if (MPI_Ibarrier(job->comm, &req) != MPI_SUCCESS) {
        return false;
    }
    rig_backoff b = {0};
    uint64_t since = 0;
    for (;;) {
        int flag = 0;
        if (MPI_Test(&req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            return false;
        }
        if (flag) {
            /* A rank that gave its part before it died completes the
             * barrier too, and would never join the window's free.  One
             * that left by finishing its own close (its endpoints or
             * links dropped before this rank saw the barrier complete)
             * did close: it frees the same windows at MPI_Finalize, so
             * it must not make this rank abandon them (both would then
             * wait in different windows' frees). */
            return !close_died(job);
        }
        bool died = false;
        int left = rig_transport_gone(job->t, &died);
        if (left >= 0) {
            uint64_t now = rig_now_ns();
            if (since == 0) {
                since = now;
            } else if (now - since >
                       (died ? CLOSE_GRACE_NS : CLOSE_CLOSED_GRACE_NS)) {
                rig_log(RIG_LOG_WARN,
                        "rank %d: closing the job without rank %d, which "
                        "left it",
                        job->rank, left);
                return false; /* the request is abandoned with the comm */
            }
        }
        rig_backoff_step(&b);
    }
}

bool rig_job_close(rig_job *job)
{
    if (job == NULL) {
        return false;
    }
    if (!job_check(job, "rig_job_close", NULL)) {
        return false;
    }
    rig_lock(&jobs_lock, JOBS_LOCK_LEVEL);
    job->closed = true;
    rig_unlock(&jobs_lock, JOBS_LOCK_LEVEL);
    finalize_unwatch(job);
    rig_transport_stop(job->t);
    /* Every rank stopped carrying before any memory, endpoint or window
     * goes.  A rank that left the job (died, or finalized MPI) never
     * arrives: then the window and communicator are abandoned (freeing
     * them is collective) and only local resources go. */
    bool all = close_barrier(job);
    /* No collective after the barrier: the window's free waits for
     * MPI_Finalize (a rank that died after giving its part to the barrier
     * would block it; MPI_Finalize waits for every rank anyway). */
    rig_window_end(job->window, all);
    all = !close_died(job) && all;
    /* Its last look: a rank that died, even during the close, makes
     * MPI_Finalize wait for good; one that left by finalizing MPI is
     * there for MPI_Finalize. */
    bool died = rig_transport_close(job->t, all);
    rig_window_close(job->window, all);
    job->window = NULL;
    if (all) {
        MPI_Comm_free(&job->comm); /* local: MPI's reference goes */
        MPI_Comm_free(&job->rails_comm);
    }
    job_unref(job); /* the record goes with the transport, if not yet */
    return !died;
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
    const rig_transport_ops *sel = NULL;
    rig_transport_params p;
    char *why = NULL;
    if (!options_resolve(NULL, &sel, &p, &why)) {
        fprintf(out, "  settings error:  %s\n", why != NULL ? why : "nomem");
        free(why);
        sel = NULL;
    } else {
        fprintf(out, "  selected:        %s (%s)\n", sel->name, sel->about);
    }
    rig_window_describe(out);
    for (size_t i = 0; rig_transport_at(i) != NULL; i++) {
        const rig_transport_ops *ops = rig_transport_at(i);
        fprintf(out, "  [%s%s]\n", ops->name,
                ops == sel ? "" : ", not selected");
        if (!rig_transport_describe(ops, out, err)) {
            return false;
        }
    }
    return true;
}
