/*
 * util.c — formatted appends to a buffer, the wall clock, constant-time comparison, OS
 * randomness (the monotonic clock is base's mhla_now).
 */
#include "server_internal.h"

#include <cJSON.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

int srv_buf_printf(mhla_buf *b, const char *fmt, ...)
{
    /* measure, make room (and the NUL), then write in place */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || mhla_buf_reserve(b, (size_t)n))
        return -1;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
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

/* Set by json_malloc on a failed allocation; per thread, as parses run on
 * the connection threads. */
static _Thread_local int json_nomem;

static void *json_malloc(size_t n)
{
    void *p = malloc(n);
    if (!p)
        json_nomem = 1;
    return p;
}

void srv_json_hooks_install(void)
{
    cJSON_Hooks h = {.malloc_fn = json_malloc, .free_fn = free};
    cJSON_InitHooks(&h);
}

cJSON *srv_json_parse(const char *s, size_t len, const char **end, int *nomem)
{
    json_nomem = 0;
    cJSON *root = cJSON_ParseWithLengthOpts(s, len, end, 0);
    *nomem = !root && json_nomem;
    return root;
}
