/* tpl_seqfilters.c — jinja2's filters on sequences: join, map, select,
 * reject, selectattr, rejectattr, items, first, last, list, unique,
 * reverse, sort. */
#include <string.h>

#include "tpl_internal.h"

/* item.attr for a filter's attribute= (dots walk into nested items). */
static tpl_val *attr_path(tpl_rt *rt, tpl_val *x, tpl_val *path, int line)
{
    if (path->k == V_INT)
        return tpl_getitem(rt, x, path, line);
    if (path->k != V_STR)
        return tpl_failv(rt, line, "attribute must be a string");
    const char *p = path->u.s.p, *end = p + path->u.s.n;
    while (x && p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        tpl_val *k = tpl_str(rt, p, n);
        if (!k)
            return NULL;
        x = x->k == V_UNDEF ? x : tpl_getitem(rt, x, k, line);
        p += n + 1;
    }
    return x;
}

static tpl_val *f_join(tpl_rt *rt, tpl_val *x, tpl_args *a)
{
    tpl_val *sep = tpl_arg(a, 0, "d"), *attr = tpl_arg(a, 1, "attribute");
    tpl_val *l = tpl_iterate(rt, x, a->line), *items = tpl_list(rt);
    if (!l || !items || (sep && !(sep = tpl_to_str(rt, sep))))
        return NULL;
    for (int i = 0; i < l->u.l.n; i++) {
        tpl_val *v = attr ? attr_path(rt, l->u.l.a[i], attr, a->line) : l->u.l.a[i];
        if (!v || tpl_list_push(rt, items, v))
            return NULL;
    }
    tpl_val empty = {.k = V_STR};
    empty.u.s.p = "";
    return tpl_str_join(rt, sep ? sep : &empty, items, a->line);
}

static tpl_val *f_map(tpl_rt *rt, tpl_val *x, tpl_args *a)
{
    tpl_val *l = tpl_truthy(x) ? tpl_iterate(rt, x, a->line) : tpl_list(rt), *r = tpl_list(rt);
    tpl_val *attr = tpl_arg(a, -1, "attribute"), *dflt = tpl_arg(a, -1, "default");
    if (!l || !r)
        return NULL;
    tpl_args rest = {.line = a->line};
    for (int i = 1; i < a->npos; i++)
        rest.pos[rest.npos++] = a->pos[i];
    if (!attr && (!a->npos || a->pos[0]->k != V_STR))
        return tpl_failv(rt, a->line, "map needs a filter name or attribute=");
    for (int i = 0; i < l->u.l.n; i++) {
        tpl_val *v;
        if (attr) {
            v = attr_path(rt, l->u.l.a[i], attr, a->line);
            if (v && v->k == V_UNDEF && dflt)
                v = dflt;
        } else {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)a->pos[0]->u.s.n, a->pos[0]->u.s.p);
            v = tpl_filter(rt, name, l->u.l.a[i], &rest);
        }
        if (!v || tpl_list_push(rt, r, v))
            return NULL;
    }
    return r;
}

/* select/reject(test, args...) and selectattr/rejectattr(attr, test, args...) */
static tpl_val *f_select(tpl_rt *rt, tpl_val *x, tpl_args *a, int keep, int by_attr)
{
    tpl_val *l = tpl_truthy(x) ? tpl_iterate(rt, x, a->line) : tpl_list(rt), *r = tpl_list(rt);
    if (!l || !r)
        return NULL;
    if (by_attr && !a->npos)
        return tpl_failv(rt, a->line, "selectattr needs an attribute");
    int t = by_attr;
    tpl_args rest = {.line = a->line};
    for (int i = t + 1; i < a->npos; i++)
        rest.pos[rest.npos++] = a->pos[i];
    char test[64] = "";
    if (t < a->npos)
        snprintf(test, sizeof test, "%.*s", (int)a->pos[t]->u.s.n, a->pos[t]->u.s.p);
    for (int i = 0; i < l->u.l.n; i++) {
        tpl_val *v = by_attr ? attr_path(rt, l->u.l.a[i], a->pos[0], a->line) : l->u.l.a[i];
        if (!v)
            return NULL;
        int ok = test[0] ? tpl_test(rt, test, v, &rest) : tpl_truthy(v);
        if (ok < 0)
            return NULL;
        if (ok == keep && tpl_list_push(rt, r, l->u.l.a[i]))
            return NULL;
    }
    return r;
}

static tpl_val *f_unique(tpl_rt *rt, tpl_val *x, int line)
{
    tpl_val *l = tpl_iterate(rt, x, line), *r = tpl_list(rt), *seen = tpl_list(rt);
    for (int i = 0; l && r && seen && i < l->u.l.n; i++) {
        tpl_val *v = l->u.l.a[i], *key = v->k == V_STR ? tpl_str_case(rt, v, 0) : v;
        int dup = 0;
        for (int k = 0; key && k < seen->u.l.n && !dup; k++)
            dup = tpl_equal(seen->u.l.a[k], key);
        if (!key || (!dup && (tpl_list_push(rt, seen, key) || tpl_list_push(rt, r, v))))
            return NULL;
    }
    return l && seen ? r : NULL;
}

static tpl_val *f_sort(tpl_rt *rt, tpl_val *x, tpl_args *a)
{
    tpl_val *rev = tpl_arg(a, 0, "reverse"), *attr = tpl_arg(a, 2, "attribute");
    tpl_val *l = tpl_iterate(rt, x, a->line), *r = tpl_list(rt), *keys = tpl_list(rt);
    for (int i = 0; l && r && keys && i < l->u.l.n; i++) {
        tpl_val *k = attr ? attr_path(rt, l->u.l.a[i], attr, a->line) : l->u.l.a[i];
        if (!k || tpl_list_push(rt, keys, k) || tpl_list_push(rt, r, l->u.l.a[i]))
            return NULL;
        for (int j = r->u.l.n - 1; j > 0; j--) {
            int c = tpl_compare(keys->u.l.a[j - 1], keys->u.l.a[j]);
            if (c == -2)
                return tpl_failv(rt, a->line, "sort: values do not compare");
            if ((rev && tpl_truthy(rev)) ? c >= 0 : c <= 0)
                break;
            tpl_val *t = keys->u.l.a[j], *u = r->u.l.a[j];
            keys->u.l.a[j] = keys->u.l.a[j - 1], r->u.l.a[j] = r->u.l.a[j - 1];
            keys->u.l.a[j - 1] = t, r->u.l.a[j - 1] = u;
        }
    }
    return l && keys ? r : NULL;
}

static tpl_val *f_list(tpl_rt *rt, tpl_val *x, int line, int reverse)
{
    tpl_val *l = tpl_iterate(rt, x, line), *r = tpl_list(rt);
    for (int i = 0; l && r && i < l->u.l.n; i++)
        if (tpl_list_push(rt, r, l->u.l.a[reverse ? l->u.l.n - 1 - i : i]))
            return NULL;
    if (reverse && r && x->k == V_STR)
        return tpl_str_join(rt, &(tpl_val){.k = V_STR, .u.s = {"", 0}}, r, line);
    return l ? r : NULL;
}

/* dictsort(case_sensitive=False, by='key', reverse=False): (key, value) pairs. */
static tpl_val *f_dictsort(tpl_rt *rt, tpl_val *x, tpl_args *a)
{
    tpl_val *cs = tpl_arg(a, 0, "case_sensitive"), *by = tpl_arg(a, 1, "by");
    tpl_val *rev = tpl_arg(a, 2, "reverse");
    if (x->k != V_DICT)
        return tpl_failv(rt, a->line, "dictsort: not a mapping");
    tpl_val *items = tpl_dict_items(rt, x), *r = tpl_list(rt);
    int vi = by && tpl_is_str(by, "value"), fold = !cs || !tpl_truthy(cs);
    int down = rev && tpl_truthy(rev);
    for (int i = 0; items && r && i < items->u.l.n; i++) {
        tpl_val *it = items->u.l.a[i], *k = it->u.l.a[vi];
        if ((fold && k->k == V_STR && !(k = tpl_str_case(rt, k, 0))) || tpl_list_push(rt, r, it))
            return NULL;
        int j = r->u.l.n - 1;
        for (; j > 0; j--) {
            tpl_val *pk = r->u.l.a[j - 1]->u.l.a[vi];
            if (fold && pk->k == V_STR && !(pk = tpl_str_case(rt, pk, 0)))
                return NULL;
            int c = tpl_compare(pk, k);
            if (c == -2)
                return tpl_failv(rt, a->line, "dictsort: keys do not compare");
            if (down ? c >= 0 : c <= 0)
                break;
            r->u.l.a[j] = r->u.l.a[j - 1];
        }
        r->u.l.a[j] = it;
    }
    return items ? r : NULL;
}

static tpl_val *as_gen(tpl_val *v)
{
    if (v)
        v->gen = 1;
    return v;
}

tpl_val *tpl_seq_filter(tpl_rt *rt, const char *name, tpl_val *x, tpl_args *a)
{
    if (!strcmp(name, "dictsort"))
        return f_dictsort(rt, x, a);
    if (!strcmp(name, "join"))
        return f_join(rt, x, a);
    if (!strcmp(name, "map"))
        return as_gen(f_map(rt, x, a));
    if (!strcmp(name, "select") || !strcmp(name, "reject"))
        return as_gen(f_select(rt, x, a, name[0] == 's', 0));
    if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr"))
        return as_gen(f_select(rt, x, a, name[0] == 's', 1));
    if (!strcmp(name, "items")) {
        if (x->k == V_UNDEF)
            return tpl_list(rt);
        return x->k == V_DICT ? tpl_dict_items(rt, x)
                              : tpl_failv(rt, a->line, "items: not a mapping");
    }
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        tpl_val *l = tpl_iterate(rt, x, a->line);
        if (!l)
            return NULL;
        if (!l->u.l.n)
            return tpl_undef(rt, "");
        return l->u.l.a[name[0] == 'f' ? 0 : l->u.l.n - 1];
    }
    if (!strcmp(name, "list") || !strcmp(name, "reverse"))
        return f_list(rt, x, a->line, name[0] == 'r');
    if (!strcmp(name, "unique"))
        return as_gen(f_unique(rt, x, a->line));
    if (!strcmp(name, "sort"))
        return f_sort(rt, x, a);
    return tpl_failv(rt, a->line, "no filter named '%s'", name);
}
