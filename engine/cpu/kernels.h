/*
 * kernels.h — the CPU arithmetic of the engine.
 *
 * Every reduction is done in one canonical order: 16 lanes accumulated with
 * fused multiply-adds along the vector, then summed pairwise (lane i with
 * i+8, i+4, i+2, i+1). Every kernel that computes a dot product — alone or
 * inside a register tile — uses that order, so a value never depends on the
 * tile it fell in, on the batch around it, or on the thread that ran it.
 * The AVX-512 path and the portable path give the same bits.
 */
#ifndef MHLA_CPU_KERNELS_H
#define MHLA_CPU_KERNELS_H

#include "base.h" /* bf16 <-> f32 */

#include <stdint.h>

/* A weight matrix [N, K], row-major, held as f32 or as bf16 (exactly one of
 * the two is set). bf16 values are widened to f32 in registers: the
 * arithmetic, and its order, is the same for both. */
typedef struct {
    const float *f32;
    const uint16_t *bf16;
} k_matrix;

/* Canonical dot product. */
float k_dot(const float *a, const float *b, int n);

/* y[t*ldy + j] = dot(x[t*K ..], w[j*K ..]) for t < T, j < N: an nn.Linear
 * with weight [N, K] applied to T rows, split over n_threads. */
void k_linear(const float *x, int T, int K, k_matrix w, int N, float *y, int ldy, int n_threads);

/* out = x / sqrt(mean(x^2) + eps) * w */
void k_rmsnorm(const float *x, const float *w, int n, float eps, float *out);

/* acc[c] = fma(s, row[c], acc[c]) for c < n */
void k_axpy(float s, const float *row, float *acc, int n);

#endif
