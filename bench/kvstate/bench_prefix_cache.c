/*
 * bench_prefix_cache — what the exact prefix cache buys (kvstate/README.md):
 *   1. time to first token for a request sharing a P-token prefix with an
 *      earlier one, cold (nothing cached) against cached, in one run; the
 *      cached logits are checked bitwise against the cold ones;
 *   2. state memory per sequence against the number of concurrent sequences
 *      sharing that prefix;
 *   3. with --bf16, the same for bf16 pages, and the largest logit difference
 *      of bf16 pages against f32 pages on the cold prompt.
 *
 * usage: bench_prefix_cache MODEL_DIR [--prefix 1500] [--suffix 16] [--reps 3]
 *                           [--threads N] [--max-seqs 8] [--bf16]
 * (the flags are rows of base's option table, mhla_opts)
 */
#include "base.h"
#include "engine.h"

#include <stddef.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const mhla_error *e)
{
    fprintf(stderr, "bench_prefix_cache: %s: %s\n", what, e->msg);
    exit(1);
}

static uint64_t rs = 12345;
static int32_t rnd_tok(int V)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((rs >> 33) % (uint64_t)V);
}

/* One request: match what the pool holds, compute the rest, logits of the last
 * token. Returns seconds; *matched the tokens not recomputed. The sequence is
 * kept in *keep when non-NULL. */
static double request(mhla_engine *e, const int32_t *tok, int n, float *logits, int *matched,
                      mhla_seq **keep)
{
    mhla_error err;
    mhla_seq *s;
    double t0 = mhla_now();
    if (mhla_engine_seq_create(e, &s, &err))
        die("seq", &err);
    int pos = mhla_seq_match_prefix(s, tok, n, &err);
    if (pos < 0)
        die("match", &err);
    mhla_batch_item it = {s, tok + pos, n - pos, n - pos - 1, logits, NULL, 0, NULL};
    if (mhla_engine_step(e, &it, 1, &err))
        die("forward", &err);
    double t = mhla_now() - t0;
    *matched = pos;
    if (keep)
        *keep = s;
    else
        mhla_seq_free(s);
    return t;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void run(const mhla_model *m, mhla_state_dtype dt, int P, int S, int reps, int threads,
                int max_seqs, float *cold_out)
{
    const mhla_config *c = mhla_model_config(m);
    int V = c->vocab_size, n = P + S;
    mhla_engine_options o = {.n_threads = threads,
                             .state_bytes = (size_t)3 << 30,
                             .state_dtype = dt};
    mhla_engine *e;
    mhla_error err;
    if (mhla_engine_create(m, &o, &e, &err))
        die("engine", &err);
    int32_t *tok = malloc((size_t)n * sizeof *tok);
    float *cold = malloc((size_t)V * sizeof(float)), *warm = malloc((size_t)V * sizeof(float));
    for (int i = 0; i < n; i++)
        tok[i] = rnd_tok(V);
    const char *name = dt == MHLA_STATE_BF16 ? "bf16" : "f32";
    int matched;
    /* Warm-up (thread pool, page faults) on a prompt that shares nothing. */
    {
        int nw = n < 2 * c->chunk_size ? n : 2 * c->chunk_size;
        int32_t *w = malloc((size_t)nw * sizeof *w);
        for (int i = 0; i < nw; i++)
            w[i] = (tok[i] + 1) % V;
        request(e, w, nw, cold, &matched, NULL);
        free(w);
    }
    double t_cold = request(e, tok, n, cold, &matched, NULL);
    if (matched != 0)
        fprintf(stderr, "warning: cold request matched %d tokens\n", matched);
    /* The same prompt again: served from the cache, must give the same bits. */
    request(e, tok, n, warm, &matched, NULL);
    int same = memcmp(cold, warm, (size_t)V * sizeof(float)) == 0;
    /* Requests sharing the prefix, each with a suffix of its own. */
    double *tw = malloc((size_t)reps * sizeof *tw);
    for (int r = 0; r < reps; r++) {
        for (int i = P; i < n; i++)
            tok[i] = rnd_tok(V);
        tw[r] = request(e, tok, n, warm, &matched, NULL);
    }
    qsort(tw, (size_t)reps, sizeof *tw, cmp_double);
    double t_warm = tw[reps / 2];
    printf("[%s pages] prompt %d tokens (%d shared + %d own), %d threads\n", name, n, P, S,
           threads);
    printf("  TTFT cold   %8.1f ms\n", t_cold * 1e3);
    printf("  TTFT cached %8.1f ms (median of %d; %d tokens from the cache, %d computed)\n",
           t_warm * 1e3, reps, matched, n - matched);
    printf("  ratio cold/cached %.1fx; cached logits bitwise equal to cold: %s\n", t_cold / t_warm,
           same ? "yes" : "NO");

    /* State memory with k concurrent sequences sharing the prefix. */
    mhla_state_stats st;
    mhla_seq *fresh;
    if (mhla_engine_seq_create(e, &fresh, &err))
        die("seq", &err);
    size_t own = mhla_seq_state_bytes(fresh); /* P_i + current block rows */
    mhla_seq_free(fresh);
    mhla_seq **live = calloc((size_t)max_seqs, sizeof *live);
    printf("  state memory per sequence (page %zu bytes, per-sequence buffers %zu bytes):\n",
           (mhla_engine_state_stats(e, &st), st.page_bytes), own);
    printf("    %4s %14s %14s %10s\n", "seqs", "alone (MiB)", "shared (MiB)", "saving");
    size_t alone = 0;
    for (int k = 1; k <= max_seqs; k++) {
        for (int i = P; i < n; i++)
            tok[i] = rnd_tok(V);
        request(e, tok, n, warm, &matched, &live[k - 1]);
        if (k == 1)
            alone = mhla_seq_state_bytes(live[0]);
        if ((k & (k - 1)) != 0)
            continue;
        mhla_engine_state_stats(e, &st);
        double shared = ((double)st.pages_used * st.page_bytes + (double)k * own) / k;
        printf("    %4d %14.3f %14.3f %9.2fx\n", k, alone / 1048576.0, shared / 1048576.0,
               alone / shared);
    }
    for (int k = 0; k < max_seqs; k++)
        mhla_seq_free(live[k]);
    memcpy(cold_out, cold, (size_t)V * sizeof(float));
    free(live);
    free(tw);
    free(tok);
    free(cold);
    free(warm);
    mhla_engine_free(e);
}

/* Everything bench_prefix_cache's flags set. */
typedef struct {
    int prefix, suffix, reps, threads, max_seqs, bf16;
} cache_args;

#define ARG(field) offsetof(cache_args, field)
static const mhla_opt rows[] = {
    {.name = "prefix",
     .kind = MHLA_OPT_INT,
     .off = ARG(prefix),
     .lo = 1,
     .hi = 1 << 24,
     .metavar = "1500",
     .help = "tokens of the shared prefix"},
    {.name = "suffix",
     .kind = MHLA_OPT_INT,
     .off = ARG(suffix),
     .lo = 1,
     .hi = 1 << 24,
     .metavar = "16",
     .help = "tokens after it"},
    {.name = "reps",
     .kind = MHLA_OPT_INT,
     .off = ARG(reps),
     .lo = 1,
     .hi = 1000,
     .metavar = "3",
     .help = "repetitions, the best kept"},
    {.name = "threads",
     .kind = MHLA_OPT_INT,
     .off = ARG(threads),
     .lo = 0,
     .hi = 4096,
     .metavar = "N",
     .help = "engine threads (0: the CPUs this process may use)"},
    {.name = "max-seqs",
     .kind = MHLA_OPT_INT,
     .off = ARG(max_seqs),
     .lo = 1,
     .hi = 4096,
     .metavar = "8",
     .help = "most sequences sharing the prefix"},
    {.name = "bf16",
     .kind = MHLA_OPT_FLAG,
     .off = ARG(bf16),
     .help = "bf16 pages too, against f32 pages"},
};
#undef ARG

static const mhla_opts spec = {
    .usage = "usage: bench_prefix_cache MODEL_DIR [options]\n",
    .rows = rows,
    .n_rows = sizeof rows / sizeof rows[0],
    .help_col = 20,
};

int main(int argc, char **argv)
{
    cache_args a = {.prefix = 1500, .suffix = 16, .reps = 3, .max_seqs = 8};
    char msg[256];
    if (argc < 2 || argv[1][0] == '-') {
        mhla_opts_help(&spec, stderr);
        return 2;
    }
    int rc = mhla_opts_parse(&spec, &a, argc - 1, argv + 1, NULL, msg, sizeof msg);
    if (rc) {
        if (rc < 0)
            fprintf(stderr, "bench_prefix_cache: %s\n", msg);
        else if (rc == 1)
            mhla_opts_help(&spec, stderr);
        return 2;
    }
    int P = a.prefix, S = a.suffix, reps = a.reps, threads = a.threads, max_seqs = a.max_seqs;
    int bf16 = a.bf16;
    mhla_error err;
    mhla_model *m;
    if (mhla_model_load(argv[1], &m, &err))
        die("load", &err);
    const mhla_config *c = mhla_model_config(m);
    if (P < 1 || S < 1 || reps < 1 || max_seqs < 1 || P + S > c->max_positions) {
        fprintf(stderr, "bench_prefix_cache: need prefix + suffix <= %d, all >= 1\n",
                c->max_positions);
        return 2;
    }
    float *f32 = malloc((size_t)c->vocab_size * sizeof(float));
    float *b16 = malloc((size_t)c->vocab_size * sizeof(float));
    run(m, MHLA_STATE_F32, P, S, reps, threads, max_seqs, f32);
    if (bf16) {
        rs = 12345; /* the same prompt */
        run(m, MHLA_STATE_BF16, P, S, reps, threads, max_seqs, b16);
        double d = 0, mx = 0;
        for (int i = 0; i < c->vocab_size; i++) {
            if (fabs((double)f32[i] - b16[i]) > d)
                d = fabs((double)f32[i] - b16[i]);
            if (fabs(f32[i]) > mx)
                mx = fabs(f32[i]);
        }
        printf("bf16 vs f32 pages, last-token logits of the cold prompt: max |diff| %.4g "
               "(max |logit| %.4g)\n",
               d, mx);
    }
    free(f32);
    free(b16);
    mhla_model_free(m);
    return 0;
}
