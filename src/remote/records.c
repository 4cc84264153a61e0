/* SPDX-License-Identifier: BSD-3-Clause */
/* Proxy records: one Host per agent machine, one Device per device there,
 * each declared under rig_remote_abi_key, and what a host answers.
 *
 * A proxy's rig_proxy holds a copy of its host's rig_host, so a host's
 * functions find their state through impl (an rm_hostrec), never by the
 * address of the record they were called on. */
#include "remote_internal.h"

#include "../util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool host_rail(const rig_host *h, const rig_host *peer,
                      const rig_transfer *send, size_t nsend,
                      const rig_transfer *receive, size_t nreceive,
                      rig_rail **out, char **err);

static const rm_hostrec *hostrec_of(const rig_host *h)
{
    if (h == NULL || h->rail != host_rail || h->impl == NULL) {
        return NULL;
    }
    return h->impl;
}

static size_t host_threads(const rig_host *h, int64_t program, int32_t **out)
{
    if (out != NULL) {
        *out = NULL;
    }
    const rm_hostrec *rec = hostrec_of(h);
    if (rec == NULL || out == NULL) {
        return 0;
    }
    rig_remote *rm = rec->rm;
    size_t n = 0;
    pthread_mutex_lock(&rm->table_lock);
    for (const rm_threads *t = rec->threads; t != NULL; t = t->next) {
        if (t->program != program) {
            continue;
        }
        int32_t *copy = malloc(t->n * sizeof(*copy));
        if (copy != NULL) {
            memcpy(copy, t->threads, t->n * sizeof(*copy));
            *out = copy;
            n = t->n;
        }
        break;
    }
    pthread_mutex_unlock(&rm->table_lock);
    return n;
}

/* The checks every caller gets are made here, before any agent is
 * contacted, so that compiled code that calls the record's function
 * directly is refused as rig_host_rail would refuse it; then rails.c
 * makes the rail. */
static bool host_rail(const rig_host *h, const rig_host *peer,
                      const rig_transfer *send, size_t nsend,
                      const rig_transfer *receive, size_t nreceive,
                      rig_rail **out, char **err)
{
    const rm_hostrec *rec = hostrec_of(h);
    if (rec == NULL) {
        return rig_err(err, "invalid: h is not a host record of a remote "
                            "layer");
    }
    if (out == NULL) {
        return rig_err(err, "invalid: out is NULL");
    }
    if (peer != NULL && (peer == h || hostrec_of(peer) == rec)) {
        return rig_err(err, "invalid: peer is this host (%s)",
                       h->machine != NULL ? h->machine : "?");
    }
    if ((send == NULL && nsend > 0) || (receive == NULL && nreceive > 0)) {
        return rig_err(err, "invalid: %s is NULL with %zu transfers",
                       send == NULL && nsend > 0 ? "send" : "receive",
                       send == NULL && nsend > 0 ? nsend : nreceive);
    }
    if (!rig_check_transfers(send, nsend, receive, nreceive, err)) {
        return false;
    }
    /* What an agent takes in a RAIL command (rails.c). */
    if (nsend > RM_RAIL_TRANSFERS_MAX || nreceive > RM_RAIL_TRANSFERS_MAX) {
        return rig_err(err,
                       "invalid: %s has %zu transfers; a rail between "
                       "machines carries at most %u each way",
                       nsend > RM_RAIL_TRANSFERS_MAX ? "send" : "receive",
                       nsend > RM_RAIL_TRANSFERS_MAX ? nsend : nreceive,
                       RM_RAIL_TRANSFERS_MAX);
    }
    const rm_hostrec *p = peer != NULL ? hostrec_of(peer) : NULL;
    if (peer != NULL && (p == NULL || p->rm != rec->rm)) {
        return rig_err(err,
                       "foreign: peer %s is not a record of this job's "
                       "remote layer",
                       peer->machine != NULL ? peer->machine : "?");
    }
    if (rec->rm->rank != 0) {
        return rig_err(err,
                       "invalid: host records make rails on the controller "
                       "(rank 0); this is rank %d (rig_job_host's records "
                       "make a rail from here)",
                       rec->rm->rank);
    }
    if (rig_job_failed(rec->rm->job)) {
        return rm_failed(rec->rm, err, "making a rail");
    }
    return rm_rail_make(rec->rm, rec->rank, p != NULL ? p->rank : 0, send,
                        nsend, receive, nreceive, out, err);
}

bool rm_threads_set(rig_remote *rm, int rank, int64_t program,
                    const int32_t *threads, size_t n)
{
    if (rank <= 0 || rank >= rm->size || rm->hosts == NULL) {
        return false;
    }
    rm_hostrec *rec = &rm->hosts[rank];
    rm_threads *add = NULL;
    if (n > 0) {
        add = calloc(1, sizeof(*add));
        int32_t *copy = malloc(n * sizeof(*copy));
        if (add == NULL || copy == NULL) {
            free(add);
            free(copy);
            return false;
        }
        memcpy(copy, threads, n * sizeof(*copy));
        add->program = program;
        add->n = n;
        add->threads = copy;
    }
    pthread_mutex_lock(&rm->table_lock);
    for (rm_threads **t = &rec->threads; *t != NULL; t = &(*t)->next) {
        if ((*t)->program == program) {
            rm_threads *gone = *t;
            *t = gone->next;
            free(gone->threads);
            free(gone);
            break;
        }
    }
    if (add != NULL) {
        add->next = rec->threads;
        rec->threads = add;
    }
    pthread_mutex_unlock(&rm->table_lock);
    return true;
}

bool rm_records_make(rig_remote *rm, char **err)
{
    size_t n = 0;
    for (int r = 1; r < rm->size; r++) {
        n++;
        n += rm->machines[r].executors[MESH_BACKEND_CUDA].runs ? 1 : 0;
    }
    rm->hosts = calloc((size_t)rm->size, sizeof(*rm->hosts));
    rm->proxies = calloc(n > 0 ? n : 1, sizeof(*rm->proxies));
    if (rm->hosts == NULL || rm->proxies == NULL) {
        rm_records_free(rm);
        return rig_err(err, "nomem: %zu proxy records", n);
    }
    size_t i = 0;
    for (int r = 1; r < rm->size; r++) {
        const rig_remote_machine *m = &rm->machines[r];
        rm_hostrec *rec = &rm->hosts[r];
        rec->rm = rm;
        rec->rank = r;
        rec->host.machine = m->name;
        rec->host.rail = host_rail;
        rec->host.threads = host_threads;
        rec->host.impl = rec;
        rig_remote_proxy *p = &rm->proxies[i++];
        p->name = m->name;
        p->rank = r;
        p->record.kind = RIG_PROXY_HOST;
        p->record.u.host = rec->host;
        p->fact = rig_remote_abi_declare(&p->record);
        const rig_remote_executor *gpu = &m->executors[MESH_BACKEND_CUDA];
        if (gpu->runs) {
            p = &rm->proxies[i++];
            char *name = NULL;
            if (asprintf(&name, "cuda%lld@%s", (long long)gpu->device,
                         m->name) < 0) {
                rm->nproxies = i - 1;
                rm_records_free(rm);
                return rig_err(err, "nomem: a device proxy's name");
            }
            p->name = name;
            p->rank = r;
            p->record.kind = RIG_PROXY_DEVICE;
            p->record.u.device.id = gpu->device;
            p->fact = rig_remote_abi_declare(&p->record);
        }
    }
    rm->nproxies = i;
    return true;
}

void rm_records_free(rig_remote *rm)
{
    if (rm->proxies != NULL) {
        for (size_t i = 0; i < rm->nproxies; i++) {
            if (rm->proxies[i].record.kind == RIG_PROXY_DEVICE) {
                free((char *)rm->proxies[i].name);
            }
        }
    }
    free(rm->proxies);
    rm->proxies = NULL;
    rm->nproxies = 0;
    if (rm->hosts != NULL) {
        for (int r = 0; r < rm->size; r++) {
            rm_threads *t = rm->hosts[r].threads;
            while (t != NULL) {
                rm_threads *next = t->next;
                free(t->threads);
                free(t);
                t = next;
            }
        }
    }
    free(rm->hosts);
    rm->hosts = NULL;
}

/* ---- public look-ups ----------------------------------------------------- */

const rig_remote_machine *rig_remote_machine_of(const rig_remote *rm, int rank)
{
    if (rm == NULL || rm->machines == NULL || rank <= 0 || rank >= rm->size) {
        return NULL;
    }
    return &rm->machines[rank];
}

size_t rig_remote_machines(const rig_remote *rm)
{
    return rm != NULL && rm->size > 0 ? (size_t)rm->size - 1 : 0;
}

size_t rig_remote_proxies(const rig_remote *rm, const rig_remote_proxy **out)
{
    if (out != NULL) {
        *out = NULL;
    }
    if (rm == NULL || out == NULL) {
        return 0;
    }
    *out = rm->nproxies > 0 ? rm->proxies : NULL;
    return rm->nproxies;
}

const rig_remote_proxy *rig_remote_find(const rig_remote *rm, const char *name)
{
    if (rm == NULL || name == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < rm->nproxies; i++) {
        if (strcmp(rm->proxies[i].name, name) == 0) {
            return &rm->proxies[i];
        }
    }
    return NULL;
}

const rig_host *rig_remote_host(const rig_remote *rm, int rank)
{
    if (rm == NULL || rm->hosts == NULL || rank <= 0 || rank >= rm->size) {
        return NULL;
    }
    return &rm->hosts[rank].host;
}
