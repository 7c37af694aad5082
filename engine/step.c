/*
 * step.c — one engine step (mhla_engine_step): the batch is validated
 * whole before anything changes, the pages of the blocks it will close are
 * taken, the backend runs the forward pass, and then each sequence advances
 * (drafted tokens the model did not choose are taken back: step_verify.c).
 */
#include "engine_internal.h"

static int validate(const mhla_engine *e, const mhla_batch_item *items, int n_items, int *T,
                    mhla_error *err)
{
    const mhla_config *c = &e->model->cfg;
    long total = 0;
    for (int b = 0; b < n_items; b++) {
        const mhla_batch_item *it = &items[b];
        if (!it->seq || it->seq->model != e->model)
            return eng_fail(err, "batch item %d: no sequence of this model", b);
        if (it->seq->home != e->home)
            return eng_fail(err,
                            "batch item %d: the sequence's state is on another device (make "
                            "sequences with mhla_engine_seq_create)",
                            b);
        if (it->n_tokens < 1 || !it->tokens)
            return eng_fail(err, "batch item %d: no tokens", b);
        if (it->logits_from < 0 || it->logits_from > it->n_tokens)
            return eng_fail(err, "batch item %d: logits_from %d outside [0, %d]", b,
                            it->logits_from, it->n_tokens);
        if (it->logits_from < it->n_tokens && !it->logits && !it->sample && !it->scores)
            return eng_fail(err, "batch item %d: logits requested without a buffer", b);
        if (eng_step_check_choices(it, b, c->vocab_size, err))
            return -1;
        if (eng_item_drafts(it) && it->n_tokens > c->chunk_size)
            return eng_fail(err,
                            "batch item %d: %d tokens with drafts to verify: at most a block (%d)",
                            b, it->n_tokens, c->chunk_size);
        int pos = mhla_seq_pos(it->seq);
        if ((long)pos + it->n_tokens > c->max_positions)
            return eng_fail_as(
                err, MHLA_ERR_CONTEXT,
                "context length exceeded: position %d + %d tokens passes the model's "
                "context of %d tokens (%d blocks of %d)",
                pos, it->n_tokens, c->max_positions, c->num_blocks, c->chunk_size);
        for (int t = 0; t < it->n_tokens; t++)
            if (it->tokens[t] < 0 || it->tokens[t] >= c->vocab_size)
                return eng_fail(err, "batch item %d: token id %d outside the vocabulary [0, %d)", b,
                                it->tokens[t], c->vocab_size);
        for (int o = 0; o < b; o++)
            if (items[o].seq == it->seq)
                return eng_fail(err, "batch items %d and %d feed the same sequence", o, b);
        total += it->n_tokens;
        if (total > (1L << 24))
            return eng_fail(err, "batch of more than %ld tokens", 1L << 24);
    }
    *T = (int)total;
    return 0;
}

int mhla_engine_step(mhla_engine *e, mhla_batch_item *items, int n_items, mhla_error *err)
{
    const mhla_config *c = &e->model->cfg;
    int T = 0;
    if (n_items < 0 || (n_items > 0 && !items))
        return eng_fail(err, "bad batch");
    if (validate(e, items, n_items, &T, err))
        return -1;
    if (T == 0)
        return 0;
    for (int b = 0; b < n_items; b++) {
        mhla_seq *s = items[b].seq;
        if (eng_seq_reserve_pages(s, (mhla_seq_pos(s) + items[b].n_tokens) / c->chunk_size, err))
            return -1;
    }
    mhla_batch_item *run;
    const uint64_t *const *masks;
    if (eng_verify_save(e, items, n_items, err) ||
        eng_step_rows_plan(e, items, n_items, &run, &masks, err) ||
        e->ops->forward(e->backend, run, n_items, masks, err))
        return -1;
    eng_step_choose(e, items, n_items);
    /* Advances each sequence (through the drafts it kept) and publishes the
     * blocks it closed to the prefix cache: serial, after the backend is
     * done with the pool. */
    return eng_verify_advance(e, items, n_items, err);
}
