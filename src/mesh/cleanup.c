/* SPDX-License-Identifier: BSD-3-Clause */
/* The cleanup registry every exit path runs: atexit and fatal signals.
 *
 * Lock-free so that a signal handler may run it: a fixed array of entries,
 * each claimed by a compare-and-swap of its state.  Running picks the
 * pending entry of the lowest (order, sequence) again and again and claims it
 * by exchanging its state, so each registration runs once even when exit()
 * and a signal race. */
#include "mesh/backend.h"

#include "../util/util_internal.h"

#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define CLEANUP_MAX 32

enum { ENTRY_FREE = 0, ENTRY_FILLING, ENTRY_PENDING, ENTRY_RUNNING };

typedef struct {
    atomic_int state;
    int order;
    uint64_t seq;
    void (*fn)(void);
} cleanup_entry;

static cleanup_entry entries[CLEANUP_MAX];
static atomic_uint_least64_t next_seq;
static atomic_flag installed = ATOMIC_FLAG_INIT;

static const int fatal_signals[] = {SIGHUP, SIGINT, SIGQUIT, SIGILL, SIGABRT,
                                    SIGBUS, SIGFPE, SIGSEGV, SIGTERM};

void mesh_backend_cleanup(void)
{
    for (;;) {
        cleanup_entry *best = NULL;
        for (int i = 0; i < CLEANUP_MAX; i++) {
            cleanup_entry *e = &entries[i];
            if (atomic_load_explicit(&e->state, memory_order_acquire) !=
                ENTRY_PENDING) {
                continue;
            }
            if (best == NULL || e->order < best->order ||
                (e->order == best->order && e->seq < best->seq)) {
                best = e;
            }
        }
        if (best == NULL) {
            return;
        }
        int want = ENTRY_PENDING;
        if (!atomic_compare_exchange_strong_explicit(
                &best->state, &want, ENTRY_RUNNING, memory_order_acq_rel,
                memory_order_acquire)) {
            continue; /* another thread claimed it */
        }
        void (*fn)(void) = best->fn;
        atomic_store_explicit(&best->state, ENTRY_FREE, memory_order_release);
        fn();
    }
}

static void on_exit_cleanup(void)
{
    mesh_backend_cleanup();
}

/* What each fatal signal did before rig's handler, to chain to it. */
static struct sigaction previous[NSIG];

static void on_fatal_signal(int sig, siginfo_t *si, void *uc)
{
    mesh_backend_cleanup();
    /* Then whatever was there before: the default (re-raised, so the
     * process ends by this signal) or a handler someone else installed
     * (UCX's backtrace printer, the application's), which still runs. */
    struct sigaction *old = &previous[sig];
    sigaction(sig, old, NULL);
    if ((old->sa_flags & SA_SIGINFO) != 0 && old->sa_sigaction != NULL) {
        old->sa_sigaction(sig, si, uc);
    } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
    } else {
        raise(sig);
        return;
    }
    /* A chained handler that returned: end by the signal as it would. */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_handlers(void)
{
    if (atomic_flag_test_and_set(&installed)) {
        return;
    }
    atexit(on_exit_cleanup);
    for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]);
         i++) {
        int sig = fatal_signals[i];
        struct sigaction old;
        if (sigaction(sig, NULL, &old) != 0) {
            continue;
        }
        bool dflt =
            (old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == SIG_DFL;
        bool fault = sig == SIGILL || sig == SIGABRT || sig == SIGBUS ||
                     sig == SIGFPE || sig == SIGSEGV;
        if (!dflt && !fault) {
            /* An application that handles SIGINT/SIGTERM/... decides
             * itself whether the process ends: its handler stays alone. */
            continue;
        }
        previous[sig] = old;
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_fatal_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigaction(sig, &sa, NULL);
    }
}

void mesh_backend_on_cleanup(int order, void (*fn)(void))
{
    if (fn == NULL) {
        return;
    }
    install_handlers();
    for (int i = 0; i < CLEANUP_MAX; i++) {
        cleanup_entry *e = &entries[i];
        if (atomic_load_explicit(&e->state, memory_order_acquire) ==
                ENTRY_PENDING &&
            e->fn == fn && e->order == order) {
            return;
        }
    }
    for (int i = 0; i < CLEANUP_MAX; i++) {
        cleanup_entry *e = &entries[i];
        int want = ENTRY_FREE;
        if (atomic_compare_exchange_strong_explicit(
                &e->state, &want, ENTRY_FILLING, memory_order_acq_rel,
                memory_order_relaxed)) {
            e->order = order;
            e->fn = fn;
            e->seq =
                atomic_fetch_add_explicit(&next_seq, 1, memory_order_relaxed);
            atomic_store_explicit(&e->state, ENTRY_PENDING,
                                  memory_order_release);
            return;
        }
    }
    rig_log(RIG_LOG_WARN, "mesh: cleanup registry full (%d); order %d dropped",
            CLEANUP_MAX, order);
}
