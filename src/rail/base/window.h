/* SPDX-License-Identifier: BSD-3-Clause */
/* The job's window: one dynamic MPI window per job, where every end of the
 * job is attached at the address of its memory so that MPI RMA reaches it
 * (rig_job_window, rig_job_rail_disp).
 *
 * Made collectively by the job at open; ends attach and detach locally as
 * the transports make and free them.  Rails never need it: it is a service
 * to users who want MPI RMA on rig's ends.  So a window MPI cannot give
 * does not stop the job: with Open MPI's defaults no one-sided component
 * reaches another node over TCP (Debian's openmpi-mca-params.conf leaves
 * osc ^ucx,pt2pt: osc rdma needs RDMA hardware between nodes, osc sm one
 * node) and pt2pt refuses MPI_THREAD_MULTIPLE, so MPI_Win_create_dynamic
 * fails with MPI_ERR_WIN.  The job then opens without a window: every rank
 * agrees that there is none, attaches are no-ops and rig_job_window
 * answers "unsupported:" with the reason.
 *
 * Which component Open MPI picked is read from the window's name ("rdma
 * window 3"), and what it holds from it: osc rdma at most
 * osc_rdma_max_attach regions (64 by default, read through MPI_T), osc ucx
 * at most 32 (a constant of Open MPI 4.1).  In 4.1 an osc rdma attach past
 * its limit fails leaving the window's region lock held, so that every
 * later attach or detach hangs: the window never asks for more than the
 * limit, and after the first refusal asks no more.  An end that is not
 * attached still carries its rail.
 *
 * osc ucx is refused: with Open MPI 4.1.4 and UCX 1.13.1 a job whose
 * dynamic window osc ucx served (ends attached, rails carried, a failed
 * job, an end held over close) left both ranks hanging in MPI_Finalize
 * across nodes, while the same run without the window passed
 * (mpi_tests/multihost/job_oscucx_h2.mh).  Where Open MPI picks osc ucx the
 * window is freed at once, by every rank (the selection is collective),
 * and the job goes without one, saying why.
 *
 * Lock: the window's own, RIG_WINDOW_LOCK_LEVEL, the innermost of rig's
 * locks (taken under a transport's). */
#ifndef RIG_WINDOW_H
#define RIG_WINDOW_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define RIG_WINDOW_LOCK_LEVEL 60

typedef struct rig_window rig_window;

/* Makes the window (MPI_Win_create_dynamic, MPI_ERRORS_RETURN), or agrees
 * with every rank that there is none (see above): collective over comm.
 * "system:" when the agreement itself fails, "nomem:". */
bool rig_window_open(MPI_Comm comm, rig_window **out, char **err);

/* The MPI window (the job's to hand out; never freed by the caller), or
 * MPI_WIN_NULL when the job has none. */
MPI_Win rig_window_win(const rig_window *w);

/* Why the job has no window ("unsupported: ..."), or NULL when it has
 * one. */
const char *rig_window_missing(const rig_window *w);

/* The osc component that serves the window ("rdma", "ucx", "sm", ...;
 * Open MPI names it), or NULL when there is no window or no name. */
const char *rig_window_component(const rig_window *w);

/* Attaches [base, base + len) while the window has room; false (logged
 * once per process, with the reason) when it has not or MPI refused, and
 * quietly when the job has no window.  Any thread. */
bool rig_window_attach(rig_window *w, void *base, size_t len);

/* Detaches what rig_window_attach attached at base.  Any thread. */
void rig_window_detach(rig_window *w, void *base);

/* Ends the MPI window: when all (every rank of the job reached close) its
 * MPI_Win_free waits for MPI_Finalize (finalize.h: a collective after the
 * closing barrier would block for good on a rank that died in between;
 * what is still attached is detached here, since ends may be freed
 * before it), else the MPI window is
 * abandoned (a rank left the job and would never join the collective).
 * Attach and detach do nothing afterwards.  Once only; NULL is ignored. */
void rig_window_end(rig_window *w, bool all);

/* Frees the window, ending it first (rig_window_end) if it was not.
 * NULL is ignored. */
void rig_window_close(rig_window *w, bool all);

/* rig_info's lines on the job's window: Open MPI's osc selection (MPI_T,
 * no MPI_Init needed) and, when MPI is initialised, the component a
 * dynamic window on MPI_COMM_SELF gets. */
void rig_window_describe(FILE *out);

#endif
