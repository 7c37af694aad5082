/*
 * isa.h — the kernels one instruction-set path provides, and the paths this
 * binary holds. Each path is its own translation unit compiled with its own
 * target flags (engine/CMakeLists.txt); kernels.c picks one at start and
 * calls it through this table. Every path computes the same lanes in the
 * same order with the same roundings (kernels.h), so they give the same bits.
 */
#ifndef MHLA_CPU_ISA_H
#define MHLA_CPU_ISA_H

#include "kernels_bd.h"
#include "kernels_q8.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;
    float (*dot)(const float *a, const float *b, int n);
    void (*axpy)(float s, const float *row, float *acc, int n);
    /* kernels.h k_gemm_acc, and with `set` k_gemm_set */
    void (*gemm)(int M, int N, int K, const float *A, size_t a_rs, size_t a_cs, const float *B,
                 size_t ldb, float *C, size_t ldc, int set);
    /* kernels.h k_silu_mul */
    void (*silu_mul)(const float *a, const float *b, float *out, int n);
    /* y[t*ldy + j] for t < T, j0 <= j < j1 against the rows of w [N, K] */
    void (*linear_f32)(const float *x, int T, int K, const float *w, int j0, int j1, float *y,
                       int ldy);
    void (*linear_bf16)(const float *x, int T, int K, const uint16_t *w, int j0, int j1, float *y,
                        int ldy);
    /* q8 (kernels_q8.h): y[t*ldy + j] for t < T, j in row blocks [b0, b1) */
    void (*linear_q8)(const kq_act *x, int T, const k_q8_matrix *w, int b0, int b1, float *y,
                      int ldy);
    const char *(*q8_kernel)(void); /* the instructions it uses, chosen at run time */
    /* q4 (kernels_q4.h): the same against 4-bit weights (w->bits 4) */
    void (*linear_q4)(const kq_act *x, int T, const k_q8_matrix *w, int b0, int b1, float *y,
                      int ldy);
    const char *(*q4_kernel)(void);
    /* bf16 dot products (kernels_bd.h): y[t*ldy + j] for t < x->T, j0 <= j < j1, x's rows
     * rounded, w [N, x->K] packed in panels */
    void (*linear_bd)(const k_bd_rows *x, const uint16_t *w, int j0, int j1, float *y, int ldy);
    const char *(*bd_kernel)(void); /* "amx-bf16" or "fma", chosen at run time */
    /* the sum of n floats (n % 64 == 0) read as weights are streamed, with or
     * without their software prefetch: the memory-bandwidth measurement */
    float (*stream_sum)(const float *p, size_t n, int prefetch);
} k_ops;

/* e^x in double for k_expf and the vector forms of it (kernels.c exp_d): x = (32 e + i)
 * ln2/32 + r, e^x = 2^e 2^(i/32) e^r; k_exp2_32[i] = 2^(i/32). */
#define K_EXP_INV 0x1.71547652b82fep+5
#define K_EXP_HI 0x1.62e42f0000000p-6
#define K_EXP_LO 0x1.df473de6af279p-31
extern const double k_exp2_32[32];
float k_silu(float x); /* kernels.h */

/* The calling thread's buffer for rows of x packed for a path's tiles: at
 * least n floats, 32-byte aligned, kept for the thread's next calls and freed
 * when it ends. NULL where it cannot be had or k_set_x_pack(0) asked for x
 * in place (the path then reads x where it is: the same bits). */
float *k_x_pack_buffer(size_t n);

/* A bf16 dot-product kernel (k_ops.linear_bd) checked against the definition
 * (kernels_bd.h k_bd_dot_ref) on values that tell the orders and roundings
 * apart: 1 where every value has the same bits (NaN for NaN). */
typedef void (*k_bd_fn)(const k_bd_rows *x, const uint16_t *w, int j0, int j1, float *y, int ldy);
int k_bd_agrees(k_bd_fn fn);

/* The chosen path's table (the best the CPU runs until k_isa_select). */
const k_ops *k_isa_ops(void);

extern const k_ops k_ops_portable;
#if defined(__x86_64__)
extern const k_ops k_ops_avx2;
extern const k_ops k_ops_avx512;
#endif
#if defined(__aarch64__)
extern const k_ops k_ops_neon;
#endif

#endif
