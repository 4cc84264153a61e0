/* SPDX-License-Identifier: BSD-3-Clause */
/* Rails between any two machines of the remote layer (rig/remote.h), made
 * by the controller and driven by the programs it loaded there.
 *
 * Usage: test_rails MODE (rank 0 controls, every other rank serves)
 *   --rails   errors of host->rail at once (bad lists, peer == host,
 *             through rig_host_rail and the record's own function),
 *             foreign peers; a rail between agents 1 and 2 driven by
 *             programs on both, and one between an agent and the
 *             controller's machine driven by a program and the
 *             controller, bytes checked bit for bit and counts exact;
 *             a native node's ready makes no system call (seccomp);
 *             lifetimes (a program keeps its end after the controller's
 *             rail is released; unload gives it back); load refusals;
 *             rails made from three controller threads at once
 *   --crash   (3 ranks) the program on agent 1 crashes while it drives a
 *             rail to agent 2: the job fails with the crash report, the
 *             controller's end of another rail, the waits and every
 *             serve end within 2 s
 *   --crash-controller  the same with the controller at the other end
 *   --kill-rail  (3 ranks, --enable-recovery) agent 2 is killed while the
 *             controller makes rails to it: the make in flight returns
 *             "failed:" within 2 s
 *   --cuda DIR  (under the stand-in CUDA driver) DIR's rails example on
 *             agent 1 ping-pongs with the controller: a kernel's device
 *             writes and points, readied by the executor's watcher
 *   --kill    (3 ranks, --enable-recovery) agent 2 is killed while
 *             programs drive rails to it and to the controller: the
 *             controller's wait on its end, rig_remote_wait and agent 1's
 *             serve return within 2 s; host->rail is then "failed:"
 * Programs: REMOTE_PROGRAMS (rail_prog under rswap*, rcrash_rail). */
#include "../mpitest.h"

#include <rig/remote.h>

#include <mesh/abi/ends.h>

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#define HANG_MS 60000u /* a hang guard, not a bound */
#define LEN 64u        /* bytes per transfer (as the manifests' args) */
#define NT 3u          /* transfers per direction */

static rig_job *job;
static rig_remote *rm;
static int me, size;
static const char *root = REMOTE_PROGRAMS;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline uint8_t rail_byte(uint64_t o, uint64_t r, int32_t s)
{
    return (uint8_t)((uint64_t)s * 31u + r * 7u + o * 13u + (o >> 8));
}

static rig_transfer lists[NT];

static void lists_make(void)
{
    for (uint32_t k = 0; k < NT; k++) {
        lists[k] = (rig_transfer){k * LEN, k * LEN, LEN};
    }
}

/* A rail between agent a and b (0: the controller's machine). */
static rig_rail *make(int a, int b)
{
    rig_rail *r = NULL;
    const rig_host *ha = rig_remote_host(rm, a);
    const rig_host *hb = b != 0 ? rig_remote_host(rm, b) : NULL;
    T_OK(rig_host_rail(ha, hb, lists, NT, lists, NT, &r, &t_err));
    T_ASSERT(r != NULL);
    T_ASSERT((rig_rail_local(r) != NULL) == (b == 0));
    return r;
}

static int64_t load_on(const char *name, int rank, const rig_rail *rail)
{
    int64_t p = 0;
    rig_remote_end e = {.rank = rank, .input = 0, .rail = rail};
    T_OK(rig_remote_load_catalog_ends(rm, root, name, &rank, 1, &e, 1, &p,
                                      &t_err));
    return p;
}

/* The controller's side of a swap over its end e with agent peer. */
static void controller_swap(rig_end *e, int peer, uint64_t runs)
{
    size_t bytes = LEN * NT;
    uint64_t bad = 0;
    for (uint64_t r = 0; r < runs; r++) {
        if (r >= 2) {
            T_ASSERT(rig_end_wait_sent(e, (r - 1) * NT));
        }
        uint8_t *out =
            rig_area_copy(rig_end_outbound(e), (unsigned)(r % 2)).base;
        for (size_t o = 0; o < bytes; o++) {
            out[o] = rail_byte(o, r, 0);
        }
        rig_end_ready(e, (r + 1) * NT);
        T_ASSERT(rig_end_wait_arrived(e, (r + 1) * NT));
        const uint8_t *in =
            rig_area_copy(rig_end_inbound(e), (unsigned)(r % 2)).base;
        for (size_t o = 0; o < bytes; o++) {
            bad += in[o] != rail_byte(o, r, peer);
        }
    }
    T_EQ(bad, 0);
    T_EQ(rig_end_arrived(e), runs * NT);
}

/* Program p on rank is done, ran runs runs, saw every byte right and no
 * failure, and found its end by id too. */
static void check_swapped(int64_t p, int rank, uint64_t runs)
{
    rig_remote_status *s = NULL;
    size_t n = 0;
    T_OK(rig_remote_query(rm, p, &s, &n, &t_err));
    T_EQ(n, 1);
    T_EQ(s[0].rank, rank);
    if (s[0].state != RIG_REMOTE_DONE) {
        T_FAIL("program %lld on %d: state %d (%s)", (long long)p, rank,
               s[0].state, s[0].why != NULL ? s[0].why : "");
    }
    T_EQ(s[0].points[0], runs);
    T_EQ(s[0].points[1], runs * NT); /* arrived: exact */
    T_EQ(s[0].points[2], 0);         /* no wait failed */
    T_EQ(s[0].points[3], 0);         /* no byte differed */
    T_EQ(s[0].points[4], 1);         /* by id and by input: one end */
    rig_remote_status_free(s, n);
}

static bool holds(int rank, int64_t id)
{
    int64_t *ids = NULL;
    size_t n = 0;
    T_OK(rig_remote_ends_held(rm, rank, &ids, &n, &t_err));
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        found |= ids[i] == id;
    }
    free(ids);
    return found;
}

/* ---- errors ----------------------------------------------------------------
 */

/* Each refused at once: no agent is contacted (an agent contacted would
 * wait for a peer that never comes, and the call would not return). */
static void test_errors(void)
{
    const rig_host *h1 = rig_remote_host(rm, 1);
    const rig_host *h2 = rig_remote_host(rm, 2);
    rig_rail *r = NULL;
    rig_transfer zero = {0, 0, 0}, big = {0, (int64_t)1 << 60, 1};
    uint64_t t0 = now_ns();
    T_ERR(rig_host_rail(h1, h1, lists, NT, lists, NT, &r, &t_err),
          "invalid:", "the host itself", NULL);
    T_ERR(h1->rail(h1, h1, lists, NT, lists, NT, &r, &t_err),
          "invalid:", "this host", NULL);
    /* A proxy's copy of the record is the same host. */
    const rig_remote_proxy *px = rig_remote_find(rm, h1->machine);
    T_ASSERT(px != NULL);
    T_ERR(h1->rail(h1, &px->record.u.host, lists, NT, lists, NT, &r, &t_err),
          "invalid:", "this host", NULL);
    T_ERR(h1->rail(h1, h2, &zero, 1, lists, NT, &r, &t_err),
          "invalid:", "send[0] has length 0", NULL);
    T_ERR(h1->rail(h1, NULL, lists, NT, &big, 1, &r, &t_err),
          "invalid:", "receive[0]", NULL);
    T_ERR(h1->rail(h1, h2, NULL, 2, lists, NT, &r, &t_err), "invalid:", "send",
          NULL);
    T_ERR(h1->rail(h1, h2, NULL, 0, NULL, 0, &r, &t_err), "invalid:", "", NULL);
    T_ERR(h1->rail(h1, h2, lists, NT, lists, NT, NULL, &t_err),
          "invalid:", "out", NULL);
    double ms = (double)(now_ns() - t0) / 1e6;
    printf("controller: 8 invalid rails refused in %.3f ms\n", ms);
    T_ASSERT(ms < 1000.0); /* hang guard: no agent was waited for */
    /* Foreign: the job's record of rank 2, and a record of no layer. */
    T_ERR(h1->rail(h1, rig_job_host(job, 2), lists, NT, lists, NT, &r, &t_err),
          "foreign:", "", NULL);
    rig_host stranger = {"elsewhere:9", h1->rail, h1->threads, NULL};
    T_ERR(h1->rail(h1, &stranger, lists, NT, lists, NT, &r, &t_err),
          "foreign:", "elsewhere:9", NULL);
    T_ASSERT(r == NULL);
    /* A failed rail leaves the layer usable. */
    rig_rail *ok = make(1, 2);
    rig_rail_release(ok);
    printf(
        "ok: host->rail refuses bad lists, self and foreign peers at once\n");
}

/* ---- traffic
 * ----------------------------------------------------------------- */

static void test_agents(void)
{
    rig_rail *r = make(1, 2);
    int64_t id = rig_rail_id(r);
    T_ASSERT(id > 0);
    T_ASSERT(holds(1, id) && holds(2, id));
    int64_t p1 = load_on("rswap", 1, r);
    int64_t p2 = load_on("rswap", 2, r);
    T_OK(rig_remote_launch(rm, p1, 1, &t_err));
    T_OK(rig_remote_launch(rm, p2, 1, &t_err));
    T_OK(rig_remote_wait(rm, p1, HANG_MS, &t_err));
    T_OK(rig_remote_wait(rm, p2, HANG_MS, &t_err));
    check_swapped(p1, 1, 300);
    check_swapped(p2, 2, 300);
    T_OK(rig_remote_unload(rm, p1, &t_err));
    T_OK(rig_remote_unload(rm, p2, &t_err));
    rig_rail_release(r);
    printf("ok: programs on agents 1 and 2 swap 300 runs over rail %lld\n",
           (long long)id);
}

static void test_controller(void)
{
    int a = size - 1;
    rig_rail *r = make(a, 0);
    rig_end *e = rig_rail_local(r);
    T_ASSERT(e != NULL);
    int64_t p = load_on("rswap", a, r);
    T_OK(rig_remote_launch(rm, p, 1, &t_err));
    controller_swap(e, a, 300);
    T_OK(rig_remote_wait(rm, p, HANG_MS, &t_err));
    check_swapped(p, a, 300);
    T_OK(rig_remote_unload(rm, p, &t_err));
    rig_rail_release(r);
    printf("ok: a program on agent %d and the controller swap 300 runs\n", a);
}

/* The native fast path makes no system call: rstrict's node readies 100
 * runs to the controller's end from a child under seccomp's strict mode
 * (rail_prog.c), which any system call but read, write and exit kills.
 * Only where the node maps the peer's end (RIG_SHM_STORES not off:
 * otherwise the node rings its agent, a futex wake when the ferry
 * sleeps). */
static void test_no_syscall(void)
{
    const char *st = getenv("RIG_SHM_STORES");
    if (st != NULL && strcmp(st, "off") == 0) {
        printf("controller: no-syscall check left out: RIG_SHM_STORES=off "
               "(the node rings its agent)\n");
        return;
    }
    int a = size - 1;
    rig_rail *r = make(a, 0);
    rig_end *e = rig_rail_local(r);
    int64_t p = load_on("rstrict", a, r);
    T_OK(rig_remote_launch(rm, p, 1, &t_err));
    T_OK(rig_remote_wait(rm, p, HANG_MS, &t_err));
    rig_remote_status *s = NULL;
    size_t n = 0;
    T_OK(rig_remote_query(rm, p, &s, &n, &t_err));
    T_EQ(n, 1);
    T_EQ(s[0].state, RIG_REMOTE_DONE);
    uint64_t verdict = s[0].points[2];
    if (verdict == 1) {
        T_FAIL("agent %d's node made a system call in mesh_end_ready's "
               "fast path (killed under seccomp after %llu runs)",
               a, (unsigned long long)s[0].points[0]);
    }
    T_EQ(s[0].points[0], verdict == 2 ? 0 : 100);
    rig_remote_status_free(s, n);
    if (verdict == 2) {
        printf("controller: no-syscall check could not run on agent %d "
               "(a sanitizer's runtime, or no seccomp)\n",
               a);
    } else {
        T_EQ(verdict, 0); /* 1: the child made a system call */
        bool timed_out = false;
        T_ASSERT(rig_end_wait_arrived_for(e, 100 * NT, HANG_MS, &timed_out));
        T_EQ(rig_end_arrived(e), 100 * NT);
        const uint8_t *in = rig_area_copy(rig_end_inbound(e), 1).base;
        uint64_t bad = 0;
        for (size_t o = 0; o < LEN * NT; o++) {
            bad += in[o] != rail_byte(o, 99, a);
        }
        T_EQ(bad, 0);
        printf("ok: a native node readied 100 runs with no system call\n");
    }
    T_OK(rig_remote_unload(rm, p, &t_err));
    rig_rail_release(r);
}

/* ---- lifetimes
 * ----------------------------------------------------------------- */

static void test_lifetimes(void)
{
    /* Released with no program: the agents drop their ends at the
     * controller's next call. */
    rig_rail *r = make(1, 2);
    int64_t id = rig_rail_id(r);
    rig_rail_release(r);
    T_ASSERT(!holds(1, id) && !holds(2, id));

    /* Released while programs run on it: nothing under them goes. */
    r = make(1, 2);
    id = rig_rail_id(r);
    int64_t p1 = load_on("rswap_long", 1, r);
    int64_t p2 = load_on("rswap_long", 2, r);
    T_OK(rig_remote_launch(rm, p1, 1, &t_err));
    T_OK(rig_remote_launch(rm, p2, 1, &t_err));
    rig_rail_release(r);
    T_ASSERT(holds(1, id) && holds(2, id)); /* the programs' references */
    T_OK(rig_remote_wait(rm, p1, HANG_MS, &t_err));
    T_OK(rig_remote_wait(rm, p2, HANG_MS, &t_err));
    check_swapped(p1, 1, 3000);
    check_swapped(p2, 2, 3000);
    /* A released rail cannot be named by a new load. */
    T_OK(rig_remote_unload(rm, p1, &t_err));
    T_ASSERT(!holds(1, id) && holds(2, id)); /* unload gave it back */
    T_OK(rig_remote_unload(rm, p2, &t_err));
    T_ASSERT(!holds(2, id));

    /* The controller's own end (peer NULL) keeps the agent's alive while
     * the rail is held; releasing it lets the agent drop. */
    int a = size - 1;
    r = make(a, 0);
    id = rig_rail_id(r);
    T_ASSERT(holds(a, id));
    rig_rail_retain(r);
    rig_rail_release(r);
    T_ASSERT(holds(a, id));
    rig_rail_release(r);
    T_ASSERT(!holds(a, id));
    printf("ok: ends live while the controller's rail or a program holds "
           "them\n");
}

/* ---- load refusals
 * -------------------------------------------------------------- */

static void test_refusals(void)
{
    rig_rail *r = make(1, 2);
    rig_rail *c = make(1, 0);
    int64_t p = 0;
    int one = 1, both[2] = {1, 2};
    rig_remote_end e = {.rank = 1, .input = 0, .rail = r};
    /* Input 1 is none of rswap's. */
    e.input = 1;
    T_ERR(rig_remote_load_catalog_ends(rm, root, "rswap", &one, 1, &e, 1, &p,
                                       &t_err),
          "invalid:", "neither reads nor writes input 1", NULL);
    e.input = MESH_INPUTS;
    T_ERR(rig_remote_load_catalog_ends(rm, root, "rswap", &one, 1, &e, 1, &p,
                                       &t_err),
          "invalid:", "not below", NULL);
    e.input = 0;
    /* Machine 2 is not loaded; machine 3 (if any) has no end of r. */
    e.rank = 2;
    T_ERR(rig_remote_load_catalog_ends(rm, root, "rswap", &one, 1, &e, 1, &p,
                                       &t_err),
          "invalid:", "not a machine the program loads onto", NULL);
    if (size > 3) {
        int three = 3;
        e.rank = 3;
        T_ERR(rig_remote_load_catalog_ends(rm, root, "rswap", &three, 1, &e, 1,
                                           &p, &t_err),
              "invalid:", "has no end", NULL);
    }
    e.rank = 1;
    rig_remote_end twice[2] = {e, e};
    T_ERR(rig_remote_load_catalog_ends(rm, root, "rswap", both, 2, twice, 2, &p,
                                       &t_err),
          "invalid:", "bound twice", NULL);
    e.rail = NULL;
    T_ERR(rig_remote_load_catalog_ends(rm, root, "rswap", &one, 1, &e, 1, &p,
                                       &t_err),
          "invalid:", "rail is NULL", NULL);
    /* A rail of no layer: a loopback rail. */
    rig_rail *la = NULL, *lb = NULL;
    T_OK(rig_loopback_make(12345, lists, NT, lists, NT, &la, &lb, &t_err));
    e.rail = la;
    T_ERR(rig_remote_load_catalog_ends(rm, root, "rswap", &one, 1, &e, 1, &p,
                                       &t_err),
          "invalid:", "no rail of this layer", NULL);
    rig_rail_release(la);
    rig_rail_release(lb);
    /* A rail that sends nothing from machine 1 cannot be written there. */
    rig_rail *in_only = NULL;
    T_OK(rig_host_rail(rig_remote_host(rm, 1), rig_remote_host(rm, 2), NULL, 0,
                       lists, NT, &in_only, &t_err));
    e.rail = in_only;
    T_ERR(rig_remote_load_catalog_ends(rm, root, "rswap", &one, 1, &e, 1, &p,
                                       &t_err),
          "invalid:", "sends nothing", NULL);
    rig_rail_release(in_only);
    /* One writer per end: a second program writing r's end on 1. */
    e.rail = r;
    int64_t first = load_on("rswap", 1, r);
    char *msg = NULL;
    T_ERR(rig_remote_load_catalog_ends(rm, root, "rswap", &one, 1, &e, 1, &p,
                                       &t_err),
          "invalid:", "written by program", &msg);
    printf("controller: %s\n", msg);
    free(msg);
    /* But its other rail's end is free. */
    int64_t second = load_on("rswap", 1, c);
    T_OK(rig_remote_unload(rm, second, &t_err));
    T_OK(rig_remote_unload(rm, first, &t_err));
    /* Once unloaded, the end may be written again. */
    first = load_on("rswap", 1, r);
    T_OK(rig_remote_unload(rm, first, &t_err));
    rig_rail_release(r);
    rig_rail_release(c);
    printf("ok: loads naming bad ends are refused, naming the end\n");
}

/* ---- threads
 * --------------------------------------------------------------------- */

#define PER_THREAD 8

typedef struct {
    int a, b;
    rig_rail *r[PER_THREAD];
} maker_arg;

static void *maker(void *p)
{
    maker_arg *m = p;
    for (int i = 0; i < PER_THREAD; i++) {
        m->r[i] = make(m->a, m->b);
    }
    return NULL;
}

static void test_threads(void)
{
    maker_arg m[3] = {{.a = 1, .b = 2}, {.a = 2, .b = 1}, {.a = 1, .b = 0}};
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        T_EQ(pthread_create(&t[i], NULL, maker, &m[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
    }
    int64_t ids[3 * PER_THREAD];
    for (int i = 0; i < 3 * PER_THREAD; i++) {
        ids[i] = rig_rail_id(m[i / PER_THREAD].r[i % PER_THREAD]);
        for (int j = 0; j < i; j++) {
            if (ids[i] == ids[j]) {
                T_FAIL("rails %d and %d share id %lld", i, j,
                       (long long)ids[i]);
            }
        }
    }
    /* Rails made from several threads carry: the last of each thread. */
    rig_rail *r = m[1].r[PER_THREAD - 1];
    int64_t p1 = load_on("rswap", 1, r);
    int64_t p2 = load_on("rswap", 2, r);
    T_OK(rig_remote_launch(rm, p1, 1, &t_err));
    T_OK(rig_remote_launch(rm, p2, 1, &t_err));
    T_OK(rig_remote_wait(rm, p1, HANG_MS, &t_err));
    T_OK(rig_remote_wait(rm, p2, HANG_MS, &t_err));
    check_swapped(p1, 1, 300);
    check_swapped(p2, 2, 300);
    T_OK(rig_remote_unload(rm, p1, &t_err));
    T_OK(rig_remote_unload(rm, p2, &t_err));
    for (int i = 0; i < 3 * PER_THREAD; i++) {
        rig_rail_release(m[i / PER_THREAD].r[i % PER_THREAD]);
    }
    int64_t *held = NULL;
    size_t n = 9;
    T_OK(rig_remote_ends_held(rm, 1, &held, &n, &t_err));
    T_EQ(n, 0);
    T_OK(rig_remote_ends_held(rm, 2, &held, &n, &t_err));
    T_EQ(n, 0);
    printf("ok: %d rails from 3 threads at once, ids unique, all dropped\n",
           3 * PER_THREAD);
}

/* ---- a crash
 * ---------------------------------------------------------------------- */

/* Waits for the job to fail here, at most HANG_MS; its reason. */
static char *job_reason(void)
{
    uint64_t until = now_ns() + HANG_MS * 1000000ull;
    while (!rig_job_failed(job) && now_ns() < until) {
        nap_ms(1);
    }
    T_ASSERT(rig_job_failed(job));
    char *why = rig_job_failure(job);
    T_ASSERT(why != NULL);
    return why;
}

/* A crash that holds ends fails the job (rig/remote.h): every wait on
 * every rank ends, with the crash report as the reason.  Agent 1's
 * program crashes on a rail to agent 2 (whose program drives it too)
 * while the controller waits on its end of a rail to agent 2. */
static void test_crash(void)
{
    T_ASSERT(size == 3);
    rig_rail *r = make(1, 2);
    rig_rail *c = make(2, 0);
    rig_end *e = rig_rail_local(c);
    int64_t p1 = load_on("rcrash_rail", 1, r);
    int64_t p2 = load_on("rswap_long", 2, r);
    T_OK(rig_remote_launch(rm, p2, 1, &t_err));
    /* p1 crashes after 50 swaps with p2, which may be before the
     * controller took agent 1's reply to the launch: the crash fails the
     * job at once, and a call of the layer pending when the job fails
     * returns "failed: " with the job's reason (rig/remote.h, "Failure").
     * Both outcomes are the contract's; the reason must be the crash. */
    char *launch_err = NULL;
    if (rig_remote_launch(rm, p1, 1, &launch_err)) {
        printf("controller: launch: ok (the crash came after it)\n");
    } else {
        printf("controller: launch: %s\n", launch_err);
        T_ASSERT(launch_err != NULL &&
                 strncmp(launch_err, "failed: ", 8) == 0 &&
                 strstr(launch_err, "killed by signal 11") != NULL &&
                 strstr(launch_err, "holding rail") != NULL);
        T_ASSERT(rig_job_failed(job));
    }
    free(launch_err);
    char *msg = NULL;
    T_ERR(rig_remote_wait(rm, p1, HANG_MS, &t_err),
          "failed: ", "killed by signal 11", &msg);
    printf("controller: wait: %s\n", msg);
    free(msg);
    /* The controller's end fails with the job, and the peer program's
     * wait ends: within 2 s of the crash being seen. */
    uint64_t t0 = now_ns();
    bool timed_out = false;
    T_ASSERT(!rig_end_wait_arrived_for(e, 1, HANG_MS, &timed_out));
    T_ASSERT(!timed_out && rig_end_failed(e));
    T_ERR(rig_remote_wait(rm, p2, HANG_MS, &t_err), "failed: ", "", NULL);
    double ms = (double)(now_ns() - t0) / 1e6;
    char *why = job_reason();
    printf("controller: the job failed: %s; the controller's end and the "
           "peer's wait ended %.1f ms after the crash was seen (bound "
           "2000 ms)\n",
           why, ms);
    T_ASSERT(strstr(why, "killed by signal 11") != NULL &&
             strstr(why, "holding rail") != NULL);
    free(why);
    T_ASSERT(ms < 2000.0);
    rig_rail_release(r);
    rig_rail_release(c);
    printf("ok: a crash that holds an end fails the job with its report\n");
}

/* The same with the crashing program's peer the controller itself: its
 * waits on its end end with the job's failure, after the program's 50
 * runs. */
static void test_crash_controller(void)
{
    rig_rail *r = make(1, 0);
    rig_end *e = rig_rail_local(r);
    int64_t p1 = load_on("rcrash_rail", 1, r);
    T_OK(rig_remote_launch(rm, p1, 1, &t_err));
    uint64_t runs = 0;
    for (;; runs++) {
        if (runs >= 2 && !rig_end_wait_sent(e, (runs - 1) * NT)) {
            break;
        }
        size_t bytes = LEN * NT;
        uint8_t *out =
            rig_area_copy(rig_end_outbound(e), (unsigned)(runs % 2)).base;
        for (size_t o = 0; o < bytes; o++) {
            out[o] = rail_byte(o, runs, 0);
        }
        rig_end_ready(e, (runs + 1) * NT);
        bool timed_out = false;
        if (!rig_end_wait_arrived_for(e, (runs + 1) * NT, HANG_MS,
                                      &timed_out)) {
            T_ASSERT(!timed_out);
            break;
        }
    }
    /* The program crashes at its run 50, after it readied run 49: the
     * controller saw at least the 49 runs before (the program readied
     * run 49 only after the controller's run 48 arrived there), and sees
     * run 49 too unless the job's failure got here first -- a failed
     * job raises the counts to RIG_COUNT_FAILED, which takes the place
     * of the count (rig/remote.h, "Failures"), and the agent may see the
     * crash before its carrier took the last run. */
    printf("controller: %llu runs before the failure\n",
           (unsigned long long)runs);
    T_ASSERT(runs == 49 || runs == 50);
    T_ASSERT(rig_end_failed(e));
    T_ERR(rig_remote_wait(rm, p1, HANG_MS, &t_err),
          "failed: ", "killed by signal 11", NULL);
    char *why = job_reason();
    printf("controller: the job failed: %s\n", why);
    T_ASSERT(strstr(why, "killed by signal 11") != NULL);
    free(why);
    rig_rail_release(r);
    printf("ok: a crash on the controller's rail ends its waits\n");
}

/* ---- a kill
 * ----------------------------------------------------------------------- */

typedef struct {
    int pid;
    long delay_ms;
    uint64_t t_kill;
} killer_arg;

static void *killer(void *arg)
{
    killer_arg *k = arg;
    nap_ms(k->delay_ms);
    k->t_kill = now_ns();
    kill(k->pid, SIGKILL);
    return NULL;
}

static void test_kill(void)
{
    T_ASSERT(size == 3);
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    for (int r = 1; r < size; r++) {
        if (strcmp(rig_remote_machine_of(rm, r)->hostname, host) != 0) {
            printf("SKIP: the test kills agent 2 by its pid: every rank must "
                   "be on one node\n");
            return;
        }
    }
    rig_rail *r12 = make(1, 2);
    rig_rail *r20 = make(2, 0);
    int64_t p1 = load_on("rswap_forever", 1, r12);
    int64_t p2 = load_on("rswap_forever", 2, r12);
    int64_t p3 = load_on("rswap_forever", 2, r20);
    T_OK(rig_remote_launch(rm, p1, 1, &t_err));
    T_OK(rig_remote_launch(rm, p2, 1, &t_err));
    T_OK(rig_remote_launch(rm, p3, 1, &t_err));
    killer_arg k = {.pid = rig_remote_machine_of(rm, 2)->pid, .delay_ms = 300};
    pthread_t th;
    /* The controller drives its end of r20 until the rail fails.  The
     * killer starts once the first run came back: 300 ms from the
     * launches could come before it on a loaded machine, and the kill is
     * meant while the rails carry. */
    rig_end *e = rig_rail_local(r20);
    uint64_t runs = 0;
    for (;; runs++) {
        if (runs == 1) {
            T_EQ(pthread_create(&th, NULL, killer, &k), 0);
        }
        if (runs >= 2 && !rig_end_wait_sent(e, (runs - 1) * NT)) {
            break;
        }
        uint8_t *out =
            rig_area_copy(rig_end_outbound(e), (unsigned)(runs % 2)).base;
        memset(out, (int)runs, LEN * NT);
        rig_end_ready(e, (runs + 1) * NT);
        bool timed_out = false;
        if (!rig_end_wait_arrived_for(e, (runs + 1) * NT, HANG_MS,
                                      &timed_out)) {
            T_ASSERT(!timed_out);
            break;
        }
    }
    uint64_t t_ret = now_ns();
    if (runs == 0) {
        T_FAIL("the rail to agent 2 failed before the kill");
    }
    pthread_join(th, NULL);
    double ms = (double)(t_ret - k.t_kill) / 1e6;
    printf("controller: its wait on rail %lld returned %.1f ms after agent 2 "
           "was killed, after %llu runs (bound 2000 ms)\n",
           (long long)rig_rail_id(r20), ms, (unsigned long long)runs);
    T_ASSERT(t_ret >= k.t_kill && ms < 2000.0);
    char *msg = NULL;
    T_ERR(rig_remote_wait(rm, p1, HANG_MS, &t_err), "failed: ", "rank 2", &msg);
    printf("controller: wait: %s\n", msg);
    free(msg);
    T_ASSERT((double)(now_ns() - k.t_kill) / 1e6 < 2000.0);
    /* A failed job makes no rail, at once, through either record call. */
    rig_rail *none = NULL;
    const rig_host *h1 = rig_remote_host(rm, 1);
    T_ERR(rig_host_rail(h1, NULL, lists, NT, lists, NT, &none, &t_err),
          "failed: ", "rank 2", NULL);
    T_ERR(h1->rail(h1, rig_remote_host(rm, 2), lists, NT, lists, NT, &none,
                   &t_err),
          "failed: ", "rank 2", NULL);
    T_ASSERT(none == NULL);
    rig_rail_release(r12);
    rig_rail_release(r20);
}

/* ---- a CUDA kernel drives an end ------------------------------------------
 */

/* Agent 2 is killed while the controller makes rails to it: the make in
 * flight (the agents' pair protocol, or the controller's own end for the
 * controller's machine) returns "failed:" within 2 s. */
static void test_kill_rail(void)
{
    T_ASSERT(size == 3);
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    for (int r = 1; r < size; r++) {
        if (strcmp(rig_remote_machine_of(rm, r)->hostname, host) != 0) {
            printf("SKIP: the test kills agent 2 by its pid: every rank must "
                   "be on one node\n");
            return;
        }
    }
    killer_arg k = {.pid = rig_remote_machine_of(rm, 2)->pid, .delay_ms = 300};
    pthread_t th;
    const rig_host *h1 = rig_remote_host(rm, 1), *h2 = rig_remote_host(rm, 2);
    char *msg = NULL;
    uint64_t made = 0;
    /* The killer starts once the first rail was made: a make took 50-75
     * ms under ASan on this loaded machine, and 300 ms from the start
     * could end inside the first -- a make in flight still, but the test
     * means one after rails were made. */
    for (;; made++) {
        if (made == 1) {
            T_EQ(pthread_create(&th, NULL, killer, &k), 0);
        }
        rig_rail *r = NULL;
        const rig_host *h = made % 2 ? h2 : h1;
        const rig_host *peer = made % 2 ? NULL : h2;
        if (!h->rail(h, peer, lists, NT, lists, NT, &r, &msg)) {
            break;
        }
        rig_rail_release(r);
    }
    uint64_t t_ret = now_ns();
    if (made == 0) {
        T_FAIL("the first rail failed before the kill: %s", msg);
    }
    pthread_join(th, NULL);
    double ms = (double)(t_ret - k.t_kill) / 1e6;
    printf("controller: after %llu rails, the next returned %.1f ms after "
           "agent 2 was killed: %s\n",
           (unsigned long long)made, ms, msg);
    T_ASSERT(strncmp(msg, "failed: ", 8) == 0 && strstr(msg, "rank 2") != NULL);
    T_ASSERT(t_ret >= k.t_kill && ms < 2000.0);
    free(msg);
}

static uint64_t rails_value(uint64_t c)
{
    return c * 2654435761ull + 7ull;
}

/* examples/cuda/rails on agent 1 (under the stand-in driver): its kernel
 * writes through the end's device address and raises points, which the
 * executor's watcher turns into ready; the controller answers each ping
 * with its complement, and the kernel counts what came back right. */
static void test_cuda(const char *catalog)
{
    const rig_remote_machine *m = rig_remote_machine_of(rm, 1);
    if (!m->executors[MESH_BACKEND_CUDA].runs) {
        printf("SKIP: machine %s runs no CUDA: %s\n", m->name,
               m->executors[MESH_BACKEND_CUDA].why);
        return;
    }
    rig_transfer t = {0, 0, 8};
    rig_rail *r = NULL;
    T_OK(rig_host_rail(rig_remote_host(rm, 1), NULL, &t, 1, &t, 1, &r, &t_err));
    rig_end *e = rig_rail_local(r);
    int one = 1;
    rig_remote_end end = {.rank = 1, .input = 0, .rail = r};
    int64_t p = 0;
    T_OK(rig_remote_load_catalog_ends(rm, catalog, "rails", &one, 1, &end, 1,
                                      &p, &t_err));
    T_OK(rig_remote_launch(rm, p, 1, &t_err));
    const uint64_t trips = 500;
    for (uint64_t c = 1; c <= trips; c++) {
        bool timed_out = false;
        if (!rig_end_wait_arrived_for(e, c, HANG_MS, &timed_out)) {
            T_FAIL("ping %llu: %s", (unsigned long long)c,
                   timed_out ? "hang guard" : "the rail failed");
        }
        uint64_t v;
        memcpy(&v,
               rig_area_copy(rig_end_inbound(e), (unsigned)((c - 1) % 2)).base,
               8);
        T_EQ(v, rails_value(c));
        uint64_t back = ~v;
        memcpy(rig_area_copy(rig_end_outbound(e), (unsigned)((c - 1) % 2)).base,
               &back, 8);
        rig_end_ready(e, c);
    }
    /* The kernel counted every answer, none wrong. */
    rig_remote_status *s = NULL;
    size_t n = 0;
    uint64_t until = now_ns() + (uint64_t)HANG_MS * 1000000u;
    for (;;) {
        T_OK(rig_remote_query(rm, p, &s, &n, &t_err));
        if (s[0].points[0] >= trips || now_ns() > until) {
            break;
        }
        rig_remote_status_free(s, n);
        nap_ms(1);
    }
    T_EQ(s[0].points[0], trips);
    T_EQ(s[0].points[1], 0);
    T_EQ(s[0].points[2], 0);
    T_EQ(s[0].exec, MESH_BACKEND_CUDA);
    rig_remote_status_free(s, n);
    T_OK(rig_remote_unload(rm, p, &t_err));
    rig_rail_release(r);
    printf("ok: a CUDA kernel on %s ping-pongs %llu times with the "
           "controller over rail ends\n",
           m->name, (unsigned long long)trips);
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    me = t_rank;
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "--rails";
    /* Modes after which the job has failed. */
    bool kill_mode =
        strcmp(mode, "--kill") == 0 || strcmp(mode, "--kill-rail") == 0 ||
        strcmp(mode, "--crash") == 0 || strcmp(mode, "--crash-controller") == 0;
    if (provided < MPI_THREAD_SERIALIZED) {
        if (me == 0) {
            printf("SKIP: MPI provides thread level %d, below "
                   "MPI_THREAD_SERIALIZED\n",
                   provided);
        }
        MPI_Finalize();
        return 0;
    }
    if (size < 3) {
        printf("FAIL: test_rails needs at least 3 ranks\n");
        MPI_Finalize();
        return 1;
    }
    lists_make();
    T_OK(rig_job_open(MPI_COMM_WORLD, NULL, &job, &t_err));
    T_OK(rig_remote_open(job, MPI_COMM_WORLD, NULL, &rm, &t_err));
    if (me != 0) {
        /* Records make rails on the controller only. */
        rig_rail *r = NULL;
        T_ERR(rig_host_rail(rig_remote_host(rm, me), NULL, lists, NT, lists, NT,
                            &r, &t_err),
              "invalid:", "controller", NULL);
        char *msg = NULL;
        bool ok = rig_remote_serve(rm, &msg);
        if (kill_mode) {
            if (ok || msg == NULL || strncmp(msg, "failed: ", 8) != 0) {
                T_FAIL("serve: %s", ok ? "returned true" : msg);
            }
            printf("rank %d: serve: %s\n", me, msg);
        } else if (!ok) {
            T_FAIL("serve: %s", msg != NULL ? msg : "?");
        }
        free(msg);
        rig_remote_close(rm);
        rig_job_close(job);
        printf("rank %d: PASS %s\n", me, mode);
        if (kill_mode) {
            fflush(stdout);
            _exit(0); /* MPI_Finalize would wait for the dead rank */
        }
        MPI_Finalize();
        return 0;
    }
    if (strcmp(mode, "--rails") == 0) {
        test_errors();
        test_agents();
        test_controller();
        test_no_syscall();
        test_lifetimes();
        test_refusals();
        test_threads();
    } else if (strcmp(mode, "--crash") == 0) {
        test_crash();
    } else if (strcmp(mode, "--crash-controller") == 0) {
        test_crash_controller();
    } else if (strcmp(mode, "--kill-rail") == 0) {
        test_kill_rail();
    } else if (kill_mode) {
        test_kill();
    } else if (strcmp(mode, "--cuda") == 0 && argc > 2) {
        test_cuda(argv[2]);
    } else {
        T_FAIL("unknown mode %s", mode);
    }
    /* Nothing is left on any agent. */
    for (int r = 1; r < size && !kill_mode; r++) {
        int64_t *ids = NULL;
        size_t n = 9;
        T_OK(rig_remote_ends_held(rm, r, &ids, &n, &t_err));
        T_EQ(n, 0);
        T_OK(rig_remote_programs_held(rm, r, &ids, &n, &t_err));
        T_EQ(n, 0);
    }
    rig_remote_close(rm);
    rig_job_close(job);
    printf("controller: PASS %s\n", mode);
    if (kill_mode) {
        fflush(stdout);
        _exit(0);
    }
    MPI_Finalize();
    return 0;
}
