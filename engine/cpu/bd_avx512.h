/*
 * bd_avx512.h — bf16 dot products (kernels_bd.h) on AVX-512: with AMX-BF16,
 * tiles (tdpbf16ps computes the definition's two chains and its sum per
 * output); without it, fmas — a pair of a panel's 16 rows is one zmm, word
 * l the pair of lane l, split into the odd element (the word's high half,
 * masked) and the even one (shifted up) as f32. The tiles are used only
 * where CPUID reports AMX-BF16, Linux grants the tile state, and they gave
 * the definition's bits on the check at start (k_bd_agrees). Included by
 * isa_avx512.c after q8_amx.h (its AMX setup) and before kernels_body.h.
 */
#include "kernels_bd.h"

#include <cpuid.h>
#include <stdlib.h>

typedef struct {
    __m512 o, e; /* the odd and the even elements of the pairs, as f32 */
} bd512_pair;
static inline __attribute__((always_inline)) bd512_pair bd512_split(__m512i v)
{
    bd512_pair p = {_mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u))),
                    _mm512_castsi512_ps(_mm512_slli_epi32(v, 16))};
    return p;
}
/* 8 accumulators, 16 chains, 4 operands of w and 2 of x: 30 of the 32 zmm */
#define BD_TILE_T 4
#define BD_TILE_J 2
#define BD_FN bd_linear_fma
#define BD_TILE_FN bd_tile_fma
#define BD_PART_FN bd_part_fma
#define BD_ATTR
#define bd_op bd512_pair
#define BD_LOAD(p) bd512_split(_mm512_loadu_si512((const void *)(p)))
#include "kernels_bd_body.h"

#if KQ_HAVE_AMX

#define BD_AMX_ATTR __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,fma")))

/* From 2 rows of x the tiles are faster; a single row (batch-1 decode) runs
 * its fmas (bench_products, 2,816 x 1,024 in cache: 25.5 against 20.5
 * GFLOP/s; from memory the two are even). */
#ifndef BD_AMX_MIN_T
#define BD_AMX_MIN_T 2
#endif

/* Rows of x per pass over a task's panels (a multiple of 32): they stay in
 * L2 (128 rows of K = 2816 are 704 KiB) while each pair of panels is read
 * once for all of them. */
#ifndef BD_AMX_TOKEN_BLOCK
#define BD_AMX_TOKEN_BLOCK 128
#endif

/* Every tile 16 rows of 64 bytes: C 0-3 (16 x 16 f32), A 4-5 (16 rows of x,
 * a step of 32 bf16), B 6-7 (a panel's 16 pairs of a step). */
BD_AMX_ATTR static void bd_amx_begin(void)
{
    kq_amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) {
        c.rows[i] = 16;
        c.colsb[i] = 64;
    }
    _tile_loadconfig(&c);
}

/* 16 or 32 rows of x (xb, Kp apart) by 1 or 2 panels (wp, `panel` apart),
 * into out (ldo floats a row): C0 rows 0-15 of panel 0, C1 of panel 1, C2
 * and C3 the same for rows 16-31. */
BD_AMX_ATTR static void bd_amx_block(const uint16_t *xb, int Kp, const uint16_t *wp, size_t panel,
                                     int two_t, int two_p, float *out, size_t ldo)
{
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    const size_t xs = (size_t)Kp * 2;
    for (int s = 0; s < Kp; s += K_BD_STEP) {
        _tile_loadd(4, xb + s, xs);
        _tile_loadd(6, wp + (size_t)s * K_BD_PANEL, 64);
        _tile_dpbf16ps(0, 4, 6);
        if (two_p) {
            _tile_loadd(7, wp + panel + (size_t)s * K_BD_PANEL, 64);
            _tile_dpbf16ps(1, 4, 7);
        }
        if (two_t) {
            _tile_loadd(5, xb + (size_t)16 * Kp + s, xs);
            _tile_dpbf16ps(2, 5, 6);
            if (two_p)
                _tile_dpbf16ps(3, 5, 7);
        }
    }
    const size_t os = ldo * 4;
    _tile_stored(0, out, os);
    if (two_p)
        _tile_stored(1, out + 16, os);
    if (two_t) {
        _tile_stored(2, out + 16 * ldo, os);
        if (two_p)
            _tile_stored(3, out + 16 * ldo + 16, os);
    }
}

/* Columns [j0, j1) for every row: pairs of panels against blocks of 32 rows,
 * straight into y where the block is whole, through a buffer where rows or
 * columns are cut. */
BD_AMX_ATTR static void bd_linear_amx(const k_bd_rows *x, const uint16_t *w, int j0, int j1,
                                      float *y, int ldy)
{
    const int Kp = x->Kp, T = x->T, P = K_BD_PANEL;
    const size_t panel = (size_t)Kp * P;
    float tmp[32 * 32];
    bd_amx_begin();
    for (int b0 = 0; b0 < T; b0 += BD_AMX_TOKEN_BLOCK) {
        int b1 = b0 + BD_AMX_TOKEN_BLOCK < T ? b0 + BD_AMX_TOKEN_BLOCK : T;
        for (int p = j0 / P; p * P < j1; p += 2) {
            int c0 = j0 - p * P > 0 ? j0 - p * P : 0; /* the block's columns [c0, c1) */
            int c1 = j1 - p * P < 2 * P ? j1 - p * P : 2 * P;
            int two_p = c1 > P;
            for (int t = b0; t < b1; t += 32) {
                int rows = b1 - t < 32 ? b1 - t : 32, two_t = rows > 16;
                const uint16_t *xb = x->x + (size_t)t * Kp;
                float *yb = y + (size_t)t * ldy + (size_t)p * P;
                if (c0 == 0 && c1 == (two_p ? 2 * P : P) && rows == (two_t ? 32 : 16)) {
                    bd_amx_block(xb, Kp, w + p * panel, panel, two_t, two_p, yb, (size_t)ldy);
                    continue;
                }
                bd_amx_block(xb, Kp, w + p * panel, panel, two_t, two_p, tmp, 32);
                for (int r = 0; r < rows; r++)
                    memcpy(yb + (size_t)r * ldy + c0, tmp + r * 32 + c0,
                           (size_t)(c1 - c0) * sizeof(float));
            }
        }
    }
    _tile_release();
}

/* AMX-BF16: CPUID.(7,0):EDX bit 22, beside the tile state kq_amx_enable asks for. */
static int bd_amx_ready(void)
{
    unsigned a, b, c, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((d >> 22) & 1) && kq_amx_enable();
}
#endif

/* MHLA_CPU_BF16_NO_DOT=1 leaves the tiles unused even where the CPU has
 * them, so that tests can run the other kernel on the same machine. */
static int bd_use_amx(void)
{
#if KQ_HAVE_AMX
    static _Atomic int v = -1; /* set once; every thread finds the same answer */
    if (v < 0) {
        const char *off = getenv("MHLA_CPU_BF16_NO_DOT");
        v = !(off && off[0] == '1') && bd_amx_ready() && k_bd_agrees(bd_linear_amx);
    }
    return v;
#else
    return 0;
#endif
}

static void bd_linear(const k_bd_rows *x, const uint16_t *w, int j0, int j1, float *y, int ldy)
{
#if KQ_HAVE_AMX
    if (x->T >= BD_AMX_MIN_T && bd_use_amx()) {
        bd_linear_amx(x, w, j0, j1, y, ldy);
        return;
    }
#endif
    bd_linear_fma(x, w, j0, j1, y, ldy);
}

static const char *bd_kernel(void) { return bd_use_amx() ? "amx-bf16" : "fma"; }
