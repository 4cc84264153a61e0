/* SPDX-License-Identifier: BSD-3-Clause */
/* The job's window: one dynamic MPI window per job, where every end of the
 * job is attached at the address of its memory so that MPI RMA reaches it
 * (rig_job_window, rig_job_rail_disp).
 *
 * Made collectively by the job at open; ends attach and detach locally as
 * the transports make and free them.  Open MPI's osc rdma holds at most
 * osc_rdma_max_attach regions (64 by default), and in 4.1 an attach past
 * it fails leaving the window's region lock held, so that every later
 * attach or detach hangs: the window never asks for more than the limit it
 * read through MPI_T, and after the first refusal asks no more.  An end
 * that is not attached still carries its rail.
 *
 * Lock: the window's own, RIG_WINDOW_LOCK_LEVEL, the innermost of rig's
 * locks (taken under a transport's). */
#ifndef RIG_WINDOW_H
#define RIG_WINDOW_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RIG_WINDOW_LOCK_LEVEL 60

typedef struct rig_window rig_window;

/* Makes the window (MPI_Win_create_dynamic, MPI_ERRORS_RETURN): collective
 * over comm.  "system:" naming the failed MPI call, "nomem:". */
bool rig_window_open(MPI_Comm comm, rig_window **out, char **err);

/* The MPI window (the job's to hand out; never freed by the caller). */
MPI_Win rig_window_win(const rig_window *w);

/* Attaches [base, base + len) while the window has room; false (logged
 * once per process, with the reason) when it has not or MPI refused.  Any
 * thread. */
bool rig_window_attach(rig_window *w, void *base, size_t len);

/* Detaches what rig_window_attach attached at base.  Any thread. */
void rig_window_detach(rig_window *w, void *base);

/* Ends the MPI window: when all (every rank of the job reached close) its
 * MPI_Win_free waits for MPI_Finalize (finalize.h: a collective after the
 * closing barrier would block for good on a rank that died in between;
 * what is still attached is detached here, since ends may be freed
 * before it), else the MPI window is
 * abandoned (a rank left the job and would never join the collective).
 * Attach and detach do nothing afterwards.  Once only. */
void rig_window_end(rig_window *w, bool all);

/* Frees the window, ending it first (rig_window_end) if it was not.
 * NULL is ignored. */
void rig_window_close(rig_window *w, bool all);

#endif
