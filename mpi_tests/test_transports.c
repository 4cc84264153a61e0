/* SPDX-License-Identifier: BSD-3-Clause */
/* The transport layer without mpirun: the registry and its check of the
 * ops tables' required slots, and the lock order that rig_lock asserts.
 *
 * Linked against the transports' and the ABI's convenience libraries (not
 * librig, which hides them); it calls no MPI function, so it runs as a
 * plain program.  The lock-order cases run in a child each and expect it
 * to abort, except in builds with NDEBUG (no check there: skipped). */
#include "../src/rail/transports.h"
#include "../src/util/util_internal.h"

#include "../tests/test_util.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_registry(void)
{
    const rig_transport_ops *ucx = rig_transport_at(0);
    const rig_transport_ops *mpi = rig_transport_at(1);
    T_TRUE(ucx != NULL && strcmp(ucx->name, "ucx") == 0); /* the default */
    T_TRUE(mpi != NULL && strcmp(mpi->name, "mpi") == 0);
    T_TRUE(rig_transport_at(2) == NULL);
    const rig_transport_ops *found = NULL;
    char *err = NULL;
    T_OK(rig_transport_find("mpi", "transport", &found, &err), err);
    T_TRUE(found == mpi);
    T_ERR(rig_transport_find("carrier-pigeon", "RIG_TRANSPORT", &found, &err),
          err, "invalid: RIG_TRANSPORT \"carrier-pigeon\"");
    T_TRUE(rig_transport_find("carrier-pigeon", "RIG_TRANSPORT", &found,
                              &err) == false &&
           strstr(err, "(ucx, mpi)") != NULL);
    free(err);
    err = NULL;
    T_ERR(rig_transport_find(NULL, "transport", &found, &err), err, "invalid:");
    T_TRUE(found == mpi); /* untouched by the failed finds */
}

/* Every required slot, and that leaving out an optional one is fine. */
static void test_required_slots(void)
{
    const rig_transport_ops *ucx = rig_transport_at(0);
    char *err = NULL;
    T_OK(rig_transport_check(ucx, &err), err);
    T_OK(rig_transport_check(rig_transport_at(1), &err), err);
    T_ERR(rig_transport_check(NULL, &err), err, "invalid:");
    static const struct {
        size_t at;
        const char *slot;
    } required[] = {
        {offsetof(rig_transport_ops, name), "name"},
        {offsetof(rig_transport_ops, about), "about"},
        {offsetof(rig_transport_ops, open), "open"},
        {offsetof(rig_transport_ops, wire), "wire"},
        {offsetof(rig_transport_ops, rail), "rail"},
        {offsetof(rig_transport_ops, rail_far), "rail_far"},
        {offsetof(rig_transport_ops, owns), "owns"},
        {offsetof(rig_transport_ops, fail), "fail"},
        {offsetof(rig_transport_ops, failed), "failed"},
        {offsetof(rig_transport_ops, gone), "gone"},
        {offsetof(rig_transport_ops, stop), "stop"},
        {offsetof(rig_transport_ops, close), "close"},
    };
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        rig_transport_ops t = *ucx;
        memset((char *)&t + required[i].at, 0, sizeof(void *));
        char want[96];
        snprintf(want, sizeof(want), "invalid: transport %s lacks its %s slot",
                 i == 0 ? "(unnamed)" : "ucx", required[i].slot);
        T_ERR(rig_transport_check(&t, &err), err, want);
    }
    rig_transport_ops t = *ucx;
    t.finalize = NULL;
    t.info = NULL;
    T_OK(rig_transport_check(&t, &err), err);
}

/* Runs body in a child; its end: the signal that killed it, else 0. */
static int in_child(void (*body)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        body();
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

static pthread_mutex_t outer = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t inner = PTHREAD_MUTEX_INITIALIZER;

static void in_order(void)
{
    rig_lock(&outer, 20);
    rig_lock(&inner, 30);
    rig_unlock(&inner, 30);
    rig_unlock(&outer, 20);
    rig_lock(&inner, 30); /* alone again: any level */
    rig_unlock(&inner, 30);
}

static void reversed(void)
{
    rig_lock(&inner, 30);
    rig_lock(&outer, 20);
}

static void same_level(void)
{
    rig_lock(&outer, 20);
    rig_lock(&inner, 20);
}

#ifndef NDEBUG
static void test_lock_order(void)
{
    T_EQ_U(in_child(in_order), 0);
    T_EQ_U(in_child(reversed), SIGABRT);
    T_EQ_U(in_child(same_level), SIGABRT);
}
#endif

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 99;
    }
    CU_pSuite s = CU_add_suite("transports", NULL, NULL);
    CU_add_test(s, "registry", test_registry);
    CU_add_test(s, "required slots", test_required_slots);
#ifndef NDEBUG
    CU_add_test(s, "lock order", test_lock_order);
    return t_run_registry();
#else
    int rc = t_run_registry();
    if (rc == 0) {
        printf("SKIP: the lock order is not checked with NDEBUG\n");
        return 77;
    }
    return rc;
#endif
}
