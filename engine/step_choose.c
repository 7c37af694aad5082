/*
 * step_choose.c — the one place a token is chosen. Before the backend runs a
 * step, each batch item is given the logits rows its sample slots and token
 * scores need (the caller's buffer when it holds them, else the engine's own
 * rows); after it, every slot the backend did not sample on its device is
 * sampled here, and every score computed, in the order the items and their
 * slots were given. Verifying drafted tokens is the order's consequence: a
 * slot whose token is not the one the item fed next ends its item's slots.
 */
#include "engine_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int lo;     /* the first position the run item's logits hold */
    int own;    /* they are the engine's rows, not the caller's */
    int failed; /* its device slot's mask failed before the step (bits) */
} item_rows;

struct eng_step_rows {
    mhla_batch_item *run; /* what the backend runs: the items with their rows */
    item_rows *at;
    int cap_run, cap_at;
    float *logits;
    size_t cap_floats;
    uint64_t *bits;        /* the device slots' masks, (vocab + 63) / 64 words each */
    const uint64_t **mask; /* per item: its device slot's words in bits, or NULL */
    size_t cap_words;
    int cap_mask;
};

void eng_step_rows_free(eng_step_rows *r)
{
    if (!r)
        return;
    free(r->run);
    free(r->at);
    free(r->logits);
    free(r->bits);
    free(r->mask);
    free(r);
}

static int bad_slot(const mhla_batch_item *it, int b, int i, int prev_at, mhla_error *err)
{
    const mhla_sample_slot *sl = &it->sample[i];
    if (!sl->sampler || sl->n_top < -1 || sl->n_top > MHLA_MAX_TOP_LOGPROBS)
        return eng_fail(err, "batch item %d: sample slot %d needs a sampler and n_top in [-1, %d]",
                        b, i, MHLA_MAX_TOP_LOGPROBS);
    if (sl->at < prev_at || sl->at >= it->n_tokens)
        return eng_fail(
            err,
            "batch item %d: sample slot %d samples position %d: outside [%d, %d) (slots "
            "go in position order)",
            b, i, sl->at, prev_at, it->n_tokens);
    if (sl->mask && !sl->mask->apply && !sl->mask->bits)
        return eng_fail(err, "batch item %d: sample slot %d has a mask without apply or bits", b,
                        i);
    return 0;
}

static int bad_scores(const mhla_batch_item *it, int b, int V, mhla_error *err)
{
    const mhla_token_scores *sc = it->scores;
    if (sc->n_next < 0 || sc->n_next > it->n_tokens || (sc->n_next && (!sc->next || !sc->logprob)))
        return eng_fail(err, "batch item %d: scores of %d tokens for an item of %d", b, sc->n_next,
                        it->n_tokens);
    if (sc->n_top < 0 || sc->n_top > MHLA_MAX_TOP_LOGPROBS || (sc->n_top && !sc->top))
        return eng_fail(err, "batch item %d: scores need n_top in [0, %d] and room for them", b,
                        MHLA_MAX_TOP_LOGPROBS);
    for (int j = 0; j < sc->n_next; j++)
        if (sc->next[j] < 0 || sc->next[j] >= V)
            return eng_fail(err, "batch item %d: scored token %d outside the vocabulary [0, %d)", b,
                            sc->next[j], V);
    return 0;
}

int eng_step_check_choices(const mhla_batch_item *it, int b, int vocab_size, mhla_error *err)
{
    if (it->n_samples < 0 || (it->n_samples > 0) != (it->sample != NULL))
        return eng_fail(err, "batch item %d: %d sample slots at %p", b, it->n_samples,
                        (void *)it->sample);
    for (int i = 0, at = 0; i < it->n_samples; at = it->sample[i++].at)
        if (bad_slot(it, b, i, at, err))
            return -1;
    return it->scores ? bad_scores(it, b, vocab_size, err) : 0;
}

/* The one slot the backend samples on its device, or NULL: a mask goes
 * there as its bitmask, so one with apply only keeps the slot on the host. */
static mhla_sample_slot *device_slot(const mhla_engine *e, const mhla_batch_item *it)
{
    const mhla_sample_slot *sl = it->sample;
    if (!e->ops->samples_on_device || it->n_samples != 1 || sl->at != it->n_tokens - 1 ||
        (sl->mask && !sl->mask->bits))
        return NULL;
    return it->sample;
}

/* The first position whose logits the engine needs for item it (n_tokens: none). */
static int host_rows_from(const mhla_engine *e, const mhla_batch_item *it)
{
    int lo = it->n_tokens;
    if (it->scores && it->scores->n_next > 0)
        lo = 0;
    if (!device_slot(e, it))
        for (int i = 0; i < it->n_samples; i++)
            lo = it->sample[i].at < lo ? it->sample[i].at : lo;
    return lo;
}

static int grow(eng_step_rows *r, int n_items, size_t floats, mhla_error *err)
{
    if (mhla_grow(&r->run, sizeof *r->run, &r->cap_run, n_items) ||
        mhla_grow(&r->at, sizeof *r->at, &r->cap_at, n_items))
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory for a step of %d items", n_items);
    if (floats > r->cap_floats) {
        float *l = realloc(r->logits, floats * sizeof *l);
        if (!l)
            return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory for %zu logits", floats);
        r->logits = l;
        r->cap_floats = floats;
    }
    return 0;
}

/* Item b as the backend runs it: its rows, and its slot when sampled on the device. */
static void plan_item(const mhla_engine *e, const mhla_batch_item *it, eng_step_rows *r, int b,
                      size_t *next_row)
{
    mhla_batch_item *run = &r->run[b];
    *run = *it;
    run->sample = device_slot(e, it);
    run->n_samples = run->sample ? 1 : 0;
    run->scores = NULL;
    int lo = host_rows_from(e, it), n = it->n_tokens;
    int asked = it->logits ? it->logits_from : n;
    r->at[b] = (item_rows){.lo = asked, .own = 0, .failed = 0};
    if (lo >= asked) /* the caller's buffer holds every row needed, or none is */
        return;
    r->at[b] = (item_rows){.lo = lo, .own = 1, .failed = 0};
    run->logits_from = lo;
    run->logits = r->logits + *next_row * (size_t)e->model->cfg.vocab_size;
    *next_row += (size_t)(n - lo);
}

static int grow_masks(eng_step_rows *r, int n_items, size_t words, mhla_error *err)
{
    if (mhla_grow(&r->mask, sizeof *r->mask, &r->cap_mask, n_items))
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory for a step of %d items", n_items);
    if (words > r->cap_words) {
        uint64_t *w = realloc(r->bits, words * sizeof *w);
        if (!w)
            return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory for %zu mask words", words);
        r->bits = w;
        r->cap_words = words;
    }
    return 0;
}

/* The bitmasks of the masked slots the backend samples on its device,
 * computed now; a mask whose bits fail fails its slot, which then is not
 * sampled (the item runs without it). */
static int plan_masks(eng_step_rows *r, int n_items, int V, mhla_error *err)
{
    size_t words = ((size_t)V + 63) / 64, n_masked = 0;
    for (int b = 0; b < n_items; b++)
        n_masked += r->run[b].sample && r->run[b].sample->mask;
    if (grow_masks(r, n_items, n_masked * words, err))
        return -1;
    uint64_t *next = r->bits;
    for (int b = 0; b < n_items; b++) {
        mhla_sample_slot *sl = r->run[b].sample;
        r->mask[b] = NULL;
        if (!sl || !sl->mask)
            continue;
        if (sl->mask->bits(sl->mask->ctx, next, V, &sl->err)) {
            sl->status = MHLA_SLOT_FAILED;
            r->at[b].failed = 1;
            r->run[b].sample = NULL;
            r->run[b].n_samples = 0;
            continue;
        }
        r->mask[b] = next;
        next += words;
    }
    return 0;
}

int eng_step_rows_plan(mhla_engine *e, const mhla_batch_item *items, int n_items,
                       mhla_batch_item **run, const uint64_t *const **masks, mhla_error *err)
{
    if (!e->rows && !(e->rows = calloc(1, sizeof *e->rows)))
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory for a step");
    eng_step_rows *r = e->rows;
    size_t rows = 0, V = (size_t)e->model->cfg.vocab_size;
    for (int b = 0; b < n_items; b++) {
        int lo = host_rows_from(e, &items[b]);
        int asked = items[b].logits ? items[b].logits_from : items[b].n_tokens;
        rows += lo < asked ? (size_t)(items[b].n_tokens - lo) : 0;
    }
    if (grow(r, n_items, rows * V, err))
        return -1;
    size_t next_row = 0;
    for (int b = 0; b < n_items; b++)
        plan_item(e, &items[b], r, b, &next_row);
    if (plan_masks(r, n_items, (int)V, err))
        return -1;
    *run = r->run;
    *masks = r->mask;
    return 0;
}

/* The slot the backend sampled on its device: its mask is told the token
 * (the host sampler tells it inside mhla_sampler_next, after choosing). */
static void device_chose(mhla_sample_slot *sl)
{
    const mhla_token_mask *mask = sl->mask;
    if (sl->status == MHLA_SLOT_OK && mask && mask->accept &&
        mask->accept(mask->ctx, sl->token, &sl->err))
        sl->status = MHLA_SLOT_FAILED;
}

/* Item it's slots, in order: the sampling site. rows holds positions lo..;
 * failed: its device slot failed before the step (status set). */
static void choose_tokens(mhla_batch_item *it, const mhla_batch_item *run, const float *rows,
                          int lo, int V, int failed)
{
    int skip = 0;
    for (int i = 0; i < it->n_samples; i++) {
        mhla_sample_slot *sl = &it->sample[i];
        if (sl == run->sample) {
            device_chose(sl);
            continue;
        }
        if (failed)
            continue; /* the device slot (the item's only one) whose mask's bits failed */
        if (skip) {
            sl->status = MHLA_SLOT_SKIPPED;
            continue;
        }
        const float *row = rows + (size_t)(sl->at - lo) * (size_t)V;
        sl->status = MHLA_SLOT_OK;
        if (mhla_sampler_next(sl->sampler, row, sl->mask, &sl->token, &sl->err) ||
            (sl->n_top >= 0 &&
             mhla_logprobs(row, V, sl->token, sl->n_top, &sl->token_logprob, sl->top, &sl->err)))
            sl->status = MHLA_SLOT_FAILED;
        /* a drafted next token the model did not choose: later rows followed it */
        int drafted = sl->at + 1 < it->n_tokens;
        skip = drafted && (sl->status != MHLA_SLOT_OK || sl->token != it->tokens[sl->at + 1]);
    }
}

static void score_tokens(mhla_token_scores *sc, const float *rows, int lo, int V)
{
    sc->status = 0;
    for (int j = 0; j < sc->n_next && sc->status == 0; j++) {
        const float *row = rows + (size_t)(j - lo) * (size_t)V;
        mhla_logprob *top = sc->n_top ? sc->top + (size_t)j * (size_t)sc->n_top : NULL;
        if (mhla_logprobs(row, V, sc->next[j], sc->n_top, &sc->logprob[j], top, &sc->err))
            sc->status = -1;
    }
}

void eng_step_choose(mhla_engine *e, mhla_batch_item *items, int n_items)
{
    eng_step_rows *r = e->rows;
    int V = e->model->cfg.vocab_size;
    for (int b = 0; b < n_items; b++) {
        mhla_batch_item *it = &items[b];
        const mhla_batch_item *run = &r->run[b];
        int lo = r->at[b].lo;
        choose_tokens(it, run, run->logits, lo, V, r->at[b].failed);
        if (it->scores)
            score_tokens(it->scores, run->logits, lo, V);
        if (r->at[b].own && it->logits && it->logits_from < it->n_tokens)
            memcpy(it->logits, run->logits + (size_t)(it->logits_from - lo) * (size_t)V,
                   (size_t)(it->n_tokens - it->logits_from) * (size_t)V * sizeof(float));
    }
}
