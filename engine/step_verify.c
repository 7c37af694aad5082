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
 * Those few rows (to host memory) and P_i (to a spare copy in the state's
 * memory) are saved before such a step and put back when its drafts are
 * taken back before the block's end: a copy of P_i costs less than mixing
 * it again from every page (docs/architecture.md has the measurements).
 */
#include "engine_internal.h"

#include <stdlib.h>
#include <string.h>

struct eng_verify {
    float *rows; /* the saved rows of every crossing item, one after another */
    size_t cap_floats;
    size_t *off; /* per item: its rows in rows, or SIZE_MAX: nothing saved */
    int *copy;   /* per item: its P_i's copy in copies, or -1 */
    int cap_off, cap_copy;
    kv_prefix_copy **copies; /* spare P_i, kept from step to step */
    int n_copies, cap_copies;
};

void mhla_engine_verify_stats(const mhla_engine *e, mhla_verify_stats *out)
{
    *out = e->verify_stats;
}

void eng_verify_free(eng_verify *v)
{
    if (!v)
        return;
    for (int i = 0; i < v->n_copies; i++)
        kv_prefix_copy_free(v->copies[i]);
    free(v->copies);
    free(v->rows);
    free(v->off);
    free(v->copy);
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
    if (mhla_grow(&v->off, sizeof *v->off, &v->cap_off, n_items) ||
        mhla_grow(&v->copy, sizeof *v->copy, &v->cap_copy, n_items))
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

/* A spare P_i of seq's pool that no earlier item of this step took (used[]
 * marks those), made when there is none; its index, or -1 with err. */
static int spare_copy(eng_verify *v, const mhla_seq *seq, unsigned char *used, mhla_error *err)
{
    kv_pool *pool = kv_seq_pool(seq->kv);
    for (int i = 0; i < v->n_copies; i++)
        if (!used[i] && kv_prefix_copy_pool(v->copies[i]) == pool)
            return i;
    kv_error ke;
    if (mhla_grow(&v->copies, sizeof *v->copies, &v->cap_copies, v->n_copies + 1))
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory for a copy of P_i");
    if (kv_prefix_copy_create(pool, &v->copies[v->n_copies], &ke))
        return eng_fail_kv(err, &ke);
    return v->n_copies++;
}

/* Item b's open block rows (m of them) and P_i, before the step replaces them. */
static int save_item(eng_verify *v, const mhla_batch_item *it, int b, int m, size_t at,
                     unsigned char *used, mhla_error *err)
{
    kv_error ke;
    int c = spare_copy(v, it->seq, used, err);
    if (c < 0)
        return -1;
    used[c] = 1;
    v->copy[b] = c;
    v->off[b] = at;
    if (kv_seq_rows_save(it->seq->kv, m, v->rows + at, &ke) ||
        kv_seq_prefix_save(it->seq->kv, v->copies[c], &ke))
        return eng_fail_kv(err, &ke);
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
    /* copies other items of this step took; the step's crossing items are few */
    unsigned char used[v->n_copies + n_items];
    memset(used, 0, sizeof used);
    for (int b = 0; b < n_items; b++) {
        int m = eng_item_drafts(&items[b]) ? rows_past_block(e, &items[b]) : 0;
        v->off[b] = SIZE_MAX;
        v->copy[b] = -1;
        if (!m)
            continue;
        if (save_item(v, &items[b], b, m, at, used, err))
            return -1;
        at += kv_seq_rows_floats(items[b].seq->kv, m);
    }
    return 0;
}

/* Item b kept fewer tokens than it fed, and its span had crossed into the
 * next block before the kept position: the open block comes back. */
static int restore_open_block(const eng_verify *v, const mhla_batch_item *it, int b, int m,
                              mhla_error *err)
{
    kv_error ke;
    if (kv_seq_rows_restore(it->seq->kv, m, v->rows + v->off[b], &ke) ||
        kv_seq_prefix_restore(it->seq->kv, v->copies[v->copy[b]], &ke))
        return eng_fail_kv(err, &ke);
    return 0;
}

int eng_verify_advance(mhla_engine *e, mhla_batch_item *items, int n_items, mhla_error *err)
{
    int C = e->model->cfg.chunk_size, rc = 0;
    for (int b = 0; b < n_items; b++) {
        mhla_batch_item *it = &items[b];
        int pos = mhla_seq_pos(it->seq), m = 0;
        int drafts = eng_item_drafts(it);
        int keep = drafts ? eng_item_kept(it) : it->n_tokens;
        if (keep < it->n_tokens)
            m = rows_past_block(e, it);
        kv_seq_advance(it->seq->kv, it->tokens, keep);
        e->verify_stats.verify_items += (uint64_t)drafts;
        e->verify_stats.tokens_taken_back += (uint64_t)(it->n_tokens - keep);
        /* back in the open block: its first rows and P_i are the next block's now */
        if (m > 0 && (pos + keep) / C == pos / C) {
            e->verify_stats.block_restores++;
            if (restore_open_block(e->verify, it, b, m, err))
                rc = -1;
        }
    }
    return rc;
}
