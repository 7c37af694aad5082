/* tpl_parse_expr.c — expressions, with jinja2's precedence: conditional,
 * or, and, not, comparisons, + -, ~, * / // %, **, unary - +, then a
 * primary with its postfixes (.attr, [item], (call)), filters and tests. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tpl_parse.h"

tpl_node *tpl_pfail(tpl_parser *p, const char *fmt, ...)
{
    if (p->rc)
        return NULL;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->rc = MHLA_TPL_ERROR;
    if (p->err)
        snprintf(p->err, p->errlen, "line %d: %s", tpl_cur(p)->line, msg);
    return NULL;
}

static tpl_node *nomem(tpl_parser *p)
{
    if (!p->rc && p->err)
        snprintf(p->err, p->errlen, "out of memory");
    if (!p->rc)
        p->rc = MHLA_TPL_NOMEM;
    return NULL;
}

tpl_node *tpl_node_new(tpl_parser *p, int kind)
{
    tpl_node *n = tpl_alloc(p->a, sizeof *n);
    if (!n)
        return nomem(p);
    n->kind = kind;
    n->line = tpl_cur(p)->line;
    return n;
}

int tpl_node_add(tpl_parser *p, tpl_node ***arr, int *n, int *cap, tpl_node *x)
{
    if (*n == *cap) {
        int ncap = *cap ? *cap * 2 : 4;
        tpl_node **q = tpl_alloc(p->a, sizeof *q * (size_t)ncap);
        if (!q)
            return nomem(p), -1;
        if (*n)
            memcpy(q, *arr, sizeof *q * (size_t)*n);
        *arr = q;
        *cap = ncap;
    }
    (*arr)[(*n)++] = x;
    return 0;
}

const tpl_tok *tpl_cur(const tpl_parser *p) { return &p->toks->t[p->pos]; }

int tpl_is_op(const tpl_parser *p, const char *op)
{
    const tpl_tok *t = tpl_cur(p);
    return t->kind == T_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n);
}

int tpl_is_name(const tpl_parser *p, const char *name)
{
    const tpl_tok *t = tpl_cur(p);
    return t->kind == T_NAME && t->n == strlen(name) && !memcmp(t->s, name, t->n);
}

int tpl_accept_op(tpl_parser *p, const char *op)
{
    if (!tpl_is_op(p, op))
        return 0;
    p->pos++;
    return 1;
}

int tpl_accept_name(tpl_parser *p, const char *name)
{
    if (!tpl_is_name(p, name))
        return 0;
    p->pos++;
    return 1;
}

int tpl_expect_op(tpl_parser *p, const char *op)
{
    if (tpl_accept_op(p, op))
        return 0;
    tpl_pfail(p, "expected '%s', got '%.*s'", op, (int)tpl_cur(p)->n, tpl_cur(p)->s);
    return -1;
}

int tpl_expect_kind(tpl_parser *p, int kind, const char *what)
{
    if (tpl_cur(p)->kind == kind) {
        p->pos++;
        return 0;
    }
    tpl_pfail(p, "expected %s, got '%.*s'", what, (int)tpl_cur(p)->n, tpl_cur(p)->s);
    return -1;
}

static tpl_node *binary(tpl_parser *p, int kind, int op, tpl_node *a, tpl_node *b)
{
    if (!a || !b)
        return NULL;
    tpl_node *n = tpl_node_new(p, kind);
    if (n) {
        n->op = op;
        n->a = a;
        n->b = b;
        n->line = a->line;
    }
    return n;
}

static tpl_node *parse_unary(tpl_parser *p, int with_filter);

static tpl_node *parse_pow(tpl_parser *p)
{
    tpl_node *x = parse_unary(p, 1);
    while (x && tpl_accept_op(p, "**"))
        x = binary(p, N_BIN, OP_POW, x, parse_unary(p, 1));
    return x;
}

static tpl_node *parse_math2(tpl_parser *p)
{
    static const char *ops[] = {"*", "/",
                                "/"
                                "/",
                                "%"};
    static const int codes[] = {OP_MUL, OP_DIV, OP_FDIV, OP_MOD};
    tpl_node *x = parse_pow(p);
    for (int i = 0; x && i < 4; i++)
        if (tpl_accept_op(p, ops[i])) {
            x = binary(p, N_BIN, codes[i], x, parse_pow(p));
            i = -1;
        }
    return x;
}

static tpl_node *parse_concat(tpl_parser *p)
{
    tpl_node *x = parse_math2(p);
    while (x && tpl_accept_op(p, "~"))
        x = binary(p, N_BIN, OP_CAT, x, parse_math2(p));
    return x;
}

static tpl_node *parse_math1(tpl_parser *p)
{
    tpl_node *x = parse_concat(p);
    while (x && (tpl_is_op(p, "+") || tpl_is_op(p, "-"))) {
        int op = tpl_is_op(p, "+") ? OP_ADD : OP_SUB;
        p->pos++;
        x = binary(p, N_BIN, op, x, parse_concat(p));
    }
    return x;
}

static int compare_op(tpl_parser *p)
{
    static const char *ops[] = {"==", "!=", "<", "<=", ">", ">="};
    static const int codes[] = {OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE};
    for (int i = 0; i < 6; i++)
        if (tpl_accept_op(p, ops[i]))
            return codes[i];
    if (tpl_accept_name(p, "in"))
        return OP_IN;
    if (tpl_is_name(p, "not") && p->toks->t[p->pos + 1].kind == T_NAME &&
        p->toks->t[p->pos + 1].n == 2 && !memcmp(p->toks->t[p->pos + 1].s, "in", 2)) {
        p->pos += 2;
        return OP_NOTIN;
    }
    return -1;
}

static tpl_node *parse_compare(tpl_parser *p)
{
    tpl_node *x = parse_math1(p);
    int op;
    while (x && (op = compare_op(p)) >= 0)
        x = binary(p, N_BIN, op, x, parse_math1(p));
    return x;
}

static tpl_node *parse_not(tpl_parser *p)
{
    if (!tpl_accept_name(p, "not"))
        return parse_compare(p);
    tpl_node *n = tpl_node_new(p, N_NOT);
    if (n && !(n->a = parse_not(p)))
        return NULL;
    return n;
}

static tpl_node *parse_and(tpl_parser *p)
{
    tpl_node *x = parse_not(p);
    while (x && tpl_accept_name(p, "and"))
        x = binary(p, N_AND, 0, x, parse_not(p));
    return x;
}

tpl_node *tpl_parse_or(tpl_parser *p)
{
    if (++p->depth > TPL_MAX_PARSE_DEPTH)
        return tpl_pfail(p, "expressions nest too deep");
    tpl_node *x = parse_and(p);
    while (x && tpl_accept_name(p, "or"))
        x = binary(p, N_OR, 0, x, parse_and(p));
    p->depth--;
    return x;
}

tpl_node *tpl_parse_expr(tpl_parser *p)
{
    tpl_node *x = tpl_parse_or(p);
    while (x && tpl_accept_name(p, "if")) {
        tpl_node *n = tpl_node_new(p, N_COND);
        if (!n || !(n->b = tpl_parse_or(p)))
            return NULL;
        n->a = x;
        if (tpl_accept_name(p, "else") && !(n->c = tpl_parse_expr(p)))
            return NULL;
        x = n;
    }
    return x;
}

tpl_node *tpl_parse_tuple(tpl_parser *p, int with_cond)
{
    tpl_node *x = with_cond ? tpl_parse_expr(p) : tpl_parse_or(p);
    if (!x || !tpl_is_op(p, ","))
        return x;
    tpl_node *t = tpl_node_new(p, N_TUPLE);
    if (!t || tpl_node_add(p, &t->args, &t->na, &t->capa, x))
        return NULL;
    while (tpl_accept_op(p, ",")) {
        const tpl_tok *c = tpl_cur(p);
        if (c->kind == T_BLOCK_END || c->kind == T_VAR_END || tpl_is_op(p, ")") ||
            tpl_is_name(p, "if"))
            break;
        x = with_cond ? tpl_parse_expr(p) : tpl_parse_or(p);
        if (!x || tpl_node_add(p, &t->args, &t->na, &t->capa, x))
            return NULL;
    }
    return t;
}

tpl_node *tpl_parse_primary(tpl_parser *p);
tpl_node *tpl_parse_postfix(tpl_parser *p, tpl_node *x);
tpl_node *tpl_parse_filters(tpl_parser *p, tpl_node *x);

static tpl_node *parse_unary(tpl_parser *p, int with_filter)
{
    tpl_node *x;
    if (tpl_is_op(p, "-") || tpl_is_op(p, "+")) {
        x = tpl_node_new(p, tpl_is_op(p, "-") ? N_NEG : N_POS);
        p->pos++;
        if (!x || !(x->a = parse_unary(p, 0)))
            return NULL;
    } else {
        x = tpl_parse_postfix(p, tpl_parse_primary(p));
    }
    return with_filter && x ? tpl_parse_filters(p, x) : x;
}
