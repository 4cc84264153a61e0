/* SPDX-License-Identifier: BSD-3-Clause */
/* The remote layer (rig/remote.h): rank 0 controls, every other rank is an
 * agent serving it.
 *
 * Usage: test_remote MODE
 *   --basic        records on every rank; native and wasm programs loaded
 *                  on every agent and run to a checked result, launched
 *                  twice; a load onto one agent; a crash reported once
 *                  per machine; unload leaves nothing held
 *   --hash         (RIG_REMOTE_TEST_CORRUPT=2) agent 2 changes a byte of
 *                  the image: the load fails with "hash:" naming it and
 *                  nothing stays loaded; a load onto agent 1 alone works
 *   --unsupported  agent 2 offers native only: a wasm program is refused
 *                  before any byte is sent, naming it; agent 1 runs it
 *   --cycles N     N load/launch/wait/unload cycles, every fourth image
 *                  of 8 MiB; no process, fd or memory left behind on any
 *                  rank (agents are read through /proc: every rank must be
 *                  on one node, else SKIP)
 *   --keep         the staging memory agents keep for later loads:
 *                  RIG_REMOTE_KEEP_BYTES's bound, reuse, no growth
 *                  (read through /proc: one node, else SKIP)
 *   --kill-load    (3 ranks, --enable-recovery) agent 2 is killed while it
 *                  takes in an image: the load and agent 1's serve return
 *                  "failed:" within 2 s
 *   --kill-run     (3 ranks, --enable-recovery) agent 2 is killed while its
 *                  program runs: rig_remote_wait and agent 1's serve
 *                  return "failed:" within 2 s; no node is left running
 *   --kill-open    (3 ranks, --enable-recovery) agent 2 dies instead of
 *                  opening the layer: rig_remote_open returns "failed:"
 *                  naming it on ranks 0 and 1 within 2 s
 *   --kill-close   (3 ranks, --enable-recovery) agent 2, stopped so that
 *                  it cannot answer, is killed 200 ms into the
 *                  controller's rig_remote_close: it returns within 2 s
 *   --late R       rank R opens the layer 2 s after the others: their
 *                  rig_remote_open waits for it without spinning (CPU
 *                  used over the wait, bounded), then every rank has
 *                  the table
 *   --kill-controller  (3 ranks, --enable-recovery) the controller dies
 *                  while programs run: every agent's serve returns
 *                  "failed:" within 2 s and its nodes end
 *   --stuck        (3 ranks, --enable-recovery, RIG_REMOTE_STUCK_MS set)
 *                  the controller's MPI_Testall never returns once a load
 *                  began (this program's own MPI_Testall, as Open MPI
 *                  4.1's TCP BTL does after a peer's death): the watch
 *                  ends the controller after RIG_REMOTE_STUCK_MS, and
 *                  every agent's serve returns "failed:" within 2 s of it
 *   --badinput     every function of rig/remote.h with bad arguments
 *   --mpmd         the controller alone (np 1 of an MPMD launch whose
 *                  other ranks run rig_agent)
 *   --threads      two threads load, run and unload programs at once while
 *                  a third reads every host's threads(); rig_remote_wait
 *                  on a program that runs until halted: its timeout
 *                  names every machine, and a halt from another thread
 *                  meanwhile ends it ("invalid: ... not launched")
 *   --cuda DIR     (under the stand-in CUDA driver) a Device proxy per
 *                  machine, and DIR's counter example counting on each
 * Programs: REMOTE_PROGRAMS (mpi_tests/remote/programs of the build). */
#include "../../tests/sanitizer.h"
#include "../mpitest.h"

#include <rig/remote.h>

#include <mesh/loader.h>

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

static const bool asan = RIG_TEST_ASAN;

#define SUM_N 100000ull
#define SUM_UNIT (SUM_N * (SUM_N + 1) / 2) /* node k's sum: (k + 1) * it */
#define HANG_MS 60000u                     /* a hang guard, not a bound */

static rig_job *job;
static rig_remote *rm;
static int me, size;
static const char *root = REMOTE_PROGRAMS;
static mesh_payload kept_image; /* --kill-load: reachable to the end */

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

/* ---- /proc, for the leak and kill checks --------------------------------- */

static bool one_node(void)
{
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    for (int r = 1; r < size; r++) {
        if (strcmp(rig_remote_machine_of(rm, r)->hostname, host) != 0) {
            return false;
        }
    }
    return true;
}

/* Whether every agent runs on this rank's kernel, so that an agent's pid
 * is one this rank can kill and its clock this rank's: on one node, or on
 * the simulated hosts of mpi_tests/multihost (network and UTS namespaces
 * of one kernel; its bed sets RIG_MH_HOSTS in every rank). */
static bool one_kernel(void)
{
    return one_node() || getenv("RIG_MH_HOSTS") != NULL;
}

/* The controller may signal agent 2 by its pid; else the test skips,
 * saying so. */
static bool can_signal_agents(void)
{
    if (one_kernel()) {
        return true;
    }
    printf("SKIP: the test stops or kills agent 2 by its pid: every rank "
           "must be on one node (or a simulated host of it)\n");
    return false;
}

static int count_fds(int pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    if (d == NULL) {
        return -1;
    }
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        n += e->d_name[0] != '.';
    }
    closedir(d);
    return n;
}

static long status_kb(int pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    size_t kl = strlen(key);
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, key, kl) == 0) {
            v = atol(line + kl);
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return v;
}

/* Processes whose parent is pid. */
static int children(int pid)
{
    DIR *d = opendir("/proc");
    int n = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') {
            continue;
        }
        char path[300], buf[512];
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL) {
            continue;
        }
        size_t got = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[got] = '\0';
        const char *rp = strrchr(buf, ')');
        int ppid = -1;
        char st;
        if (rp != NULL && sscanf(rp + 1, " %c %d", &st, &ppid) == 2 &&
            ppid == pid) {
            n++;
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

/* ---- checks -------------------------------------------------------------- */

/* Every rank: the table and the records. */
static void check_records(void)
{
    T_EQ(rig_remote_machines(rm), (uint64_t)(size - 1));
    T_ASSERT(rig_remote_machine_of(rm, 0) == NULL);
    T_ASSERT(rig_remote_machine_of(rm, size) == NULL);
    T_ASSERT(rig_remote_host(rm, 0) == NULL);
    const rig_remote_proxy *px = NULL;
    size_t np = rig_remote_proxies(rm, &px);
    size_t hosts = 0;
    for (size_t i = 0; i < np; i++) {
        const rig_remote_proxy *p = &px[i];
        const rig_remote_machine *m = rig_remote_machine_of(rm, p->rank);
        T_ASSERT(m != NULL);
        /* Found under the key, and the record is the proxy's. */
        T_ASSERT(rig_remote_abi_find(&p->fact, 1) == &p->record);
        T_ASSERT(rig_remote_find(rm, p->name) == p);
        size_t nl = strlen(p->name), ml = strlen(m->name);
        T_ASSERT(nl >= ml && strcmp(p->name + nl - ml, m->name) == 0);
        if (p->record.kind == RIG_PROXY_HOST) {
            hosts++;
            T_ASSERT(strcmp(p->name, m->name) == 0);
            const rig_host *h = &p->record.u.host;
            T_ASSERT(strcmp(h->machine, m->name) == 0);
            T_ASSERT(h->impl == rig_remote_host(rm, p->rank)->impl);
            int32_t *t = NULL;
            T_EQ(rig_host_threads(h, 987654, &t), 0);
            T_ASSERT(t == NULL);
        } else {
            T_EQ(p->record.kind, RIG_PROXY_DEVICE);
            T_ASSERT(m->executors[MESH_BACKEND_CUDA].runs);
            T_EQ(p->record.u.device.id, m->executors[MESH_BACKEND_CUDA].device);
        }
    }
    T_EQ(hosts, (uint64_t)(size - 1));
    for (int r = 1; r < size; r++) {
        const rig_remote_machine *m = rig_remote_machine_of(rm, r);
        char want[300];
        snprintf(want, sizeof(want), "%s:%d", m->hostname, r);
        T_ASSERT(strcmp(m->name, want) == 0);
        T_EQ(m->rank, r);
        T_ASSERT(m->pid > 0 && m->cores >= 1 && m->numa_nodes >= 1);
        /* The job names the machine alike. */
        T_ASSERT(strcmp(rig_job_host(job, r)->machine, m->name) == 0);
        for (uint32_t k = 0; k < MESH_BACKEND_COUNT; k++) {
            const rig_remote_executor *e = &m->executors[k];
            T_EQ(e->kind, k);
            if (e->runs) {
                T_EQ(e->caps.kind, k);
                T_ASSERT(e->caps.sms >= 1);
            } else if (e->why == NULL ||
                       strncmp(e->why, "unsupported: ", 13) != 0) {
                T_FAIL("%s: executor %u: \"%s\"", m->name, k,
                       e->why != NULL ? e->why : "(no reason)");
            }
        }
        /* A built executor must run (DESIGN: a built backend must open). */
        T_ASSERT(m->executors[MESH_BACKEND_NATIVE].runs);
#ifdef REMOTE_HAVE_WASM
        if (!m->executors[MESH_BACKEND_WASM].runs &&
            strstr(m->executors[MESH_BACKEND_WASM].why, "left out") == NULL) {
            T_FAIL("wasm is built but does not run on %s: %s", m->name,
                   m->executors[MESH_BACKEND_WASM].why);
        }
#endif
    }
}

static bool wasm_everywhere(void)
{
    for (int r = 1; r < size; r++) {
        if (!rig_remote_machine_of(rm, r)->executors[MESH_BACKEND_WASM].runs) {
            return false;
        }
    }
    return true;
}

/* Every agent of ranks (NULL: all) holds exactly the programs want. */
static void check_held(const int64_t *want, size_t nwant)
{
    for (int r = 1; r < size; r++) {
        int64_t *ids = NULL;
        size_t n = 99;
        T_OK(rig_remote_programs_held(rm, r, &ids, &n, &t_err));
        if (n != nwant) {
            T_FAIL("machine %d holds %zu programs, expected %zu", r, n, nwant);
        }
        for (size_t i = 0; i < n; i++) {
            T_EQ(ids[i], want[i]);
        }
        free(ids);
    }
}

/* threads(p) on the controller: one entry, as the executor says. */
static void check_threads(int64_t p, const int *ranks, size_t n, uint32_t exec)
{
    for (size_t i = 0; i < n; i++) {
        const rig_remote_machine *m = rig_remote_machine_of(rm, ranks[i]);
        int32_t *t = NULL;
        T_EQ(rig_host_threads(rig_remote_host(rm, ranks[i]), p, &t), 1);
        uint32_t sms = m->executors[exec].caps.sms;
        uint32_t want = exec == MESH_BACKEND_NATIVE && sms > 256 ? 256 : sms;
        T_EQ(t[0], want);
        free(t);
    }
}

/* Launches p (nodes each), waits, and checks node k's point k. */
static void run_checked(int64_t p, uint32_t nodes, uint32_t exec)
{
    T_OK(rig_remote_launch(rm, p, nodes, &t_err));
    /* A second launch of a running program is refused. */
    T_ERR(rig_remote_launch(rm, p, nodes, &t_err), "invalid:", "already", NULL);
    T_OK(rig_remote_wait(rm, p, HANG_MS, &t_err));
    rig_remote_status *s = NULL;
    size_t n = 0;
    T_OK(rig_remote_query(rm, p, &s, &n, &t_err));
    for (size_t i = 0; i < n; i++) {
        T_EQ(s[i].state, RIG_REMOTE_DONE);
        T_EQ(s[i].exec, exec);
        T_EQ(s[i].nodes, nodes);
        T_ASSERT(s[i].why == NULL);
        T_ASSERT(strcmp(s[i].machine,
                        rig_remote_machine_of(rm, s[i].rank)->name) == 0);
        for (uint32_t k = 0; k < nodes && k < MESH_POINTS; k++) {
            T_EQ(s[i].points[k], (k + 1) * SUM_UNIT);
        }
    }
    rig_remote_status_free(s, n);
    T_OK(rig_remote_halt(rm, p, &t_err));
}

static int *all_agents(size_t *n)
{
    int *r = calloc((size_t)size, sizeof(*r));
    T_ASSERT(r != NULL);
    for (int i = 1; i < size; i++) {
        r[i - 1] = i;
    }
    *n = (size_t)size - 1;
    return r;
}

/* Program name's payload with a data file of extra bytes (0: none), so
 * that its image goes by broadcast when every agent loads it, not by a
 * send to each (a small image, at most 64 KiB). */
static void payload_of(const char *name, size_t extra, mesh_payload *out)
{
    T_OK(mesh_payload_read(root, name, out, &t_err));
    if (extra > 0) {
        uint8_t *blob = malloc(extra);
        T_ASSERT(blob != NULL);
        for (size_t i = 0; i < extra; i++) {
            blob[i] = (uint8_t)(i * 7u + 3u);
        }
        T_OK(mesh_payload_add(out, "data/blob", blob, extra, &t_err));
        free(blob);
    }
}

static int64_t load(const char *name, size_t extra, const int *ranks, size_t n)
{
    mesh_payload src;
    payload_of(name, extra, &src);
    int64_t p = 0;
    T_OK(rig_remote_load(rm, &src, ranks, n, NULL, &p, &t_err));
    mesh_payload_free(&src);
    return p;
}

/* ---- modes --------------------------------------------------------------- */

/* One launch of rcrash: its crash is reported once per machine. */
static void crash_once(int64_t p)
{
    T_OK(rig_remote_launch(rm, p, 4, &t_err));
    char *msg = NULL;
    T_ERR(rig_remote_wait(rm, p, HANG_MS, &t_err),
          "failed: ", "of program rcrash on ", &msg);
    T_ASSERT(strstr(msg, "node 2 of program rcrash on ") != NULL);
    T_ASSERT(strstr(msg, "killed by signal 11") != NULL);
    printf("controller: wait: %s\n", msg);
    free(msg);
    /* One report per machine, each once. */
    int seen[64] = {0};
    size_t got = 0;
    uint64_t until = now_ns() + (uint64_t)HANG_MS * 1000000u;
    while (got < (size_t)size - 1 && now_ns() < until) {
        char *ev = NULL;
        if (!rig_remote_event(rm, &ev)) {
            nap_ms(5);
            continue;
        }
        int which = -1;
        for (int r = 1; r < size; r++) {
            char want[320];
            snprintf(want, sizeof(want),
                     "node 2 of program rcrash on %s killed by signal 11",
                     rig_remote_machine_of(rm, r)->name);
            if (strcmp(ev, want) == 0) {
                which = r;
            }
        }
        if (which < 0 || seen[which]++ != 0) {
            T_FAIL("unexpected or repeated crash report \"%s\"", ev);
        }
        free(ev);
        got++;
    }
    T_EQ(got, (uint64_t)(size - 1));
    rig_remote_status *s = NULL;
    size_t n = 0;
    T_OK(rig_remote_query(rm, p, &s, &n, &t_err));
    for (size_t i = 0; i < n; i++) {
        T_EQ(s[i].state, RIG_REMOTE_CRASHED);
        T_ASSERT(s[i].why != NULL &&
                 strstr(s[i].why, "killed by signal 11") != NULL);
    }
    rig_remote_status_free(s, n);
    nap_ms(50);
    char *ev = NULL;
    T_ASSERT(!rig_remote_event(rm, &ev)); /* reported once */
    T_ASSERT(ev == NULL);
}

static void test_crash(void)
{
    int64_t p = 0;
    T_OK(rig_remote_load_catalog(rm, root, "rcrash", NULL, 0, &p, &t_err));
    crash_once(p);
    /* Each launch's crash is its own report. */
    T_OK(rig_remote_halt(rm, p, &t_err));
    crash_once(p);
    T_OK(rig_remote_unload(rm, p, &t_err));
}

static void test_basic(void)
{
    size_t na = 0;
    int *agents = all_agents(&na);
    rig_remote_load_info info;
    int64_t p = 0;
    mesh_payload src;
    /* 300 KiB more than rsum: the image goes by MPI_Ibcast. */
    payload_of("rsum", 300u << 10, &src);
    T_OK(rig_remote_load(rm, &src, NULL, 0, &info, &p, &t_err));
    T_EQ(info.machines, na);
    uint64_t bytes = 0;
    for (size_t i = 0; i < src.nfiles; i++) {
        bytes += src.files[i].len;
    }
    T_EQ(info.image_bytes, bytes);
    mesh_payload_free(&src);
    printf("controller: rsum loaded on %zu machines in %.2f ms (image %.2f "
           "ms, prepare %.2f ms)\n",
           na, info.total_ms, info.receive_ms, info.prepare_ms);
    check_threads(p, agents, na, MESH_BACKEND_NATIVE);
    check_held(&p, 1);
    run_checked(p, 4, MESH_BACKEND_NATIVE);
    /* Halted, still loaded: a second launch prepares the kept payload. */
    check_held(&p, 1);
    run_checked(p, 3, MESH_BACKEND_NATIVE);
    T_ERR(rig_remote_wait(rm, p, HANG_MS, &t_err), "invalid:", "not launched",
          NULL);
    T_OK(rig_remote_unload(rm, p, &t_err));
    int32_t *t = NULL;
    T_EQ(rig_host_threads(rig_remote_host(rm, 1), p, &t), 0);
    T_ERR(rig_remote_launch(rm, p, 0, &t_err), "invalid:", "no program", NULL);
    check_held(NULL, 0);

    if (wasm_everywhere()) {
        int64_t w = 0;
        T_OK(rig_remote_load_catalog(rm, root, "wsum", NULL, 0, &w, &t_err));
        check_threads(w, agents, na, MESH_BACKEND_WASM);
        run_checked(w, 3, MESH_BACKEND_WASM);
        run_checked(w, 2, MESH_BACKEND_WASM);
        T_OK(rig_remote_unload(rm, w, &t_err));
    } else {
#ifdef REMOTE_HAVE_WASM
        T_FAIL("wasm is built but an agent does not run it");
#else
        printf("controller: wasm is not built: its part is left out\n");
#endif
    }

    /* A small image goes by a send to each agent. */
    p = load("rsum", 0, NULL, 0);
    run_checked(p, 2, MESH_BACKEND_NATIVE);
    T_OK(rig_remote_unload(rm, p, &t_err));

    /* One machine only: the image goes point to point. */
    int last = size - 1;
    p = load("rsum", 300u << 10, &last, 1);
    check_threads(p, &last, 1, MESH_BACKEND_NATIVE);
    int32_t *none = NULL;
    if (size > 2) {
        T_EQ(rig_host_threads(rig_remote_host(rm, 1), p, &none), 0);
    }
    run_checked(p, 2, MESH_BACKEND_NATIVE);
    T_OK(rig_remote_unload(rm, p, &t_err));
    check_held(NULL, 0);

    test_crash();
    check_held(NULL, 0);
    free(agents);
}

static void test_hash(void)
{
    T_ASSERT(size >= 3);
    int64_t p = 0;
    char *msg = NULL;
    char want[320];
    snprintf(want, sizeof(want), "hash: machine %s: program rsum hashes to ",
             rig_remote_machine_of(rm, 2)->name);
    /* Small (a send to each agent), by broadcast, by sends to agent 2
     * alone. */
    for (int way = 0; way < 3; way++) {
        mesh_payload src;
        payload_of("rsum", way == 0 ? 0 : 300u << 10, &src);
        int two = 2;
        T_ERR(rig_remote_load(rm, &src, way == 2 ? &two : NULL,
                              way == 2 ? 1 : 0, NULL, &p, &t_err),
              "hash: ", want, &msg);
        mesh_payload_free(&src);
        printf("controller: %s\n", msg);
        /* Only machine 2 refused. */
        T_ASSERT(strstr(msg, "; ") == NULL);
        free(msg);
        check_held(NULL, 0);
    }
    int one = 1;
    T_OK(rig_remote_load_catalog(rm, root, "rsum", &one, 1, &p, &t_err));
    run_checked(p, 2, MESH_BACKEND_NATIVE);
    T_OK(rig_remote_unload(rm, p, &t_err));
    check_held(NULL, 0);
}

static void test_unsupported(void)
{
    T_ASSERT(size >= 3);
    const rig_remote_machine *m2 = rig_remote_machine_of(rm, 2);
    T_ASSERT(!m2->executors[MESH_BACKEND_WASM].runs);
    T_ASSERT(strcmp(m2->executors[MESH_BACKEND_WASM].why,
                    "unsupported: left out by the options") == 0);
    int64_t p = 0;
    char *msg = NULL;
    char want[320];
    snprintf(want, sizeof(want),
             "machine %s runs native; program wsum lists wasm", m2->name);
    T_ERR(rig_remote_load_catalog(rm, root, "wsum", NULL, 0, &p, &t_err),
          "unsupported: ", want, &msg);
    printf("controller: %s\n", msg);
    free(msg);
    check_held(NULL, 0);
    if (rig_remote_machine_of(rm, 1)->executors[MESH_BACKEND_WASM].runs) {
        int one = 1;
        T_OK(rig_remote_load_catalog(rm, root, "wsum", &one, 1, &p, &t_err));
        run_checked(p, 3, MESH_BACKEND_WASM);
        T_OK(rig_remote_unload(rm, p, &t_err));
    }
    check_held(NULL, 0);
}

typedef struct {
    int fds;
    long rss_kb;
} usage_t;

static void usage_of(int pid, usage_t *u)
{
    u->fds = count_fds(pid);
    u->rss_kb = status_kb(pid, "VmRSS:");
}

/* extra > 0: the image goes by MPI_Ibcast instead of a send to each
 * agent. */
static void cycle(const char *name, size_t extra, uint32_t nodes)
{
    int64_t p = load(name, extra, NULL, 0);
    T_OK(rig_remote_launch(rm, p, nodes, &t_err));
    T_OK(rig_remote_wait(rm, p, HANG_MS, &t_err));
    T_OK(rig_remote_unload(rm, p, &t_err));
}

static void test_cycles(int n)
{
    if (!one_node()) {
        printf("SKIP: the agents are on other nodes: /proc cannot show "
               "their leaks\n");
        return;
    }
    const char *name = wasm_everywhere() ? "wsum" : "rsum";
    usage_t before[64], after[64];
    /* Every fourth image is big (8 MiB): its agents receive it into a
     * staging line they keep for the next load (rig/remote.h, "Memory an
     * agent keeps").  The warm-up makes that line, so it is in both
     * readings: a pool that grew with the loads would show here as a
     * leak of 8 MiB per agent and load. */
    for (int i = 0; i < 5; i++) { /* caches, pools, first-use maps */
        cycle("rsum", 0, 2);
        cycle("rsum", 300u << 10, 2);
        cycle(name, 0, 2);
        cycle("rsum", 8u << 20, 2);
    }
    for (int r = 0; r < size; r++) {
        usage_of(r == 0 ? getpid() : rig_remote_machine_of(rm, r)->pid,
                 &before[r]);
    }
    uint64_t t0 = now_ns();
    for (int i = 0; i < n; i++) {
        size_t extra = i % 4 == 1 ? 300u << 10 : i % 4 == 3 ? 8u << 20 : 0;
        cycle(i % 4 == 2 ? name : "rsum", extra, 2);
    }
    double ms = (double)(now_ns() - t0) / 1e6;
    for (int r = 0; r < size; r++) {
        int pid = r == 0 ? getpid() : rig_remote_machine_of(rm, r)->pid;
        usage_of(pid, &after[r]);
        printf("controller: rank %d: fds %d -> %d, RSS %ld -> %ld kB, %d "
               "children\n",
               r, before[r].fds, after[r].fds, before[r].rss_kb,
               after[r].rss_kb, children(pid));
        T_EQ(after[r].fds, before[r].fds);
        T_EQ(children(pid), 0);
        /* Generous: allocator noise, not a leak of 100 images.  ASan
         * keeps freed memory in its quarantine (LSan finds its leaks). */
        if (!asan) {
            T_ASSERT(after[r].rss_kb - before[r].rss_kb < 16 * 1024);
        }
    }
    printf("controller: %d load/launch/wait/unload cycles in %.0f ms\n", n, ms);
    check_held(NULL, 0);
}

/* The staging memory agents keep (rig/remote.h, "Memory an agent
 * keeps"): after a 32 MiB image is unloaded, each agent still holds its
 * line, and a second load of it takes that line instead of growing; with
 * RIG_REMOTE_KEEP_BYTES below the line, the line goes at unload. */
static void test_keep(void)
{
    if (!one_node()) {
        printf("SKIP: the agents are on other nodes: /proc cannot show "
               "their memory\n");
        return;
    }
    uint64_t keep = 256u << 20;
    const char *k = getenv("RIG_REMOTE_KEEP_BYTES");
    if (k != NULL && k[0] != '\0') {
        keep = strtoull(k, NULL, 0);
    }
    size_t big = 32u << 20;
    long base[64], kept[64], again[64];
    T_ASSERT(size <= 64);
    for (int r = 1; r < size; r++) {
        base[r] = status_kb(rig_remote_machine_of(rm, r)->pid, "VmRSS:");
    }
    for (int round = 0; round < 2; round++) {
        /* Launched (the line goes back from the kept payload), then not
         * (from the prepared image). */
        int64_t p = load("rsum", big, NULL, 0);
        if (round == 0) {
            run_checked(p, 2, MESH_BACKEND_NATIVE);
        }
        T_OK(rig_remote_unload(rm, p, &t_err));
        for (int r = 1; r < size; r++) {
            (round == 0 ? kept : again)[r] =
                status_kb(rig_remote_machine_of(rm, r)->pid, "VmRSS:");
        }
    }
    for (int r = 1; r < size; r++) {
        printf("controller: agent %d keeps up to %llu B: RSS %ld kB, after "
               "a 32 MiB load %ld kB, after a second %ld kB\n",
               r, (unsigned long long)keep, base[r], kept[r], again[r]);
        if (asan) {
            continue; /* its quarantine holds freed memory */
        }
        if (keep >= big + (4u << 20)) {
            T_ASSERT(kept[r] - base[r] >= 28 * 1024);
            T_ASSERT(again[r] - kept[r] < 4 * 1024);
        } else {
            T_ASSERT(kept[r] - base[r] < 8 * 1024);
            T_ASSERT(again[r] - base[r] < 8 * 1024);
        }
    }
    check_held(NULL, 0);
}

/* ---- kills --------------------------------------------------------------- */

typedef struct {
    int pid;
    long rise_kb;  /* kill once its RSS rose by this much (0: at once) */
    long delay_ms; /* or after this long */
    uint64_t t_kill;
} killer_arg;

static void *killer(void *arg)
{
    killer_arg *k = arg;
    long base = status_kb(k->pid, "VmRSS:");
    uint64_t until = now_ns() + 30000000000ull;
    if (k->delay_ms > 0) {
        nap_ms(k->delay_ms);
    }
    while (k->rise_kb > 0 && status_kb(k->pid, "VmRSS:") - base < k->rise_kb &&
           now_ns() < until) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    k->t_kill = now_ns();
    kill(k->pid, SIGKILL);
    return NULL;
}

/* Whether a failure's reason names agent r's machine, as rm_failed adds it
 * to a reason that starts with the rank ("rank 2 died (pid ...)" from the
 * watch on its process, "rank 2 is unreachable (its endpoint failed ..."
 * from UCX: either may come first). */
static bool names_machine(const char *msg, int r)
{
    char want[128];
    snprintf(want, sizeof(want), "(machine %s)",
             rig_remote_machine_of(rm, r)->name);
    return msg != NULL && strstr(msg, want) != NULL;
}

static void test_kill_load(void)
{
    T_ASSERT(size == 3);
    if (!can_signal_agents()) {
        return;
    }
    /* rsum and 96 MiB more: the load lasts long enough to be cut. */
    mesh_payload src;
    T_OK(mesh_payload_read(root, "rsum", &src, &t_err));
    size_t big = 96u << 20;
    uint8_t *blob = malloc(big);
    T_ASSERT(blob != NULL);
    memset(blob, 0x42, big);
    T_OK(mesh_payload_add(&src, "data/blob", blob, big, &t_err));
    free(blob);
    killer_arg k = {.pid = rig_remote_machine_of(rm, 2)->pid,
                    .rise_kb = 32 * 1024};
    pthread_t th;
    T_EQ(pthread_create(&th, NULL, killer, &k), 0);
    int64_t p = 0;
    char *msg = NULL;
    T_ERR(rig_remote_load(rm, &src, NULL, 0, NULL, &p, &t_err),
          "failed: ", "rank 2", &msg);
    uint64_t t_ret = now_ns();
    pthread_join(th, NULL);
    double ms = (double)(t_ret - k.t_kill) / 1e6;
    printf("controller: load with agent 2 killed: %s\n", msg);
    T_ASSERT(names_machine(msg, 2));
    printf("controller: the load returned %.1f ms after the kill (bound 2000 "
           "ms)\n",
           ms);
    free(msg);
    T_ASSERT(t_ret >= k.t_kill && ms < 2000.0);
    /* Every later call fails at once. */
    T_ERR(rig_remote_load_catalog(rm, root, "rsum", NULL, 0, &p, &t_err),
          "failed: ", "", NULL);
    /* src is not freed: MPI may still read an abandoned send's bytes
     * (rig/remote.h); the process ends without it. */
    kept_image = src;
}

static void test_kill_run(void)
{
    T_ASSERT(size == 3);
    if (!can_signal_agents()) {
        return;
    }
    int64_t p = 0;
    T_OK(rig_remote_load_catalog(rm, root, "rspin", NULL, 0, &p, &t_err));
    T_OK(rig_remote_launch(rm, p, 2, &t_err));
    killer_arg k = {.pid = rig_remote_machine_of(rm, 2)->pid, .delay_ms = 200};
    pthread_t th;
    T_EQ(pthread_create(&th, NULL, killer, &k), 0);
    char *msg = NULL;
    T_ERR(rig_remote_wait(rm, p, HANG_MS, &t_err), "failed: ", "rank 2", &msg);
    uint64_t t_ret = now_ns();
    pthread_join(th, NULL);
    double ms = (double)(t_ret - k.t_kill) / 1e6;
    printf("controller: wait with agent 2 killed: %s\n", msg);
    T_ASSERT(names_machine(msg, 2));
    printf("controller: the wait returned %.1f ms after the kill (bound 2000 "
           "ms)\n",
           ms);
    free(msg);
    T_ASSERT(t_ret >= k.t_kill && ms < 2000.0);
    T_ERR(rig_remote_query(rm, p, &(rig_remote_status *){NULL}, &(size_t){0},
                           &t_err),
          "failed: ", "", NULL);
    T_ERR(rig_remote_halt(rm, p, &t_err), "failed: ", "", NULL);
    T_ERR(rig_remote_unload(rm, p, &t_err), "failed: ", "", NULL);
}

/* --kill-close: agent 2 is stopped, so that it cannot answer the
 * controller's close, and killed 200 ms into it: rig_remote_close returns
 * within 2 s of the kill, and the job knows the death. */
static void test_kill_close(void)
{
    T_ASSERT(size == 3);
    if (!can_signal_agents()) {
        return;
    }
    int pid = rig_remote_machine_of(rm, 2)->pid;
    T_EQ(kill(pid, SIGSTOP), 0);
    killer_arg k = {.pid = pid, .delay_ms = 200};
    pthread_t th;
    T_EQ(pthread_create(&th, NULL, killer, &k), 0);
    rig_remote_close(rm);
    rm = NULL;
    uint64_t t_ret = now_ns();
    pthread_join(th, NULL);
    double ms = (double)(t_ret - k.t_kill) / 1e6;
    printf("controller: rig_remote_close returned %.1f ms after agent 2, "
           "stopped before it, was killed (bound 2000 ms)\n",
           ms);
    T_ASSERT(t_ret >= k.t_kill && ms < 2000.0);
    T_ASSERT(rig_job_failed(job));
}

/* The controller dies while programs run on every agent: each agent's
 * serve returns "failed:" within 2 s and its nodes end (mpitest.sh fails
 * the test on a process left behind).  The controller's clock of the kill
 * reaches the agents in a message sent just before it. */
#define KILL_TIME_TAG 77

static void test_kill_controller(void)
{
    int64_t p = 0;
    T_OK(rig_remote_load_catalog(rm, root, "rspin", NULL, 0, &p, &t_err));
    T_OK(rig_remote_launch(rm, p, 2, &t_err));
    nap_ms(100);
    uint64_t t = now_ns();
    for (int r = 1; r < size; r++) {
        MPI_Send(&t, 1, MPI_UINT64_T, r, KILL_TIME_TAG, MPI_COMM_WORLD);
    }
    fflush(stdout);
    raise(SIGKILL);
}

/* --stuck: MPI_Testall as MPI's profiling interface lets a program
 * replace it, which is PMPI_Testall until `stuck` is set, and then never
 * returns -- what a deadlock inside MPI looks like to its caller. */
static atomic_bool stuck;

int MPI_Testall(int count, MPI_Request reqs[], int *flag, MPI_Status st[])
{
    while (atomic_load(&stuck)) {
        pause();
    }
    return PMPI_Testall(count, reqs, flag, st);
}

/* The controller's clock when its MPI_Testall stops returning reaches the
 * agents first (as test_kill_controller's kill time). */
static void test_stuck(void)
{
    int64_t p = 0;
    T_OK(rig_remote_load_catalog(rm, root, "rsum", NULL, 0, &p, &t_err));
    uint64_t t = now_ns();
    for (int r = 1; r < size; r++) {
        MPI_Send(&t, 1, MPI_UINT64_T, r, KILL_TIME_TAG, MPI_COMM_WORLD);
    }
    printf("controller: MPI_Testall never returns from now on\n");
    fflush(stdout);
    atomic_store(&stuck, true);
    char *msg = NULL;
    rig_remote_load_catalog(rm, root, "rsum", NULL, 0, &p, &msg);
    T_FAIL("the load with a stuck MPI_Testall returned: %s",
           msg != NULL ? msg : "true");
    free(msg);
}

/* An agent after its serve returned: when the controller died. */
static uint64_t kill_time(void)
{
    uint64_t t = 0;
    MPI_Request req;
    MPI_Irecv(&t, 1, MPI_UINT64_T, 0, KILL_TIME_TAG, MPI_COMM_WORLD, &req);
    int flag = 0;
    for (int i = 0; i < 5000 && !flag; i++) {
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        if (!flag) {
            nap_ms(1);
        }
    }
    if (!flag) {
        T_FAIL("no kill time from the controller");
    }
    return t;
}

/* ---- bad input ----------------------------------------------------------- */

/* A bad argument on one rank only: every rank fails together, at once,
 * the others naming that rank -- none is left in a collective.  The last
 * agent passes a NULL job, then the controller a NULL out, then an
 * agent bad options. */
static void test_badinput_one(void)
{
    struct {
        int bad;
        const char *cause;
    } cases[] = {
        {size - 1, "invalid: job is NULL"},
        {0, "invalid: out is NULL"},
        {1, "invalid: opt->executors"},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        int bad = cases[c].bad;
        rig_remote *r = NULL;
        rig_remote_options o = {me == bad && c == 2 ? 0x100u : 0u};
        char want[160];
        snprintf(want, sizeof(want), "rank %d could not open: %s", bad,
                 cases[c].cause);
        uint64_t t0 = now_ns();
        T_ERR(rig_remote_open(me == bad && c == 0 ? NULL : job, MPI_COMM_WORLD,
                              &o, me == bad && c == 1 ? NULL : &r, &t_err),
              me == bad ? "invalid: " : "failed: ",
              me == bad ? cases[c].cause : want, NULL);
        double ms = (double)(now_ns() - t0) / 1e6;
        T_ASSERT(r == NULL);
        T_ASSERT(ms < (double)HANG_MS); /* a hang guard */
        if (me == 0) {
            printf("ok: %s on rank %d alone: every rank refused in %.1f ms\n",
                   cases[c].cause, bad, ms);
        }
    }
    T_ASSERT(!rig_job_failed(job));
}

static void test_badinput_everyone(void)
{
    rig_remote *r = NULL;
    T_ERR(rig_remote_open(NULL, MPI_COMM_WORLD, NULL, &r, &t_err),
          "invalid: ", "job", NULL);
    T_ERR(rig_remote_open(job, MPI_COMM_WORLD, NULL, NULL, &t_err),
          "invalid: ", "out", NULL);
    T_ERR(rig_remote_open(job, MPI_COMM_NULL, NULL, &r, &t_err),
          "invalid: ", "comm", NULL);
    T_ERR(rig_remote_open(job, MPI_COMM_SELF, NULL, &r, &t_err),
          "invalid: ", "comm", NULL);
    T_ASSERT(r == NULL);
    T_ERR(rig_remote_serve(NULL, &t_err), "invalid: ", "rm", NULL);
    T_ASSERT(rig_remote_job(NULL) == NULL);
    T_ASSERT(!rig_remote_is_controller(NULL));
    T_EQ(rig_remote_machines(NULL), 0);
    T_ASSERT(rig_remote_machine_of(NULL, 1) == NULL);
    const rig_remote_proxy *px = (void *)1;
    T_EQ(rig_remote_proxies(NULL, &px), 0);
    T_ASSERT(px == NULL);
    T_EQ(rig_remote_proxies(rm, NULL), 0);
    T_ASSERT(rig_remote_find(rm, NULL) == NULL);
    T_ASSERT(rig_remote_find(rm, "no such machine") == NULL);
    T_ASSERT(rig_remote_host(NULL, 1) == NULL);
    T_ASSERT(rig_remote_host(rm, -1) == NULL);
    rig_remote_close(NULL);
    rig_remote_options_init(NULL);
    rig_remote_status_free(NULL, 3);
}

static void test_badinput(void)
{
    int64_t p = 0;
    mesh_payload src;
    T_OK(mesh_payload_read(root, "rsum", &src, &t_err));
    T_ERR(rig_remote_serve(rm, &t_err), "invalid: ", "controller", NULL);
    T_ERR(rig_remote_load(NULL, &src, NULL, 0, NULL, &p, &t_err),
          "invalid: ", "rm", NULL);
    T_ERR(rig_remote_load(rm, NULL, NULL, 0, NULL, &p, &t_err),
          "invalid: ", "src", NULL);
    T_ERR(rig_remote_load(rm, &src, NULL, 0, NULL, NULL, &t_err),
          "invalid: ", "program", NULL);
    T_ERR(rig_remote_load(rm, &src, NULL, 2, NULL, &p, &t_err),
          "invalid: ", "ranks", NULL);
    int zero = 0, far = size, twice[2] = {1, 1};
    T_ERR(rig_remote_load(rm, &src, &zero, 1, NULL, &p, &t_err),
          "invalid: ", "ranks[0] = 0", NULL);
    T_ERR(rig_remote_load(rm, &src, &far, 1, NULL, &p, &t_err),
          "invalid: ", "is no agent", NULL);
    T_ERR(rig_remote_load(rm, &src, twice, 2, NULL, &p, &t_err),
          "invalid: ", "twice", NULL);
    mesh_payload empty;
    T_OK(mesh_payload_init(&empty, "empty", &t_err));
    T_ERR(rig_remote_load(rm, &empty, NULL, 0, NULL, &p, &t_err),
          "invalid: ", "manifest.json", NULL);
    mesh_payload_free(&empty);
    /* A payload made by hand past what an agent takes. */
    mesh_payload huge;
    T_OK(mesh_payload_read(root, "rsum", &huge, &t_err));
    size_t keep_len = huge.files[1].len;
    huge.files[1].len = (size_t)MESH_PAYLOAD_MAX_FILE_BYTES + 1;
    T_ERR(rig_remote_load(rm, &huge, NULL, 0, NULL, &p, &t_err),
          "limits: ", "more than", NULL);
    huge.files[1].len = keep_len;
    char *keep_name = huge.name;
    huge.name = "../evil";
    T_ERR(rig_remote_load(rm, &huge, NULL, 0, NULL, &p, &t_err),
          "invalid: ", "src->name", NULL);
    huge.name = keep_name;
    char *keep_path = huge.files[1].path;
    huge.files[1].path = "";
    T_ERR(rig_remote_load(rm, &huge, NULL, 0, NULL, &p, &t_err),
          "invalid: ", "src->files[1]", NULL);
    huge.files[1].path = keep_path;
    mesh_payload_free(&huge);
    mesh_payload bad;
    T_OK(mesh_payload_init(&bad, "bad", &t_err));
    T_OK(mesh_payload_add(&bad, "manifest.json", "{\"name\":", 8, &t_err));
    T_ERR(rig_remote_load(rm, &bad, NULL, 0, NULL, &p, &t_err),
          "manifest: ", "", NULL);
    mesh_payload_free(&bad);
    mesh_payload_free(&src);
    T_ERR(rig_remote_load_catalog(NULL, root, "rsum", NULL, 0, &p, &t_err),
          "invalid: ", "rm", NULL);
    T_ERR(rig_remote_load_catalog(rm, NULL, "rsum", NULL, 0, &p, &t_err),
          "invalid: ", "root", NULL);
    T_ERR(rig_remote_load_catalog(rm, root, NULL, NULL, 0, &p, &t_err),
          "invalid: ", "name", NULL);
    T_ERR(rig_remote_load_catalog(rm, root, "rsum", NULL, 0, NULL, &t_err),
          "invalid: ", "program", NULL);
    T_ERR(rig_remote_load_catalog(rm, root, "no_such", NULL, 0, &p, &t_err),
          "missing: ", "", NULL);
    T_ERR(rig_remote_launch(NULL, 1, 0, &t_err), "invalid: ", "rm", NULL);
    T_ERR(rig_remote_launch(rm, 4242, 0, &t_err),
          "invalid: ", "no program 4242", NULL);
    rig_remote_status *s = NULL;
    size_t n = 0;
    T_ERR(rig_remote_query(NULL, 1, &s, &n, &t_err), "invalid: ", "rm", NULL);
    T_ERR(rig_remote_query(rm, 1, NULL, &n, &t_err), "invalid: ", "out", NULL);
    T_ERR(rig_remote_query(rm, 1, &s, NULL, &t_err), "invalid: ", "n", NULL);
    T_ERR(rig_remote_query(rm, 4242, &s, &n, &t_err), "invalid: ", "no program",
          NULL);
    T_ERR(rig_remote_wait(NULL, 1, 0, &t_err), "invalid: ", "rm", NULL);
    T_ERR(rig_remote_wait(rm, 4242, 0, &t_err), "invalid: ", "no program",
          NULL);
    T_ERR(rig_remote_halt(NULL, 1, &t_err), "invalid: ", "rm", NULL);
    T_ERR(rig_remote_halt(rm, 4242, &t_err), "invalid: ", "no program", NULL);
    T_ERR(rig_remote_unload(NULL, 1, &t_err), "invalid: ", "rm", NULL);
    T_ERR(rig_remote_unload(rm, 4242, &t_err), "invalid: ", "no program", NULL);
    int64_t *ids = NULL;
    T_ERR(rig_remote_programs_held(NULL, 1, &ids, &n, &t_err),
          "invalid: ", "rm", NULL);
    T_ERR(rig_remote_programs_held(rm, 1, NULL, &n, &t_err), "invalid: ", "ids",
          NULL);
    T_ERR(rig_remote_programs_held(rm, 1, &ids, NULL, &t_err), "invalid: ", "n",
          NULL);
    T_ERR(rig_remote_programs_held(rm, 0, &ids, &n, &t_err),
          "invalid: ", "rank 0", NULL);
    T_ERR(rig_remote_programs_held(rm, size, &ids, &n, &t_err),
          "invalid: ", "no agent", NULL);
    char *ev = (char *)1;
    T_ASSERT(!rig_remote_event(NULL, &ev));
    T_ASSERT(ev == NULL);
    T_ASSERT(!rig_remote_event(rm, NULL));

    /* Host records: the checks compiled code gets from the record too. */
    const rig_host *h = rig_remote_host(rm, 1);
    const rig_transfer t = {0, 0, 64}, zero_len = {0, 0, 0};
    rig_rail *rail = NULL;
    T_ERR(rig_host_rail(h, NULL, &t, 1, &t, 1, NULL, &t_err),
          "invalid: ", "out", NULL);
    T_ERR(h->rail(h, NULL, &t, 1, &t, 1, NULL, &t_err), "invalid: ", "out",
          NULL);
    T_ERR(rig_host_rail(h, h, &t, 1, &t, 1, &rail, &t_err), "invalid: ", "peer",
          NULL);
    T_ERR(h->rail(h, h, &t, 1, &t, 1, &rail, &t_err), "invalid: ", "peer",
          NULL);
    /* The proxy's copy of the record is the same host. */
    T_ERR(h->rail(h, &rig_remote_find(rm, h->machine)->record.u.host, &t, 1, &t,
                  1, &rail, &t_err),
          "invalid: ", "peer", NULL);
    T_ERR(rig_host_rail(h, NULL, &zero_len, 1, &t, 1, &rail, &t_err),
          "invalid: ", "length", NULL);
    T_ERR(h->rail(h, NULL, &zero_len, 1, &t, 1, &rail, &t_err),
          "invalid: ", "length", NULL);
    T_ERR(h->rail(h, NULL, NULL, 0, NULL, 0, &rail, &t_err), "invalid: ", "",
          NULL);
    T_ERR(h->rail(h, NULL, NULL, 3, &t, 1, &rail, &t_err), "invalid: ", "send",
          NULL);
    T_ERR(h->rail(h, rig_job_host(job, 0), &t, 1, &t, 1, &rail, &t_err),
          "foreign: ", "", NULL);
    T_ASSERT(rail == NULL);
    /* Good lists make rails (test_rails checks what they carry). */
    T_OK(h->rail(h, NULL, &t, 1, &t, 1, &rail, &t_err));
    T_ASSERT(rig_rail_local(rail) != NULL);
    rig_rail_release(rail);
    if (size > 2) {
        T_OK(h->rail(h, rig_remote_host(rm, 2), &t, 1, &t, 1, &rail, &t_err));
        T_ASSERT(rig_rail_local(rail) == NULL && rig_rail_id(rail) > 0);
        rig_rail_release(rail);
    }
    /* Ends: bad arguments of the calls that name them. */
    T_ERR(rig_remote_ends_held(NULL, 1, &ids, &n, &t_err), "invalid: ", "rm",
          NULL);
    T_ERR(rig_remote_ends_held(rm, 1, NULL, &n, &t_err), "invalid: ", "ids",
          NULL);
    T_ERR(rig_remote_ends_held(rm, 0, &ids, &n, &t_err),
          "invalid: ", "no agent", NULL);
    rig_remote_end bad_end = {.rank = 1, .input = 0, .rail = NULL};
    T_ERR(rig_remote_load_catalog_ends(rm, root, "rsum", NULL, 0, NULL, 2, &p,
                                       &t_err),
          "invalid: ", "ends is NULL", NULL);
    T_ERR(rig_remote_load_catalog_ends(rm, root, "rsum", NULL, 0, &bad_end, 1,
                                       &p, &t_err),
          "invalid: ", "rail is NULL", NULL);
    rig_host fake = *h;
    fake.impl = NULL;
    T_ERR(h->rail(&fake, NULL, &t, 1, &t, 1, &rail, &t_err), "invalid: ", "h",
          NULL);
    int32_t *th = (int32_t *)1;
    T_EQ(h->threads(&fake, 1, &th), 0);
    T_ASSERT(th == NULL);
    T_EQ(h->threads(h, 1, NULL), 0);
}

/* Under the stand-in CUDA driver (mpi_tests/remote/test_cuda_mock.sh):
 * every agent runs CUDA, so every machine has a Device proxy; the counter
 * example compiles on every agent and counts until halted. */
static void test_cuda(const char *catalog)
{
    for (int r = 1; r < size; r++) {
        const rig_remote_machine *m = rig_remote_machine_of(rm, r);
        const rig_remote_executor *e = &m->executors[MESH_BACKEND_CUDA];
        if (!e->runs) {
            printf("SKIP: %s runs no CUDA: %s\n", m->name, e->why);
            return;
        }
        char name[320];
        snprintf(name, sizeof(name), "cuda%lld@%s", (long long)e->device,
                 m->name);
        const rig_remote_proxy *d = rig_remote_find(rm, name);
        T_ASSERT(d != NULL);
        T_EQ(d->record.kind, RIG_PROXY_DEVICE);
        T_EQ(d->record.u.device.id, e->device);
        T_ASSERT(rig_remote_abi_find(&d->fact, 1) == &d->record);
        T_ASSERT(e->caps.arch != NULL && strncmp(e->caps.arch, "sm_", 3) == 0);
    }
    int64_t p = 0;
    T_OK(rig_remote_load_catalog(rm, catalog, "counter", NULL, 0, &p, &t_err));
    for (int r = 1; r < size; r++) {
        const mesh_caps *c =
            &rig_remote_machine_of(rm, r)->executors[MESH_BACKEND_CUDA].caps;
        int32_t *t = NULL;
        T_EQ(rig_host_threads(rig_remote_host(rm, r), p, &t), 1);
        /* Resident blocks of 32 threads, at most the device's most. */
        T_ASSERT(t[0] > 0 && t[0] % 32 == 0);
        T_ASSERT((uint64_t)t[0] <= (uint64_t)c->blocks_per_sm * c->sms * 32);
        printf("controller: counter on %s: %d threads at once\n",
               rig_remote_machine_of(rm, r)->name, t[0]);
        free(t);
    }
    T_OK(rig_remote_launch(rm, p, 4, &t_err));
    uint64_t until = now_ns() + (uint64_t)HANG_MS * 1000000u;
    bool counted = false;
    while (!counted && now_ns() < until) {
        rig_remote_status *s = NULL;
        size_t n = 0;
        T_OK(rig_remote_query(rm, p, &s, &n, &t_err));
        counted = true;
        for (size_t i = 0; i < n; i++) {
            T_EQ(s[i].state, RIG_REMOTE_RUNNING);
            T_EQ(s[i].exec, MESH_BACKEND_CUDA);
            counted = counted && s[i].points[0] > 1000;
        }
        rig_remote_status_free(s, n);
        nap_ms(10);
    }
    T_ASSERT(counted);
    T_OK(rig_remote_halt(rm, p, &t_err));
    T_OK(rig_remote_unload(rm, p, &t_err));
    check_held(NULL, 0);
}

/* Two threads drive programs at once while a third reads the records:
 * the controller's calls serialize their messages (rm->lock) and the
 * records answer any thread (checked by TSan builds). */
static atomic_bool readers_stop;

static void *driver_thread(void *arg)
{
    const char *name = arg;
    for (int i = 0; i < 10; i++) {
        int64_t p = load(name, i % 2 == 0 ? 0 : 300u << 10, NULL, 0);
        run_checked(p, 2,
                    strcmp(name, "wsum") == 0 ? MESH_BACKEND_WASM
                                              : MESH_BACKEND_NATIVE);
        T_OK(rig_remote_unload(rm, p, &t_err));
    }
    return NULL;
}

static void *reader_thread(void *arg)
{
    (void)arg;
    uint64_t reads = 0;
    while (!atomic_load(&readers_stop)) {
        for (int r = 1; r < size; r++) {
            for (int64_t p = 1; p < 64; p++) {
                int32_t *t = NULL;
                size_t n = rig_host_threads(rig_remote_host(rm, r), p, &t);
                T_ASSERT(n <= 1);
                free(t);
                reads++;
            }
        }
        char *ev = NULL;
        T_ASSERT(!rig_remote_event(rm, &ev)); /* nothing crashes here */
    }
    printf("controller: %llu threads() read beside the loads\n",
           (unsigned long long)reads);
    return NULL;
}

/* rig_remote_wait waits for the agents' word, not holding the layer's
 * lock: a halt from another thread goes through and ends the wait. */
typedef struct {
    int64_t p;
    char *err;
    uint64_t t_end;
} waiter_arg;

static void *waiter_thread(void *arg)
{
    waiter_arg *w = arg;
    if (rig_remote_wait(rm, w->p, HANG_MS, &w->err)) {
        w->err = strdup("(the wait succeeded)");
    }
    w->t_end = now_ns();
    return NULL;
}

static void waits_on_spin(void)
{
    int64_t p = 0;
    T_OK(rig_remote_load_catalog(rm, root, "rspin", NULL, 0, &p, &t_err));
    T_OK(rig_remote_launch(rm, p, 1, &t_err));
    /* The timeout: rspin runs until halted; every machine is named. */
    uint64_t t0 = now_ns();
    char *msg = NULL;
    T_ERR(rig_remote_wait(rm, p, 300, &t_err), "timeout: ", "after 300 ms",
          &msg);
    double ms = (double)(now_ns() - t0) / 1e6;
    printf("controller: wait: %s (%.1f ms)\n", msg, ms);
    for (int r = 1; r < size; r++) {
        T_ASSERT(strstr(msg, rig_remote_machine_of(rm, r)->name) != NULL);
    }
    free(msg);
    T_ASSERT(ms >= 300.0 && ms < 3000.0); /* the bound; a hang guard */
    /* A wait with no end in sight, and a halt from this thread. */
    waiter_arg w = {.p = p};
    pthread_t t;
    T_EQ(pthread_create(&t, NULL, waiter_thread, &w), 0);
    nap_ms(100);
    uint64_t t_halt = now_ns();
    T_OK(rig_remote_halt(rm, p, &t_err));
    pthread_join(t, NULL);
    ms = (double)(w.t_end - t_halt) / 1e6;
    printf("controller: a wait ended %.1f ms after the halt began: %s\n", ms,
           w.err != NULL ? w.err : "(none)");
    T_ASSERT(w.err != NULL && strncmp(w.err, "invalid: ", 9) == 0 &&
             strstr(w.err, "not launched") != NULL);
    free(w.err);
    T_ASSERT(ms < 10000.0); /* a hang guard */
    T_OK(rig_remote_unload(rm, p, &t_err));
}

static void test_threads(void)
{
    pthread_t a, b, c;
    const char *second = wasm_everywhere() ? "wsum" : "rsum";
    atomic_store(&readers_stop, false);
    T_EQ(pthread_create(&c, NULL, reader_thread, NULL), 0);
    T_EQ(pthread_create(&a, NULL, driver_thread, (void *)"rsum"), 0);
    T_EQ(pthread_create(&b, NULL, driver_thread, (void *)second), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    atomic_store(&readers_stop, true);
    pthread_join(c, NULL);
    check_held(NULL, 0);
    waits_on_spin();
    check_held(NULL, 0);
}

static void test_mpmd(void)
{
    check_records();
    size_t na = 0;
    int *agents = all_agents(&na);
    int64_t p = 0;
    T_OK(rig_remote_load_catalog(rm, root, "rsum", NULL, 0, &p, &t_err));
    check_threads(p, agents, na, MESH_BACKEND_NATIVE);
    run_checked(p, 4, MESH_BACKEND_NATIVE);
    T_OK(rig_remote_unload(rm, p, &t_err));
    check_held(NULL, 0);
    free(agents);
}

/* --kill-open: agent 2 dies instead of opening the layer, 200 ms after
 * it told the others when: their rig_remote_open, a collective that waits
 * for it, returns "failed:" naming it within 2 s of the death. */
static void test_kill_open(const rig_remote_options *opt)
{
    T_ASSERT(size == 3);
    uint64_t t_kill = 0;
    if (me == 2) {
        t_kill = now_ns() + 200000000u;
        for (int r = 0; r < 2; r++) {
            MPI_Send(&t_kill, 1, MPI_UINT64_T, r, KILL_TIME_TAG,
                     MPI_COMM_WORLD);
        }
        fflush(stdout);
        while (now_ns() < t_kill) {
            nap_ms(1);
        }
        raise(SIGKILL);
    }
    MPI_Recv(&t_kill, 1, MPI_UINT64_T, 2, KILL_TIME_TAG, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
    char *msg = NULL;
    T_ERR(rig_remote_open(job, MPI_COMM_WORLD, opt, &rm, &t_err),
          "failed: ", "rank 2", &msg);
    uint64_t t_ret = now_ns();
    double ms = (double)(t_ret - t_kill) / 1e6;
    printf("rank %d: rig_remote_open returned %.1f ms after agent 2 died "
           "(bound 2000 ms): %s\n",
           me, ms, msg);
    free(msg);
    T_ASSERT(t_ret >= t_kill && ms < 2000.0);
    T_ASSERT(rm == NULL);
    rig_job_close(job);
    printf("rank %d: PASS --kill-open\n", me);
    fflush(stdout);
    _exit(0); /* MPI_Finalize would wait for the dead rank */
}

/* ---- a late rank -------------------------------------------------------- */

/* --late R: rank R opens the layer LATE_MS after the others, as a
 * controller that reads its input first, or an agent that initialises a
 * device.  The others wait inside rig_remote_open; waiting costs them
 * little CPU: the process's whole use over the open, every thread and
 * the open's own work included (measured: 56-69 ms; a wait that tested
 * without pause cost a core, 1992-2026 ms over the 2 s).
 * The bound is a guard against polling, not a measure; sanitizers make
 * every wake-up dearer (test_job's idle test). */
#define LATE_MS 2000u
#if RIG_TEST_SANITIZED
#define LATE_CPU_MS 750.0
#else
#define LATE_CPU_MS 300.0
#endif
static void test_late(const rig_remote_options *opt, int late)
{
    if (late < 0 || late >= size) {
        T_FAIL("--late %d: no such rank of %d", late, size);
    }
    t_barrier();
    if (me == late) {
        struct timespec ts = {LATE_MS / 1000u, (LATE_MS % 1000u) * 1000000L};
        nanosleep(&ts, NULL);
        T_OK(rig_remote_open(job, MPI_COMM_WORLD, opt, &rm, &t_err));
    } else {
        double c0 = t_cpu_ms();
        uint64_t t0 = now_ns();
        T_OK(rig_remote_open(job, MPI_COMM_WORLD, opt, &rm, &t_err));
        double wall = (double)(now_ns() - t0) / 1e6, used = t_cpu_ms() - c0;
        printf("rank %d: waited %.0f ms in rig_remote_open for rank %d, "
               "using %.1f ms of CPU (bound %.0f)\n",
               me, wall, late, used, LATE_CPU_MS);
        /* It did wait for the late rank (else nothing was measured). */
        T_ASSERT(wall >= 0.9 * LATE_MS);
        if (used >= LATE_CPU_MS) {
            T_FAIL("rank %d: %.1f ms of CPU while waiting %.0f ms for rank "
                   "%d to open: the wait polls instead of sleeping",
                   me, used, wall, late);
        }
    }
    check_records();
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv)
{
    /* --threads calls MPI (through the controller, one call at a time)
     * from several threads. */
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    me = t_rank;
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "--basic";
    bool kills =
        strcmp(mode, "--kill-load") == 0 || strcmp(mode, "--kill-run") == 0 ||
        strcmp(mode, "--kill-controller") == 0 ||
        strcmp(mode, "--stuck") == 0 || strcmp(mode, "--kill-close") == 0;
    if (strcmp(mode, "--threads") == 0 && provided < MPI_THREAD_SERIALIZED) {
        if (me == 0) {
            printf("SKIP: MPI provides thread level %d, below "
                   "MPI_THREAD_SERIALIZED\n",
                   provided);
        }
        MPI_Finalize();
        return 0;
    }
    if (size < 2) {
        printf("FAIL: test_remote %s needs at least 2 ranks\n", mode);
        MPI_Finalize();
        return 1;
    }
    T_OK(rig_job_open(MPI_COMM_WORLD, NULL, &job, &t_err));
    rig_remote_options opt;
    rig_remote_options_init(&opt);
    if (strcmp(mode, "--unsupported") == 0 && me == 2) {
        opt.executors = 1u << MESH_BACKEND_NATIVE;
    }
    if (strcmp(mode, "--badinput") == 0) {
        T_ERR(rig_remote_open(job, MPI_COMM_WORLD, &(rig_remote_options){0x100},
                              &rm, &t_err),
              "invalid: ", "executors", NULL);
        test_badinput_one();
    }
    if (strcmp(mode, "--kill-open") == 0) {
        test_kill_open(&opt);
    }
    if (strcmp(mode, "--late") == 0) {
        test_late(&opt, argc > 2 ? atoi(argv[2]) : 0);
    } else {
        T_OK(rig_remote_open(job, MPI_COMM_WORLD, &opt, &rm, &t_err));
    }
    T_ASSERT(rig_remote_job(rm) == job);
    T_EQ(rig_remote_is_controller(rm), me == 0);
    if (strcmp(mode, "--mpmd") != 0 && strcmp(mode, "--late") != 0) {
        check_records();
    }
    /* The kills are by pid: without one kernel the controller skips
     * them. */
    kills = kills && one_kernel();
    if (strcmp(mode, "--badinput") == 0) {
        test_badinput_everyone();
    }
    if (me != 0) {
        if (strcmp(mode, "--badinput") == 0) {
            int64_t p = 0;
            T_ERR(
                rig_remote_load_catalog(rm, root, "rsum", NULL, 0, &p, &t_err),
                "invalid: ", "controller's", NULL);
            T_ERR(rig_remote_launch(rm, 1, 0, &t_err), "invalid: ", "an agent",
                  NULL);
        }
        char *msg = NULL;
        bool ok = rig_remote_serve(rm, &msg);
        /* --kill-close: agent 1 served the close before agent 2 died. */
        if (kills && strcmp(mode, "--kill-close") != 0) {
            /* Agent 1 survives agent 2's death and is told. */
            if (ok || msg == NULL || strncmp(msg, "failed: ", 8) != 0) {
                T_FAIL("serve: %s", ok ? "returned true" : msg);
            }
            uint64_t t_ret = now_ns();
            printf("rank %d: serve: %s\n", me, msg);
            if (strcmp(mode, "--kill-controller") == 0) {
                T_ASSERT(strstr(msg, "rank 0") != NULL);
                uint64_t t_kill = kill_time();
                double ms = (double)(t_ret - t_kill) / 1e6;
                printf("rank %d: serve returned %.1f ms after the "
                       "controller's kill (bound 2000 ms)\n",
                       me, ms);
                T_ASSERT(t_ret >= t_kill && ms < 2000.0);
            }
            if (strcmp(mode, "--stuck") == 0) {
                /* Not before the limit (then it was not the watch), and
                 * within 2 s after it. */
                T_ASSERT(strstr(msg, "rank 0") != NULL);
                const char *v = getenv("RIG_REMOTE_STUCK_MS");
                double limit = v != NULL ? atof(v) : 10000.0;
                uint64_t t_stuck = kill_time();
                double ms = (double)(t_ret - t_stuck) / 1e6;
                printf("rank %d: serve returned %.1f ms after the "
                       "controller's MPI_Testall stopped returning "
                       "(RIG_REMOTE_STUCK_MS %.0f; bound %.0f-%.0f ms)\n",
                       me, ms, limit, limit, limit + 2000.0);
                T_ASSERT(ms >= limit && ms < limit + 2000.0);
            }
        } else if (!ok) {
            T_FAIL("serve: %s", msg != NULL ? msg : "?");
        }
        free(msg);
        T_ERR(rig_remote_serve(rm, &t_err), "invalid: ", "served", NULL);
        rig_remote_close(rm);
        rig_job_close(job);
        printf("rank %d: PASS %s\n", me, mode);
        if (kills) {
            fflush(stdout);
            _exit(0); /* MPI_Finalize would wait for the dead rank */
        }
        MPI_Finalize();
        return 0;
    }
    if (strcmp(mode, "--basic") == 0) {
        test_basic();
    } else if (strcmp(mode, "--hash") == 0) {
        test_hash();
    } else if (strcmp(mode, "--unsupported") == 0) {
        test_unsupported();
    } else if (strcmp(mode, "--cycles") == 0) {
        test_cycles(argc > 2 ? atoi(argv[2]) : 100);
    } else if (strcmp(mode, "--keep") == 0) {
        test_keep();
    } else if (strcmp(mode, "--kill-load") == 0) {
        test_kill_load();
    } else if (strcmp(mode, "--kill-run") == 0) {
        test_kill_run();
    } else if (strcmp(mode, "--kill-controller") == 0) {
        test_kill_controller();
    } else if (strcmp(mode, "--kill-close") == 0) {
        test_kill_close();
    } else if (strcmp(mode, "--stuck") == 0) {
        test_stuck();
    } else if (strcmp(mode, "--badinput") == 0) {
        test_badinput();
    } else if (strcmp(mode, "--mpmd") == 0) {
        test_mpmd();
    } else if (strcmp(mode, "--threads") == 0) {
        test_threads();
    } else if (strcmp(mode, "--cuda") == 0 && argc > 2) {
        test_cuda(argv[2]);
    } else if (strcmp(mode, "--late") == 0) {
        /* Measured in the open. */
    } else {
        T_FAIL("unknown mode %s", mode);
    }
    uint64_t t0 = now_ns();
    rig_remote_close(rm);
    printf("controller: rig_remote_close took %.1f ms\n",
           (double)(now_ns() - t0) / 1e6);
    rig_job_close(job);
    printf("rank 0: PASS %s\n", mode);
    if (kills) {
        fflush(stdout);
        _exit(0);
    }
    MPI_Finalize();
    return 0;
}
