/*
 * kernels_q4.c — 4-bit weights (kernels_q4.h): quantizing and packing a
 * matrix at load, and the f16 scales. The products run through the q8
 * entry points (kernels_q8.c), which pick the 4-bit kernel of the chosen
 * instruction-set path by the matrix's bits.
 *
 * Plain C with one rounding per value and no fused operations (the tree is
 * built with -ffp-contract=off), so the same bits on every CPU.
 */
#include "kernels_q4.h"

#include "isa.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint16_t k_f16_from_f32(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    uint16_t sign = (uint16_t)((b >> 16) & 0x8000);
    b &= 0x7fffffff;
    if (b >= 0x38800000) { /* a normal f16: round the mantissa at bit 13, to even */
        uint32_t r = b + 0xfff + ((b >> 13) & 1);
        return (uint16_t)(sign | ((r - 0x38000000) >> 13));
    }
    /* subnormal (or zero): f * 2^24 is the count of 2^-24 units, exact in f32; rintf rounds it to
     * even in the default mode (1024 is the smallest normal: the same bits) */
    float v;
    memcpy(&v, &b, sizeof v);
    return (uint16_t)(sign | (uint16_t)rintf(v * 16777216.0f));
}

float k_f32_from_f16(uint16_t h)
{
    /* exponent and mantissa moved into place, rebiased by multiplying by 2^112: exact for normal
     * and subnormal halves alike (a scale is never infinite or NaN) */
    uint32_t b = (uint32_t)(h & 0x7fff) << 13;
    float f;
    memcpy(&f, &b, sizeof f);
    f *= 0x1p112f;
    return (h & 0x8000) ? -f : f;
}

int k_q4_group_from_env(char *err, size_t errlen)
{
    const char *s = getenv("MHLA_Q4_GROUP");
    if (!s || !*s)
        return K4_GROUP_DEFAULT;
    if (!strcmp(s, "32") || !strcmp(s, "64") || !strcmp(s, "128"))
        return atoi(s);
    snprintf(err, errlen, "MHLA_Q4_GROUP='%.20s' is not 32, 64 or 128", s);
    return -1;
}

void k_q4_sizes(int N, int K, int wgroup, size_t *q_bytes, size_t *scale_bytes)
{
    size_t blocks = (size_t)(N + KQ_ROWS - 1) / KQ_ROWS, groups = (size_t)K / KQ_GROUP;
    *q_bytes = blocks * groups * KQ_ROWS * KQ_GROUP / 2;
    *scale_bytes = wgroup > 0 ? blocks * ((size_t)K / (size_t)wgroup) * KQ_ROWS * 2 : 0;
}

/* One group of n weights: its f16 scale into *h, and q + 8 into n4[] (0 to 15). -1 when the
 * scale does not fit f16. */
static int quantize_group(const float *v, int n, uint16_t *h, uint8_t *n4)
{
    float m = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(v[i]) > fabsf(m))
            m = v[i];
    float d = m / -8.0f;
    if (!(fabsf(d) < 65520.0f))
        return -1;
    *h = k_f16_from_f32(d);
    float dh = k_f32_from_f16(*h);
    float id = dh != 0.0f ? 1.0f / dh : 0.0f;
    for (int i = 0; i < n; i++) {
        /* round half away from zero: p and p +- 0.5 are exact in double */
        double p = (double)(v[i] * id);
        int r = (int)(p + (p < 0 ? -0.5 : 0.5));
        n4[i] = (uint8_t)((r > 7 ? 7 : r < -8 ? -8 : r) + 8);
    }
    return 0;
}

/* Row j's nibbles of one group of wgroup weights from k0, into the packed blocks. */
static void pack_group(uint8_t *q, int G, int j, int k0, const uint8_t *n4, int n)
{
    int b = j / KQ_ROWS, r = j % KQ_ROWS;
    for (int i = 0; i < n; i++) {
        int k = k0 + i, g = k / KQ_GROUP, kk = k % KQ_GROUP;
        uint8_t *byte = q + ((size_t)b * G + g) * 256 + (kk % 16) / 4 * 64 + r * 4 + kk % 4;
        *byte =
            kk < 16 ? (uint8_t)((*byte & 0xf0) | n4[i]) : (uint8_t)((*byte & 0x0f) | n4[i] << 4);
    }
}

static int check_shape(int K, int wgroup, char *err, size_t errlen)
{
    if (wgroup != 32 && wgroup != 64 && wgroup != 128) {
        snprintf(err, errlen, "a group of %d weights (32, 64 or 128)", wgroup);
        return -1;
    }
    if (K <= 0 || K % wgroup) {
        snprintf(err, errlen, "its input width %d is not a multiple of %d", K, wgroup);
        return -1;
    }
    return 0;
}

int k_q4_quantize(const float *w, int N, int K, int wgroup, uint8_t *q, uint16_t *scale,
                  k_q8_matrix *out, char *err, size_t errlen)
{
    if (check_shape(K, wgroup, err, errlen))
        return -1;
    int G = K / KQ_GROUP, GW = K / wgroup, blocks = (N + KQ_ROWS - 1) / KQ_ROWS;
    size_t qb, sb;
    k_q4_sizes(N, K, wgroup, &qb, &sb);
    memset(q, 0x88, qb); /* the padding rows: q = 0 */
    memset(scale, 0, sb);
    uint8_t n4[128];
    for (int j = 0; j < N; j++) {
        const float *row = w + (size_t)j * K;
        for (int k = 0; k < K; k++)
            if (!isfinite(row[k])) {
                snprintf(err, errlen, "it holds a value that is not finite at [%d, %d]", j, k);
                return -1;
            }
        for (int g = 0; g < GW; g++) {
            uint16_t *h = scale + ((size_t)(j / KQ_ROWS) * GW + g) * KQ_ROWS + j % KQ_ROWS;
            if (quantize_group(row + (size_t)g * wgroup, wgroup, h, n4)) {
                snprintf(err, errlen,
                         "its weights at [%d, %d..%d] reach beyond what an f16 scale holds "
                         "(|w| up to 524,000)",
                         j, g * wgroup, (g + 1) * wgroup - 1);
                return -1;
            }
            pack_group(q, G, j, g * wgroup, n4, wgroup);
        }
    }
    *out = (k_q8_matrix){N, K, G, blocks, (const int8_t *)q, NULL, 4, wgroup, scale};
    return 0;
}

int k_q4_raw(const k_q8_matrix *w, int j, int k)
{
    int kk = k % KQ_GROUP;
    size_t bg = (size_t)(j / KQ_ROWS) * w->groups + k / KQ_GROUP;
    uint8_t byte = (uint8_t)w->q[bg * 256 + (kk % 16) / 4 * 64 + (j % KQ_ROWS) * 4 + kk % 4];
    return (kk < 16 ? byte & 15 : byte >> 4) - 8;
}

uint16_t k_q4_raw_scale(const k_q8_matrix *w, int j, int k)
{
    return w->scale_h[((size_t)(j / KQ_ROWS) * (w->K / w->wgroup) + k / w->wgroup) * KQ_ROWS +
                      j % KQ_ROWS];
}

float k_q4_value(const k_q8_matrix *w, int j, int k)
{
    return (float)k_q4_raw(w, j, k) * k_f32_from_f16(k_q4_raw_scale(w, j, k));
}

const char *k_q4_kernel_name(void) { return k_isa_ops()->q4_kernel(); }
