/* SPDX-License-Identifier: BSD-3-Clause */
/* The table of every RIG_* setting, for rig_info and the docs. */
#include "rig/settings.h"

static const rig_setting settings[] = {
    {"RIG_LOG", "warn", "log level: error, warn, info or debug"},
};

const rig_setting *rig_settings(size_t *n)
{
    if (n == NULL) {
        return NULL;
    }
    *n = sizeof(settings) / sizeof(settings[0]);
    return settings;
}
