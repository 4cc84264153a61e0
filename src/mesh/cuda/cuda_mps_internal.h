/* SPDX-License-Identifier: BSD-3-Clause */
/* Internals of MPS isolation: the worker's command protocol (cuda_mps.c
 * <-> cuda_worker.c), the private daemons (cuda_mps_daemon.c), finding the
 * programs (cuda_mps_programs.c) and the backend's MPS side (cuda_mps.c).
 * The image and mailbox code the backend and its workers share is in
 * cuda_internal.h.  Only src/mesh/cuda includes this. */
#ifndef MESH_CUDA_MPS_INTERNAL_H
#define MESH_CUDA_MPS_INTERNAL_H

#include "cuda_internal.h"

#include "../child_internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- the worker's protocol (cuda_mps.c <-> cuda_worker.c) --------------- */

/* The fds a worker starts with. */
#define MESH_MPS_FD_MAILBOX 3 /* the mailbox memfd */
#define MESH_MPS_FD_SOCK 4    /* its end of the command socket */
#define MESH_MPS_FD_CUBIN 5   /* a sealed memfd of the cubin */

/* How long a worker waits for an MPS server that recovers from a fatal
 * fault (within the backend's wait for its first reply, 30 s). */
#define MESH_MPS_RECOVER_MS 10000u

/* argv: the program, then these, in this order. */
enum {
    MESH_MPS_ARG_DEVICE = 1, /* device ordinal */
    MESH_MPS_ARG_NAME,       /* program name */
    MESH_MPS_ARG_ENTRY,      /* kernel name */
    MESH_MPS_ARG_THREADS,
    MESH_MPS_ARG_SHARED,
    MESH_MPS_ARG_SCRATCH,
    MESH_MPS_ARG_REG_CAP,
    MESH_MPS_ARG_STACK,   /* CU_LIMIT_STACK_SIZE, 0: the driver's */
    MESH_MPS_ARG_WAIT_MS, /* how long exit waits for a launch */
    MESH_MPS_ARGS
};

/* Commands, one fixed-size record each on a SOCK_SEQPACKET socket; every
 * command gets one reply.  The worker speaks first: a reply to an implied
 * MESH_MPS_LOAD once its image is loaded (or why not). */
enum {
    MESH_MPS_LOAD = 0,   /* (implied) reply: regs, local, max_blocks, scratch,
                            stack */
    MESH_MPS_LAUNCH = 1, /* slot, nodes */
    MESH_MPS_QUERY = 2,  /* reply: done, fault */
    MESH_MPS_GLOBAL = 3, /* name; reply: value */
    MESH_MPS_EXIT = 4    /* release everything and exit 0 */
};

typedef struct {
    uint32_t op;
    uint32_t slot;
    uint32_t nodes;
    uint32_t reserved_;
    char name[64];
} mesh_mps_cmd;

typedef struct {
    uint32_t op; /* the command answered */
    uint32_t ok; /* 1; 0: err says why */
    uint32_t done;
    int32_t fault; /* the CUresult that ended the launch; 0: none */
    uint32_t value;
    uint32_t regs;
    uint32_t local;
    uint32_t max_blocks;
    uint64_t scratch;
    uint64_t stack; /* the context's CU_LIMIT_STACK_SIZE */
    char err[432];  /* ok 0: the message; a fault: the CUresult's name */
} mesh_mps_reply;

_Static_assert(sizeof(mesh_mps_cmd) == 80, "command size");
_Static_assert(sizeof(mesh_mps_reply) == 480, "reply size");

/* ---- finding the programs (cuda_mps_programs.c) ------------------------- */

/* The worker program's file name. */
#define MESH_MPS_WORKER_NAME "rig-cuda-worker"

/* Where MPS isolation's two programs are: nvidia-cuda-mps-control (PATH,
 * then the toolkit's bin) and rig-cuda-worker ($RIG_MESH_CUDA_WORKER, else
 * the installed one).  Errors: "unsupported: " naming what is missing. */
bool mesh_cuda_mps_check(char **err);
/* As mesh_cuda_mps_check, and *ctl (ctl may be NULL) is the control
 * program's path (malloc'd, shorter than PATH_MAX). */
bool mesh_cuda_mps_find(char **ctl, char **err);
/* The worker program: $RIG_MESH_CUDA_WORKER, else the installed one. */
const char *mesh_cuda_mps_worker_path(void);

/* ---- the daemons (cuda_mps_daemon.c) ------------------------------------- */

typedef struct mesh_cuda_mps_daemon mesh_cuda_mps_daemon;

/* Takes one of the process's daemon entries, registers the MPS cleanup,
 * makes the private folders and starts the control program ctl (owned,
 * freed) with -d, then waits for its control pipe.  Errors: "limits: "
 * (too many backends in MPS isolation), "system: ", "nomem: ". */
bool mesh_cuda_mps_daemon_start(char *ctl, mesh_cuda_mps_daemon **out,
                                char **err);
/* Quits the daemon, removes its folders and frees its entry (NULL:
 * nothing).  Its workers must be gone. */
void mesh_cuda_mps_daemon_stop(mesh_cuda_mps_daemon *d);
/* The environment the daemon's clients start with (CUDA_MPS_*): valid
 * while d runs. */
char **mesh_cuda_mps_daemon_env(const mesh_cuda_mps_daemon *d);
/* The process-wide table of live workers, which the MPS cleanup kills. */
mesh_child_table *mesh_cuda_mps_workers(void);

/* ---- the backend's MPS side (cuda_mps.c) -------------------------------- */

typedef struct mesh_cuda_mps mesh_cuda_mps;

/* Starts the private control daemon of a backend: inner is its compiler
 * (the MPS compiler wraps it), mailbox_fd the mailbox workers map, device
 * the ordinal.  Errors: "unsupported: " (mesh_cuda_mps_check), "system: ". */
bool mesh_cuda_mps_open(const mesh_compiler *inner, int mailbox_fd,
                        uint32_t device, uint32_t wait_ms, mesh_cuda_mps **out,
                        char **err);
/* Stops every worker still running, quits the daemon, removes its folders. */
void mesh_cuda_mps_close(mesh_cuda_mps *m);

/* The compiler of MPS mode: inner's prepare, then a worker started with the
 * image loaded, in p->kernel. */
const mesh_compiler *mesh_cuda_mps_compiler(mesh_cuda_mps *m);
/* Workers started from now on set this stack limit (0: the driver's). */
void mesh_cuda_mps_set_stack(mesh_cuda_mps *m, size_t bytes);
/* The stack limit workers have: the one set, else what the last worker
 * started reported.  Errors: "unsupported: " before any worker started
 * (the backend has no context of its own to ask). */
bool mesh_cuda_mps_stack(mesh_cuda_mps *m, size_t *out, char **err);

/* The kernel ops of both isolation modes (cuda_launch.c): an MPS worker's
 * kernel is one whose mesh_cuda_usage says mps. */
extern const mesh_kernel_ops mesh_cuda_kernel_ops;

/* Whether k is an MPS worker's kernel (of any backend). */
bool mesh_cuda_mps_kernel(const mesh_kernel *k);
/* The kernel ops global_u32 and drop for a worker's kernel: a command to
 * the worker, and its end (EXIT, then SIGKILL after the wait). */
bool mesh_cuda_mps_global_u32(const mesh_kernel *k, const char *name,
                              uint32_t *out, char **err);
void mesh_cuda_mps_drop(mesh_kernel *k);
/* The worker's pid, or -1 when it is gone (k an MPS kernel). */
pid_t mesh_cuda_mps_pid(const mesh_kernel *k);

/* The backend's ops for an MPS kernel, errors as theirs. */
bool mesh_cuda_mps_launch(const mesh_kernel *k, uint32_t slot, uint32_t nodes,
                          char **err);
/* A worker that is gone counts as done; crashed then says why.  A sticky
 * fault (mesh_cu_sticky) reaches every client of the MPS server, which
 * "will wait for [them] to exit and reject any new client requests"
 * (MPS documentation, error containment): prepare then refuses new
 * programs ("load: ") until every worker that lived at the fault is gone. */
bool mesh_cuda_mps_query(const mesh_kernel *k, bool *done, char **err);
char *mesh_cuda_mps_crashed(const mesh_kernel *k, uint32_t slot);
/* Ends the worker (EXIT, then SIGKILL after the wait) and frees k. */
bool mesh_cuda_mps_unload(mesh_kernel *k, char **err);

#endif
