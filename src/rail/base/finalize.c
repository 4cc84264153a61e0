/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI windows freed at MPI_Finalize (see finalize.h). */
#include "finalize.h"

#include "../../util/util_internal.h"

#include <pthread.h>
#include <stdlib.h>

/* The windows waiting, in the order handed over; the attribute that frees
 * them.  Process-wide: MPI_Finalize is. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static MPI_Win *wins;
static size_t nwins, cap;
static int key = MPI_KEYVAL_INVALID;

#define FINALIZE_LOCK_LEVEL 61 /* alone: no lock is taken under it */

static int free_all(MPI_Comm comm, int keyval, void *val, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)val;
    (void)extra;
    rig_lock(&lock, FINALIZE_LOCK_LEVEL);
    MPI_Win *w = wins;
    size_t n = nwins;
    int k = key;
    wins = NULL;
    nwins = cap = 0;
    key = MPI_KEYVAL_INVALID;
    rig_unlock(&lock, FINALIZE_LOCK_LEVEL);
    for (size_t i = 0; i < n; i++) {
        MPI_Win_free(&w[i]);
    }
    free(w);
    MPI_Comm_free_keyval(&k);
    return MPI_SUCCESS;
}

void rig_free_at_finalize(MPI_Win *win)
{
    if (*win == MPI_WIN_NULL) {
        return;
    }
    rig_lock(&lock, FINALIZE_LOCK_LEVEL);
    bool ok = true;
    if (key == MPI_KEYVAL_INVALID) {
        ok = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_all, &key,
                                    NULL) == MPI_SUCCESS;
        if (ok && MPI_Comm_set_attr(MPI_COMM_SELF, key, NULL) != MPI_SUCCESS) {
            MPI_Comm_free_keyval(&key);
            ok = false;
        }
        if (!ok) {
            key = MPI_KEYVAL_INVALID;
        }
    }
    if (ok && nwins == cap) {
        size_t c = cap > 0 ? 2 * cap : 8;
        MPI_Win *w = realloc(wins, c * sizeof(*w));
        if (w != NULL) {
            wins = w;
            cap = c;
        }
        ok = w != NULL;
    }
    if (ok) {
        wins[nwins++] = *win;
    }
    rig_unlock(&lock, FINALIZE_LOCK_LEVEL);
    *win = MPI_WIN_NULL; /* left to MPI when !ok: only memory */
}
