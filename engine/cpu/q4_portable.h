/*
 * q4_portable.h — the q4 product (kernels_q4.h) in plain C: each of the 16
 * lanes takes the exact int32 dot of each group of 32, then one fmaf per
 * group in group order — what the vector paths compute lane by lane.
 * Included by isa_portable.c before kernels_body.h.
 */
#include "kernels_q4.h"

#include <math.h>

static inline __attribute__((always_inline)) void k4_tile_c(const kq_act *x, int t, int M,
                                                            const uint8_t *wb, const uint16_t *sh,
                                                            int shift, int G, int pf, vec16 *acc)
{
    (void)pf; /* no software prefetch on this path (none measured) */
    for (int m = 0; m < M; m++) {
        const int8_t *xr = x->q + (size_t)(t + m) * x->K;
        const float *dr = x->d + (size_t)(t + m) * G;
        vec16 a;
        for (int r = 0; r < KQ_ROWS; r++)
            a.l[r] = 0.0f;
        for (int g = 0; g < G; g++) {
            const uint8_t *wg = wb + (size_t)g * 256;
            const int8_t *xg = xr + g * KQ_GROUP;
            int32_t s[KQ_ROWS] = {0};
            for (int u = 0; u < 4; u++)
                for (int r = 0; r < KQ_ROWS; r++)
                    for (int i = 0; i < 4; i++) {
                        int byte = wg[u * 64 + r * 4 + i];
                        s[r] += ((byte & 15) - 8) * xg[u * 4 + i] +
                                ((byte >> 4) - 8) * xg[16 + u * 4 + i];
                    }
            const uint16_t *sg = sh + (size_t)(g >> shift) * KQ_ROWS;
            for (int r = 0; r < KQ_ROWS; r++)
                a.l[r] = fmaf((float)s[r], k_f32_from_f16(sg[r]) * dr[g], a.l[r]);
        }
        acc[m] = a;
    }
}

#define K4_FN k4_linear
#define K4_TILE k4_tile_c
#define K4_TILE_T 1
#define K4_ATTR
#include "kernels_q4_body.h"

static const char *k4_kernel(void) { return "plain C"; }
