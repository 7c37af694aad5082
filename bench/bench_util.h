/*
 * bench_util.h — the small pieces the engine benchmarks share: a monotonic
 * clock and the comparison qsort needs to take medians.
 */
#ifndef MHLA_BENCH_UTIL_H
#define MHLA_BENCH_UTIL_H

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

#endif
