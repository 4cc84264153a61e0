/* SPDX-License-Identifier: BSD-3-Clause */
/* rig_info: what this build of rig has, what this machine offers, and every
 * RIG_* setting with its value and default. */
#include "config.h"

#include "rig/remote_abi.h"
#include "rig/settings.h"

#if defined(RIG_HAVE_JANSSON) && defined(RIG_HAVE_XXHASH)
#include "mesh/executors.h"
#endif
#ifdef RIG_HAVE_RAILS
#include "rig/job.h"
#endif

#if defined(RIG_HAVE_CUDA) && defined(RIG_HAVE_JANSSON) &&                     \
    defined(RIG_HAVE_XXHASH)
#include "mesh/cuda.h"
#endif

#include <hwloc.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_build(void)
{
    printf("rig %s\n\nbuild:\n", rig_version());
#ifdef RIG_HAVE_RAILS
    printf("  rails (MPI + UCX):  yes\n");
    printf("  MPI:                %s (MPI %s, at configure time)\n",
           RIG_MPI_VERSION, RIG_MPI_STANDARD);
    printf("  launcher:           %s\n", RIG_MPIRUN);
    printf("  UCX:                %s\n", RIG_UCX_VERSION);
#else
    printf("  rails (MPI + UCX):  no (built --without-mpi)\n");
#endif
    printf("  hwloc:              %s (API %u.%u.%u)\n", RIG_HWLOC_VERSION,
           hwloc_get_api_version() >> 16, (hwloc_get_api_version() >> 8) & 0xff,
           hwloc_get_api_version() & 0xff);
#ifdef RIG_JANSSON_VERSION
    printf("  jansson:            %s\n", RIG_JANSSON_VERSION);
#endif
#ifdef RIG_XXHASH_VERSION
    printf("  xxHash:             %s\n", RIG_XXHASH_VERSION);
#endif
#ifdef RIG_HAVE_CUDA
    printf("  CUDA headers:       yes (%s; libcuda and nvJitLink are loaded "
           "at run time)\n",
           RIG_CUDA_DIR);
#else
    printf("  CUDA headers:       no\n");
#endif
#ifdef RIG_HAVE_WABT
    printf("  wasm2c:             %s (runtime %s)\n", RIG_WASM2C,
           RIG_WASM_RT_DIR);
#else
    printf("  wasm2c:             no\n");
#endif
}

#ifdef RIG_HAVE_RAILS
/* Open MPI's osc rdma caps the regions of a dynamic window; 0: no cap. */
static unsigned attach_cap(void)
{
    unsigned cap = 0;
    int provided, idx, count;
    MPI_T_cvar_handle h;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
        return 0;
    }
    if (MPI_T_cvar_get_index("osc_rdma_max_attach", &idx) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) == MPI_SUCCESS) {
        uint64_t v[2] = {0, 0}; /* an unsigned int, read little or big */
        if (count == 1 && MPI_T_cvar_read(h, v) == MPI_SUCCESS) {
            memcpy(&cap, v, sizeof(cap));
        }
        MPI_T_cvar_handle_free(&h);
    }
    MPI_T_finalize();
    return cap;
}

/* Which MPI this process runs on (MPI_Get_library_version may be called
 * before MPI_Init) and what rig gets from it. */
static void print_mpi(void)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    if (MPI_Get_library_version(v, &n) != MPI_SUCCESS) {
        snprintf(v, sizeof(v), "?");
    }
    v[strcspn(v, "\n,")] = '\0';
    for (char *c = v; *c != '\0'; c++) {
        *c = *c == '\t' ? ' ' : *c; /* MPICH's "Version:<tab>4.0.2" */
    }
    printf("\nMPI (what this process runs on):\n");
    printf("  library:            %s\n", v);
    printf("  standard:           %d.%d\n", MPI_VERSION, MPI_SUBVERSION);
    unsigned cap = attach_cap();
    if (cap > 0) {
        printf("  windows:            dynamic, at most %u attached regions "
               "(osc_rdma_max_attach; the job's window holds that many "
               "ends)\n",
               cap);
    } else {
        printf("  windows:            dynamic, no cap on attached regions\n");
    }
#if defined(OPEN_MPI)
    printf("  fault tolerance:    a dead rank ends the job unless mpirun "
           "--enable-recovery;\n"
           "                      rig fails every end either way\n");
    printf("  RIG_TRANSPORT=mpi:  yes (osc rdma and sm complete without "
           "the target)\n");
#elif defined(MPICH_VERSION)
    printf("  fault tolerance:    a dead rank ends the job (Hydra; "
           "-disable-auto-cleanup keeps\n"
           "                      survivors, whose outcome it does not "
           "report); rig fails every end\n");
    printf("  RIG_TRANSPORT=mpi:  unsupported (MPICH's accumulates wait "
           "for the target's progress)\n");
#else
    printf("  fault tolerance:    unknown MPI; rig fails every end when a "
           "peer dies\n");
#endif
}
#endif

static int print_machine(void)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) {
        fprintf(stderr, "system: hwloc_topology_load failed\n");
        return 1;
    }
    int numa = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    int pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    hwloc_obj_t root = hwloc_get_root_obj(topo);
    const char *host = hwloc_obj_get_info_by_name(root, "HostName");
    const char *cpu = NULL;
    hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
    if (pkg != NULL) {
        cpu = hwloc_obj_get_info_by_name(pkg, "CPUModel");
    }
    printf("\nmachine:\n");
    printf("  host:               %s\n", host != NULL ? host : "?");
    printf("  CPU:                %s\n", cpu != NULL ? cpu : "?");
    printf("  NUMA nodes:         %d\n", numa);
    printf("  cores:              %d\n", cores);
    printf("  PUs:                %d\n", pus);
    for (int i = 0; i < numa; i++) {
        hwloc_obj_t n =
            hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
        char set[128];
        hwloc_bitmap_list_snprintf(set, sizeof(set), n->cpuset);
        printf("  NUMA node %u:        PUs %s, %llu MiB\n", n->os_index, set,
               (unsigned long long)(n->attr->numanode.local_memory >> 20));
    }
    hwloc_topology_destroy(topo);
    return 0;
}

/* GPUs and their caps, through the CUDA backend's run-time loaded driver. */
static void print_gpus(void)
{
    printf("  GPUs:               ");
#if defined(RIG_HAVE_CUDA) && defined(RIG_HAVE_JANSSON) &&                     \
    defined(RIG_HAVE_XXHASH)
    char *err = NULL;
    fflush(stdout);
    if (!mesh_cuda_describe(stdout, &err)) {
        printf("none (%s)\n", err != NULL ? err : "?");
        free(err);
    }
#else
    printf("none (this rig was built without CUDA headers)\n");
#endif
}

/* Each executor: built or not, and its caps or why it does not open. */
static void print_executors(void)
{
    printf("\nexecutors (mesh backends):\n");
#if defined(RIG_HAVE_JANSSON) && defined(RIG_HAVE_XXHASH)
    for (uint32_t k = 0; k < MESH_BACKEND_COUNT; k++) {
        mesh_backend *b = NULL;
        char *err = NULL;
        printf("  %-8s ", mesh_backend_name(k));
        if (!mesh_backend_open(k, NULL, &b, &err)) {
            printf("%s\n", err != NULL ? err : "?");
            free(err);
            continue;
        }
        const mesh_caps *c = b->ops->caps(b);
        printf("%s: %" PRIu32 " of %" PRIu32 " %s, arch %s\n", c->name, c->sms,
               c->sms_total, k == MESH_BACKEND_CUDA ? "SMs" : "cores",
               c->arch != NULL ? c->arch : "?");
        mesh_backend_destroy(b);
    }
#else
    printf("  none (built without jansson or xxHash)\n");
#endif
}

static void print_settings(void)
{
    size_t n = 0;
    const rig_setting *s = rig_settings(&n);
    printf("\nsettings (environment, default):\n");
    for (size_t i = 0; i < n; i++) {
        const char *v = getenv(s[i].name);
        printf("  %-28s %-10s (default %s) %s\n", s[i].name,
               v != NULL ? v : "(unset)", s[i].dflt, s[i].what);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 &&
        (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("usage: rig_info\n  prints rig's version, what this build "
               "has, what this machine has, and every RIG_* setting\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "invalid: unknown argument %s (try --help)\n", argv[1]);
        return 2;
    }
    print_build();
#ifdef RIG_HAVE_RAILS
    print_mpi();
#endif
    if (print_machine() != 0) {
        return 1;
    }
    print_gpus();
#ifdef RIG_HAVE_RAILS
    char *err = NULL;
    printf("\n");
    fflush(stdout);
    if (!rig_transport_info(stdout, &err)) {
        printf("transport: unavailable: %s\n", err != NULL ? err : "?");
        free(err);
    }
#endif
    print_executors();
    print_settings();
    return 0;
}
