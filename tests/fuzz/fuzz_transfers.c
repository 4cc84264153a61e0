/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target: rig_check_transfers and the end layout on arbitrary
 * transfer lists.  Aborts when an accepted list breaks a rule, a refusal
 * lacks its reason word, or the layout disagrees with the lists. */
#include "rig/remote_abi.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void must(int cond)
{
    if (!cond) {
        abort();
    }
}

static int transfer_ok(const rig_transfer *t)
{
    const int64_t lim = RIG_TRANSFER_LIMIT;
    return t->length >= 1 && t->src >= 0 && t->dst >= 0 && t->length <= lim &&
           t->src <= lim - t->length && t->dst <= lim - t->length;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    size_t n = (size - 1) / sizeof(rig_transfer);
    rig_transfer *t = malloc((n > 0 ? n : 1) * sizeof(*t));
    if (t == NULL) {
        return 0;
    }
    if (n > 0) {
        memcpy(t, data + 1, n * sizeof(*t));
    }
    size_t nsend = data[0] <= n ? data[0] : n;
    const rig_transfer *send = t, *receive = t + nsend;
    size_t nreceive = n - nsend;
    char *why = NULL;
    int ok = rig_check_transfers(send, nsend, receive, nreceive, &why);
    int all = n > 0;
    for (size_t i = 0; i < n; i++) {
        all = all && transfer_ok(&t[i]);
    }
    must(ok == all);
    if (!ok) {
        must(why != NULL && strncmp(why, "invalid: ", 9) == 0);
        free(why);
    } else {
        rig_end_layout l;
        must(rig_end_layout_make(send, nsend, receive, nreceive, 4096, &l,
                                 NULL) ||
             /* refused only when the areas exceed the address space */
             rig_copy_bytes(send, nsend, RIG_BY_SRC) > SIZE_MAX / 4 ||
             rig_copy_bytes(receive, nreceive, RIG_BY_DST) > SIZE_MAX / 4);
        for (size_t i = 0; i < nsend; i++) {
            must((uint64_t)(send[i].src + send[i].length) <=
                 rig_copy_bytes(send, nsend, RIG_BY_SRC));
        }
        for (size_t i = 0; i < nreceive; i++) {
            must((uint64_t)(receive[i].dst + receive[i].length) <=
                 rig_copy_bytes(receive, nreceive, RIG_BY_DST));
        }
    }
    free(t);
    return 0;
}
