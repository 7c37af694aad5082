/*
 * The q4 weights' arithmetic (engine/cpu/kernels_q4.h), white-box:
 *   - f16 scales: k_f16_from_f32 rounds as the compiler's _Float16 does
 *     (where it has one) over normal, subnormal and tie values, and
 *     k_f32_from_f16 inverts it exactly for every finite half;
 *   - quantization round trip, groups of 32, 64 and 128: q in [-8, 7], the
 *     group's value of largest |w| comes back as -8 d, every other weight
 *     within half a step (a whole one where it is clamped to 7; plus 8
 *     times the scale's f16 rounding), the scale the f16 of m / -8;
 *   - refusals: K not a multiple of the group, a group size that is not 32,
 *     64 or 128, a value that is not finite, a scale beyond f16;
 *   - the product on every kernel path this CPU runs equals, to the bit, the
 *     definition (exact int32 per group of 32, then fmaf per group in order)
 *     computed here in plain C, for a row alone, in a batch of 37 rows, and
 *     with 1 or 2 threads; and it stays within the quantization error of the
 *     f32 product.
 *   - every row count from 1 to 40 on odd shapes (N not a multiple of 16;
 *     K = 32, 64, 1056; groups of 32 and 64) gives the defined bits: AMX's
 *     16-row tiles, their tails, a padded tile below 16 rows and vpdpbusd
 *     below the tiles' threshold; where AMX is expected (amx_expect.h) the
 *     avx512 path must be running it.
 * Run once as is, once with MHLA_CPU_Q8_NO_AMX=1 (vpdpbusd alone) and once
 * with MHLA_CPU_Q8_NO_DOT=1 (the kernels without vpdpbusd / sdot / AMX). usage: test_q4_kernels [1]
 * (1: one thread only, for qemu-user)
 */
#include "cpu/kernels.h"
#include "cpu/kernels_q4.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_RNG_SEED 0x5eed0004ull
#include "check.h"

#include "amx_expect.h"

/* Groups of very different magnitudes, some all zero, some with one spike, some tiny enough
 * for subnormal or zero scales. */
static void fill(float *v, size_t n)
{
    for (size_t i = 0; i < n; i += KQ_GROUP) {
        int kind = rnd(9);
        float mag = kind == 0   ? 0.0f
                    : kind == 1 ? 1e-20f
                    : kind == 2 ? 3e4f
                    : kind == 8 ? 2e-6f
                                : 1.0f;
        for (size_t k = i; k < i + KQ_GROUP && k < n; k++)
            v[k] = mag * (float)(rnd(20001) - 10000) / 10000.0f;
        if (kind == 3)
            v[i + (size_t)rnd(KQ_GROUP)] = rnd(2) ? 50.0f : -50.0f;
    }
}

static void f16_conversions(void)
{
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00)
            continue; /* inf, NaN: never a scale */
        float f = k_f32_from_f16((uint16_t)h);
        CHECK(k_f16_from_f32(f) == h, "f16 %#x -> %g -> %#x", h, f, k_f16_from_f32(f));
    }
#ifdef __FLT16_MAX__
    for (int i = 0; i < 2000000; i++) {
        uint32_t b = ((uint32_t)rnd(1 << 16) << 16) | (uint32_t)rnd(1 << 16);
        b = (b & 0x80000000u) | (0x30000000u + b % 0x17800000u); /* 2^-31 .. 65536 */
        float f;
        memcpy(&f, &b, sizeof f);
        if (!(fabsf(f) < 65520.0f))
            continue;
        _Float16 c = (_Float16)f;
        uint16_t want;
        memcpy(&want, &c, sizeof want);
        CHECK(k_f16_from_f32(f) == want, "f16 of %a: %#x, the compiler's %#x", f, k_f16_from_f32(f),
              want);
    }
    printf("f16 scales: rounding as _Float16 does, widening exact\n");
#else
    printf("f16 scales: widening exact (no _Float16 here to compare the rounding with)\n");
#endif
}

static void check_group(const float *w, const k_q8_matrix *m, int j, int k0, int wg)
{
    float mv = 0;
    int at = k0;
    for (int k = k0; k < k0 + wg; k++)
        if (fabsf(w[(size_t)j * m->K + k]) > fabsf(mv))
            mv = w[(size_t)j * m->K + k], at = k;
    uint16_t h = k_q4_raw_scale(m, j, k0);
    CHECK(h == k_f16_from_f32(mv / -8.0f), "scale [%d, %d] = %#x, f16(m / -8) = %#x", j, k0, h,
          k_f16_from_f32(mv / -8.0f));
    float d = mv / -8.0f, dh = k_f32_from_f16(h);
    float slack = 8 * fabsf(d - dh) + 1e-30f;
    if (fabsf(dh) >= 0x1p-14f) /* a normal half: rounded by 2^-11 at most, m stays -8 d */
        CHECK(k_q4_raw(m, j, at) == -8, "[%d, %d]: the largest |w| as q %d", j, at,
              k_q4_raw(m, j, at));
    for (int k = k0; k < k0 + wg; k++) {
        float v = w[(size_t)j * m->K + k], back = k_q4_value(m, j, k);
        int q = k_q4_raw(m, j, k);
        CHECK(q >= -8 && q <= 7, "q[%d, %d] = %d", j, k, q);
        float step = q == 7 ? fabsf(dh) : fabsf(dh) * 0.5f;
        CHECK(fabsf(v - back) <= step * (1 + 1e-5f) + slack,
              "w[%d, %d] = %g comes back as %g (q %d, scale %g)", j, k, v, back, q, dh);
    }
}

static void round_trip(int N, int K, int wg)
{
    float *w = malloc((size_t)N * K * sizeof *w);
    fill(w, (size_t)N * K);
    size_t qb, sb;
    k_q4_sizes(N, K, wg, &qb, &sb);
    uint8_t *q = malloc(qb);
    uint16_t *s = malloc(sb);
    k_q8_matrix m;
    char err[200];
    if (k_q4_quantize(w, N, K, wg, q, s, &m, err, sizeof err)) {
        CHECK(0, "quantize [%d, %d] / %d: %s", N, K, wg, err);
    } else {
        CHECK(m.bits == 4 && m.wgroup == wg, "bits %d, group %d", m.bits, m.wgroup);
        for (int j = 0; j < N; j++)
            for (int k0 = 0; k0 < K; k0 += wg)
                check_group(w, &m, j, k0, wg);
    }
    free(w);
    free(q);
    free(s);
}

static void refusals(void)
{
    float w[2 * 256];
    uint8_t q[4096];
    uint16_t s[512];
    k_q8_matrix m;
    char err[200] = "";
    fill(w, 2 * 256);
    CHECK(k_q4_quantize(w, 2, 48, 32, q, s, &m, err, sizeof err) == -1 &&
              strstr(err, "not a multiple of 32"),
          "K = 48: '%s'", err);
    err[0] = 0;
    CHECK(k_q4_quantize(w, 2, 96, 64, q, s, &m, err, sizeof err) == -1 &&
              strstr(err, "not a multiple of 64"),
          "K = 96, groups of 64: '%s'", err);
    err[0] = 0;
    CHECK(k_q4_quantize(w, 2, 96, 48, q, s, &m, err, sizeof err) == -1 && strstr(err, "32, 64"),
          "groups of 48: '%s'", err);
    w[256 + 70] = NAN;
    err[0] = 0;
    CHECK(k_q4_quantize(w, 2, 256, 32, q, s, &m, err, sizeof err) == -1 && strstr(err, "[1, 70]"),
          "NaN at [1, 70]: '%s'", err);
    w[256 + 70] = 6e5f;
    err[0] = 0;
    CHECK(k_q4_quantize(w, 2, 256, 32, q, s, &m, err, sizeof err) == -1 &&
              strstr(err, "[1, 64..95]") && strstr(err, "f16"),
          "6e5 at [1, 70]: '%s'", err);
}

/* The definition, in plain C. */
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
                    s += k_q4_raw(w, j, k) * xq[k];
                float sw = k_f32_from_f16(k_q4_raw_scale(w, j, g * KQ_GROUP));
                acc = fmaf((float)s, sw * d[g], acc);
            }
            y[(size_t)t * w->N + j] = acc;
        }
    }
    free(xq);
    free(d);
    free(sum);
}

/* max |v[i]|, i < n (a loop of its own: GCC 12's aarch64 vectorizer failed on it inlined) */
static __attribute__((noinline)) double amax(const float *v, int n)
{
    float m = 0;
    for (int i = 0; i < n; i++)
        m = fabsf(v[i]) > m ? fabsf(v[i]) : m;
    return m;
}

/* Against the exact product: within the quantization error of both sides (each weight within
 * a step of its value, each activation within half of its) plus f32 rounding. */
static void near_exact(const float *x, const float *w, const float *ref, const k_q8_matrix *m,
                       int T)
{
    int N = m->N, K = m->K;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < N; j++) {
            double exact = 0, bound = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                int k0 = k / m->wgroup * m->wgroup, x0 = k / KQ_GROUP * KQ_GROUP;
                double aw = amax(w + (size_t)j * K + k0, m->wgroup);
                double ax = amax(x + (size_t)t * K + x0, KQ_GROUP);
                double hw = aw / 8 * 1.001 + 1e-7, hx = ax / 127 / 2;
                double a = w[(size_t)j * K + k], b = x[(size_t)t * K + k];
                exact += a * b;
                mag += fabs(a * b);
                bound += hw * fabs(b) + hx * fabs(a) + hw * hx;
            }
            bound = bound * 1.001 + 1e-5 * (mag + bound) + 1e-30;
            CHECK(fabs(ref[(size_t)t * N + j] - exact) <= bound,
                  "[%d, %d]: q4 %g, exact %g, bound %g", t, j, ref[(size_t)t * N + j], exact,
                  bound);
        }
}

/* Every path this CPU runs gives the reference's bits, in the batch and row by row. */
static void on_every_path(const float *x, int T, const k_q8_matrix *m, const float *ref, float *y,
                          tp_pool **pools, int n_pools)
{
    int N = m->N, K = m->K;
    char paths[64], err[200];
    snprintf(paths, sizeof paths, "%s", k_isa_runnable());
    for (char *p = strtok(paths, " "); p; p = strtok(NULL, " ")) {
        if (k_isa_select(p, err, sizeof err)) {
            CHECK(0, "select %s: %s", p, err);
            continue;
        }
        k_matrix km = {NULL, NULL, m, 0};
        for (int th = 0; th < n_pools; th++) {
            memset(y, 0xff, (size_t)T * N * sizeof *y);
            k_linear(x, T, K, km, N, y, N, pools[th]);
            CHECK(memcmp(y, ref, (size_t)T * N * sizeof *y) == 0,
                  "%s (%s), %d threads, [%d, %d] / %d x %d rows: not the defined bits", p,
                  k_q4_kernel_name(), th + 1, N, K, m->wgroup, T);
            for (int t = 0; t < T; t += 5) { /* one row alone */
                k_linear(x + (size_t)t * K, 1, K, km, N, y, N, pools[th]);
                CHECK(memcmp(y, ref + (size_t)t * N, (size_t)N * sizeof *y) == 0,
                      "%s, row %d alone: not the bits it has in the batch", p, t);
            }
        }
        printf("%s (%s): [%d, %d] / %d x %d rows, the defined bits\n", p, k_q4_kernel_name(), N, K,
               m->wgroup, T);
    }
}

/* The avx512 path's kernel is the tiles exactly where amx_expect.h expects them */
static void amx_case(const char *path)
{
    if (strcmp(path, "avx512") != 0)
        return;
    const char *why = "", *name = k_q4_kernel_name();
    int on = strstr(name, "amx") != NULL;
    if (amx_expected(&why))
        CHECK(on, "AMX-INT8 expected on this CPU, the avx512 path runs %s", name);
    else
        printf("AMX case skipped: %s (the avx512 path runs %s)\n", why, name);
}

/* Each row count n from 1 to T: y's first n rows, on every path and pool */
static void rows_1_to(int T, const float *x, const k_q8_matrix *m, const float *ref, float *y,
                      tp_pool **pools, int n_pools)
{
    int N = m->N, K = m->K;
    char paths[64], err[200];
    k_matrix km = {NULL, NULL, m, 0};
    snprintf(paths, sizeof paths, "%s", k_isa_runnable());
    for (char *p = strtok(paths, " "); p; p = strtok(NULL, " ")) {
        if (k_isa_select(p, err, sizeof err)) {
            CHECK(0, "select %s: %s", p, err);
            continue;
        }
        amx_case(p);
        for (int th = 0; th < n_pools; th++)
            for (int n = 1; n <= T; n++) {
                memset(y, 0xff, (size_t)T * N * sizeof *y);
                k_linear(x, n, K, km, N, y, N, pools[th]);
                CHECK(memcmp(y, ref, (size_t)n * N * sizeof *y) == 0,
                      "%s (%s), %d threads, [%d, %d] / %d x %d rows: not the defined bits", p,
                      k_q4_kernel_name(), th + 1, N, K, m->wgroup, n);
            }
        printf("%s (%s): [%d, %d] / %d x 1 to %d rows, the defined bits\n", p, k_q4_kernel_name(),
               N, K, m->wgroup, T);
    }
}

/* The largest sums a group gives: in each group of wg one weight 1 and the rest -7/8 (q 7,
 * the nibble 15), against rows of x all 1 or all -1 (127 and -127), so each unit's pair sums
 * and a group's total are at their bounds (q4_avx2.h adds 8 units' sums in 16 bits). */
static void extreme(float *w, int N, int K, int wg, float *x, int T)
{
    for (size_t i = 0; i < (size_t)N * K; i++)
        w[i] = (i % (size_t)K) % (size_t)wg == 0 ? 1.0f : -0.875f;
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++)
            x[(size_t)t * K + k] = t % 2 ? -1.0f : 1.0f;
}

/* A random [N, K] matrix in groups of wg and T random rows of x (or extreme()'s), quantized,
 * and the defined product's bits: rows_only, every row count from 1 to T on every path
 * (rows_1_to); else the accuracy and the T-row product on every path (near_exact,
 * on_every_path). */
static void q4_case(int N, int K, int wg, int T, int rows_only, int at_bounds, tp_pool **pools,
                    int n_pools)
{
    float *w = malloc((size_t)N * K * sizeof *w), *x = malloc((size_t)T * K * sizeof *x);
    fill(w, (size_t)N * K);
    fill(x, (size_t)T * K);
    if (at_bounds)
        extreme(w, N, K, wg, x, T);
    size_t qb, sb;
    k_q4_sizes(N, K, wg, &qb, &sb);
    uint8_t *q = malloc(qb);
    uint16_t *s = malloc(sb);
    float *ref = malloc((size_t)T * N * sizeof *ref), *y = malloc((size_t)T * N * sizeof *y);
    k_q8_matrix m;
    char err[200];
    if (k_q4_quantize(w, N, K, wg, q, s, &m, err, sizeof err)) {
        CHECK(0, "quantize: %s", err);
    } else {
        reference(x, T, &m, ref);
        if (rows_only) {
            rows_1_to(T, x, &m, ref, y, pools, n_pools);
        } else {
            near_exact(x, w, ref, &m, T);
            on_every_path(x, T, &m, ref, y, pools, n_pools);
        }
    }
    free(w);
    free(x);
    free(q);
    free(s);
    free(ref);
    free(y);
}

static void products(int N, int K, int wg, tp_pool **pools, int n_pools)
{
    q4_case(N, K, wg, 37, 0, 0, pools, n_pools);
}

static void row_counts(int N, int K, int wg, tp_pool **pools, int n_pools)
{
    q4_case(N, K, wg, 40, 1, 0, pools, n_pools);
}

int main(int argc, char **argv)
{
    int n_pools = argc > 1 && !strcmp(argv[1], "1") ? 1 : 2;
    f16_conversions();
    static const int groups[] = {32, 64, 128};
    for (int i = 0; i < 3; i++) {
        round_trip(1, 128, groups[i]);
        round_trip(37, 256, groups[i]);
        round_trip(16, 1024, groups[i]);
    }
    refusals();
    tp_pool *pools[2];
    char err[200];
    for (int i = 0; i < n_pools; i++)
        if (tp_create(i + 1, &pools[i], err, sizeof err))
            die("thread pool: %s", err);
    products(1, 32, 32, pools, n_pools);
    products(37, 96, 32, pools, n_pools);
    products(100, 256, 64, pools, n_pools);
    products(300, 128, 128, pools, n_pools);
    products(20, 384, 128, pools, n_pools);
    row_counts(17, 32, 32, pools, n_pools);
    row_counts(33, 64, 64, pools, n_pools);
    row_counts(45, 1024 + 32, 32, pools, n_pools);
    row_counts(45, 1024 + 128, 128, pools, n_pools);
    q4_case(37, 256, 32, 8, 0, 1, pools, n_pools); /* sums at their bounds */
    q4_case(20, 384, 128, 8, 0, 1, pools, n_pools);
    for (int i = 0; i < n_pools; i++)
        tp_free(pools[i]);
    if (failures)
        fprintf(stderr, "%d failures\n", failures);
    else
        printf("ok\n");
    return failures != 0;
}
