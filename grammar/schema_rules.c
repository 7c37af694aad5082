/*
 * schema_rules.c — the converter's bookkeeping: its error and JSON-pointer
 * path, the text buffer, and the rule table printed as the grammar.
 */
#include "schema_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the buffer ---------------------------------------------------------- */

int sc_buf_addn(sc_buf *b, const char *s, size_t n)
{
    if (b->err)
        return b->err;
    if (b->n + n + 1 > SC_MAX_OUTPUT)
        return b->err = MHLA_GRAMMAR_LIMIT;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return b->err = MHLA_GRAMMAR_NOMEM;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

int sc_buf_add(sc_buf *b, const char *s) { return sc_buf_addn(b, s, strlen(s)); }

int sc_buf_addf(sc_buf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    /* every caller formats numbers and short names: a longer text is a bug */
    if (n < 0 || (size_t)n >= sizeof tmp)
        return b->err = b->err ? b->err : MHLA_GRAMMAR_LIMIT;
    return sc_buf_addn(b, tmp, (size_t)n);
}

void sc_buf_free(sc_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

/* ---- errors and the path --------------------------------------------------- */

int sc_fail(sc_conv *c, int code, const char *fmt, ...)
{
    if (c->err && c->err->msg[0] == '\0') {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err->msg, sizeof c->err->msg, fmt, ap);
        va_end(ap);
        /* a path longer than err->path keeps its start */
        size_t n = strlen(c->path), cap = sizeof c->err->path - 1;
        memcpy(c->err->path, c->path, n < cap ? n : cap);
        c->err->path[n < cap ? n : cap] = '\0';
        c->err->pos = -1;
    }
    return code;
}

int sc_buf_fail(sc_conv *c, const sc_buf *b)
{
    if (b->err == MHLA_GRAMMAR_LIMIT)
        return sc_fail(c, b->err, "schema: the grammar exceeds %u bytes", SC_MAX_OUTPUT);
    return sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
}

size_t sc_path_push(sc_conv *c, const char *seg)
{
    size_t old = c->path_len, n = old;
    /* a path longer than the buffer is cut: it only names the place in messages */
    if (n + 1 < sizeof c->path)
        c->path[n++] = '/';
    for (const char *s = seg; *s && n + 3 < sizeof c->path; s++) {
        if (*s == '~' || *s == '/') {
            c->path[n++] = '~';
            c->path[n++] = *s == '~' ? '0' : '1';
        } else {
            c->path[n++] = *s;
        }
    }
    c->path[n] = '\0';
    c->path_len = n;
    return old;
}

size_t sc_path_push_index(sc_conv *c, int i)
{
    char num[24];
    snprintf(num, sizeof num, "%d", i);
    return sc_path_push(c, num);
}

void sc_path_pop(sc_conv *c, size_t old_len)
{
    c->path_len = old_len;
    c->path[old_len] = '\0';
}

int sc_own(sc_conv *c, cJSON *node)
{
    if (c->n_owned == c->cap_owned) {
        size_t cap = c->cap_owned ? c->cap_owned * 2 : 16;
        cJSON **p = realloc(c->owned, cap * sizeof *p);
        if (!p) {
            cJSON_Delete(node);
            return sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
        }
        c->owned = p;
        c->cap_owned = cap;
    }
    c->owned[c->n_owned++] = node;
    return 0;
}

void sc_conv_free(sc_conv *c)
{
    for (size_t i = 0; i < c->n_rules; i++) {
        free(c->rules[i].name);
        free(c->rules[i].body);
    }
    free(c->rules);
    for (size_t i = 0; i < c->n_refs; i++) {
        free(c->refs[i].ref);
        free(c->refs[i].name);
    }
    free(c->refs);
    for (size_t i = 0; i < c->n_owned; i++)
        cJSON_Delete(c->owned[i]);
    free(c->owned);
    memset(c, 0, sizeof *c);
}
