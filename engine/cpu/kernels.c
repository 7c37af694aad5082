/*
 * kernels.c — the kernels' entry points: each calls the instruction-set
 * path chosen at start (isa.c), and k_linear cuts its output columns into
 * the tasks the thread pool runs.
 */
#include "kernels.h"

#include "isa.h"

#include <math.h>
#include <string.h>

float k_dot(const float *a, const float *b, int n) { return k_isa_ops()->dot(a, b, n); }

void k_axpy(float s, const float *row, float *acc, int n) { k_isa_ops()->axpy(s, row, acc, n); }

typedef struct {
    const k_ops *ops;
    const float *x;
    int T, K, N, ldy, groups, n_tasks;
    k_matrix w;
    float *y;
} linear_job;

static void linear_task(void *ctx, int task)
{
    const linear_job *j = ctx;
    int g0 = (int)((long)j->groups * task / j->n_tasks);
    int g1 = (int)((long)j->groups * (task + 1) / j->n_tasks);
    int j0 = g0 * 4, j1 = g1 * 4 < j->N ? g1 * 4 : j->N;
    if (j->w.bf16)
        j->ops->linear_bf16(j->x, j->T, j->K, j->w.bf16, j0, j1, j->y, j->ldy);
    else
        j->ops->linear_f32(j->x, j->T, j->K, j->w.f32, j0, j1, j->y, j->ldy);
}

/* Output columns go to tasks in groups of 4 (every path's tiles divide 4).
 * A job is cut into a few tasks per thread, so a thread the OS has taken
 * away holds up only a small part of it; a task still streams at least
 * ~256 KiB of weights, so handing it out costs nothing measurable. */
#define TASKS_PER_THREAD 4
#define MIN_TASK_MACS (64L * 1024)

void k_linear(const float *x, int T, int K, k_matrix w, int N, float *y, int ldy, tp_pool *pool)
{
    linear_job j = {k_isa_ops(), x, T, K, N, ldy, (N + 3) / 4, 1, w, y};
    long macs = (long)T * K * N;
    int want = tp_threads(pool) > 1 ? tp_threads(pool) * TASKS_PER_THREAD : 1;
    long by_size = macs / (MIN_TASK_MACS * 1L);
    if (want > by_size)
        want = (int)(by_size > 0 ? by_size : 1);
    if (want > j.groups)
        want = j.groups;
    j.n_tasks = want < 1 ? 1 : want;
    tp_run(pool, j.n_tasks, linear_task, &j);
}

void k_rmsnorm(const float *x, const float *w, int n, float eps, float *out)
{
    float ms = k_dot(x, x, n) / (float)n;
    float inv = 1.0f / sqrtf(ms + eps);
    for (int i = 0; i < n; i++)
        out[i] = x[i] * inv * w[i];
}

/* e^r - 1 for |r| <= ln2/2 + a little: Taylor terms to r^15 by Horner,
 * relative error below 1e-17. */
static double em1_small(double r)
{
    double p = 1.0;
    for (int n = 15; n >= 2; n--)
        p = 1.0 + r / n * p;
    return r * p;
}

/* e^x - 1 in double from basic operations only (libm's exp and expm1
 * differ in the last bit between architectures): x = k ln2 + r. */
static double exp_m1(double x)
{
    static const double LN2_HI = 6.93147180369123816490e-01, LN2_LO = 1.90821492927058770002e-10;
    double k = floor(x * 1.44269504088896338700 + 0.5);
    double r = (x - k * LN2_HI) - k * LN2_LO;
    double e = em1_small(r);
    return k == 0 ? e : ldexp(e + 1.0, (int)k) - 1.0;
}

float k_expf(float x)
{
    if (x != x)
        return x;
    if (x > 89.0f)
        return INFINITY;
    if (x < -110.0f)
        return 0.0f;
    return (float)(exp_m1((double)x) + 1.0);
}

float k_expm1f(float x)
{
    if (x != x)
        return x;
    if (x > 89.0f)
        return INFINITY;
    if (x < -110.0f)
        return -1.0f;
    return (float)exp_m1((double)x);
}

