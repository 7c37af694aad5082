/*
 * bench_util.h — the small pieces the engine benchmarks share: a monotonic
 * clock, the comparison qsort needs to take medians, and the parsing of
 * their integer options.
 */
#ifndef MHLA_BENCH_UTIL_H
#define MHLA_BENCH_UTIL_H

#include <errno.h>
#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* qsort's comparison for doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* s as an integer in [lo, hi] into *out: 0, or -1 when it is not one. */
static inline int bench_parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* A comma list of integers in [lo, hi] ("1,16") into out (at most max of
 * them): their count, or -1 for an empty item, one out of range, text that
 * is not an integer, or more than max. */
static inline int bench_parse_list(const char *s, long lo, long hi, int *out, int max)
{
    int n = 0;
    for (const char *p = s;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < lo || v > hi || (*end && *end != ',') || n == max)
            return -1;
        out[n++] = (int)v;
        if (!*end)
            return n;
        p = end + 1;
    }
}

#endif
