/*
 * kernels_bd.c — bf16 dot products (kernels_bd.h): the rounding of values,
 * the reference chains, the packing of weights into panels, activation rows
 * rounded on the pool for the instruction-set path's kernel (isa.h
 * linear_bd), and the check at start a kernel must pass.
 */
#include "kernels_bd.h"

#include "base.h" /* bf16 <-> f32 */
#include "isa.h"
#include "kernels_q8.h" /* the scratch slots */

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint16_t k_bd_round(float v)
{
    uint16_t b = mhla_bf16_from_f32(v);
    return (b & 0x7fffu) < K_BD_TINY ? 0 : b;
}

/* Integer steps only, so every CPU and every clone gives the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void k_bd_round_row(const float *x, int K, int Kp, uint16_t *out)
{
    for (int k = 0; k < K; k++) {
        uint32_t bits;
        memcpy(&bits, x + k, 4);
        uint32_t mag = bits & 0x7fffffffu;
        uint32_t r = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
        uint32_t b = mag > 0x7f800000u ? (bits >> 16) | 0x40u : r; /* a NaN stays one */
        out[k] = (uint16_t)((b & 0x7fffu) < K_BD_TINY ? 0 : b);
    }
    for (int k = K; k < Kp; k++)
        out[k] = 0;
}

float k_bd_dot_ref(const uint16_t *x, const uint16_t *w, int K)
{
    float acc = 0.0f;
    for (int s = 0; s < K; s += K_BD_STEP) {
        float chain[2] = {0.0f, 0.0f}; /* the even elements' and the odd ones' */
        for (int k = s; k < s + K_BD_STEP; k++) {
            float wv = k < K ? mhla_f32_from_bf16(w[k]) : 0.0f;
            chain[k % 2] = fmaf(mhla_f32_from_bf16(x[k]), wv, chain[k % 2]);
        }
        acc = acc + (chain[0] + chain[1]);
    }
    return acc;
}

void k_bd_pack_bits(const uint16_t *w, int N, int K, uint16_t *out)
{
    memset(out, 0, k_bd_packed_count(N, K) * sizeof *out);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            out[k_bd_packed_at(K, n, k)] = w[(size_t)n * K + k];
}

void k_bd_pack(const float *w, int N, int K, uint16_t *out)
{
    memset(out, 0, k_bd_packed_count(N, K) * sizeof *out);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            out[k_bd_packed_at(K, n, k)] = k_bd_round(w[(size_t)n * K + k]);
}

/* The bf16 rows (whole tiles of 16) first, then the f32 ones, each on a cache line. */
static size_t rows_bf16_bytes(int T, int K)
{
    return ((size_t)k_bd_rows_tiled(T) * (size_t)k_bd_padded(K) * 2 + 63) / 64 * 64;
}

size_t k_bd_rows_bytes(int T, int K)
{
    return rows_bf16_bytes(T, K) + (size_t)T * (size_t)k_bd_padded(K) * 4;
}

typedef struct {
    const float *x;
    uint16_t *out;
    float *outf;
    int T, K, Kp, n_tasks;
} round_job;

static void round_task(void *ctx, int task)
{
    const round_job *j = ctx;
    int t0 = (int)((long)j->T * task / j->n_tasks),
        t1 = (int)((long)j->T * (task + 1) / j->n_tasks);
    for (int t = t0; t < t1; t++) {
        uint16_t *row = j->out + (size_t)t * j->Kp;
        float *rowf = j->outf + (size_t)t * j->Kp;
        k_bd_round_row(j->x + (size_t)t * j->K, j->K, j->Kp, row);
        for (int k = 0; k < j->Kp; k++)
            rowf[k] = mhla_f32_from_bf16(row[k]);
    }
}

int k_bd_rows_make(const float *x, int T, int K, tp_pool *pool, int slot, k_bd_rows *out)
{
    int Kp = k_bd_padded(K);
    size_t bytes = k_bd_rows_bytes(T, K);
    unsigned char *buf = pool ? tp_scratch(pool, slot, bytes) : NULL, *own = NULL;
    if (!buf && !(buf = own = aligned_alloc(64, (bytes + 63) / 64 * 64)))
        return -1;
    uint16_t *xb = (uint16_t *)buf;
    float *xf = (float *)(buf + rows_bf16_bytes(T, K));
    memset(xb + (size_t)T * Kp, 0, (size_t)(k_bd_rows_tiled(T) - T) * Kp * sizeof *xb);
    int threads = pool ? tp_threads(pool) : 1;
    round_job j = {x, xb, xf, T, K, Kp, threads > 1 && (long)T * K >= 16384 ? threads : 1};
    if (j.n_tasks > T)
        j.n_tasks = T > 0 ? T : 1;
    if (pool)
        tp_run(pool, j.n_tasks, round_task, &j);
    else
        for (int i = 0; i < j.n_tasks; i++)
            round_task(&j, i);
    *out = (k_bd_rows){.x = xb, .xf = xf, .T = T, .K = K, .Kp = Kp, .buf = buf, .own = own};
    return 0;
}

void k_bd_rows_free(k_bd_rows *r)
{
    free(r->own);
    r->own = r->buf = NULL;
}

void k_bd_cols(const k_bd_rows *x, const uint16_t *w, int j0, int j1, float *y, int ldy)
{
    if (j0 < j1)
        k_isa_ops()->linear_bd(x, w, j0, j1, y, ldy);
}

const char *k_bd_kernel_name(void) { return k_isa_ops()->bd_kernel(); }

/* Values for the check at start: magnitudes from 2^-56 (the least kept) to
 * 2^16 at random, a row of x with infinities, and a row of w whose products
 * cancel the sums so far (where the order of the additions and their
 * roundings show). */
static uint32_t check_next(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static uint16_t check_value(uint32_t *s)
{
    uint32_t r = check_next(s);
    int e = r % 4 == 0 ? 71 + (int)((r >> 8) % 8) : 112 + (int)((r >> 8) % 32);
    return (uint16_t)((r & 0x8000u) | (uint32_t)e << 7 | ((r >> 16) & 0x7fu));
}

#define CHECK_T 5
#define CHECK_N 20  /* a whole panel and part of one */
#define CHECK_K 103 /* three whole steps and a tail */

static int same_bits(float a, float b)
{
    uint32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return x == y || (isnan(a) && isnan(b));
}

int k_bd_agrees(k_bd_fn fn)
{
    enum { KP = (CHECK_K + K_BD_STEP - 1) / K_BD_STEP * K_BD_STEP };
    float xf[CHECK_T * CHECK_K], y[CHECK_T * CHECK_N];
    uint16_t x[CHECK_T * KP], w[CHECK_N * CHECK_K];
    uint16_t wp[(CHECK_N + K_BD_PANEL - 1) / K_BD_PANEL * K_BD_PANEL * KP];
    uint32_t s = 0x9e3779b9u;
    for (int round = 0; round < 16; round++) {
        memset(x, 0, sizeof x);
        for (int t = 0; t < CHECK_T; t++)
            for (int k = 0; k < CHECK_K; k++)
                x[t * KP + k] = check_value(&s);
        for (int i = 0; i < CHECK_N * CHECK_K; i++)
            w[i] = check_value(&s);
        /* row 1 of w: each product undoes the one before it in its chain
         * (x's value times w's, negated), so the sums cancel to a few bits */
        for (int k = 2; k < CHECK_K; k++) {
            w[CHECK_K + k] = (uint16_t)(x[k - 2] ^ 0x8000u);
            x[k] = w[CHECK_K + k - 2];
        }
        x[4 * KP + round] = round & 1 ? 0xff80u : 0x7f80u; /* infinities in the last row */
        x[4 * KP + 40 + round] = 0x7f80u;
        for (int t = 0; t < CHECK_T; t++)
            for (int k = 0; k < CHECK_K; k++)
                xf[t * CHECK_K + k] = mhla_f32_from_bf16(x[t * KP + k]);
        k_bd_rows rows;
        if (k_bd_rows_make(xf, CHECK_T, CHECK_K, NULL, 0, &rows))
            return 0;
        k_bd_pack_bits(w, CHECK_N, CHECK_K, wp);
        fn(&rows, wp, 0, CHECK_N, y, CHECK_N);
        k_bd_rows_free(&rows);
        for (int t = 0; t < CHECK_T; t++)
            for (int j = 0; j < CHECK_N; j++)
                if (!same_bits(y[t * CHECK_N + j],
                               k_bd_dot_ref(x + t * KP, w + j * CHECK_K, CHECK_K)))
                    return 0;
    }
    return 1;
}
