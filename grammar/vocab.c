/*
 * vocab.c — a vocabulary's token bytes, its special and end ids, and a trie
 * over the bytes of the tokens a mask may allow, laid out in depth-first
 * order (mask_internal.h) so that classifying every token at a stack top is
 * one front-to-back walk that skips the subtrees no path can enter.
 */
#include "mask_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *p;
    size_t n;
    int32_t id;
} tok_key;

static int key_cmp(const void *a, const void *b)
{
    const tok_key *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = n ? memcmp(x->p, y->p, n) : 0;
    if (c)
        return c;
    if (x->n != y->n)
        return x->n < y->n ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static size_t lcp(const tok_key *a, const tok_key *b)
{
    size_t n = a->n < b->n ? a->n : b->n, i = 0;
    while (i < n && a->p[i] == b->p[i])
        i++;
    return i;
}

/* Adds key k (sorted after prev) to the trie: closes the nodes deeper than
 * the common prefix, opens one node per new byte. path[d] is the node at
 * depth d on the current branch; *depth its length. */
static void trie_add(gr_trie *t, const tok_key *prev, const tok_key *k, uint32_t *path,
                     size_t *depth)
{
    size_t keep = prev ? lcp(prev, k) : 0;
    for (; *depth > keep; (*depth)--)
        t->nodes[path[*depth]].end = t->n_nodes;
    for (size_t i = keep; i < k->n; i++) {
        uint32_t x = t->n_nodes++;
        t->nodes[x] = (gr_trie_node){0, t->n_ids, (unsigned char)k->p[i]};
        path[++(*depth)] = x;
    }
    t->ids[t->n_ids++] = k->id;
}

static void trie_close(gr_trie *t, uint32_t *path, size_t depth)
{
    for (; depth > 0; depth--)
        t->nodes[path[depth]].end = t->n_nodes;
    t->nodes[0].end = t->n_nodes;
    t->nodes[t->n_nodes] = (gr_trie_node){t->n_nodes, t->n_ids, 0};
}

static int trie_fill(gr_trie *t, tok_key *keys, size_t nk, size_t total, mhla_grammar_error *err)
{
    qsort(keys, nk, sizeof *keys, key_cmp);
    t->nodes = malloc((total + 2) * sizeof *t->nodes);
    t->ids = malloc((nk ? nk : 1) * sizeof *t->ids);
    uint32_t *path = malloc((t->max_len + 1) * sizeof *path);
    if (!t->nodes || !t->ids || !path) {
        free(path);
        return gr_mask_err(err, MHLA_GRAMMAR_NOMEM, "out of memory building the token trie");
    }
    t->nodes[0] = (gr_trie_node){0, 0, 0};
    t->n_nodes = 1;
    path[0] = 0;
    size_t depth = 0;
    for (size_t i = 0; i < nk; i++)
        trie_add(t, i ? &keys[i - 1] : NULL, &keys[i], path, &depth);
    trie_close(t, path, depth);
    free(path);
    return 0;
}

static void trie_free(gr_trie *t)
{
    if (!t)
        return;
    free(t->nodes);
    free(t->ids);
    free(t->blob);
    free(t);
}

/* The trie over the tokens a mask may allow by their bytes. */
static int trie_build(mhla_grammar_vocab *v, gr_trie *t, mhla_grammar_error *err)
{
    tok_key *keys = malloc((size_t)v->n * sizeof *keys);
    if (!keys)
        return gr_mask_err(err, MHLA_GRAMMAR_NOMEM, "out of memory sorting %d tokens", v->n);
    size_t nk = 0, total = 0;
    for (int32_t i = 0; i < v->n; i++) {
        if (!gr_vocab_byte_token(v, i))
            continue;
        keys[nk++] = (tok_key){v->bytes[i], v->lens[i], i};
        total += v->lens[i];
        t->max_len = v->lens[i] > t->max_len ? v->lens[i] : t->max_len;
    }
    int rc = trie_fill(t, keys, nk, total, err);
    free(keys);
    return rc;
}

static int check_args(int n, const char *const *bytes, const size_t *lens, const int32_t *eos,
                      int n_eos, size_t *total, mhla_grammar_error *err)
{
    if (n <= 0 || n >= (1 << 30) || !bytes || !lens || n_eos < 0 || (n_eos && !eos))
        return gr_mask_err(err, MHLA_GRAMMAR_SYNTAX,
                           "vocabulary: bad arguments (n %d, bytes/lens given, %d end ids)", n,
                           n_eos);
    *total = 0;
    for (int i = 0; i < n; i++) {
        if (lens[i] && !bytes[i])
            return gr_mask_err(err, MHLA_GRAMMAR_SYNTAX, "vocabulary: token %d has no bytes", i);
        if (lens[i] > ((size_t)1 << 20) || *total > ((size_t)1 << 40))
            return gr_mask_err(err, MHLA_GRAMMAR_LIMIT, "vocabulary: token %d is too long", i);
        *total += lens[i];
    }
    for (int k = 0; k < n_eos; k++)
        if (eos[k] < 0 || eos[k] >= n)
            return gr_mask_err(err, MHLA_GRAMMAR_SYNTAX,
                               "vocabulary: end id %d is outside the %d tokens", (int)eos[k], n);
    return 0;
}

/* Copies every token's bytes into one block (bytes[i] point into it). */
static int copy_tokens(mhla_grammar_vocab *v, gr_trie *t, const char *const *bytes,
                       const size_t *lens, const unsigned char *special, size_t total)
{
    v->bytes = malloc((size_t)v->n * sizeof *v->bytes);
    v->lens = malloc((size_t)v->n * sizeof *v->lens);
    v->special = calloc((size_t)v->n, 1);
    v->is_eos = calloc((size_t)v->n, 1);
    t->blob = malloc(total ? total : 1);
    if (!v->bytes || !v->lens || !v->special || !v->is_eos || !t->blob)
        return MHLA_GRAMMAR_NOMEM;
    size_t at = 0;
    for (int i = 0; i < v->n; i++) {
        v->bytes[i] = t->blob + at;
        v->lens[i] = lens[i];
        if (lens[i])
            memcpy(t->blob + at, bytes[i], lens[i]);
        at += lens[i];
        v->special[i] = special && special[i];
    }
    return 0;
}

int mhla_grammar_vocab_create(int n, const char *const *bytes, const size_t *lens,
                              const unsigned char *special, const int32_t *eos, int n_eos,
                              mhla_grammar_vocab **out, mhla_grammar_error *err)
{
    size_t total = 0;
    if (!out)
        return gr_mask_err(err, MHLA_GRAMMAR_SYNTAX, "vocabulary: out is NULL");
    *out = NULL;
    int rc = check_args(n, bytes, lens, eos, n_eos, &total, err);
    if (rc)
        return rc;
    mhla_grammar_vocab *v = calloc(1, sizeof *v);
    gr_trie *t = calloc(1, sizeof *t);
    if (!v || !t) {
        free(v);
        free(t);
        return gr_mask_err(err, MHLA_GRAMMAR_NOMEM, "out of memory for a vocabulary");
    }
    v->n = n;
    v->trie = t; /* freed with v from here on */
    if (copy_tokens(v, t, bytes, lens, special, total)) {
        mhla_grammar_vocab_free(v);
        return gr_mask_err(err, MHLA_GRAMMAR_NOMEM, "out of memory copying %d tokens", n);
    }
    for (int k = 0; k < n_eos; k++)
        v->is_eos[eos[k]] = 1;
    rc = trie_build(v, t, err);
    if (rc) {
        mhla_grammar_vocab_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

void mhla_grammar_vocab_free(mhla_grammar_vocab *v)
{
    if (!v)
        return;
    trie_free(v->trie);
    free(v->bytes);
    free(v->lens);
    free(v->special);
    free(v->is_eos);
    free(v);
}

int mhla_grammar_vocab_size(const mhla_grammar_vocab *v) { return v ? v->n : 0; }
