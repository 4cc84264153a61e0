/* SPDX-License-Identifier: BSD-3-Clause */
/* Opening and closing the remote layer: settings, the layer's own
 * communicator, the machine table gathered on rank 0 and broadcast.
 *
 * Every collective step is non-blocking (MPI_Comm_idup, MPI_Igather[v],
 * MPI_Ibcast) and waited for with rm_wait_all, so that a rank that dies
 * while the others open makes them fail within 2 s instead of blocking,
 * and at the pace of ranks that meet (RM_PACE_MEET): one that waits for a
 * late rank sleeps instead of taking a core.
 * Every rank takes part in every step even after a local error (a bad
 * setting, an executor's nomem), carrying its error in its description,
 * so that all ranks fail alike: rank 0 puts the first error in the table
 * in place of the descriptions. */
#include "remote_internal.h"

#include "../util/util_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RM_CHUNK_DEFAULT (1ull << 30)
#define RM_CHUNK_MIN 4096ull
/* What an agent keeps of unloaded images' staging memory (agent.c). */
#define RM_KEEP_DEFAULT (256ull << 20)
/* RIG_REMOTE_STUCK_MS (wait.c, "MPI that does not return"). */
#define RM_STUCK_MS_DEFAULT 10000ull
#define RM_STUCK_MS_MAX 86400000ull

void rig_remote_options_init(rig_remote_options *opt)
{
    if (opt != NULL) {
        memset(opt, 0, sizeof(*opt));
    }
}

/* ---- settings ------------------------------------------------------------ */

/* RIG_REMOTE_EXECUTORS: "native,wasm" -> a mask. */
static bool executors_env(uint32_t *mask, bool *set, char **err)
{
    const char *s = rig_env_str("RIG_REMOTE_EXECUTORS", NULL);
    *set = s != NULL;
    if (s == NULL) {
        return true;
    }
    uint32_t m = 0;
    const char *p = s;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        char word[16];
        uint32_t kind = 0;
        if (n == 0 || n >= sizeof(word)) {
            return rig_err(err,
                           "invalid: RIG_REMOTE_EXECUTORS=%s: an empty "
                           "or unknown executor",
                           s);
        }
        memcpy(word, p, n);
        word[n] = '\0';
        if (!mesh_backend_kind(word, &kind)) {
            return rig_err(err,
                           "invalid: RIG_REMOTE_EXECUTORS=%s: unknown "
                           "executor \"%s\" (native, wasm, cuda)",
                           s, word);
        }
        m |= 1u << kind;
        p += n;
        if (*p == ',') {
            p++;
        }
    }
    *mask = m;
    return true;
}

/* RIG_REMOTE_TEST_CORRUPT: whether rank is in the comma list. */
static bool corrupt_env(int rank, bool *out, char **err)
{
    *out = false;
    const char *s = rig_env_str("RIG_REMOTE_TEST_CORRUPT", NULL);
    if (s == NULL || s[0] == '\0') {
        return true;
    }
    const char *p = s;
    while (*p != '\0') {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0') || v < 0) {
            return rig_err(err,
                           "invalid: RIG_REMOTE_TEST_CORRUPT=%s: not a comma "
                           "list of ranks",
                           s);
        }
        if (v == rank) {
            *out = true;
        }
        p = *end == ',' ? end + 1 : end;
    }
    return true;
}

static bool settings(rig_remote *rm, const rig_remote_options *opt,
                     uint32_t *executors, const char **by, char **err)
{
    uint32_t all = (1u << MESH_BACKEND_COUNT) - 1;
    if (opt != NULL && (opt->executors & ~all) != 0) {
        return rig_err(err,
                       "invalid: opt->executors 0x%x has bits past the "
                       "executor kinds (0x%x)",
                       opt->executors, all);
    }
    *executors = opt != NULL && opt->executors != 0 ? opt->executors : all;
    *by = "the options";
    uint32_t env = 0;
    bool set = false;
    if (!executors_env(&env, &set, err)) {
        return false;
    }
    if (set) {
        *executors = env;
        *by = "RIG_REMOTE_EXECUTORS";
    }
    if (!rig_env_u64("RIG_REMOTE_CHUNK_BYTES", RM_CHUNK_DEFAULT, &rm->chunk,
                     err)) {
        return false;
    }
    if (rm->chunk < RM_CHUNK_MIN || rm->chunk > (uint64_t)INT_MAX) {
        return rig_err(err,
                       "invalid: RIG_REMOTE_CHUNK_BYTES=%llu is not within "
                       "%llu..%d",
                       (unsigned long long)rm->chunk, RM_CHUNK_MIN, INT_MAX);
    }
    if (!rig_env_u64("RIG_REMOTE_KEEP_BYTES", RM_KEEP_DEFAULT, &rm->keep,
                     err)) {
        return false;
    }
    uint64_t stuck_ms = 0;
    if (!rig_env_u64("RIG_REMOTE_STUCK_MS", RM_STUCK_MS_DEFAULT, &stuck_ms,
                     err)) {
        return false;
    }
    if (stuck_ms > RM_STUCK_MS_MAX) {
        return rig_err(err,
                       "invalid: RIG_REMOTE_STUCK_MS=%llu is more than %llu",
                       (unsigned long long)stuck_ms, RM_STUCK_MS_MAX);
    }
    rm->stuck_ns = stuck_ms * 1000000u;
    return corrupt_env(rm->rank, &rm->corrupt, err);
}

/* ---- the table ----------------------------------------------------------- */

/* This rank's contribution: u32 0 and its description, or u32 1 and its
 * error. */
static void contribution(rig_remote *rm, bool ok, uint32_t executors,
                         const char *by, rm_buf *out, char **mine)
{
    rm_buf d = {0};
    if (ok && !rm_describe(rm, executors, by, &d, mine)) {
        ok = false;
    }
    rm_buf_u32(out, ok ? 0 : 1);
    if (ok) {
        rm_buf_put(out, d.p, d.len);
    } else {
        rm_buf_str(out, *mine != NULL ? *mine : "nomem: (no reason)");
    }
    rm_buf_free(&d);
}

/* Rank 0: the table from every contribution (or the first error). */
static bool make_table(rig_remote *rm, const uint8_t *all, const int *lens,
                       const int *displs, rm_buf *table)
{
    for (int r = 0; r < rm->size; r++) {
        rm_rd rd = {.p = all + displs[r], .len = (size_t)lens[r]};
        if (rm_rd_u32(&rd) != 0) {
            char *why = rm_rd_str(&rd, 4096);
            rm_buf_u32(table, 1);
            char *msg = NULL;
            rig_err(&msg, "failed: rank %d could not open: %s", r,
                    why != NULL ? why : "(unreadable)");
            rm_buf_str(table, msg != NULL ? msg : "nomem");
            free(msg);
            free(why);
            return !table->oom;
        }
    }
    rm_buf_u32(table, 0);
    for (int r = 0; r < rm->size; r++) {
        rm_buf_put(table, all + displs[r] + 4, (size_t)lens[r] - 4);
    }
    return !table->oom;
}

/* Gathers the contributions on rank 0 and broadcasts the table.  *table
 * is malloc'd. */
static bool exchange(rig_remote *rm, const rm_buf *mine, uint8_t **table,
                     uint64_t *table_len, char **err)
{
    int n = rm->size;
    int len = (int)mine->len;
    int *lens = rm->rank == 0 ? calloc((size_t)n, sizeof(int)) : NULL;
    int *displs = rm->rank == 0 ? calloc((size_t)n, sizeof(int)) : NULL;
    uint8_t *all = NULL;
    rm_buf t = {0};
    bool ok = false;
    if (rm->rank == 0 && (lens == NULL || displs == NULL)) {
        rig_err(err, "nomem: the table of %d ranks", n);
        goto out;
    }
    MPI_Request req;
    int rc = RM_MPI(
        rm, "MPI_Igather",
        MPI_Igather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, rm->comm, &req));
    if (rc != MPI_SUCCESS) {
        rm_mpi_err(err, rc, "MPI_Igather");
        goto out;
    }
    void *keep[] = {lens};
    if (!rm_wait_all(rm, &req, 1, RM_PACE_MEET, keep, 1,
                     "opening the remote "
                     "layer",
                     err)) {
        lens = NULL; /* abandoned */
        goto out;
    }
    size_t total = 0;
    if (rm->rank == 0) {
        for (int r = 0; r < n; r++) {
            displs[r] = (int)total;
            total += (size_t)lens[r];
        }
        if (total > (size_t)INT_MAX || (all = malloc(total)) == NULL) {
            /* The others wait for this rank's part: the job fails, so
             * that they see it instead. */
            rig_err(err, "nomem: %zu bytes of machine descriptions", total);
            rig_job_fail(rm->job, "rank 0 could not open the remote layer");
            goto out;
        }
    }
    rc = RM_MPI(rm, "MPI_Igatherv",
                MPI_Igatherv(mine->p, len, MPI_BYTE, all, lens, displs,
                             MPI_BYTE, 0, rm->comm, &req));
    if (rc != MPI_SUCCESS) {
        rm_mpi_err(err, rc, "MPI_Igatherv");
        goto out;
    }
    void *keep2[] = {all, lens, displs};
    if (!rm_wait_all(rm, &req, 1, RM_PACE_MEET, keep2, 3,
                     "opening the remote layer", err)) {
        all = NULL;
        lens = displs = NULL;
        goto out;
    }
    uint64_t tlen = 0;
    if (rm->rank == 0) {
        if (all == NULL || !make_table(rm, all, lens, displs, &t)) {
            rm_buf_free(&t);
            rm_buf_u32(&t, 1);
            rm_buf_str(&t, "failed: rank 0 could not open: nomem: the machine "
                           "table");
        }
        tlen = t.oom ? 0 : t.len;
    }
    rc = RM_MPI(rm, "MPI_Ibcast",
                MPI_Ibcast(&tlen, 1, MPI_UINT64_T, 0, rm->comm, &req));
    if (rc != MPI_SUCCESS) {
        rm_mpi_err(err, rc, "MPI_Ibcast");
        goto out;
    }
    if (!rm_wait_all(rm, &req, 1, RM_PACE_MEET, NULL, 0,
                     "opening the remote layer", err)) {
        goto out;
    }
    if (tlen == 0 || tlen > (uint64_t)INT_MAX) {
        rig_err(err, "failed: rank 0 could not make the machine table");
        goto out;
    }
    if (rm->rank != 0) {
        t.p = malloc(tlen);
        t.len = t.cap = t.p != NULL ? tlen : 0;
    }
    if (t.p == NULL) {
        /* The broadcast cannot complete without this rank: the job
         * fails, so that the others see it instead of waiting. */
        rig_err(err, "nomem: the machine table (%llu bytes)",
                (unsigned long long)tlen);
        rig_job_fail(rm->job, "a rank could not open the remote layer");
        goto out;
    }
    rc = RM_MPI(rm, "MPI_Ibcast",
                MPI_Ibcast(t.p, (int)tlen, MPI_BYTE, 0, rm->comm, &req));
    if (rc != MPI_SUCCESS) {
        rm_mpi_err(err, rc, "MPI_Ibcast");
        goto out;
    }
    void *keep3[] = {t.p};
    if (!rm_wait_all(rm, &req, 1, RM_PACE_MEET, keep3, 1,
                     "opening the remote layer", err)) {
        memset(&t, 0, sizeof(t));
        goto out;
    }
    *table = t.p;
    *table_len = tlen;
    memset(&t, 0, sizeof(t));
    ok = true;
out:
    rm_buf_free(&t);
    free(all);
    free(displs);
    free(lens);
    return ok;
}

/* ---- open and close ------------------------------------------------------ */

static void remote_free(rig_remote *rm)
{
    rm_stuck_stop(rm);
    rm_rails_free(rm);
    rm_records_free(rm);
    rm_table_free(rm);
    rm_programs_free(rm);
    for (size_t i = 0; i < rm->nevents; i++) {
        free(rm->events[i]);
    }
    free(rm->events);
    free(rm->pending);
    free(rm->pending_buf);
    pthread_mutex_destroy(&rm->table_lock);
    pthread_mutex_destroy(&rm->lock);
    free(rm);
}

bool rig_remote_open(rig_job *job, MPI_Comm comm, const rig_remote_options *opt,
                     rig_remote **out, char **err)
{
    /* A bad argument of this rank alone must not leave the others in a
     * collective: whatever this rank can take part in with (a usable
     * comm), it does, and its error is its contribution to the first
     * gather, so that every rank fails together.  Only a rank without
     * comm's collectives (MPI_COMM_NULL, another communicator) cannot
     * tell the others: it answers at once. */
    if (comm == MPI_COMM_NULL) {
        return rig_err(err, "invalid: comm is MPI_COMM_NULL");
    }
    int rank = -1, size = -1;
    if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
        MPI_Comm_size(comm, &size) != MPI_SUCCESS) {
        return rig_err(err, "invalid: comm is not a usable communicator");
    }
    if (job != NULL && size != rig_job_size(job)) {
        /* The same on every rank: no one contacts anyone. */
        return rig_err(err,
                       "invalid: comm has %d ranks but the job %d: comm "
                       "must be the job's communicator",
                       size, rig_job_size(job));
    }
    rig_remote *rm = calloc(1, sizeof(*rm));
    if (rm == NULL) {
        return rig_err(err, "nomem: the remote layer");
    }
    pthread_mutex_init(&rm->lock, NULL);
    pthread_mutex_init(&rm->table_lock, NULL);
    rm->job = job;
    rm->rank = rank;
    rm->size = size;
    rm->comm = MPI_COMM_NULL;

    char *mine = NULL;
    uint32_t executors = 0;
    const char *by = NULL;
    bool ok = true;
    if (job == NULL || out == NULL) {
        ok = rig_err(&mine, "invalid: %s is NULL", job == NULL ? "job" : "out");
    } else if (rank != rig_job_rank(job)) {
        ok = rig_err(&mine,
                     "invalid: rank %d of comm is rank %d of the job: comm "
                     "must be the job's communicator",
                     rank, rig_job_rank(job));
    } else {
        ok = settings(rm, opt, &executors, &by, &mine);
    }
    rm_stuck_start(rm);
    if (job != NULL && rig_job_failed(job)) {
        free(mine);
        rm_failed(rm, err, "opening the remote layer");
        remote_free(rm);
        return false;
    }
    MPI_Request req;
    int rc = RM_MPI(rm, "MPI_Comm_idup", MPI_Comm_idup(comm, &rm->comm, &req));
    if (rc != MPI_SUCCESS) {
        free(mine);
        rm_mpi_err(err, rc, "MPI_Comm_idup");
        remote_free(rm);
        return false;
    }
    if (!rm_wait_all(rm, &req, 1, RM_PACE_MEET, NULL, 0,
                     "opening the remote layer", err)) {
        free(mine);
        rm->comm = MPI_COMM_NULL; /* abandoned with the job */
        remote_free(rm);
        return false;
    }
    MPI_Comm_set_errhandler(rm->comm, MPI_ERRORS_RETURN);

    rm_buf c = {0};
    contribution(rm, ok, executors, by, &c, &mine);
    uint8_t *table = NULL;
    uint64_t tlen = 0;
    char *why = NULL;
    ok = !c.oom && exchange(rm, &c, &table, &tlen, &why);
    rm_buf_free(&c);
    if (ok) {
        rm_rd rd = {.p = table, .len = (size_t)tlen};
        if (rm_rd_u32(&rd) != 0) {
            why = rm_rd_str(&rd, 8192);
            ok = false;
            if (why == NULL) {
                rig_err(&why, "failed: a rank could not open the remote "
                              "layer");
            }
        } else {
            ok = rm_table_parse(rm, table + 4, (size_t)tlen - 4, &why) &&
                 rm_records_make(rm, &why);
        }
    }
    free(table);
    if (!ok) {
        /* This rank's own cause first. */
        if (mine != NULL) {
            free(why);
            why = mine;
        }
        if (err != NULL) {
            *err =
                why != NULL ? why : strdup("nomem: opening the remote layer");
        } else {
            free(why);
        }
        rm_agent_free(rm);
        if (!rig_job_failed(job)) {
            MPI_Comm_free(&rm->comm);
        }
        remote_free(rm);
        return false;
    }
    free(mine);
    free(why);
    *out = rm;
    return true;
}

rig_job *rig_remote_job(const rig_remote *rm)
{
    return rm != NULL ? rm->job : NULL;
}

bool rig_remote_is_controller(const rig_remote *rm)
{
    return rm != NULL && rm->rank == 0;
}

void rig_remote_close(rig_remote *rm)
{
    if (rm == NULL) {
        return;
    }
    if (rm->rank == 0) {
        pthread_mutex_lock(&rm->lock);
        if (!rig_job_failed(rm->job)) {
            rm_controller_close(rm);
        }
        pthread_mutex_unlock(&rm->lock);
    } else if (!rm->served && !rig_job_failed(rm->job)) {
        char *why = NULL;
        if (!rig_remote_serve(rm, &why)) {
            rig_log(RIG_LOG_WARN, "rank %d: closing the remote layer: %s",
                    rm->rank, why != NULL ? why : "?");
        }
        free(why);
    }
    rm_agent_unload_all(rm);
    rm_agent_free(rm);
    if (!rig_job_failed(rm->job)) {
        MPI_Comm_free(&rm->comm);
    }
    /* else: the communicator goes with the process; a pending request of
     * a dead peer's may still name it. */
    remote_free(rm);
}
