/* SPDX-License-Identifier: BSD-3-Clause */
/* Bad input to every function of rig/job.h: tables of calls, 2 ranks.
 *
 * Local cases (refused before any peer is contacted) run on each rank
 * alone; collective cases (bad options, bad RIG_* values, bad or
 * mismatched transfer lists) run on both ranks, which must get the same
 * reason word, and a good rail after them proves nothing is left out of
 * step.  Each message must start with its reason word and name the
 * argument.  mpitest.sh's timeout catches a hang. */
#include "../mpitest.h"

#include <ctype.h>

typedef struct {
    const char *name;
    bool (*call)(rig_job *job, char **err);
    const char *reason;
    const char *arg; /* named as a whole word */
} bad_case;

static bool word_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

static bool names(const char *msg, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(msg, word); p != NULL;
         p = strstr(p + 1, word)) {
        bool left = p == msg || !word_char(p[-1]) || !word_char(word[0]);
        bool right = !word_char(p[n]) || !word_char(word[n - 1]);
        if (left && right) {
            return true;
        }
    }
    return false;
}

static void check(const char *name, bool ok, char *err, const char *reason,
                  const char *arg)
{
    if (ok) {
        T_FAIL("%s succeeded; expected %s", name, reason);
    }
    if (err == NULL || strncmp(err, reason, strlen(reason)) != 0 ||
        !names(err, arg)) {
        T_FAIL("%s: \"%s\" does not start with \"%s\" and name %s", name,
               err != NULL ? err : "(none)", reason, arg);
    }
    free(err);
}

static void run(const bad_case *c, size_t n, rig_job *job)
{
    for (size_t i = 0; i < n; i++) {
        char *err = NULL;
        bool ok = c[i].call(job, &err);
        check(c[i].name, ok, err, c[i].reason, c[i].arg);
        T_ASSERT(!c[i].call(job, NULL));
    }
}

#define NCASES(t) (sizeof(t) / sizeof((t)[0]))

static const rig_transfer t8[1] = {{0, 0, 8}};
static const rig_transfer t16[1] = {{0, 0, 16}};
static const rig_transfer t_len0[1] = {{0, 0, 0}};

/* ---- rig_job_open: local and collective ---------------------------------- */

static bool o_out(rig_job *j, char **e)
{
    (void)j;
    return rig_job_open(MPI_COMM_WORLD, NULL, NULL, e);
}
static bool o_comm(rig_job *j, char **e)
{
    rig_job *x = NULL;
    (void)j;
    return rig_job_open(MPI_COMM_NULL, NULL, &x, e);
}

static const bad_case open_local[] = {
    {"open NULL out", o_out, "invalid: ", "out"},
    {"open MPI_COMM_NULL", o_comm, "invalid: ", "comm"},
};

/* Collective: every rank passes the same bad options or environment. */
static bool open_with(const rig_job_options *o, const char *var,
                      const char *val, char **e)
{
    rig_job *x = NULL;
    if (var != NULL) {
        setenv(var, val, 1);
    }
    bool ok = rig_job_open(MPI_COMM_WORLD, o, &x, e);
    if (var != NULL) {
        unsetenv(var);
    }
    if (ok) {
        rig_job_close(x);
    }
    return ok;
}
static bool o_numa(rig_job *j, char **e)
{
    rig_job_options o;
    (void)j;
    rig_job_options_init(&o);
    o.numa = (rig_switch)7;
    return open_with(&o, NULL, NULL, e);
}
static bool o_shm(rig_job *j, char **e)
{
    rig_job_options o;
    (void)j;
    rig_job_options_init(&o);
    o.shm_stores = (rig_switch)-1;
    return open_with(&o, NULL, NULL, e);
}
static bool o_transport(rig_job *j, char **e)
{
    rig_job_options o;
    (void)j;
    rig_job_options_init(&o);
    o.transport = "carrier-pigeon";
    return open_with(&o, NULL, NULL, e);
}
static bool o_env_shm(rig_job *j, char **e)
{
    (void)j;
    return open_with(NULL, "RIG_SHM_STORES", "", e)
               ? open_with(NULL, "RIG_SHM_STORES", "never", e)
               : true;
}
static const bad_case open_collective[] = {
    {"open options numa 7", o_numa, "invalid: ", "numa"},
    {"open options shm_stores -1", o_shm, "invalid: ", "shm_stores"},
    {"open options transport", o_transport, "invalid: ", "transport"},
    {"open RIG_SHM_STORES=never", o_env_shm, "invalid: ", "RIG_SHM_STORES"},
};

/* Bad settings in every rank's environment: rig_job_open refuses each
 * with "invalid:" naming the variable. */
static const struct {
    const char *var, *value;
} open_env[] = {
    {"RIG_TRANSPORT", "smoke"},
    {"RIG_NUMA", "maybe"},
    {"RIG_CUDA", "2"},
    {"RIG_KEEPALIVE_MS", "0"},
    {"RIG_LANE_BYTES", "33554432"},
    {"RIG_LANE_BYTES", "big"},
};

static void run_env(void)
{
    for (size_t i = 0; i < NCASES(open_env); i++) {
        char name[96];
        snprintf(name, sizeof(name), "open %s=%s", open_env[i].var,
                 open_env[i].value);
        char *err = NULL;
        bool ok = open_with(NULL, open_env[i].var, open_env[i].value, &err);
        check(name, ok, err, "invalid: ", open_env[i].var);
        T_ASSERT(!open_with(NULL, open_env[i].var, open_env[i].value, NULL));
    }
}

/* Only the last rank's environment is bad: it refuses with its reason,
 * the others -- whose transports opened -- with "failed:" naming it, and
 * none crashes undoing its half-open job (the window is not made yet). */
static void open_one_bad(void)
{
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    bool bad = rank == size - 1;
    char *e = NULL;
    bool ok = open_with(NULL, bad ? "RIG_NUMA" : NULL, "maybe", &e);
    char who[32];
    snprintf(who, sizeof(who), "rank %d", size - 1);
    check("open, the last rank's RIG_NUMA=maybe", ok, e,
          bad ? "invalid: " : "failed: ", bad ? "RIG_NUMA" : who);
}

/* ---- rig_job_rail and the accessors: local ------------------------------- */

static int other(const rig_job *j)
{
    return 1 - rig_job_rank(j);
}
static bool r_job(rig_job *j, char **e)
{
    rig_rail *r = NULL;
    (void)j;
    return rig_job_rail(NULL, 1, t8, 1, t8, 1, &r, e);
}
static bool r_out(rig_job *j, char **e)
{
    return rig_job_rail(j, other(j), t8, 1, t8, 1, NULL, e);
}
static bool r_peer_neg(rig_job *j, char **e)
{
    rig_rail *r = NULL;
    return rig_job_rail(j, -1, t8, 1, t8, 1, &r, e);
}
static bool r_peer_size(rig_job *j, char **e)
{
    rig_rail *r = NULL;
    return rig_job_rail(j, rig_job_size(j), t8, 1, t8, 1, &r, e);
}
static bool r_peer_self(rig_job *j, char **e)
{
    rig_rail *r = NULL;
    return rig_job_rail(j, rig_job_rank(j), t8, 1, t8, 1, &r, e);
}
static bool r_send_null(rig_job *j, char **e)
{
    rig_rail *r = NULL;
    return rig_job_rail(j, other(j), NULL, 2, t8, 1, &r, e);
}
static bool r_receive_null(rig_job *j, char **e)
{
    rig_rail *r = NULL;
    return rig_job_rail(j, other(j), t8, 1, NULL, 3, &r, e);
}
static bool w_job(rig_job *j, char **e)
{
    MPI_Win w;
    (void)j;
    return rig_job_window(NULL, &w, e);
}
static bool w_out(rig_job *j, char **e)
{
    return rig_job_window(j, NULL, e);
}
static bool d_job(rig_job *j, char **e)
{
    rig_job_peer_end pe;
    (void)j;
    return rig_job_rail_disp(NULL, (const rig_rail *)t8, &pe, e);
}
static bool d_rail(rig_job *j, char **e)
{
    rig_job_peer_end pe;
    return rig_job_rail_disp(j, NULL, &pe, e);
}
static bool d_out(rig_job *j, char **e)
{
    return rig_job_rail_disp(j, (const rig_rail *)t8, NULL, e);
}
/* A rail of no job: a loopback rail. */
static bool d_foreign(rig_job *j, char **e)
{
    rig_rail *a = NULL, *b = NULL;
    rig_job_peer_end pe;
    if (!rig_loopback_make(3, t8, 1, t8, 1, &a, &b, NULL)) {
        return true;
    }
    bool ok = rig_job_rail_disp(j, a, &pe, e);
    T_EQ(rig_job_rail_peer(j, a), (uint64_t)-1);
    rig_rail_release(a);
    rig_rail_release(b);
    return ok;
}
static bool h_self(rig_job *j, char **e)
{
    rig_rail *r = NULL;
    const rig_host *h = rig_job_host(j, rig_job_rank(j));
    return rig_host_rail(h, NULL, t8, 1, t8, 1, &r, e);
}
static bool h_peer_is_h(rig_job *j, char **e)
{
    rig_rail *r = NULL;
    const rig_host *h = rig_job_host(j, other(j));
    return rig_host_rail(h, h, t8, 1, t8, 1, &r, e);
}
static bool h_foreign(rig_job *j, char **e)
{
    rig_rail *r = NULL;
    rig_host stranger = {"elsewhere:0", NULL, NULL, NULL};
    const rig_host *h = rig_job_host(j, other(j));
    return h->rail(h, &stranger, t8, 1, t8, 1, &r, e);
}
/* The record's own function, as compiled code calls it: bad lists are
 * refused at once (no peer calls; waiting for one would hang here). */
static bool h_direct_zero(rig_job *j, char **e)
{
    rig_rail *r = NULL;
    rig_transfer z = {0, 0, 0};
    const rig_host *h = rig_job_host(j, other(j));
    return h->rail(h, NULL, &z, 1, t8, 1, &r, e);
}
static bool h_direct_null(rig_job *j, char **e)
{
    rig_rail *r = NULL;
    const rig_host *h = rig_job_host(j, other(j));
    return h->rail(h, NULL, t8, 1, NULL, 2, &r, e);
}
static bool i_out(rig_job *j, char **e)
{
    (void)j;
    return rig_transport_info(NULL, e);
}

static const bad_case rail_local[] = {
    {"rail NULL job", r_job, "invalid: ", "job"},
    {"rail NULL out", r_out, "invalid: ", "out"},
    {"rail peer -1", r_peer_neg, "invalid: ", "peer"},
    {"rail peer size", r_peer_size, "invalid: ", "peer"},
    {"rail peer self", r_peer_self, "invalid: ", "peer"},
    {"rail NULL send", r_send_null, "invalid: ", "send"},
    {"rail NULL receive", r_receive_null, "invalid: ", "receive"},
    {"window NULL job", w_job, "invalid: ", "job"},
    {"window NULL out", w_out, "invalid: ", "out"},
    {"rail_disp NULL job", d_job, "invalid: ", "job"},
    {"rail_disp NULL rail", d_rail, "invalid: ", "rail"},
    {"rail_disp NULL out", d_out, "invalid: ", "out"},
    {"rail_disp foreign rail", d_foreign, "invalid: ", "rail"},
    {"host rail to itself", h_self, "invalid: ", "peer"},
    {"host rail peer == host", h_peer_is_h, "invalid: ", "peer"},
    {"host rail foreign peer", h_foreign, "foreign: ", "peer"},
    {"host rail direct, zero length", h_direct_zero,
     "invalid: ", "send[0] has length 0"},
    {"host rail direct, NULL list", h_direct_null, "invalid: ", "receive"},
    {"transport_info NULL out", i_out, "invalid: ", "out"},
};

/* ---- rig_job_rail: collective bad lists -----------------------------------
 */

typedef struct {
    const char *name;
    /* rank 0's send and receive; rank 1 passes them swapped, except where
     * the other pair is given */
    const rig_transfer *s0, *r0, *s1, *r1;
    size_t ns0, nr0, ns1, nr1;
    const char *arg0, *arg1; /* what each rank's message names */
} list_case;

static const list_case lists[] = {
    {"rank 0's send has length 0", t_len0, NULL, NULL, t_len0, 1, 0, 0, 1,
     "send[0]", "receive[0]"},
    {"both empty", NULL, NULL, NULL, NULL, 0, 0, 0, 0, "send", "send"},
    {"send and receive differ", t8, NULL, NULL, t16, 1, 0, 0, 1, "receive",
     "receive"},
    {"counts differ", t8, NULL, NULL, NULL, 1, 0, 0, 0, "receive", "receive"},
};

static void run_lists(rig_job *job)
{
    int me = rig_job_rank(job);
    for (size_t i = 0; i < NCASES(lists); i++) {
        const list_case *c = &lists[i];
        rig_rail *r = NULL;
        char *err = NULL;
        bool ok =
            me == 0
                ? rig_job_rail(job, 1, c->s0, c->ns0, c->r0, c->nr0, &r, &err)
                : rig_job_rail(job, 0, c->s1, c->ns1, c->r1, c->nr1, &r, &err);
        if (ok) {
            rig_rail_release(r);
        }
        check(c->name, ok, err, "invalid: ", me == 0 ? c->arg0 : c->arg1);
    }
    /* Still in step: a good rail between the two. */
    rig_rail *r = NULL;
    T_OK(rig_job_rail(job, 1 - me, t8, 1, t8, 1, &r, &t_err));
    T_EQ(rig_job_rail_peer(job, r), (uint64_t)(1 - me));
    T_EQ(rig_job_rail_peer(NULL, r), (uint64_t)-1);
    T_EQ(rig_job_rail_peer(job, NULL), (uint64_t)-1);
    rig_job_peer_end pe;
    char *err = NULL;
    if (!rig_job_rail_disp(job, r, &pe, &err)) {
        T_ASSERT(err != NULL && strncmp(err, "unsupported: ", 13) == 0);
    }
    free(err);
    rig_rail_release(r);
}

/* ---- neutral values ------------------------------------------------------ */

static void run_neutral(rig_job *job)
{
    rig_job_options_init(NULL);
    rig_job_fail(NULL, "x");
    rig_job_fail(NULL, NULL);
    rig_job_close(NULL);
    T_EQ(rig_job_rank(NULL), (uint64_t)-1);
    T_EQ(rig_job_size(NULL), (uint64_t)-1);
    T_ASSERT(!rig_job_failed(NULL));
    T_ASSERT(rig_job_host(NULL, 0) == NULL);
    T_ASSERT(rig_job_host(job, -1) == NULL);
    T_ASSERT(rig_job_host(job, rig_job_size(job)) == NULL);
    T_ASSERT(rig_job_host(job, INT32_MAX) == NULL);
    T_ASSERT(rig_job_rail_peer(NULL, NULL) == -1);
    int32_t *t = NULL;
    T_EQ(rig_host_threads(rig_job_host(job, 0), 5, &t), 0);
    T_ASSERT(t == NULL);
}

/* ---- jobs that are not open -------------------------------------------- */

/* Every call on a job that is closed, or on a pointer that is no job:
 * refused ("invalid:" naming the job) or a neutral value, never a read of
 * the memory (ASan would say so). */
static void run_not_open(rig_job *job, const char *what)
{
    static const rig_transfer t = {0, 0, 8};
    rig_rail *r = NULL;
    char *msg = NULL;
    T_ERR(rig_job_rail(job, 0, &t, 1, &t, 1, &r, &t_err), "invalid: ", "job",
          &msg);
    T_ASSERT(r == NULL);
    if (strstr(msg, what) == NULL) {
        T_FAIL("\"%s\" lacks \"%s\"", msg, what);
    }
    free(msg);
    MPI_Win w = MPI_WIN_NULL;
    T_ERR(rig_job_window(job, &w, &t_err), "invalid: ", "job", NULL);
    rig_job_peer_end pe;
    T_ERR(rig_job_rail_disp(job, (const rig_rail *)&t, &pe, &t_err),
          "invalid: ", "job", NULL);
    T_EQ(rig_job_rank(job), (uint64_t)-1);
    T_EQ(rig_job_size(job), (uint64_t)-1);
    T_ASSERT(rig_job_host(job, 0) == NULL);
    T_ASSERT(rig_job_rail_peer(job, (const rig_rail *)&t) == -1);
    rig_job_fail(job, "on a job that is not open");
    T_ASSERT(!rig_job_failed(job));
    T_ASSERT(rig_job_failure(job) == NULL);
    T_ASSERT(!rig_job_close(job)); /* closing twice is harmless */
}

static void run_closed(void)
{
    /* Closed and gone. */
    rig_job *job = NULL;
    T_OK(rig_job_open(MPI_COMM_WORLD, NULL, &job, &t_err));
    T_ASSERT(rig_job_close(job));
    run_not_open(job, "not a job");
    /* Closed, its record kept by an end held past the close. */
    T_OK(rig_job_open(MPI_COMM_WORLD, NULL, &job, &t_err));
    rig_rail *r = NULL;
    T_OK(rig_job_rail(job, 1 - t_rank, t8, 1, t8, 1, &r, &t_err));
    T_ASSERT(rig_end_failure(rig_rail_local(r)) == NULL);
    T_ASSERT(rig_job_close(job));
    run_not_open(job, "was closed");
    T_ASSERT(rig_end_failure(rig_rail_local(r)) == NULL); /* not failed */
    rig_rail_release(r);
    run_not_open(job, "not a job");
    /* Not a job at all. */
    int x = 7;
    run_not_open((rig_job *)&x, "not a job");
    T_EQ(x, 7);
    /* rig_end_failure: no end, another provider's end. */
    T_ASSERT(rig_end_failure(NULL) == NULL);
    rig_rail *a = NULL, *b = NULL;
    T_OK(rig_loopback_make(3, t8, 1, t8, 1, &a, &b, &t_err));
    T_ASSERT(rig_end_failure(rig_rail_local(a)) == NULL);
    rig_rail_release(a);
    rig_rail_release(b);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (t_rank == 0) {
            printf("SKIP: needs 2 ranks, has %d\n", size);
        }
        MPI_Finalize();
        return 0;
    }
    run(open_local, NCASES(open_local), NULL);
    run(open_collective, NCASES(open_collective), NULL);
    run_env();
    open_one_bad();

    rig_job *job = NULL;
    T_OK(rig_job_open(MPI_COMM_WORLD, NULL, &job, &t_err));
    run(rail_local, NCASES(rail_local), job);
    run_lists(job);
    run_neutral(job);

    /* A failed job refuses rails without contacting the peer.  Both ranks
     * first finish the cases above: a failure raised while the peer is
     * still inside its last good rig_job_rail rightly fails that call. */
    MPI_Barrier(MPI_COMM_WORLD);
    rig_job_fail(job, "bad input test");
    rig_job_fail(job, NULL);
    T_ASSERT(rig_job_failed(job));
    rig_rail *r = NULL;
    T_ERR(rig_job_rail(job, 1 - t_rank, t8, 1, t8, 1, &r, &t_err),
          "failed: ", "bad input test", NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    T_ASSERT(rig_job_close(job)); /* failed, but every rank is there */
    run_closed();
    if (t_rank == 0) {
        printf("bad input cases: %zu open, %zu rail and accessors, %zu "
               "lists\n",
               NCASES(open_local) + NCASES(open_collective) + NCASES(open_env) +
                   1,
               NCASES(rail_local), NCASES(lists));
    }
    MPI_Finalize();
    return 0;
}
