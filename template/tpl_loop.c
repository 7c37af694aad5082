/* tpl_loop.c — {% for %}: the items (filtered by the loop's if), the loop
 * variable (index, first, last, previtem, ...), else, break and continue,
 * and the render's cap on iterations. */
#include <string.h>

#include "tpl_internal.h"

/* The items the loop runs over: the iterable, less those its if refuses. */
static tpl_val *loop_items(tpl_rt *rt, tpl_scope *sc, const tpl_node *n)
{
    tpl_val *it = tpl_eval(rt, n->b);
    tpl_val *l = it ? tpl_iterate(rt, it, n->line) : NULL;
    if (!l || !n->c)
        return l;
    tpl_val *kept = tpl_list(rt);
    for (int i = 0; kept && i < l->u.l.n; i++) {
        tpl_scope *s = tpl_scope_new(rt, sc);
        if (!s || tpl_assign(rt, s, n->a, l->u.l.a[i]))
            return NULL;
        rt->sc = s;
        tpl_val *c = tpl_eval(rt, n->c);
        rt->sc = sc;
        if (!c || (tpl_truthy(c) && tpl_list_push(rt, kept, l->u.l.a[i])))
            return NULL;
    }
    return kept;
}

static int set_int(tpl_rt *rt, tpl_val *d, const char *k, long long v)
{
    tpl_val *key = tpl_str(rt, k, strlen(k)), *x = key ? tpl_int(rt, v) : NULL;
    return !x || tpl_dict_set(rt, d, key, x) ? -1 : 0;
}

static int set_val(tpl_rt *rt, tpl_val *d, const char *k, tpl_val *v)
{
    tpl_val *key = tpl_str(rt, k, strlen(k));
    return !v || !key || tpl_dict_set(rt, d, key, v) ? -1 : 0;
}

static tpl_val *loop_var(tpl_rt *rt, tpl_val *l, int i)
{
    int n = l->u.l.n;
    tpl_val *d = tpl_dict(rt);
    if (!d || set_int(rt, d, "index", i + 1) || set_int(rt, d, "index0", i) ||
        set_int(rt, d, "revindex", n - i) || set_int(rt, d, "revindex0", n - i - 1) ||
        set_int(rt, d, "length", n) || set_int(rt, d, "depth", 1) || set_int(rt, d, "depth0", 0))
        return NULL;
    if (set_val(rt, d, "first", tpl_bool(rt, i == 0)) ||
        set_val(rt, d, "last", tpl_bool(rt, i == n - 1)) ||
        set_val(rt, d, "previtem", i > 0 ? l->u.l.a[i - 1] : tpl_undef(rt, "previtem")) ||
        set_val(rt, d, "nextitem", i < n - 1 ? l->u.l.a[i + 1] : tpl_undef(rt, "nextitem")))
        return NULL;
    return d;
}

int tpl_loop(tpl_rt *rt, tpl_scope *sc, const tpl_node *n)
{
    tpl_val *l = loop_items(rt, sc, n);
    if (!l)
        return -1;
    for (int i = 0; i < l->u.l.n; i++) {
        if (++rt->iters > rt->lim.max_iterations)
            return tpl_fail(rt, MHLA_TPL_LIMIT, n->line, "more than %ld loop iterations",
                            rt->lim.max_iterations);
        tpl_scope *s = tpl_scope_new(rt, sc);
        tpl_val *loop = s ? loop_var(rt, l, i) : NULL;
        if (!loop || tpl_scope_set(rt, s, "loop", loop) || tpl_assign(rt, s, n->a, l->u.l.a[i]))
            return -1;
        int rc = tpl_exec_body(rt, s, n->body);
        if (rc < 0)
            return rc;
        if (rc == TPL_BREAK)
            break;
    }
    if (!l->u.l.n && n->d)
        return tpl_exec_body(rt, sc, n->d);
    return 0;
}
