/*
 * tokens.c — a grammar bound to a vocabulary: for each stack top (a GR_BYTES
 * element) the tokens accepted whatever lies below the top's rule, and the
 * few left to check against the whole stack (xgrammar's adaptive token mask).
 *
 * Token t at top p is classified by running its bytes from the one stack
 * [p], i.e. p's rule frame and what it pushes, never what lies below:
 *   accepted   some path consumes all of t (a path that pops past p's frame
 *              exactly at t's last byte included: what lies below is not
 *              asked for anything);
 *   uncertain  no path consumes t, but one pops past p's frame with bytes
 *              left: those bytes meet what lies below, known only at run time;
 *   rejected   otherwise, whatever lies below.
 * All tokens are classified in one depth-first walk of the vocabulary's trie
 * carrying the set of stacks reached so far; a byte no stack top allows (or
 * a set left empty) ends its whole subtree at once. Classes are computed the
 * first time a row's stack has that top, then shared under the mutex.
 *
 * The same walk from a stack's last k elements instead of [p] classifies
 * for every stack ending with them (mask_deep.c keeps those): where p's rule
 * ends after a byte or two (a character of a string, `x*` compiled to a
 * helper rule), most tokens run past it and only the elements under p
 * decide them.
 */
#include "mask_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const mhla_grammar *g;
    const gr_trie *tr;
    gr_stacks start;    /* the one stack [p] (a view, never advanced into) */
    gr_stacks *sets;    /* sets[d], d >= 1: the stacks after the branch's first d bytes */
    uint32_t *anc;      /* anc[d]: the branch's node at depth d */
    unsigned char *unc; /* unc[d]: a path popped past p's frame before byte d */
    gr_top_tokens *tt;
    uint32_t cap;            /* of tt->uncertain */
    mhla_grammar_error *err; /* where a failure is told */
} walk_ctx;

uint32_t gr_mask_deeper_at = GR_MASK_DEEPER;

void gr_top_tokens_free(gr_top_tokens *tt)
{
    if (!tt)
        return;
    free(tt->accepted);
    free(tt->uncertain);
    free(tt);
}

/* The tokens of nodes [from, to) of the trie (in preorder a subtree's tokens
 * are one run of ids) become uncertain when u, else stay rejected. */
static int mark(walk_ctx *c, uint32_t from, uint32_t to, int u)
{
    if (!u)
        return 0;
    uint32_t a = c->tr->nodes[from].tok, b = c->tr->nodes[to].tok;
    if (c->tt->n_uncertain + (b - a) > c->cap) {
        uint32_t cap = (c->cap + (b - a)) * 2;
        int32_t *u2 = realloc(c->tt->uncertain, (size_t)cap * sizeof *u2);
        if (!u2)
            return gr_mask_err(c->err, MHLA_GRAMMAR_NOMEM, "out of memory classifying tokens");
        c->tt->uncertain = u2;
        c->cap = cap;
    }
    memcpy(c->tt->uncertain + c->tt->n_uncertain, c->tr->ids + a,
           (size_t)(b - a) * sizeof(int32_t));
    c->tt->n_uncertain += b - a;
    return 0;
}

/* 1 when some stack of ss can take byte b: a cheap test before advancing. */
static int any_top_has(const mhla_grammar *g, const gr_stacks *ss, unsigned char b)
{
    for (uint32_t k = 0; k < ss->n; k++) {
        const gr_stack *s = &ss->s[k];
        if (s->n && gr_class_has(&g->classes[g->elems[s->pos[s->n - 1]].arg], b))
            return 1;
    }
    return 0;
}

static int has_empty(const gr_stacks *ss)
{
    for (uint32_t k = 0; k < ss->n; k++)
        if (ss->s[k].n == 0)
            return 1;
    return 0;
}

/* Node i at depth d + 1 (its parent's set is sets[d]): classifies its tokens,
 * and either descends (*depth = d + 1, *next = i + 1) or skips its subtree. */
static int visit(walk_ctx *c, uint32_t i, size_t d, uint32_t *next, size_t *depth)
{
    const gr_trie_node *nd = &c->tr->nodes[i];
    const gr_stacks *from = d ? &c->sets[d] : &c->start;
    *next = nd->end;
    if (!any_top_has(c->g, from, nd->byte))
        return mark(c, i, nd->end, c->unc[d]);
    int rc = gr_stacks_advance(c->g, from, nd->byte, &c->sets[d + 1], c->err);
    if (rc == MHLA_GRAMMAR_LIMIT) /* too many stacks: the run-time check decides */
        return mark(c, i, nd->end, 1);
    if (rc)
        return rc;
    if (c->sets[d + 1].n == 0)
        return mark(c, i, nd->end, c->unc[d]);
    for (uint32_t k = nd->tok; k < nd[1].tok; k++)
        c->tt->accepted[c->tr->ids[k] >> 6] |= 1ull << (c->tr->ids[k] & 63);
    int u = c->unc[d] || has_empty(&c->sets[d + 1]);
    if (c->sets[d + 1].n == 1 && c->sets[d + 1].s[0].n == 0)
        return mark(c, i + 1, nd->end, u); /* only the popped path is left */
    c->anc[d + 1] = i;
    c->unc[d + 1] = (unsigned char)u;
    *depth = d + 1;
    *next = i + 1;
    return 0;
}

static int walk(walk_ctx *c)
{
    const gr_trie_node *nodes = c->tr->nodes;
    size_t d = 0;
    c->anc[0] = 0;
    c->unc[0] = 0;
    for (uint32_t i = 1; i < c->tr->n_nodes;) {
        while (nodes[c->anc[d]].end <= i)
            d--;
        int rc = visit(c, i, d, &i, &d);
        if (rc)
            return rc;
    }
    return 0;
}

int gr_classify(const mhla_grammar_tokens *t, const uint32_t *suffix, uint32_t k,
                gr_top_tokens **out, mhla_grammar_error *err)
{
    const gr_trie *tr = t->v->trie;
    size_t depths = tr->max_len + 2;
    gr_stack top = {(uint32_t *)suffix, k}; /* read only: the walk's start, never advanced into */
    walk_ctx c = {.g = t->g, .tr = tr, .start = {.s = &top, .n = 1, .cap = 1}, .err = err};
    c.sets = gr_mask_sets_new(depths);
    c.anc = malloc(depths * sizeof *c.anc);
    c.unc = malloc(depths);
    c.tt = calloc(1, sizeof *c.tt);
    int rc = MHLA_GRAMMAR_NOMEM;
    if (c.sets && c.anc && c.unc && c.tt) {
        c.tt->accepted = calloc(((size_t)t->v->n + 63) / 64, sizeof(uint64_t));
        rc = c.tt->accepted ? 0 : MHLA_GRAMMAR_NOMEM;
    }
    if (rc)
        gr_mask_err(err, rc, "out of memory classifying tokens at element %u", suffix[k - 1]);
    else
        rc = walk(&c);
    if (rc == 0)
        c.tt->deeper = c.tt->n_uncertain > gr_mask_deeper_at;
    gr_mask_sets_free(c.sets, depths);
    free(c.anc);
    free(c.unc);
    if (rc)
        gr_top_tokens_free(c.tt);
    *out = rc ? NULL : c.tt;
    return rc;
}

int gr_top_tokens_get(mhla_grammar_tokens *t, uint32_t p, const gr_top_tokens **out,
                      mhla_grammar_error *err)
{
    if (p >= t->g->n_elems || t->g->elems[p].kind != GR_BYTES)
        return gr_mask_err(err, MHLA_GRAMMAR_SYNTAX, "stack top %u is not a byte element", p);
    gr_top_tokens *tt = __atomic_load_n(&t->by_elem[p], __ATOMIC_ACQUIRE);
    if (tt) {
        *out = tt;
        return 0;
    }
    /* computed outside the lock, so rows at other tops are not held up; the
     * first to finish publishes, a later one frees its copy */
    int rc = gr_classify(t, &p, 1, &tt, err);
    if (rc)
        return rc;
    pthread_mutex_lock(&t->mu);
    gr_top_tokens *had = t->by_elem[p];
    if (!had)
        __atomic_store_n(&t->by_elem[p], tt, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&t->mu);
    if (had)
        gr_top_tokens_free(tt);
    *out = had ? had : tt;
    return 0;
}

int mhla_grammar_tokens_create(mhla_grammar *g, const mhla_grammar_vocab *v,
                               mhla_grammar_tokens **out, mhla_grammar_error *err)
{
    if (!out || !g || !v)
        return gr_mask_err(err, MHLA_GRAMMAR_SYNTAX, "tokens: grammar, vocabulary or out is NULL");
    *out = NULL;
    mhla_grammar_tokens *t = calloc(1, sizeof *t);
    if (t)
        t->by_elem = calloc(g->n_elems ? g->n_elems : 1, sizeof *t->by_elem);
    if (!t || !t->by_elem || pthread_mutex_init(&t->mu, NULL)) {
        if (t)
            free(t->by_elem);
        free(t);
        return gr_mask_err(err, MHLA_GRAMMAR_NOMEM,
                           "out of memory binding a grammar of %u elements", g->n_elems);
    }
    mhla_grammar_retain(g);
    t->g = g;
    t->v = v;
    *out = t;
    return 0;
}

void mhla_grammar_tokens_free(mhla_grammar_tokens *t)
{
    if (!t)
        return;
    for (uint32_t p = 0; p < t->g->n_elems; p++)
        gr_top_tokens_free(t->by_elem[p]);
    free(t->by_elem);
    gr_deep_free(t->deep);
    pthread_mutex_destroy(&t->mu);
    mhla_grammar_free(t->g);
    free(t);
}
