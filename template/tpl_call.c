/* tpl_call.c — calls: arguments, and the globals a chat template may use:
 * range, dict, namespace, raise_exception and strftime_now. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpl_internal.h"

int tpl_eval_args(tpl_rt *rt, const tpl_node *n, tpl_args *args, int first)
{
    for (int i = first; i < n->na; i++) {
        const tpl_node *x = n->args[i];
        int kw = x->kind == N_KWARG;
        if ((kw ? args->nkw : args->npos) >= 8)
            return tpl_fail(rt, MHLA_TPL_ERROR, n->line, "too many arguments");
        tpl_val *v = tpl_eval(rt, kw ? x->a : x);
        if (!v)
            return -1;
        if (!kw) {
            args->pos[args->npos++] = v;
            continue;
        }
        char *name = tpl_strdup(rt->a, x->s, x->n);
        if (!name)
            return tpl_nomem(rt), -1;
        args->kwname[args->nkw] = name;
        args->kw[args->nkw++] = v;
    }
    return 0;
}

tpl_val *tpl_arg(const tpl_args *args, int i, const char *name)
{
    if (i >= 0 && i < args->npos)
        return args->pos[i];
    for (int k = 0; name && k < args->nkw; k++)
        if (!strcmp(args->kwname[k], name))
            return args->kw[k];
    return NULL;
}

static tpl_val *g_range(tpl_rt *rt, tpl_args *a)
{
    long long v[3] = {0, 0, 1};
    if (a->npos < 1 || a->npos > 3)
        return tpl_failv(rt, a->line, "range expected 1 to 3 arguments");
    for (int i = 0; i < a->npos; i++) {
        if (a->pos[i]->k != V_INT && a->pos[i]->k != V_BOOL)
            return tpl_failv(rt, a->line, "range: '%s' object cannot be interpreted as an integer",
                             tpl_type_name(a->pos[i]));
        v[a->npos == 1 ? 1 : i] = a->pos[i]->k == V_INT ? a->pos[i]->u.i : a->pos[i]->u.b;
    }
    if (v[2] == 0)
        return tpl_failv(rt, a->line, "range() arg 3 must not be zero");
    tpl_val *l = tpl_list(rt);
    for (long long i = v[0]; l && (v[2] > 0 ? i < v[1] : i > v[1]); i += v[2]) {
        if (++rt->iters > rt->lim.max_iterations)
            return tpl_fail(rt, MHLA_TPL_LIMIT, a->line, "more than %ld loop iterations",
                            rt->lim.max_iterations),
                   NULL;
        tpl_val *x = tpl_int(rt, i);
        if (!x || tpl_list_push(rt, l, x))
            return NULL;
    }
    return l;
}

/* dict(**kw) and namespace(**kw) (namespace also takes a dict first). */
static tpl_val *g_dict(tpl_rt *rt, tpl_args *a, int ns)
{
    tpl_val *d = tpl_dict(rt);
    if (!d)
        return NULL;
    d->ns = (unsigned char)ns;
    if (a->npos > 1 || (a->npos == 1 && a->pos[0]->k != V_DICT))
        return tpl_failv(rt, a->line, "%s() takes a mapping and keywords",
                         ns ? "namespace" : "dict");
    for (int i = 0; a->npos && i < a->pos[0]->u.d.n; i++)
        if (tpl_dict_set(rt, d, a->pos[0]->u.d.k[i], a->pos[0]->u.d.v[i]))
            return NULL;
    for (int i = 0; i < a->nkw; i++) {
        tpl_val *k = tpl_str(rt, a->kwname[i], strlen(a->kwname[i]));
        if (!k || tpl_dict_set(rt, d, k, a->kw[i]))
            return NULL;
    }
    return d;
}

static tpl_val *g_raise(tpl_rt *rt, tpl_args *a)
{
    tpl_val *m = a->npos ? tpl_to_str(rt, a->pos[0]) : tpl_str(rt, "", 0);
    if (!m)
        return NULL;
    tpl_fail(rt, MHLA_TPL_RAISED, a->line, "%.*s", (int)m->u.s.n, m->u.s.p);
    return NULL;
}

static tpl_val *g_strftime(tpl_rt *rt, tpl_args *a)
{
    if (a->npos != 1 || a->pos[0]->k != V_STR)
        return tpl_failv(rt, a->line, "strftime_now takes one format string");
    const char *fake = getenv("MHLA_TPL_FAKE_TIME");
    time_t now = fake ? (time_t)strtoll(fake, NULL, 10) : time(NULL);
    struct tm tm;
    if (!localtime_r(&now, &tm))
        return tpl_failv(rt, a->line, "strftime_now: no local time");
    char fmt[256], out[512];
    snprintf(fmt, sizeof fmt, "%.*s", (int)a->pos[0]->u.s.n, a->pos[0]->u.s.p);
    size_t n = strftime(out, sizeof out, fmt, &tm);
    return tpl_str(rt, out, n);
}

tpl_val *tpl_call_global(tpl_rt *rt, const char *name, tpl_args *args)
{
    if (!strcmp(name, "range"))
        return g_range(rt, args);
    if (!strcmp(name, "dict") || !strcmp(name, "namespace"))
        return g_dict(rt, args, name[0] == 'n');
    if (!strcmp(name, "raise_exception"))
        return g_raise(rt, args);
    if (!strcmp(name, "strftime_now"))
        return g_strftime(rt, args);
    return tpl_failv(rt, args->line, "'%s' is undefined", name);
}

tpl_val *tpl_call(tpl_rt *rt, tpl_val *f, tpl_args *args)
{
    if (f->k == V_UNDEF)
        return tpl_failv(rt, args->line, "'%s' is undefined", f->name ? f->name : "");
    if (f->k != V_FUNC)
        return tpl_failv(rt, args->line, "'%s' object is not callable", tpl_type_name(f));
    if (f->u.fn.kind == F_GLOBAL)
        return tpl_call_global(rt, f->name, args);
    if (f->u.fn.kind == F_METHOD)
        return tpl_call_method(rt, f->u.fn.self, f->name, args);
    return tpl_call_macro(rt, f, args, NULL, NULL);
}
