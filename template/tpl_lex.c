/* tpl_lex.c — a template's text into tokens, as jinja2's lexer splits it
 * with trim_blocks and lstrip_blocks on: text, the tags' delimiters with
 * their whitespace control, and the names, literals and operators in tags.
 * The text is first normalised as jinja2 does (newlines to "\n", one
 * trailing newline dropped). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpl_internal.h"

typedef struct {
    tpl_arena *a;
    const char *s;
    size_t n, pos;
    int line, line_starting;
    tpl_toks *out;
    char *err;
    size_t errlen;
} lexer;

static int lex_fail(lexer *lx, const char *msg)
{
    if (lx->err)
        snprintf(lx->err, lx->errlen, "line %d: %s", lx->line, msg);
    return MHLA_TPL_ERROR;
}

static int push(lexer *lx, int kind, const char *s, size_t n)
{
    if (mhla_grow(&lx->out->t, sizeof *lx->out->t, &lx->out->cap, lx->out->n + 1))
        return MHLA_TPL_NOMEM;
    tpl_tok *t = &lx->out->t[lx->out->n++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->line = lx->line;
    t->s = s;
    t->n = n;
    return 0;
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static void count_lines(lexer *lx, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        lx->line += s[i] == '\n';
}

/* The end of a tag at lx->pos: "-END" (then all whitespace), "+END", or
 * END (then one newline when it ends a block or a comment). */
static int match_end(lexer *lx, const char *end, int trim)
{
    const char *p = lx->s + lx->pos;
    size_t left = lx->n - lx->pos, k = 0;
    if (left >= 3 && (p[0] == '-' || p[0] == '+') && !memcmp(p + 1, end, 2))
        k = 3;
    else if (left >= 2 && !memcmp(p, end, 2))
        k = 2;
    if (!k)
        return 0;
    if (p[0] == '-')
        while (k < left && is_ws(p[k]))
            k++;
    else if (p[0] != '+' && trim && k < left && p[k] == '\n')
        k++;
    count_lines(lx, p, k);
    lx->line_starting = p[k - 1] == '\n';
    lx->pos += k;
    return 1;
}

/* The text before a tag, with the tag's whitespace control applied. */
static int put_text(lexer *lx, size_t from, size_t to, char sign, int is_var)
{
    const char *t = lx->s + from;
    size_t n = to - from;
    if (sign == '-') {
        while (n && is_ws(t[n - 1]))
            n--;
    } else if (sign != '+' && !is_var) {
        size_t l = n;
        while (l && t[l - 1] != '\n')
            l--;
        if (l > 0 || lx->line_starting) {
            size_t k = l;
            while (k < n && is_ws(t[k]))
                k++;
            if (k == n && n > l)
                n = l;
        }
    }
    int rc = n ? push(lx, T_TEXT, t, n) : 0;
    count_lines(lx, lx->s + from, to - from);
    return rc;
}

static int lex_raw(lexer *lx, char sign);
static int lex_tag_tokens(lexer *lx, const char *end, int kind_end);

static int lex_comment(lexer *lx)
{
    for (; lx->pos + 1 < lx->n; lx->pos++) {
        if (lx->s[lx->pos] == '\n')
            lx->line++;
        if (match_end(lx, "#}", 1))
            return 0;
    }
    return lex_fail(lx, "missing end of comment tag");
}

/* Is "{% raw %}" (with its signs) at p? Returns its length, 0 if not. */
static size_t raw_open(const char *p, size_t left)
{
    size_t k = 2;
    if (k < left && (p[k] == '-' || p[k] == '+'))
        k++;
    while (k < left && is_ws(p[k]))
        k++;
    if (left - k < 3 || memcmp(p + k, "raw", 3))
        return 0;
    k += 3;
    while (k < left && is_ws(p[k]))
        k++;
    if (k < left && p[k] == '-') /* jinja2 takes "-%}" or "%}" here, not "+%}" */
        k++;
    return left - k >= 2 && !memcmp(p + k, "%}", 2) ? k : 0;
}

static int lex_tag(lexer *lx, size_t text_from, size_t at)
{
    const char *p = lx->s + at;
    size_t left = lx->n - at;
    char sign = left > 2 && (p[2] == '-' || p[2] == '+') ? p[2] : 0;
    int rc = put_text(lx, text_from, at, sign, p[1] == '{');
    if (rc)
        return rc;
    lx->line_starting = 0;
    size_t raw = p[1] == '%' ? raw_open(p, left) : 0;
    if (raw) {
        lx->pos = at + raw;
        return lex_raw(lx, p[raw - 1] == '-' || p[raw - 1] == '+' ? p[raw - 1] : 0);
    }
    lx->pos = at + 2 + (sign != 0);
    if (p[1] == '#')
        return lex_comment(lx);
    if (p[1] == '{')
        return push(lx, T_VAR_BEGIN, p, 2) ? MHLA_TPL_NOMEM : lex_tag_tokens(lx, "}}", T_VAR_END);
    return push(lx, T_BLOCK_BEGIN, p, 2) ? MHLA_TPL_NOMEM : lex_tag_tokens(lx, "%}", T_BLOCK_END);
}

static int lex_root(lexer *lx)
{
    while (lx->pos < lx->n) {
        size_t from = lx->pos, i = from;
        for (; i + 1 < lx->n; i++)
            if (lx->s[i] == '{' &&
                (lx->s[i + 1] == '{' || lx->s[i + 1] == '%' || lx->s[i + 1] == '#'))
                break;
        if (i + 1 >= lx->n) {
            lx->pos = lx->n;
            return put_text(lx, from, lx->n, '+', 1);
        }
        int rc = lex_tag(lx, from, i);
        if (rc)
            return rc;
    }
    return 0;
}

/* {% raw %} ... {% endraw %}: the text between, as it is. lx->pos is at
 * the "%}" of the opening tag; sign is the one before it. */
static int lex_raw(lexer *lx, char sign)
{
    lx->pos -= sign != 0;
    if (!match_end(lx, "%}", 0)) /* no trim_blocks newline after {% raw %} */
        return lex_fail(lx, "bad raw tag");
    for (size_t i = lx->pos; i + 1 < lx->n; i++) {
        if (lx->s[i] != '{' || lx->s[i + 1] != '%')
            continue;
        size_t k = i + 2;
        if (k < lx->n && (lx->s[k] == '-' || lx->s[k] == '+'))
            k++;
        while (k < lx->n && is_ws(lx->s[k]))
            k++;
        if (lx->n - k < 6 || memcmp(lx->s + k, "endraw", 6))
            continue;
        k += 6;
        while (k < lx->n && is_ws(lx->s[k]))
            k++;
        char es = lx->s[i + 2] == '-' || lx->s[i + 2] == '+' ? lx->s[i + 2] : 0;
        int rc = put_text(lx, lx->pos, i, es, 0); /* lstrip_blocks applies before endraw */
        lx->pos = k;
        if (rc || match_end(lx, "%}", 1))
            return rc;
        return lex_fail(lx, "bad endraw tag");
    }
    return lex_fail(lx, "missing end of raw directive");
}

static int is_name(char c, int first)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (!first && c >= '0' && c <= '9');
}

static int lex_number(lexer *lx)
{
    const char *p = lx->s + lx->pos;
    char buf[64];
    size_t k = 0, j = 0;
    int is_float = 0;
    while (lx->pos + k < lx->n && j < sizeof buf - 1) {
        char c = p[k];
        int exp_sign = j && (buf[j - 1] == 'e' || buf[j - 1] == 'E') && (c == '+' || c == '-');
        if (c == '.' && !is_float && lx->pos + k + 1 < lx->n && p[k + 1] >= '0' && p[k + 1] <= '9')
            is_float = 1;
        else if ((c == 'e' || c == 'E') && j)
            is_float = 1;
        else if (c != '_' && !(c >= '0' && c <= '9') && !exp_sign)
            break;
        if (c != '_')
            buf[j++] = c;
        k++;
    }
    buf[j] = 0;
    int rc = push(lx, is_float ? T_FLOAT : T_INT, p, k);
    if (rc)
        return rc;
    tpl_tok *t = &lx->out->t[lx->out->n - 1];
    if (is_float)
        t->f = strtod(buf, NULL);
    else
        t->i = strtoll(buf, NULL, 10);
    lx->pos += k;
    return 0;
}

static int hexval(const char *p, int digits, long *v)
{
    *v = 0;
    for (int i = 0; i < digits; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        *v = *v * 16 + d;
    }
    return 0;
}

/* One escape after a backslash at p (left bytes); the bytes it puts in
 * d and the bytes of the source it took. */
static size_t unescape(const char *p, size_t left, char *d, size_t *took)
{
    static const char from[] = "nrtabfv\\'\"0", to[] = "\n\r\t\a\b\f\v\\'\"\0";
    const char *f = left ? memchr(from, p[0], sizeof from - 1) : NULL;
    *took = 1;
    if (f) {
        d[0] = to[f - from];
        return 1;
    }
    int digits = !left ? 0 : p[0] == 'x' ? 2 : p[0] == 'u' ? 4 : p[0] == 'U' ? 8 : 0;
    long v;
    if (digits && left > (size_t)digits && !hexval(p + 1, digits, &v) && v < 0x110000) {
        *took = 1 + (size_t)digits;
        return mhla_utf8_put(d, (int32_t)v);
    }
    d[0] = '\\';
    *took = 0;
    return 1;
}

static int lex_string(lexer *lx)
{
    const char *p = lx->s + lx->pos;
    char q = p[0], *d = tpl_alloc(lx->a, lx->n - lx->pos + 1);
    size_t k = 1, j = 0, took;
    if (!d)
        return MHLA_TPL_NOMEM;
    for (; lx->pos + k < lx->n && p[k] != q; k++) {
        if (p[k] == '\\' && lx->pos + k + 1 < lx->n) {
            j += unescape(p + k + 1, lx->n - lx->pos - k - 1, d + j, &took);
            k += took;
        } else {
            lx->line += p[k] == '\n';
            d[j++] = p[k];
        }
    }
    if (lx->pos + k >= lx->n)
        return lex_fail(lx, "unexpected end of string");
    int rc = push(lx, T_STRING, d, j);
    lx->pos += k + 1;
    return rc;
}

static int lex_op(lexer *lx, int *depth)
{
    static const char *two[] = {"/"
                                "/",
                                "**",
                                "==",
                                "!=",
                                "<=",
                                ">="};
    const char *p = lx->s + lx->pos;
    size_t k = 1;
    for (size_t i = 0; i < sizeof two / sizeof two[0]; i++)
        if (lx->pos + 1 < lx->n && !memcmp(p, two[i], 2))
            k = 2;
    if (k == 1 && !strchr("+-/*%~[](){}<>=.:|,;", p[0]))
        return lex_fail(lx, "unexpected character in tag");
    if (k == 1 && strchr("([{", p[0]))
        ++*depth;
    if (k == 1 && strchr(")]}", p[0]) && --*depth < 0)
        return lex_fail(lx, "unbalanced brackets");
    lx->pos += k;
    return push(lx, T_OP, p, k);
}

static int lex_tag_tokens(lexer *lx, const char *end, int kind_end)
{
    int depth = 0, rc = 0;
    while (!rc) {
        while (lx->pos < lx->n && is_ws(lx->s[lx->pos]))
            lx->line += lx->s[lx->pos++] == '\n';
        if (lx->pos >= lx->n)
            return lex_fail(lx, "unexpected end of template in a tag");
        const char *p = lx->s + lx->pos;
        int line = lx->line;
        if (!depth && match_end(lx, end, kind_end == T_BLOCK_END)) {
            rc = push(lx, kind_end, p, 2);
            lx->out->t[lx->out->n - 1].line = line;
            return rc;
        }
        if (is_name(p[0], 1)) {
            size_t k = 1;
            while (lx->pos + k < lx->n && is_name(p[k], 0))
                k++;
            rc = push(lx, T_NAME, p, k);
            lx->pos += k;
        } else if (p[0] >= '0' && p[0] <= '9') {
            rc = lex_number(lx);
        } else if (p[0] == '\'' || p[0] == '"') {
            rc = lex_string(lx);
        } else {
            rc = lex_op(lx, &depth);
        }
    }
    return rc;
}

/* jinja2 joins source.splitlines() with "\n": every line break becomes
 * "\n" and one trailing line break is gone. */
static char *normalise(tpl_arena *a, const char *src, size_t len, size_t *n)
{
    char *d = tpl_alloc(a, len + 1);
    if (!d)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)src[i];
        if (c == '\r' && i + 1 < len && src[i + 1] == '\n')
            continue;
        if (c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e))
            c = '\n';
        d[k++] = (char)c;
    }
    if (k && d[k - 1] == '\n')
        k--;
    *n = k;
    return d;
}

int tpl_lex(tpl_arena *a, const char *src, size_t len, tpl_toks *out, char *err, size_t errlen)
{
    lexer lx = {.a = a, .line = 1, .line_starting = 1, .out = out, .err = err, .errlen = errlen};
    lx.s = normalise(a, src, len, &lx.n);
    int rc = lx.s ? lex_root(&lx) : MHLA_TPL_NOMEM;
    if (!rc)
        rc = push(&lx, T_EOF, "", 0) ? MHLA_TPL_NOMEM : 0;
    if (rc == MHLA_TPL_NOMEM && err)
        snprintf(err, errlen, "out of memory");
    return rc;
}
