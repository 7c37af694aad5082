/*
 * ref_stacks.c — a plain implementation of gr_stacks_* (grammar_internal.h)
 * for the mask tests and the benchmark, linked only while grammar/ has none
 * of its own (tests/grammar/CMakeLists.txt looks for one). It follows the
 * documented contract literally: expanded stacks, tail calls left out, a top
 * at GR_ALT/GR_END pops, deduplicated sets, an output set that was filled
 * before is emptied first; clarity over speed.
 */
#include "grammar_internal.h"

#include <stdlib.h>
#include <string.h>

void gr_stacks_free(gr_stacks *ss)
{
    if (!ss)
        return;
    for (uint32_t i = 0; i < ss->n; i++)
        free(ss->s[i].pos);
    free(ss->s);
    memset(ss, 0, sizeof *ss);
}

static int push_unique(gr_stacks *out, const uint32_t *pos, uint32_t n)
{
    for (uint32_t i = 0; i < out->n; i++)
        if (out->s[i].n == n && (n == 0 || memcmp(out->s[i].pos, pos, n * sizeof *pos) == 0))
            return 0;
    if (out->n >= GR_MAX_STACKS)
        return MHLA_GRAMMAR_LIMIT;
    if (out->n == out->cap) {
        uint32_t cap = out->cap ? out->cap * 2 : 4;
        gr_stack *s = realloc(out->s, cap * sizeof *s);
        if (!s)
            return MHLA_GRAMMAR_NOMEM;
        out->s = s;
        out->cap = cap;
    }
    uint32_t *copy = malloc((n ? n : 1) * sizeof *copy);
    if (!copy)
        return MHLA_GRAMMAR_NOMEM;
    if (n)
        memcpy(copy, pos, n * sizeof *pos);
    out->s[out->n++] = (gr_stack){copy, n};
    return 0;
}

static int is_end(const mhla_grammar *g, uint32_t e)
{
    return g->elems[e].kind == GR_ALT || g->elems[e].kind == GR_END;
}

static int expand(const mhla_grammar *g, const uint32_t *pos, uint32_t n, gr_stacks *out);

/* The top refers to a rule: the top becomes the element after it (left out
 * at the alternative's end) and each alternative's first element is pushed. */
static int expand_rule(const mhla_grammar *g, const uint32_t *pos, uint32_t n, gr_stacks *out)
{
    uint32_t top = pos[n - 1], base = is_end(g, top + 1) ? n - 1 : n;
    uint32_t *buf = malloc((base + 1) * sizeof *buf);
    if (!buf)
        return MHLA_GRAMMAR_NOMEM;
    memcpy(buf, pos, (n - 1) * sizeof *buf);
    if (base == n)
        buf[n - 1] = top + 1;
    int rc = 0;
    uint32_t a = g->rule_start[g->elems[top].arg];
    for (;;) {
        buf[base] = a;
        rc = expand(g, buf, base + 1, out);
        while (rc == 0 && !is_end(g, a))
            a++;
        if (rc || g->elems[a].kind == GR_END)
            break;
        a++;
    }
    free(buf);
    return rc;
}

static int expand(const mhla_grammar *g, const uint32_t *pos, uint32_t n, gr_stacks *out)
{
    if (n > GR_MAX_STACK_DEPTH)
        return MHLA_GRAMMAR_LIMIT;
    if (n == 0 || g->elems[pos[n - 1]].kind == GR_BYTES)
        return push_unique(out, pos, n);
    if (is_end(g, pos[n - 1]))
        return expand(g, pos, n - 1, out);
    return expand_rule(g, pos, n, out);
}

static int fail(int rc, mhla_grammar_error *err)
{
    if (err) {
        strcpy(err->msg, rc == MHLA_GRAMMAR_LIMIT ? "ref stacks: limit" : "ref stacks: no memory");
        err->pos = -1;
        err->path[0] = 0;
    }
    return rc;
}

int gr_stacks_start(const mhla_grammar *g, gr_stacks *out, mhla_grammar_error *err)
{
    gr_stacks_free(out); /* a set filled before is reused: its old stacks go */
    uint32_t a = g->rule_start[g->root];
    int rc = 0;
    for (;;) {
        rc = expand(g, &a, 1, out);
        while (rc == 0 && !is_end(g, a))
            a++;
        if (rc || g->elems[a].kind == GR_END)
            break;
        a++;
    }
    if (rc)
        gr_stacks_free(out);
    return rc ? fail(rc, err) : 0;
}

int gr_stacks_advance(const mhla_grammar *g, const gr_stacks *in, unsigned char b, gr_stacks *out,
                      mhla_grammar_error *err)
{
    gr_stacks_free(out);
    int rc = 0;
    for (uint32_t i = 0; i < in->n && rc == 0; i++) {
        const gr_stack *s = &in->s[i];
        if (s->n == 0 || !gr_class_has(&g->classes[g->elems[s->pos[s->n - 1]].arg], b))
            continue;
        uint32_t *buf = malloc(s->n * sizeof *buf);
        if (!buf)
            return fail(MHLA_GRAMMAR_NOMEM, err);
        memcpy(buf, s->pos, s->n * sizeof *buf);
        buf[s->n - 1]++;
        rc = expand(g, buf, s->n, out);
        free(buf);
    }
    if (rc)
        gr_stacks_free(out);
    return rc ? fail(rc, err) : 0;
}

int gr_stacks_accepting(const gr_stacks *ss)
{
    for (uint32_t i = 0; i < ss->n; i++)
        if (ss->s[i].n == 0)
            return 1;
    return 0;
}
