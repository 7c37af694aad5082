/*
 * Masked sample slots (mhla_token_mask with bits) sampled on the GPU: the
 * mask goes up as a bitmask and the row is sampled on the device.
 *   (a) over batches of 8 sequences with a new random mask per row and step
 *       (from half the vocabulary down to one id), at several temperatures,
 *       with filters, penalties and logit_bias, no chosen token is forbidden;
 *   (b) at temperature 0 the token is the argmax among the allowed ids, and
 *       (greedy and plain temperature) exactly the host sampler's choice
 *       (mhla_sampler_next) with the same mask on the same raw row, whether
 *       the host mask applies itself or is derived from its bits;
 *   (c) a mask allowing nothing fails its slot only ("allows no token"), and
 *       so does a mask whose bits hook fails; the other slots of the step
 *       are chosen as usual;
 *   (d) accept is called once per chosen token, with that token.
 * The CPU engine runs (a) and (d) too (its sampler applies the bits).
 *
 * usage: test_cuda_mask MODEL_DIR     (exit 77 without a usable GPU)
 */
#include "engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_RNG_SEED 0x2545f4914f6cdd1dull
#include "check.h"
#include "gpu_engine.h"

enum { PROMPT = 7, STEPS = 12, N_SEQ = 8 };

static int V, W; /* vocabulary, mask words */

/* A test constraint: the allowed ids are whatever the test set last. */
typedef struct {
    uint64_t *bits;
    int n_accept, fail_bits;
    int32_t last;
} tmask;

static int tm_bits(void *ctx, uint64_t *bits, int vocab, mhla_error *err)
{
    tmask *m = ctx;
    if (m->fail_bits) {
        snprintf(err->msg, sizeof err->msg, "test mask: bits refused");
        return -1;
    }
    memcpy(bits, m->bits, ((size_t)vocab + 63) / 64 * sizeof *bits);
    return 0;
}

static int tm_apply(void *ctx, float *logits, int vocab, mhla_error *err)
{
    (void)err;
    tmask *m = ctx;
    for (int i = 0; i < vocab; i++)
        if (!((m->bits[i >> 6] >> (i & 63)) & 1u))
            logits[i] = -INFINITY;
    return 0;
}

static int tm_accept(void *ctx, int32_t token, mhla_error *err)
{
    (void)err;
    tmask *m = ctx;
    m->n_accept++;
    m->last = token;
    return 0;
}

static int allowed(const tmask *m, int id) { return (int)((m->bits[id >> 6] >> (id & 63)) & 1u); }

/* A random mask allowing about permille / 1000 of the ids, at least one. */
static void random_mask(tmask *m, int permille)
{
    memset(m->bits, 0, (size_t)W * sizeof *m->bits);
    for (int i = 0; i < V; i++)
        if (rnd(1000) < permille)
            m->bits[i >> 6] |= 1ull << (i & 63);
    int one = rnd(V);
    m->bits[one >> 6] |= 1ull << (one & 63);
}

static void tmask_init(tmask *m)
{
    memset(m, 0, sizeof *m);
    if (!(m->bits = calloc((size_t)W, sizeof *m->bits)))
        die("out of memory");
}

/* One step of n sequences, item b feeding toks[b] (n_tok of them), each
 * slot with mask masks[b] (bits only); with raw, item b's logits row too. */
static void step(mhla_engine *e, mhla_seq **q, const int32_t *const *toks, int n_tok,
                 mhla_sample_slot *sl, mhla_token_mask *tm, float *raw, int n)
{
    mhla_batch_item it[N_SEQ];
    for (int b = 0; b < n; b++) {
        sl[b].at = n_tok - 1;
        sl[b].n_top = 2;
        sl[b].mask = &tm[b];
        it[b] = (mhla_batch_item){.seq = q[b],
                                  .tokens = toks[b],
                                  .n_tokens = n_tok,
                                  .logits_from = n_tok - 1,
                                  .logits = raw ? raw + (size_t)b * V : NULL,
                                  .sample = &sl[b],
                                  .n_samples = 1};
    }
    mhla_error err;
    if (mhla_engine_step(e, it, n, &err))
        die_err("step", &err);
}

/* Row b of step k chose an allowed token and told its mask (once); 1 if forbidden. */
static int check_row(const char *where, int k, int b, const mhla_sample_slot *sl, const tmask *m)
{
    CHECK(sl->status == MHLA_SLOT_OK, "%s step %d row %d: %s", where, k, b, sl->err.msg);
    CHECK(m->n_accept == k + 1 && m->last == sl->token,
          "%s step %d row %d: accept called %d times, last with %d, token %d", where, k, b,
          m->n_accept, m->last, sl->token);
    return !allowed(m, sl->token);
}

/* (a), (d): N_SEQ sequences under fresh random masks every step. */
static void check_batch(mhla_engine *e, const char *where, const mhla_sampling_params *p)
{
    static const int density[N_SEQ] = {500, 100, 10, 0, 300, 50, 1, 0};
    mhla_sampler *s[N_SEQ];
    mhla_seq *q[N_SEQ];
    tmask m[N_SEQ];
    mhla_token_mask tm[N_SEQ];
    mhla_sample_slot sl[N_SEQ];
    int32_t prompt[N_SEQ][PROMPT], tok[N_SEQ];
    const int32_t *feed[N_SEQ];
    mhla_error err;
    for (int b = 0; b < N_SEQ; b++) {
        for (int i = 0; i < PROMPT; i++)
            prompt[b][i] = (int32_t)rnd(V);
        mhla_sampling_params pb = *p;
        pb.seed = p->seed + (uint64_t)b;
        if (mhla_sampler_create(&pb, V, prompt[b], PROMPT, &s[b], &err) ||
            mhla_engine_seq_create(e, &q[b], &err))
            die_err("setup", &err);
        tmask_init(&m[b]);
        tm[b] = (mhla_token_mask){.accept = tm_accept, .ctx = &m[b], .bits = tm_bits};
        feed[b] = prompt[b];
    }
    int bad = 0;
    for (int k = 0; k <= STEPS; k++) {
        for (int b = 0; b < N_SEQ; b++) {
            random_mask(&m[b], density[b]);
            memset(&sl[b], 0, sizeof sl[b]);
            sl[b].sampler = s[b];
        }
        step(e, q, feed, k == 0 ? PROMPT : 1, sl, tm, NULL, N_SEQ);
        for (int b = 0; b < N_SEQ; b++) {
            bad += check_row(where, k, b, &sl[b], &m[b]);
            tok[b] = sl[b].token;
            feed[b] = &tok[b];
        }
    }
    CHECK(bad == 0, "%s T=%g: %d forbidden tokens chosen", where, p->temperature, bad);
    printf("%-4s T=%-4g top_k %d top_p %g penalties %d: %d rows x %d steps, all allowed\n", where,
           p->temperature, p->top_k, p->top_p, p->presence_penalty != 0, N_SEQ, STEPS + 1);
    for (int b = 0; b < N_SEQ; b++) {
        mhla_seq_free(q[b]);
        mhla_sampler_free(s[b]);
        free(m[b].bits);
    }
}

/* The argmax of raw among the ids m allows (the lowest id among equals). */
static int masked_argmax(const float *raw, const tmask *m)
{
    int best = -1;
    for (int i = 0; i < V; i++)
        if (allowed(m, i) && (best < 0 || raw[i] > raw[best]))
            best = i;
    return best;
}

/* The host sampler's token on raw under m: hook `apply` or derived from bits. */
static int32_t host_choice(mhla_sampler *h, const float *raw, tmask *m, int use_apply)
{
    mhla_token_mask tm = {.apply = use_apply ? tm_apply : NULL,
                          .accept = tm_accept,
                          .ctx = m,
                          .bits = use_apply ? NULL : tm_bits};
    int32_t t;
    mhla_error err;
    if (mhla_sampler_next(h, raw, &tm, &t, &err))
        die_err("host sampler", &err);
    return t;
}

/* (b): one sequence, its raw rows returned; the device's token is the host
 * sampler's under the same mask (and at T = 0 the masked argmax). */
static void check_exact(mhla_engine *gpu, float temperature)
{
    mhla_sampling_params p;
    mhla_sampling_defaults(&p);
    p.temperature = temperature;
    p.seed = 77;
    int32_t prompt[PROMPT], tok = 0;
    for (int i = 0; i < PROMPT; i++)
        prompt[i] = (int32_t)rnd(V);
    mhla_sampler *s, *h_apply, *h_bits;
    mhla_seq *q;
    mhla_error err;
    if (mhla_sampler_create(&p, V, prompt, PROMPT, &s, &err) ||
        mhla_sampler_create(&p, V, prompt, PROMPT, &h_apply, &err) ||
        mhla_sampler_create(&p, V, prompt, PROMPT, &h_bits, &err) ||
        mhla_engine_seq_create(gpu, &q, &err))
        die_err("setup", &err);
    tmask m, hm;
    tmask_init(&m);
    hm = m;
    mhla_token_mask tm = {.accept = tm_accept, .ctx = &m, .bits = tm_bits};
    float *raw = malloc((size_t)V * sizeof *raw);
    for (int k = 0; k <= STEPS; k++) {
        random_mask(&m, (int[]){300, 20, 2}[k % 3]);
        mhla_sample_slot sl = {.sampler = s};
        const int32_t *feed = k == 0 ? prompt : &tok;
        step(gpu, &q, &feed, k == 0 ? PROMPT : 1, &sl, &tm, raw, 1);
        CHECK(sl.status == MHLA_SLOT_OK, "exact T=%g step %d: %s", temperature, k, sl.err.msg);
        int32_t a = host_choice(h_apply, raw, &hm, 1), b = host_choice(h_bits, raw, &hm, 0);
        CHECK(sl.token == a && sl.token == b,
              "exact T=%g step %d: device %d, host sampler %d (apply) %d (bits)", temperature, k,
              sl.token, a, b);
        if (temperature == 0)
            CHECK(sl.token == masked_argmax(raw, &m), "step %d: device %d, masked argmax %d", k,
                  sl.token, masked_argmax(raw, &m));
        tok = sl.token;
    }
    printf("exact T=%g: %d steps, the device's tokens are the host sampler's\n", temperature,
           STEPS + 1);
    free(raw);
    free(m.bits);
    mhla_seq_free(q);
    mhla_sampler_free(s);
    mhla_sampler_free(h_apply);
    mhla_sampler_free(h_bits);
}

/* (c): in one step, a mask allowing nothing and a mask whose bits fail
 * fail their slots; the other two are chosen as usual. */
static void check_failures(mhla_engine *gpu)
{
    mhla_sampling_params p;
    mhla_sampling_defaults(&p);
    mhla_sampler *s[4];
    mhla_seq *q[4];
    tmask m[4];
    mhla_token_mask tm[4];
    mhla_sample_slot sl[4];
    int32_t prompt[PROMPT];
    const int32_t *feed[4] = {prompt, prompt, prompt, prompt};
    mhla_error err;
    for (int i = 0; i < PROMPT; i++)
        prompt[i] = (int32_t)rnd(V);
    for (int b = 0; b < 4; b++) {
        if (mhla_sampler_create(&p, V, prompt, PROMPT, &s[b], &err) ||
            mhla_engine_seq_create(gpu, &q[b], &err))
            die_err("setup", &err);
        tmask_init(&m[b]);
        random_mask(&m[b], 100);
        tm[b] = (mhla_token_mask){.accept = tm_accept, .ctx = &m[b], .bits = tm_bits};
        sl[b] = (mhla_sample_slot){.sampler = s[b]};
    }
    memset(m[1].bits, 0, (size_t)W * sizeof *m[1].bits);
    m[2].fail_bits = 1;
    step(gpu, q, feed, PROMPT, sl, tm, NULL, 4);
    CHECK(sl[1].status == MHLA_SLOT_FAILED && strstr(sl[1].err.msg, "allows no token"),
          "a mask allowing nothing: status %d (%s)", sl[1].status, sl[1].err.msg);
    CHECK(sl[2].status == MHLA_SLOT_FAILED && strstr(sl[2].err.msg, "bits refused"),
          "a mask whose bits fail: status %d (%s)", sl[2].status, sl[2].err.msg);
    CHECK(m[1].n_accept == 0 && m[2].n_accept == 0, "failed slots' masks were told a token");
    for (int b = 0; b < 4; b += 3)
        CHECK(sl[b].status == MHLA_SLOT_OK && allowed(&m[b], sl[b].token) && m[b].n_accept == 1,
              "slot %d beside the failed ones: status %d token %d (%s)", b, sl[b].status,
              sl[b].token, sl[b].err.msg);
    printf("failures: '%s', '%s'; the other slots chose %d and %d\n", sl[1].err.msg, sl[2].err.msg,
           sl[0].token, sl[3].token);
    for (int b = 0; b < 4; b++) {
        mhla_seq_free(q[b]);
        mhla_sampler_free(s[b]);
        free(m[b].bits);
    }
}

static mhla_engine *engine(const mhla_model *m, mhla_device dev)
{
    mhla_engine_options o = {.n_threads = 2, .device = dev, .gpu_weights = MHLA_GPU_WEIGHTS_F32};
    return engine_or_skip(m, &o);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
        return 2;
    }
    mhla_model *model;
    mhla_error err;
    if (mhla_model_load(argv[1], &model, &err))
        die_err("model", &err);
    V = mhla_model_config(model)->vocab_size;
    W = (V + 63) / 64;
    mhla_engine *gpu = engine(model, MHLA_DEVICE_CUDA), *cpu = engine(model, MHLA_DEVICE_CPU);
    mhla_logit_bias bias[2] = {{3, 2.5f}, {7, -100.0f}};
    mhla_sampling_params p[5];
    for (int i = 0; i < 5; i++) {
        mhla_sampling_defaults(&p[i]);
        p[i].seed = 500 + 10 * (uint64_t)i;
    }
    p[0].temperature = 0;
    p[1].temperature = 0.7f;
    p[3].temperature = 1.6f;
    p[4].top_k = 20;
    p[4].top_p = 0.9f;
    p[4].min_p = 0.01f;
    p[4].presence_penalty = 0.5f;
    p[4].repetition_penalty = 1.3f;
    p[4].logit_bias = bias;
    p[4].n_logit_bias = 2;
    for (int i = 0; i < 5; i++)
        check_batch(gpu, "gpu", &p[i]);
    check_batch(cpu, "cpu", &p[4]);
    check_exact(gpu, 0.0f);
    check_exact(gpu, 0.9f);
    check_failures(gpu);

    mhla_device_stats st;
    mhla_engine_device_stats(gpu, &st);
    CHECK(st.graph_replays > 0, "no masked decode step was replayed as a graph");
    printf("graph replays %llu\n", (unsigned long long)st.graph_replays);
    mhla_engine_free(gpu);
    mhla_engine_free(cpu);
    mhla_model_free(model);
    if (failures) {
        printf("FAIL: %d checks failed\n", failures);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
