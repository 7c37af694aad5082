/* tpl_eval.c — evaluating an expression node to a value: names through the
 * scopes, literals, lists, dicts, attribute and item access, slices, calls,
 * filters, tests and the logic operators. */
#include <string.h>

#include "tpl_internal.h"

tpl_val *tpl_lookup(tpl_rt *rt, tpl_scope *sc, const char *name, size_t n)
{
    tpl_val key = {.k = V_STR};
    key.u.s.p = name;
    key.u.s.n = n;
    for (; sc; sc = sc->parent) {
        tpl_val *v = tpl_dict_get(sc->vars, &key);
        if (v)
            return v;
    }
    static const char *globals[] = {"range",        "dict",   "namespace", "raise_exception",
                                    "strftime_now", "joiner", "cycler",    "lipsum"};
    char *nm = tpl_strdup(rt->a, name, n);
    if (!nm)
        return tpl_nomem(rt);
    for (int i = 0; i < 5; i++)
        if (!strcmp(nm, globals[i])) {
            tpl_val *f = tpl_new(rt, V_FUNC);
            if (f) {
                f->u.fn.kind = F_GLOBAL;
                f->name = globals[i];
            }
            return f;
        }
    return tpl_undef(rt, nm);
}

static tpl_val *eval_seq(tpl_rt *rt, const tpl_node *n)
{
    tpl_val *l = tpl_list(rt);
    if (!l)
        return NULL;
    l->tuple = n->kind == N_TUPLE;
    for (int i = 0; i < n->na; i++) {
        tpl_val *x = tpl_eval(rt, n->args[i]);
        if (!x || tpl_list_push(rt, l, x))
            return NULL;
    }
    return l;
}

static tpl_val *eval_dict(tpl_rt *rt, const tpl_node *n)
{
    tpl_val *d = tpl_dict(rt);
    if (!d)
        return NULL;
    for (int i = 0; i < n->na; i++) {
        tpl_val *k = tpl_eval(rt, n->args[i]->a), *v = k ? tpl_eval(rt, n->args[i]->b) : NULL;
        if (!v || tpl_dict_set(rt, d, k, v))
            return NULL;
    }
    return d;
}

static tpl_val *eval_call(tpl_rt *rt, const tpl_node *n)
{
    tpl_args args = {.line = n->line};
    if (n->a->kind == N_ATTR) { /* obj.method(args): no bound value needed */
        tpl_val *o = tpl_eval(rt, n->a->a);
        if (!o)
            return NULL;
        char *name = tpl_strdup(rt->a, n->a->s, n->a->n);
        if (!name)
            return tpl_nomem(rt);
        if (tpl_has_method(o, name)) {
            if (tpl_eval_args(rt, n, &args, 0))
                return NULL;
            return tpl_call_method(rt, o, name, &args);
        }
    }
    tpl_val *f = tpl_eval(rt, n->a);
    if (!f || tpl_eval_args(rt, n, &args, 0))
        return NULL;
    return tpl_call(rt, f, &args);
}

static tpl_val *eval_filter(tpl_rt *rt, const tpl_node *n)
{
    tpl_args args = {.line = n->line};
    tpl_val *x = tpl_eval(rt, n->a);
    if (!x || tpl_eval_args(rt, n, &args, 0))
        return NULL;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)n->n, n->s);
    return tpl_filter(rt, name, x, &args);
}

static tpl_val *eval_test(tpl_rt *rt, const tpl_node *n)
{
    tpl_args args = {.line = n->line};
    tpl_val *x = tpl_eval(rt, n->a);
    if (!x || tpl_eval_args(rt, n, &args, 0))
        return NULL;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)n->n, n->s);
    int r = tpl_test(rt, name, x, &args);
    return r < 0 ? NULL : tpl_bool(rt, r ^ n->neg);
}

static tpl_val *eval_logic(tpl_rt *rt, const tpl_node *n)
{
    tpl_val *x = tpl_eval(rt, n->a);
    if (!x)
        return NULL;
    switch (n->kind) {
    case N_NOT: return tpl_bool(rt, !tpl_truthy(x));
    case N_AND: return tpl_truthy(x) ? tpl_eval(rt, n->b) : x;
    case N_OR: return tpl_truthy(x) ? x : tpl_eval(rt, n->b);
    case N_NEG:
    case N_POS: {
        tpl_val *zero = tpl_int(rt, 0);
        return zero ? tpl_binop(rt, n->kind == N_NEG ? OP_SUB : OP_ADD, zero, x, n->line) : NULL;
    }
    default: {
        tpl_val *y = tpl_eval(rt, n->b);
        return y ? tpl_binop(rt, n->op, x, y, n->line) : NULL;
    }
    }
}

static tpl_val *eval_access(tpl_rt *rt, const tpl_node *n)
{
    tpl_val *o = tpl_eval(rt, n->a);
    if (!o)
        return NULL;
    if (n->kind == N_ATTR)
        return tpl_getattr(rt, o, n->s, n->n, n->line);
    tpl_val *k = tpl_eval(rt, n->b);
    return k ? tpl_getitem(rt, o, k, n->line) : NULL;
}

static tpl_val *eval_slice(tpl_rt *rt, const tpl_node *n)
{
    tpl_val *o = tpl_eval(rt, n->a), *parts[3] = {NULL, NULL, NULL};
    const tpl_node *pn[3] = {n->b, n->c, n->d};
    if (!o)
        return NULL;
    for (int i = 0; i < 3; i++)
        if (pn[i] && !(parts[i] = tpl_eval(rt, pn[i])))
            return NULL;
    return tpl_slice(rt, o, parts, n->line);
}

static tpl_val *eval_cond(tpl_rt *rt, const tpl_node *n)
{
    tpl_val *c = tpl_eval(rt, n->b);
    if (!c)
        return NULL;
    if (tpl_truthy(c))
        return tpl_eval(rt, n->a);
    return n->c ? tpl_eval(rt, n->c) : tpl_undef(rt, "");
}

static tpl_val *eval_node(tpl_rt *rt, const tpl_node *n)
{
    switch (n->kind) {
    case N_LIT: return n->lit;
    case N_NAME: return tpl_lookup(rt, rt->sc, n->s, n->n);
    case N_LIST:
    case N_TUPLE: return eval_seq(rt, n);
    case N_DICT: return eval_dict(rt, n);
    case N_ATTR:
    case N_ITEM: return eval_access(rt, n);
    case N_SLICE: return eval_slice(rt, n);
    case N_CALL: return eval_call(rt, n);
    case N_FILTER: return eval_filter(rt, n);
    case N_TEST: return eval_test(rt, n);
    case N_COND: return eval_cond(rt, n);
    default: return eval_logic(rt, n);
    }
}

tpl_val *tpl_eval(tpl_rt *rt, const tpl_node *n)
{
    if (++rt->edepth > rt->lim.max_expr_depth) {
        rt->edepth--;
        tpl_fail(rt, MHLA_TPL_LIMIT, n->line, "expressions nest deeper than %d",
                 rt->lim.max_expr_depth);
        return NULL;
    }
    tpl_val *v = eval_node(rt, n);
    rt->edepth--;
    return v;
}
