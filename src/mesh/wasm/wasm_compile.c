/* SPDX-License-Identifier: BSD-3-Clause */
/* The wasm compiler: wasm2c and the C compiler into a cached shared object.
 *
 * prepare checks the manifest and the module (wasm_module.c), then looks
 * for <cache>/<payload hash>-<wasm2c version>-g<glue ABI>.so; when absent
 * it runs, in a private work directory of the cache, `wasm2c m.wasm -o m.c
 * -n m` and `cc -shared` over m.c and rig's glue file (see wasm_internal.h)
 * and renames the object into place, so a concurrent prepare of the same
 * program finds either nothing or a whole file.  Each tool runs under a
 * keeper (src/mesh/child.c), with TMPDIR in the work directory: past
 * RIG_WASM_COMPILE_TIMEOUT_MS the keeper ends the tool and all it started
 * (cc's cc1), and removing the work directory removes their temporary
 * files; its output is the error's text. */
#include "wasm_internal.h"

#include "../child_internal.h"

#include "../../util/util_internal.h"

#include "config.h"
#include "mesh/wasm.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#ifndef RIG_WASM2C
#define RIG_WASM2C "wasm2c"
#endif
#ifndef RIG_WASM_RT_DIR
#define RIG_WASM_RT_DIR "/usr/src/wasm2c"
#endif

/* ---- children: tracked so the exit cleanup can end them --------------- */

#define MAX_CHILDREN 16
static _Atomic pid_t children[MAX_CHILDREN];
static _Atomic uint64_t compiles;

void mesh_wasm_kill_children(void)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        mesh_child_end(atomic_load(&children[i]));
    }
}

uint64_t mesh_wasm_compiles(void)
{
    return atomic_load(&compiles);
}

static void child_track(pid_t pid, bool add)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        pid_t want = add ? 0 : pid;
        if (atomic_compare_exchange_strong(&children[i], &want,
                                           add ? pid : 0)) {
            return;
        }
    }
}

/* Reads at most cap-1 bytes of path into buf, NUL-terminated, trailing
 * white space dropped. */
static void read_text(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return;
    }
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && isspace((unsigned char)buf[n - 1])) {
        buf[--n] = '\0';
    }
}

/* The environment of a tool run: the host's, with TMPDIR set to dir, so
 * that what the compiler leaves there (cc's temporary files of a run that
 * was killed) goes with the work directory. */
static char **tool_env(const char *dir)
{
    size_t n = 0;
    while (environ != NULL && environ[n] != NULL) {
        n++;
    }
    char **env = calloc(n + 2, sizeof(char *));
    char *tmp = NULL;
    if (env == NULL || asprintf(&tmp, "TMPDIR=%s", dir) < 0) {
        free(env);
        return NULL;
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "TMPDIR=", 7) != 0) {
            env[at++] = environ[i];
        }
    }
    env[at++] = tmp;
    env[at] = NULL;
    return env;
}

static void tool_env_free(char **env)
{
    for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
        if (strncmp(env[i], "TMPDIR=", 7) == 0) {
            free(env[i]);
        }
    }
    free(env);
}

/* Runs argv (searched in PATH) with stdout and stderr to log, TMPDIR dir,
 * at most timeout_ms, under a keeper: what the tool starts (cc's cc1, as,
 * ld) ends with it, the timeout included.  False with "compile: " naming
 * the tool and its output (or "timeout: "). */
static bool run_tool(char *const argv[], const char *dir, const char *log,
                     uint32_t timeout_ms, char **err)
{
    char **env = tool_env(dir);
    if (env == NULL) {
        return rig_err(err, "nomem: running %s", argv[0]);
    }
    mesh_child_spec spec = {
        .argv = argv,
        .envp = env,
        .fds = {-1, -1, -1, -1},
        .exec_fd = -1,
        .log = log,
        .stack_bytes = 0,
    };
    pid_t pid = 0;
    bool started = mesh_child_spawn(&spec, &pid, err);
    tool_env_free(env);
    if (!started) {
        return rig_err_wrap(err, "compile: cannot run %s", argv[0]);
    }
    child_track(pid, true);
    uint64_t until = rig_now_ns() + (uint64_t)timeout_ms * 1000000u;
    uint32_t nap = 1;
    int status = 0;
    bool timed_out = false;
    while (!mesh_child_reap(NULL, pid, &status)) {
        if (rig_now_ns() >= until) {
            /* The whole tree ends; the keeper then exits. */
            mesh_child_end(pid);
            if (!mesh_child_reap_within(NULL, pid, 10000, &status)) {
                kill(pid, SIGKILL);
                mesh_child_reap_within(NULL, pid, 1000, &status);
            }
            timed_out = true;
            break;
        }
        mesh_child_sleep_ms(nap);
        nap = nap < 20 ? nap * 2 : nap;
    }
    child_track(pid, false);
    if (timed_out) {
        return rig_err(err, "timeout: %s ran past %u ms", argv[0], timeout_ms);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        return true;
    }
    char out[1024];
    read_text(log, out, sizeof(out));
    if (WIFSIGNALED(status)) {
        return rig_err(err, "compile: %s died of signal %d: %s", argv[0],
                       WTERMSIG(status), out);
    }
    return rig_err(err, "compile: %s failed (exit %d): %s", argv[0],
                   WEXITSTATUS(status), out);
}

/* ---- tools ------------------------------------------------------------ */

static bool private_dir(const char *path, char **err)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        return rig_err(err, "system: stat %s failed: %s", path,
                       strerror(errno));
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 022) != 0) {
        return rig_err(err,
                       "system: the wasm cache %s is not a private "
                       "directory of this user (rig loads code from "
                       "it)",
                       path);
    }
    return true;
}

/* mkdir -p path with mode 0700 for what it makes. */
static bool make_dirs(const char *path, char **err)
{
    char *p = strdup(path);
    if (p == NULL) {
        return rig_err(err, "nomem: a path");
    }
    for (char *s = p + 1; *s != '\0'; s++) {
        if (*s == '/') {
            *s = '\0';
            mkdir(p, 0700);
            *s = '/';
        }
    }
    if (mkdir(p, 0700) != 0 && errno != EEXIST) {
        int e = errno;
        free(p);
        return rig_err(err, "system: mkdir %s failed: %s", path, strerror(e));
    }
    free(p);
    return private_dir(path, err);
}

static char *path_join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s != NULL) {
        snprintf(s, n, "%s/%s", a, b);
    }
    return s;
}

/* Whether name runs: an absolute path that is executable, or found in
 * PATH. */
static bool runnable(const char *name)
{
    if (strchr(name, '/') != NULL) {
        return access(name, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    if (path == NULL) {
        path = "/usr/bin:/bin";
    }
    char buf[4096];
    while (*path != '\0') {
        size_t n = strcspn(path, ":");
        if (n > 0 && n + strlen(name) + 2 < sizeof(buf)) {
            snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, name);
            if (access(buf, X_OK) == 0) {
                return true;
            }
        }
        path += n + (path[n] == ':');
    }
    return false;
}

void mesh_wasm_tools_close(mesh_wasm_tools *t)
{
    if (t == NULL) {
        return;
    }
    free(t->wasm2c);
    free(t->cc);
    free(t->rt_dir);
    free(t->cache);
    free(t->version);
    memset(t, 0, sizeof(*t));
}

static bool tools_version(mesh_wasm_tools *t, char **err)
{
    char *log = path_join(t->cache, "wasm2c-version.XXXXXX");
    if (log == NULL) {
        return rig_err(err, "nomem: a path");
    }
    int fd = mkstemp(log);
    if (fd < 0) {
        int e = errno;
        free(log);
        return rig_err(err, "system: mkstemp in %s failed: %s", t->cache,
                       strerror(e));
    }
    close(fd);
    char *argv[] = {t->wasm2c, "--version", NULL};
    bool ok = run_tool(argv, t->cache, log, t->timeout_ms, err);
    char v[64];
    read_text(log, v, sizeof(v));
    unlink(log);
    free(log);
    if (!ok) {
        return rig_err_wrap(err, "wasm2c --version");
    }
    /* Only file-name-safe characters go into the cache key. */
    for (char *c = v; *c != '\0'; c++) {
        if (!isalnum((unsigned char)*c) && *c != '.') {
            *c = '_';
        }
    }
    t->version = strdup(v[0] ? v : "unknown");
    return t->version != NULL || rig_err(err, "nomem: a version");
}

bool mesh_wasm_tools_open(mesh_wasm_tools *t, char **err)
{
    if (t == NULL) {
        return rig_err(err, "invalid: mesh_wasm_tools_open: NULL");
    }
    memset(t, 0, sizeof(*t));
    uint64_t tmo;
    if (!rig_env_u64("RIG_WASM_COMPILE_TIMEOUT_MS", 120000, &tmo, err)) {
        return false;
    }
    if (tmo == 0 || tmo > UINT32_MAX) {
        return rig_err(err,
                       "invalid: RIG_WASM_COMPILE_TIMEOUT_MS=%llu is "
                       "out of range",
                       (unsigned long long)tmo);
    }
    t->timeout_ms = (uint32_t)tmo;
    t->wasm2c = strdup(rig_env_str("RIG_WASM2C", RIG_WASM2C));
    t->cc = strdup(rig_env_str("RIG_WASM_CC", "cc"));
    t->rt_dir = strdup(rig_env_str("RIG_WASM_RT_DIR", RIG_WASM_RT_DIR));
    const char *cache = rig_env_str("RIG_WASM_CACHE", NULL);
    const char *xdg = getenv("XDG_CACHE_HOME");
    char buf[4096];
    if (cache == NULL && xdg != NULL && xdg[0] == '/') {
        snprintf(buf, sizeof(buf), "%s/rig/wasm", xdg);
        cache = buf;
    } else if (cache == NULL) {
        snprintf(buf, sizeof(buf), "/tmp/rig-wasm-%lu",
                 (unsigned long)geteuid());
        cache = buf;
    }
    t->cache = strdup(cache);
    if (t->wasm2c == NULL || t->cc == NULL || t->rt_dir == NULL ||
        t->cache == NULL) {
        mesh_wasm_tools_close(t);
        return rig_err(err, "nomem: wasm tool paths");
    }
    char *rt_h = path_join(t->rt_dir, "wasm-rt.h");
    bool have_rt = rt_h != NULL && access(rt_h, R_OK) == 0;
    free(rt_h);
    bool ok = false;
    if (!runnable(t->wasm2c)) {
        rig_err(err,
                "unsupported: wasm2c is not on this machine (%s; "
                "install Debian's wabt or set RIG_WASM2C)",
                t->wasm2c);
    } else if (!have_rt) {
        rig_err(err,
                "unsupported: wasm2c's runtime header wasm-rt.h is "
                "not in %s (set RIG_WASM_RT_DIR)",
                t->rt_dir);
    } else if (!runnable(t->cc)) {
        rig_err(err,
                "unsupported: no C compiler to build wasm modules (%s; "
                "set RIG_WASM_CC)",
                t->cc);
    } else if (t->cache[0] != '/' || strlen(t->cache) > 3000) {
        rig_err(err,
                "invalid: RIG_WASM_CACHE=%s is not an absolute path "
                "of at most 3000 bytes",
                t->cache);
    } else {
        ok = make_dirs(t->cache, err) && tools_version(t, err);
    }
    if (!ok) {
        mesh_wasm_tools_close(t);
    }
    return ok;
}

/* ---- the glue file ---------------------------------------------------- */

/* wabt 1.0.32's name mangling: [A-Za-z0-9_] but Z stay, the rest (and Z)
 * become Z and two upper-case hex digits. */
static void mangle(const char *s, char *out, size_t cap)
{
    size_t k = 0;
    for (; *s != '\0' && k + 4 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if ((isalnum(c) || c == '_') && c != 'Z') {
            out[k++] = (char)c;
        } else {
            k += (size_t)snprintf(out + k, cap - k, "Z%02X", c);
        }
    }
    out[k] = '\0';
}

/* The field of Z_m_instance_t that holds the memory, from m.h ("" when the
 * module has none). */
static bool memory_field(const char *header, char *field, size_t cap,
                         char **err)
{
    field[0] = '\0';
    FILE *f = fopen(header, "r");
    if (f == NULL) {
        return rig_err(err, "compile: wasm2c wrote no %s", header);
    }
    char line[512];
    bool in = false;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, "typedef struct Z_m_instance_t {") != NULL) {
            in = true;
        } else if (in && strstr(line, "} Z_m_instance_t;") != NULL) {
            break;
        } else if (in) {
            char name[256];
            if (sscanf(line, " wasm_rt_memory_t %255[A-Za-z0-9_];", name) ==
                1) {
                snprintf(field, cap, "%s", name);
                break;
            }
        }
    }
    fclose(f);
    return true;
}

static const char glue_head[] =
    "/* rig's glue for one wasm2c module: generated, do not edit. */\n"
    "#include <stdarg.h>\n"
    "#include <stddef.h>\n"
    "#include \"m.h\"\n"
    "_Static_assert(sizeof(wasm_rt_memory_t) == 24 &&\n"
    "    offsetof(wasm_rt_memory_t, pages) == 8 &&\n"
    "    offsetof(wasm_rt_memory_t, size) == 16 &&\n"
    "    offsetof(wasm_rt_funcref_table_t, max_size) == 8 &&\n"
    "    offsetof(wasm_rt_funcref_table_t, size) == 12 &&\n"
    "    offsetof(wasm_rt_externref_table_t, size) == 12,\n"
    "    \"wasm-rt.h lays out memories and tables as rig expects\");\n"
    "typedef struct {\n"
    "  uint32_t abi, size;\n"
    "  void (*trap)(uint32_t);\n"
    "  uint32_t (*register_func_type)(uint32_t, uint32_t, const uint32_t *);\n"
    "  void (*memory_allocate)(void *, uint32_t, uint32_t);\n"
    "  uint32_t (*memory_grow)(void *, uint32_t);\n"
    "  void (*memory_free)(void *);\n"
    "  void (*table_allocate)(void *, size_t, uint32_t, uint32_t);\n"
    "  uint32_t (*table_grow)(void *, size_t, uint32_t, const void *);\n"
    "  void (*table_free)(void *);\n"
    "  void (*online)(void *);\n"
    "  uint32_t (*slot)(void *);\n"
    "  uint32_t (*node)(void *);\n"
    "  uint32_t (*nodes)(void *);\n"
    "  uint32_t (*halted)(void *);\n"
    "  uint32_t (*point)(void *, uint32_t, uint64_t);\n"
    "  void (*fail)(void *, uint32_t);\n"
    "  uint64_t (*scratch_size)(void *);\n"
    "  void (*scratch_read)(void *, uint32_t, uint64_t, uint32_t);\n"
    "  void (*scratch_write)(void *, uint64_t, uint32_t, uint32_t);\n"
    "  uint32_t (*end_bound)(void *, uint32_t);\n"
    "  uint64_t (*end_id)(void *, uint32_t);\n"
    "  uint32_t (*end_peer)(void *, uint32_t);\n"
    "  uint32_t (*end_here)(void *, uint32_t);\n"
    "  uint64_t (*end_bytes)(void *, uint32_t, uint32_t);\n"
    "  void (*end_write)(void *, uint32_t, uint32_t, uint64_t, uint32_t, "
    "uint32_t);\n"
    "  void (*end_read)(void *, uint32_t, uint32_t, uint64_t, uint32_t, "
    "uint32_t);\n"
    "  void (*end_ready)(void *, uint32_t, uint64_t);\n"
    "  uint32_t (*end_wait_arrived)(void *, uint32_t, uint64_t);\n"
    "  uint32_t (*end_wait_sent)(void *, uint32_t, uint64_t);\n"
    "  uint64_t (*end_arrived)(void *, uint32_t);\n"
    "  uint64_t (*end_sent)(void *, uint32_t);\n"
    "  uint32_t (*end_find)(void *, uint64_t);\n"
    "} host_t;\n"
    "typedef struct {\n"
    "  uint32_t abi, host_size, memory_size;\n"
    "  size_t instance_size;\n"
    "  void (*init_module)(void);\n"
    "  void (*instantiate)(void *, void *);\n"
    "  void (*entry)(void *);\n"
    "  void *(*memory)(void *);\n"
    "  void (*free)(void *);\n"
    "} module_t;\n"
    "static const host_t *H;\n"
    "void wasm_rt_trap(wasm_rt_trap_t c) {\n"
    "  H->trap((uint32_t)c);\n"
    "  __builtin_unreachable();\n"
    "}\n"
    "uint32_t wasm_rt_register_func_type(uint32_t p, uint32_t r, ...) {\n"
    "  uint32_t t[p + r + 1];\n"
    "  va_list ap;\n"
    "  va_start(ap, r);\n"
    "  for (uint32_t i = 0; i < p + r; i++) t[i] = (uint32_t)va_arg(ap, "
    "int);\n"
    "  va_end(ap);\n"
    "  return H->register_func_type(p, r, t);\n"
    "}\n"
    "void wasm_rt_init(void) {}\n"
    "bool wasm_rt_is_initialized(void) { return H != 0; }\n"
    "void wasm_rt_free(void) {}\n"
    "const char *wasm_rt_strerror(wasm_rt_trap_t t) { (void)t; return "
    "\"trap\"; }\n"
    "void wasm_rt_allocate_memory(wasm_rt_memory_t *m, uint32_t p, "
    "uint32_t x) {\n"
    "  H->memory_allocate(m, p, x);\n"
    "}\n"
    "uint32_t wasm_rt_grow_memory(wasm_rt_memory_t *m, uint32_t d) {\n"
    "  return H->memory_grow(m, d);\n"
    "}\n"
    "void wasm_rt_free_memory(wasm_rt_memory_t *m) { H->memory_free(m); }\n"
    "#define TABLE(T) \\\n"
    "  void wasm_rt_allocate_##T##_table(wasm_rt_##T##_table_t *t, \\\n"
    "      uint32_t n, uint32_t x) { \\\n"
    "    H->table_allocate(t, sizeof(wasm_rt_##T##_t), n, x); } \\\n"
    "  void wasm_rt_free_##T##_table(wasm_rt_##T##_table_t *t) { \\\n"
    "    H->table_free(t); } \\\n"
    "  uint32_t wasm_rt_grow_##T##_table(wasm_rt_##T##_table_t *t, \\\n"
    "      uint32_t d, wasm_rt_##T##_t init) { \\\n"
    "    return H->table_grow(t, sizeof(init), d, &init); }\n"
    "TABLE(funcref)\n"
    "TABLE(externref)\n"
    "struct Z_mesh_instance_t;\n"
    "typedef struct Z_mesh_instance_t C;\n"
    "void Z_meshZ_online(C *c) { H->online(c); }\n"
    "u32 Z_meshZ_slot(C *c) { return H->slot(c); }\n"
    "u32 Z_meshZ_node(C *c) { return H->node(c); }\n"
    "u32 Z_meshZ_nodes(C *c) { return H->nodes(c); }\n"
    "u32 Z_meshZ_halted(C *c) { return H->halted(c); }\n"
    "u32 Z_meshZ_point(C *c, u32 i, u64 v) { return H->point(c, i, v); }\n"
    "void Z_meshZ_fail(C *c, u32 code) { H->fail(c, code); }\n"
    "u64 Z_meshZ_scratch_size(C *c) { return H->scratch_size(c); }\n"
    "void Z_meshZ_scratch_read(C *c, u32 d, u64 o, u32 n) {\n"
    "  H->scratch_read(c, d, o, n);\n"
    "}\n"
    "void Z_meshZ_scratch_write(C *c, u64 o, u32 s, u32 n) {\n"
    "  H->scratch_write(c, o, s, n);\n"
    "}\n"
    "u32 Z_meshZ_end_bound(C *c, u32 i) { return H->end_bound(c, i); }\n"
    "u64 Z_meshZ_end_id(C *c, u32 i) { return H->end_id(c, i); }\n"
    "u32 Z_meshZ_end_peer(C *c, u32 i) { return H->end_peer(c, i); }\n"
    "u32 Z_meshZ_end_here(C *c, u32 i) { return H->end_here(c, i); }\n"
    "u64 Z_meshZ_end_bytes(C *c, u32 i, u32 d) {\n"
    "  return H->end_bytes(c, i, d);\n"
    "}\n"
    "void Z_meshZ_end_write(C *c, u32 i, u32 k, u64 o, u32 s, u32 n) {\n"
    "  H->end_write(c, i, k, o, s, n);\n"
    "}\n"
    "void Z_meshZ_end_read(C *c, u32 i, u32 k, u64 o, u32 d, u32 n) {\n"
    "  H->end_read(c, i, k, o, d, n);\n"
    "}\n"
    "void Z_meshZ_end_ready(C *c, u32 i, u64 n) { H->end_ready(c, i, n); }\n"
    "u32 Z_meshZ_end_wait_arrived(C *c, u32 i, u64 n) {\n"
    "  return H->end_wait_arrived(c, i, n);\n"
    "}\n"
    "u32 Z_meshZ_end_wait_sent(C *c, u32 i, u64 n) {\n"
    "  return H->end_wait_sent(c, i, n);\n"
    "}\n"
    "u64 Z_meshZ_end_arrived(C *c, u32 i) { return H->end_arrived(c, i); }\n"
    "u64 Z_meshZ_end_sent(C *c, u32 i) { return H->end_sent(c, i); }\n"
    "u32 Z_meshZ_end_find(C *c, u64 id) { return H->end_find(c, id); }\n"
    "static void m_free(void *i) { Z_m_free((Z_m_instance_t *)i); }\n";

/* Writes the glue for a module with (or without) mesh imports, entry
 * mangled and memory field mem (""). */
static bool write_glue(const char *path, bool imports, const char *entry,
                       const char *mem, char **err)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        return rig_err(err, "system: cannot write %s: %s", path,
                       strerror(errno));
    }
    fputs(glue_head, f);
    fprintf(f,
            "static void m_instantiate(void *i, void *c) {\n"
            "  (void)c;\n"
            "  Z_m_instantiate((Z_m_instance_t *)i%s);\n"
            "}\n",
            imports ? ", (C *)c" : "");
    fprintf(f,
            "static void m_entry(void *i) { Z_mZ_%s((Z_m_instance_t *)i); "
            "}\n",
            entry);
    if (mem[0] != '\0') {
        fprintf(f,
                "static void *m_memory(void *i) {\n"
                "  return &((Z_m_instance_t *)i)->%s;\n"
                "}\n",
                mem);
    } else {
        fputs("static void *m_memory(void *i) { (void)i; return 0; }\n", f);
    }
    fprintf(f,
            "static const module_t M = {%uu, sizeof(host_t),\n"
            "  sizeof(wasm_rt_memory_t), sizeof(Z_m_instance_t),\n"
            "  Z_m_init_module, m_instantiate, m_entry, m_memory, m_free};\n"
            "__attribute__((visibility(\"default\")))\n"
            "const module_t *%s(const host_t *h) {\n"
            "  if (h->abi != %uu || h->size != sizeof(host_t)) return 0;\n"
            "  H = h;\n"
            "  return &M;\n"
            "}\n",
            MESH_WASM_GLUE_ABI, MESH_WASM_MODULE_SYM, MESH_WASM_GLUE_ABI);
    bool ok = !ferror(f);
    if (fclose(f) != 0 || !ok) {
        return rig_err(err, "system: writing %s failed", path);
    }
    return true;
}

/* ---- compile and load ------------------------------------------------- */

static bool write_file(const char *path, const uint8_t *data, size_t len,
                       char **err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        return rig_err(err, "system: cannot write %s: %s", path,
                       strerror(errno));
    }
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            int e = errno;
            close(fd);
            return rig_err(err, "system: writing %s failed: %s", path,
                           strerror(e));
        }
        off += (size_t)n;
    }
    close(fd);
    return true;
}

/* Removes the work directory and what the tools left in it. */
static void remove_work(const char *dir)
{
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
                unlinkat(dirfd(d), e->d_name, 0);
            }
        }
        closedir(d);
    }
    rmdir(dir);
}

static bool compile(const mesh_wasm_tools *t, const mesh_wasm_info *info,
                    const mesh_manifest *m, const mesh_payload_file *wasm,
                    const char *target, char **err)
{
    char work[3072], path[4096], out_c[4096], out_so[4096], glue[4096],
        log[4096], inc_rt[4200], inc_w[4200];
    snprintf(work, sizeof(work), "%s/work.XXXXXX", t->cache);
    if (mkdtemp(work) == NULL) {
        return rig_err(err, "system: mkdtemp in %s failed: %s", t->cache,
                       strerror(errno));
    }
    snprintf(path, sizeof(path), "%s/m.wasm", work);
    snprintf(out_c, sizeof(out_c), "%s/m.c", work);
    snprintf(out_so, sizeof(out_so), "%s/m.so", work);
    snprintf(glue, sizeof(glue), "%s/glue.c", work);
    snprintf(log, sizeof(log), "%s/log", work);
    snprintf(inc_rt, sizeof(inc_rt), "-I%s", t->rt_dir);
    snprintf(inc_w, sizeof(inc_w), "-I%s", work);
    bool ok = write_file(path, wasm->data, wasm->len, err);
    if (ok) {
        char *argv[] = {t->wasm2c, path, "-o", out_c, "-n", "m", NULL};
        atomic_fetch_add(&compiles, 1);
        ok = run_tool(argv, work, log, t->timeout_ms, err);
    }
    if (ok) {
        char mem[256], entry[512], header[4096];
        snprintf(header, sizeof(header), "%s/m.h", work);
        mangle(m->entry, entry, sizeof(entry));
        ok = memory_field(header, mem, sizeof(mem), err) &&
             write_glue(glue, info->imports_mesh, entry, mem, err);
    }
    if (ok) {
        char *argv[] = {t->cc,     "-std=gnu11",
                        "-O2",     "-fPIC",
                        "-shared", "-fvisibility=hidden",
                        "-w",      "-DWASM_RT_MEMCHECK_SIGNAL_HANDLER=1",
                        inc_rt,    inc_w,
                        "-o",      out_so,
                        glue,      out_c,
                        "-lm",     "-Wl,-z,defs",
                        NULL};
        ok = run_tool(argv, work, log, t->timeout_ms, err);
    }
    if (ok && rename(out_so, target) != 0) {
        ok = rig_err(err, "system: rename to %s failed: %s", target,
                     strerror(errno));
    }
    remove_work(work);
    if (!ok) {
        rig_err_wrap(err, "program %s", m->name);
    }
    return ok;
}

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

static bool load_so(const char *so, mesh_wasm_image *img, char **err)
{
    img->dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (img->dl == NULL) {
        const char *e = dlerror();
        return rig_err(err, "compile: dlopen %s failed: %s", so, e ? e : "?");
    }
    mesh_wasm_module_fn fn =
        (mesh_wasm_module_fn)dlsym(img->dl, MESH_WASM_MODULE_SYM);
    const mesh_wasm_host *h = mesh_wasm_glue_host();
    pthread_mutex_lock(&init_lock);
    const mesh_wasm_module *mod = fn != NULL ? fn(h) : NULL;
    if (mod != NULL && mod->abi == MESH_WASM_GLUE_ABI &&
        mod->host_size == sizeof(mesh_wasm_host) &&
        mod->memory_size == sizeof(mesh_wasm_memory) &&
        mesh_wasm_glue_code_range((const void *)(uintptr_t)mod->entry,
                                  &img->code_lo, &img->code_hi)) {
        mod->init_module();
        img->mod = mod;
    }
    pthread_mutex_unlock(&init_lock);
    if (img->mod == NULL) {
        dlclose(img->dl);
        img->dl = NULL;
        return rig_err(err,
                       "compile: %s is not a module of rig's glue ABI "
                       "%u",
                       so, MESH_WASM_GLUE_ABI);
    }
    return true;
}

void mesh_wasm_image_free(mesh_wasm_image *img, bool keep_code)
{
    if (img == NULL) {
        return;
    }
    if (img->dl != NULL && !keep_code) {
        dlclose(img->dl);
    }
    free(img->name);
    free(img);
}

bool mesh_wasm_prepare(const mesh_wasm_tools *t, mesh_payload *src,
                       const uint64_t *expect, mesh_prepared *out,
                       mesh_wasm_image **img, char **err)
{
    if (t == NULL || src == NULL || out == NULL || img == NULL) {
        mesh_payload_free(src);
        return rig_err(err, "invalid: mesh_wasm_prepare: NULL argument");
    }
    uint64_t t0 = rig_now_ns();
    mesh_manifest m;
    if (!mesh_check_manifest(src, MESH_BACKEND_WASM, &m, err)) {
        mesh_payload_free(src);
        return false;
    }
    mesh_wasm_image *im = NULL;
    uint64_t hash = mesh_payload_hash(src);
    const mesh_payload_file *wasm = mesh_payload_find(src, m.wasm);
    mesh_wasm_info info;
    char so[4096];
    if (expect != NULL && *expect != hash) {
        rig_err(err,
                "hash: program %s hashes to %016llx, not the expected "
                "%016llx",
                m.name, (unsigned long long)hash, (unsigned long long)*expect);
        goto err_free;
    }
    if (wasm == NULL) {
        rig_err(err, "missing: program %s has no module %s", m.name, m.wasm);
        goto err_free;
    }
    if (m.threads > 1) {
        rig_err(err,
                "limits: program %s asks for %u threads per node; the "
                "wasm backend runs one",
                m.name, m.threads);
        goto err_free;
    }
    if (!mesh_wasm_inspect(wasm->data, wasm->len, m.entry, &info, err)) {
        rig_err_wrap(err, "program %s", m.name);
        goto err_free;
    }
    im = calloc(1, sizeof(*im));
    if (im == NULL || (im->name = strdup(m.name)) == NULL) {
        rig_err(err, "nomem: a wasm image");
        goto err_free;
    }
    im->scratch_bytes = m.scratch;
    im->threads = 1;
    snprintf(so, sizeof(so), "%s/%016llx-%s-g%u.so", t->cache,
             (unsigned long long)hash, t->version, MESH_WASM_GLUE_ABI);
    if (access(so, R_OK) != 0) {
        if (!compile(t, &info, &m, wasm, so, err)) {
            goto err_free;
        }
        if (!load_so(so, im, err)) {
            goto err_free;
        }
    } else if (!load_so(so, im, NULL)) {
        /* A cached object that does not load (truncated, another glue):
         * build it afresh once. */
        unlink(so);
        if (!compile(t, &info, &m, wasm, so, err) || !load_so(so, im, err)) {
            goto err_free;
        }
    }
    memset(out, 0, sizeof(*out));
    out->manifest = m;
    out->hash = hash;
    out->compile_ms = (double)(rig_now_ns() - t0) / 1e6;
    out->src = *src;
    memset(src, 0, sizeof(*src));
    out->exec = MESH_BACKEND_WASM;
    *img = im;
    return true;
err_free:
    mesh_wasm_image_free(im, false);
    mesh_manifest_free(&m);
    mesh_payload_free(src);
    return false;
}
