/* SPDX-License-Identifier: BSD-3-Clause */
/* rig/api.h: the export macro every public rig declaration carries.
 *
 * librig is built with -fvisibility=hidden; only declarations marked RIG_API
 * are exported, so internal helpers never become part of the ABI. */
#ifndef RIG_API_H
#define RIG_API_H

#if defined(__GNUC__) || defined(__clang__)
#define RIG_API __attribute__((visibility("default")))
#else
#define RIG_API
#endif

#endif
