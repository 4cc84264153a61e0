/* SPDX-License-Identifier: BSD-3-Clause */
/* A native program for the tests; argv[1] picks how its nodes behave.
 *
 *   ok        online, then steps (point 0 = steps) until halted
 *   finish N  online, N steps, writes (node + 1) * 111 to scratch[node]
 *   crash     as ok, but node 2 (or the last) dies by SIGSEGV soon after
 *             all nodes are online
 *   stubborn  online, then ignores P_HALT and SIGTERM
 *   never     never goes online; leaves when halted
 *   echo      online, then raises point 0 to scratch word 0 whenever the
 *             host changes it, until halted (benchmarks/mesh_bench.c)
 *   flash     online, then dies by SIGSEGV at once
 *   spawn H   starts two children and a daemon (setsid, forked again),
 *             each sleeping, and writes their pids to the file
 *             $RIG_TEST_PIDS/node<n>, then does as H says: exit (online,
 *             exit 0), run (online, until halted), crash (online,
 *             SIGSEGV), never (never online)
 *   corrupt   online, steps a little, then writes 0xff over the whole of
 *             its own page (the only words of the host it can reach),
 *             which it then reads as a halt
 *   online2 H node 0 goes online twice (careless: the API twice;
 *             hostile: N_ONLINE = 2 in its page), node 1 only after
 *             500 ms; both then run until halted
 *
 * Every mode leaves by itself after 30 s, so a failed test leaks nothing
 * for long. */
#include "mesh/worker.h"

#include "mesh/abi/control_block.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GUARD_MS 30000

#include "real_signals.h"

static void nap(void)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000L};
    nanosleep(&ts, NULL);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A process of the tree a node leaves behind: it sleeps, then leaves. */
static _Noreturn void linger(void)
{
    sleep_ms(GUARD_MS);
    _exit(0);
}

/* Two children and a daemon; their pids go to $RIG_TEST_PIDS/node<n>. */
static bool spawn_tree(mesh_worker *w)
{
    const char *dir = getenv("RIG_TEST_PIDS");
    _Atomic pid_t *daemon = mmap(NULL, sizeof(*daemon), PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (dir == NULL || daemon == MAP_FAILED) {
        return false;
    }
    pid_t kids[2];
    for (int c = 0; c < 2; c++) {
        kids[c] = fork();
        if (kids[c] == 0) {
            linger();
        }
    }
    pid_t mid = fork();
    if (mid == 0) {
        setsid();
        if (fork() == 0) {
            atomic_store(daemon, getpid());
            linger();
        }
        _exit(0);
    }
    waitpid(mid, NULL, 0);
    for (int i = 0; i < 10000 && atomic_load(daemon) == 0; i++) {
        sleep_ms(1);
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/node%u", dir, mesh_worker_node(w));
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        return false;
    }
    fprintf(f, "%d %d %d\n", (int)kids[0], (int)kids[1],
            (int)atomic_load(daemon));
    return fclose(f) == 0 && atomic_load(daemon) != 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "ok";
    const char *how = argc > 2 ? argv[2] : "";
    mesh_worker *w = NULL;
    char *err = NULL;
    /* The raw page (fd 3, as mesh/worker.h says), mapped before attach
     * closes it: what a hostile node has in hand. */
    mesh_cb_node *raw = NULL;
    if (strcmp(mode, "corrupt") == 0 || strcmp(mode, "online2") == 0) {
        raw = mmap(NULL, MESH_CB_NODE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED,
                   3, 0);
        if (raw == MAP_FAILED) {
            return 4;
        }
    }
    if (!mesh_worker_attach(&w, &err)) {
        fprintf(stderr, "worker_prog: %s\n", err != NULL ? err : "?");
        free(err);
        return 2;
    }
    uint32_t node = mesh_worker_node(w);
    uint32_t nodes = mesh_worker_nodes(w);
    if (strcmp(mode, "flash") == 0) {
        mesh_worker_online(w);
        raise(SIGSEGV);
        return 5;
    }
    if (strcmp(mode, "spawn") == 0) {
        if (!spawn_tree(w)) {
            mesh_worker_fail(w, 1);
            return 3;
        }
        if (strcmp(how, "never") != 0) {
            mesh_worker_online(w);
        }
        if (strcmp(how, "exit") == 0) {
            mesh_worker_detach(w);
            return 0;
        }
        if (strcmp(how, "crash") == 0) {
            raise(SIGSEGV);
        }
        mode = strcmp(how, "never") == 0 ? "never" : "ok";
    }
    if (strcmp(mode, "online2") == 0) {
        if (node == 1) {
            sleep_ms(500);
            mesh_worker_online(w);
        } else if (strcmp(how, "hostile") == 0) {
            mesh_worker_online(w);
            atomic_store(&raw->online, 2);
        } else {
            mesh_worker_online(w);
            mesh_worker_online(w);
        }
        mode = "ok";
    }
    if (strcmp(mode, "corrupt") == 0) {
        mesh_worker_online(w);
        for (int i = 0; i < 20; i++) {
            mesh_worker_point(w, 0, (uint64_t)i + 1);
            nap();
        }
        memset(raw, 0xff, MESH_CB_NODE_BYTES);
        mode = "ok";
    }
    if (strcmp(mode, "stubborn") == 0) {
        signal(SIGTERM, SIG_IGN);
    }
    if (strcmp(mode, "never") != 0) {
        mesh_worker_online(w);
    }
    if (strcmp(mode, "echo") == 0) {
        size_t bytes = 0;
        _Atomic uint64_t *word = mesh_worker_scratch(w, &bytes);
        uint64_t seen = 0;
        while (word != NULL && !mesh_worker_halted(w)) {
            uint64_t v = atomic_load_explicit(word, memory_order_acquire);
            if (v != seen) {
                seen = v;
                mesh_worker_point(w, 0, v);
            }
        }
        mesh_worker_detach(w);
        return word != NULL ? 0 : 3;
    }
    long steps = strcmp(mode, "finish") == 0 && argc > 2 ? atol(argv[2]) : -1;
    uint32_t victim = nodes > 2 ? 2 : nodes - 1;
    /* The victim dies only once the launch is up (slow starts: TSan). */
    for (long i = 0; strcmp(mode, "crash") == 0 && node == victim &&
                     mesh_worker_online_nodes(w) < nodes && i < GUARD_MS;
         i++) {
        nap();
    }
    for (long i = 0; i < GUARD_MS; i++) {
        if (steps >= 0 && i >= steps) {
            break;
        }
        if (strcmp(mode, "stubborn") != 0 && mesh_worker_halted(w)) {
            break;
        }
        if (strcmp(mode, "crash") == 0 && node == victim && i == 20) {
            raise(SIGSEGV);
        }
        mesh_worker_point(w, 0, (uint64_t)i + 1);
        nap();
    }
    if (strcmp(mode, "finish") == 0) {
        size_t bytes = 0;
        uint64_t *scratch = mesh_worker_scratch(w, &bytes);
        if (scratch == NULL || bytes < (node + 1) * sizeof(uint64_t)) {
            mesh_worker_fail(w, 1);
            return 3;
        }
        scratch[node] = (node + 1) * 111u;
    }
    mesh_worker_detach(w);
    return 0;
}
