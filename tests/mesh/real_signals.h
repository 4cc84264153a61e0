/* SPDX-License-Identifier: BSD-3-Clause */
/* Included once by a test program whose processes crash on purpose: keeps
 * their SIGSEGVs real signals in sanitized builds (ASan and TSan would turn
 * them into an exit).  *SAN_OPTIONS still override. */
#ifndef RIG_TEST_REAL_SIGNALS_H
#define RIG_TEST_REAL_SIGNALS_H

__attribute__((visibility("default"), used)) const char *
__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "handle_segv=0";
}
__attribute__((visibility("default"), used)) const char *
__tsan_default_options(void);
const char *__tsan_default_options(void)
{
    return "handle_segv=0";
}

#endif
