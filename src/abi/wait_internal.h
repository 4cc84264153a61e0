/* SPDX-License-Identifier: BSD-3-Clause */
/* Sleeping waits and their waking, shared by the waits (wait.c) and the
 * count stores (counts.c). */
#ifndef RIG_WAIT_INTERNAL_H
#define RIG_WAIT_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>

/* Waits of this process asleep in the kernel right now.  A store that
 * raises `sent` or `arrived` with a seq_cst read-modify-write loads it
 * (seq_cst) and wakes them when it is not 0; a waiter increments it
 * (seq_cst) before its last look at the counts.  Store-then-load on both
 * sides in the seq_cst order: either the store sees the waiter or the
 * waiter sees the count (wait.c argues it in full). */
extern atomic_uint rig_wait_sleepers;

/* Wakes every sleeping wait of this process (each looks at its counts
 * again). */
void rig_wait_wake(void);

/* Whether waits of this process give the core away at once (the mode is
 * yield or block, or auto found the node oversubscribed): for the other
 * waiting loops of rig (rig_backoff_step). */
bool rig_wait_yields(void);

#endif
