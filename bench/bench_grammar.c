/*
 * bench_grammar — the token mask's time per step for one row, on a real
 * vocabulary, walking a realistic generation: a JSON document is encoded
 * with the model's tokenizer and fed token by token to a matcher; before
 * each token the mask is computed (and the token checked to be in it).
 *
 * Per grammar it prints the cold walk (the first, which classifies the
 * tokens at each stack top the first time one is met: its total time and
 * slowest step) and the warm steps over --rounds later walks (fresh
 * matchers on the same classes): median, 99th percentile and maximum in µs,
 * the tokens allowed on average, and the reference mask's median on the
 * first steps for comparison.
 *
 * usage: bench_grammar [--rounds N] [--check] TOKENIZER_DIR...
 *   (a folder with tokenizer.json and tokenizer_config.json)
 * --check: exit 1 when a document token is outside its mask.
 */
#include "bench_util.h"
#include "grammar.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp's json.gbnf, from any whitespace on (the model's text may
 * start with a space token). */
static const char GBNF_JSON[] =
    "root   ::= ws object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
    "array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
    "[0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] "
    "[1-9]{0,15})? ws\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

/* A fixed record shape, as a JSON Schema with required properties compiles. */
static const char GBNF_SCHEMA[] =
    "root ::= ws \"{\" ws \"\\\"users\\\"\" ws \":\" ws \"[\" ws user (ws \",\" ws user)* ws "
    "\"]\" ws \"}\" ws\n"
    "user ::= \"{\" ws \"\\\"name\\\"\" ws \":\" ws string ws \",\" ws \"\\\"age\\\"\" ws \":\" "
    "ws integer ws \",\" ws \"\\\"email\\\"\" ws \":\" ws string ws \",\" ws \"\\\"tags\\\"\" ws "
    "\":\" ws \"[\" ws (string (ws \",\" ws string)*)? ws \"]\" ws \"}\"\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
    "[0-9a-fA-F]{4}) )* \"\\\"\"\n"
    "integer ::= \"-\"? ([0-9] | [1-9] [0-9]{0,15})\n"
    "ws ::= [ \\t\\n]*\n";

/* Three users, one of each kind of string content: plain, escapes, non-ASCII. */
static const char DOC_USERS[] =
    "{\n  \"users\": [\n"
    "    {\"name\": \"Ada Lovelace\", \"age\": 36, \"email\": \"ada@analytical.org\", "
    "\"tags\": [\"math\", \"poetry\", \"engines\"]},\n"
    "    {\"name\": \"Zoë \\\"Z\\\" Müller\", \"age\": 29, \"email\": \"zoe.mueller@example.de\", "
    "\"tags\": [\"café\", \"Zürich\", \"line\\nbreak\", \"\\u00e9t\\u00e9\"]},\n"
    "    {\"name\": \"山田 太郎\", \"age\": 41, \"email\": \"taro@example.jp\", \"tags\": []}\n"
    "  ]\n}";

/* Nested values of every JSON kind. */
static const char DOC_JSON[] =
    "{\"id\": \"order-2025-0042\", \"total\": 1234.5, \"paid\": true, \"coupon\": null, "
    "\"items\": [{\"sku\": \"A-17\", \"qty\": 2, \"price\": 19.99, \"tags\": [\"red\", "
    "\"large\"]}, {\"sku\": \"B-3\", \"qty\": 1, \"price\": 1194.52, \"note\": \"gift wrap, "
    "\\\"fragile\\\"\"}], \"customer\": {\"name\": \"José Álvarez\", \"address\": {\"street\": "
    "\"Calle Mayor 5\", \"city\": \"Madrid\", \"zip\": \"28013\"}, \"phones\": [\"+34 600 000 "
    "000\"]}, \"history\": [[1, 2, 3], [], [-4e3, 0.25]], \"comment\": \"Entregar por la mañana "
    "— gracias 🙂\"}";

typedef struct {
    const char *name, *gbnf, *doc;
} bench_case;

static const bench_case CASES[] = {
    {"json", GBNF_JSON, DOC_JSON},
    {"schema", GBNF_SCHEMA, DOC_USERS},
};

typedef struct {
    int rounds, check;
} bench_opts;

static int failures;

/* The grammar vocabulary of tok: every token's mid-text bytes. */
static mhla_grammar_vocab *make_vocab(const mhla_tokenizer *tok)
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

/* One walk over ids: the mask's time at each step into us[] (may be NULL);
 * returns the allowed tokens summed, or -1. */
static long walk(mhla_grammar_tokens *t, const int32_t *ids, size_t n, uint64_t *bits, double *us,
                 int slow)
{
    mhla_grammar_matcher *m;
    mhla_grammar_error err;
    long allowed = 0;
    if (mhla_grammar_matcher_create(t, &m, &err)) {
        fprintf(stderr, "matcher: %s\n", err.msg);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        double t0 = mhla_now();
        int c = slow ? mhla_grammar_matcher_mask_slow(m, bits, &err)
                     : mhla_grammar_matcher_mask(m, bits, &err);
        if (us)
            us[i] = (mhla_now() - t0) * 1e6;
        if (c < 0 || !(bits[ids[i] >> 6] >> (ids[i] & 63) & 1)) {
            fprintf(stderr, "step %zu: token %d %s\n", i, (int)ids[i],
                    c < 0 ? err.msg : "not in the mask");
            failures++;
        }
        allowed += c > 0 ? c : 0;
        if (mhla_grammar_matcher_accept(m, ids[i], &err)) {
            fprintf(stderr, "step %zu: accept %d: %s\n", i, (int)ids[i], err.msg);
            failures++;
            break;
        }
    }
    mhla_grammar_matcher_free(m);
    return allowed;
}

static double pct(double *v, size_t n, double q)
{
    qsort(v, n, sizeof *v, bench_cmp_double);
    size_t k = (size_t)(q * (double)(n - 1) + 0.5);
    return v[k < n ? k : n - 1];
}

/* Times the cold walk, the warm walks and a few reference steps. */
static void time_case(const char *tname, const bench_case *bc, mhla_grammar_tokens *t,
                      const int32_t *ids, size_t n, const bench_opts *o, int nv)
{
    uint64_t *bits = malloc(((size_t)nv + 63) / 64 * sizeof *bits);
    double *cold = malloc(n * sizeof *cold), *warm = malloc(n * (size_t)o->rounds * sizeof *warm);
    if (!bits || !cold || !warm) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    double t0 = mhla_now();
    walk(t, ids, n, bits, cold, 0);
    double cold_s = mhla_now() - t0;
    long allowed = 0;
    for (int r = 0; r < o->rounds; r++)
        allowed = walk(t, ids, n, bits, warm + (size_t)r * n, 0);
    size_t ns = n < 8 ? n : 8;
    walk(t, ids, ns, bits, cold + n - ns, 1); /* the reference on the first steps */
    double slow_med = pct(cold + n - ns, ns, 0.5);
    double cold_max = pct(cold, n - ns, 1.0);
    size_t nw = n * (size_t)o->rounds;
    printf("%-8s %-7s %5zu %9.1f %9.1f %8.2f %8.2f %8.2f %9.0f %9.0f\n", tname, bc->name, n,
           cold_s * 1e3, cold_max / 1e3, pct(warm, nw, 0.5), pct(warm, nw, 0.99),
           pct(warm, nw, 1.0), (double)allowed / (double)n, slow_med);
    free(bits);
    free(cold);
    free(warm);
}

static void run_case(const char *tname, const mhla_tokenizer *tok, const mhla_grammar_vocab *v,
                     const bench_case *bc, const bench_opts *o)
{
    mhla_grammar *g;
    mhla_grammar_tokens *t;
    mhla_grammar_error err;
    int32_t *ids;
    size_t n;
    char e[256];
    if (mhla_grammar_from_gbnf(bc->gbnf, strlen(bc->gbnf), NULL, &g, &err)) {
        fprintf(stderr, "%s: %s (at %ld)\n", bc->name, err.msg, err.pos);
        exit(1);
    }
    if (mhla_grammar_tokens_create(g, v, &t, &err) ||
        mhla_tok_encode(tok, bc->doc, strlen(bc->doc), 0, &ids, &n, e, sizeof e)) {
        fprintf(stderr, "%s: setup failed\n", bc->name);
        exit(1);
    }
    mhla_grammar_free(g);
    time_case(tname, bc, t, ids, n, o, mhla_grammar_vocab_size(v));
    free(ids);
    mhla_grammar_tokens_free(t);
}

static int parse(int argc, char **argv, bench_opts *o, int *first)
{
    *o = (bench_opts){20, 0};
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--check") == 0)
            o->check = 1;
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0)
            o->rounds = atoi(argv[++i]);
        else
            return -1;
    }
    *first = i;
    return i < argc ? 0 : -1;
}

int main(int argc, char **argv)
{
    bench_opts o;
    int first;
    if (parse(argc, argv, &o, &first)) {
        fprintf(stderr, "usage: bench_grammar [--rounds N] [--check] TOKENIZER_DIR...\n");
        return 2;
    }
    printf("%-8s %-7s %5s %9s %9s %8s %8s %8s %9s %9s\n", "vocab", "grammar", "steps", "cold_ms",
           "cold_max", "med_us", "p99_us", "max_us", "allowed", "slow_us");
    for (int a = first; a < argc; a++) {
        char path[4096], cfg[4096], e[512];
        mhla_tokenizer *tok;
        snprintf(path, sizeof path, "%s/tokenizer.json", argv[a]);
        snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", argv[a]);
        if (mhla_tok_load(path, cfg, &tok, e, sizeof e)) {
            fprintf(stderr, "%s: %s\n", argv[a], e);
            return 1;
        }
        mhla_grammar_vocab *v = make_vocab(tok);
        const char *tname = strrchr(argv[a], '/') ? strrchr(argv[a], '/') + 1 : argv[a];
        for (size_t c = 0; v && c < sizeof CASES / sizeof CASES[0]; c++)
            run_case(tname, tok, v, &CASES[c], &o);
        mhla_grammar_vocab_free(v);
        mhla_tok_free(tok);
    }
    return o.check && failures ? 1 : 0;
}
