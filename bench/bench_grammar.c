/*
 * bench_grammar — the token mask's time per step for one row, on a real
 * vocabulary, walking a realistic generation: a JSON document is encoded
 * with the model's tokenizer and fed token by token to a matcher; before
 * each token the mask is computed (and the token checked to be in it).
 *
 * The grammars are two built-in GBNF grammars with a document each, or with
 * --schema the JSON Schema files given: each is compiled as the server
 * compiles response_format's schema, and --samples strings of its grammar
 * (mhla_grammar_sample, seeds --seed, --seed + 1, ...) are its documents.
 *
 * Per grammar it prints the cold walk (the first, which classifies the
 * tokens at each stack top the first time one is met: its total time, wall
 * and this thread's CPU, and slowest step) and the warm steps over --rounds later walks (fresh
 * matchers on the same classes): median, 99th percentile and maximum in µs,
 * the tokens allowed on average, and the reference mask's median on the
 * first steps for comparison. With --schema, a row "all" per vocabulary and
 * one for the whole run pool the warm steps of every schema.
 *
 * usage: bench_grammar [--rounds N] [--check] [--schema FILE]... [--samples K]
 *                      [--seed S] [--max-bytes N] TOKENIZER_DIR...
 *   (a folder with tokenizer.json and tokenizer_config.json)
 * --check: exit 1 when a document token is outside its mask.
 */
#include "bench_grammar_util.h"
#include "bench_util.h"
#include "grammar.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

#define MAX_SCHEMAS 256

typedef struct {
    int rounds, check, samples, n_schemas;
    unsigned long long seed;
    size_t max_bytes;
    const char *schemas[MAX_SCHEMAS];
} bench_opts;

/* One document's tokens. */
typedef struct {
    int32_t *ids;
    size_t n;
} bench_doc;

/* Warm step times gathered over several grammars (a vocabulary's, the run's). */
typedef struct {
    double *v;
    size_t n, cap;
    double cold_s, cold_cpu_s,
        cold_max; /* the cold walks' wall and CPU totals, slowest step (µs) */
} bench_pool;

static int failures;

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

/* Every document walked once, step times from us[0] on; the allowed tokens summed. */
static long walk_docs(mhla_grammar_tokens *t, const bench_doc *d, int nd, uint64_t *bits,
                      double *us)
{
    long allowed = 0;
    for (int i = 0; i < nd; us += d[i].n, i++)
        allowed += walk(t, d[i].ids, d[i].n, bits, us, 0);
    return allowed;
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The q-quantile of v (sorted in place). */
static double pct(double *v, size_t n, double q)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, bench_cmp_double);
    size_t k = (size_t)(q * (double)(n - 1) + 0.5);
    return v[k < n ? k : n - 1];
}

static void pool_add(bench_pool *p, const double *v, size_t n, const double cold[3])
{
    if (p->n + n > p->cap) {
        size_t cap = (p->n + n) * 2;
        double *nv = realloc(p->v, cap * sizeof *nv);
        if (!nv) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        p->v = nv;
        p->cap = cap;
    }
    memcpy(p->v + p->n, v, n * sizeof *v);
    p->n += n;
    p->cold_s += cold[0];
    p->cold_cpu_s += cold[1];
    p->cold_max = cold[2] > p->cold_max ? cold[2] : p->cold_max;
}

static void print_head(void)
{
    printf("%-8s %-40s %6s %9s %9s %9s %8s %8s %9s %8s %9s\n", "vocab", "grammar", "steps",
           "cold_ms", "cold_cpu", "cold_max", "med_us", "p99_us", "max_us", "allowed", "slow_us");
}

/* The pooled row: every warm step of the grammars gathered in p. */
static void print_pool(const char *tname, const char *name, bench_pool *p, int rounds)
{
    printf("%-8s %-40s %6zu %9.1f %9.1f %9.1f %8.2f %8.2f %9.2f %8s %9s\n", tname, name,
           p->n / (size_t)rounds, p->cold_s * 1e3, p->cold_cpu_s * 1e3, p->cold_max / 1e3,
           pct(p->v, p->n, 0.5), pct(p->v, p->n, 0.99), pct(p->v, p->n, 1.0), "", "");
}

/* Times the cold walk, the warm walks and a few reference steps; the warm
 * steps go to the pools (NULL: none). */
static void time_docs(const char *tname, const char *name, mhla_grammar_tokens *t,
                      const bench_doc *d, int nd, const bench_opts *o, int nv, bench_pool **pools)
{
    size_t n = 0, ns = d[0].n < 8 ? d[0].n : 8, nw;
    for (int i = 0; i < nd; i++)
        n += d[i].n;
    nw = n * (size_t)o->rounds;
    uint64_t *bits = malloc(((size_t)nv + 63) / 64 * sizeof *bits);
    double *cold = malloc(n * sizeof *cold), *warm = malloc(nw * sizeof *warm), slow[8];
    if (!bits || !cold || !warm) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    /* wall and this thread's CPU time: on a shared machine the wall time of
     * a long walk holds the time others ran */
    double t0 = mhla_now(), c0 = thread_cpu_s();
    walk_docs(t, d, nd, bits, cold);
    double cs[3] = {mhla_now() - t0, thread_cpu_s() - c0, pct(cold, n, 1.0)};
    long allowed = 0;
    for (int r = 0; r < o->rounds; r++)
        allowed = walk_docs(t, d, nd, bits, warm + (size_t)r * n);
    walk(t, d[0].ids, ns, bits, slow, 1); /* the reference on the first steps */
    for (int i = 0; pools && pools[i]; i++)
        pool_add(pools[i], warm, nw, cs);
    printf("%-8s %-40.40s %6zu %9.1f %9.1f %9.1f %8.2f %8.2f %9.2f %8.0f %9.0f\n", tname, name, n,
           cs[0] * 1e3, cs[1] * 1e3, cs[2] / 1e3, pct(warm, nw, 0.5), pct(warm, nw, 0.99),
           pct(warm, nw, 1.0), (double)allowed / (double)n, pct(slow, ns, 0.5));
    free(bits);
    free(cold);
    free(warm);
}

/* The tokens spell some prefix and then text exactly (mid-text bytes, so
 * that the grammar sees the bytes it produced): the prefix's tokens are
 * dropped. -1 when no token boundary starts text. */
static int spell_exact(const mhla_tokenizer *tok, const char *text, size_t len, bench_doc *d)
{
    size_t *at = malloc((d->n + 1) * sizeof *at), cap = 4 * len + 64, first = d->n + 1;
    char *spelled = malloc(cap);
    int rc = at && spelled ? 0 : -1;
    if (at)
        at[0] = 0;
    for (size_t i = 0; rc == 0 && i < d->n; i++) {
        size_t k;
        rc = mhla_tok_token_bytes(tok, d->ids[i], spelled + at[i], cap - at[i], &k);
        at[i + 1] = at[i] + k;
    }
    for (size_t i = 0; rc == 0 && i <= d->n; i++)
        if (at[d->n] - at[i] == len && memcmp(spelled + at[i], text, len) == 0)
            first = i;
    if (rc || first >= d->n)
        rc = -1;
    else
        memmove(d->ids, d->ids + first, (d->n - first) * sizeof *d->ids);
    d->n -= rc ? 0 : first;
    free(at);
    free(spelled);
    return rc;
}

/* A SentencePiece tokenizer puts a space before a text's first word (" {"
 * where the text has "{"), which a model continuing a prompt does not: then
 * the text is encoded after a newline, a token of its own, and the tokens
 * before the text dropped. */
static int encode_exact(const mhla_tokenizer *tok, const char *text, size_t len, bench_doc *d)
{
    char e[256], *nl = malloc(len + 2);
    int rc = -1;
    for (int pass = 0; nl && rc && pass < 2; pass++) {
        nl[0] = '\n';
        memcpy(nl + 1, text, len);
        if (mhla_tok_encode(tok, nl + 1 - pass, len + (size_t)pass, 0, &d->ids, &d->n, e, sizeof e))
            continue;
        if ((rc = spell_exact(tok, text, len, d)) != 0)
            free(d->ids);
    }
    if (rc)
        fprintf(stderr, "encode: the tokens do not spell the sample's %zu bytes\n", len);
    free(nl);
    return rc;
}

static void run_case(const char *tname, const mhla_tokenizer *tok, const mhla_grammar_vocab *v,
                     const bench_case *bc, const bench_opts *o)
{
    mhla_grammar *g;
    mhla_grammar_tokens *t;
    mhla_grammar_error err;
    bench_doc d;
    char e[256];
    if (mhla_grammar_from_gbnf(bc->gbnf, strlen(bc->gbnf), NULL, &g, &err)) {
        fprintf(stderr, "%s: %s (at %ld)\n", bc->name, err.msg, err.pos);
        exit(1);
    }
    if (mhla_grammar_tokens_create(g, v, &t, &err) ||
        mhla_tok_encode(tok, bc->doc, strlen(bc->doc), 0, &d.ids, &d.n, e, sizeof e)) {
        fprintf(stderr, "%s: setup failed\n", bc->name);
        exit(1);
    }
    mhla_grammar_free(g);
    time_docs(tname, bc->name, t, &d, 1, o, mhla_grammar_vocab_size(v), NULL);
    free(d.ids);
    mhla_grammar_tokens_free(t);
}

/* The grammar of the JSON Schema in path, as response_format's json_schema
 * compiles; NULL (the reason on stderr) when it is refused. */
static mhla_grammar *load_schema(const char *path)
{
    size_t len;
    char *text = bench_slurp(path, &len);
    mhla_grammar *g = NULL;
    mhla_grammar_error err;
    if (!text) {
        fprintf(stderr, "%s: cannot read\n", path);
        return NULL;
    }
    if (mhla_grammar_from_json_schema(text, len, &g, &err))
        fprintf(stderr, "%s: refused: %s %s\n", path, err.msg, err.path);
    free(text);
    return g;
}

/* o->samples strings of g, each encoded by tok, into d[]; the count made. */
static int sample_docs(const mhla_grammar *g, const mhla_tokenizer *tok, const bench_opts *o,
                       bench_doc *d)
{
    int nd = 0;
    for (int s = 0; s < o->samples; s++) {
        char *text;
        size_t len;
        mhla_grammar_error err;
        if (mhla_grammar_sample(g, o->seed + (unsigned long long)s, o->max_bytes, &text, &len,
                                &err)) {
            fprintf(stderr, "sample %d: %s\n", s, err.msg);
            continue;
        }
        if (encode_exact(tok, text, len, &d[nd]) == 0)
            nd++;
        else
            failures++;
        free(text);
    }
    return nd;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static void run_schema(const char *tname, const mhla_tokenizer *tok, const mhla_grammar_vocab *v,
                       const char *path, const bench_opts *o, bench_pool **pools)
{
    mhla_grammar *g = load_schema(path);
    mhla_grammar_tokens *t = NULL;
    mhla_grammar_error err;
    bench_doc *d = calloc((size_t)o->samples, sizeof *d);
    int nd = 0;
    if (!g || !d) {
        failures++;
    } else if (mhla_grammar_tokens_create(g, v, &t, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        failures++;
    } else if ((nd = sample_docs(g, tok, o, d)) > 0) {
        time_docs(tname, base_name(path), t, d, nd, o, mhla_grammar_vocab_size(v), pools);
    }
    for (int i = 0; i < nd; i++)
        free(d[i].ids);
    free(d);
    mhla_grammar_tokens_free(t);
    mhla_grammar_free(g);
}

/* The grammars of one vocabulary: the built-in cases or the schemas; -1
 * when the vocabulary cannot be loaded. */
static int run_vocab(const char *dir, const bench_opts *o, bench_pool *all)
{
    mhla_tokenizer *tok = bench_load_tokenizer(dir);
    mhla_grammar_vocab *v = tok ? bench_grammar_vocab(tok) : NULL;
    const char *tname = base_name(dir);
    bench_pool mine = {0};
    bench_pool *pools[] = {&mine, all, NULL};
    int rc = v ? 0 : -1;
    if (!v) {
        fprintf(stderr, "%s: no vocabulary\n", dir);
    } else if (o->n_schemas == 0) {
        for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++)
            run_case(tname, tok, v, &CASES[c], o);
    } else {
        for (int s = 0; s < o->n_schemas; s++)
            run_schema(tname, tok, v, o->schemas[s], o, pools);
        print_pool(tname, "all", &mine, o->rounds);
    }
    free(mine.v);
    mhla_grammar_vocab_free(v);
    mhla_tok_free(tok);
    return rc;
}

/* The value of a flag that takes one (argv[*i + 1]), or NULL when missing. */
static const char *flag_value(int argc, char **argv, int *i)
{
    return *i + 1 < argc ? argv[++*i] : NULL;
}

/* One option at argv[*i]: 0, or -1 when it is unknown or its value is bad. */
static int parse_one(int argc, char **argv, int *i, bench_opts *o)
{
    const char *f = argv[*i], *val;
    if (strcmp(f, "--check") == 0) {
        o->check = 1;
        return 0;
    }
    if (!(val = flag_value(argc, argv, i)))
        return -1;
    if (strcmp(f, "--schema") == 0 && o->n_schemas < MAX_SCHEMAS)
        o->schemas[o->n_schemas++] = val;
    else if (strcmp(f, "--rounds") == 0 && atoi(val) > 0)
        o->rounds = atoi(val);
    else if (strcmp(f, "--samples") == 0 && atoi(val) > 0)
        o->samples = atoi(val);
    else if (strcmp(f, "--seed") == 0)
        o->seed = strtoull(val, NULL, 10);
    else if (strcmp(f, "--max-bytes") == 0 && atol(val) > 0)
        o->max_bytes = (size_t)atol(val);
    else
        return -1;
    return 0;
}

static int parse(int argc, char **argv, bench_opts *o, int *first)
{
    memset(o, 0, sizeof *o);
    o->rounds = 20;
    o->samples = 4;
    o->seed = 1;
    o->max_bytes = 2048;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++)
        if (parse_one(argc, argv, &i, o))
            return -1;
    *first = i;
    return i < argc ? 0 : -1;
}

int main(int argc, char **argv)
{
    static bench_opts o; /* the schema list is large for the stack */
    bench_pool all = {0};
    int first, bad = 0;
    if (parse(argc, argv, &o, &first)) {
        fprintf(stderr, "usage: bench_grammar [--rounds N] [--check] [--schema FILE]... "
                        "[--samples K] [--seed S] [--max-bytes N] TOKENIZER_DIR...\n");
        return 2;
    }
    print_head();
    for (int a = first; a < argc; a++)
        bad |= run_vocab(argv[a], &o, &all) != 0;
    if (o.n_schemas && all.n)
        print_pool("all", "all", &all, o.rounds);
    free(all.v);
    return bad || (o.check && failures) ? 1 : 0;
}
