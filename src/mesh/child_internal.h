/* SPDX-License-Identifier: BSD-3-Clause */
/* Child processes the executors start (native nodes, CUDA MPS workers,
 * the wasm backend's compilers).
 *
 * Each executor keeps its live children's pids in a process-wide table of
 * its own, so that its cleanup (mesh_backend_on_cleanup) can kill them from
 * any exit path, in the executor's order.  Children are reaped by pid only
 * (waitid on that pid), so the application's other children are left
 * alone, and a pid leaves the table before it is reaped, so a cleanup never
 * signals a recycled pid.  Only src/mesh includes this. */
#ifndef MESH_CHILD_INTERNAL_H
#define MESH_CHILD_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A table of live children; define one with MESH_CHILD_TABLE. */
typedef struct {
    _Atomic pid_t *pids; /* 0: a free entry */
    size_t cap;
    _Atomic pid_t owner; /* the process that added the children */
} mesh_child_table;

/* A static table of n entries, zero (empty) at start. */
#define MESH_CHILD_TABLE(name, n)                                              \
    static _Atomic pid_t name##_pids_[n];                                      \
    static mesh_child_table name = {.pids = name##_pids_, .cap = (n)}

/* Adds pid (any thread); the calling process becomes the owner.  False
 * when the table is full. */
bool mesh_child_add(mesh_child_table *t, pid_t pid);

/* Reaps pid if it has ended, without blocking: true when it is gone, with
 * its wait status in *status (0 when someone else reaped it); false while
 * it runs.  The pid leaves t (may be NULL) before it is reaped. */
bool mesh_child_reap(mesh_child_table *t, pid_t pid, int *status);

/* Reaps pid, waiting at most ms: true when it is gone (as mesh_child_reap). */
bool mesh_child_reap_within(mesh_child_table *t, pid_t pid, uint32_t ms,
                            int *status);

/* SIGKILLs every child in t, then, when reap_ms is not 0, reaps them,
 * waiting at most reap_ms for each; t is empty afterwards.  Acts only in
 * the owner process (not in a forked child of it).  Async-signal-safe: a
 * cleanup may call it from a signal handler. */
void mesh_child_kill_all(mesh_child_table *t, uint32_t reap_ms);

/* What a wait status says went wrong (malloc'd): "killed by signal 9",
 * "exited with status 3"; NULL for a clean exit (or no memory). */
char *mesh_child_why(int status);

/* Writes all n bytes of p to fd (EINTR resumes): what a child's image
 * file or pipe gets; false on an error or a write of 0. */
bool mesh_child_write_all(int fd, const uint8_t *p, size_t n);

/* Sleep ns nanoseconds, or ms milliseconds (EINTR resumes);
 * async-signal-safe. */
void mesh_child_sleep_ns(uint64_t ns);
void mesh_child_sleep_ms(uint32_t ms);

/* ---- process trees: a keeper per program ------------------------------ */

/* What mesh_child_spawn runs, in a tree of its own (src/mesh/keeper). */
typedef struct {
    char *const *argv; /* the program and its arguments */
    char *const *envp; /* its environment */
    /* fds[i] >= 0 becomes the program's descriptor 3 + i; -1: none.  Any
     * other descriptor of the caller stays out (but 0, 1 and 2). */
    int fds[4];
    /* 3..6: the program is the file of that descriptor (fexecve); -1:
     * argv[0], searched in PATH. */
    int exec_fd;
    /* NULL: stdio as the caller's; else stdin is /dev/null and stdout and
     * stderr go to this file (truncated, made 0600). */
    const char *log;
    size_t stack_bytes; /* the program's RLIMIT_STACK; 0: the caller's */
} mesh_child_spec;

/* Starts s's program under a keeper (a child of the caller, *keeper its
 * pid), which makes everything the program starts end with it: when the
 * program ends, the keeper kills what it left (its process group and any
 * process orphaned below it), then exits as the program did, so reaping
 * the keeper (mesh_child_reap) gives the program's own wait status.  The
 * keeper also ends the tree when the caller's process is gone.  Any thread.
 * Errors: "system: " (memfd, posix_spawn), "invalid: " (a bad spec),
 * "nomem: ". */
bool mesh_child_spawn(const mesh_child_spec *s, pid_t *keeper, char **err);

/* Asks keeper's program to stop: SIGTERM to its process group. */
void mesh_child_term(pid_t keeper);
/* Ends keeper's whole tree now (SIGKILL to every process of it); the
 * keeper then exits "killed by signal 9".  Async-signal-safe. */
void mesh_child_end(pid_t keeper);
/* mesh_child_end for every keeper in t (t keeps them: they are reaped as
 * usual).  Acts only in the owner process.  Async-signal-safe: the
 * executors' exit cleanup. */
void mesh_child_end_all(mesh_child_table *t);

#endif
