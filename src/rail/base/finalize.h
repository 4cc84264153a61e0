/* SPDX-License-Identifier: BSD-3-Clause */
/* MPI windows whose collective free waits for MPI_Finalize.
 *
 * MPI_Win_free is collective and, in Open MPI and MPICH, a barrier: a
 * rank that dies between a job's closing barrier and the free of its
 * windows would block the others in it for good (no MPI collective
 * survives a death without ULFM).  MPI_Finalize waits for every rank
 * anyway, so freeing there adds no wait of its own: rig_job_close then
 * makes no collective after its barrier.  The windows go at the start of
 * MPI_Finalize (an MPI_COMM_SELF attribute's delete callback, where MPI
 * is still usable), in the order they were handed over, which is the
 * same at every rank that closed the same jobs whole; a process that
 * ends without MPI_Finalize leaves them to the system. */
#ifndef RIG_FINALIZE_H
#define RIG_FINALIZE_H

#include <mpi.h>

/* Frees *win at the start of MPI_Finalize; *win becomes MPI_WIN_NULL.
 * When MPI cannot take the attribute, the window is left to MPI (never
 * freed: only memory).  Any thread that may call MPI. */
void rig_free_at_finalize(MPI_Win *win);

#endif
