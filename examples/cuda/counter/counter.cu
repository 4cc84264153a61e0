/* SPDX-License-Identifier: BSD-3-Clause */
/* counter: counts in scratch and shows the count as point 0 until halted.
 *
 * Node 0 owns the count (scratch[0], a u64): each step adds one and raises
 * progress point 0 to it.  The count lives in scratch, so a halt and
 * relaunch (a blink) resumes from where it was.  Other nodes only idle
 * until halted, holding their block slot like any resident node. */
#include "../mesh_node.cuh"

MESH_RT_ABI_DEFINE();

extern "C" __global__ void counter(unsigned char *mailbox, unsigned int slot,
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
    while (!mesh_block_halted(mailbox, slot)) {
        if (blockIdx.x == 0 && threadIdx.x == 0 && scratch != NULL) {
            unsigned long long c = scratch[0] + 1;
            scratch[0] = c;
            mesh_node_point(mailbox, slot, 0, c);
        }
        __nanosleep(20000);
    }
    if (threadIdx.x == 0) {
        mesh_node_exit(mailbox, slot);
    }
}
