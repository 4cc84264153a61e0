/* SPDX-License-Identifier: BSD-3-Clause */
/* What fits on the SMs: the CUDA backend's occupancy budget and admission.
 *
 * Decisions the spec leaves open:
 * - Nodes that cannot all be resident beside the other slots' launches
 *   are refused ("limits: "): resident nodes that cannot all be scheduled
 *   would never all come online.  A launch counts until it ends by itself
 *   or its stream is dropped (unload); a halted one still counts, since a
 *   blink relaunches it.
 * - Residency is decided per SM, a block at a time: the block scheduler
 *   puts a block on an SM that has room for its threads, registers, shared
 *   memory and a block slot, and a block without room anywhere waits.  The
 *   scheduler's choice among SMs with room is not documented, so the check
 *   must hold for any choice.  A launch of n nodes of a kernel of m blocks
 *   per SM (its occupancy alone, cuOccupancyMaxActiveBlocksPerMultiprocessor)
 *   uses at most 1/m of some resource of an SM per block.  Take L a common
 *   multiple of the m's and give a block of launch j the weight w_j = L/m_j:
 *   an SM refuses a block of launch i only when its load is more than
 *   L - w_i, i.e. at least L - w_i + 1, so every SM refusing it means
 *   sum(n_j w_j) - w_i >= S (L - w_i + 1) for S SMs.  The launches fit for
 *   any placement when, for every i, sum(n_j w_j) - w_i < S (L - w_i + 1)
 *   (for one kernel alone this is n <= m S, the occupancy calculation's
 *   own bound), or when they have no more nodes than S in all (a block
 *   then always finds an empty SM).  Summing fractions of SMs (n/m <= S),
 *   as rig did first, admits a kernel of one block per SM on S - 2 SMs
 *   beside four small blocks that the scheduler may have spread over four
 *   SMs: two blocks never find room.  The register file's split into four
 *   sub-partitions is not modelled; est_blocks rounds registers against
 *   the kernel for it.
 * - The refusal comes first from admit, which the driver calls before the
 *   blink halts anything: m is estimated there, without a module, from the
 *   registers, static shared memory the compiler read from ptxas's log and
 *   the SM's limits read at open, each rule rounded against the kernel so
 *   as not to exceed the driver's figure (what admit passes, launch passes
 *   too; tests/cuda/test_cuda_gpu.c "admit bound" checks it).  launch
 *   repeats the check with the loaded kernel's exact occupancy as a second
 *   guard; it alone refuses where the compiler knew no register count, and
 *   then after the halt.
 * - admit also refuses what cannot start at all: shared memory past the
 *   per-node limit (static included), a program beyond the hardware queues
 *   (cuda_launch.c) and any program once the context is lost to a fault.
 * - An MPS worker's kernel shares the device's SMs alike: the budget is
 *   the backend's in both modes. */
#include "cuda_backend_internal.h"

#include "../../util/util_internal.h"

#include <stdio.h>

static uint64_t round_up(uint64_t v, uint64_t unit)
{
    return (v + unit - 1) / unit * unit;
}

/* A running (or asked for) launch: nodes and blocks per SM. */
typedef struct {
    uint64_t n, m;
} occ_launch;

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b != 0) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Whether every block of the k launches l finds room on sms SMs however
 * the scheduler places them (the file's comment has the argument). */
static bool occ_fit_all(const occ_launch *l, size_t k, uint32_t sms)
{
    uint64_t total = 0, lcm = 1;
    for (size_t i = 0; i < k; i++) {
        if (l[i].m == 0) {
            return false;
        }
        total += l[i].n;
        lcm = lcm == 0 ? 0 : lcm / gcd(lcm, l[i].m) * l[i].m;
        lcm = lcm > (1ull << 40) ? 0 : lcm;
    }
    if (total <= sms) {
        return true;
    }
    if (lcm != 0) {
        unsigned __int128 w_all = 0;
        for (size_t i = 0; i < k; i++) {
            w_all += (unsigned __int128)l[i].n * (lcm / l[i].m);
        }
        for (size_t i = 0; i < k; i++) {
            uint64_t w = lcm / l[i].m;
            if (w_all - w >= (unsigned __int128)sms * (lcm - w + 1)) {
                return false;
            }
        }
        return true;
    }
    /* No small common multiple (many different shapes): the same bound
     * without its integer step, in fractions of an SM. */
    long double f_all = 0;
    for (size_t i = 0; i < k; i++) {
        f_all += (long double)l[i].n / (long double)l[i].m;
    }
    for (size_t i = 0; i < k; i++) {
        long double f = 1.0L / (long double)l[i].m;
        if (f_all - f > (long double)sms * (1.0L - f) * (1.0L - 1e-12L)) {
            return false;
        }
    }
    return true;
}

bool mesh_cuda_occ_fits(const cuda_backend *be, uint32_t slot, uint32_t nodes,
                        uint32_t per_sm, const char *what, char **err)
{
    occ_launch l[MESH_PROG_SLOTS + 1];
    size_t k = 0;
    uint64_t others = 0;
    for (uint32_t i = 0; i < MESH_PROG_SLOTS; i++) {
        if (i != slot && be->occ[i].nodes > 0) {
            l[k].n = be->occ[i].nodes;
            l[k].m = be->occ[i].per_sm;
            others += l[k].n;
            k++;
        }
    }
    size_t running = k;
    l[k].n = nodes;
    l[k].m = per_sm;
    k++;
    if (occ_fit_all(l, k, be->caps.sms)) {
        return true;
    }
    return rig_err(err,
                   "limits: %s%s%u nodes (%u per SM) may not all be "
                   "resident beside the %zu running program%s (%llu "
                   "nodes) on %u SMs",
                   what != NULL ? what : "", what != NULL ? ": " : "", nodes,
                   per_sm, running, running == 1 ? "" : "s",
                   (unsigned long long)others, be->caps.sms);
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
    char what[160];
    snprintf(what, sizeof(what), "program %s", name);
    uint64_t shared = (uint64_t)p->shared_static + m->shared;
    if (shared > be->caps.max_shared) {
        return rig_err(err,
                       "limits: program %s: %u bytes of shared memory per "
                       "node and its kernel's %u static ones exceed the "
                       "%u a node may have",
                       name, m->shared, p->shared_static, be->caps.max_shared);
    }
    if (!mesh_cuda_usable(be, what, err) ||
        !mesh_cuda_stream_free(be, slot, what, err)) {
        return false;
    }
    if (p->regs == 0) {
        /* The compiler could not read the register count (a log format
         * this rig does not know): admitted; launch's exact check still
         * refuses what does not fit, but only after the blink. */
        return true;
    }
    uint32_t per_sm = est_blocks(&be->sm, m->threads, p->regs, shared);
    if (per_sm == 0) {
        return rig_err(err,
                       "limits: program %s: not one node of %u threads "
                       "(%u registers, %llu B shared) fits on an SM",
                       name, m->threads, p->regs, (unsigned long long)shared);
    }
    return mesh_cuda_occ_fits(be, slot, nodes, per_sm, what, err);
}
