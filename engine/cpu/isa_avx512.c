/*
 * isa_avx512.c — the kernels on AVX-512 (F, BW, VL): one 16-lane vector is
 * one zmm register. Compiled with -mavx512f -mavx512bw -mavx512vl -mfma.
 */
#include <immintrin.h>
#include <stdint.h>

typedef __m512 vec16;
#define V_ZERO() _mm512_setzero_ps()
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_LOAD_TAIL(p, n) _mm512_maskz_loadu_ps((__mmask16)((1u << (n)) - 1u), (p))
#define V_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define V_SET1(s) _mm512_set1_ps(s)
#define V_LOAD_BF16(p)                                                                           \
    _mm512_castsi512_ps(                                                                         \
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define V_LOAD_BF16_TAIL(p, n)                                                                   \
    _mm512_castsi512_ps(_mm512_slli_epi32(                                                       \
        _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16((__mmask16)((1u << (n)) - 1u), (p))), 16))
#define V_STORE(p, v) _mm512_storeu_ps((p), (v))
#define V_STORE_TAIL(p, v, n) _mm512_mask_storeu_ps((p), (__mmask16)((1u << (n)) - 1u), (v))

static inline float v_reduce(vec16 v)
{
    __m256 lo = _mm512_castps512_ps256(v);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    __m256 s8 = _mm256_add_ps(lo, hi);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
}

/* 16 accumulators, 4 + 4 operands: 24 of the 32 zmm registers */
#define KB_TILE_T 4
#define KB_TILE_J 4
#define KB_OPS k_ops_avx512
#define KB_NAME "avx512"
#include "kernels_body.h"
