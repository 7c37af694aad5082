/*
 * grammar_internal.h — the compiled form every part of grammar/ shares.
 *
 * A grammar is rules of elements over BYTES. Each element matches one byte
 * from a set (a 256-bit class), refers to a rule, or marks the end of an
 * alternative. Characters outside ASCII are compiled into the byte sequences
 * of their UTF-8 encoding (a class of code points becomes a helper rule of
 * byte-sequence alternatives), so tokens that split a character need nothing
 * special.
 *
 * Layout: one array `elems` for all rules. Rule r's alternatives start at
 * rule_start[r]: alt 1's elements, GR_ALT, alt 2's elements, …, GR_END.
 *
 * A stack is the list of element indices still to match, innermost last:
 * its top is the next element of the innermost rule being matched. Stacks
 * are kept "expanded": their top is always a GR_BYTES element, or the stack
 * is empty (the string is whole). Expanding a stack whose top is a rule
 * reference replaces the top with the element after it (left out when that
 * is the alternative's end: tail calls do not grow the stack, so `x*`
 * compiled to a right-recursive rule runs in constant depth) and pushes
 * the first element of each alternative of the rule (one stack each); a top
 * at GR_ALT/GR_END pops. Left recursion is refused at compile time.
 *
 * A matcher holds a set of such stacks (nondeterminism), deduplicated.
 */
#ifndef MHLA_GRAMMAR_INTERNAL_H
#define MHLA_GRAMMAR_INTERNAL_H

#include "grammar.h"

#include <pthread.h>
#include <stdint.h>

typedef enum {
    GR_END = 0,  /* end of the rule's last alternative */
    GR_ALT = 1,  /* end of an alternative, another follows */
    GR_RULE = 2, /* arg: the rule index */
    GR_BYTES = 3 /* arg: index into classes (a 256-bit set of bytes) */
} gr_kind;

typedef struct {
    uint32_t kind : 2;
    uint32_t arg : 30;
} gr_elem;

typedef struct {
    uint64_t bits[4]; /* byte b allowed: bits[b >> 6] >> (b & 63) & 1 */
} gr_class;

static inline int gr_class_has(const gr_class *c, unsigned char b)
{
    return (int)((c->bits[b >> 6] >> (b & 63)) & 1u);
}

/* Caps on what a compile may build (MHLA_GRAMMAR_LIMIT past them). */
#define GR_MAX_RULES 65536
#define GR_MAX_ELEMS (1 << 22)
#define GR_MAX_STACKS 4096      /* stacks a matcher may hold at once */
#define GR_MAX_STACK_DEPTH 1024 /* frames in one stack */
#define GR_MAX_EXPAND (1 << 16) /* rule expansions in one start/advance call */

struct mhla_grammar {
    int refs; /* atomic: retain/free from any thread */
    gr_elem *elems;
    uint32_t n_elems;
    uint32_t *rule_start; /* n_rules */
    char **rule_names;    /* n_rules, for messages ("" for helper rules) */
    uint32_t n_rules;
    uint32_t root;
    gr_class *classes;
    uint32_t n_classes;
};

/* A stack: element indices, innermost (top) last. */
typedef struct {
    uint32_t *pos;
    uint32_t n;
} gr_stack;

/* A set of expanded stacks, deduplicated. The stacks' pos arrays lie in
 * one buffer the set owns (mem, with the dedup table and the expansion's
 * scratch), so that advancing allocates nothing once the set has grown:
 * a set is made only by gr_stacks_start/advance into a zero-initialised
 * gr_stacks or into one they filled before (its memory is reused, its old
 * stacks dropped), moved by assignment, and freed by gr_stacks_free. */
struct gr_stacks_mem;
typedef struct {
    gr_stack *s;
    uint32_t n, cap;
    struct gr_stacks_mem *mem;
} gr_stacks;

void gr_stacks_free(gr_stacks *ss);
/* The expanded stacks of the grammar's start (root's alternatives). */
int gr_stacks_start(const mhla_grammar *g, gr_stacks *out, mhla_grammar_error *err);
/* out = the stacks after byte b from in (expanded, deduplicated); out empty
 * when none accepts b (in and out distinct sets). MHLA_GRAMMAR_LIMIT past
 * GR_MAX_STACKS, the depth, or GR_MAX_EXPAND expansion steps in one call. */
int gr_stacks_advance(const mhla_grammar *g, const gr_stacks *in, unsigned char b, gr_stacks *out,
                      mhla_grammar_error *err);
/* 1 when one of the stacks is empty (the string so far is whole). */
int gr_stacks_accepting(const gr_stacks *ss);

/* ---- the vocabulary and the mask ------------------------------------------- */

struct mhla_grammar_vocab {
    int n;
    char **bytes; /* n; token i's bytes */
    size_t *lens;
    unsigned char *special; /* n; never allowed */
    unsigned char *is_eos;  /* n */
    /* a trie over the tokens' bytes, for classifying many tokens at once
     * (the layout is the mask code's) */
    void *trie;
};

/* Per expanded-stack top (a GR_BYTES element), computed the first time a row
 * reaches it: the tokens accepted whatever lies below the top's rule, and the
 * ones that run past the end of that rule (checked against the whole stack).
 * The same for a stack's last k > 1 elements (the top and the continuations
 * under it), used where the top alone leaves many uncertain (deeper). */
typedef struct {
    uint64_t *accepted; /* (n + 63) / 64 words */
    int32_t *uncertain; /* sorted by their bytes */
    uint32_t n_uncertain;
    int deeper; /* too many uncertain: a longer suffix of the stack decides */
} gr_top_tokens;

struct mhla_grammar_tokens {
    mhla_grammar *g; /* retained */
    const mhla_grammar_vocab *v;
    gr_top_tokens **by_elem; /* n_elems; NULL until computed (published under mu) */
    void *deep;              /* the classes of longer suffixes (mask_deep.c), under mu */
    pthread_mutex_t mu;
};

struct mhla_grammar_matcher {
    mhla_grammar_tokens *t;
    gr_stacks stacks;
    int ended;       /* an end id was taken: only end ids may follow */
    gr_stacks *sets; /* scratch kept from call to call (so advancing reuses its
                      * memory): the mask's set after each byte of a token,
                      * accept's two */
    size_t n_sets;   /* the longest token's bytes + 2 */
};

#endif
