/*
 * isa_avx2.c — the kernels on AVX2 + FMA: a 16-lane vector is two 8-lane
 * ymm halves (lanes 0-7 and 8-15), reduced in the same tree as the other
 * paths (half + half, then 4, 2, 1). Compiled with -mavx2 -mfma.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    __m256 lo, hi;
} vec16;

/* 8 all-ones words then 8 zero words: mask of the first n lanes at 8 - n */
static const int32_t kb_mask_src[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

static inline __m256i lane_mask(int n)
{
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    return _mm256_loadu_si256((const __m256i *)(kb_mask_src + 8 - n));
}

static inline vec16 V_ZERO(void)
{
    vec16 v = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    return v;
}
static inline vec16 V_LOAD(const float *p)
{
    vec16 v = {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
    return v;
}
static inline vec16 V_LOAD_TAIL(const float *p, int n)
{
    vec16 v = {_mm256_maskload_ps(p, lane_mask(n)), _mm256_maskload_ps(p + 8, lane_mask(n - 8))};
    return v;
}
static inline vec16 V_FMA(vec16 a, vec16 b, vec16 c)
{
    vec16 v = {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
    return v;
}
static inline vec16 V_SET1(float s)
{
    vec16 v = {_mm256_set1_ps(s), _mm256_set1_ps(s)};
    return v;
}
static inline __m256 bf16x8(const uint16_t *p)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
static inline vec16 V_LOAD_BF16(const uint16_t *p)
{
    vec16 v = {bf16x8(p), bf16x8(p + 8)};
    return v;
}
static inline vec16 V_LOAD_BF16_TAIL(const uint16_t *p, int n)
{
    uint16_t buf[16] = {0};
    memcpy(buf, p, (size_t)n * sizeof *p);
    return V_LOAD_BF16(buf);
}
static inline void V_STORE(float *p, vec16 v)
{
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + 8, v.hi);
}
static inline void V_STORE_TAIL(float *p, vec16 v, int n)
{
    _mm256_maskstore_ps(p, lane_mask(n), v.lo);
    _mm256_maskstore_ps(p + 8, lane_mask(n - 8), v.hi);
}
static inline float v_reduce(vec16 v)
{
    __m256 s8 = _mm256_add_ps(v.lo, v.hi);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
}

/* 16 ymm registers: a 2 x 2 tile holds 8 accumulator halves; against a
 * single row of x, 4 rows of w (8 halves, operands loaded as used) */
#define KB_TILE_T 2
#define KB_TILE_J 2
#define KB_TILE_J1 4
#define KB_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
/* AVX2-only parts have smaller L2s (Zen 2/3: 512 KiB per core) */
#define KB_X_BLOCK_BYTES (256 * 1024)
#define KB_OPS k_ops_avx2
#define KB_NAME "avx2"
#include "q8_avx2.h"
#include "kernels_body.h"
