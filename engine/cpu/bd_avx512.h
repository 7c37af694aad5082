/*
 * bd_avx512.h — bf16 dot products (kernels_bd.h) on AVX-512, three ways:
 *  - AMX-BF16 tiles from 2 rows of x: tdpbf16ps computes the definition's
 *    two chains and their sum per output;
 *  - AVX512-BF16's vdpbf16ps: a lane adds the product of its word's high
 *    halves, then of its low halves, so a word holding elements k (high)
 *    and k + 2 (low) runs two steps of one chain; the panel's pairs are
 *    regrouped so in registers (two loads, a shift and a blend a word) and
 *    x's rows so once a call;
 *  - fmas: a pair of a panel's 16 rows is one zmm, word l the pair of lane
 *    l, split into the odd element (the word's high half, masked) and the
 *    even one (shifted up) as f32.
 * An instruction is used only where CPUID reports it (and Linux grants the
 * tile state) and it gave the definition's bits on the check at start
 * (k_bd_agrees). Included by isa_avx512.c after q8_amx.h (its AMX setup) and
 * before kernels_body.h.
 */
#include "kernels_bd.h"

#include <cpuid.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    __m512 o, e; /* the odd and the even elements of the pairs, as f32 */
} bd512_pair;
static inline __attribute__((always_inline)) bd512_pair bd512_split(__m512i v)
{
    bd512_pair p = {_mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u))),
                    _mm512_castsi512_ps(_mm512_slli_epi32(v, 16))};
    return p;
}
/* 8 accumulators, 16 chains, 4 operands of w and 2 of x: 30 of the 32 zmm. A
 * single row goes against one panel at a time, so its weights are one stream
 * in address order: against 4 panels (4 streams), batch-1 decode of the 340M
 * shape on an AMD Zen 4 read its products' weights at 73-76 % of the
 * bandwidth read beside them, against one at 89-94 %, with either kernel
 * (bench/RESULTS.md, "One weight stream for a single row"); 2 chains still
 * compute several times faster than memory delivers. */
#define BD_TILE_T 4
#define BD_TILE_J 2
#define BD_TILE_J1 1
/* A single row prefetches its panel 4 KiB ahead: on an Intel Xeon batch-1
 * decode of the 340M shape went from 87-88 % to 99-103 % of bench_decode's
 * paired bandwidth reading with 2 KiB (1 and 4 KiB: 96-98 %, 4 panels at a
 * time); on an AMD Zen 4, one panel at a time, its products read 85-87 % with
 * 2 KiB and 92-94 % with 4 (bench/RESULTS.md, "One weight stream for a single
 * row") */
#ifndef BD_PREFETCH_BYTES
#define BD_PREFETCH_BYTES 4096
#endif
#define BD_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#define BD_FN bd_linear_fma
#define BD_TILE_FN bd_tile_fma
#define BD_PART_FN bd_part_fma
#define BD_ATTR
#define bd_op bd512_pair
#define BD_LOAD(p) bd512_split(_mm512_loadu_si512((const void *)(p)))
#include "kernels_bd_body.h"

/* x's rows for vdpbf16ps, in the calling thread's pack buffer: for each 4
 * elements k..k+3 the words (k << 16 | k+2) and (k+1 << 16 | k+3), steps of
 * the even chain and of the odd one, the first in the high half (the one the
 * instruction adds first). NULL where the buffer cannot be had. */
static const uint32_t *bd_dot_rows(const k_bd_rows *x)
{
    const size_t half = (size_t)x->Kp / 2;
    uint32_t *buf = (uint32_t *)k_x_pack_buffer((size_t)x->T * half);
    if (!buf)
        return NULL;
    /* the words above, 32 elements at a time (Kp is a multiple of K_BD_STEP) */
    const __m512i order =
        _mm512_set_epi16(29, 31, 28, 30, 25, 27, 24, 26, 21, 23, 20, 22, 17, 19, 16, 18, 13, 15, 12,
                         14, 9, 11, 8, 10, 5, 7, 4, 6, 1, 3, 0, 2);
    for (int t = 0; t < x->T; t++) {
        const uint16_t *r = x->x + (size_t)t * x->Kp;
        uint32_t *o = buf + (size_t)t * half;
        for (int k = 0; k < x->Kp; k += 32)
            _mm512_storeu_si512((void *)(o + k / 2),
                                _mm512_permutexvar_epi16(order, _mm512_loadu_si512(r + k)));
    }
    return buf;
}

#define BD_DOT_ATTR __attribute__((target("avx512bf16")))
#define BD_TILE_J1 1 /* one stream, as the fmas' */

/* A unit of two pairs of K (k, k+1 and k+2, k+3) for vdpbf16ps: the panel's
 * two rows regrouped into the even chain's words (k << 16 | k+2) and the odd
 * chain's, a shift and a blend each; x's two words broadcast. */
typedef struct {
    __m512i e, o;
} bd_dot_op;
static inline bd_dot_op bd_dot_load(const uint16_t *r)
{
    __m512i r0 = _mm512_loadu_si512((const void *)r);
    __m512i r1 = _mm512_loadu_si512((const void *)(r + 2 * K_BD_PANEL));
    return (bd_dot_op){_mm512_mask_blend_epi16(0x55555555u, _mm512_slli_epi32(r0, 16), r1),
                       _mm512_mask_blend_epi16(0x55555555u, r0, _mm512_srli_epi32(r1, 16))};
}
#define BD_XT uint32_t
#define BD_X_ROWS(x) bd_dot_rows(x)
#define BD_X_STRIDE(Kp) ((Kp) / 2)
#define BD_UNIT 2
#define bd_xop bd_dot_op
#define BD_X_LOAD(xrow, s, u)                                                                      \
    ((bd_dot_op){_mm512_set1_epi32((int)(xrow)[(s) / 2 + 2 * (u)]),                                \
                 _mm512_set1_epi32((int)(xrow)[(s) / 2 + 2 * (u) + 1])})
#define BD_MAC(ce, co, xv, wv)                                                                     \
    ((ce) = _mm512_dpbf16_ps((ce), (__m512bh)(xv).e, (__m512bh)(wv).e),                            \
     (co) = _mm512_dpbf16_ps((co), (__m512bh)(xv).o, (__m512bh)(wv).o))
#define bd_op bd_dot_op
#define BD_LOAD(p) bd_dot_load(p)
#define BD_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
/* Only a single row prefetches: on an AMD Zen 4 the first tile of each pass
 * prefetching too made batch 2-8 decode of the 340M shape 0.75-0.94x and a
 * 96-token prefill 0.86x (bench/RESULTS.md, "Side by side on an AMD EPYC,
 * Zen 4"); the fma kernels keep it */
#define BD_PREFETCH_TILES 0
#define BD_FALLBACK bd_linear_fma
#define BD_FN bd_linear_dot
#define BD_TILE_FN bd_tile_dot
#define BD_PART_FN bd_part_dot
#define BD_ATTR BD_DOT_ATTR
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

static int bd_env_set(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] == '1';
}

/* MHLA_CPU_BF16_NO_DOT=1 leaves both instructions unused even where the CPU
 * has them, MHLA_CPU_BF16_NO_AMX=1 the tiles only, and MHLA_CPU_BF16_DOT=1
 * takes vdpbf16ps where it is slower than the fmas, so that tests can run
 * every kernel on the same machine. */
static int bd_use_dot(void)
{
    static _Atomic int v = -1; /* set once; every thread finds the same answer */
    if (v < 0) {
        unsigned a = 0, b, c, d; /* cpuid 7.1 eax bit 5: AVX512_BF16 (the path checked zmm) */
        int has = __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 5) & 1);
        v = has && !bd_env_set("MHLA_CPU_BF16_NO_DOT") && k_bd_agrees(bd_linear_dot);
    }
    return v;
}

static int bd_use_amx(void)
{
#if KQ_HAVE_AMX
    static _Atomic int v = -1;
    if (v < 0)
        v = !bd_env_set("MHLA_CPU_BF16_NO_DOT") && !bd_env_set("MHLA_CPU_BF16_NO_AMX") &&
            bd_amx_ready() && k_bd_agrees(bd_linear_amx);
    return v;
#else
    return 0;
#endif
}

/* Which of vdpbf16ps and the fmas computes a product of `rows` rows faster on
 * this CPU, timed once in the thread's CPU time (both give the same bits): on
 * this project's Intel Xeon the fmas were (its vdpbf16ps issues at half the
 * rate of its FMAs), where AMD's Zen 4 issues it at the FMAs' rate. 1: the
 * instruction. */
static int bd_dot_faster(int rows)
{
    enum { K = 512, N = 4 * K_BD_PANEL, REPS = 8 };
    float *x = malloc(sizeof(float) * 4 * K), *wf = malloc(sizeof(float) * N * K), y[4 * N];
    uint16_t *w = malloc(k_bd_packed_count(N, K) * sizeof *w);
    k_bd_rows r = {0};
    if (x && wf) /* any values: the time does not depend on them */
        for (int i = 0; i < N * K; i++) {
            wf[i] = (float)(i % 5) - 2.0f;
            if (i < 4 * K)
                x[i] = (float)(i % 7) - 3.0f;
        }
    if (!x || !wf || !w || k_bd_rows_make(x, rows, K, NULL, 0, &r)) {
        free(x);
        free(wf);
        free(w);
        return 0;
    }
    k_bd_pack(wf, N, K, w);
    free(wf);
    double best[2] = {1e30, 1e30};
    for (int round = 0; round < 3; round++)
        for (int k = 0; k < 2; k++) {
            struct timespec a, b;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
            for (int i = 0; i < REPS; i++)
                (k ? bd_linear_dot : bd_linear_fma)(&r, w, 0, N, y, N);
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
            double dt = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
            best[k] = dt < best[k] ? dt : best[k];
        }
    k_bd_rows_free(&r);
    free(x);
    free(w);
    return best[1] < best[0];
}

/* The kernel for `rows` rows of x without the tiles: 0 fmas, 1 vdpbf16ps
 * (where the CPU has it, it gave the definition's bits, and it is faster or
 * MHLA_CPU_BF16_DOT=1 asks for it). */
static int bd_pick_dot(int rows)
{
    static _Atomic int pick[2] = {-1, -1}; /* a single row; a tile's 4 */
    int i = rows > 1;
    if (pick[i] < 0)
        pick[i] =
            bd_use_dot() && (bd_env_set("MHLA_CPU_BF16_DOT") || bd_dot_faster(i ? BD_TILE_T : 1));
    return pick[i];
}

static void bd_linear(const k_bd_rows *x, const uint16_t *w, int j0, int j1, float *y, int ldy)
{
#if KQ_HAVE_AMX
    if (x->T >= BD_AMX_MIN_T && bd_use_amx()) {
        bd_linear_amx(x, w, j0, j1, y, ldy);
        return;
    }
#endif
    (bd_pick_dot(x->T) ? bd_linear_dot : bd_linear_fma)(x, w, j0, j1, y, ldy);
}

/* The kernel of products of several rows, then of a single row (batch-1 decode) where it
 * differs */
static const char *bd_kernel(void)
{
    static const char *const name[2][2][2] = {{{"fma", "fma+vdpbf16ps"},
                                               {"vdpbf16ps+fma", "vdpbf16ps"}},
                                              {{"amx-bf16+fma", "amx-bf16+vdpbf16ps"},
                                               {"amx-bf16+fma", "amx-bf16+vdpbf16ps"}}};
    return name[bd_use_amx()][bd_pick_dot(2)][bd_pick_dot(1)];
}
