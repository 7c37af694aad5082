/*
 * sequence.c — a sequence as the engine sees it: the model it belongs to and
 * its state in kvstate. Pages for the blocks a call will close are taken
 * before the call starts computing, so a forward pass never fails half-way.
 */
#include "engine_internal.h"

#include <stdlib.h>
#include <string.h>

kv_geometry eng_state_geometry(const mhla_config *c)
{
    kv_geometry g = {
        .layers = c->num_layers,
        .kv_heads = c->num_kv_heads,
        .dk = c->head_k_dim,
        .dv = c->head_v_dim,
        .block_tokens = c->chunk_size,
        .max_blocks = c->num_blocks,
        .key_sums = c->normalize,
    };
    return g;
}

int eng_seq_create_in(const mhla_model *model, kv_pool *pool, const eng_backend_ops *ops,
                      void *home, mhla_seq **out, mhla_error *err)
{
    *out = NULL;
    mhla_seq *s = calloc(1, sizeof *s);
    if (!s)
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory for a sequence");
    kv_error ke;
    if (kv_seq_create(pool, &s->kv, &ke)) {
        free(s);
        return eng_fail_kv(err, &ke);
    }
    s->model = model;
    s->ops = ops;
    s->home = home;
    *out = s;
    return 0;
}

int mhla_seq_create(const mhla_model *model, mhla_seq **out, mhla_error *err)
{
    kv_pool_options o = {.geo = eng_state_geometry(&model->cfg), .dtype = KV_DTYPE_F32};
    kv_pool *pool;
    kv_error ke;
    *out = NULL;
    if (kv_pool_create(&o, &pool, &ke))
        return eng_fail_kv(err, &ke);
    int rc = eng_seq_create_in(model, pool, &eng_cpu_backend, NULL, out, err);
    kv_pool_release(pool); /* the sequence holds it now */
    return rc;
}

int mhla_seq_clone(const mhla_seq *src, mhla_seq **out, mhla_error *err)
{
    *out = NULL;
    mhla_seq *s = calloc(1, sizeof *s);
    if (!s)
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory cloning a sequence");
    kv_error ke;
    if (kv_seq_clone(src->kv, &s->kv, &ke)) {
        free(s);
        return eng_fail_kv(err, &ke);
    }
    s->model = src->model;
    s->ops = src->ops;
    s->home = src->home;
    *out = s;
    return 0;
}

void mhla_seq_free(mhla_seq *s)
{
    if (!s)
        return;
    kv_seq_free(s->kv);
    free(s);
}

void mhla_seq_finish(mhla_seq *s)
{
    if (!s)
        return;
    kv_seq_finish(s->kv);
    free(s);
}

int mhla_seq_pos(const mhla_seq *s) { return kv_seq_pos(s->kv); }

int mhla_seq_rewind(mhla_seq *s, int pos, mhla_error *err)
{
    kv_error ke;
    if (kv_seq_rewind(s->kv, pos, &ke))
        return eng_fail_kv(err, &ke);
    return 0;
}

size_t mhla_seq_state_bytes(const mhla_seq *s) { return kv_seq_bytes(s->kv); }

int eng_seq_reserve_pages(mhla_seq *s, int n_blocks, mhla_error *err)
{
    kv_error ke;
    if (kv_seq_ensure_pages(s->kv, n_blocks, &ke))
        return eng_fail_kv(err, &ke);
    return 0;
}

int mhla_state_pages_needed(const mhla_model *model, long n_positions)
{
    kv_geometry g = eng_state_geometry(&model->cfg);
    return kv_pages_needed(&g, n_positions);
}

int mhla_seq_reserve(mhla_seq *s, long n_positions, mhla_error *err)
{
    kv_error ke;
    if (kv_seq_reserve(s->kv, n_positions, &ke))
        return eng_fail_kv(err, &ke);
    return 0;
}

int mhla_seq_match_prefix_start(mhla_seq *s, const int32_t *tokens, int n, int *loading,
                                mhla_error *err)
{
    const mhla_config *c = &s->model->cfg;
    *loading = 0;
    if (n < 0 || (n > 0 && !tokens))
        return eng_fail(err, "prefix match: no tokens");
    for (int t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size)
            return eng_fail(err, "prefix match: token id %d outside the vocabulary [0, %d)",
                            tokens[t], c->vocab_size);
    kv_error ke;
    int pos = kv_seq_match_start(s->kv, tokens, n, &ke);
    if (pos < 0)
        return eng_fail_kv(err, &ke);
    *loading = kv_seq_loading(s->kv);
    if (*loading)
        return pos;
    if (pos % c->chunk_size != 0 && eng_seq_restore_prefix(s, err))
        return -1;
    return pos;
}

int mhla_seq_match_poll(mhla_seq *s, int wait, int *done, mhla_error *err)
{
    if (!kv_seq_loading(s->kv)) {
        *done = 1;
        return kv_seq_pos(s->kv);
    }
    int pos = kv_seq_match_poll(s->kv, wait);
    *done = pos != KV_STILL_LOADING;
    if (!*done)
        return 0;
    /* a resume entry's partial block: P_i from the pages */
    if (pos % s->model->cfg.chunk_size != 0 && eng_seq_restore_prefix(s, err))
        return -1;
    return pos;
}

int mhla_seq_match_prefix(mhla_seq *s, const int32_t *tokens, int n, mhla_error *err)
{
    int loading, done;
    int pos = mhla_seq_match_prefix_start(s, tokens, n, &loading, err);
    return pos < 0 || !loading ? pos : mhla_seq_match_poll(s, 1, &done, err);
}

/* Identifies the model a snapshot belongs to: every config field and every
 * layer's mixing matrix (cheap, and it differs between checkpoints of one
 * shape). */
static uint64_t model_fingerprint(const mhla_model *m)
{
    const mhla_config *c = &m->cfg;
    int64_t f[] = {c->vocab_size,      c->hidden_size, c->num_layers,          c->num_heads,
                   c->num_kv_heads,    c->head_k_dim,  c->head_v_dim,          c->intermediate_size,
                   c->chunk_size,      c->num_blocks,  c->max_positions,       c->feature_map,
                   c->use_output_gate, c->normalize,   c->tie_word_embeddings, c->bos_token_id,
                   c->eos_token_id};
    uint64_t h = kv_fnv1a(KV_FNV_SEED, f, sizeof f);
    h = kv_fnv1a(h, &c->norm_eps, sizeof c->norm_eps);
    for (int l = 0; l < c->num_layers; l++)
        h = kv_fnv1a(h, m->layers[l].mix, (size_t)c->num_blocks * c->num_blocks * sizeof(float));
    return h;
}

int mhla_seq_save(const mhla_seq *s, const char *path, mhla_error *err)
{
    kv_error ke;
    if (kv_seq_save(s->kv, model_fingerprint(s->model), path, &ke))
        return eng_fail_kv(err, &ke);
    return 0;
}

int mhla_seq_load(mhla_seq *s, const char *path, mhla_error *err)
{
    kv_error ke;
    if (kv_seq_load(s->kv, model_fingerprint(s->model), path, &ke))
        return eng_fail_kv(err, &ke);
    if (mhla_seq_pos(s) % s->model->cfg.chunk_size != 0 && eng_seq_restore_prefix(s, err))
        return -1;
    return 0;
}

int eng_seq_restore_prefix(mhla_seq *s, mhla_error *err)
{
    return s->ops->restore_prefix(s->home, s, err);
}
