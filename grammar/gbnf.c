/*
 * gbnf.c — GBNF text to rules, as llama.cpp's parser reads it (its
 * grammars/README.md): rules `name ::= alternatives`, a rule ending at a
 * newline outside parentheses (a newline after `|` continues it), literals,
 * classes, `.`, groups, and repetitions rewritten into helper rules the way
 * llama.cpp rewrites them (right recursion for unbounded counts, nested
 * optionals for bounded ones), so that both accept the same strings.
 */
#include "gr_core.h"

#include <stdlib.h>
#include <string.h>

static int parse_alternates(gp_parser *p, const char **pos, uint32_t rule, uint32_t owner,
                            int nested);

static int parse_literal(gp_parser *p, const char **pos, uint32_t rule)
{
    const char *q = *pos + 1;
    int rc = 0;
    while (!rc && *q != '"') {
        if (!*q)
            return gp_fail(p, *pos, MHLA_GRAMMAR_SYNTAX, "unterminated string");
        const char *at = q;
        uint32_t cp;
        rc = gp_char(p, &q, &cp);
        if (!rc)
            rc = gu_push_codepoint(p->b, rule, cp, (long)(at - p->s));
    }
    *pos = q + 1;
    return rc;
}

/* One item of a class: a character or a range a-b. */
static int class_item(gp_parser *p, const char **pos, gu_range *r)
{
    const char *at = *pos;
    int rc = gp_char(p, pos, &r->lo);
    r->hi = r->lo;
    if (rc || (*pos)[0] != '-' || (*pos)[1] == ']')
        return rc;
    ++*pos;
    rc = gp_char(p, pos, &r->hi);
    if (!rc && r->hi < r->lo)
        return gp_fail(p, at, MHLA_GRAMMAR_SYNTAX, "reversed range U+%04X-U+%04X", (unsigned)r->lo,
                       (unsigned)r->hi);
    return rc;
}

static int parse_class(gp_parser *p, const char **pos, uint32_t rule, uint32_t owner)
{
    const char *open = *pos, *q = *pos + 1;
    int negate = *q == '^';
    q += negate;
    size_t n = 0, cap = 8;
    gu_range *r = malloc(cap * sizeof *r);
    int rc = r ? 0 : gp_fail(p, open, MHLA_GRAMMAR_NOMEM, "out of memory reading a class");
    while (!rc && *q != ']') {
        if (!*q) {
            rc = gp_fail(p, open, MHLA_GRAMMAR_SYNTAX, "unterminated character class");
        } else if (n == cap) { /* grows with the text, which bounds it */
            gu_range *g = realloc(r, 2 * cap * sizeof *r);
            rc = g ? 0 : gp_fail(p, q, MHLA_GRAMMAR_NOMEM, "out of memory reading a class");
            r = g ? g : r;
            cap *= g ? 2 : 1;
        } else {
            rc = class_item(p, &q, &r[n++]);
        }
    }
    if (!rc && n == 0)
        rc = gp_fail(p, open, MHLA_GRAMMAR_SYNTAX, "empty character class");
    if (!rc)
        rc = gu_push_set(p->b, rule, owner, r, n, negate);
    free(r);
    *pos = q + 1;
    return rc;
}

static int parse_group(gp_parser *p, const char **pos, uint32_t rule, uint32_t owner)
{
    const char *open = *pos;
    if (++p->depth > GBNF_MAX_NESTING)
        return gp_fail(p, open, MHLA_GRAMMAR_LIMIT, "parentheses nested deeper than %d",
                       GBNF_MAX_NESTING);
    uint32_t sub;
    int rc = gb_rule_helper(p->b, owner, &sub);
    *pos = gp_space(*pos + 1, 1);
    if (!rc)
        rc = parse_alternates(p, pos, sub, owner, 1);
    if (!rc && **pos != ')')
        rc = gp_fail(p, *pos, MHLA_GRAMMAR_SYNTAX, "expecting ')' to close the '(' at offset %ld",
                     (long)(open - p->s));
    if (!rc)
        rc = gb_push(p->b, rule, GR_RULE, sub);
    p->depth--;
    *pos += 1;
    return rc;
}

static int parse_ref(gp_parser *p, const char **pos, uint32_t rule)
{
    const char *end = *pos;
    while (gp_is_word(*end))
        end++;
    uint32_t id;
    int rc = gb_rule_named(p->b, *pos, (size_t)(end - *pos), (long)(*pos - p->s), &id);
    *pos = end;
    return rc ? rc : gb_push(p->b, rule, GR_RULE, id);
}

/* S{m,n} (max < 0: unbounded) as llama.cpp rewrites it: S m times, then
 * S'(n-m) with S'(k) ::= S S'(k-1) | and S'(1) ::= S | ; unbounded: S' ::= S S' | */
static int repeat_rules(gp_parser *p, uint32_t owner, const gr_elem *s, uint32_t ns, int min,
                        int max, uint32_t *last)
{
    int n_opt = max < 0 ? 1 : max - min, rc = 0;
    for (int i = 0; i < n_opt && !rc; i++) {
        uint32_t rec;
        rc = gb_rule_helper(p->b, owner, &rec);
        if (!rc)
            rc = gb_push_elems(p->b, rec, s, ns);
        if (!rc && (i > 0 || max < 0))
            rc = gb_push(p->b, rec, GR_RULE, max < 0 ? rec : *last);
        if (!rc)
            rc = gb_push(p->b, rec, GR_ALT, 0);
        if (!rc)
            rc = gb_end_rule(p->b, rec);
        *last = rec;
    }
    return rc;
}

static int apply_repeat(gp_parser *p, const char *at, uint32_t rule, uint32_t owner, uint32_t sym,
                        int min, int max)
{
    gb_seq *r = &p->b->rules[rule];
    if (sym == r->n)
        return gp_fail(p, at, MHLA_GRAMMAR_SYNTAX, "expecting an item before '%c'", *at);
    if (max >= 0 && max < min)
        return gp_fail(p, at, MHLA_GRAMMAR_SYNTAX, "repetition {%d,%d}: maximum below minimum", min,
                       max);
    uint32_t ns = r->n - sym, last = 0;
    gr_elem *s = malloc(ns * sizeof *s);
    if (!s)
        return gp_fail(p, at, MHLA_GRAMMAR_NOMEM, "out of memory repeating an item");
    memcpy(s, r->e + sym, ns * sizeof *s);
    int rc = 0;
    if (min == 0)
        gb_truncate(p->b, rule, sym);
    for (int i = 1; i < min && !rc; i++)
        rc = gb_push_elems(p->b, rule, s, ns);
    if (!rc)
        rc = repeat_rules(p, owner, s, ns, min, max, &last);
    if (!rc && (max < 0 || max > min))
        rc = gb_push(p->b, rule, GR_RULE, last);
    free(s);
    return rc;
}

/* {m}, {m,} or {m,n} after an item. */
static int parse_braces(gp_parser *p, const char **pos, int nested, int *min, int *max)
{
    const char *q = gp_space(*pos + 1, nested);
    int rc = gp_count(p, &q, min);
    q = gp_space(q, nested);
    *max = *min;
    if (!rc && *q == ',') {
        q = gp_space(q + 1, nested);
        *max = -1;
        if (*q >= '0' && *q <= '9') {
            rc = gp_count(p, &q, max);
            q = gp_space(q, nested);
        }
    } else if (!rc && *q != '}') {
        rc = gp_fail(p, q, MHLA_GRAMMAR_SYNTAX, "expecting ',' or '}'");
    }
    if (!rc && *q != '}')
        rc = gp_fail(p, q, MHLA_GRAMMAR_SYNTAX, "expecting '}'");
    *pos = q + 1;
    return rc;
}

static int parse_repeat(gp_parser *p, const char **pos, uint32_t rule, uint32_t owner, uint32_t sym,
                        int nested)
{
    const char *at = *pos;
    int min = 0, max = -1, rc = 0;
    if (*at == '+')
        min = 1;
    else if (*at == '?')
        max = 1;
    if (*at == '{')
        rc = parse_braces(p, pos, nested, &min, &max);
    else
        *pos += 1;
    return rc ? rc : apply_repeat(p, at, rule, owner, sym, min, max);
}

/* One item of a sequence at *pos (0 with *done set when none starts there). */
static int parse_item(gp_parser *p, const char **pos, uint32_t rule, uint32_t owner, int nested,
                      uint32_t *sym)
{
    char c = **pos;
    uint32_t here = p->b->rules[rule].n;
    int rc;
    if (c == '*' || c == '+' || c == '?' || c == '{')
        return parse_repeat(p, pos, rule, owner, *sym, nested);
    if (c == '"') {
        rc = parse_literal(p, pos, rule);
    } else if (c == '[') {
        rc = parse_class(p, pos, rule, owner);
    } else if (gp_is_word(c)) {
        rc = parse_ref(p, pos, rule);
    } else if (c == '(') {
        rc = parse_group(p, pos, rule, owner);
    } else {
        gu_range any = {0, 0x10FFFF}; /* '.' */
        *pos += 1;
        rc = gu_push_set(p->b, rule, owner, &any, 1, 0);
    }
    *sym = here;
    return rc;
}

static int starts_item(char c) { return c && (strchr("\"[(.*+?{", c) || gp_is_word(c)); }

static int parse_sequence(gp_parser *p, const char **pos, uint32_t rule, uint32_t owner, int nested)
{
    uint32_t sym = p->b->rules[rule].n;
    while (starts_item(**pos)) {
        int rc = parse_item(p, pos, rule, owner, nested, &sym);
        if (rc)
            return rc;
        *pos = gp_space(*pos, nested);
    }
    return 0;
}

static int parse_alternates(gp_parser *p, const char **pos, uint32_t rule, uint32_t owner,
                            int nested)
{
    int rc = parse_sequence(p, pos, rule, owner, nested);
    while (!rc && **pos == '|') {
        rc = gb_push(p->b, rule, GR_ALT, 0);
        *pos = gp_space(*pos + 1, 1);
        if (!rc)
            rc = parse_sequence(p, pos, rule, owner, nested);
    }
    return rc ? rc : gb_end_rule(p->b, rule);
}

static int parse_rule(gp_parser *p, const char **pos)
{
    const char *name = *pos, *end = *pos;
    while (gp_is_word(*end))
        end++;
    if (end == name)
        return gp_fail(p, name, MHLA_GRAMMAR_SYNTAX, "expecting a rule name");
    const char *q = gp_space(end, 0);
    if (strncmp(q, "::=", 3) != 0)
        return gp_fail(p, q, MHLA_GRAMMAR_SYNTAX, "expecting '::='");
    uint32_t id;
    int rc = gb_rule_named(p->b, name, (size_t)(end - name), -1, &id);
    if (!rc && p->b->def_pos[id] >= 0)
        rc = gp_fail(p, name, MHLA_GRAMMAR_SYNTAX, "rule '%s' defined twice (first at offset %ld)",
                     p->b->names[id], p->b->def_pos[id]);
    if (rc)
        return rc;
    p->b->def_pos[id] = (long)(name - p->s);
    q = gp_space(q + 3, 1);
    rc = parse_alternates(p, &q, id, id, 0);
    if (rc) /* q may lie anywhere now, even past the end */
        return rc;
    if (*q == '\r')
        q += q[1] == '\n' ? 2 : 1;
    else if (*q == '\n')
        q++;
    else if (*q)
        return gp_fail(p, q, MHLA_GRAMMAR_SYNTAX, "expecting a newline or the end, found '%c'", *q);
    *pos = gp_space(q, 1);
    return 0;
}

/* The rules of text, checked, compiled with root as the start. */
static int parse_text(gp_parser *p, const char *root, mhla_grammar **out)
{
    const char *pos = gp_space(p->s, 1);
    int rc = 0;
    while (!rc && *pos)
        rc = parse_rule(p, &pos);
    uint32_t id = 0;
    if (!rc)
        rc = gb_rule_named(p->b, root, strlen(root), -1, &id);
    if (!rc && p->b->def_pos[id] < 0)
        rc = gr_fail(p->b->err, MHLA_GRAMMAR_SYNTAX, -1, "no rule named '%s' (the start rule)",
                     root);
    if (!rc)
        rc = gr_check_rules(p->b);
    return rc ? rc : gb_finish(p->b, id, out);
}

int mhla_grammar_from_gbnf(const char *text, size_t len, const char *root, mhla_grammar **out,
                           mhla_grammar_error *err)
{
    if (err)
        *err = (mhla_grammar_error){.pos = -1};
    if (!out || (!text && len))
        return gr_fail(err, MHLA_GRAMMAR_SYNTAX, -1, "no grammar text or no place for the result");
    *out = NULL;
    const char *nul = len ? memchr(text, '\0', len) : NULL;
    if (nul)
        return gr_fail(err, MHLA_GRAMMAR_SYNTAX, (long)(nul - text), "NUL byte at offset %ld",
                       (long)(nul - text));
    char *s = malloc(len + 1);
    if (!s)
        return gr_fail(err, MHLA_GRAMMAR_NOMEM, -1, "out of memory copying the grammar");
    if (len)
        memcpy(s, text, len);
    s[len] = '\0';
    gb_builder b;
    int rc = gb_init(&b, err);
    if (!rc) {
        gp_parser p = {.s = s, .b = &b};
        rc = parse_text(&p, root ? root : "root", out);
        gb_free(&b);
    }
    free(s);
    return rc;
}
