/* SPDX-License-Identifier: BSD-3-Clause */
/* The stencil's wasm module: stencil_node.c's program, reaching its rail
 * ends through the mesh.end_* imports (mesh/wasm.h) instead of mapping
 * them.  Freestanding C for clang --target=wasm32 (no libc): its block
 * lives in linear memory grown at run time.  Built by examples/remote/
 * local.mk when clang and wasm-ld target wasm32; stencil.wasm, built from
 * this file, is kept beside it for machines without them. */
#include "stencil_kernel.h"

#define IMPORT(name) __attribute__((import_module("mesh"), import_name(#name)))

IMPORT(online) void m_online(void);
IMPORT(point) uint32_t m_point(uint32_t i, uint64_t v);
IMPORT(fail) void m_fail(uint32_t code);
IMPORT(end_bound) uint32_t m_end_bound(uint32_t input);
IMPORT(end_bytes) uint64_t m_end_bytes(uint32_t input, uint32_t dir);
IMPORT(end_write)
void m_end_write(uint32_t input, uint32_t copy, uint64_t off, const void *src,
                 uint32_t len);
IMPORT(end_read)
void m_end_read(uint32_t input, uint32_t copy, uint64_t off, void *dst,
                uint32_t len);
IMPORT(end_ready) void m_end_ready(uint32_t input, uint64_t c);
IMPORT(end_wait_arrived)
uint32_t m_end_wait_arrived(uint32_t input, uint64_t c);
IMPORT(end_wait_sent) uint32_t m_end_wait_sent(uint32_t input, uint64_t c);
IMPORT(end_sent) uint64_t m_end_sent(uint32_t input);

extern unsigned char __heap_base;

/* Bytes from the heap's start, growing the memory as needed; 0: none. */
static void *grab(uint64_t bytes)
{
    uintptr_t base = ((uintptr_t)&__heap_base + 15) & ~(uintptr_t)15;
    uint64_t end = (uint64_t)base + bytes;
    uint64_t have = (uint64_t)__builtin_wasm_memory_size(0) * 65536u;
    if (end > have) {
        uint64_t pages = (end - have + 65535u) / 65536u;
        if (__builtin_wasm_memory_grow(0, (uintptr_t)pages) == (uintptr_t)-1) {
            return 0;
        }
    }
    return (void *)base;
}

static void copy_bytes(void *d, const void *s, uint64_t n)
{
    __builtin_memcpy(d, s, n);
}

static int send_row(uint32_t in, const double *row, uint32_t bytes, uint64_t c)
{
    if (c > 2 && !m_end_wait_sent(in, c - 2)) {
        return 0;
    }
    m_end_write(in, (uint32_t)((c - 1) % 2), 0, row, bytes);
    m_end_ready(in, c);
    return 1;
}

static int take_row(uint32_t in, double *row, uint32_t bytes, uint64_t c)
{
    if (!m_end_wait_arrived(in, c)) {
        return 0;
    }
    m_end_read(in, (uint32_t)((c - 1) % 2), 0, row, bytes);
    return 1;
}

__attribute__((export_name("stencil"))) void stencil(void)
{
    m_online();
    if (!m_end_bound(STENCIL_RESULT)) {
        m_fail(3);
        return;
    }
    int north = (int)m_end_bound(STENCIL_NORTH);
    int south = (int)m_end_bound(STENCIL_SOUTH);
    uint64_t launches = m_end_sent(STENCIL_RESULT) + 1;
    stencil_params p;
    if (!m_end_wait_arrived(STENCIL_RESULT, launches) ||
        m_end_bytes(STENCIL_RESULT, 1) < sizeof(p)) {
        m_fail(4);
        return;
    }
    m_end_read(STENCIL_RESULT, (uint32_t)((launches - 1) % 2), 0, &p,
               sizeof(p));
    if (p.magic != STENCIL_MAGIC || p.launch + 1 != launches || p.cols < 3 ||
        p.nrows == 0) {
        m_fail(6);
        return;
    }
    uint32_t cols = p.cols, n = p.nrows;
    uint32_t row = cols * (uint32_t)sizeof(double);
    uint64_t block = (uint64_t)(n + 2) * row;
    double *a = grab(2 * block);
    if (a == 0) {
        m_fail(7);
        return;
    }
    double *b = a + (size_t)(n + 2) * cols;
    stencil_fill(a, p.row0, n, p.rows, cols);
    copy_bytes(b, a, block);
    for (uint32_t s = 0; s < p.steps; s++) {
        uint64_t c = p.base + s + 1;
        int ok =
            (!north || send_row(STENCIL_NORTH, a + cols, row, c)) &&
            (!south || send_row(STENCIL_SOUTH, a + (size_t)n * cols, row, c)) &&
            (!north || take_row(STENCIL_NORTH, a, row, c)) &&
            (!south ||
             take_row(STENCIL_SOUTH, a + (size_t)(n + 1) * cols, row, c));
        if (!ok) {
            m_fail(8);
            return;
        }
        stencil_step(a, b, n, cols);
        double *t = a;
        a = b;
        b = t;
        m_point(0, s + 1);
    }
    if (m_end_bytes(STENCIL_RESULT, 0) < (uint64_t)n * row) {
        m_fail(9);
        return;
    }
    m_end_write(STENCIL_RESULT, (uint32_t)((launches - 1) % 2), 0, a + cols,
                n * row);
    m_end_ready(STENCIL_RESULT, launches);
    if (!m_end_wait_sent(STENCIL_RESULT, launches)) {
        m_fail(10);
    }
}
