/*
 * kernels_q8.c — int8 weights (kernels_q8.h): quantizing and packing a
 * matrix at load, quantizing activation rows, and the product's entry point,
 * which cuts the output columns into blocks of 16 for the thread pool and
 * calls the instruction-set path chosen at start.
 *
 * Quantization is plain C with one rounding per value (roundf of a product)
 * and no fused operations, so it gives the same bits on every CPU.
 */
#include "kernels_q8.h"

#include "isa.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void k_q8_sizes(int N, int K, size_t *q_bytes, size_t *scale_bytes)
{
    size_t blocks = (size_t)(N + KQ_ROWS - 1) / KQ_ROWS, groups = (size_t)K / KQ_GROUP;
    *q_bytes = blocks * groups * KQ_ROWS * KQ_GROUP;
    *scale_bytes = blocks * groups * KQ_ROWS * sizeof(float);
}

/* One group of 32: its scale, and q = round(v * 127 / max|v|) in [-127, 127]. */
static inline __attribute__((always_inline)) float quantize_group(const float *v, int8_t *q)
{
    /* max |v| over the values that are not NaN, found on the bit patterns: without the sign,
     * a float's pattern orders as an integer the way the float does, so this is the value a
     * float compare would find, and the loop is integer maxima the compiler vectorizes (at
     * batch-1 decode, x is quantized on one thread while the other waits) */
    int32_t m = 0;
    for (int i = 0; i < KQ_GROUP; i++) {
        int32_t b;
        memcpy(&b, v + i, sizeof b);
        b &= 0x7fffffff;
        b = b > 0x7f800000 ? 0 : b; /* a NaN: skipped, as `a > amax` skips it */
        m = b > m ? b : m;
    }
    float amax;
    memcpy(&amax, &m, sizeof amax);
    if (amax == 0.0f || !(amax <= FLT_MAX)) {
        memset(q, 0, KQ_GROUP);
        /* a NaN or an infinity makes the group's products NaN, as in f32 */
        return amax == 0.0f ? 0.0f : NAN;
    }
    float id = 127.0f / amax;
    for (int i = 0; i < KQ_GROUP; i++) {
        /* roundf(p), half away from zero, without the libm call: p and p +-
         * 0.5 are exact in double (|p| <= 127.5), the cast truncates */
        double p = (double)(v[i] * id);
        int r = (int)(p + (p < 0 ? -0.5 : 0.5));
        q[i] = (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
    }
    return amax / 127.0f;
}

int k_q8_quantize(const float *w, int N, int K, int8_t *q, float *scale, k_q8_matrix *out,
                  char *err, size_t errlen)
{
    if (K <= 0 || K % KQ_GROUP) {
        snprintf(err, errlen, "its input width %d is not a multiple of %d", K, KQ_GROUP);
        return -1;
    }
    int G = K / KQ_GROUP, blocks = (N + KQ_ROWS - 1) / KQ_ROWS;
    size_t qb, sb;
    k_q8_sizes(N, K, &qb, &sb);
    memset(q, 0, qb);
    memset(scale, 0, sb);
    for (int j = 0; j < N; j++) {
        const float *row = w + (size_t)j * K;
        for (int k = 0; k < K; k++)
            if (!isfinite(row[k])) {
                snprintf(err, errlen, "it holds a value that is not finite at [%d, %d]", j, k);
                return -1;
            }
        int b = j / KQ_ROWS, r = j % KQ_ROWS;
        for (int g = 0; g < G; g++) {
            int8_t gq[KQ_GROUP];
            scale[((size_t)b * G + g) * KQ_ROWS + r] = quantize_group(row + g * KQ_GROUP, gq);
            int8_t *dst = q + ((size_t)b * G + g) * 512;
            for (int u = 0; u < 8; u++)
                memcpy(dst + u * 64 + r * 4, gq + u * 4, 4);
        }
    }
    *out = (k_q8_matrix){N, K, G, blocks, q, scale, 8, KQ_GROUP, NULL};
    return 0;
}

float k_q8_value(const k_q8_matrix *w, int j, int k)
{
    int b = j / KQ_ROWS, r = j % KQ_ROWS, g = k / KQ_GROUP, u = (k % KQ_GROUP) / 4, i = k % 4;
    size_t bg = (size_t)b * w->groups + g;
    return (float)w->q[bg * 512 + u * 64 + r * 4 + i] * w->scale[bg * KQ_ROWS + r];
}

/* Compiled for wider vectors too, chosen at load by what the CPU runs (GCC 12 on, whose
 * resolver tests the x86-64 levels): the same operations on each value (products, conversions
 * and integer steps, no fused ones), so the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void k_q8_quantize_row(const float *x, int K, int8_t *q, float *d, int32_t *sum)
{
    for (int g = 0; g < K / KQ_GROUP; g++) {
        d[g] = quantize_group(x + g * KQ_GROUP, q + g * KQ_GROUP);
        int32_t s = 0;
        for (int i = 0; i < KQ_GROUP; i++)
            s += q[g * KQ_GROUP + i];
        sum[g] = s;
    }
}

typedef struct {
    const float *x;
    int T, K, G, n_tasks;
    int8_t *q;
    float *d;
    int32_t *sum;
    uint8_t *qa;
} quant_job;

static void quant_task(void *ctx, int task)
{
    const quant_job *j = ctx;
    int t0 = (int)((long)j->T * task / j->n_tasks),
        t1 = (int)((long)j->T * (task + 1) / j->n_tasks);
    for (int t = t0; t < t1; t++) {
        int8_t *q = j->q + (size_t)t * j->K;
        uint8_t *qa = j->qa + (size_t)t * j->K;
        k_q8_quantize_row(j->x + (size_t)t * j->K, j->K, q, j->d + (size_t)t * j->G,
                          j->sum + (size_t)t * j->G);
        for (int k = 0; k < j->K; k++) /* q is never -128; the row is still in cache */
            qa[k] = (uint8_t)(q[k] < 0 ? -q[k] : q[k]);
    }
}

#define Q8_MAX_PARTS 4

/* A job over the row blocks of n matrices, one after the other; with
 * `after` (n = 2), over the same row blocks of both, then the epilogue. */
typedef struct {
    const k_ops *ops;
    const kq_act *x;
    int T, n_tasks, n, blocks;
    const k_q8_matrix *w[Q8_MAX_PARTS];
    float *y[Q8_MAX_PARTS];
    int ldy[Q8_MAX_PARTS];
    void (*after)(void *ctx, int c0, int c1);
    void *after_ctx;
} q8_job;

/* The kernel for w's weights: int8, or 4-bit (kernels_q4.h) */
typedef void (*q8_kernel_fn)(const kq_act *x, int T, const k_q8_matrix *w, int b0, int b1, float *y,
                             int ldy);
static q8_kernel_fn q8_or_q4(const k_ops *ops, const k_q8_matrix *w)
{
    return w->bits == 4 ? ops->linear_q4 : ops->linear_q8;
}

static void q8_task(void *ctx, int task)
{
    const q8_job *j = ctx;
    int b0 = (int)((long)j->blocks * task / j->n_tasks);
    int b1 = (int)((long)j->blocks * (task + 1) / j->n_tasks);
    if (j->after) {
        if (b0 >= b1)
            return;
        for (int i = 0; i < 2; i++)
            q8_or_q4(j->ops, j->w[i])(j->x, j->T, j->w[i], b0, b1, j->y[i], j->ldy[i]);
        int c1 = b1 * KQ_ROWS < j->w[0]->N ? b1 * KQ_ROWS : j->w[0]->N;
        j->after(j->after_ctx, b0 * KQ_ROWS, c1);
        return;
    }
    for (int i = 0, base = 0; i < j->n && base < b1; base += j->w[i++]->blocks) {
        int a = b0 > base ? b0 - base : 0;
        int b = b1 - base < j->w[i]->blocks ? b1 - base : j->w[i]->blocks;
        if (a < b)
            q8_or_q4(j->ops, j->w[i])(j->x, j->T, j->w[i], a, b, j->y[i], j->ldy[i]);
    }
}

#define TASKS_PER_THREAD 4
#define MIN_TASK_MACS (64L * 1024)

/* x's rows quantized on the pool's threads */
static void quantize_rows(const float *x, int T, int K, int G, tp_pool *pool, int8_t *q, float *d,
                          int32_t *sum, uint8_t *qa)
{
    int threads = tp_threads(pool);
    quant_job qj = {x, T, K, G, threads > 1 && (long)T * K >= 16384 ? threads : 1, q, d, sum, qa};
    if (qj.n_tasks > T)
        qj.n_tasks = T;
    tp_run(pool, qj.n_tasks, quant_task, &qj);
}

size_t k_q8_rows_bytes(int T, int K)
{
    /* per row: its scales, its group sums, its int8 values and their absolute values */
    size_t G = (size_t)K / KQ_GROUP;
    return (size_t)T * (2 * (size_t)K + G * (sizeof(float) + sizeof(int32_t)));
}

int k_q8_rows_make(const float *x, int T, int K, tp_pool *pool, int slot, k_q8_rows *out)
{
    size_t G = (size_t)K / KQ_GROUP, bytes = k_q8_rows_bytes(T, K);
    /* the pool's scratch, which a forward pass has reserved; else a buffer of our own */
    unsigned char *buf = tp_scratch(pool, slot, bytes), *own = NULL;
    if (!buf && !(buf = own = malloc(bytes)))
        return -1;
    float *d = (float *)buf;
    int32_t *sum = (int32_t *)(buf + (size_t)T * G * 4);
    int8_t *q = (int8_t *)(buf + (size_t)T * G * 8);
    uint8_t *qa = (uint8_t *)q + (size_t)T * K;
    quantize_rows(x, T, K, (int)G, pool, q, d, sum, qa);
    *out = (k_q8_rows){.act = {K, (int)G, q, d, sum, qa}, .T = T, .buf = buf, .own = own};
    return 0;
}

void k_q8_rows_free(k_q8_rows *r)
{
    free(r->own);
    r->own = r->buf = NULL;
}

void k_q8_cols(const k_q8_rows *x, const k_q8_matrix *w, int b0, int b1, float *y, int ldy)
{
    if (b0 < b1)
        q8_or_q4(k_isa_ops(), w)(&x->act, x->T, w, b0, b1, y, ldy);
}

static void run_rows(const k_q8_rows *rows, q8_job *j, tp_pool *pool)
{
    int T = rows->T, K = rows->act.K, threads = tp_threads(pool);
    j->ops = k_isa_ops();
    j->x = &rows->act;
    long N = 0;
    j->blocks = 0;
    for (int i = 0; i < j->n; i++) {
        N += j->w[i]->N;
        j->blocks += j->w[i]->blocks;
    }
    if (j->after)
        j->blocks = j->w[0]->blocks;
    long by_size = (long)T * K * N / MIN_TASK_MACS;
    int want = threads > 1 ? threads * TASKS_PER_THREAD : 1;
    if (want > by_size)
        want = (int)(by_size > 0 ? by_size : 1);
    if (want > j->blocks)
        want = j->blocks;
    j->n_tasks = want < 1 ? 1 : want;
    tp_run(pool, j->n_tasks, q8_task, j);
}

int k_linear_q8_multi(const float *x, int T, const k_q8_matrix *const *w, float *const *y,
                      const int *ldy, int n, void (*after)(void *ctx, int c0, int c1),
                      void *after_ctx, tp_pool *pool)
{
    if (n < 1 || n > Q8_MAX_PARTS || (after && (n != 2 || w[0]->N != w[1]->N)))
        return -1;
    if (T <= 0)
        return 0;
    q8_job j = {.T = T, .n = n, .after = after, .after_ctx = after_ctx};
    for (int i = 0; i < n; i++) {
        if (w[i]->K != w[0]->K)
            return -1;
        j.w[i] = w[i];
        j.y[i] = y[i];
        j.ldy[i] = ldy[i];
    }
    k_q8_rows rows;
    if (k_q8_rows_make(x, T, w[0]->K, pool, K_Q8_SLOT_LINEAR, &rows))
        return -1;
    run_rows(&rows, &j, pool);
    k_q8_rows_free(&rows);
    return 0;
}

int k_linear_q8(const float *x, int T, const k_q8_matrix *w, float *y, int ldy, tp_pool *pool)
{
    return k_linear_q8_multi(x, T, &w, &y, &ldy, 1, NULL, NULL, pool);
}

const char *k_q8_kernel_name(void) { return k_isa_ops()->q8_kernel(); }
