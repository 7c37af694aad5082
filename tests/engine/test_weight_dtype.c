/*
 * Weights held as bf16 (mhla_model_options.weights) keep the arithmetic in
 * f32, so for a checkpoint stored in bf16 the logits must be the same bits
 * in both modes; for an f32 checkpoint bf16 storage may only move them by
 * the rounding of the weights, which is reported and bounded — and bf16 dot
 * products (--weights bf16dot) by the rounding of the weights and the
 * activations, bounded the same way and not bf16's bits; q8 and q4 weights
 * by their quantization, bounded by their steps (q4's wider than q8's).
 *
 * usage: test_weight_dtype BF16_CHECKPOINT F32_CHECKPOINT
 */
#include "engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *prompt_logits(const char *dir, mhla_weight_dtype wd, int n, size_t *bytes, int *vocab)
{
    mhla_error err;
    mhla_model *m;
    mhla_engine *e;
    mhla_seq *s;
    mhla_model_options mo = {.weights = wd};
    if (mhla_model_load_with(dir, &mo, &m, &err) || mhla_engine_create(m, NULL, &e, &err) ||
        mhla_seq_create(m, &s, &err)) {
        fprintf(stderr, "FAIL: %s\n", err.msg);
        exit(1);
    }
    int V = mhla_model_config(m)->vocab_size;
    if (n > mhla_model_config(m)->max_positions)
        n = mhla_model_config(m)->max_positions;
    int32_t *tok = malloc((size_t)n * sizeof *tok);
    for (int i = 0; i < n; i++)
        tok[i] = (int32_t)((i * 7 + 3) % V);
    float *logits = malloc((size_t)n * V * sizeof(float));
    mhla_batch_item it = {s, tok, n, 0, logits, NULL, 0, NULL};
    if (mhla_engine_step(e, &it, 1, &err)) {
        fprintf(stderr, "FAIL: %s\n", err.msg);
        exit(1);
    }
    *bytes = (size_t)n * V * sizeof(float);
    *vocab = V;
    free(tok);
    mhla_seq_free(s);
    mhla_engine_free(e);
    mhla_model_free(m);
    return logits;
}

/* The logits b against a (n floats, rows of V): the worst error relative to the largest
 * logit, within (0, limit]; *worst_out gets it. */
static int bounded(const float *a, const float *b, size_t n, int V, const char *what, double limit,
                   double *worst_out)
{
    double worst = 0, scale = 0;
    int same_argmax = 0, rows = (int)(n / (size_t)V);
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(a[i]));
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, fabs(a[i] - b[i]) / scale);
    for (int r = 0; r < rows; r++) {
        int ia = 0, ib = 0;
        for (int v = 1; v < V; v++) {
            if (a[(size_t)r * V + v] > a[(size_t)r * V + ia])
                ia = v;
            if (b[(size_t)r * V + v] > b[(size_t)r * V + ib])
                ib = v;
        }
        same_argmax += ia == ib;
    }
    printf("f32 checkpoint, %s: worst logit error %.3g of the largest logit; "
           "argmax equal at %d/%d positions\n",
           what, worst, same_argmax, rows);
    *worst_out = worst;
    if (!(worst > 0) || worst > limit) {
        fprintf(stderr, "FAIL: %s moved the logits by %.3g\n", what, worst);
        return 1;
    }
    return 0;
}

/* q8 and q4 against f32 (a, the logits of prompt_logits(dir, f32, 40)). Both quantize the
 * activations alike; the weights' step is a group's max / 127 with q8 and / 8 with q4, 16
 * times wider, so q4's error is q8's scaled by about that (this checkpoint measured 0.029 and
 * 0.31, 11x): q8 within 5e-2 of the largest logit, q4 within 0.6 and between 2 and 32 times
 * q8's (4 bits, not 8, and not a wrong scale: a q4 that ran as int8, or with a scale off by a
 * factor, fails). */
static int q_bounds(const char *dir, const float *a, int V, double *w8, double *w4)
{
    size_t n8, n4;
    float *q8 = prompt_logits(dir, MHLA_WEIGHTS_Q8, 40, &n8, &V);
    float *q4 = prompt_logits(dir, MHLA_WEIGHTS_Q4, 40, &n4, &V);
    int failures = bounded(a, q8, n8 / sizeof(float), V, "q8 weights", 5e-2, w8);
    failures += bounded(a, q4, n4 / sizeof(float), V, "q4 weights", 0.6, w4);
    if (!(*w4 > 2 * *w8 && *w4 < 32 * *w8)) {
        fprintf(stderr, "FAIL: q4 weights' error (%.3g) not 2 to 32 times q8's (%.3g)\n", *w4, *w8);
        failures++;
    }
    free(q8);
    free(q4);
    return failures;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s BF16_CHECKPOINT F32_CHECKPOINT\n", argv[0]);
        return 2;
    }
    int failures = 0, V;
    size_t na, nb, nd;
    float *a = prompt_logits(argv[1], MHLA_WEIGHTS_F32, 40, &na, &V);
    float *b = prompt_logits(argv[1], MHLA_WEIGHTS_BF16, 40, &nb, &V);
    if (na != nb || memcmp(a, b, na) != 0) {
        fprintf(stderr, "FAIL: a bf16 checkpoint gives different bits with bf16 weights\n");
        failures++;
    }
    free(a);
    free(b);

    a = prompt_logits(argv[2], MHLA_WEIGHTS_F32, 40, &na, &V);
    b = prompt_logits(argv[2], MHLA_WEIGHTS_BF16, 40, &nb, &V);
    /* bf16 dot products round the activations too: close to f32, not bf16's bits */
    float *d = prompt_logits(argv[2], MHLA_WEIGHTS_BF16DOT, 40, &nd, &V);
    /* bf16 keeps 8 bits of mantissa: errors of a few 1e-3 are its rounding;
     * anything near 1e-1 means the conversion itself is wrong. */
    double w16, wdot, w8, w4;
    failures += bounded(a, b, na / sizeof(float), V, "bf16 weights", 5e-2, &w16);
    failures += bounded(a, d, nd / sizeof(float), V, "bf16dot weights", 5e-2, &wdot);
    failures += q_bounds(argv[2], a, V, &w8, &w4);
    if (nb == nd && memcmp(b, d, nb) == 0) {
        fprintf(stderr, "FAIL: bf16dot weights gave bf16's bits: the activations were not "
                        "rounded\n");
        failures++;
    }
    free(a);
    free(b);
    free(d);
    printf("%s\n", failures ? "FAILED" : "weight dtype: 1 passed, 0 failed");
    return failures ? 1 : 0;
}
