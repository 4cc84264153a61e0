/* SPDX-License-Identifier: BSD-3-Clause */
/* What fits on the SMs: the CUDA backend's occupancy budget and admission.
 *
 * Decisions the spec leaves open:
 * - Nodes that cannot all be resident beside the other slots' launches
 *   are refused ("limits: "): a launch of n nodes of a kernel that fits m
 *   blocks per SM takes n/m SMs, and the launches may take at most the SMs
 *   programs run on (caps.sms).  Resident nodes that cannot all be
 *   scheduled would never all come online.  A launch holds its share until
 *   it ends by itself or its stream is dropped (unload); a halted one keeps
 *   it, since a blink relaunches it.
 * - The refusal comes first from admit, which the driver calls before the
 *   blink halts anything: m is estimated there, without a module, from the
 *   registers, static shared memory the compiler read from ptxas's log and
 *   the SM's limits read at open, each rule rounded against the kernel so
 *   as not to exceed the driver's figure (what admit passes, launch passes
 *   too; tests/cuda/test_cuda_gpu.c "admit bound" checks it).  launch
 *   repeats the check with the loaded kernel's exact occupancy as a second
 *   guard; it alone refuses where the compiler knew no register count, and
 *   then after the halt.
 * - An MPS worker's kernel shares the device's SMs alike: the budget is
 *   the backend's in both modes. */
#include "cuda_backend_internal.h"

#include "../../abi/util_internal.h"

#include <stdio.h>

#define OCC_ONE MESH_CUDA_OCC_ONE

static uint64_t round_up(uint64_t v, uint64_t unit)
{
    return (v + unit - 1) / unit * unit;
}

/* The occupancy budget: every node of every running launch resident.  A
 * launch of nodes nodes of per_sm blocks per SM in slot fits beside the
 * other slots' launches; *want is its share, *used theirs (OCC_ONE per
 * SM). */
static bool occ_fits(const cuda_backend *be, uint32_t slot, uint32_t nodes,
                     uint32_t per_sm, uint64_t *want, uint64_t *used)
{
    *want = per_sm > 0 ? (uint64_t)nodes * OCC_ONE / per_sm : UINT64_MAX;
    *used = 0;
    for (uint32_t i = 0; i < MESH_PROG_SLOTS; i++) {
        *used += i == slot ? 0 : be->occ[i];
    }
    uint64_t cap = (uint64_t)be->caps.sms * OCC_ONE;
    return *used <= cap && *want <= cap - *used;
}

bool mesh_cuda_occ_fits(const cuda_backend *be, uint32_t slot, uint32_t nodes,
                        uint32_t per_sm, const char *what, uint64_t *want,
                        char **err)
{
    uint64_t w = 0, used = 0;
    if (!occ_fits(be, slot, nodes, per_sm, &w, &used)) {
        return rig_err(err,
                       "limits: %s%s%u nodes (%u per SM) do not fit beside "
                       "the running programs (%.2f of %u SMs in use)",
                       what != NULL ? what : "", what != NULL ? ": " : "",
                       nodes, per_sm, (double)used / OCC_ONE, be->caps.sms);
    }
    if (want != NULL) {
        *want = w;
    }
    return true;
}

/* Resident blocks per SM of a kernel of threads threads, regs registers
 * per thread and shared bytes per block (static and dynamic), by the SM's
 * limits alone (0: not one).  It must never exceed what the driver's
 * occupancy calculation gives at load, so each rule rounds against the
 * kernel: registers go to warps in units of 256 per warp, and to the SM's
 * four sub-partitions a whole warp at a time (a block's request is checked
 * as if its warps filled all four); shared memory goes in units of 128
 * bytes, plus the driver's reserve per block, out of the SM's largest
 * carveout. */
static uint32_t est_blocks(const cuda_sm_limits *sm, uint32_t threads,
                           uint32_t regs, uint64_t shared)
{
    const uint64_t warp = 32, reg_unit = 256, parts = 4, shm_unit = 128;
    uint64_t warps = (threads + warp - 1) / warp;
    if (warps == 0 || regs == 0 || regs > 255) {
        return 0;
    }
    uint64_t warp_regs = round_up((uint64_t)regs * warp, reg_unit);
    if (warp_regs * round_up(warps, parts) > sm->regs_block) {
        return 0;
    }
    uint64_t by_regs = sm->regs / parts / warp_regs * parts / warps;
    uint64_t by_threads = sm->threads / (warps * warp);
    uint64_t block_shm = round_up(shared + sm->reserved, shm_unit);
    uint64_t by_shared = sm->shared / block_shm;
    uint64_t n = sm->blocks;
    n = by_regs < n ? by_regs : n;
    n = by_threads < n ? by_threads : n;
    n = by_shared < n ? by_shared : n;
    return (uint32_t)n;
}

/* Whether nodes nodes of p fit beside the running launches, judged from
 * the compiler's figures (nothing is loaded): called by the driver before
 * it halts anything, so that a refusal blinks no running program. */
bool mesh_cuda_admit(const mesh_backend *b, const mesh_prepared *p,
                     uint32_t nodes, uint32_t slot, char **err)
{
    if (b == NULL || b->self == NULL || p == NULL || nodes == 0 ||
        slot >= MESH_PROG_SLOTS) {
        return rig_err(err,
                       "invalid: cuda admit: bad backend, program, nodes "
                       "%u or slot %u",
                       nodes, slot);
    }
    const cuda_backend *be = b->self;
    const mesh_manifest *m = &p->manifest;
    const char *name = m->name != NULL ? m->name : "?";
    if (p->exec != MESH_BACKEND_CUDA) {
        return rig_err(err,
                       "invalid: cuda admit: program %s was not compiled "
                       "by the CUDA compiler",
                       name);
    }
    if (m->threads == 0) {
        return rig_err(err, "invalid: cuda admit: program %s has no threads",
                       name);
    }
    if (p->regs == 0) {
        /* The compiler could not read the register count (a log format
         * this rig does not know): admitted; launch's exact check still
         * refuses what does not fit, but only after the blink. */
        return true;
    }
    uint64_t shared = (uint64_t)p->shared_static + m->shared;
    uint32_t per_sm = est_blocks(&be->sm, m->threads, p->regs, shared);
    if (per_sm == 0) {
        return rig_err(err,
                       "limits: program %s: not one node of %u threads "
                       "(%u registers, %llu B shared) fits on an SM",
                       name, m->threads, p->regs, (unsigned long long)shared);
    }
    uint64_t want = 0, used = 0;
    if (!occ_fits(be, slot, nodes, per_sm, &want, &used)) {
        return rig_err(err,
                       "limits: program %s: %u nodes of %u threads (%u "
                       "per SM) do not fit beside the running programs "
                       "(%.2f of %u SMs in use)",
                       name, nodes, m->threads, per_sm, (double)used / OCC_ONE,
                       be->caps.sms);
    }
    return true;
}
