/*
 * mhla_engine_product_rate, the products of a batch-1 step timed alone
 * (bench_decode's "products alone"), for f32, bf16, q8 and q4 weights:
 * - the bytes it counts are the step's weight bytes (all of a step's
 *   products) and the head's bytes as the weights are held (the head alone),
 *   so the rates it prints are over the bytes actually read;
 * - both rates are positive and finite;
 * - it touches no sequence and no step's buffers: decode steps with passes
 *   of both kinds between them give the same logits, bit for bit, as the
 *   same steps without;
 * - a kind it does not know is an error that names it.
 *
 * usage: test_product_rate CHECKPOINT
 */
#include "engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROMPT 21
#define STEPS 6

static int failures;

static void fail(const char *what, const char *weights)
{
    fprintf(stderr, "FAIL (%s weights): %s\n", weights, what);
    failures++;
}

static void must(int rc, const mhla_error *err)
{
    if (rc) {
        fprintf(stderr, "FAIL: %s\n", err->msg);
        exit(1);
    }
}

/* The logits of a prompt and STEPS decode steps after it; with `passes`,
 * a pass of each kind before every step. */
static float *decode_logits(mhla_engine *e, const mhla_model *m, int passes)
{
    mhla_error err;
    mhla_seq *s;
    int V = mhla_model_config(m)->vocab_size;
    float *out = malloc((size_t)(STEPS + 1) * V * sizeof *out);
    int32_t tok[PROMPT];
    for (int i = 0; i < PROMPT; i++)
        tok[i] = (int32_t)((i * 11 + 5) % V);
    if (!out) {
        fprintf(stderr, "FAIL: out of memory\n");
        exit(1);
    }
    must(mhla_seq_create(m, &s, &err), &err);
    mhla_batch_item it = {s, tok, PROMPT, PROMPT - 1, out, NULL, 0, NULL};
    must(mhla_engine_step(e, &it, 1, &err), &err);
    for (int i = 0; i < STEPS; i++) {
        if (passes) {
            double r;
            must(mhla_engine_product_rate(e, MHLA_PRODUCTS_STEP, &r, NULL, &err), &err);
            must(mhla_engine_product_rate(e, MHLA_PRODUCTS_HEAD, &r, NULL, &err), &err);
        }
        int32_t t = (int32_t)((i * 13 + 2) % V);
        mhla_batch_item d = {s, &t, 1, 0, out + (size_t)(i + 1) * V, NULL, 0, NULL};
        must(mhla_engine_step(e, &d, 1, &err), &err);
    }
    mhla_seq_free(s);
    return out;
}

static void check_weights(const char *dir, mhla_weight_dtype wd, const char *name)
{
    mhla_error err;
    mhla_model *m;
    mhla_engine *e;
    mhla_model_options mo = {.weights = wd};
    mhla_engine_options eo = {0};
    eo.n_threads = 2; /* the products' jobs on the pool, as a step's */
    must(mhla_model_load_with(dir, &mo, &m, &err), &err);
    must(mhla_engine_create(m, &eo, &e, &err), &err);
    const mhla_config *c = mhla_model_config(m);
    double D = c->hidden_size, V = c->vocab_size;

    double step_rate, step_bytes, head_rate, head_bytes;
    must(mhla_engine_product_rate(e, MHLA_PRODUCTS_STEP, &step_rate, &step_bytes, &err), &err);
    must(mhla_engine_product_rate(e, MHLA_PRODUCTS_HEAD, &head_rate, &head_bytes, &err), &err);
    if (!(step_rate > 0 && isfinite(step_rate) && head_rate > 0 && isfinite(head_rate)))
        fail("a products-only rate is not a positive number of bytes a second", name);
    if (step_bytes != (double)mhla_engine_step_weight_bytes(e))
        fail("the step's products are not counted as the step's weight bytes", name);
    /* the head as held: 4 or 2 bytes a weight, int8 with a 4-byte scale per group of 32, or
     * 4 bits with a 2-byte scale per group of 32 (and whole blocks of 16 rows) */
    double want = wd == MHLA_WEIGHTS_F32    ? 4 * V * D
                  : wd == MHLA_WEIGHTS_BF16 ? 2 * V * D
                  : wd == MHLA_WEIGHTS_Q4   ? (ceil(V / 16) * 16) * D * (0.5 + 2.0 / 32)
                                            : (ceil(V / 16) * 16) * D * (1 + 4.0 / 32);
    if (head_bytes != want) {
        char msg[160];
        snprintf(msg, sizeof msg, "the head alone counted %.0f bytes, not the %.0f it holds",
                 head_bytes, want);
        fail(msg, name);
    }
    if (!(head_bytes < step_bytes))
        fail("the head alone counted as many bytes as the whole step", name);

    float *plain = decode_logits(e, m, 0), *with = decode_logits(e, m, 1);
    if (memcmp(plain, with, (size_t)(STEPS + 1) * (size_t)V * sizeof(float)))
        fail("decode steps with products-only passes between them gave other logits", name);
    free(plain);
    free(with);

    double r = 1;
    if (mhla_engine_product_rate(e, (mhla_products)7, &r, NULL, &err) == 0)
        fail("products of an unknown kind (7) were timed", name);
    else if (!strstr(err.msg, "7") || r != 0)
        fail("an unknown kind's error does not name it, or left a rate", name);
    mhla_engine_free(e);
    mhla_model_free(m);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CHECKPOINT\n", argv[0]);
        return 2;
    }
    check_weights(argv[1], MHLA_WEIGHTS_F32, "f32");
    check_weights(argv[1], MHLA_WEIGHTS_BF16, "bf16");
    check_weights(argv[1], MHLA_WEIGHTS_Q8, "q8");
    check_weights(argv[1], MHLA_WEIGHTS_Q4, "q4");
    if (failures)
        return 1;
    printf("ok: products-only passes count the step's and the head's weight bytes, and leave "
           "decoding unchanged (f32, bf16, q8, q4)\n");
    return 0;
}
