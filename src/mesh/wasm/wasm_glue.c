/* SPDX-License-Identifier: BSD-3-Clause */
/* rig's wasm runtime glue: traps, memories and tables, safe per lane.
 *
 * wabt's wasm-rt-impl.c keeps one global jmp_buf and one signal stack, so
 * two lanes trapping at once would unwind into each other.  Here each lane
 * owns its trap state (mesh_wasm_trap_state: a sigjmp_buf, its memory's
 * reservation, its stack guard) reached through a thread-local pointer, and
 * its own alternate signal stack (wasm_lanes.c), and the one process-wide
 * SIGSEGV/SIGBUS handler unwinds only the lane that faulted, only for a
 * fault in that lane's linear memory or stack guard; every other fault goes
 * to the handler that was there before.
 *
 * Halting a node that never checks.  A loop that calls no import and
 * touches no memory never meets a check.  Rather than compile checks into
 * every loop head and call (a cost on every iteration of every program),
 * the host interrupts the lane: a halt signal (real-time, queued with the
 * node's number) whose handler unwinds the node as a trap does, but only
 * when the interrupted instruction is in the module's own code (its shared
 * object's executable segments: wasm2c's functions and rig's glue wrappers,
 * which hold no lock and own no allocation).  Anywhere else -- a host
 * import, libc's memcpy, the loader -- it returns at once, and the host
 * sends it again a millisecond later; a running node spends nearly all its
 * time in its own code, so one soon lands there.  The unwinding abandons
 * the instance's state, which the lane frees and never runs again. */
#include "wasm_internal.h"

#include "../../util/util_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#define WASM_PAGE 65536ull
/* A memory reserves 8 GiB: any u32 address plus any u32 offset stays
 * inside, so generated code needs no bounds checks; the slack covers the
 * widest access past the last offset. */
#define RESERVE ((8ull << 30) + WASM_PAGE)

static __thread mesh_wasm_trap_state *tls_lane
    __attribute__((tls_model("initial-exec")));

void mesh_wasm_glue_set_lane(mesh_wasm_trap_state *ts)
{
    tls_lane = ts;
}

mesh_wasm_trap_state *mesh_wasm_glue_lane(void)
{
    return tls_lane;
}

_Noreturn void mesh_wasm_trap(uint32_t code)
{
    mesh_wasm_trap_state *ts = tls_lane;
    if (ts == NULL || !ts->armed) {
        /* Generated code runs only on lanes: this is a rig bug. */
        rig_log(RIG_LOG_ERROR, "wasm: trap %u off a lane", code);
        abort();
    }
    siglongjmp(ts->jmp, (int)code);
}

static void glue_trap(uint32_t code)
{
    mesh_wasm_trap(code);
}

const char *mesh_wasm_trap_str(uint32_t code)
{
    switch (code) {
    case 1:
        return "out of bounds memory access";
    case 2:
        return "integer overflow";
    case 3:
        return "integer divide by zero";
    case 4:
        return "invalid conversion to integer";
    case 5:
        return "unreachable executed";
    case 6:
        return "indirect call to a null or mistyped function";
    case 7:
        return "uncaught exception";
    case 8:
        return "call stack exhausted";
    case MESH_WASM_TRAP_NOMEM:
        return "out of memory";
    case MESH_WASM_TRAP_HALTED:
        return "ended by the host after a halt";
    default:
        return "unknown trap";
    }
}

/* ---- function types: one registry for every module, any thread ------- */

typedef struct {
    uint32_t params, results;
    uint32_t *types;
} func_type;

static pthread_mutex_t types_lock = PTHREAD_MUTEX_INITIALIZER;
static func_type *types;
static uint32_t ntypes, types_cap;

static uint32_t glue_register_func_type(uint32_t params, uint32_t results,
                                        const uint32_t *tv)
{
    uint32_t n = params + results, idx = 0;
    pthread_mutex_lock(&types_lock);
    for (uint32_t i = 0; i < ntypes; i++) {
        if (types[i].params == params && types[i].results == results &&
            (n == 0 || memcmp(types[i].types, tv, n * sizeof(*tv)) == 0)) {
            idx = i + 1;
            goto out_unlock;
        }
    }
    if (ntypes == types_cap) {
        uint32_t cap = types_cap ? types_cap * 2 : 64;
        func_type *t = realloc(types, cap * sizeof(*t));
        if (t == NULL) {
            goto out_unlock;
        }
        types = t;
        types_cap = cap;
    }
    uint32_t *copy = malloc(n ? n * sizeof(*tv) : 1);
    if (copy == NULL) {
        goto out_unlock;
    }
    if (n > 0) {
        memcpy(copy, tv, n * sizeof(*tv));
    }
    types[ntypes] = (func_type){params, results, copy};
    idx = ++ntypes;
out_unlock:
    pthread_mutex_unlock(&types_lock);
    /* 0 (out of memory) makes every call_indirect of that type trap. */
    return idx;
}

/* ---- linear memories: guard pages, revocable by the host ------------- */

static void glue_memory_allocate(mesh_wasm_memory *m, uint32_t pages,
                                 uint32_t max_pages)
{
    mesh_wasm_trap_state *ts = tls_lane;
    if (ts == NULL || ts->mem != NULL || pages > 65536) {
        mesh_wasm_trap(MESH_WASM_TRAP_NOMEM);
    }
    uint8_t *base = mmap(NULL, RESERVE, PROT_NONE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        mesh_wasm_trap(MESH_WASM_TRAP_NOMEM);
    }
    size_t bytes = (size_t)pages * WASM_PAGE;
    if (bytes > 0 && mprotect(base, bytes, PROT_READ | PROT_WRITE) != 0) {
        munmap(base, RESERVE);
        mesh_wasm_trap(MESH_WASM_TRAP_NOMEM);
    }
    m->data = base;
    m->pages = pages;
    m->max_pages = max_pages;
    /* A full 4 GiB memory's size wraps to 0 in the u32, as in wabt. */
    m->size = (uint32_t)bytes;
    pthread_mutex_lock(&ts->lock);
    ts->mem = m;
    ts->mem_base = base;
    pthread_mutex_unlock(&ts->lock);
}

static uint32_t glue_memory_grow(mesh_wasm_memory *m, uint32_t delta)
{
    mesh_wasm_trap_state *ts = tls_lane;
    uint32_t old = m->pages;
    uint64_t want = (uint64_t)old + delta;
    uint32_t ret = old;
    if (ts != NULL) {
        pthread_mutex_lock(&ts->lock);
        if (atomic_load(&ts->killed)) {
            pthread_mutex_unlock(&ts->lock);
            mesh_wasm_trap(MESH_WASM_TRAP_HALTED);
        }
    }
    if (want > m->max_pages || want > 65536) {
        ret = UINT32_MAX;
    } else if (delta > 0 && mprotect(m->data + (size_t)old * WASM_PAGE,
                                     (size_t)delta * WASM_PAGE,
                                     PROT_READ | PROT_WRITE) != 0) {
        ret = UINT32_MAX;
    } else {
        m->pages = (uint32_t)want;
        m->size = (uint32_t)(want * WASM_PAGE);
    }
    if (ts != NULL) {
        pthread_mutex_unlock(&ts->lock);
    }
    return ret;
}

static void glue_memory_free(mesh_wasm_memory *m)
{
    mesh_wasm_trap_state *ts = tls_lane;
    if (m->data == NULL) {
        return;
    }
    if (ts != NULL) {
        pthread_mutex_lock(&ts->lock);
        if (ts->mem == m) {
            ts->mem = NULL;
            ts->mem_base = NULL;
        }
        pthread_mutex_unlock(&ts->lock);
    }
    munmap(m->data, RESERVE);
    memset(m, 0, sizeof(*m));
}

void mesh_wasm_glue_kill(mesh_wasm_trap_state *ts)
{
    pthread_mutex_lock(&ts->lock);
    atomic_store(&ts->killed, 1);
    if (ts->mem != NULL) {
        /* The next access to the memory faults: a trap (HALTED). */
        mprotect(ts->mem_base, RESERVE, PROT_NONE);
    }
    pthread_mutex_unlock(&ts->lock);
}

/* ---- tables ----------------------------------------------------------- */

static void glue_table_allocate(mesh_wasm_table *t, size_t elem, uint32_t n,
                                uint32_t max)
{
    t->data = n > 0 ? calloc(n, elem) : NULL;
    if (n > 0 && t->data == NULL) {
        mesh_wasm_trap(MESH_WASM_TRAP_NOMEM);
    }
    t->size = n;
    t->max_size = max;
}

static uint32_t glue_table_grow(mesh_wasm_table *t, size_t elem, uint32_t delta,
                                const void *init)
{
    uint32_t old = t->size;
    uint64_t want = (uint64_t)old + delta;
    if (want > t->max_size || want > (1u << 24)) {
        return UINT32_MAX;
    }
    if (delta == 0) {
        return old;
    }
    uint8_t *d = realloc(t->data, (size_t)want * elem);
    if (d == NULL) {
        return UINT32_MAX;
    }
    for (uint64_t i = old; i < want; i++) {
        memcpy(d + i * elem, init, elem);
    }
    t->data = d;
    t->size = (uint32_t)want;
    return old;
}

static void glue_table_free(mesh_wasm_table *t)
{
    free(t->data);
    t->data = NULL;
    t->size = 0;
}

static const mesh_wasm_host host = {
    .abi = MESH_WASM_GLUE_ABI,
    .size = sizeof(mesh_wasm_host),
    .trap = glue_trap,
    .register_func_type = glue_register_func_type,
    .memory_allocate = glue_memory_allocate,
    .memory_grow = glue_memory_grow,
    .memory_free = glue_memory_free,
    .table_allocate = glue_table_allocate,
    .table_grow = glue_table_grow,
    .table_free = glue_table_free,
    .online = mesh_wasm_imp_online,
    .slot = mesh_wasm_imp_slot,
    .node = mesh_wasm_imp_node,
    .nodes = mesh_wasm_imp_nodes,
    .halted = mesh_wasm_imp_halted,
    .point = mesh_wasm_imp_point,
    .fail = mesh_wasm_imp_fail,
    .scratch_size = mesh_wasm_imp_scratch_size,
    .scratch_read = mesh_wasm_imp_scratch_read,
    .scratch_write = mesh_wasm_imp_scratch_write,
    .end_bound = mesh_wasm_imp_end_bound,
    .end_id = mesh_wasm_imp_end_id,
    .end_peer = mesh_wasm_imp_end_peer,
    .end_here = mesh_wasm_imp_end_here,
    .end_bytes = mesh_wasm_imp_end_bytes,
    .end_write = mesh_wasm_imp_end_write,
    .end_read = mesh_wasm_imp_end_read,
    .end_ready = mesh_wasm_imp_end_ready,
    .end_wait_arrived = mesh_wasm_imp_end_wait_arrived,
    .end_wait_sent = mesh_wasm_imp_end_wait_sent,
    .end_arrived = mesh_wasm_imp_end_arrived,
    .end_sent = mesh_wasm_imp_end_sent,
    .end_find = mesh_wasm_imp_end_find,
};

const mesh_wasm_host *mesh_wasm_glue_host(void)
{
    return &host;
}

/* ---- halting a lane that never checks --------------------------------- */

/* The default halt signal, counted down from SIGRTMAX, away from glibc's
 * own (SIGRTMIN and below) and the first ones others pick. */
#define HALT_SIGNAL_FROM_MAX 4

static int halt_signal;

int mesh_wasm_glue_halt_signal(void)
{
    return halt_signal;
}

struct code_find {
    uintptr_t base;
    uintptr_t lo, hi;
};

static int code_segment(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct code_find *f = arg;
    if ((uintptr_t)info->dlpi_addr != f->base) {
        return 0;
    }
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || (ph->p_flags & PF_X) == 0) {
            continue;
        }
        uintptr_t lo = f->base + ph->p_vaddr;
        uintptr_t hi = lo + ph->p_memsz;
        f->lo = f->lo == 0 || lo < f->lo ? lo : f->lo;
        f->hi = hi > f->hi ? hi : f->hi;
    }
    return 1;
}

bool mesh_wasm_glue_code_range(const void *fn, uintptr_t *lo, uintptr_t *hi)
{
    Dl_info di;
    if (dladdr(fn, &di) == 0 || di.dli_fbase == NULL) {
        return false;
    }
    /* dli_fbase is the mapping's start; dl_iterate_phdr names objects by
     * their load bias, which for a shared object is the same address. */
    struct code_find f = {.base = (uintptr_t)di.dli_fbase};
    dl_iterate_phdr(code_segment, &f);
    if (f.hi <= f.lo || (uintptr_t)fn < f.lo || (uintptr_t)fn >= f.hi) {
        return false;
    }
    *lo = f.lo;
    *hi = f.hi;
    return true;
}

/* The interrupted instruction's address; 0 where this machine's signal
 * context is not known here. */
static uintptr_t interrupted_pc(const void *ucv)
{
    const ucontext_t *uc = ucv;
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext.pc;
#elif defined(__powerpc64__)
    return (uintptr_t)uc->uc_mcontext.gp_regs[32];
#else
    (void)uc;
    return 0;
#endif
}

static bool pc_known(void)
{
#if defined(__x86_64__) || defined(__aarch64__) || defined(__powerpc64__)
    return true;
#else
    return false;
#endif
}

static void on_halt(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    mesh_wasm_trap_state *ts = tls_lane;
    if (ts == NULL || !ts->armed || !atomic_load(&ts->killed) ||
        si->si_code != SI_QUEUE ||
        si->si_value.sival_int != atomic_load(&ts->gen)) {
        return; /* not a lane, not in wasm, not killed, or a late signal */
    }
    uintptr_t pc = interrupted_pc(uc);
    if (pc >= ts->code_lo && pc < ts->code_hi) {
        siglongjmp(ts->jmp, (int)MESH_WASM_TRAP_HALTED);
    }
}

bool mesh_wasm_glue_interrupt(pthread_t t, const mesh_wasm_trap_state *ts)
{
    if (!pc_known() || halt_signal == 0) {
        return false;
    }
    union sigval v = {.sival_int = atomic_load(&ts->gen)};
    return pthread_sigqueue(t, halt_signal, v) == 0;
}

/* ---- the fault handler ------------------------------------------------ */

static struct sigaction old_segv, old_bus;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static int install_errno;

static void chain(int sig, siginfo_t *si, void *uc)
{
    struct sigaction *old = sig == SIGSEGV ? &old_segv : &old_bus;
    if ((old->sa_flags & SA_SIGINFO) != 0 && old->sa_sigaction != NULL) {
        old->sa_sigaction(sig, si, uc);
    } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
    } else {
        /* Default: return and fault again, now fatal. */
        signal(sig, SIG_DFL);
    }
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    mesh_wasm_trap_state *ts = tls_lane;
    if (ts != NULL && ts->armed) {
        uint8_t *a = si->si_addr;
        /* mem_base is read without the lock: the lane itself set it, and
         * only the lane clears it. */
        if (ts->mem_base != NULL && a >= ts->mem_base &&
            a < ts->mem_base + RESERVE) {
            siglongjmp(ts->jmp, atomic_load(&ts->killed)
                                    ? (int)MESH_WASM_TRAP_HALTED
                                    : (int)MESH_WASM_TRAP_OOB);
        }
        if (a >= ts->guard_lo && a < ts->guard_hi) {
            siglongjmp(ts->jmp, (int)MESH_WASM_TRAP_EXHAUSTION);
        }
    }
    chain(sig, si, uc);
}

/* Why the halt signal could not be had (set once by install). */
static enum { HALT_OK, HALT_BAD_SETTING, HALT_TAKEN } halt_problem;
static uint64_t halt_setting;

static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &old_segv) != 0 ||
        sigaction(SIGBUS, &sa, &old_bus) != 0) {
        install_errno = errno;
        return;
    }
    uint64_t sig = 0;
    if (!rig_env_u64("RIG_WASM_HALT_SIGNAL",
                     (uint64_t)(SIGRTMAX - HALT_SIGNAL_FROM_MAX), &sig, NULL) ||
        sig < (uint64_t)SIGRTMIN || sig > (uint64_t)SIGRTMAX) {
        halt_problem = HALT_BAD_SETTING;
        halt_setting = sig;
        return;
    }
    struct sigaction old;
    if (sigaction((int)sig, NULL, &old) != 0) {
        install_errno = errno;
        return;
    }
    if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) {
        halt_problem = HALT_TAKEN;
        halt_setting = sig;
        return;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_halt;
    /* SA_RESTART: a signal that finds a lane idle (in a wait) must not
     * make that wait fail. */
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction((int)sig, &sa, NULL) != 0) {
        install_errno = errno;
        return;
    }
    halt_signal = (int)sig;
}

bool mesh_wasm_glue_install(char **err)
{
    pthread_once(&install_once, install);
    if (install_errno != 0) {
        return rig_err(err, "system: sigaction failed: %s",
                       strerror(install_errno));
    }
    if (halt_problem == HALT_BAD_SETTING) {
        return rig_err(err,
                       "invalid: RIG_WASM_HALT_SIGNAL=%s is not a real-time "
                       "signal (%d..%d)",
                       rig_env_str("RIG_WASM_HALT_SIGNAL", "?"), SIGRTMIN,
                       SIGRTMAX);
    }
    if (halt_problem == HALT_TAKEN) {
        return rig_err(err,
                       "unsupported: signal %llu, which the wasm backend "
                       "sends to halt its lanes, has a handler of the "
                       "application's (set RIG_WASM_HALT_SIGNAL to a free "
                       "one)",
                       (unsigned long long)halt_setting);
    }
    return true;
}
