/*
 * sampler.c — the per-sequence sampler: logit_bias, repetition / presence /
 * frequency penalties, temperature, top_k, min_p, top_p, each sequence with
 * its own seeded generator (so a seed gives the same tokens whatever else
 * shares the batch), and log-probabilities for logprobs.
 *
 * Order of the steps: bias, then penalties (on the biased logits), then the
 * filters on softmax(l / T). top_k and min_p both keep "the best m" and so
 * commute; top_p is applied last, on the mass that is left.
 *
 * With none of the filters, penalties or biases the engine's mhla_sample is
 * used as is, so greedy and plain temperature sampling give the same tokens
 * as mhla-generate with the same seed. Every path draws exactly one uniform
 * per token when T > 0 and none when greedy.
 */
#include "engine_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Plain sampling: greedy (lowest id wins ties) or inverse-CDF on
 * softmax(logits / T) in double precision, in id order. */
int mhla_sample(const float *logits, int vocab_size, float temperature, mhla_rng *rng)
{
    int best = 0;
    for (int i = 1; i < vocab_size; i++)
        if (logits[i] > logits[best])
            best = i;
    if (!(temperature > 0.0f) || !rng)
        return best;
    double max = logits[best], total = 0.0;
    for (int i = 0; i < vocab_size; i++)
        total += exp(((double)logits[i] - max) / temperature);
    double target = mhla_rng_uniform(rng) * total, acc = 0.0;
    for (int i = 0; i < vocab_size; i++) {
        acc += exp(((double)logits[i] - max) / temperature);
        if (acc > target)
            return i;
    }
    return best;
}

typedef struct {
    float l;
    int32_t id;
    double w; /* exp((l - max) / T) once the filters run */
} cand;

struct mhla_sampler {
    mhla_sampling_params p;
    mhla_logit_bias *bias; /* own copy of p.logit_bias */
    int vocab;
    mhla_rng rng;
    int plain;                /* nothing but temperature: mhla_sample */
    int *counts;              /* generated-token counts (penalties) */
    unsigned char *in_prompt; /* repetition penalty: ids seen in the prompt */
    int32_t *seen;            /* the distinct ids of counts and in_prompt, for the GPU */
    int n_seen;
    float *scratch; /* adjusted logits */
    uint64_t *bits; /* a mask's bitmask, where it gives bits and no apply */
    cand *cand;
};

void mhla_sampling_defaults(mhla_sampling_params *p)
{
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_p = 1.0f;
    p->repetition_penalty = 1.0f;
}

static int check_params(const mhla_sampling_params *p, int vocab, mhla_error *err)
{
    if (vocab <= 0)
        return eng_fail(err, "sampler: vocabulary size %d is not positive", vocab);
    if (!isfinite(p->temperature) || p->temperature < 0.0f)
        return eng_fail(err, "sampler: temperature %g must be finite and >= 0",
                        (double)p->temperature);
    if (p->top_k < 0)
        return eng_fail(err, "sampler: top_k %d must be >= 0 (0: off)", p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return eng_fail(err, "sampler: top_p %g must be in (0, 1]", (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return eng_fail(err, "sampler: min_p %g must be in [0, 1]", (double)p->min_p);
    if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
        return eng_fail(err, "sampler: presence and frequency penalties must be finite");
    if (!(p->repetition_penalty > 0.0f) || !isfinite(p->repetition_penalty))
        return eng_fail(err, "sampler: repetition_penalty %g must be finite and > 0",
                        (double)p->repetition_penalty);
    if (p->n_logit_bias < 0 || (p->n_logit_bias > 0 && !p->logit_bias))
        return eng_fail(err, "sampler: %d logit biases given without an array", p->n_logit_bias);
    for (int i = 0; i < p->n_logit_bias; i++) {
        if (p->logit_bias[i].id < 0 || p->logit_bias[i].id >= vocab)
            return eng_fail(err, "sampler: logit_bias token id %d is outside [0, %d)",
                            (int)p->logit_bias[i].id, vocab);
        if (!isfinite(p->logit_bias[i].bias))
            return eng_fail(err, "sampler: logit_bias of token %d is not finite",
                            (int)p->logit_bias[i].id);
    }
    return 0;
}

int mhla_sampler_create(const mhla_sampling_params *p, int vocab, const int32_t *prompt,
                        int n_prompt, mhla_sampler **out, mhla_error *err)
{
    *out = NULL;
    if (check_params(p, vocab, err))
        return -1;
    mhla_sampler *s = calloc(1, sizeof *s);
    if (!s)
        goto oom;
    s->p = *p;
    s->vocab = vocab;
    mhla_rng_seed(&s->rng, p->seed);
    int penalties = p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f ||
                    p->repetition_penalty != 1.0f;
    s->plain = !penalties && p->n_logit_bias == 0 && (p->top_k == 0 || p->top_k >= vocab) &&
               p->top_p >= 1.0f && p->min_p <= 0.0f;
    if (p->n_logit_bias) {
        s->bias = malloc((size_t)p->n_logit_bias * sizeof *s->bias);
        if (!s->bias)
            goto oom;
        memcpy(s->bias, p->logit_bias, (size_t)p->n_logit_bias * sizeof *s->bias);
    }
    s->p.logit_bias = s->bias; /* the caller's array may go first */
    if (penalties) {
        s->counts = calloc((size_t)vocab, sizeof *s->counts);
        s->in_prompt = calloc((size_t)vocab, 1);
        s->seen = malloc((size_t)vocab * sizeof *s->seen);
        if (!s->counts || !s->in_prompt || !s->seen)
            goto oom;
        for (int i = 0; i < n_prompt; i++)
            if (prompt && prompt[i] >= 0 && prompt[i] < vocab && !s->in_prompt[prompt[i]]) {
                s->in_prompt[prompt[i]] = 1;
                s->seen[s->n_seen++] = prompt[i];
            }
    }
    if (!s->plain) {
        s->scratch = malloc((size_t)vocab * sizeof *s->scratch);
        s->cand = malloc((size_t)vocab * sizeof *s->cand);
        if (!s->scratch || !s->cand)
            goto oom;
    }
    *out = s;
    return 0;
oom:
    mhla_sampler_free(s);
    return eng_fail_as(err, MHLA_ERR_NOMEM, "sampler: out of memory for a vocabulary of %d ids",
                       vocab);
}

void mhla_sampler_free(mhla_sampler *s)
{
    if (!s)
        return;
    free(s->bias);
    free(s->counts);
    free(s->in_prompt);
    free(s->seen);
    free(s->scratch);
    free(s->bits);
    free(s->cand);
    free(s);
}

/* Better first: higher logit, then lower id (a total order, so every
 * selection and sort below is deterministic). */
static int better(const cand *a, const cand *b)
{
    return a->l > b->l || (a->l == b->l && a->id < b->id);
}

static int cand_cmp(const void *x, const void *y)
{
    const cand *a = x, *b = y;
    return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

static void swap(cand *a, cand *b)
{
    cand t = *a;
    *a = *b;
    *b = t;
}

static int32_t argmax(const float *l, int V)
{
    int best = 0;
    for (int i = 1; i < V; i++)
        if (l[i] > l[best])
            best = i;
    return best;
}

/* Partitions c[lo..hi) around a median-of-three pivot: better ones first.
 * Returns the pivot's final index. */
static int partition(cand *c, int lo, int hi)
{
    int last = hi - 1, mid = lo + (last - lo) / 2;
    if (better(&c[mid], &c[lo]))
        swap(&c[mid], &c[lo]);
    if (better(&c[last], &c[lo]))
        swap(&c[last], &c[lo]);
    if (better(&c[mid], &c[last]))
        swap(&c[mid], &c[last]);
    cand pivot = c[last];
    int st = lo;
    for (int i = lo; i < last; i++)
        if (better(&c[i], &pivot))
            swap(&c[i], &c[st++]);
    swap(&c[st], &c[last]);
    return st;
}

/* Rearranges c[0..n) so that its k best come first (in no order). */
static void select_best(cand *c, int n, int k)
{
    int lo = 0, hi = n; /* the k-th best lies in c[lo..hi) */
    while (hi - lo > 1) {
        int st = partition(c, lo, hi);
        if (st == k - 1 || st == k)
            return;
        if (st < k)
            lo = st + 1;
        else
            hi = st;
    }
}

/* top_p: rearranges c[0..n) so that the smallest best-first prefix whose
 * weight reaches want comes first (in no particular order: any fixed order
 * samples the same distribution) and returns its size; *mass gets its weight.
 * An id belongs to it iff the ids better than it weigh less than want. Expected
 * O(n) by partitioning instead of sorting the whole vocabulary. */
static int nucleus(cand *c, int n, double want, double *mass)
{
    int lo = 0, hi = n; /* c[0..lo) is in, c[hi..n) is out, weight acc in */
    double acc = 0.0;
    while (hi - lo > 16) {
        int st = partition(c, lo, hi);
        double better_mass = 0.0;
        for (int i = lo; i < st; i++)
            better_mass += c[i].w;
        if (acc + better_mass >= want) { /* the pivot and worse are out */
            hi = st;
            continue;
        }
        acc += better_mass + c[st].w; /* the pivot is in, so is everything better */
        lo = st + 1;
        if (acc >= want) {
            *mass = acc;
            return lo;
        }
    }
    qsort(c + lo, (size_t)(hi - lo), sizeof *c, cand_cmp);
    while (lo < hi && acc < want)
        acc += c[lo++].w;
    if (lo == 0) /* want <= 0 cannot happen for top_p > 0, but keep the best */
        acc = c[lo++].w;
    *mass = acc;
    return lo;
}

/* Sampling from the adjusted logits in s->scratch. */
static int32_t filtered(mhla_sampler *s)
{
    const mhla_sampling_params *p = &s->p;
    const float *l = s->scratch;
    int V = s->vocab;
    int32_t best = argmax(l, V);
    if (!(p->temperature > 0.0f))
        return best;
    double max = l[best], T = p->temperature;
    if (!isfinite(max)) { /* everything -inf (or +inf present): nothing to weigh */
        mhla_rng_uniform(&s->rng);
        return best;
    }
    /* min_p: keep w >= min_p (the best has weight 1) */
    int n = 0;
    for (int i = 0; i < V; i++) {
        double w = exp(((double)l[i] - max) / T);
        if (p->min_p > 0.0f && w < (double)p->min_p)
            continue;
        s->cand[n++] = (cand){.l = l[i], .id = i, .w = w};
    }
    if (p->top_k > 0 && p->top_k < n) {
        select_best(s->cand, n, p->top_k);
        n = p->top_k;
    }
    double total = 0.0;
    for (int i = 0; i < n; i++)
        total += s->cand[i].w;
    if (p->top_p < 1.0f)
        n = nucleus(s->cand, n, (double)p->top_p * total, &total);
    double target = mhla_rng_uniform(&s->rng) * total, acc = 0.0;
    for (int i = 0; i < n; i++) {
        acc += s->cand[i].w;
        if (acc > target)
            return s->cand[i].id;
    }
    return s->cand[n - 1].id;
}

/* logit_bias, then the penalties, on the sampler's copy of the row. */
static void adjust(mhla_sampler *s, float *l)
{
    const mhla_sampling_params *p = &s->p;
    for (int i = 0; i < p->n_logit_bias; i++)
        l[p->logit_bias[i].id] += p->logit_bias[i].bias;
    if (!s->counts)
        return;
    for (int i = 0; i < s->vocab; i++) {
        if (p->repetition_penalty != 1.0f && (s->counts[i] || s->in_prompt[i]))
            l[i] = l[i] > 0 ? l[i] / p->repetition_penalty : l[i] * p->repetition_penalty;
        if (s->counts[i])
            l[i] -= p->presence_penalty + p->frequency_penalty * (float)s->counts[i];
    }
}

/* A mask without apply, applied through its bitmask: forbidden ids to -inf. */
static int apply_bits(mhla_sampler *s, const mhla_token_mask *mask, mhla_error *err)
{
    size_t words = ((size_t)s->vocab + 63) / 64;
    if (!s->bits && !(s->bits = malloc(words * sizeof *s->bits)))
        return eng_fail_as(err, MHLA_ERR_NOMEM, "sampler: out of memory for the token mask");
    if (mask->bits(mask->ctx, s->bits, s->vocab, err))
        return -1;
    for (int i = 0; i < s->vocab; i++)
        if (!((s->bits[i >> 6] >> (i & 63)) & 1u))
            s->scratch[i] = -INFINITY;
    return 0;
}

/* The mask on the sampler's copy of the row; -1 when it fails or allows no id. */
static int apply_mask(mhla_sampler *s, const mhla_token_mask *mask, mhla_error *err)
{
    if (mask->apply ? mask->apply(mask->ctx, s->scratch, s->vocab, err) : apply_bits(s, mask, err))
        return -1;
    for (int i = 0; i < s->vocab; i++)
        if (s->scratch[i] != -INFINITY)
            return 0;
    return eng_fail(err, "sampler: the token mask allows no token here");
}

int mhla_sampler_next(mhla_sampler *s, const float *logits, const mhla_token_mask *mask,
                      int32_t *token, mhla_error *err)
{
    int V = s->vocab;
    for (int i = 0; i < V; i++)
        if (isnan(logits[i]))
            return eng_fail(err, "sampler: the logit of token %d is NaN", i);
    int32_t tok;
    if (s->plain && !mask) {
        tok = (int32_t)mhla_sample(logits, V, s->p.temperature, &s->rng);
    } else {
        /* a plain sampler makes its copy of the row the first time a mask comes */
        if (!s->scratch && !(s->scratch = malloc((size_t)V * sizeof *s->scratch)))
            return eng_fail_as(err, MHLA_ERR_NOMEM, "sampler: out of memory for the token mask");
        memcpy(s->scratch, logits, (size_t)V * sizeof *s->scratch);
        adjust(s, s->scratch);
        if (mask && apply_mask(s, mask, err))
            return -1;
        tok =
            s->plain ? (int32_t)mhla_sample(s->scratch, V, s->p.temperature, &s->rng) : filtered(s);
    }
    eng_sampler_record(s, tok);
    *token = tok;
    return mask && mask->accept ? mask->accept(mask->ctx, tok, err) : 0;
}

void eng_sampler_view_of(const mhla_sampler *s, eng_sampler_view *v)
{
    v->p = &s->p;
    v->counts = s->counts;
    v->in_prompt = s->in_prompt;
    v->seen = s->seen;
    v->n_seen = s->n_seen;
}

double eng_sampler_draw(mhla_sampler *s)
{
    return s->p.temperature > 0.0f ? mhla_rng_uniform(&s->rng) : 0.0;
}

void eng_sampler_record(mhla_sampler *s, int32_t tok)
{
    if (!s->counts || tok < 0 || tok >= s->vocab)
        return;
    if (s->counts[tok]++ == 0 && !s->in_prompt[tok])
        s->seen[s->n_seen++] = tok;
}

int mhla_logprobs(const float *logits, int V, int32_t token, int n_top, float *token_logprob,
                  mhla_logprob *top, mhla_error *err)
{
    if (V <= 0 || token < 0 || token >= V)
        return eng_fail(err, "logprobs: token %d is outside the vocabulary [0, %d)", (int)token, V);
    if (n_top < 0 || n_top > V || (n_top > 0 && !top))
        return eng_fail(err, "logprobs: %d alternatives asked of a vocabulary of %d", n_top, V);
    double max = -INFINITY;
    for (int i = 0; i < V; i++) {
        if (isnan(logits[i]))
            return eng_fail(err, "logprobs: the logit of token %d is NaN", i);
        if (logits[i] > max)
            max = logits[i];
    }
    double sum = 0.0;
    for (int i = 0; i < V; i++)
        sum += exp((double)logits[i] - max);
    double lse = max + log(sum);
    *token_logprob = (float)((double)logits[token] - lse);
    /* the n_top best by insertion into a sorted list: O(V) for small n_top */
    int have = 0;
    for (int i = 0; i < V && n_top > 0; i++) {
        cand c = {.l = logits[i], .id = i};
        if (have == n_top) {
            cand last = {.l = top[have - 1].logprob, .id = top[have - 1].id};
            if (!better(&c, &last))
                continue;
            have--;
        }
        int j = have++;
        while (j > 0) {
            cand prev = {.l = top[j - 1].logprob, .id = top[j - 1].id};
            if (!better(&c, &prev))
                break;
            top[j] = top[j - 1];
            j--;
        }
        top[j].id = c.id;
        top[j].logprob = c.l; /* the raw logit until the end */
    }
    for (int i = 0; i < have; i++)
        top[i].logprob = (float)((double)top[i].logprob - lse);
    return 0;
}
