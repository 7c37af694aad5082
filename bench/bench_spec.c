/*
 * bench_spec — what verifying drafted tokens costs the engine, and what
 * taking them back costs (docs/architecture.md, "Rolling back drafted tokens").
 *
 *  1. A step of B sequences feeding 1 + k tokens each (k drafts, all taken
 *     back after the first slot) against the plain step of 1 token each,
 *     alternating, medians: the price of verifying k drafts, as a ratio.
 *  2. Taking drafts back across a block start at block i: a 5-token span
 *     from the block's second-to-last position, rejected at its first slot
 *     (the open block's rows come back and P_i is mixed again from i pages),
 *     against the same span inside a block; and a copy of P_i's bytes, what
 *     a snapshot of P_i before every crossing step would cost instead.
 *
 * usage: bench_spec CHECKPOINT [f32|bf16] [REPS]
 */
#include "base.h"
#include "bench_util.h"
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mhla_engine *eng;
static const mhla_config *cfg;
static mhla_sampler *smp;
static int reps = 15;

static void die_e(const char *what, const mhla_error *e)
{
    fprintf(stderr, "bench_spec: %s: %s\n", what, e->msg);
    exit(1);
}

static mhla_seq *prefilled(int n, int salt)
{
    int32_t *t = malloc(sizeof *t * (size_t)n);
    for (int i = 0; i < n; i++)
        t[i] = (int32_t)((i * 131 + salt * 17 + 7) % cfg->vocab_size);
    mhla_seq *s;
    mhla_error e = {0};
    if (mhla_engine_seq_create(eng, &s, &e))
        die_e("sequence", &e);
    for (int at = 0; at < n; at += 256) {
        int m = n - at < 256 ? n - at : 256;
        mhla_batch_item it = {.seq = s, .tokens = t + at, .n_tokens = m, .logits_from = m};
        if (mhla_engine_step(eng, &it, 1, &e))
            die_e("prefill", &e);
    }
    free(t);
    return s;
}

/* One step of the B sequences, each fed 1 + k tokens with a slot at each
 * (drafts that are almost surely wrong: one token comes out); seconds. */
static double step_k(mhla_seq **seqs, int B, int k)
{
    mhla_batch_item it[64];
    mhla_sample_slot sl[64][16];
    int32_t tok[64][16];
    for (int b = 0; b < B; b++) {
        for (int j = 0; j <= k; j++) {
            tok[b][j] = (int32_t)((b * 7 + j * 13 + 3) % cfg->vocab_size);
            sl[b][j] = (mhla_sample_slot){.sampler = smp, .at = j, .n_top = -1};
        }
        it[b] = (mhla_batch_item){.seq = seqs[b],
                                  .tokens = tok[b],
                                  .n_tokens = k + 1,
                                  .logits_from = k + 1,
                                  .sample = sl[b],
                                  .n_samples = k + 1};
    }
    mhla_error e = {0};
    double t0 = mhla_now();
    if (mhla_engine_step(eng, it, B, &e))
        die_e("step", &e);
    return mhla_now() - t0;
}

static void verify_cost(int B)
{
    static const int KS[] = {1, 2, 4, 8};
    mhla_seq *seqs[64];
    for (int b = 0; b < B; b++)
        seqs[b] = prefilled(100, b);
    double plain[64], ver[4][64];
    for (int r = 0; r < reps; r++) {
        plain[r] = step_k(seqs, B, 0);
        for (int q = 0; q < 4; q++)
            ver[q][r] = KS[q] + 1 <= cfg->chunk_size ? step_k(seqs, B, KS[q]) : 0;
    }
    qsort(plain, (size_t)reps, sizeof(double), bench_cmp_double);
    printf("batch %2d: plain step %.3f ms;", B, plain[reps / 2] * 1e3);
    for (int q = 0; q < 4; q++) {
        qsort(ver[q], (size_t)reps, sizeof(double), bench_cmp_double);
        printf(" k=%d %.2fx", KS[q], ver[q][reps / 2] / plain[reps / 2]);
    }
    printf("\n");
    for (int b = 0; b < B; b++)
        mhla_seq_free(seqs[b]);
}

/* Median seconds of a 5-token span from position pos of base's clone,
 * rejected at its first slot. */
static double span_at(const mhla_seq *base)
{
    double t[64];
    for (int r = 0; r < reps; r++) {
        mhla_seq *c;
        mhla_error e = {0};
        if (mhla_seq_clone(base, &c, &e))
            die_e("clone", &e);
        t[r] = step_k(&c, 1, 4);
        mhla_seq_free(c);
    }
    qsort(t, (size_t)reps, sizeof(double), bench_cmp_double);
    return t[reps / 2];
}

static void rollback_cost(int block)
{
    int C = cfg->chunk_size;
    if ((long)(block + 1) * C + 8 > cfg->max_positions)
        return;
    mhla_seq *cross = prefilled(block * C + C - 2, 1), *inside = prefilled(block * C + 10, 1);
    double tc = span_at(cross), ti = span_at(inside);
    size_t pbytes = (size_t)cfg->num_layers * cfg->num_kv_heads * cfg->head_k_dim *
                    cfg->head_v_dim * sizeof(float);
    float *a = malloc(pbytes), *b = malloc(pbytes);
    memset(a, 1, pbytes);
    double tp[64];
    for (int r = 0; r < reps; r++) {
        double t0 = mhla_now();
        memcpy(b, a, pbytes);
        tp[r] = mhla_now() - t0;
        a[r % (pbytes / sizeof(float))] = b[0];
    }
    qsort(tp, (size_t)reps, sizeof(double), bench_cmp_double);
    printf("block %2d: span taken back across the block start %.3f ms, inside a block %.3f ms "
           "(restore %.3f ms); copying P_i (%.1f MB) %.3f ms\n",
           block, tc * 1e3, ti * 1e3, (tc - ti) * 1e3, pbytes / 1e6, tp[reps / 2] * 1e3);
    free(a);
    free(b);
    mhla_seq_free(cross);
    mhla_seq_free(inside);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: bench_spec CHECKPOINT [f32|bf16] [REPS]\n");
        return 2;
    }
    mhla_model_options mo = {.weights = MHLA_WEIGHTS_F32};
    mhla_error e = {0};
    if (argc > 2 && mhla_weight_dtype_parse(argv[2], &mo.weights, &e))
        die_e("weights", &e);
    if (argc > 3)
        reps = atoi(argv[3]) < 3 ? 3 : atoi(argv[3]) > 64 ? 64 : atoi(argv[3]);
    mhla_model *m;
    if (mhla_model_load_with(argv[1], &mo, &m, &e))
        die_e("load", &e);
    cfg = mhla_model_config(m);
    mhla_engine_options o = {0};
    if (mhla_engine_create(m, &o, &eng, &e))
        die_e("engine", &e);
    mhla_sampling_params p;
    mhla_sampling_defaults(&p);
    p.temperature = 0.0f;
    if (mhla_sampler_create(&p, cfg->vocab_size, NULL, 0, &smp, &e))
        die_e("sampler", &e);
    double load[1] = {0};
    if (getloadavg(load, 1) < 1)
        load[0] = -1;
    printf("%s, %s weights, cpu path %s, load average %.2f\n", argv[1],
           mhla_weight_dtype_name(mo.weights), mhla_engine_cpu_isa(eng), load[0]);
    int batches[] = {1, 4, 16};
    for (int i = 0; i < 3; i++)
        verify_cost(batches[i]);
    int blocks[] = {1, 8, 16, 30};
    for (int i = 0; i < 4; i++)
        rollback_cost(blocks[i]);
    mhla_sampler_free(smp);
    mhla_engine_free(eng);
    mhla_model_free(m);
    return 0;
}
