/* SPDX-License-Identifier: BSD-3-Clause */
/* MPS isolation's two programs, found: nvidia-cuda-mps-control (PATH, then
 * the toolkit's bin and the driver's usual folders) and rig-cuda-worker
 * ($RIG_MESH_CUDA_WORKER, else RIG_PKGLIBEXECDIR, where `make install` puts
 * it).  Without either, MPS isolation answers "unsupported: " naming it. */
#include "cuda_mps_internal.h"

#include "../../util/util_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef RIG_PKGLIBEXECDIR
#define RIG_PKGLIBEXECDIR "/usr/local/libexec/rig"
#endif

/* Where nvidia-cuda-mps-control is: PATH, then the toolkit's and the
 * driver's usual folders (malloc'd), or NULL. */
static char *control_path(void)
{
    const char *path = getenv("PATH");
    char *dirs = NULL;
    if (asprintf(&dirs, "%s:%s/bin:/usr/bin:/usr/local/bin",
                 path != NULL ? path : "", RIG_CUDA_DIR) < 0) {
        return NULL;
    }
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d != NULL;
         d = strtok_r(NULL, ":", &save)) {
        char *f = NULL;
        if (d[0] == '\0' || asprintf(&f, "%s/nvidia-cuda-mps-control", d) < 0) {
            continue;
        }
        if (access(f, X_OK) == 0) {
            free(dirs);
            return f;
        }
        free(f);
    }
    free(dirs);
    return NULL;
}

const char *mesh_cuda_mps_worker_path(void)
{
    const char *w = getenv("RIG_MESH_CUDA_WORKER");
    return w != NULL && w[0] != '\0' ? w
                                     : RIG_PKGLIBEXECDIR
               "/" MESH_MPS_WORKER_NAME;
}

bool mesh_cuda_mps_find(char **ctl, char **err)
{
    char *c = control_path();
    if (c == NULL) {
        return rig_err(err,
                       "unsupported: MPS isolation needs "
                       "nvidia-cuda-mps-control, which is not on PATH "
                       "nor in %s/bin",
                       RIG_CUDA_DIR);
    }
    const char *w = mesh_cuda_mps_worker_path();
    if (access(w, X_OK) != 0) {
        int e = errno;
        free(c);
        return rig_err(err,
                       "unsupported: MPS isolation needs its worker "
                       "program %s (RIG_MESH_CUDA_WORKER): %s",
                       w, strerror(e));
    }
    if (strlen(c) >= PATH_MAX) {
        free(c);
        return rig_err(err, "unsupported: the control program's path is "
                            "too long");
    }
    if (ctl != NULL) {
        *ctl = c;
    } else {
        free(c);
    }
    return true;
}

bool mesh_cuda_mps_check(char **err)
{
    return mesh_cuda_mps_find(NULL, err);
}
