/*
 * page_values.c — page storage as f32 or bf16. bf16 keeps f32's exponent
 * range with 8 bits of mantissa: half the bytes per page; the engine still
 * computes in f32 and rounds once, when a block's summary is stored.
 */
#include "kvstate_internal.h"

#include <string.h>

static uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a (quiet) NaN */
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

void kv_page_read(kv_dtype dtype, const void *src, size_t off, float *dst, size_t n)
{
    if (dtype == KV_DTYPE_F32) {
        memcpy(dst, (const float *)src + off, n * sizeof(float));
        return;
    }
    const uint16_t *h = (const uint16_t *)src + off;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        memcpy(&dst[i], &u, 4);
    }
}

void kv_page_write(kv_dtype dtype, void *dst, size_t off, const float *src, size_t n)
{
    if (dtype == KV_DTYPE_F32) {
        memcpy((float *)dst + off, src, n * sizeof(float));
        return;
    }
    uint16_t *h = (uint16_t *)dst + off;
    for (size_t i = 0; i < n; i++)
        h[i] = f32_to_bf16(src[i]);
}
