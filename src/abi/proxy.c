/* SPDX-License-Identifier: BSD-3-Clause */
/* Proxy records: checked calls of a host's functions, the key and lookup. */
#include "abi_internal.h"
#include "../util/util_internal.h"

#include <stdlib.h>

const char rig_remote_abi_key[] = "rig.remote_abi";

bool rig_host_rail(const rig_host *h, const rig_host *peer,
                   const rig_transfer *send, size_t nsend,
                   const rig_transfer *receive, size_t nreceive, rig_rail **out,
                   char **err)
{
    if (h == NULL) {
        return rig_err(err, "invalid: host is NULL");
    }
    if (out == NULL) {
        return rig_err(err, "invalid: out is NULL");
    }
    if (h->rail == NULL) {
        return rig_err(err, "invalid: host %s has no rail function",
                       h->machine != NULL ? h->machine : "(unnamed)");
    }
    if (peer == h) {
        return rig_err(err, "invalid: peer is the host itself (%s)",
                       h->machine != NULL ? h->machine : "(unnamed)");
    }
    if (!rig_check_transfers(send, nsend, receive, nreceive, err)) {
        return false;
    }
    return h->rail(h, peer, send, nsend, receive, nreceive, out, err);
}

size_t rig_host_threads(const rig_host *h, int64_t program, int32_t **out)
{
    if (out == NULL) {
        return 0;
    }
    *out = NULL;
    if (h == NULL || h->threads == NULL) {
        return 0;
    }
    return h->threads(h, program, out);
}

rig_capability rig_remote_abi_declare(const rig_proxy *p)
{
    rig_capability c = {rig_remote_abi_key, p};
    return c;
}

const void *rig_capability_find(const rig_capability *facts, size_t n,
                                const void *key)
{
    if (facts == NULL || key == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (facts[i].key == key) {
            return facts[i].value;
        }
    }
    return NULL;
}

const rig_proxy *rig_remote_abi_find(const rig_capability *facts, size_t n)
{
    return rig_capability_find(facts, n, rig_remote_abi_key);
}
