/* SPDX-License-Identifier: BSD-3-Clause */
/* Whether the test is built with a sanitizer, for the bounds and checks
 * a sanitizer's runtime changes (its wake-ups cost more, its memory is
 * not the test's).  GCC says so by __SANITIZE_*__, clang by
 * __has_feature. */
#ifndef RIG_TESTS_SANITIZER_H
#define RIG_TESTS_SANITIZER_H

#ifndef __has_feature
#define __has_feature(x) 0
#endif

/* 1 under AddressSanitizer, else 0. */
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer)
#define RIG_TEST_ASAN 1
#else
#define RIG_TEST_ASAN 0
#endif

/* 1 under AddressSanitizer or ThreadSanitizer, else 0. */
#if RIG_TEST_ASAN || defined(__SANITIZE_THREAD__) ||                           \
    __has_feature(thread_sanitizer)
#define RIG_TEST_SANITIZED 1
#else
#define RIG_TEST_SANITIZED 0
#endif

#endif
