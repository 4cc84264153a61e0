/* SPDX-License-Identifier: BSD-3-Clause */
/* A job's failure state, shared by the transports (see failure.h). */
#include "failure.h"

#include "../../util/util_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* reason_lock: innermost, taken under any transport's lock, and nothing
 * is taken under it. */
#define FAILURE_LOCK_LEVEL 62

bool rig_failure_init(rig_failure *f, int rank, int size,
                      rig_failure_gone_fn on_gone, void *self, char **err)
{
    memset(f, 0, sizeof(*f));
    atomic_init(&f->failed, false);
    atomic_init(&f->why, NULL);
    atomic_init(&f->seen, NULL);
    atomic_init(&f->replaced, NULL);
    f->sighted = -1;
    atomic_init(&f->gone, -1);
    atomic_init(&f->died, false);
    f->rank = rank;
    f->size = size;
    f->on_gone = on_gone;
    f->self = self;
    f->left = calloc((size_t)size, sizeof(*f->left));
    f->pid = calloc((size_t)size, sizeof(*f->pid));
    f->local = calloc((size_t)size, sizeof(*f->local));
    f->pidfd = malloc((size_t)size * sizeof(*f->pidfd));
    if (f->left == NULL || f->pid == NULL || f->local == NULL ||
        f->pidfd == NULL) {
        free(f->left);
        free(f->pid);
        free(f->local);
        free(f->pidfd);
        memset(f, 0, sizeof(*f));
        return rig_err(err, "nomem: failure tables for %d ranks", size);
    }
    for (int r = 0; r < size; r++) {
        atomic_init(&f->left[r], 0);
        f->pidfd[r] = -1;
    }
    pthread_mutex_init(&f->reason_lock, NULL);
    return true;
}

void rig_failure_fini(rig_failure *f)
{
    for (int r = 0; f->pidfd != NULL && r < f->size; r++) {
        rig_failure_unwatch(f, r);
    }
    if (f->left != NULL) { /* set up (a failed init leaves it NULL) */
        pthread_mutex_destroy(&f->reason_lock);
    }
    free(f->left);
    free(f->pid);
    free(f->local);
    free(f->pidfd);
    free(atomic_load(&f->why));
    free(atomic_load(&f->seen));
    free(atomic_load(&f->replaced));
    memset(f, 0, sizeof(*f));
}

/* ---- the reason ---------------------------------------------------------- */

bool rig_failure_set_sighted(rig_failure *f, const char *why, int sighted)
{
    char *mine = strdup(why != NULL ? why : "failed: (no reason)");
    rig_lock(&f->reason_lock, FAILURE_LOCK_LEVEL);
    bool first = mine != NULL && atomic_load(&f->why) == NULL;
    if (first) {
        f->sighted = sighted;
        atomic_store(&f->why, mine);
    }
    rig_unlock(&f->reason_lock, FAILURE_LOCK_LEVEL);
    if (!first) {
        free(mine);
    }
    atomic_store(&f->failed, true);
    return first;
}

bool rig_failure_set(rig_failure *f, const char *why)
{
    return rig_failure_set_sighted(f, why, -1);
}

bool rig_failure_told(rig_failure *f, int from, const char *why)
{
    char *mine = strdup(why != NULL ? why : "failed: (no reason)");
    rig_lock(&f->reason_lock, FAILURE_LOCK_LEVEL);
    char *first = atomic_load(&f->why);
    bool took =
        mine != NULL && (first == NULL || (from >= 0 && f->sighted == from));
    if (took) {
        /* A reader may hold the sighting: it stays until fini.  Replaced
         * once at most, as sighted is cleared. */
        atomic_store(&f->replaced, first);
        f->sighted = -1;
        atomic_store(&f->why, mine);
    }
    rig_unlock(&f->reason_lock, FAILURE_LOCK_LEVEL);
    if (!took) {
        free(mine);
    }
    atomic_store(&f->failed, true);
    return took;
}

int rig_failure_sighted(const rig_failure *f)
{
    rig_failure *m = (rig_failure *)f;
    rig_lock(&m->reason_lock, FAILURE_LOCK_LEVEL);
    int r = m->sighted;
    rig_unlock(&m->reason_lock, FAILURE_LOCK_LEVEL);
    return r;
}

void rig_failure_seen(rig_failure *f, const char *why)
{
    char *mine = strdup(why);
    char *none = NULL;
    if (mine != NULL &&
        !atomic_compare_exchange_strong(&f->seen, &none, mine)) {
        free(mine);
    }
    atomic_store(&f->failed, true);
}

bool rig_failure_failed(const rig_failure *f)
{
    return atomic_load(&((rig_failure *)f)->failed);
}

bool rig_failure_known(const rig_failure *f)
{
    return atomic_load(&((rig_failure *)f)->why) != NULL;
}

const char *rig_failure_reason(const rig_failure *f)
{
    rig_failure *m = (rig_failure *)f;
    if (!atomic_load(&m->failed)) {
        return NULL;
    }
    const char *why = atomic_load(&m->why);
    if (why == NULL) {
        why = atomic_load(&m->seen);
    }
    return why != NULL ? why : "failed: the job failed";
}

/* ---- ranks that left ----------------------------------------------------- */

bool rig_failure_left(rig_failure *f, int rank, int how)
{
    if (rank < 0 || rank >= f->size) {
        return false;
    }
    unsigned char none = 0;
    bool first = atomic_compare_exchange_strong(&f->left[rank], &none,
                                                (unsigned char)how);
    if (first && how == RIG_LEFT_DIED) {
        atomic_store(&f->died, true);
    }
    /* After the flags: a reader that finds gone finds how it left. */
    int nobody = -1;
    atomic_compare_exchange_strong(&f->gone, &nobody, rank);
    return first;
}

bool rig_failure_has_left(const rig_failure *f, int rank)
{
    return rig_failure_how(f, rank) != 0;
}

int rig_failure_how(const rig_failure *f, int rank)
{
    return rank >= 0 && rank < f->size
               ? atomic_load(&((rig_failure *)f)->left[rank])
               : 0;
}

int rig_failure_gone(const rig_failure *f)
{
    return atomic_load(&((rig_failure *)f)->gone);
}

bool rig_failure_died(const rig_failure *f)
{
    return atomic_load(&((rig_failure *)f)->died);
}

void rig_failure_peer_gone(rig_failure *f, int r, const char *how)
{
    if (r < 0 || r >= f->size || r == f->rank) {
        return;
    }
    char why[200];
    if (f->pid[r] > 0) {
        snprintf(why, sizeof(why),
                 "failed: rank %d %s (pid %d, seen by rank %d)", r, how,
                 (int)f->pid[r], f->rank);
    } else {
        snprintf(why, sizeof(why), "failed: rank %d %s (seen by rank %d)", r,
                 how, f->rank);
    }
    f->on_gone(f->self, r, why);
}

const char *rig_failure_settled(rig_transport *t, uint64_t wait_ns)
{
    bool known = false;
    const char *why = rig_transport_failed(t, &known);
    uint64_t until = rig_now_ns() + wait_ns;
    rig_backoff b = {0};
    while (why != NULL && !known && rig_now_ns() < until) {
        rig_backoff_step(&b);
        why = rig_transport_failed(t, &known);
    }
    return why;
}

/* ---- peers' processes ---------------------------------------------------- */

void rig_failure_know(rig_failure *f, const rig_transport_wiring *w)
{
    for (int r = 0; r < f->size; r++) {
        f->pid[r] = r != f->rank ? w->pid[r] : 0;
        f->local[r] = r != f->rank && w->local[r];
    }
}

bool rig_failure_watch(rig_failure *f, int r, char **err)
{
    if (r < 0 || r >= f->size || !f->local[r] || f->pid[r] <= 0 ||
        f->pidfd[r] >= 0) {
        return true;
    }
#ifdef SYS_pidfd_open
    int fd = (int)syscall(SYS_pidfd_open, (pid_t)f->pid[r], 0);
#else
    int fd = -1;
    errno = ENOSYS;
#endif
    if (fd < 0) {
        if (errno == ESRCH) {
            return rig_err(err, "failed: rank %d (pid %d) is gone", r,
                           (int)f->pid[r]);
        }
        f->polled = true; /* no pidfds: kill(pid, 0) */
        return true;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    f->pidfd[r] = fd;
    return true;
}

int rig_failure_fd(const rig_failure *f, int r)
{
    return r >= 0 && r < f->size ? f->pidfd[r] : -1;
}

bool rig_failure_watched(const rig_failure *f, int r)
{
    return r >= 0 && r < f->size && f->local[r] && f->pid[r] > 0;
}

bool rig_failure_ended(const rig_failure *f, int r)
{
    if (!rig_failure_watched(f, r)) {
        return false;
    }
    if (f->pidfd[r] >= 0) {
        struct pollfd pf = {.fd = f->pidfd[r], .events = POLLIN};
        return poll(&pf, 1, 0) > 0;
    }
    return f->polled && kill((pid_t)f->pid[r], 0) != 0 && errno == ESRCH;
}

int rig_failure_look(rig_failure *f)
{
    for (int r = 0; r < f->size; r++) {
        if (r != f->rank && f->local[r] && !rig_failure_has_left(f, r) &&
            (f->pidfd[r] >= 0 || f->polled) && rig_failure_ended(f, r)) {
            rig_failure_peer_gone(f, r, "died");
        }
    }
    return rig_failure_gone(f);
}

void rig_failure_unwatch(rig_failure *f, int r)
{
    if (r >= 0 && r < f->size && f->pidfd[r] >= 0) {
        close(f->pidfd[r]);
        f->pidfd[r] = -1;
    }
}
