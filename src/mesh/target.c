/* SPDX-License-Identifier: BSD-3-Clause */
/* The target triple native binaries are built for, from the compiler's
 * predefined macros (Rust's spelling: "x86_64-unknown-linux-gnu"). */
#include "mesh/backend.h"

#if defined(__x86_64__)
#define MESH_ARCH "x86_64"
#elif defined(__aarch64__)
#define MESH_ARCH "aarch64"
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__)
#define MESH_ARCH "powerpc64le"
#elif defined(__riscv) && __riscv_xlen == 64
#define MESH_ARCH "riscv64gc"
#elif defined(__i386__)
#define MESH_ARCH "i686"
#else
#define MESH_ARCH "unknown"
#endif

#if defined(__linux__) && defined(__GLIBC__)
#define MESH_OS "unknown-linux-gnu"
#elif defined(__linux__)
#define MESH_OS "unknown-linux-musl"
#else
#define MESH_OS "unknown-unknown"
#endif

const char *mesh_native_target(void)
{
    return MESH_ARCH "-" MESH_OS;
}
