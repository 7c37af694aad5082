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

/* The loop variable: one dict per loop, its values replaced each iteration
 * (as jinja2 advances one LoopContext), in this order of keys. */
static const char *const loop_keys[] = {"index",  "index0",   "revindex", "revindex0",
                                        "length", "depth",    "depth0",   "first",
                                        "last",   "previtem", "nextitem", "cycle"};
enum { N_LOOP_KEYS = sizeof loop_keys / sizeof loop_keys[0] };

static int loop_ints(tpl_rt *rt, tpl_val *d, tpl_val **v, int n, int i)
{
    long long x[] = {i + 1, i, n - i, n - i - 1};
    for (int k = 0; k < 4; k++)
        if (!(v[k] = tpl_int(rt, x[k])))
            return -1;
    if (d->u.d.n) { /* length, depth, depth0 stay */
        for (int k = 4; k < 7; k++)
            v[k] = d->u.d.v[k];
        return 0;
    }
    long long c[] = {n, 1, 0};
    for (int k = 4; k < 7; k++)
        if (!(v[k] = tpl_int(rt, c[k - 4])))
            return -1;
    return 0;
}

/* Brings d (empty on the first iteration) to iteration i of l. */
static int loop_update(tpl_rt *rt, tpl_val *d, tpl_val *l, int i, tpl_val *t, tpl_val *f)
{
    int n = l->u.l.n;
    tpl_val *v[N_LOOP_KEYS];
    if (loop_ints(rt, d, v, n, i))
        return -1;
    v[7] = i == 0 ? t : f;
    v[8] = i == n - 1 ? t : f;
    v[9] = i > 0 ? l->u.l.a[i - 1] : tpl_undef(rt, "previtem");
    v[10] = i < n - 1 ? l->u.l.a[i + 1] : tpl_undef(rt, "nextitem");
    v[11] = d->u.d.n ? d->u.d.v[11] : tpl_new(rt, V_FUNC); /* loop.cycle(a, b, ...) */
    if (!v[9] || !v[10] || !v[11])
        return -1;
    v[11]->u.fn.kind = F_GLOBAL;
    v[11]->name = "loop.cycle";
    v[11]->u.fn.self = v[1]; /* cycles on index0 */
    for (int k = 0; k < N_LOOP_KEYS; k++) {
        if (d->u.d.n == N_LOOP_KEYS) {
            d->u.d.v[k] = v[k];
            continue;
        }
        tpl_val *key = tpl_str(rt, loop_keys[k], strlen(loop_keys[k]));
        if (!key || tpl_dict_set(rt, d, key, v[k]))
            return -1;
    }
    return 0;
}

int tpl_loop(tpl_rt *rt, tpl_scope *sc, const tpl_node *n)
{
    tpl_val *l = loop_items(rt, sc, n), *loop = tpl_dict(rt);
    tpl_val *t = tpl_bool(rt, 1), *f = tpl_bool(rt, 0);
    if (!l || !loop || !t || !f)
        return -1;
    for (int i = 0; i < l->u.l.n; i++) {
        if (++rt->iters > rt->lim.max_iterations)
            return tpl_fail(rt, MHLA_TPL_LIMIT, n->line, "more than %ld loop iterations",
                            rt->lim.max_iterations);
        tpl_scope *s = tpl_scope_new(rt, sc);
        if (!s || loop_update(rt, loop, l, i, t, f) || tpl_scope_set(rt, s, "loop", loop) ||
            tpl_assign(rt, s, n->a, l->u.l.a[i]))
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
