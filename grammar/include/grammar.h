/*
 * grammar.h — constrained decoding. A grammar (GBNF, llama.cpp's syntax; a
 * JSON Schema; "any JSON object") is compiled once into a pushdown automaton
 * over bytes, UTF-8 aware (a character class is the byte sequences of its
 * code points). Bound to a vocabulary (each token's bytes), it gives, for
 * the text generated so far, the set of tokens whose bytes can continue a
 * string of the grammar: the mask a sampler applies before it chooses.
 *
 * The pieces and who owns them:
 *   mhla_grammar          compiled once, immutable, shared by every row that
 *                         uses it (reference counted: retain/free);
 *   mhla_grammar_vocab    a vocabulary's token bytes, special and end ids,
 *                         made once per model;
 *   mhla_grammar_tokens   a grammar bound to a vocabulary: the per-state
 *                         token classification computed ahead (accepted or
 *                         rejected whatever the stack holds, and the few left
 *                         to check at run time), shared by its rows, safe to
 *                         use from several threads;
 *   mhla_grammar_matcher  one row's state (its stacks), one thread at a time.
 *
 * Every call returns 0 or a negative MHLA_GRAMMAR_* code and fills err;
 * nothing aborts on bad input, and on failure everything allocated is freed.
 * Compilation is bounded (rules, elements, nesting, memory): past a cap it
 * fails with MHLA_GRAMMAR_LIMIT rather than hang or exhaust the process.
 */
#ifndef MHLA_GRAMMAR_H
#define MHLA_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    MHLA_GRAMMAR_SYNTAX = -1,      /* the grammar or schema is malformed (err says where) */
    MHLA_GRAMMAR_UNSUPPORTED = -2, /* a schema keyword or regex feature not served (named) */
    MHLA_GRAMMAR_LIMIT = -3,       /* a compile cap was reached */
    MHLA_GRAMMAR_NOMEM = -4,       /* out of memory */
    MHLA_GRAMMAR_REJECTED = -5,    /* a token or bytes the grammar does not allow here */
};

typedef struct {
    char msg[256];
    long pos;       /* byte offset in the grammar or schema text, -1 when none */
    char path[128]; /* a schema's JSON pointer to the fault ("/properties/age"), or "" */
} mhla_grammar_error;

typedef struct mhla_grammar mhla_grammar;
typedef struct mhla_grammar_vocab mhla_grammar_vocab;
typedef struct mhla_grammar_tokens mhla_grammar_tokens;
typedef struct mhla_grammar_matcher mhla_grammar_matcher;

/* ---- compiling ------------------------------------------------------------ */

/* GBNF text; root names the start rule (NULL: "root"). */
int mhla_grammar_from_gbnf(const char *text, size_t len, const char *root, mhla_grammar **out,
                           mhla_grammar_error *err);
/* A JSON Schema (its JSON text). What it serves is listed in grammar/README.md;
 * any other keyword is MHLA_GRAMMAR_UNSUPPORTED naming it. */
int mhla_grammar_from_json_schema(const char *schema, size_t len, mhla_grammar **out,
                                  mhla_grammar_error *err);
/* The GBNF a schema compiles to (*gbnf malloc'd), for tools and tests. */
int mhla_grammar_schema_to_gbnf(const char *schema, size_t len, char **gbnf,
                                mhla_grammar_error *err);
/* Any JSON value whose top level is an object (response_format json_object). */
int mhla_grammar_json_object(mhla_grammar **out, mhla_grammar_error *err);

void mhla_grammar_retain(mhla_grammar *g);
void mhla_grammar_free(mhla_grammar *g); /* drops a reference */

/* ---- strings (tests, tools) ----------------------------------------------- */

/* 1 when s[0, n) is a whole string of g, 0 when it is a prefix of one only,
 * MHLA_GRAMMAR_REJECTED when it is neither. */
int mhla_grammar_match(const mhla_grammar *g, const char *s, size_t n, mhla_grammar_error *err);
/* A random string of g (*out malloc'd, NUL-ended), walking its rules with
 * seed; depth-bounded (max_bytes caps its length): MHLA_GRAMMAR_LIMIT when
 * no string of at most max_bytes was found. */
int mhla_grammar_sample(const mhla_grammar *g, uint64_t seed, size_t max_bytes, char **out,
                        size_t *len, mhla_grammar_error *err);

/* ---- a vocabulary --------------------------------------------------------- */

/* n tokens; bytes[i], lens[i]: the bytes token i adds to a text (a byte
 * token's one byte, a word piece's text with its leading space); special[i]
 * nonzero: never allowed by a mask (may be NULL); eos: the ids that end a
 * text, allowed only where the grammar's string is whole. */
int mhla_grammar_vocab_create(int n, const char *const *bytes, const size_t *lens,
                              const unsigned char *special, const int32_t *eos, int n_eos,
                              mhla_grammar_vocab **out, mhla_grammar_error *err);
void mhla_grammar_vocab_free(mhla_grammar_vocab *v);
int mhla_grammar_vocab_size(const mhla_grammar_vocab *v);

/* ---- a grammar bound to a vocabulary -------------------------------------- */

int mhla_grammar_tokens_create(mhla_grammar *g, const mhla_grammar_vocab *v,
                               mhla_grammar_tokens **out, mhla_grammar_error *err);
void mhla_grammar_tokens_free(mhla_grammar_tokens *t);

/* ---- one row -------------------------------------------------------------- */

int mhla_grammar_matcher_create(mhla_grammar_tokens *t, mhla_grammar_matcher **out,
                                mhla_grammar_error *err);
void mhla_grammar_matcher_free(mhla_grammar_matcher *m);
/* The tokens allowed next: bit i of bits (words of 64, (n + 63) / 64 of
 * them) set when token i can continue the string (an end id: when it is
 * whole). Returns the number allowed (0: none, the row cannot go on). */
int mhla_grammar_matcher_mask(mhla_grammar_matcher *m, uint64_t *bits, mhla_grammar_error *err);
/* The same by trying every token's bytes against the stacks, one by one:
 * slow, the reference the fast mask is tested against. */
int mhla_grammar_matcher_mask_slow(mhla_grammar_matcher *m, uint64_t *bits,
                                   mhla_grammar_error *err);
/* Token chosen: the matcher advances (MHLA_GRAMMAR_REJECTED when the mask
 * would not have allowed it; the matcher is then unchanged). */
int mhla_grammar_matcher_accept(mhla_grammar_matcher *m, int32_t token, mhla_grammar_error *err);
/* 1 when the string so far is whole (an end id is allowed), else 0. */
int mhla_grammar_matcher_done(const mhla_grammar_matcher *m);

#ifdef __cplusplus
}
#endif
#endif
