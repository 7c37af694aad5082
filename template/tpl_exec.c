/* tpl_exec.c — running statements: text and output, if, set (with
 * namespace attributes and tuple unpacking), break and continue, filter
 * blocks; loops are in tpl_loop.c, macros in tpl_macro.c. */
#include <string.h>

#include "tpl_internal.h"

int tpl_loop(tpl_rt *rt, tpl_scope *sc, const tpl_node *n);

int tpl_emit(tpl_rt *rt, const char *s, size_t n)
{
    if (rt->out->len + n > rt->lim.max_output)
        return tpl_fail(rt, MHLA_TPL_LIMIT, 0, "output longer than %zu bytes", rt->lim.max_output);
    if (mhla_buf_put(rt->out, s, n))
        return tpl_fail(rt, MHLA_TPL_NOMEM, 0, "out of memory");
    return 0;
}

tpl_scope *tpl_scope_new(tpl_rt *rt, tpl_scope *parent)
{
    tpl_scope *sc = tpl_alloc(rt->a, sizeof *sc);
    if (!sc || !(sc->vars = tpl_dict(rt)))
        return sc ? NULL : (tpl_nomem(rt), NULL);
    sc->parent = parent;
    return sc;
}

int tpl_scope_set(tpl_rt *rt, tpl_scope *sc, const char *name, tpl_val *v)
{
    tpl_val *k = tpl_str(rt, name, strlen(name));
    return !k || tpl_dict_set(rt, sc->vars, k, v) ? -1 : 0;
}

static int assign_name(tpl_rt *rt, tpl_scope *sc, const tpl_node *t, tpl_val *v)
{
    tpl_val *k = tpl_str(rt, t->s, t->n);
    return !k || tpl_dict_set(rt, sc->vars, k, v) ? -1 : 0;
}

int tpl_assign(tpl_rt *rt, tpl_scope *sc, const tpl_node *t, tpl_val *v)
{
    if (t->kind == N_NAME)
        return assign_name(rt, sc, t, v);
    if (t->kind == N_ATTR) {
        tpl_val *ns = tpl_lookup(rt, sc, t->a->s, t->a->n), *k;
        if (!ns || ns->k != V_DICT || !ns->ns)
            return ns ? tpl_fail(rt, MHLA_TPL_ERROR, t->line,
                                 "cannot assign attribute on non-namespace object")
                      : -1;
        return !(k = tpl_str(rt, t->s, t->n)) || tpl_dict_set(rt, ns, k, v) ? -1 : 0;
    }
    tpl_val *l = tpl_iterate(rt, v, t->line);
    if (!l)
        return -1;
    if (l->u.l.n != t->na)
        return tpl_fail(rt, MHLA_TPL_ERROR, t->line, "%s values to unpack (expected %d)",
                        l->u.l.n > t->na ? "too many" : "not enough", t->na);
    for (int i = 0; i < t->na; i++)
        if (tpl_assign(rt, sc, t->args[i], l->u.l.a[i]))
            return -1;
    return 0;
}

tpl_val *tpl_capture(tpl_rt *rt, tpl_scope *sc, const tpl_node *body)
{
    if (++rt->depth > rt->lim.max_depth) {
        rt->depth--;
        tpl_fail(rt, MHLA_TPL_LIMIT, body->line, "calls nest deeper than %d", rt->lim.max_depth);
        return NULL;
    }
    mhla_buf b = {0}, *saved = rt->out;
    rt->out = &b;
    int rc = tpl_exec_body(rt, sc, body);
    rt->out = saved;
    rt->depth--;
    tpl_val *v = rc < 0 ? NULL : tpl_str(rt, b.p ? b.p : "", b.len);
    mhla_buf_free(&b);
    return v;
}

static int exec_out(tpl_rt *rt, const tpl_node *n)
{
    tpl_val *v = tpl_eval(rt, n->a);
    if (!v)
        return -1;
    if (v->k == V_STR)
        return tpl_emit(rt, v->u.s.p, v->u.s.n) ? -1 : 0;
    size_t before = rt->out->len;
    if (tpl_put_str(rt, rt->out, v))
        return -1;
    if (rt->out->len > rt->lim.max_output)
        return tpl_fail(rt, MHLA_TPL_LIMIT, n->line, "output longer than %zu bytes",
                        rt->lim.max_output);
    (void)before;
    return 0;
}

static int exec_if(tpl_rt *rt, tpl_scope *sc, const tpl_node *n)
{
    while (n && n->kind == N_IF) {
        tpl_val *c = tpl_eval(rt, n->a);
        if (!c)
            return -1;
        if (tpl_truthy(c))
            return tpl_exec_body(rt, sc, n->b);
        n = n->c;
    }
    return n ? tpl_exec_body(rt, sc, n) : 0;
}

static int exec_set(tpl_rt *rt, tpl_scope *sc, const tpl_node *n)
{
    tpl_val *v = n->b ? tpl_eval(rt, n->b) : tpl_capture(rt, sc, n->body);
    return v ? tpl_assign(rt, sc, n->a, v) : -1;
}

static int exec_filterblock(tpl_rt *rt, tpl_scope *sc, const tpl_node *n)
{
    tpl_args args = {.line = n->line};
    tpl_val *v = tpl_capture(rt, sc, n->body);
    if (!v || tpl_eval_args(rt, n, &args, 0))
        return -1;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)n->n, n->s);
    v = tpl_filter(rt, name, v, &args);
    if (!v || !(v = tpl_to_str(rt, v)))
        return -1;
    return tpl_emit(rt, v->u.s.p, v->u.s.n) ? -1 : 0;
}

int tpl_exec_macro_def(tpl_rt *rt, tpl_scope *sc, const tpl_node *n);
int tpl_exec_callblock(tpl_rt *rt, tpl_scope *sc, const tpl_node *n);

/* The body in a scope of its own, as Jinja2 runs a call block's caller. */
static int exec_generation(tpl_rt *rt, tpl_scope *sc, const tpl_node *n)
{
    tpl_scope *inner = tpl_scope_new(rt, sc);
    return inner ? tpl_exec_body(rt, inner, n->body) : -1;
}

static int exec_node(tpl_rt *rt, tpl_scope *sc, const tpl_node *n)
{
    switch (n->kind) {
    case N_TEXT: return tpl_emit(rt, n->s, n->n) ? -1 : 0;
    case N_OUT: return exec_out(rt, n);
    case N_IF: return exec_if(rt, sc, n);
    case N_FOR: return tpl_loop(rt, sc, n);
    case N_SET: return exec_set(rt, sc, n);
    case N_MACRO: return tpl_exec_macro_def(rt, sc, n);
    case N_CALLBLOCK: return tpl_exec_callblock(rt, sc, n);
    case N_FILTERBLOCK: return exec_filterblock(rt, sc, n);
    case N_GENERATION: return exec_generation(rt, sc, n);
    case N_BREAK: return TPL_BREAK;
    case N_CONTINUE: return TPL_CONTINUE;
    default: return tpl_fail(rt, MHLA_TPL_ERROR, n->line, "bad statement");
    }
}

int tpl_exec_body(tpl_rt *rt, tpl_scope *sc, const tpl_node *body)
{
    tpl_scope *saved = rt->sc;
    int rc = 0;
    if (++rt->edepth > rt->lim.max_expr_depth) {
        rt->edepth--;
        return tpl_fail(rt, MHLA_TPL_LIMIT, body->line,
                        "blocks and expressions nest deeper than %d", rt->lim.max_expr_depth);
    }
    for (int i = 0; i < body->nk && !rc; i++) {
        rt->sc = sc;
        rc = exec_node(rt, sc, body->kids[i]);
    }
    rt->sc = saved;
    rt->edepth--;
    return rc;
}
