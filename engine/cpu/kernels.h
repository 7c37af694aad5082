/*
 * kernels.h — the CPU arithmetic of the engine.
 *
 * Every reduction is done in one canonical order: 16 lanes accumulated with
 * fused multiply-adds along the vector, then summed pairwise (lane i with
 * i+8, i+4, i+2, i+1). Every kernel that computes a dot product — alone or
 * inside a register tile — uses that order, so a value never depends on the
 * tile it fell in, on the batch around it, or on the thread that ran it.
 *
 * The kernels exist once per instruction-set path (AVX-512, AVX2 + FMA,
 * NEON, portable C; see isa.h), picked at start from what the CPU reports.
 * Every path gives the same bits.
 */
#ifndef MHLA_CPU_KERNELS_H
#define MHLA_CPU_KERNELS_H

#include "base.h" /* bf16 <-> f32 */
#include "kernels_bd.h"
#include "kernels_q8.h"
#include "threadpool.h"

#include <stddef.h>
#include <stdint.h>

/* A weight matrix [N, K], row-major, held as f32 or as bf16, or packed as
 * int8 (kernels_q8.h); exactly one of the three is set. bf16 values are
 * widened to f32 in registers: the arithmetic, and its order, is the same
 * for f32 and bf16 — unless bf16_dot is set, where the products are bf16
 * dot products (kernels_bd.h: x rounded to bf16, pairs summed in f32). */
typedef struct {
    const float *f32;
    const uint16_t *bf16;
    const struct k_q8_matrix *q8;
    int bf16_dot;
} k_matrix;

static inline int k_matrix_present(k_matrix m) { return m.f32 || m.bf16 || m.q8; }

/* Canonical dot product. */
float k_dot(const float *a, const float *b, int n);

/* y[t*ldy + j] = dot(x[t*K ..], w[j*K ..]) for t < T, j < N: an nn.Linear
 * with weight [N, K] applied to T rows, its columns split over the pool. */
void k_linear(const float *x, int T, int K, k_matrix w, int N, float *y, int ldy, tp_pool *pool);

/* n (1 to 4) k_linear's of the same x in one job of the pool: y[i] gets
 * x times w[i] ([N[i], K]), each value the same bits as k_linear's. -1 for
 * n out of range. */
int k_linear_multi(const float *x, int T, int K, const k_matrix *w, const int *N, float *const *y,
                   const int *ldy, int n, tp_pool *pool);

/* An elementwise step over output columns [c0, c1) of every row. */
typedef void (*k_cols_fn)(void *ctx, int c0, int c1);

/* k_linear of w[0] and w[1] (both [N, K]) on the same x,
 * into y[0] and y[1] (row stride ldy), in one job of the pool cut by output
 * columns: a task computes columns [c0, c1) of both, then runs after(ctx,
 * c0, c1) on them (e.g. the MLP's silu(gate) * up, in the job instead of a
 * pass of its own). Each value the same bits as k_linear's. */
void k_linear_pair(const float *x, int T, int K, const k_matrix *w, int N, float *const *y, int ldy,
                   k_cols_fn after, void *after_ctx, tp_pool *pool);

/* k_linear's work in pieces that any thread runs, for a job that puts
 * other work between them (the attention's products and token mixer):
 * k_prod_begin prepares x's T rows of K once (quantizes or rounds them, on
 * the pool, for the weights `prep` names), -1 when out of memory for
 * that; k_prod_cols computes output columns [j0, j1) of y = x wᵀ on the
 * calling thread, the same bits as k_linear's; k_prod_end frees. With int8
 * weights j0 and j1 must be multiples of k_prod_step(w) (or j1 the last
 * column). */
enum { K_PROD_Q8 = 1, K_PROD_BD = 2 }; /* k_prod_begin's `prep` */
typedef struct {
    const float *x;
    int T, K;
    k_q8_rows q8; /* buf NULL: not quantized */
    k_bd_rows bd; /* buf NULL: not rounded */
} k_prod;
/* prep: K_PROD_Q8 where int8 weights, K_PROD_BD where bf16-dot weights will be taken */
int k_prod_begin(k_prod *p, const float *x, int T, int K, int prep, tp_pool *pool);
void k_prod_cols(const k_prod *p, k_matrix w, int j0, int j1, float *y, int ldy);
int k_prod_step(k_matrix w);
void k_prod_end(k_prod *p);

/* e^x and e^x - 1, to within an ulp, the same bits on every CPU (libm's
 * expf / expm1f differ between x86-64 and aarch64 in the last bit). */
float k_expf(float x);
float k_expm1f(float x);

/* silu(x) = x / (1 + e^-x) with k_expf; k_silu_mul: out[i] = silu(a[i]) * b[i] (out may be a
 * or b), vectorized on the paths that can (the same operations in double, so the same bits
 * as the scalar form on every path). */
float k_silu(float x);
void k_silu_mul(const float *a, const float *b, float *out, int n);

/* out = x / sqrt(mean(x^2) + eps) * w */
void k_rmsnorm(const float *x, const float *w, int n, float eps, float *out);

/* acc[c] = fma(s, row[c], acc[c]) for c < n */
void k_axpy(float s, const float *row, float *acc, int n);

/* C[m*ldc + n] = fma(A[m*a_rs + k*a_cs], B[k*ldb + n], C[m*ldc + n]) for k = 0 .. K-1 in
 * turn, every m < M, n < N: the same bits as K calls of k_axpy(A[m][k], B[k], C[m], N) per
 * row, done as a matrix product (B's rows read once per tile of rows of C). C is not
 * zeroed. */
void k_gemm_acc(int M, int N, int K, const float *A, size_t a_rs, size_t a_cs, const float *B,
                size_t ldb, float *C, size_t ldc);
/* k_gemm_acc on a zeroed C, to the bit, without reading C (only its M rows of N values are
 * written; the padding past N is left as it was). */
void k_gemm_set(int M, int N, int K, const float *A, size_t a_rs, size_t a_cs, const float *B,
                size_t ldb, float *C, size_t ldc);

/* The sum of n floats (n a multiple of 64) read as the kernels stream weights
 * (whole vectors in order; with `prefetch`, the bf16 tiles' software
 * prefetch): what the memory-bandwidth measurement reads with. */
float k_stream_sum(const float *p, size_t n, int prefetch);

/* For tests: 0 has the paths that pack rows of x for their tiles (avx2) read them in place
 * instead, as they do where a thread's packing buffer cannot be had; 1, the default, packs.
 * The bits are the same either way. */
void k_set_x_pack(int on);

/* The instruction-set path, process-wide. name: "avx512", "avx2", "neon",
 * "portable" or "auto"; NULL or "" takes MHLA_CPU_ISA from the environment,
 * and without it the best path the CPU runs. -1 with the cause in err for a
 * path this CPU or this binary cannot run. */
int k_isa_select(const char *name, char *err, size_t errlen);
/* The path the kernels run ("avx512", ...), and why it was chosen. */
const char *k_isa_name(void);
const char *k_isa_reason(void);
/* The paths this CPU and binary can run, best first, space-separated. */
const char *k_isa_runnable(void);

#endif
