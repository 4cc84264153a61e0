/* SPDX-License-Identifier: BSD-3-Clause */
/* The pair protocol (see handshake.h): the offers, the decision both ranks
 * take alike, the answers. */
#include "handshake.h"

#include "../../util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OFFER_MAGIC 0x72696732u  /* "rig2" */
#define ANSWER_MAGIC 0x72696761u /* "riga" */

/* The status word of one side's offer. */
enum {
    STATUS_OK = 0,
    STATUS_LISTS = 1, /* its lists fail rig_check_transfers */
    STATUS_END = 2,   /* it could not make its end */
    STATUS_FAILED = 3 /* its job has failed */
};

typedef struct {
    uint32_t magic;
    int32_t status;
    int64_t id;
    uint64_t nsend, nreceive, nreleased, desc_len, msg_len;
} offer_head;

/* One side's offer, parsed in place. */
typedef struct {
    offer_head h;
    const rig_transfer *send, *receive;
    const int64_t *released; /* ids, ascending */
    const void *desc;
    const char *msg;
} offer;

typedef struct {
    uint32_t magic;
    int32_t ok;       /* it connected its end */
    int32_t attached; /* its end is in the job's window */
    uint32_t pad;
    int64_t counts, outbound, inbound; /* its areas' addresses */
    uint64_t len;                      /* the transport's answer that follows */
} answer_head;

/* ---- one exchange -------------------------------------------------------- */

/* Sends buf to peer and receives the peer's message of the same tag, both
 * tested with backoff (a late peer costs no spinning core); *in is
 * malloc'd.  A failed job ends the wait: the peer may never answer (dead,
 * or failed before it got here). */
static bool swap(const rig_handshake *h, int peer, int tag, const void *buf,
                 size_t len, void **in, size_t *inlen, char **err)
{
    MPI_Request req;
    int rc = MPI_Isend(buf, (int)len, MPI_BYTE, peer, tag, h->comm, &req);
    if (rc != MPI_SUCCESS) {
        return rig_err_mpi(err, rc, "MPI_Isend");
    }
    rig_backoff b = {0};
    int flag = 0;
    MPI_Message msg;
    MPI_Status st;
    for (;;) {
        rc = MPI_Improbe(peer, tag, h->comm, &flag, &msg, &st);
        if (rc != MPI_SUCCESS || flag) {
            break;
        }
        const char *failed = h->failed(h->self);
        if (failed != NULL) {
            MPI_Cancel(&req);
            MPI_Request_free(&req);
            return rig_err(err, "%s", failed);
        }
        rig_backoff_step(&b);
    }
    if (rc != MPI_SUCCESS) {
        MPI_Cancel(&req);
        MPI_Request_free(&req);
        return rig_err_mpi(err, rc, "MPI_Improbe");
    }
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    void *m = malloc(count > 0 ? (size_t)count : 1);
    if (m == NULL) {
        /* Still receive it, or the pair's next message would match. */
        char dummy[1];
        MPI_Mrecv(dummy, 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        return rig_err(err, "nomem: %d-byte message from rank %d", count, peer);
    }
    rc = MPI_Mrecv(m, count, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        free(m);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        return rig_err_mpi(err, rc, "MPI_Mrecv");
    }
    b.spins = 0;
    for (;;) {
        rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag) {
            break;
        }
        const char *failed = h->failed(h->self);
        if (failed != NULL) {
            free(m);
            MPI_Cancel(&req);
            MPI_Request_free(&req);
            return rig_err(err, "%s", failed);
        }
        rig_backoff_step(&b);
    }
    if (rc != MPI_SUCCESS) {
        free(m);
        return rig_err_mpi(err, rc, "MPI_Test");
    }
    *in = m;
    *inlen = (size_t)count;
    return true;
}

/* ---- the offer ----------------------------------------------------------- */

static void *offer_pack(int status, int64_t id, const rig_transfer *send,
                        size_t nsend, const rig_transfer *receive,
                        size_t nreceive, const int64_t *released,
                        size_t nreleased, const void *desc, size_t desc_len,
                        const char *msg, size_t *len)
{
    size_t msg_len = msg != NULL ? strlen(msg) + 1 : 0;
    if (status == STATUS_LISTS) {
        nsend = nreceive = 0; /* may be unreadable */
    }
    offer_head h = {
        .magic = OFFER_MAGIC,
        .status = status,
        .id = id,
        .nsend = nsend,
        .nreceive = nreceive,
        .nreleased = nreleased,
        .desc_len = desc_len,
        .msg_len = msg_len,
    };
    *len = sizeof(h) + (nsend + nreceive) * sizeof(rig_transfer) +
           nreleased * sizeof(int64_t) + desc_len + msg_len;
    uint8_t *buf = malloc(*len);
    if (buf == NULL) {
        return NULL;
    }
    uint8_t *p = buf;
    memcpy(p, &h, sizeof(h));
    p += sizeof(h);
    if (nsend > 0) {
        memcpy(p, send, nsend * sizeof(rig_transfer));
    }
    p += nsend * sizeof(rig_transfer);
    if (nreceive > 0) {
        memcpy(p, receive, nreceive * sizeof(rig_transfer));
    }
    p += nreceive * sizeof(rig_transfer);
    if (nreleased > 0) {
        memcpy(p, released, nreleased * sizeof(int64_t));
    }
    p += nreleased * sizeof(int64_t);
    if (desc_len > 0) {
        memcpy(p, desc, desc_len);
    }
    p += desc_len;
    if (msg_len > 0) {
        memcpy(p, msg, msg_len);
    }
    return buf;
}

static bool offer_parse(const void *buf, size_t len, offer *o)
{
    if (len < sizeof(offer_head)) {
        return false;
    }
    memcpy(&o->h, buf, sizeof(o->h));
    const offer_head *h = &o->h;
    if (h->magic != OFFER_MAGIC || h->nsend > (1u << 30) ||
        h->nreceive > (1u << 30) || h->nreleased > (1u << 30) ||
        h->desc_len > (1u << 30) || h->msg_len > (1u << 20)) {
        return false;
    }
    size_t need = sizeof(offer_head) +
                  (size_t)(h->nsend + h->nreceive) * sizeof(rig_transfer) +
                  (size_t)h->nreleased * sizeof(int64_t) + (size_t)h->desc_len +
                  (size_t)h->msg_len;
    if (need != len) {
        return false;
    }
    const uint8_t *p = (const uint8_t *)buf + sizeof(offer_head);
    o->send = (const rig_transfer *)p;
    p += h->nsend * sizeof(rig_transfer);
    o->receive = (const rig_transfer *)p;
    p += h->nreceive * sizeof(rig_transfer);
    o->released = (const int64_t *)p;
    p += h->nreleased * sizeof(int64_t);
    o->desc = p;
    p += h->desc_len;
    o->msg = h->msg_len > 0 ? (const char *)p : "(no reason)";
    if (h->msg_len > 0 && o->msg[h->msg_len - 1] != '\0') {
        return false;
    }
    return true;
}

/* ---- the decision -------------------------------------------------------- */

/* One side's lists as it stated them. */
typedef struct {
    const rig_transfer *send, *receive;
    uint64_t nsend, nreceive;
} lists;

static bool same(const rig_transfer *a, const rig_transfer *b)
{
    return a->src == b->src && a->dst == b->dst && a->length == b->length;
}

/* True iff what lo sends is what hi receives and the other way round;
 * else "invalid: rail between ranks LO and HI: ..." naming the first
 * difference, the same text at both ranks. */
static bool lists_match(int lo, const lists *l, int hi, const lists *h,
                        char **err)
{
    const char *prefix = "invalid: rail between ranks";
    for (int dir = 0; dir < 2; dir++) {
        int sr = dir == 0 ? lo : hi, rr = dir == 0 ? hi : lo;
        const rig_transfer *s = dir == 0 ? l->send : h->send;
        const rig_transfer *r = dir == 0 ? h->receive : l->receive;
        uint64_t ns = dir == 0 ? l->nsend : h->nsend;
        uint64_t nr = dir == 0 ? h->nreceive : l->nreceive;
        uint64_t n = ns < nr ? ns : nr;
        for (uint64_t i = 0; i < n; i++) {
            if (!same(&s[i], &r[i])) {
                return rig_err(err,
                               "%s %d and %d: send[%llu] of rank %d {src "
                               "%lld, dst %lld, length %lld} differs from "
                               "receive[%llu] of rank %d {src %lld, dst "
                               "%lld, length %lld}",
                               prefix, lo, hi, (unsigned long long)i, sr,
                               (long long)s[i].src, (long long)s[i].dst,
                               (long long)s[i].length, (unsigned long long)i,
                               rr, (long long)r[i].src, (long long)r[i].dst,
                               (long long)r[i].length);
            }
        }
        if (ns != nr) {
            return rig_err(err,
                           "%s %d and %d: rank %d sends %llu transfers "
                           "but rank %d receives %llu",
                           prefix, lo, hi, sr, (unsigned long long)ns, rr,
                           (unsigned long long)nr);
        }
    }
    return true;
}

/* Why peer refused, in the words of rig_job_rail. */
static bool peer_refused(int peer, int status, const char *why, char **err)
{
    if (status == STATUS_LISTS) {
        return rig_err(err, "invalid: rank %d's lists: %s", peer,
                       strncmp(why, "invalid: ", 9) == 0 ? why + 9 : why);
    }
    if (status == STATUS_FAILED) {
        return rig_err(err, "failed: rank %d: %s", peer, why);
    }
    return rig_err(err, "failed: rank %d could not make its end: %s", peer,
                   why);
}

/* Both offers agree: nothing from here on may differ between the ranks. */
static bool decide(const rig_handshake *h, int peer, int64_t id,
                   const lists *mine, const offer *them, char **err)
{
    if (them->h.id != id) {
        return rig_err(err,
                       "invalid: rail %llu with rank %d met its rail %llu "
                       "(calls to one peer from several threads?)",
                       (unsigned long long)(id & 0xffffffff), peer,
                       (unsigned long long)(them->h.id & 0xffffffff));
    }
    if (them->h.status != STATUS_OK) {
        return peer_refused(peer, them->h.status, them->msg, err);
    }
    lists th = {them->send, them->receive, them->h.nsend, them->h.nreceive};
    int lo = h->rank < peer ? h->rank : peer;
    int hi = h->rank < peer ? peer : h->rank;
    bool me_lo = h->rank == lo;
    return lists_match(lo, me_lo ? mine : &th, hi, me_lo ? &th : mine, err);
}

/* ---- released rails ------------------------------------------------------ */

/* Frees the rails both offers list as released (see handshake.h): the
 * ids in both lists, ascending, taken alike at both ranks.  Not when
 * either side's job failed: the peer may be gone before a collective. */
static void free_released(const rig_handshake *h, int peer, int status,
                          const int64_t *mine, size_t nmine, const offer *them)
{
    if (status == STATUS_FAILED || them->h.status == STATUS_FAILED ||
        nmine == 0 || them->h.nreleased == 0) {
        return;
    }
    int64_t *both = malloc(nmine * sizeof(*both));
    if (both == NULL) {
        return; /* kept until close: safe, only memory */
    }
    size_t n = 0;
    size_t ntheirs = (size_t)them->h.nreleased;
    for (size_t i = 0, j = 0; i < nmine && j < ntheirs;) {
        int64_t t;
        memcpy(&t, &them->released[j], sizeof(t)); /* may be unaligned */
        if (mine[i] < t) {
            i++;
        } else if (t < mine[i]) {
            j++;
        } else {
            both[n++] = mine[i];
            i++;
            j++;
        }
    }
    if (n > 0) {
        h->ops->free_released(h->self, peer, both, n);
    }
    free(both);
}

/* ---- the answer ---------------------------------------------------------- */

static int64_t address_of(void *p)
{
    MPI_Aint a = 0;
    if (p != NULL) {
        MPI_Get_address(p, &a);
    }
    return (int64_t)a;
}

/* Swaps the answers; true with *peer_ok and *them (and *tail, malloc'd,
 * pointing into it) when the exchange worked. */
static bool answer_swap(const rig_handshake *h, int peer, bool ok,
                        bool attached, const rig_handshake_mem *mem,
                        const void *extra, size_t extra_len, answer_head *them,
                        void **in, const void **tail, char **err)
{
    answer_head a = {.magic = ANSWER_MAGIC, .ok = ok ? 1 : 0};
    if (ok) {
        int64_t base = address_of(mem->base);
        a.attached = attached ? 1 : 0;
        a.counts = base + (int64_t)mem->layout->counts_at;
        a.outbound = base + (int64_t)mem->layout->outbound_at;
        a.inbound = base + (int64_t)mem->layout->inbound_at;
        a.len = extra_len;
    } else {
        extra_len = 0;
    }
    size_t len = sizeof(a) + extra_len;
    uint8_t *buf = malloc(len);
    if (buf == NULL) {
        a = (answer_head){.magic = ANSWER_MAGIC, .ok = 0};
        len = sizeof(a);
        buf = (uint8_t *)&a;
    } else {
        memcpy(buf, &a, sizeof(a));
        if (extra_len > 0) {
            memcpy(buf + sizeof(a), extra, extra_len);
        }
    }
    size_t inlen = 0;
    bool swapped = swap(h, peer, RIG_TAG_ANSWER, buf, len, in, &inlen, err);
    if (buf != (uint8_t *)&a) {
        free(buf);
    }
    if (!swapped) {
        return false;
    }
    memset(them, 0, sizeof(*them));
    if (inlen >= sizeof(*them)) {
        memcpy(them, *in, sizeof(*them));
    }
    if (them->magic != ANSWER_MAGIC || them->len != inlen - sizeof(*them)) {
        them->ok = 0; /* malformed: take it as a refusal */
    }
    *tail = (const uint8_t *)*in + sizeof(*them);
    return true;
}

/* ---- the rail ------------------------------------------------------------ */

bool rig_handshake_rail(const rig_handshake *h, int peer, int64_t id,
                        const rig_transfer *send, size_t nsend,
                        const rig_transfer *receive, size_t nreceive,
                        rig_rail **out, char **err)
{
    /* This side: what it released, check the lists, make the end. */
    int status = STATUS_OK;
    char *mine = NULL;
    void *end = NULL;
    const void *desc = NULL;
    size_t desc_len = 0;
    int64_t *released = NULL;
    size_t nreleased = 0;
    const char *failed = h->failed(h->self);
    if (failed == NULL) {
        h->ops->released(h->self, peer, &released, &nreleased);
    }
    if (failed != NULL) {
        status = STATUS_FAILED;
        rig_err(&mine, "%s", failed);
    } else if (!rig_check_transfers(send, nsend, receive, nreceive, &mine)) {
        status = STATUS_LISTS;
    } else if (!h->ops->make(h->self, peer, id, send, nsend, receive, nreceive,
                             &end, &desc, &desc_len, &mine)) {
        status = STATUS_END;
    }
    size_t len = 0;
    void *buf = offer_pack(status, id, send, nsend, receive, nreceive, released,
                           nreleased, desc, desc_len, mine, &len);
    if (buf == NULL) {
        /* Tell the peer at least that this side failed. */
        status = STATUS_END;
        free(mine);
        mine = strdup("nomem: rail message");
        nreleased = 0;
        buf = offer_pack(STATUS_END, id, NULL, 0, NULL, 0, NULL, 0, NULL, 0,
                         NULL, &len);
    }
    void *in = NULL;
    size_t inlen = 0;
    /* A reason already found (a failed job, bad lists) is the one to
     * report: the exchange's own error, if any, must not replace it. */
    bool ok = buf != NULL && swap(h, peer, RIG_TAG_OFFER, buf, len, &in, &inlen,
                                  mine == NULL ? &mine : NULL);
    free(buf);
    if (!ok) {
        goto err_end; /* mine holds this side's error */
    }
    offer them;
    if (!offer_parse(in, inlen, &them)) {
        if (status == STATUS_OK) {
            rig_err(&mine, "invalid: rank %d sent a malformed rail message",
                    peer);
        }
        goto err_end;
    }
    /* Rails both released go first, whatever becomes of this one. */
    free_released(h, peer, status, released, nreleased, &them);
    if (status != STATUS_OK) {
        goto err_end;
    }

    /* Both sides decide alike from the two offers. */
    lists me = {send, receive, nsend, nreceive};
    if (!decide(h, peer, id, &me, &them, &mine)) {
        goto err_end;
    }

    /* Connect, attach, then agree that both did. */
    rig_rail *rail = NULL;
    rig_handshake_mem mem = {0};
    const void *extra = NULL;
    size_t extra_len = 0;
    ok = h->ops->connect(end, them.desc, (size_t)them.h.desc_len, &rail, &mem,
                         &extra, &extra_len, &mine);
    bool attached =
        ok && rig_window_attach(h->window, mem.base, mem.layout->total);
    answer_head th;
    void *tin = NULL;
    const void *tail = NULL;
    bool together = true; /* both answers swapped */
    if (!answer_swap(h, peer, ok, attached, &mem, extra, extra_len, &th, &tin,
                     &tail, ok ? &mine : NULL)) {
        ok = false;
        together = false;
    } else if (ok && th.ok != 1) {
        rig_err(&mine, "failed: rank %d could not connect its end of rail %lld",
                peer, (long long)id);
        ok = false;
    }
    if (!ok) {
        if (attached) {
            rig_window_detach(h->window, mem.base);
        }
        h->ops->discard(end, rail, together);
        end = NULL;
        free(tin);
        goto err_end;
    }
    rig_handshake_end he = {
        .attached = attached,
        .far =
            {
                .rank = peer,
                .attached = th.attached != 0,
                .counts = th.counts,
                .outbound = th.outbound,
                .inbound = th.inbound,
            },
    };
    h->ops->finish(end, tail, (size_t)th.len, &he);
    free(tin);
    free(in);
    free(released);
    *out = rail;
    return true;

err_end:
    if (end != NULL) {
        /* No window is made before connect: nothing needs the peer. */
        h->ops->discard(end, NULL, false);
    }
    free(released);
    free(in);
    if (err != NULL) {
        *err = mine;
    } else {
        free(mine);
    }
    return false;
}
