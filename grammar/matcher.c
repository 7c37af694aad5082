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
    if (!m)
        return gr_mask_err(err, MHLA_GRAMMAR_NOMEM, "out of memory for a matcher");
    m->t = t;
    int rc = gr_stacks_start(t->g, &m->stacks, err);
    if (rc) {
        gr_stacks_free(&m->stacks);
        free(m);
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
    free(m);
}

int mhla_grammar_matcher_done(const mhla_grammar_matcher *m)
{
    return m && gr_stacks_accepting(&m->stacks) ? 1 : 0;
}

/* *out = the stacks after bytes p[0, n) from `from` (empty when they die). */
static int run_bytes(const mhla_grammar *g, const gr_stacks *from, const char *p, size_t n,
                     gr_stacks *out, mhla_grammar_error *err)
{
    gr_stacks sets[2];
    memset(sets, 0, sizeof sets);
    const gr_stacks *cur = from;
    int k = 0, rc = 0;
    for (size_t i = 0; i < n; i++) {
        k = (int)(i & 1);
        rc = gr_mask_advance(g, cur, (unsigned char)p[i], &sets[k], err);
        cur = &sets[k];
        if (rc || sets[k].n == 0)
            break;
    }
    gr_stacks_free(&sets[!k]);
    if (rc)
        gr_stacks_free(&sets[k]);
    memset(out, 0, sizeof *out);
    if (rc == 0)
        *out = sets[k];
    return rc;
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
        if (gr_vocab_byte_token(v, id)) {
            gr_stacks after;
            int rc = run_bytes(m->t->g, &m->stacks, v->bytes[id], v->lens[id], &after, err);
            if (rc)
                return rc;
            ok = after.n > 0;
            gr_stacks_free(&after);
        }
        if (ok)
            bits[id >> 6] |= 1ull << (id & 63);
        count += ok;
    }
    return count;
}

/* An end id: taken only where the string is whole; the row then holds the one
 * empty stack, so it is done and nothing but another end id is allowed. */
static int accept_end(mhla_grammar_matcher *m, int32_t token, mhla_grammar_error *err)
{
    if (!gr_stacks_accepting(&m->stacks))
        return gr_mask_err(err, MHLA_GRAMMAR_REJECTED, "end id %d before the string is whole",
                           (int)token);
    gr_stack *one = malloc(sizeof *one);
    if (!one)
        return gr_mask_err(err, MHLA_GRAMMAR_NOMEM, "out of memory ending the string");
    gr_stacks_free(&m->stacks);
    *one = (gr_stack){NULL, 0};
    m->stacks = (gr_stacks){one, 1, 1};
    return 0;
}

int mhla_grammar_matcher_accept(mhla_grammar_matcher *m, int32_t token, mhla_grammar_error *err)
{
    if (!m)
        return gr_mask_err(err, MHLA_GRAMMAR_SYNTAX, "accept: matcher is NULL");
    const mhla_grammar_vocab *v = m->t->v;
    if (token < 0 || token >= v->n)
        return gr_mask_err(err, MHLA_GRAMMAR_REJECTED,
                           "token %d is outside the %d of the vocabulary", (int)token, v->n);
    if (v->is_eos[token])
        return accept_end(m, token, err);
    if (!gr_vocab_byte_token(v, token))
        return gr_mask_err(err, MHLA_GRAMMAR_REJECTED, "token %d is special or has no bytes",
                           (int)token);
    gr_stacks after;
    int rc = run_bytes(m->t->g, &m->stacks, v->bytes[token], v->lens[token], &after, err);
    if (rc)
        return rc;
    if (after.n == 0) {
        gr_stacks_free(&after);
        return gr_mask_err(err, MHLA_GRAMMAR_REJECTED, "token %d does not continue the string here",
                           (int)token);
    }
    gr_stacks_free(&m->stacks);
    m->stacks = after;
    return 0;
}
