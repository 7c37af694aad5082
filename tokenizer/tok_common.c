/* Error messages, string lists and id arrays used throughout the tokenizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

void tok_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int tok_strlist_push(tok_strlist *l, const char *s, size_t n)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        size_t *o = realloc(l->off, cap * sizeof *o);
        if (!o)
            return -1;
        l->off = o;
        size_t *ln = realloc(l->len, cap * sizeof *ln);
        if (!ln)
            return -1;
        l->len = ln;
        l->cap = cap;
    }
    /* s may point into l->data itself, so remember its offset across a realloc */
    uintptr_t base = (uintptr_t)l->data.p, sp = (uintptr_t)s;
    if (base && sp >= base && sp < base + l->data.cap) {
        size_t so = (size_t)(sp - base);
        if (mhla_buf_reserve(&l->data, n))
            return -1;
        s = l->data.p + so;
    }
    l->off[l->n] = l->data.len;
    l->len[l->n] = n;
    if (mhla_buf_put(&l->data, s, n))
        return -1;
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
    mhla_buf_free(&l->data);
    free(l->off);
    free(l->len);
    memset(l, 0, sizeof *l);
}

int tok_ids_push(tok_ids *a, int32_t id)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int32_t *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = id;
    return 0;
}
