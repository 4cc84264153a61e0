/* SPDX-License-Identifier: BSD-3-Clause */
/* rails: a kernel that drives a rail end (input 0) by device writes and
 * points, for the CUDA executor's rail tests and measurements.
 *
 * rails (resident): node 0's thread 0 ping-pongs 8 bytes with the host
 *   at the rail's other end until halted: for each count c (from the
 *   point the launch starts at), it writes rails_value(c) at byte 0 of
 *   outbound copy (c - 1) % 2, raises the point to c (host code readies
 *   the end), waits for `arrived` >= c and checks that the answer at byte
 *   0 of the inbound copy is ~rails_value(c).  Progress point 0: the
 *   round trips done; point 1: the wrong answers; point 2: 1 when the
 *   rail failed.
 * rails_once (one launch per message, for the signalling measurements):
 *   counts in scratch[0] and writes rails_value(count) to outbound copy
 *   (count - 1) % 2, then ends. */
#include "../mesh_node.cuh"

MESH_RT_ABI_DEFINE();

__device__ __forceinline__ unsigned long long rails_value(unsigned long long c)
{
    return c * 2654435761ull + 7ull;
}

extern "C" __global__ void rails(unsigned char *mailbox, unsigned int slot,
                                 unsigned long long *scratch)
{
    __shared__ int ok;
    if (threadIdx.x == 0) {
        ok = mesh_node_attach(mailbox, slot);
        if (ok) {
            mesh_node_online(mailbox, slot);
        }
    }
    __syncthreads();
    if (!ok) {
        return;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        unsigned char *e = mesh_end_entry(mailbox, slot, 0);
        unsigned long long base = e != NULL ? mesh_end_point_now(e) : 0;
        unsigned long long trips = 0, bad = 0;
        while (e != NULL && !mesh_node_halted(mailbox, slot)) {
            unsigned long long c = base + trips + 1;
            unsigned int k = (unsigned int)((c - 1) % 2);
            *(volatile unsigned long long *)mesh_end_outbound(e, k) =
                rails_value(c);
            mesh_end_point(e, c);
            unsigned long long a;
            while ((a = mesh_end_arrived(e)) < c &&
                   !mesh_node_halted(mailbox, slot)) {
            }
            if (a == MESH_NODE_COUNT_FAILED) {
                mesh_node_point(mailbox, slot, 2, 1);
                break;
            }
            if (a < c) {
                break; /* halted */
            }
            unsigned long long back =
                *(const volatile unsigned long long *)mesh_end_inbound(e, k);
            bad += back != ~rails_value(c);
            trips++;
            mesh_node_point(mailbox, slot, 0, trips);
            if (bad != 0) {
                mesh_node_point(mailbox, slot, 1, bad);
            }
        }
    }
    __syncthreads();
    while (!mesh_block_halted(mailbox, slot)) {
        __nanosleep(20000);
    }
    if (threadIdx.x == 0) {
        mesh_node_exit(mailbox, slot);
    }
}

extern "C" __global__ void rails_once(unsigned char *mailbox, unsigned int slot,
                                      unsigned long long *scratch)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) {
        return;
    }
    unsigned char *e = mesh_end_entry(mailbox, slot, 0);
    if (e == NULL || scratch == NULL) {
        return;
    }
    unsigned long long c = scratch[0] + 1;
    scratch[0] = c;
    *(volatile unsigned long long *)mesh_end_outbound(e, (unsigned int)((c - 1) %
                                                                        2)) =
        rails_value(c);
    __threadfence_system();
}
