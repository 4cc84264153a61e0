/* SPDX-License-Identifier: BSD-3-Clause */
/* rig_agent: an agent of a rig controller, for MPMD launches.
 *
 *   mpirun -np 1 ./controller : -np 3 rig_agent [--executors LIST]
 *
 * Every rank of the job but rank 0 may be a rig_agent: it opens the job
 * and the remote layer on MPI_COMM_WORLD (collective with the controller,
 * which does the same), serves the controller until it closes the remote
 * layer, closes the job and ends.  --executors native,wasm,cuda: the
 * executors this agent offers (rig_remote_options.executors; default all
 * that open; RIG_REMOTE_EXECUTORS wins).  Job options come from the RIG_*
 * environment as for any rig program.
 *
 * Exit status: 0 when the controller closed, 1 when the job failed (then
 * the agent ends with _exit: Open MPI 4.1's MPI_Finalize waits for a dead
 * rank), 2 for usage. */
#include "rig/remote.h"

#include "mesh/executors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int usage(void)
{
    fprintf(stderr, "usage: rig_agent [--executors native,wasm,cuda]\n"
                    "       (rank > 0 of a job whose rank 0 is a rig "
                    "controller)\n");
    return 2;
}

static bool parse_executors(const char *s, uint32_t *mask)
{
    *mask = 0;
    char *copy = strdup(s);
    if (copy == NULL) {
        return false;
    }
    bool ok = true;
    char *save = NULL;
    for (char *w = strtok_r(copy, ",", &save); w != NULL && ok;
         w = strtok_r(NULL, ",", &save)) {
        uint32_t kind = 0;
        ok = mesh_backend_kind(w, &kind);
        *mask |= 1u << kind;
    }
    free(copy);
    return ok && *mask != 0;
}

int main(int argc, char **argv)
{
    rig_remote_options opt;
    rig_remote_options_init(&opt);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--executors") == 0 && i + 1 < argc) {
            if (!parse_executors(argv[++i], &opt.executors)) {
                fprintf(stderr, "rig_agent: invalid: --executors %s\n",
                        argv[i]);
                return usage();
            }
        } else {
            return usage();
        }
    }
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        fprintf(stderr, "rig_agent: rank 0 is the controller's place: "
                        "start the controller first (mpirun -np 1 "
                        "./controller : -np N rig_agent)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
        return 2;
    }
    char *err = NULL;
    rig_job *job = NULL;
    if (!rig_job_open(MPI_COMM_WORLD, NULL, &job, &err)) {
        fprintf(stderr, "rig_agent %d: %s\n", rank, err != NULL ? err : "?");
        free(err);
        MPI_Finalize();
        return 1;
    }
    rig_remote *rm = NULL;
    if (!rig_remote_open(job, MPI_COMM_WORLD, &opt, &rm, &err)) {
        fprintf(stderr, "rig_agent %d: %s\n", rank, err != NULL ? err : "?");
        free(err);
        bool failed = rig_job_failed(job);
        rig_job_close(job);
        if (failed) {
            _exit(1);
        }
        MPI_Finalize();
        return 1;
    }
    bool ok = rig_remote_serve(rm, &err);
    if (!ok) {
        fprintf(stderr, "rig_agent %d: %s\n", rank, err != NULL ? err : "?");
    }
    free(err);
    rig_remote_close(rm);
    bool failed = rig_job_failed(job);
    rig_job_close(job);
    if (failed) {
        fflush(stderr);
        _exit(1);
    }
    MPI_Finalize();
    return ok ? 0 : 1;
}
