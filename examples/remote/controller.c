/* SPDX-License-Identifier: BSD-3-Clause */
/* A controller: runs one program of a catalog on every agent of the job.
 *
 *   mpirun -np 1 examples/remote/controller DIR NAME : -np 3 rig_agent
 *   mpirun -np 4 examples/remote/controller DIR NAME       (SPMD: ranks
 *                                   other than 0 serve from this code)
 *
 * Rank 0 loads program NAME of catalog DIR onto every agent's machine,
 * launches it, waits until it is done everywhere and prints each machine's
 * progress point 0. */
#include <rig/remote.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int stop(const char *what, char *err)
{
    fprintf(stderr, "controller: %s: %s\n", what, err != NULL ? err : "?");
    free(err);
    return 1;
}

static int control(rig_remote *rm, const char *dir, const char *name)
{
    char *err = NULL;
    int64_t prog = 0;
    if (!rig_remote_load_catalog(rm, dir, name, NULL, 0, &prog, &err)) {
        return stop("load", err); /* names every machine that refused */
    }
    for (int r = 1; r <= (int)rig_remote_machines(rm); r++) {
        int32_t *threads = NULL;
        size_t n = rig_host_threads(rig_remote_host(rm, r), prog, &threads);
        printf("%s: %s runs %" PRId32 " threads at once\n",
               rig_remote_machine_of(rm, r)->name, name,
               n > 0 ? threads[0] : 0);
        free(threads);
    }
    if (!rig_remote_launch(rm, prog, 0, &err) ||
        !rig_remote_wait(rm, prog, 0, &err)) {
        rig_remote_unload(rm, prog, NULL);
        return stop("run", err); /* "failed: node 2 of program ..." */
    }
    rig_remote_status *s = NULL;
    size_t n = 0;
    if (rig_remote_query(rm, prog, &s, &n, &err)) {
        for (size_t i = 0; i < n; i++) {
            printf("%s: %s done, point 0 = %" PRIu64 "\n", s[i].machine, name,
                   s[i].points[0]);
        }
        rig_remote_status_free(s, n);
    }
    if (!rig_remote_unload(rm, prog, &err)) {
        return stop("unload", err);
    }
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    char *err = NULL;
    rig_job *job = NULL;
    rig_remote *rm = NULL;
    if (!rig_job_open(MPI_COMM_WORLD, NULL, &job, &err) ||
        !rig_remote_open(job, MPI_COMM_WORLD, NULL, &rm, &err)) {
        fprintf(stderr, "controller: %s\n", err != NULL ? err : "?");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int rc = 0;
    if (!rig_remote_is_controller(rm)) {
        rc = rig_remote_serve(rm, &err) ? 0 : stop("serve", err);
    } else if (argc != 3) {
        fprintf(stderr, "usage: controller DIR NAME\n");
        rc = 2;
    } else {
        rc = control(rm, argv[1], argv[2]);
    }
    rig_remote_close(rm); /* every agent stops serving */
    bool failed = rig_job_failed(job);
    rig_job_close(job);
    if (failed) {
        _exit(1); /* MPI_Finalize would wait for a dead rank */
    }
    MPI_Finalize();
    return rc;
}
