/* SPDX-License-Identifier: BSD-3-Clause */
/* A native program that drives a rail end, for the remote layer's rail
 * tests: `rail_prog MODE RUNS LEN NT [K]`, on input 0.
 *
 * The rail carries NT transfers of LEN bytes each way, back to back
 * ({k * LEN, k * LEN, LEN}).  Every run r, a machine sends byte
 * rail_byte(o, r, here) at offset o of its outbound copy r % 2 and checks
 * that its inbound copy holds rail_byte(o, r, peer) (here and peer as the
 * end names them: job ranks).  Modes:
 *   swap    RUNS runs (0: until halted), each: wait `sent` of run r - 2,
 *           write, ready, wait `arrived`, check
 *   crash   as swap, but the node dies by SIGSEGV before run K
 *   strict  RUNS runs of write and ready only (no waits), in a child
 *           process under seccomp's strict mode, where any system call
 *           but read, write and exit kills it: the fast path of
 *           mesh_end_ready to a mapped peer makes none.  Point 2: 1 when
 *           the child was killed (a system call), 2 when the check could
 *           not run (a sanitizer's runtime, or no seccomp); point 0 the
 *           runs the child readied
 * Progress points: 0 the runs done, 1 the end's `arrived` at the end, 2
 * set to 1 when a wait returned false (the rail failed or the slot was
 * halted), 3 the bytes that differed, 4 the rail's id seen through
 * mesh_worker_end (1 when it and the input's end agree).  A node exits 0
 * in every mode but crash: the test reads the points. */
#include "mesh/worker.h"

#include "../../tests/mesh/real_signals.h"
#include "../../tests/sanitizer.h"

#include <linux/seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static inline uint8_t rail_byte(uint64_t o, uint64_t r, int32_t s)
{
    return (uint8_t)((uint64_t)s * 31u + r * 7u + o * 13u + (o >> 8));
}

/* A sanitizer's runtime may make system calls. */
#define RAIL_PROG_SANITIZED RIG_TEST_SANITIZED

/* The strict mode's child: writes and readies runs runs, then exits by
 * the one exit strict mode allows (exit, not exit_group). */
static void strict_child(mesh_worker *w, mesh_end *e, uint64_t runs,
                         size_t bytes, uint64_t nt, int32_t here)
{
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0) {
        _exit(3);
    }
    for (uint64_t r = 0; r < runs; r++) {
        uint8_t *out = mesh_end_outbound(e, (unsigned)(r % 2), NULL);
        for (size_t o = 0; o < bytes; o++) {
            out[o] = rail_byte(o, r, here);
        }
        mesh_end_ready(e, (r + 1) * nt);
        mesh_worker_point(w, 0, r + 1);
    }
    syscall(SYS_exit, 0);
}

static int strict_mode(mesh_worker *w, mesh_end *e, uint64_t runs, size_t bytes,
                       uint64_t nt, int32_t here)
{
    if (RAIL_PROG_SANITIZED) {
        mesh_worker_point(w, 2, 2);
        mesh_worker_detach(w);
        return 0;
    }
    pid_t pid = fork();
    if (pid == 0) {
        strict_child(w, e, runs, bytes, nt, here);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) {
        mesh_worker_point(w, 2, 2);
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == 3) {
        mesh_worker_point(w, 2, 2); /* no seccomp here */
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        mesh_worker_point(w, 2, 1);
    }
    mesh_worker_point(w, 1, mesh_end_arrived(e));
    mesh_worker_detach(w);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: rail_prog MODE RUNS LEN NT [K]\n");
        return 2;
    }
    const char *mode = argv[1];
    uint64_t runs = strtoull(argv[2], NULL, 10);
    size_t len = (size_t)strtoull(argv[3], NULL, 10);
    uint64_t nt = strtoull(argv[4], NULL, 10);
    uint64_t crash_at = argc > 5 ? strtoull(argv[5], NULL, 10) : 0;
    bool crash = strcmp(mode, "crash") == 0;
    mesh_worker *w = NULL;
    char *err = NULL;
    if (!mesh_worker_attach(&w, &err)) {
        fprintf(stderr, "rail_prog: %s\n", err != NULL ? err : "?");
        free(err);
        return 2;
    }
    mesh_end *e = mesh_worker_input(w, 0);
    mesh_worker_online(w);
    if (e == NULL) {
        fprintf(stderr, "rail_prog: input 0 has no end here\n");
        mesh_worker_detach(w);
        return 3;
    }
    mesh_worker_point(w, 4, mesh_worker_end(w, mesh_end_id(e)) == e);
    int32_t here = mesh_end_here(e), peer = mesh_end_peer(e);
    size_t bytes = len * nt;
    if (strcmp(mode, "strict") == 0) {
        return strict_mode(w, e, runs, bytes, nt, here);
    }
    uint64_t bad = 0;
    bool failed = false;
    uint64_t r = 0;
    for (; runs == 0 || r < runs; r++) {
        if (crash && r == crash_at) {
            signal(SIGSEGV, SIG_DFL);
            raise(SIGSEGV);
        }
        if (r >= 2 && !mesh_end_wait_sent(e, (r - 1) * nt)) {
            failed = true;
            break;
        }
        size_t ob = 0, ib = 0;
        uint8_t *out = mesh_end_outbound(e, (unsigned)(r % 2), &ob);
        if (out == NULL || ob < bytes) {
            fprintf(stderr, "rail_prog: outbound of %zu bytes, need %zu\n", ob,
                    bytes);
            mesh_worker_detach(w);
            return 3;
        }
        for (size_t o = 0; o < bytes; o++) {
            out[o] = rail_byte(o, r, here);
        }
        mesh_end_ready(e, (r + 1) * nt);
        if (!mesh_end_wait_arrived(e, (r + 1) * nt)) {
            failed = true;
            break;
        }
        const uint8_t *in = mesh_end_inbound(e, (unsigned)(r % 2), &ib);
        if (in == NULL || ib < bytes) {
            fprintf(stderr, "rail_prog: inbound of %zu bytes, need %zu\n", ib,
                    bytes);
            mesh_worker_detach(w);
            return 3;
        }
        for (size_t o = 0; o < bytes; o++) {
            bad += in[o] != rail_byte(o, r, peer);
        }
        mesh_worker_point(w, 0, r + 1);
        if (runs == 0 && mesh_worker_halted(w)) {
            r++;
            break;
        }
    }
    mesh_worker_point(w, 1, mesh_end_arrived(e));
    mesh_worker_point(w, 2, failed ? 1 : 0);
    mesh_worker_point(w, 3, bad);
    mesh_worker_detach(w);
    return 0;
}
