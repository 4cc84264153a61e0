/* SPDX-License-Identifier: BSD-3-Clause */
/* check_transfers and the layout of an end's landing areas. */
#include "abi_internal.h"
#include "../util/util_internal.h"

#include <unistd.h>

static bool check_list(const char *name, const rig_transfer *t, size_t n,
                       char **why)
{
    if (n > 0 && t == NULL) {
        return rig_err(why, "invalid: %s is NULL with %zu transfers", name, n);
    }
    for (size_t i = 0; i < n; i++) {
        const rig_transfer *x = &t[i];
        if (x->length < 1) {
            return rig_err(why, "invalid: %s[%zu] has length %lld", name, i,
                           (long long)x->length);
        }
        if (x->src < 0) {
            return rig_err(why, "invalid: %s[%zu] has src %lld < 0", name, i,
                           (long long)x->src);
        }
        if (x->dst < 0) {
            return rig_err(why, "invalid: %s[%zu] has dst %lld < 0", name, i,
                           (long long)x->dst);
        }
        /* Compare without overflow: x + length <= LIMIT. */
        if (x->length > RIG_TRANSFER_LIMIT ||
            x->src > RIG_TRANSFER_LIMIT - x->length) {
            return rig_err(why,
                           "invalid: %s[%zu] has src + length > 2^60 "
                           "(src %lld, length %lld)",
                           name, i, (long long)x->src, (long long)x->length);
        }
        if (x->dst > RIG_TRANSFER_LIMIT - x->length) {
            return rig_err(why,
                           "invalid: %s[%zu] has dst + length > 2^60 "
                           "(dst %lld, length %lld)",
                           name, i, (long long)x->dst, (long long)x->length);
        }
    }
    return true;
}

bool rig_check_transfers(const rig_transfer *send, size_t nsend,
                         const rig_transfer *receive, size_t nreceive,
                         char **why)
{
    if (nsend == 0 && nreceive == 0) {
        return rig_err(why, "invalid: send and receive are both empty");
    }
    return check_list("send", send, nsend, why) &&
           check_list("receive", receive, nreceive, why);
}

size_t rig_copy_bytes(const rig_transfer *t, size_t n, rig_side side)
{
    uint64_t top = 0;
    if (t == NULL) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        int64_t at = side == RIG_BY_SRC ? t[i].src : t[i].dst;
        if (at < 0 || t[i].length < 1) {
            continue; /* unchecked input: ignore what check_transfers bans */
        }
        uint64_t end = (uint64_t)at + (uint64_t)t[i].length;
        if (end > top) {
            top = end;
        }
    }
    top = (top + RIG_COPY_ALIGN - 1) / RIG_COPY_ALIGN * RIG_COPY_ALIGN;
    return top > SIZE_MAX ? SIZE_MAX : (size_t)top;
}

rig_area rig_area_copy(rig_area two, unsigned k)
{
    rig_area none = {NULL, 0};
    if (two.base == NULL || two.len == 0 || k > 1) {
        return none;
    }
    size_t half = two.len / 2;
    rig_area a = {two.base + (size_t)k * half, half};
    return a;
}

static size_t round_up(size_t x, size_t page)
{
    return (x + page - 1) & ~(page - 1);
}

bool rig_end_layout_make(const rig_transfer *send, size_t nsend,
                         const rig_transfer *receive, size_t nreceive,
                         size_t page, rig_end_layout *out, char **err)
{
    if (out == NULL) {
        return rig_err(err, "invalid: out is NULL");
    }
    if (page == 0) {
        long p = sysconf(_SC_PAGESIZE);
        page = p > 0 ? (size_t)p : 4096;
    }
    if ((page & (page - 1)) != 0 || page < RIG_COUNTS_BYTES) {
        return rig_err(err, "invalid: page %zu is not a power of two >= %d",
                       page, RIG_COUNTS_BYTES);
    }
    if (!rig_check_transfers(send, nsend, receive, nreceive, err)) {
        return false;
    }
    size_t out_copy = rig_copy_bytes(send, nsend, RIG_BY_SRC);
    size_t in_copy = rig_copy_bytes(receive, nreceive, RIG_BY_DST);
    /* Each copy is at most 2^60 rounded up: twice that still fits 64 bits,
     * but refuse what this address space cannot hold. */
    if (out_copy > SIZE_MAX / 4 || in_copy > SIZE_MAX / 4) {
        return rig_err(err,
                       "invalid: landing areas of %zu and %zu bytes "
                       "exceed the address space",
                       out_copy, in_copy);
    }
    rig_end_layout l;
    l.counts_at = 0;
    l.counts_len = RIG_COUNTS_BYTES;
    l.outbound_at = page;
    l.outbound_len = 2 * out_copy;
    l.inbound_at = l.outbound_at + round_up(l.outbound_len, page);
    l.inbound_len = 2 * in_copy;
    l.total = l.inbound_at + round_up(l.inbound_len, page);
    *out = l;
    return true;
}

static rig_area area_at(uint8_t *base, size_t at, size_t len)
{
    rig_area a = {len > 0 ? base + at : NULL, len};
    return a;
}

void rig_end_desc_areas(rig_end_desc *d, const rig_end_layout *l, void *base)
{
    if (d == NULL || l == NULL || base == NULL) {
        return;
    }
    d->outbound = area_at(base, l->outbound_at, l->outbound_len);
    d->inbound = area_at(base, l->inbound_at, l->inbound_len);
    d->counts = area_at(base, l->counts_at, l->counts_len);
}
