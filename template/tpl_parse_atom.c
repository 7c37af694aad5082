/* tpl_parse_atom.c — the operands of expressions: literals, names, lists,
 * dicts, parenthesised tuples; their postfixes (.attr, [item or slice],
 * (call arguments)); filters (|name(args)) and tests (is [not] name). */
#include <string.h>

#include "tpl_parse.h"

tpl_node *tpl_parse_primary(tpl_parser *p);
tpl_node *tpl_parse_postfix(tpl_parser *p, tpl_node *x);
tpl_node *tpl_parse_filters(tpl_parser *p, tpl_node *x);

static tpl_node *literal(tpl_parser *p, tpl_vkind k)
{
    tpl_node *n = tpl_node_new(p, N_LIT);
    if (!n || !(n->lit = tpl_alloc(p->a, sizeof *n->lit)))
        return n ? tpl_pfail(p, "out of memory") : NULL;
    n->lit->k = k;
    return n;
}

static tpl_node *name_or_const(tpl_parser *p, const tpl_tok *t)
{
    static const char *words[] = {"true", "True", "false", "False", "none", "None"};
    for (int i = 0; i < 6; i++)
        if (t->n == strlen(words[i]) && !memcmp(t->s, words[i], t->n)) {
            tpl_node *n = literal(p, i < 4 ? V_BOOL : V_NONE);
            if (n && i < 2)
                n->lit->u.b = 1;
            p->pos++;
            return n;
        }
    tpl_node *n = tpl_node_new(p, N_NAME);
    if (n) {
        n->s = t->s;
        n->n = t->n;
    }
    p->pos++;
    return n;
}

static tpl_node *string_literal(tpl_parser *p)
{
    tpl_node *n = literal(p, V_STR);
    if (!n)
        return NULL;
    n->lit->u.s.p = tpl_cur(p)->s;
    n->lit->u.s.n = tpl_cur(p)->n;
    p->pos++;
    while (tpl_cur(p)->kind == T_STRING) { /* "a" "b" is "ab" */
        const tpl_tok *t = tpl_cur(p);
        char *s = tpl_alloc(p->a, n->lit->u.s.n + t->n + 1);
        if (!s)
            return tpl_pfail(p, "out of memory");
        memcpy(s, n->lit->u.s.p, n->lit->u.s.n);
        memcpy(s + n->lit->u.s.n, t->s, t->n);
        n->lit->u.s.p = s;
        n->lit->u.s.n += t->n;
        p->pos++;
    }
    return n;
}

/* [a, b] or {k: v, ...}: items until close, a comma after the last allowed. */
static tpl_node *collection(tpl_parser *p, int kind, const char *close)
{
    tpl_node *n = tpl_node_new(p, kind);
    if (!n)
        return NULL;
    p->pos++;
    while (!tpl_accept_op(p, close)) {
        if (n->na && tpl_expect_op(p, ","))
            return NULL;
        if (tpl_accept_op(p, close))
            break;
        tpl_node *x = tpl_parse_expr(p);
        if (x && kind == N_DICT) {
            tpl_node *pair = tpl_node_new(p, N_PAIR);
            if (!pair || tpl_expect_op(p, ":") || !(pair->b = tpl_parse_expr(p)))
                return NULL;
            pair->a = x;
            x = pair;
        }
        if (!x || tpl_node_add(p, &n->args, &n->na, &n->capa, x))
            return NULL;
    }
    return n;
}

static tpl_node *paren(tpl_parser *p)
{
    p->pos++;
    if (tpl_accept_op(p, ")"))
        return tpl_node_new(p, N_TUPLE);
    tpl_node *x = tpl_parse_tuple(p, 1);
    if (!x || tpl_expect_op(p, ")"))
        return NULL;
    return x;
}

tpl_node *tpl_parse_primary(tpl_parser *p)
{
    const tpl_tok *t = tpl_cur(p);
    if (++p->depth > TPL_MAX_PARSE_DEPTH)
        return tpl_pfail(p, "expressions nest too deep");
    tpl_node *n = NULL;
    if (t->kind == T_NAME)
        n = name_or_const(p, t);
    else if (t->kind == T_STRING)
        n = string_literal(p);
    else if (t->kind == T_INT || t->kind == T_FLOAT) {
        n = literal(p, t->kind == T_INT ? V_INT : V_FLOAT);
        if (n && t->kind == T_INT)
            n->lit->u.i = t->i;
        else if (n)
            n->lit->u.f = t->f;
        p->pos++;
    } else if (tpl_is_op(p, "("))
        n = paren(p);
    else if (tpl_is_op(p, "["))
        n = collection(p, N_LIST, "]");
    else if (tpl_is_op(p, "{"))
        n = collection(p, N_DICT, "}");
    else
        n = tpl_pfail(p, "unexpected '%.*s'", (int)t->n, t->s);
    p->depth--;
    return n;
}

/* x[a:b:c] after its '[': the slice's three parts (NULL where left out). */
static tpl_node *slice(tpl_parser *p, tpl_node *x, tpl_node *start)
{
    tpl_node *n = tpl_node_new(p, N_SLICE);
    if (!n)
        return NULL;
    n->a = x;
    n->b = start;
    p->pos++; /* the ':' */
    if (!tpl_is_op(p, "]") && !tpl_is_op(p, ":") && !(n->c = tpl_parse_expr(p)))
        return NULL;
    if (tpl_accept_op(p, ":") && !tpl_is_op(p, "]") && !(n->d = tpl_parse_expr(p)))
        return NULL;
    return tpl_expect_op(p, "]") ? NULL : n;
}

static tpl_node *subscript(tpl_parser *p, tpl_node *x)
{
    p->pos++;
    tpl_node *start = NULL;
    if (!tpl_is_op(p, ":") && !(start = tpl_parse_expr(p)))
        return NULL;
    if (tpl_is_op(p, ":"))
        return slice(p, x, start);
    tpl_node *n = tpl_node_new(p, N_ITEM);
    if (!n || tpl_expect_op(p, "]"))
        return NULL;
    n->a = x;
    n->b = start;
    return n;
}

static tpl_node *attribute(tpl_parser *p, tpl_node *x)
{
    p->pos++;
    const tpl_tok *t = tpl_cur(p);
    if (t->kind != T_NAME && t->kind != T_INT)
        return tpl_pfail(p, "expected a name after '.'");
    tpl_node *n = tpl_node_new(p, t->kind == T_NAME ? N_ATTR : N_ITEM);
    if (!n)
        return NULL;
    n->a = x;
    if (t->kind == T_NAME) {
        n->s = t->s;
        n->n = t->n;
    } else if (!(n->b = literal(p, V_INT)))
        return NULL;
    else
        n->b->lit->u.i = t->i;
    p->pos++;
    return n;
}

int tpl_parse_call_args(tpl_parser *p, tpl_node *call)
{
    p->pos++; /* the '(' */
    while (!tpl_accept_op(p, ")")) {
        if (call->na && tpl_expect_op(p, ","))
            return -1;
        if (tpl_accept_op(p, ")"))
            break;
        tpl_node *x;
        if (tpl_cur(p)->kind == T_NAME && p->toks->t[p->pos + 1].kind == T_OP &&
            p->toks->t[p->pos + 1].n == 1 && p->toks->t[p->pos + 1].s[0] == '=') {
            if (!(x = tpl_node_new(p, N_KWARG)))
                return -1;
            x->s = tpl_cur(p)->s;
            x->n = tpl_cur(p)->n;
            p->pos += 2;
            if (!(x->a = tpl_parse_expr(p)))
                return -1;
        } else if (!(x = tpl_parse_expr(p)))
            return -1;
        if (tpl_node_add(p, &call->args, &call->na, &call->capa, x))
            return -1;
    }
    return 0;
}

static tpl_node *call(tpl_parser *p, tpl_node *x)
{
    tpl_node *n = tpl_node_new(p, N_CALL);
    if (!n)
        return NULL;
    n->a = x;
    return tpl_parse_call_args(p, n) ? NULL : n;
}

tpl_node *tpl_parse_postfix(tpl_parser *p, tpl_node *x)
{
    while (x) {
        if (tpl_is_op(p, "."))
            x = attribute(p, x);
        else if (tpl_is_op(p, "["))
            x = subscript(p, x);
        else if (tpl_is_op(p, "("))
            x = call(p, x);
        else
            break;
    }
    return x;
}

/* A filter's or test's name: name(.name)* (dotted names are kept whole). */
static tpl_node *named(tpl_parser *p, int kind, tpl_node *x)
{
    tpl_node *n = tpl_node_new(p, kind);
    if (!n)
        return NULL;
    const tpl_tok *t = tpl_cur(p);
    if (t->kind != T_NAME)
        return tpl_pfail(p, "expected a %s name", kind == N_FILTER ? "filter" : "test");
    n->a = x;
    n->s = t->s;
    n->n = t->n;
    p->pos++;
    if (tpl_is_op(p, "(") && tpl_parse_call_args(p, n))
        return NULL;
    return n;
}

static int starts_operand(const tpl_parser *p)
{
    const tpl_tok *t = tpl_cur(p);
    if (t->kind == T_NAME)
        return !tpl_is_name(p, "else") && !tpl_is_name(p, "or") && !tpl_is_name(p, "and");
    return t->kind == T_STRING || t->kind == T_INT || t->kind == T_FLOAT || tpl_is_op(p, "(") ||
           tpl_is_op(p, "[") || tpl_is_op(p, "{");
}

static tpl_node *test(tpl_parser *p, tpl_node *x)
{
    p->pos++; /* is */
    int neg = tpl_accept_name(p, "not");
    tpl_node *n = named(p, N_TEST, x);
    if (!n)
        return NULL;
    n->neg = neg;
    if (!n->na && !tpl_is_op(p, "(") && starts_operand(p)) {
        tpl_node *arg = tpl_parse_postfix(p, tpl_parse_primary(p));
        if (!arg || tpl_node_add(p, &n->args, &n->na, &n->capa, arg))
            return NULL;
    }
    return n;
}

tpl_node *tpl_parse_filters(tpl_parser *p, tpl_node *x)
{
    while (x) {
        if (tpl_accept_op(p, "|"))
            x = named(p, N_FILTER, x);
        else if (tpl_is_name(p, "is"))
            x = test(p, x);
        else if (tpl_is_op(p, "("))
            x = call(p, x);
        else
            break;
    }
    return x;
}
