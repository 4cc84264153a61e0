/* SPDX-License-Identifier: BSD-3-Clause */
/* fault: comes online, counts (point 0) for about 200 ms, then node 0
 * stores through an address no allocation has: a kernel fault
 * (CUDA_ERROR_ILLEGAL_ADDRESS), which cuda.h calls sticky: the context,
 * and every program in it, is lost.  The fault tests' subject. */
#include "../../../../examples/cuda/mesh_node.cuh"

MESH_RT_ABI_DEFINE();

__device__ __forceinline__ unsigned long long fault_now_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void fault(unsigned char *mailbox, unsigned int slot,
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
    unsigned long long t0 = fault_now_ns();
    while (!mesh_block_halted(mailbox, slot)) {
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            unsigned long long c = scratch != NULL ? scratch[0] + 1 : 1;
            if (scratch != NULL) {
                scratch[0] = c;
            }
            mesh_node_point(mailbox, slot, 0, c);
            if (fault_now_ns() - t0 > 200000000ull) {
                /* The page at 8 is never mapped. */
                *(volatile unsigned long long *)8ull = c;
            }
        }
        __nanosleep(20000);
    }
    if (threadIdx.x == 0) {
        mesh_node_exit(mailbox, slot);
    }
}
