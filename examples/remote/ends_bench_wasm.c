/* SPDX-License-Identifier: BSD-3-Clause */
/* ends_bench's wasm module (freestanding C for clang --target=wasm32):
 * the cost of reaching a rail end through the mesh.end_* imports against
 * storing into memory, as a module whose end were mapped into its memory
 * would.  Each entry runs ITERS sends of one size on input 0:
 *   copyN   fill a buffer of N bytes, end_write it to the outbound, ready
 *   storeN  fill N bytes of the module's memory (where a mapped outbound
 *           would be), ready
 *   none    nothing (the launch's own cost, subtracted) */
#include <stdint.h>

#define IMPORT(name) __attribute__((import_module("mesh"), import_name(#name)))
IMPORT(online) void m_online(void);
IMPORT(end_write)
void m_end_write(uint32_t input, uint32_t copy, uint64_t off, const void *src,
                 uint32_t len);
IMPORT(end_ready) void m_end_ready(uint32_t input, uint64_t c);
IMPORT(end_sent) uint64_t m_end_sent(uint32_t input);

#define ITERS 200000u

static uint8_t buf[2][4096];

static void fill(uint8_t *p, uint32_t n, uint64_t i)
{
    for (uint32_t j = 0; j < n; j++) {
        p[j] = (uint8_t)(i + j);
    }
}

static void run(uint32_t n, int copy)
{
    m_online();
    uint64_t base = m_end_sent(0);
    for (uint64_t i = 0; i < ITERS; i++) {
        uint64_t c = base + i + 1;
        uint8_t *p = buf[(c - 1) % 2];
        fill(p, n, i);
        if (copy) {
            m_end_write(0, (uint32_t)((c - 1) % 2), 0, p, n);
        }
        m_end_ready(0, c);
    }
}

__attribute__((export_name("copy8"))) void copy8(void)
{
    run(8, 1);
}
__attribute__((export_name("store8"))) void store8(void)
{
    run(8, 0);
}
__attribute__((export_name("copy4k"))) void copy4k(void)
{
    run(4096, 1);
}
__attribute__((export_name("store4k"))) void store4k(void)
{
    run(4096, 0);
}
__attribute__((export_name("none"))) void none(void)
{
    m_online();
}
