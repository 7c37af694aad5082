/*
 * probe_bf16_dot — what this CPU's vdpbf16ps computes, lane by lane, against candidate
 * definitions (docs/architecture.md, "bf16 dot products: the tiles' arithmetic"):
 *   A  acc = ftz(fma(daz(a1), daz(b1), daz(acc))), then the same with the even pair
 *      (the odd element first; flush of what fmaf rounds to)
 *   B  as A, the even element first
 *   C  the pair summed exactly, then one rounding with the accumulator
 *   D  as A with each product flushed before the addition
 *   E  as A without DAZ on the accumulator
 *   F  as A without the flush of the intermediate sum
 *   G  plain fmas, odd element first, no flushes
 * over random lanes of normal values and of an edge mix (denormals, infinities, NaN, huge
 * and tiny values, sums cancelled to a few bits), a few single cases that tell when the
 * flush is decided, and chains on the inputs kernels_bd.h allows (zero or |v| >= 2^-56),
 * where G must equal the instruction. NaN equals NaN whatever its payload.
 * usage: probe_bf16_dot [LANES_IN_MILLIONS]   (exit 77 without AVX512_BF16)
 */
#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe_bits.h"

static float flush(float x) { return x != 0 && fabsf(x) < 0x1p-126f ? copysignf(0.0f, x) : x; }

typedef float (*lane_fn)(float acc, const float a[2], const float b[2]);
static float em_a(float c, const float a[2], const float b[2])
{
    float r = flush(fmaf(flush(a[1]), flush(b[1]), flush(c)));
    return flush(fmaf(flush(a[0]), flush(b[0]), r));
}
static float em_b(float c, const float a[2], const float b[2])
{
    float r = flush(fmaf(flush(a[0]), flush(b[0]), flush(c)));
    return flush(fmaf(flush(a[1]), flush(b[1]), r));
}
static float em_c(float c, const float a[2], const float b[2])
{
    double p = (double)flush(a[0]) * flush(b[0]) + (double)flush(a[1]) * flush(b[1]);
    return flush((float)((double)flush(c) + p));
}
static float em_d(float c, const float a[2], const float b[2])
{
    float r = flush(flush(c) + flush(flush(a[1]) * flush(b[1])));
    return flush(r + flush(flush(a[0]) * flush(b[0])));
}
static float em_e(float c, const float a[2], const float b[2])
{
    float r = flush(fmaf(flush(a[1]), flush(b[1]), c));
    return flush(fmaf(flush(a[0]), flush(b[0]), r));
}
static float em_f(float c, const float a[2], const float b[2])
{
    float r = fmaf(flush(a[1]), flush(b[1]), flush(c));
    return flush(fmaf(flush(a[0]), flush(b[0]), r));
}
static float em_g(float c, const float a[2], const float b[2])
{
    return fmaf(a[0], b[0], fmaf(a[1], b[1], c));
}
static const lane_fn EM[7] = {em_a, em_b, em_c, em_d, em_e, em_f, em_g};

static uint16_t value(int edge)
{
    uint16_t s = (uint16_t)((next() & 1) << 15);
    int r = (int)(next() % 100);
    if (!edge || r < 60)
        return (uint16_t)(s | (127 + (int)(next() % 9) - 4) << 7 | (next() & 127));
    if (r < 70)
        return (uint16_t)(s | (next() & 127)); /* a denormal or zero */
    if (r < 75)
        return (uint16_t)(s | 0x7f80);
    if (r < 78)
        return (uint16_t)(s | 0x7fc0 | (next() & 63));
    if (r < 88)
        return (uint16_t)(s | (1 + (int)(next() % 20)) << 7 | (next() & 127));
    if (r < 95)
        return (uint16_t)(s | (240 + (int)(next() % 14)) << 7 | (next() & 127));
    return (uint16_t)next();
}

static float acc_value(int edge)
{
    uint32_t s = (uint32_t)(next() & 1) << 31;
    int r = (int)(next() % 100);
    if (!edge || r < 50)
        return f_of(s | (uint32_t)(127 + (int)(next() % 9) - 4) << 23 | (next() & 0x7fffff));
    if (r < 65)
        return f_of(s | (next() & 0x7fffff));
    if (r < 80)
        return f_of(s | (uint32_t)(1 + next() % 10) << 23 | (next() & 0x7fffff));
    return r < 85 ? f_of(s | 0x7f800000) : f_of((uint32_t)next());
}

__attribute__((target("avx512f,avx512bf16"))) static void dot(float c[16], const uint16_t a[32],
                                                              const uint16_t b[32])
{
    __m512 r = _mm512_dpbf16_ps(_mm512_loadu_ps(c), (__m512bh)_mm512_loadu_si512(a),
                                (__m512bh)_mm512_loadu_si512(b));
    _mm512_storeu_ps(c, r);
}

static int same(float x, float y) { return u_of(x) == u_of(y) || (isnan(x) && isnan(y)); }

/* n lanes of random inputs (edge: the edge mix), a quarter with the accumulator set to
 * cancel the odd product; mismatches of each candidate */
static void sweep(long n, int edge)
{
    long bad[7] = {0}, lanes = 0;
    for (long it = 0; it < n / 16; it++) {
        uint16_t a[32], b[32];
        float c[16], out[16];
        for (int i = 0; i < 32; i++) {
            a[i] = value(edge);
            b[i] = value(edge);
        }
        for (int i = 0; i < 16; i++) {
            c[i] = acc_value(edge);
            float p = bf(a[2 * i + 1]) * bf(b[2 * i + 1]);
            if (next() % 4 == 0 && isfinite(p))
                c[i] = -p * (1 + (float)((int)(next() % 5) - 2) * 0x1p-20f);
        }
        memcpy(out, c, sizeof out);
        dot(out, a, b);
        for (int i = 0; i < 16; i++, lanes++) {
            float x[2] = {bf(a[2 * i]), bf(a[2 * i + 1])}, y[2] = {bf(b[2 * i]), bf(b[2 * i + 1])};
            for (int e = 0; e < 7; e++)
                bad[e] += !same(EM[e](c[i], x, y), out[i]);
        }
    }
    printf("%s inputs, %ld lanes: mismatches", edge ? "edge-mix" : "normal", lanes);
    for (int e = 0; e < 7; e++)
        printf(" %c %ld", 'A' + e, bad[e]);
    printf("\n");
}

/* acc + a1 b1 with the even pair zero */
static float one(float acc, float a1, float b1)
{
    uint16_t a[32] = {0}, b[32] = {0};
    float c[16] = {acc};
    a[1] = (uint16_t)(u_of(a1) >> 16);
    b[1] = (uint16_t)(u_of(b1) >> 16);
    dot(c, a, b);
    return c[0];
}

/* chains of 1 to 8 steps from +0 on values zero or of magnitude 2^-56 to 2^65 */
static void allowed(long n)
{
    long bad = 0, lanes = 0;
    for (long it = 0; it < n / 16; it++) {
        float c[16] = {0}, ref[16] = {0};
        int steps = 1 + (int)(next() % 8), sc = (int)(next() % 40) - 20;
        for (int s = 0; s < steps; s++) {
            uint16_t a[32], b[32];
            for (int i = 0; i < 32; i++)
                for (int h = 0; h < 2; h++) {
                    int r = (int)(next() % 100);
                    int e = r < 3    ? 0
                            : r < 40 ? 71 + (int)(next() % 6)
                                     : 127 + sc + (int)(next() % 7) - 3;
                    uint16_t v = e ? (uint16_t)((next() & 1) << 15 | e << 7 | (next() & 127)) : 0;
                    (h ? b : a)[i] = v;
                }
            dot(c, a, b);
            for (int i = 0; i < 16; i++) {
                float x[2] = {bf(a[2 * i]), bf(a[2 * i + 1])},
                      y[2] = {bf(b[2 * i]), bf(b[2 * i + 1])};
                ref[i] = em_g(ref[i], x, y);
            }
        }
        for (int i = 0; i < 16; i++, lanes++)
            bad += !same(c[i], ref[i]);
    }
    printf("allowed inputs (zero or >= 2^-56), chains from +0, %ld lanes: %ld differ from plain "
           "fmas\n",
           lanes, bad);
}

int main(int argc, char **argv)
{
    unsigned a = 0, b, c, d;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d) || !((a >> 5) & 1)) {
        printf("SKIP: this CPU has no AVX512_BF16\n");
        return 77;
    }
    long n = (argc > 1 && atol(argv[1]) > 0 ? atol(argv[1]) : 4) * 1000000L;
    sweep(n / 2, 0);
    sweep(n, 1);
    /* flushed after rounding with an unbounded exponent: 0x1p-126, then 0x0p+0 (A, whose fmaf
     * rounds to the denormal grid first, gives 0x1p-126 for both: the random lanes never hit
     * this) */
    printf("2^-126 - 2^-151 -> %a; 2^-126 - 2^-150 -> %a\n", one(0x1p-126f, 0x1p-75f, -0x1p-76f),
           one(0x1p-126f, 0x1p-75f, -0x1p-75f));
    allowed(n);
    return 0;
}
