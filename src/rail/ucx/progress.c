/* SPDX-License-Identifier: BSD-3-Clause */
/* The UCX transport's progress thread.
 *
 * One thread per job, driven by events: it progresses the worker until
 * nothing is left to do, arms it (ucp_worker_arm) and sleeps in epoll on
 * the worker's event fd, an eventfd (rig_ucx_kick) and the pidfds of
 * same-node peers: an idle job uses no CPU.  (Links to peers on other
 * nodes have a thread of their own, liveness.h, which a long progress
 * call cannot delay.)
 *
 * Messages in flight do not make it poll: over TCP one moves on when its
 * socket can take more or an acknowledgement comes back, and both are
 * events of the worker's fd; the thread sleeps until then (at most 1 ms,
 * a guard for a transport that signals no completion), where it used to
 * back off into sleeps of up to 100 us that held `sent` back.  After
 * activity it keeps polling for a short while (linger_ns) before it
 * sleeps, so that the next message of a burst or a ping-pong is handled
 * without an epoll wake-up and a thread switch.
 *
 * Nor does it trust the worker's events alone while the job has ends on
 * the network path: over TCP, UCX 1.13 completed a send whose last bytes
 * (an eager fragment, a rendezvous's final message) were still queued,
 * and its wake-up never came -- the receiver waited forever with every
 * progress thread asleep (test_rails' 4 MiB ping-pong at 3 ranks under
 * load).  So an idle wait is bounded: 1 ms after activity, doubling to
 * 100 ms: a lost wake-up costs at most that, and an idle job a wake-up
 * every 100 ms.  Off the network path an idle wait is bounded too, by
 * BACKSTOP_MS (below).
 *
 * It also carries for ends whose carrier found the worker lock taken
 * (carrier.c), fails the job for code that could not (failure.c), closes
 * the endpoints of lost peers once they are told.  A failed count needs
 * no re-raising: nothing lowers it (carrier.c). */
#include "ucx_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* How long the thread polls after its last activity before it sleeps. */
#define LINGER_NS 50000u
/* The longest sleep while messages are outstanding. */
#define BUSY_WAIT_MS 1
/* The longest idle sleep with ends on the network path. */
#define SAFETY_MAX_MS 100
/* The longest the thread sleeps even when nothing asks it to wake: a
 * backstop for a wakeup UCX does not deliver.  Under MPICH 4.0 (whose
 * ch4:ucx has its own UCX context in the process) rails over UCX
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

/* One pass over the worker, under the worker lock: whether it did
 * anything, and (when idle) whether the worker is armed for epoll. */
static bool worker_pass(rig_ucx *u, bool *armed, bool *busy)
{
    bool did = false;
    rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
    while (ucp_worker_progress(u->worker) != 0) {
        did = true;
    }
    *busy = atomic_load(&u->outstanding) != 0;
    *armed = false;
    if (!did) {
        ucs_status_t st = ucp_worker_arm(u->worker);
        *armed = st == UCS_OK;
        did = st == UCS_ERR_BUSY; /* events came meanwhile */
    }
    rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
    return did;
}

static void *progress_main(void *arg)
{
    rig_ucx *u = arg;
    uint64_t active = rig_now_ns(); /* the last time there was work */
    int safety = 1; /* the next idle wait's bound (network path) */
    struct epoll_event ev[8];
    while (!atomic_load(&u->stop)) {
        if (rig_fail_progress(u)) {
            rig_ucx_eps_drop_left(u);
        }
        if (atomic_load(&u->handoff) != NULL) {
            rig_carrier_handoffs(u);
            active = rig_now_ns();
        }
        bool armed, busy;
        if (worker_pass(u, &armed, &busy)) {
            active = rig_now_ns();
            continue;
        }
        int timeout;
        if (rig_now_ns() - active < LINGER_NS) {
            timeout = 0; /* a burst may go on: look again at once */
        } else if (!armed) {
            timeout = 0;
        } else {
            timeout = busy ? BUSY_WAIT_MS : u->wake_ms;
            if (timeout < 0 || timeout > BACKSTOP_MS) {
                timeout = BACKSTOP_MS;
            }
        }
        if (timeout != 0 && atomic_load(&u->net_path)) {
            if (timeout < 0 || safety < timeout) {
                timeout = safety;
            }
            safety = safety * 2 < SAFETY_MAX_MS ? safety * 2 : SAFETY_MAX_MS;
        }
        if (timeout == 0) {
            rig_cpu_relax();
            safety = 1;
        }
        int n = epoll_wait(u->epfd, ev, 8, timeout);
        if (n == 0 && timeout != 0) {
            rig_fail_poll(u); /* and keepalive runs in the next progress */
        }
        for (int i = 0; i < n; i++) {
            int fd = ev[i].data.fd;
            if (fd == u->eventfd) {
                uint64_t v;
                ssize_t r = read(u->eventfd, &v, sizeof(v));
                (void)r;
                active = rig_now_ns();
            } else if (fd == u->efd) {
                active = rig_now_ns();
            } else {
                rig_fail_event(u, fd);
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
