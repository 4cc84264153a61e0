/* SPDX-License-Identifier: BSD-3-Clause */
/* Bad input to every public function callable without MPI: tables of calls.
 *
 * Each fallible case is a name, a call, the reason word its error must start
 * with and the argument its message must name (as a whole word).  Each call
 * runs twice, with an err pointer and with NULL (the message dropped), so a
 * function may neither crash on either nor leak (valgrind runs this).  Void
 * and pure functions get a NULL or out-of-range argument and must return
 * their documented neutral value. */
#include "config.h"

#include "rig/remote_abi.h"
#include "rig/settings.h"
#include "test_util.h"

#include <ctype.h>
#include <stdint.h>
#include <unistd.h>

#if defined(RIG_HAVE_JANSSON) && defined(RIG_HAVE_XXHASH) &&                   \
    defined(RIG_HAVE_HWLOC)
#define T_MESH 1
#include "mesh/backend.h"
#include "mesh/driver.h"
#include "mesh/executors.h"
#include "mesh/loader.h"
#include "mesh/manifest.h"
#include "mesh/worker.h"
#ifdef RIG_HAVE_CUDA
#include "mesh/cuda.h"
#endif
#include <sys/mman.h>
#endif

/* ---- the tables' shape --------------------------------------------------- */

typedef struct {
    const char *name;
    bool (*call)(char **err);
    const char *reason; /* the message starts with it */
    const char *arg;    /* the message names it, as a whole word */
} bad_case;

typedef struct {
    const char *name;
    bool (*neutral)(void); /* true: the documented neutral value came back */
} neutral_case;

static bool word_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* Whether msg holds word with no identifier character on either side. */
static bool names(const char *msg, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(msg, word); p != NULL;
         p = strstr(p + 1, word)) {
        bool left = p == msg || !word_char(p[-1]) || !word_char(word[0]);
        bool right = !word_char(p[n]) || !word_char(word[n - 1]);
        if (left && right) {
            return true;
        }
    }
    return false;
}

static void run_bad(const bad_case *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *err = NULL;
        bool ok = c[i].call(&err);
        if (!ok && err != NULL && !names(err, c[i].arg)) {
            T_FAILF("%s: \"%s\" does not name %s", c[i].name, err, c[i].arg);
        }
        if (ok || err == NULL ||
            strncmp(err, c[i].reason, strlen(c[i].reason)) != 0) {
            fprintf(stderr, "case %s: %s\n", c[i].name,
                    ok ? "succeeded" : (err != NULL ? err : "(no message)"));
        }
        T_ERR(ok, err, c[i].reason);
        /* err may be NULL everywhere: same outcome, no crash. */
        T_TRUE(!c[i].call(NULL));
    }
}

static void run_neutral(const neutral_case *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!c[i].neutral()) {
            T_FAILF("%s: not the neutral value", c[i].name);
        } else {
            CU_PASS(c[i].name);
        }
    }
}

#define NCASES(t) (sizeof(t) / sizeof((t)[0]))

/* ---- rig/remote_abi.h: fallible functions -------------------------------- */

static const rig_transfer t_ok[1] = {{0, 0, 8}};
static const rig_transfer t_len0[1] = {{0, 0, 0}};
static const rig_transfer t_ok_len0[2] = {{0, 0, 8}, {0, 0, 0}};
static const rig_transfer t_src_neg[2] = {{0, 0, 8}, {-1, 0, 8}};
static const rig_transfer t_over[1] = {{0, RIG_TRANSFER_LIMIT, 1}};

static bool c_check_empty(char **e)
{
    return rig_check_transfers(NULL, 0, NULL, 0, e);
}
static bool c_check_send_null(char **e)
{
    return rig_check_transfers(NULL, 2, t_ok, 1, e);
}
static bool c_check_receive_null(char **e)
{
    return rig_check_transfers(t_ok, 1, NULL, 3, e);
}
static bool c_check_receive_len0(char **e)
{
    return rig_check_transfers(t_ok, 1, t_len0, 1, e);
}
static bool c_check_send_src(char **e)
{
    return rig_check_transfers(t_src_neg, 2, NULL, 0, e);
}
static bool c_check_send_over(char **e)
{
    return rig_check_transfers(t_over, 1, t_ok, 1, e);
}
static bool c_check_receive_1(char **e)
{
    return rig_check_transfers(NULL, 0, t_ok_len0, 2, e);
}

static bool c_layout_out(char **e)
{
    return rig_end_layout_make(t_ok, 1, t_ok, 1, 0, NULL, e);
}
static bool c_layout_page3(char **e)
{
    rig_end_layout l;
    return rig_end_layout_make(t_ok, 1, t_ok, 1, 3, &l, e);
}
static bool c_layout_page_small(char **e)
{
    rig_end_layout l;
    return rig_end_layout_make(t_ok, 1, t_ok, 1, 256, &l, e);
}
static bool c_layout_lists(char **e)
{
    rig_end_layout l;
    return rig_end_layout_make(t_ok, 1, t_len0, 1, 0, &l, e);
}

static void nop_wake(void *self, uint64_t c)
{
    (void)self;
    (void)c;
}

static _Alignas(64) uint8_t counts_a[RIG_COUNTS_BYTES + 64];
static uint8_t bytes_a[512];

static rig_end_desc good_desc(void)
{
    rig_end_desc d = {
        .outbound = {bytes_a, 256},
        .inbound = {bytes_a + 256, 256},
        .counts = {counts_a, RIG_COUNTS_BYTES},
        .wake = nop_wake,
    };
    return d;
}

static bool c_end_desc(char **e)
{
    rig_end *x = NULL;
    return rig_end_make(NULL, &x, e);
}
static bool c_end_out(char **e)
{
    rig_end_desc d = good_desc();
    return rig_end_make(&d, NULL, e);
}
static bool c_end_wake(char **e)
{
    rig_end_desc d = good_desc();
    rig_end *x = NULL;
    d.wake = NULL;
    return rig_end_make(&d, &x, e);
}
static bool c_end_counts_small(char **e)
{
    rig_end_desc d = good_desc();
    rig_end *x = NULL;
    d.counts.len = RIG_COUNTS_BYTES - 8;
    return rig_end_make(&d, &x, e);
}
static bool c_end_counts_null(char **e)
{
    rig_end_desc d = good_desc();
    rig_end *x = NULL;
    d.counts.base = NULL;
    return rig_end_make(&d, &x, e);
}
static bool c_end_counts_align(char **e)
{
    rig_end_desc d = good_desc();
    rig_end *x = NULL;
    d.counts.base = counts_a + 4;
    return rig_end_make(&d, &x, e);
}
static bool c_end_outbound(char **e)
{
    rig_end_desc d = good_desc();
    rig_end *x = NULL;
    d.outbound.base = NULL;
    return rig_end_make(&d, &x, e);
}
static bool c_end_inbound(char **e)
{
    rig_end_desc d = good_desc();
    rig_end *x = NULL;
    d.inbound.base = NULL;
    return rig_end_make(&d, &x, e);
}
/* A second end on counts already live. */
static bool c_end_counts_live(char **e)
{
    rig_end_desc d = good_desc();
    rig_end *first = NULL, *second = NULL;
    if (!rig_end_make(&d, &first, NULL)) {
        return true; /* fails the case: the setup broke */
    }
    bool ok = rig_end_make(&d, &second, e);
    if (ok) {
        rig_end_release(second);
    }
    rig_end_release(first);
    return ok;
}

static bool c_rail_out(char **e)
{
    return rig_rail_make(0, NULL, NULL, e);
}
static bool c_rail_id(char **e)
{
    rig_rail *r = NULL;
    return rig_rail_make(-1, NULL, &r, e);
}
/* An end already in a rail cannot join another. */
static bool c_rail_local_taken(char **e)
{
    rig_end_desc d = good_desc();
    rig_end *x = NULL;
    rig_rail *r1 = NULL, *r2 = NULL;
    if (!rig_end_make(&d, &x, NULL)) {
        return true;
    }
    if (!rig_rail_make(1, x, &r1, NULL)) {
        rig_end_release(x);
        return true;
    }
    bool ok = rig_rail_make(2, x, &r2, e);
    if (ok) {
        rig_rail_release(r2);
    }
    rig_rail_release(r1);
    return ok;
}

static bool never_rail(const rig_host *h, const rig_host *peer,
                       const rig_transfer *s, size_t ns, const rig_transfer *r,
                       size_t nr, rig_rail **out, char **err)
{
    (void)h;
    (void)peer;
    (void)s;
    (void)ns;
    (void)r;
    (void)nr;
    (void)out;
    /* Checked calls must refuse before they get here. */
    if (err != NULL) {
        *err = strdup("reached: the host's rail function");
    }
    return false;
}

static const rig_host host_with = {"m0", never_rail, NULL, NULL};
static const rig_host host_without = {"m1", NULL, NULL, NULL};

static bool c_host_null(char **e)
{
    rig_rail *r = NULL;
    return rig_host_rail(NULL, NULL, t_ok, 1, t_ok, 1, &r, e);
}
static bool c_host_out(char **e)
{
    return rig_host_rail(&host_with, NULL, t_ok, 1, t_ok, 1, NULL, e);
}
static bool c_host_no_rail(char **e)
{
    rig_rail *r = NULL;
    return rig_host_rail(&host_without, NULL, t_ok, 1, t_ok, 1, &r, e);
}
static bool c_host_peer_self(char **e)
{
    rig_rail *r = NULL;
    return rig_host_rail(&host_with, &host_with, t_ok, 1, t_ok, 1, &r, e);
}
static bool c_host_lists(char **e)
{
    rig_rail *r = NULL;
    return rig_host_rail(&host_with, NULL, NULL, 4, t_ok, 1, &r, e);
}

static bool c_loop_a(char **e)
{
    rig_rail *b = NULL;
    return rig_loopback_make(0, t_ok, 1, t_ok, 1, NULL, &b, e);
}
static bool c_loop_b(char **e)
{
    rig_rail *a = NULL;
    return rig_loopback_make(0, t_ok, 1, t_ok, 1, &a, NULL, e);
}
static bool c_loop_id(char **e)
{
    rig_rail *a = NULL, *b = NULL;
    return rig_loopback_make(-5, t_ok, 1, t_ok, 1, &a, &b, e);
}
static bool c_loop_empty(char **e)
{
    rig_rail *a = NULL, *b = NULL;
    return rig_loopback_make(0, NULL, 0, NULL, 0, &a, &b, e);
}
static bool c_loop_lists(char **e)
{
    rig_rail *a = NULL, *b = NULL;
    return rig_loopback_make(0, t_ok, 1, t_src_neg, 2, &a, &b, e);
}

static const bad_case abi_bad[] = {
    {"check_transfers both empty", c_check_empty, "invalid: ", "send"},
    {"check_transfers NULL send", c_check_send_null, "invalid: ", "send"},
    {"check_transfers NULL receive", c_check_receive_null,
     "invalid: ", "receive"},
    {"check_transfers receive length 0", c_check_receive_len0,
     "invalid: ", "receive[0]"},
    {"check_transfers send src < 0", c_check_send_src, "invalid: ", "send[1]"},
    {"check_transfers send past 2^60", c_check_send_over,
     "invalid: ", "send[0]"},
    {"check_transfers receive[1]", c_check_receive_1,
     "invalid: ", "receive[1]"},
    {"end_layout_make NULL out", c_layout_out, "invalid: ", "out"},
    {"end_layout_make page 3", c_layout_page3, "invalid: ", "page"},
    {"end_layout_make page 256", c_layout_page_small, "invalid: ", "page"},
    {"end_layout_make bad lists", c_layout_lists, "invalid: ", "receive[0]"},
    {"end_make NULL desc", c_end_desc, "invalid: ", "desc"},
    {"end_make NULL out", c_end_out, "invalid: ", "out"},
    {"end_make NULL wake", c_end_wake, "invalid: ", "wake"},
    {"end_make small counts", c_end_counts_small, "invalid: ", "counts"},
    {"end_make NULL counts", c_end_counts_null, "invalid: ", "counts"},
    {"end_make misaligned counts", c_end_counts_align, "invalid: ", "counts"},
    {"end_make NULL outbound", c_end_outbound, "invalid: ", "outbound"},
    {"end_make NULL inbound", c_end_inbound, "invalid: ", "inbound"},
    {"end_make live counts", c_end_counts_live, "invalid: ", "counts"},
    {"rail_make NULL out", c_rail_out, "invalid: ", "out"},
    {"rail_make id -1", c_rail_id, "invalid: ", "id"},
    {"rail_make end in a rail", c_rail_local_taken, "invalid: ", "local"},
    {"host_rail NULL host", c_host_null, "invalid: ", "host"},
    {"host_rail NULL out", c_host_out, "invalid: ", "out"},
    {"host_rail no rail function", c_host_no_rail, "invalid: ", "rail"},
    {"host_rail peer is host", c_host_peer_self, "invalid: ", "peer"},
    {"host_rail NULL send", c_host_lists, "invalid: ", "send"},
    {"loopback_make NULL a", c_loop_a, "invalid: ", "a"},
    {"loopback_make NULL b", c_loop_b, "invalid: ", "b"},
    {"loopback_make id -5", c_loop_id, "invalid: ", "id"},
    {"loopback_make empty", c_loop_empty, "invalid: ", "send"},
    {"loopback_make bad receive", c_loop_lists, "invalid: ", "receive[1]"},
};

/* ---- rig/remote_abi.h and rig/settings.h: neutral values ----------------- */

static bool area_empty(rig_area a)
{
    return a.base == NULL && a.len == 0;
}

static bool n_copy_bytes(void)
{
    return rig_copy_bytes(NULL, 3, RIG_BY_SRC) == 0 &&
           rig_copy_bytes(t_ok, 0, RIG_BY_DST) == 0;
}
static bool n_area_copy(void)
{
    rig_area none = {NULL, 0};
    rig_area two = {bytes_a, 512};
    return area_empty(rig_area_copy(none, 0)) &&
           area_empty(rig_area_copy(two, 2)) &&
           area_empty(rig_area_copy(two, UINT32_MAX));
}
static bool n_count_arith(void)
{
    return rig_count_run(0, 1) == UINT64_MAX &&
           rig_count_run(1, 0) == UINT64_MAX &&
           rig_count_run(RIG_COUNT_FAILED, 1) == UINT64_MAX &&
           rig_count_transfer(0, 4) == SIZE_MAX &&
           rig_count_transfer(5, 0) == SIZE_MAX &&
           rig_count_copy(UINT64_MAX, 2) == UINT32_MAX &&
           rig_count_copy(3, 0) == UINT32_MAX && rig_count_of(0, 5, 5) == 0 &&
           rig_count_of(0, 0, 0) == 0 &&
           rig_count_of(UINT64_MAX / 2, 0, 4) == 0;
}
static bool n_count_mem(void)
{
    return rig_count_load(NULL, RIG_READY_AT) == 0 &&
           rig_count_advance(NULL, RIG_SENT_AT, 5) == 0;
}
static bool n_end_null(void)
{
    bool to = true;
    rig_end_ready(NULL, 1);
    rig_ready_by_counts(NULL, 1);
    rig_end_stop(NULL);
    rig_end_fail(NULL);
    rig_end_release(NULL);
    return area_empty(rig_end_outbound(NULL)) &&
           area_empty(rig_end_inbound(NULL)) &&
           area_empty(rig_end_counts(NULL)) && rig_end_ready_count(NULL) == 0 &&
           rig_end_sent(NULL) == 0 && rig_end_arrived(NULL) == 0 &&
           rig_end_ready_fn(NULL) == NULL && !rig_end_wait_arrived(NULL, 1) &&
           !rig_end_wait_sent(NULL, 1) &&
           !rig_end_wait_arrived_for(NULL, 1, 0, &to) && !to &&
           !rig_end_wait_sent_for(NULL, 1, 10, NULL) && !rig_end_failed(NULL) &&
           rig_end_provider(NULL) == NULL && rig_end_retain(NULL) == NULL;
}
/* Out-of-range counts on a live end are ignored: ready does not move. */
static bool n_end_ready_range(void)
{
    rig_end_desc d = good_desc();
    rig_end *x = NULL;
    memset(counts_a, 0, sizeof(counts_a));
    if (!rig_end_make(&d, &x, NULL)) {
        return false;
    }
    rig_end_ready(x, 0);
    rig_end_ready(x, RIG_COUNT_FAILED);
    rig_end_ready(x, UINT64_MAX);
    rig_ready_by_counts(counts_a, 0);
    rig_ready_by_counts(counts_a, UINT64_MAX);
    bool ok = rig_end_ready_count(x) == 0 && !rig_end_failed(x);
    rig_end_release(x);
    return ok;
}
static bool n_rail_null(void)
{
    rig_rail_release(NULL);
    return rig_rail_id(NULL) == -1 && rig_rail_local(NULL) == NULL &&
           rig_rail_retain(NULL) == NULL;
}
static bool n_host_threads(void)
{
    int32_t *t = (int32_t *)bytes_a;
    bool a = rig_host_threads(NULL, 0, &t) == 0 && t == NULL;
    t = (int32_t *)bytes_a;
    bool b = rig_host_threads(&host_without, 1, &t) == 0 && t == NULL;
    return a && b && rig_host_threads(&host_with, 0, NULL) == 0;
}
static bool n_capabilities(void)
{
    rig_capability c = rig_remote_abi_declare(NULL);
    rig_capability facts[1] = {c};
    return c.key == rig_remote_abi_key && c.value == NULL &&
           rig_capability_find(NULL, 3, rig_remote_abi_key) == NULL &&
           rig_capability_find(facts, 1, NULL) == NULL &&
           rig_capability_find(facts, 0, rig_remote_abi_key) == NULL &&
           rig_remote_abi_find(NULL, 2) == NULL &&
           rig_remote_abi_find(facts, 1) == NULL;
}
static bool n_version_settings(void)
{
    size_t n = 0;
    return rig_version() != NULL && rig_settings(NULL) == NULL &&
           rig_settings(&n) != NULL && n > 0;
}

static const neutral_case abi_neutral[] = {
    {"copy_bytes NULL / 0", n_copy_bytes},
    {"area_copy empty / k > 1", n_area_copy},
    {"count arithmetic out of range", n_count_arith},
    {"count_load/advance NULL", n_count_mem},
    {"end functions on NULL", n_end_null},
    {"end_ready out of range", n_end_ready_range},
    {"rail functions on NULL", n_rail_null},
    {"host_threads NULL", n_host_threads},
    {"capabilities NULL", n_capabilities},
    {"version, settings(NULL)", n_version_settings},
};

static void test_abi_bad(void)
{
    run_bad(abi_bad, NCASES(abi_bad));
}

static void test_abi_neutral(void)
{
    run_neutral(abi_neutral, NCASES(abi_neutral));
}

#ifdef T_MESH
/* ---- include/mesh: fallible functions -------------------------------- */

static const char manifest_ok[] =
    "{\"name\": \"p\", \"abi\": 1, \"backends\": [\"native\"]}";

static const mesh_kernel_ops no_ops = {.exec = MESH_BACKEND_NATIVE};
static const mesh_kernel kernel_bare = {&no_ops, NULL};
static const mesh_kernel kernel_no_ops = {NULL, NULL};

static bool c_k_regs_null(char **e)
{
    uint32_t v;
    return mesh_kernel_regs(NULL, &v, e);
}
static bool c_k_regs_ops(char **e)
{
    uint32_t v;
    return mesh_kernel_regs(&kernel_no_ops, &v, e);
}
static bool c_k_regs_out(char **e)
{
    return mesh_kernel_regs(&kernel_bare, NULL, e);
}
static bool c_k_local_null(char **e)
{
    uint32_t v;
    return mesh_kernel_local_bytes(NULL, &v, e);
}
static bool c_k_local_out(char **e)
{
    return mesh_kernel_local_bytes(&kernel_bare, NULL, e);
}
static bool c_k_blocks_null(char **e)
{
    uint32_t v;
    return mesh_kernel_max_blocks_per_sm(NULL, &v, e);
}
static bool c_k_blocks_out(char **e)
{
    return mesh_kernel_max_blocks_per_sm(&kernel_bare, NULL, e);
}
static bool c_k_global_null(char **e)
{
    uint32_t v;
    return mesh_kernel_global_u32(NULL, "MESH_RT_ABI", &v, e);
}
static bool c_k_global_name(char **e)
{
    uint32_t v;
    return mesh_kernel_global_u32(&kernel_bare, NULL, &v, e);
}
static bool c_k_global_out(char **e)
{
    return mesh_kernel_global_u32(&kernel_bare, "MESH_RT_ABI", NULL, e);
}
static bool c_k_global_missing(char **e)
{
    uint32_t v;
    return mesh_kernel_global_u32(&kernel_bare, "MESH_RT_ABI", &v, e);
}

static mesh_manifest manifest_native(void)
{
    mesh_manifest m;
    memset(&m, 0, sizeof(m));
    m.backends[0] = MESH_BACKEND_NATIVE;
    m.nbackends = 1;
    return m;
}

static const uint32_t have_native[1] = {MESH_BACKEND_NATIVE};
static const uint32_t have_cuda[1] = {MESH_BACKEND_CUDA};

static bool c_pick_m(char **e)
{
    uint32_t x;
    return mesh_pick_exec(NULL, have_native, 1, &x, e);
}
static bool c_pick_exec(char **e)
{
    mesh_manifest m = manifest_native();
    return mesh_pick_exec(&m, have_native, 1, NULL, e);
}
static bool c_pick_have(char **e)
{
    mesh_manifest m = manifest_native();
    uint32_t x;
    return mesh_pick_exec(&m, NULL, 2, &x, e);
}
static bool c_pick_none(char **e)
{
    mesh_manifest m = manifest_native();
    uint32_t x;
    return mesh_pick_exec(&m, have_cuda, 1, &x, e);
}

/* A payload of program p holding the manifest (or none). */
static bool payload_make(mesh_payload *p, bool with_manifest)
{
    if (!mesh_payload_init(p, "p", NULL)) {
        return false;
    }
    if (with_manifest && !mesh_payload_add(p, "manifest.json", manifest_ok,
                                           sizeof(manifest_ok) - 1, NULL)) {
        mesh_payload_free(p);
        return false;
    }
    return true;
}

static bool c_check_src(char **e)
{
    mesh_manifest m;
    return mesh_check_manifest(NULL, MESH_BACKEND_NATIVE, &m, e);
}
static bool c_check_out(char **e)
{
    mesh_payload p;
    if (!payload_make(&p, true)) {
        return true;
    }
    bool ok = mesh_check_manifest(&p, MESH_BACKEND_NATIVE, NULL, e);
    mesh_payload_free(&p);
    return ok;
}
static bool c_check_nomanifest(char **e)
{
    mesh_payload p;
    mesh_manifest m;
    if (!payload_make(&p, false)) {
        return true;
    }
    bool ok = mesh_check_manifest(&p, MESH_BACKEND_NATIVE, &m, e);
    mesh_payload_free(&p);
    return ok;
}
static bool c_check_kind(char **e)
{
    mesh_payload p;
    mesh_manifest m;
    if (!payload_make(&p, true)) {
        return true;
    }
    bool ok = mesh_check_manifest(&p, 77, &m, e);
    if (ok) {
        mesh_manifest_free(&m);
    }
    mesh_payload_free(&p);
    return ok;
}

static bool c_prep_src(char **e)
{
    mesh_prepared out;
    return mesh_prepare_any(NULL, 0, NULL, NULL, NULL, &out, e);
}
/* mesh_prepare_any takes the payload whatever happens. */
static bool c_prep_out(char **e)
{
    mesh_payload p;
    if (!payload_make(&p, true)) {
        return true;
    }
    return mesh_prepare_any(NULL, 0, &p, NULL, NULL, NULL, e);
}
static bool c_prep_comps(char **e)
{
    mesh_payload p;
    mesh_prepared out;
    if (!payload_make(&p, true)) {
        return true;
    }
    return mesh_prepare_any(NULL, 3, &p, NULL, NULL, &out, e);
}
static bool c_prep_none(char **e)
{
    mesh_payload p;
    mesh_prepared out;
    if (!payload_make(&p, true)) {
        return true;
    }
    return mesh_prepare_any(NULL, 0, &p, NULL, NULL, &out, e);
}

static bool c_mparse_out(char **e)
{
    return mesh_manifest_parse(manifest_ok, sizeof(manifest_ok) - 1, NULL, e);
}
static bool c_mparse_json(char **e)
{
    mesh_manifest m;
    return mesh_manifest_parse(NULL, 5, &m, e);
}
static bool c_mparse_empty(char **e)
{
    mesh_manifest m;
    return mesh_manifest_parse(NULL, 0, &m, e);
}
static bool c_mparse_big(char **e)
{
    mesh_manifest m;
    return mesh_manifest_parse(manifest_ok, MESH_MANIFEST_MAX_BYTES + 1, &m, e);
}
static bool c_mcopy_dst(char **e)
{
    mesh_manifest m = manifest_native();
    return mesh_manifest_copy(NULL, &m, e);
}
static bool c_mcopy_src(char **e)
{
    mesh_manifest m;
    return mesh_manifest_copy(&m, NULL, e);
}

static bool c_pread_out(char **e)
{
    return mesh_payload_read("/nonexistent", "p", NULL, e);
}
static bool c_pread_root(char **e)
{
    mesh_payload p;
    return mesh_payload_read(NULL, "p", &p, e);
}
static bool c_pread_root_empty(char **e)
{
    mesh_payload p;
    return mesh_payload_read("", "p", &p, e);
}
static bool c_pread_name(char **e)
{
    mesh_payload p;
    return mesh_payload_read("/nonexistent", NULL, &p, e);
}
static bool c_pread_dotdot(char **e)
{
    mesh_payload p;
    return mesh_payload_read("/nonexistent", "..", &p, e);
}
static bool c_pread_missing(char **e)
{
    mesh_payload p;
    return mesh_payload_read("/nonexistent", "p", &p, e);
}
static bool c_pinit_p(char **e)
{
    return mesh_payload_init(NULL, "p", e);
}
static bool c_pinit_name(char **e)
{
    mesh_payload p;
    return mesh_payload_init(&p, NULL, e);
}
static bool c_pinit_slash(char **e)
{
    mesh_payload p;
    return mesh_payload_init(&p, "a/b", e);
}
static bool c_padd_p(char **e)
{
    return mesh_payload_add(NULL, "x", "y", 1, e);
}
/* Adds to a fresh payload, which is freed whatever happens. */
static bool padd(const char *path, const void *data, size_t len, char **e)
{
    mesh_payload p;
    if (!payload_make(&p, true)) {
        return true;
    }
    bool ok = mesh_payload_add(&p, path, data, len, e);
    mesh_payload_free(&p);
    return ok;
}
static bool c_padd_data(char **e)
{
    return padd("x", NULL, 4, e);
}
static bool c_padd_path(char **e)
{
    return padd(NULL, "y", 1, e);
}
static bool c_padd_abs(char **e)
{
    return padd("/etc/passwd", "y", 1, e);
}
static bool c_padd_dotdot(char **e)
{
    return padd("a/../b", "y", 1, e);
}
static bool c_padd_twice(char **e)
{
    return padd("manifest.json", "{}", 2, e);
}
static bool c_padd_big(char **e)
{
    return padd("x", "y", (size_t)MESH_PAYLOAD_MAX_FILE_BYTES + 1, e);
}
static bool c_pcopy_dst(char **e)
{
    mesh_payload p;
    memset(&p, 0, sizeof(p));
    return mesh_payload_copy(NULL, &p, e);
}
static bool c_pcopy_src(char **e)
{
    mesh_payload p;
    return mesh_payload_copy(&p, NULL, e);
}

static bool c_open_out(char **e)
{
    return mesh_backend_open(MESH_BACKEND_NATIVE, NULL, NULL, e);
}
static bool c_open_kind(char **e)
{
    mesh_backend *b = NULL;
    return mesh_backend_open(99, NULL, &b, e);
}
/* A malformed setting, with the options' zero deferring to it. */
static bool open_env(const char *var, const char *value, char **e)
{
    mesh_backend *b = NULL;
    setenv(var, value, 1);
    bool ok = mesh_backend_open(MESH_BACKEND_NATIVE, NULL, &b, e);
    unsetenv(var);
    if (ok) {
        mesh_backend_destroy(b);
    }
    return ok;
}
static bool c_open_env_halt(char **e)
{
    return open_env("RIG_MESH_HALT_MS", "soon", e);
}
static bool c_open_env_grace(char **e)
{
    return open_env("RIG_MESH_GRACE_MS", "0", e);
}
static bool c_open_env_online(char **e)
{
    return open_env("RIG_MESH_ONLINE_TIMEOUT_MS", "-1", e);
}

/* One native backend and driver for the driver cases (NULL: none here). */
static mesh_backend *native_b;
static mesh_driver *native_d;

static bool c_dopen_b(char **e)
{
    mesh_driver *d = NULL;
    return mesh_driver_open(NULL, &d, e);
}
static bool c_dopen_ops(char **e)
{
    mesh_backend b = {NULL, NULL};
    mesh_driver *d = NULL;
    return mesh_driver_open(&b, &d, e);
}
static bool c_dopen_out(char **e)
{
    mesh_backend b = {NULL, NULL};
    return mesh_driver_open(native_b != NULL ? native_b : &b, NULL, e);
}
static bool c_dprep_d(char **e)
{
    mesh_payload p;
    mesh_prepared out;
    if (!payload_make(&p, true)) {
        return true;
    }
    return mesh_driver_prepare(NULL, &p, NULL, NULL, &out, e);
}
static bool c_dprep_src(char **e)
{
    mesh_prepared out;
    return mesh_driver_prepare(native_d, NULL, NULL, NULL, &out, e);
}
static bool c_dprep_out(char **e)
{
    mesh_payload p;
    if (!payload_make(&p, true)) {
        return true;
    }
    return mesh_driver_prepare(native_d, &p, NULL, NULL, NULL, e);
}
/* A zeroed prepared image: mesh_driver_start consumes it. */
static bool c_dstart_d(char **e)
{
    mesh_prepared p;
    uint32_t slot;
    memset(&p, 0, sizeof(p));
    return mesh_driver_start(NULL, &p, 1, &slot, e);
}
static bool c_dstart_p(char **e)
{
    uint32_t slot;
    return mesh_driver_start(native_d, NULL, 1, &slot, e);
}
static bool c_dstart_slot(char **e)
{
    mesh_prepared p;
    memset(&p, 0, sizeof(p));
    return mesh_driver_start(native_d, &p, 1, NULL, e);
}
static bool c_dstart_nodes(char **e)
{
    mesh_prepared p;
    uint32_t slot;
    memset(&p, 0, sizeof(p));
    if (native_d == NULL) {
        return c_dstart_d(e);
    }
    p.manifest.name = strdup("p");
    return mesh_driver_start(native_d, &p, MESH_MANIFEST_MAX_NODES + 1, &slot,
                             e);
}
static bool c_dpoll_d(char **e)
{
    mesh_run_state st;
    char *why = NULL;
    return mesh_driver_poll(NULL, 0, &st, &why, e);
}
static bool c_dpoll_state(char **e)
{
    return mesh_driver_poll(native_d, 0, NULL, NULL, e);
}
static bool c_dpoll_slot(char **e)
{
    mesh_run_state st;
    if (native_d == NULL) {
        return c_dpoll_d(e);
    }
    return mesh_driver_poll(native_d, MESH_PROG_SLOTS, &st, NULL, e);
}
static bool c_dpoll_empty(char **e)
{
    mesh_run_state st;
    if (native_d == NULL) {
        return c_dpoll_d(e);
    }
    return mesh_driver_poll(native_d, 3, &st, NULL, e);
}
static bool c_dwait_d(char **e)
{
    mesh_run_state st;
    return mesh_driver_wait(NULL, 0, 10, &st, NULL, e);
}
static bool c_dwait_slot(char **e)
{
    mesh_run_state st;
    char *why = NULL;
    if (native_d == NULL) {
        return c_dwait_d(e);
    }
    return mesh_driver_wait(native_d, UINT32_MAX, 10, &st, &why, e);
}
static bool c_dstop_d(char **e)
{
    return mesh_driver_stop(NULL, 0, e);
}
static bool c_dstop_slot(char **e)
{
    if (native_d == NULL) {
        return c_dstop_d(e);
    }
    return mesh_driver_stop(native_d, 99, e);
}
static bool c_dstop_empty(char **e)
{
    if (native_d == NULL) {
        return c_dstop_d(e);
    }
    return mesh_driver_stop(native_d, 0, e);
}

/* mesh_worker_attach with the given mailbox fd and slot variables. */
static bool attach_env(const char *fd, const char *slot, char **e)
{
    mesh_worker *w = NULL;
    const char *vars[4] = {"MESH_MAILBOX_FD", "MESH_SLOT", "MESH_NODE",
                           "MESH_NODES"};
    const char *vals[4] = {fd, slot, "0", "1"};
    for (int i = 0; i < 4; i++) {
        if (vals[i] != NULL) {
            setenv(vars[i], vals[i], 1);
        }
    }
    bool ok = mesh_worker_attach(&w, e);
    for (int i = 0; i < 4; i++) {
        unsetenv(vars[i]);
    }
    if (ok) {
        mesh_worker_detach(w);
    }
    return ok;
}
static bool c_wattach_out(char **e)
{
    return mesh_worker_attach(NULL, e);
}
static bool c_wattach_unset(char **e)
{
    return attach_env(NULL, "0", e);
}
static bool c_wattach_slot_word(char **e)
{
    return attach_env("0", "seven", e);
}
static bool c_wattach_slot_range(char **e)
{
    return attach_env("0", "32", e);
}
/* An empty file as the mailbox: it maps, but touching it faults. */
static bool c_wattach_short(char **e)
{
    int fd = memfd_create("t_badinput", MFD_CLOEXEC);
    char num[16];
    if (fd < 0) {
        return true;
    }
    snprintf(num, sizeof(num), "%d", fd);
    bool ok = attach_env(num, "0", e);
    close(fd);
    return ok;
}

#ifdef RIG_HAVE_CUDA
static bool c_cuda_describe(char **e)
{
    return mesh_cuda_describe(NULL, e);
}
static bool c_cuda_comp_out(char **e)
{
    return mesh_cuda_compiler_open("sm_90", NULL, NULL, e);
}
static bool c_cuda_comp_arch(char **e)
{
    mesh_compiler *c = NULL;
    return mesh_cuda_compiler_open(NULL, NULL, &c, e);
}
static bool c_cuda_comp_arch_bad(char **e)
{
    mesh_compiler *c = NULL;
    return mesh_cuda_compiler_open("gfx90a", "/nonexistent", &c, e);
}
#endif

static const bad_case mesh_bad[] = {
    {"kernel_regs NULL kernel", c_k_regs_null, "invalid: ", "kernel"},
    {"kernel_regs kernel without ops", c_k_regs_ops, "invalid: ", "ops"},
    {"kernel_regs NULL out", c_k_regs_out, "invalid: ", "out"},
    {"kernel_local_bytes NULL kernel", c_k_local_null, "invalid: ", "kernel"},
    {"kernel_local_bytes NULL out", c_k_local_out, "invalid: ", "out"},
    {"kernel_max_blocks NULL kernel", c_k_blocks_null, "invalid: ", "kernel"},
    {"kernel_max_blocks NULL out", c_k_blocks_out, "invalid: ", "out"},
    {"kernel_global_u32 NULL kernel", c_k_global_null, "invalid: ", "kernel"},
    {"kernel_global_u32 NULL name", c_k_global_name, "invalid: ", "name"},
    {"kernel_global_u32 NULL out", c_k_global_out, "invalid: ", "out"},
    {"kernel_global_u32 no op", c_k_global_missing, "missing: ", "MESH_RT_ABI"},
    {"pick_exec NULL manifest", c_pick_m, "invalid: ", "manifest"},
    {"pick_exec NULL exec", c_pick_exec, "invalid: ", "exec"},
    {"pick_exec NULL have", c_pick_have, "invalid: ", "have"},
    {"pick_exec no match", c_pick_none, "unsupported: ", "cuda"},
    {"check_manifest NULL src", c_check_src, "invalid: ", "src"},
    {"check_manifest NULL out", c_check_out, "invalid: ", "out"},
    {"check_manifest no manifest", c_check_nomanifest,
     "manifest: ", "manifest.json"},
    {"check_manifest kind 77", c_check_kind, "unsupported: ", "77"},
    {"prepare_any NULL src", c_prep_src, "invalid: ", "src"},
    {"prepare_any NULL out", c_prep_out, "invalid: ", "out"},
    {"prepare_any NULL comps", c_prep_comps, "invalid: ", "comps"},
    {"prepare_any no compiler", c_prep_none, "unsupported: ", "native"},
    {"manifest_parse NULL out", c_mparse_out, "invalid: ", "out"},
    {"manifest_parse NULL json", c_mparse_json, "invalid: ", "json"},
    {"manifest_parse empty", c_mparse_empty, "manifest: ", "empty"},
    {"manifest_parse too big", c_mparse_big, "manifest: ", "bytes"},
    {"manifest_copy NULL dst", c_mcopy_dst, "invalid: ", "dst"},
    {"manifest_copy NULL src", c_mcopy_src, "invalid: ", "src"},
    {"payload_read NULL out", c_pread_out, "invalid: ", "out"},
    {"payload_read NULL root", c_pread_root, "invalid: ", "root"},
    {"payload_read empty root", c_pread_root_empty, "invalid: ", "root"},
    {"payload_read NULL name", c_pread_name, "invalid: ", "name"},
    {"payload_read name ..", c_pread_dotdot, "invalid: ", "name"},
    {"payload_read absent", c_pread_missing, "missing: ", "p"},
    {"payload_init NULL payload", c_pinit_p, "invalid: ", "payload"},
    {"payload_init NULL name", c_pinit_name, "invalid: ", "name"},
    {"payload_init name a/b", c_pinit_slash, "invalid: ", "name"},
    {"payload_add NULL payload", c_padd_p, "invalid: ", "payload"},
    {"payload_add NULL data", c_padd_data, "invalid: ", "data"},
    {"payload_add NULL path", c_padd_path, "invalid: ", "path"},
    {"payload_add absolute path", c_padd_abs, "invalid: ", "path"},
    {"payload_add path with ..", c_padd_dotdot, "invalid: ", "path"},
    {"payload_add twice", c_padd_twice, "invalid: ", "manifest.json"},
    {"payload_add too big", c_padd_big, "limits: ", "bytes"},
    {"payload_copy NULL dst", c_pcopy_dst, "invalid: ", "dst"},
    {"payload_copy NULL src", c_pcopy_src, "invalid: ", "src"},
    {"backend_open NULL out", c_open_out, "invalid: ", "out"},
    {"backend_open kind 99", c_open_kind, "unsupported: ", "kind"},
    {"backend_open RIG_MESH_HALT_MS", c_open_env_halt,
     "invalid: ", "RIG_MESH_HALT_MS"},
    {"backend_open RIG_MESH_GRACE_MS", c_open_env_grace,
     "invalid: ", "RIG_MESH_GRACE_MS"},
    {"backend_open RIG_MESH_ONLINE_TIMEOUT_MS", c_open_env_online,
     "invalid: ", "RIG_MESH_ONLINE_TIMEOUT_MS"},
    {"driver_open NULL backend", c_dopen_b, "invalid: ", "backend"},
    {"driver_open backend without ops", c_dopen_ops, "invalid: ", "ops"},
    {"driver_open NULL out", c_dopen_out, "invalid: ", "out"},
    {"driver_prepare NULL driver", c_dprep_d, "invalid: ", "driver"},
    {"driver_prepare NULL src", c_dprep_src, "invalid: ", "src"},
    {"driver_prepare NULL out", c_dprep_out, "invalid: ", "out"},
    {"driver_start NULL driver", c_dstart_d, "invalid: ", "driver"},
    {"driver_start NULL prepared", c_dstart_p, "invalid: ", "prepared"},
    {"driver_start NULL slot", c_dstart_slot, "invalid: ", "slot"},
    {"driver_start too many nodes", c_dstart_nodes, "limits: ", "nodes"},
    {"driver_poll NULL driver", c_dpoll_d, "invalid: ", "driver"},
    {"driver_poll NULL state", c_dpoll_state, "invalid: ", "state"},
    {"driver_poll slot 32", c_dpoll_slot, "invalid: ", "slot"},
    {"driver_poll empty slot", c_dpoll_empty, "invalid: ", "slot"},
    {"driver_wait NULL driver", c_dwait_d, "invalid: ", "driver"},
    {"driver_wait slot UINT32_MAX", c_dwait_slot, "invalid: ", "slot"},
    {"driver_stop NULL driver", c_dstop_d, "invalid: ", "driver"},
    {"driver_stop slot 99", c_dstop_slot, "invalid: ", "slot"},
    {"driver_stop empty slot", c_dstop_empty, "invalid: ", "slot"},
    {"worker_attach NULL out", c_wattach_out, "invalid: ", "out"},
    {"worker_attach no MESH_MAILBOX_FD", c_wattach_unset,
     "invalid: ", "MESH_MAILBOX_FD"},
    {"worker_attach MESH_SLOT=seven", c_wattach_slot_word,
     "invalid: ", "MESH_SLOT"},
    {"worker_attach slot 32", c_wattach_slot_range, "invalid: ", "slot"},
    {"worker_attach empty mailbox", c_wattach_short,
     "invalid: ", "MESH_MAILBOX_FD"},
#ifdef RIG_HAVE_CUDA
    {"cuda_describe NULL out", c_cuda_describe, "invalid: ", "out"},
    {"cuda_compiler_open NULL out", c_cuda_comp_out, "invalid: ", "out"},
    {"cuda_compiler_open NULL arch", c_cuda_comp_arch, "invalid: ", "arch"},
    {"cuda_compiler_open arch gfx90a", c_cuda_comp_arch_bad,
     "invalid: ", "arch"},
#endif
};

/* ---- include/mesh: neutral values ------------------------------------ */

static bool n_caps(void)
{
    mesh_caps c;
    memset(&c, 0, sizeof(c));
    c.kind = 99;
    mesh_caps_copy(NULL, &c);
    mesh_caps_copy(&c, NULL);
    mesh_caps_free(NULL);
    char *label = mesh_backend_label(UINT32_MAX);
    bool ok = label != NULL && strncmp(label, "backend", 7) == 0;
    free(label);
    return ok && mesh_caps_word(NULL) == 0 &&
           strcmp(mesh_caps_backend_name(NULL), "unknown") == 0 &&
           strcmp(mesh_caps_backend_name(&c), "unknown") == 0;
}
static bool n_kernel_stream(void)
{
    mesh_kernel_drop(NULL);
    mesh_stream_drop(NULL);
    mesh_prepared_free(NULL);
    return mesh_kernel_scratch(NULL) == 0 &&
           mesh_kernel_scratch(&kernel_no_ops) == 0 &&
           mesh_kernel_scratch(&kernel_bare) == 0 &&
           mesh_kernel_native(NULL) == NULL;
}
static bool n_backend_defaults(void)
{
    mesh_backend none = {NULL, NULL};
    mesh_backend_sample(NULL);
    mesh_backend_sample(&none);
    mesh_backend_destroy(NULL);
    mesh_backend_destroy(&none);
    mesh_backend_on_cleanup(MESH_CLEANUP_NATIVE, NULL);
    return mesh_backend_crashed(NULL, NULL, NULL) == NULL &&
           mesh_backend_crashed(&none, NULL, NULL) == NULL &&
           !mesh_backend_owns_halt(NULL) && !mesh_backend_reads_live(NULL) &&
           mesh_backend_online_timeout_ms(NULL) == 2000 &&
           mesh_backend_online_timeout_ms(&none) == 2000 &&
           !mesh_backend_admit(NULL, NULL, 1, 0, NULL) &&
           !mesh_backend_admit(&none, NULL, 1, 0, NULL);
}
static bool n_runs_here(void)
{
    mesh_manifest m = manifest_native();
    return !mesh_runs_here(NULL, &m, have_native, 1) &&
           !mesh_runs_here("/nonexistent", NULL, have_native, 1) &&
           !mesh_runs_here("/nonexistent", &m, NULL, 1) &&
           !mesh_runs_here("/nonexistent", &m, have_native, 0);
}
static bool n_native(void)
{
    return mesh_native_binary(NULL, "p") == NULL &&
           mesh_native_binary("/d", NULL) == NULL &&
           mesh_native_target() != NULL;
}
static bool n_manifest(void)
{
    mesh_manifest_free(NULL);
    return !mesh_manifest_lists(NULL, MESH_BACKEND_NATIVE) &&
           !mesh_manifest_name_ok(NULL) && !mesh_manifest_name_ok("") &&
           !mesh_manifest_name_ok(".hidden") && !mesh_manifest_file_ok(NULL) &&
           !mesh_manifest_file_ok("a/b");
}
static bool n_payload(void)
{
    mesh_payload p;
    memset(&p, 0, sizeof(p));
    mesh_payload_free(NULL);
    return mesh_payload_find(NULL, "manifest.json") == NULL &&
           mesh_payload_find(&p, NULL) == NULL && mesh_payload_hash(NULL) == 0;
}
static bool n_table(void)
{
    uint32_t k = 12345;
    return !mesh_backend_built(UINT32_MAX) &&
           mesh_backend_name(UINT32_MAX) == NULL &&
           !mesh_backend_kind(NULL, &k) && !mesh_backend_kind("bogus", &k) &&
           k == 12345 && mesh_backend_kind("native", NULL);
}
static bool n_driver(void)
{
    mesh_driver_close(NULL);
    return mesh_driver_point(NULL, 0, 0) == 0 &&
           mesh_driver_point(native_d, MESH_PROG_SLOTS, 0) == 0 &&
           mesh_driver_point(native_d, 0, UINT32_MAX) == 0 &&
           mesh_driver_program(NULL, 0) == NULL &&
           mesh_driver_program(native_d, MESH_PROG_SLOTS) == NULL &&
           mesh_driver_program(native_d, 0) == NULL;
}
static bool n_worker(void)
{
    size_t bytes = 7;
    mesh_worker_online(NULL);
    mesh_worker_fail(NULL, 1);
    mesh_worker_detach(NULL);
    return mesh_worker_halted(NULL) && !mesh_worker_point(NULL, 0, 1) &&
           mesh_worker_slot(NULL) == MESH_PROG_SLOTS &&
           mesh_worker_node(NULL) == 0 && mesh_worker_nodes(NULL) == 0 &&
           mesh_worker_online_nodes(NULL) == 0 &&
           mesh_worker_scratch(NULL, &bytes) == NULL && bytes == 0 &&
           mesh_worker_scratch(NULL, NULL) == NULL;
}
#ifdef RIG_HAVE_CUDA
static bool n_cuda(void)
{
    mesh_cuda_compiler_close(NULL);
    return true;
}
#endif

static const neutral_case mesh_neutral[] = {
    {"caps NULL / unknown kind", n_caps},
    {"kernel, stream, prepared NULL", n_kernel_stream},
    {"backend defaults on NULL", n_backend_defaults},
    {"runs_here NULL", n_runs_here},
    {"native_binary NULL", n_native},
    {"manifest NULL / bad names", n_manifest},
    {"payload NULL", n_payload},
    {"backend table out of range", n_table},
    {"driver NULL / out of range", n_driver},
    {"worker NULL", n_worker},
#ifdef RIG_HAVE_CUDA
    {"cuda compiler_close NULL", n_cuda},
#endif
};

static int mesh_setup(void)
{
    char *err = NULL;
    if (!mesh_backend_open(MESH_BACKEND_NATIVE, NULL, &native_b, &err) ||
        !mesh_driver_open(native_b, &native_d, &err)) {
        fprintf(stderr, "the native backend: %s\n", err);
        free(err);
        return 1;
    }
    return 0;
}

static int mesh_teardown(void)
{
    mesh_driver_close(native_d);
    mesh_backend_destroy(native_b);
    native_d = NULL;
    native_b = NULL;
    return 0;
}

static void test_mesh_bad(void)
{
    run_bad(mesh_bad, NCASES(mesh_bad));
}

static void test_mesh_neutral(void)
{
    run_neutral(mesh_neutral, NCASES(mesh_neutral));
}
#endif

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite abi =
        CU_add_suite("rig/remote_abi.h, rig/settings.h", NULL, NULL);
    CU_add_test(abi, "bad arguments", test_abi_bad);
    CU_add_test(abi, "neutral values", test_abi_neutral);
#ifdef T_MESH
    CU_pSuite mesh = CU_add_suite("include/mesh", mesh_setup, mesh_teardown);
    CU_add_test(mesh, "bad arguments", test_mesh_bad);
    CU_add_test(mesh, "neutral values", test_mesh_neutral);
#endif
    printf("bad input cases: %zu of rig, %zu neutral", NCASES(abi_bad),
           NCASES(abi_neutral));
#ifdef T_MESH
    printf("; %zu of mesh, %zu neutral", NCASES(mesh_bad),
           NCASES(mesh_neutral));
#endif
    printf("\n");
    return t_run_registry();
}
