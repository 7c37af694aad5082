/* tpl_tests.c — jinja2's tests (x is name(args)): defined, none, string,
 * number, mapping, sequence, comparisons, odd/even, divisibleby, ... */
#include <string.h>

#include "tpl_internal.h"

static int cmp_test(tpl_rt *rt, const char *name, tpl_val *x, tpl_val *y, int line)
{
    static const char *names[] = {"equalto", "eq", "==", "ne", "!=", "lt",     "<", "le",
                                  "<=",      "gt", ">",  "ge", ">=", "sameas", "in"};
    static const int ops[] = {OP_EQ, OP_EQ, OP_EQ, OP_NE, OP_NE, OP_LT, OP_LT, OP_LE,
                              OP_LE, OP_GT, OP_GT, OP_GE, OP_GE, OP_EQ, OP_IN};
    for (int i = 0; i < 15; i++)
        if (!strcmp(name, names[i])) {
            if (!y)
                return tpl_fail(rt, MHLA_TPL_ERROR, line, "test '%s' needs an argument", name);
            if (i == 13 && x->k != y->k)
                return 0;
            tpl_val *r = tpl_binop(rt, ops[i], x, y, line);
            return r ? r->u.b : -1;
        }
    return -2;
}

static int int_test(tpl_rt *rt, const char *name, tpl_val *x, tpl_val *y, int line)
{
    if (x->k != V_INT && x->k != V_BOOL)
        return tpl_fail(rt, MHLA_TPL_ERROR, line, "test '%s' needs an integer", name);
    long long v = x->k == V_INT ? x->u.i : x->u.b;
    if (!strcmp(name, "odd"))
        return (v % 2) != 0;
    if (!strcmp(name, "even"))
        return v % 2 == 0;
    if (!y || y->k != V_INT || y->u.i == 0)
        return tpl_fail(rt, MHLA_TPL_ERROR, line, "divisibleby needs a nonzero integer");
    return v % y->u.i == 0;
}

static int kind_test(const char *name, const tpl_val *x)
{
    static const char *names[] = {"defined", "undefined", "none",    "string",   "number",
                                  "integer", "float",     "mapping", "iterable", "sequence",
                                  "boolean", "true",      "false",   "callable", NULL};
    int i = 0;
    for (; names[i] && strcmp(names[i], name); i++)
        ;
    switch (i) {
    case 0: return x->k != V_UNDEF;
    case 1: return x->k == V_UNDEF;
    case 2: return x->k == V_NONE;
    case 3: return x->k == V_STR;
    case 4: return x->k == V_INT || x->k == V_FLOAT || x->k == V_BOOL;
    case 5: return x->k == V_INT;
    case 6: return x->k == V_FLOAT;
    case 7: return x->k == V_DICT && !x->ns;
    case 8:
    case 9: return x->k == V_STR || x->k == V_LIST || (x->k == V_DICT && !x->ns) || x->k == V_UNDEF;
    case 10: return x->k == V_BOOL;
    case 11: return x->k == V_BOOL && x->u.b;
    case 12: return x->k == V_BOOL && !x->u.b;
    case 13: return x->k == V_FUNC;
    default: return -2;
    }
}

int tpl_test(tpl_rt *rt, const char *name, tpl_val *x, tpl_args *args)
{
    tpl_val *y = tpl_arg(args, 0, NULL);
    int r = kind_test(name, x);
    if (r != -2)
        return r;
    r = cmp_test(rt, name, x, y, args->line);
    if (r != -2)
        return r;
    if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby"))
        return int_test(rt, name, x, y, args->line);
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        if (x->k != V_STR)
            return 0;
        tpl_val *c = tpl_str_case(rt, x, name[0] == 'u');
        return c ? !memcmp(c->u.s.p, x->u.s.p, x->u.s.n) : -1;
    }
    return tpl_fail(rt, MHLA_TPL_ERROR, args->line, "no test named '%s'", name);
}
