/*
 * kernels_q8.h — int8 weights (--weights q8) and the products with them.
 *
 * A weight matrix [N, K] is held as symmetric int8 with one f32 scale per
 * group of 32 along K: w[j, k] ~= q[j, k] * s[j, k / 32], q in [-127, 127]
 * (never -128), s = max |w| over the group / 127. K must be a multiple of
 * 32. Rows are packed in blocks of 16 (the last one padded with zero rows):
 * for block b and group g, 512 bytes hold 8 units of 4 consecutive k for
 * each of the 16 rows, unit-major (byte u*64 + r*4 + i is row 16b + r, k =
 * 32g + 4u + i), so a vector lane is a row and a 4-byte broadcast of the
 * activations feeds 16 rows at once (vpdpbusd, vpmaddubsw, sdot).
 *
 * A product quantizes each activation row the same way, per group of 32,
 * with a scale of its own (so a row's result depends on that row only),
 * takes the int32 dot of each group (exact: any order gives the same
 * integer) and combines the groups in one order on every path:
 *   acc = 0; for g: acc = fma((float)dot_g, s_w[j, g] * s_x[t, g], acc)
 * |dot_g| <= 32 * 127 * 127 < 2^24, so the conversion is exact too, and
 * every instruction-set path gives the same bits.
 */
#ifndef MHLA_CPU_KERNELS_Q8_H
#define MHLA_CPU_KERNELS_Q8_H

#include "threadpool.h"

#include <stddef.h>
#include <stdint.h>

#define KQ_GROUP 32 /* weights per scale, along K */
#define KQ_ROWS 16  /* rows per packed block */

typedef struct k_q8_matrix {
    int N, K;           /* the logical shape */
    int groups;         /* K / 32 */
    int blocks;         /* ceil(N / 16) */
    const int8_t *q;    /* blocks * groups * 512 bytes (4-bit: 256, kernels_q4.h) */
    const float *scale; /* [blocks][groups][16]; NULL with 4-bit weights */
    /* 4-bit weights (--weights q4, kernels_q4.h) against the same quantized
     * activations: bits 4, wgroup weights per scale, scale_h their f16 scales
     * [blocks][K / wgroup][16]; bits 8 (or 0) for the int8 ones above. */
    int bits, wgroup;
    const uint16_t *scale_h;
} k_q8_matrix;

/* Bytes of the packed values and of the scales for an [N, K] matrix. */
void k_q8_sizes(int N, int K, size_t *q_bytes, size_t *scale_bytes);

/* Quantizes w [N, K] (row-major f32) into q and scale (k_q8_sizes bytes
 * each) and fills *out. -1 with the cause in err when K is not a multiple
 * of 32 or w holds a value that is not finite (at [*bad_row, *bad_col]). */
int k_q8_quantize(const float *w, int N, int K, int8_t *q, float *scale, k_q8_matrix *out,
                  char *err, size_t errlen);

/* w[j, k] as the packed matrix holds it, dequantized. */
float k_q8_value(const k_q8_matrix *w, int j, int k);

/* One activation row quantized the way the products do: q[K], d[K/32]
 * (the group scales) and sum[K/32] (the sum of each group's q). */
void k_q8_quantize_row(const float *x, int K, int8_t *q, float *d, int32_t *sum);

/* y[t*ldy + j] = w[j] . x[t] for t < T, j < N, the rows of x quantized per
 * group of 32; blocks of 16 output columns split over the pool. -1 only
 * when out of memory for the quantized activations. */
int k_linear_q8(const float *x, int T, const k_q8_matrix *w, float *y, int ldy, tp_pool *pool);
/* n (1 to 4) such products of the same x (all matrices of its width K): x
 * quantized once, then one job over the matrices' row blocks. With `after`,
 * n is 2, both matrices have the same N, a task takes the same row blocks
 * of both and then runs after(after_ctx, c0, c1) on its columns [c0, c1).
 * -1 when out of memory or for n out of range. */
int k_linear_q8_multi(const float *x, int T, const k_q8_matrix *const *w, float *const *y,
                      const int *ldy, int n, void (*after)(void *ctx, int c0, int c1),
                      void *after_ctx, tp_pool *pool);

/* Quantized activation rows, as the per-path kernels read them: row t at
 * q + t*K, its absolute values at qa + t*K (vpmaddubsw's unsigned side, on
 * AVX2 and on AVX-512 without VNNI: made once here, not once for every
 * block of weights a row meets), its group scales at d + t*groups, its
 * group sums at sum + t*groups. */
typedef struct {
    int K, groups;
    const int8_t *q;
    const float *d;
    const int32_t *sum;
    const uint8_t *qa;
} kq_act;

/* Activation rows quantized once, for products run a piece at a time
 * (k_q8_cols): k_q8_rows_make quantizes x's T rows of K (its tasks on the
 * pool) into the pool's scratch slot (tp_scratch), or a buffer of its own
 * where the pool has none, -1 when out of memory for them; k_q8_rows_free
 * frees what it made. The whole products use slot K_Q8_SLOT_LINEAR, a
 * k_prod (held over a job whose tasks run products) K_Q8_SLOT_PROD; a
 * forward pass reserves both for its rows (k_q8_rows_bytes) before a step
 * changes anything, so no product's allocation can fail half-way. */
enum { K_Q8_SLOT_LINEAR = 0, K_Q8_SLOT_PROD = 1 };
typedef struct k_q8_rows {
    kq_act act;
    int T;
    void *buf;
    void *own; /* buf when it is not the pool's */
} k_q8_rows;
size_t k_q8_rows_bytes(int T, int K);
int k_q8_rows_make(const float *x, int T, int K, tp_pool *pool, int slot, k_q8_rows *out);
void k_q8_rows_free(k_q8_rows *r);

/* Row blocks [b0, b1) of w (output columns [16 b0, min(16 b1, N))) against
 * the quantized rows, on the calling thread: the same bits as
 * k_linear_q8's values for those columns. */
void k_q8_cols(const k_q8_rows *x, const k_q8_matrix *w, int b0, int b1, float *y, int ldy);

/* Which q8 product this path runs ("vpdpbusd", "vpmaddubsw", "sdot", ...). */
const char *k_q8_kernel_name(void);

#endif
