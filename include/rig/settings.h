/* SPDX-License-Identifier: BSD-3-Clause */
/* rig/settings.h: the RIG_* environment settings rig reads.
 *
 * Every layer's settings are listed in one table so that `rig_info` and
 * users can see them all with their defaults.  An options struct field
 * given by the program wins over its default; the environment variable wins
 * over both, as UCX and Open MPI users expect. */
#ifndef RIG_SETTINGS_H
#define RIG_SETTINGS_H

#include <rig/api.h>

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One setting: its variable, default (as text) and what it does. */
typedef struct {
    const char *name;
    const char *dflt;
    const char *what;
} rig_setting;

/* The table of every RIG_* setting of this build; *n gets its length (n
 * must not be NULL; NULL is returned if it is).  Static storage. */
RIG_API const rig_setting *rig_settings(size_t *n);

#ifdef __cplusplus
}
#endif

#endif
