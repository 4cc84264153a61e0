/* SPDX-License-Identifier: BSD-3-Clause */
/* A native launch's rail ends: the table its nodes map, and the ferry that
 * readies the ends whose peer the nodes cannot reach.
 *
 * The table (mesh/abi/ends.h) is made per launch in a memfd the nodes
 * inherit (sealed against shrinking, as a node's page is), from the
 * bindings the host handed at load; its carriers' state starts from each
 * end's `sent`, so a launch goes on where the last one stopped.
 *
 * The ferry.  A node carries into a peer end on this node itself; an end
 * whose peer is elsewhere can only be carried by the host's transport, so
 * a node's ready there rings the table's bell and the ferry, a thread of
 * the host, calls the end's ready with the count the node stored.  The
 * ferry sleeps on the bell (a futex) when no node rang since it last
 * looked, with a 100 ms bound so that a lost wake costs at most that. */
#include "native_internal.h"

#include "../../util/util_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long futex(_Atomic uint32_t *uaddr, int op, uint32_t val,
                  const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)uaddr, op, val, ts, NULL, 0);
}

/* Readies, for every end the host carries, what its nodes readied. */
static void ferry_pass(native_image *im, uint64_t *last)
{
    for (size_t i = 0; i < im->ends.n; i++) {
        const mesh_end_binding *b = &im->ends.b[i];
        const mesh_end_entry *en = &im->table->e[b->input];
        if ((en->flags & (MESH_END_SENDS | MESH_END_MAPPED)) !=
            MESH_END_SENDS) {
            continue;
        }
        uint64_t r = rig_end_ready_count(b->end);
        if (r != RIG_COUNT_FAILED && r > last[i]) {
            rig_end_ready(b->end, r);
            last[i] = r;
        }
    }
}

static void *ferry_main(void *arg)
{
    native_image *im = arg;
    mesh_ends_header *h = &im->table->h;
    uint64_t *last = calloc(im->ends.n, sizeof(*last));
    if (last == NULL) {
        rig_log(RIG_LOG_ERROR,
                "mesh: program %s: no memory for its ferry: rails to other "
                "nodes carry nothing",
                im->name);
        return NULL;
    }
    uint32_t seen = atomic_load(&h->bell);
    while (!atomic_load(&im->ferry_stop)) {
        ferry_pass(im, last);
        /* Asleep, then look at the bell again: a node that rang after
         * the pass either is seen here or sees asleep and wakes us (both
         * sides seq_cst). */
        atomic_store(&h->asleep, 1);
        uint32_t now = atomic_load(&h->bell);
        if (now == seen && !atomic_load(&im->ferry_stop)) {
            struct timespec ts = {0, 100000000};
            futex(&h->bell, FUTEX_WAIT, seen, &ts);
        }
        atomic_store(&h->asleep, 0);
        seen = atomic_load(&h->bell);
    }
    ferry_pass(im, last);
    free(last);
    return NULL;
}

void mesh_native_ends_stop(native_image *im)
{
    if (im->ferry_on) {
        atomic_store(&im->ferry_stop, true);
        atomic_fetch_add(&im->table->h.bell, 1);
        futex(&im->table->h.bell, FUTEX_WAKE, 1, NULL);
        pthread_join(im->ferry, NULL);
        im->ferry_on = false;
    }
    if (im->table != NULL) {
        munmap(im->table, im->table_bytes);
        im->table = NULL;
    }
    if (im->ends_fd >= 0) {
        close(im->ends_fd);
        im->ends_fd = -1;
    }
}

bool mesh_native_ends_start(native_image *im, char **err)
{
    mesh_native_ends_stop(im);
    if (im->ends.n == 0) {
        return true;
    }
    size_t bytes = mesh_ends_table_bytes(&im->ends);
    int raw = memfd_create("rig-mesh-ends", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    int f = raw >= 0 ? fcntl(raw, F_DUPFD_CLOEXEC, 10) : -1;
    int e = errno;
    if (raw >= 0) {
        close(raw);
    }
    if (f < 0 || ftruncate(f, (off_t)bytes) != 0 ||
        fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        e = f < 0 ? e : errno;
        if (f >= 0) {
            close(f);
        }
        return rig_err(err, "system: the table of program %s's ends: %s",
                       im->name, strerror(e));
    }
    void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    if (map == MAP_FAILED) {
        e = errno;
        close(f);
        return rig_err(err,
                       "system: mapping the table of program %s's "
                       "ends: %s",
                       im->name, strerror(e));
    }
    im->ends_fd = f;
    im->table = map;
    im->table_bytes = bytes;
    if (!mesh_ends_table_fill(im->table, bytes, &im->ends, im->reads,
                              im->writes, im->nodes, true, err)) {
        mesh_native_ends_stop(im);
        return rig_err_wrap(err, "program %s", im->name);
    }
    bool ferry = false;
    for (uint32_t i = 0; i < MESH_INPUTS; i++) {
        uint32_t fl = im->table->e[i].flags;
        ferry |= (fl & (MESH_END_SENDS | MESH_END_MAPPED)) == MESH_END_SENDS;
    }
    if (ferry) {
        atomic_store(&im->ferry_stop, false);
        int rc = pthread_create(&im->ferry, NULL, ferry_main, im);
        if (rc != 0) {
            mesh_native_ends_stop(im);
            return rig_err(err, "system: starting program %s's ferry: %s",
                           im->name, strerror(rc));
        }
        im->ferry_on = true;
    }
    return true;
}
