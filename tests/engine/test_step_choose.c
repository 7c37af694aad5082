/*
 * The one sampling site (engine/step_choose.c), through mhla_engine_step:
 *  - n slots at one position with their own samplers give exactly what each
 *    sampler gives on that row alone (the n choices of one prompt);
 *  - token scores are mhla_logprobs of the given tokens on each row;
 *  - slots at several positions of one item (drafted tokens verified in one
 *    step) give exactly the tokens one-token steps give, with the same draws
 *    from the sampler's generator, and skip every slot after the first draft
 *    the model did not choose;
 *  - a token mask holds the choice to the ids it allows, hears the choice,
 *    and fails its slot alone when it allows nothing;
 *  - malformed slots and scores are refused before anything runs.
 *
 * usage: test_step_choose CHECKPOINT
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine.h"

static const mhla_model *model;
static mhla_engine *eng;
static int V;

static mhla_seq *new_seq(void)
{
    mhla_seq *s;
    mhla_error e = {0};
    if (mhla_engine_seq_create(eng, &s, &e))
        die_err("sequence", &e);
    return s;
}

static mhla_sampler *new_sampler(float temperature, float top_p, uint64_t seed)
{
    mhla_sampling_params p;
    mhla_sampling_defaults(&p);
    p.temperature = temperature;
    p.top_p = top_p;
    p.seed = seed;
    mhla_sampler *s;
    mhla_error e = {0};
    if (mhla_sampler_create(&p, V, NULL, 0, &s, &e))
        die_err("sampler", &e);
    return s;
}

/* Logits of every position of tokens[0..n) on a fresh sequence. */
static float *all_logits(const int32_t *tokens, int n)
{
    float *l = malloc(sizeof(float) * (size_t)n * (size_t)V);
    mhla_seq *s = new_seq();
    mhla_batch_item it = {.seq = s, .tokens = tokens, .n_tokens = n, .logits_from = 0, .logits = l};
    mhla_error e = {0};
    if (!l || mhla_engine_step(eng, &it, 1, &e))
        die_err("forward", &e);
    mhla_seq_free(s);
    return l;
}

static void n_choices_and_scores(const int32_t *prompt, int n)
{
    float *ref = all_logits(prompt, n);
    enum { N = 3 };
    mhla_sample_slot sl[N];
    memset(sl, 0, sizeof sl);
    for (int k = 0; k < N; k++)
        sl[k] = (mhla_sample_slot){.sampler = new_sampler(0.9f, k == 2 ? 0.7f : 1.0f, 7 + k),
                                   .at = n - 1,
                                   .n_top = 3};
    float lp[64];
    mhla_logprob top[64 * 2];
    mhla_token_scores sc = {
        .next = prompt + 1, .n_next = n - 1, .n_top = 2, .logprob = lp, .top = top};
    mhla_seq *s = new_seq();
    mhla_batch_item it = {.seq = s,
                          .tokens = prompt,
                          .n_tokens = n,
                          .logits_from = n,
                          .sample = sl,
                          .n_samples = N,
                          .scores = &sc};
    mhla_error e = {0};
    if (mhla_engine_step(eng, &it, 1, &e))
        die_err("forward with slots", &e);
    const float *last = ref + (size_t)(n - 1) * V;
    for (int k = 0; k < N; k++) {
        mhla_sampler *alone = new_sampler(0.9f, k == 2 ? 0.7f : 1.0f, 7 + k);
        int32_t want;
        float want_lp;
        mhla_logprob want_top[3];
        if (mhla_sampler_next(alone, last, NULL, &want, &e) ||
            mhla_logprobs(last, V, want, 3, &want_lp, want_top, &e))
            die_err("reference sample", &e);
        CHECK(sl[k].status == MHLA_SLOT_OK, "choice %d failed: %s", k, sl[k].err.msg);
        CHECK(sl[k].token == want, "choice %d: token %d, its sampler alone %d", k, sl[k].token,
              want);
        CHECK(sl[k].token_logprob == want_lp && sl[k].top[0].id == want_top[0].id,
              "choice %d: logprobs differ", k);
        mhla_sampler_free(alone);
        mhla_sampler_free(sl[k].sampler);
    }
    CHECK(sc.status == 0, "scores failed: %s", sc.err.msg);
    for (int j = 0; j < n - 1; j++) {
        float want;
        mhla_logprob wt[2];
        if (mhla_logprobs(ref + (size_t)j * V, V, prompt[j + 1], 2, &want, wt, &e))
            die_err("reference logprobs", &e);
        CHECK(lp[j] == want && top[2 * j].id == wt[0].id && top[2 * j + 1].logprob == wt[1].logprob,
              "score of position %d differs", j);
    }
    mhla_seq_free(s);
    free(ref);
    printf("n choices at one position and the prompt's scores: checked\n");
}

/* Plain decoding: steps tokens, one at a time, from the prompt's last logits. */
static void decode_alone(const int32_t *prompt, int n, mhla_sampler *smp, int32_t *out, int steps)
{
    mhla_seq *s = new_seq();
    mhla_sample_slot sl = {.sampler = smp, .at = n - 1, .n_top = -1};
    mhla_batch_item it = {
        .seq = s, .tokens = prompt, .n_tokens = n, .logits_from = n, .sample = &sl, .n_samples = 1};
    mhla_error e = {0};
    for (int k = 0; k < steps; k++) {
        if (mhla_engine_step(eng, &it, 1, &e) || sl.status)
            die_err("decode", sl.status ? &sl.err : &e);
        out[k] = sl.token;
        it.tokens = &out[k];
        it.n_tokens = 1;
        it.logits_from = 1;
        sl.at = 0;
    }
    mhla_seq_free(s);
}

/* The prompt's last token, then drafts: slots at every position. */
static void verify_drafts(const int32_t *prompt, int n, float temperature)
{
    enum { K = 5 };
    int32_t plain[K + 2]; /* the first token, then one per slot */
    mhla_sampler *a = new_sampler(temperature, 1.0f, 99);
    decode_alone(prompt, n, a, plain, K + 2);
    mhla_sampler_free(a);
    for (int wrong = 1; wrong <= K + 1; wrong++) { /* draft `wrong` differs; K + 1: none does */
        int32_t feed[K + 1];
        feed[0] = plain[0];
        for (int j = 1; j <= K; j++)
            feed[j] = j == wrong ? (plain[j] + 1) % V : plain[j];
        mhla_sampler *smp = new_sampler(temperature, 1.0f, 99);
        int32_t first;
        mhla_seq *s = new_seq();
        mhla_sample_slot one = {.sampler = smp, .at = n - 1, .n_top = -1};
        mhla_batch_item it = {.seq = s,
                              .tokens = prompt,
                              .n_tokens = n,
                              .logits_from = n,
                              .sample = &one,
                              .n_samples = 1};
        mhla_error e = {0};
        if (mhla_engine_step(eng, &it, 1, &e) || one.status)
            die_err("prompt", &e);
        first = one.token;
        CHECK(first == plain[0], "first token %d, plain %d", first, plain[0]);
        mhla_sample_slot sl[K + 1];
        memset(sl, 0, sizeof sl);
        for (int j = 0; j <= K; j++)
            sl[j] = (mhla_sample_slot){.sampler = smp, .at = j, .n_top = 0};
        it = (mhla_batch_item){.seq = s,
                               .tokens = feed,
                               .n_tokens = K + 1,
                               .logits_from = K + 1,
                               .sample = sl,
                               .n_samples = K + 1};
        if (mhla_engine_step(eng, &it, 1, &e))
            die_err("verify", &e);
        for (int j = 0; j <= K; j++) {
            int want_status = j < wrong ? MHLA_SLOT_OK : MHLA_SLOT_SKIPPED;
            CHECK(sl[j].status == want_status, "T %.1f, wrong draft %d: slot %d status %d, want %d",
                  temperature, wrong, j, sl[j].status, want_status);
            if (j < wrong)
                CHECK(sl[j].token == plain[j + 1],
                      "T %.1f, wrong draft %d: slot %d token %d, plain %d", temperature, wrong, j,
                      sl[j].token, plain[j + 1]);
        }
        mhla_sampler_free(smp);
        mhla_seq_free(s);
    }
    printf("drafts verified in one step at temperature %.1f: the plain tokens, skips after the "
           "first miss\n",
           temperature);
}

typedef struct {
    int applied, accepted, last;
    int none; /* allow nothing */
} even_mask;

static int even_apply(void *ctx, float *l, int vocab, mhla_error *err)
{
    (void)err;
    even_mask *m = ctx;
    m->applied++;
    for (int i = 0; i < vocab; i++)
        if (m->none || i % 2)
            l[i] = -INFINITY;
    return 0;
}

static int even_accept(void *ctx, int32_t tok, mhla_error *err)
{
    (void)err;
    even_mask *m = ctx;
    m->accepted++;
    m->last = tok;
    return 0;
}

static void masks(const int32_t *prompt, int n)
{
    for (int none = 0; none < 2; none++) {
        even_mask em = {.none = none};
        mhla_token_mask mask = {.apply = even_apply, .accept = even_accept, .ctx = &em};
        mhla_sampler *smp = new_sampler(1.0f, 1.0f, 5), *free_smp = new_sampler(1.0f, 1.0f, 5);
        mhla_sample_slot sl[2] = {{.sampler = smp, .at = n - 1, .n_top = -1, .mask = &mask},
                                  {.sampler = free_smp, .at = n - 1, .n_top = -1}};
        mhla_seq *s = new_seq();
        mhla_batch_item it = {.seq = s,
                              .tokens = prompt,
                              .n_tokens = n,
                              .logits_from = n,
                              .sample = sl,
                              .n_samples = 2};
        mhla_error e = {0};
        if (mhla_engine_step(eng, &it, 1, &e))
            die_err("masked step", &e);
        CHECK(em.applied == 1, "mask applied %d times", em.applied);
        if (!none) {
            CHECK(sl[0].status == MHLA_SLOT_OK && sl[0].token % 2 == 0,
                  "masked slot: status %d token %d", sl[0].status, sl[0].token);
            CHECK(em.accepted == 1 && em.last == sl[0].token, "the mask did not hear the choice");
        } else {
            CHECK(sl[0].status == MHLA_SLOT_FAILED && strstr(sl[0].err.msg, "allows no token"),
                  "a mask allowing nothing: status %d (%s)", sl[0].status, sl[0].err.msg);
        }
        CHECK(sl[1].status == MHLA_SLOT_OK, "the unmasked slot beside it failed");
        CHECK(mhla_seq_pos(s) == n, "the step did not advance the sequence");
        mhla_sampler_free(smp);
        mhla_sampler_free(free_smp);
        mhla_seq_free(s);
    }
    printf("token masks: the choice held to allowed ids, heard, a dead end fails its slot\n");
}

static void refusals(const int32_t *prompt, int n)
{
    mhla_sampler *smp = new_sampler(0, 1, 1);
    mhla_seq *s = new_seq();
    mhla_error e = {0};
    mhla_sample_slot back[2] = {{.sampler = smp, .at = 2}, {.sampler = smp, .at = 1}};
    mhla_batch_item it = {.seq = s,
                          .tokens = prompt,
                          .n_tokens = n,
                          .logits_from = n,
                          .sample = back,
                          .n_samples = 2};
    CHECK(mhla_engine_step(eng, &it, 1, &e) && strstr(e.msg, "position order"),
          "slots out of order taken (%s)", e.msg);
    mhla_sample_slot past = {.sampler = smp, .at = n};
    it.sample = &past;
    it.n_samples = 1;
    CHECK(mhla_engine_step(eng, &it, 1, &e) && strstr(e.msg, "outside"),
          "a slot past the item taken (%s)", e.msg);
    it.n_samples = 0;
    CHECK(mhla_engine_step(eng, &it, 1, &e) && strstr(e.msg, "sample slots"),
          "slots with a count of 0 taken (%s)", e.msg);
    float lp[8];
    int32_t bad = V;
    mhla_token_scores sc = {.next = &bad, .n_next = 1, .n_top = 0, .logprob = lp};
    it = (mhla_batch_item){
        .seq = s, .tokens = prompt, .n_tokens = n, .logits_from = n, .scores = &sc};
    CHECK(mhla_engine_step(eng, &it, 1, &e) && strstr(e.msg, "outside the vocabulary"),
          "a score of a token outside the vocabulary taken (%s)", e.msg);
    CHECK(mhla_seq_pos(s) == 0, "a refused step advanced the sequence");
    mhla_seq_free(s);
    mhla_sampler_free(smp);
    printf("malformed slots and scores: refused before the step\n");
}

int main(int argc, char **argv)
{
    if (argc != 2)
        die("usage: test_step_choose CHECKPOINT");
    mhla_model *m;
    mhla_error e = {0};
    if (mhla_model_load(argv[1], &m, &e))
        die_err("load", &e);
    mhla_engine_options o = {.n_threads = 1};
    if (mhla_engine_create(m, &o, &eng, &e))
        die_err("engine", &e);
    model = m;
    V = mhla_model_config(m)->vocab_size;
    int32_t prompt[13];
    for (int i = 0; i < 13; i++)
        prompt[i] = (int32_t)((i * 37 + 5) % V);
    n_choices_and_scores(prompt, 13);
    verify_drafts(prompt, 13, 0.0f);
    verify_drafts(prompt, 13, 1.0f);
    masks(prompt, 13);
    refusals(prompt, 13);
    mhla_engine_free(eng);
    mhla_model_free(m);
    if (failures)
        return 1;
    printf("engine.step_choose: OK\n");
    return 0;
}
