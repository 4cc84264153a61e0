/* SPDX-License-Identifier: BSD-3-Clause */
/* Bad input to every public function of the ABI layer (rig/remote_abi.h,
 * rig/settings.h): tables of calls (tests/badinput_util.h).  The
 * executors' are in tests/mesh/test_badinput_mesh.c. */
#include "config.h"

#include "rig/remote_abi.h"
#include "rig/settings.h"
#include "badinput_util.h"

#include <stdint.h>
#include <unistd.h>

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

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite abi =
        CU_add_suite("rig/remote_abi.h, rig/settings.h", NULL, NULL);
    CU_add_test(abi, "bad arguments", test_abi_bad);
    CU_add_test(abi, "neutral values", test_abi_neutral);
    printf("bad input cases: %zu of rig, %zu neutral\n", NCASES(abi_bad),
           NCASES(abi_neutral));
    return t_run_registry();
}
