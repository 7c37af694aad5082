/*
 * libFuzzer target for the tokenizer (tokenizer/): tokenizer.json loading,
 * encode, decode and streaming decode. Byte 0 chooses what the rest is:
 *
 *   even: text for the tokenizers loaded at start (the *.json files of
 *         MHLA_FUZZ_TOKENIZERS, byte 0 / 2 picks one). Encode must succeed
 *         with ids the tokenizer knows; decoding them gives valid UTF-8, and
 *         for byte-level tokenizers without a normalizer the text itself
 *         (valid UTF-8 input); the rest is also read as token ids (2 bytes
 *         each, modulo the vocabulary), and their streamed decode —
 *         pushed one by one — equals the one-shot decode, piece by piece
 *         valid UTF-8, with and without special tokens.
 *   odd:  a tokenizer.json of its own, then (after the first NUL) a text: the
 *         loader accepts it or refuses it with a message; one it accepts
 *         encodes and decodes the text as above.
 */
#include "tokenizer.h"
#include "fuzz_utf8.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz_tokenizer: " __VA_ARGS__);                                           \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

#define MAX_TOKS 8
static mhla_tokenizer *toks[MAX_TOKS];
static int exact[MAX_TOKS]; /* decode(encode(text)) == text for valid UTF-8 */
static int n_toks;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *dir = getenv("MHLA_FUZZ_TOKENIZERS");
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d) {
        fprintf(stderr, "fuzz_tokenizer: set MHLA_FUZZ_TOKENIZERS to a folder of tokenizer "
                        "JSON files\n");
        exit(2);
    }
    char *names[MAX_TOKS];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < MAX_TOKS) {
        size_t l = strlen(de->d_name);
        if (l > 5 && strcmp(de->d_name + l - 5, ".json") == 0)
            names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str); /* the same order on every run */
    for (int i = 0; i < n; i++) {
        char path[1024], err[512];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (mhla_tok_load(path, NULL, &toks[n_toks], err, sizeof err)) {
            fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, err);
            exit(2);
        }
        /* "exact_" files: byte-level without a normalizer, so text round-trips */
        exact[n_toks] = strncmp(names[i], "exact_", 6) == 0;
        n_toks++;
        free(names[i]);
    }
    if (!n_toks) {
        fprintf(stderr, "fuzz_tokenizer: no *.json in %s\n", dir);
        exit(2);
    }
    return 0;
}

/* The streamed decode's work is linear in the ids pushed (RESULTS.md: the
 * window held by ids that decode to U+FFFD is fixed), but a decoder that strips
 * characters off the end (Strip with stop > 0) still re-decodes every id at every
 * push. The checks take the first MAX_STREAM ids, so that such inputs stay within
 * the time limit while every other property is still checked. */
#define MAX_STREAM 1024

/* ids decoded at once and pushed one by one must agree. */
static void check_stream(const mhla_tokenizer *t, const int32_t *ids, size_t n, int skip)
{
    if (n > MAX_STREAM)
        n = MAX_STREAM;
    char err[512], *text = NULL;
    size_t len = 0;
    int rc = mhla_tok_decode(t, ids, n, skip, &text, &len, err, sizeof err);
    if (rc == 0 && fuzz_utf8_valid_prefix((const uint8_t *)text, len) != len)
        FAIL("decode gave invalid UTF-8");
    mhla_tok_stream *st = NULL;
    if (mhla_tok_stream_new(t, skip, &st, err, sizeof err))
        FAIL("stream_new: %s", err);
    size_t got = 0;
    int srv = 0;
    for (size_t i = 0; i < n && !srv; i++) {
        const char *piece;
        size_t pl;
        if (mhla_tok_stream_push(st, ids[i], &piece, &pl, err, sizeof err)) {
            srv = 1;
            break;
        }
        if (fuzz_utf8_valid_prefix((const uint8_t *)piece, pl) != pl)
            FAIL("a streamed piece is not valid UTF-8");
        if (rc == 0 && (got + pl > len || memcmp(text + got, piece, pl) != 0))
            FAIL("streamed pieces differ from the one-shot decode at byte %zu", got);
        got += pl;
    }
    if (srv) {
        if (rc == 0)
            FAIL("the stream refused an id the one-shot decode took: %s", err);
    } else {
        const char *piece;
        size_t pl;
        if (mhla_tok_stream_finish(st, &piece, &pl, err, sizeof err))
            FAIL("stream_finish: %s", err);
        if (rc != 0)
            FAIL("the one-shot decode refused ids the stream took");
        if (fuzz_utf8_valid_prefix((const uint8_t *)piece, pl) != pl)
            FAIL("the last streamed piece is not valid UTF-8");
        if (got + pl != len || memcmp(text + got, piece, pl) != 0)
            FAIL("streamed text (%zu bytes) differs from the one-shot decode (%zu)", got + pl, len);
    }
    mhla_tok_stream_free(st);
    free(text);
}

static void exercise(const mhla_tokenizer *t, int is_exact, const uint8_t *text, size_t len)
{
    char err[512];
    int32_t *ids = NULL;
    size_t n = 0;
    size_t vocab = mhla_tok_vocab_size(t);
    for (int special = 0; special < 2; special++) {
        if (mhla_tok_encode(t, (const char *)text, len, special, &ids, &n, err, sizeof err))
            FAIL("encode refused %zu bytes: %s", len, err);
        for (size_t i = 0; i < n; i++) {
            size_t tl;
            if (ids[i] < 0 || (size_t)ids[i] >= vocab || !mhla_tok_id_to_token(t, ids[i], &tl))
                FAIL("encode gave unknown id %d", (int)ids[i]);
        }
        char *back = NULL;
        size_t bl = 0;
        if (mhla_tok_decode(t, ids, n, 0, &back, &bl, err, sizeof err))
            FAIL("decode refused encode's ids: %s", err);
        if (!special && is_exact && fuzz_utf8_valid_prefix(text, len) == len &&
            (bl != len || memcmp(back, text, len) != 0))
            FAIL("decode(encode(text)) differs from the text (%zu vs %zu bytes)", bl, len);
        free(back);
        check_stream(t, ids, n, 0);
        check_stream(t, ids, n, 1);
        free(ids);
        ids = NULL;
    }
    /* the bytes as ids */
    if (vocab == 0)
        return;
    size_t m = len / 2;
    ids = malloc((m ? m : 1) * sizeof *ids);
    for (size_t i = 0; i < m; i++)
        ids[i] = (int32_t)(((size_t)text[2 * i] | (size_t)text[2 * i + 1] << 8) % vocab);
    check_stream(t, ids, m, 0);
    check_stream(t, ids, m, 1);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (!(data[0] & 1)) {
        int k = (data[0] >> 1) % n_toks;
        /* in a buffer of its own size, so reads past the text are caught */
        uint8_t *text = malloc(size);
        memcpy(text, data + 1, size - 1);
        exercise(toks[k], exact[k], text, size - 1);
        free(text);
        return 0;
    }
    const uint8_t *json = data + 1;
    const uint8_t *nul = memchr(json, 0, size - 1);
    size_t jl = nul ? (size_t)(nul - json) : size - 1;
    char *js = malloc(jl ? jl : 1);
    memcpy(js, json, jl);
    char err[512];
    mhla_tokenizer *t = NULL;
    if (mhla_tok_load_mem(js, jl, NULL, 0, &t, err, sizeof err) == 0) {
        const uint8_t *text = nul ? nul + 1 : data + size;
        size_t tl = (size_t)(data + size - text);
        uint8_t *tx = malloc(tl ? tl : 1);
        memcpy(tx, text, tl);
        exercise(t, 0, tx, tl);
        free(tx);
        mhla_tok_free(t);
    } else if (!err[0]) {
        FAIL("a refused tokenizer.json without a message");
    }
    free(js);
    return 0;
}
