/*
 * Sampling inside the step (mhla_sample_slot) on the GPU: for greedy, plain
 * temperature, top_k, top_p, min_p, logit_bias and the three penalties, over
 * 40 decode steps of a sequence, the token the device picks is the one an
 * independent host evaluation of sampler.c's rules picks from the same raw
 * logits with the same uniform draw, walking the kept ids in id order (which
 * is what the device promises); for greedy and plain temperature it is also
 * exactly mhla_sampler_next's token. Logprobs match mhla_logprobs. Decode
 * steps without host logits (replayed as CUDA graphs) give the same tokens
 * as steps that also return logits. The CPU engine's slots give
 * mhla_sampler_next's tokens.
 *
 * usage: test_cuda_sampling MODEL_DIR     (exit 77 without a usable GPU)
 */
#include "engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_RNG_SEED 0x853c49e6748fea9bull
#include "check.h"
#include "gpu_engine.h"

enum { PROMPT = 11, STEPS = 40 };

static int V;
static int boundary_skips;

typedef struct {
    const char *name;
    mhla_sampling_params p;
    int plain; /* the host walks in id order too: tokens must match mhla_sampler_next */
} config;

/* Host model of the device's rule: sampler.c's adjustments and filters, the
 * draw walking the kept ids in id order. Returns the token, or -1 when the
 * draw lands within rounding of a boundary (not comparable). */
static int reference(const mhla_sampling_params *p, const float *raw, const int *counts,
                     const unsigned char *in_prompt, double u)
{
    float *l = malloc((size_t)V * sizeof *l);
    double *w = malloc((size_t)V * sizeof *w);
    memcpy(l, raw, (size_t)V * sizeof *l);
    for (int i = 0; i < p->n_logit_bias; i++)
        l[p->logit_bias[i].id] += p->logit_bias[i].bias;
    int pen = p->presence_penalty != 0 || p->frequency_penalty != 0 || p->repetition_penalty != 1;
    for (int i = 0; pen && i < V; i++) {
        if (p->repetition_penalty != 1.0f && (counts[i] || in_prompt[i]))
            l[i] = l[i] > 0 ? l[i] / p->repetition_penalty : l[i] * p->repetition_penalty;
        if (counts[i])
            l[i] -= p->presence_penalty + p->frequency_penalty * (float)counts[i];
    }
    int best = 0;
    for (int i = 1; i < V; i++)
        if (l[i] > l[best])
            best = i;
    int tok = best;
    if (p->temperature > 0 && isfinite(l[best])) {
        int n = 0;
        for (int i = 0; i < V; i++) {
            w[i] = exp(((double)l[i] - l[best]) / p->temperature);
            if (p->min_p > 0 && w[i] < p->min_p)
                w[i] = -1; /* out */
            else
                n++;
        }
        /* rank of each kept id, best first (higher logit, then lower id) */
        int *rank = calloc((size_t)V, sizeof *rank);
        for (int i = 0; i < V; i++)
            for (int j = 0; j < V; j++)
                if (w[j] >= 0 && w[i] >= 0 && (l[j] > l[i] || (l[j] == l[i] && j < i)))
                    rank[i]++;
        if (p->top_k > 0 && p->top_k < n)
            for (int i = 0; i < V; i++)
                if (w[i] >= 0 && rank[i] >= p->top_k)
                    w[i] = -1;
        double total = 0;
        for (int i = 0; i < V; i++)
            total += w[i] >= 0 ? w[i] : 0;
        if (p->top_p < 1) {
            double want = p->top_p * total, t2 = 0;
            for (int i = 0; i < V; i++) {
                if (w[i] < 0)
                    continue;
                double better = 0; /* mass of kept ids ranked above i */
                for (int j = 0; j < V; j++)
                    if (w[j] >= 0 && rank[j] < rank[i])
                        better += w[j];
                if (better >= want)
                    w[i] = -2; /* out, but remembered to check margins */
                else
                    t2 += w[i];
            }
            total = t2;
        }
        double target = u * total, acc = 0;
        tok = -1;
        for (int i = 0; i < V; i++) {
            if (w[i] < 0)
                continue;
            if (fabs(acc + w[i] - target) < 1e-9 * total) {
                tok = -1; /* too close to call */
                break;
            }
            acc += w[i];
            if (acc > target) {
                tok = i;
                break;
            }
        }
        free(rank);
    }
    free(l);
    free(w);
    return tok;
}

static mhla_engine *engine(const mhla_model *m, mhla_device dev)
{
    mhla_engine_options o = {.n_threads = 2, .device = dev, .gpu_weights = MHLA_GPU_WEIGHTS_F32};
    return engine_or_skip(m, &o);
}

/* Runs the prompt and STEPS decode steps with a sample slot on engine e;
 * with_logits also returns each sampled row's raw logits (into raw). */
static void run(mhla_engine *e, const config *cf, const int32_t *prompt, int with_logits,
                int32_t *tokens, float *raw, mhla_sample_slot *slots)
{
    mhla_error err;
    mhla_sampler *s;
    if (mhla_sampler_create(&cf->p, V, prompt, PROMPT, &s, &err))
        die_err("sampler", &err);
    mhla_seq *q;
    if (mhla_engine_seq_create(e, &q, &err))
        die_err("sequence", &err);
    for (int k = 0; k <= STEPS; k++) {
        mhla_sample_slot *sl = &slots[k];
        memset(sl, 0, sizeof *sl);
        sl->sampler = s;
        sl->n_top = 5;
        int n = k == 0 ? PROMPT : 1;
        sl->at = n - 1;
        mhla_batch_item it = {.seq = q,
                              .tokens = k == 0 ? prompt : &tokens[k - 1],
                              .n_tokens = n,
                              .logits_from = n - 1,
                              .logits = with_logits ? raw + (size_t)k * V : NULL,
                              .sample = sl,
                              .n_samples = 1};
        if (mhla_engine_step(e, &it, 1, &err))
            die_err("forward", &err);
        CHECK(sl->status == 0, "%s step %d: slot failed: %s", cf->name, k, sl->err.msg);
        tokens[k] = sl->token;
    }
    mhla_seq_free(q);
    mhla_sampler_free(s);
}

static void check_config(mhla_engine *gpu, mhla_engine *cpu, const config *cf)
{
    int32_t prompt[PROMPT], tok[STEPS + 1], tok_graph[STEPS + 1], tok_cpu[STEPS + 1];
    for (int i = 0; i < PROMPT; i++)
        prompt[i] = (int32_t)rnd(V);
    float *raw = malloc((size_t)(STEPS + 1) * V * sizeof *raw);
    float *raw_cpu = malloc((size_t)(STEPS + 1) * V * sizeof *raw_cpu);
    mhla_sample_slot *slots = malloc((STEPS + 1) * sizeof *slots);
    mhla_sample_slot *slots2 = malloc((STEPS + 1) * sizeof *slots2);

    run(gpu, cf, prompt, 1, tok, raw, slots);
    run(gpu, cf, prompt, 0, tok_graph, NULL, slots2);
    for (int k = 0; k <= STEPS; k++)
        CHECK(tok[k] == tok_graph[k], "%s step %d: %d with logits, %d without (graph)", cf->name, k,
              tok[k], tok_graph[k]);

    /* the host rules on the device's raw logits, with the same draws */
    int *counts = calloc((size_t)V, sizeof *counts);
    unsigned char *in_prompt = calloc((size_t)V, 1);
    for (int i = 0; i < PROMPT; i++)
        in_prompt[prompt[i]] = 1;
    mhla_rng rng;
    mhla_rng_seed(&rng, cf->p.seed);
    mhla_sampler *host;
    mhla_error err;
    if (mhla_sampler_create(&cf->p, V, prompt, PROMPT, &host, &err))
        die_err("sampler", &err);
    for (int k = 0; k <= STEPS; k++) {
        const float *r = raw + (size_t)k * V;
        double u = cf->p.temperature > 0 ? mhla_rng_uniform(&rng) : 0;
        int want = reference(&cf->p, r, counts, in_prompt, u);
        if (want < 0)
            boundary_skips++;
        else
            CHECK(tok[k] == want, "%s step %d: device token %d, host rules give %d", cf->name, k,
                  tok[k], want);
        if (cf->plain) {
            int32_t h;
            if (mhla_sampler_next(host, r, NULL, &h, &err))
                die_err("host sampler", &err);
            CHECK(h == tok[k], "%s step %d: device %d, mhla_sampler_next %d", cf->name, k, tok[k],
                  h);
        }
        float lp;
        mhla_logprob top[5];
        if (mhla_logprobs(r, V, tok[k], 5, &lp, top, &err))
            die_err("logprobs", &err);
        CHECK(fabsf(lp - slots[k].token_logprob) <= 1e-5f * (1 + fabsf(lp)),
              "%s step %d: token logprob %g vs %g", cf->name, k, slots[k].token_logprob, lp);
        for (int j = 0; j < 5; j++)
            CHECK(top[j].id == slots[k].top[j].id &&
                      fabsf(top[j].logprob - slots[k].top[j].logprob) <= 1e-5f * (1 + fabsf(lp)),
                  "%s step %d: top %d is %d (%g), host %d (%g)", cf->name, k, j, slots[k].top[j].id,
                  slots[k].top[j].logprob, top[j].id, top[j].logprob);
        counts[tok[k]]++;
    }
    mhla_sampler_free(host);

    /* the CPU engine's slots are mhla_sampler_next itself */
    run(cpu, cf, prompt, 1, tok_cpu, raw_cpu, slots2);
    mhla_sampler *h2;
    if (mhla_sampler_create(&cf->p, V, prompt, PROMPT, &h2, &err))
        die_err("sampler", &err);
    for (int k = 0; k <= STEPS; k++) {
        int32_t h;
        if (mhla_sampler_next(h2, raw_cpu + (size_t)k * V, NULL, &h, &err))
            die_err("host sampler", &err);
        CHECK(h == tok_cpu[k], "%s step %d: CPU slot %d, mhla_sampler_next %d", cf->name, k,
              tok_cpu[k], h);
    }
    mhla_sampler_free(h2);
    int differ = 0;
    for (int k = 0; k <= STEPS; k++)
        differ += tok[k] != tok_graph[k];
    printf("%-22s tokens %d %d %d ... (%d steps; graph run identical: %s)\n", cf->name, tok[0],
           tok[1], tok[2], STEPS + 1, differ ? "no" : "yes");
    free(counts);
    free(in_prompt);
    free(raw);
    free(raw_cpu);
    free(slots);
    free(slots2);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
        return 2;
    }
    mhla_model *m;
    mhla_error err;
    if (mhla_model_load(argv[1], &m, &err))
        die_err("model", &err);
    V = mhla_model_config(m)->vocab_size;
    mhla_engine *gpu = engine(m, MHLA_DEVICE_CUDA), *cpu = engine(m, MHLA_DEVICE_CPU);

    mhla_logit_bias bias[3] = {{3, 2.5f}, {7, -100.0f}, {3, 0.5f}};
    config cfs[8];
    const char *names[8] = {"greedy",           "temperature 0.9",   "top_k 5",
                            "top_p 0.8",        "min_p 0.2",         "all filters",
                            "penalties + bias", "greedy + penalties"};
    for (int i = 0; i < 8; i++) {
        cfs[i].name = names[i];
        mhla_sampling_defaults(&cfs[i].p);
        cfs[i].p.seed = 1000 + (uint64_t)i;
        cfs[i].plain = 0;
    }
    cfs[0].p.temperature = 0;
    cfs[0].plain = 1;
    cfs[1].p.temperature = 0.9f;
    cfs[1].plain = 1;
    cfs[2].p.top_k = 5;
    cfs[3].p.top_p = 0.8f;
    cfs[4].p.min_p = 0.2f;
    cfs[5].p.temperature = 1.3f;
    cfs[5].p.top_k = 20;
    cfs[5].p.top_p = 0.9f;
    cfs[5].p.min_p = 0.01f;
    cfs[6].p.repetition_penalty = 1.3f;
    cfs[6].p.presence_penalty = 0.5f;
    cfs[6].p.frequency_penalty = 0.3f;
    cfs[6].p.logit_bias = bias;
    cfs[6].p.n_logit_bias = 3;
    cfs[7].p.temperature = 0;
    cfs[7].p.repetition_penalty = 1.5f;
    cfs[7].p.frequency_penalty = 1.0f;
    cfs[7].plain = 1; /* greedy is one rule wherever it runs */
    for (int i = 0; i < 8; i++)
        check_config(gpu, cpu, &cfs[i]);

    /* a slot that cannot work is refused before anything runs */
    mhla_seq *q;
    if (mhla_engine_seq_create(gpu, &q, &err))
        die_err("sequence", &err);
    int32_t one = 1;
    mhla_sample_slot bad = {.sampler = NULL, .n_top = 0};
    mhla_batch_item it = {
        .seq = q, .tokens = &one, .n_tokens = 1, .logits_from = 1, .sample = &bad, .n_samples = 1};
    CHECK(mhla_engine_step(gpu, &it, 1, &err) != 0 && strstr(err.msg, "sample slot"),
          "a slot without a sampler was taken (%s)", err.msg);
    CHECK(mhla_seq_pos(q) == 0, "a refused step advanced the sequence");
    mhla_seq_free(q);

    mhla_device_stats st;
    mhla_engine_device_stats(gpu, &st);
    CHECK(st.graph_replays > 0, "no decode step with device sampling was replayed as a graph");
    printf("graph replays %llu; draws too close to a boundary to compare: %d\n",
           (unsigned long long)st.graph_replays, boundary_skips);
    mhla_engine_free(gpu);
    mhla_engine_free(cpu);
    mhla_model_free(m);
    if (failures) {
        printf("FAIL: %d checks failed\n", failures);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
