/* SPDX-License-Identifier: BSD-3-Clause */
/* What the job layer's files share beyond rig/job.h: job.c's record seen
 * from the other files of src/job/ (together.c). */
#ifndef RIG_JOB_INTERNAL_H
#define RIG_JOB_INTERNAL_H

#include "rig/job.h"

#include "../rail/base/transport.h"

#include <mpi.h>
#include <stdbool.h>

/* job as a caller handed it (fn names the public call, for the message
 * and the log): when it is an open job of this process, its own
 * communicator (the pair protocol's, and rig_job_close's barrier), the
 * communicator of rig_job_rails' collectives (a duplicate, so that
 * collectives a rank abandoned when the job failed never meet the
 * closing barrier), both MPI_ERRORS_RETURN, this rank, the job's size and
 * its transport; else false with "invalid:".  They stay valid until
 * rig_job_close, which no call may overlap. */
typedef struct {
    MPI_Comm comm;
    MPI_Comm rails_comm;
    int rank, size;
    rig_transport *t;
} rig_job_parts;

bool rig_job_parts_of(rig_job *job, const char *fn, rig_job_parts *out,
                      char **err);

#endif
