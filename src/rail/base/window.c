/* SPDX-License-Identifier: BSD-3-Clause */
/* The job's window: the dynamic MPI window every end attaches to. */
#include "window.h"

#include "finalize.h"

#include "../../util/util_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rig_window {
    MPI_Win win;
    pthread_mutex_t lock; /* attached, limit; RIG_WINDOW_LOCK_LEVEL */
    uint64_t attached;    /* regions attached now */
    void **bases;         /* their bases (attached of them), to detach */
    size_t cap;           /* room in bases */
    uint64_t limit;       /* the most it may hold */
    bool ended;           /* the MPI window is freed or abandoned */
};

static int attach_warned;

static bool mpi_fail(char **err, int rc, const char *call)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS) {
        snprintf(s, sizeof(s), "MPI error %d", rc);
    }
    return rig_err(err, "system: %s failed: %s", call, s);
}

/* osc_rdma_max_attach through MPI_T; UINT64_MAX when the MPI has no such
 * variable. */
static uint64_t attach_limit(void)
{
    uint64_t limit = UINT64_MAX;
    int provided;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
        return limit;
    }
    int idx, count;
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_get_index("osc_rdma_max_attach", &idx) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) == MPI_SUCCESS) {
        uint64_t v[2] = {0, 0}; /* an unsigned int, read little or big */
        unsigned int u = 0;
        if (count == 1 && MPI_T_cvar_read(h, v) == MPI_SUCCESS) {
            memcpy(&u, v, sizeof(u));
            limit = u;
        }
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    return limit;
}

bool rig_window_open(MPI_Comm comm, rig_window **out, char **err)
{
    rig_window *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return rig_err(err, "nomem: calloc(%zu) failed", sizeof(*w));
    }
    w->limit = attach_limit();
    int rc = MPI_Win_create_dynamic(MPI_INFO_NULL, comm, &w->win);
    if (rc != MPI_SUCCESS) {
        free(w);
        return mpi_fail(err, rc, "MPI_Win_create_dynamic");
    }
    /* A full attachment table must not abort the job. */
    MPI_Win_set_errhandler(w->win, MPI_ERRORS_RETURN);
    pthread_mutex_init(&w->lock, NULL);
    *out = w;
    return true;
}

MPI_Win rig_window_win(const rig_window *w)
{
    return w->win;
}

bool rig_window_attach(rig_window *w, void *base, size_t len)
{
    rig_lock(&w->lock, RIG_WINDOW_LOCK_LEVEL);
    bool room = !w->ended && w->attached < w->limit;
    if (room && w->attached == w->cap) {
        size_t c = w->cap > 0 ? 2 * w->cap : 64;
        void **b = realloc(w->bases, c * sizeof(*b));
        if (b != NULL) {
            w->bases = b;
            w->cap = c;
        }
        room = b != NULL;
    }
    int rc = MPI_SUCCESS;
    if (room) {
        rc = MPI_Win_attach(w->win, base, (MPI_Aint)len);
        if (rc == MPI_SUCCESS) {
            w->bases[w->attached++] = base;
        } else {
            w->limit = w->attached; /* never again */
        }
    }
    uint64_t limit = w->limit;
    rig_unlock(&w->lock, RIG_WINDOW_LOCK_LEVEL);
    if (room && rc == MPI_SUCCESS) {
        return true;
    }
    char *why = NULL;
    if (room) {
        mpi_fail(&why, rc, "MPI_Win_attach");
    } else {
        rig_err(&why,
                "unsupported: the job's window holds %llu ends, "
                "its most (Open MPI's osc_rdma_max_attach)",
                (unsigned long long)limit);
    }
    rig_log_once(&attach_warned, RIG_LOG_WARN,
                 "%s: later ends are not reachable through rig_job_window "
                 "(Open MPI: raise osc_rdma_max_attach)",
                 why != NULL ? why : "nomem");
    free(why);
    return false;
}

void rig_window_detach(rig_window *w, void *base)
{
    rig_lock(&w->lock, RIG_WINDOW_LOCK_LEVEL);
    for (size_t i = 0; !w->ended && i < w->attached; i++) {
        if (w->bases[i] == base) {
            MPI_Win_detach(w->win, base);
            w->bases[i] = w->bases[--w->attached];
            break;
        }
    }
    rig_unlock(&w->lock, RIG_WINDOW_LOCK_LEVEL);
}

void rig_window_end(rig_window *w, bool all)
{
    if (w == NULL) {
        return; /* a job whose open failed before its window was made */
    }
    rig_lock(&w->lock, RIG_WINDOW_LOCK_LEVEL);
    bool ended = w->ended;
    /* Detach everything now (a local call): ends may be freed after
     * this, and osc ucx's MPI_Win_free at MPI_Finalize unmaps whatever is
     * still attached -- freed memory by then. */
    for (size_t i = 0; !ended && i < w->attached; i++) {
        MPI_Win_detach(w->win, w->bases[i]);
    }
    w->attached = 0;
    w->ended = true;
    rig_unlock(&w->lock, RIG_WINDOW_LOCK_LEVEL);
    if (!ended && all) {
        rig_free_at_finalize(&w->win);
    }
}

void rig_window_close(rig_window *w, bool all)
{
    if (w == NULL) {
        return;
    }
    rig_window_end(w, all);
    pthread_mutex_destroy(&w->lock);
    free(w->bases);
    free(w);
}
