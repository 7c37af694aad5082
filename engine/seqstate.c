/*
 * seqstate.c — the recurrent state of one sequence. Pages for finished blocks
 * are allocated before a call starts computing, so a forward pass never fails
 * half-way through.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

size_t mhla_page_floats(const mhla_config *c)
{
    size_t per_head = (size_t)c->head_k_dim * c->head_v_dim + (c->normalize ? c->head_k_dim : 0);
    return (size_t)c->num_layers * c->num_kv_heads * per_head;
}

static size_t prefix_floats(const mhla_config *c)
{
    return (size_t)c->num_layers * c->num_kv_heads * c->head_k_dim * c->head_v_dim;
}

static size_t prefix_k_floats(const mhla_config *c)
{
    return c->normalize ? (size_t)c->num_layers * c->num_kv_heads * c->head_k_dim : 0;
}

static size_t cur_floats(const mhla_config *c, int dim)
{
    return (size_t)c->num_layers * c->num_kv_heads * c->chunk_size * dim;
}

int mhla_seq_create(const mhla_model *model, mhla_seq **out, mhla_error *err)
{
    const mhla_config *c = &model->cfg;
    *out = NULL;
    mhla_seq *s = calloc(1, sizeof *s);
    if (!s)
        return mhla_fail(err, "out of memory for a sequence");
    s->model = model;
    s->pages = calloc((size_t)c->num_blocks, sizeof *s->pages);
    s->prefix = calloc(prefix_floats(c), sizeof(float));
    s->prefix_k = c->normalize ? calloc(prefix_k_floats(c), sizeof(float)) : NULL;
    s->cur_k = calloc(cur_floats(c, c->head_k_dim), sizeof(float));
    s->cur_v = calloc(cur_floats(c, c->head_v_dim), sizeof(float));
    if (!s->pages || !s->prefix || (c->normalize && !s->prefix_k) || !s->cur_k || !s->cur_v) {
        mhla_seq_free(s);
        return mhla_fail(err, "out of memory for a sequence's state");
    }
    *out = s;
    return 0;
}

int mhla_seq_reserve_pages(mhla_seq *s, int n_blocks, mhla_error *err)
{
    const mhla_config *c = &s->model->cfg;
    if (n_blocks > c->num_blocks)
        n_blocks = c->num_blocks;
    for (; s->n_pages < n_blocks; s->n_pages++) {
        s->pages[s->n_pages] = malloc(mhla_page_floats(c) * sizeof(float));
        if (!s->pages[s->n_pages])
            return mhla_fail(err, "out of memory for a block summary page");
    }
    return 0;
}

static void *dup_floats(const float *src, size_t n)
{
    if (!src)
        return NULL;
    float *p = malloc(n * sizeof(float));
    if (p)
        memcpy(p, src, n * sizeof(float));
    return p;
}

int mhla_seq_clone(const mhla_seq *src, mhla_seq **out, mhla_error *err)
{
    const mhla_config *c = &src->model->cfg;
    mhla_seq *s;
    if (mhla_seq_create(src->model, &s, err))
        return -1;
    s->pos = src->pos;
    memcpy(s->prefix, src->prefix, prefix_floats(c) * sizeof(float));
    if (c->normalize)
        memcpy(s->prefix_k, src->prefix_k, prefix_k_floats(c) * sizeof(float));
    memcpy(s->cur_k, src->cur_k, cur_floats(c, c->head_k_dim) * sizeof(float));
    memcpy(s->cur_v, src->cur_v, cur_floats(c, c->head_v_dim) * sizeof(float));
    for (int b = 0; b < src->n_pages; b++) {
        s->pages[b] = dup_floats(src->pages[b], mhla_page_floats(c));
        if (!s->pages[b]) {
            mhla_seq_free(s);
            return mhla_fail(err, "out of memory cloning a sequence");
        }
        s->n_pages = b + 1;
    }
    *out = s;
    return 0;
}

void mhla_seq_free(mhla_seq *s)
{
    if (!s)
        return;
    for (int b = 0; b < s->n_pages; b++)
        free(s->pages[b]);
    free(s->pages);
    free(s->prefix);
    free(s->prefix_k);
    free(s->cur_k);
    free(s->cur_v);
    free(s);
}

int mhla_seq_pos(const mhla_seq *s) { return s->pos; }

size_t mhla_seq_state_bytes(const mhla_seq *s)
{
    const mhla_config *c = &s->model->cfg;
    size_t n = (size_t)s->n_pages * mhla_page_floats(c) + prefix_floats(c) + prefix_k_floats(c) +
               cur_floats(c, c->head_k_dim) + cur_floats(c, c->head_v_dim);
    return n * sizeof(float);
}
