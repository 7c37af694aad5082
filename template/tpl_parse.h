/* tpl_parse.h — the parser's state, shared by the expression parser
 * (tpl_parse_expr.c) and the statement parser (tpl_parse_stmt.c). */
#ifndef TPL_PARSE_H
#define TPL_PARSE_H

#include "tpl_internal.h"

typedef struct {
    tpl_arena *a;
    const tpl_toks *toks;
    int pos, depth, rc;
    char *err;
    size_t errlen;
} tpl_parser;

/* Each returns NULL (or -1) with p->rc and p->err set on failure. */
tpl_node *tpl_pfail(tpl_parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
tpl_node *tpl_node_new(tpl_parser *p, int kind);
int tpl_node_add(tpl_parser *p, tpl_node ***arr, int *n, int *cap, tpl_node *x);
const tpl_tok *tpl_cur(const tpl_parser *p);
int tpl_is_op(const tpl_parser *p, const char *op);
int tpl_is_name(const tpl_parser *p, const char *name);
int tpl_accept_op(tpl_parser *p, const char *op);
int tpl_accept_name(tpl_parser *p, const char *name);
int tpl_expect_op(tpl_parser *p, const char *op);
int tpl_expect_kind(tpl_parser *p, int kind, const char *what);

tpl_node *tpl_parse_expr(tpl_parser *p);
tpl_node *tpl_parse_or(tpl_parser *p);
/* expr (, expr)*: one expression, or a tuple when there are commas */
tpl_node *tpl_parse_tuple(tpl_parser *p, int with_cond);
/* a name, or names separated by commas (a tuple), as assignment targets */
tpl_node *tpl_parse_target(tpl_parser *p, int allow_attr);
int tpl_parse_call_args(tpl_parser *p, tpl_node *call);

#endif
