/*
 * q8_avx512.h — the q8 product (kernels_q8.h) on AVX-512: a zmm holds one
 * 4-byte unit of a group for 16 rows, so a lane is a row and each unit of
 * an activation row is a broadcast 32-bit word.
 *
 * With AVX512-VNNI, vpdpbusd multiplies unsigned by signed bytes: the
 * weights go in as w + 128 (a xor of the sign bit, in [1, 255]) and the
 * group's sum starts at -128 * sum(x), which takes the offset back out
 * exactly. Without VNNI, vpmaddubsw takes |x| (made with the rows:
 * kq_act's qa) as the unsigned side and w with x's sign (w is never -128,
 * so negating it cannot overflow; pair sums stay within 2 * 127 * 127),
 * then vpmaddwd adds the pairs. Both give each group's exact int32, so the
 * same bits. Included by isa_avx512.c.
 */
#include "isa.h"

#include <cpuid.h>
#include <immintrin.h>
#include <stdlib.h>

#define KQ_TILE_T 4

/* Unit u (4 bytes) of an activation group in every lane: a broadcast load */
#define KQ512_UNIT(xg, u) _mm512_broadcastd_epi32(_mm_loadu_si32((xg) + 4 * (u)))

/* The float side, the same for both: acc = fma(dot, s_w * s_x, acc). */
#define KQ512_COMBINE(s, sc, d, acc)                                                               \
    ((acc) = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps((sc), _mm512_set1_ps(d)), (acc)))

/* How far ahead the prefetch runs (measured at batch 1, where every tile is a first) */
#ifndef KQ_PREFETCH_BYTES
#define KQ_PREFETCH_BYTES 2048
#endif

/* The first tile of a pass over a block reads its weights from memory (the
 * only tile at batch 1): it prefetches them dist bytes ahead of its loads */
#define KQ512_PREFETCH(pf, p, bytes, dist, hint)                                                   \
    do {                                                                                           \
        if (pf)                                                                                    \
            for (int l_ = 0; l_ < (bytes); l_ += 64)                                               \
                _mm_prefetch((const char *)(p) + (dist) + l_, (hint));                             \
    } while (0)

__attribute__((target("avx512vnni"))) static inline __attribute__((always_inline)) void
kq_tile_vnni(const kq_act *x, int t, int M, const int8_t *wb, const float *sb, int G, int pf,
             __m512 *acc)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int m = 0; m < M; m++)
        acc[m] = _mm512_setzero_ps();
    for (int g = 0; g < G; g++) {
        __m512i w[8];
        KQ512_PREFETCH(pf, wb + (size_t)g * 512, 512, KQ_PREFETCH_BYTES, _MM_HINT_T0);
        for (int u = 0; u < 8; u++)
            w[u] = _mm512_xor_si512(_mm512_loadu_si512(wb + (size_t)g * 512 + u * 64), flip);
        __m512 sc = _mm512_loadu_ps(sb + (size_t)g * KQ_ROWS);
        for (int m = 0; m < M; m++) {
            size_t row = (size_t)(t + m);
            const int8_t *xg = x->q + row * x->K + g * KQ_GROUP;
            __m512i s0 = _mm512_set1_epi32(-128 * x->sum[row * G + g]), s1 = _mm512_setzero_si512();
            for (int u = 0; u < 8; u += 2) {
                s0 = _mm512_dpbusd_epi32(s0, w[u], KQ512_UNIT(xg, u));
                s1 = _mm512_dpbusd_epi32(s1, w[u + 1], KQ512_UNIT(xg, u + 1));
            }
            KQ512_COMBINE(_mm512_add_epi32(s0, s1), sc, x->d[row * G + g], acc[m]);
        }
    }
}

static inline __attribute__((always_inline)) void kq_tile_bw(const kq_act *x, int t, int M,
                                                             const int8_t *wb, const float *sb,
                                                             int G, int pf, __m512 *acc)
{
    const __m512i ones = _mm512_set1_epi16(1), zero = _mm512_setzero_si512();
    for (int m = 0; m < M; m++)
        acc[m] = _mm512_setzero_ps();
    for (int g = 0; g < G; g++) {
        __m512i w[8];
        KQ512_PREFETCH(pf, wb + (size_t)g * 512, 512, KQ_PREFETCH_BYTES, _MM_HINT_T0);
        for (int u = 0; u < 8; u++)
            w[u] = _mm512_loadu_si512(wb + (size_t)g * 512 + u * 64);
        __m512 sc = _mm512_loadu_ps(sb + (size_t)g * KQ_ROWS);
        for (int m = 0; m < M; m++) {
            size_t row = (size_t)(t + m);
            const int8_t *xg = x->q + row * x->K + g * KQ_GROUP;
            const uint8_t *ag = x->qa + row * x->K + g * KQ_GROUP;
            __m512i s = _mm512_setzero_si512();
            for (int u = 0; u < 8; u++) {
                __m512i xb = KQ512_UNIT(xg, u);
                __m512i ws = _mm512_mask_sub_epi8(w[u], _mm512_movepi8_mask(xb), zero, w[u]);
                __m512i p = _mm512_maddubs_epi16(KQ512_UNIT(ag, u), ws);
                s = _mm512_add_epi32(s, _mm512_madd_epi16(p, ones));
            }
            KQ512_COMBINE(s, sc, x->d[row * G + g], acc[m]);
        }
    }
}

#define KQ_FN kq_linear_vnni
#define KQ_TILE kq_tile_vnni
#define KQ_ATTR __attribute__((target("avx512vnni")))
#include "kernels_q8_body.h"

#define KQ_FN kq_linear_bw
#define KQ_TILE kq_tile_bw
#define KQ_ATTR
#include "kernels_q8_body.h"

/* MHLA_CPU_Q8_NO_DOT=1 leaves the dot-product instructions (vpdpbusd,
 * sdot, and with them AMX's tdpbssd: q8_amx.h) unused even where the CPU
 * has them, so that tests can run the other kernel on the same machine. */
static int kq_use_vnni(void)
{
    static _Atomic int v = -1; /* set once; every thread finds the same answer */
    if (v < 0) {
        const char *off = getenv("MHLA_CPU_Q8_NO_DOT");
        unsigned a, b, c = 0, d; /* cpuid 7.0 ecx bit 11: AVX512_VNNI (the path checked zmm) */
        int vnni = __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((c >> 11) & 1);
        v = vnni && !(off && off[0] == '1');
    }
    return v;
}
