/* SPDX-License-Identifier: BSD-3-Clause */
/* The UCX transport's progress thread.
 *
 * One thread per job.  It sleeps in epoll on the worker's event fd, an
 * eventfd and the pidfds of same-node peers whenever no put is outstanding
 * (ucp_worker_arm), waking at least every BACKSTOP_MS (below): an idle job
 * uses next to no CPU.  While puts are outstanding
 * it progresses the worker with backoff (spin, yield, sleep); it also
 * serves transports whose target must progress (TCP), runs UCX keepalive
 * (every wake_ms when peers on other nodes need it) and fails the job for
 * code that could not (failure.c).  A failed count needs no re-raising:
 * nothing lowers it (carrier.c). */
#include "ucx_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* The longest the thread sleeps even when nothing asks it to wake: a
 * backstop for a wakeup UCX does not deliver.  Under MPICH 4.0 (whose
 * ch4:ucx has its own UCX context in the process) rails over UCX puts
 * (RIG_SHM_STORES=off, RIG_UCX_TLS=tcp,self) stalled for good with both
 * ranks' progress threads asleep on an armed worker and a wait on each
 * side; progressing the worker again ends the stall.  The cause inside
 * UCX is not known: the backstop turns a missed wakeup into a 20 ms
 * delay instead of a hang, at the cost of 50 wakeups a second. */
#define BACKSTOP_MS 20

void rig_ucx_kick(rig_ucx *u)
{
    uint64_t one = 1;
    ssize_t n = write(u->eventfd, &one, sizeof(one));
    (void)n; /* a full counter already wakes the thread */
}

static void *progress_main(void *arg)
{
    rig_ucx *u = arg;
    rig_backoff b = {0};
    struct epoll_event ev[4];
    while (!atomic_load(&u->stop)) {
        rig_fail_progress(u);
        rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
        while (ucp_worker_progress(u->worker) != 0) {
        }
        long busy = atomic_load(&u->outstanding);
        ucs_status_t st = UCS_OK;
        if (busy == 0) {
            st = ucp_worker_arm(u->worker);
        }
        rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
        if (busy != 0) {
            rig_backoff_step(&b);
            continue;
        }
        b.spins = 0;
        if (st == UCS_ERR_BUSY) {
            continue;
        }
        int n = epoll_wait(u->epfd, ev, 4,
                           u->wake_ms < 0 ? BACKSTOP_MS : u->wake_ms);
        if (n == 0) {
            rig_fail_poll(u); /* and keepalive runs in the next progress */
        }
        for (int i = 0; i < n; i++) {
            if (ev[i].data.fd == u->eventfd) {
                uint64_t v;
                ssize_t r = read(u->eventfd, &v, sizeof(v));
                (void)r;
            } else if (ev[i].data.fd != u->efd) {
                rig_fail_event(u, ev[i].data.fd);
            }
        }
    }
    return NULL;
}

bool rig_progress_start(rig_ucx *u, char **err)
{
    ucs_status_t st = ucp_worker_get_efd(u->worker, &u->efd);
    if (st != UCS_OK) {
        return rig_err(err, "system: ucp_worker_get_efd failed: %s",
                       rig_ucs_str(st));
    }
    u->eventfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (u->eventfd < 0) {
        return rig_err(err, "system: eventfd failed: %s", strerror(errno));
    }
    u->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (u->epfd < 0) {
        return rig_err(err, "system: epoll_create1 failed: %s",
                       strerror(errno));
    }
    int fds[2] = {u->efd, u->eventfd};
    for (int i = 0; i < 2; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        if (epoll_ctl(u->epfd, EPOLL_CTL_ADD, fds[i], &ev) != 0) {
            return rig_err(err, "system: epoll_ctl failed: %s",
                           strerror(errno));
        }
    }
    int e = pthread_create(&u->thread, NULL, progress_main, u);
    if (e != 0) {
        return rig_err(err, "system: pthread_create failed: %s", strerror(e));
    }
    u->thread_started = true;
    return true;
}

void rig_progress_stop(rig_ucx *u)
{
    if (u->thread_started) {
        atomic_store(&u->stop, true);
        rig_ucx_kick(u);
        pthread_join(u->thread, NULL);
        u->thread_started = false;
    }
}
