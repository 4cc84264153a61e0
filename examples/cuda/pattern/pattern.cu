/* SPDX-License-Identifier: BSD-3-Clause */
/* pattern: fills its scratch with a known pattern, then exits.
 *
 * Word i of scratch (u32) becomes i * 2654435761 + 1 (a test recomputes it).
 * Each node raises point 0 to the number of words once its share is
 * written; the launch is over when every node has exited. */
#include "../mesh_node.cuh"

MESH_RT_ABI_DEFINE();

extern "C" __global__ void pattern(unsigned char *mailbox, unsigned int slot,
                                   unsigned int *scratch)
{
    __shared__ int ok;
    __shared__ unsigned long long words;
    if (threadIdx.x == 0) {
        ok = mesh_node_attach(mailbox, slot);
        words = *(volatile unsigned long long *)(mesh_slot_base(mailbox,
                                                                slot) +
                                                 32u) /
                4u;
        if (ok) {
            mesh_node_online(mailbox, slot);
        }
    }
    __syncthreads();
    if (!ok) {
        return;
    }
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x;
         i < words; i += stride) {
        scratch[i] = (unsigned int)i * 2654435761u + 1u;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        mesh_node_point(mailbox, slot, 0, words);
        mesh_node_exit(mailbox, slot);
    }
}
