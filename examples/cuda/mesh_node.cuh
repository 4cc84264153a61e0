/* SPDX-License-Identifier: BSD-3-Clause */
/* mesh_node.cuh: what a CUDA program's resident kernel uses in its nodes.
 *
 * The CUDA backend launches a program's kernel (the manifest's "entry") with
 * one block per node and the manifest's "threads" per block, and three
 * parameters, in this order:
 *
 *   unsigned char *mailbox   the mailbox (mesh/abi/control_block.h), pinned
 *                            host memory mapped into the device
 *   unsigned int slot        the program's slot, 0..31
 *   void *scratch            the program's scratch (PX_SCRATCH) in device
 *                            memory, NULL when the manifest asks for none;
 *                            it survives a blink's halt and relaunch
 *
 * Every image must define the u32 global MESH_RT_ABI (MESH_RT_ABI_DEFINE
 * below); the backend reads it at load and refuses another value ("abi: ").
 *
 * A node's life, by thread 0 of its block: mesh_node_attach (checks the
 * header's ABI, reports MESH_NODE_ERR_ABI otherwise), mesh_node_online,
 * steps polling mesh_node_halted between them (mesh_block_halted shares the
 * answer with the whole block), mesh_node_point for progress, then
 * mesh_node_exit.  Offsets are the MESH_S_* / MESH_P_* of control_block.h,
 * repeated here because nvcc does not compile C11 atomics. */
#ifndef MESH_NODE_CUH
#define MESH_NODE_CUH

#define MESH_RT_ABI_VERSION 1u
#define MESH_RT_ABI_DEFINE()                                                  \
    extern "C" __device__ unsigned int MESH_RT_ABI = MESH_RT_ABI_VERSION

#define MESH_NODE_S_MAGIC 0u
#define MESH_NODE_S_ABI 4u
#define MESH_NODE_CB_MAGIC 0x4853454du
#define MESH_NODE_HEADER_BYTES 256u
#define MESH_NODE_SLOT_BYTES 256u
#define MESH_NODE_P_HALT 4u
#define MESH_NODE_P_ONLINE 64u
#define MESH_NODE_P_EXITED 68u
#define MESH_NODE_P_ERROR 72u
#define MESH_NODE_P_ERROR_NODE 76u
#define MESH_NODE_P_ERROR_ARG 80u
#define MESH_NODE_P_POINTS 128u
#define MESH_NODE_ERR_ABI 1u
#define MESH_NODE_ERR_PROGRAM 3u

/* The host writes the mailbox from another agent: system-scope acquire. */
__device__ __forceinline__ unsigned int mesh_ld_acquire(const void *p)
{
    unsigned int v;
    asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ unsigned char *mesh_slot_base(unsigned char *mb,
                                                         unsigned int slot)
{
    return mb + MESH_NODE_HEADER_BYTES + slot * MESH_NODE_SLOT_BYTES;
}

/* Reports err (first report of the slot sticks). */
__device__ __forceinline__ void mesh_node_fail(unsigned char *mb,
                                               unsigned int slot,
                                               unsigned int err,
                                               unsigned int arg)
{
    unsigned char *s = mesh_slot_base(mb, slot);
    if (atomicCAS_system((unsigned int *)(s + MESH_NODE_P_ERROR), 0u, err) ==
        0u) {
        *(volatile unsigned int *)(s + MESH_NODE_P_ERROR_NODE) = blockIdx.x;
        *(volatile unsigned int *)(s + MESH_NODE_P_ERROR_ARG) = arg;
        __threadfence_system();
    }
}

/* Thread 0: whether this node may run (the host's ABI is ours). */
__device__ __forceinline__ bool mesh_node_attach(unsigned char *mb,
                                                 unsigned int slot)
{
    if (mesh_ld_acquire(mb + MESH_NODE_S_MAGIC) != MESH_NODE_CB_MAGIC) {
        return false;
    }
    unsigned int abi = mesh_ld_acquire(mb + MESH_NODE_S_ABI);
    if (abi != MESH_RT_ABI_VERSION) {
        mesh_node_fail(mb, slot, MESH_NODE_ERR_ABI, MESH_RT_ABI_VERSION);
        return false;
    }
    return true;
}

/* Thread 0: counts this node online (release). */
__device__ __forceinline__ void mesh_node_online(unsigned char *mb,
                                                 unsigned int slot)
{
    __threadfence_system();
    atomicAdd_system((unsigned int *)(mesh_slot_base(mb, slot) +
                                      MESH_NODE_P_ONLINE),
                     1u);
}

/* Thread 0: whether the host asked the slot to halt (acquire). */
__device__ __forceinline__ bool mesh_node_halted(unsigned char *mb,
                                                 unsigned int slot)
{
    return mesh_ld_acquire(mesh_slot_base(mb, slot) + MESH_NODE_P_HALT) != 0;
}

/* Every thread of the block: thread 0 polls P_HALT and shares it. */
__device__ __forceinline__ bool mesh_block_halted(unsigned char *mb,
                                                  unsigned int slot)
{
    __shared__ int halted;
    __syncthreads();
    if (threadIdx.x == 0) {
        halted = mesh_node_halted(mb, slot);
    }
    __syncthreads();
    return halted != 0;
}

/* Raises progress point i to at least v (release: what this thread wrote
 * before, scratch included, is visible to whoever reads the point). */
__device__ __forceinline__ void mesh_node_point(unsigned char *mb,
                                                unsigned int slot,
                                                unsigned int i,
                                                unsigned long long v)
{
    __threadfence_system();
    atomicMax_system((unsigned long long *)(mesh_slot_base(mb, slot) +
                                            MESH_NODE_P_POINTS + 8u * i),
                     v);
}

/* ---- rail ends (mesh/abi/ends.h) -------------------------------------
 * A program's inputs bound to rail ends: PX_ENDS is the device address of
 * their table, entry i (input i) at MESH_NODE_E_ENTRIES + i * 256; a
 * flags word of 0 means the input has no end here.  The kernel writes
 * its outbound bytes through the entry's device address of the outbound,
 * then raises the entry's point to the count (mesh_end_point): host code
 * of the executor readies the end with it.  It reads `arrived` and its
 * inbound as the host writes them. */
#define MESH_NODE_PX_ENDS 56u
#define MESH_NODE_E_ENTRIES 128u
#define MESH_NODE_E_ENTRY_BYTES 256u
#define MESH_NODE_EE_FLAGS 16u
#define MESH_NODE_EE_OUT_COPY 56u
#define MESH_NODE_EE_IN_COPY 64u
#define MESH_NODE_EE_DEV_COUNTS 136u
#define MESH_NODE_EE_DEV_OUTBOUND 144u
#define MESH_NODE_EE_DEV_INBOUND 152u
#define MESH_NODE_EE_POINT 224u
#define MESH_NODE_ARRIVED_AT 256u
#define MESH_NODE_SENT_AT 128u
#define MESH_NODE_COUNT_FAILED 0x7fffffffffffffffull

__device__ __forceinline__ unsigned long long mesh_ld_acquire64(const void *p)
{
    unsigned long long v;
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

/* Input i's entry, or NULL when the input has no end here. */
__device__ __forceinline__ unsigned char *mesh_end_entry(unsigned char *mb,
                                                         unsigned int slot,
                                                         unsigned int i)
{
    unsigned char *t = (unsigned char *)mesh_ld_acquire64(
        mesh_slot_base(mb, slot) + MESH_NODE_PX_ENDS);
    if (t == NULL || i >= 32u) {
        return NULL;
    }
    unsigned char *e = t + MESH_NODE_E_ENTRIES + i * MESH_NODE_E_ENTRY_BYTES;
    return *(volatile unsigned int *)(e + MESH_NODE_EE_FLAGS) != 0u ? e : NULL;
}

/* The entry of the rail whose id is id among those bound here, or NULL:
 * a program finds its end by rail id. */
__device__ __forceinline__ unsigned char *
mesh_end_find(unsigned char *mb, unsigned int slot, long long id)
{
    for (unsigned int i = 0; i < 32u; i++) {
        unsigned char *e = mesh_end_entry(mb, slot, i);
        if (e != NULL && *(volatile long long *)e == id) {
            return e;
        }
    }
    return NULL;
}

/* Copy k of the entry's outbound (device address), and of its inbound. */
__device__ __forceinline__ unsigned char *mesh_end_outbound(unsigned char *e,
                                                            unsigned int k)
{
    return *(unsigned char **)(e + MESH_NODE_EE_DEV_OUTBOUND) +
           k * *(unsigned long long *)(e + MESH_NODE_EE_OUT_COPY);
}
__device__ __forceinline__ const unsigned char *
mesh_end_inbound(unsigned char *e, unsigned int k)
{
    return *(unsigned char **)(e + MESH_NODE_EE_DEV_INBOUND) +
           k * *(unsigned long long *)(e + MESH_NODE_EE_IN_COPY);
}

/* The end's `arrived` (acquire): what the peer's transfers brought. */
__device__ __forceinline__ unsigned long long mesh_end_arrived(unsigned char *e)
{
    return mesh_ld_acquire64(*(unsigned char **)(e + MESH_NODE_EE_DEV_COUNTS) +
                             MESH_NODE_ARRIVED_AT);
}

/* The count readied so far (the point), where a launch goes on from. */
__device__ __forceinline__ unsigned long long mesh_end_point_now(unsigned char *e)
{
    return mesh_ld_acquire64(e + MESH_NODE_EE_POINT);
}

/* Raises the point to c (release: the outbound bytes written before are
 * visible to the host that readies the end). */
__device__ __forceinline__ void mesh_end_point(unsigned char *e,
                                               unsigned long long c)
{
    __threadfence_system();
    atomicMax_system((unsigned long long *)(e + MESH_NODE_EE_POINT), c);
}

/* Thread 0: counts this node as exited cleanly. */
__device__ __forceinline__ void mesh_node_exit(unsigned char *mb,
                                               unsigned int slot)
{
    __threadfence_system();
    atomicAdd_system((unsigned int *)(mesh_slot_base(mb, slot) +
                                      MESH_NODE_P_EXITED),
                     1u);
}

#endif
