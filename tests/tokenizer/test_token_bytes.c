/*
 * test_token_bytes.c — mhla_tok_token_bytes on the real tokenizers: for the byte-level
 * ones (gpt2, llama3, qwen2) the tokens' bytes of an encoded text, concatenated, are its
 * decode, and so on random id sequences whose bytes are valid UTF-8; for llama2
 * (SentencePiece with byte fallback) the same with the text's first space kept (its
 * decoder strips it). Single tokens: a partial character's raw byte, <0x0A>, an added token's
 * content, a too-small buffer and an unknown id.
 *
 *   test_token_bytes DATADIR   (the tokenizer.data fixture's folder)
 */
#include "check.h"
#include "tokenizer.h"

#include <stdio.h>
#include <string.h>

static const char *const TEXTS[] = {
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "{\"name\": \"Zoë\", \"age\": 42, \"tags\": [\"a\", \"b\"], \"ok\": true}",
    "naïve café — 日本語のテキスト, emoji 🙂🚀 and Ελληνικά\n\ttabs  and   spaces",
    "  leading spaces, trailing \n\n newlines \r\n",
    "x = [1, 2.5e-3, -7]; if (a != b) { return \"\\u00e9\"; }",
    "ℵ₀ ≤ 2^ℵ₀ · ∑ · 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 · ‰ · ￥",
};

/* The tokens' bytes of ids, concatenated (malloc'd). */
static char *concat(const mhla_tokenizer *tok, const int32_t *ids, size_t n, size_t *len)
{
    size_t cap = 64, at = 0, k;
    char *out = malloc(cap);
    for (size_t i = 0; i < n && out; i++) {
        while (mhla_tok_token_bytes(tok, ids[i], out + at, cap - at, &k) && k > cap - at) {
            cap *= 2;
            char *o = realloc(out, cap);
            if (!o)
                die("out of memory");
            out = o;
        }
        at += k;
    }
    *len = at;
    return out;
}

static int valid_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        int k = s[i] < 0x80         ? 1
                : (s[i] >> 5) == 6  ? 2
                : (s[i] >> 4) == 14 ? 3
                : (s[i] >> 3) == 30 ? 4
                                    : 0;
        if (!k || i + (size_t)k > n || (k == 2 && s[i] < 0xC2))
            return 0;
        for (int j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
        if ((k == 3 && s[i] == 0xE0 && s[i + 1] < 0xA0) ||
            (k == 3 && s[i] == 0xED && s[i + 1] >= 0xA0) ||
            (k == 4 && s[i] == 0xF0 && s[i + 1] < 0x90) || (k == 4 && s[i] > 0xF4) ||
            (k == 4 && s[i] == 0xF4 && s[i + 1] >= 0x90))
            return 0;
        i += (size_t)k;
    }
    return 1;
}

/* bytes == decode (skip_first: bytes' leading space is what the decode strips). */
static int same_as_decode(const mhla_tokenizer *tok, const int32_t *ids, size_t n, int skip_first)
{
    size_t nb, nd;
    char err[256], *text;
    char *bytes = concat(tok, ids, n, &nb);
    if (mhla_tok_decode(tok, ids, n, 0, &text, &nd, err, sizeof err))
        die("decode: %s", err);
    size_t s = skip_first && nb && bytes[0] == ' ' ? 1 : 0;
    int same = nb - s == nd && memcmp(bytes + s, text, nd) == 0;
    free(bytes);
    free(text);
    return same;
}

static long checked_texts, checked_random;

static void check_texts(const mhla_tokenizer *tok, const char *name, int skip_first)
{
    char err[256];
    for (size_t t = 0; t < sizeof TEXTS / sizeof TEXTS[0]; t++) {
        int32_t *ids;
        size_t n;
        if (mhla_tok_encode(tok, TEXTS[t], strlen(TEXTS[t]), 0, &ids, &n, err, sizeof err))
            die("encode: %s", err);
        CHECK(n > 3 && same_as_decode(tok, ids, n, skip_first), "%s: text %zu: bytes != decode",
              name, t);
        free(ids);
        checked_texts++;
    }
}

/* Random ids (special ones too): wherever their bytes are valid UTF-8 the decode is them. */
static void check_random(const mhla_tokenizer *tok, const char *name, int skip_first)
{
    int vs = (int)mhla_tok_vocab_size(tok);
    for (int r = 0; r < 3000; r++) {
        int32_t ids[6];
        size_t n = 1 + (size_t)rnd(6), nb;
        for (size_t i = 0; i < n; i++) {
            size_t k;
            do /* ids without a token (holes in the vocabulary) are not drawn */
                ids[i] = rnd(vs);
            while (!mhla_tok_id_to_token(tok, ids[i], &k));
        }
        char *bytes = concat(tok, ids, n, &nb);
        if (valid_utf8((const unsigned char *)bytes, nb)) {
            CHECK(same_as_decode(tok, ids, n, skip_first),
                  "%s: random ids (%d ...): bytes != decode", name, (int)ids[0]);
            checked_random++;
        }
        free(bytes);
    }
}

/* id's bytes are want[0, wn). */
static void check_one(const mhla_tokenizer *tok, const char *token, const char *want, size_t wn)
{
    char buf[64];
    size_t n;
    int32_t id = mhla_tok_token_to_id(tok, token, strlen(token));
    CHECK(id >= 0, "no token %s", token);
    if (id < 0)
        return;
    CHECK(mhla_tok_token_bytes(tok, id, buf, sizeof buf, &n) == 0 && n == wn &&
              memcmp(buf, want, wn) == 0,
          "token %s: %zu bytes", token, n);
}

static void check_single(const mhla_tokenizer *gpt2, const mhla_tokenizer *llama2)
{
    char buf[4];
    size_t n;
    check_one(gpt2, "\xC4\xA0hello", " hello", 6);
    check_one(gpt2, "\xC3\xA4", "\xE4", 1); /* "ä" stands for byte E4: a character's first byte */
    check_one(gpt2, "<|endoftext|>", "<|endoftext|>", 13);
    check_one(llama2, "\xE2\x96\x81the", " the", 4);
    check_one(llama2, "<0x0A>", "\n", 1);
    check_one(llama2, "<0xE4>", "\xE4", 1);
    check_one(llama2, "<s>", "<s>", 3);
    int32_t id = mhla_tok_token_to_id(gpt2, "\xC4\xA0hello", 7);
    CHECK(mhla_tok_token_bytes(gpt2, id, buf, sizeof buf, &n) == -1 && n == 6, "short buffer: %zu",
          n);
    CHECK(mhla_tok_token_bytes(gpt2, 1 << 28, buf, sizeof buf, &n) == -1 && n == 0, "bad id");
    CHECK(mhla_tok_token_bytes(gpt2, -1, buf, sizeof buf, &n) == -1 && n == 0, "negative id");
}

static mhla_tokenizer *load(const char *dir, const char *name)
{
    char path[4096], cfg[4096], err[512];
    mhla_tokenizer *tok;
    snprintf(path, sizeof path, "%s/%s/tokenizer.json", dir, name);
    snprintf(cfg, sizeof cfg, "%s/%s/tokenizer_config.json", dir, name);
    if (mhla_tok_load(path, cfg, &tok, err, sizeof err))
        die("%s: %s", name, err);
    return tok;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        printf("usage: test_token_bytes DATADIR\n");
        return 2;
    }
    const char *names[] = {"gpt2", "llama3", "qwen2", "llama2"};
    mhla_tokenizer *toks[4];
    for (int i = 0; i < 4; i++) {
        toks[i] = load(argv[1], names[i]);
        check_texts(toks[i], names[i], i == 3);
        check_random(toks[i], names[i], i == 3);
    }
    check_single(toks[0], toks[3]);
    for (int i = 0; i < 4; i++)
        mhla_tok_free(toks[i]);
    printf(
        "token_bytes: %ld texts, %ld valid random id sequences equal their decode; %d failures\n",
        checked_texts, checked_random, failures);
    return failures ? 1 : 0;
}
