/*
 * The q8 weights' arithmetic (engine/cpu/kernels_q8.h), white-box:
 *   - quantization round trip: every weight within half a step (the
 *     group's scale / 2) of its value, q in [-127, 127], the scale max|w|/127;
 *   - refusals: K not a multiple of 32, a value that is not finite;
 *   - the product on every kernel path this CPU runs equals, to the bit, the
 *     canonical sum (exact int32 per group, then fmaf per group in order)
 *     computed here in plain C, for a row alone, in a batch of 37 rows, and
 *     with 1 or 2 threads; and it stays within the quantization error of the
 *     f32 product.
 *   - every row count from 1 to 40 on odd shapes (N not a multiple of 16;
 *     K = 32, 64, 1056) gives the canonical bits: AMX's 16-row tiles, their
 *     tails, a padded tile below 16 rows and the vpdpbusd kernel below the
 *     tiles' threshold; where AMX is expected (amx_expect.h) the avx512
 *     path must be running it.
 * Run once as is, once with MHLA_CPU_Q8_NO_AMX=1 (vpdpbusd alone) and once
 * with MHLA_CPU_Q8_NO_DOT=1 (the kernels without vpdpbusd / sdot / AMX).
 */
#include "cpu/kernels.h"
#include "cpu/kernels_q8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_RNG_SEED 0x5eed0008ull
#include "check.h"

#include "amx_expect.h"

/* Groups of very different magnitudes, some all zero, some with one spike. */
static void fill(float *v, size_t n)
{
    for (size_t i = 0; i < n; i += KQ_GROUP) {
        int kind = rnd(8);
        float mag = kind == 0 ? 0.0f : kind == 1 ? 1e-20f : kind == 2 ? 3e4f : 1.0f;
        for (size_t k = i; k < i + KQ_GROUP && k < n; k++)
            v[k] = mag * (float)(rnd(20001) - 10000) / 10000.0f;
        if (kind == 3)
            v[i + (size_t)rnd(KQ_GROUP)] = 50.0f;
    }
}

static int8_t raw_q(const k_q8_matrix *w, int j, int k)
{
    size_t bg = (size_t)(j / KQ_ROWS) * w->groups + k / KQ_GROUP;
    return w->q[bg * 512 + (k % KQ_GROUP) / 4 * 64 + (j % KQ_ROWS) * 4 + k % 4];
}

static float raw_scale(const k_q8_matrix *w, int j, int g)
{
    return w->scale[((size_t)(j / KQ_ROWS) * w->groups + g) * KQ_ROWS + j % KQ_ROWS];
}

static void round_trip(int N, int K)
{
    float *w = malloc((size_t)N * K * sizeof *w);
    fill(w, (size_t)N * K);
    size_t qb, sb;
    k_q8_sizes(N, K, &qb, &sb);
    int8_t *q = malloc(qb);
    float *s = malloc(sb);
    k_q8_matrix m;
    char err[200];
    if (k_q8_quantize(w, N, K, q, s, &m, err, sizeof err)) {
        CHECK(0, "quantize [%d, %d]: %s", N, K, err);
        return;
    }
    for (int j = 0; j < N; j++)
        for (int g = 0; g < K / KQ_GROUP; g++) {
            float amax = 0;
            int qmax = 0;
            for (int k = g * KQ_GROUP; k < (g + 1) * KQ_GROUP; k++) {
                amax = fmaxf(amax, fabsf(w[(size_t)j * K + k]));
                int qv = raw_q(&m, j, k);
                qmax = abs(qv) > qmax ? abs(qv) : qmax;
                CHECK(qv >= -127 && qv <= 127, "q[%d, %d] = %d", j, k, qv);
            }
            float sc = raw_scale(&m, j, g);
            CHECK(sc == amax / 127.0f, "scale [%d, %d] = %g, max |w| / 127 = %g", j, g, sc,
                  amax / 127.0f);
            CHECK(amax == 0 ? qmax == 0 : qmax == 127, "group [%d, %d]: max |q| = %d", j, g, qmax);
            for (int k = g * KQ_GROUP; k < (g + 1) * KQ_GROUP; k++) {
                float v = w[(size_t)j * K + k], d = k_q8_value(&m, j, k);
                CHECK(fabsf(v - d) <= sc * 0.5f * (1 + 1e-5f),
                      "w[%d, %d] = %g comes back as %g (scale %g)", j, k, v, d, sc);
            }
        }
    free(w);
    free(q);
    free(s);
}

static void refusals(void)
{
    float w[2 * 96];
    int8_t q[4096];
    float s[512];
    k_q8_matrix m;
    char err[200] = "";
    fill(w, 96);
    CHECK(k_q8_quantize(w, 2, 48, q, s, &m, err, sizeof err) == -1 && strstr(err, "multiple of 32"),
          "K = 48: '%s'", err);
    fill(w, 2 * 96);
    w[96 + 70] = NAN;
    err[0] = 0;
    CHECK(k_q8_quantize(w, 2, 96, q, s, &m, err, sizeof err) == -1 && strstr(err, "[1, 70]"),
          "NaN at [1, 70]: '%s'", err);
    w[96 + 70] = INFINITY;
    err[0] = 0;
    CHECK(k_q8_quantize(w, 2, 96, q, s, &m, err, sizeof err) == -1 && strstr(err, "not finite"),
          "inf at [1, 70]: '%s'", err);
}

/* The canonical product, in plain C. */
static void reference(const float *x, int T, const k_q8_matrix *w, float *y)
{
    int K = w->K, G = w->groups;
    int8_t *xq = malloc((size_t)K);
    float *d = malloc((size_t)G * sizeof *d);
    int32_t *sum = malloc((size_t)G * sizeof *sum);
    for (int t = 0; t < T; t++) {
        k_q8_quantize_row(x + (size_t)t * K, K, xq, d, sum);
        for (int j = 0; j < w->N; j++) {
            float acc = 0.0f;
            for (int g = 0; g < G; g++) {
                int32_t s = 0;
                for (int k = g * KQ_GROUP; k < (g + 1) * KQ_GROUP; k++)
                    s += raw_q(w, j, k) * xq[k];
                acc = fmaf((float)s, raw_scale(w, j, g) * d[g], acc);
            }
            y[(size_t)t * w->N + j] = acc;
        }
    }
    free(xq);
    free(d);
    free(sum);
}

static void products(int N, int K, tp_pool *pools[2])
{
    const int T = 37;
    float *w = malloc((size_t)N * K * sizeof *w), *x = malloc((size_t)T * K * sizeof *x);
    fill(w, (size_t)N * K);
    fill(x, (size_t)T * K);
    size_t qb, sb;
    k_q8_sizes(N, K, &qb, &sb);
    int8_t *q = malloc(qb);
    float *s = malloc(sb);
    k_q8_matrix m;
    char err[200];
    if (k_q8_quantize(w, N, K, q, s, &m, err, sizeof err)) {
        CHECK(0, "quantize: %s", err);
        return;
    }
    float *ref = malloc((size_t)T * N * sizeof *ref), *y = malloc((size_t)T * N * sizeof *y);
    reference(x, T, &m, ref);
    /* against the exact product: within the quantization error of both sides
     * (each value within half its group's step) plus f32 rounding */
    for (int t = 0; t < T; t++)
        for (int j = 0; j < N; j++) {
            double exact = 0, bound = 0, mag = 0;
            for (int g = 0; g < K / KQ_GROUP; g++) {
                double aw = 0, ax = 0;
                for (int k = g * KQ_GROUP; k < (g + 1) * KQ_GROUP; k++) {
                    aw = fmax(aw, fabs(w[(size_t)j * K + k]));
                    ax = fmax(ax, fabs(x[(size_t)t * K + k]));
                }
                double hw = aw / 127 / 2, hx = ax / 127 / 2;
                for (int k = g * KQ_GROUP; k < (g + 1) * KQ_GROUP; k++) {
                    double a = w[(size_t)j * K + k], b = x[(size_t)t * K + k];
                    exact += a * b;
                    mag += fabs(a * b);
                    bound += hw * fabs(b) + hx * fabs(a) + hw * hx;
                }
            }
            bound = bound * 1.001 + 1e-5 * (mag + bound) + 1e-36; /* + subnormal scales */
            CHECK(fabs(ref[(size_t)t * N + j] - exact) <= bound,
                  "[%d, %d]: q8 %g, exact %g, bound %g", t, j, ref[(size_t)t * N + j], exact,
                  bound);
        }
    char paths[64];
    snprintf(paths, sizeof paths, "%s", k_isa_runnable());
    for (char *p = strtok(paths, " "); p; p = strtok(NULL, " ")) {
        if (k_isa_select(p, err, sizeof err)) {
            CHECK(0, "select %s: %s", p, err);
            continue;
        }
        k_matrix km = {NULL, NULL, &m, 0};
        for (int th = 0; th < 2; th++) {
            memset(y, 0xff, (size_t)T * N * sizeof *y);
            k_linear(x, T, K, km, N, y, N, pools[th]);
            CHECK(memcmp(y, ref, (size_t)T * N * sizeof *y) == 0,
                  "%s (%s), %d threads, [%d, %d] x %d rows: not the canonical bits", p,
                  k_q8_kernel_name(), th + 1, N, K, T);
            for (int t = 0; t < T; t += 5) { /* one row alone */
                k_linear(x + (size_t)t * K, 1, K, km, N, y, N, pools[th]);
                CHECK(memcmp(y, ref + (size_t)t * N, (size_t)N * sizeof *y) == 0,
                      "%s, row %d alone: not the bits it has in the batch", p, t);
            }
        }
        printf("%s (%s): [%d, %d] x %d rows, the canonical bits\n", p, k_q8_kernel_name(), N, K, T);
    }
    free(w);
    free(x);
    free(q);
    free(s);
    free(ref);
    free(y);
}

/* The avx512 path's kernel is the tiles exactly where amx_expect.h expects them */
static void amx_case(const char *path)
{
    if (strcmp(path, "avx512") != 0)
        return;
    const char *why = "", *name = k_q8_kernel_name();
    int on = strstr(name, "amx") != NULL;
    if (amx_expected(&why))
        CHECK(on, "AMX-INT8 expected on this CPU, the avx512 path runs %s", name);
    else
        printf("AMX case skipped: %s (the avx512 path runs %s)\n", why, name);
}

/* y's first n rows: row_counts's check on one path and pool */
static void rows_1_to(int T, const float *x, const k_q8_matrix *m, const float *ref, float *y,
                      tp_pool *pool, const char *path, int threads)
{
    int N = m->N, K = m->K;
    k_matrix km = {NULL, NULL, m, 0};
    for (int n = 1; n <= T; n++) {
        memset(y, 0xff, (size_t)T * N * sizeof *y);
        k_linear(x, n, K, km, N, y, N, pool);
        CHECK(memcmp(y, ref, (size_t)n * N * sizeof *y) == 0,
              "%s (%s), %d threads, [%d, %d] x %d rows: not the canonical bits", path,
              k_q8_kernel_name(), threads, N, K, n);
    }
}

static void row_counts(int N, int K, tp_pool *pools[2])
{
    const int T = 40;
    float *w = malloc((size_t)N * K * sizeof *w), *x = malloc((size_t)T * K * sizeof *x);
    fill(w, (size_t)N * K);
    fill(x, (size_t)T * K);
    size_t qb, sb;
    k_q8_sizes(N, K, &qb, &sb);
    int8_t *q = malloc(qb);
    float *s = malloc(sb), *ref = malloc((size_t)T * N * sizeof *ref);
    float *y = malloc((size_t)T * N * sizeof *y);
    k_q8_matrix m;
    char err[200], paths[64];
    if (k_q8_quantize(w, N, K, q, s, &m, err, sizeof err))
        die("quantize: %s", err);
    reference(x, T, &m, ref);
    snprintf(paths, sizeof paths, "%s", k_isa_runnable());
    for (char *p = strtok(paths, " "); p; p = strtok(NULL, " ")) {
        if (k_isa_select(p, err, sizeof err)) {
            CHECK(0, "select %s: %s", p, err);
            continue;
        }
        amx_case(p);
        for (int th = 0; th < 2; th++)
            rows_1_to(T, x, &m, ref, y, pools[th], p, th + 1);
        printf("%s (%s): [%d, %d] x 1 to %d rows, the canonical bits\n", p, k_q8_kernel_name(), N,
               K, T);
    }
    free(w);
    free(x);
    free(q);
    free(s);
    free(ref);
    free(y);
}

int main(void)
{
    round_trip(1, 32);
    round_trip(37, 96);
    round_trip(16, 1024);
    refusals();
    tp_pool *pools[2];
    char err[200];
    if (tp_create(1, &pools[0], err, sizeof err) || tp_create(2, &pools[1], err, sizeof err)) {
        fprintf(stderr, "FAIL: thread pool: %s\n", err);
        return 1;
    }
    products(1, 32, pools);
    products(37, 96, pools);
    products(100, 256, pools);
    products(300, 64, pools);
    row_counts(17, 32, pools);
    row_counts(33, 64, pools);
    row_counts(45, 1024 + 32, pools);
    tp_free(pools[0]);
    tp_free(pools[1]);
    if (failures)
        fprintf(stderr, "%d failures\n", failures);
    else
        printf("ok\n");
    return failures != 0;
}
