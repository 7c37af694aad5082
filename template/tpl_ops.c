/* tpl_ops.c — the binary operators with Python's semantics, attribute and
 * item access with jinja2's fallbacks, and slices. */
#include <math.h>
#include <string.h>

#include "tpl_internal.h"

static int is_num(const tpl_val *v) { return v->k == V_BOOL || v->k == V_INT || v->k == V_FLOAT; }
static int is_int(const tpl_val *v) { return v->k == V_BOOL || v->k == V_INT; }
static double num(const tpl_val *v)
{
    return v->k == V_FLOAT ? v->u.f : v->k == V_INT ? (double)v->u.i : v->u.b;
}
static long long inum(const tpl_val *v) { return v->k == V_INT ? v->u.i : v->u.b; }

static tpl_val *concat(tpl_rt *rt, tpl_val *x, tpl_val *y)
{
    if (x->k == V_STR && y->k == V_STR) {
        char *p = tpl_alloc(rt->a, x->u.s.n + y->u.s.n + 1);
        tpl_val *v = p ? tpl_new(rt, V_STR) : tpl_nomem(rt);
        if (!v)
            return NULL;
        memcpy(p, x->u.s.p, x->u.s.n);
        memcpy(p + x->u.s.n, y->u.s.p, y->u.s.n);
        v->u.s.p = p;
        v->u.s.n = x->u.s.n + y->u.s.n;
        return v;
    }
    tpl_val *l = tpl_list(rt);
    if (!l)
        return NULL;
    for (int i = 0; i < x->u.l.n + y->u.l.n; i++)
        if (tpl_list_push(rt, l, i < x->u.l.n ? x->u.l.a[i] : y->u.l.a[i - x->u.l.n]))
            return NULL;
    l->tuple = x->tuple;
    return l;
}

static tpl_val *repeat(tpl_rt *rt, tpl_val *x, long long times)
{
    if (x->k == V_LIST) {
        tpl_val *l = tpl_list(rt);
        for (long long i = 0; l && i < times; i++)
            for (int k = 0; k < x->u.l.n; k++)
                if (tpl_list_push(rt, l, x->u.l.a[k]))
                    return NULL;
        if (l)
            l->tuple = x->tuple;
        return l;
    }
    size_t n = times > 0 ? x->u.s.n * (size_t)times : 0;
    char *p = tpl_alloc(rt->a, n + 1);
    tpl_val *v = p ? tpl_new(rt, V_STR) : tpl_nomem(rt);
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i += x->u.s.n)
        memcpy(p + i, x->u.s.p, x->u.s.n);
    v->u.s.p = p;
    v->u.s.n = n;
    return v;
}

static tpl_val *int_op(tpl_rt *rt, int op, long long a, long long b, int line)
{
    long long r = 0;
    int bad = 0;
    switch (op) {
    case OP_ADD: bad = __builtin_add_overflow(a, b, &r); break;
    case OP_SUB: bad = __builtin_sub_overflow(a, b, &r); break;
    case OP_MUL: bad = __builtin_mul_overflow(a, b, &r); break;
    case OP_FDIV:
    case OP_MOD:
        if (b == 0)
            return tpl_failv(rt, line, "integer division or modulo by zero");
        r = op == OP_FDIV ? a / b : a % b;
        if (op == OP_FDIV && (a % b != 0) && ((a < 0) != (b < 0)))
            r--;
        if (op == OP_MOD && r != 0 && ((r < 0) != (b < 0)))
            r += b;
        break;
    default: return NULL;
    }
    if (bad)
        return tpl_failv(rt, line, "integer overflow");
    return tpl_int(rt, r);
}

static tpl_val *float_op(tpl_rt *rt, int op, double a, double b, int line)
{
    if ((op == OP_DIV || op == OP_FDIV || op == OP_MOD) && b == 0)
        return tpl_failv(rt, line, "division by zero");
    switch (op) {
    case OP_ADD: return tpl_float(rt, a + b);
    case OP_SUB: return tpl_float(rt, a - b);
    case OP_MUL: return tpl_float(rt, a * b);
    case OP_DIV: return tpl_float(rt, a / b);
    case OP_FDIV: return tpl_float(rt, floor(a / b));
    case OP_MOD: {
        double m = fmod(a, b);
        return tpl_float(rt, m != 0 && ((m < 0) != (b < 0)) ? m + b : m);
    }
    default: return tpl_float(rt, pow(a, b));
    }
}

static tpl_val *arith(tpl_rt *rt, int op, tpl_val *x, tpl_val *y, int line)
{
    if (is_int(x) && is_int(y) && op != OP_DIV && op != OP_POW)
        return int_op(rt, op, inum(x), inum(y), line);
    if (is_int(x) && is_int(y) && op == OP_POW && inum(y) >= 0) {
        double r = pow((double)inum(x), (double)inum(y));
        if (fabs(r) > 9e15)
            return tpl_failv(rt, line, "integer overflow");
        return tpl_int(rt, (long long)r);
    }
    return float_op(rt, op, num(x), num(y), line);
}

static tpl_val *contains(tpl_rt *rt, tpl_val *x, tpl_val *y, int line)
{
    if (y->k == V_STR) {
        if (x->k != V_STR)
            return tpl_failv(rt, line, "'in <string>' requires string as left operand");
        int found = x->u.s.n == 0;
        for (size_t i = 0; !found && i + x->u.s.n <= y->u.s.n; i++)
            found = !memcmp(y->u.s.p + i, x->u.s.p, x->u.s.n);
        return tpl_bool(rt, found);
    }
    if (y->k == V_DICT)
        return tpl_bool(rt, y->ns ? 0 : tpl_dict_get(y, x) != NULL);
    if (y->k == V_UNDEF)
        return tpl_bool(rt, 0);
    if (y->k != V_LIST)
        return tpl_failv(rt, line, "argument of type '%s' is not iterable", tpl_type_name(y));
    for (int i = 0; i < y->u.l.n; i++)
        if (tpl_equal(x, y->u.l.a[i]))
            return tpl_bool(rt, 1);
    return tpl_bool(rt, 0);
}

static tpl_val *compare(tpl_rt *rt, int op, tpl_val *x, tpl_val *y, int line)
{
    if (op == OP_EQ || op == OP_NE)
        return tpl_bool(rt, tpl_equal(x, y) ^ (op == OP_NE));
    int c = tpl_compare(x, y);
    if (c == -2)
        return tpl_failv(rt, line, "'%s' not supported between instances of '%s' and '%s'",
                         op == OP_LT   ? "<"
                         : op == OP_LE ? "<="
                         : op == OP_GT ? ">"
                                       : ">=",
                         tpl_type_name(x), tpl_type_name(y));
    int r = op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0;
    return tpl_bool(rt, r);
}

static tpl_val *type_error(tpl_rt *rt, int op, tpl_val *x, tpl_val *y, int line)
{
    static const char *names[] = {"+", "-", "*", "/", "//", "%", "**"};
    if (x->k == V_UNDEF || y->k == V_UNDEF)
        return tpl_failv(rt, line, "'%s' is undefined",
                         x->k == V_UNDEF ? (x->name ? x->name : "") : (y->name ? y->name : ""));
    return tpl_failv(rt, line, "unsupported operand type(s) for %s: '%s' and '%s'", names[op],
                     tpl_type_name(x), tpl_type_name(y));
}

/* Markup + str (or str + Markup): the plain side escaped, the result Markup. */
static tpl_val *markup_add(tpl_rt *rt, tpl_val *x, tpl_val *y)
{
    tpl_val *a = tpl_escape(rt, x), *b = a ? tpl_escape(rt, y) : NULL;
    tpl_val *r = b ? concat(rt, a, b) : NULL;
    if (r)
        r->markup = 1;
    return r;
}

tpl_val *tpl_binop(tpl_rt *rt, int op, tpl_val *x, tpl_val *y, int line)
{
    if (op == OP_CAT) {
        tpl_val *a = tpl_to_str(rt, x), *b = a ? tpl_to_str(rt, y) : NULL;
        return b ? concat(rt, a, b) : NULL;
    }
    if (op >= OP_EQ && op <= OP_GE)
        return compare(rt, op, x, y, line);
    if (op == OP_IN || op == OP_NOTIN) {
        tpl_val *r = contains(rt, x, y, line);
        return r && op == OP_NOTIN ? tpl_bool(rt, !r->u.b) : r;
    }
    if (is_num(x) && is_num(y))
        return arith(rt, op, x, y, line);
    if (op == OP_ADD && x->k == V_STR && y->k == V_STR && (x->markup || y->markup))
        return markup_add(rt, x, y);
    if (op == OP_ADD && x->k == y->k && (x->k == V_STR || (x->k == V_LIST && x->tuple == y->tuple)))
        return concat(rt, x, y);
    if (op == OP_MUL && (x->k == V_STR || x->k == V_LIST) && is_int(y)) {
        long long total = (long long)(x->k == V_STR ? x->u.s.n : (size_t)x->u.l.n) * inum(y);
        if (total > (long long)rt->lim.max_output)
            return tpl_fail(rt, MHLA_TPL_LIMIT, line, "repetition too large"), NULL;
        return repeat(rt, x, inum(y));
    }
    return type_error(rt, op, x, y, line);
}
