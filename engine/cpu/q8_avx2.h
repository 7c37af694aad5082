/*
 * q8_avx2.h — the q8 product (kernels_q8.h) on AVX2: the 16 rows of a
 * block are two ymm halves (rows 0-7 and 8-15), a lane is a row. Without
 * AVX-VNNI, vpmaddubsw takes |x| as the unsigned side and w with x's sign
 * (vpsignb; w is never -128, pair sums stay within 2 * 127 * 127) and
 * vpmaddwd adds the pairs. |x| comes made with the rows (kq_act's qa): a
 * vpabsb here ran once for every block of weights, and the products took
 * 7-10 % less time at 8 to 512 rows without it (bench/RESULTS.md, "|x| made
 * once"). With AVX-VNNI, vpdpbusd takes w + 128 and the sum starts at
 * -128 * sum(x) (as in q8_avx512.h). Both give each group's exact int32.
 * Included by isa_avx2.c.
 */
#include "isa.h"

#include <cpuid.h>
#include <immintrin.h>
#include <stdlib.h>

/* 3 rows of x a tile share each unit's loads of w: vpmaddubsw's products at 8 to 512 rows
 * ran 7-10 % faster than with 2 (AMD Zen 4 forced to AVX2, 4 rows no faster than 3);
 * bench/RESULTS.md, "q8 on AVX2: tiles of 3 rows" */
#define KQ_TILE_T 3

/* The first tile of a block's rows of x reads its weights from memory: it
 * prefetches them 2 KiB ahead of the loads, as the AVX-512 kernels do
 * (q8_avx512.h); the tiles after it find them in the cache */
#define KQ256_PREFETCH(pf, p, bytes)                                                               \
    do {                                                                                           \
        if (pf)                                                                                    \
            for (int pf_ = 0; pf_ < (bytes); pf_ += 64)                                            \
                _mm_prefetch((const char *)(p) + 2048 + pf_, _MM_HINT_T0);                         \
    } while (0)

/* Unit u (4 bytes) of an activation group in every lane: a broadcast load */
#define KQ256_UNIT(xg, u) _mm256_broadcastd_epi32(_mm_loadu_si32((xg) + 4 * (u)))

static inline __attribute__((always_inline)) void kq_combine2(__m256i lo, __m256i hi,
                                                              const float *sc, float d, vec16 *acc)
{
    __m256 dv = _mm256_set1_ps(d);
    acc->lo =
        _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), _mm256_mul_ps(_mm256_loadu_ps(sc), dv), acc->lo);
    acc->hi = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), _mm256_mul_ps(_mm256_loadu_ps(sc + 8), dv),
                              acc->hi);
}

static inline __attribute__((always_inline)) void kq_tile_madd(const kq_act *x, int t, int M,
                                                               const int8_t *wb, const float *sb,
                                                               int G, int pf, vec16 *acc)
{
    const __m256i ones = _mm256_set1_epi16(1);
    for (int m = 0; m < M; m++)
        acc[m] = V_ZERO();
    for (int g = 0; g < G; g++) {
        const int8_t *wg = wb + (size_t)g * 512;
        KQ256_PREFETCH(pf, wg, 512);
        const int8_t *xg[KQ_TILE_T];
        const uint8_t *ag[KQ_TILE_T];
        __m256i lo[KQ_TILE_T], hi[KQ_TILE_T];
        for (int m = 0; m < M; m++) {
            xg[m] = x->q + (size_t)(t + m) * x->K + g * KQ_GROUP;
            ag[m] = x->qa + (size_t)(t + m) * x->K + g * KQ_GROUP;
            lo[m] = hi[m] = _mm256_setzero_si256();
        }
        for (int u = 0; u < 8; u++) {
            __m256i wl = _mm256_loadu_si256((const __m256i *)(wg + u * 64));
            __m256i wh = _mm256_loadu_si256((const __m256i *)(wg + u * 64 + 32));
            for (int m = 0; m < M; m++) {
                __m256i xb = KQ256_UNIT(xg[m], u), xa = KQ256_UNIT(ag[m], u);
                __m256i pl = _mm256_maddubs_epi16(xa, _mm256_sign_epi8(wl, xb));
                __m256i ph = _mm256_maddubs_epi16(xa, _mm256_sign_epi8(wh, xb));
                lo[m] = _mm256_add_epi32(lo[m], _mm256_madd_epi16(pl, ones));
                hi[m] = _mm256_add_epi32(hi[m], _mm256_madd_epi16(ph, ones));
            }
        }
        for (int m = 0; m < M; m++)
            kq_combine2(lo[m], hi[m], sb + (size_t)g * KQ_ROWS, x->d[(size_t)(t + m) * G + g],
                        &acc[m]);
    }
}

__attribute__((target("avxvnni"))) static inline __attribute__((always_inline)) void
kq_tile_avxvnni(const kq_act *x, int t, int M, const int8_t *wb, const float *sb, int G, int pf,
                vec16 *acc)
{
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int m = 0; m < M; m++)
        acc[m] = V_ZERO();
    for (int g = 0; g < G; g++) {
        const int8_t *wg = wb + (size_t)g * 512;
        KQ256_PREFETCH(pf, wg, 512);
        const int8_t *xg[KQ_TILE_T];
        __m256i lo[KQ_TILE_T], hi[KQ_TILE_T];
        for (int m = 0; m < M; m++) {
            size_t row = (size_t)(t + m);
            xg[m] = x->q + row * x->K + g * KQ_GROUP;
            lo[m] = hi[m] = _mm256_set1_epi32(-128 * x->sum[row * G + g]);
        }
        for (int u = 0; u < 8; u++) {
            __m256i wl = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wg + u * 64)), flip);
            __m256i wh =
                _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(wg + u * 64 + 32)), flip);
            for (int m = 0; m < M; m++) {
                __m256i xb = KQ256_UNIT(xg[m], u);
                lo[m] = _mm256_dpbusd_avx_epi32(lo[m], wl, xb);
                hi[m] = _mm256_dpbusd_avx_epi32(hi[m], wh, xb);
            }
        }
        for (int m = 0; m < M; m++)
            kq_combine2(lo[m], hi[m], sb + (size_t)g * KQ_ROWS, x->d[(size_t)(t + m) * G + g],
                        &acc[m]);
    }
}

#define KQ_FN kq_linear_madd
#define KQ_TILE kq_tile_madd
#define KQ_ATTR
#include "kernels_q8_body.h"

#define KQ_FN kq_linear_avxvnni
#define KQ_TILE kq_tile_avxvnni
#define KQ_ATTR __attribute__((target("avxvnni")))
#include "kernels_q8_body.h"

/* MHLA_CPU_Q8_NO_DOT=1: see q8_avx512.h */
static int kq_use_vnni(void)
{
    static _Atomic int v = -1; /* set once; every thread finds the same answer */
    if (v < 0) {
        const char *off = getenv("MHLA_CPU_Q8_NO_DOT");
        unsigned a = 0, b, c, d; /* cpuid 7.1 eax bit 4: AVX-VNNI (the path checked ymm) */
        int vnni = __get_cpuid_count(7, 0, &a, &b, &c, &d) && a >= 1 &&
                   __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 4) & 1);
        v = vnni && !(off && off[0] == '1');
    }
    return v;
}

static void kq_linear(const kq_act *x, int T, const k_q8_matrix *w, int b0, int b1, float *y,
                      int ldy)
{
    if (kq_use_vnni())
        kq_linear_avxvnni(x, T, w, b0, b1, y, ldy);
    else
        kq_linear_madd(x, T, w, b0, b1, y, ldy);
}

static const char *kq_kernel(void) { return kq_use_vnni() ? "vpdpbusd (avx-vnni)" : "vpmaddubsw"; }
