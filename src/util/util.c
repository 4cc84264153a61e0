/* SPDX-License-Identifier: BSD-3-Clause */
/* Errors, logging, settings, backoff and the lock order, shared by every
 * layer. */
#include "util_internal.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool rig_verr(char **err, const char *fmt, va_list ap)
{
    if (err == NULL) {
        return false;
    }
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0) {
        msg = NULL;
    }
    *err = msg;
    return false;
}

bool rig_err(char **err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rig_verr(err, fmt, ap);
    va_end(ap);
    return false;
}

bool rig_err_wrap(char **err, const char *fmt, ...)
{
    if (err == NULL || *err == NULL) {
        return false;
    }
    char *ctx = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&ctx, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return false;
    }
    char *old = *err;
    const char *colon = strchr(old, ':');
    char *msg = NULL;
    if (colon != NULL && colon[1] == ' ' && colon - old < 16) {
        n = asprintf(&msg, "%.*s %s: %s", (int)(colon - old + 1), old, ctx,
                     colon + 2);
    } else {
        n = asprintf(&msg, "%s: %s", ctx, old);
    }
    free(ctx);
    if (n >= 0) {
        free(old);
        *err = msg;
    }
    return false;
}

int rig_log_level(void)
{
    static atomic_int level = -1;
    int l = atomic_load_explicit(&level, memory_order_relaxed);
    if (l >= 0) {
        return l;
    }
    const char *s = getenv("RIG_LOG");
    l = RIG_LOG_WARN;
    if (s != NULL) {
        if (strcmp(s, "error") == 0) {
            l = RIG_LOG_ERROR;
        } else if (strcmp(s, "info") == 0) {
            l = RIG_LOG_INFO;
        } else if (strcmp(s, "debug") == 0) {
            l = RIG_LOG_DEBUG;
        }
    }
    atomic_store_explicit(&level, l, memory_order_relaxed);
    return l;
}

static void log_line(int level, const char *line)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    fprintf(stderr, "rig[%d] %s: %s\n", (int)getpid(), names[level], line);
}

static void rig_vlog(int level, const char *fmt, va_list ap)
{
    char line[512];
    vsnprintf(line, sizeof(line), fmt, ap);
    log_line(level, line);
}

void rig_log(int level, const char *fmt, ...)
{
    if (level > rig_log_level()) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    rig_vlog(level, fmt, ap);
    va_end(ap);
}

void rig_stuck_exit(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    size_t n = strlen(line);
    snprintf(line + n, sizeof(line) - n, "; ending this process with status %d",
             RIG_STUCK_EXIT);
    log_line(RIG_LOG_ERROR, line);
    fflush(stderr);
    _exit(RIG_STUCK_EXIT);
}

void rig_log_once(int *flag, int level, const char *fmt, ...)
{
    if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED) != 0 ||
        level > rig_log_level()) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    rig_vlog(level, fmt, ap);
    va_end(ap);
}

const char *rig_env_str(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : dflt;
}

bool rig_env_u64(const char *name, uint64_t dflt, uint64_t *out, char **err)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0') {
        *out = dflt;
        return true;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 0);
    if (errno != 0 || end == v || *end != '\0' || v[0] == '-') {
        return rig_err(err, "invalid: %s=%s is not an unsigned integer", name,
                       v);
    }
    *out = (uint64_t)x;
    return true;
}

bool rig_env_u64_in(const char *name, uint64_t dflt, uint64_t lo, uint64_t hi,
                    const char *hint, uint64_t *out, char **err)
{
    if (!rig_env_u64(name, dflt, out, err)) {
        return false;
    }
    if (*out < lo || *out > hi) {
        return rig_err(err, "invalid: %s=%llu is not in [%llu, %llu] (%s)",
                       name, (unsigned long long)*out, (unsigned long long)lo,
                       (unsigned long long)hi, hint);
    }
    return true;
}

uint64_t rig_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static _Atomic(bool (*)(void)) backoff_yields;

void rig_backoff_yields(bool (*yields)(void))
{
    atomic_store_explicit(&backoff_yields, yields, memory_order_release);
}

void rig_backoff_step(rig_backoff *b)
{
    bool (*yields)(void) =
        atomic_load_explicit(&backoff_yields, memory_order_acquire);
    if (b->spins == 0 && yields != NULL && yields()) {
        b->spins = 4096; /* a shared core: give it away from the start */
    }
    uint32_t s = b->spins++;
    if (s < 4096) {
        rig_cpu_relax();
    } else if (s < 4096 + 2048) {
        sched_yield();
    } else {
        uint32_t extra = s - (4096 + 2048);
        long ns = extra >= 100 ? 100000 : 1000 * (long)(extra + 1);
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
    }
}

_Thread_local bool rig_drive_once;
_Thread_local bool rig_drive_handover;
_Atomic uint64_t rig_waited_ns;

#ifndef NDEBUG
/* The levels of the locks this thread holds, one bit each. */
static _Thread_local uint64_t locks_held;

void rig_lock(pthread_mutex_t *m, unsigned level)
{
    bool bad = level == 0 || level > 63 ||
               (locks_held & ~(((uint64_t)1 << level) - 1)) != 0;
    if (bad) {
        unsigned top = 63;
        while (top > 0 && (locks_held & ((uint64_t)1 << top)) == 0) {
            top--;
        }
        rig_log(RIG_LOG_ERROR,
                "lock order violated: taking a lock of level %u while "
                "holding one of level %u (levels must increase)",
                level, top);
        abort();
    }
    pthread_mutex_lock(m);
    locks_held |= (uint64_t)1 << level;
}

bool rig_trylock(pthread_mutex_t *m, unsigned level)
{
    /* A try never waits, so it cannot deadlock: only the level it adds
     * matters, for the locks taken under it. */
    if (pthread_mutex_trylock(m) != 0) {
        return false;
    }
    locks_held |= (uint64_t)1 << level;
    return true;
}

void rig_unlock(pthread_mutex_t *m, unsigned level)
{
    locks_held &= ~((uint64_t)1 << level);
    pthread_mutex_unlock(m);
}
#endif

void rig_node_key(char *out, size_t len, const char *ns, const char *host)
{
    char boot[64] = "?";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (f != NULL) {
        if (fgets(boot, sizeof(boot), f) == NULL) {
            snprintf(boot, sizeof(boot), "?");
        }
        fclose(f);
        boot[strcspn(boot, "\n")] = '\0';
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/ns/%s", ns);
    struct stat st;
    unsigned long long ino = 0;
    if (stat(path, &st) == 0) {
        ino = (unsigned long long)st.st_ino;
    }
    snprintf(out, len, "%s/%llx/%s", boot, ino, host);
}
