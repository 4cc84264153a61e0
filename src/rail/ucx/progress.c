/* SPDX-License-Identifier: BSD-3-Clause */
/* The UCX transport's progress thread, and the waiters' drive.
 *
 * Across nodes a rail's counts move inside ucp_worker_progress (a run
 * message's handler raises `arrived`, a send's completion `sent`), so
 * whoever waits for them drives the worker, as MPI's waits drive MPI: a
 * thread that waits on an end of the network path calls rig_ucx_drive (the
 * end's progress hook, rig_end_desc.progress) while it spins or yields
 * (src/abi/wait.c), which progresses the worker when its lock is free.
 * The message that settles a wait is then handled by the waiter itself,
 * with no wake-up of this thread in between.  The thread stays for what
 * nobody waits on -- carrying ends handed to it, sends nobody waits for,
 * failures, a peer's messages between waits -- and for waits in the block
 * mode, which sleep, and auto waits on bulk runs, which hand it the worker
 * and sleep (drive_handover).  While waiters drive, it stands back
 * (STANDBY_NS).
 *
 * Why the thread's sleep alone is not enough (UCX 1.13.1's own code):
 * ucp_worker_arm's contract (ucp.h) is one thread's -- progress until
 * ucp_worker_progress returns 0, arm, sleep only on UCS_OK, progress again
 * on UCS_ERR_BUSY -- and this thread keeps it.  The worker's fd is an
 * epoll set holding the interfaces' fds and an eventfd: TCP's is its own
 * level-triggered epoll set of sockets (its arm a no-op, never BUSY); the
 * eventfd is written by ucp_worker_signal and by the async thread when an
 * interface wakes up, and drained by the arm.  What the fd does not
 * report is work other threads' UCX calls leave for ucp_worker_progress
 * while this thread sleeps (rig's carriers send from any thread), and
 * the async thread's missed events (UCX_ASYNC_MODE=thread_spinlock: a
 * handler that found the worker's async context blocked is queued and
 * run only inside ucp_worker_progress, ucs_async_check_miss, whose count
 * ucp_worker_progress does not even return).  Such work waits for one of
 * the timeouts below; a waiter that drives does not.
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
 * (carrier.c), fails the job for code that could not (failure.c), and
 * takes the endpoints of lost peers out of use once they are told (they
 * close with the job: transport.c).  A failed count needs
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
 * (RIG_SHM_STORES=off, RIG_UCX_TLS=tcp,self) stalled with both ranks'
 * progress threads asleep on an armed worker and a wait on each side;
 * progressing the worker again ended the stall.  Waits drive the worker
 * now and those runs pass; the backstop stays for what nobody waits on
 * and for the block mode, turning a missed wakeup into a 20 ms delay
 * instead of a hang, at the cost of 50 wakeups a second. */
#define BACKSTOP_MS 20

/* The most ucp_worker_progress calls of one drive: a waiter looks at its
 * count between drives, and a stream of messages must not keep it. */
#define DRIVE_MAX 64
/* While a waiter drove the worker this recently, the thread stands back:
 * it neither lingers nor watches the worker's fd (every message would
 * wake it, only to queue for the lock the waiter holds and take cores
 * the ranks need), and looks at the worker every STANDBY_MS while a send
 * of this process is in flight, else once the standby ends
 * (standby_idle_ms).  A waiter that drives does so at least every 100 us
 * (wait.c: the longest nap of auto and yield; block's waits do not
 * drive). */
#define STANDBY_NS 500000u
#define STANDBY_MS 1
/* Between waits -- a rank computing between two exchanges -- the thread
 * stands back longer while no send of this process is in flight: what
 * arrives meanwhile waits in the socket for the next wait's drive, as it
 * does for MPI's next call.  Taking it at once cost the computing ranks a
 * core: the thread woke on the message, handled it and lingered
 * (LINGER_NS), beside the ranks on a node with no core to spare.  A
 * send in flight ends this (its bytes must move on), a hand-off wakes the
 * thread at once (the eventfd stays watched), and the thread still looks
 * at the worker when the standby ends. */
#define STANDBY_IDLE_NS 20000000u
/* A drive that begins this soon after the previous one is a spinning
 * waiter's (wait.c drives every 16 polls, ~1 us apart): it polls the
 * worker up to DRIVE_IDLE times before it returns.  A network end's count
 * moves only inside a drive (the thread stands back), so the waiter's
 * polls of it between two drives only delay the message that came
 * meanwhile: across 2 hosts, a drive every 16 polls left the socket
 * unwatched 2/3 of the time, ~0.3 us of each 8 B half round trip.  A
 * drive after a pause -- a test, a yield that gave the core away -- looks
 * once, as MPI_Test progresses once, and so does every drive of a wait
 * that yields or naps next (rig_drive_once): a yield that found no other
 * task returns within the spinning gap, and its wait's drives made 4-9
 * epoll_waits per yield across 2 hosts at 4 ranks on 2 cores, where
 * MPI's progress polls once.  So does a drive once a run of them
 * has found nothing for DRIVE_RUN_NS: an auto wait then reaches its
 * yield phase (4,096 polls, wait.c) about as soon as it did (~0.35 ms
 * instead of ~0.28), where a rank it waits for may need the core. */
#define DRIVE_SPIN_NS 10000u
#define DRIVE_IDLE 8u
#define DRIVE_RUN_NS 100000u

/* Lanes (lane.c).  A look reads the lanes, then progresses the worker --
 * but a drive whose job sends no UCX run messages across nodes (every end
 * there on a lane, am_net false) and has none in flight looks at the
 * worker at most every WORKER_LOOK_NS: what still comes through it
 * (failure messages, keepalive) can wait that long, and the epoll_wait of
 * each ucp_worker_progress is what the lanes save. */
#define WORKER_LOOK_NS 1000000u

/* One look; what it moved.  A waiter's (not `all`) reads the lanes its
 * rank's ends read; the thread's every lane that has something (lane.c). */
static unsigned look(rig_ucx *u, bool worker, bool all)
{
    unsigned n = u->lanes_n > 0 ? rig_lanes_poll(u, all) : 0;
    if (worker) {
        n += ucp_worker_progress(u->worker);
    }
    return n;
}

/* Whether a drive at now looks at the worker (above); worker lock held. */
static bool drive_worker(rig_ucx *u, uint64_t now)
{
    if (u->lanes_n == 0 || atomic_load(&u->am_net) ||
        atomic_load(&u->outstanding) != 0 ||
        now - u->worker_look_ns >= WORKER_LOOK_NS) {
        u->worker_look_ns = now;
        return true;
    }
    return false;
}

/* A wait's handover (rig_drive_handover: an auto wait on bulk runs,
 * wait.c, about to sleep): one look at the worker, then the thread's
 * standby ends and the thread is kicked, so that it watches the worker's
 * fd again and carries the bytes while the waiter sleeps.  Without the
 * kick a sleeping waiter's run waited for the standby's next look (up to
 * STANDBY_MS) whenever a wait of this process had driven in the last
 * STANDBY_NS (an acknowledgement's, say): 1 MiB runs across 2 simulated
 * hosts read 0.6-0.9x MPI's best bandwidth. */
static void drive_handover(rig_ucx *u)
{
    if (rig_trylock(&u->worker_lock, UCX_LOCK_WORKER)) {
        if (u->worker != NULL) {
            (void)look(u, true, true);
        }
        rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
    }
    atomic_store_explicit(&u->driven_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&rig_waited_ns, 0, memory_order_relaxed);
    rig_ucx_kick(u);
}

void rig_ucx_drive(void *arg)
{
    rig_ucx *u = arg;
    if (rig_drive_handover) {
        drive_handover(u);
        return;
    }
    uint64_t now = rig_now_ns();
    if (now - atomic_load_explicit(&u->driven_ns, memory_order_relaxed) >
        STANDBY_NS / 8) {
        /* Relaxed: a stale stamp only costs the thread a wake-up. */
        atomic_store_explicit(&u->driven_ns, now, memory_order_relaxed);
    }
    if (!rig_trylock(&u->worker_lock, UCX_LOCK_WORKER)) {
        return; /* the progress thread or a carrier is at it */
    }
    if (u->worker != NULL) { /* NULL once the job closed */
        /* Until a count moved: the waiter looks at its count then, and
         * drives again if it was another's.  (Across 2 hosts a
         * ping-pong's drive made an empty epoll_wait after each message
         * it handled: a syscall more than MPI's wait.)  A drive right
         * after the previous one is a spinning waiter's: it polls the
         * worker DRIVE_IDLE times before it gives up. */
        bool spinning = now - u->drive_last_ns < DRIVE_SPIN_NS;
        if (!spinning) {
            u->drive_run_ns = now; /* a run of drives begins */
        }
        unsigned idle_max =
            spinning && !rig_drive_once && now - u->drive_run_ns < DRIVE_RUN_NS
                ? DRIVE_IDLE
                : 1;
        u->drive_last_ns = now;
        u->moved = false;
        bool worker = drive_worker(u, now);
        for (unsigned i = 0, idle = 0;
             i < DRIVE_MAX && !u->moved && idle < idle_max; i++) {
            if (look(u, worker, false) == 0) {
                idle++;
            }
        }
        if (u->moved) {
            u->drive_run_ns = now; /* the next wait's run begins afresh */
        }
    }
    rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
}

void rig_ucx_kick(rig_ucx *u)
{
    uint64_t one = 1;
    ssize_t n = write(u->eventfd, &one, sizeof(one));
    (void)n; /* a full counter already wakes the thread */
}

/* One pass over the worker, under the worker lock: whether it did
 * anything, and (when idle) whether the worker is armed for epoll. */
static bool worker_pass(rig_ucx *u, bool standby, bool *armed, bool *busy)
{
    bool did = false;
    if (standby) {
        /* A waiter drives: when it holds the lock, it is progressing the
         * worker, and queueing for the lock would only make its unlock a
         * futex wake and take the worker from it -- its next wake would
         * then find the lock taken and hand its run to this thread (a
         * wake-up in the middle of a ping-pong). */
        if (!rig_trylock(&u->worker_lock, UCX_LOCK_WORKER)) {
            *busy = atomic_load(&u->outstanding) != 0;
            *armed = true; /* sleep: the waiter watches the worker */
            return false;
        }
    } else {
        rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
    }
    while (look(u, true, true) != 0) {
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

/* Before a look at whether peers ended: takes what they told before
 * they did (a failure message from a rank beats this rank's sighting of
 * its end, ../base/failure.h). */
void rig_ucx_take_told(rig_ucx *u)
{
    bool armed, busy;
    worker_pass(u, false, &armed, &busy); /* takes the lock: must see all */
    if (rig_fail_progress(u)) {
        rig_ucx_eps_drop_left(u);
    }
}

/* Whether the thread's epoll reports the worker's fd (and the lanes'
 * set, which a waiter's drive reads as it progresses the worker). */
static void efd_watch(rig_ucx *u, bool on)
{
    int fds[2] = {u->efd, u->lane_epfd};
    int n = atomic_load(&u->lanes_watched) ? 2 : 1;
    for (int i = 0; i < n; i++) {
        struct epoll_event ev = {.events = on ? EPOLLIN : 0, .data.fd = fds[i]};
        if (epoll_ctl(u->epfd, EPOLL_CTL_MOD, fds[i], &ev) != 0) {
            rig_log(RIG_LOG_WARN, "UCX progress: epoll_ctl failed: %s",
                    strerror(errno));
        }
    }
}

/* How long the thread, standing back with no send in flight, sleeps:
 * until the standby ends (STANDBY_IDLE_NS after the last drive), at most
 * STANDBY_IDLE_MS while the job sends UCX run messages across nodes
 * (am_net).  A send that goes in flight meanwhile kicks it (carrier.c),
 * and so does a hand-off or a failure; a waiter drives the worker itself.
 * Looking every STANDBY_MS instead woke each rank's thread 1,000 times a
 * second through a ping-pong across hosts, each time taking a core from
 * the ranks (2 ranks on 2 cores) for a look that found the waiter at the
 * worker.  The STANDBY_IDLE_MS bound is for bytes UCX still holds after it
 * completed their send (see above): when the rank stops waiting, they
 * move within it, not only at its next wait.  A lane's bytes are the
 * kernel's once written, and a frame the socket did not take is in
 * flight (outstanding): so with every network end on a lane the thread
 * sleeps the standby out.  A peer's frame that this rank's socket could
 * not take whole then waits for this rank's next drive or the standby's
 * end (STANDBY_IDLE_NS), where the peer's `sent` waits for it; MPI's
 * sender of a message larger than its eager limit waits for the
 * receiver's next MPI call.  A 2-rank stencil across 2 simulated hosts
 * (1024 x 1024, each rank computing ~1 ms between exchanges) had each
 * rank's thread wake 240 times a second under the 5 ms bound, taking the
 * core of a computing rank each time; 60 without it, and the 4-rank
 * stencil (2 a host, 2 cores) ran 2-5% more iterations a second. */
#define STANDBY_IDLE_MS 5

/* A thread that woke from that sleep while a waiter drove within
 * DRIVING_NS, with no send in flight and every network end on a lane
 * (am_net false), goes back to sleep without a look, for DRIVING_MS: the
 * waiter's drives read its lanes and look at the worker (WORKER_LOOK_NS),
 * so the thread's look would find nothing.  Each wake-up takes a
 * computing rank's core: a 2-rank stencil across 2 simulated hosts (1024
 * x 1024, an exchange every ~1 ms, each rank pinned to a core) had each
 * rank's thread wake 53 times a second, each wake-up 26-30 us on the core
 * and a preemption of the rank.  A send that goes in flight, a hand-off or
 * a failure still kicks it awake; once the waits stop, the thread looks
 * at its next wake, at most DRIVING_MS after the last drive. */
#define DRIVING_NS 5000000u
#define DRIVING_MS 100

static int standby_idle_ms(const rig_ucx *u, uint64_t since)
{
    uint64_t left = since < STANDBY_IDLE_NS ? STANDBY_IDLE_NS - since : 0;
    uint64_t ms = (left + 999999u) / 1000000u;
    uint64_t most =
        atomic_load(&u->am_net) ? STANDBY_IDLE_MS : STANDBY_IDLE_NS / 1000000u;
    return ms < STANDBY_MS ? STANDBY_MS : ms > most ? (int)most : (int)ms;
}

static void *progress_main(void *arg)
{
    rig_ucx *u = arg;
    uint64_t active = rig_now_ns(); /* the last time there was work */
    int safety = 1;       /* the next idle wait's bound (network path) */
    bool watching = true; /* the epoll reports the worker's fd */
    bool napped = false;  /* the last sleep was the standby's, and ran out */
    struct epoll_event ev[8];
    while (!atomic_load(&u->stop)) {
        if (rig_fail_progress(u)) {
            rig_ucx_eps_drop_left(u);
        }
        rig_lanes_report(u);
        if (atomic_load(&u->handoff) != NULL) {
            rig_carrier_handoffs(u);
            active = rig_now_ns();
        }
        bool armed, busy;
        uint64_t now = rig_now_ns();
        uint64_t driven =
            atomic_load_explicit(&u->driven_ns, memory_order_relaxed);
        uint64_t waited =
            atomic_load_explicit(&rig_waited_ns, memory_order_relaxed);
        uint64_t since = now - driven;
        /* A waiter that found its count there stands for a drive while
         * nothing is in flight (rig_waited_ns): it drives at its next
         * miss.  What is in flight needs a drive. */
        uint64_t since_any = now - (waited > driven ? waited : driven);
        bool standby =
            since < STANDBY_NS ||
            (since_any < STANDBY_IDLE_NS && atomic_load(&u->outstanding) == 0);
        bool driving = napped && standby && since < DRIVING_NS &&
                       !atomic_load(&u->am_net) &&
                       atomic_load(&u->outstanding) == 0;
        if (driving) {
            armed = true; /* the waiter watches the worker */
            busy = false;
        } else if (worker_pass(u, standby, &armed, &busy)) {
            active = rig_now_ns();
            continue;
        }
        now = rig_now_ns();
        if (standby == watching) {
            watching = !standby;
            efd_watch(u, watching);
        }
        int timeout;
        if (driving) {
            timeout = DRIVING_MS;
        } else if (standby) {
            timeout = !armed ? 0
                      : busy ? STANDBY_MS
                             : standby_idle_ms(u, since_any);
        } else if (now - active < LINGER_NS) {
            timeout = 0; /* a burst may go on: look again at once */
        } else if (!armed) {
            timeout = 0;
        } else {
            timeout = busy ? BUSY_WAIT_MS : u->wake_ms;
            if (timeout < 0 || timeout > BACKSTOP_MS) {
                timeout = BACKSTOP_MS;
            }
        }
        if (timeout != 0 && !standby && atomic_load(&u->net_path)) {
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
        napped = n == 0 && timeout != 0 && standby;
        if (n == 0 && timeout != 0 && u->fail.polled) {
            rig_ucx_take_told(u);
            rig_fail_poll(u); /* and keepalive runs in the next progress */
        }
        for (int i = 0; i < n; i++) {
            int fd = ev[i].data.fd;
            if (fd == u->eventfd) {
                uint64_t v;
                ssize_t r = read(u->eventfd, &v, sizeof(v));
                (void)r;
                active = rig_now_ns();
            } else if (fd == u->efd || fd == u->lane_epfd) {
                active = rig_now_ns();
            } else {
                rig_ucx_take_told(u);
                rig_fail_event(u, fd);
                active = rig_now_ns();
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
