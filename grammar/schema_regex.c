/*
 * schema_regex.c — a JSON Schema "pattern" as GBNF over the JSON text of the
 * string (llama.cpp's _visit_pattern is the model). Served: literals and
 * escaped punctuation, [classes] with ranges and negation, ., \d \w \s \D \W
 * \S, \n \t \r \f \v \0 \xHH \uHHHH, groups (and (?:…)), alternation, the
 * quantifiers * + ? {m} {m,} {m,n} {,n} (lazy forms: the same strings), ^ at
 * the start and $ at the end of a top-level branch. A branch without ^ or $
 * gets any text before or after (a pattern matches anywhere in the string).
 * Everything else (lookaround, backreferences, \b, named groups, flags,
 * possessive quantifiers, \p{…}, anchors elsewhere) is UNSUPPORTED, named.
 */
#include "schema_regex.h"

#include <stdlib.h>
#include <string.h>

#define RX_MAX_DEPTH 32 /* nested groups */

typedef struct {
    sc_conv *c;
    const char *p;
    size_t i, n;
    int depth;
    int used_dot;
} rx;

static int rx_fail(rx *r, int code, const char *what)
{
    return sc_fail(r->c, code, "schema: pattern: %s at offset %zu", what, r->i);
}

static int hex_digits(rx *r, int count, uint32_t *cp)
{
    *cp = 0;
    for (int k = 0; k < count; k++, r->i++) {
        char h = r->i < r->n ? r->p[r->i] : '\0';
        int v = h >= '0' && h <= '9'   ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                       : -1;
        if (v < 0)
            return rx_fail(r, MHLA_GRAMMAR_SYNTAX, "a bad hex escape");
        *cp = *cp * 16 + (uint32_t)v;
    }
    if (*cp >= 0xD800 && *cp <= 0xDFFF)
        return rx_fail(r, MHLA_GRAMMAR_UNSUPPORTED, "a UTF-16 surrogate escape");
    return 0;
}

/* The escape after '\' (r->i past it) into s; *shorthand: \d \w \s or capitals. */
static int rx_escape(rx *r, rx_set *s, int in_class, int *shorthand)
{
    if (r->i >= r->n)
        return rx_fail(r, MHLA_GRAMMAR_SYNTAX, "a trailing backslash");
    char ch = r->p[r->i++];
    uint32_t cp = (unsigned char)ch;
    if (strchr("dwsDWS", ch)) {
        *shorthand = 1;
        return rx_set_shorthand(s, ch) ? rx_fail(r, MHLA_GRAMMAR_LIMIT, "too many ranges") : 0;
    }
    static const char named[] = "ntrfv0", value[] = "\n\t\r\f\v";
    const char *at = strchr(named, ch);
    if (ch && at)
        cp = (unsigned char)value[at - named];
    else if (ch == 'x' || ch == 'u') {
        int rc = hex_digits(r, ch == 'x' ? 2 : 4, &cp);
        if (rc)
            return rc;
    } else if (ch == 'b' && in_class)
        cp = '\b';
    else if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '1' && ch <= '9'))
        return rx_fail(r, MHLA_GRAMMAR_UNSUPPORTED,
                       ch >= '1' && ch <= '9' ? "a backreference"
                                              : "an escape (\\b \\B \\A \\Z \\p \\k …)");
    else if ((unsigned char)ch >= 0x80) {
        r->i--;
        if (sc_utf8_next(r->p, r->n, &r->i, &cp) != 0)
            return rx_fail(r, MHLA_GRAMMAR_SYNTAX, "invalid UTF-8");
    }
    return rx_set_add(s, cp, cp) ? rx_fail(r, MHLA_GRAMMAR_LIMIT, "too many ranges") : 0;
}

/* One member's code point (a range end); a shorthand there is refused. */
static int class_cp(rx *r, uint32_t *cp)
{
    if (r->p[r->i] != '\\')
        return sc_utf8_next(r->p, r->n, &r->i, cp) ? rx_fail(r, MHLA_GRAMMAR_SYNTAX, "bad UTF-8")
                                                   : 0;
    rx_set one = {.n = 0};
    int sh = 0;
    r->i++;
    int rc = rx_escape(r, &one, 1, &sh);
    if (!rc && (sh || one.n != 1 || one.r[0].lo != one.r[0].hi))
        rc = rx_fail(r, MHLA_GRAMMAR_UNSUPPORTED, "a class shorthand as a range end");
    *cp = one.n ? one.r[0].lo : 0;
    return rc;
}

/* A [class] (r->i past '['). */
static int rx_class(rx *r, rx_set *s)
{
    int neg = r->i < r->n && r->p[r->i] == '^', first = 1, shorthand = 0, rc = 0;
    r->i += (size_t)neg;
    for (;; first = 0) {
        if (r->i >= r->n)
            return rx_fail(r, MHLA_GRAMMAR_SYNTAX, "an unterminated [class]");
        if (r->p[r->i] == ']' && !first)
            break;
        uint32_t lo, hi;
        if (r->p[r->i] == '\\' && r->i + 1 < r->n && strchr("dwsDWS", r->p[r->i + 1])) {
            r->i++;
            rc = rx_escape(r, s, 1, &shorthand);
        } else if (!(rc = class_cp(r, &lo))) {
            hi = lo;
            int range = r->i + 1 < r->n && r->p[r->i] == '-' && r->p[r->i + 1] != ']';
            r->i += (size_t)range;
            rc = range ? class_cp(r, &hi) : 0;
            if (!rc && hi < lo)
                rc = rx_fail(r, MHLA_GRAMMAR_SYNTAX, "a reversed range in a [class]");
            if (!rc && rx_set_add(s, lo, hi))
                rc = rx_fail(r, MHLA_GRAMMAR_LIMIT, "too many ranges");
        }
        if (rc)
            return rc;
    }
    r->i++;
    if (neg) /* within ASCII when the class holds a Unicode-aware shorthand */
        rx_set_complement(s, shorthand ? 0x7F : 0x10FFFF);
    return 0;
}

/* A quantifier at r->i: 1 (and the counts) or 0 when there is none. */
static int quant_at(const rx *r, size_t *i, long *min, long *max)
{
    size_t k = *i;
    char ch = k < r->n ? r->p[k] : '\0';
    if (ch == '*' || ch == '+' || ch == '?') {
        *min = ch == '+';
        *max = ch == '?' ? 1 : -1;
        *i = k + 1;
        return 1;
    }
    if (ch != '{')
        return 0;
    long a = -1, b = -1;
    for (k++; k < r->n && r->p[k] >= '0' && r->p[k] <= '9' && a < 100000; k++)
        a = (a < 0 ? 0 : a * 10) + (r->p[k] - '0');
    int comma = k < r->n && r->p[k] == ',';
    for (k += (size_t)comma; comma && k < r->n && r->p[k] >= '0' && r->p[k] <= '9' && b < 100000;
         k++)
        b = (b < 0 ? 0 : b * 10) + (r->p[k] - '0');
    if (k >= r->n || r->p[k] != '}' || (a < 0 && b < 0))
        return 0; /* not a quantifier: '{' is a literal */
    *min = a < 0 ? 0 : a;
    *max = comma ? b : a;
    *i = k + 1;
    return 1;
}

static int rx_alt(rx *r, sc_buf *out, int top, int *empty);

/* A group (r->i at '('). */
static int rx_group(rx *r, sc_buf *out, int *empty)
{
    r->i++;
    if (r->i < r->n && r->p[r->i] == '?') {
        if (r->i + 1 >= r->n || r->p[r->i + 1] != ':')
            return rx_fail(r, MHLA_GRAMMAR_UNSUPPORTED,
                           "a (?…) group (lookaround, named group or flags)");
        r->i += 2;
    }
    if (++r->depth > RX_MAX_DEPTH)
        return rx_fail(r, MHLA_GRAMMAR_LIMIT, "groups nested too deep");
    sc_buf inner = {0};
    int rc = rx_alt(r, &inner, 0, empty);
    r->depth--;
    if (!rc && (r->i >= r->n || r->p[r->i] != ')'))
        rc = rx_fail(r, MHLA_GRAMMAR_SYNTAX, "an unclosed (group)");
    r->i++;
    if (!rc && !*empty) {
        sc_buf_add(out, "( ");
        sc_buf_add(out, inner.p);
        sc_buf_add(out, " )");
    }
    if (!rc && inner.err)
        rc = sc_buf_fail(r->c, &inner);
    sc_buf_free(&inner);
    return rc;
}

static int rx_atom(rx *r, sc_buf *out, int *empty)
{
    char ch = r->p[r->i];
    size_t k = r->i;
    long mn, mx;
    rx_set s = {.n = 0};
    int rc = 0, sh = 0;
    *empty = 0;
    if (ch == '(')
        return rx_group(r, out, empty);
    if (ch == '.') {
        r->i++;
        r->used_dot = 1;
        return sc_buf_add(out, "dot");
    }
    if (ch == '^' || ch == '$')
        return rx_fail(r, MHLA_GRAMMAR_UNSUPPORTED, "an anchor inside the pattern");
    if (quant_at(r, &k, &mn, &mx))
        return rx_fail(r, MHLA_GRAMMAR_SYNTAX, "nothing to repeat");
    if (ch == '[') {
        r->i++;
        rc = rx_class(r, &s);
    } else if (ch == '\\') {
        r->i++;
        rc = rx_escape(r, &s, 0, &sh);
    } else {
        uint32_t cp;
        rc = sc_utf8_next(r->p, r->n, &r->i, &cp) ? rx_fail(r, MHLA_GRAMMAR_SYNTAX, "bad UTF-8")
                                                  : rx_set_add(&s, cp, cp);
    }
    if (!rc)
        rc = rx_set_emit(out, &s, empty);
    if (!rc && *empty)
        rc = rx_fail(r, MHLA_GRAMMAR_UNSUPPORTED,
                     "a character set with no character a JSON "
                     "string holds without a \\u escape");
    return rc;
}

/* An atom and its quantifier, appended to out after a space. */
static int rx_piece(rx *r, sc_buf *out)
{
    sc_buf a = {0};
    int empty = 0;
    long min = 0, max = 0;
    int rc = rx_atom(r, &a, &empty);
    int q = !rc && quant_at(r, &r->i, &min, &max);
    if (q && r->i < r->n && r->p[r->i] == '?')
        r->i++; /* lazy: the same strings */
    size_t k = r->i;
    long m2, x2;
    if (!rc && q && r->i < r->n && r->p[r->i] == '+')
        rc = rx_fail(r, MHLA_GRAMMAR_UNSUPPORTED, "a possessive quantifier");
    else if (!rc && q && quant_at(r, &k, &m2, &x2))
        rc = rx_fail(r, MHLA_GRAMMAR_SYNTAX, "a repeated quantifier");
    else if (!rc && q && (min > SC_MAX_REPEAT || max > SC_MAX_REPEAT))
        rc = rx_fail(r, MHLA_GRAMMAR_LIMIT, "a repeat count over 1000");
    else if (!rc && q && max >= 0 && min > max)
        rc = rx_fail(r, MHLA_GRAMMAR_SYNTAX, "a {min,max} with min > max");
    if (!rc && !empty && !(q && max == 0)) {
        sc_buf_add(out, out->n ? " " : "");
        if (q)
            sc_repeat(out, a.p, min, max, NULL);
        else
            sc_buf_add(out, a.p);
    }
    if (!rc && a.err)
        rc = sc_buf_fail(r->c, &a);
    sc_buf_free(&a);
    return rc;
}

/* A branch: pieces up to '|' or ')'; at the top, ^ first and $ last anchor it. */
static int rx_seq(rx *r, sc_buf *out, int top, int *start, int *end)
{
    int rc = 0;
    *start = *end = 0;
    if (top && r->i < r->n && r->p[r->i] == '^') {
        *start = 1;
        r->i++;
    }
    while (!rc && r->i < r->n && r->p[r->i] != '|' && r->p[r->i] != ')') {
        if (top && r->p[r->i] == '$' && (r->i + 1 == r->n || r->p[r->i + 1] == '|')) {
            *end = 1;
            r->i++;
            break;
        }
        rc = rx_piece(r, out);
    }
    return rc;
}

/* One branch as written: with any text around an unanchored side (top). */
static int rx_branch(rx *r, sc_buf *alts, int top, int *n, int *has_empty)
{
    sc_buf seq = {0}, text = {0};
    int start = 0, end = 0;
    int rc = rx_seq(r, &seq, top, &start, &end);
    int pre = top && !start, post = top && !end && !(pre && seq.n == 0);
    r->used_dot |= pre || post;
    if (pre)
        sc_buf_add(&text, "dot*");
    if (seq.n) {
        sc_buf_add(&text, text.n ? " " : "");
        sc_buf_add(&text, seq.p);
    }
    if (post)
        sc_buf_add(&text, text.n ? " dot*" : "dot*");
    if (!rc && (seq.err || text.err))
        rc = sc_buf_fail(r->c, seq.err ? &seq : &text);
    if (!rc && text.n) {
        sc_buf_add(alts, (*n)++ ? " | " : "");
        sc_buf_add(alts, text.p);
    }
    *has_empty |= !rc && text.n == 0;
    sc_buf_free(&seq);
    sc_buf_free(&text);
    return rc;
}

static int rx_alt(rx *r, sc_buf *out, int top, int *empty)
{
    sc_buf alts = {0};
    int n = 0, has_empty = 0, rc = 0;
    for (;;) {
        rc = rx_branch(r, &alts, top, &n, &has_empty);
        if (rc || r->i >= r->n || r->p[r->i] != '|')
            break;
        r->i++;
    }
    *empty = n == 0;
    if (!rc && n) {
        sc_buf_add(out, has_empty || (top && n > 1) ? "( " : "");
        sc_buf_add(out, alts.p);
        sc_buf_add(out, has_empty ? " )?" : top && n > 1 ? " )" : "");
    }
    if (!rc && alts.err)
        rc = sc_buf_fail(r->c, &alts);
    sc_buf_free(&alts);
    return rc;
}

int sc_regex(sc_conv *c, const char *pattern, const char *name, char **body)
{
    (void)name;
    rx r = {c, pattern, 0, strlen(pattern), 0, 0};
    sc_buf inner = {0}, b = {0};
    int empty = 0, rc = rx_alt(&r, &inner, 1, &empty);
    if (!rc && r.i < r.n)
        rc = rx_fail(&r, MHLA_GRAMMAR_SYNTAX, "an unbalanced ')'");
    if (!rc && r.used_dot)
        rc = sc_rule_builtin(c, "dot", &(const char *){NULL});
    sc_buf_add(&b, "\"\\\"\" ");
    if (!empty) {
        sc_buf_add(&b, "( ");
        sc_buf_add(&b, inner.p ? inner.p : "");
        sc_buf_add(&b, " ) ");
    }
    sc_buf_add(&b, "\"\\\"\"");
    if (!rc && (inner.err || b.err))
        rc = sc_buf_fail(c, inner.err ? &inner : &b);
    sc_buf_free(&inner);
    if (rc)
        sc_buf_free(&b);
    *body = rc ? NULL : b.p;
    return rc;
}
