/* SPDX-License-Identifier: BSD-3-Clause */
/* The links that tell a silent peer on another node (see liveness.h). */
#include "liveness.h"

#include "../../util/util_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* tcp_info with tcpi_snd_wnd (Linux 5.4) */
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define ADDRS_MAX 8             /* addresses a rank offers */
#define SETUP_MS 10000u         /* making every link of the job */
#define GREET_MAGIC 0x7269674cu /* "rigL" */
#define BOUND_MAX_MS 3600000u

struct rig_liveness {
    int rank, size;
    uint64_t bound_ms;
    uint64_t period_ns; /* between heartbeats: an eighth of the bound */
    uint64_t next_ns;   /* the next heartbeat */
    int *fd;            /* per rank: its link, or -1 (the thread's) */
    int *data_fd;       /* per rank: its data connection, or -1 (until
                         * rig_liveness_take_data hands it over) */
    uint64_t *since;    /* per rank: bytes wait unacknowledged since */
    uint32_t *addr;     /* per rank: the address its link runs to/from */
    int links;          /* links open */
    int made;           /* links made at open */
    rig_liveness_lost_fn lost;
    void *arg;
    /* The thread: epoll on the links and on stopfd. */
    int epfd, stopfd;
    pthread_t thread;
    bool started;
};

/* What every rank tells the others (MPI_Allgather, as bytes). */
typedef struct {
    uint64_t nonce;      /* rank 0's names the job */
    uint32_t state;      /* CARD_OFF, CARD_ON, CARD_BROKEN */
    uint32_t data_local; /* 1: wants data connections on its node too */
    uint16_t port;       /* network order */
    uint16_t naddr;
    uint32_t addr[ADDRS_MAX]; /* IPv4, network order */
} card;

enum { CARD_OFF = 0, CARD_ON = 1, CARD_BROKEN = 2 };

/* The greeting each side of a new connection sends. */
typedef struct {
    uint32_t magic;
    uint32_t from, to;
    uint32_t ok;   /* the accepting side's verdict */
    uint32_t kind; /* KIND_LINK or KIND_DATA */
    uint64_t nonce;
} greeting;

/* The connections of a pair: the link this file watches, and one for the
 * transport's data. */
enum { KIND_LINK = 0, KIND_DATA = 1, KINDS = 2 };

bool rig_liveness_setting(uint64_t *bound_ms, char **err)
{
    return rig_env_u64_in("RIG_PEER_TIMEOUT_MS", 500, 0, BOUND_MAX_MS,
                          "at most an hour; 0 turns the links off", bound_ms,
                          err);
}

/* ---- this rank's card -----------------------------------------------------
 */

/* The IPv4 addresses of the interfaces that are up, loopback last (it can
 * only reach a rank that shares the network namespace, which the greeting
 * then checks). */
static uint16_t my_addresses(uint32_t *out)
{
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all) != 0) {
        return 0;
    }
    uint16_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (struct ifaddrs *i = all; i != NULL && n < ADDRS_MAX;
             i = i->ifa_next) {
            if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
                !(i->ifa_flags & IFF_UP)) {
                continue;
            }
            bool loop = (i->ifa_flags & IFF_LOOPBACK) != 0;
            if (loop != (pass == 1)) {
                continue;
            }
            uint32_t a =
                ((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
            bool dup = false;
            for (uint16_t k = 0; k < n; k++) {
                dup = dup || out[k] == a;
            }
            if (!dup) {
                out[n++] = a;
            }
        }
    }
    freeifaddrs(all);
    return n;
}

static uint64_t draw_nonce(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
        v = rig_now_ns() ^ ((uint64_t)getpid() << 32);
    }
    return v;
}

/* A listening socket on any address, an ephemeral port; -1 with errno. */
static int listen_any(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof(a);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    *port = a.sin_port;
    return fd;
}

/* ---- making the links ------------------------------------------------------
 */

/* A connection being made: ours to a lower rank (out) or one a higher rank
 * made to us (in). */
typedef struct {
    int fd;
    int peer;      /* out: the rank; in: -1 until its greeting came */
    uint32_t addr; /* out: the address tried; in: the caller's */
    bool out;
    bool connecting; /* out: connect() has not completed */
    uint32_t kind;   /* out: what it is for; in: from its greeting */
    greeting got;
    size_t have; /* bytes of got read so far */
} pending;

typedef struct {
    rig_liveness *l;
    const card *cards;
    uint64_t nonce;
    pending *p;
    size_t np, cap;
    int listener;
    int need;  /* connections still to make */
    char *why; /* the first reason a peer could not be reached */
    int why_peer;
} setup;

static bool linked(const setup *s, int r, uint32_t kind)
{
    return (kind == KIND_LINK ? s->l->fd : s->l->data_fd)[r] >= 0;
}

/* Whether address k of card c is a loopback one (127.0.0.0/8). */
static bool loopback(const card *c, uint16_t k)
{
    return (ntohl(c->addr[k]) >> 24) == 127;
}

static bool has_loopback(const card *c)
{
    bool any = false;
    for (uint16_t k = 0; k < c->naddr && k < ADDRS_MAX; k++) {
        any = any || loopback(c, k);
    }
    return any;
}

/* Whether this rank and r, on one node, both ask for a data connection. */
static bool both_near(const card *cards, int me, int r)
{
    return cards[r].data_local && cards[me].data_local;
}

/* The kinds of connection this rank makes with r, a bit each: a link and
 * a data connection with a rank on another node; a data connection alone
 * with one on this node when both cards ask for it and the lower rank's
 * lists a loopback address, the only one tried between them (an address
 * of an interface can go away under the connection -- a bridge another
 * job takes down -- and with it the route); none when either card is
 * off. */
static unsigned kinds_with(const setup *s, const bool *local, int r)
{
    if (r == s->l->rank || s->cards[r].state != CARD_ON ||
        s->cards[s->l->rank].state != CARD_ON) {
        return 0;
    }
    if (!local[r]) {
        return 1u << KIND_LINK | 1u << KIND_DATA;
    }
    int lower = r < s->l->rank ? r : s->l->rank;
    return both_near(s->cards, s->l->rank, r) && has_loopback(&s->cards[lower])
               ? 1u << KIND_DATA
               : 0;
}

static bool linked_all(const setup *s, const bool *local, int r)
{
    unsigned k = kinds_with(s, local, r);
    return (!(k & 1u << KIND_LINK) || linked(s, r, KIND_LINK)) &&
           (!(k & 1u << KIND_DATA) || linked(s, r, KIND_DATA));
}

static bool pending_add(setup *s, pending p)
{
    if (s->np == s->cap) {
        size_t cap = s->cap == 0 ? 16 : 2 * s->cap;
        pending *n = realloc(s->p, cap * sizeof(*n));
        if (n == NULL) {
            return false;
        }
        s->p = n;
        s->cap = cap;
    }
    s->p[s->np++] = p;
    return true;
}

static void pending_drop(setup *s, size_t i)
{
    if (s->p[i].fd >= 0) {
        close(s->p[i].fd);
    }
    s->p[i] = s->p[--s->np];
}

static void note_why(setup *s, int peer, const char *fmt, ...) RIG_PRINTF(3, 4);
static void note_why(setup *s, int peer, const char *fmt, ...)
{
    if (s->why != NULL) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&s->why, fmt, ap) < 0) {
        s->why = NULL;
    }
    va_end(ap);
    s->why_peer = peer;
}

static bool send_all(int fd, const void *buf, size_t len)
{
    /* A fresh connection's send buffer takes a greeting whole. */
    ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    return n == (ssize_t)len;
}

/* The connection becomes the link (or the data connection) to peer:
 * nonblocking already; the bound as TCP_USER_TIMEOUT, and no delay for
 * the heartbeat byte (or a small run). */
static void adopt(setup *s, size_t i, int peer)
{
    rig_liveness *l = s->l;
    int fd = s->p[i].fd;
    uint32_t kind = s->p[i].kind;
    unsigned int ms = (unsigned int)l->bound_ms;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (kind == KIND_LINK) {
        l->fd[peer] = fd;
        l->addr[peer] = s->p[i].addr;
        l->links++;
    } else {
        l->data_fd[peer] = fd;
    }
    s->need--;
    s->p[i].fd = -1;
    pending_drop(s, i);
    /* Our other attempts of this kind to the same peer are no longer
     * needed. */
    for (size_t k = s->np; k-- > 0;) {
        if (s->p[k].out && s->p[k].peer == peer && s->p[k].kind == kind) {
            pending_drop(s, k);
        }
    }
}

/* Starts one connection of kind to address k of rank r (card c); false
 * only without memory (an address that fails at once is skipped: others
 * may work). */
static bool connect_one(setup *s, int r, const card *c, uint16_t k,
                        uint32_t kind)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        note_why(s, r, "socket failed: %s", strerror(errno));
        return true;
    }
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = c->port,
                            .sin_addr.s_addr = c->addr[k]};
    int rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
    if (rc != 0 && errno != EINPROGRESS) {
        close(fd);
        return true;
    }
    pending p = {.fd = fd,
                 .peer = r,
                 .addr = c->addr[k],
                 .out = true,
                 .connecting = rc != 0,
                 .kind = kind};
    if (!pending_add(s, p)) {
        close(fd);
        return false;
    }
    return true;
}

/* Starts a connection of each kind to every address of every lower rank
 * we link with. */
static bool connect_all(setup *s, const bool *local)
{
    rig_liveness *l = s->l;
    for (int r = 0; r < l->rank; r++) {
        unsigned kinds = kinds_with(s, local, r);
        if (kinds == 0) {
            continue;
        }
        const card *c = &s->cards[r];
        if (c->naddr == 0) {
            note_why(s, r, "rank %d has no IPv4 address", r);
            continue;
        }
        for (uint32_t kind = 0; kind < KINDS; kind++) {
            if (!(kinds & 1u << kind)) {
                continue;
            }
            for (uint16_t k = 0; k < c->naddr && k < ADDRS_MAX; k++) {
                if (local[r] && !loopback(c, k)) {
                    continue;
                }
                if (!connect_one(s, r, c, k, kind)) {
                    return false;
                }
            }
        }
    }
    return true;
}

/* Our side of a connection to a lower rank: connected, greet, read the
 * verdict.  False when this attempt is over (dropped). */
static bool step_out(setup *s, size_t i, short revents)
{
    pending *p = &s->p[i];
    rig_liveness *l = s->l;
    char at[INET_ADDRSTRLEN];
    struct in_addr ia = {.s_addr = p->addr};
    inet_ntop(AF_INET, &ia, at, sizeof(at));
    if (p->connecting) {
        if (!(revents & (POLLOUT | POLLERR | POLLHUP))) {
            return true;
        }
        int e = 0;
        socklen_t len = sizeof(e);
        getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &e, &len);
        if (e != 0) {
            note_why(s, p->peer, "connect to %s:%u failed: %s", at,
                     (unsigned)ntohs(s->cards[p->peer].port), strerror(e));
            pending_drop(s, i);
            return false;
        }
        p->connecting = false;
        greeting g = {.magic = GREET_MAGIC,
                      .from = (uint32_t)l->rank,
                      .to = (uint32_t)p->peer,
                      .kind = p->kind,
                      .nonce = s->nonce};
        if (!send_all(p->fd, &g, sizeof(g))) {
            pending_drop(s, i);
            return false;
        }
        return true;
    }
    if (!(revents & (POLLIN | POLLERR | POLLHUP))) {
        return true;
    }
    ssize_t n = recv(p->fd, (char *)&p->got + p->have, sizeof(p->got) - p->have,
                     MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return true;
    }
    if (n <= 0) {
        pending_drop(s, i); /* refused: another rank, job or a duplicate */
        return false;
    }
    p->have += (size_t)n;
    if (p->have < sizeof(p->got)) {
        return true;
    }
    const greeting *g = &p->got;
    if (g->magic == GREET_MAGIC && g->nonce == s->nonce && g->ok == 1 &&
        g->from == (uint32_t)p->peer && g->to == (uint32_t)l->rank &&
        g->kind == p->kind && !linked(s, p->peer, p->kind)) {
        adopt(s, i, p->peer);
    } else {
        pending_drop(s, i);
    }
    return false;
}

/* A connection a higher rank made: read its greeting, answer it. */
static bool step_in(setup *s, size_t i, short revents, const bool *local)
{
    pending *p = &s->p[i];
    rig_liveness *l = s->l;
    if (!(revents & (POLLIN | POLLERR | POLLHUP))) {
        return true;
    }
    ssize_t n = recv(p->fd, (char *)&p->got + p->have, sizeof(p->got) - p->have,
                     MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return true;
    }
    if (n <= 0) {
        pending_drop(s, i);
        return false;
    }
    p->have += (size_t)n;
    if (p->have < sizeof(p->got)) {
        return true;
    }
    const greeting *g = &p->got;
    int from = (int)g->from;
    bool ok = g->magic == GREET_MAGIC && g->nonce == s->nonce &&
              g->to == (uint32_t)l->rank && from > l->rank && from < l->size &&
              g->kind < KINDS && (kinds_with(s, local, from) >> g->kind & 1u) &&
              !linked(s, from, g->kind);
    greeting a = {.magic = GREET_MAGIC,
                  .from = (uint32_t)l->rank,
                  .to = g->from,
                  .ok = ok ? 1u : 0u,
                  .kind = g->kind,
                  .nonce = s->nonce};
    if (!send_all(p->fd, &a, sizeof(a)) || !ok) {
        pending_drop(s, i);
        return false;
    }
    p->kind = g->kind;
    adopt(s, i, from);
    return false;
}

static bool accept_all(setup *s)
{
    for (;;) {
        struct sockaddr_in a;
        socklen_t len = sizeof(a);
        int fd = accept4(s->listener, (struct sockaddr *)&a, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            return true; /* EAGAIN, or a connection that went away */
        }
        pending p = {.fd = fd, .peer = -1, .addr = a.sin_addr.s_addr};
        if (!pending_add(s, p)) {
            close(fd);
            return false;
        }
    }
}

/* Makes every link; false with s->why (or nomem) on failure. */
static bool links_make(setup *s, const bool *local)
{
    rig_liveness *l = s->l;
    if (!connect_all(s, local)) {
        return false;
    }
    uint64_t until = rig_now_ns() + (uint64_t)SETUP_MS * 1000000u;
    struct pollfd *pf = NULL;
    size_t pcap = 0;
    bool ok = true;
    while (s->need > 0 && ok) {
        uint64_t now = rig_now_ns();
        if (now >= until) {
            break;
        }
        if (pcap < s->np + 1) {
            pcap = s->np + 16;
            struct pollfd *n = realloc(pf, pcap * sizeof(*n));
            if (n == NULL) {
                ok = false;
                break;
            }
            pf = n;
        }
        size_t m = s->np;
        for (size_t i = 0; i < m; i++) {
            pf[i].fd = s->p[i].fd;
            pf[i].events = s->p[i].connecting ? POLLOUT : POLLIN;
            pf[i].revents = 0;
        }
        pf[m] = (struct pollfd){.fd = s->listener, .events = POLLIN};
        int wait = (int)((until - now) / 1000000u) + 1;
        if (poll(pf, m + 1, wait > 100 ? 100 : wait) < 0 && errno != EINTR) {
            note_why(s, -1, "poll failed: %s", strerror(errno));
            break;
        }
        /* Steps drop and reorder entries: walk a snapshot by descriptor. */
        for (size_t k = 0; k < m && ok; k++) {
            if (pf[k].revents == 0) {
                continue;
            }
            for (size_t i = 0; i < s->np; i++) {
                if (s->p[i].fd == pf[k].fd) {
                    if (s->p[i].out) {
                        step_out(s, i, pf[k].revents);
                    } else {
                        step_in(s, i, pf[k].revents, local);
                    }
                    break;
                }
            }
        }
        if (pf[m].revents & POLLIN) {
            ok = accept_all(s);
        }
        /* A lower rank every attempt to which failed: none is left. */
        for (int r = 0; r < l->rank && ok; r++) {
            bool trying = false;
            for (size_t i = 0; i < s->np && !trying; i++) {
                trying = s->p[i].out && s->p[i].peer == r;
            }
            if (!linked_all(s, local, r) && !trying) {
                note_why(s, r, "every address of rank %d refused", r);
                s->why_peer = r;
                until = 0; /* give up */
            }
        }
    }
    free(pf);
    return ok;
}

/* ---- watching
 * ---------------------------------------------------------------- */

static void drop(rig_liveness *l, int r, const char *what, int e)
{
    char at[INET_ADDRSTRLEN];
    struct in_addr ia = {.s_addr = l->addr[r]};
    inet_ntop(AF_INET, &ia, at, sizeof(at));
    close(l->fd[r]); /* and out of the epoll set */
    l->fd[r] = -1;
    l->links--;
    char how[256];
    bool closed = false;
    if (e == ETIMEDOUT) {
        snprintf(how, sizeof(how),
                 "did not answer for %llu ms on its link (%s): the link is "
                 "cut or its host is down",
                 (unsigned long long)l->bound_ms, at);
    } else if (e == 0 || e == ECONNRESET || e == EPIPE) {
        /* A killed process's kernel closes its end: FIN, or RST when
         * heartbeats were left unread. */
        snprintf(how, sizeof(how), "closed its link (%s%s): its process ended",
                 at, e == 0 ? "" : ", reset");
        closed = true;
    } else {
        snprintf(how, sizeof(how), "lost its link (%s): %s: %s", at, what,
                 strerror(e));
    }
    l->lost(l->arg, r, how, closed);
}

/* Reads what the peer wrote (heartbeats); false when the link is gone
 * (then reported). */
static bool drain(rig_liveness *l, int r)
{
    char buf[256];
    for (;;) {
        ssize_t n = recv(l->fd[r], buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0 || (n < 0 && errno == EINTR)) {
            continue;
        }
        if (n < 0 && errno == EAGAIN) {
            return true;
        }
        drop(l, r, "recv", n == 0 ? 0 : errno);
        return false;
    }
}

/* Whether the bytes that wait on the link have waited longer than the
 * bound (since[r]: the heartbeat that found the link empty), with the
 * peer's window open.  TCP_USER_TIMEOUT covers bytes that went out; this
 * covers bytes the kernel could not even send (a local queue that drops
 * them, whose wait it judges by probe counts, late) -- and a peer that
 * still talks, so that ACK-carrying segments keep arriving while ours are
 * lost.  A peer whose window is full (stopped for hours) advertises a
 * zero window and is not unanswered: the kernel's window probes, which it
 * acknowledges, judge it. */
static bool unanswered(const rig_liveness *l, int r, uint64_t now)
{
    if (l->since[r] == 0 || now - l->since[r] <= l->bound_ms * 1000000u) {
        return false;
    }
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(l->fd[r], IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) {
        return false;
    }
    bool has_wnd = len >= offsetof(struct tcp_info, tcpi_snd_wnd) +
                              sizeof(ti.tcpi_snd_wnd);
    return !has_wnd || ti.tcpi_snd_wnd != 0;
}

/* Bytes not yet acknowledged on the link (sent or not). */
static int queued(const rig_liveness *l, int r)
{
    int q = 0;
    return ioctl(l->fd[r], SIOCOUTQ, &q) == 0 ? q : 0;
}

/* The heartbeat, when due; the milliseconds until the next. */
static int tick(rig_liveness *l)
{
    uint64_t now = rig_now_ns();
    if (now >= l->next_ns) {
        static const char beat = 0;
        for (int r = 0; r < l->size; r++) {
            if (l->fd[r] < 0 || !drain(l, r)) {
                continue;
            }
            if (queued(l, r) == 0) {
                l->since[r] = 0;
            } else if (unanswered(l, r, now)) {
                drop(l, r, "no acknowledgement", ETIMEDOUT);
                continue;
            }
            /* A full send buffer (a peer stopped for a long time) is not
             * an error: the acknowledgements judge what waits. */
            if (send(l->fd[r], &beat, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
                if (errno != EAGAIN && errno != EINTR) {
                    drop(l, r, "send", errno);
                }
            } else if (l->since[r] == 0) {
                l->since[r] = now;
            }
        }
        l->next_ns = now + l->period_ns;
    }
    uint64_t left = l->next_ns > now ? l->next_ns - now : 0;
    return (int)((left + 999999u) / 1000000u);
}

/* An event on a link: gone, or only bytes to drain. */
static void event(rig_liveness *l, int r)
{
    int e = 0;
    socklen_t len = sizeof(e);
    if (getsockopt(l->fd[r], SOL_SOCKET, SO_ERROR, &e, &len) == 0 && e != 0) {
        drop(l, r, "the connection", e);
    } else {
        drain(l, r);
    }
}

static void *watch_main(void *arg)
{
    rig_liveness *l = arg;
    struct epoll_event ev[16];
    while (l->links > 0) {
        int n = epoll_wait(l->epfd, ev, 16, tick(l));
        for (int i = 0; i < n; i++) {
            int r = (int)ev[i].data.u32;
            if (r == l->size) {
                return NULL; /* stopfd: closing */
            }
            if (l->fd[r] >= 0) {
                event(l, r);
            }
        }
    }
    /* Every link was lost: wait for the close. */
    uint64_t v;
    while (read(l->stopfd, &v, sizeof(v)) < 0 && errno == EINTR) {
    }
    return NULL;
}

/* The thread, when there are links: epoll on each (errors and hang-ups
 * are always reported; RDHUP is the peer's close; heartbeats that arrive
 * wake nothing, the tick drains them) and on stopfd. */
static bool watch_start(rig_liveness *l, char **err)
{
    if (l->links == 0) {
        return true;
    }
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->stopfd = eventfd(0, EFD_CLOEXEC);
    if (l->epfd < 0 || l->stopfd < 0) {
        return rig_err(err, "system: epoll_create1 or eventfd failed: %s",
                       strerror(errno));
    }
    struct epoll_event stop = {.events = EPOLLIN,
                               .data.u32 = (uint32_t)l->size};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->stopfd, &stop) != 0) {
        return rig_err(err, "system: epoll_ctl failed: %s", strerror(errno));
    }
    for (int r = 0; r < l->size; r++) {
        struct epoll_event ev = {.events = EPOLLRDHUP, .data.u32 = (uint32_t)r};
        if (l->fd[r] >= 0 &&
            epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->fd[r], &ev) != 0) {
            return rig_err(err, "system: epoll_ctl failed: %s",
                           strerror(errno));
        }
    }
    int e = pthread_create(&l->thread, NULL, watch_main, l);
    if (e != 0) {
        return rig_err(err, "system: pthread_create failed: %s", strerror(e));
    }
    l->started = true;
    return true;
}

/* ---- open and close ---------------------------------------------------------
 */

void rig_liveness_close(rig_liveness *l)
{
    if (l == NULL) {
        return;
    }
    if (l->started) {
        uint64_t one = 1;
        ssize_t n = write(l->stopfd, &one, sizeof(one));
        (void)n;
        pthread_join(l->thread, NULL);
    }
    for (int r = 0; l->fd != NULL && r < l->size; r++) {
        if (l->fd[r] >= 0) {
            close(l->fd[r]);
        }
        if (l->data_fd != NULL && l->data_fd[r] >= 0) {
            close(l->data_fd[r]);
        }
    }
    if (l->epfd >= 0) {
        close(l->epfd);
    }
    if (l->stopfd >= 0) {
        close(l->stopfd);
    }
    free(l->fd);
    free(l->data_fd);
    free(l->addr);
    free(l->since);
    free(l);
}

bool rig_liveness_open(MPI_Comm comm, int rank, int size, const bool *local,
                       bool data_local, uint64_t bound_ms,
                       rig_liveness_lost_fn lost, void *arg, rig_liveness **out,
                       char **err)
{
    rig_liveness *l = calloc(1, sizeof(*l));
    if (l != NULL) {
        l->epfd = -1;
        l->stopfd = -1;
        l->lost = lost;
        l->arg = arg;
    }
    card *cards = calloc((size_t)size, sizeof(*cards));
    if (l != NULL) {
        l->fd = malloc((size_t)size * sizeof(*l->fd));
        l->data_fd = malloc((size_t)size * sizeof(*l->data_fd));
        l->addr = calloc((size_t)size, sizeof(*l->addr));
        l->since = calloc((size_t)size, sizeof(*l->since));
    }
    /* Even without memory this rank joins the gather (a card that says
     * so), or the others would wait for it. */
    bool fine = l != NULL && cards != NULL && l->fd != NULL &&
                l->data_fd != NULL && l->addr != NULL && l->since != NULL;
    bool remote = false, near = false;
    for (int r = 0; r < size; r++) {
        remote = remote || (r != rank && !local[r]);
        near = near || (r != rank && local[r]);
        if (l != NULL && l->fd != NULL) {
            l->fd[r] = -1;
        }
        if (l != NULL && l->data_fd != NULL) {
            l->data_fd[r] = -1;
        }
    }
    card mine = {.nonce = rank == 0 ? draw_nonce() : 0,
                 .state = CARD_OFF,
                 .data_local = data_local && near ? 1u : 0u};
    int listener = -1;
    int listen_errno = 0;
    if (bound_ms > 0 && (remote || mine.data_local)) {
        mine.state = CARD_BROKEN;
        if (fine) {
            listener = listen_any(&mine.port);
            listen_errno = errno;
            mine.naddr = my_addresses(mine.addr);
            mine.state = listener >= 0 ? CARD_ON : CARD_BROKEN;
        }
    }
    card dummy;
    int rc =
        MPI_Allgather(&mine, (int)sizeof(mine), MPI_BYTE,
                      cards != NULL ? (void *)cards : (void *)&dummy,
                      cards != NULL ? (int)sizeof(mine) : 0, MPI_BYTE, comm);
    bool ok = false;
    setup s = {.l = l, .cards = cards, .listener = listener, .why_peer = -1};
    if (!fine) {
        rig_err(err, "nomem: link tables for %d ranks", size);
        goto out;
    }
    if (rc != MPI_SUCCESS) {
        rig_err_mpi(err, rc, "MPI_Allgather");
        goto out;
    }
    l->rank = rank;
    l->size = size;
    l->bound_ms = bound_ms;
    l->period_ns = bound_ms * 1000000u / 8;
    s.nonce = cards[0].nonce;
    if (mine.state == CARD_OFF) {
        ok = true; /* links off, or no rank to connect with */
        goto out;
    }
    if (mine.state == CARD_BROKEN) {
        rig_err(err, "system: rank %d cannot listen for its links: %s", rank,
                strerror(listen_errno));
        goto out;
    }
    for (int r = 0; r < size; r++) {
        bool asks = !local[r] || both_near(cards, rank, r);
        if (r != rank && asks && cards[r].state == CARD_BROKEN) {
            rig_err(err, "failed: rank %d could not listen for its links", r);
            goto out;
        }
        s.need += __builtin_popcount(kinds_with(&s, local, r));
    }
    if (!links_make(&s, local)) {
        rig_err(err, "nomem: making the links of rank %d", rank);
        goto out;
    }
    if (s.need > 0) {
        int missing = -1;
        for (int r = 0; r < size && missing < 0; r++) {
            if (!linked_all(&s, local, r)) {
                missing = r;
            }
        }
        rig_err(err,
                "system: rank %d could not link with rank %d within %u ms "
                "(%s; RIG_PEER_TIMEOUT_MS=0 opens the job without links, "
                "and without detecting a silent peer)",
                rank, missing, SETUP_MS,
                s.why != NULL && s.why_peer == missing ? s.why
                : missing > rank                       ? "it never connected"
                                                       : "no answer");
        goto out;
    }
    l->made = l->links;
    l->next_ns = rig_now_ns() + l->period_ns;
    ok = watch_start(l, err);

out:
    for (size_t i = 0; i < s.np; i++) {
        close(s.p[i].fd);
    }
    free(s.p);
    free(s.why);
    if (listener >= 0) {
        close(listener);
    }
    free(cards);
    if (!ok) {
        if (l != NULL) {
            l->size = size;
        }
        rig_liveness_close(l);
        return false;
    }
    *out = l;
    return true;
}

int rig_liveness_count(const rig_liveness *l)
{
    return l != NULL ? l->made : 0;
}

int rig_liveness_take_data(rig_liveness *l, int r)
{
    if (l == NULL || l->data_fd == NULL || r < 0 || r >= l->size) {
        return -1;
    }
    int fd = l->data_fd[r];
    l->data_fd[r] = -1;
    return fd;
}
