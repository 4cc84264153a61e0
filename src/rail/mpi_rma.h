/* SPDX-License-Identifier: BSD-3-Clause */
/* The MPI RMA transport of rails: a job's provider that moves bytes with
 * MPI one-sided calls alone (see mpi_rma.c for how and why).
 *
 * The job layer (src/job/job.c) opens it instead of the UCX transport when
 * the job's transport is "mpi", and hands it every rail, every failure and
 * the close.  It needs MPI initialised; its calls are those of rig/job.h
 * with the same threading rules. */
#ifndef RIG_MPI_RMA_H
#define RIG_MPI_RMA_H

#include "rig/job.h"
#include "rig/remote_abi.h"

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct rig_mpi rig_mpi;

/* Opens the transport of a job on comm (the job's own communicator, kept
 * by the job).  win is the job's dynamic window, into which ends are also
 * attached (at most attach_limit of them; see rig_job_window).  Not
 * collective; "nomem:" is its only error. */
bool rig_mpi_open(MPI_Comm comm, MPI_Win win, uint64_t attach_limit,
                  rig_mpi **out, char **err);

/* rig_job_rail for this transport, after the job checked its arguments:
 * the pair's exchange, the rail's window, the ABI end and rail.  Both
 * ranks get the same outcome, in the words of rig_job_rail. */
bool rig_mpi_rail(rig_mpi *m, int peer, int64_t id, const rig_transfer *send,
                  size_t nsend, const rig_transfer *receive, size_t nreceive,
                  rig_rail **out, char **err);

/* rig_job_rail_peer and rig_job_rail_disp for rails of this transport. */
int rig_mpi_rail_peer(rig_mpi *m, const rig_rail *r);
bool rig_mpi_rail_disp(rig_mpi *m, const rig_rail *r, rig_job_peer_end *out,
                       char **err);

/* Fails the job here and tells every peer this rank has rails with (their
 * ends of those rails fail).  First why wins.  Any thread, idempotent. */
void rig_mpi_fail(rig_mpi *m, const char *why);
/* The failure's reason, or NULL.  When the job failed through a peer's
 * count alone, it looks (MPI_Iprobe) for the reason a rank sent. */
const char *rig_mpi_failed(rig_mpi *m);

/* Stops every rail (ready only advances the count).  Not collective. */
void rig_mpi_stop(rig_mpi *m);
/* A barrier over the job's communicator that gives up (false) once a rank
 * is known to have left the job (died, or finalized MPI with it open). */
bool rig_mpi_barrier(rig_mpi *m);
/* Frees the windows of rails no rank holds any more (collective over each
 * pair of ranks with rails), detaches every end from the job's window, and
 * the transport once no end is held.  After every rank stopped. */
void rig_mpi_close(rig_mpi *m);

/* The transport's lines of rig_info: the MPI library and the method. */
void rig_mpi_info(FILE *out);

#endif
