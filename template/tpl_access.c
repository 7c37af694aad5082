/* tpl_access.c — x.name and x[key] as jinja2's sandbox resolves them
 * (attribute first for '.', item first for '[]', Undefined when neither
 * exists), and slices of lists and strings (by code point). */
#include <string.h>

#include "tpl_internal.h"

static tpl_val *undefined_error(tpl_rt *rt, const tpl_val *o, int line)
{
    return tpl_failv(rt, line, "'%s' is undefined", o->name && *o->name ? o->name : "value");
}

tpl_val *tpl_getattr(tpl_rt *rt, tpl_val *o, const char *name, size_t n, int line)
{
    if (o->k == V_UNDEF)
        return undefined_error(rt, o, line);
    char *nm = tpl_strdup(rt->a, name, n);
    if (!nm)
        return tpl_nomem(rt);
    if (tpl_has_method(o, nm)) {
        tpl_val *f = tpl_new(rt, V_FUNC);
        if (f) {
            f->u.fn.kind = F_METHOD;
            f->u.fn.self = o;
            f->name = nm;
        }
        return f;
    }
    if (o->k == V_DICT) {
        tpl_val *v = tpl_dict_gets(o, nm);
        if (v)
            return v;
    }
    return tpl_undef(rt, nm);
}

/* The byte offset of code point i of s (i in [0, count]); count when i is -1. */
static size_t cp_offset(const char *s, size_t n, long long i, long long *count)
{
    size_t off = 0;
    long long k = 0;
    while (off < n && k != i) {
        int32_t cp;
        off += mhla_utf8_next(s + off, n - off, &cp);
        k++;
    }
    if (count)
        *count = k;
    return off;
}

static tpl_val *index_seq(tpl_rt *rt, tpl_val *o, long long i)
{
    long long len = o->k == V_LIST ? o->u.l.n : 0;
    if (o->k == V_STR)
        cp_offset(o->u.s.p, o->u.s.n, -1, &len);
    if (i < 0)
        i += len;
    if (i < 0 || i >= len)
        return tpl_undef(rt, "");
    if (o->k == V_LIST)
        return o->u.l.a[i];
    size_t a = cp_offset(o->u.s.p, o->u.s.n, i, NULL);
    size_t b = cp_offset(o->u.s.p, o->u.s.n, i + 1, NULL);
    return tpl_str(rt, o->u.s.p + a, b - a);
}

tpl_val *tpl_getitem(tpl_rt *rt, tpl_val *o, tpl_val *key, int line)
{
    if (o->k == V_UNDEF)
        return undefined_error(rt, o, line);
    if (o->k == V_DICT) {
        tpl_val *v = o->ns ? NULL : tpl_dict_get(o, key);
        if (v)
            return v;
    }
    if (o->k == V_LIST && o->gen)
        return tpl_failv(rt, line, "'generator' object is not subscriptable");
    if ((o->k == V_LIST || o->k == V_STR) && (key->k == V_INT || key->k == V_BOOL))
        return index_seq(rt, o, key->k == V_INT ? key->u.i : key->u.b);
    if (key->k == V_STR)
        return tpl_getattr(rt, o, key->u.s.p, key->u.s.n, line);
    return tpl_undef(rt, "");
}

/* Python's slice.indices: the start, stop and step for a length. */
static int slice_indices(tpl_rt *rt, tpl_val *parts[3], long long len, long long *start,
                         long long *stop, long long *step, int line)
{
    for (int i = 0; i < 3; i++)
        if (parts[i] && parts[i]->k != V_NONE && parts[i]->k != V_INT)
            return tpl_fail(rt, MHLA_TPL_ERROR, line, "slice indices must be integers or None");
    *step = parts[2] && parts[2]->k == V_INT ? parts[2]->u.i : 1;
    if (*step == 0)
        return tpl_fail(rt, MHLA_TPL_ERROR, line, "slice step cannot be zero");
    long long lo = *step < 0 ? -1 : 0, hi = *step < 0 ? len - 1 : len;
    long long *ends[2] = {start, stop};
    for (int i = 0; i < 2; i++) {
        if (!parts[i] || parts[i]->k == V_NONE) {
            *ends[i] = (i == 0) == (*step > 0) ? lo : hi;
            continue;
        }
        long long v = parts[i]->u.i;
        if (v < 0)
            v = v + len < lo ? lo : v + len;
        else if (v > hi)
            v = hi;
        *ends[i] = v;
    }
    return 0;
}

tpl_val *tpl_slice(tpl_rt *rt, tpl_val *o, tpl_val *parts[3], int line)
{
    if (o->k == V_UNDEF)
        return undefined_error(rt, o, line);
    if (o->k != V_LIST && o->k != V_STR)
        return tpl_failv(rt, line, "'%s' object is not subscriptable", tpl_type_name(o));
    tpl_val *items = o->k == V_LIST ? o : tpl_iterate(rt, o, line);
    long long start = 0, stop = 0, step = 1;
    if (!items || slice_indices(rt, parts, items->u.l.n, &start, &stop, &step, line))
        return NULL;
    tpl_val *r = tpl_list(rt);
    for (long long i = start; r && (step > 0 ? i < stop : i > stop); i += step)
        if (tpl_list_push(rt, r, items->u.l.a[i]))
            return NULL;
    if (!r || o->k == V_LIST) {
        if (r)
            r->tuple = o->tuple;
        return r;
    }
    mhla_buf b = {0};
    for (int i = 0; i < r->u.l.n; i++)
        if (mhla_buf_put(&b, r->u.l.a[i]->u.s.p, r->u.l.a[i]->u.s.n)) {
            mhla_buf_free(&b);
            return tpl_nomem(rt);
        }
    tpl_val *s = tpl_str(rt, b.p ? b.p : "", b.len);
    mhla_buf_free(&b);
    return s;
}
