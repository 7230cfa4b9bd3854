/* t.h: a tiny test harness. CHECK* print file:line and both values, and keep going;
 * t_done() returns the exit status (non-zero if any check failed). */
#ifndef QHX_TEST_T_H
#define QHX_TEST_T_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int t_failures, t_checks;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        t_checks++;                                                                  \
        if (!(cond)) {                                                               \
            t_failures++;                                                            \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                            \
    } while (0)

#define CHECK_EQ(a, b)                                                                        \
    do {                                                                                      \
        long long t_a = (long long)(a), t_b = (long long)(b);                                 \
        t_checks++;                                                                           \
        if (t_a != t_b) {                                                                     \
            t_failures++;                                                                     \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%lld vs %lld)\n", __FILE__,   \
                    __LINE__, #a, #b, t_a, t_b);                                              \
        }                                                                                     \
    } while (0)

#define CHECK_STR(a, b)                                                                      \
    do {                                                                                     \
        const char *t_a = (a), *t_b = (b);                                                   \
        t_checks++;                                                                          \
        if (!t_a || !t_b || strcmp(t_a, t_b) != 0) {                                         \
            t_failures++;                                                                    \
            fprintf(stderr, "%s:%d: CHECK_STR failed: %s == %s (\"%s\" vs \"%s\")\n",        \
                    __FILE__, __LINE__, #a, #b, t_a ? t_a : "(null)", t_b ? t_b : "(null)"); \
        }                                                                                    \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                \
    do {                                                                                     \
        double t_a = (double)(a), t_b = (double)(b);                                         \
        t_checks++;                                                                          \
        if (!(fabs(t_a - t_b) <= (tol))) {                                                   \
            t_failures++;                                                                    \
            fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s ~ %s (%.9g vs %.9g, tol %g)\n",     \
                    __FILE__, __LINE__, #a, #b, t_a, t_b, (double)(tol));                    \
        }                                                                                    \
    } while (0)

/* A message mentioning `needle` (for error-text checks). */
#define CHECK_CONTAINS(hay, needle)                                                          \
    do {                                                                                     \
        const char *t_h = (hay);                                                             \
        t_checks++;                                                                          \
        if (!t_h || !strstr(t_h, (needle))) {                                                \
            t_failures++;                                                                    \
            fprintf(stderr, "%s:%d: CHECK_CONTAINS failed: \"%s\" lacks \"%s\"\n", __FILE__, \
                    __LINE__, t_h ? t_h : "(null)", (needle));                               \
        }                                                                                    \
    } while (0)

static inline int t_done(const char *name) {
    fprintf(stderr, "%s: %d checks, %d failed\n", name, t_checks, t_failures);
    return t_failures ? 1 : 0;
}

#endif
