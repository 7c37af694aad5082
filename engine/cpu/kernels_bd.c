/*
 * kernels_bd.c — bf16 dot products (kernels_bd.h): the rounding of values,
 * the reference chain, and activation rows rounded on the pool for the
 * instruction-set path's kernel (isa.h linear_bd).
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
    float lane[16] = {0};
    for (int s = 0; s < K; s += K_BD_STEP)
        for (int l = 0; l < 16; l++)
            for (int i = 1; i >= 0; i--) {
                int k = s + 2 * l + i;
                float wv = k < K ? mhla_f32_from_bf16(w[k]) : 0.0f;
                lane[l] = fmaf(mhla_f32_from_bf16(x[k]), wv, lane[l]);
            }
    for (int h = 8; h >= 1; h /= 2)
        for (int l = 0; l < h; l++)
            lane[l] = lane[l] + lane[l + h];
    return lane[0];
}

size_t k_bd_rows_bytes(int T, int K) { return (size_t)T * (size_t)k_bd_padded(K) * 2; }

typedef struct {
    const float *x;
    uint16_t *out;
    int T, K, Kp, n_tasks;
} round_job;

static void round_task(void *ctx, int task)
{
    const round_job *j = ctx;
    int t0 = (int)((long)j->T * task / j->n_tasks),
        t1 = (int)((long)j->T * (task + 1) / j->n_tasks);
    for (int t = t0; t < t1; t++)
        k_bd_round_row(j->x + (size_t)t * j->K, j->K, j->Kp, j->out + (size_t)t * j->Kp);
}

int k_bd_rows_make(const float *x, int T, int K, tp_pool *pool, int slot, k_bd_rows *out)
{
    int Kp = k_bd_padded(K);
    size_t bytes = k_bd_rows_bytes(T, K);
    unsigned char *buf = tp_scratch(pool, slot, bytes), *own = NULL;
    if (!buf && !(buf = own = malloc(bytes ? bytes : 1)))
        return -1;
    int threads = tp_threads(pool);
    round_job j = {x, (uint16_t *)buf, T, K, Kp, threads > 1 && (long)T * K >= 16384 ? threads : 1};
    if (j.n_tasks > T)
        j.n_tasks = T > 0 ? T : 1;
    tp_run(pool, j.n_tasks, round_task, &j);
    *out = (k_bd_rows){.x = (uint16_t *)buf, .T = T, .K = K, .Kp = Kp, .buf = buf, .own = own};
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
        k_isa_ops()->linear_bd(x->x, x->T, x->Kp, w, x->K, j0, j1, y, ldy);
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
#define CHECK_N 6
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
    uint16_t x[CHECK_T * KP], w[CHECK_N * CHECK_K];
    float y[CHECK_T * CHECK_N];
    uint32_t s = 0x9e3779b9u;
    for (int round = 0; round < 16; round++) {
        memset(x, 0, sizeof x);
        for (int t = 0; t < CHECK_T; t++)
            for (int k = 0; k < CHECK_K; k++)
                x[t * KP + k] = check_value(&s);
        for (int i = 0; i < CHECK_N * CHECK_K; i++)
            w[i] = check_value(&s);
        /* row 1 of w: each odd element's product undoes the lane's sum of
         * the step before (x[0]'s value times w's, negated), so the sums
         * cancel to a few bits */
        for (int k = 33; k < CHECK_K; k += 2) {
            w[CHECK_K + k] = (uint16_t)(x[k - 32] ^ 0x8000u);
            x[k] = w[CHECK_K + k - 32];
        }
        x[4 * KP + round] = round & 1 ? 0xff80u : 0x7f80u; /* infinities in the last row */
        x[4 * KP + 40 + round] = 0x7f80u;
        fn(x, CHECK_T, KP, w, CHECK_K, 0, CHECK_N, y, CHECK_N);
        for (int t = 0; t < CHECK_T; t++)
            for (int j = 0; j < CHECK_N; j++)
                if (!same_bits(y[t * CHECK_N + j],
                               k_bd_dot_ref(x + t * KP, w + j * CHECK_K, CHECK_K)))
                    return 0;
    }
    return 1;
}
