/* SPDX-License-Identifier: BSD-3-Clause */
/* The ABI layer's private structures: an end and its rail. */
#ifndef RIG_ABI_INTERNAL_H
#define RIG_ABI_INTERNAL_H

#include "rig/remote_abi.h"

#include <stdatomic.h>

/* One reference count for the pair (rail, local end): the spec says either
 * keeps both alive.  It lives in the end when there is one, else in the
 * rail. */
struct rig_end {
    rig_area outbound, inbound, counts;
    void (*wake)(void *self, uint64_t c);
    rig_ready_fn ready_fn;
    void (*release)(void *self);
    void *self;
    atomic_long refs;
    atomic_bool live; /* in the table of live ends: ready wakes the rail */
    atomic_int slot;  /* 1: one rig_end_ready call holds it (end.c) */
    atomic_int busy;  /* other rig_end_ready calls inside wake right now */
    bool tabled;      /* entered in the table (under the table lock) */
    rig_rail *rail;   /* set once by rig_rail_make */
    int64_t *land;    /* dst of each received transfer (desc->receive) */
    size_t nland;
    void (*progress)(void *arg); /* desc->progress: waits drive it */
    void *progress_arg;
    struct rig_end *next_live; /* chain of the table bucket */
};

struct rig_rail {
    int64_t id;
    rig_end *local;
    atomic_long refs; /* used only when local is NULL */
    /* rig_rail_on_release: run once when the pair goes (NULL: none). */
    void (*gone)(void *arg);
    void *gone_arg;
    atomic_bool watched; /* gone was set (once) */
};

/* The mapped carrier's window around its store of `arrived` (counts.c;
 * rail/base/carrier.h declares them for the carriers and says how). */
bool rig_count_window_open(void *counts);
void rig_count_window_close(void *counts, uint64_t c);

/* rig_count_advance(counts, RIG_READY_AT, c) for 1 <= c < RIG_COUNT_FAILED
 * and counts not NULL, called without the PLT: rig_end_ready's step. */
uint64_t rig_count_raise_ready(void *counts, uint64_t c);

/* The table of live ends (end.c). */
bool rig_live_insert(rig_end *e, char **err);
void rig_live_remove(rig_end *e);

#endif
