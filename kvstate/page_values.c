/*
 * page_values.c — page storage as f32 or bf16. bf16 keeps f32's exponent
 * range with 8 bits of mantissa: half the bytes per page; the engine still
 * computes in f32 and rounds once, when a block's summary is stored.
 */
#include "base.h"
#include "kvstate_internal.h"

#include <string.h>

void kv_page_read(kv_dtype dtype, const void *src, size_t off, float *dst, size_t n)
{
    if (dtype == KV_DTYPE_F32) {
        memcpy(dst, (const float *)src + off, n * sizeof(float));
        return;
    }
    const uint16_t *h = (const uint16_t *)src + off;
    for (size_t i = 0; i < n; i++)
        dst[i] = mhla_f32_from_bf16(h[i]);
}

void kv_page_write(kv_dtype dtype, void *dst, size_t off, const float *src, size_t n)
{
    if (dtype == KV_DTYPE_F32) {
        memcpy((float *)dst + off, src, n * sizeof(float));
        return;
    }
    uint16_t *h = (uint16_t *)dst + off;
    for (size_t i = 0; i < n; i++)
        h[i] = mhla_bf16_from_f32(src[i]);
}
