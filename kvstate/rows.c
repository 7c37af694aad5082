/*
 * rows.c — packs the first r rows of the current block (k~ then v, for each
 * layer and kv head) into one compact array: what a resume entry and a
 * snapshot keep of a partial block.
 */
#include "internal.h"

#include <string.h>

size_t kv_rows_floats(const kv_geometry *g, int r)
{
    return (size_t)g->layers * g->kv_heads * r * (g->dk + g->dv);
}

void kv_rows_pack(const kv_geometry *g, const kv_seq_bufs *b, int r, float *dst)
{
    size_t n = (size_t)g->layers * g->kv_heads, C = g->block_tokens;
    for (size_t lh = 0; lh < n; lh++) {
        memcpy(dst, b->cur_k + lh * C * g->dk, (size_t)r * g->dk * sizeof(float));
        dst += (size_t)r * g->dk;
        memcpy(dst, b->cur_v + lh * C * g->dv, (size_t)r * g->dv * sizeof(float));
        dst += (size_t)r * g->dv;
    }
}

void kv_rows_unpack(const kv_geometry *g, const float *src, int r, kv_seq_bufs *b)
{
    size_t n = (size_t)g->layers * g->kv_heads, C = g->block_tokens;
    for (size_t lh = 0; lh < n; lh++) {
        memcpy(b->cur_k + lh * C * g->dk, src, (size_t)r * g->dk * sizeof(float));
        src += (size_t)r * g->dk;
        memcpy(b->cur_v + lh * C * g->dv, src, (size_t)r * g->dv * sizeof(float));
        src += (size_t)r * g->dv;
    }
}
