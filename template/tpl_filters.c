/* tpl_filters.c — jinja2's filters on strings and numbers (x|name(args)):
 * tojson, trim, length, default, case, replace, string, int, float, abs,
 * round, indent, escape; the filters on sequences are in tpl_seqfilters.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpl_internal.h"

tpl_val *tpl_seq_filter(tpl_rt *rt, const char *name, tpl_val *x, tpl_args *a);

static tpl_val *f_tojson(tpl_rt *rt, tpl_val *x, tpl_args *a)
{
    tpl_val *ind = tpl_arg(a, 0, "indent"), *sep = tpl_arg(a, 1, "separators");
    tpl_val *sort = tpl_arg(a, 2, "sort_keys");
    int indent = ind && ind->k == V_INT ? (int)ind->u.i : -1;
    const char *isep = indent >= 0 ? "," : ", ", *ksep = ": ";
    char sepbuf[2][16];
    if (sep && sep->k == V_LIST && sep->u.l.n == 2) {
        for (int i = 0; i < 2; i++)
            snprintf(sepbuf[i], sizeof sepbuf[i], "%.*s", (int)sep->u.l.a[i]->u.s.n,
                     sep->u.l.a[i]->u.s.p);
        isep = sepbuf[0];
        ksep = sepbuf[1];
    }
    mhla_buf b = {0};
    int rc = tpl_put_json(rt, &b, x, indent, 0, isep, ksep, sort && tpl_truthy(sort));
    tpl_val *r = rc ? NULL : tpl_str(rt, b.p ? b.p : "", b.len);
    mhla_buf_free(&b);
    return r;
}

static tpl_val *f_length(tpl_rt *rt, tpl_val *x, int line)
{
    if (x->k == V_STR) {
        long long n = 0;
        for (size_t i = 0; i < x->u.s.n; i++)
            n += ((unsigned char)x->u.s.p[i] & 0xc0) != 0x80;
        return tpl_int(rt, n);
    }
    if ((x->k == V_LIST && !x->gen) || x->k == V_UNDEF)
        return tpl_int(rt, x->k == V_LIST ? x->u.l.n : 0);
    if (x->k == V_DICT && !x->ns)
        return tpl_int(rt, x->u.d.n);
    return tpl_failv(rt, line, "object of type '%s' has no len()", tpl_type_name(x));
}

static tpl_val *f_default(tpl_rt *rt, tpl_val *x, tpl_args *a)
{
    tpl_val *d = tpl_arg(a, 0, "default_value"), *boolean = tpl_arg(a, 1, "boolean");
    int use = x->k == V_UNDEF || (boolean && tpl_truthy(boolean) && !tpl_truthy(x));
    if (!use)
        return x;
    return d ? d : tpl_str(rt, "", 0);
}

static tpl_val *f_number(tpl_rt *rt, tpl_val *x, tpl_args *a, int is_float)
{
    tpl_val *d = tpl_arg(a, 0, "default");
    double f = 0;
    int ok = 1;
    if (x->k == V_INT || x->k == V_BOOL || x->k == V_FLOAT)
        f = x->k == V_FLOAT ? x->u.f : x->k == V_INT ? (double)x->u.i : x->u.b;
    else if (x->k == V_STR) {
        char buf[64], *end;
        snprintf(buf, sizeof buf, "%.*s", (int)x->u.s.n, x->u.s.p);
        f = strtod(buf, &end);
        ok = end != buf && *end == 0;
    } else
        ok = 0;
    if (!ok)
        return d ? d : is_float ? tpl_float(rt, 0) : tpl_int(rt, 0);
    if (!is_float && x->k == V_INT)
        return x;
    return is_float ? tpl_float(rt, f) : tpl_int(rt, (long long)f);
}

static tpl_val *f_round(tpl_rt *rt, tpl_val *x, tpl_args *a)
{
    tpl_val *prec = tpl_arg(a, 0, "precision"), *method = tpl_arg(a, 1, "method");
    double f = x->k == V_FLOAT ? x->u.f : x->k == V_INT ? (double)x->u.i : 0;
    double m = pow(10, prec && prec->k == V_INT ? (double)prec->u.i : 0);
    if (method && tpl_is_str(method, "floor"))
        return tpl_float(rt, floor(f * m) / m);
    if (method && tpl_is_str(method, "ceil"))
        return tpl_float(rt, ceil(f * m) / m);
    return tpl_float(rt, round(f * m) / m);
}

static tpl_val *f_indent(tpl_rt *rt, tpl_val *s, tpl_args *a)
{
    tpl_val *w = tpl_arg(a, 0, "width"), *first = tpl_arg(a, 1, "first");
    tpl_val *blank = tpl_arg(a, 2, "blank");
    char pad[256];
    if (w && w->k == V_STR)
        snprintf(pad, sizeof pad, "%.*s", (int)w->u.s.n, w->u.s.p);
    else
        snprintf(pad, sizeof pad, "%*s", w && w->k == V_INT ? (int)w->u.i % 200 : 4, "");
    mhla_buf b = {0};
    int rc = 0, line_start = first && tpl_truthy(first);
    for (size_t i = 0; i < s->u.s.n && !rc; i++) {
        int empty = s->u.s.p[i] == '\n';
        if (line_start && (!empty || (blank && tpl_truthy(blank))))
            rc = mhla_buf_put(&b, pad, strlen(pad));
        rc = rc || mhla_buf_putc(&b, s->u.s.p[i]);
        line_start = empty;
    }
    tpl_val *r = rc ? tpl_nomem(rt) : tpl_str(rt, b.p ? b.p : "", b.len);
    mhla_buf_free(&b);
    return r;
}

tpl_val *tpl_escape(tpl_rt *rt, tpl_val *s)
{
    if (s->markup)
        return s;
    mhla_buf b = {0};
    int rc = 0;
    for (size_t i = 0; i < s->u.s.n && !rc; i++) {
        char c = s->u.s.p[i];
        const char *e = c == '&'    ? "&amp;"
                        : c == '<'  ? "&lt;"
                        : c == '>'  ? "&gt;"
                        : c == '"'  ? "&#34;"
                        : c == '\'' ? "&#39;"
                                    : NULL;
        rc = e ? mhla_buf_put(&b, e, strlen(e)) : mhla_buf_putc(&b, c);
    }
    tpl_val *r = rc ? tpl_nomem(rt) : tpl_str(rt, b.p ? b.p : "", b.len);
    mhla_buf_free(&b);
    if (r)
        r->markup = 1;
    return r;
}

/* jinja2's title: each word (split at whitespace, -, (, {, [, <) with its
 * first letter upper and the rest lower. */
static tpl_val *f_title(tpl_rt *rt, tpl_val *s)
{
    tpl_val *r = tpl_str_case(rt, s, 0);
    char *p = r ? (char *)r->u.s.p : NULL;
    for (size_t i = 0; p && i < r->u.s.n; i++)
        if (i == 0 || strchr(" \t\n\r\v\f-({[<", p[i - 1]))
            p[i] = (char)(p[i] >= 'a' && p[i] <= 'z' ? p[i] - 32 : p[i]);
    return r;
}

static tpl_val *str_filter(tpl_rt *rt, const char *name, tpl_val *s, tpl_args *a)
{
    if (!strcmp(name, "trim"))
        return tpl_str_strip(rt, s, tpl_arg(a, 0, "chars"), 1, 1);
    if (!strcmp(name, "lower") || !strcmp(name, "upper") || !strcmp(name, "capitalize"))
        return tpl_str_case(rt, s, name[0] == 'l' ? 0 : name[0] == 'u' ? 1 : 3);
    if (!strcmp(name, "title"))
        return f_title(rt, s);
    if (!strcmp(name, "replace")) {
        tpl_val *o = tpl_arg(a, 0, "old"), *n = tpl_arg(a, 1, "new"), *c = tpl_arg(a, 2, "count");
        if (!o || !n || !(o = tpl_to_str(rt, o)) || !(n = tpl_to_str(rt, n)))
            return rt->rc ? NULL : tpl_failv(rt, a->line, "replace takes two strings");
        return tpl_str_replace(rt, s, o, n, c && c->k == V_INT ? c->u.i : -1);
    }
    if (!strcmp(name, "indent"))
        return f_indent(rt, s, a);
    if (!strcmp(name, "e") || !strcmp(name, "escape"))
        return tpl_escape(rt, s);
    if (!strcmp(name, "safe") && !s->markup) {
        tpl_val *m = tpl_str(rt, s->u.s.p, s->u.s.n);
        if (m)
            m->markup = 1;
        return m;
    }
    return s; /* string */
}

tpl_val *tpl_filter(tpl_rt *rt, const char *name, tpl_val *x, tpl_args *a)
{
    static const char *str_filters[] = {"trim",   "lower",   "upper",  "capitalize",
                                        "title",  "replace", "indent", "e",
                                        "escape", "string",  "safe",   NULL};
    if (!strcmp(name, "tojson"))
        return f_tojson(rt, x, a);
    if (!strcmp(name, "length") || !strcmp(name, "count"))
        return f_length(rt, x, a->line);
    if (!strcmp(name, "default") || !strcmp(name, "d"))
        return f_default(rt, x, a);
    if (!strcmp(name, "int") || !strcmp(name, "float"))
        return f_number(rt, x, a, name[0] == 'f');
    if (!strcmp(name, "round"))
        return f_round(rt, x, a);
    if (!strcmp(name, "abs")) {
        if (x->k == V_INT)
            return tpl_int(rt, x->u.i < 0 ? -x->u.i : x->u.i);
        return x->k == V_FLOAT ? tpl_float(rt, fabs(x->u.f))
                               : tpl_failv(rt, a->line, "bad operand type for abs()");
    }
    for (int i = 0; str_filters[i]; i++)
        if (!strcmp(name, str_filters[i])) {
            tpl_val *s = tpl_to_str(rt, x);
            return s ? str_filter(rt, name, s, a) : NULL;
        }
    return tpl_seq_filter(rt, name, x, a);
}
