/* SPDX-License-Identifier: BSD-3-Clause */
/* The registry of transports: every transport this build has, by name.
 *
 * A new transport is a folder under src/rail/ with an ops table
 * (base/transport.h) and one line in transports.c; the job layer needs
 * no edit.  The table is checked once, when first used: a transport
 * whose required slots are missing is left out and logged as an error. */
#ifndef RIG_TRANSPORTS_H
#define RIG_TRANSPORTS_H

#include "base/transport.h"

#include <stdbool.h>
#include <stddef.h>

/* The transport named name; false with "invalid: <what> \"name\" is not a
 * transport of this build (ucx, mpi)" -- what names where the name came
 * from (e.g. "RIG_TRANSPORT").  Any thread. */
bool rig_transport_find(const char *name, const char *what,
                        const rig_transport_ops **out, char **err);

/* The i-th usable transport (0 is the default), or NULL past the last. */
const rig_transport_ops *rig_transport_at(size_t i);

/* Whether ops has every required slot; false with "invalid: transport
 * NAME lacks its SLOT slot" (for the registry's check and its test). */
bool rig_transport_check(const rig_transport_ops *ops, char **err);

#endif
