/* SPDX-License-Identifier: BSD-3-Clause */
/* rig_job_rails: every rail a rank names, made together across the job.
 *
 * The steps, at every rank:
 *   1. check this rank's requests alone (peers, lists), as rig_job_rail
 *      would before and at its offer;
 *   2. A: a non-blocking all-to-all on the job's rails communicator: each
 *      rank tells each other rank how many of its requests name it, and
 *      whether its own requests were refused; each rank compares what it
 *      got with its own counts;
 *   3. B: a non-blocking all-reduce (MIN) of the first rank that refused
 *      (its requests, or counts that do not match): the same verdict at
 *      every rank, so that either all make their rails or none does;
 *   4. the walk: rig_job_rail for every request, in the order of the key
 *      (lo, hi, k) -- the pair's lower rank, its higher rank, and the
 *      request's place among this rank's requests naming the same peer;
 *      a rail that fails (both ranks of the pair get its error) does not
 *      end the walk, whose later meetings the peers wait for, unless the
 *      job failed (then every later rail fails at once anyway);
 *   5. C: a non-blocking all-reduce (MIN) of the first rank whose walk
 *      failed; if any did, every rank releases the rails it made.
 *
 * Why the walk cannot deadlock.  A rail is a meeting of two ranks that
 * completes once both are at it (the pair protocol, handshake.h, needs
 * the two ranks only: its messages, and with RIG_TRANSPORT=mpi a
 * communicator and window over the pair) and ends with an outcome at
 * both, success or an error.  The k-th request of rank a naming b and
 * the k-th of b naming a carry the same key (lo, hi, k), and step 2 made
 * sure every pair lists its rails as many times at both ranks, so each
 * key is one meeting, listed at both its ranks.  Each rank attends its
 * meetings in increasing key.  Suppose ranks were stuck in the walk, and
 * let K be the least key any stuck rank is at, rank x at it with peer y.
 * Meeting K is not over, so y has not passed it: y is at a meeting of key
 * <= K; y cannot be at a lesser key (it would be a stuck rank below K),
 * and cannot have finished the walk (K is in its list): y is at K too,
 * and meeting K completes -- a contradiction.  Ranks in step 5 wait only
 * for ranks still walking, which finish.  (The order costs some
 * parallelism: on a ring of P ranks the walk is a chain of about P
 * meetings; pairs far apart in the order meet at once.)
 *
 * Matching rig_job_rail's sequence: the walk makes a pair's rails in
 * increasing k at both ranks, through rig_job_rail, which numbers them
 * in call order; so the k-th of both sides meet, with the same id.
 *
 * A way out when the job fails.  Every wait here polls the job's failure
 * (a death is seen by the transport's watchers: a pidfd on this node,
 * UCX keepalive across nodes) and gives up at once with "failed:"; the
 * walk's rails do the same inside the pair protocol, whose one blocking
 * step, the pair's collectives of RIG_TRANSPORT=mpi (its window), both
 * ranks of the pair enter only once both agreed to (src/rail/mpi/end.c):
 * a rank that gives up on the walk never leaves its partner there; only
 * a peer that dies inside that step does (rig/job.h).  A collective given
 * up on cannot be cancelled (MPI_Cancel and MPI_Request_free are
 * erroneous on a non-blocking collective), so MPI may write its buffers
 * until MPI_Finalize: they are kept for the life of the process, on a
 * list of their own (a few bytes per rank and job; once per job, since a
 * failed job posts no more of them) -- the one process-wide state here,
 * and the reason for it is MPI's.  The collectives run on a communicator
 * of their own (job.c dups it at open), so that such an abandoned one
 * never meets the closing barrier's Ibarrier, and a rank that skips this
 * call after the job failed cannot leave another's close waiting.  While the
 * job has not failed, every rank posts the same three collectives in every
 * call, so they match call by call; a rank known to have left gets none
 * posted towards it (as the closing barrier does). */
#include "config.h"

#include "rig/job.h"

#include "job_internal.h"

#include "../rail/base/failure.h"
#include "../util/util_internal.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* B's and C's word of a rank that is fine: MIN picks any refusal. */
#define ALL_WELL INT64_MAX

/* A rank's word in B and C: its rank, and what it refused (the request's
 * index + 1, or 0 for the requests as a whole), lower ranks first. */
static int64_t refusal(int rank, size_t request_plus_1)
{
    uint64_t r = request_plus_1 > UINT32_MAX ? 0 : request_plus_1;
    return ((int64_t)rank << 32) | (int64_t)r;
}

/* What the collectives read and write: kept allocated when a wait is
 * given up on (see above). */
typedef struct agreement agreement;
struct agreement {
    agreement *next; /* on the graveyard, once given up on */
    int32_t *tell;   /* to rank r: [2r] requests naming r, [2r + 1] refused */
    int32_t *told;   /* from rank r: the same of r's */
    int64_t b_in, b_out, c_in, c_out;
    MPI_Request req;
};

/* The rounds given up on, kept reachable until the process ends (see
 * above).  Only pushed to, never read: relaxed order suffices, as no
 * thread reaches anything through it. */
static _Atomic(agreement *) graveyard;

static void agreement_bury(agreement *rd)
{
    rd->next = atomic_load_explicit(&graveyard, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&graveyard, &rd->next, rd,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

/* The job's failure, in the words every call of the job uses. */
static bool job_failed(rig_transport *t, char **err)
{
    const char *why = rig_failure_settled(t, RIG_REASON_WAIT_NS);
    return rig_err(err, "%s", why != NULL ? why : "failed: the job failed");
}

/* The agreement cannot complete (call failed with rc): fails the job, whose
 * collectives can no longer match, so that no rank waits for this one's
 * part (job_why: the job's reason); "system:" with MPI's words. */
static bool agreement_broken(rig_transport *t, int rc, const char *call,
                             const char *job_why, char **err)
{
    rig_transport_fail(t, job_why);
    return rig_err_mpi(err, rc, call);
}

/* Waits for the collective just posted into rd->req, polling the job's
 * failure with backoff; posted is what its call (named call) returned.
 * False with "failed: <why>" once the job failed (*abandoned: MPI may
 * still use rd), "system:" when the call or MPI_Test failed (and the job
 * is failed, so that no rank waits for this one's part). */
static bool agreement_wait(rig_transport *t, agreement *rd, int posted,
                           const char *call, bool *abandoned, char **err)
{
    if (posted != MPI_SUCCESS) {
        char why[96];
        snprintf(why, sizeof(why), "failed: %s failed in rig_job_rails", call);
        return agreement_broken(t, posted, call, why, err);
    }
    rig_backoff b = {0};
    for (;;) {
        int flag = 0;
        int rc = MPI_Test(&rd->req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            *abandoned = true;
            return agreement_broken(t, rc, "MPI_Test",
                                    "failed: MPI_Test failed in a rank's "
                                    "rig_job_rails",
                                    err);
        }
        if (flag) {
            return true;
        }
        if (rig_transport_failed(t, NULL) != NULL) {
            *abandoned = true;
            return job_failed(t, err);
        }
        rig_backoff_step(&b);
    }
}

/* Whether a collective may be posted: not towards a rank known to have
 * left (it would never complete; rig_job_close skips its barrier then
 * too).  The job has failed by then: false with its reason. */
static bool may_post(rig_transport *t, char **err)
{
    if (rig_transport_gone(t, NULL) >= 0) {
        return job_failed(t, err);
    }
    return true;
}

/* ---- step 1: this rank's requests alone ---------------------------------- */

/* The first of reqs[0..n) that rig_job_rail would refuse on its lists or
 * its peer: false with "invalid: request I (peer P): ..." and *bad = I. */
static bool requests_check(const rig_job_parts *jp,
                           const rig_job_rail_request *reqs, size_t n,
                           size_t *bad, char **err)
{
    for (size_t i = 0; i < n; i++) {
        const rig_job_rail_request *q = &reqs[i];
        *bad = i;
        if (q->peer < 0 || q->peer >= jp->size) {
            return rig_err(err,
                           "invalid: request %zu: peer %d is out of range "
                           "[0, %d)",
                           i, q->peer, jp->size);
        }
        if (q->peer == jp->rank) {
            return rig_err(err, "invalid: request %zu: peer %d is this rank", i,
                           q->peer);
        }
        if (!rig_check_transfers(q->send, q->nsend, q->receive, q->nreceive,
                                 err)) {
            rig_err_wrap(err, "request %zu (peer %d)", i, q->peer);
            return false;
        }
    }
    return true;
}

/* ---- step 2: the counts of every pair ------------------------------------ */

/* Compares what every rank told this one (rd->told) with this rank's own
 * counts (rd->tell): false with "invalid: rank R names this rank in ..."
 * for the first pair that differs.  A rank that refused its requests
 * told nothing worth comparing: it is skipped (B fails the call anyway). */
static bool counts_match(const rig_job_parts *jp, const agreement *rd,
                         const rig_job_rail_request *reqs, size_t n, char **err)
{
    for (int r = 0; r < jp->size; r++) {
        int32_t mine = rd->tell[2 * r], theirs = rd->told[2 * r];
        if (r == jp->rank || rd->told[2 * r + 1] != 0 || mine == theirs) {
            continue;
        }
        size_t first = 0;
        while (first < n && reqs[first].peer != r) {
            first++;
        }
        if (mine == 0) {
            return rig_err(err,
                           "invalid: rank %d names this rank in %d "
                           "request%s, this rank names it in none",
                           r, theirs, theirs == 1 ? "" : "s");
        }
        return rig_err(err,
                       "invalid: rank %d names this rank in %d request%s, "
                       "this rank names it in %d (request %zu is one)",
                       r, theirs, theirs == 1 ? "" : "s", mine, first);
    }
    return true;
}

/* ---- step 4: the walk ---------------------------------------------------- */

typedef struct {
    int lo, hi;
    uint32_t k;
    size_t i; /* the request */
} meeting;

static int meeting_cmp(const void *a, const void *b)
{
    const meeting *x = a, *y = b;
    if (x->lo != y->lo) {
        return x->lo < y->lo ? -1 : 1;
    }
    if (x->hi != y->hi) {
        return x->hi < y->hi ? -1 : 1;
    }
    return x->k < y->k ? -1 : x->k > y->k;
}

/* The requests in the walk's order (see above), malloc'd; NULL when out
 * of memory.  seen[0..size) is scratch. */
static meeting *walk_order(const rig_job_parts *jp,
                           const rig_job_rail_request *reqs, size_t n,
                           uint32_t *seen)
{
    meeting *m = malloc((n > 0 ? n : 1) * sizeof(*m));
    if (m == NULL) {
        return NULL;
    }
    memset(seen, 0, (size_t)jp->size * sizeof(*seen));
    for (size_t i = 0; i < n; i++) {
        int p = reqs[i].peer;
        m[i] = (meeting){
            .lo = p < jp->rank ? p : jp->rank,
            .hi = p < jp->rank ? jp->rank : p,
            .k = seen[p]++,
            .i = i,
        };
    }
    qsort(m, n, sizeof(*m), meeting_cmp);
    return m;
}

/* Makes the rails in the walk's order into made[]; false with the first
 * failure ("<reason>: request I (peer P): <rig_job_rail's words>") and
 * *bad = I.  Goes on past a failed rail: its peers wait for their
 * meetings with this rank. */
static bool walk(rig_job *job, const meeting *m,
                 const rig_job_rail_request *reqs, size_t n, rig_rail **made,
                 rig_transport *t, size_t *bad, char **err)
{
    bool ok = true;
    for (size_t j = 0; j < n; j++) {
        const rig_job_rail_request *q = &reqs[m[j].i];
        char *why = NULL;
        if (rig_job_rail(job, q->peer, q->send, q->nsend, q->receive,
                         q->nreceive, &made[m[j].i], &why)) {
            continue;
        }
        if (ok) {
            ok = false;
            *bad = m[j].i;
            rig_err_wrap(&why, "request %zu (peer %d)", m[j].i, q->peer);
            if (err != NULL) {
                *err = why;
                why = NULL;
            }
        }
        free(why);
        if (rig_transport_failed(t, NULL) != NULL) {
            break; /* every later rail would fail at once */
        }
    }
    return ok;
}

/* ---- the call ------------------------------------------------------------ */

/* Another rank's refusal, as this rank reports it. */
static bool refused_by(int64_t word, bool walked, char **err)
{
    int rank = (int)(word >> 32);
    uint32_t req = (uint32_t)(word & 0xffffffff);
    if (walked) {
        return rig_err(err,
                       "failed: rank %d could not make the rail of its "
                       "request %u (its error says why)",
                       rank, req - 1);
    }
    if (req == 0) {
        return rig_err(err,
                       "failed: rank %d refused its requests (its error "
                       "says why)",
                       rank);
    }
    return rig_err(err,
                   "failed: rank %d refused its request %u (its error says "
                   "why)",
                   rank, req - 1);
}

bool rig_job_rails(rig_job *job, const rig_job_rail_request *reqs, size_t n,
                   rig_rail **out, char **err)
{
    rig_job_parts jp;
    if (!rig_job_parts_of(job, "rig_job_rails", &jp, err)) {
        return false; /* no communicator to tell the others on */
    }
    /* A failed job makes no rail and posts no collective. */
    if (rig_transport_failed(jp.t, NULL) != NULL) {
        return job_failed(jp.t, err);
    }
    size_t sz = (size_t)jp.size;
    agreement *rd = calloc(1, sizeof(*rd));
    int32_t *words = calloc(4 * sz, sizeof(*words));
    uint32_t *seen = calloc(sz, sizeof(*seen));
    if (rd == NULL || words == NULL || seen == NULL) {
        free(rd);
        free(words);
        free(seen);
        /* The others wait for this rank in A: fail the job, which ends
         * their waits, rather than leave them there. */
        char why[160];
        snprintf(why, sizeof(why),
                 "failed: rank %d had no memory for rig_job_rails (%d ranks)",
                 jp.rank, jp.size);
        rig_transport_fail(jp.t, why);
        return rig_err(err, "nomem: rig_job_rails for %d ranks", jp.size);
    }
    rd->tell = words;
    rd->told = words + 2 * sz;
    bool abandoned = false;
    rig_rail **made = NULL;
    meeting *m = NULL;
    char *mine = NULL; /* this rank's own error */
    size_t bad = 0;
    bool ok = true;
    int64_t word = ALL_WELL;

    /* 1. This rank's requests alone. */
    if (n > 0 && (out == NULL || reqs == NULL)) {
        ok = rig_err(&mine, "invalid: %s is NULL with n > 0",
                     out == NULL ? "out" : "reqs");
        word = refusal(jp.rank, 0);
    } else if (n > INT32_MAX) {
        ok = rig_err(&mine, "invalid: n is %zu (at most %d)", n, INT32_MAX);
        word = refusal(jp.rank, 0);
    } else if (!requests_check(&jp, reqs, n, &bad, &mine)) {
        ok = false;
        word = refusal(jp.rank, bad + 1);
    }
    if (ok) {
        for (size_t i = 0; i < n; i++) {
            rd->tell[2 * reqs[i].peer]++;
        }
    } else {
        for (size_t r = 0; r < sz; r++) {
            rd->tell[2 * r] = 0;
            rd->tell[2 * r + 1] = 1;
        }
    }

    /* 2. A: the counts of every pair. */
    int rc;
    if (!may_post(jp.t, ok ? &mine : NULL)) {
        ok = false;
        goto out;
    }
    rc = MPI_Ialltoall(rd->tell, 2, MPI_INT32_T, rd->told, 2, MPI_INT32_T,
                       jp.rails_comm, &rd->req);
    if (!agreement_wait(jp.t, rd, rc, "MPI_Ialltoall", &abandoned,
                        ok ? &mine : NULL)) {
        ok = false;
        goto out;
    }
    if (ok && !counts_match(&jp, rd, reqs, n, &mine)) {
        ok = false;
        word = refusal(jp.rank, 0);
    }

    /* 3. B: the same verdict everywhere. */
    rd->b_in = word;
    if (!may_post(jp.t, ok ? &mine : NULL)) {
        ok = false;
        goto out;
    }
    rc = MPI_Iallreduce(&rd->b_in, &rd->b_out, 1, MPI_INT64_T, MPI_MIN,
                        jp.rails_comm, &rd->req);
    if (!agreement_wait(jp.t, rd, rc, "MPI_Iallreduce", &abandoned,
                        ok ? &mine : NULL)) {
        ok = false;
        goto out;
    }
    if (rd->b_out != ALL_WELL) {
        if (ok) {
            refused_by(rd->b_out, false, &mine);
        }
        ok = false;
        goto out; /* every rank is here alike: no C */
    }

    /* 4. The walk. */
    made = calloc(n > 0 ? n : 1, sizeof(*made));
    m = walk_order(&jp, reqs, n, seen);
    word = ALL_WELL;
    if (made == NULL || m == NULL) {
        ok = rig_err(&mine, "nomem: rig_job_rails' %zu rails", n);
        word = refusal(jp.rank, 0);
        /* The peers wait for this rank's meetings: fail the job. */
        rig_transport_fail(jp.t, "failed: a rank had no memory for "
                                 "rig_job_rails");
    } else if (!walk(job, m, reqs, n, made, jp.t, &bad, &mine)) {
        ok = false;
        word = refusal(jp.rank, bad + 1);
    }

    /* 5. C: did every rank make its rails? */
    rd->c_in = word;
    if (may_post(jp.t, ok ? &mine : NULL)) {
        rc = MPI_Iallreduce(&rd->c_in, &rd->c_out, 1, MPI_INT64_T, MPI_MIN,
                            jp.rails_comm, &rd->req);
        if (!agreement_wait(jp.t, rd, rc, "MPI_Iallreduce", &abandoned,
                            ok ? &mine : NULL)) {
            ok = false;
        } else if (rd->c_out != ALL_WELL && ok) {
            ok = false;
            refused_by(rd->c_out, true, &mine);
        }
    } else {
        ok = false;
    }
    if (ok && n > 0) { /* out may be NULL for n = 0 */
        memcpy(out, made, n * sizeof(*made));
    } else if (made != NULL) {
        for (size_t i = 0; i < n; i++) {
            rig_rail_release(made[i]); /* NULL: none */
        }
    }

out:
    free(made);
    free(m);
    free(seen);
    if (abandoned) {
        agreement_bury(rd);
    } else {
        free(rd->tell);
        free(rd);
    }
    if (ok) {
        return true;
    }
    if (err != NULL) {
        *err = mine;
    } else {
        free(mine);
    }
    return false;
}
