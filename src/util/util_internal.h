/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal helpers shared by every layer: errors, logging, settings, backoff,
 * lock order.
 * Hidden symbols of librig; never part of the public ABI. */
#ifndef RIG_UTIL_INTERNAL_H
#define RIG_UTIL_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define RIG_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define RIG_LIKELY(x) __builtin_expect(!!(x), 1)
#define RIG_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define RIG_PRINTF(f, a)
#define RIG_LIKELY(x) (x)
#define RIG_UNLIKELY(x) (x)
#endif

/* Sets *err (when err is not NULL) to a malloc'd printf-formatted message
 * and returns false, so callers write `return rig_err(err, "invalid: ...")`.
 * The format must start with a reason word. */
bool rig_err(char **err, const char *fmt, ...) RIG_PRINTF(2, 3);
bool rig_verr(char **err, const char *fmt, va_list ap);
/* Prefixes an existing *err with printf-formatted context ("ctx: old"),
 * keeping the reason word in front: "invalid: rail 3: send[0] ...". */
bool rig_err_wrap(char **err, const char *fmt, ...) RIG_PRINTF(2, 3);

/* Log levels of RIG_LOG (error, warn, info, debug; default warn). */
enum {
    RIG_LOG_ERROR = 0,
    RIG_LOG_WARN = 1,
    RIG_LOG_INFO = 2,
    RIG_LOG_DEBUG = 3
};
int rig_log_level(void);
void rig_log(int level, const char *fmt, ...) RIG_PRINTF(2, 3);
/* Logs at most once per flag (an atomic int of the call site). */
void rig_log_once(int *flag, int level, const char *fmt, ...) RIG_PRINTF(3, 4);

/* Ends the process with status RIG_STUCK_EXIT (EX_SOFTWARE) after an error
 * line (fmt, then "; ending this process with status 70"), logged whatever
 * RIG_LOG says: for a watch of rig's that sees a call into MPI that will
 * never return, which no wait can leave (the remote layer's, the MPI
 * transport's). */
#define RIG_STUCK_EXIT 70
_Noreturn void rig_stuck_exit(const char *fmt, ...) RIG_PRINTF(1, 2);

/* Settings: RIG_<NAME> from the environment, else the default. */
const char *rig_env_str(const char *name, const char *dflt);
/* Parses an unsigned integer setting; false with "invalid: RIG_NAME=..."
 * when set but malformed. */
bool rig_env_u64(const char *name, uint64_t dflt, uint64_t *out, char **err);
/* rig_env_u64 within [lo, hi]: "invalid: RIG_NAME=V is not in [lo, hi]"
 * and the hint, when outside. */
bool rig_env_u64_in(const char *name, uint64_t dflt, uint64_t lo, uint64_t hi,
                    const char *hint, uint64_t *out, char **err);

/* Monotonic clock in nanoseconds. */
uint64_t rig_now_ns(void);

/* A wait's backoff: spin, then yield the core, then sleep in growing steps
 * (at most 100 us) -- never a busy loop forever on an oversubscribed node;
 * when the process's wait mode gives the core away (yield, block, or auto
 * on an oversubscribed node: rig/wait.h), it yields from the start. */
typedef struct {
    uint32_t spins;
} rig_backoff;
void rig_backoff_step(rig_backoff *b);
/* The question "does this process's wait mode give the core away?", asked
 * by rig_backoff_step: the waits (src/abi/wait.c, a layer above) answer it
 * and set it when the library loads; NULL: never (spin first). */
void rig_backoff_yields(bool (*yields)(void));

/* Set by a wait (src/abi/wait.c) around the drives of its yield and nap
 * phases, where it gives the core away after each drive: a transport's
 * progress hook then looks at its worker once, as MPI's progress does
 * before each yield, where a spinning wait's drive may look several
 * times (src/rail/ucx/progress.c). */
extern _Thread_local bool rig_drive_once;

/* Set by a wait (src/abi/wait.c) around its last drive before it sleeps
 * and leaves the driving to the transport's own thread (an auto wait on
 * bulk runs): the progress hook looks at its worker once and hands it to
 * that thread (src/rail/ucx/progress.c). */
extern _Thread_local bool rig_drive_handover;

/* When a wait or test last found its count already there on an end whose
 * transport moves only when driven (rig_end_desc.progress), outside the
 * block mode and bulk runs (rig_now_ns; 0: not since the last hand-over).
 * Such a waiter drives at its next miss, so a transport's own thread may
 * stand back as it does after a drive (src/rail/ucx/progress.c): a rank
 * whose peer's runs always came before it waited never drove, and the
 * thread took each run instead (src/abi/wait.c, note_waited).  One for
 * the process: a waiter on one job's ends stands for every job's. */
extern _Atomic uint64_t rig_waited_ns;

/* Mutexes with a lock order.  Each lock has a level (1..63), stated where
 * the lock is declared; a thread takes locks in increasing level only.
 * Builds without NDEBUG check it on every rig_lock (a per-thread mask of
 * the levels held) and abort naming both levels; with NDEBUG these are
 * pthread_mutex_lock and _unlock. */
/* rig_trylock takes the lock only if it is free (true), whatever is held
 * (a try cannot wait in a cycle). */
#ifndef NDEBUG
void rig_lock(pthread_mutex_t *m, unsigned level);
bool rig_trylock(pthread_mutex_t *m, unsigned level);
void rig_unlock(pthread_mutex_t *m, unsigned level);
#else
static inline void rig_lock(pthread_mutex_t *m, unsigned level)
{
    (void)level;
    pthread_mutex_lock(m);
}
static inline bool rig_trylock(pthread_mutex_t *m, unsigned level)
{
    (void)level;
    return pthread_mutex_trylock(m) == 0;
}
static inline void rig_unlock(pthread_mutex_t *m, unsigned level)
{
    (void)level;
    pthread_mutex_unlock(m);
}
#endif

static inline void rig_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* A key that two processes share when they share a kernel (its boot id),
 * the namespace ns of /proc/self/ns ("pid": one's pid means the other's
 * process; "ipc": one attaches the other's System V segments) and host:
 * "<boot id>/<ns inode>/<host>". */
void rig_node_key(char *out, size_t len, const char *ns, const char *host);

#endif

/* MPI's errors in rig's words, for the layers that call MPI (src/README.md:
 * rail/base, the transports, job).  Outside the include guard, and only
 * where <mpi.h> came first: util itself stays on libc (check_layers.sh),
 * as the one MPI symbol, MPI_Error_string, is referenced from the
 * caller's object; a file that includes this header before <mpi.h> and
 * uses the helper fails to compile, it cannot go wrong quietly. */
#if defined(MPI_VERSION) && !defined(RIG_UTIL_MPI_ERR)
#define RIG_UTIL_MPI_ERR
#include <stdio.h>

/* "system: CALL failed: <MPI's words for rc>" into *err (when err is not
 * NULL); false, so that callers write `return rig_err_mpi(err, rc, ...)`. */
static inline bool rig_err_mpi(char **err, int rc, const char *call)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS) {
        snprintf(s, sizeof(s), "MPI error %d", rc);
    }
    return rig_err(err, "system: %s failed: %s", call, s);
}
#endif
