/* SPDX-License-Identifier: BSD-3-Clause */
/* The UCX transport's lanes: rig's own TCP connection to each rank on
 * another node, for small runs -- and to each rank on this node when no
 * transport of rig's UCX context can map a peer's memory (UCX_TLS
 * without shared memory, transport.c: near_over_tcp), over loopback.
 *
 * Why.  Across nodes a run is one message either way (carrier.c), but UCX
 * 1.13's TCP interface looks for it through an epoll set: each
 * ucp_worker_progress is an epoll_wait, and a recv only once that
 * reported the socket.  A waiter that polls pays both syscalls a look,
 * and under a hypervisor a syscall costs about 1 us.  Measured on 2
 * simulated hosts (veth, a bridge), an 8 B ping-pong's half round trip:
 * a plain socket polled with recv(MSG_DONTWAIT) 6.5-6.7 us, the same with
 * an epoll_wait(0) before each recv 8.3-8.4 us, UCX's own active messages
 * (ucx_perftest ucp_am_lat) 8.4-8.6 us, and rig's runs over them 1.04-
 * 1.08x that.  So a run whose two copies fit in RIG_LANE_BYTES goes as
 * one write on a connection of rig's own, and a waiter's drive reads it
 * with a recv.  Larger runs stay on UCX's active messages, whose
 * fragments and large segment carry them (transport.c), and whose waits
 * from 1 MiB on sleep while the progress thread carries (wait.c).  The
 * default bound, 1 MiB (runs up to 512 KiB), came from rig_osu_bw across
 * 2 simulated hosts, 3 interleaved runs each, rig over MPI's best: with
 * runs up to 16 KiB on lanes, 128 KiB 1.21-1.47x and 256 KiB 0.99-1.02x;
 * with every run up to 2 MiB on lanes, 1.18-2.03x and 1.04-1.11x; 1 and
 * 2 MiB alike either way (1.08-1.23x).
 *
 * The connections are made with the links that watch a silent peer
 * (../base/liveness.h: a second connection per pair of ranks, made and
 * checked the same way, with the same TCP_USER_TIMEOUT), so they exist
 * only where the links do (RIG_PEER_TIMEOUT_MS not 0) and the links'
 * verdicts stand for them: a cut link or a dead peer is seen there, and
 * a peer whose job failed tells why.  On this node the watch on the
 * peer's process does (../base/failure.h): a lane there is a data
 * connection alone, with no link.  A lane that breaks while the job
 * still stands after that bound is reported like a lost link
 * (rig_ucx_link_lost: the progress thread, outside the worker lock), so
 * that nothing waits for runs it lost.  Reporting it at once gave the
 * wrong reason: across 2 hosts with one direction of the link dropped,
 * the rank that saw the cut failed the job and let go of the lane, and
 * the other blamed the lane's close ("its process ended") before the
 * failure message came.  So a rank that left the job keeps its lane
 * until the close (what it brings is dropped: the job failed).
 *
 * A frame is a run message's header (carrier.c's rig_run_hdr, `pad`
 * holding the bytes that follow) and its bytes, written with one sendmsg
 * from the outbound copies (no copy).  A frame the socket did not take
 * whole waits in the lane's queue, in order, with its batch pending (its
 * `sent` waits too: the source must stay), and goes on when the socket
 * can take more (EPOLLOUT in the lanes' epoll set, or the next drive).
 * The receiver reads into the lane's buffer and hands each whole frame
 * to the carrier, which checks and lands it as it does an active
 * message.  A frame of which LAND_MIN bytes or more are still to come
 * once its header is in lands straight in its end's inbound copies
 * instead (rig_landing_*, carrier.c): the carrier checks it then, copies
 * what the buffer holds of it, and every later read of that lane goes
 * into the copies until the frame is whole, when `arrived` moves.
 * Copying each frame out of the buffer cost a memcpy of the whole run on
 * the receiver's path: across 2 simulated hosts, rig_osu_latency, 5
 * rounds, the same build with and without (two sittings each), 256 KiB
 * took 70.2 and 70.5 us against 74.7 and 95.0, 512 KiB 124.4 and 122.7
 * against 139.7 and 165.4 (MPI 72-80 and 138-165 alongside); 64 and 128
 * KiB moved less than the noise (their first 64 KiB still come through
 * the buffer).  Nothing lands once the job failed, the rail failed or its
 * end is freed (rig_lanes_forget): the rest is read and let go.  Every end
 * sends on one path for its whole life (carrier.c), and one connection keeps
 * its frames in order.
 *
 * Every rank reads its lanes, whatever its own RIG_LANE_BYTES, which
 * only says what it sends: a job whose ranks were given different
 * values still lands every run.
 *
 * Which lanes a waiter reads.  A job has a lane to every rank on another
 * node, but a rank's rails usually reach a few of them (a stencil's
 * neighbours), and a recv of a lane that brings nothing is a syscall
 * that finds nothing.  So a waiter's look reads only the lanes of peers
 * this rank has an end with on the network path (rig_lane_use, at the
 * end's connect: a run can come only from such a peer), with a recv when
 * there is one such lane and one epoll_wait of the lanes' set when there
 * are more (then a recv of each lane it reports).  Across 2 simulated
 * hosts at 4 ranks (2 a host, 2 x 2 stencil, one neighbour on the other
 * host) every look read both lanes of a rank: 5.4 recvs per iteration
 * and rank, of which 1 brought the halo.  Anything that arrives on
 * another lane (a peer that connected its end first, a lane's close) is
 * taken by the progress thread, which reads every lane its epoll
 * reports (rig_lanes_poll's `all`).
 *
 * Locks: everything here runs under the worker lock, except
 * rig_lanes_report (the progress thread, no lock held) and rig_lanes_close
 * (the close, with no other thread left). */
#include "ucx_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* RIG_LANE_BYTES: its default and its largest value. */
#define LANE_BYTES_DEFAULT 1048576u
#define LANE_BYTES_MAX (16u << 20)
/* A lane's receive buffer at first. */
#define RX_FIRST 65536u
/* The most iovec entries of one sendmsg (a frame with more goes in
 * several). */
#define FRAME_IOV 64
/* The most lanes one epoll_wait of a look reports (the rest: the next). */
#define LANES_READY 64
/* A frame of which at least this many bytes are still to come once its
 * header is in lands straight in its end's inbound copies (frames_take). */
#define LAND_MIN 4096u

struct rig_lane {
    int fd; /* -1: none, or closed */
    int peer;
    bool broken;                  /* lost (err: 0 for the peer's close) */
    int err;                      /* its errno */
    uint64_t lost_ns;             /* when it broke */
    bool reported;                /* rig_lanes_report told the transport */
    bool watch_out;               /* EPOLLOUT in the lanes' epoll set */
    bool used;                    /* an end with the peer reads it */
    rig_batch *tx_head, *tx_tail; /* frames not written whole */
    size_t tx_off;                /* bytes of the head written */
    uint8_t *rx;
    size_t rx_cap, rx_have;
    rig_landing land; /* a frame landing straight in its end: left > 0 */
};

bool rig_lane_setting(uint64_t *bytes, char **err)
{
    return rig_env_u64_in(
        "RIG_LANE_BYTES", LANE_BYTES_DEFAULT, 0, LANE_BYTES_MAX,
        "0 sends every run across nodes as a UCX message", bytes, err);
}

static void lane_epoll(rig_ucx *u, rig_lane *ln, int op)
{
    struct epoll_event ev = {.events = EPOLLIN | (ln->watch_out ? EPOLLOUT : 0),
                             .data.u32 = (uint32_t)ln->peer};
    if (epoll_ctl(u->lane_epfd, op, ln->fd, &ev) != 0 && op != EPOLL_CTL_DEL) {
        rig_log(RIG_LOG_WARN, "UCX lanes: epoll_ctl failed: %s",
                strerror(errno));
    }
}

bool rig_lanes_open(rig_ucx *u, rig_liveness *links, char **err)
{
    if (links == NULL) {
        return true;
    }
    rig_lane *l = calloc((size_t)u->size, sizeof(*l));
    int *at = calloc((size_t)u->size, sizeof(*at));
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l == NULL || at == NULL || epfd < 0) {
        free(l);
        free(at);
        if (epfd >= 0) {
            close(epfd);
        }
        return rig_err(err, "system: the lanes' table or epoll: %s",
                       epfd >= 0 ? "out of memory" : strerror(errno));
    }
    int n = 0;
    bool ok = true;
    for (int r = 0; r < u->size; r++) {
        l[r].peer = r;
        l[r].fd = rig_liveness_take_data(links, r);
        if (l[r].fd < 0) {
            continue;
        }
        /* Grown to the largest frame that comes (frames_take). */
        l[r].rx_cap = RX_FIRST + sizeof(rig_run_hdr);
        l[r].rx = malloc(l[r].rx_cap);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)r};
        if (l[r].rx == NULL) {
            ok = rig_err(err, "nomem: a lane's buffer of %zu bytes",
                         l[r].rx_cap);
        } else if (epoll_ctl(epfd, EPOLL_CTL_ADD, l[r].fd, &ev) != 0) {
            ok = rig_err(err, "system: epoll_ctl (a lane) failed: %s",
                         strerror(errno));
        }
        at[n++] = r;
    }
    rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
    u->lanes = l;
    u->lane_at = at;
    u->lane_epfd = epfd;
    u->lanes_n = n;
    rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
    /* The progress thread watches them from now on (its epoll is thread
     * safe; efd_watch turns the set on and off with the worker's fd). */
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = epfd};
    if (ok && n > 0) {
        if (epoll_ctl(u->epfd, EPOLL_CTL_ADD, epfd, &ev) != 0) {
            ok = rig_err(err, "system: epoll_ctl (the lanes) failed: %s",
                         strerror(errno));
        } else {
            atomic_store(&u->lanes_watched, true);
        }
    }
    return ok;
}

void rig_lanes_close(rig_ucx *u)
{
    for (int r = 0; u->lanes != NULL && r < u->size; r++) {
        if (u->lanes[r].fd >= 0) {
            close(u->lanes[r].fd);
        }
        rig_landing_drop(&u->lanes[r].land);
        free(u->lanes[r].rx);
    }
    free(u->lanes);
    free(u->lane_at);
    u->lanes = NULL;
    u->lane_at = NULL;
    u->lanes_n = 0;
    if (u->lane_epfd >= 0) {
        close(u->lane_epfd);
        u->lane_epfd = -1;
    }
}

bool rig_lane_fits(const rig_uend *e, const rig_transfer *t, size_t n)
{
    const rig_ucx *u = e->ucx;
    if (u->lane_bytes == 0 || u->lanes == NULL || u->lanes[e->peer].fd < 0) {
        return false;
    }
    /* A message carries at most two runs (rig_carry_from). */
    uint64_t run = 0;
    for (size_t j = 0; j < n; j++) {
        run += t[j].length;
    }
    return 2 * run <= u->lane_bytes;
}

/* ---- breaking -------------------------------------------------------------
 */

/* The lane is lost: closed at once (nothing it brings lands any more, and
 * the peer's retransmissions meet a closed socket), its queued frames
 * given up (the job fails: the progress thread reports it), and the
 * transport told through the progress thread. */
static void lane_break(rig_ucx *u, rig_lane *ln, int e)
{
    if (ln->fd < 0) {
        return;
    }
    lane_epoll(u, ln, EPOLL_CTL_DEL);
    close(ln->fd);
    ln->fd = -1;
    ln->broken = true;
    ln->err = e;
    ln->lost_ns = rig_now_ns();
    ln->rx_have = 0;
    rig_landing_drop(&ln->land);
    ln->land.left = 0;
    for (rig_batch *b = ln->tx_head, *next; b != NULL; b = next) {
        next = b->lane_next;
        b->lane_next = NULL;
        rig_carrier_lane_sent(b);
    }
    ln->tx_head = ln->tx_tail = NULL;
    ln->tx_off = 0;
    if (!atomic_load(&u->closing)) {
        atomic_store(&u->lanes_lost, true);
        rig_ucx_kick(u);
    }
}

void rig_lanes_drop(rig_ucx *u, int peer)
{
    if (u->lanes != NULL) {
        u->lanes[peer].reported = true; /* it left: nothing to tell */
    }
}

void rig_lanes_report(rig_ucx *u)
{
    if (!atomic_exchange(&u->lanes_lost, false)) {
        return;
    }
    bool waiting = false;
    /* lanes_n and lane_at are set once at wire, before any lane breaks. */
    for (int i = 0; i < u->lanes_n; i++) {
        int r = u->lane_at[i];
        rig_lock(&u->worker_lock, UCX_LOCK_WORKER);
        rig_lane *ln = &u->lanes[r];
        bool tell = false;
        int e = 0;
        if (ln->broken && !ln->reported) {
            if (rig_failure_failed(&u->fail)) {
                ln->reported = true; /* the job failed: said already */
            } else if (rig_now_ns() - ln->lost_ns >=
                       u->peer_timeout_ms * 1000000u) {
                ln->reported = tell = true;
                e = ln->err;
            } else {
                waiting = true;
            }
        }
        rig_unlock(&u->worker_lock, UCX_LOCK_WORKER);
        if (!tell) {
            continue;
        }
        char how[200];
        bool closed = e == 0 || e == ECONNRESET || e == EPIPE;
        if (closed) {
            snprintf(how, sizeof(how),
                     "closed its run connection%s while its link stayed up",
                     e == 0 ? "" : " (reset)");
        } else if (e == ETIMEDOUT) {
            snprintf(how, sizeof(how),
                     "did not answer for %llu ms on its run connection: the "
                     "link is cut or its host is down",
                     (unsigned long long)u->peer_timeout_ms);
        } else {
            snprintf(how, sizeof(how), "lost its run connection: %s",
                     strerror(e));
        }
        rig_ucx_link_lost(u, r, how, closed);
    }
    if (waiting) {
        atomic_store(&u->lanes_lost, true); /* looked at again */
    }
}

/* ---- sending --------------------------------------------------------------
 */

/* Writes b's frame from *off on: true once it is written whole; false
 * when the socket is full (*e 0) or the write failed (*e its errno). */
static bool frame_write(int fd, rig_batch *b, size_t *off, int *e)
{
    const size_t total = sizeof(b->hdr) + b->hdr.pad;
    *e = 0;
    while (*off < total) {
        struct iovec v[FRAME_IOV];
        int nv = 0;
        size_t skip = *off;
        if (skip < sizeof(b->hdr)) {
            v[nv++] = (struct iovec){(uint8_t *)&b->hdr + skip,
                                     sizeof(b->hdr) - skip};
            skip = 0;
        } else {
            skip -= sizeof(b->hdr);
        }
        for (size_t k = 0; k < b->niov && nv < FRAME_IOV; k++) {
            size_t len = b->iov[k].length;
            if (skip >= len) {
                skip -= len;
                continue;
            }
            v[nv++] =
                (struct iovec){(uint8_t *)b->iov[k].buffer + skip, len - skip};
            skip = 0;
        }
        struct msghdr m = {.msg_iov = v, .msg_iovlen = (size_t)nv};
        ssize_t n = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                *e = errno;
            }
            return false;
        }
        *off += (size_t)n;
    }
    return true;
}

bool rig_lane_send(rig_ucx *u, int peer, rig_batch *b)
{
    rig_lane *ln = &u->lanes[peer];
    b->hdr.pad = 0;
    for (size_t k = 0; k < b->niov; k++) {
        b->hdr.pad += (uint32_t)b->iov[k].length;
    }
    b->lane_next = NULL;
    if (ln->fd < 0) {
        return true; /* lost: the job fails (rig_lanes_report) */
    }
    size_t off = 0;
    int e = 0;
    if (ln->tx_head == NULL) {
        if (frame_write(ln->fd, b, &off, &e)) {
            return true;
        }
        if (e != 0) {
            lane_break(u, ln, e);
            return true;
        }
        ln->tx_off = off;
    }
    /* Behind the frames that wait, or the socket is full: it goes on when
     * the socket can take more. */
    if (ln->tx_tail != NULL) {
        ln->tx_tail->lane_next = b;
    } else {
        ln->tx_head = b;
    }
    ln->tx_tail = b;
    if (!ln->watch_out) {
        ln->watch_out = true;
        lane_epoll(u, ln, EPOLL_CTL_MOD);
    }
    return false;
}

/* Writes what waits; the frames written whole. */
static unsigned lane_flush(rig_ucx *u, rig_lane *ln)
{
    unsigned done = 0;
    while (ln->tx_head != NULL) {
        rig_batch *b = ln->tx_head;
        int e = 0;
        if (!frame_write(ln->fd, b, &ln->tx_off, &e)) {
            if (e != 0) {
                lane_break(u, ln, e);
            }
            return done;
        }
        ln->tx_head = b->lane_next;
        if (ln->tx_head == NULL) {
            ln->tx_tail = NULL;
        }
        b->lane_next = NULL;
        ln->tx_off = 0;
        rig_carrier_lane_sent(b);
        done++;
    }
    if (ln->watch_out) {
        ln->watch_out = false;
        lane_epoll(u, ln, EPOLL_CTL_MOD);
    }
    return done;
}

/* ---- receiving ------------------------------------------------------------
 */

/* Hands every whole frame of the buffer to the carrier; keeps the rest
 * (grown when a frame needs more).  False when the lane broke. */
static bool frames_take(rig_ucx *u, rig_lane *ln, unsigned *landed, bool *held)
{
    size_t at = 0;
    while (ln->rx_have - at >= sizeof(rig_run_hdr)) {
        rig_run_hdr h;
        memcpy(&h, ln->rx + at, sizeof(h));
        size_t need = sizeof(h) + (size_t)h.pad;
        if (h.pad > 2u * LANE_BYTES_MAX) {
            rig_ucx_fail_later(u,
                               "failed: rank %d sent a %u-byte frame on its "
                               "run connection (at most %u)",
                               ln->peer, h.pad, 2u * LANE_BYTES_MAX);
            lane_break(u, ln, EPROTO);
            return false;
        }
        if (ln->rx_have - at < need) {
            if (need - (ln->rx_have - at) >= LAND_MIN) {
                if (*landed > 0) {
                    *held = true; /* lane_read stops: see there */
                    break;
                }
                /* The rest lands where it goes, read by read (lane_read):
                 * no copy out of this buffer, which stays small. */
                rig_landing_open(u, &h, h.pad, ln->rx + at + sizeof(h),
                                 ln->rx_have - at - sizeof(h), &ln->land);
                at = ln->rx_have;
                break;
            }
            if (need > ln->rx_cap) {
                uint8_t *more = realloc(ln->rx, need);
                if (more == NULL) {
                    rig_ucx_fail_later(u,
                                       "nomem: a %zu-byte frame from rank %d",
                                       need, ln->peer);
                    lane_break(u, ln, ENOMEM);
                    return false;
                }
                ln->rx = more;
                ln->rx_cap = need;
            }
            break;
        }
        rig_carrier_run_in(u, &h, ln->rx + at + sizeof(h), h.pad);
        (*landed)++;
        at += need;
    }
    if (at > 0) {
        memmove(ln->rx, ln->rx + at, ln->rx_have - at);
        ln->rx_have -= at;
    }
    return true;
}

/* Reads the landing frame's bytes straight into its pieces (or lets them
 * go); false when the socket is drained or the lane broke. */
static bool land_read(rig_ucx *u, rig_lane *ln, unsigned *landed)
{
    rig_landing *l = &ln->land;
    rig_landing_check(u, l);
    struct iovec v[FRAME_IOV];
    size_t nv = 1;
    if (l->e != NULL) {
        nv = rig_landing_iov(l, v, FRAME_IOV);
    } else {
        v[0] =
            (struct iovec){ln->rx, l->left < ln->rx_cap ? l->left : ln->rx_cap};
    }
    size_t want = 0;
    for (size_t k = 0; k < nv; k++) {
        want += v[k].iov_len;
    }
    struct msghdr m = {.msg_iov = v, .msg_iovlen = nv};
    ssize_t n = recvmsg(ln->fd, &m, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) {
        return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return false;
    }
    if (n <= 0) {
        lane_break(u, ln, n == 0 ? 0 : errno);
        return false;
    }
    if (rig_landing_advance(l, (size_t)n)) {
        (*landed)++;
    }
    return (size_t)n == want;
}

/* Reads what the socket holds; the frames landed.  Once a frame landed,
 * the read stops before it would start landing another large one: a
 * waiter whose run came reads its copy next, which the run two later
 * lands in, and with a part of that frame in the copy and nobody
 * driving, the copy would stay torn until the next drive (a checking
 * loop that polls the count, as the benchmarks' live check does, stalled
 * for milliseconds: 128 KiB runs streamed across 2 simulated hosts at
 * 0.5-1 GB/s instead of 4.8-5.6).  The frame waits, whole or in part, in
 * this buffer and the socket for the next read. */
static unsigned lane_read(rig_ucx *u, rig_lane *ln)
{
    unsigned landed = 0;
    bool held = false;
    /* A frame held last time opens its landing now (nothing landed yet). */
    if (ln->land.left == 0 && ln->rx_have >= sizeof(rig_run_hdr) &&
        !frames_take(u, ln, &landed, &held)) {
        return landed; /* the lane broke */
    }
    while (ln->fd >= 0) {
        if (ln->land.left != 0) {
            if (!land_read(u, ln, &landed)) {
                break;
            }
            continue;
        }
        size_t room = ln->rx_cap - ln->rx_have;
        ssize_t n = recv(ln->fd, ln->rx + ln->rx_have, room, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        }
        if (n <= 0) {
            lane_break(u, ln, n == 0 ? 0 : errno);
            break;
        }
        ln->rx_have += (size_t)n;
        if (!frames_take(u, ln, &landed, &held) || held || (size_t)n < room) {
            break; /* the socket is drained, or a frame is held */
        }
    }
    return landed;
}

void rig_lanes_forget(rig_ucx *u, const rig_uend *e)
{
    for (int i = 0; u->lanes != NULL && i < u->lanes_n; i++) {
        rig_lane *ln = &u->lanes[u->lane_at[i]];
        if (ln->land.left != 0 && ln->land.e == e) {
            rig_landing_drop(&ln->land);
        }
    }
}

void rig_lane_use(rig_ucx *u, int peer)
{
    if (u->lanes == NULL || u->lanes[peer].fd < 0 || u->lanes[peer].used) {
        return;
    }
    u->lanes[peer].used = true;
    u->lane_used = peer;
    u->lanes_used++;
}

/* Reads the lanes the lanes' epoll set reports: the frames landed. */
static unsigned lanes_read_ready(rig_ucx *u)
{
    struct epoll_event ev[LANES_READY];
    int k = epoll_wait(u->lane_epfd, ev, LANES_READY, 0);
    unsigned n = 0;
    for (int i = 0; i < k; i++) {
        rig_lane *ln = &u->lanes[ev[i].data.u32];
        if (ln->fd >= 0 && (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))) {
            n += lane_read(u, ln);
        }
    }
    return n;
}

unsigned rig_lanes_poll(rig_ucx *u, bool all)
{
    unsigned n = 0;
    for (int i = 0; i < u->lanes_n; i++) {
        rig_lane *ln = &u->lanes[u->lane_at[i]];
        if (ln->fd >= 0 && ln->tx_head != NULL) {
            n += lane_flush(u, ln);
        }
    }
    if (!all && u->lanes_used == 1) {
        rig_lane *ln = &u->lanes[u->lane_used];
        return ln->fd >= 0 ? n + lane_read(u, ln) : n;
    }
    if (!all && u->lanes_used == 0) {
        return n;
    }
    return n + lanes_read_ready(u);
}
