/*
 * The bf16 dot products' arithmetic (engine/cpu/kernels_bd.h), white-box:
 *   - rounding: nearest even, NaN stays NaN, |b| < 2^-56 (denormals too) to
 *     +0 and 2^-56 kept; the row form gives the scalar form's bits;
 *   - the check at start (k_bd_agrees) accepts the definition and refuses
 *     one chain per step, vdpbf16ps's 16 lanes, and the two chains added to
 *     the accumulator one at a time, so a kernel whose arithmetic differs is
 *     caught;
 *   - k_linear with bf16-dot weights on every kernel path this CPU runs
 *     equals, to the bit, the definition computed here in plain C
 *     (k_bd_dot_ref), for a batch of rows, one row alone, with 1 or 2
 *     threads, K with and without a tail, values from 2^-56 to 2^60 with
 *     infinities and cancelling sums; and it stays within bf16's rounding of
 *     the f32 product.
 *   - with MHLA_CPU_BF16_DOT=1 on a CPU with avx512_bf16, the avx512 path
 *     runs vdpbf16ps: a kernel that failed the check at start would
 *     otherwise fall back to the fmas unseen, and every check above pass.
 * Run once as is, once with MHLA_CPU_BF16_NO_DOT=1, and once with
 * MHLA_CPU_BF16_NO_AMX=1 MHLA_CPU_BF16_DOT=1.
 */
#include "cpu/isa.h"
#include "cpu/kernels.h"
#include "cpu/kernels_bd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_RNG_SEED 0x5eedbf16ull
#include "check.h"

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void rounding(void)
{
    CHECK(k_bd_round(1.0f) == 0x3f80, "1.0");
    CHECK(k_bd_round(from_bits(0x3f808000)) == 0x3f80, "a tie to even, down");
    CHECK(k_bd_round(from_bits(0x3f818000)) == 0x3f82, "a tie to even, up");
    CHECK(k_bd_round(ldexpf(1.0f, -56)) == 0x2380, "2^-56 is kept");
    CHECK(k_bd_round(ldexpf(1.99f, -57)) == 0, "below 2^-56 is +0");
    CHECK(k_bd_round(-ldexpf(1.0f, -100)) == 0, "a tiny negative is +0");
    CHECK(k_bd_round(from_bits(0x00000001)) == 0, "a denormal is +0");
    CHECK(k_bd_round(INFINITY) == 0x7f80 && k_bd_round(-INFINITY) == 0xff80, "infinities");
    CHECK((k_bd_round(NAN) & 0x7f80) == 0x7f80 && (k_bd_round(NAN) & 0x7f), "NaN");
    CHECK(k_bd_round(from_bits(0x7f7fffff)) == 0x7f80, "the largest float rounds to inf");
    float row[70];
    uint16_t out[96];
    for (int i = 0; i < 70; i++)
        row[i] = ldexpf((float)(rnd(2001) - 1000), rnd(140) - 100);
    row[3] = NAN;
    memset(out, 0xab, sizeof out);
    k_bd_round_row(row, 70, 96, out);
    for (int i = 0; i < 96; i++)
        CHECK(out[i] == (i < 70 ? k_bd_round(row[i]) : 0), "row value %d", i);
}

/* Arithmetics for the check: the definition, and wrong ones it must
 * refuse — all 32 elements of a step in one chain, the 16-lane order of a
 * vdpbf16ps (each lane the odd element of its pair first, the lanes summed
 * at the end), and the two chains added to the accumulator one at a time. */
static void chain_fn(const k_bd_rows *x, const uint16_t *w, int j0, int j1, float *y, int ldy,
                     int kind)
{
    int K = x->K, Kp = x->Kp;
    for (int t = 0; t < x->T; t++)
        for (int j = j0; j < j1; j++) {
            float acc = 0.0f, lane[16] = {0};
            for (int s = 0; s < Kp; s += 32) {
                float ch[2] = {0.0f, 0.0f}, one = 0.0f;
                for (int k = s; k < s + 32; k++) {
                    float a = mhla_f32_from_bf16(x->x[(size_t)t * Kp + k]);
                    float b = k < K ? mhla_f32_from_bf16(w[k_bd_packed_at(K, j, k)]) : 0.0f;
                    ch[k % 2] = fmaf(a, b, ch[k % 2]);
                    one = fmaf(a, b, one);
                    if (k % 2)
                        lane[(k - s) / 2] = fmaf(a, b, lane[(k - s) / 2]);
                }
                for (int k = s; k < s + 32 && kind == 2; k += 2) {
                    float a = mhla_f32_from_bf16(x->x[(size_t)t * Kp + k]);
                    float b = k < K ? mhla_f32_from_bf16(w[k_bd_packed_at(K, j, k)]) : 0.0f;
                    lane[(k - s) / 2] = fmaf(a, b, lane[(k - s) / 2]);
                }
                acc = kind == 0   ? acc + (ch[0] + ch[1])
                      : kind == 1 ? acc + one
                                  : (acc + ch[0]) + ch[1];
            }
            if (kind == 2) {
                for (int h = 8; h >= 1; h /= 2)
                    for (int l = 0; l < h; l++)
                        lane[l] += lane[l + h];
                acc = lane[0];
            }
            y[(size_t)t * ldy + j] = acc;
        }
}
#define CHAIN(name, kind)                                                                          \
    static void name(const k_bd_rows *x, const uint16_t *w, int j0, int j1, float *y, int ldy)     \
    {                                                                                              \
        chain_fn(x, w, j0, j1, y, ldy, kind);                                                      \
    }
CHAIN(defined, 0)
CHAIN(one_chain, 1)
CHAIN(lanes, 2)
CHAIN(added_apart, 3)

static void self_check(void)
{
    CHECK(k_bd_agrees(defined), "the check refuses the definition");
    CHECK(!k_bd_agrees(one_chain), "the check accepts one chain of a step's 32 elements");
    CHECK(!k_bd_agrees(lanes), "the check accepts 16 lanes summed at the end");
    CHECK(!k_bd_agrees(added_apart), "the check accepts the chains added one at a time");
}

/* Values from 2^-60 (rounded to 0) to 2^60, mostly near 1, a few infinite. */
static float value(void)
{
    int r = rnd(1000);
    if (r == 0)
        return rnd(2) ? INFINITY : -INFINITY;
    int e = r < 100 ? rnd(8) - 60 : r < 120 ? 50 + rnd(10) : rnd(30) - 15;
    return ldexpf((float)(rnd(2001) - 1000) / 1000.0f, e);
}

static void products(int T, int N, int K, tp_pool *pools[2])
{
    int Kp = k_bd_padded(K);
    float *x = malloc((size_t)T * K * sizeof *x), *wf = malloc((size_t)N * K * sizeof *wf);
    uint16_t *w = malloc((size_t)N * K * sizeof *w), *xb = malloc((size_t)T * Kp * sizeof *xb);
    float *ref = malloc((size_t)T * N * sizeof *ref), *y = malloc((size_t)T * N * sizeof *y);
    for (size_t i = 0; i < (size_t)T * K; i++)
        x[i] = value();
    for (size_t i = 0; i < (size_t)N * K; i++)
        wf[i] = value();
    /* row 0 of w cancels row 0 of x's sums step by step: the order shows */
    for (int k = 32; k < K; k++)
        wf[k] = -x[k - 32] * wf[k - 32] / (x[k] != 0 ? x[k] : 1);
    for (size_t i = 0; i < (size_t)N * K; i++)
        w[i] = k_bd_round(wf[i]);
    for (int t = 0; t < T; t++)
        k_bd_round_row(x + (size_t)t * K, K, Kp, xb + (size_t)t * Kp);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < N; j++)
            ref[(size_t)t * N + j] = k_bd_dot_ref(xb + (size_t)t * Kp, w + (size_t)j * K, K);
    char paths[64], err[200];
    snprintf(paths, sizeof paths, "%s", k_isa_runnable());
    uint16_t *wp = malloc(k_bd_packed_count(N, K) * sizeof *wp);
    k_bd_pack_bits(w, N, K, wp);
    k_matrix km = {NULL, wp, NULL, 1};
    for (char *p = strtok(paths, " "); p; p = strtok(NULL, " ")) {
        if (k_isa_select(p, err, sizeof err)) {
            CHECK(0, "select %s: %s", p, err);
            continue;
        }
        for (int th = 0; th < 2; th++) {
            memset(y, 0xff, (size_t)T * N * sizeof *y);
            k_linear(x, T, K, km, N, y, N, pools[th]);
            for (size_t i = 0; i < (size_t)T * N; i++)
                CHECK(memcmp(y + i, ref + i, 4) == 0 || (isnan(y[i]) && isnan(ref[i])),
                      "%s (%s), %d threads, [%d, %d] x %d rows, value %zu: %a, defined %a", p,
                      k_bd_kernel_name(), th + 1, N, K, T, i, y[i], ref[i]);
            for (int t = 0; t < T; t += 3) { /* one row alone */
                k_linear(x + (size_t)t * K, 1, K, km, N, y, N, pools[th]);
                for (int j = 0; j < N; j++)
                    CHECK(memcmp(y + j, ref + (size_t)t * N + j, 4) == 0 ||
                              (isnan(y[j]) && isnan(ref[(size_t)t * N + j])),
                          "%s, row %d alone, column %d: not the bits it has in the batch", p, t, j);
            }
        }
        printf("%s (%s): [%d, %d] x %d rows, the defined bits\n", p, k_bd_kernel_name(), N, K, T);
    }
    free(x);
    free(wf);
    free(w);
    free(wp);
    free(xb);
    free(ref);
    free(y);
}

/* Near 1, the product is within bf16's rounding of x and w of the f32 one. */
static void accuracy(void)
{
    enum { K = 512 };
    float x[K], w[K];
    uint16_t xb[K], wb[K];
    double exact = 0, mag = 0;
    for (int k = 0; k < K; k++) {
        x[k] = (float)(rnd(2001) - 1000) / 1000.0f;
        w[k] = (float)(rnd(2001) - 1000) / 1000.0f;
        xb[k] = k_bd_round(x[k]);
        wb[k] = k_bd_round(w[k]);
        exact += (double)x[k] * w[k];
        mag += fabs((double)x[k] * w[k]);
    }
    float got = k_bd_dot_ref(xb, wb, K);
    CHECK(fabs(got - exact) <= mag * (2.0 / 256 + 1e-6), "%g against %g", got, exact);
}

/* Asked for vdpbf16ps (MHLA_CPU_BF16_DOT=1) where the CPU has it, the avx512 path must run it. */
static void dot_taken(void)
{
    const char *want = getenv("MHLA_CPU_BF16_DOT"), *no = getenv("MHLA_CPU_BF16_NO_DOT");
    char err[200];
    /* the path's reason names the CPU's extras as the engine probed them */
    if (!want || want[0] != '1' || (no && no[0] == '1') || !strstr(k_isa_runnable(), "avx512") ||
        k_isa_select("avx512", err, sizeof err) || !strstr(k_isa_reason(), "avx512_bf16")) {
        printf("vdpbf16ps not asked for, or this CPU lacks avx512_bf16: not checked\n");
        return;
    }
    CHECK(strstr(k_bd_kernel_name(), "vdpbf16ps") != NULL,
          "this CPU has avx512_bf16 and MHLA_CPU_BF16_DOT=1 asks for vdpbf16ps, but the avx512 "
          "path runs %s: the vdpbf16ps kernel failed the check at start",
          k_bd_kernel_name());
    if (strstr(k_bd_kernel_name(), "vdpbf16ps"))
        printf("avx512 runs %s, as asked\n", k_bd_kernel_name());
}

/* argv[1] = 1: one thread only (under qemu-user, whose pthread_create can hang) */
int main(int argc, char **argv)
{
    rounding();
    self_check();
    accuracy();
    tp_pool *pools[2];
    char err[200];
    int one = argc > 1 && atoi(argv[1]) == 1;
    if (tp_create(1, &pools[0], err, sizeof err) ||
        (!one && tp_create(2, &pools[1], err, sizeof err))) {
        fprintf(stderr, "FAIL: thread pool: %s\n", err);
        return 1;
    }
    if (one)
        pools[1] = pools[0];
    products(1, 5, 64, pools);
    products(9, 7, 103, pools);
    products(37, 13, 1024, pools);
    products(130, 9, 96, pools);
    products(3, 17, 31, pools);
    /* whole panels and the tiles of 2 panels by 2 blocks of 16 rows */
    products(1, 40, 1024, pools);
    products(33, 48, 64, pools);
    products(70, 53, 288, pools);
    products(150, 35, 96, pools); /* past a block of 128 rows */
    dot_taken();
    tp_free(pools[0]);
    if (!one)
        tp_free(pools[1]);
    if (failures)
        fprintf(stderr, "%d failures\n", failures);
    else
        printf("ok\n");
    return failures != 0;
}
