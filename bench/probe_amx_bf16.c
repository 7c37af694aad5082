/*
 * probe_amx_bf16 — what this CPU's AMX tdpbf16ps computes for one output, against candidate
 * definitions (docs/architecture.md, "bf16 dot products: the tiles' arithmetic"). One
 * instruction takes a step of 32 bf16 (16 pairs) of a row of A and a column of B into C:
 *   E  the 16 even products summed in one fma chain from +0, in order, the 16 odd ones in
 *      another; C + (e + o) (the definition of kernels_bd.h)
 *   F  as E, the chains added to C one at a time: (C + e) + o
 *   G  one fma chain over all 32 products in order, from C
 *   H  the 32 products summed exactly, then added to C with one rounding
 *   I  the even and odd sums exact, each rounded, then (C + e) + o
 * on single outputs (1 x 1 tiles) of random values whose products span 2^-2E..2^2E, on
 * whole 16 x 16 tiles of the values kernels_bd.h allows (zero or 2^-56 <= |v| <= 2^17),
 * and on chains of 4 instructions into one C. Exact sums are formed in double, so the
 * exponent range of the single outputs is kept where double holds them exactly.
 * usage: probe_amx_bf16 [OUTPUTS_IN_THOUSANDS] [E]   (exit 77 without AMX-BF16)
 */
#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "probe_bits.h"

#define AMX __attribute__((target("amx-tile,amx-bf16")))

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_cfg;

static uint16_t bf_of(float x) { return (uint16_t)(u_of(x) >> 16); }
static int same(float a, float b) { return memcmp(&a, &b, 4) == 0 || (isnan(a) && isnan(b)); }

/* a bf16 with exponent in [-e, e], 7 random mantissa bits, random sign; zero one time in 8 */
static uint16_t value(int e)
{
    if (next() % 8 == 0)
        return 0;
    int ex = (int)(next() % (uint64_t)(2 * e + 1)) - e;
    return bf_of(ldexpf(1.0f + (float)(next() % 128) / 128.0f, ex) * (next() & 1 ? -1.0f : 1.0f));
}
/* kernels_bd.h's inputs: zero, or exponent field 71..78 (2^-56..) or 112..143 (..2^17) */
static uint16_t allowed(void)
{
    uint64_t r = next();
    if (r % 16 == 0)
        return 0;
    int e = r % 4 == 0 ? 71 + (int)((r >> 8) % 8) : 112 + (int)((r >> 8) % 32);
    return (uint16_t)((r >> 20 & 1) << 15 | (uint32_t)e << 7 | ((r >> 24) & 0x7fu));
}

/* A: rows x 64 bytes, B: 16 rows (pairs) x cols * 4 bytes, C: rows x cols floats; steps
 * instructions, A and B advancing a step each */
AMX static void tile_run(const uint16_t *a, const uint16_t *b, float *c, int rows, int cols,
                         int steps)
{
    tile_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    cfg.rows[0] = (uint8_t)rows;
    cfg.colsb[0] = (uint16_t)(cols * 4);
    cfg.rows[1] = (uint8_t)rows;
    cfg.colsb[1] = 64;
    cfg.rows[2] = 16;
    cfg.colsb[2] = (uint16_t)(cols * 4);
    _tile_loadconfig(&cfg);
    _tile_loadd(0, c, cols * 4);
    for (int s = 0; s < steps; s++) {
        _tile_loadd(1, a + 32 * s, 64 * steps);
        _tile_loadd(2, b + (size_t)32 * cols * s, cols * 4);
        _tile_dpbf16ps(0, 1, 2);
    }
    _tile_stored(0, c, cols * 4);
    _tile_release();
}

enum { E, F, G, H, I, N_MODELS };
static const char *const NAME[N_MODELS] = {"E  two chains (even, odd), C + (e + o)",
                                           "F  two chains, (C + e) + o",
                                           "G  one chain of 32 from C",
                                           "H  exact sum, one rounding with C",
                                           "I  exact even and odd sums, (C + e) + o"};

/* one step of the candidates: a[k], b[k] for k < 32, onto c */
static void models(const uint16_t *a, const uint16_t *b, float c, float out[N_MODELS])
{
    float ch[2] = {0, 0}, one = c;
    double ex[2] = {0, 0};
    for (int k = 0; k < 32; k++) {
        float p = bf(a[k]) * bf(b[k]); /* exact: 8 x 8 significant bits */
        ch[k % 2] = fmaf(bf(a[k]), bf(b[k]), ch[k % 2]);
        one = fmaf(bf(a[k]), bf(b[k]), one);
        ex[k % 2] += (double)p;
    }
    out[E] = c + (ch[0] + ch[1]);
    out[F] = (c + ch[0]) + ch[1];
    out[G] = one;
    out[H] = (float)((double)c + ex[0] + ex[1]);
    out[I] = ((float)ex[0] + c) + (float)ex[1];
}

static void report(const char *what, const long bad[N_MODELS], long n)
{
    printf("%s, %ld outputs:\n", what, n);
    for (int m = 0; m < N_MODELS; m++)
        printf("  %-42s %ld differ (%.2f%%)\n", NAME[m], bad[m], 100.0 * bad[m] / (n ? n : 1));
}

int main(int argc, char **argv)
{
    unsigned a0, b0, c0, d0 = 0;
    if (!__get_cpuid_count(7, 0, &a0, &b0, &c0, &d0) || !((d0 >> 22) & 1) ||
        syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) != 0) {
        printf("SKIP: no AMX-BF16 here (CPUID, or the OS refused the tile state)\n");
        return 77;
    }
    long n = (argc > 1 ? atol(argv[1]) : 100) * 1000;
    int e = argc > 2 ? atoi(argv[2]) : 6;
    if (n <= 0 || e < 1 || e > 12) {
        fprintf(stderr, "usage: probe_amx_bf16 [OUTPUTS_IN_THOUSANDS > 0] [E in 1..12]\n");
        return 2;
    }
    long bad[N_MODELS] = {0};
    float m[N_MODELS];
    uint16_t a[16 * 128], b[16 * 2 * 16 * 4];
    for (long i = 0; i < n; i++) { /* single outputs */
        int pairs = 1 + (int)(next() % 16);
        memset(a, 0, 64);
        memset(b, 0, 64);
        for (int k = 0; k < 2 * pairs; k++) {
            a[k] = value(e);
            b[k] = value(e);
        }
        float c =
            next() % 3 ? ldexpf((float)(next() % (1u << 24)), (int)(next() % 9) - 4 - 24) : 0.0f;
        float got = c;
        /* B: 16 rows of one pair: the single column's elements 2r, 2r+1 */
        tile_run(a, b, &got, 1, 1, 1);
        models(a, b, c, m);
        for (int k = 0; k < N_MODELS; k++)
            bad[k] += !same(got, m[k]);
    }
    report("single outputs, random values", bad, n);

    memset(bad, 0, sizeof bad);
    long tiles = n / 256 + 1, outs = 0;
    static float cc[16 * 16];
    for (long i = 0; i < tiles; i++) { /* whole tiles, 4 steps into one C */
        for (int k = 0; k < 16 * 128; k++)
            a[k] = allowed();
        for (size_t k = 0; k < sizeof b / sizeof *b; k++)
            b[k] = allowed();
        memset(cc, 0, sizeof cc);
        tile_run(a, b, cc, 16, 16, 4);
        for (int r = 0; r < 16; r++)
            for (int col = 0; col < 16; col++, outs++) {
                float acc[N_MODELS] = {0};
                for (int s = 0; s < 4; s++) {
                    uint16_t ak[32], bk[32];
                    for (int k = 0; k < 32; k++) {
                        ak[k] = a[r * 128 + 32 * s + k];
                        bk[k] = b[(size_t)(16 * s + k / 2) * 32 + 2 * col + k % 2];
                    }
                    for (int md = 0; md < N_MODELS; md++) {
                        models(ak, bk, acc[md], m);
                        acc[md] = m[md];
                    }
                }
                for (int md = 0; md < N_MODELS; md++)
                    bad[md] += !same(cc[r * 16 + col], acc[md]);
            }
    }
    report("16 x 16 tiles of kernels_bd.h's values, 4 steps into one C", bad, outs);
    return bad[E] != 0;
}
