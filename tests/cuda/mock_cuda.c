/* SPDX-License-Identifier: BSD-3-Clause */
/* A stand-in libcuda.so.1 that runs the test kernels on host threads.
 *
 * Only for the tests against the stand-in driver (tests/cuda/mock_env.sh
 * puts it first on LD_LIBRARY_PATH): it lets the backend's host side run
 * end to end on a machine without a GPU.  It is no model of a GPU:
 * "kernels" are C emulations of examples/cuda/counter and pattern and of
 * tests/cuda/data/fault, one thread per launch that plays every node, and
 * device memory is host memory.  What it cannot tell (the PTX's behaviour,
 * mapped-memory coherence, real timing) is left to
 * mpi_tests/gpu/device-check.sh on hardware.
 *
 * It does play the documented behaviours a backend must be written
 * against, each from CUDA 13's cuda.h or NVIDIA's documentation:
 * - a context current per thread, a stack of them (cuCtxPushCurrent /
 *   cuCtxPopCurrent / cuCtxSetCurrent), and calls that need one failing
 *   with CUDA_ERROR_INVALID_CONTEXT without it;
 * - cuMemFree "may perform implicit synchronization" (cuda.h): here it
 *   always waits until every launch of the context has ended;
 * - CUDA_DEVICE_MAX_CONNECTIONS hardware queues per context (1 to 32,
 *   default 8: the CUDA programming guide's environment variables), given
 *   to streams in the order they are made; a launch waits behind every
 *   earlier launch of another stream on its queue that still runs (the
 *   false dependency green contexts' notes in cuda.h warn of);
 * - blocks placed on SMs one at a time, each on the next SM (round robin)
 *   with room for its threads, shared memory (the driver's 1 KiB reserve
 *   included) and a block slot; a block without room waits for one;
 * - a kernel fault (the "fault" kernel) is sticky: every launch of the
 *   context ends and every later call returns CUDA_ERROR_ILLEGAL_ADDRESS
 *   ("the process must be terminated and relaunched", cuda.h); under MPS
 *   (CUDA_MPS_PIPE_DIRECTORY set) it reaches every client of the server,
 *   and the server refuses new clients (CUDA_ERROR_MPS_SERVER_NOT_READY)
 *   until those clients have exited (MPS documentation, error
 *   containment);
 * - cuMemHostRegister refuses a range that overlaps a registered one
 *   (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED), cuMemHostUnregister one
 *   that is not registered (..._NOT_REGISTERED);
 * - dynamic shared memory past a function's
 *   CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (48 KiB less its
 *   static shared memory until cuFuncSetAttribute raises it, at most the
 *   opt-in limit less the static) fails the launch;
 * - green contexts: splits rounded up to the SM partition granularity,
 *   fewer groups than asked when they do not fit, CU_GREEN_CTX_DEFAULT_STREAM
 *   required, and streams that outlive cuGreenCtxDestroy leak (cuda.h);
 * - compute modes (Prohibited: no context; Exclusive-Process: one process's
 *   context, which under MPS is the server's) and CUDA_VISIBLE_DEVICES,
 *   which the MPS server applies itself, so that a client that carries it
 *   too sees the server's devices renumbered (MPS documentation).
 *
 * What the backend does against these rules that a real driver would
 * answer with a hang or undefined behaviour is recorded as a violation:
 * printed on stderr, and counted by mock_cuda_violations(), which the tests
 * read through dlsym.
 *
 * Knobs (environment): MOCK_CUDA_DEVICES (1), MOCK_CUDA_DRIVER_VERSION
 * (CUDA_VERSION), MOCK_CUDA_COMPUTE_MODE (0), MOCK_CUDA_WATCHDOG (0),
 * MOCK_CUDA_SM_ALIGN (2, the green split granularity), MOCK_CUDA_STATE (a
 * folder for what processes share: the exclusive owner). */
#include <cuda.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MOCK_EXPORT __attribute__((visibility("default")))
#define MOCK_TOTAL (16ull << 30)
#define MOCK_SMS 4u
#define MOCK_SM_THREADS 2048u
#define MOCK_SM_BLOCKS 32u
#define MOCK_SM_SHARED 233472u
#define MOCK_RESERVED 1024u
#define MOCK_OPTIN 232448u
#define MOCK_STATIC_LIMIT 49152u
#define MOCK_MAX_DEVICES 8
#define MOCK_FAULT_MS 200

/* ---- violations --------------------------------------------------------- */

static pthread_mutex_t vlock = PTHREAD_MUTEX_INITIALIZER;
static char vtext[4096];
static int vcount;

static void violation(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "mock_cuda: VIOLATION: %s\n", line);
    pthread_mutex_lock(&vlock);
    vcount++;
    size_t used = strlen(vtext);
    snprintf(vtext + used, sizeof(vtext) - used, "%s\n", line);
    pthread_mutex_unlock(&vlock);
}

/* How many violations there were; their text (one per line) in buf. */
MOCK_EXPORT int mock_cuda_violations(char *buf, size_t len)
{
    pthread_mutex_lock(&vlock);
    int n = vcount;
    if (buf != NULL && len > 0) {
        snprintf(buf, len, "%s", vtext);
    }
    pthread_mutex_unlock(&vlock);
    return n;
}

static void nap_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static unsigned env_u(const char *name, unsigned dflt)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0') {
        return dflt;
    }
    return (unsigned)strtoul(v, NULL, 10);
}

/* ---- the machine -------------------------------------------------------- */

/* Everything below is guarded by lock; launches ending signal ended. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ended = PTHREAD_COND_INITIALIZER;

static bool inited;
static int visible[MOCK_MAX_DEVICES]; /* ordinal -> physical device */
static int nvisible;
static char mps_pipe[4096]; /* "": not an MPS client */

struct CUctx_st {
    bool green;
    bool destroyed;
    unsigned sm_first, sm_count; /* where its blocks run */
    unsigned conns;              /* hardware queues */
    unsigned streams_made;       /* a stream's queue: made % conns */
    unsigned streams_live;
    _Atomic int sticky; /* a CUresult; 0: none */
};
struct CUgreenCtx_st {
    struct CUctx_st ctx;
    struct CUgreenCtx_st *next; /* every one made: streams may outlive it */
};
struct CUdevResourceDesc_st {
    unsigned sms;
    struct CUdevResourceDesc_st *next; /* every one made: no call frees it */
};
static struct CUgreenCtx_st *greens;
static struct CUdevResourceDesc_st *descs;

static struct CUctx_st primary;
static int primary_refs;
static int primary_phys;

struct CUfunc_st {
    char name[64];
    int kind; /* 0 counter, 1 pattern, 2 fault, 3 rails, 4 rails_once */
    unsigned static_shared;
    unsigned max_dyn;
    struct CUmod_st *mod;
    struct CUfunc_st *next;
};
struct CUmod_st {
    uint32_t abi;
    struct CUfunc_st *funcs;
};

typedef struct {
    unsigned char *mb;
    unsigned slot, nodes, threads, shared;
    void *scratch;
    struct CUfunc_st *fn;
} launch_args;

struct CUstream_st {
    struct CUctx_st *ctx;
    unsigned conn;
    pthread_t thread;
    bool started;
    bool orphan;      /* destroyed while running: the thread frees it */
    atomic_bool done; /* no launch runs */
    uint64_t gen;     /* launches started */
    uint64_t seq;     /* the running launch's place in launch order */
    unsigned per_sm[MOCK_SMS];
    launch_args a;
    struct CUstream_st *next;
};
struct CUevent_st {
    struct CUstream_st *stream;
    uint64_t gen;
};

static struct CUstream_st *streams; /* every live stream */
static uint64_t launches;           /* launch order */
static unsigned sm_threads[MOCK_SMS], sm_blocks[MOCK_SMS], sm_shared[MOCK_SMS];
static unsigned sm_cursor;
static atomic_ullong allocated;
static size_t stack_limit = 1024;

typedef struct hostreg {
    uintptr_t p;
    size_t n;
    struct hostreg *next;
} hostreg;
static hostreg *hostregs;

/* The calling thread's context stack. */
static __thread CUcontext tls_ctx[16];
static __thread int tls_n;

static CUcontext current(void)
{
    return tls_n > 0 ? tls_ctx[tls_n - 1] : NULL;
}

/* ---- MPS: what the clients of one server share (files in its pipe) ---- */

static void pipe_file(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", mps_pipe, name);
}

static bool pid_alive(pid_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH);
}

/* A fault another client of the server raised (0: none).  The file is
 * read at most every 5 ms: kernels' loops ask often. */
static _Atomic uint64_t mps_checked;
static _Atomic int mps_seen;

static int mps_fault(void)
{
    if (mps_pipe[0] == '\0') {
        return 0;
    }
    uint64_t now = now_ms();
    if (atomic_load(&mps_seen) != 0 || now - atomic_load(&mps_checked) < 5) {
        return atomic_load(&mps_seen);
    }
    atomic_store(&mps_checked, now);
    char f[4200];
    pipe_file(f, sizeof(f), "mock-fault");
    FILE *in = fopen(f, "r");
    if (in == NULL) {
        return 0;
    }
    int code = 0;
    if (fscanf(in, "%d", &code) != 1) {
        code = CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    fclose(in);
    atomic_store(&mps_seen, code);
    return code;
}

/* The sticky error of c (0: none), a fault of the MPS server included. */
static CUresult sticky(struct CUctx_st *c)
{
    if (c == NULL) {
        return CUDA_SUCCESS;
    }
    int s = atomic_load(&c->sticky);
    if (s == 0) {
        s = mps_fault();
        if (s != 0) {
            atomic_store(&c->sticky, s);
        }
    }
    return (CUresult)s;
}

static void raise_fault(struct CUctx_st *c, CUresult r)
{
    atomic_store(&c->sticky, (int)r);
    if (mps_pipe[0] != '\0') {
        char f[4200];
        pipe_file(f, sizeof(f), "mock-fault");
        FILE *out = fopen(f, "w");
        if (out != NULL) {
            fprintf(out, "%d\n", (int)r);
            fclose(out);
        }
    }
}

/* A new client of the server: refused while a fault's clients live. */
static CUresult mps_join(void)
{
    char f[4400];
    if (mps_fault() != 0) {
        bool alive = false;
        DIR *d = opendir(mps_pipe);
        struct dirent *e;
        while (d != NULL && (e = readdir(d)) != NULL) {
            int pid = 0;
            if (sscanf(e->d_name, "mock-client.%d", &pid) != 1) {
                continue;
            }
            if (pid_alive(pid)) {
                alive = true;
            } else {
                snprintf(f, sizeof(f), "%s/%s", mps_pipe, e->d_name);
                unlink(f);
            }
        }
        if (d != NULL) {
            closedir(d);
        }
        if (alive) {
            return CUDA_ERROR_MPS_SERVER_NOT_READY;
        }
        pipe_file(f, sizeof(f), "mock-fault");
        unlink(f); /* the server recovers */
        atomic_store(&mps_seen, 0);
    }
    snprintf(f, sizeof(f), "%s/mock-client.%d", mps_pipe, (int)getpid());
    FILE *out = fopen(f, "w");
    if (out != NULL) {
        fprintf(out, "%d\n", primary_phys);
        fclose(out);
    }
    return CUDA_SUCCESS;
}

/* ---- compute modes ------------------------------------------------------ */

/* Takes the device for this process (Exclusive-Process): the state
 * folder's "exclusive" names the owner: "pid <n>" or, for MPS clients, the
 * server "mps <pipe>". */
static CUresult exclusive_take(void)
{
    const char *dir = getenv("MOCK_CUDA_STATE");
    if (env_u("MOCK_CUDA_COMPUTE_MODE", 0) !=
            CU_COMPUTEMODE_EXCLUSIVE_PROCESS ||
        dir == NULL) {
        return CUDA_SUCCESS;
    }
    char f[4200], me[4200], owner[4200] = "";
    snprintf(f, sizeof(f), "%s/exclusive", dir);
    if (mps_pipe[0] != '\0') {
        snprintf(me, sizeof(me), "mps %s", mps_pipe);
    } else {
        snprintf(me, sizeof(me), "pid %d", (int)getpid());
    }
    FILE *in = fopen(f, "r");
    if (in != NULL) {
        if (fgets(owner, sizeof(owner), in) == NULL) {
            owner[0] = '\0';
        }
        fclose(in);
        owner[strcspn(owner, "\n")] = '\0';
    }
    int pid = 0;
    bool taken = strcmp(owner, me) != 0 &&
                 ((sscanf(owner, "pid %d", &pid) == 1 && pid_alive(pid)) ||
                  strncmp(owner, "mps ", 4) == 0);
    if (taken) {
        /* An MPS server that cannot make its context never comes up:
         * its clients fail to connect. */
        return mps_pipe[0] != '\0' ? CUDA_ERROR_MPS_CONNECTION_FAILED
                                   : CUDA_ERROR_DEVICE_UNAVAILABLE;
    }
    FILE *out = fopen(f, "w");
    if (out != NULL) {
        fprintf(out, "%s\n", me);
        fclose(out);
    }
    return CUDA_SUCCESS;
}

static void exclusive_give(void)
{
    const char *dir = getenv("MOCK_CUDA_STATE");
    if (dir == NULL || mps_pipe[0] != '\0') {
        return; /* the server's stays until its daemon quits */
    }
    char f[4200], owner[64] = "", me[64];
    snprintf(f, sizeof(f), "%s/exclusive", dir);
    snprintf(me, sizeof(me), "pid %d\n", (int)getpid());
    FILE *in = fopen(f, "r");
    if (in != NULL) {
        if (fgets(owner, sizeof(owner), in) != NULL && strcmp(owner, me) == 0) {
            unlink(f);
        }
        fclose(in);
    }
}

/* ---- kernels ------------------------------------------------------------ */

#define SLOT(mb, s, off) ((mb) + 256u + (s)*256u + (off))

static unsigned block_shared(const launch_args *a)
{
    return a->shared + a->fn->static_shared + MOCK_RESERVED;
}

static unsigned block_threads(const launch_args *a)
{
    return (a->threads + 31u) / 32u * 32u;
}

/* Places one block of s on the next SM with room; false: none has. */
static bool place_one(struct CUstream_st *s)
{
    const launch_args *a = &s->a;
    struct CUctx_st *c = s->ctx;
    unsigned th = block_threads(a), sh = block_shared(a);
    for (unsigned k = 0; k < c->sm_count; k++) {
        unsigned sm = c->sm_first + (sm_cursor + k) % c->sm_count;
        if (sm_threads[sm] + th <= MOCK_SM_THREADS &&
            sm_blocks[sm] + 1 <= MOCK_SM_BLOCKS &&
            sm_shared[sm] + sh <= MOCK_SM_SHARED) {
            sm_threads[sm] += th;
            sm_blocks[sm] += 1;
            sm_shared[sm] += sh;
            s->per_sm[sm]++;
            sm_cursor = (sm - c->sm_first + 1) % c->sm_count;
            return true;
        }
    }
    return false;
}

static void unplace(struct CUstream_st *s)
{
    const launch_args *a = &s->a;
    unsigned th = block_threads(a), sh = block_shared(a);
    for (unsigned sm = 0; sm < MOCK_SMS; sm++) {
        sm_threads[sm] -= th * s->per_sm[sm];
        sm_blocks[sm] -= s->per_sm[sm];
        sm_shared[sm] -= sh * s->per_sm[sm];
        s->per_sm[sm] = 0;
    }
}

/* An earlier launch of another stream on s's hardware queue still runs. */
static bool queue_blocked(const struct CUstream_st *s)
{
    for (const struct CUstream_st *t = streams; t != NULL; t = t->next) {
        if (t != s && t->ctx == s->ctx && t->conn == s->conn &&
            !atomic_load(&t->done) && t->seq < s->seq) {
            return true;
        }
    }
    return false;
}

/* examples/cuda/rails: the value node 0 sends with count c. */
static uint64_t rails_value(uint64_t c)
{
    return c * 2654435761ull + 7ull;
}

/* examples/cuda/rails/rails.cu's kernels: rails ping-pongs 8 bytes over
 * input 0's end until halted (point 0 the round trips, 1 the wrong
 * answers, 2 set when the rail failed); rails_once writes one value
 * (counting in scratch) and ends.  The entry is found at PX_ENDS (slot
 * byte 56) as the device would find it; device addresses are host ones. */
static void rails_kernel(launch_args *a, _Atomic uint32_t *halt,
                         _Atomic uint64_t *point, bool once)
{
    uint8_t *table = (uint8_t *)(uintptr_t)atomic_load(
        (_Atomic uint64_t *)SLOT(a->mb, a->slot, 56u));
    if (table == NULL) {
        return;
    }
    uint8_t *e = table + 128;
    if (*(uint32_t *)(e + 16) == 0) {
        return;
    }
    uint64_t out_copy = *(uint64_t *)(e + 56), in_copy = *(uint64_t *)(e + 64);
    uint8_t *counts = (uint8_t *)(uintptr_t) * (uint64_t *)(e + 136);
    uint8_t *out = (uint8_t *)(uintptr_t) * (uint64_t *)(e + 144);
    const uint8_t *in = (const uint8_t *)(uintptr_t) * (uint64_t *)(e + 152);
    _Atomic uint64_t *epoint = (_Atomic uint64_t *)(e + 224);
    _Atomic uint64_t *arrived = (_Atomic uint64_t *)(counts + 256);
    if (once) {
        uint64_t *count = a->scratch;
        uint64_t c = ++count[0];
        /* The device's store, made visible (a release store: the same
         * order __threadfence_system gives the real kernel). */
        atomic_store_explicit(
            (_Atomic uint64_t *)(void *)(out + ((c - 1) % 2) * out_copy),
            rails_value(c), memory_order_release);
        return;
    }
    uint64_t base = atomic_load(epoint), trips = 0, bad = 0;
    _Atomic uint64_t *bad_point = point + 1, *failed_point = point + 2;
    while (atomic_load(halt) == 0) {
        uint64_t c = base + trips + 1, k = (c - 1) % 2;
        uint64_t v = rails_value(c);
        memcpy(out + k * out_copy, &v, 8);
        uint64_t old = atomic_load(epoint);
        while (old < c && !atomic_compare_exchange_weak(epoint, &old, c)) {
        }
        uint64_t got;
        while ((got = atomic_load(arrived)) < c && atomic_load(halt) == 0) {
        }
        if (got == (uint64_t)INT64_MAX) {
            atomic_store(failed_point, 1);
            break;
        }
        if (got < c) {
            break;
        }
        uint64_t back;
        memcpy(&back, in + k * in_copy, 8);
        bad += back != ~v;
        trips++;
        atomic_store(point, trips);
        if (bad != 0) {
            atomic_store(bad_point, bad);
        }
    }
    while (atomic_load(halt) == 0) {
        nap_us(20);
    }
}

static void *run_kernel(void *p)
{
    struct CUstream_st *s = p;
    launch_args *a = &s->a;
    _Atomic uint32_t *online = (void *)SLOT(a->mb, a->slot, 64u);
    _Atomic uint32_t *exited = (void *)SLOT(a->mb, a->slot, 68u);
    _Atomic uint32_t *halt = (void *)SLOT(a->mb, a->slot, 4u);
    _Atomic uint64_t *point = (void *)SLOT(a->mb, a->slot, 128u);
    unsigned placed = 0;
    bool faulted = false;
    /* Behind the queue, then onto the SMs, a block at a time. */
    for (;;) {
        pthread_mutex_lock(&lock);
        bool blocked = queue_blocked(s);
        unsigned now = 0;
        while (!blocked && placed + now < a->nodes && place_one(s)) {
            now++;
        }
        pthread_mutex_unlock(&lock);
        placed += now;
        atomic_fetch_add(online, now);
        if (placed == a->nodes) {
            break;
        }
        if (atomic_load(halt) != 0 || sticky(s->ctx) != 0) {
            goto out;
        }
        nap_us(1000);
    }
    uint64_t t0 = now_ms();
    if (a->fn->kind == 3 || a->fn->kind == 4) {
        rails_kernel(a, halt, point, a->fn->kind == 4);
    } else if (a->fn->kind == 1) {
        uint64_t bytes = *(uint64_t *)SLOT(a->mb, a->slot, 32u);
        uint32_t *w = a->scratch;
        for (uint64_t i = 0; i < bytes / 4; i++) {
            w[i] = (uint32_t)i * 2654435761u + 1u;
        }
        atomic_store(point, bytes / 4);
    } else {
        uint64_t *count = a->scratch;
        while (atomic_load(halt) == 0 && sticky(s->ctx) == 0) {
            if (count != NULL) {
                uint64_t c = ++count[0];
                uint64_t old = atomic_load(point);
                while (old < c &&
                       !atomic_compare_exchange_weak(point, &old, c)) {
                }
            }
            if (a->fn->kind == 2 && now_ms() - t0 >= MOCK_FAULT_MS) {
                raise_fault(s->ctx, CUDA_ERROR_ILLEGAL_ADDRESS);
                faulted = true;
                break;
            }
            nap_us(20);
        }
    }
out:
    if (sticky(s->ctx) == 0 && !faulted) {
        /* Blocks that never found room run once others leave, see the
         * halt and end. */
        atomic_fetch_add(online, a->nodes - placed);
        atomic_fetch_add(exited, a->nodes);
    }
    pthread_mutex_lock(&lock);
    unplace(s);
    atomic_store(&s->done, true);
    bool orphan = s->orphan;
    pthread_cond_broadcast(&ended);
    pthread_mutex_unlock(&lock);
    if (orphan) {
        pthread_detach(pthread_self());
        free(s);
    }
    return NULL;
}

/* Waits until every launch of c has ended (implicit synchronization). */
static void sync_ctx(struct CUctx_st *c)
{
    pthread_mutex_lock(&lock);
    for (;;) {
        bool busy = false;
        for (struct CUstream_st *t = streams; t != NULL; t = t->next) {
            busy = busy || (t->ctx == c && !atomic_load(&t->done));
        }
        if (!busy || sticky(c) != 0) {
            break;
        }
        pthread_cond_wait(&ended, &lock);
    }
    pthread_mutex_unlock(&lock);
}

#define NEED_CTX()                                                             \
    struct CUctx_st *ctx_ = current();                                         \
    if (!inited) {                                                             \
        return CUDA_ERROR_NOT_INITIALIZED;                                     \
    }                                                                          \
    if (ctx_ == NULL) {                                                        \
        return CUDA_ERROR_INVALID_CONTEXT;                                     \
    }                                                                          \
    if (sticky(ctx_) != 0) {                                                   \
        return sticky(ctx_);                                                   \
    }

/* ---- init and devices --------------------------------------------------- */

/* Applies a CUDA_VISIBLE_DEVICES value to list (n entries), in place. */
static void apply_visible(const char *v, int *list, int *n)
{
    if (v == NULL) {
        return;
    }
    int out[MOCK_MAX_DEVICES], k = 0;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", v);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t != NULL && k < *n;
         t = strtok_r(NULL, ",", &save)) {
        char *end = NULL;
        long i = strtol(t, &end, 10);
        if (end == t || i < 0 || i >= *n) {
            break; /* devices after an invalid index are not visible */
        }
        out[k++] = list[i];
    }
    memcpy(list, out, sizeof(out));
    *n = k;
}

MOCK_EXPORT CUresult CUDAAPI cuInit(unsigned int f)
{
    (void)f;
    pthread_mutex_lock(&lock);
    if (!inited) {
        int n = (int)env_u("MOCK_CUDA_DEVICES", 1);
        n = n > MOCK_MAX_DEVICES ? MOCK_MAX_DEVICES : n;
        for (int i = 0; i < n; i++) {
            visible[i] = i;
        }
        const char *pipe = getenv("CUDA_MPS_PIPE_DIRECTORY");
        char f2[4200];
        if (pipe != NULL && pipe[0] != '\0') {
            snprintf(f2, sizeof(f2), "%s/control", pipe);
        }
        if (pipe != NULL && pipe[0] != '\0' && access(f2, F_OK) == 0) {
            /* A client: the server applied its own CUDA_VISIBLE_DEVICES
             * (the fake control records it), the client's applies to what
             * the server shows. */
            snprintf(mps_pipe, sizeof(mps_pipe), "%s", pipe);
            char srv[4200], v[256] = "";
            snprintf(srv, sizeof(srv), "%s/mock-server-visible", pipe);
            FILE *in = fopen(srv, "r");
            if (in != NULL) {
                if (fgets(v, sizeof(v), in) == NULL) {
                    v[0] = '\0';
                }
                fclose(in);
                v[strcspn(v, "\n")] = '\0';
            }
            if (v[0] != '\0' && strcmp(v, "-") != 0) {
                apply_visible(v, visible, &n);
            }
        }
        apply_visible(getenv("CUDA_VISIBLE_DEVICES"), visible, &n);
        nvisible = n;
        inited = n > 0;
    }
    bool ok = inited;
    pthread_mutex_unlock(&lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}
MOCK_EXPORT CUresult CUDAAPI cuDriverGetVersion(int *v)
{
    *v = (int)env_u("MOCK_CUDA_DRIVER_VERSION", CUDA_VERSION);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuGetErrorName(CUresult e, const char **s)
{
    switch (e) {
#define MOCK_NAME(c)                                                           \
    case c:                                                                    \
        *s = #c;                                                               \
        return CUDA_SUCCESS;
        MOCK_NAME(CUDA_SUCCESS)
        MOCK_NAME(CUDA_ERROR_INVALID_VALUE)
        MOCK_NAME(CUDA_ERROR_OUT_OF_MEMORY)
        MOCK_NAME(CUDA_ERROR_NOT_INITIALIZED)
        MOCK_NAME(CUDA_ERROR_NO_DEVICE)
        MOCK_NAME(CUDA_ERROR_INVALID_DEVICE)
        MOCK_NAME(CUDA_ERROR_DEVICE_UNAVAILABLE)
        MOCK_NAME(CUDA_ERROR_INVALID_IMAGE)
        MOCK_NAME(CUDA_ERROR_INVALID_CONTEXT)
        MOCK_NAME(CUDA_ERROR_CONTEXT_IS_DESTROYED)
        MOCK_NAME(CUDA_ERROR_NOT_FOUND)
        MOCK_NAME(CUDA_ERROR_NOT_READY)
        MOCK_NAME(CUDA_ERROR_ILLEGAL_ADDRESS)
        MOCK_NAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
        MOCK_NAME(CUDA_ERROR_LAUNCH_FAILED)
        MOCK_NAME(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
        MOCK_NAME(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)
        MOCK_NAME(CUDA_ERROR_MPS_CONNECTION_FAILED)
        MOCK_NAME(CUDA_ERROR_MPS_SERVER_NOT_READY)
        MOCK_NAME(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION)
#undef MOCK_NAME
    default:
        *s = "CUDA_ERROR_MOCK";
        return CUDA_SUCCESS;
    }
}
MOCK_EXPORT CUresult CUDAAPI cuDeviceGetCount(int *n)
{
    if (!inited) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    *n = nvisible;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice *d, int o)
{
    if (!inited) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (o < 0 || o >= nvisible) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    *d = o;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuDeviceGetName(char *n, int len, CUdevice d)
{
    if (d < 0 || d >= nvisible) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    snprintf(n, (size_t)len, "Mock GPU %d", visible[d]);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int *v, CUdevice_attribute a,
                                                  CUdevice d)
{
    if (d < 0 || d >= nvisible) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        *v = 9;
        break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        *v = 0;
        break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        *v = MOCK_SMS;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
        *v = MOCK_SM_BLOCKS;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *v = 1024;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
        *v = MOCK_OPTIN;
        break;
    /* An H100's SM: what the backend's admission check estimates from. */
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
        *v = 65536;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
        *v = MOCK_SM_THREADS;
        break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
        *v = MOCK_SM_SHARED;
        break;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK:
        *v = MOCK_RESERVED;
        break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
        *v = (int)env_u("MOCK_CUDA_COMPUTE_MODE", CU_COMPUTEMODE_DEFAULT);
        break;
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT:
        *v = (int)env_u("MOCK_CUDA_WATCHDOG", 0);
        break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
        *v = 1;
        break;
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED:
        *v = 0;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuDeviceTotalMem(size_t *b, CUdevice d)
{
    (void)d;
    *b = MOCK_TOTAL;
    return CUDA_SUCCESS;
}

/* ---- contexts ----------------------------------------------------------- */

static unsigned env_conns(void)
{
    unsigned c = env_u("CUDA_DEVICE_MAX_CONNECTIONS", 8);
    return c < 1 ? 8 : (c > 32 ? 32 : c);
}

MOCK_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    if (!inited) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (d < 0 || d >= nvisible) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    pthread_mutex_lock(&lock);
    CUresult r = CUDA_SUCCESS;
    if (primary_refs == 0) {
        if (env_u("MOCK_CUDA_COMPUTE_MODE", 0) == CU_COMPUTEMODE_PROHIBITED) {
            r = CUDA_ERROR_DEVICE_UNAVAILABLE;
        }
        if (r == CUDA_SUCCESS) {
            r = exclusive_take();
        }
        primary_phys = visible[d];
        if (r == CUDA_SUCCESS && mps_pipe[0] != '\0') {
            r = mps_join();
        }
        if (r == CUDA_SUCCESS) {
            memset(&primary, 0, sizeof(primary));
            primary.sm_count = MOCK_SMS;
            primary.conns = env_conns();
        }
    }
    if (r == CUDA_SUCCESS) {
        primary_refs++;
        *c = &primary;
    }
    pthread_mutex_unlock(&lock);
    return r;
}
MOCK_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d)
{
    (void)d;
    pthread_mutex_lock(&lock);
    bool last = primary_refs == 1;
    if (primary_refs > 0) {
        primary_refs--;
    }
    unsigned live = primary.streams_live;
    pthread_mutex_unlock(&lock);
    if (last) {
        if (live > 0) {
            violation("the primary context was released with %u streams "
                      "alive",
                      live);
        }
        exclusive_give();
    }
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext c)
{
    if (c == NULL) {
        if (tls_n > 0) {
            tls_n--;
        }
        return CUDA_SUCCESS;
    }
    if (c->destroyed) {
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    }
    if (tls_n == 0) {
        tls_n = 1;
    }
    tls_ctx[tls_n - 1] = c;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext *c)
{
    *c = current();
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuCtxPushCurrent(CUcontext c)
{
    if (c == NULL || c->destroyed) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (tls_n == (int)(sizeof(tls_ctx) / sizeof(tls_ctx[0]))) {
        violation("the context stack of a thread overflowed (a push without "
                  "its pop?)");
        return CUDA_ERROR_INVALID_VALUE;
    }
    tls_ctx[tls_n++] = c;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuCtxPopCurrent(CUcontext *c)
{
    if (tls_n == 0) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    CUcontext top = tls_ctx[--tls_n];
    if (c != NULL) {
        *c = top;
    }
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuCtxSynchronize(void)
{
    NEED_CTX();
    sync_ctx(ctx_);
    return sticky(ctx_);
}
MOCK_EXPORT CUresult CUDAAPI cuCtxGetLimit(size_t *v, CUlimit l)
{
    NEED_CTX();
    (void)l;
    *v = stack_limit;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuCtxSetLimit(CUlimit l, size_t v)
{
    NEED_CTX();
    (void)l;
    stack_limit = v;
    return CUDA_SUCCESS;
}

/* ---- green contexts ----------------------------------------------------- */

MOCK_EXPORT CUresult CUDAAPI cuDeviceGetDevResource(CUdevice d,
                                                    CUdevResource *res,
                                                    CUdevResourceType type)
{
    if (d < 0 || d >= nvisible) {
        return CUDA_ERROR_INVALID_DEVICE;
    }
    if (type != CU_DEV_RESOURCE_TYPE_SM) {
        return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    }
    memset(res, 0, sizeof(*res));
    res->type = CU_DEV_RESOURCE_TYPE_SM;
    res->sm.smCount = MOCK_SMS;
    res->sm.minSmPartitionSize = env_u("MOCK_CUDA_SM_ALIGN", 2);
    res->sm.smCoscheduledAlignment = env_u("MOCK_CUDA_SM_ALIGN", 2);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuDevSmResourceSplitByCount(
    CUdevResource *result, unsigned int *nbGroups, const CUdevResource *input,
    CUdevResource *remaining, unsigned int useFlags, unsigned int minCount)
{
    (void)useFlags;
    if (nbGroups == NULL || input == NULL ||
        input->type != CU_DEV_RESOURCE_TYPE_SM ||
        minCount > input->sm.smCount) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    unsigned align = input->sm.smCoscheduledAlignment;
    unsigned count = minCount < input->sm.minSmPartitionSize
                         ? input->sm.minSmPartitionSize
                         : minCount;
    count = (count + align - 1) / align * align;
    unsigned fit = count <= input->sm.smCount ? input->sm.smCount / count : 0;
    unsigned n = result == NULL || *nbGroups > fit ? fit : *nbGroups;
    for (unsigned i = 0; result != NULL && i < n; i++) {
        result[i] = *input;
        result[i].sm.smCount = count;
    }
    if (remaining != NULL) {
        *remaining = *input;
        remaining->sm.smCount = input->sm.smCount - n * count;
    }
    *nbGroups = n;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuDevResourceGenerateDesc(CUdevResourceDesc *desc,
                                                       CUdevResource *res,
                                                       unsigned int n)
{
    if (n != 1 || res->type != CU_DEV_RESOURCE_TYPE_SM ||
        res->sm.smCount == 0) {
        return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
    }
    *desc = calloc(1, sizeof(**desc));
    (*desc)->sms = res->sm.smCount;
    pthread_mutex_lock(&lock);
    (*desc)->next = descs;
    descs = *desc;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuGreenCtxCreate(CUgreenCtx *g,
                                              CUdevResourceDesc desc,
                                              CUdevice d, unsigned int flags)
{
    if ((flags & CU_GREEN_CTX_DEFAULT_STREAM) == 0 || desc == NULL || d < 0 ||
        d >= nvisible) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *g = calloc(1, sizeof(**g));
    (*g)->ctx.green = true;
    (*g)->ctx.sm_count = desc->sms;
    (*g)->ctx.conns = env_conns();
    pthread_mutex_lock(&lock);
    (*g)->next = greens;
    greens = *g;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuGreenCtxDestroy(CUgreenCtx g)
{
    if (g == NULL || g->ctx.destroyed) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    pthread_mutex_lock(&lock);
    unsigned live = g->ctx.streams_live;
    g->ctx.destroyed = true;
    pthread_mutex_unlock(&lock);
    if (live > 0) {
        violation("cuGreenCtxDestroy with %u of its streams alive: they "
                  "leak (cuda.h: destroy them first)",
                  live);
    }
    /* The context stays allocated: streams may still point at it. */
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuCtxFromGreenCtx(CUcontext *c, CUgreenCtx g)
{
    if (g == NULL || g->ctx.destroyed) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *c = &g->ctx;
    return CUDA_SUCCESS;
}

/* ---- memory ------------------------------------------------------------- */

MOCK_EXPORT CUresult CUDAAPI cuMemGetInfo(size_t *f, size_t *t)
{
    NEED_CTX();
    *t = MOCK_TOTAL;
    *f = MOCK_TOTAL - atomic_load(&allocated);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr *p, size_t n)
{
    NEED_CTX();
    size_t *b = calloc(1, n + 16);
    if (b == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* Device memory comes in 2 MiB pages: a leaked allocation shows. */
    b[0] = (n + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    atomic_fetch_add(&allocated, b[0]);
    *p = (CUdeviceptr)(uintptr_t)(b + 2);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr p)
{
    struct CUctx_st *ctx_ = current();
    if (ctx_ == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    /* A lost context fails the call (the host memory behind the stand-in
     * goes all the same). */
    /* "For all other pointers, this API may perform implicit
     * synchronization" (cuda.h): it waits for every launch of the
     * context, however long it runs. */
    sync_ctx(ctx_);
    size_t *b = (size_t *)(uintptr_t)p - 2;
    atomic_fetch_sub(&allocated, b[0]);
    free(b);
    return sticky(ctx_);
}
MOCK_EXPORT CUresult CUDAAPI cuMemsetD8(CUdeviceptr p, unsigned char c,
                                        size_t n)
{
    NEED_CTX();
    memset((void *)(uintptr_t)p, c, n);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuMemcpyDtoH(void *d, CUdeviceptr s, size_t n)
{
    NEED_CTX();
    memcpy(d, (void *)(uintptr_t)s, n);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr d, const void *s,
                                          size_t n)
{
    NEED_CTX();
    memcpy((void *)(uintptr_t)d, s, n);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuMemHostRegister(void *p, size_t n,
                                               unsigned int f)
{
    NEED_CTX();
    (void)f;
    uintptr_t a = (uintptr_t)p;
    if (p == NULL || n == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&lock);
    CUresult r = CUDA_SUCCESS;
    for (hostreg *h = hostregs; h != NULL; h = h->next) {
        if (a < h->p + h->n && h->p < a + n) {
            r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    }
    if (r == CUDA_SUCCESS) {
        hostreg *h = calloc(1, sizeof(*h));
        h->p = a;
        h->n = n;
        h->next = hostregs;
        hostregs = h;
    }
    pthread_mutex_unlock(&lock);
    return r;
}
MOCK_EXPORT CUresult CUDAAPI cuMemHostUnregister(void *p)
{
    NEED_CTX();
    pthread_mutex_lock(&lock);
    CUresult r = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    for (hostreg **h = &hostregs; *h != NULL; h = &(*h)->next) {
        if ((*h)->p == (uintptr_t)p) {
            hostreg *gone = *h;
            *h = gone->next;
            free(gone);
            r = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}
MOCK_EXPORT CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr *d, void *p,
                                                       unsigned int f)
{
    NEED_CTX();
    (void)f;
    uintptr_t a = (uintptr_t)p;
    pthread_mutex_lock(&lock);
    bool found = false;
    for (hostreg *h = hostregs; h != NULL; h = h->next) {
        found = found || (a >= h->p && a < h->p + h->n);
    }
    pthread_mutex_unlock(&lock);
    if (!found) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: the same address. */
    *d = (CUdeviceptr)a;
    return CUDA_SUCCESS;
}

/* ---- modules and functions ---------------------------------------------- */

MOCK_EXPORT CUresult CUDAAPI cuModuleLoadData(CUmodule *m, const void *img)
{
    NEED_CTX();
    if (memcmp(img, "\177ELF", 4) != 0) {
        return CUDA_ERROR_INVALID_IMAGE;
    }
    *m = calloc(1, sizeof(**m));
    (*m)->abi = 1;
    atomic_fetch_add(&allocated, 4096);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuModuleUnload(CUmodule m)
{
    struct CUctx_st *ctx_ = current();
    if (ctx_ == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    pthread_mutex_lock(&lock);
    for (struct CUstream_st *s = streams; s != NULL; s = s->next) {
        if (!atomic_load(&s->done) && s->a.fn != NULL && s->a.fn->mod == m) {
            violation("cuModuleUnload while a kernel of the module runs "
                      "(undefined, cuda.h)");
        }
    }
    pthread_mutex_unlock(&lock);
    atomic_fetch_sub(&allocated, 4096);
    while (m->funcs != NULL) {
        struct CUfunc_st *f = m->funcs;
        m->funcs = f->next;
        free(f);
    }
    free(m);
    return sticky(ctx_);
}
MOCK_EXPORT CUresult CUDAAPI cuModuleGetFunction(CUfunction *f, CUmodule m,
                                                 const char *name)
{
    /* The example kernels' static shared memory, as ptxas reports it. */
    static const struct {
        const char *name;
        unsigned static_shared;
    } known[] = {{"counter", 8},
                 {"pattern", 16},
                 {"fault", 8},
                 {"rails", 4},
                 {"rails_once", 0}};
    for (int k = 0; k < 5; k++) {
        if (strcmp(name, known[k].name) == 0) {
            *f = calloc(1, sizeof(**f));
            snprintf((*f)->name, sizeof((*f)->name), "%s", name);
            (*f)->kind = k;
            (*f)->static_shared = known[k].static_shared;
            (*f)->max_dyn = MOCK_STATIC_LIMIT - known[k].static_shared;
            (*f)->mod = m;
            (*f)->next = m->funcs;
            m->funcs = *f;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND;
}
MOCK_EXPORT CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr *p, size_t *n,
                                               CUmodule m, const char *name)
{
    if (strcmp(name, "MESH_RT_ABI") != 0) {
        return CUDA_ERROR_NOT_FOUND;
    }
    *p = (CUdeviceptr)(uintptr_t)&m->abi;
    *n = 4;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuFuncGetAttribute(int *v, CUfunction_attribute a,
                                                CUfunction f)
{
    switch (a) {
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
        *v = 10;
        break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
        *v = (int)f->static_shared;
        break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        *v = (int)f->max_dyn;
        break;
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *v = 1024;
        break;
    default:
        *v = 0;
        break;
    }
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuFuncSetAttribute(CUfunction f,
                                                CUfunction_attribute a, int v)
{
    if (a != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
        return CUDA_SUCCESS;
    }
    /* "The sum of this value and ... SHARED_SIZE_BYTES cannot exceed ...
     * MAX_SHARED_MEMORY_PER_BLOCK_OPTIN" (cuda.h). */
    if (v < 0 || (unsigned)v + f->static_shared > MOCK_OPTIN) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    f->max_dyn = (unsigned)v;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(
    int *n, CUfunction f, int threads, size_t shared)
{
    if (shared > f->max_dyn) {
        *n = 0;
        return CUDA_SUCCESS;
    }
    unsigned th = ((unsigned)threads + 31u) / 32u * 32u;
    unsigned sh = (unsigned)shared + f->static_shared + MOCK_RESERVED;
    unsigned by_shared = MOCK_SM_SHARED / sh;
    unsigned by_threads = MOCK_SM_THREADS / th;
    unsigned m = by_shared < by_threads ? by_shared : by_threads;
    *n = (int)(m > MOCK_SM_BLOCKS ? MOCK_SM_BLOCKS : m);
    return CUDA_SUCCESS;
}

/* ---- streams, events, launches ------------------------------------------ */

MOCK_EXPORT CUresult CUDAAPI cuStreamCreate(CUstream *s, unsigned int f)
{
    NEED_CTX();
    (void)f;
    *s = calloc(1, sizeof(**s));
    atomic_store(&(*s)->done, true);
    pthread_mutex_lock(&lock);
    (*s)->ctx = ctx_;
    (*s)->conn = ctx_->streams_made++ % ctx_->conns;
    ctx_->streams_live++;
    (*s)->next = streams;
    streams = *s;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuStreamQuery(CUstream s)
{
    if (sticky(s->ctx) != 0) {
        return sticky(s->ctx);
    }
    return atomic_load(&s->done) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
MOCK_EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream s)
{
    pthread_mutex_lock(&lock);
    while (!atomic_load(&s->done) && sticky(s->ctx) == 0) {
        pthread_cond_wait(&ended, &lock);
    }
    pthread_mutex_unlock(&lock);
    return sticky(s->ctx);
}
MOCK_EXPORT CUresult CUDAAPI cuStreamDestroy(CUstream s)
{
    pthread_mutex_lock(&lock);
    for (struct CUstream_st **p = &streams; *p != NULL; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            break;
        }
    }
    bool destroyed = s->ctx->destroyed;
    s->ctx->streams_live--;
    /* "the function will return immediately and the resources ... will
     * be released automatically once the device has completed all work
     * in hStream" (cuda.h). */
    bool running = s->started && !atomic_load(&s->done);
    s->orphan = running;
    pthread_mutex_unlock(&lock);
    if (!running) {
        if (s->started) {
            pthread_join(s->thread, NULL);
        }
        free(s);
    }
    return destroyed ? CUDA_ERROR_CONTEXT_IS_DESTROYED : CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned int f)
{
    NEED_CTX();
    (void)f;
    *e = calloc(1, sizeof(**e));
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s)
{
    if (sticky(s->ctx) != 0) {
        return sticky(s->ctx);
    }
    e->stream = s;
    e->gen = s->gen;
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuEventQuery(CUevent e)
{
    /* Only the stream's latest launch is tracked: enough for one kernel
     * per stream, as the backend launches. */
    if (e->stream == NULL) {
        return CUDA_SUCCESS;
    }
    pthread_mutex_lock(&lock);
    bool live = false;
    for (struct CUstream_st *s = streams; s != NULL; s = s->next) {
        live = live || s == e->stream;
    }
    CUresult r = CUDA_SUCCESS;
    if (live && sticky(e->stream->ctx) != 0) {
        r = sticky(e->stream->ctx);
    } else if (live && e->stream->gen == e->gen &&
               !atomic_load(&e->stream->done)) {
        r = CUDA_ERROR_NOT_READY;
    }
    pthread_mutex_unlock(&lock);
    return r;
}
MOCK_EXPORT CUresult CUDAAPI cuEventDestroy(CUevent e)
{
    free(e);
    return CUDA_SUCCESS;
}
MOCK_EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx,
                                            unsigned gy, unsigned gz,
                                            unsigned bx, unsigned by,
                                            unsigned bz, unsigned shared,
                                            CUstream s, void **params,
                                            void **extra)
{
    (void)gy;
    (void)gz;
    (void)by;
    (void)bz;
    (void)extra;
    if (s == NULL) {
        violation("a launch on the legacy default stream");
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (sticky(s->ctx) != 0) {
        return sticky(s->ctx);
    }
    if (bx == 0 || bx > 1024 || gx == 0 || shared > f->max_dyn) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!atomic_load(&s->done)) {
        violation("a launch on a stream whose launch still runs: it would "
                  "wait behind it");
        return CUDA_ERROR_LAUNCH_FAILED; /* no queueing in this mock */
    }
    if (s->started) {
        pthread_join(s->thread, NULL); /* the stream's last launch is over */
        s->started = false;
    }
    s->a.mb = (unsigned char *)(uintptr_t) * (CUdeviceptr *)params[0];
    s->a.slot = *(unsigned *)params[1];
    s->a.scratch = (void *)(uintptr_t) * (CUdeviceptr *)params[2];
    s->a.nodes = gx;
    s->a.threads = bx;
    s->a.shared = shared;
    s->a.fn = f;
    pthread_mutex_lock(&lock);
    s->seq = ++launches;
    atomic_store(&s->done, false);
    s->gen++;
    pthread_mutex_unlock(&lock);
    if (pthread_create(&s->thread, NULL, run_kernel, s) != 0) {
        atomic_store(&s->done, true);
        return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    }
    s->started = true;
    return CUDA_SUCCESS;
}

/* Stream operations after a launch: this mock has no queue, so they wait
 * here, on the caller's thread, until the stream's launch is over. */
static void stream_drain(CUstream s)
{
    while (!atomic_load(&s->done)) {
        nap_us(2);
    }
}

MOCK_EXPORT CUresult CUDAAPI cuStreamWriteValue64(CUstream s, CUdeviceptr addr,
                                                  cuuint64_t value,
                                                  unsigned int flags)
{
    (void)flags;
    if (s == NULL || addr == 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    stream_drain(s);
    atomic_store((_Atomic uint64_t *)(uintptr_t)addr, value);
    return sticky(s->ctx);
}

MOCK_EXPORT CUresult CUDAAPI cuLaunchHostFunc(CUstream s, CUhostFn fn,
                                              void *data)
{
    if (s == NULL || fn == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    stream_drain(s);
    fn(data);
    return sticky(s->ctx);
}
