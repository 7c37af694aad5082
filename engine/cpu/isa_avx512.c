/*
 * isa_avx512.c — the kernels on AVX-512 (F, BW, VL): one 16-lane vector is
 * one zmm register. Compiled with -mavx512f -mavx512bw -mavx512vl -mfma.
 */
#include "isa.h"

#include <immintrin.h>
#include <stdint.h>

typedef __m512 vec16;
#define V_ZERO() _mm512_setzero_ps()
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_LOAD_TAIL(p, n) _mm512_maskz_loadu_ps((__mmask16)((1u << (n)) - 1u), (p))
#define V_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define V_SET1(s) _mm512_set1_ps(s)
#define V_LOAD_BF16(p)                                                                             \
    _mm512_castsi512_ps(                                                                           \
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define V_LOAD_BF16_TAIL(p, n)                                                                     \
    _mm512_castsi512_ps(_mm512_slli_epi32(                                                         \
        _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16((__mmask16)((1u << (n)) - 1u), (p))), 16))
#define V_STORE(p, v) _mm512_storeu_ps((p), (v))
#define V_STORE_TAIL(p, v, n) _mm512_mask_storeu_ps((p), (__mmask16)((1u << (n)) - 1u), (v))

static inline float v_reduce(vec16 v)
{
    __m256 lo = _mm512_castps512_ps256(v);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    __m256 s8 = _mm256_add_ps(lo, hi);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
}

/* The 16 accumulators of a 4 x 4 tile reduced together: each stage adds,
 * for every accumulator at once, the same lane pairs as v_reduce (i + i+8,
 * then i + i+4, i + i+2, i + i+1, the lower lane first), gathering the
 * partial sums of several accumulators in one register by shuffles. Lane
 * 4q + s of the last vector holds accumulator q + 4s, i.e. row s, column q. */
static inline __attribute__((always_inline)) void tile_store_4x4(vec16 acc[4][4], float *y, int ldy)
{
    __m512 c[8], d[4], e[2];
    for (int m = 0; m < 8; m++) {
        __m512 a = acc[(2 * m) / 4][(2 * m) % 4], b = acc[(2 * m + 1) / 4][(2 * m + 1) % 4];
        c[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
    }
    for (int p = 0; p < 4; p++)
        d[p] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * p], c[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(c[2 * p], c[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int r = 0; r < 2; r++)
        e[r] = _mm512_add_ps(_mm512_shuffle_ps(d[2 * r], d[2 * r + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(d[2 * r], d[2 * r + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 f = _mm512_add_ps(_mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(3, 1, 3, 1)));
    /* lane t*4 + j gets lane 4j + t */
    const __m512i to_rows = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    __m512 g = _mm512_permutexvar_ps(to_rows, f);
    _mm_storeu_ps(y, _mm512_castps512_ps128(g));
    _mm_storeu_ps(y + ldy, _mm512_extractf32x4_ps(g, 1));
    _mm_storeu_ps(y + 2 * (size_t)ldy, _mm512_extractf32x4_ps(g, 2));
    _mm_storeu_ps(y + 3 * (size_t)ldy, _mm512_extractf32x4_ps(g, 3));
}
#define KB_TILE_STORE(acc, y, ldy) tile_store_4x4((acc), (y), (ldy))

/* The 4 x 4 batch tile: kb_tile's loop (the same products in the same
 * order), with the prefetch of the next rows of f32 weights shared out among
 * the first F32_PF_TILES tiles of x against the rows in use.
 * kb_linear_tiled passes them pf = the distance << 16 | the tile's index u
 * << 8 | the count n of tiles that prefetch, and tile u prefetches the lines
 * L of each next row with L % n == u. At 16 rows of x a step's f32 weights
 * (1.36 GB on the 340M shape) take about as long to stream as their
 * products take to compute, and the first tile of x issuing all the
 * prefetches (the next rows' 256 lines in a quarter of the time the rows are
 * in use) streamed them slower: shared by 2 tiles, batch-16 decode measured
 * ~10 % faster (bench/RESULTS.md, "AVX-512 path, f32 at 16 rows"). bf16
 * tiles prefetch as before: the first tile of x, every line. */
#ifndef F32_PF_TILES
#define F32_PF_TILES 2
#endif
#ifndef F32_PF_HINT
#define F32_PF_HINT _MM_HINT_T0
#endif
/* bf16 rows are prefetched into L2: against L1, batch 4-8 decode of the 340M shape ran
 * 1.10-1.29x faster and prefill 1.03-1.10x; f32 rows stayed faster into L1 (bench/RESULTS.md,
 * "The first tile of a pass prefetches") */
#ifndef BF16_PF_HINT
#define BF16_PF_HINT _MM_HINT_T1
#endif
static inline __attribute__((always_inline)) void tile_4x4(const float *x, const float *xt,
                                                           int packed, int K, const float *wf,
                                                           const uint16_t *wh, float *y, int ldy,
                                                           int bf16, size_t pf)
{
    size_t pfd = pf >> 16;
    int nxt = (int)(pf >> 8) & 255, n = (int)pf & 255;
    if (bf16 && nxt)
        pfd = 0;
    vec16 acc[4][4];
    for (int t = 0; t < 4; t++)
        for (int j = 0; j < 4; j++)
            acc[t][j] = V_ZERO();
    int i = 0;
    for (; i + 16 <= K; i += 16) {
        if (pfd && bf16 && (i & 16) == 0) /* a line holds 32 bf16 */
            for (int j = 0; j < 4; j++)
                _mm_prefetch((const char *)(wh + (size_t)j * K + i + pfd), BF16_PF_HINT);
        else if (pfd && !bf16 && i >> 4 == nxt) {
            nxt += n;
            for (int j = 0; j < 4; j++)
                _mm_prefetch((const char *)(wf + (size_t)j * K + i + pfd), F32_PF_HINT);
        }
        vec16 xv[4], wv[4];
        for (int t = 0; t < 4; t++)
            xv[t] = packed ? _mm512_load_ps(xt + (size_t)4 * i + 16 * t)
                           : V_LOAD(x + (size_t)t * K + i);
        for (int j = 0; j < 4; j++)
            wv[j] = bf16 ? V_LOAD_BF16(wh + (size_t)j * K + i) : V_LOAD(wf + (size_t)j * K + i);
        for (int t = 0; t < 4; t++)
            for (int j = 0; j < 4; j++)
                acc[t][j] = V_FMA(xv[t], wv[j], acc[t][j]);
    }
    if (i < K) {
        int r = K - i;
        vec16 xv[4], wv[4];
        for (int t = 0; t < 4; t++)
            xv[t] = packed ? _mm512_load_ps(xt + (size_t)4 * i + 16 * t)
                           : V_LOAD_TAIL(x + (size_t)t * K + i, r);
        for (int j = 0; j < 4; j++)
            wv[j] = bf16 ? V_LOAD_BF16_TAIL(wh + (size_t)j * K + i, r)
                         : V_LOAD_TAIL(wf + (size_t)j * K + i, r);
        for (int t = 0; t < 4; t++)
            for (int j = 0; j < 4; j++)
                acc[t][j] = V_FMA(xv[t], wv[j], acc[t][j]);
    }
    tile_store_4x4(acc, y, ldy);
}
#define KB_TILE_HALVES(x, xp, K, w, y, ldy, bf16, M, MJ, pf)                                       \
    ((M) == 4 && (MJ) == 4                                                                         \
         ? ((xp) ? tile_4x4((x), (xp), 1, (K), (w).f, (w).h, (y), (ldy), (bf16), (pf))             \
                 : tile_4x4((x), NULL, 0, (K), (w).f, (w).h, (y), (ldy), (bf16), (pf)),            \
            1)                                                                                     \
         : 0)

/* The tiles' rows of x packed in the order tile_4x4 reads them: per step of
 * 16 elements, the tile's 4 rows in turn, zero past K. Read in place, the
 * rows lie K floats apart (a multiple of 4 KiB at K = 1,024); packed, the
 * loads come from one stream in order (measured: bench/RESULTS.md,
 * 2026-12-02, seventh session). Short tiles (2 or 3 rows) read x in place:
 * the kernel that takes them is kernels_body.h's own. */
static inline size_t round16(int K) { return ((size_t)K + 15) & ~(size_t)15; }
/* Elements of K a stretch of the panel takes (a multiple of 16). Whole rows of f32 w at
 * K = 2,816 (the MLP's down projection) are 44 KiB for a tile's 4, and with the tile's rows
 * of x they left the 48 KiB L1 for every tile: that shape ran at 0.53 of OpenBLAS's sgemm
 * where K = 1,024 ran at 0.83 (one thread, bench/RESULTS.md, 2026-12-07). A stretch of
 * 4 rows of w (16 KiB) stays in L1 while every tile of the block takes it: 0.69 there.
 * Stretches of 512 ran the same at K = 2,816 and slowed K = 1,024 (0.79), which whole rows
 * still take. */
#ifndef PANEL_KB
#define PANEL_KB 1024
#endif
/* a tile's 16 sums carried between stretches of K (panel), before the packed rows; before
 * them, a stretch of 4 rows of bf16 w widened (4 * PANEL_KB floats) */
#define PANEL_SUMS_FLOATS (16 * 16)
static const float *x_pack(const float *x, int T, int K)
{
    size_t Kp = round16(K);
    int tiles = (T + 3) / 4;
    size_t before = (size_t)4 * PANEL_KB + (size_t)tiles * PANEL_SUMS_FLOATS;
    float *buf = k_x_pack_buffer(before + (size_t)tiles * 4 * Kp);
    if (!buf)
        return NULL;
    buf += before;
    for (int u = 0; u < tiles; u++)
        for (int k = 0; k < K; k += 16) {
            __mmask16 m = K - k >= 16 ? 0xffff : (__mmask16)((1u << (K - k)) - 1);
            for (int t = 0; t < 4 && 4 * u + t < T; t++)
                _mm512_store_ps(buf + (size_t)u * 4 * Kp + (size_t)4 * k + 16 * t,
                                _mm512_maskz_loadu_ps(m, x + (size_t)(4 * u + t) * K + k));
        }
    return buf;
}
#define KB_X_PACK(x, T, K) x_pack((x), (T), (K))
#define KB_X_PACKED(xp, t, K) ((xp) + (size_t)((t) / 4) * 4 * round16(K))
#define KB_TILE_PF_SHARE(M, MJ) ((M) == 4 && (MJ) == 4 ? F32_PF_TILES : 0)

/* Elements [k0, k1) of 4 rows of bf16 w widened into wide (row j at j * PANEL_KB), zeros
 * past K; the next rows' stretch prefetched pf on */
static inline __attribute__((always_inline)) void panel_widen(const uint16_t *wh, int K, int k0,
                                                              int k1, size_t pf, float *wide)
{
    for (int j = 0; j < 4; j++)
        for (int i = k0; i < k1; i += 16) {
            if (pf && (i & 16) == 0) /* a line holds 32 bf16 */
                _mm_prefetch((const char *)(wh + (size_t)j * K + i + pf), BF16_PF_HINT);
            _mm512_store_ps(wide + (size_t)j * PANEL_KB + (i - k0),
                            k1 - i >= 16 ? V_LOAD_BF16(wh + (size_t)j * K + i)
                                         : V_LOAD_BF16_TAIL(wh + (size_t)j * K + i, k1 - i));
        }
}

/* One tile (packed rows xt) over [k0, k1) against 4 rows of w: f32 rows wf (K apart) or
 * the widened stretch (wf NULL); sums from su (none at k0 == 0), back into su, or at K's end
 * reduced into y. */
static inline __attribute__((always_inline)) void panel_tile(const float *xt, const float *wf,
                                                             const float *wide, int K, int k0,
                                                             int k1, __m512 *su, float *y, int ldy)
{
    const float *wr = wf ? wf + k0 : wide; /* row j of the stretch at wr + j * ws */
    size_t ws = wf ? (size_t)K : PANEL_KB;
    vec16 acc[4][4];
    for (int t = 0; t < 4; t++)
        for (int j = 0; j < 4; j++)
            acc[t][j] = k0 == 0 ? V_ZERO() : su[t * 4 + j];
    for (int i = k0; i < k1; i += 16) {
        vec16 xv[4], wv[4];
        for (int t = 0; t < 4; t++)
            xv[t] = _mm512_load_ps(xt + (size_t)4 * i + 16 * t);
        /* K's tail: x packed with zeros, w loaded (or widened) with them */
        for (int j = 0; j < 4; j++)
            wv[j] = wf && k1 - i < 16 ? V_LOAD_TAIL(wf + (size_t)j * K + i, k1 - i)
                                      : V_LOAD(wr + (size_t)j * ws + (i - k0));
        for (int t = 0; t < 4; t++)
            for (int j = 0; j < 4; j++)
                acc[t][j] = V_FMA(xv[t], wv[j], acc[t][j]);
    }
    if (k1 == K)
        tile_store_4x4(acc, y, ldy);
    else
        for (int t = 0; t < 4; t++)
            for (int j = 0; j < 4; j++)
                su[t * 4 + j] = acc[t][j];
}

/* Whole tiles of a packed block of x (T a multiple of 4) against 4 rows of w, PANEL_KB
 * elements of K at a time, each tile's 16 sums carried in the pack buffer (x_pack) from one
 * stretch to the next: every lane's chain of products in tile_4x4's order, so the same
 * bits. f32 rows are read in place, the first tile of each stretch prefetching the next
 * rows' stretch (pf on); bf16 rows are widened once a stretch into the pack buffer (exact;
 * zeros past K, as tile_4x4's tail loads give), prefetching the next rows' as they go. */
static inline __attribute__((always_inline)) void panel(const float *xp, int T, int K,
                                                        const float *wf, const uint16_t *wh,
                                                        float *y, int ldy, size_t pf)
{
    size_t Kp = round16(K);
    int tiles = T / 4;
    __m512 *sums = (__m512 *)(xp - (size_t)tiles * PANEL_SUMS_FLOATS);
    float *wide = (float *)sums - (size_t)4 * PANEL_KB;
    for (int k0 = 0; k0 < K; k0 += PANEL_KB) {
        int k1 = K - k0 > PANEL_KB ? k0 + PANEL_KB : K;
        if (!wf)
            panel_widen(wh, K, k0, k1, pf, wide);
        else if (pf)
            for (int j = 0; j < 4; j++)
                for (int i = k0; i < k1; i += 16)
                    _mm_prefetch((const char *)(wf + (size_t)j * K + i + pf), F32_PF_HINT);
        for (int u = 0; u < tiles; u++)
            panel_tile(xp + (size_t)u * 4 * Kp, wf, wide, K, k0, k1, sums + (size_t)u * 16,
                       y + (size_t)u * 4 * ldy, ldy);
    }
}
static __attribute__((noinline)) void panel_f32(const float *xp, int T, int K, const float *wf,
                                                float *y, int ldy, size_t pf)
{
    panel(xp, T, K, wf, NULL, y, ldy, pf);
}
static __attribute__((noinline)) void panel_bf16(const float *xp, int T, int K, const uint16_t *wh,
                                                 float *y, int ldy, size_t pf)
{
    panel(xp, T, K, NULL, wh, y, ldy, pf);
}
/* kernels_body.h: a column of tiles of a packed block of x against rows of w, whole tiles
 * only (the rest: the tiles above): f32 weights past one stretch of K (whole rows of up to
 * PANEL_KB stay in L1 as they are), bf16 weights at every K */
#define KB_PANEL_TILES(xp, T, K, w, y, ldy, bf16, pf)                                              \
    ((T) % 4 != 0     ? 0                                                                          \
     : (bf16)         ? (panel_bf16((xp), (T), (K), (w).h, (y), (ldy), (pf)), 1)                   \
     : (K) > PANEL_KB ? (panel_f32((xp), (T), (K), (w).f, (y), (ldy), (pf)), 1)                    \
                      : 0)

/* 16 accumulators, 4 + 4 operands: 24 of the 32 zmm registers. Against a
 * single row of x (batch-1 decode), 2 rows of bf16 w, prefetched 8 KiB ahead
 * in address order into L2 (prefetcht1; on an AMD Zen 4 one thread's step ran
 * at 26.5-29.2 tok/s with 4 KiB, 33.9-37.5 with 8 KiB, and two threads' at
 * 61-63 % of the bandwidth read beside them with 4 KiB, 76.5 % with 8 KiB:
 * bench/RESULTS.md, "Side by side on an AMD EPYC, Zen 4"): with the prefetch, fewer weight
 * streams read memory faster (8 rows slower than 4, 4 slower than 2, though
 * 2 FMA chains compute slower than 4: bench/RESULTS.md, "Batch-1 tiles of 2
 * rows"); into L1 (8 KiB ahead) the 340M shape's bf16 step ran at 61-62 % of
 * the memory rate read beside it, into L2 at 88-89 % (bench/RESULTS.md, "The
 * batch-1 prefetch into L2"). */
#define KB_TILE_T 4
#define KB_TILE_J 4
#define KB_TILE_J1 2
#ifndef KB_NARROW_PF_BYTES
#define KB_NARROW_PF_BYTES (8 * 1024)
#endif
/* 2 or 3 rows of x go against each row pair twice or three times: those tiles
 * compute more per byte, and 4 rows of w (prefetched as the wider tiles are)
 * measured faster for them (bench/RESULTS.md) */
#define KB_TILE_JN 4
#define KB_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
/* a single row's prefetch goes to L2 (measured faster than to L1, above) */
#define KB_PREFETCH_NARROW(p) _mm_prefetch((const char *)(p), _MM_HINT_T1)
/* kb_gemm: 4 rows by 4 vectors, 16 accumulators + 4 rows of B + 1 */
#define KB_GEMM_M 4
#define KB_GEMM_NV 4
/* a single row (decode): 16 accumulators, so the token mixer reads each row of P_i (dv = 256)
 * in one sweep instead of two passes over half rows */
#define KB_GEMM_NV1 16
#define KB_OPS k_ops_avx512
#define KB_NAME "avx512"
#include "silu_avx512.h"
#include "q8_avx512.h"
#include "q4_avx512.h"
#include "q8_amx.h"
#include "bd_avx512.h"
#include "kernels_body.h"
