/*
 * buf.c — the growable byte buffer: capacity doubles, a NUL always follows
 * the bytes.
 */
#include "base.h"

#include <stdlib.h>

int mhla_buf_reserve(mhla_buf *b, size_t extra)
{
    if (extra > SIZE_MAX / 2 - b->len)
        return -1;
    size_t need = b->len + extra + 1; /* room for the terminating NUL */
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int mhla_buf_put(mhla_buf *b, const void *s, size_t n)
{
    if (mhla_buf_reserve(b, n))
        return -1;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

void mhla_buf_free(mhla_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}
