/* SPDX-License-Identifier: BSD-3-Clause */
/* Noticing MPI_Finalize with a job open: an attribute on MPI_COMM_SELF. */
#include "rail_internal.h"

void rig_finalize_watch(MPI_Comm_delete_attr_function *hook, void *arg,
                        int *key)
{
    *key = MPI_KEYVAL_INVALID;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, hook, key, NULL) !=
        MPI_SUCCESS) {
        *key = MPI_KEYVAL_INVALID;
        return;
    }
    if (MPI_Comm_set_attr(MPI_COMM_SELF, *key, arg) != MPI_SUCCESS) {
        MPI_Comm_free_keyval(key);
        *key = MPI_KEYVAL_INVALID;
    }
}

void rig_finalize_unwatch(int *key)
{
    int k = *key;
    if (k == MPI_KEYVAL_INVALID) {
        return;
    }
    *key = MPI_KEYVAL_INVALID; /* the hook, run by the delete, does nothing */
    MPI_Comm_delete_attr(MPI_COMM_SELF, k);
    MPI_Comm_free_keyval(&k);
}
