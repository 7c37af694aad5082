/* tpl_parse_stmt.c — statements: text, {{ output }}, and the tags if,
 * for, set, macro, call, filter, break and continue, each tag's body up to
 * its end tag. */
#include <string.h>

#include "tpl_parse.h"

/* Parses statements until a block tag whose name is one of ends (NULL
 * terminated); *end is the index of that name, the parser after it. */
static tpl_node *parse_body(tpl_parser *p, const char *const *ends, int *end);

static int block_end(tpl_parser *p) { return tpl_expect_kind(p, T_BLOCK_END, "end of tag '%}'"); }

static tpl_node *parse_if(tpl_parser *p)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    tpl_node *n = tpl_node_new(p, N_IF);
    int end;
    if (!n || !(n->a = tpl_parse_expr(p)) || block_end(p) || !(n->b = parse_body(p, ends, &end)))
        return NULL;
    if (end == 0)
        return (n->c = parse_if(p)) ? n : NULL;
    if (end == 1) {
        static const char *const endif[] = {"endif", NULL};
        if (block_end(p) || !(n->c = parse_body(p, endif, &end)))
            return NULL;
    }
    return block_end(p) ? NULL : n;
}

tpl_node *tpl_parse_target(tpl_parser *p, int allow_attr)
{
    tpl_node *t = tpl_node_new(p, N_TUPLE);
    int paren = tpl_accept_op(p, "(");
    while (t) {
        const tpl_tok *tok = tpl_cur(p);
        if (tok->kind != T_NAME)
            return tpl_pfail(p, "expected a name to assign to");
        tpl_node *x = tpl_node_new(p, N_NAME);
        if (!x)
            return NULL;
        x->s = tok->s;
        x->n = tok->n;
        p->pos++;
        if (allow_attr && tpl_accept_op(p, ".")) {
            tpl_node *a = tpl_node_new(p, N_ATTR);
            if (!a || tpl_cur(p)->kind != T_NAME)
                return tpl_pfail(p, "expected an attribute name");
            a->a = x;
            a->s = tpl_cur(p)->s;
            a->n = tpl_cur(p)->n;
            p->pos++;
            x = a;
        }
        if (tpl_node_add(p, &t->args, &t->na, &t->capa, x))
            return NULL;
        if (!tpl_accept_op(p, ","))
            break;
    }
    if (paren && tpl_expect_op(p, ")"))
        return NULL;
    return t && t->na == 1 && !paren ? t->args[0] : t;
}

static tpl_node *parse_for(tpl_parser *p)
{
    static const char *const ends[] = {"else", "endfor", NULL};
    tpl_node *n = tpl_node_new(p, N_FOR);
    int end;
    if (!n || !(n->a = tpl_parse_target(p, 0)) ||
        (!tpl_accept_name(p, "in") && !tpl_pfail(p, "expected 'in'")))
        return NULL;
    if (!(n->b = tpl_parse_tuple(p, 0)))
        return NULL;
    if (tpl_accept_name(p, "if") && !(n->c = tpl_parse_expr(p)))
        return NULL;
    if (tpl_is_name(p, "recursive"))
        return tpl_pfail(p, "recursive loops are not supported");
    if (block_end(p) || !(n->body = parse_body(p, ends, &end)))
        return NULL;
    if (end == 0) {
        static const char *const endfor[] = {"endfor", NULL};
        if (block_end(p) || !(n->d = parse_body(p, endfor, &end)))
            return NULL;
    }
    return block_end(p) ? NULL : n;
}

static tpl_node *parse_set(tpl_parser *p)
{
    tpl_node *n = tpl_node_new(p, N_SET);
    if (!n || !(n->a = tpl_parse_target(p, 1)))
        return NULL;
    if (tpl_accept_op(p, "=")) {
        if (!(n->b = tpl_parse_tuple(p, 1)) || block_end(p))
            return NULL;
        return n;
    }
    static const char *const ends[] = {"endset", NULL};
    int end;
    if (tpl_is_op(p, "|"))
        return tpl_pfail(p, "filtered block set is not supported");
    if (block_end(p) || !(n->body = parse_body(p, ends, &end)) || block_end(p))
        return NULL;
    return n;
}

/* A macro's parameters: (name, name=default, ...). */
static int parse_params(tpl_parser *p, tpl_node *n)
{
    if (tpl_expect_op(p, "("))
        return -1;
    while (!tpl_accept_op(p, ")")) {
        if (n->na && tpl_expect_op(p, ","))
            return -1;
        tpl_node *x = tpl_node_new(p, N_PARAM);
        if (!x || tpl_cur(p)->kind != T_NAME)
            return tpl_pfail(p, "expected a parameter name"), -1;
        x->s = tpl_cur(p)->s;
        x->n = tpl_cur(p)->n;
        p->pos++;
        if (tpl_accept_op(p, "=") && !(x->a = tpl_parse_expr(p)))
            return -1;
        if (tpl_node_add(p, &n->args, &n->na, &n->capa, x))
            return -1;
    }
    return 0;
}

static tpl_node *parse_macro(tpl_parser *p)
{
    static const char *const ends[] = {"endmacro", NULL};
    tpl_node *n = tpl_node_new(p, N_MACRO);
    int end;
    if (!n || tpl_cur(p)->kind != T_NAME)
        return n ? tpl_pfail(p, "expected a macro name") : NULL;
    n->s = tpl_cur(p)->s;
    n->n = tpl_cur(p)->n;
    p->pos++;
    if (parse_params(p, n) || block_end(p) || !(n->body = parse_body(p, ends, &end)))
        return NULL;
    if (tpl_cur(p)->kind == T_NAME)
        p->pos++;
    return block_end(p) ? NULL : n;
}

/* {% call [(params)] macro(args) %}body{% endcall %} */
static tpl_node *parse_callblock(tpl_parser *p)
{
    static const char *const ends[] = {"endcall", NULL};
    tpl_node *n = tpl_node_new(p, N_CALLBLOCK);
    int end;
    if (!n || (tpl_is_op(p, "(") && parse_params(p, n)))
        return NULL;
    if (!(n->a = tpl_parse_expr(p)) || n->a->kind != N_CALL)
        return n->a ? tpl_pfail(p, "expected a macro call") : NULL;
    if (block_end(p) || !(n->body = parse_body(p, ends, &end)) || block_end(p))
        return NULL;
    return n;
}

/* {% filter name(args) %}body{% endfilter %} */
static tpl_node *parse_filterblock(tpl_parser *p)
{
    static const char *const ends[] = {"endfilter", NULL};
    tpl_node *n = tpl_node_new(p, N_FILTERBLOCK);
    int end;
    if (!n || tpl_cur(p)->kind != T_NAME)
        return n ? tpl_pfail(p, "expected a filter name") : NULL;
    n->s = tpl_cur(p)->s;
    n->n = tpl_cur(p)->n;
    p->pos++;
    if (tpl_is_op(p, "(") && tpl_parse_call_args(p, n))
        return NULL;
    if (block_end(p) || !(n->body = parse_body(p, ends, &end)) || block_end(p))
        return NULL;
    return n;
}

/* {% generation %}body{% endgeneration %}: transformers' tag marking the
 * assistant's part (for its assistant-token mask); a render outputs the
 * body, run as the body of a call block is (in a scope of its own). */
static tpl_node *parse_generation(tpl_parser *p)
{
    static const char *const ends[] = {"endgeneration", NULL};
    tpl_node *n = tpl_node_new(p, N_GENERATION);
    int end;
    if (!n || block_end(p) || !(n->body = parse_body(p, ends, &end)) || block_end(p))
        return NULL;
    return n;
}

static tpl_node *simple(tpl_parser *p, int kind)
{
    tpl_node *n = tpl_node_new(p, kind);
    return !n || block_end(p) ? NULL : n;
}

static tpl_node *parse_tag(tpl_parser *p, const tpl_tok *t)
{
    static const char *names[] = {"if",     "for",   "set",      "macro",     "call",
                                  "filter", "break", "continue", "generation"};
    int i = 0;
    for (; i < 9; i++)
        if (t->n == strlen(names[i]) && !memcmp(t->s, names[i], t->n))
            break;
    if (i == 9)
        return tpl_pfail(p, "unknown tag '%.*s'", (int)t->n, t->s);
    p->pos++;
    switch (i) {
    case 0: return parse_if(p);
    case 1: return parse_for(p);
    case 2: return parse_set(p);
    case 3: return parse_macro(p);
    case 4: return parse_callblock(p);
    case 5: return parse_filterblock(p);
    case 6: return simple(p, N_BREAK);
    case 7: return simple(p, N_CONTINUE);
    default: return parse_generation(p);
    }
}

static tpl_node *parse_output(tpl_parser *p)
{
    tpl_node *n = tpl_node_new(p, N_OUT);
    p->pos++;
    if (!n || !(n->a = tpl_parse_tuple(p, 1)) || tpl_expect_kind(p, T_VAR_END, "'}}'"))
        return NULL;
    return n;
}

static int end_index(const tpl_tok *t, const char *const *ends)
{
    for (int i = 0; ends && ends[i]; i++)
        if (t->n == strlen(ends[i]) && !memcmp(t->s, ends[i], t->n))
            return i;
    return -1;
}

/* One statement at the parser; *end >= 0 when it is one of ends' tags. */
static tpl_node *parse_statement(tpl_parser *p, const char *const *ends, int *end)
{
    const tpl_tok *t = tpl_cur(p);
    if (t->kind == T_TEXT) {
        tpl_node *n = tpl_node_new(p, N_TEXT);
        if (n) {
            n->s = t->s;
            n->n = t->n;
        }
        p->pos++;
        return n;
    }
    if (t->kind == T_VAR_BEGIN)
        return parse_output(p);
    p->pos++; /* T_BLOCK_BEGIN */
    t = tpl_cur(p);
    if (t->kind != T_NAME)
        return tpl_pfail(p, "expected a tag name");
    if ((*end = end_index(t, ends)) >= 0) {
        p->pos++;
        return NULL;
    }
    return parse_tag(p, t);
}

static tpl_node *parse_body(tpl_parser *p, const char *const *ends, int *end)
{
    tpl_node *body = tpl_node_new(p, N_BODY);
    if (!body || ++p->depth > TPL_MAX_PARSE_DEPTH)
        return body ? tpl_pfail(p, "blocks nest too deep") : NULL;
    for (*end = -1; tpl_cur(p)->kind != T_EOF;) {
        tpl_node *n = parse_statement(p, ends, end);
        if (*end >= 0)
            break;
        if (!n || tpl_node_add(p, &body->kids, &body->nk, &body->capk, n))
            return NULL;
    }
    int last = 0;
    while (ends && ends[last + 1])
        last++;
    if (*end < 0 && ends)
        return tpl_pfail(p, "unexpected end of template: expected '%s'", ends[last]);
    p->depth--;
    return body;
}

int tpl_parse(tpl_arena *a, const tpl_toks *toks, tpl_node **root, char *err, size_t errlen)
{
    tpl_parser p = {.a = a, .toks = toks, .err = err, .errlen = errlen};
    int end;
    *root = parse_body(&p, NULL, &end);
    return *root ? 0 : p.rc ? p.rc : MHLA_TPL_ERROR;
}
