/* tpl_string.c — the string operations behind methods and filters: strip,
 * split, replace, case mapping (ASCII) and join, with Python's semantics. */
#include <ctype.h>
#include <string.h>

#include "tpl_internal.h"

/* Python's str.isspace. */
static int py_space_cp(int32_t c)
{
    return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85 ||
           c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

/* The bytes of the whitespace character at p (0 when there is none). */
static size_t space_at(const char *p, size_t left)
{
    int32_t cp;
    size_t k = mhla_utf8_next(p, left, &cp);
    return py_space_cp(cp) ? k : 0;
}

static int in_chars(const tpl_val *chars, const char *p, size_t len)
{
    if (!chars || chars->k == V_NONE)
        return space_at(p, len) == len;
    for (size_t i = 0; i + len <= chars->u.s.n;) {
        int32_t cp;
        size_t k = mhla_utf8_next(chars->u.s.p + i, chars->u.s.n - i, &cp);
        if (k == len && !memcmp(chars->u.s.p + i, p, len))
            return 1;
        i += k;
    }
    return 0;
}

static size_t prev_cp(const char *s, size_t end)
{
    size_t i = end - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80)
        i--;
    return i;
}

tpl_val *tpl_str_strip(tpl_rt *rt, tpl_val *s, tpl_val *chars, int left, int right)
{
    if (chars && chars->k != V_STR && chars->k != V_NONE)
        return tpl_failv(rt, 0, "strip arg must be None or str");
    const char *p = s->u.s.p;
    size_t a = 0, b = s->u.s.n;
    while (left && a < b) {
        int32_t cp;
        size_t k = mhla_utf8_next(p + a, b - a, &cp);
        if (!in_chars(chars, p + a, k))
            break;
        a += k;
    }
    while (right && b > a) {
        size_t i = prev_cp(p, b);
        if (i < a || !in_chars(chars, p + i, b - i))
            break;
        b = i;
    }
    return tpl_str(rt, p + a, b - a);
}

static int push_str(tpl_rt *rt, tpl_val *l, const char *p, size_t n)
{
    tpl_val *x = tpl_str(rt, p, n);
    return !x || tpl_list_push(rt, l, x) ? -1 : 0;
}

static tpl_val *split_ws(tpl_rt *rt, tpl_val *s, long long maxsplit)
{
    tpl_val *l = tpl_list(rt);
    const char *p = s->u.s.p;
    size_t i = 0, n = s->u.s.n;
    while (l) {
        for (size_t k; i < n && (k = space_at(p + i, n - i));)
            i += k;
        if (i >= n)
            break;
        if (maxsplit >= 0 && l->u.l.n >= maxsplit) {
            return push_str(rt, l, p + i, n - i) ? NULL : l;
        }
        size_t j = i;
        while (j < n && !space_at(p + j, n - j)) {
            int32_t cp;
            j += mhla_utf8_next(p + j, n - j, &cp);
        }
        if (push_str(rt, l, p + i, j - i))
            return NULL;
        i = j;
    }
    return l;
}

tpl_val *tpl_str_split(tpl_rt *rt, tpl_val *s, tpl_val *sep, long long maxsplit, int line)
{
    if (!sep || sep->k == V_NONE)
        return split_ws(rt, s, maxsplit);
    if (sep->k != V_STR || !sep->u.s.n)
        return tpl_failv(rt, line, sep->k == V_STR ? "empty separator" : "must be str or None");
    tpl_val *l = tpl_list(rt);
    const char *p = s->u.s.p;
    size_t start = 0;
    for (size_t i = 0; l && i + sep->u.s.n <= s->u.s.n;) {
        if ((maxsplit < 0 || l->u.l.n < maxsplit) && !memcmp(p + i, sep->u.s.p, sep->u.s.n)) {
            if (push_str(rt, l, p + start, i - start))
                return NULL;
            i += sep->u.s.n;
            start = i;
        } else {
            i++;
        }
    }
    return l && !push_str(rt, l, p + start, s->u.s.n - start) ? l : NULL;
}

tpl_val *tpl_str_replace(tpl_rt *rt, tpl_val *s, tpl_val *old, tpl_val *new_, long long count)
{
    mhla_buf b = {0};
    int rc = 0;
    long long done = 0;
    size_t i = 0;
    while (i <= s->u.s.n && !rc) {
        int match = (count < 0 || done < count) && i + old->u.s.n <= s->u.s.n &&
                    !memcmp(s->u.s.p + i, old->u.s.p, old->u.s.n);
        if (match) {
            rc = mhla_buf_put(&b, new_->u.s.p, new_->u.s.n);
            done++;
        }
        if (match && old->u.s.n) {
            i += old->u.s.n;
            continue;
        }
        if (i < s->u.s.n)
            rc = rc || mhla_buf_put(&b, s->u.s.p + i, 1);
        i++;
    }
    tpl_val *r = rc ? tpl_nomem(rt) : tpl_str(rt, b.p ? b.p : "", b.len);
    mhla_buf_free(&b);
    return r;
}

/* how: 0 lower, 1 upper, 2 title (str.title), 3 capitalize */
tpl_val *tpl_str_case(tpl_rt *rt, tpl_val *s, int how)
{
    tpl_val *r = tpl_str(rt, s->u.s.p, s->u.s.n);
    if (!r)
        return NULL;
    char *p = (char *)r->u.s.p;
    int prev_cased = 0;
    for (size_t i = 0; i < r->u.s.n; i++) {
        unsigned char c = (unsigned char)p[i];
        int up = how == 1 || (how == 2 && !prev_cased) || (how == 3 && i == 0);
        p[i] = (char)(up ? toupper(c) : tolower(c));
        prev_cased = isalpha(c) || (c >= 0x80 && prev_cased);
    }
    return r;
}

tpl_val *tpl_str_join(tpl_rt *rt, tpl_val *sep, tpl_val *items, int line)
{
    tpl_val *l = tpl_iterate(rt, items, line);
    mhla_buf b = {0};
    int rc = !l;
    for (int i = 0; !rc && i < l->u.l.n; i++) {
        if (i && mhla_buf_put(&b, sep->u.s.p, sep->u.s.n))
            rc = 1;
        else
            rc = tpl_put_str(rt, &b, l->u.l.a[i]) ? 1 : 0;
    }
    tpl_val *r = rc ? NULL : tpl_str(rt, b.p ? b.p : "", b.len);
    mhla_buf_free(&b);
    return rc && l ? tpl_nomem(rt) : r;
}
