/*
 * q4_avx2.h — the q4 product (kernels_q4.h) on AVX2: the 16 rows of a block
 * are two ymm halves (rows 0-7 and 8-15), a lane is a row, as in
 * q8_avx2.h. A 32-byte load of packed weights is two units of 8 rows: its
 * low nibbles and its high ones, q + 8 in [0, 15], unsigned. Without
 * AVX-VNNI, vpmaddubsw takes them as the unsigned side and x as the signed
 * one (pair sums within 2 * 15 * 127) and vpmaddwd adds the pairs; with it,
 * vpdpbusd. Both start at -8 * sum(x), which takes the offset back out, and
 * give each group's exact int32. The f16 scales widen with integer steps and
 * one exact multiply (kernels_q4.c k_f32_from_f16), so the path needs no
 * F16C. Included by isa_avx2.c after q8_avx2.h (its KQ256_UNIT and
 * kq_use_vnni).
 */
#include "kernels_q4.h"

#include <immintrin.h>

/* 3 rows of x a tile share each group's unpacked nibbles and widened scales: at batch 16 on the
 * 340M shape 220-230 tok/s against 198-216 with 2 (vpmaddubsw; 4 rows spill and ran 194-200),
 * and with AVX-VNNI 298-319 against 288 (4 rows: 316-333); bench/RESULTS.md, "q4 on AVX2:
 * tiles of 3 rows" */
#define K4_TILE_T 3

/* 8 f16 scales as f32, exactly */
static inline __attribute__((always_inline)) __m256 k4_f16x8(const uint16_t *p)
{
    __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    __m256i mag = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x7fff)), 13);
    __m256 f = _mm256_mul_ps(_mm256_castsi256_ps(mag), _mm256_set1_ps(0x1p112f));
    __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
    return _mm256_or_ps(f, _mm256_castsi256_ps(sign));
}

static inline __attribute__((always_inline)) void
k4_combine2(__m256i lo, __m256i hi, const uint16_t *sg, float d, vec16 *acc)
{
    __m256 dv = _mm256_set1_ps(d);
    acc->lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), _mm256_mul_ps(k4_f16x8(sg), dv), acc->lo);
    acc->hi = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), _mm256_mul_ps(k4_f16x8(sg + 8), dv), acc->hi);
}

/* Units u and u + 4 of group wg for both halves: w[0] u rows 0-7, w[1] u rows 8-15, w[2] and
 * w[3] unit u + 4 */
static inline __attribute__((always_inline)) void k4_units(const uint8_t *wg, int u, __m256i w[4])
{
    const __m256i low = _mm256_set1_epi8(15);
    __m256i vl = _mm256_loadu_si256((const __m256i *)(wg + u * 64));
    __m256i vh = _mm256_loadu_si256((const __m256i *)(wg + u * 64 + 32));
    w[0] = _mm256_and_si256(vl, low);
    w[1] = _mm256_and_si256(vh, low);
    w[2] = _mm256_and_si256(_mm256_srli_epi16(vl, 4), low);
    w[3] = _mm256_and_si256(_mm256_srli_epi16(vh, 4), low);
}

/* Row t's quantized x of group g, and the value its group sums start at: -8 * sum(x), which
 * takes the nibbles' offset back out */
static inline __attribute__((always_inline)) const int8_t *k4_xg(const kq_act *x, int t, int g)
{
    return x->q + (size_t)t * x->K + g * KQ_GROUP;
}
static inline __attribute__((always_inline)) __m256i k4_offset(const kq_act *x, int t, int g, int G)
{
    return _mm256_set1_epi32(-8 * x->sum[(size_t)t * G + g]);
}

static inline __attribute__((always_inline)) void
k4_start(const kq_act *x, int t, int M, int g, int G, const int8_t **xg, __m256i *lo, __m256i *hi)
{
    for (int m = 0; m < M; m++) {
        xg[m] = k4_xg(x, t + m, g);
        lo[m] = hi[m] = k4_offset(x, t + m, g, G);
    }
}

/* A group's 8 units add their vpmaddubsw pair sums in 16 bits and widen once:
 * a pair sum is within 2 * 15 * 127 = 3810 (x in [-127, 127]), 8 of them within
 * 30480 < 32767, so the int32 that vpmaddwd then gives is the same as adding
 * each unit's widened sums, with 2 of its 4 instructions a unit gone (on an AMD
 * Zen 4, 340M shape: batch 8 decode 1.18-1.22x, 16 1.10-1.22x, a 96-token
 * prefill 1.09-1.11x; bench/RESULTS.md, "q4 on AVX2: a group's sums in 16
 * bits"). The int32 sums start after the loop, which leaves it registers. */
static inline __attribute__((always_inline)) void k4_tile_madd(const kq_act *x, int t, int M,
                                                               const uint8_t *wb,
                                                               const uint16_t *sh, int shift, int G,
                                                               int pf, vec16 *acc)
{
    const __m256i ones = _mm256_set1_epi16(1);
    for (int m = 0; m < M; m++)
        acc[m] = V_ZERO();
    for (int g = 0; g < G; g++) {
        KQ256_PREFETCH(pf, wb + (size_t)g * 256, 256);
        const int8_t *xg[K4_TILE_T];
        __m256i sl[K4_TILE_T], sh16[K4_TILE_T], w[4];
        for (int m = 0; m < M; m++) {
            xg[m] = k4_xg(x, t + m, g);
            sl[m] = sh16[m] = _mm256_setzero_si256();
        }
        for (int u = 0; u < 4; u++) {
            k4_units(wb + (size_t)g * 256, u, w);
            for (int m = 0; m < M; m++)
                for (int p = 0; p < 2; p++) { /* unit u, then unit u + 4 */
                    __m256i xb = KQ256_UNIT(xg[m], u + 4 * p);
                    sl[m] = _mm256_add_epi16(sl[m], _mm256_maddubs_epi16(w[2 * p], xb));
                    sh16[m] = _mm256_add_epi16(sh16[m], _mm256_maddubs_epi16(w[2 * p + 1], xb));
                }
        }
        const uint16_t *sg = sh + (size_t)(g >> shift) * KQ_ROWS;
        for (int m = 0; m < M; m++) {
            __m256i start = k4_offset(x, t + m, g, G);
            __m256i lo = _mm256_add_epi32(start, _mm256_madd_epi16(sl[m], ones));
            __m256i hi = _mm256_add_epi32(start, _mm256_madd_epi16(sh16[m], ones));
            k4_combine2(lo, hi, sg, x->d[(size_t)(t + m) * G + g], &acc[m]);
        }
    }
}

__attribute__((target("avxvnni"))) static inline __attribute__((always_inline)) void
k4_tile_avxvnni(const kq_act *x, int t, int M, const uint8_t *wb, const uint16_t *sh, int shift,
                int G, int pf, vec16 *acc)
{
    for (int m = 0; m < M; m++)
        acc[m] = V_ZERO();
    for (int g = 0; g < G; g++) {
        KQ256_PREFETCH(pf, wb + (size_t)g * 256, 256);
        const int8_t *xg[K4_TILE_T];
        __m256i lo[K4_TILE_T], hi[K4_TILE_T], w[4];
        k4_start(x, t, M, g, G, xg, lo, hi);
        for (int u = 0; u < 4; u++) {
            k4_units(wb + (size_t)g * 256, u, w);
            for (int m = 0; m < M; m++)
                for (int p = 0; p < 2; p++) {
                    __m256i xb = KQ256_UNIT(xg[m], u + 4 * p);
                    lo[m] = _mm256_dpbusd_avx_epi32(lo[m], w[2 * p], xb);
                    hi[m] = _mm256_dpbusd_avx_epi32(hi[m], w[2 * p + 1], xb);
                }
        }
        const uint16_t *sg = sh + (size_t)(g >> shift) * KQ_ROWS;
        for (int m = 0; m < M; m++)
            k4_combine2(lo[m], hi[m], sg, x->d[(size_t)(t + m) * G + g], &acc[m]);
    }
}

#define K4_FN k4_linear_madd
#define K4_TILE k4_tile_madd
#define K4_ATTR
#include "kernels_q4_body.h"

#define K4_FN k4_linear_avxvnni
#define K4_TILE k4_tile_avxvnni
#define K4_ATTR __attribute__((target("avxvnni")))
#include "kernels_q4_body.h"

static void k4_linear(const kq_act *x, int T, const k_q8_matrix *w, int b0, int b1, float *y,
                      int ldy)
{
    if (kq_use_vnni())
        k4_linear_avxvnni(x, T, w, b0, b1, y, ldy);
    else
        k4_linear_madd(x, T, w, b0, b1, y, ldy);
}

static const char *k4_kernel(void) { return kq_use_vnni() ? "vpdpbusd (avx-vnni)" : "vpmaddubsw"; }
