/*
 * sampling.c — per-choice sampling parameters on top of the engine's sampler:
 * logit_bias, presence / frequency / repetition penalties, temperature,
 * top_k, top_p, min_p, each choice with its own seeded generator (so a seed
 * gives the same tokens whatever else shares the batch). With none of the
 * filters the engine's mhla_sample is used as is, so greedy and plain
 * temperature sampling match mhla-generate exactly.
 */
#include "srv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct srv_sampler {
    srv_sampling s;
    int vocab;
    mhla_rng rng;
    int plain;              /* no filters or penalties: engine sampler */
    int *counts;            /* generated-token counts (penalties) */
    unsigned char *in_prompt; /* repetition penalty: ids seen in the prompt */
    float *scratch;
    struct cand {
        float l;
        int id;
    } *cand;
};

int srv_sampler_create(const srv_sampling *s, int vocab, uint64_t seed, const int32_t *prompt,
                       int n_prompt, srv_sampler **out, char *err, size_t errlen)
{
    *out = NULL;
    srv_sampler *sm = calloc(1, sizeof *sm);
    if (!sm)
        goto oom;
    sm->s = *s;
    sm->s.bias = NULL; /* copied below: the params may go first */
    sm->vocab = vocab;
    mhla_rng_seed(&sm->rng, seed);
    int penalties = s->presence_penalty != 0.0f || s->frequency_penalty != 0.0f ||
                    s->repetition_penalty != 1.0f;
    sm->plain = !penalties && s->n_bias == 0 && s->top_k == 0 && s->top_p >= 1.0f &&
                s->min_p <= 0.0f;
    if (s->n_bias) {
        sm->s.bias = malloc((size_t)s->n_bias * sizeof *s->bias);
        if (!sm->s.bias)
            goto oom;
        memcpy(sm->s.bias, s->bias, (size_t)s->n_bias * sizeof *s->bias);
    }
    if (penalties) {
        sm->counts = calloc((size_t)vocab, sizeof *sm->counts);
        sm->in_prompt = calloc((size_t)vocab, 1);
        if (!sm->counts || !sm->in_prompt)
            goto oom;
        for (int i = 0; i < n_prompt; i++)
            if (prompt[i] >= 0 && prompt[i] < vocab)
                sm->in_prompt[prompt[i]] = 1;
    }
    if (!sm->plain) {
        sm->scratch = malloc((size_t)vocab * sizeof *sm->scratch);
        sm->cand = malloc((size_t)vocab * sizeof *sm->cand);
        if (!sm->scratch || !sm->cand)
            goto oom;
    }
    *out = sm;
    return 0;
oom:
    srv_sampler_free(sm);
    snprintf(err, errlen, "out of memory for a sampler over %d ids", vocab);
    return -1;
}

void srv_sampler_free(srv_sampler *sm)
{
    if (!sm)
        return;
    free(sm->s.bias);
    free(sm->counts);
    free(sm->in_prompt);
    free(sm->scratch);
    free(sm->cand);
    free(sm);
}

static int cand_cmp(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->l != y->l)
        return x->l > y->l ? -1 : 1;
    return x->id - y->id;
}

static int32_t filtered(srv_sampler *sm)
{
    const srv_sampling *s = &sm->s;
    int V = sm->vocab;
    float *l = sm->scratch;
    if (!(s->temperature > 0.0f)) { /* greedy on the adjusted logits, lowest id wins ties */
        int best = 0;
        for (int i = 1; i < V; i++)
            if (l[i] > l[best])
                best = i;
        return best;
    }
    for (int i = 0; i < V; i++) {
        sm->cand[i].l = l[i];
        sm->cand[i].id = i;
    }
    qsort(sm->cand, (size_t)V, sizeof *sm->cand, cand_cmp);
    int keep = V;
    if (s->top_k > 0 && s->top_k < keep)
        keep = s->top_k;
    double max = sm->cand[0].l, T = s->temperature;
    /* weights exp((l - max) / T), kept in scratch in sorted order */
    double total = 0.0;
    for (int i = 0; i < keep; i++) {
        double w = exp(((double)sm->cand[i].l - max) / T);
        if (s->min_p > 0.0f && w < (double)s->min_p) { /* weight of the best is 1 */
            keep = i;
            break;
        }
        total += w;
    }
    if (keep == 0)
        keep = 1, total = 1.0;
    if (s->top_p < 1.0f) {
        double cum = 0.0, want = (double)s->top_p * total;
        int k = 0;
        while (k < keep) {
            cum += exp(((double)sm->cand[k].l - max) / T);
            k++;
            if (cum >= want)
                break;
        }
        keep = k;
        total = cum;
    }
    double target = mhla_rng_uniform(&sm->rng) * total, acc = 0.0;
    for (int i = 0; i < keep; i++) {
        acc += exp(((double)sm->cand[i].l - max) / T);
        if (acc > target)
            return sm->cand[i].id;
    }
    return sm->cand[keep - 1].id;
}

int32_t srv_sampler_next(srv_sampler *sm, const float *logits)
{
    int32_t tok;
    if (sm->plain) {
        tok = (int32_t)mhla_sample(logits, sm->vocab, sm->s.temperature, &sm->rng);
    } else {
        const srv_sampling *s = &sm->s;
        float *l = sm->scratch;
        memcpy(l, logits, (size_t)sm->vocab * sizeof *l);
        for (int i = 0; i < s->n_bias; i++)
            l[s->bias[i].id] += s->bias[i].bias;
        if (sm->counts) {
            for (int i = 0; i < sm->vocab; i++) {
                if (s->repetition_penalty != 1.0f && (sm->counts[i] || sm->in_prompt[i]))
                    l[i] = l[i] > 0 ? l[i] / s->repetition_penalty : l[i] * s->repetition_penalty;
                if (sm->counts[i])
                    l[i] -= s->presence_penalty + s->frequency_penalty * (float)sm->counts[i];
            }
        }
        tok = filtered(sm);
    }
    if (sm->counts)
        sm->counts[tok]++;
    return tok;
}
