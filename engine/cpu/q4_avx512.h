/*
 * q4_avx512.h — the q4 product (kernels_q4.h) on AVX-512: a zmm holds one
 * 4-byte unit of a group for 16 rows (a lane is a row), as in q8_avx512.h.
 * A 64-byte load of packed weights is two units: its low nibbles (a mask)
 * and its high ones (a shift and a mask), q + 8 in [0, 15], unsigned.
 *
 * With AVX512-VNNI, vpdpbusd multiplies them by x's signed bytes, the sum
 * starting at -8 * sum(x), which takes the offset back out exactly. Without
 * it, vpmaddubsw takes the nibbles as the unsigned side and x as the signed
 * one (pair sums within 2 * 15 * 127, no saturation) and vpmaddwd adds the
 * pairs, from the same start. Both give each group's exact int32; the f16
 * scales widen exactly (vcvtph2ps). Included by isa_avx512.c after
 * q8_avx512.h (its KQ512_UNIT and kq_use_vnni).
 */
#include "kernels_q4.h"

#include <immintrin.h>

#define K4_TILE_T 4
/* The first tile of a pass prefetches its weights 4 KiB ahead into L2: the 340M shape's
 * batch-1 products ran at 79-81 % of the memory rate read beside them prefetched 2 KiB ahead into
 * L1, at 84-86 % like this (q8's, with twice the bytes a group, stay best 2 KiB ahead into L1:
 * bench/RESULTS.md, "The batch-1 prefetch into L2") */
#ifndef K4_PREFETCH_BYTES
#define K4_PREFETCH_BYTES 4096
#endif
#ifndef K4_PF_HINT
#define K4_PF_HINT _MM_HINT_T1
#endif

/* The 8 units of group g's packed weights: the low nibbles of the four loads, then the high */
static inline __attribute__((always_inline)) void k4_unpack512(const uint8_t *wg, __m512i w[8])
{
    const __m512i lo = _mm512_set1_epi8(15);
    for (int u = 0; u < 4; u++) {
        __m512i v = _mm512_loadu_si512(wg + u * 64);
        w[u] = _mm512_and_si512(v, lo);
        w[u + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo);
    }
}

/* acc = fma(dot, f32(d_w) * s_x, acc) */
static inline __attribute__((always_inline)) __m512 k4_combine512(__m512i s, const uint16_t *sg,
                                                                  float d, __m512 acc)
{
    __m512 sc = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)sg));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(sc, _mm512_set1_ps(d)), acc);
}

__attribute__((target("avx512vnni"))) static inline __attribute__((always_inline)) void
k4_tile_vnni(const kq_act *x, int t, int M, const uint8_t *wb, const uint16_t *sh, int shift, int G,
             int pf, __m512 *acc)
{
    for (int m = 0; m < M; m++)
        acc[m] = _mm512_setzero_ps();
    for (int g = 0; g < G; g++) {
        __m512i w[8];
        KQ512_PREFETCH(pf, wb + (size_t)g * 256, 256, K4_PREFETCH_BYTES, K4_PF_HINT);
        k4_unpack512(wb + (size_t)g * 256, w);
        const uint16_t *sg = sh + (size_t)(g >> shift) * KQ_ROWS;
        for (int m = 0; m < M; m++) {
            size_t row = (size_t)(t + m);
            const int8_t *xg = x->q + row * x->K + g * KQ_GROUP;
            __m512i s0 = _mm512_set1_epi32(-8 * x->sum[row * G + g]), s1 = _mm512_setzero_si512();
            for (int u = 0; u < 8; u += 2) {
                s0 = _mm512_dpbusd_epi32(s0, w[u], KQ512_UNIT(xg, u));
                s1 = _mm512_dpbusd_epi32(s1, w[u + 1], KQ512_UNIT(xg, u + 1));
            }
            acc[m] = k4_combine512(_mm512_add_epi32(s0, s1), sg, x->d[row * G + g], acc[m]);
        }
    }
}

static inline __attribute__((always_inline)) void k4_tile_bw(const kq_act *x, int t, int M,
                                                             const uint8_t *wb, const uint16_t *sh,
                                                             int shift, int G, int pf, __m512 *acc)
{
    const __m512i ones = _mm512_set1_epi16(1);
    for (int m = 0; m < M; m++)
        acc[m] = _mm512_setzero_ps();
    for (int g = 0; g < G; g++) {
        __m512i w[8];
        KQ512_PREFETCH(pf, wb + (size_t)g * 256, 256, K4_PREFETCH_BYTES, K4_PF_HINT);
        k4_unpack512(wb + (size_t)g * 256, w);
        const uint16_t *sg = sh + (size_t)(g >> shift) * KQ_ROWS;
        for (int m = 0; m < M; m++) {
            size_t row = (size_t)(t + m);
            const int8_t *xg = x->q + row * x->K + g * KQ_GROUP;
            __m512i s = _mm512_set1_epi32(-8 * x->sum[row * G + g]);
            for (int u = 0; u < 8; u++) {
                __m512i p = _mm512_maddubs_epi16(w[u], KQ512_UNIT(xg, u));
                s = _mm512_add_epi32(s, _mm512_madd_epi16(p, ones));
            }
            acc[m] = k4_combine512(s, sg, x->d[row * G + g], acc[m]);
        }
    }
}

#define K4_FN k4_linear_vnni
#define K4_TILE k4_tile_vnni
#define K4_ATTR __attribute__((target("avx512vnni")))
#include "kernels_q4_body.h"

#define K4_FN k4_linear_bw
#define K4_TILE k4_tile_bw
#define K4_ATTR
#include "kernels_q4_body.h"
