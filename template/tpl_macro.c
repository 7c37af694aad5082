/* tpl_macro.c — macros: {% macro %} defines one in its scope, a call runs
 * its body in a new scope over the one it was defined in, with the
 * parameters bound (defaults, varargs, kwargs, caller); {% call %} passes
 * its body as caller. */
#include <string.h>

#include "tpl_internal.h"

int tpl_exec_macro_def(tpl_rt *rt, tpl_scope *sc, const tpl_node *n)
{
    tpl_val *f = tpl_new(rt, V_FUNC);
    char *name = tpl_strdup(rt->a, n->s, n->n);
    if (!f || !name)
        return tpl_nomem(rt), -1;
    f->u.fn.kind = F_MACRO;
    f->u.fn.macro = n;
    f->u.fn.scope = sc;
    f->name = name;
    return tpl_scope_set(rt, sc, name, f);
}

/* Binds the parameters of m in s: positional arguments, keywords, defaults. */
static int bind_params(tpl_rt *rt, tpl_scope *s, const tpl_node *m, tpl_args *args)
{
    tpl_val *varargs = tpl_list(rt), *kwargs = tpl_dict(rt);
    if (!varargs || !kwargs)
        return -1;
    for (int i = 0; i < m->na; i++) {
        const tpl_node *p = m->args[i];
        char *name = tpl_strdup(rt->a, p->s, p->n);
        tpl_val *v = name ? tpl_arg(args, i, name) : NULL;
        rt->sc = s;
        if (!v)
            v = p->a ? tpl_eval(rt, p->a) : tpl_undef(rt, name);
        if (!v || tpl_scope_set(rt, s, name, v))
            return -1;
    }
    for (int i = m->na; i < args->npos; i++)
        if (tpl_list_push(rt, varargs, args->pos[i]))
            return -1;
    for (int i = 0; i < args->nkw; i++) {
        int known = 0;
        for (int k = 0; k < m->na; k++)
            known |= strlen(args->kwname[i]) == m->args[k]->n &&
                     !memcmp(args->kwname[i], m->args[k]->s, m->args[k]->n);
        tpl_val *key = known ? NULL : tpl_str(rt, args->kwname[i], strlen(args->kwname[i]));
        if (!known && (!key || tpl_dict_set(rt, kwargs, key, args->kw[i])))
            return -1;
    }
    return tpl_scope_set(rt, s, "varargs", varargs) || tpl_scope_set(rt, s, "kwargs", kwargs);
}

tpl_val *tpl_call_macro(tpl_rt *rt, tpl_val *f, tpl_args *args, const tpl_node *caller,
                        tpl_scope *caller_sc)
{
    const tpl_node *m = f->u.fn.macro;
    tpl_scope *saved = rt->sc, *s = tpl_scope_new(rt, f->u.fn.scope);
    if (!s || bind_params(rt, s, m, args)) {
        rt->sc = saved;
        return NULL;
    }
    if (caller) {
        tpl_val *c = tpl_new(rt, V_FUNC);
        if (!c)
            return NULL;
        c->u.fn.kind = F_MACRO;
        c->u.fn.macro = caller;
        c->u.fn.scope = caller_sc;
        c->name = "caller";
        if (tpl_scope_set(rt, s, "caller", c))
            return NULL;
    }
    tpl_val *v = tpl_capture(rt, s, m->body);
    rt->sc = saved;
    return v;
}

int tpl_exec_callblock(tpl_rt *rt, tpl_scope *sc, const tpl_node *n)
{
    tpl_args args = {.line = n->line};
    tpl_val *f = tpl_eval(rt, n->a->a);
    if (!f || tpl_eval_args(rt, n->a, &args, 0))
        return -1;
    if (f->k != V_FUNC || f->u.fn.kind != F_MACRO)
        return tpl_fail(rt, MHLA_TPL_ERROR, n->line, "{%% call %%} needs a macro");
    tpl_val *v = tpl_call_macro(rt, f, &args, n, sc);
    return v ? tpl_emit(rt, v->u.s.p, v->u.s.n) ? -1 : 0 : -1;
}
