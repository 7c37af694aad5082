/* tpl_methods.c — the methods of strings, dicts and lists that templates
 * call (Python's semantics; case mapping is ASCII only). Methods that
 * modify a list or a dict are refused, as jinja2's immutable sandbox
 * refuses them. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpl_internal.h"

static const char *str_methods[] = {"strip",      "lstrip",   "rstrip",     "split",
                                    "startswith", "endswith", "replace",    "lower",
                                    "upper",      "title",    "capitalize", "join",
                                    "find",       "count",    "format",     NULL};
static const char *dict_methods[] = {"get", "items", "keys", "values", NULL};
static const char *unsafe_methods[] = {"append", "pop",        "extend",  "insert",
                                       "remove", "clear",      "sort",    "reverse",
                                       "update", "setdefault", "popitem", NULL};

static int in_list(const char *const *l, const char *name)
{
    for (; *l; l++)
        if (!strcmp(*l, name))
            return 1;
    return 0;
}

int tpl_has_method(const tpl_val *o, const char *name)
{
    if (o->k == V_STR)
        return in_list(str_methods, name);
    if (o->k == V_DICT && !o->ns)
        return in_list(dict_methods, name) || in_list(unsafe_methods, name);
    if (o->k == V_LIST)
        return in_list(unsafe_methods, name);
    return 0;
}

static int affix(const tpl_val *s, const tpl_val *x, int end)
{
    if (x->k != V_STR || x->u.s.n > s->u.s.n)
        return 0;
    return !memcmp(s->u.s.p + (end ? s->u.s.n - x->u.s.n : 0), x->u.s.p, x->u.s.n);
}

static tpl_val *starts_ends(tpl_rt *rt, tpl_val *s, tpl_args *a, int end)
{
    tpl_val *x = tpl_arg(a, 0, NULL);
    if (!x || (x->k != V_STR && x->k != V_LIST))
        return tpl_failv(rt, a->line, "%swith takes a string or a tuple", end ? "ends" : "starts");
    int r = x->k == V_STR && affix(s, x, end);
    for (int i = 0; x->k == V_LIST && i < x->u.l.n; i++)
        r |= affix(s, x->u.l.a[i], end);
    return tpl_bool(rt, r);
}

static tpl_val *find_count(tpl_rt *rt, tpl_val *s, tpl_args *a, int count)
{
    tpl_val *x = tpl_arg(a, 0, NULL);
    if (!x || x->k != V_STR)
        return tpl_failv(rt, a->line, "must be str");
    long long n = 0, at = -1;
    for (size_t i = 0; i + x->u.s.n <= s->u.s.n; i++) {
        if (memcmp(s->u.s.p + i, x->u.s.p, x->u.s.n))
            continue;
        if (!count) {
            long long cps = 0;
            for (size_t k = 0; k < i; k++)
                cps += ((unsigned char)s->u.s.p[k] & 0xc0) != 0x80;
            return tpl_int(rt, cps);
        }
        n++;
        i += x->u.s.n ? x->u.s.n - 1 : 0;
    }
    return tpl_int(rt, count ? n : at);
}

/* '{}'/'{0}'/'{name}'.format(...): plain fields only. */
static tpl_val *format(tpl_rt *rt, tpl_val *s, tpl_args *a)
{
    mhla_buf b = {0};
    int next = 0, rc = 0;
    for (size_t i = 0; i < s->u.s.n && !rc; i++) {
        char c = s->u.s.p[i];
        if ((c == '{' || c == '}') && i + 1 < s->u.s.n && s->u.s.p[i + 1] == c) {
            rc = mhla_buf_putc(&b, c);
            i++;
            continue;
        }
        if (c != '{') {
            rc = mhla_buf_putc(&b, c);
            continue;
        }
        const char *close = memchr(s->u.s.p + i, '}', s->u.s.n - i);
        if (!close)
            break;
        size_t fl = (size_t)(close - s->u.s.p) - i - 1;
        char field[64];
        snprintf(field, sizeof field, "%.*s", (int)fl, s->u.s.p + i + 1);
        tpl_val *v = !fl                                ? tpl_arg(a, next++, NULL)
                     : isdigit((unsigned char)field[0]) ? tpl_arg(a, atoi(field), NULL)
                                                        : tpl_arg(a, -1, field);
        rc = !v ? -2 : tpl_put_str(rt, &b, v);
        i += fl + 1;
    }
    tpl_val *r = rc ? NULL : tpl_str(rt, b.p ? b.p : "", b.len);
    mhla_buf_free(&b);
    return rc == -2 ? tpl_failv(rt, a->line, "format: a field has no argument") : r;
}

static tpl_val *str_method(tpl_rt *rt, tpl_val *s, const char *m, tpl_args *a)
{
    tpl_val *x = tpl_arg(a, 0, NULL), *y = tpl_arg(a, 1, NULL);
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip"))
        return tpl_str_strip(rt, s, x, m[0] != 'r', m[0] != 'l');
    if (!strcmp(m, "split")) {
        tpl_val *sep = tpl_arg(a, 0, "sep"), *max = tpl_arg(a, 1, "maxsplit");
        return tpl_str_split(rt, s, sep, max && max->k == V_INT ? max->u.i : -1, a->line);
    }
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith"))
        return starts_ends(rt, s, a, m[0] == 'e');
    if (!strcmp(m, "replace")) {
        tpl_val *c = tpl_arg(a, 2, "count");
        if (!x || !y || x->k != V_STR || y->k != V_STR)
            return tpl_failv(rt, a->line, "replace takes two strings");
        return tpl_str_replace(rt, s, x, y, c && c->k == V_INT ? c->u.i : -1);
    }
    if (!strcmp(m, "join"))
        return x ? tpl_str_join(rt, s, x, a->line) : tpl_failv(rt, a->line, "join takes a list");
    if (!strcmp(m, "find") || !strcmp(m, "count"))
        return find_count(rt, s, a, m[0] == 'c');
    if (!strcmp(m, "format"))
        return format(rt, s, a);
    return tpl_str_case(rt, s, m[0] == 'l' ? 0 : m[0] == 'u' ? 1 : m[0] == 't' ? 2 : 3);
}

static tpl_val *dict_view(tpl_rt *rt, tpl_val *d, int what)
{
    tpl_val *l = tpl_list(rt);
    for (int i = 0; l && i < d->u.d.n; i++) {
        tpl_val *x = what == 0 ? d->u.d.k[i] : what == 1 ? d->u.d.v[i] : tpl_list(rt);
        if (!x)
            return NULL;
        if (what == 2) {
            x->tuple = 1;
            if (tpl_list_push(rt, x, d->u.d.k[i]) || tpl_list_push(rt, x, d->u.d.v[i]))
                return NULL;
        }
        if (tpl_list_push(rt, l, x))
            return NULL;
    }
    return l;
}

tpl_val *tpl_dict_items(tpl_rt *rt, tpl_val *d) { return dict_view(rt, d, 2); }

tpl_val *tpl_call_method(tpl_rt *rt, tpl_val *self, const char *name, tpl_args *args)
{
    if (in_list(unsafe_methods, name) && self->k != V_STR)
        return tpl_failv(rt, args->line, "access to attribute '%s' of '%s' object is unsafe.", name,
                         tpl_type_name(self));
    if (self->k == V_STR)
        return str_method(rt, self, name, args);
    if (!strcmp(name, "get")) {
        tpl_val *k = tpl_arg(args, 0, NULL), *dflt = tpl_arg(args, 1, NULL);
        if (!k)
            return tpl_failv(rt, args->line, "get expected at least 1 argument");
        tpl_val *v = tpl_dict_get(self, k);
        return v ? v : dflt ? dflt : tpl_none(rt);
    }
    return dict_view(rt, self, !strcmp(name, "keys") ? 0 : !strcmp(name, "values") ? 1 : 2);
}
