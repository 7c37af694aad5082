/*
 * q4_neon.h — the q4 product (kernels_q4.h) on AArch64 Advanced SIMD: the 16
 * rows of a block are four 4-lane quarters, a lane is a row, as in
 * q8_neon.h. A 16-byte load of packed weights is two units of 4 rows: its
 * low nibbles and its high ones, q + 8 in [0, 15]. With the dot-product
 * extension, sdot by element multiplies them by a 4-byte unit of x; without
 * it, smull widens the products to int16 (<= 15 * 127), addp adds pairs and
 * sadalp accumulates pairs into int32. Both start at -8 * sum(x), which
 * takes the offset back out, and give each group's exact int32; the f16
 * scales widen exactly (fcvtl). Included by isa_neon.c after q8_neon.h (its
 * KQ_HAVE_SDOT, KQ_DOTPROD, KQ_SDOT and kq_use_sdot).
 */
#include "kernels_q4.h"

#include <arm_neon.h>
#include <string.h>

#define K4_TILE_T 2

/* The group's 16 scales as f32, a quarter a vector */
static inline __attribute__((always_inline)) void k4_scales4(const uint16_t *sg, float32x4_t sc[4])
{
    for (int q = 0; q < 4; q++)
        sc[q] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(sg + 4 * q)));
}

static inline __attribute__((always_inline)) void
k4_combine4(const int32x4_t *s, const float32x4_t *sc, float d, vec16 *acc)
{
    for (int q = 0; q < 4; q++)
        acc->q[q] = vfmaq_f32(acc->q[q], vcvtq_f32_s32(s[q]), vmulq_n_f32(sc[q], d));
}

/* Quarter q of the group's 8 units: w[u] unit u (the low nibbles of load u), w[u + 4] unit u + 4 */
static inline __attribute__((always_inline)) void k4_quarter(const uint8_t *wg, int q,
                                                             int8x16_t w[8])
{
    const uint8x16_t low = vdupq_n_u8(15);
    for (int u = 0; u < 4; u++) {
        uint8x16_t v = vld1q_u8(wg + u * 64 + q * 16);
        w[u] = vreinterpretq_s8_u8(vandq_u8(v, low));
        w[u + 4] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
    }
}

#if KQ_HAVE_SDOT
KQ_DOTPROD static inline __attribute__((always_inline)) void
k4_tile_sdot(const kq_act *x, int t, int M, const uint8_t *wb, const uint16_t *sh, int shift, int G,
             int pf, vec16 *acc)
{
    (void)pf; /* no software prefetch on this path (none measured) */
    for (int m = 0; m < M; m++)
        acc[m] = V_ZERO();
    for (int g = 0; g < G; g++) {
        const uint8_t *wg = wb + (size_t)g * 256;
        int32x4_t s[K4_TILE_T][4];
        int8x16_t x0[K4_TILE_T], x1[K4_TILE_T];
        for (int m = 0; m < M; m++) {
            size_t row = (size_t)(t + m);
            const int8_t *xg = x->q + row * x->K + g * KQ_GROUP;
            x0[m] = vld1q_s8(xg);
            x1[m] = vld1q_s8(xg + 16);
            for (int q = 0; q < 4; q++)
                s[m][q] = vdupq_n_s32(-8 * x->sum[row * G + g]);
        }
        for (int q = 0; q < 4; q++) {
            int8x16_t w[8];
            k4_quarter(wg, q, w);
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
        float32x4_t sc[4];
        k4_scales4(sh + (size_t)(g >> shift) * KQ_ROWS, sc);
        for (int m = 0; m < M; m++)
            k4_combine4(s[m], sc, x->d[(size_t)(t + m) * G + g], &acc[m]);
    }
}
#endif

static inline __attribute__((always_inline)) void k4_tile_smull(const kq_act *x, int t, int M,
                                                                const uint8_t *wb,
                                                                const uint16_t *sh, int shift,
                                                                int G, int pf, vec16 *acc)
{
    (void)pf; /* no software prefetch on this path (none measured) */
    for (int m = 0; m < M; m++)
        acc[m] = V_ZERO();
    for (int g = 0; g < G; g++) {
        const uint8_t *wg = wb + (size_t)g * 256;
        int32x4_t s[K4_TILE_T][4];
        int32_t xs[K4_TILE_T][8];
        for (int m = 0; m < M; m++) {
            size_t row = (size_t)(t + m);
            memcpy(xs[m], x->q + row * x->K + g * KQ_GROUP, sizeof xs[m]);
            for (int q = 0; q < 4; q++)
                s[m][q] = vdupq_n_s32(-8 * x->sum[row * G + g]);
        }
        for (int q = 0; q < 4; q++) {
            int8x16_t w[8];
            k4_quarter(wg, q, w);
            for (int u = 0; u < 8; u++)
                for (int m = 0; m < M; m++) {
                    int8x8_t xr = vreinterpret_s8_s32(vdup_n_s32(xs[m][u]));
                    int16x8_t p = vpaddq_s16(vmull_s8(vget_low_s8(w[u]), xr),
                                             vmull_s8(vget_high_s8(w[u]), xr));
                    s[m][q] = vpadalq_s16(s[m][q], p);
                }
        }
        float32x4_t sc[4];
        k4_scales4(sh + (size_t)(g >> shift) * KQ_ROWS, sc);
        for (int m = 0; m < M; m++)
            k4_combine4(s[m], sc, x->d[(size_t)(t + m) * G + g], &acc[m]);
    }
}

#if KQ_HAVE_SDOT
#define K4_FN k4_linear_sdot
#define K4_TILE k4_tile_sdot
#define K4_ATTR KQ_DOTPROD
#include "kernels_q4_body.h"
#endif

#define K4_FN k4_linear_smull
#define K4_TILE k4_tile_smull
#define K4_ATTR
#include "kernels_q4_body.h"

static void k4_linear(const kq_act *x, int T, const k_q8_matrix *w, int b0, int b1, float *y,
                      int ldy)
{
#if KQ_HAVE_SDOT
    if (kq_use_sdot()) {
        k4_linear_sdot(x, T, w, b0, b1, y, ldy);
        return;
    }
#endif
    k4_linear_smull(x, T, w, b0, b1, y, ldy);
}

static const char *k4_kernel(void) { return kq_use_sdot() ? "sdot" : "smull"; }
