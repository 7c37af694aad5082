/*
 * kernels_bd.h — bf16 dot products (--weights bf16dot): bf16 weights, each
 * activation row rounded to bf16 once, products of bf16 pairs summed in f32.
 *
 * The arithmetic, defined once and the same bits on every path:
 *  - a value v (an activation, or a weight at load) becomes b = bf16(v),
 *    rounded to nearest even (a NaN stays a NaN), and then +0 where |b| <
 *    2^-56 (K_BD_TINY; bf16 denormals included);
 *  - a product y = x . w over K (padded with zeros to a multiple of 32) runs
 *    in steps of 32 elements. Each step sums its 16 even elements in one
 *    chain and its 16 odd elements in another, each from +0 and in order,
 *        e = fma(x[k], w[k], e) for k = 32s, 32s+2, ..., 32s+30
 *        o = fma(x[k], w[k], o) for k = 32s+1, ..., 32s+31
 *    and adds their sum to the product's accumulator (from +0):
 *        acc = acc + (e + o)
 *    (a product of two bf16 is exact in f32, so each fma is one rounding of
 *    a sum).
 *
 * That is what AMX's tdpbf16ps computes for each output, to the bit,
 * measured on an Intel Xeon with AMX-BF16 (docs/architecture.md,
 * bench/probe_amx_bf16.c): one instruction takes a step of 32 for 16 x 16
 * outputs. It runs where the CPU has AMX-BF16, after a check at start that
 * it gives the definition's bits (k_bd_agrees). Everywhere else (AVX-512,
 * AVX2, NEON, portable C) each output's chains run as fmas, 16 outputs to a
 * vector: a column of 16 rows of w is one lane each, which is why the
 * weights are held in panels (below) and not row by row.
 *
 * The flushes of the instruction (denormal inputs and results are zero)
 * are why the inputs are held to |b| >= 2^-56 or zero: every product is then
 * a multiple of 2^-126, so is every sum, and no value ever falls in the
 * denormal range where the instruction and a plain fma differ.
 *
 * Weights packed for the products (k_bd_pack): 16 rows of w [N, K] make a
 * panel of Kp * 16 values; in it, pair i (elements 2i and 2i+1 of K) of the
 * 16 rows is 32 values in a row, row l's two at 2l and 2l + 1 — AMX's layout
 * of a tile's B operand, and for the fma paths one load of both elements of
 * 16 lanes. Rows past N and elements past K are +0.
 */
#ifndef MHLA_CPU_KERNELS_BD_H
#define MHLA_CPU_KERNELS_BD_H

#include "threadpool.h"

#include <stddef.h>
#include <stdint.h>

/* bf16 values below 2^-56 in magnitude (exponent field < 71) become +0 */
#define K_BD_TINY 0x2380u
#define K_BD_STEP 32  /* elements of K per step (one tile's width) */
#define K_BD_PANEL 16 /* rows of w per panel (one tile's columns) */

/* f32 -> bf16 as the definition rounds (activations and weights alike). */
uint16_t k_bd_round(float v);
/* A row of K values rounded, then zero up to Kp (a multiple of 32). */
void k_bd_round_row(const float *x, int K, int Kp, uint16_t *out);
/* K rounded up to a whole step */
static inline int k_bd_padded(int K) { return (K + K_BD_STEP - 1) / K_BD_STEP * K_BD_STEP; }

/* Values in a packed [N, K] matrix (whole panels, padding included). */
static inline size_t k_bd_packed_count(int N, int K)
{
    return (size_t)((N + K_BD_PANEL - 1) / K_BD_PANEL) * K_BD_PANEL * (size_t)k_bd_padded(K);
}
/* Where w[n][k] is in the packed matrix. */
static inline size_t k_bd_packed_at(int K, int n, int k)
{
    return (size_t)(n / K_BD_PANEL) * K_BD_PANEL * (size_t)k_bd_padded(K) +
           (size_t)(k / 2) * (2 * K_BD_PANEL) + (size_t)(n % K_BD_PANEL) * 2 + (size_t)(k % 2);
}
/* w [N, K] f32, rounded as the definition rounds, into out
 * (k_bd_packed_count(N, K) values). */
void k_bd_pack(const float *w, int N, int K, uint16_t *out);
/* The same from values already rounded (bf16 bits, row-major). */
void k_bd_pack_bits(const uint16_t *w, int N, int K, uint16_t *out);

/* The definition in plain C, one value: x (Kp values, rounded) against the
 * row w (K values, row-major): the reference the tests hold the kernels to. */
float k_bd_dot_ref(const uint16_t *x, const uint16_t *w, int K);

/* Activation rows rounded once for products run a piece at a time, in the
 * pool's scratch slot (kernels_q8.h's slots) or a buffer of their own; -1
 * when out of memory for them. Both forms are kept: bf16 for the tiles
 * (rows up to a multiple of 16, the rows past T zero) and the same values
 * widened to f32 for the fma paths' broadcasts. */
typedef struct {
    const uint16_t *x; /* row t at x + t * Kp, for t < k_bd_rows_tiled(T) */
    const float *xf;   /* row t at xf + t * Kp, for t < T */
    int T, K, Kp;
    void *buf;
    void *own; /* buf when it is not the pool's */
} k_bd_rows;
static inline int k_bd_rows_tiled(int T) { return (T + 15) / 16 * 16; }
size_t k_bd_rows_bytes(int T, int K);
int k_bd_rows_make(const float *x, int T, int K, tp_pool *pool, int slot, k_bd_rows *out);
void k_bd_rows_free(k_bd_rows *r);

/* Output columns [j0, j1) of y = x wᵀ, w packed (k_bd_pack), on the calling thread. */
void k_bd_cols(const k_bd_rows *x, const uint16_t *w, int j0, int j1, float *y, int ldy);

/* Which product this path runs: "amx-bf16", or "fma" where it computes the
 * chains itself (no AMX-BF16 on the CPU or from the OS, MHLA_CPU_BF16_NO_DOT=1,
 * or the check at start found the instruction's bits different). */
const char *k_bd_kernel_name(void);

#endif
