/* SPDX-License-Identifier: BSD-3-Clause */
/* The job's window: the dynamic MPI window every end attaches to. */
#include "window.h"

#include "finalize.h"

#include "../../util/util_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* osc ucx's region table in Open MPI 4.1 (OMPI_OSC_UCX_ATTACH_MAX). */
#define OSC_UCX_ATTACH_MAX 32

struct rig_window {
    MPI_Win win;          /* MPI_WIN_NULL: the job has none */
    char *missing;        /* why there is none */
    char component[32];   /* the osc component, "" when unknown */
    pthread_mutex_t lock; /* attached, limit; RIG_WINDOW_LOCK_LEVEL */
    uint64_t attached;    /* regions attached now */
    void **bases;         /* their bases (attached of them), to detach */
    size_t cap;           /* room in bases */
    uint64_t limit;       /* the most it may hold */
    bool ended;           /* the MPI window is freed or abandoned */
};

static int attach_warned;

/* A control variable of the MPI (MPI_T, usable before MPI_Init): an
 * unsigned int, or a string into buf; false when the MPI has no such
 * variable. */
static bool cvar_read(const char *name, unsigned *u, char *buf, size_t len)
{
    int provided;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
        return false;
    }
    bool ok = false;
    int idx, count;
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_get_index(name, &idx) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) == MPI_SUCCESS) {
        if (u != NULL && count == 1) {
            uint64_t v[2] = {0, 0}; /* an unsigned int, read little or big */
            ok = MPI_T_cvar_read(h, v) == MPI_SUCCESS;
            memcpy(u, v, sizeof(*u));
        } else if (buf != NULL && count > 0) {
            char *s = calloc((size_t)count + 1, 1);
            ok = s != NULL && MPI_T_cvar_read(h, s) == MPI_SUCCESS;
            if (ok) {
                snprintf(buf, len, "%s", s);
            }
            free(s);
        }
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    return ok;
}

/* The component that serves win, from its name: Open MPI names a new
 * window "<component> window <id>". */
static void component_of(MPI_Win win, char *out, size_t len)
{
    char name[MPI_MAX_OBJECT_NAME] = "";
    int n = 0;
    out[0] = '\0';
    if (MPI_Win_get_name(win, name, &n) != MPI_SUCCESS) {
        return;
    }
    const char *sp = strstr(name, " window");
    if (sp != NULL && sp > name && (size_t)(sp - name) < len) {
        memcpy(out, name, (size_t)(sp - name));
        out[sp - name] = '\0';
    }
}

/* The most regions the component attaches; UINT64_MAX: no known cap (an
 * attach MPI refuses still stops the attaching). */
static uint64_t attach_limit(const char *component)
{
    if (strcmp(component, "ucx") == 0) {
        return OSC_UCX_ATTACH_MAX;
    }
    unsigned u = 0;
    if ((component[0] == '\0' || strcmp(component, "rdma") == 0) &&
        cvar_read("osc_rdma_max_attach", &u, NULL, 0)) {
        return u;
    }
    return UINT64_MAX;
}

bool rig_window_open(MPI_Comm comm, rig_window **out, char **err)
{
    rig_window *w = calloc(1, sizeof(*w));
    /* Every rank takes part in the agreement, with or without memory. */
    MPI_Win win = MPI_WIN_NULL;
    int rc = MPI_Win_create_dynamic(MPI_INFO_NULL, comm, &win);
    int mine = rc == MPI_SUCCESS && w != NULL ? 1 : 0, all = 0;
    int arc = MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
    if (w == NULL) {
        /* The window, if made, is abandoned: a collective free could wait
         * for ranks that have none. */
        return rig_err(err, "nomem: calloc(%zu) failed", sizeof(*w));
    }
    if (arc != MPI_SUCCESS) {
        free(w);
        return rig_err_mpi(err, arc, "MPI_Allreduce");
    }
    w->win = MPI_WIN_NULL;
    pthread_mutex_init(&w->lock, NULL);
    char comp[32] = "";
    if (all) {
        component_of(win, comp, sizeof(comp));
    }
    if (all && strcmp(comp, "ucx") == 0) {
        /* Every rank made it (osc selection is collective): freed together
         * now, before any end is attached (see window.h). */
        MPI_Win_free(&win);
        rig_err(&w->missing,
                "unsupported: the job has no MPI window: Open MPI picked osc "
                "ucx, whose dynamic windows with rig's ends hang "
                "MPI_Finalize (Open MPI 4.1, UCX 1.13); rails carry without "
                "it (another osc component, e.g. --mca osc rdma, gives one "
                "where it reaches every rank)");
        rig_log(RIG_LOG_INFO, "%s", w->missing != NULL ? w->missing : "");
        w->limit = 0;
        *out = w;
        return true;
    }
    if (all) {
        w->win = win;
        /* A full attachment table must not abort the job. */
        MPI_Win_set_errhandler(w->win, MPI_ERRORS_RETURN);
        component_of(w->win, w->component, sizeof(w->component));
        w->limit = attach_limit(w->component);
        rig_log(RIG_LOG_INFO,
                "the job's window: osc %s, at most %llu attached ends",
                w->component[0] != '\0' ? w->component : "(unnamed)",
                (unsigned long long)w->limit);
        *out = w;
        return true;
    }
    /* No window.  One made here while another rank got none is
     * abandoned: its collective free would wait for ranks without it. */
    char why[MPI_MAX_ERROR_STRING + 64] =
        "another rank's MPI_Win_create_dynamic failed";
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int n = 0;
        if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS) {
            snprintf(s, sizeof(s), "MPI error %d", rc);
        }
        snprintf(why, sizeof(why), "MPI_Win_create_dynamic failed: %s", s);
    }
    char osc[256] = "";
    bool listed = cvar_read("osc", NULL, osc, sizeof(osc)) && osc[0] != '\0';
    rig_err(&w->missing,
            "unsupported: the job has no MPI window (%s): MPI offers no "
            "one-sided component for a dynamic window on this "
            "communicator%s%s%s; rails carry without it",
            why, listed ? " (Open MPI's osc components: " : "",
            listed ? osc : "", listed ? ")" : "");
    rig_log(RIG_LOG_INFO, "%s", w->missing != NULL ? w->missing : why);
    w->limit = 0;
    *out = w;
    return true;
}

MPI_Win rig_window_win(const rig_window *w)
{
    return w->win;
}

const char *rig_window_missing(const rig_window *w)
{
    if (w->win != MPI_WIN_NULL) {
        return NULL;
    }
    return w->missing != NULL ? w->missing
                              : "unsupported: the job has no MPI window";
}

const char *rig_window_component(const rig_window *w)
{
    return w->win != MPI_WIN_NULL && w->component[0] != '\0' ? w->component
                                                             : NULL;
}

bool rig_window_attach(rig_window *w, void *base, size_t len)
{
    if (w->win == MPI_WIN_NULL) {
        return false;
    }
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
        rig_err_mpi(&why, rc, "MPI_Win_attach");
    } else {
        rig_err(&why, "unsupported: the job's window holds %llu ends, its most",
                (unsigned long long)limit);
    }
    const char *hint = strcmp(w->component, "rdma") == 0
                           ? " (osc rdma: raise osc_rdma_max_attach)"
                       : strcmp(w->component, "ucx") == 0
                           ? " (osc ucx holds 32 regions, a constant of Open "
                             "MPI; osc rdma holds osc_rdma_max_attach)"
                           : "";
    rig_log_once(&attach_warned, RIG_LOG_WARN,
                 "%s: later ends are not reachable through "
                 "rig_job_window%s",
                 why != NULL ? why : "nomem", hint);
    free(why);
    return false;
}

void rig_window_detach(rig_window *w, void *base)
{
    if (w->win == MPI_WIN_NULL) {
        return;
    }
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
    if (!ended && all && w->win != MPI_WIN_NULL) {
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
    free(w->missing);
    free(w);
}

void rig_window_describe(FILE *out)
{
    char osc[256] = "";
    if (cvar_read("osc", NULL, osc, sizeof(osc))) {
        fprintf(out,
                "  MPI osc:         %s (Open MPI's one-sided components; "
                "empty: all)\n",
                osc);
    }
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin) {
        fprintf(out, "  job's window:    decided at rig_job_open (MPI not "
                     "initialised here)\n");
        return;
    }
    /* On a communicator of rig's own: the application's error handlers
     * stay as they are. */
    MPI_Comm self;
    if (MPI_Comm_dup(MPI_COMM_SELF, &self) != MPI_SUCCESS) {
        return;
    }
    MPI_Comm_set_errhandler(self, MPI_ERRORS_RETURN);
    MPI_Win win;
    int rc = MPI_Win_create_dynamic(MPI_INFO_NULL, self, &win);
    if (rc != MPI_SUCCESS) {
        MPI_Comm_free(&self);
        char s[MPI_MAX_ERROR_STRING];
        int n = 0;
        if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS) {
            snprintf(s, sizeof(s), "MPI error %d", rc);
        }
        fprintf(out,
                "  job's window:    none on this node (%s); rails "
                "carry without it\n",
                s);
        return;
    }
    char c[32];
    component_of(win, c, sizeof(c));
    if (strcmp(c, "ucx") == 0) {
        fprintf(out, "  job's window:    none: Open MPI picks osc ucx here, "
                     "which rig refuses (its windows\n"
                     "                   hung MPI_Finalize); rails carry "
                     "without it\n");
        MPI_Win_free(&win);
        MPI_Comm_free(&self);
        return;
    }
    fprintf(out,
            "  job's window:    osc %s on this node, at most %llu ends "
            "(across nodes Open MPI may pick another, or none)\n",
            c[0] != '\0' ? c : "(unnamed)",
            (unsigned long long)attach_limit(c));
    MPI_Win_free(&win);
    MPI_Comm_free(&self);
}
