/*
 * mask.c — one row's token mask: the OR over the row's stacks of the tokens
 * accepted at each stack's top (precomputed, tokens.c), plus each of that
 * top's uncertain tokens run against the whole stack. The uncertain tokens of
 * a top are kept sorted by their bytes, so consecutive ones share prefixes:
 * the stack sets after each prefix byte are kept and a token starts from the
 * longest prefix it shares with the last one run (and is dropped at once
 * when that prefix already died).
 */
#include "mask_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const mhla_grammar *g;
    const mhla_grammar_vocab *v;
    gr_stacks *sets; /* sets[d], d >= 1: the stacks after the last run token's first d bytes */
    uint64_t *bits;
    mhla_grammar_error *err;
} check_ctx;

static size_t common_prefix(const char *a, size_t na, const char *b, size_t nb)
{
    size_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/* Runs bytes p[d, n) from sets[d] (sets[0] is the view of the one stack);
 * *have: the depth reached (a set left empty stops it). */
static int run_from(check_ctx *c, const gr_stacks *view, const char *p, size_t n, size_t d,
                    size_t *have)
{
    for (size_t j = d; j < n; j++) {
        const gr_stacks *from = j ? &c->sets[j] : view;
        int rc = gr_stacks_advance(c->g, from, (unsigned char)p[j], &c->sets[j + 1], c->err);
        if (rc)
            return rc;
        *have = j + 1;
        if (c->sets[j + 1].n == 0)
            break;
    }
    return 0;
}

/* bits |= the uncertain tokens of tt that the whole stack s lets through. */
static int check_uncertain(check_ctx *c, const gr_stack *s, const gr_top_tokens *tt)
{
    gr_stack one = *s;
    const gr_stacks view = {&one, 1, 1};
    const char *last = NULL;
    size_t last_n = 0, have = 0;
    for (uint32_t k = 0; k < tt->n_uncertain; k++) {
        int32_t id = tt->uncertain[k];
        if (c->bits[id >> 6] >> (id & 63) & 1)
            continue;
        const char *p = c->v->bytes[id];
        size_t n = c->v->lens[id];
        size_t d = last ? common_prefix(last, last_n, p, n) : 0;
        d = d < have ? d : have;
        if (d && c->sets[d].n == 0)
            continue; /* a prefix it shares with the last token already died */
        int rc = run_from(c, &view, p, n, d, &have);
        if (rc)
            return rc;
        last = p;
        last_n = n;
        if (have == n && c->sets[n].n)
            c->bits[id >> 6] |= 1ull << (id & 63);
    }
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* bits = the OR of the accepted tokens of each distinct top of the row. */
static int or_accepted(mhla_grammar_matcher *m, uint64_t *bits, size_t words,
                       mhla_grammar_error *err)
{
    const gr_stacks *ss = &m->stacks;
    uint32_t *tops = malloc((ss->n ? ss->n : 1) * sizeof *tops), n = 0;
    if (!tops)
        return gr_mask_err(err, MHLA_GRAMMAR_NOMEM, "out of memory for %u stack tops", ss->n);
    for (uint32_t k = 0; k < ss->n; k++)
        if (ss->s[k].n)
            tops[n++] = ss->s[k].pos[ss->s[k].n - 1];
    qsort(tops, n, sizeof *tops, cmp_u32);
    int rc = 0;
    for (uint32_t k = 0; k < n && rc == 0; k++) {
        const gr_top_tokens *tt;
        if (k && tops[k] == tops[k - 1])
            continue;
        rc = gr_top_tokens_get(m->t, tops[k], &tt, err);
        for (size_t w = 0; w < words && rc == 0; w++)
            bits[w] |= tt->accepted[w];
    }
    free(tops);
    return rc;
}

static int or_uncertain(mhla_grammar_matcher *m, uint64_t *bits, mhla_grammar_error *err)
{
    check_ctx c = {m->t->g, m->t->v, m->sets, bits, err};
    int rc = 0;
    for (uint32_t k = 0; k < m->stacks.n && rc == 0; k++) {
        const gr_stack *s = &m->stacks.s[k];
        const gr_top_tokens *tt;
        if (s->n == 0)
            continue;
        rc = gr_top_tokens_get(m->t, s->pos[s->n - 1], &tt, err);
        if (rc == 0 && tt->n_uncertain)
            rc = check_uncertain(&c, s, tt);
    }
    return rc;
}

int mhla_grammar_matcher_mask(mhla_grammar_matcher *m, uint64_t *bits, mhla_grammar_error *err)
{
    if (!m || !bits)
        return gr_mask_err(err, MHLA_GRAMMAR_SYNTAX, "mask: matcher or bits is NULL");
    const mhla_grammar_vocab *v = m->t->v;
    size_t words = ((size_t)v->n + 63) / 64;
    memset(bits, 0, words * sizeof *bits);
    int rc = m->ended ? 0 : or_accepted(m, bits, words, err);
    if (rc == 0 && !m->ended)
        rc = or_uncertain(m, bits, err);
    if (rc)
        return rc;
    int accepting = gr_stacks_accepting(&m->stacks);
    for (int32_t id = 0; id < v->n && accepting; id++)
        if (v->is_eos[id])
            bits[id >> 6] |= 1ull << (id & 63);
    int count = 0;
    for (size_t w = 0; w < words; w++)
        count += __builtin_popcountll(bits[w]);
    return count;
}
