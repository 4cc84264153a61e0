/* SPDX-License-Identifier: BSD-3-Clause */
/* A native launch's nodes: each the program under a keeper of its own.
 *
 * The host starts, signals and reaps keepers only (src/mesh/child.c); a
 * keeper runs its node in a process group of its own, ends whatever the
 * node leaves when it ends, and exits as the node did, so a keeper's wait
 * status is its node's.  Keepers are reaped by pid only, so the
 * application's other children are left alone. */
#include "native_internal.h"

#include "../child_internal.h"

#include "../../util/util_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

/* The descriptors a node gets (mesh/worker.h): its page, the scratch, the
 * binary it runs (closed at its exec) and the table of its ends. */
#define NODE_FD_PAGE 3
#define NODE_FD_SCRATCH 4
#define NODE_FD_EXE 5
#define NODE_FD_ENDS 6

/* ---- the process-wide table of live keepers --------------------------- */

#define LIVE_MAX (MESH_PROG_SLOTS * MESH_MANIFEST_MAX_NODES)

MESH_CHILD_TABLE(live, LIVE_MAX);

void mesh_native_nodes_cleanup(void)
{
    mesh_child_end_all(&live);
}

/* ---- reaping and stopping --------------------------------------------- */

void mesh_native_nodes_reap(native_image *im)
{
    for (uint32_t i = 0; i < im->nodes && im->live > 0; i++) {
        pid_t pid = im->node[i].pid;
        int status = 0;
        if (pid <= 0 || !mesh_child_reap(&live, pid, &status)) {
            continue;
        }
        im->node[i].status = status;
        im->node[i].pid = 0;
        im->live--;
    }
}

/* Reaps until no node lives or ms passed; true when none lives. */
static bool reap_within(native_image *im, uint32_t ms)
{
    uint64_t deadline = rig_now_ns() + (uint64_t)ms * 1000000u;
    uint32_t nap = 1;
    for (;;) {
        mesh_native_nodes_reap(im);
        if (im->live == 0) {
            return true;
        }
        if (rig_now_ns() >= deadline) {
            return false;
        }
        mesh_child_sleep_ms(nap);
        nap = nap < 8 ? nap * 2 : nap;
    }
}

void mesh_native_nodes_stop(native_image *im, uint32_t halt_ms,
                            uint32_t grace_ms)
{
    mesh_native_nodes_reap(im);
    if (im->live == 0) {
        return;
    }
    if (im->nb != NULL && im->slot < MESH_PROG_SLOTS) {
        atomic_store_explicit(&im->nb->cb->slot[im->slot].halt, 1,
                              memory_order_release);
    }
    mesh_native_words_halt(im);
    if (halt_ms > 0 && reap_within(im, halt_ms)) {
        return;
    }
    for (uint32_t i = 0; i < im->nodes; i++) {
        mesh_child_term(im->node[i].pid);
    }
    if (grace_ms > 0 && reap_within(im, grace_ms)) {
        return;
    }
    if (grace_ms > 0) {
        rig_log(RIG_LOG_INFO,
                "mesh: program %s: %u node(s) ignored halt and "
                "SIGTERM; killing them",
                im->name, im->live);
    }
    for (uint32_t i = 0; i < im->nodes; i++) {
        mesh_child_end(im->node[i].pid);
    }
    /* A keeper ends its tree within milliseconds; the guard covers one
     * that cannot (a process stuck in the kernel), which then loses its
     * keeper too, and is left to init. */
    if (!reap_within(im, 10000)) {
        rig_log(RIG_LOG_ERROR,
                "mesh: program %s: %u node(s) survive SIGKILL; "
                "killing their keepers",
                im->name, im->live);
        for (uint32_t i = 0; i < im->nodes; i++) {
            if (im->node[i].pid > 0) {
                kill(im->node[i].pid, SIGKILL);
            }
        }
        reap_within(im, 1000);
    }
}

char *mesh_native_nodes_crashed(native_image *im)
{
    if (im->crash_reported || !im->launched) {
        return NULL;
    }
    mesh_native_words_gather(im);
    if (im->broken != NULL) {
        im->crash_reported = true;
        return strdup(im->broken);
    }
    mesh_native_nodes_reap(im);
    for (uint32_t i = 0; i < im->nodes; i++) {
        if (im->node[i].pid != 0) {
            continue;
        }
        char *what = mesh_child_why(im->node[i].status);
        if (what == NULL) {
            continue;
        }
        char *why = NULL;
        int n = asprintf(&why, "node %u %s", i, what);
        free(what);
        im->crash_reported = true;
        return n < 0 ? NULL : why;
    }
    return NULL;
}

/* ---- starting --------------------------------------------------------- */

/* The environment of node i: the host's without MESH_* and without UCX's
 * error handling, then ours.  UCX_HANDLE_ERRORS=none: a node linked with
 * UCX (through librig, say) would get UCX's fault handler with the
 * library, which prints a backtrace into the user's log for every crash
 * that the backend reports anyway. */
#define NODE_ENV_OWN 7
static char **node_env(const native_image *im, uint32_t slot, uint32_t node,
                       uint32_t nodes)
{
    size_t n = 0;
    while (environ != NULL && environ[n] != NULL) {
        n++;
    }
    char **env = calloc(n + NODE_ENV_OWN + 1, sizeof(char *));
    if (env == NULL) {
        return NULL;
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "MESH_", 5) != 0 &&
            strncmp(environ[i], "UCX_HANDLE_ERRORS=", 18) != 0) {
            env[at++] = environ[i];
        }
    }
    char *own[NODE_ENV_OWN] = {NULL};
    int ok = asprintf(&own[0], "MESH_MAILBOX_FD=%d", NODE_FD_PAGE) >= 0 &&
             asprintf(&own[1], "MESH_SLOT=%u", slot) >= 0 &&
             asprintf(&own[2], "MESH_NODE=%u", node) >= 0 &&
             asprintf(&own[3], "MESH_NODES=%u", nodes) >= 0 &&
             (own[4] = strdup("UCX_HANDLE_ERRORS=none")) != NULL &&
             (im->scratch_fd < 0 ||
              asprintf(&own[5], "MESH_SCRATCH_FD=%d", NODE_FD_SCRATCH) >= 0) &&
             (im->ends_fd < 0 ||
              asprintf(&own[6], "MESH_ENDS_FD=%d", NODE_FD_ENDS) >= 0);
    if (!ok) {
        for (int i = 0; i < NODE_ENV_OWN; i++) {
            free(own[i]);
        }
        free(env);
        return NULL;
    }
    for (int i = 0; i < NODE_ENV_OWN; i++) {
        if (own[i] != NULL) {
            env[at++] = own[i];
        }
    }
    env[at] = NULL;
    return env;
}

/* Frees node_env's own entries: the host's it kept have neither prefix. */
static void node_env_free(char **env)
{
    if (env == NULL) {
        return;
    }
    for (size_t i = 0; env[i] != NULL; i++) {
        if (strncmp(env[i], "MESH_", 5) == 0 ||
            strncmp(env[i], "UCX_HANDLE_ERRORS=", 18) == 0) {
            free(env[i]);
        }
    }
    free(env);
}

bool mesh_native_nodes_start(native_backend *nb, native_image *im,
                             uint32_t slot, uint32_t nodes, char **err)
{
    native_node *node = calloc(nodes, sizeof(*node));
    if (node == NULL) {
        return rig_err(err, "nomem: launching program %s", im->name);
    }
    mesh_native_words_free(im);
    free(im->node);
    free(im->broken);
    im->broken = NULL;
    im->error_seen = false;
    memset(im->points, 0, sizeof(im->points));
    im->node = node;
    im->nodes = nodes;
    im->slot = slot;
    im->launched = true;
    im->crash_reported = false;
    nb->slots[slot] = im;
    if (!mesh_native_ends_start(im, err)) {
        return false;
    }
    for (uint32_t i = 0; i < nodes; i++) {
        int page = -1;
        if (!mesh_native_words_make(slot, i, nodes, &page, &node[i].words,
                                    err)) {
            mesh_native_nodes_stop(im, 0, 0);
            return rig_err_wrap(err, "program %s", im->name);
        }
        char **env = node_env(im, slot, i, nodes);
        if (env == NULL) {
            close(page);
            mesh_native_nodes_stop(im, 0, 0);
            return rig_err(err, "nomem: launching program %s", im->name);
        }
        mesh_child_spec spec = {
            .argv = im->argv,
            .envp = env,
            .fds = {page, im->scratch_fd, im->exe_fd, im->ends_fd},
            .exec_fd = NODE_FD_EXE,
            .log = NULL,
            .stack_bytes = nb->stack_limit,
        };
        pid_t pid = 0;
        bool ok = mesh_child_spawn(&spec, &pid, err);
        node_env_free(env);
        close(page);
        if (!ok) {
            mesh_native_nodes_stop(im, 0, 0);
            return rig_err_wrap(err, "node %u of program %s", i, im->name);
        }
        node[i].pid = pid;
        im->live++;
        if (!mesh_child_add(&live, pid)) {
            mesh_native_nodes_stop(im, 0, 0);
            return rig_err(err, "limits: more than %u live native nodes",
                           (unsigned)LIVE_MAX);
        }
    }
    return true;
}
