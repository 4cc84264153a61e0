/* SPDX-License-Identifier: BSD-3-Clause */
/* Tables of bad-input cases: each fallible case is a name, a call, the
 * reason word its error must start with and the argument its message must
 * name (as a whole word).  Each call runs twice, with an err pointer and
 * with NULL (the message dropped), so a function may neither crash on
 * either nor leak (valgrind runs these tests).  Void and pure functions get
 * a NULL or out-of-range argument and must return their documented neutral
 * value.  Included once by tests/test_badinput.c (the ABI) and by
 * tests/mesh/test_badinput_mesh.c (the executors). */
#ifndef RIG_TEST_BADINPUT_UTIL_H
#define RIG_TEST_BADINPUT_UTIL_H

#include "test_util.h"

#include <ctype.h>
#include <stdbool.h>

/* ---- the tables' shape --------------------------------------------------- */

typedef struct {
    const char *name;
    bool (*call)(char **err);
    const char *reason; /* the message starts with it */
    const char *arg;    /* the message names it, as a whole word */
} bad_case;

typedef struct {
    const char *name;
    bool (*neutral)(void); /* true: the documented neutral value came back */
} neutral_case;

static inline bool word_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* Whether msg holds word with no identifier character on either side. */
static inline bool names(const char *msg, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(msg, word); p != NULL;
         p = strstr(p + 1, word)) {
        bool left = p == msg || !word_char(p[-1]) || !word_char(word[0]);
        bool right = !word_char(p[n]) || !word_char(word[n - 1]);
        if (left && right) {
            return true;
        }
    }
    return false;
}

static inline void run_bad(const bad_case *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *err = NULL;
        bool ok = c[i].call(&err);
        if (!ok && err != NULL && !names(err, c[i].arg)) {
            T_FAILF("%s: \"%s\" does not name %s", c[i].name, err, c[i].arg);
        }
        if (ok || err == NULL ||
            strncmp(err, c[i].reason, strlen(c[i].reason)) != 0) {
            fprintf(stderr, "case %s: %s\n", c[i].name,
                    ok ? "succeeded" : (err != NULL ? err : "(no message)"));
        }
        T_ERR(ok, err, c[i].reason);
        /* err may be NULL everywhere: same outcome, no crash. */
        T_TRUE(!c[i].call(NULL));
    }
}

static inline void run_neutral(const neutral_case *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!c[i].neutral()) {
            T_FAILF("%s: not the neutral value", c[i].name);
        } else {
            CU_PASS(c[i].name);
        }
    }
}

#define NCASES(t) (sizeof(t) / sizeof((t)[0]))

#endif
