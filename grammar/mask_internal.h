/*
 * mask_internal.h — what the vocabulary, the per-top token classes and the
 * matcher share (vocab.c, tokens.c, mask.c, matcher.c): the vocabulary's byte
 * trie, the scratch helpers over gr_stacks, and the error helper.
 */
#ifndef MHLA_GRAMMAR_MASK_INTERNAL_H
#define MHLA_GRAMMAR_MASK_INTERNAL_H

#include "grammar_internal.h"

/* A node of the trie, stored in depth-first (preorder) order so that a walk
 * reads the array front to back and a pruned subtree is skipped by one jump
 * (to `end`). The tokens whose bytes end at node i are
 * ids[nodes[i].tok, nodes[i + 1].tok): in preorder the ids are the tokens
 * sorted by their bytes. */
typedef struct {
    uint32_t end;       /* index past the node's subtree */
    uint32_t tok;       /* first of the node's tokens in ids */
    unsigned char byte; /* the byte on the edge into the node (root: 0) */
} gr_trie_node;

typedef struct {
    gr_trie_node *nodes; /* n_nodes + 1: the last is a sentinel (tok = n_ids) */
    uint32_t n_nodes;    /* node 0 is the root (the empty string) */
    int32_t *ids;        /* the tokens a mask may allow by their bytes */
    uint32_t n_ids;
    size_t max_len; /* the longest token's byte count */
    char *blob;     /* every token's bytes, one after another */
} gr_trie;

/* Fills err (when not NULL) and returns code. */
int gr_mask_err(mhla_grammar_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* n zeroed sets (gr_stacks_advance fills them; gr_mask_sets_free frees
 * them), or NULL. */
gr_stacks *gr_mask_sets_new(size_t n);
void gr_mask_sets_free(gr_stacks *sets, size_t n);

/* A top's classes leaving more uncertain tokens than this are marked deeper:
 * the classes of a longer suffix of the stack are used (each uncertain token
 * costs a run against the whole stack at every step). */
#define GR_MASK_DEEPER 16
/* The threshold in use: GR_MASK_DEEPER, lowered by the exactness test (set
 * before any classes are made) so that small vocabularies take the deeper
 * path too. */
extern uint32_t gr_mask_deeper_at;
/* Suffixes are at most this long, and at most GR_MASK_MAX_DEEP of them are
 * kept per grammar and vocabulary (then the shorter one serves). */
#define GR_MASK_MAX_SUFFIX 32
#define GR_MASK_MAX_DEEP 2048

/* The classes of tokens for the stacks whose last k elements are suffix
 * (k = 1: the top alone), computed by one walk of the trie (tokens.c). */
int gr_classify(const mhla_grammar_tokens *t, const uint32_t *suffix, uint32_t k,
                gr_top_tokens **out, mhla_grammar_error *err);
/* The classes of tokens at stack top p (a GR_BYTES element), computed the
 * first time it is asked for and then shared (thread-safe). */
int gr_top_tokens_get(mhla_grammar_tokens *t, uint32_t p, const gr_top_tokens **out,
                      mhla_grammar_error *err);
void gr_top_tokens_free(gr_top_tokens *tt);
/* The classes that decide for stack s: its top's, or where those are deeper
 * the longest-needed suffix's (mask_deep.c; thread-safe). */
int gr_stack_tokens(mhla_grammar_tokens *t, const gr_stack *s, const gr_top_tokens **out,
                    mhla_grammar_error *err);
void gr_deep_free(void *deep);
uint32_t gr_deep_count(const void *deep); /* suffixes classified (for tests) */

/* 1 when the vocabulary lets a mask allow token id by its bytes (not special,
 * not an end id, not empty). */
static inline int gr_vocab_byte_token(const mhla_grammar_vocab *v, int32_t id)
{
    return !v->special[id] && !v->is_eos[id] && v->lens[id] > 0;
}

#endif
