/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal declarations of the wasm backend: module checks, compiler, glue.
 *
 * The pieces, one file each:
 *   wasm_module.c   reads a module's sections: what it imports and exports
 *                   (refusals with a clear reason before wasm2c runs);
 *   wasm_compile.c  the compiler: wasm2c and the C compiler into a shared
 *                   object, cached by the payload's hash; loads it;
 *   wasm_glue.c     rig's runtime glue: what generated code calls (traps,
 *                   memories, tables), trap-safe per lane;
 *   wasm_lanes.c    the lease lanes: threads bound to cores with hwloc;
 *   wasm_backend.c  the mesh_backend ops.
 *
 * The glue ABI.  A compiled module does not link wabt's runtime: rig writes
 * a small C file next to wasm2c's output that defines every wasm_rt_*
 * function and every mesh.* import as a call through one table of host
 * functions (mesh_wasm_host), and exports one symbol, MESH_WASM_MODULE_SYM,
 * that takes the table and returns the module's own (mesh_wasm_module).
 * The shared object is built with hidden visibility, so nothing of it
 * interposes on the process and librig exports no wasm_rt_* symbol.  The
 * C text of that file (wasm_compile.c) and the structs below must stay in
 * step: MESH_WASM_GLUE_ABI and the struct sizes are checked at load. */
#ifndef MESH_WASM_INTERNAL_H
#define MESH_WASM_INTERNAL_H

#include "../mesh_internal.h"

#include "mesh/backend.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the glue ABI ----------------------------------------------------- */

/* Bump on any change of the structs below or of the glue's C text: it is
 * part of the cache key. */
#define MESH_WASM_GLUE_ABI 3u
#define MESH_WASM_MODULE_SYM "mesh_wasm_module_v3"

/* wasm_rt_memory_t as wasm-rt.h (wabt 1.0.32) lays it out. */
typedef struct {
    uint8_t *data;
    uint32_t pages, max_pages;
    uint32_t size;
} mesh_wasm_memory;

/* wasm_rt_funcref_table_t and wasm_rt_externref_table_t: the same layout
 * with elements of elem bytes. */
typedef struct {
    void *data;
    uint32_t max_size;
    uint32_t size;
} mesh_wasm_table;

/* Host functions a module calls.  ctx is the node's context (the
 * `struct Z_mesh_instance_t *` of the generated code). */
typedef struct {
    uint32_t abi;  /* MESH_WASM_GLUE_ABI */
    uint32_t size; /* sizeof(mesh_wasm_host) */
    /* runtime */
    void (*trap)(uint32_t code); /* does not return */
    uint32_t (*register_func_type)(uint32_t params, uint32_t results,
                                   const uint32_t *types);
    void (*memory_allocate)(mesh_wasm_memory *m, uint32_t pages,
                            uint32_t max_pages);
    uint32_t (*memory_grow)(mesh_wasm_memory *m, uint32_t delta);
    void (*memory_free)(mesh_wasm_memory *m);
    void (*table_allocate)(mesh_wasm_table *t, size_t elem, uint32_t n,
                           uint32_t max);
    uint32_t (*table_grow)(mesh_wasm_table *t, size_t elem, uint32_t delta,
                           const void *init);
    void (*table_free)(mesh_wasm_table *t);
    /* the mesh.* imports of mesh/wasm.h */
    void (*online)(void *ctx);
    uint32_t (*slot)(void *ctx);
    uint32_t (*node)(void *ctx);
    uint32_t (*nodes)(void *ctx);
    uint32_t (*halted)(void *ctx);
    uint32_t (*point)(void *ctx, uint32_t i, uint64_t value);
    void (*fail)(void *ctx, uint32_t code);
    uint64_t (*scratch_size)(void *ctx);
    void (*scratch_read)(void *ctx, uint32_t dst, uint64_t off, uint32_t len);
    void (*scratch_write)(void *ctx, uint64_t off, uint32_t src, uint32_t len);
    /* the mesh.end_* imports: a program's rail ends by input */
    uint32_t (*end_bound)(void *ctx, uint32_t input);
    uint64_t (*end_id)(void *ctx, uint32_t input);
    uint32_t (*end_peer)(void *ctx, uint32_t input);
    uint32_t (*end_here)(void *ctx, uint32_t input);
    uint64_t (*end_bytes)(void *ctx, uint32_t input, uint32_t dir);
    void (*end_write)(void *ctx, uint32_t input, uint32_t copy, uint64_t off,
                      uint32_t src, uint32_t len);
    void (*end_read)(void *ctx, uint32_t input, uint32_t copy, uint64_t off,
                     uint32_t dst, uint32_t len);
    void (*end_ready)(void *ctx, uint32_t input, uint64_t c);
    uint32_t (*end_wait_arrived)(void *ctx, uint32_t input, uint64_t c);
    uint32_t (*end_wait_sent)(void *ctx, uint32_t input, uint64_t c);
    uint64_t (*end_arrived)(void *ctx, uint32_t input);
    uint64_t (*end_sent)(void *ctx, uint32_t input);
    uint32_t (*end_find)(void *ctx, uint64_t id);
} mesh_wasm_host;

/* What a compiled module gives the host. */
typedef struct {
    uint32_t abi;         /* MESH_WASM_GLUE_ABI */
    uint32_t host_size;   /* sizeof(mesh_wasm_host) the glue saw */
    uint32_t memory_size; /* sizeof(wasm_rt_memory_t) */
    size_t instance_size; /* bytes of one instance */
    void (*init_module)(void);
    /* Instantiates into zeroed inst with the node's context. */
    void (*instantiate)(void *inst, void *ctx);
    void (*entry)(void *inst);
    /* The instance's memory, or NULL when the module has none. */
    mesh_wasm_memory *(*memory)(void *inst);
    void (*free)(void *inst);
} mesh_wasm_module;

typedef const mesh_wasm_module *(*mesh_wasm_module_fn)(const mesh_wasm_host *h);

/* rig's trap codes: wabt's (wasm_rt_trap_t, 1..8 in 1.0.32) and rig's. */
#define MESH_WASM_TRAP_OOB 1u
#define MESH_WASM_TRAP_EXHAUSTION 8u
#define MESH_WASM_TRAP_NOMEM 100u  /* a memory could not be reserved */
#define MESH_WASM_TRAP_HALTED 101u /* ended by the host after a halt */

/* A lane's trap state: what the fault handler and the trapping glue need
 * to unwind the lane's current wasm call.  Owned by the lane; the host
 * imports and the glue reach it through the lane's thread-local pointer. */
typedef struct mesh_wasm_trap_state {
    sigjmp_buf jmp;
    /* Inside wasm code (instantiate or entry): a fault in the instance's
     * memory or the lane's stack guard unwinds to jmp. */
    volatile sig_atomic_t armed;
    /* The host ended the node: its next check traps (HALTED). */
    _Atomic int killed;
    /* Guards mem against the host's kill (which revokes its pages). */
    pthread_mutex_t lock;
    mesh_wasm_memory *mem; /* the instance's memory; NULL: none */
    uint8_t *mem_base;     /* its reservation */
    /* The lane's stack guard: a fault there is call stack exhaustion. */
    uint8_t *guard_lo, *guard_hi;
    /* The module's code (its shared object's executable segments): a halt
     * signal that finds the lane there unwinds it. */
    uintptr_t code_lo, code_hi;
    /* The node the lane runs, numbered per lane (set under the pool's
     * lock when a node is leased): a halt signal carries it, so a late
     * signal meant for an earlier node is ignored. */
    _Atomic int gen;
} mesh_wasm_trap_state;

/* Sets the calling thread's trap state (NULL: none). */
void mesh_wasm_glue_set_lane(mesh_wasm_trap_state *ts);
/* The calling thread's trap state, or NULL. */
mesh_wasm_trap_state *mesh_wasm_glue_lane(void);
/* Unwinds the calling lane's wasm call with code (does not return; aborts
 * off a lane, a rig bug). */
_Noreturn void mesh_wasm_trap(uint32_t code);
/* Ends the node running on ts: marks it killed and revokes its memory's
 * pages, so its next check or memory access traps.  Any thread. */
void mesh_wasm_glue_kill(mesh_wasm_trap_state *ts);
/* Sends the halt signal to lane thread t whose trap state is ts (the pool
 * locked, the lane running the node ts->gen numbers): once ts is killed,
 * the signal unwinds the node if it finds it in its module's code, and
 * does nothing anywhere else (a host call, libc), so the caller sends it
 * again until the node has ended.  False where this machine's signal
 * context is not known (the node then ends only at a check). */
bool mesh_wasm_glue_interrupt(pthread_t t, const mesh_wasm_trap_state *ts);
/* The halt signal's number (RIG_WASM_HALT_SIGNAL, default SIGRTMAX - 4):
 * lanes leave it unblocked. */
int mesh_wasm_glue_halt_signal(void);
/* The executable range of the shared object that holds fn (the module's
 * code and its glue's); false when it cannot be found. */
bool mesh_wasm_glue_code_range(const void *fn, uintptr_t *lo, uintptr_t *hi);
/* The host imports (wasm_lanes.c); ctx is the node. */
void mesh_wasm_imp_online(void *ctx);
uint32_t mesh_wasm_imp_slot(void *ctx);
uint32_t mesh_wasm_imp_node(void *ctx);
uint32_t mesh_wasm_imp_nodes(void *ctx);
uint32_t mesh_wasm_imp_halted(void *ctx);
uint32_t mesh_wasm_imp_point(void *ctx, uint32_t i, uint64_t value);
void mesh_wasm_imp_fail(void *ctx, uint32_t code);
uint64_t mesh_wasm_imp_scratch_size(void *ctx);
void mesh_wasm_imp_scratch_read(void *ctx, uint32_t dst, uint64_t off,
                                uint32_t len);
void mesh_wasm_imp_scratch_write(void *ctx, uint64_t off, uint32_t src,
                                 uint32_t len);
uint32_t mesh_wasm_imp_end_bound(void *ctx, uint32_t input);
uint64_t mesh_wasm_imp_end_id(void *ctx, uint32_t input);
uint32_t mesh_wasm_imp_end_peer(void *ctx, uint32_t input);
uint32_t mesh_wasm_imp_end_here(void *ctx, uint32_t input);
uint64_t mesh_wasm_imp_end_bytes(void *ctx, uint32_t input, uint32_t dir);
void mesh_wasm_imp_end_write(void *ctx, uint32_t input, uint32_t copy,
                             uint64_t off, uint32_t src, uint32_t len);
void mesh_wasm_imp_end_read(void *ctx, uint32_t input, uint32_t copy,
                            uint64_t off, uint32_t dst, uint32_t len);
void mesh_wasm_imp_end_ready(void *ctx, uint32_t input, uint64_t c);
uint32_t mesh_wasm_imp_end_wait_arrived(void *ctx, uint32_t input, uint64_t c);
uint32_t mesh_wasm_imp_end_wait_sent(void *ctx, uint32_t input, uint64_t c);
uint64_t mesh_wasm_imp_end_arrived(void *ctx, uint32_t input);
uint64_t mesh_wasm_imp_end_sent(void *ctx, uint32_t input);
uint32_t mesh_wasm_imp_end_find(void *ctx, uint64_t id);

/* The glue's host table (wasm_glue.c). */
const mesh_wasm_host *mesh_wasm_glue_host(void);
/* Installs the SIGSEGV/SIGBUS handler that turns a lane's faults into
 * traps, and the halt signal's handler, once per process (later calls do
 * nothing).  The previous handler still gets every fault that is not a
 * lane's.  False: "system: ", "invalid: " (a bad RIG_WASM_HALT_SIGNAL),
 * "unsupported: " (the application handles the halt signal already). */
bool mesh_wasm_glue_install(char **err);
/* A trap code in words: "out of bounds memory access". */
const char *mesh_wasm_trap_str(uint32_t code);

/* ---- module inspection (wasm_module.c) -------------------------------- */

/* What rig needs to know of a module before compiling it. */
typedef struct {
    bool has_memory;    /* defines a memory */
    bool imports_mesh;  /* imports at least one mesh.* function */
    uint32_t min_pages; /* its memory's initial pages */
} mesh_wasm_info;

/* Reads len bytes of a module and checks what rig relies on: framing of
 * every section, only function imports, each one of mesh/wasm.h with its
 * type, and an exported function entry of type [] -> [].  Not a full
 * validation (wasm2c does that).  Errors: "compile: " (malformed, no entry,
 * entry of another type), "unsupported: " (an import rig lacks, a memory
 * rig cannot run).  Any thread. */
bool mesh_wasm_inspect(const uint8_t *bytes, size_t len, const char *entry,
                       mesh_wasm_info *out, char **err);

/* ---- lease lanes (wasm_lanes.c) --------------------------------------- */

/* The pool of lanes: threads created on demand, each bound to one core of
 * those the backend may use, kept for later launches. */
typedef struct mesh_wasm_pool mesh_wasm_pool;
/* One launch: nodes instances of a module, each on a lane. */
typedef struct mesh_wasm_run mesh_wasm_run;

/* Loads the topology and picks the cores: every core the process may use,
 * at most max_cores (0: no limit).  *total and *used are the machine's cores
 * and those lanes use.  Errors: "system: " (hwloc), "nomem: ". */
bool mesh_wasm_pool_open(uint32_t max_cores, mesh_wasm_pool **out,
                         uint32_t *total, uint32_t *used, char **err);
/* Ends every idle lane and frees the pool; lanes still busy after grace_ms
 * are abandoned (NULL: nothing). */
void mesh_wasm_pool_close(mesh_wasm_pool *p, uint32_t grace_ms);
/* Lanes alive (idle or leased) and abandoned. */
void mesh_wasm_pool_counts(const mesh_wasm_pool *p, uint32_t *alive,
                           uint32_t *lost);
/* Lane stack size (applies to lanes made later). */
size_t mesh_wasm_pool_stack(const mesh_wasm_pool *p);
void mesh_wasm_pool_set_stack(mesh_wasm_pool *p, size_t bytes);

/* What a run needs of its program. */
typedef struct {
    const mesh_wasm_module *mod;
    uintptr_t code_lo, code_hi; /* the module's code (the image's) */
    const char *name;
    mesh_cb_slot *words; /* the slot's mailbox words */
    uint32_t slot;
    uint8_t *scratch;
    uint64_t scratch_bytes;
    /* The program's ends by input (NULL: unbound), the kernel's. */
    const mesh_end_binding *const *ends;
} mesh_wasm_job;

/* Leases nodes lanes (the least loaded cores first) and starts one instance
 * on each; returns at once.  job's pointers must outlive the run.  Errors:
 * "limits: " (more lanes than MESH_WASM_MAX_LANES), "system: " (a thread),
 * "nomem: ". */
bool mesh_wasm_run_start(mesh_wasm_pool *p, const mesh_wasm_job *job,
                         uint32_t nodes, mesh_wasm_run **out, char **err);
/* Every node returned (acquire). */
bool mesh_wasm_run_done(const mesh_wasm_run *r);
/* The launch's first trap, "node 1 trapped: out of bounds memory access"
 * (malloc'd), once; NULL otherwise. */
char *mesh_wasm_run_crashed(mesh_wasm_run *r);
/* Raises P_HALT and waits halt_ms for the nodes; then ends those left at
 * their next check and waits grace_ms; nodes still running are abandoned
 * (*abandoned true, "timeout: " naming them). */
bool mesh_wasm_run_stop(mesh_wasm_run *r, uint32_t halt_ms, uint32_t grace_ms,
                        bool *abandoned, char **err);
/* Frees a run whose nodes all returned (NULL: nothing). */
void mesh_wasm_run_free(mesh_wasm_run *r);
/* The cpuset hwloc reported for the lane that ran node (see
 * mesh_wasm_node_binding). */
bool mesh_wasm_run_binding(const mesh_wasm_run *r, uint32_t node, char **out,
                           char **err);

/* The trap that ended node (0: none yet); read once the run is done. */
uint32_t mesh_wasm_run_trap(const mesh_wasm_run *r, uint32_t node);

/* The most lanes a pool makes. */
#define MESH_WASM_MAX_LANES 1024u
/* Default lane stack (the wasm call stack): 8 MiB. */
#define MESH_WASM_STACK_BYTES (8u << 20)

/* ---- the compiler (wasm_compile.c) ------------------------------------ */

/* A compiled, loaded module: the image a mesh_prepared carries. */
typedef struct mesh_wasm_image {
    void *dl;                    /* dlopen handle */
    const mesh_wasm_module *mod; /* its table */
    uintptr_t code_lo, code_hi;  /* its executable segments */
    char *name;                  /* the program's name */
    uint64_t scratch_bytes;      /* the manifest's scratch */
    uint32_t threads;
} mesh_wasm_image;

/* Where tools and the cache are (resolved from RIG_* at open). */
typedef struct {
    char *wasm2c;        /* RIG_WASM2C, default the configured path */
    char *cc;            /* RIG_WASM_CC, default "cc" */
    char *rt_dir;        /* RIG_WASM_RT_DIR: wasm-rt.h's directory */
    char *cache;         /* RIG_WASM_CACHE, $XDG_CACHE_HOME/rig/wasm or
                            /tmp/rig-wasm-<uid> */
    char *version;       /* `wasm2c --version` */
    uint32_t timeout_ms; /* RIG_WASM_COMPILE_TIMEOUT_MS, default 120000 */
} mesh_wasm_tools;

/* Resolves the tools: "unsupported: " when wasm2c, the C compiler or the
 * runtime headers are missing; "invalid: " for a malformed setting;
 * "system: " when the cache directory cannot be made private. */
bool mesh_wasm_tools_open(mesh_wasm_tools *t, char **err);
void mesh_wasm_tools_close(mesh_wasm_tools *t);

/* The compiler's prepare (mesh_compiler_ops.prepare) on tools t: checks,
 * compiles (or finds in the cache) and loads the module.  Takes ownership
 * of *src (moved into out->src on success, freed on failure).  On success
 * *out is filled but for its kernel, and *img is the loaded module.  Errors
 * start with a LOAD_REASONS word.  Any thread. */
bool mesh_wasm_prepare(const mesh_wasm_tools *t, mesh_payload *src,
                       const uint64_t *expect, mesh_prepared *out,
                       mesh_wasm_image **img, char **err);
/* Releases an image (dlclose unless keep_code, for a lane that never came
 * back and still runs its code). */
void mesh_wasm_image_free(mesh_wasm_image *img, bool keep_code);
/* Times wasm2c ran in this process (the cache test reads it). */
uint64_t mesh_wasm_compiles(void);
/* Kills compiler children still running (async-signal-safe; the cleanup). */
void mesh_wasm_kill_children(void);

/* ---- the backend (wasm_backend.c) ------------------------------------- */

/* The wasm backend's constructor (the table's mesh_wasm_open). */
bool mesh_wasm_backend_open(const mesh_settings *s, mesh_backend **out,
                            char **err);

/* For tests: the cpuset (hwloc bitmap, as a list string "0-1") the lane
 * running node of slot's last launch was bound to, as hwloc reports it
 * from the lane's thread; malloc'd into *out.  Errors: "invalid: ". */
bool mesh_wasm_node_binding(const mesh_backend *b, uint32_t slot, uint32_t node,
                            char **out, char **err);
/* For tests: the trap code that ended node of slot's last launch (0: it
 * returned or still runs).  0 for a bad argument. */
uint32_t mesh_wasm_node_trap(const mesh_backend *b, uint32_t slot,
                             uint32_t node);
/* For tests: lanes alive in the pool and lanes abandoned. */
void mesh_wasm_lane_counts(const mesh_backend *b, uint32_t *alive,
                           uint32_t *lost);

#endif
