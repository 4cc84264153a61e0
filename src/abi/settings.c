/* SPDX-License-Identifier: BSD-3-Clause */
/* The table of every RIG_* setting of every layer, for rig_info and the
 * docs.  A layer that reads a new variable lists it here. */
#include "rig/settings.h"

#include "config.h"

/* The toolkit configure found, as mesh/paths.h has it (the ABI includes
 * no executor header). */
#ifndef RIG_NVJITLINK_DIR
#define RIG_NVJITLINK_DIR ""
#endif

static const rig_setting settings[] = {
    /* every layer */
    {"RIG_LOG", "warn", "log level: error, warn, info or debug"},
    /* waits (rig/wait.h) */
    {"RIG_WAIT", "auto",
     "how waits poll: auto (yield when oversubscribed, else spin first)|"
     "spin|yield|block (sleep in the kernel)"},
    {"RIG_WAIT_SLEEP_US", "1000",
     "block: longest sleep, the bound on noticing a peer's store (us)"},
    {"RIG_WAIT_BULK_BYTES", "1048576",
     "auto: runs across nodes this large or larger sleep (0: never)"},
    /* rails (rig/job.h) */
    {"RIG_TRANSPORT", "ucx", "rail transport: ucx or mpi (MPI RMA)"},
    {"RIG_NUMA", "auto",
     "bind end memory to the rank's NUMA node: auto|off|on"},
    {"RIG_CUDA", "auto",
     "register end memory with cuMemHostRegister: auto|off|on"},
    {"RIG_SHM_STORES", "auto",
     "plain stores to same-node peers (off: UCX messages): auto|off|on"},
    {"RIG_KEEPALIVE_MS", "500",
     "peer-failure keepalive of ranks on other nodes (ms)"},
    {"RIG_PEER_TIMEOUT_MS", "500",
     "a rank on another node silent this long is lost (ms; 0: not watched)"},
    {"RIG_LANE_BYTES", "1048576",
     "runs across nodes (or on a node without shared memory) whose 2 "
     "copies fit go over rig's own TCP connection (0: UCX)"},
    {"RIG_UCX_TLS", "$UCX_TLS",
     "UCX transport: rig's context only (any RIG_UCX_<name> beats UCX_<name>)"},
    /* executors (mesh/executors.h) */
    {"RIG_MESH_ONLINE_TIMEOUT_MS", "2000",
     "a launch's nodes must be online within it"},
    {"RIG_MESH_HALT_MS", "500", "unload: time nodes get to obey a halt"},
    {"RIG_MESH_GRACE_MS", "1000", "unload: time after SIGTERM before SIGKILL"},
    {"RIG_MESH_CUDA_DEVICE", "0", "the CUDA device the backend opens"},
    {"RIG_MESH_NODE_STORES", "auto",
     "native nodes carry same-node rails (off: their host's ferry)"},
    {"RIG_MESH_CUDA_SMS", "0",
     "SMs of a green context for programs (0: the whole device)"},
    {"RIG_MESH_CUDA_ISOLATION", "blink", "CUDA isolation: blink or mps"},
    {"RIG_MESH_CUDA_WORKER", "$(pkglibexecdir)/rig-cuda-worker",
     "the MPS worker program"},
    {"MESH_NVJITLINK_DIR", RIG_NVJITLINK_DIR,
     "where libnvJitLink.so is loaded from"},
    {"RIG_WASM_CORES", "0", "cores lease lanes may use (0: all)"},
    {"RIG_WASM_CACHE", "$XDG_CACHE_HOME/rig/wasm",
     "compiled wasm modules (else /tmp/rig-wasm-<uid>)"},
    {"RIG_WASM_COMPILE_TIMEOUT_MS", "120000", "limit on one wasm2c or cc run"},
    {"RIG_WASM2C", "wasm2c found by configure", "the wasm2c program"},
    {"RIG_WASM_CC", "cc", "the C compiler for wasm2c's output"},
    {"RIG_WASM_RT_DIR", "/usr/src/wasm2c", "wasm2c's runtime headers"},
    {"RIG_WASM_HALT_SIGNAL", "SIGRTMAX-4",
     "real-time signal that interrupts a wasm lane to halt it"},
    /* the controller (rig/remote.h) */
    {"RIG_REMOTE_EXECUTORS", "all that open",
     "executors an agent offers: a list of native, wasm, cuda"},
    {"RIG_REMOTE_CHUNK_BYTES", "1073741824",
     "the most bytes of an image in one MPI call"},
    {"RIG_REMOTE_KEEP_BYTES", "268435456",
     "staging memory an agent keeps for later loads (0: none)"},
    {"RIG_REMOTE_STUCK_MS", "10000",
     "end the process when one MPI call of the remote layer has not "
     "returned in this long (0: never)"},
    {"RIG_REMOTE_TEST_CORRUPT", "none",
     "tests only: agent ranks that corrupt every image they get"},
};

const rig_setting *rig_settings(size_t *n)
{
    if (n == NULL) {
        return NULL;
    }
    *n = sizeof(settings) / sizeof(settings[0]);
    return settings;
}
