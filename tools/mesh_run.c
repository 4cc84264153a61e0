/* SPDX-License-Identifier: BSD-3-Clause */
/* mesh_run: runs one program of a catalog on this machine, or through the
 * controller on every agent of an MPI job, and says how it ended.
 *
 *   mesh_run --programs DIR NAME [--nodes N] [--backend KIND]
 *            [--timeout-ms MS] [--nvjitlink DIR]
 *   mpirun -np N mesh_run --programs DIR NAME [same options]
 *   mesh_run --print-target
 *
 * Alone (not started by mpirun, or by mpirun on one rank) it reads the
 * program's payload, picks the first backend of its manifest this machine
 * can open (or --backend), prepares it on the JIT thread, launches N nodes
 * (default: the manifest's), waits until they are done (at most
 * --timeout-ms, default 0 = no limit; then the program is halted) and
 * prints one line: "mesh_run: NAME: done ..." or "... crashed: why".
 *
 * Under mpirun on more than one rank, rank 0 is the controller
 * (rig/remote.h) and every other rank an agent offering its executors (or
 * only --backend): the controller loads the program onto every agent,
 * launches N nodes on each, waits, and prints one line per machine
 * ("mesh_run: NAME on host:2: done on native, 4 node(s), point 0 = ...")
 * and a total ("mesh_run: NAME: done on 3 machine(s), 12 node(s), ...").
 *
 * --nvjitlink DIR: where the CUDA backend loads nvJitLink from (it sets
 * MESH_NVJITLINK_DIR, which it overrides).
 * Exit status: 0 done, 1 crashed or failed to start, 2 usage, 3 timed out. */
#include "mesh/driver.h"
#include "mesh/executors.h"

#ifdef RIG_MESH_RUN_MPI
#include "rig/remote.h"

#include <unistd.h>
#endif

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static int usage(void)
{
    fprintf(stderr, "usage: mesh_run --programs DIR NAME [--nodes N] "
                    "[--backend native|cuda|wasm] [--timeout-ms MS]\n"
                    "               [--nvjitlink DIR]\n"
                    "       mesh_run --print-target\n");
    return 2;
}

static bool parse_u32(const char *s, uint32_t *out)
{
    char *end = NULL;
    unsigned long v = s != NULL ? strtoul(s, &end, 10) : 0;
    if (s == NULL || s[0] == '\0' || s[0] == '-' || *end != '\0' ||
        v > UINT32_MAX) {
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

static double ms_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 +
           (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

static int fail(const char *name, char *err)
{
    fprintf(stderr, "mesh_run: %s: %s\n", name, err != NULL ? err : "?");
    free(err);
    return 1;
}

#ifdef RIG_MESH_RUN_MPI
/* Whether mpirun started this process on more than one rank (Open MPI,
 * then the PMI variables MPICH's and Slurm's launchers set): only then is
 * MPI initialised, so that mesh_run alone starts as fast as before. */
static bool under_mpirun(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                       "PMIX_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL) {
            return atoi(v) > 1;
        }
    }
    return false;
}
#endif

/* The command line. */
typedef struct {
    const char *root, *name, *backend;
    uint32_t nodes, timeout_ms;
} run_args;

static int run_local(const run_args *a);
#ifdef RIG_MESH_RUN_MPI
static int run_remote(const run_args *a, int *argc, char ***argv);
#endif

int main(int argc, char **argv)
{
    const char *root = NULL, *name = NULL, *backend = NULL;
    uint32_t nodes = 0, timeout_ms = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--print-target") == 0) {
            puts(mesh_native_target());
            return 0;
        } else if (strcmp(a, "--programs") == 0 && i + 1 < argc) {
            root = argv[++i];
        } else if (strcmp(a, "--nodes") == 0 && i + 1 < argc) {
            if (!parse_u32(argv[++i], &nodes) || nodes == 0) {
                return usage();
            }
        } else if (strcmp(a, "--backend") == 0 && i + 1 < argc) {
            backend = argv[++i];
        } else if (strcmp(a, "--timeout-ms") == 0 && i + 1 < argc) {
            if (!parse_u32(argv[++i], &timeout_ms)) {
                return usage();
            }
        } else if (strcmp(a, "--nvjitlink") == 0 && i + 1 < argc) {
            const char *dir = argv[++i];
            struct stat st;
            if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
                fprintf(stderr,
                        "mesh_run: invalid: --nvjitlink %s is not a "
                        "directory\n",
                        dir);
                return 2;
            }
            /* Read by the CUDA backend when it loads nvJitLink, on the JIT
             * thread that does not exist yet. */
            if (setenv("MESH_NVJITLINK_DIR", dir, 1) != 0) {
                perror("mesh_run: setenv");
                return 1;
            }
        } else if (a[0] != '-' && name == NULL) {
            name = a;
        } else {
            return usage();
        }
    }
    if (root == NULL || name == NULL) {
        return usage();
    }
    run_args a = {root, name, backend, nodes, timeout_ms};
#ifdef RIG_MESH_RUN_MPI
    if (under_mpirun()) {
        return run_remote(&a, &argc, &argv);
    }
#endif
    return run_local(&a);
}

static int run_local(const run_args *a)
{
    const char *root = a->root, *name = a->name, *backend = a->backend;
    uint32_t nodes = a->nodes, timeout_ms = a->timeout_ms;
    char *err = NULL;
    mesh_payload src;
    if (!mesh_payload_read(root, name, &src, &err)) {
        return fail(name, err);
    }
    /* mesh_payload_read parsed it already; files[0] is manifest.json. */
    mesh_manifest m;
    if (!mesh_manifest_parse((const char *)src.files[0].data, src.files[0].len,
                             &m, &err)) {
        mesh_payload_free(&src);
        return fail(name, err);
    }
    /* The backend: --backend, else the first of the manifest that opens. */
    mesh_backend *b = NULL;
    uint32_t kind = 0;
    if (backend != NULL) {
        if (!mesh_backend_kind(backend, &kind)) {
            mesh_manifest_free(&m);
            mesh_payload_free(&src);
            fprintf(stderr, "mesh_run: unknown backend %s\n", backend);
            return usage();
        }
        if (!mesh_backend_open(kind, NULL, &b, &err)) {
            mesh_manifest_free(&m);
            mesh_payload_free(&src);
            return fail(name, err);
        }
    } else {
        /* Say why each listed backend refused, not only the last. */
        char *why = NULL;
        for (size_t i = 0; i < m.nbackends && b == NULL; i++) {
            kind = m.backends[i];
            if (mesh_backend_open(kind, NULL, &b, &err)) {
                break;
            }
            char *joined = NULL;
            if (asprintf(&joined, "%s%s%s", why != NULL ? why : "",
                         why != NULL ? "; " : "",
                         err != NULL ? err : "?") < 0) {
                joined = NULL;
            }
            free(why);
            free(err);
            err = NULL;
            why = joined;
        }
        if (b == NULL) {
            mesh_manifest_free(&m);
            mesh_payload_free(&src);
            return fail(name, why);
        }
        free(why);
    }
    mesh_manifest_free(&m);
    mesh_driver *d = NULL;
    if (!mesh_driver_open(b, &d, &err)) {
        mesh_payload_free(&src);
        mesh_backend_destroy(b);
        return fail(name, err);
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    mesh_prepared p;
    uint32_t slot = 0;
    if (!mesh_driver_prepare(d, &src, NULL, root, &p, &err)) {
        mesh_driver_close(d);
        mesh_backend_destroy(b);
        return fail(name, err);
    }
    uint64_t hash = p.hash;
    uint32_t n = nodes != 0 ? nodes : p.manifest.nodes;
    if (!mesh_driver_start(d, &p, nodes, &slot, &err)) {
        mesh_driver_close(d);
        mesh_backend_destroy(b);
        return fail(name, err);
    }
    double online_ms = ms_since(&t0);
    mesh_run_state state = MESH_RUN_RUNNING;
    char *why = NULL;
    bool ok = mesh_driver_wait(
        d, slot, timeout_ms > 0 ? timeout_ms : UINT32_MAX, &state, &why, &err);
    uint64_t point = mesh_driver_point(d, slot, 0);
    int rc = 0;
    char *label = mesh_backend_label(mesh_caps_word(b->ops->caps(b)));
    if (!ok) {
        fprintf(stderr, "mesh_run: %s: %s; halting it\n", name,
                err != NULL ? err : "?");
        rc = 3;
    } else if (state == MESH_RUN_CRASHED) {
        printf("mesh_run: %s: crashed: %s\n", name, why != NULL ? why : "?");
        rc = 1;
    } else {
        printf("mesh_run: %s: done on %s, %u node(s), hash %016" PRIx64
               ", online in %.1f ms, ended in %.1f ms, point 0 = %" PRIu64 "\n",
               name, label != NULL ? label : "?", n, hash, online_ms,
               ms_since(&t0), point);
    }
    free(label);
    free(why);
    free(err);
    err = NULL;
    if (!mesh_driver_stop(d, slot, &err)) {
        fprintf(stderr, "mesh_run: %s: stop: %s\n", name,
                err != NULL ? err : "?");
        free(err);
    }
    mesh_driver_close(d);
    mesh_backend_destroy(b);
    return rc;
}

#ifdef RIG_MESH_RUN_MPI
/* Ends a rank: a failed job cannot finalize MPI (Open MPI 4.1 waits for
 * the dead rank), so the process then ends with _exit. */
static int finish(rig_remote *rm, rig_job *job, int rc)
{
    rig_remote_close(rm);
    bool failed = rig_job_failed(job);
    rig_job_close(job);
    fflush(stdout);
    fflush(stderr);
    if (failed) {
        _exit(rc != 0 ? rc : 1);
    }
    MPI_Finalize();
    return rc;
}

/* Rank 0: the program on every agent, one line per machine and a total. */
static int control(const run_args *a, rig_remote *rm)
{
    const char *name = a->name;
    char *err = NULL;
    mesh_payload src;
    if (!mesh_payload_read(a->root, name, &src, &err)) {
        return fail(name, err);
    }
    uint64_t hash = mesh_payload_hash(&src);
    rig_remote_load_info info;
    int64_t prog = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bool ok = rig_remote_load(rm, &src, NULL, 0, &info, &prog, &err);
    if (!ok) {
        /* After a failed job MPI may still read the image: it stays. */
        if (!rig_job_failed(rig_remote_job(rm))) {
            mesh_payload_free(&src);
        }
        return fail(name, err);
    }
    mesh_payload_free(&src);
    double load_ms = ms_since(&t0);
    if (!rig_remote_launch(rm, prog, a->nodes, &err)) {
        rig_remote_unload(rm, prog, NULL);
        return fail(name, err);
    }
    double online_ms = ms_since(&t0);
    int rc = 0;
    if (!rig_remote_wait(rm, prog, a->timeout_ms, &err)) {
        fprintf(stderr, "mesh_run: %s: %s%s\n", name, err != NULL ? err : "?",
                err != NULL && strncmp(err, "timeout:", 8) == 0 ? "; halting it"
                                                                : "");
        rc = err != NULL && strncmp(err, "timeout:", 8) == 0 ? 3 : 1;
        free(err);
        err = NULL;
    }
    double ended_ms = ms_since(&t0);
    rig_remote_status *s = NULL;
    size_t n = 0;
    if (!rig_remote_query(rm, prog, &s, &n, &err)) {
        rig_remote_unload(rm, prog, NULL);
        return fail(name, err);
    }
    uint64_t nodes = 0;
    size_t done = 0;
    for (size_t i = 0; i < n; i++) {
        const char *exec = mesh_backend_name(s[i].exec);
        nodes += s[i].nodes;
        if (s[i].state == RIG_REMOTE_DONE) {
            done++;
            printf("mesh_run: %s on %s: done on %s, %u node(s), point 0 = "
                   "%" PRIu64 "\n",
                   name, s[i].machine, exec != NULL ? exec : "?", s[i].nodes,
                   s[i].points[0]);
        } else if (s[i].state == RIG_REMOTE_CRASHED) {
            printf("mesh_run: %s on %s: crashed: %s\n", name, s[i].machine,
                   s[i].why != NULL ? s[i].why : "?");
        } else {
            printf("mesh_run: %s on %s: still running on %s, %u node(s), "
                   "point 0 = %" PRIu64 "\n",
                   name, s[i].machine, exec != NULL ? exec : "?", s[i].nodes,
                   s[i].points[0]);
        }
    }
    if (done == n) {
        printf("mesh_run: %s: done on %zu machine(s), %" PRIu64
               " node(s), hash %016" PRIx64 ", loaded in %.1f ms, online "
               "in %.1f ms, ended in %.1f ms\n",
               name, n, nodes, hash, load_ms, online_ms, ended_ms);
    } else {
        printf("mesh_run: %s: done on %zu of %zu machine(s)\n", name, done, n);
        rc = rc != 0 ? rc : 1;
    }
    rig_remote_status_free(s, n);
    if (!rig_remote_unload(rm, prog, &err)) {
        fprintf(stderr, "mesh_run: %s: unload: %s\n", name,
                err != NULL ? err : "?");
        free(err);
    }
    return rc;
}

static int run_remote(const run_args *a, int *argc, char ***argv)
{
    rig_remote_options opt;
    rig_remote_options_init(&opt);
    if (a->backend != NULL) {
        uint32_t kind = 0;
        if (!mesh_backend_kind(a->backend, &kind)) {
            fprintf(stderr, "mesh_run: unknown backend %s\n", a->backend);
            return usage();
        }
        opt.executors = 1u << kind;
    }
    MPI_Init(argc, argv);
    char *err = NULL;
    rig_job *job = NULL;
    if (!rig_job_open(MPI_COMM_WORLD, NULL, &job, &err)) {
        int rc = fail(a->name, err);
        MPI_Finalize();
        return rc;
    }
    rig_remote *rm = NULL;
    if (!rig_remote_open(job, MPI_COMM_WORLD, &opt, &rm, &err)) {
        int rc = fail(a->name, err);
        return finish(NULL, job, rc);
    }
    if (!rig_remote_is_controller(rm)) {
        bool ok = rig_remote_serve(rm, &err);
        if (!ok) {
            fprintf(stderr, "mesh_run: agent: %s\n", err != NULL ? err : "?");
        }
        free(err);
        return finish(rm, job, ok ? 0 : 1);
    }
    int rc = control(a, rm);
    return finish(rm, job, rc);
}
#endif
