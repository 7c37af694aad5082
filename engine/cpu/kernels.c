/*
 * kernels.c — the kernels' entry points: each calls the instruction-set
 * path chosen at start (isa.c), and k_linear cuts its output columns into
 * the tasks the thread pool runs.
 */
#include "kernels.h"

#include "isa.h"
#include "kernels_q8.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

float k_dot(const float *a, const float *b, int n) { return k_isa_ops()->dot(a, b, n); }

void k_axpy(float s, const float *row, float *acc, int n) { k_isa_ops()->axpy(s, row, acc, n); }

void k_gemm_acc(int M, int N, int K, const float *A, size_t a_rs, size_t a_cs, const float *B,
                size_t ldb, float *C, size_t ldc)
{
    if (M > 0 && N > 0 && K > 0)
        k_isa_ops()->gemm(M, N, K, A, a_rs, a_cs, B, ldb, C, ldc, 0);
}

void k_gemm_set(int M, int N, int K, const float *A, size_t a_rs, size_t a_cs, const float *B,
                size_t ldb, float *C, size_t ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K > 0) {
        k_isa_ops()->gemm(M, N, K, A, a_rs, a_cs, B, ldb, C, ldc, 1);
        return;
    }
    for (int m = 0; m < M; m++)
        memset(C + (size_t)m * ldc, 0, (size_t)N * sizeof(float));
}

float k_stream_sum(const float *p, size_t n, int prefetch)
{
    return k_isa_ops()->stream_sum(p, n, prefetch);
}

static atomic_int x_pack_on = 1;

void k_set_x_pack(int on) { atomic_store_explicit(&x_pack_on, on != 0, memory_order_relaxed); }

/* The buffer is the thread's own: tasks of one job pack their blocks side by
 * side. A key's destructor frees it when a pool's thread ends. */
static pthread_key_t x_pack_key;
static pthread_once_t x_pack_once = PTHREAD_ONCE_INIT;
static int x_pack_key_ok;
static _Thread_local float *x_pack_buf;
static _Thread_local size_t x_pack_cap; /* floats */

static void x_pack_key_init(void) { x_pack_key_ok = pthread_key_create(&x_pack_key, free) == 0; }

float *k_x_pack_buffer(size_t n)
{
    if (!atomic_load_explicit(&x_pack_on, memory_order_relaxed))
        return NULL;
    if (n <= x_pack_cap)
        return x_pack_buf;
    pthread_once(&x_pack_once, x_pack_key_init);
    size_t bytes = (n + 15) / 16 * 64; /* aligned_alloc: a multiple of the alignment */
    if (!x_pack_key_ok || n > SIZE_MAX / 8)
        return NULL;
    float *b = aligned_alloc(64, bytes);
    if (!b)
        return NULL;
    if (pthread_setspecific(x_pack_key, b) != 0) {
        free(b);
        return NULL;
    }
    free(x_pack_buf);
    x_pack_buf = b;
    x_pack_cap = bytes / sizeof(float);
    return b;
}

/* One matrix of a job: y[t*ldy + j] = x[t] . w[j] for j < N. */
typedef struct {
    k_matrix w;
    int N, ldy, groups;
    float *y;
} linear_part;

#define LINEAR_MAX_PARTS 4

typedef struct {
    const k_ops *ops;
    const float *x;
    int T, K, n_parts, groups, n_tasks;
    int cols; /* output columns per group: 4, or a panel (16) for bf16-dot weights */
    int rows; /* > 0: tasks cut by rows of x, this many each, every column (linear_run) */
    linear_part part[LINEAR_MAX_PARTS];
    /* k_linear_pair: both parts cut by the same columns, then `after` */
    k_cols_fn after;
    void *after_ctx;
    const k_bd_rows *bd; /* x rounded, where a part has bf16-dot weights */
} linear_job;

/* Columns [j0, j1) of y = x wᵀ for f32 or bf16 w, on the calling thread (bd: x's rows
 * rounded for bf16-dot weights). */
static void linear_cols(const k_ops *ops, const float *x, const k_bd_rows *bd, int T, int K,
                        k_matrix w, int j0, int j1, float *y, int ldy)
{
    if (w.bf16 && w.bf16_dot)
        ops->linear_bd(bd, w.bf16, j0, j1, y, ldy);
    else if (w.bf16)
        ops->linear_bf16(x, T, K, w.bf16, j0, j1, y, ldy);
    else
        ops->linear_f32(x, T, K, w.f32, j0, j1, y, ldy);
}

static void linear_rows(const linear_job *j, const linear_part *p, int j0, int j1)
{
    linear_cols(j->ops, j->x, j->bd, j->T, j->K, p->w, j0, j1, p->y, p->ldy);
}

/* A task's groups of output columns, counted over the parts one after
 * the other: each part's share is computed on its own. */
static void linear_task(void *ctx, int task)
{
    const linear_job *j = ctx;
    if (j->rows) { /* rows [t0, t1) of x against every column of every part */
        int t0 = task * j->rows, t1 = t0 + j->rows < j->T ? t0 + j->rows : j->T;
        for (int i = 0; i < j->n_parts; i++) {
            const linear_part *p = &j->part[i];
            linear_cols(j->ops, j->x + (size_t)t0 * j->K, NULL, t1 - t0, j->K, p->w, 0, p->N,
                        p->y + (size_t)t0 * p->ldy, p->ldy);
        }
        return;
    }
    int g0 = (int)((long)j->groups * task / j->n_tasks);
    int g1 = (int)((long)j->groups * (task + 1) / j->n_tasks);
    if (j->after) { /* k_linear_pair: the same columns of both, then the epilogue */
        int c = j->cols, c0 = g0 * c, c1 = g1 * c < j->part[0].N ? g1 * c : j->part[0].N;
        if (c0 < c1) {
            linear_rows(j, &j->part[0], c0, c1);
            linear_rows(j, &j->part[1], c0, c1);
            j->after(j->after_ctx, c0, c1);
        }
        return;
    }
    for (int i = 0, base = 0; i < j->n_parts && base < g1; base += j->part[i++].groups) {
        const linear_part *p = &j->part[i];
        int a = g0 > base ? g0 - base : 0, b = g1 - base < p->groups ? g1 - base : p->groups;
        if (a < b)
            linear_rows(j, p, a * j->cols, b * j->cols < p->N ? b * j->cols : p->N);
    }
}

/* Output columns go to tasks in groups of 4 (every path's tiles divide 4),
 * or of 16 where a part has bf16-dot weights (a panel, kernels_bd.h).
 * A job is cut into a few tasks per thread, so a thread the OS has taken
 * away holds up only a small part of it; a task still streams at least
 * ~256 KiB of weights, so handing it out costs nothing measurable. */
#define TASKS_PER_THREAD 4
#define MIN_TASK_MACS (64L * 1024)
/* A job of f32 or bf16 weights with at least this many rows of x a task (a prefill's) is
 * cut by rows of x instead, a multiple of 16 rows each (every path's tiles divide it): the
 * tiles pack each block of their rows of x before they use it, so cut by columns every
 * task packed all of x for itself (the avx2 path's down projection at 512 rows, two
 * threads: ~9 % of its time). Cut by rows, each row is packed once, and every task streams
 * all of w over its rows, from L3 where w fits. A value's chain of products does not
 * depend on which rows share its tile, so the bits do not change. */
#define ROW_TASK_MIN 32

static void linear_run(linear_job *j, tp_pool *pool)
{
    long n = 0;
    j->groups = 0;
    j->cols = 4;
    for (int i = 0; i < j->n_parts; i++)
        if (j->part[i].w.bf16_dot)
            j->cols = K_BD_PANEL;
    for (int i = 0; i < j->n_parts; i++) {
        j->part[i].groups = (j->part[i].N + j->cols - 1) / j->cols;
        j->groups += j->part[i].groups;
        n += j->part[i].N;
    }
    if (j->after) /* paired: a task's groups are columns of both parts */
        j->groups = j->part[0].groups;
    long macs = (long)j->T * j->K * n;
    int want = tp_threads(pool) > 1 ? tp_threads(pool) * TASKS_PER_THREAD : 1;
    long by_size = macs / (MIN_TASK_MACS * 1L);
    if (want > by_size)
        want = (int)(by_size > 0 ? by_size : 1);
    if (want > j->groups)
        want = j->groups;
    j->n_tasks = want < 1 ? 1 : want;
    j->rows = 0;
    if (!j->after && !j->bd && j->n_tasks > 1 && j->T >= ROW_TASK_MIN * j->n_tasks) {
        j->rows = (j->T + j->n_tasks - 1) / j->n_tasks;
        j->rows = (j->rows + 15) / 16 * 16;
        j->n_tasks = (j->T + j->rows - 1) / j->rows;
    }
    tp_run(pool, j->n_tasks, linear_task, j);
}

static void fill_nan(float *y, int T, int N, int ldy);

/* linear_run, with x's rows rounded first where a part has bf16-dot weights;
 * out of memory for them: NaN in every output (and the epilogue on them). */
static void linear_run_rows(linear_job *j, tp_pool *pool)
{
    int bd = 0;
    for (int i = 0; i < j->n_parts; i++)
        bd |= j->part[i].w.bf16_dot;
    if (!bd || j->T <= 0) {
        linear_run(j, pool);
        return;
    }
    k_bd_rows rows;
    if (k_bd_rows_make(j->x, j->T, j->K, pool, K_Q8_SLOT_LINEAR, &rows)) {
        for (int i = 0; i < j->n_parts; i++)
            fill_nan(j->part[i].y, j->T, j->part[i].N, j->part[i].ldy);
        if (j->after)
            j->after(j->after_ctx, 0, j->part[0].N);
        return;
    }
    j->bd = &rows;
    linear_run(j, pool);
    k_bd_rows_free(&rows);
}

/* The q8 products' answer when there is no memory to quantize x: NaN in every output, never
 * garbage. */
static void fill_nan(float *y, int T, int N, int ldy)
{
    for (int t = 0; t < T; t++)
        for (int c = 0; c < N; c++)
            y[(size_t)t * ldy + c] = NAN;
}

void k_linear(const float *x, int T, int K, k_matrix w, int N, float *y, int ldy, tp_pool *pool)
{
    if (w.q8) {
        /* out of memory for the quantized activations: NaN, never garbage */
        if (k_linear_q8(x, T, w.q8, y, ldy, pool))
            fill_nan(y, T, N, ldy);
        return;
    }
    linear_job j = {.ops = k_isa_ops(), .x = x, .T = T, .K = K, .n_parts = 1};
    j.part[0] = (linear_part){.w = w, .N = N, .ldy = ldy, .y = y};
    linear_run_rows(&j, pool);
}

int k_linear_multi(const float *x, int T, int K, const k_matrix *w, const int *N, float *const *y,
                   const int *ldy, int n, tp_pool *pool)
{
    if (n < 1 || n > LINEAR_MAX_PARTS)
        return -1;
    int n_q8 = 0;
    for (int i = 0; i < n; i++)
        n_q8 += w[i].q8 != NULL;
    if (n_q8 == n) { /* x quantized once, then one job over the matrices' row blocks */
        const struct k_q8_matrix *wq[LINEAR_MAX_PARTS];
        for (int i = 0; i < n; i++)
            wq[i] = w[i].q8;
        if (k_linear_q8_multi(x, T, wq, y, ldy, n, NULL, NULL, pool))
            for (int i = 0; i < n; i++)
                fill_nan(y[i], T, N[i], ldy[i]);
        return 0;
    }
    if (n_q8) { /* mixed storage: one job each */
        for (int i = 0; i < n; i++)
            k_linear(x, T, K, w[i], N[i], y[i], ldy[i], pool);
        return 0;
    }
    linear_job j = {.ops = k_isa_ops(), .x = x, .T = T, .K = K, .n_parts = n};
    for (int i = 0; i < n; i++)
        j.part[i] = (linear_part){.w = w[i], .N = N[i], .ldy = ldy[i], .y = y[i]};
    linear_run_rows(&j, pool);
    return 0;
}

void k_linear_pair(const float *x, int T, int K, const k_matrix *w, int N, float *const *y, int ldy,
                   k_cols_fn after, void *after_ctx, tp_pool *pool)
{
    if (!w[0].q8 != !w[1].q8) { /* mixed storage: one job each, then the epilogue */
        for (int i = 0; i < 2; i++)
            k_linear(x, T, K, w[i], N, y[i], ldy, pool);
        after(after_ctx, 0, N);
        return;
    }
    if (w[0].q8) {
        const struct k_q8_matrix *wq[2] = {w[0].q8, w[1].q8};
        int ldys[2] = {ldy, ldy};
        /* out of memory for the quantized activations: NaN, never garbage */
        if (k_linear_q8_multi(x, T, wq, y, ldys, 2, after, after_ctx, pool)) {
            for (int i = 0; i < 2; i++)
                fill_nan(y[i], T, N, ldy);
            after(after_ctx, 0, N);
        }
        return;
    }
    linear_job j = {.ops = k_isa_ops(), .x = x, .T = T, .K = K, .n_parts = 2};
    for (int i = 0; i < 2; i++)
        j.part[i] = (linear_part){.w = w[i], .N = N, .ldy = ldy, .y = y[i]};
    j.after = after;
    j.after_ctx = after_ctx;
    linear_run_rows(&j, pool);
}

int k_prod_begin(k_prod *p, const float *x, int T, int K, int prep, tp_pool *pool)
{
    *p = (k_prod){.x = x, .T = T, .K = K};
    if ((prep & K_PROD_Q8) && k_q8_rows_make(x, T, K, pool, K_Q8_SLOT_PROD, &p->q8))
        return -1;
    /* both: the rounded rows in a buffer of their own, the slot being the q8 rows' */
    if ((prep & K_PROD_BD) &&
        k_bd_rows_make(x, T, K, (prep & K_PROD_Q8) ? NULL : pool, K_Q8_SLOT_PROD, &p->bd)) {
        k_q8_rows_free(&p->q8);
        return -1;
    }
    return 0;
}

void k_prod_cols(const k_prod *p, k_matrix w, int j0, int j1, float *y, int ldy)
{
    if (w.q8)
        k_q8_cols(&p->q8, w.q8, j0 / KQ_ROWS, (j1 + KQ_ROWS - 1) / KQ_ROWS, y, ldy);
    else
        linear_cols(k_isa_ops(), p->x, &p->bd, p->T, p->K, w, j0, j1, y, ldy);
}

int k_prod_step(k_matrix w) { return w.q8 ? KQ_ROWS : w.bf16_dot ? K_BD_PANEL : 1; }

void k_prod_end(k_prod *p)
{
    k_q8_rows_free(&p->q8);
    k_bd_rows_free(&p->bd);
}

void k_rmsnorm(const float *x, const float *w, int n, float eps, float *out)
{
    float ms = k_dot(x, x, n) / (float)n;
    float inv = 1.0f / sqrtf(ms + eps);
    for (int i = 0; i < n; i++)
        out[i] = x[i] * inv * w[i];
}

/* exp and expm1 from basic double operations only, so every CPU gives the
 * same bits (libm's expf / expm1f differ in the last bit between x86-64
 * and aarch64): x = (32 e + i) ln2/32 + r, |r| <= ln2/64, e^x = 2^e 2^(i/32)
 * e^r, with e^r - 1 by its Taylor series to r^5 (relative error ~2e-15),
 * then one rounding to float. */
const double k_exp2_32[32] = {
    0x1.0000000000000p+0, 0x1.059b0d3158574p+0, 0x1.0b5586cf9890fp+0, 0x1.11301d0125b51p+0,
    0x1.172b83c7d517bp+0, 0x1.1d4873168b9aap+0, 0x1.2387a6e756238p+0, 0x1.29e9df51fdee1p+0,
    0x1.306fe0a31b715p+0, 0x1.371a7373aa9cbp+0, 0x1.3dea64c123422p+0, 0x1.44e086061892dp+0,
    0x1.4bfdad5362a27p+0, 0x1.5342b569d4f82p+0, 0x1.5ab07dd485429p+0, 0x1.6247eb03a5585p+0,
    0x1.6a09e667f3bcdp+0, 0x1.71f75e8ec5f74p+0, 0x1.7a11473eb0187p+0, 0x1.82589994cce13p+0,
    0x1.8ace5422aa0dbp+0, 0x1.93737b0cdc5e5p+0, 0x1.9c49182a3f090p+0, 0x1.a5503b23e255dp+0,
    0x1.ae89f995ad3adp+0, 0x1.b7f76f2fb5e47p+0, 0x1.c199bdd85529cp+0, 0x1.cb720dcef9069p+0,
    0x1.d5818dcfba487p+0, 0x1.dfc97337b9b5fp+0, 0x1.ea4afa2a490dap+0, 0x1.f50765b6e4540p+0,
};

/* e^x for x in [-110, 89], as a double */
static double exp_d(double x)
{
    double k = floor(x * K_EXP_INV + 0.5);
    double r = (x - k * K_EXP_HI) - k * K_EXP_LO; /* k * HI is exact */
    double p = r * (1.0 + r * (0.5 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120)))));
    int ki = (int)k;
    double t = k_exp2_32[ki & 31];
    /* times 2^floor(k / 32), built from its bits: for x in [-110, 89] the
     * exponent is in [-159, 128] and the product a normal double, so this is
     * exactly ldexp's result without its library call (a hot spot at batch 1) */
    union {
        uint64_t u;
        double d;
    } two_e = {.u = (uint64_t)((ki >> 5) + 1023) << 52};
    return (t + t * p) * two_e.d;
}

float k_expf(float x)
{
    if (x != x)
        return x;
    if (x > 89.0f)
        return INFINITY;
    if (x < -110.0f)
        return 0.0f;
    return (float)exp_d((double)x);
}

float k_silu(float x) { return x / (1.0f + k_expf(-x)); }

void k_silu_mul(const float *a, const float *b, float *out, int n)
{
    k_isa_ops()->silu_mul(a, b, out, n);
}

float k_expm1f(float x)
{
    if (x != x)
        return x;
    if (x > 89.0f)
        return INFINITY;
    if (x < -110.0f)
        return -1.0f;
    double d = x;
    if (d > -0.25 && d < 0.25) { /* e^x - 1 directly: no cancellation near 0 */
        double p = 1.0 / 362880;
        static const double INV_FACT[] = {1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120,
                                          1.0 / 24,    1.0 / 6,    0.5,       1.0};
        for (int n = 0; n < 8; n++)
            p = INV_FACT[n] + d * p;
        return (float)(d * p);
    }
    return (float)(exp_d(d) - 1.0);
}
