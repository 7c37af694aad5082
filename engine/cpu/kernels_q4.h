/*
 * kernels_q4.h — 4-bit weights (--weights q4): the format and its arithmetic.
 *
 * A weight matrix [N, K] is held as 4-bit integers with one f16 scale per
 * group of `wgroup` (32, 64 or 128; K4_GROUP_DEFAULT) along K:
 * w[j, k] ~= q[j, k] * d[j, k / wgroup], q in [-8, 7]. The group's scale is
 * d = m / -8 rounded to f16 (nearest even), m its value of largest |w| (the
 * first such), so m comes back as -8 d; q = round(w / d) (half away from
 * zero) clamped to [-8, 7]. Zero stays exactly zero; sixteen levels instead
 * of fifteen make the step a group's max / 8, not / 7 (llama.cpp's Q4_0
 * rule, so the two compare at the same bytes: 4.5 bits a weight at 32).
 *
 * Rows are packed in blocks of 16 like q8 (kernels_q8.h): for block b and
 * each group g of 32 along K, 256 bytes; byte u*64 + r*4 + i (u < 4) holds
 * row 16b + r at k = 32g + 4u + i in its low nibble and at k = 32g + 16 +
 * 4u + i in its high one, as q + 8 (0 to 15). A 64-byte load is two of q8's
 * 4-byte units for 16 rows: a mask and a shift give each, unsigned, ready for
 * vpdpbusd / vpmaddubsw (the unsigned side) or sdot; the offset of 8 comes
 * back out exactly through the activation group's sum (-8 * sum(x)).
 *
 * The activations are quantized exactly as for q8 (per row, per group of
 * 32, int8 with an f32 scale: k_q8_rows), and the product is defined as
 *   acc = 0; for g < K / 32:
 *     acc = fma((float)dot_g, (float)d[j, g * 32 / wgroup] * s_x[t, g], acc)
 * where dot_g is the exact int32 sum of q * x over the 32 k of group g
 * (|dot_g| <= 32 * 8 * 127 < 2^24, so the conversion is exact) and the f16
 * scale widens exactly to f32: every path, whatever instructions give it
 * the integer, gives the same bits, and a row's result depends on that row
 * alone (batch-invariant).
 *
 * Scales are f16, not f32: at 32 weights a group an f32 scale costs 1 bit a
 * weight (25 % on top of the 4), f16 half that, and its rounding (2^-11
 * relative) is far below the 4-bit step (1/16 of the group's range); the
 * values come back from it, so it adds no error of its own beyond moving
 * the step by that fraction. A group whose scale would not fit f16 (|m| >
 * 524,000) is refused; one so small its scale rounds to zero (|m| < 2^-22)
 * comes back as zeros.
 */
#ifndef MHLA_CPU_KERNELS_Q4_H
#define MHLA_CPU_KERNELS_Q4_H

#include "kernels_q8.h"

#include <stddef.h>
#include <stdint.h>

/* weights per f16 scale unless told otherwise (bench/RESULTS.md: 32, 64 and 128 measured) */
#define K4_GROUP_DEFAULT 32

/* The group size to load with: MHLA_Q4_GROUP (32, 64 or 128) when set, else
 * K4_GROUP_DEFAULT; -1 with the cause in err for any other value. */
int k_q4_group_from_env(char *err, size_t errlen);

/* Bytes of the packed values and of the f16 scales for an [N, K] matrix. */
void k_q4_sizes(int N, int K, int wgroup, size_t *q_bytes, size_t *scale_bytes);

/* Quantizes w [N, K] (row-major f32) into q and scale (k_q4_sizes bytes each)
 * and fills *out (bits 4). -1 with the cause in err when wgroup is not 32,
 * 64 or 128, K is not a multiple of it, w holds a value that is not finite,
 * or a group's scale does not fit f16. */
int k_q4_quantize(const float *w, int N, int K, int wgroup, uint8_t *q, uint16_t *scale,
                  k_q8_matrix *out, char *err, size_t errlen);

/* w[j, k] as the packed matrix holds it, dequantized; and its parts. */
float k_q4_value(const k_q8_matrix *w, int j, int k);
int k_q4_raw(const k_q8_matrix *w, int j, int k);            /* q in [-8, 7] */
uint16_t k_q4_raw_scale(const k_q8_matrix *w, int j, int k); /* the f16 bits */

/* f16 <-> f32: to f16 rounds to nearest even (a finite f below 65520 in
 * magnitude); from f16 is exact. Plain C, the same bits on every CPU. */
uint16_t k_f16_from_f32(float f);
float k_f32_from_f16(uint16_t h);

/* Which q4 product this path runs ("vpdpbusd", "vpmaddubsw", "sdot", ...). */
const char *k_q4_kernel_name(void);

#endif
