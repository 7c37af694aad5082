/*
 * util.c — growable buffers, clocks, constant-time comparison, OS randomness.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

int srv_buf_append(srv_buf *b, const void *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) {
            if (cap > ((size_t)1 << 40))
                return -1;
            cap *= 2;
        }
        char *d = realloc(b->data, cap);
        if (!d)
            return -1;
        b->data = d;
        b->cap = cap;
    }
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

int srv_buf_appendf(srv_buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    if ((size_t)n < sizeof small)
        return srv_buf_append(b, small, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (!big)
        return -1;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int rc = srv_buf_append(b, big, (size_t)n);
    free(big);
    return rc;
}

void srv_buf_free(srv_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

double srv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double srv_wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int srv_ct_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    /* Walk the expected string (b) in full whatever a is, so the time says
     * nothing about how long a matching prefix is. */
    unsigned diff = (unsigned)(la != lb);
    for (size_t i = 0; i < lb; i++) {
        unsigned char ca = i < la ? (unsigned char)a[i] : 0;
        diff |= (unsigned)(ca ^ (unsigned char)b[i]);
    }
    return diff == 0;
}

uint64_t srv_random_u64(void)
{
    uint64_t v;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v)
        return v;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec;
}
