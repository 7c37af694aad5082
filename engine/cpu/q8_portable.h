/*
 * q8_portable.h — the q8 product (kernels_q8.h) in plain C: each of the 16
 * lanes takes the exact int32 dot of each group, then one fmaf per group in
 * group order — what the vector paths compute lane by lane. Included by
 * isa_portable.c before kernels_body.h.
 */
#include "isa.h"

#include <math.h>

static inline __attribute__((always_inline)) void kq_tile_c(const kq_act *x, int t, int M,
                                                            const int8_t *wb, const float *sb,
                                                            int G, int pf, vec16 *acc)
{
    (void)pf; /* no software prefetch on this path (none measured) */
    for (int m = 0; m < M; m++) {
        const int8_t *xr = x->q + (size_t)(t + m) * x->K;
        const float *dr = x->d + (size_t)(t + m) * G;
        vec16 a;
        for (int r = 0; r < KQ_ROWS; r++)
            a.l[r] = 0.0f;
        for (int g = 0; g < G; g++) {
            const int8_t *wg = wb + (size_t)g * 512, *xg = xr + g * KQ_GROUP;
            int32_t s[KQ_ROWS] = {0};
            for (int u = 0; u < 8; u++)
                for (int r = 0; r < KQ_ROWS; r++)
                    for (int i = 0; i < 4; i++)
                        s[r] += (int32_t)wg[u * 64 + r * 4 + i] * xg[u * 4 + i];
            for (int r = 0; r < KQ_ROWS; r++)
                a.l[r] = fmaf((float)s[r], sb[(size_t)g * KQ_ROWS + r] * dr[g], a.l[r]);
        }
        acc[m] = a;
    }
}

#define KQ_FN kq_linear
#define KQ_TILE kq_tile_c
#define KQ_TILE_T 1
#define KQ_ATTR
#include "kernels_q8_body.h"

static const char *kq_kernel(void) { return "plain C"; }
