/* tpl_format.c — Python's printf-style string formatting, fmt % args: the
 * conversions s r d i f F e E g G x X o c and %%, with flags, width and
 * precision; args a tuple (positional) or one value. */
#include <stdio.h>
#include <string.h>

#include "tpl_internal.h"

typedef struct {
    char flags[8], conv;
    int width, prec; /* -1: not given */
} fmt_spec;

/* Parses "%[flags][width][.prec]conv" at s[*i] (after the '%'). */
static int parse_spec(const char *s, size_t n, size_t *i, fmt_spec *f)
{
    int nf = 0;
    memset(f, 0, sizeof *f);
    f->width = f->prec = -1;
    while (*i < n && strchr("-+ 0#", s[*i]) && nf < 7)
        f->flags[nf++] = s[(*i)++];
    for (; *i < n && s[*i] >= '0' && s[*i] <= '9' && f->width < 10000; (*i)++)
        f->width = (f->width < 0 ? 0 : f->width * 10) + (s[*i] - '0');
    if (*i < n && s[*i] == '.')
        for (f->prec = 0, (*i)++; *i < n && s[*i] >= '0' && s[*i] <= '9' && f->prec < 10000; (*i)++)
            f->prec = f->prec * 10 + (s[*i] - '0');
    if (*i >= n || !strchr("srdifFeEgGxXoc%", s[*i]))
        return -1;
    f->conv = s[(*i)++];
    return 0;
}

/* s or r: the text padded to the width (counted in characters). */
static int put_text(tpl_rt *rt, mhla_buf *b, const fmt_spec *f, tpl_val *v)
{
    mhla_buf t = {0};
    int rc = f->conv == 'r' ? tpl_put_repr(rt, &t, v) : tpl_put_str(rt, &t, v);
    long chars = 0;
    size_t keep = 0; /* bytes of the first prec characters */
    for (; !rc && keep < t.len; keep++) {
        int starts = ((unsigned char)t.p[keep] & 0xc0) != 0x80;
        if (starts && f->prec >= 0 && chars == f->prec)
            break;
        chars += starts;
    }
    t.len = keep;
    int left = strchr(f->flags, '-') != NULL;
    for (long k = chars; !rc && !left && k < f->width; k++)
        rc = mhla_buf_putc(b, ' ');
    rc = rc || mhla_buf_put(b, t.p ? t.p : "", t.len);
    for (long k = chars; !rc && left && k < f->width; k++)
        rc = mhla_buf_putc(b, ' ');
    mhla_buf_free(&t);
    return rc ? -1 : 0;
}

static int put_number(tpl_rt *rt, mhla_buf *b, const fmt_spec *f, tpl_val *v, int line)
{
    if (v->k != V_INT && v->k != V_FLOAT && v->k != V_BOOL)
        return tpl_fail(rt, MHLA_TPL_ERROR, line, "%%%c format: a real number is required, not %s",
                        f->conv, tpl_type_name(v));
    int is_int = strchr("dixXoc", f->conv) != NULL;
    long long i = v->k == V_FLOAT ? (long long)v->u.f : v->k == V_INT ? v->u.i : v->u.b;
    double d = v->k == V_FLOAT ? v->u.f : (double)i;
    char spec[48], out[512];
    snprintf(spec, sizeof spec, "%%%s%s%s%s%c", f->flags, f->width >= 0 ? "*" : "",
             f->prec >= 0 ? ".*" : "", is_int && f->conv != 'c' ? "ll" : "",
             f->conv == 'i' ? 'd' : f->conv);
    int w = f->width > 400 ? 400 : f->width, p = f->prec > 300 ? 300 : f->prec;
    int n;
    if (w >= 0 && p >= 0)
        n = is_int ? snprintf(out, sizeof out, spec, w, p, i)
                   : snprintf(out, sizeof out, spec, w, p, d);
    else if (w >= 0 || p >= 0)
        n = is_int ? snprintf(out, sizeof out, spec, w >= 0 ? w : p, i)
                   : snprintf(out, sizeof out, spec, w >= 0 ? w : p, d);
    else
        n = is_int ? snprintf(out, sizeof out, spec, i) : snprintf(out, sizeof out, spec, d);
    return n < 0 || mhla_buf_put(b, out, (size_t)n < sizeof out ? (size_t)n : sizeof out - 1) ? -1
                                                                                              : 0;
}

tpl_val *tpl_format(tpl_rt *rt, tpl_val *fmt, tpl_val *args, int line)
{
    mhla_buf b = {0};
    int next = 0, rc = 0, nargs = args->k == V_LIST && args->tuple ? args->u.l.n : 1;
    for (size_t i = 0; i < fmt->u.s.n && !rc;) {
        const char *pct = memchr(fmt->u.s.p + i, '%', fmt->u.s.n - i);
        size_t lit = pct ? (size_t)(pct - fmt->u.s.p) - i : fmt->u.s.n - i;
        rc = mhla_buf_put(&b, fmt->u.s.p + i, lit) ? -1 : 0;
        i += lit + (pct ? 1 : 0);
        if (!pct || rc)
            continue;
        fmt_spec f;
        if (parse_spec(fmt->u.s.p, fmt->u.s.n, &i, &f) || (f.conv != '%' && next >= nargs)) {
            rc = tpl_fail(rt, MHLA_TPL_ERROR, line, "bad format string or too few arguments");
            break;
        }
        tpl_val *v = f.conv == '%'                                       ? NULL
                     : nargs == 1 && !(args->k == V_LIST && args->tuple) ? args
                                                                         : args->u.l.a[next];
        next += v != NULL;
        rc = !v                     ? mhla_buf_putc(&b, '%')
             : strchr("sr", f.conv) ? put_text(rt, &b, &f, v)
                                    : put_number(rt, &b, &f, v, line);
    }
    if (!rc && next < nargs)
        rc = tpl_fail(rt, MHLA_TPL_ERROR, line,
                      "not all arguments converted during string formatting");
    tpl_val *r = rc ? (rt->rc ? NULL : tpl_nomem(rt)) : tpl_str(rt, b.p ? b.p : "", b.len);
    mhla_buf_free(&b);
    return r;
}
