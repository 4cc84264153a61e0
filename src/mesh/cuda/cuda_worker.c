/* SPDX-License-Identifier: BSD-3-Clause */
/* rig-cuda-worker: one program of the CUDA backend in MPS isolation.
 *
 * The backend starts one per program (cuda_mps.c) with
 * CUDA_MPS_PIPE_DIRECTORY naming its private MPS control daemon, so that
 * the context this process makes is an MPS client of that daemon: a module
 * change here never halts another program's kernel.  It inherits the
 * mailbox memfd, its end of a command socket and a sealed memfd of the
 * cubin (cuda_mps_internal.h has the fds, argv and the protocol), then:
 * loads libcuda with the backend's loader, makes the device's primary
 * context current, maps and registers the mailbox (its own device address
 * of it is what its launches hand the kernel), loads the image with the
 * blink path's code (MESH_RT_ABI checked there), makes one stream, and
 * answers "loaded" (or why not).  It then serves commands until EXIT or
 * until the backend is gone (the socket's end), and exits: the driver
 * releases what it still held.
 *
 * Every load refusal starts with a LOAD_REASONS word; a driver call's
 * "system: " or "nomem: " is put behind "load: program <name>: ". */
#include "cuda_mps_internal.h"

#include "../../util/util_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    mesh_cu_lib cu;
    bool cu_open;
    CUdevice dev;
    CUcontext ctx;
    mesh_cuda_mailbox mb;
    void *cubin;
    size_t cubin_len;
    mesh_cuda_image im;
    CUstream stream;
    uint32_t wait_ms;
} worker;

static bool send_reply(const mesh_mps_reply *r)
{
    for (;;) {
        ssize_t n = send(MESH_MPS_FD_SOCK, r, sizeof(*r), MSG_NOSIGNAL);
        if (n == (ssize_t)sizeof(*r)) {
            return true;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        return false;
    }
}

static void reply_err(mesh_mps_reply *r, const char *why)
{
    r->ok = 0;
    snprintf(r->err, sizeof(r->err), "%s", why != NULL ? why : "nomem: ?");
}

static bool is_load_reason(const char *e)
{
    static const char *const words[] = {
#define MESH_REASON_STR(w) #w ": ",
        MESH_LOAD_REASONS(MESH_REASON_STR)
#undef MESH_REASON_STR
    };
    for (size_t i = 0; e != NULL && i < sizeof(words) / sizeof(words[0]); i++) {
        if (strncmp(e, words[i], strlen(words[i])) == 0) {
            return true;
        }
    }
    return false;
}

static bool arg_u64(const char *s, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-') {
        return false;
    }
    *out = v;
    return true;
}

/* Everything up to the "loaded" reply. */
static bool start(worker *w, char **argv, char **err)
{
    uint64_t v[MESH_MPS_ARGS] = {0};
    static const int nums[] = {MESH_MPS_ARG_DEVICE,  MESH_MPS_ARG_THREADS,
                               MESH_MPS_ARG_SHARED,  MESH_MPS_ARG_SCRATCH,
                               MESH_MPS_ARG_REG_CAP, MESH_MPS_ARG_STACK,
                               MESH_MPS_ARG_WAIT_MS};
    for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
        if (!arg_u64(argv[nums[i]], &v[nums[i]]) || v[nums[i]] > UINT32_MAX) {
            return rig_err(err, "invalid: argument %d (%s) is not a number",
                           nums[i], argv[nums[i]]);
        }
    }
    const char *name = argv[MESH_MPS_ARG_NAME];
    w->wait_ms = (uint32_t)v[MESH_MPS_ARG_WAIT_MS];
    if (!mesh_cu_lib_open(&w->cu, err)) {
        return false;
    }
    w->cu_open = true;
    const mesh_cu_lib *cu = &w->cu;
    if (!mesh_cu_check(cu,
                       cu->cuDeviceGet_p(&w->dev, (int)v[MESH_MPS_ARG_DEVICE]),
                       NULL, "cuDeviceGet", err)) {
        return false;
    }
    /* A server recovering from a fatal fault refuses clients for a while
     * (CUDA_ERROR_MPS_SERVER_NOT_READY: "This error can be returned when
     * the MPS server is in the process of recovering from a fatal
     * failure", cuda.h): wait for it, within the backend's start wait. */
    CUresult r = CUDA_SUCCESS;
    uint64_t t0 = rig_now_ns();
    rig_backoff bo = {0};
    while ((r = cu->cuDevicePrimaryCtxRetain_p(&w->ctx, w->dev)) ==
               CUDA_ERROR_MPS_SERVER_NOT_READY &&
           rig_now_ns() - t0 < (uint64_t)MESH_MPS_RECOVER_MS * 1000000u) {
        rig_backoff_step(&bo);
    }
    if (!mesh_cu_check(cu, r, NULL, "cuDevicePrimaryCtxRetain", err)) {
        w->ctx = NULL;
        return false;
    }
    if (!mesh_cu_check(cu, cu->cuCtxSetCurrent_p(w->ctx), NULL,
                       "cuCtxSetCurrent", err)) {
        return false;
    }
    if (v[MESH_MPS_ARG_STACK] > 0) {
        CUresult r = cu->cuCtxSetLimit_p(CU_LIMIT_STACK_SIZE,
                                         (size_t)v[MESH_MPS_ARG_STACK]);
        if (!mesh_cu_check(cu, r,
                           r == CUDA_ERROR_INVALID_VALUE ? "limits" : NULL,
                           "cuCtxSetLimit(CU_LIMIT_STACK_SIZE)", err)) {
            return false;
        }
    }
    if (!mesh_cuda_mailbox_map(cu, MESH_MPS_FD_MAILBOX, true, &w->mb, err)) {
        return false;
    }
    struct stat st;
    if (fstat(MESH_MPS_FD_CUBIN, &st) != 0 || st.st_size <= 0) {
        return rig_err(err, "system: the cubin (fd %d) is unreadable",
                       MESH_MPS_FD_CUBIN);
    }
    w->cubin_len = (size_t)st.st_size;
    w->cubin =
        mmap(NULL, w->cubin_len, PROT_READ, MAP_PRIVATE, MESH_MPS_FD_CUBIN, 0);
    if (w->cubin == MAP_FAILED) {
        w->cubin = NULL;
        return rig_err(err, "system: mapping the cubin failed: %s",
                       strerror(errno));
    }
    close(MESH_MPS_FD_CUBIN);
    mesh_cuda_image_spec spec = {
        .name = name,
        .entry = argv[MESH_MPS_ARG_ENTRY],
        .code = w->cubin,
        .threads = (uint32_t)v[MESH_MPS_ARG_THREADS],
        .shared = (uint32_t)v[MESH_MPS_ARG_SHARED],
        .scratch = v[MESH_MPS_ARG_SCRATCH],
        .reg_cap = (uint32_t)v[MESH_MPS_ARG_REG_CAP],
    };
    if (!mesh_cuda_image_load(cu, &spec, &w->im, err)) {
        return false;
    }
    return mesh_cu_check(
        cu, cu->cuStreamCreate_p(&w->stream, CU_STREAM_NON_BLOCKING), NULL,
        "cuStreamCreate", err);
}

/* Releases everything (bounded by the exit wait); false when the kernel
 * still ran past it. */
static bool finish(worker *w)
{
    const mesh_cu_lib *cu = &w->cu;
    bool idle = true;
    if (w->cu_open && w->ctx != NULL) {
        cu->cuCtxSetCurrent_p(w->ctx);
        idle = mesh_cuda_image_release(cu, &w->im, w->wait_ms);
        if (idle && w->stream != NULL) {
            cu->cuStreamDestroy_p(w->stream);
            w->stream = NULL;
        }
    }
    if (w->cubin != NULL) {
        munmap(w->cubin, w->cubin_len);
        w->cubin = NULL;
    }
    if (w->cu_open && idle) {
        mesh_cuda_mailbox_unmap(cu, &w->mb);
        if (w->ctx != NULL) {
            cu->cuDevicePrimaryCtxRelease_p(w->dev);
        }
    }
    return idle;
}

static void serve(worker *w)
{
    const mesh_cu_lib *cu = &w->cu;
    for (;;) {
        mesh_mps_cmd c;
        ssize_t n = recv(MESH_MPS_FD_SOCK, &c, sizeof(c), 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n != (ssize_t)sizeof(c)) {
            return; /* the backend is gone (0) or broke the protocol */
        }
        mesh_mps_reply r;
        memset(&r, 0, sizeof(r));
        r.op = c.op;
        r.ok = 1;
        char *err = NULL;
        switch (c.op) {
        case MESH_MPS_LAUNCH:
            if (c.slot >= MESH_PROG_SLOTS || c.nodes == 0 ||
                !mesh_cuda_image_launch(cu, &w->im, w->stream, w->mb.mb,
                                        w->mb.dev, c.slot, c.nodes, &err)) {
                reply_err(&r, err != NULL ? err : "invalid: slot or nodes");
            }
            break;
        case MESH_MPS_QUERY: {
            CUresult q = cu->cuStreamQuery_p(w->stream);
            r.done = q != CUDA_ERROR_NOT_READY;
            if (q != CUDA_SUCCESS && q != CUDA_ERROR_NOT_READY) {
                r.fault = (int32_t)q;
                snprintf(r.err, sizeof(r.err), "%s", mesh_cu_name(cu, q));
            }
            break;
        }
        case MESH_MPS_GLOBAL:
            c.name[sizeof(c.name) - 1] = '\0';
            if (!mesh_cuda_image_global_u32(cu, &w->im, c.name, &r.value,
                                            &err)) {
                reply_err(&r, err);
            }
            break;
        case MESH_MPS_EXIT:
            if (!finish(w)) {
                reply_err(&r, "timeout: the kernel still ran after its halt; "
                              "the worker's exit ends it");
            }
            send_reply(&r);
            return;
        default:
            reply_err(&r, "invalid: unknown command");
            break;
        }
        free(err);
        if (!send_reply(&r)) {
            return;
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != MESH_MPS_ARGS) {
        fprintf(stderr,
                "rig-cuda-worker: started by the CUDA backend in MPS "
                "isolation only (%d arguments, not %d)\n",
                argc - 1, MESH_MPS_ARGS - 1);
        return 2;
    }
    worker w;
    memset(&w, 0, sizeof(w));
    w.mb.fd = -1;
    mesh_mps_reply r;
    memset(&r, 0, sizeof(r));
    r.op = MESH_MPS_LOAD;
    char *err = NULL;
    if (!start(&w, argv, &err)) {
        if (err != NULL && !is_load_reason(err)) {
            char *e = NULL;
            rig_err(&e, "load: program %s: %s", argv[MESH_MPS_ARG_NAME], err);
            free(err);
            err = e;
        }
        reply_err(&r, err);
        free(err);
        send_reply(&r);
        finish(&w);
        return 1;
    }
    r.ok = 1;
    r.regs = w.im.use.regs;
    r.local = w.im.use.local;
    r.max_blocks = w.im.use.max_blocks;
    r.scratch = w.im.use.scratch;
    size_t stack = 0;
    if (w.cu.cuCtxGetLimit_p(&stack, CU_LIMIT_STACK_SIZE) == CUDA_SUCCESS) {
        r.stack = stack;
    }
    if (!send_reply(&r)) {
        finish(&w);
        return 1;
    }
    serve(&w);
    return 0;
}
