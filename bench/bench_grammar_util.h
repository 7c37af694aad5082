/*
 * bench_grammar_util.h — what the grammar benchmarks share: a file read
 * whole (a schema) and a model's tokenizer turned into the grammar
 * vocabulary the server builds from it (every token's mid-text bytes).
 */
#ifndef MHLA_BENCH_GRAMMAR_UTIL_H
#define MHLA_BENCH_GRAMMAR_UTIL_H

#include "grammar.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The bytes of path (malloc'd, NUL-ended; *n without the NUL), or NULL. */
static inline char *bench_slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0;
    *n = 0;
    while (f) {
        if (*n + 4096 >= cap) {
            char *p = realloc(buf, cap = cap * 2 + 8192);
            if (!p)
                break;
            buf = p;
        }
        size_t got = fread(buf + *n, 1, cap - *n - 1, f);
        *n += got;
        if (got == 0) {
            buf[*n] = '\0';
            fclose(f);
            return buf;
        }
    }
    if (f)
        fclose(f);
    free(buf);
    return NULL;
}

/* The grammar vocabulary of tok: every token's mid-text bytes. */
static inline mhla_grammar_vocab *bench_grammar_vocab(const mhla_tokenizer *tok)
{
    int n = (int)mhla_tok_vocab_size(tok);
    char **bytes = calloc((size_t)n, sizeof *bytes);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    unsigned char *special = calloc((size_t)n, 1);
    int32_t eos = mhla_tok_eos_id(tok);
    mhla_grammar_vocab *v = NULL;
    mhla_grammar_error err;
    char buf[4096];
    for (int i = 0; bytes && lens && special && i < n; i++) {
        if (mhla_tok_token_bytes(tok, i, buf, sizeof buf, &lens[i]) ||
            !(bytes[i] = malloc(lens[i] + 1))) {
            lens[i] = 0; /* an id without a token: never allowed */
            special[i] = 1;
            continue;
        }
        memcpy(bytes[i], buf, lens[i]);
        special[i] = (unsigned char)mhla_tok_is_special(tok, i);
    }
    if (bytes && lens && special &&
        mhla_grammar_vocab_create(n, (const char *const *)bytes, lens, special, &eos, eos >= 0, &v,
                                  &err))
        fprintf(stderr, "vocabulary: %s\n", err.msg);
    for (int i = 0; bytes && i < n; i++)
        free(bytes[i]);
    free(bytes);
    free(lens);
    free(special);
    return v;
}

/* The tokenizer in dir (tokenizer.json, tokenizer_config.json), or NULL
 * with the reason on stderr. */
static inline mhla_tokenizer *bench_load_tokenizer(const char *dir)
{
    char path[4096], cfg[4096], e[512];
    mhla_tokenizer *tok = NULL;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
    if (mhla_tok_load(path, cfg, &tok, e, sizeof e)) {
        fprintf(stderr, "%s: %s\n", dir, e);
        return NULL;
    }
    return tok;
}

#endif
