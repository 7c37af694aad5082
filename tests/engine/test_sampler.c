/*
 * test_sampler.c — unit test of the engine's sampler (engine/sampler.c):
 * greedy and plain temperature equal mhla_sample, top_k / top_p / min_p keep
 * exactly the ids they should, penalties and logit_bias move greedy choices
 * as specified, a seed reproduces its tokens, sampled frequencies match the
 * softmax, bad parameters are refused, and mhla_logprobs is the log-softmax.
 */
#include "engine.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            printf("ok   ");                                                                       \
        } else {                                                                                   \
            printf("FAIL ");                                                                       \
            failures++;                                                                            \
        }                                                                                          \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
    } while (0)

static mhla_sampler *make(const mhla_sampling_params *p, int V, const int32_t *prompt, int np)
{
    mhla_sampler *s = NULL;
    mhla_error e = {0};
    if (mhla_sampler_create(p, V, prompt, np, &s, &e)) {
        printf("FAIL sampler_create: %s\n", e.msg);
        failures++;
        return NULL;
    }
    return s;
}

static int32_t next(mhla_sampler *s, const float *l)
{
    int32_t t = -1;
    mhla_error e = {0};
    if (!s || mhla_sampler_next(s, l, NULL, &t, &e)) {
        printf("FAIL sampler_next: %s\n", e.msg);
        failures++;
        return -1;
    }
    return t;
}

/* Frequencies of each id over n draws of a fresh sampler with params p. */
static void histogram(const mhla_sampling_params *p, const float *l, int V, int n, double *freq)
{
    mhla_sampler *s = make(p, V, NULL, 0);
    for (int i = 0; i < V; i++)
        freq[i] = 0;
    for (int i = 0; i < n && s; i++) {
        int32_t t = next(s, l);
        if (t >= 0 && t < V)
            freq[t] += 1.0 / n;
    }
    mhla_sampler_free(s);
}

/* logits whose softmax is probs */
static void logits_of(const double *probs, int V, float *l)
{
    for (int i = 0; i < V; i++)
        l[i] = (float)log(probs[i]);
}

int main(void)
{
    enum { V = 6 };
    const double probs[V] = {0.40, 0.25, 0.15, 0.10, 0.06, 0.04};
    float l[V];
    logits_of(probs, V, l);
    mhla_sampling_params p;
    double f[V];

    /* greedy, and plain temperature is mhla_sample draw for draw */
    mhla_sampling_defaults(&p);
    p.temperature = 0;
    mhla_sampler *s = make(&p, V, NULL, 0);
    float tie[V] = {0, 3, 1, 3, 2, 0};
    CHECK(next(s, l) == 0 && next(s, tie) == 1, "greedy picks the best, ties go to the lower id");
    mhla_sampler_free(s);
    mhla_sampling_defaults(&p);
    p.temperature = 0.8f;
    p.seed = 99;
    s = make(&p, V, NULL, 0);
    mhla_rng rng;
    mhla_rng_seed(&rng, 99);
    int same = 1;
    for (int i = 0; i < 500; i++)
        same &= next(s, l) == mhla_sample(l, V, 0.8f, &rng);
    mhla_sampler_free(s);
    CHECK(same, "plain temperature sampling equals mhla_sample with the same seed");

    /* distribution sanity: T = 1 follows probs, T = 0.5 follows probs^2 */
    mhla_sampling_defaults(&p);
    p.seed = 1;
    histogram(&p, l, V, 40000, f);
    double worst = 0;
    for (int i = 0; i < V; i++)
        worst = fmax(worst, fabs(f[i] - probs[i]));
    CHECK(worst < 0.012, "T=1 frequencies match softmax (max error %.4f)", worst);
    p.temperature = 0.5f;
    p.top_k = V; /* the filtered path, not mhla_sample: both must be right */
    p.min_p = 1e-6f;
    histogram(&p, l, V, 40000, f);
    double z = 0;
    for (int i = 0; i < V; i++)
        z += probs[i] * probs[i];
    worst = 0;
    for (int i = 0; i < V; i++)
        worst = fmax(worst, fabs(f[i] - probs[i] * probs[i] / z));
    CHECK(worst < 0.012, "T=0.5 (filtered path) frequencies match softmax(l/T) (max error %.4f)",
          worst);

    /* top_k: only the k best, renormalised */
    mhla_sampling_defaults(&p);
    p.top_k = 2;
    p.seed = 2;
    histogram(&p, l, V, 20000, f);
    CHECK(f[2] + f[3] + f[4] + f[5] == 0 && fabs(f[0] - 0.40 / 0.65) < 0.015,
          "top_k=2 keeps ids 0 and 1 in proportion (%.3f %.3f)", f[0], f[1]);
    p.top_k = 1;
    histogram(&p, l, V, 2000, f);
    CHECK(f[0] > 1 - 1e-9, "top_k=1 is greedy");

    /* top_p: smallest best-first prefix holding top_p of the mass */
    mhla_sampling_defaults(&p);
    p.top_p = 0.6f; /* 0.40 < 0.6 <= 0.65: ids 0, 1 */
    p.seed = 3;
    histogram(&p, l, V, 20000, f);
    CHECK(f[0] > 0 && f[1] > 0 && f[2] + f[3] + f[4] + f[5] == 0 &&
              fabs(f[0] - 0.40 / 0.65) < 0.015,
          "top_p=0.6 keeps ids 0 and 1 (%.3f %.3f)", f[0], f[1]);
    p.top_p = 0.85f; /* 0.80 < 0.85 <= 0.90: ids 0..3 */
    histogram(&p, l, V, 20000, f);
    CHECK(f[3] > 0 && f[4] + f[5] == 0, "top_p=0.85 keeps ids 0..3");
    p.top_p = 0.3f;
    histogram(&p, l, V, 2000, f);
    CHECK(f[0] > 1 - 1e-9, "top_p below the best's mass keeps the best only");

    /* a larger vocabulary (the partitioning paths): top_p and top_k keep exactly
     * the ids a full sort says they should */
    {
        enum { W = 700 };
        static float big[W];
        static int rank_of[W];
        mhla_rng g;
        mhla_rng_seed(&g, 77);
        for (int i = 0; i < W; i++) /* ties on purpose: 64 distinct values */
            big[i] = (float)((int)(mhla_rng_uniform(&g) * 64)) / 8.0f;
        /* full sort by (logit desc, id asc) */
        int order[W];
        for (int i = 0; i < W; i++)
            order[i] = i;
        for (int i = 1; i < W; i++)
            for (int j = i; j > 0; j--) {
                int a = order[j - 1], c = order[j];
                if (big[c] > big[a] || (big[c] == big[a] && c < a)) {
                    order[j - 1] = c;
                    order[j] = a;
                } else {
                    break;
                }
            }
        for (int i = 0; i < W; i++)
            rank_of[order[i]] = i;
        double tot = 0, mx = big[order[0]];
        for (int i = 0; i < W; i++)
            tot += exp(big[i] - mx);
        int in_nucleus = 0;
        double cum = 0;
        while (cum < 0.5 * tot)
            cum += exp(big[order[in_nucleus++]] - mx);
        mhla_sampling_defaults(&p);
        p.top_p = 0.5f;
        p.seed = 8;
        s = make(&p, W, NULL, 0);
        int outside = 0, seen[W] = {0}, distinct = 0;
        for (int i = 0; i < 20000; i++) {
            int32_t t = next(s, big);
            if (t < 0 || rank_of[t] >= in_nucleus)
                outside++;
            else if (!seen[t]++)
                distinct++;
        }
        mhla_sampler_free(s);
        CHECK(outside == 0 && distinct == in_nucleus,
              "top_p=0.5 over %d ids: all %d draws-distinct ids are the %d of the sorted nucleus "
              "(%d outside)",
              W, distinct, in_nucleus, outside);
        mhla_sampling_defaults(&p);
        p.top_k = 50;
        p.seed = 9;
        s = make(&p, W, NULL, 0);
        outside = 0;
        for (int i = 0; i < 5000; i++) {
            int32_t t = next(s, big);
            outside += t < 0 || rank_of[t] >= 50;
        }
        mhla_sampler_free(s);
        CHECK(outside == 0, "top_k=50 over %d ids with ties keeps the 50 best by (logit, id)", W);
    }

    /* min_p: keep p >= min_p * p_max (0.4 * 0.3 = 0.12: ids 0, 1, 2) */
    mhla_sampling_defaults(&p);
    p.min_p = 0.3f;
    p.seed = 4;
    histogram(&p, l, V, 20000, f);
    CHECK(f[2] > 0 && f[3] + f[4] + f[5] == 0 && fabs(f[0] - 0.40 / 0.80) < 0.015,
          "min_p=0.3 keeps ids 0..2 in proportion (%.3f %.3f %.3f)", f[0], f[1], f[2]);
    /* filters compose: top_k 3, then top_p 0.7 of (0.40, 0.25, 0.15) -> ids 0, 1 */
    p.min_p = 0;
    p.top_k = 3;
    p.top_p = 0.7f;
    histogram(&p, l, V, 20000, f);
    CHECK(f[2] == 0 && f[0] > 0 && f[1] > 0, "top_k then top_p on what is left");

    /* logit_bias */
    mhla_logit_bias b[2] = {{5, 100.0f}, {0, -100.0f}};
    mhla_sampling_defaults(&p);
    p.logit_bias = b;
    p.n_logit_bias = 1;
    p.seed = 5;
    histogram(&p, l, V, 2000, f);
    CHECK(f[5] > 1 - 1e-9, "logit_bias +100 forces the id");
    p.temperature = 0;
    p.logit_bias = b + 1;
    s = make(&p, V, NULL, 0);
    CHECK(next(s, l) == 1, "logit_bias -100 bans the greedy choice");
    mhla_sampler_free(s);

    /* penalties, greedy */
    float pl[4] = {1.0f, 0.9f, 0.8f, 0.1f};
    mhla_sampling_defaults(&p);
    p.temperature = 0;
    p.presence_penalty = 0.5f;
    s = make(&p, 4, NULL, 0);
    int32_t seq[5];
    for (int i = 0; i < 4; i++)
        seq[i] = next(s, pl);
    mhla_sampler_free(s);
    CHECK(seq[0] == 0 && seq[1] == 1 && seq[2] == 2 && seq[3] == 0,
          "presence_penalty 0.5: 0 1 2 0 (got %d %d %d %d)", seq[0], seq[1], seq[2], seq[3]);
    p.presence_penalty = 0;
    p.frequency_penalty = 0.3f;
    s = make(&p, 4, NULL, 0);
    for (int i = 0; i < 5; i++)
        seq[i] = next(s, pl);
    mhla_sampler_free(s);
    CHECK(seq[0] == 0 && seq[1] == 1 && seq[2] == 2 && seq[3] == 0 && seq[4] == 1,
          "frequency_penalty 0.3: 0 1 2 0 1 (got %d %d %d %d %d)", seq[0], seq[1], seq[2], seq[3],
          seq[4]);
    p.frequency_penalty = 0;
    p.repetition_penalty = 2.0f;
    int32_t prompt[1] = {0};
    s = make(&p, 4, prompt, 1);
    CHECK(next(s, pl) == 1, "repetition_penalty 2 divides a prompt id's positive logit");
    mhla_sampler_free(s);
    float neg[2] = {-1.0f, -1.5f};
    s = make(&p, 2, prompt, 1);
    CHECK(next(s, neg) == 1, "repetition_penalty 2 multiplies a prompt id's negative logit");
    mhla_sampler_free(s);
    p.repetition_penalty = 1.0f;
    s = make(&p, 4, prompt, 1);
    CHECK(next(s, pl) == 0, "without penalties the prompt does not matter");
    mhla_sampler_free(s);

    /* seeds */
    mhla_sampling_defaults(&p);
    p.top_p = 0.95f;
    p.presence_penalty = 0.1f;
    p.seed = 1234;
    mhla_sampler *s1 = make(&p, V, NULL, 0), *s2 = make(&p, V, NULL, 0);
    p.seed = 1235;
    mhla_sampler *s3 = make(&p, V, NULL, 0);
    int eq12 = 1, eq13 = 1;
    for (int i = 0; i < 300; i++) {
        int32_t a = next(s1, l), c = next(s2, l), d = next(s3, l);
        eq12 &= a == c;
        eq13 &= a == d;
    }
    mhla_sampler_free(s1);
    mhla_sampler_free(s2);
    mhla_sampler_free(s3);
    CHECK(eq12 && !eq13, "the same seed gives the same tokens, another seed others");

    /* refusals */
    mhla_error e = {0};
    struct {
        const char *what;
        mhla_sampling_params p;
    } bad[6];
    for (int i = 0; i < 6; i++)
        mhla_sampling_defaults(&bad[i].p);
    bad[0].what = "negative temperature", bad[0].p.temperature = -1;
    bad[1].what = "top_p 0", bad[1].p.top_p = 0;
    bad[2].what = "min_p 2", bad[2].p.min_p = 2;
    bad[3].what = "repetition_penalty 0", bad[3].p.repetition_penalty = 0;
    mhla_logit_bias far = {V, 1.0f};
    bad[4].what = "logit_bias id past the vocabulary", bad[4].p.logit_bias = &far,
    bad[4].p.n_logit_bias = 1;
    bad[5].what = "negative top_k", bad[5].p.top_k = -2;
    for (int i = 0; i < 6; i++) {
        s = NULL;
        e.msg[0] = 0;
        int rc = mhla_sampler_create(&bad[i].p, V, NULL, 0, &s, &e);
        CHECK(rc == -1 && !s && e.msg[0], "refused: %s (%s)", bad[i].what, e.msg);
    }
    mhla_sampling_defaults(&p);
    s = make(&p, V, NULL, 0);
    float nan_l[V] = {0, 1, NAN, 0, 0, 0};
    int32_t t;
    CHECK(s && mhla_sampler_next(s, nan_l, NULL, &t, &e) == -1, "NaN logits refused (%s)", e.msg);
    mhla_sampler_free(s);

    /* logprobs = log-softmax; top list best first, ties to the lower id */
    float lp;
    mhla_logprob top[3];
    int rc = mhla_logprobs(l, V, 4, 3, &lp, top, &e);
    CHECK(rc == 0 && fabs(lp - log(0.06)) < 1e-5 && top[0].id == 0 && top[1].id == 1 &&
              top[2].id == 2 && fabs(top[1].logprob - log(0.25)) < 1e-5,
          "mhla_logprobs is the log-softmax with the best first");
    rc = mhla_logprobs(tie, V, 0, 3, &lp, top, &e);
    CHECK(rc == 0 && top[0].id == 1 && top[1].id == 3 && top[2].id == 4,
          "mhla_logprobs ties go to the lower id");
    CHECK(mhla_logprobs(l, V, V, 1, &lp, top, &e) == -1, "logprobs of an id past V refused");

    if (failures) {
        printf("%d FAILED\n", failures);
        return 1;
    }
    printf("all sampler checks passed\n");
    return 0;
}
