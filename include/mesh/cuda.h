/* SPDX-License-Identifier: BSD-3-Clause */
/* mesh/cuda.h: the CUDA backend's own entry points, beyond mesh_backend.
 *
 * The CUDA backend (kind MESH_BACKEND_CUDA, opened with mesh_backend_open)
 * runs each program as one resident kernel: PTX from the program's payload
 * compiled by nvJitLink for the device's arch, one block per node, the
 * manifest's "threads" per block and "shared" bytes of dynamic shared
 * memory, launched with three parameters:
 *
 *   (unsigned char *mailbox, unsigned int slot, void *scratch)
 *
 * the mailbox (mesh/abi/control_block.h) in pinned host memory mapped into
 * the device, the program's slot, and its scratch (PX_SCRATCH) in device
 * memory (NULL when the manifest asks for none).  Every image defines the
 * u32 global MESH_RT_ABI, read and checked at load.  libcuda and nvJitLink
 * are loaded at run time: without a driver or a GPU the backend answers
 * "unsupported: " and everything else in rig works.
 *
 * What the device and driver must offer, checked at open ("unsupported: "
 * otherwise): a driver at least as new as the nvJitLink that compiles for
 * it (cuDriverGetVersion against nvJitLinkVersion: cubins of nvJitLink N.x
 * need a CUDA N driver), no run time limit on kernels (a display
 * watchdog, CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT), a compute mode other
 * than Prohibited.
 *
 * What the driver does that shapes the backend (cuda.h, NVIDIA's docs):
 * - a context has CUDA_DEVICE_MAX_CONNECTIONS hardware queues (1 to 32,
 *   8 unless the variable is set before the process starts; rig never
 *   sets it), and a kernel queued behind a resident one on a shared queue
 *   would wait for ever: in blink isolation as many programs may be
 *   loaded at once as there are queues, and the next is refused with
 *   "limits: " naming the variable;
 * - a kernel fault (CUDA_ERROR_ILLEGAL_ADDRESS, LAUNCH_FAILED, ...) is
 *   sticky for the whole context: every program of it is reported crashed
 *   and, in blink isolation, every later load is refused ("load: ... the
 *   CUDA context is lost"): the process must restart to use the GPU.  In
 *   MPS isolation the fault reaches every worker, and new programs are
 *   refused until those are stopped (the MPS server's own rule);
 * - no op of the backend leaves its context current on the calling
 *   thread: each pushes it and pops it (a UCX built with CUDA registers
 *   host memory itself whenever a context is current);
 * - dynamic shared memory past a kernel's default limit (48 KiB less its
 *   static shared memory) is opted into at load; the manifest's "shared"
 *   and the kernel's static shared memory may not exceed the device's
 *   per-node limit together ("limits: " at prepare).
 *
 * Settings (environment):
 *   RIG_MESH_CUDA_DEVICE     the device ordinal (0)
 *   RIG_MESH_CUDA_ISOLATION  "blink" (default: one context; a module
 *                            change halts and relaunches every program) or
 *                            "mps" (each program in a worker process that
 *                            is a client of a private MPS control daemon
 *                            the backend starts, its folders under $TMPDIR,
 *                            or /tmp when $TMPDIR is too long for the
 *                            daemon's sockets; a module change halts only
 *                            its own program; the backend itself makes no
 *                            context, so the Exclusive-Process compute mode
 *                            works; CUDA_VISIBLE_DEVICES is the daemon's,
 *                            not the workers'; "unsupported: " without
 *                            nvidia-cuda-mps-control on PATH or in the
 *                            toolkit's bin, or without the worker program)
 *   RIG_MESH_CUDA_WORKER     the MPS worker program (default: the installed
 *                            <libexecdir>/rig/rig-cuda-worker)
 *   RIG_MESH_CUDA_SMS        0 (default): the whole device; N: a green
 *                            context of at least N SMs, rounded up to the
 *                            device's partition size (caps' green and sms
 *                            say what was given; "unsupported: " with MPS
 *                            isolation or when no such partition exists)
 *   CUDA_DEVICE_MAX_CONNECTIONS  the driver's (see above), read as it does
 *   MESH_NVJITLINK_DIR       where libnvJitLink.so is (MESH_NVJITLINK_DIR
 *                            of mesh/backend.h) */
#ifndef MESH_CUDA_H
#define MESH_CUDA_H

#include "mesh/backend.h"

#include <stdbool.h>
#include <stdio.h>

#pragma GCC visibility push(default)

/* Prints one line per GPU of this machine with its caps as the backend
 * would report them (name, compute capability, SMs, blocks per SM, threads
 * and shared memory per node, arch), or one line saying why there are
 * none.  Any thread; opens and closes libcuda itself.  False with "invalid:
 * " (out NULL) or "system: " (a driver call failed after cuInit worked);
 * "no GPU" is not an error. */
bool mesh_cuda_describe(FILE *out, char **err);

/* Opens a CUDA compiler for arch ("sm_90") from the nvJitLink of
 * nvjitlink_dir (NULL: $MESH_NVJITLINK_DIR, else MESH_NVJITLINK_DIR): what
 * the backend's compiler does, without a GPU, checking no device limits.
 * Any thread; the compiler is thread-safe.  Errors: "invalid: " (a bad
 * arch, out NULL), "unsupported: " (nvJitLink not found), "nomem: ".
 * Release with mesh_cuda_compiler_close. */
bool mesh_cuda_compiler_open(const char *arch, const char *nvjitlink_dir,
                             mesh_compiler **out, char **err);

/* Releases a compiler of mesh_cuda_compiler_open (NULL: nothing). */
void mesh_cuda_compiler_close(mesh_compiler *c);

#pragma GCC visibility pop

#endif
