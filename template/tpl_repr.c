/* tpl_repr.c — values as text: Python's str() and repr() (what a template
 * prints), and json.dumps(ensure_ascii=False) for the tojson filter. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpl_internal.h"

static int put(tpl_rt *rt, mhla_buf *b, const char *s, size_t n)
{
    if (mhla_buf_put(b, s, n)) {
        tpl_fail(rt, MHLA_TPL_NOMEM, 0, "out of memory");
        return -1;
    }
    return 0;
}

static int puts_(tpl_rt *rt, mhla_buf *b, const char *s) { return put(rt, b, s, strlen(s)); }

/* Python's repr of a float: the shortest digits that read back, fixed
 * notation for exponents -4..15, else d.ddde+XX. */
void tpl_put_float(char *dst, size_t n, double f)
{
    if (isnan(f) || isinf(f)) {
        snprintf(dst, n, "%s", isnan(f) ? "nan" : f < 0 ? "-inf" : "inf");
        return;
    }
    char e[40], digits[24];
    int p = 0;
    for (p = 0; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p, f);
        if (strtod(e, NULL) == f)
            break;
    }
    int exp = atoi(strchr(e, 'e') + 1), nd = 0;
    for (const char *c = e; *c != 'e'; c++)
        if (*c >= '0' && *c <= '9')
            digits[nd++] = *c;
    digits[nd] = 0;
    const char *sign = f < 0 ? "-" : "";
    if (exp < -4 || exp >= 16) {
        snprintf(dst, n, "%s%c%s%.*se%c%02d", sign, digits[0], nd > 1 ? "." : "", nd - 1,
                 digits + 1, exp < 0 ? '-' : '+', abs(exp));
    } else if (exp < 0) {
        snprintf(dst, n, "%s0.%0*d%s", sign, -exp - 1, 0, digits);
        if (exp == -1)
            snprintf(dst, n, "%s0.%s", sign, digits);
    } else if (nd <= exp + 1) {
        snprintf(dst, n, "%s%s%0*d.0", sign, digits, exp + 1 - nd, 0);
        if (nd == exp + 1)
            snprintf(dst, n, "%s%s.0", sign, digits);
    } else {
        snprintf(dst, n, "%s%.*s.%s", sign, exp + 1, digits, digits + exp + 1);
    }
}

static int put_scalar(tpl_rt *rt, mhla_buf *b, const tpl_val *v)
{
    char tmp[64];
    switch (v->k) {
    case V_UNDEF: return 0;
    case V_NONE: return puts_(rt, b, "None");
    case V_BOOL: return puts_(rt, b, v->u.b ? "True" : "False");
    case V_INT: snprintf(tmp, sizeof tmp, "%lld", v->u.i); return puts_(rt, b, tmp);
    case V_FLOAT: tpl_put_float(tmp, sizeof tmp, v->u.f); return puts_(rt, b, tmp);
    case V_STR: return put(rt, b, v->u.s.p, v->u.s.n);
    default:
        snprintf(tmp, sizeof tmp, "<function %s>", v->name ? v->name : "?");
        return puts_(rt, b, tmp);
    }
}

/* Python's repr escapes what is not printable: controls, format
 * characters and separators other than the space (the common ones). */
static int unprintable(int32_t c)
{
    return (c >= 0x80 && c <= 0xa0) || c == 0xad || c == 0x1680 || (c >= 0x2000 && c <= 0x200f) ||
           (c >= 0x2028 && c <= 0x202f) || (c >= 0x205f && c <= 0x2064) || c == 0x3000 ||
           c == 0xfeff;
}

/* A non-ASCII character at s: its escape in tmp when repr escapes it. */
static size_t repr_wide(const char *s, size_t n, char tmp[12], const char **esc)
{
    int32_t cp;
    size_t k = mhla_utf8_next(s, n, &cp);
    if (unprintable(cp)) {
        snprintf(tmp, 12, cp < 0x100 ? "\\x%02x" : "\\u%04x", (unsigned)cp);
        *esc = tmp;
    }
    return k;
}

static int put_repr_str(tpl_rt *rt, mhla_buf *b, const char *s, size_t n)
{
    char q = memchr(s, '\'', n) && !memchr(s, '"', n) ? '"' : '\'';
    if (put(rt, b, &q, 1))
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char tmp[12];
        const char *esc = NULL;
        if (c >= 0x80) {
            size_t k = repr_wide(s + i, n - i, tmp, &esc);
            if (esc ? puts_(rt, b, esc) : put(rt, b, s + i, k))
                return -1;
            i += k - 1;
            continue;
        }
        esc = c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
        if (!esc && c == (unsigned char)q)
            esc = q == '\'' ? "\\'" : "\\\"";
        if (!esc && (c < 0x20 || c == 0x7f)) {
            snprintf(tmp, sizeof tmp, "\\x%02x", c);
            esc = tmp;
        }
        if (esc ? puts_(rt, b, esc) : put(rt, b, s + i, 1))
            return -1;
    }
    return put(rt, b, &q, 1);
}

static int put_seq(tpl_rt *rt, mhla_buf *b, const tpl_val *v)
{
    if (puts_(rt, b, v->tuple ? "(" : "["))
        return -1;
    for (int i = 0; i < v->u.l.n; i++)
        if ((i && puts_(rt, b, ", ")) || tpl_put_repr(rt, b, v->u.l.a[i]))
            return -1;
    if (v->tuple && v->u.l.n == 1 && puts_(rt, b, ","))
        return -1;
    return puts_(rt, b, v->tuple ? ")" : "]");
}

static int put_dict(tpl_rt *rt, mhla_buf *b, const tpl_val *v)
{
    if (puts_(rt, b, v->ns ? "<Namespace {" : "{"))
        return -1;
    for (int i = 0; i < v->u.d.n; i++)
        if ((i && puts_(rt, b, ", ")) || tpl_put_repr(rt, b, v->u.d.k[i]) || puts_(rt, b, ": ") ||
            tpl_put_repr(rt, b, v->u.d.v[i]))
            return -1;
    return puts_(rt, b, v->ns ? "}>" : "}");
}

int tpl_put_repr(tpl_rt *rt, mhla_buf *b, const tpl_val *v)
{
    if (v->k == V_LIST && v->gen)
        return puts_(rt, b, "<generator object>");
    if (v->k == V_STR)
        return put_repr_str(rt, b, v->u.s.p, v->u.s.n);
    if (v->k == V_LIST)
        return put_seq(rt, b, v);
    if (v->k == V_DICT)
        return put_dict(rt, b, v);
    if (v->k == V_UNDEF)
        return puts_(rt, b, "Undefined");
    return put_scalar(rt, b, v);
}

int tpl_put_str(tpl_rt *rt, mhla_buf *b, const tpl_val *v)
{
    if (v->k == V_LIST || v->k == V_DICT)
        return tpl_put_repr(rt, b, v);
    return put_scalar(rt, b, v);
}

tpl_val *tpl_to_str(tpl_rt *rt, const tpl_val *v)
{
    if (v->k == V_STR)
        return (tpl_val *)v;
    mhla_buf b = {0};
    if (tpl_put_str(rt, &b, v)) {
        mhla_buf_free(&b);
        return NULL;
    }
    tpl_val *s = tpl_str(rt, b.p ? b.p : "", b.len);
    mhla_buf_free(&b);
    return s;
}

static int put_json_str(tpl_rt *rt, mhla_buf *b, const char *s, size_t n)
{
    if (put(rt, b, "\"", 1))
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char tmp[8];
        const char *esc = c == '"'    ? "\\\""
                          : c == '\\' ? "\\\\"
                          : c == '\n' ? "\\n"
                          : c == '\r' ? "\\r"
                          : c == '\t' ? "\\t"
                          : c == '\b' ? "\\b"
                          : c == '\f' ? "\\f"
                                      : NULL;
        if (!esc && c < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            esc = tmp;
        }
        if (esc ? puts_(rt, b, esc) : put(rt, b, s + i, 1))
            return -1;
    }
    return put(rt, b, "\"", 1);
}

static int put_newline(tpl_rt *rt, mhla_buf *b, int indent, int level)
{
    if (put(rt, b, "\n", 1))
        return -1;
    for (int i = 0; i < indent * level; i++)
        if (put(rt, b, " ", 1))
            return -1;
    return 0;
}

typedef struct {
    int indent;
    const char *isep, *ksep;
    int sort;
} json_style;

static int put_json(tpl_rt *rt, mhla_buf *b, const tpl_val *v, const json_style *st, int level);

static int put_json_list(tpl_rt *rt, mhla_buf *b, const tpl_val *v, const json_style *st, int level)
{
    if (!v->u.l.n)
        return puts_(rt, b, "[]");
    if (puts_(rt, b, "["))
        return -1;
    for (int i = 0; i < v->u.l.n; i++) {
        if (i && puts_(rt, b, st->isep))
            return -1;
        if (st->indent >= 0 && put_newline(rt, b, st->indent, level + 1))
            return -1;
        if (put_json(rt, b, v->u.l.a[i], st, level + 1))
            return -1;
    }
    if (st->indent >= 0 && put_newline(rt, b, st->indent, level))
        return -1;
    return puts_(rt, b, "]");
}

static int put_json_key(tpl_rt *rt, mhla_buf *b, const tpl_val *k)
{
    if (k->k == V_STR)
        return put_json_str(rt, b, k->u.s.p, k->u.s.n);
    if (put(rt, b, "\"", 1))
        return -1;
    if (k->k == V_NONE || k->k == V_BOOL)
        return puts_(rt, b, k->k == V_NONE ? "null\"" : k->u.b ? "true\"" : "false\"");
    return tpl_put_str(rt, b, k) || put(rt, b, "\"", 1) ? -1 : 0;
}

/* The order of a dict's keys: as inserted, or sorted when sort_keys. */
static void key_order(const tpl_val *v, int sort, int *idx)
{
    for (int i = 0; i < v->u.d.n; i++) {
        int j = i;
        for (; sort && j > 0 && tpl_compare(v->u.d.k[idx[j - 1]], v->u.d.k[i]) > 0; j--)
            idx[j] = idx[j - 1];
        idx[j] = i;
    }
}

static int put_json_dict(tpl_rt *rt, mhla_buf *b, const tpl_val *v, const json_style *st, int level)
{
    if (!v->u.d.n)
        return puts_(rt, b, "{}");
    int *idx = tpl_alloc(rt->a, sizeof *idx * (size_t)v->u.d.n);
    if (!idx || puts_(rt, b, "{"))
        return idx ? -1 : (tpl_nomem(rt), -1);
    key_order(v, st->sort, idx);
    for (int i = 0; i < v->u.d.n; i++) {
        if (i && puts_(rt, b, st->isep))
            return -1;
        if (st->indent >= 0 && put_newline(rt, b, st->indent, level + 1))
            return -1;
        if (put_json_key(rt, b, v->u.d.k[idx[i]]) || puts_(rt, b, st->ksep) ||
            put_json(rt, b, v->u.d.v[idx[i]], st, level + 1))
            return -1;
    }
    if (st->indent >= 0 && put_newline(rt, b, st->indent, level))
        return -1;
    return puts_(rt, b, "}");
}

static int put_json(tpl_rt *rt, mhla_buf *b, const tpl_val *v, const json_style *st, int level)
{
    if (level > rt->lim.max_expr_depth)
        return tpl_fail(rt, MHLA_TPL_LIMIT, 0, "tojson: the value nests too deep");
    switch (v->k) {
    case V_NONE: return puts_(rt, b, "null");
    case V_BOOL: return puts_(rt, b, v->u.b ? "true" : "false");
    case V_FLOAT:
        if (isnan(v->u.f) || isinf(v->u.f))
            return puts_(rt, b, isnan(v->u.f) ? "NaN" : v->u.f < 0 ? "-Infinity" : "Infinity");
        return put_scalar(rt, b, v);
    case V_INT: return put_scalar(rt, b, v);
    case V_STR: return put_json_str(rt, b, v->u.s.p, v->u.s.n);
    case V_LIST:
        if (v->gen)
            break;
        return put_json_list(rt, b, v, st, level);
    case V_DICT:
        if (v->ns)
            break;
        return put_json_dict(rt, b, v, st, level);
    default: break;
    }
    return tpl_fail(rt, MHLA_TPL_ERROR, 0, "Object of type %s is not JSON serializable",
                    tpl_type_name(v));
}

int tpl_put_json(tpl_rt *rt, mhla_buf *b, const tpl_val *v, int indent, int level, const char *isep,
                 const char *ksep, int sort)
{
    json_style st = {indent, isep, ksep, sort};
    return put_json(rt, b, v, &st, level);
}
