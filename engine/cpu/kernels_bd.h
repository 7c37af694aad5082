/*
 * kernels_bd.h — bf16 dot products (--weights bf16dot): bf16 weights, each
 * activation row rounded to bf16 once, products of bf16 pairs summed in f32.
 *
 * The arithmetic, defined once and the same bits on every path:
 *  - a value v (an activation, or a weight at load) becomes b = bf16(v),
 *    rounded to nearest even (a NaN stays a NaN), and then +0 where |b| <
 *    2^-56 (K_BD_TINY; bf16 denormals included);
 *  - a row pair's product y = x . w over K (padded with zeros to a multiple
 *    of 32) takes 16 lanes; lane l, for each step s of 32 elements in turn,
 *    with k = 32 s + 2 l:
 *        acc_l = fma(x[k + 1], w[k + 1], acc_l); acc_l = fma(x[k], w[k], acc_l)
 *    (the odd element of the pair first), from acc_l = +0; then the lanes are
 *    summed pairwise (i with i+8, i+4, i+2, i+1) as every other reduction.
 *
 * That is what AVX512-BF16's vdpbf16ps computes lane by lane, to the bit, on
 * these inputs: measured on an Intel Xeon with avx512_bf16 and AMX, its lane
 * is acc = ftz(fma(daz(a_odd), daz(b_odd), daz(acc))) then the same for the
 * even pair, with flush-to-zero after rounding (docs/architecture.md). The
 * flushes are why the inputs are held to |b| >= 2^-56 or zero: every product
 * is then a multiple of 2^-126, so is every sum, and no value ever falls in
 * the denormal range where the instruction and a plain fma differ. Paths
 * without the instruction (AVX-512 without BF16, AVX2, NEON, portable C)
 * compute the fma chain itself; the AVX-512 path uses vdpbf16ps only after a
 * check at start that it gives the chain's bits on this CPU (k_bd_kernel_name).
 */
#ifndef MHLA_CPU_KERNELS_BD_H
#define MHLA_CPU_KERNELS_BD_H

#include "threadpool.h"

#include <stddef.h>
#include <stdint.h>

/* bf16 values below 2^-56 in magnitude (exponent field < 71) become +0 */
#define K_BD_TINY 0x2380u
#define K_BD_STEP 32 /* elements per step of a lane's chain */

/* f32 -> bf16 as the definition rounds (activations and weights alike). */
uint16_t k_bd_round(float v);
/* A row of K values rounded, then zero up to Kp (a multiple of 32). */
void k_bd_round_row(const float *x, int K, int Kp, uint16_t *out);
/* K rounded up to a whole step */
static inline int k_bd_padded(int K) { return (K + K_BD_STEP - 1) / K_BD_STEP * K_BD_STEP; }

/* The definition in plain C, one value: x (Kp values, rounded) against the
 * row w (K values): the reference the tests hold the kernels to. */
float k_bd_dot_ref(const uint16_t *x, const uint16_t *w, int K);

/* Activation rows rounded once for products run a piece at a time, in the
 * pool's scratch slot (kernels_q8.h's slots) or a buffer of their own; -1
 * when out of memory for them. */
typedef struct {
    const uint16_t *x; /* row t at x + t * Kp */
    int T, K, Kp;
    void *buf;
    void *own; /* buf when it is not the pool's */
} k_bd_rows;
size_t k_bd_rows_bytes(int T, int K);
int k_bd_rows_make(const float *x, int T, int K, tp_pool *pool, int slot, k_bd_rows *out);
void k_bd_rows_free(k_bd_rows *r);

/* Output columns [j0, j1) of y = x wᵀ, w [N, K] in bf16, on the calling thread. */
void k_bd_cols(const k_bd_rows *x, const uint16_t *w, int j0, int j1, float *y, int ldy);

/* Which product this path runs: "vdpbf16ps", or "fma" where it computes the
 * chain itself (no BF16 on the CPU, MHLA_CPU_BF16_NO_DOT=1, or the check at
 * start found the instruction's bits different). */
const char *k_bd_kernel_name(void);

#endif
