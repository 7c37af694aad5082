/*
 * bench_schema_compile — what a JSON Schema costs the server before its first
 * token: mhla_grammar_from_json_schema (the schema to GBNF, GBNF to the
 * automaton) per schema file, the best of --repeat runs; with --vocab also
 * binding it to that vocabulary (mhla_grammar_tokens_create) and the first
 * mask of a fresh row (which classifies the tokens at the start state).
 *
 * Prints the count of files, compiled and refused (by error code), and the
 * median, 90th percentile and maximum of each time over the compiled ones
 * (the slowest file named); --list adds one line per file.
 *
 * usage: bench_schema_compile [--repeat N] [--vocab TOKENIZER_DIR] [--list] FILE...
 */
#include "bench_grammar_util.h"
#include "bench_util.h"
#include "grammar.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int repeat, list;
    const char *vocab_dir;
} compile_opts;

/* The times of one file (ms); compile_ms < 0 when it was refused. */
typedef struct {
    const char *path;
    double compile_ms, bind_ms, first_mask_ms;
    int rc;
} compile_row;

/* The best of o->repeat compiles of text (ms), the last grammar in *g
 * (NULL and the code in *rc when refused). */
static double time_compile(const char *text, size_t len, const compile_opts *o, mhla_grammar **g,
                           int *rc)
{
    double best = -1;
    mhla_grammar_error err;
    *g = NULL;
    for (int r = 0; r < o->repeat; r++) {
        mhla_grammar_free(*g);
        *g = NULL;
        double t0 = mhla_now();
        *rc = mhla_grammar_from_json_schema(text, len, g, &err);
        double ms = (mhla_now() - t0) * 1e3;
        if (*rc)
            return -1;
        best = best < 0 || ms < best ? ms : best;
    }
    return best;
}

/* Binding g to v and a fresh row's first mask, timed into row. */
static void time_bind(mhla_grammar *g, const mhla_grammar_vocab *v, compile_row *row)
{
    mhla_grammar_tokens *t = NULL;
    mhla_grammar_matcher *m = NULL;
    mhla_grammar_error err;
    uint64_t *bits = malloc(((size_t)mhla_grammar_vocab_size(v) + 63) / 64 * sizeof *bits);
    double t0 = mhla_now();
    int rc = bits ? mhla_grammar_tokens_create(g, v, &t, &err) : MHLA_GRAMMAR_NOMEM;
    double t1 = mhla_now();
    if (rc == 0)
        rc = mhla_grammar_matcher_create(t, &m, &err);
    if (rc == 0 && mhla_grammar_matcher_mask(m, bits, &err) < 0)
        rc = -1;
    double t2 = mhla_now();
    if (rc)
        fprintf(stderr, "%s: binding to the vocabulary failed: %s\n", row->path, err.msg);
    row->bind_ms = (t1 - t0) * 1e3;
    row->first_mask_ms = (t2 - t1) * 1e3;
    mhla_grammar_matcher_free(m);
    mhla_grammar_tokens_free(t);
    free(bits);
}

static void time_file(const char *path, const compile_opts *o, const mhla_grammar_vocab *v,
                      compile_row *row)
{
    size_t len;
    char *text = bench_slurp(path, &len);
    mhla_grammar *g = NULL;
    *row = (compile_row){.path = path, .compile_ms = -1, .rc = MHLA_GRAMMAR_SYNTAX};
    if (!text) {
        fprintf(stderr, "%s: cannot read\n", path);
        return;
    }
    row->compile_ms = time_compile(text, len, o, &g, &row->rc);
    if (g && v)
        time_bind(g, v, row);
    mhla_grammar_free(g);
    free(text);
    if (o->list)
        printf("%-60s %3d %9.3f %9.3f %9.3f\n", path, row->rc, row->compile_ms, row->bind_ms,
               row->first_mask_ms);
}

/* The field at offset off of each compiled row. */
static double row_value(const compile_row *r, size_t off)
{
    return *(const double *)((const char *)r + off);
}

/* Median, 90th percentile and maximum of one time over the compiled rows. */
static void print_stat(const char *name, const compile_row *rows, int n, size_t off)
{
    double *v = malloc((size_t)n * sizeof *v), max = -1;
    const char *max_path = "";
    int k = 0;
    for (int i = 0; v && i < n; i++) {
        if (rows[i].rc)
            continue;
        v[k++] = row_value(&rows[i], off);
        if (row_value(&rows[i], off) > max) {
            max = row_value(&rows[i], off);
            max_path = rows[i].path;
        }
    }
    if (k > 0) {
        qsort(v, (size_t)k, sizeof *v, bench_cmp_double);
        printf("%-12s median %9.3f ms  p90 %9.3f ms  max %9.3f ms (%s)\n", name, v[k / 2],
               v[(k - 1) * 9 / 10], max, max_path);
    }
    free(v);
}

static void print_summary(const compile_row *rows, int n, int with_vocab)
{
    int by_code[6] = {0}, ok = 0;
    for (int i = 0; i < n; i++) {
        if (rows[i].rc == 0)
            ok++;
        else if (rows[i].rc < 0 && rows[i].rc >= -5)
            by_code[-rows[i].rc]++;
    }
    printf("files %d, compiled %d, refused %d (unsupported %d, limit %d, syntax %d, nomem %d)\n", n,
           ok, n - ok, by_code[2], by_code[3], by_code[1], by_code[4]);
    print_stat("compile", rows, n, offsetof(compile_row, compile_ms));
    if (with_vocab) {
        print_stat("bind", rows, n, offsetof(compile_row, bind_ms));
        print_stat("first mask", rows, n, offsetof(compile_row, first_mask_ms));
    }
}

static int parse(int argc, char **argv, compile_opts *o)
{
    *o = (compile_opts){.repeat = 3};
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--list") == 0)
            o->list = 1;
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0)
            o->repeat = atoi(argv[++i]);
        else if (strcmp(argv[i], "--vocab") == 0 && i + 1 < argc)
            o->vocab_dir = argv[++i];
        else
            return -1;
    }
    return i < argc ? i : -1;
}

int main(int argc, char **argv)
{
    compile_opts o;
    int first = parse(argc, argv, &o);
    if (first < 0) {
        fprintf(stderr, "usage: bench_schema_compile [--repeat N] [--vocab TOKENIZER_DIR] "
                        "[--list] FILE...\n");
        return 2;
    }
    mhla_tokenizer *tok = o.vocab_dir ? bench_load_tokenizer(o.vocab_dir) : NULL;
    mhla_grammar_vocab *v = tok ? bench_grammar_vocab(tok) : NULL;
    compile_row *rows = calloc((size_t)(argc - first), sizeof *rows);
    if (!rows || (o.vocab_dir && !v)) {
        fprintf(stderr, "bench_schema_compile: %s\n", rows ? "no vocabulary" : "out of memory");
        return 1;
    }
    for (int a = first; a < argc; a++)
        time_file(argv[a], &o, v, &rows[a - first]);
    print_summary(rows, argc - first, v != NULL);
    free(rows);
    mhla_grammar_vocab_free(v);
    mhla_tok_free(tok);
    return 0;
}
