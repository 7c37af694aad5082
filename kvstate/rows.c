/*
 * rows.c — packs the first r rows of the current block (k~ then v, for each
 * layer and kv head) into one compact array: what a resume entry and a
 * snapshot keep of a partial block.
 */
#include "kvstate_internal.h"

size_t kv_rows_floats(const kv_geometry *g, int r)
{
    return (size_t)g->layers * g->kv_heads * r * (g->dk + g->dv);
}

int kv_rows_pack(const kv_pool *p, const kv_seq_bufs *b, int r, float *dst)
{
    const kv_geometry *g = &p->opt.geo;
    size_t n = (size_t)g->layers * g->kv_heads, C = g->block_tokens;
    for (size_t lh = 0; lh < n; lh++) {
        if (kv_mem_copy(p, dst, b->cur_k + lh * C * g->dk, (size_t)r * g->dk * sizeof(float),
                        KV_COPY_TO_HOST))
            return -1;
        dst += (size_t)r * g->dk;
        if (kv_mem_copy(p, dst, b->cur_v + lh * C * g->dv, (size_t)r * g->dv * sizeof(float),
                        KV_COPY_TO_HOST))
            return -1;
        dst += (size_t)r * g->dv;
    }
    return 0;
}

int kv_rows_unpack(const kv_pool *p, const float *src, int r, kv_seq_bufs *b)
{
    const kv_geometry *g = &p->opt.geo;
    size_t n = (size_t)g->layers * g->kv_heads, C = g->block_tokens;
    for (size_t lh = 0; lh < n; lh++) {
        if (kv_mem_copy(p, b->cur_k + lh * C * g->dk, src, (size_t)r * g->dk * sizeof(float),
                        KV_COPY_FROM_HOST))
            return -1;
        src += (size_t)r * g->dk;
        if (kv_mem_copy(p, b->cur_v + lh * C * g->dv, src, (size_t)r * g->dv * sizeof(float),
                        KV_COPY_FROM_HOST))
            return -1;
        src += (size_t)r * g->dv;
    }
    return 0;
}

size_t kv_seq_rows_floats(const kv_seq *s, int r) { return kv_rows_floats(&s->pool->opt.geo, r); }

int kv_seq_rows_save(const kv_seq *s, int r, float *dst, kv_error *err)
{
    if (r < 0 || r > s->pool->opt.geo.block_tokens)
        return kv_fail(err, "saving %d rows of a block of %d", r, s->pool->opt.geo.block_tokens);
    if (kv_rows_pack(s->pool, &s->b, r, dst))
        return kv_fail(err, "saving %d rows of the current block: the copy failed", r);
    return 0;
}

int kv_seq_rows_restore(kv_seq *s, int r, const float *src, kv_error *err)
{
    if (r < 0 || r > s->pool->opt.geo.block_tokens)
        return kv_fail(err, "restoring %d rows of a block of %d", r, s->pool->opt.geo.block_tokens);
    if (kv_rows_unpack(s->pool, src, r, &s->b))
        return kv_fail(err, "restoring %d rows of the current block: the copy failed", r);
    return 0;
}
