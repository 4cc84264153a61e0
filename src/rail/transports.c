/* SPDX-License-Identifier: BSD-3-Clause */
/* The registry of transports: the table, checked once. */
#include "transports.h"

#include "../util/util_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Each transport's folder defines its table; the first is the default. */
extern const rig_transport_ops rig_ucx_ops;
extern const rig_transport_ops rig_mpi_ops;

static const rig_transport_ops *const table[] = {
    &rig_ucx_ops,
    &rig_mpi_ops,
};

#define NTABLE (sizeof(table) / sizeof(table[0]))

/* The transports that passed rig_transport_check, in table order. */
static const rig_transport_ops *usable[NTABLE];
static size_t nusable;
static pthread_once_t checked = PTHREAD_ONCE_INIT;

bool rig_transport_check(const rig_transport_ops *ops, char **err)
{
    if (ops == NULL) {
        return rig_err(err, "invalid: transport ops table is NULL");
    }
    const char *name = ops->name != NULL ? ops->name : "(unnamed)";
    const char *missing = ops->name == NULL       ? "name"
                          : ops->about == NULL    ? "about"
                          : ops->open == NULL     ? "open"
                          : ops->wire == NULL     ? "wire"
                          : ops->rail == NULL     ? "rail"
                          : ops->rail_far == NULL ? "rail_far"
                          : ops->owns == NULL     ? "owns"
                          : ops->fail == NULL     ? "fail"
                          : ops->failed == NULL   ? "failed"
                          : ops->gone == NULL     ? "gone"
                          : ops->stop == NULL     ? "stop"
                          : ops->close == NULL    ? "close"
                                                  : NULL;
    if (missing != NULL) {
        return rig_err(err, "invalid: transport %s lacks its %s slot", name,
                       missing);
    }
    return true;
}

static void check_all(void)
{
    for (size_t i = 0; i < NTABLE; i++) {
        char *why = NULL;
        if (rig_transport_check(table[i], &why)) {
            usable[nusable++] = table[i];
        } else {
            rig_log(RIG_LOG_ERROR, "%s: left out", why != NULL ? why : "nomem");
            free(why);
        }
    }
}

const rig_transport_ops *rig_transport_at(size_t i)
{
    pthread_once(&checked, check_all);
    return i < nusable ? usable[i] : NULL;
}

bool rig_transport_find(const char *name, const char *what,
                        const rig_transport_ops **out, char **err)
{
    pthread_once(&checked, check_all);
    for (size_t i = 0; i < nusable && name != NULL; i++) {
        if (strcmp(usable[i]->name, name) == 0) {
            *out = usable[i];
            return true;
        }
    }
    char names[256] = "";
    size_t at = 0;
    for (size_t i = 0; i < nusable && at < sizeof(names); i++) {
        int n = snprintf(names + at, sizeof(names) - at, "%s%s",
                         i > 0 ? ", " : "", usable[i]->name);
        at += n > 0 ? (size_t)n : 0;
    }
    return rig_err(err,
                   "invalid: %s \"%s\" is not a transport of this build (%s)",
                   what, name != NULL ? name : "(null)", names);
}
