/*
 * bench_util.h — the small pieces the engine benchmarks share: the
 * comparison qsort needs to take medians, and the parsing of their list
 * options (the clock is base's mhla_now, the flags rows of base's option
 * table, mhla_opts).
 */
#ifndef MHLA_BENCH_UTIL_H
#define MHLA_BENCH_UTIL_H

#include "base.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* qsort's comparison for doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A comma list of integers in [lo, hi] ("1,16") into out (at most max of
 * them), the count in *n: 0, or -1 with the message naming the flag: the
 * list's shape (an empty item, more than max), or the value. */
static inline int bench_opt_list(const char *flag, const char *s, long lo, long hi, int *out,
                                 int max, int *n, char *err, size_t errlen)
{
    int count = 0;
    for (const char *p = s;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (*p == ',' || !*p || count == max) {
            snprintf(err, errlen, "--%s takes a list like 1,16 (up to %d items), not '%s'", flag,
                     max, s);
            return -1;
        }
        if (end == p || (*end && *end != ',') || errno || v < lo || v > hi) {
            snprintf(err, errlen, "--%s takes an integer from %ld to %ld in each item, not '%s'",
                     flag, lo, hi, s);
            return -1;
        }
        out[count++] = (int)v;
        if (!*end)
            break;
        p = end + 1;
    }
    *n = count;
    return 0;
}

#endif
