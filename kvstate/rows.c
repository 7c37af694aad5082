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
