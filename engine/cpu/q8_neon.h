/*
 * q8_neon.h — the q8 product (kernels_q8.h) on AArch64 Advanced SIMD: the
 * 16 rows of a block are four 4-lane quarters, a lane is a row. With the
 * dot-product extension (HWCAP_ASIMDDP), sdot by element multiplies 4
 * rows' 4-byte unit by one 4-byte unit of x; without it, smull widens the
 * products to int16 (|w x| <= 127 * 127), addp adds pairs (<= 2 * 127 *
 * 127) and sadalp accumulates pairs into int32. Both give each group's
 * exact int32. Included by isa_neon.c.
 */
#include "isa.h"

#include <arm_neon.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#define KQ_TILE_T 2

/* Functions that may use sdot: built for it, called only where HWCAP_ASIMDDP says so.
 * clang's arm_neon.h (14) declares the dot-product intrinsics only when the whole file is
 * built for them: such a build has the smull kernel alone. */
#if defined(__clang__) && !defined(__ARM_FEATURE_DOTPROD)
#define KQ_HAVE_SDOT 0
#else
#define KQ_HAVE_SDOT 1
#if defined(__clang__)
#define KQ_DOTPROD __attribute__((target("dotprod")))
#else
#define KQ_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#endif
#define KQ_SDOT(acc, a, b, lane) ((acc) = vdotq_laneq_s32((acc), (a), (b), lane))
#endif

static inline __attribute__((always_inline)) void kq_combine4(const int32x4_t *s, const float *sc,
                                                              float d, vec16 *acc)
{
    for (int q = 0; q < 4; q++)
        acc->q[q] =
            vfmaq_f32(acc->q[q], vcvtq_f32_s32(s[q]), vmulq_n_f32(vld1q_f32(sc + 4 * q), d));
}

#if KQ_HAVE_SDOT
KQ_DOTPROD static inline __attribute__((always_inline)) void kq_tile_sdot(const kq_act *x, int t,
                                                                          int M, const int8_t *wb,
                                                                          const float *sb, int G,
                                                                          int pf, vec16 *acc)
{
    (void)pf; /* no software prefetch on this path (none measured) */
    for (int m = 0; m < M; m++)
        acc[m] = V_ZERO();
    for (int g = 0; g < G; g++) {
        const int8_t *wg = wb + (size_t)g * 512;
        int32x4_t s[KQ_TILE_T][4];
        int8x16_t x0[KQ_TILE_T], x1[KQ_TILE_T];
        for (int m = 0; m < M; m++) {
            const int8_t *xg = x->q + (size_t)(t + m) * x->K + g * KQ_GROUP;
            x0[m] = vld1q_s8(xg);
            x1[m] = vld1q_s8(xg + 16);
            for (int q = 0; q < 4; q++)
                s[m][q] = vdupq_n_s32(0);
        }
        for (int q = 0; q < 4; q++) {
            int8x16_t w[8];
            for (int u = 0; u < 8; u++)
                w[u] = vld1q_s8(wg + u * 64 + q * 16);
            for (int m = 0; m < M; m++) {
                KQ_SDOT(s[m][q], w[0], x0[m], 0);
                KQ_SDOT(s[m][q], w[1], x0[m], 1);
                KQ_SDOT(s[m][q], w[2], x0[m], 2);
                KQ_SDOT(s[m][q], w[3], x0[m], 3);
                KQ_SDOT(s[m][q], w[4], x1[m], 0);
                KQ_SDOT(s[m][q], w[5], x1[m], 1);
                KQ_SDOT(s[m][q], w[6], x1[m], 2);
                KQ_SDOT(s[m][q], w[7], x1[m], 3);
            }
        }
        for (int m = 0; m < M; m++)
            kq_combine4(s[m], sb + (size_t)g * KQ_ROWS, x->d[(size_t)(t + m) * G + g], &acc[m]);
    }
}

#endif

static inline __attribute__((always_inline)) void kq_tile_smull(const kq_act *x, int t, int M,
                                                                const int8_t *wb, const float *sb,
                                                                int G, int pf, vec16 *acc)
{
    (void)pf; /* no software prefetch on this path (none measured) */
    for (int m = 0; m < M; m++)
        acc[m] = V_ZERO();
    for (int g = 0; g < G; g++) {
        const int8_t *wg = wb + (size_t)g * 512;
        int32x4_t s[KQ_TILE_T][4];
        int32_t xs[KQ_TILE_T][8];
        for (int m = 0; m < M; m++) {
            memcpy(xs[m], x->q + (size_t)(t + m) * x->K + g * KQ_GROUP, sizeof xs[m]);
            for (int q = 0; q < 4; q++)
                s[m][q] = vdupq_n_s32(0);
        }
        for (int u = 0; u < 8; u++) {
            for (int m = 0; m < M; m++) {
                int8x8_t xr = vreinterpret_s8_s32(vdup_n_s32(xs[m][u]));
                for (int q = 0; q < 4; q++) {
                    int8x16_t w = vld1q_s8(wg + u * 64 + q * 16);
                    int16x8_t p =
                        vpaddq_s16(vmull_s8(vget_low_s8(w), xr), vmull_s8(vget_high_s8(w), xr));
                    s[m][q] = vpadalq_s16(s[m][q], p);
                }
            }
        }
        for (int m = 0; m < M; m++)
            kq_combine4(s[m], sb + (size_t)g * KQ_ROWS, x->d[(size_t)(t + m) * G + g], &acc[m]);
    }
}

#if KQ_HAVE_SDOT
#define KQ_FN kq_linear_sdot
#define KQ_TILE kq_tile_sdot
#define KQ_ATTR KQ_DOTPROD
#include "kernels_q8_body.h"
#endif

#define KQ_FN kq_linear_smull
#define KQ_TILE kq_tile_smull
#define KQ_ATTR
#include "kernels_q8_body.h"

/* MHLA_CPU_Q8_NO_DOT=1: see q8_avx512.h */
static int kq_use_sdot(void)
{
    static _Atomic int v = -1; /* set once; every thread finds the same answer */
    if (v < 0) {
        const char *off = getenv("MHLA_CPU_Q8_NO_DOT");
        v = KQ_HAVE_SDOT && (getauxval(AT_HWCAP) & (1ul << 20)) /* HWCAP_ASIMDDP */ &&
            !(off && off[0] == '1');
    }
    return v;
}

static void kq_linear(const kq_act *x, int T, const k_q8_matrix *w, int b0, int b1, float *y,
                      int ldy)
{
#if KQ_HAVE_SDOT
    if (kq_use_sdot()) {
        kq_linear_sdot(x, T, w, b0, b1, y, ldy);
        return;
    }
#endif
    kq_linear_smull(x, T, w, b0, b1, y, ldy);
}

static const char *kq_kernel(void) { return kq_use_sdot() ? "sdot" : "smull"; }
