/*
 * schema_regex_set.c — the character sets of a pattern ([classes], \d, .,
 * single characters) as code point ranges, and a set written as the JSON
 * text of its characters: raw where JSON allows a character raw, the short
 * escape (\" \\ \n \t \r \b \f) where it needs one; other control
 * characters are left out (a subset). Sets the validator reads with Unicode
 * meaning (\d \w \s) are their ASCII members; their complements (\D, [^\d])
 * are taken within ASCII, so the grammar never writes a character the
 * validator's Unicode classes would count otherwise.
 */
#include "schema_regex.h"

#include <stdlib.h>
#include <string.h>

int rx_set_add(rx_set *s, uint32_t lo, uint32_t hi)
{
    if (s->n >= RX_MAX_RANGES)
        return -1;
    s->r[s->n++] = (rx_range){lo, hi};
    return 0;
}

static int range_cmp(const void *a, const void *b)
{
    const rx_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

void rx_set_norm(rx_set *s)
{
    qsort(s->r, (size_t)s->n, sizeof s->r[0], range_cmp);
    int k = 0;
    for (int i = 0; i < s->n; i++) {
        if (k && s->r[i].lo <= s->r[k - 1].hi + 1) {
            if (s->r[i].hi > s->r[k - 1].hi)
                s->r[k - 1].hi = s->r[i].hi;
        } else {
            s->r[k++] = s->r[i];
        }
    }
    s->n = k;
}

/* The code points (up to top) not in s; surrogates are never in a set. */
void rx_set_complement(rx_set *s, uint32_t top)
{
    rx_set out = {.n = 0};
    uint32_t next = 0;
    rx_set_norm(s);
    for (int i = 0; i < s->n && next <= top; i++) {
        if (s->r[i].lo > next)
            rx_set_add(&out, next, s->r[i].lo - 1 < top ? s->r[i].lo - 1 : top);
        next = s->r[i].hi + 1;
    }
    if (next <= top)
        rx_set_add(&out, next, top);
    rx_set_cut(&out, 0xD800, 0xDFFF);
    *s = out;
}

/* s without [lo, hi]. */
void rx_set_cut(rx_set *s, uint32_t lo, uint32_t hi)
{
    rx_set out = {.n = 0};
    for (int i = 0; i < s->n; i++) {
        rx_range r = s->r[i];
        if (r.hi < lo || r.lo > hi) {
            rx_set_add(&out, r.lo, r.hi);
            continue;
        }
        if (r.lo < lo)
            rx_set_add(&out, r.lo, lo - 1);
        if (r.hi > hi)
            rx_set_add(&out, hi + 1, r.hi);
    }
    *s = out;
}

int rx_set_has(const rx_set *s, uint32_t cp)
{
    for (int i = 0; i < s->n; i++)
        if (s->r[i].lo <= cp && cp <= s->r[i].hi)
            return 1;
    return 0;
}

/* \d \w \s (ASCII members) into s; upper case: their ASCII complement. */
int rx_set_shorthand(rx_set *s, char ch)
{
    rx_set t = {.n = 0};
    char low = (char)(ch | 0x20);
    if (low == 'd')
        rx_set_add(&t, '0', '9');
    if (low == 'w') {
        rx_set_add(&t, '0', '9');
        rx_set_add(&t, 'A', 'Z');
        rx_set_add(&t, 'a', 'z');
        rx_set_add(&t, '_', '_');
    }
    if (low == 's') {
        rx_set_add(&t, '\t', '\r'); /* \t \n \v \f \r */
        rx_set_add(&t, ' ', ' ');
    }
    if (ch != low)
        rx_set_complement(&t, 0x7F);
    for (int i = 0; i < t.n; i++)
        if (rx_set_add(s, t.r[i].lo, t.r[i].hi) != 0)
            return -1;
    return 0;
}

/* One escape alternative for the characters JSON must escape. */
static void json_escapes(const rx_set *s, sc_buf *alts, int *n)
{
    static const struct {
        uint32_t cp;
        const char *text;
    } esc[] = {{'"', "\"\\\\\\\"\""}, {'\\', "\"\\\\\\\\\""}, {'\n', "\"\\\\n\""},
               {'\t', "\"\\\\t\""},   {'\r', "\"\\\\r\""},    {'\b', "\"\\\\b\""},
               {'\f', "\"\\\\f\""}};
    for (size_t i = 0; i < sizeof esc / sizeof esc[0]; i++) {
        if (!rx_set_has(s, esc[i].cp))
            continue;
        sc_buf_add(alts, (*n)++ ? " | " : "");
        sc_buf_add(alts, esc[i].text);
    }
}

int rx_set_emit(sc_buf *out, const rx_set *in, int *empty)
{
    rx_set raw = *in;
    sc_buf alts = {0};
    int n = 0;
    rx_set_norm(&raw);
    rx_set_cut(&raw, 0, 0x1F);
    rx_set_cut(&raw, '"', '"');
    rx_set_cut(&raw, '\\', '\\');
    rx_set_cut(&raw, 0xD800, 0xDFFF);
    if (raw.n) {
        sc_buf_add(&alts, "[");
        for (int i = 0; i < raw.n; i++) {
            sc_class_cp(&alts, raw.r[i].lo);
            if (raw.r[i].hi != raw.r[i].lo) {
                sc_buf_add(&alts, "-");
                sc_class_cp(&alts, raw.r[i].hi);
            }
        }
        sc_buf_add(&alts, "]");
        n++;
    }
    json_escapes(in, &alts, &n);
    *empty = n == 0;
    if (n > 1)
        sc_buf_add(out, "( ");
    sc_buf_add(out, alts.p ? alts.p : "");
    if (n > 1)
        sc_buf_add(out, " )");
    int err = alts.err;
    sc_buf_free(&alts);
    return err ? (out->err = err) : out->err;
}
