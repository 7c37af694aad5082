/*
 * mask.c — one row's token mask: the OR over the row's stacks of the tokens
 * accepted at each stack's top, or the suffix that decides it (precomputed,
 * tokens.c and mask_deep.c), plus each of its uncertain tokens run against
 * the whole stack. The uncertain tokens of
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
    const gr_stacks view = {.s = &one, .n = 1, .cap = 1};
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

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (const void *const *)a, y = (uintptr_t) * (const void *const *)b;
    return x < y ? -1 : x > y;
}

/* bits |= the accepted tokens of each distinct classes in tts[0, n). */
static int or_accepted(const gr_top_tokens **tts, uint32_t n, uint64_t *bits, size_t words,
                       mhla_grammar_error *err)
{
    const gr_top_tokens **u = malloc((n ? n : 1) * sizeof *u);
    if (!u)
        return gr_mask_err(err, MHLA_GRAMMAR_NOMEM, "out of memory for %u stacks' classes", n);
    memcpy(u, tts, n * sizeof *u);
    qsort(u, n, sizeof *u, cmp_ptr);
    for (uint32_t k = 0; k < n; k++) {
        if (!u[k] || (k && u[k] == u[k - 1]))
            continue;
        for (size_t w = 0; w < words; w++)
            bits[w] |= u[k]->accepted[w];
    }
    free(u);
    return 0;
}

/* bits = the accepted tokens of the classes deciding each stack, plus each
 * stack's uncertain ones run against it. */
static int or_stacks(mhla_grammar_matcher *m, uint64_t *bits, size_t words, mhla_grammar_error *err)
{
    const gr_stacks *ss = &m->stacks;
    const gr_top_tokens **tts = calloc(ss->n ? ss->n : 1, sizeof *tts);
    if (!tts)
        return gr_mask_err(err, MHLA_GRAMMAR_NOMEM, "out of memory for %u stacks", ss->n);
    int rc = 0;
    for (uint32_t k = 0; k < ss->n && rc == 0; k++)
        if (ss->s[k].n)
            rc = gr_stack_tokens(m->t, &ss->s[k], &tts[k], err);
    if (rc == 0)
        rc = or_accepted(tts, ss->n, bits, words, err);
    check_ctx c = {m->t->g, m->t->v, m->sets, bits, err};
    for (uint32_t k = 0; k < ss->n && rc == 0; k++)
        if (tts[k] && tts[k]->n_uncertain)
            rc = check_uncertain(&c, &ss->s[k], tts[k]);
    free(tts);
    return rc;
}

int mhla_grammar_matcher_mask(mhla_grammar_matcher *m, uint64_t *bits, mhla_grammar_error *err)
{
    if (!m || !bits)
        return gr_mask_err(err, MHLA_GRAMMAR_SYNTAX, "mask: matcher or bits is NULL");
    const mhla_grammar_vocab *v = m->t->v;
    size_t words = ((size_t)v->n + 63) / 64;
    memset(bits, 0, words * sizeof *bits);
    int rc = m->ended ? 0 : or_stacks(m, bits, words, err);
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
