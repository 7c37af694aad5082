/*
 * step_verify.c — drafted tokens the model did not choose are taken back.
 * An item whose sample slots stop before its last position verifies drafts
 * (step_choose.c); after the step its sequence keeps the tokens up to the
 * first slot whose choice is not the token fed after it, and its state is
 * the state those tokens alone give (docs/architecture.md, "Rolling back
 * drafted tokens"). Within a block that is a shorter advance: rows past the
 * kept position are never read, and the next tokens overwrite them. A span
 * that crossed into the next block also closed the open one and started the
 * next: the closed block's page stays the sequence's own (unpublished, and
 * written again when the block really closes), P_i was replaced by P_{i+1},
 * and the next block's first rows overwrote the open block's first rows.
 * Those few rows are saved before the step and put back; P_i is mixed again
 * from the pages.
 */
#include "engine_internal.h"

#include <stdlib.h>

struct eng_verify {
    float *rows; /* the saved rows of every crossing item, one after another */
    size_t cap_floats;
    size_t *off; /* per item: its rows in rows, or SIZE_MAX: nothing saved */
    int cap_off;
};

void eng_verify_free(eng_verify *v)
{
    if (!v)
        return;
    free(v->rows);
    free(v->off);
    free(v);
}

int eng_item_drafts(const mhla_batch_item *it)
{
    return it->n_samples > 0 && it->sample[0].at < it->n_tokens - 1;
}

int eng_item_kept(const mhla_batch_item *it)
{
    for (int i = 0; i < it->n_samples; i++) {
        const mhla_sample_slot *sl = &it->sample[i];
        if (sl->at + 1 >= it->n_tokens)
            break;
        if (sl->status != MHLA_SLOT_OK || sl->token != it->tokens[sl->at + 1])
            return sl->at + 1;
    }
    return it->n_tokens;
}

/* Rows of item it that land in the block after its sequence's open one
 * (0: the span stays in one block, or starts a block of its own). */
static int rows_past_block(const mhla_engine *e, const mhla_batch_item *it)
{
    int C = e->model->cfg.chunk_size, pos = mhla_seq_pos(it->seq);
    int next = (pos / C + 1) * C;
    return pos % C != 0 && pos + it->n_tokens > next ? pos + it->n_tokens - next : 0;
}

static int grow(eng_verify *v, int n_items, size_t floats, mhla_error *err)
{
    if (mhla_grow(&v->off, sizeof *v->off, &v->cap_off, n_items))
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory for a step of %d items", n_items);
    if (floats > v->cap_floats) {
        float *r = realloc(v->rows, floats * sizeof *r);
        if (!r)
            return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory for %zu saved rows", floats);
        v->rows = r;
        v->cap_floats = floats;
    }
    return 0;
}

int eng_verify_save(mhla_engine *e, const mhla_batch_item *items, int n_items, mhla_error *err)
{
    size_t floats = 0;
    for (int b = 0; b < n_items; b++)
        if (eng_item_drafts(&items[b]))
            floats += kv_seq_rows_floats(items[b].seq->kv, rows_past_block(e, &items[b]));
    if (floats == 0)
        return 0;
    if (!e->verify && !(e->verify = calloc(1, sizeof *e->verify)))
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory for a step");
    eng_verify *v = e->verify;
    if (grow(v, n_items, floats, err))
        return -1;
    size_t at = 0;
    kv_error ke;
    for (int b = 0; b < n_items; b++) {
        int m = eng_item_drafts(&items[b]) ? rows_past_block(e, &items[b]) : 0;
        v->off[b] = m ? at : SIZE_MAX;
        if (!m)
            continue;
        if (kv_seq_rows_save(items[b].seq->kv, m, v->rows + at, &ke))
            return eng_fail_kv(err, &ke);
        at += kv_seq_rows_floats(items[b].seq->kv, m);
    }
    return 0;
}

/* Item b kept fewer tokens than it fed, and its span had crossed into the
 * next block before the kept position: the open block comes back. */
static int restore_open_block(mhla_engine *e, const mhla_batch_item *it, size_t off, int m,
                              mhla_error *err)
{
    kv_error ke;
    if (kv_seq_rows_restore(it->seq->kv, m, e->verify->rows + off, &ke))
        return eng_fail_kv(err, &ke);
    return eng_seq_restore_prefix(it->seq, err);
}

int eng_verify_advance(mhla_engine *e, mhla_batch_item *items, int n_items, mhla_error *err)
{
    int C = e->model->cfg.chunk_size, rc = 0;
    for (int b = 0; b < n_items; b++) {
        mhla_batch_item *it = &items[b];
        int pos = mhla_seq_pos(it->seq), m = 0;
        int keep = eng_item_drafts(it) ? eng_item_kept(it) : it->n_tokens;
        if (keep < it->n_tokens)
            m = rows_past_block(e, it);
        kv_seq_advance(it->seq->kv, it->tokens, keep);
        /* back in the open block: its first rows and P_i are the next block's now */
        if (m > 0 && (pos + keep) / C == pos / C &&
            restore_open_block(e, it, e->verify->off[b], m, err))
            rc = -1;
    }
    return rc;
}
