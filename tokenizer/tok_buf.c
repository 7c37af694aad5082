/* Error messages and growable buffers used throughout the tokenizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

void tok_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int tok_buf_reserve(tok_buf *b, size_t extra)
{
    if (extra > SIZE_MAX / 2 - b->len) return -1;
    size_t need = b->len + extra + 1; /* room for a terminating NUL */
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int tok_buf_put(tok_buf *b, const void *s, size_t n)
{
    if (tok_buf_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

void tok_buf_free(tok_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

int tok_strlist_push(tok_strlist *l, const char *s, size_t n)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        size_t *o = realloc(l->off, cap * sizeof *o);
        if (!o) return -1;
        l->off = o;
        size_t *ln = realloc(l->len, cap * sizeof *ln);
        if (!ln) return -1;
        l->len = ln;
        l->cap = cap;
    }
    /* s may point into l->data itself, so remember its offset across a realloc */
    uintptr_t base = (uintptr_t)l->data.p, sp = (uintptr_t)s;
    if (base && sp >= base && sp < base + l->data.cap) {
        size_t so = (size_t)(sp - base);
        if (tok_buf_reserve(&l->data, n)) return -1;
        s = l->data.p + so;
    }
    l->off[l->n] = l->data.len;
    l->len[l->n] = n;
    if (tok_buf_put(&l->data, s, n)) return -1;
    l->n++;
    return 0;
}

void tok_strlist_clear(tok_strlist *l)
{
    l->n = 0;
    l->data.len = 0;
}

void tok_strlist_free(tok_strlist *l)
{
    tok_buf_free(&l->data);
    free(l->off);
    free(l->len);
    memset(l, 0, sizeof *l);
}

int tok_ids_push(tok_ids *a, int32_t id)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int32_t *v = realloc(a->v, cap * sizeof *v);
        if (!v) return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = id;
    return 0;
}
