/* Unit tests: thread-safe encoding, refusal of malformed / unsupported tokenizer.json with
 * a message naming the cause, invalid UTF-8 and large inputs, and the streaming decoder on
 * random id sequences and on ids that decode to invalid UTF-8.
 * usage: test_tokenizer_unit DATADIR */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "tokenizer.h"
#include "utf8_check.h"

static int failures;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

static uint64_t rng = 88172645463325252ULL;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* ---- corpus ---- */
typedef struct {
    char *s;
    size_t n;
} str;
static str *corpus;
static size_t n_corpus;

static void load_corpus(const char *path)
{
    size_t len;
    char *b, *p, msg[256];
    if (mhla_read_file(path, SIZE_MAX, &b, &len, msg, sizeof msg)) {
        printf("%s\n", msg);
        exit(1);
    }
    p = b;
    corpus = calloc(4096, sizeof *corpus);
    while (p < b + len && n_corpus < 4096) {
        char *end;
        size_t n = strtoul(p, &end, 10);
        corpus[n_corpus].s = end + 1;
        corpus[n_corpus].n = n;
        n_corpus++;
        p = end + 1 + n + 1;
    }
}

/* ---- thread safety ---- */
typedef struct {
    const mhla_tokenizer *tok;
    int32_t **want;
    size_t *want_n;
    int bad;
    int seed;
} thread_arg;

static void *encode_all(void *varg)
{
    thread_arg *a = varg;
    char err[256];
    for (size_t r = 0; r < n_corpus; r++) {
        size_t i = (r * 7 + (size_t)a->seed * 131) % n_corpus; /* different orders per thread */
        int32_t *ids;
        size_t n;
        if (mhla_tok_encode(a->tok, corpus[i].s, corpus[i].n, 1, &ids, &n, err, sizeof err)) {
            a->bad++;
            continue;
        }
        if (n != a->want_n[i] || memcmp(ids, a->want[i], n * sizeof *ids))
            a->bad++;
        free(ids);
    }
    return NULL;
}

static void test_threads(const mhla_tokenizer *tok, const char *name)
{
    int32_t **want = calloc(n_corpus, sizeof *want);
    size_t *want_n = calloc(n_corpus, sizeof *want_n);
    char err[256];
    /* reference results from a fresh tokenizer state (empty cache), one thread */
    for (size_t i = 0; i < n_corpus; i++)
        CHECK(mhla_tok_encode(tok, corpus[i].s, corpus[i].n, 1, &want[i], &want_n[i], err,
                              sizeof err) == 0,
              "%s", err);
    pthread_t th[4];
    thread_arg args[4];
    for (int t = 0; t < 4; t++) {
        args[t] = (thread_arg){tok, want, want_n, 0, t};
        pthread_create(&th[t], NULL, encode_all, &args[t]);
    }
    int bad = 0;
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        bad += args[t].bad;
    }
    CHECK(bad == 0, "%s: %d encodings differ when run from 4 threads at once", name, bad);
    for (size_t i = 0; i < n_corpus; i++)
        free(want[i]);
    free(want);
    free(want_n);
    printf("threads %s: 4 x %zu concurrent encodings %s\n", name, n_corpus,
           bad ? "DIFFER" : "match");
}

/* ---- refusals ---- */
static void expect_refused(const char *json, const char *needle)
{
    mhla_tokenizer *tok = NULL;
    char err[512] = "";
    int rc = mhla_tok_load_mem(json, strlen(json), NULL, 0, &tok, err, sizeof err);
    CHECK(rc == -1 && tok == NULL, "accepted bad tokenizer.json: %.80s", json);
    CHECK(strstr(err, needle) != NULL, "error \"%s\" does not mention \"%s\"", err, needle);
    mhla_tok_free(tok);
}

#define MODEL                                                                                      \
    "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}"

static void test_refusals(void)
{
    expect_refused("{", "not valid JSON");
    expect_refused("[]", "JSON object");
    expect_refused("{}", "model");
    expect_refused("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}", "WordPiece");
    expect_refused("{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", "Unigram");
    expect_refused("{" MODEL ",\"normalizer\":{\"type\":\"BertNormalizer\"}}", "BertNormalizer");
    expect_refused("{" MODEL ",\"normalizer\":{\"type\":\"Precompiled\"}}", "Precompiled");
    expect_refused("{" MODEL ",\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"}}",
                   "BertPreTokenizer");
    expect_refused(
        "{" MODEL
        ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"CharDelimiterSplit\"}]}}",
        "CharDelimiterSplit");
    expect_refused("{" MODEL ",\"decoder\":{\"type\":\"CTC\"}}", "CTC");
    expect_refused("{" MODEL ",\"decoder\":{\"type\":\"WordPiece\"}}", "WordPiece");
    expect_refused("{" MODEL ",\"post_processor\":{\"type\":\"BertProcessing\"}}",
                   "BertProcessing");
    expect_refused(
        "{" MODEL
        ",\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"}}",
        "regex");
    expect_refused("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a zz\"]}}",
                   "not in the vocab");
    expect_refused(
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}",
        "merged token");
    expect_refused("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-3},\"merges\":[]}}", "vocab");
    expect_refused("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"nospace\"]}}",
                   "merges[0]");
    expect_refused(
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[],\"unk_token\":\"<unk>\"}}",
        "unk_token");
    expect_refused("{" MODEL ",\"added_tokens\":[{\"content\":\"x\"}]}", "added_tokens[0]");
    /* raw bytes that are not UTF-8 (here in an added token's content, which decoding
     * would emit verbatim): the whole file is refused, as the reference refuses it */
    expect_refused("{" MODEL ",\"added_tokens\":[{\"id\":3,\"content\":\"<|e\xc1\xc1t|>\"}]}",
                   "not valid UTF-8 (byte");
    expect_refused(
        "{" MODEL
        ",\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}}]}}",
        "<s>");
    mhla_tokenizer *tok = NULL;
    char err[512];
    const char *ok = "{" MODEL "}";
    CHECK(mhla_tok_load_mem(ok, strlen(ok), "{\"add_bos_token\":true}",
                            strlen("{\"add_bos_token\":true}"), &tok, err, sizeof err) == -1 &&
              strstr(err, "bos"),
          "add_bos_token without a bos token must be refused: %s", err);
    CHECK(mhla_tok_load("/nonexistent/tokenizer.json", NULL, &tok, err, sizeof err) == -1 &&
              strstr(err, "/nonexistent"),
          "missing file: %s", err);
    printf("refusals: checked\n");
}

/* ---- invalid UTF-8, large input, decode errors ---- */
static void test_bytes(const mhla_tokenizer *gpt2)
{
    char err[256], buf[64];
    int bad = 0;
    for (int r = 0; r < 3000; r++) {
        size_t n = next_rand() % sizeof buf;
        for (size_t i = 0; i < n; i++)
            buf[i] = (char)(next_rand() % 4 ? next_rand() : 0x80 | next_rand() % 64);
        int32_t *ids;
        size_t ni, tl;
        char *text;
        if (mhla_tok_encode(gpt2, buf, n, 0, &ids, &ni, err, sizeof err)) {
            bad++;
            continue;
        }
        if (mhla_tok_decode(gpt2, ids, ni, 0, &text, &tl, err, sizeof err)) {
            bad++;
            free(ids);
            continue;
        }
        /* byte-level BPE is lossless on the sanitized text: valid input must come back as is */
        if (!valid_utf8(text, tl) || (valid_utf8(buf, n) && (tl != n || memcmp(text, buf, n))))
            bad++;
        free(ids);
        free(text);
    }
    CHECK(bad == 0, "%d random byte strings failed to round-trip", bad);
    /* 1 MB without a single space, and 1 MB of spaces */
    size_t big = 1 << 20;
    char *s = malloc(big);
    for (int variant = 0; variant < 2; variant++) {
        for (size_t i = 0; i < big; i++)
            s[i] = variant ? ' ' : (char)('a' + (next_rand() % 26));
        int32_t *ids;
        size_t ni, tl;
        char *text;
        int rc = mhla_tok_encode(gpt2, s, big, 0, &ids, &ni, err, sizeof err);
        CHECK(rc == 0, "1 MB input: %s", err);
        if (rc)
            continue;
        CHECK(mhla_tok_decode(gpt2, ids, ni, 0, &text, &tl, err, sizeof err) == 0 && tl == big &&
                  !memcmp(text, s, big),
              "1 MB input does not round-trip");
        free(ids);
        free(text);
    }
    free(s);
    int32_t bad_ids[] = {1, -5};
    char *text;
    size_t tl;
    CHECK(mhla_tok_decode(gpt2, bad_ids, 2, 0, &text, &tl, err, sizeof err) == -1 &&
              strstr(err, "-5"),
          "bad id: %s", err);
    int32_t big_id[] = {1 << 30};
    CHECK(mhla_tok_decode(gpt2, big_id, 1, 0, &text, &tl, err, sizeof err) == -1,
          "huge id accepted");
    printf("bytes: random / invalid UTF-8 / 1 MB inputs checked\n");
}

/* ---- streaming on random ids ---- */
static void test_stream_random(const mhla_tokenizer *tok, const char *name)
{
    size_t V = mhla_tok_vocab_size(tok);
    char err[256];
    int bad = 0;
    for (int r = 0; r < 300; r++) {
        int32_t ids[40];
        size_t n = 1 + next_rand() % 40;
        for (size_t i = 0; i < n; i++) {
            /* bias towards low ids (byte tokens) to create split characters */
            ids[i] = (int32_t)(next_rand() % 3 ? next_rand() % 300 : next_rand() % V);
            if (!mhla_tok_id_to_token(tok, ids[i], NULL))
                ids[i] = 5;
        }
        char *full;
        size_t fl;
        if (mhla_tok_decode(tok, ids, n, 0, &full, &fl, err, sizeof err)) {
            bad++;
            continue;
        }
        mhla_tok_stream *st;
        mhla_tok_stream_new(tok, 0, &st, err, sizeof err);
        char *acc = malloc(fl + 1);
        size_t al = 0;
        int ok = 1;
        for (size_t i = 0; i <= n && ok; i++) {
            const char *p;
            size_t pl;
            int rc = i < n ? mhla_tok_stream_push(st, ids[i], &p, &pl, err, sizeof err)
                           : mhla_tok_stream_finish(st, &p, &pl, err, sizeof err);
            if (rc || !valid_utf8(p, pl) || al + pl > fl) {
                ok = 0;
                break;
            }
            memcpy(acc + al, p, pl);
            al += pl;
        }
        if (!ok || al != fl || memcmp(acc, full, fl))
            bad++;
        free(acc);
        free(full);
        mhla_tok_stream_free(st);
    }
    CHECK(bad == 0, "%s: %d random id sequences broke the streaming invariants", name, bad);
    printf("stream %s: 300 random id sequences checked\n", name);
}

/* ---- streaming ids that decode to invalid UTF-8 ---- */
/* The id of the token for one raw byte: a byte-fallback "<0xAB>" token, or GPT-2's
 * byte-level character for the byte. -1 when the vocabulary has neither. */
static int32_t byte_id(const mhla_tokenizer *tok, unsigned b)
{
    char s[8];
    snprintf(s, sizeof s, "<0x%02X>", b);
    int32_t id = mhla_tok_token_to_id(tok, s, strlen(s));
    if (id >= 0)
        return id;
    unsigned cp = b, k = 0;
    if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
        for (unsigned c = 0; c < b; c++)
            if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE))
                k++;
        cp = 256 + k;
    }
    if (cp < 0x80)
        return mhla_tok_token_to_id(tok, s, (size_t)snprintf(s, sizeof s, "%c", (char)cp));
    s[0] = (char)(0xC0 | cp >> 6);
    s[1] = (char)(0x80 | (cp & 0x3F));
    return mhla_tok_token_to_id(tok, s, 2);
}

/* Streams ids[0..n) and checks that every piece is valid UTF-8 and that the pieces
 * together equal the one-shot decode. Gives the stream's work (ids decoded) and the
 * bytes it handed out before finish. */
static int stream_all(const mhla_tokenizer *tok, int skip_special, const int32_t *ids, size_t n,
                      size_t *work, size_t *early)
{
    char err[256], *full;
    size_t fl;
    if (mhla_tok_decode(tok, ids, n, skip_special, &full, &fl, err, sizeof err))
        return -1;
    mhla_tok_stream *st;
    if (mhla_tok_stream_new(tok, skip_special, &st, err, sizeof err)) {
        free(full);
        return -1;
    }
    char *acc = malloc(fl + 1);
    size_t al = 0;
    int ok = acc != NULL;
    *early = 0;
    for (size_t i = 0; i <= n && ok; i++) {
        const char *p;
        size_t pl;
        int rc = i < n ? mhla_tok_stream_push(st, ids[i], &p, &pl, err, sizeof err)
                       : mhla_tok_stream_finish(st, &p, &pl, err, sizeof err);
        if (rc || !valid_utf8(p, pl) || al + pl > fl) {
            ok = 0;
            break;
        }
        memcpy(acc + al, p, pl);
        al += pl;
        if (i < n)
            *early += pl;
    }
    ok = ok && al == fl && memcmp(acc, full, fl) == 0;
    *work = mhla_tok_stream_decoded_ids(st);
    free(acc);
    free(full);
    mhla_tok_stream_free(st);
    return ok ? 0 : -1;
}

/* Streams n ids made by repeating pattern[0..np) and checks the pieces, that text arrives
 * before finish (at least `early_per_rep` bytes per repetition), and that the work is
 * linear: at most a fixed number of decoded ids per id pushed, the same for 8 times as
 * many ids. Text held back until finish or a window that never moves fails both. */
static void check_stream_pattern(const mhla_tokenizer *tok, const char *name, const char *what,
                                 int skip_special, const int32_t *pattern, size_t np,
                                 size_t early_per_rep)
{
    enum { BASE = 256, PER_ID = 16 };
    size_t work[2] = {0}, early[2] = {0};
    for (int k = 0; k < 2; k++) {
        size_t n = (k ? 8 : 1) * BASE * np;
        int32_t *ids = malloc(n * sizeof *ids);
        if (!ids) {
            CHECK(0, "out of memory");
            return;
        }
        for (size_t i = 0; i < n; i++)
            ids[i] = pattern[i % np];
        int rc = stream_all(tok, skip_special, ids, n, &work[k], &early[k]);
        CHECK(rc == 0, "%s %s (%zu ids): streamed pieces differ from the decode", name, what, n);
        CHECK(early[k] >= early_per_rep * (n / np - 1),
              "%s %s (%zu ids): only %zu bytes came out before finish", name, what, n, early[k]);
        CHECK(work[k] <= PER_ID * n, "%s %s (%zu ids): %zu ids decoded, over %d per id", name, what,
              n, work[k], PER_ID);
        free(ids);
    }
    printf("stream %s %s: %zu ids -> %zu decoded, %zu ids -> %zu decoded\n", name, what, BASE * np,
           work[0], 8 * BASE * np, work[1]);
}

static void test_stream_invalid(const mhla_tokenizer *tok, const char *name)
{
    int32_t b80 = byte_id(tok, 0x80), e2 = byte_id(tok, 0xE2), b82 = byte_id(tok, 0x82),
            bac = byte_id(tok, 0xAC), b41 = byte_id(tok, 0x41);
    CHECK(b80 >= 0 && e2 >= 0 && b82 >= 0 && bac >= 0 && b41 >= 0, "%s: byte tokens not found",
          name);
    if (b80 < 0 || e2 < 0 || b82 < 0 || bac < 0 || b41 < 0)
        return;
    char err[256], *text;
    size_t tl;
    int32_t euro[] = {e2, b82, bac};
    CHECK(mhla_tok_decode(tok, euro, 3, 0, &text, &tl, err, sizeof err) == 0 && tl == 3 &&
              memcmp(text, "\xE2\x82\xAC", 3) == 0,
          "%s: E2 82 AC does not decode to the euro sign", name);
    if (tl == 3)
        free(text);
    /* every id a lone continuation byte: the text ends in U+FFFD after every push */
    int32_t lone[] = {b80};
    check_stream_pattern(tok, name, "invalid bytes", 0, lone, 1, 3);
    /* a character split over three ids between an invalid byte and an unfinished sequence
     * that the next byte ("A") ends: U+FFFD, the euro sign whole, U+FFFD, "A" */
    int32_t mixed[] = {b80, e2, b82, bac, e2, b41};
    check_stream_pattern(tok, name, "split characters", 0, mixed, 6, 3 + 3 + 3 + 1);
    int32_t eos = mhla_tok_eos_id(tok);
    if (eos >= 0 && mhla_tok_is_special(tok, eos)) {
        /* skipped special ids add no text and must not cost a re-decode each */
        int32_t quiet[16] = {e2};
        for (int i = 1; i < 14; i++)
            quiet[i] = eos;
        quiet[14] = b82;
        quiet[15] = bac;
        check_stream_pattern(tok, name, "skipped special ids", 1, quiet, 16, 3);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        printf("usage: test_tokenizer_unit DATADIR\n");
        return 2;
    }
    char path[4096], cfg[4096], err[512];
    snprintf(path, sizeof path, "%s/corpus.bin", argv[1]);
    load_corpus(path);
    const char *names[] = {"gpt2", "llama2"};
    mhla_tokenizer *toks[2];
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s/tokenizer.json", argv[1], names[i]);
        snprintf(cfg, sizeof cfg, "%s/%s/tokenizer_config.json", argv[1], names[i]);
        if (mhla_tok_load(path, cfg, &toks[i], err, sizeof err)) {
            printf("%s\n", err);
            return 1;
        }
        test_threads(toks[i], names[i]);
        test_stream_random(toks[i], names[i]);
        test_stream_invalid(toks[i], names[i]);
    }
    test_bytes(toks[0]);
    test_refusals();
    for (int i = 0; i < 2; i++)
        mhla_tok_free(toks[i]);
    printf(failures ? "%d failures\n" : "all unit checks passed\n", failures);
    return failures ? 1 : 0;
}
