/*
 * sys.c — the small system helpers every module needs and none should write
 * again: a monotonic clock, reading a whole file, and growing an array.
 */
#include "base.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

double mhla_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The failure's kind (MHLA_READ_*), with msg set. */
static int why(int kind, char *msg, size_t msglen, const char *fmt, ...)
{
    if (msg && msglen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msglen, fmt, ap);
        va_end(ap);
    }
    return kind;
}

int mhla_read_file(const char *path, size_t max_bytes, char **out, size_t *len, char *msg,
                   size_t msglen)
{
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return why(MHLA_READ_IO, msg, msglen, "cannot open '%s': %s", path, strerror(errno));
    mhla_buf b = {0};
    char chunk[65536];
    size_t r;
    int rc = 0;
    while (rc == 0 && (r = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (b.len + r > max_bytes)
            rc = why(MHLA_READ_TOO_LARGE, msg, msglen, "'%s' is larger than %zu bytes", path,
                     max_bytes);
        else if (mhla_buf_put(&b, chunk, r))
            rc = why(MHLA_READ_NOMEM, msg, msglen, "out of memory reading '%s'", path);
    }
    if (rc == 0 && ferror(f))
        rc = why(MHLA_READ_IO, msg, msglen, "reading '%s' failed: %s", path, strerror(errno));
    fclose(f);
    if (rc == 0 && mhla_buf_reserve(&b, 0)) /* room for the NUL an empty file needs too */
        rc = why(MHLA_READ_NOMEM, msg, msglen, "out of memory reading '%s'", path);
    if (rc) {
        mhla_buf_free(&b);
        return rc;
    }
    b.p[b.len] = 0;
    *out = b.p;
    *len = b.len;
    return 0;
}

int mhla_grow(void *array, size_t elem_size, int *cap, int need)
{
    if (need <= *cap)
        return 0;
    if (need < 0 || elem_size == 0)
        return -1;
    size_t n = *cap > 0 ? (size_t)*cap : 8;
    while (n < (size_t)need)
        n *= 2;
    if (n > (size_t)INT32_MAX)
        n = (size_t)need;
    if (n > SIZE_MAX / elem_size)
        return -1;
    void *old, *p;
    memcpy(&old, array, sizeof old);
    if (!(p = realloc(old, n * elem_size)))
        return -1;
    memcpy(array, &p, sizeof p);
    *cap = (int)n;
    return 0;
}
