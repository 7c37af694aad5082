/*
 * matcher.c — one row's state: its set of stacks, advanced token by token,
 * and the reference mask that tries every token's bytes against the stacks
 * one by one (what the fast mask, mask.c, is tested against).
 */
#include "mask_internal.h"

#include <stdlib.h>
#include <string.h>

int mhla_grammar_matcher_create(mhla_grammar_tokens *t, mhla_grammar_matcher **out,
                                mhla_grammar_error *err)
{
    if (!t || !out)
        return gr_mask_err(err, MHLA_GRAMMAR_SYNTAX, "matcher: tokens or out is NULL");
    *out = NULL;
    mhla_grammar_matcher *m = calloc(1, sizeof *m);
    if (m) {
        m->n_sets = ((const gr_trie *)t->v->trie)->max_len + 2;
        m->sets = gr_mask_sets_new(m->n_sets);
    }
    if (!m || !m->sets) {
        free(m);
        return gr_mask_err(err, MHLA_GRAMMAR_NOMEM, "out of memory for a matcher");
    }
    m->t = t;
    int rc = gr_stacks_start(t->g, &m->stacks, err);
    if (rc) {
        mhla_grammar_matcher_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

void mhla_grammar_matcher_free(mhla_grammar_matcher *m)
{
    if (!m)
        return;
    gr_stacks_free(&m->stacks);
    gr_mask_sets_free(m->sets, m->n_sets);
    free(m);
}

int mhla_grammar_matcher_done(const mhla_grammar_matcher *m)
{
    return m && gr_stacks_accepting(&m->stacks) ? 1 : 0;
}

/* *out = the scratch set holding the stacks after bytes p[0, n) (n >= 1)
 * from the row's (empty when they die). */
static int run_bytes(mhla_grammar_matcher *m, const char *p, size_t n, gr_stacks **out,
                     mhla_grammar_error *err)
{
    const gr_stacks *cur = &m->stacks;
    for (size_t i = 0; i < n; i++) {
        *out = &m->sets[i & 1];
        int rc = gr_stacks_advance(m->t->g, cur, (unsigned char)p[i], *out, err);
        if (rc)
            return rc;
        if ((*out)->n == 0)
            break;
        cur = *out;
    }
    return 0;
}

int mhla_grammar_matcher_mask_slow(mhla_grammar_matcher *m, uint64_t *bits, mhla_grammar_error *err)
{
    if (!m || !bits)
        return gr_mask_err(err, MHLA_GRAMMAR_SYNTAX, "mask: matcher or bits is NULL");
    const mhla_grammar_vocab *v = m->t->v;
    memset(bits, 0, ((size_t)v->n + 63) / 64 * sizeof *bits);
    int count = 0, accepting = gr_stacks_accepting(&m->stacks);
    for (int32_t id = 0; id < v->n; id++) {
        int ok = v->is_eos[id] && accepting;
        if (!m->ended && gr_vocab_byte_token(v, id)) {
            gr_stacks *after;
            int rc = run_bytes(m, v->bytes[id], v->lens[id], &after, err);
            if (rc)
                return rc;
            ok = after->n > 0;
        }
        if (ok)
            bits[id >> 6] |= 1ull << (id & 63);
        count += ok;
    }
    return count;
}

int mhla_grammar_matcher_accept(mhla_grammar_matcher *m, int32_t token, mhla_grammar_error *err)
{
    if (!m)
        return gr_mask_err(err, MHLA_GRAMMAR_SYNTAX, "accept: matcher is NULL");
    const mhla_grammar_vocab *v = m->t->v;
    if (token < 0 || token >= v->n)
        return gr_mask_err(err, MHLA_GRAMMAR_REJECTED,
                           "token %d is outside the %d of the vocabulary", (int)token, v->n);
    if (v->is_eos[token] && !gr_stacks_accepting(&m->stacks))
        return gr_mask_err(err, MHLA_GRAMMAR_REJECTED, "end id %d before the string is whole",
                           (int)token);
    if (v->is_eos[token]) {
        m->ended = 1; /* the stacks stay: done() still holds, only end ids follow */
        return 0;
    }
    if (m->ended || !gr_vocab_byte_token(v, token))
        return gr_mask_err(err, MHLA_GRAMMAR_REJECTED, "token %d %s", (int)token,
                           m->ended ? "after the end id" : "is special or has no bytes");
    gr_stacks *after;
    int rc = run_bytes(m, v->bytes[token], v->lens[token], &after, err);
    if (rc)
        return rc;
    if (after->n == 0)
        return gr_mask_err(err, MHLA_GRAMMAR_REJECTED, "token %d does not continue the string here",
                           (int)token);
    gr_stacks old = m->stacks; /* swapped, not freed: its memory serves the next step */
    m->stacks = *after;
    *after = old;
    return 0;
}
