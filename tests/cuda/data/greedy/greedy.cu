/* SPDX-License-Identifier: BSD-3-Clause */
/* greedy: a kernel that keeps many values live, so that ptxas uses far more
 * registers than a register cap of 32 allows (the compiler test's subject). */
#include "../../../../examples/cuda/mesh_node.cuh"

MESH_RT_ABI_DEFINE();

#define GREEDY_N 64

extern "C" __global__ void greedy(unsigned char *mailbox, unsigned int slot,
                                  float *scratch)
{
    (void)mailbox;
    (void)slot;
    float v[GREEDY_N];
#pragma unroll
    for (int i = 0; i < GREEDY_N; i++) {
        v[i] = scratch[threadIdx.x + i * blockDim.x];
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
#pragma unroll
        for (int i = 0; i < GREEDY_N; i++) {
            v[i] = v[i] * v[(i + 7 * r + 1) % GREEDY_N] + (float)r;
        }
    }
#pragma unroll
    for (int i = 0; i < GREEDY_N; i++) {
        scratch[threadIdx.x + i * blockDim.x] = v[i];
    }
}
