/*
 * isa_avx2.c — the kernels on AVX2 + FMA: a 16-lane vector is two 8-lane
 * ymm halves (lanes 0-7 and 8-15), reduced in the same tree as the other
 * paths (half + half, then 4, 2, 1). Compiled with -mavx2 -mfma.
 */
#include "isa.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    __m256 lo, hi;
} vec16;

/* The tiles' prefetch of the weights goes to L2, as the single row's does:
 * against L1, bf16 batch 2-8 decode ran 1.02-1.17x faster, bf16 batch 16-32,
 * prefill and f32 batch 8-16 within the noise (bench/RESULTS.md, "The first
 * tile of a pass prefetches") */
#ifndef KB_TILE_PF_HINT
#define KB_TILE_PF_HINT _MM_HINT_T1
#endif

/* 8 all-ones words then 8 zero words: mask of the first n lanes at 8 - n */
static const int32_t kb_mask_src[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

static inline __m256i lane_mask(int n)
{
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    return _mm256_loadu_si256((const __m256i *)(kb_mask_src + 8 - n));
}

static inline vec16 V_ZERO(void)
{
    vec16 v = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    return v;
}
static inline vec16 V_LOAD(const float *p)
{
    vec16 v = {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
    return v;
}
static inline vec16 V_LOAD_TAIL(const float *p, int n)
{
    vec16 v = {_mm256_maskload_ps(p, lane_mask(n)), _mm256_maskload_ps(p + 8, lane_mask(n - 8))};
    return v;
}
static inline vec16 V_FMA(vec16 a, vec16 b, vec16 c)
{
    vec16 v = {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
    return v;
}
static inline vec16 V_SET1(float s)
{
    vec16 v = {_mm256_set1_ps(s), _mm256_set1_ps(s)};
    return v;
}
static inline __m256 bf16x8(const uint16_t *p)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
static inline vec16 V_LOAD_BF16(const uint16_t *p)
{
    vec16 v = {bf16x8(p), bf16x8(p + 8)};
    return v;
}
static inline vec16 V_LOAD_BF16_TAIL(const uint16_t *p, int n)
{
    uint16_t buf[16] = {0};
    memcpy(buf, p, (size_t)n * sizeof *p);
    return V_LOAD_BF16(buf);
}
static inline void V_STORE(float *p, vec16 v)
{
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + 8, v.hi);
}
static inline void V_STORE_TAIL(float *p, vec16 v, int n)
{
    _mm256_maskstore_ps(p, lane_mask(n), v.lo);
    _mm256_maskstore_ps(p + 8, lane_mask(n - 8), v.hi);
}
static inline float v_reduce(vec16 v)
{
    __m256 s8 = _mm256_add_ps(v.lo, v.hi);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
}

/* A tile of M rows of x by MJ rows of w, one half at a time: a first pass
 * over K sums lanes 0-7 of every dot product, a second lanes 8-15, and the
 * halves then meet in v_reduce's tree — the same products, added in the same
 * order, as one pass over two-half vectors. One pass needs one ymm per
 * product, so a 4 x 3 tile (12 accumulators, 3 rows of w and a row of x in
 * registers) does 12 FMAs per 7 loads where a 2 x 2 tile of two-half
 * vectors did 8 per 8.
 * The loop order is tile by tile, each over all of K. Several triples of w
 * against all tiles of x, block of K by block (x read from L2 once per group
 * of triples, not once per triple), ran at 0.52-0.60 of it at 16-32 rows
 * (bf16 0.70-0.83), likely because where a row is a multiple of 4 KiB
 * (K = 1,024 f32) the lines read at one offset of K share a set of L1 (12
 * ways): 7 in a 4 x 3 pass, 28 and more in a group. Rows of x set apart by
 * other than 4 KiB measured no faster here, so x is read in place
 * (bench/RESULTS.md, 2026-12-02). */
#define HALF_T 4
#define HALF_J 3
/* The passes go over K in blocks of HALF_KB elements, lanes 0-7 then lanes
 * 8-15 of each block, the sums carried from block to block: the second pass
 * finds the block's rows of x and w in L1 (whole rows are 77 KiB of f32 at
 * K = 2816, the MLP's down projection, and fell out of L1 between the
 * passes: it ran at 62 % of OpenBLAS's rate, 90 % in blocks). A block of 512
 * holds 8 KiB of packed x and 6 KiB of f32 w (3 KiB bf16), well inside a
 * Zen 3 core's 32 KiB L1, and carries the 24 sums through memory a quarter as
 * often as blocks of 128 did: prefill and batch 16/32 measured 2-29 % faster
 * (bench/RESULTS.md, 2026-12-03). */
#define HALF_KB 512
/* elements of K per block of the rows of w widened and packed (panel_tiles): a multiple of
 * HALF_KB */
#ifndef HALF_PANEL_KB
#define HALF_PANEL_KB 1024
#endif

/* Lanes [8h, 8h + 8) of the last, partial block of 16 at i (r = K - i
 * elements left): zero past K, as V_LOAD_TAIL and V_LOAD_BF16_TAIL give. */
static inline __attribute__((always_inline)) __m256 half_w_tail(const float *wf, const uint16_t *wh,
                                                                size_t i, int r, int h, int bf16)
{
    if (bf16) {
        uint16_t buf[16] = {0};
        memcpy(buf, wh + i, (size_t)r * sizeof *buf);
        return bf16x8(buf + 8 * h);
    }
    return _mm256_maskload_ps(wf + i + 8 * h, lane_mask(r - 8 * h));
}

/* The tiles' rows of x, packed in the order the half passes read them: per
 * block of HALF_KB elements, lanes 0-7 of each step of 16 for the tile's
 * HALF_T rows in turn, then lanes 8-15 the same way, 8 floats each, zero
 * past K. Each thread packs the block of rows kb_linear_tiled is on into a
 * buffer of its own (grown as needed, freed when the thread ends). Read in
 * place, the tile's loads come from HALF_T rows K floats apart (a multiple
 * of 4 KiB at K = 1,024); packed, from one stream in order. The products
 * measured 4-15 % faster packed, f32 and bf16, 16 to 512 rows, one and two
 * threads (bench/RESULTS.md, 2026-12-02, seventh session). Where the buffer
 * cannot be had, x is read in place: the same products in the same order. */
#define HALF_STEP_FLOATS (HALF_T * 8)

static inline size_t round16(int K) { return ((size_t)K + 15) & ~(size_t)15; }

/* T rows of x (K floats each) packed tile by tile; NULL without a buffer
 * (isa.h k_x_pack_buffer). */
static const float *x_pack(const float *x, int T, int K)
{
    size_t Kp = round16(K);
    int tiles = (T + HALF_T - 1) / HALF_T;
    /* the tiles' sums and a block of the rows of w in use (panel_tiles) go first */
    size_t before = (size_t)HALF_J * HALF_PANEL_KB + (size_t)tiles * 2 * HALF_T * HALF_J * 8;
    float *buf = k_x_pack_buffer(before + (size_t)tiles * HALF_T * Kp);
    if (!buf)
        return NULL;
    buf += before;
    for (int u = 0; u < tiles; u++) {
        int m = T - u * HALF_T < HALF_T ? T - u * HALF_T : HALF_T;
        float *tile = buf + (size_t)u * HALF_T * Kp;
        for (int k0 = 0; k0 < K; k0 += HALF_KB) {
            int S = ((K - k0 > HALF_KB ? HALF_KB : K - k0) + 15) / 16;
            float *blk = tile + (size_t)HALF_T * k0;
            for (int h = 0; h < 2; h++)
                for (int s = 0; s < S; s++)
                    for (int t = 0; t < m; t++) {
                        int k = k0 + 16 * s + 8 * h;
                        const float *row = x + (size_t)(u * HALF_T + t) * K;
                        float *dst = blk + (size_t)(h * S + s) * HALF_STEP_FLOATS + 8 * t;
                        _mm256_store_ps(dst, K - k >= 8 ? _mm256_loadu_ps(row + k)
                                             : K - k > 0
                                                 ? _mm256_maskload_ps(row + k, lane_mask(K - k))
                                                 : _mm256_setzero_ps());
                    }
        }
    }
    return buf;
}
#define KB_X_PACK(x, T, K) x_pack((x), (T), (K))
/* the tile from row t (a multiple of HALF_T) of a packed block */
#define KB_X_PACKED(xp, t, K) ((xp) + (size_t)((t) / HALF_T) * HALF_T * round16(K))

/* One step of 16 elements of a half pass: lanes [8h, 8h + 8) at i, with this
 * tile's share of the prefetch of the next rows (tile_halves); x from the
 * packed step at xb, or (packed 0) from the rows xr in place. The rows come as
 * pointers computed once per tile: tested and recomputed in every step,
 * they cost more instructions than the step's loads and multiply-adds. */
static inline __attribute__((always_inline)) void
half_step(int packed, const float *xb, const float *const *xr, const float *const *wfr,
          const uint16_t *const *whr, int bf16, int M, int MJ, int i, int h, const char **pp,
          size_t bps, __m256 acc[HALF_T][HALF_J])
{
    if (*pp) {
        _mm_prefetch(*pp, KB_TILE_PF_HINT);
        *pp += bps;
    }
    __m256 wv[HALF_J];
    for (int j = 0; j < MJ; j++)
        wv[j] = bf16 ? bf16x8(whr[j] + i + 8 * h) : _mm256_loadu_ps(wfr[j] + i + 8 * h);
    for (int t = 0; t < M; t++) {
        __m256 xv = packed ? _mm256_load_ps(xb + 8 * t) : _mm256_loadu_ps(xr[t] + i + 8 * h);
        for (int j = 0; j < MJ; j++)
            acc[t][j] = _mm256_fmadd_ps(xv, wv[j], acc[t][j]);
    }
}

/* xt: the tile's rows packed (x_pack), or NULL to read them at x; `packed`
 * says which, a constant at each call so each case is a kernel of its own. */
static inline __attribute__((always_inline)) void tile_halves(const float *x, const float *xt,
                                                              int packed, int K, const float *wf,
                                                              const uint16_t *wh, float *y, int ldy,
                                                              int bf16, int M, int MJ, size_t pf)
{
    __m256 part[2][HALF_T][HALF_J]; /* each half's sums, from one block of K to the next */
    /* pf: the distance << 16 | this tile's index u << 8 | the count n of
     * tiles that prefetch. The MJ rows from the distance on (the next tiles'
     * rows, contiguous in memory) are cut into n runs of bytes; tile u
     * prefetches run u in address order, one prefetch a step, each bps
     * bytes past the last (its 2 K / 16 steps span the run; steps within a
     * line ask again for a line on its way, which costs a slot, not a miss).
     * One even, ascending stream measured 2-14 % faster at 16 rows of x
     * than MJ lines at once every 2n steps, each tile its lines L with
     * L % 2n == 2u + h in every row (bench/RESULTS.md, 2026-12-02). */
    size_t pfd = pf >> 16;
    int pfu = (int)(pf >> 8) & 255, pfn = (int)pf & 255;
    size_t es = bf16 ? 2 : 4, bps = pfn ? (size_t)MJ * es * 8 / (size_t)pfn : 0;
    const char *pp = NULL;
    if (pfd && pfn)
        pp = (bf16 ? (const char *)(wh + pfd) : (const char *)(wf + pfd)) +
             (size_t)pfu * ((size_t)MJ * K * es / (size_t)pfn);
    const float *xr[HALF_T], *wfr[HALF_J];
    const uint16_t *whr[HALF_J];
    for (int t = 0; t < M; t++)
        xr[t] = x + (size_t)t * K;
    for (int j = 0; j < MJ; j++) {
        wfr[j] = bf16 ? NULL : wf + (size_t)j * K;
        whr[j] = bf16 ? wh + (size_t)j * K : NULL;
    }
    for (int k0 = 0; k0 < K; k0 += HALF_KB) {
        int k1 = K - k0 > HALF_KB ? k0 + HALF_KB : K;
        int S = (k1 - k0 + 15) / 16; /* steps in the block, the last maybe partial */
        for (int h = 0; h < 2; h++) {
            const float *xb =
                packed ? xt + (size_t)HALF_T * k0 + (size_t)h * S * HALF_STEP_FLOATS : NULL;
            __m256 acc[HALF_T][HALF_J];
            for (int t = 0; t < M; t++)
                for (int j = 0; j < MJ; j++)
                    acc[t][j] = k0 ? part[h][t][j] : _mm256_setzero_ps();
            int i = k0;
            /* the steps unrolled: f32 8 at a time (the products at 16 rows of x measured
             * ~10 % faster, 4 steps at a time 7-11 % slower than 8), bf16 two at a time (2 %
             * faster; 8 at a time 3-4 % slower) */
            if (bf16)
                _Pragma("GCC unroll 2") for (; i + 16 <= k1; i += 16)
                {
                    half_step(packed, xb, xr, wfr, whr, 1, M, MJ, i, h, &pp, bps, acc);
                    xb = packed ? xb + HALF_STEP_FLOATS : NULL;
                }
            else
                _Pragma("GCC unroll 8") for (; i + 16 <= k1; i += 16)
                {
                    half_step(packed, xb, xr, wfr, whr, 0, M, MJ, i, h, &pp, bps, acc);
                    xb = packed ? xb + HALF_STEP_FLOATS : NULL;
                }
            if (i < k1) {
                int r = k1 - i;
                __m256 wv[HALF_J];
                for (int j = 0; j < MJ; j++)
                    wv[j] = half_w_tail(wf ? wf + (size_t)j * K : NULL,
                                        wh ? wh + (size_t)j * K : NULL, (size_t)i, r, h, bf16);
                for (int t = 0; t < M; t++) {
                    __m256 xv = packed ? _mm256_load_ps(xb + 8 * t)
                                       : _mm256_maskload_ps(x + (size_t)t * K + i + 8 * h,
                                                            lane_mask(r - 8 * h));
                    for (int j = 0; j < MJ; j++)
                        acc[t][j] = _mm256_fmadd_ps(xv, wv[j], acc[t][j]);
                }
            }
            for (int t = 0; t < M; t++)
                for (int j = 0; j < MJ; j++)
                    part[h][t][j] = acc[t][j];
        }
    }
    for (int t = 0; t < M; t++)
        for (int j = 0; j < MJ; j++) {
            vec16 v = {part[0][t][j], part[1][t][j]};
            y[(size_t)t * ldy + j] = v_reduce(v);
        }
}
/* The HALF_J rows of w that a column of tiles of x shares, widened to f32 once and packed
 * as x is (x_pack), one block of HALF_KB at a time: lanes 0-7 of each step of 16 for the
 * rows in turn, then lanes 8-15, zero past K. Widened in each tile, bf16 spent a shift per
 * 8 weights on the ports of the multiply-adds (3 per 12 FMAs: bf16 ran at 0.73-0.83 of
 * OpenBLAS's AVX2 sgemm where f32 ran at 0.78-0.93); here once per column of 8 to 32 tiles,
 * and the tiles read w as one stream in order. Every tile of the column takes a block of K
 * before any takes the next, its sums kept in memory between blocks: the same chain of
 * multiply-adds per lane, in the same order, and the block of w (6 KiB) stays in L1 while
 * the rows of x stream from L2. Tile by tile over the whole of K, the panel of the down
 * projection (33 KiB at K = 2,816) left L1 for each tile's 45 KiB of x: 0.82 of sgemm.
 * The block of w, and before it the tiles' sums, lie in the thread's pack buffer just
 * before the packed rows of x (x_pack). */
#define HALF_W_STEP (HALF_J * 8)
#define HALF_PANEL_FLOATS ((size_t)HALF_J * HALF_PANEL_KB)
static inline int k1_of(int k0, int K) { return K - k0 > HALF_KB ? k0 + HALF_KB : K; }
#define HALF_PART_FLOATS ((size_t)2 * HALF_T * HALF_J * 8) /* a tile's sums (x_pack) */

/* Elements [k0, k1) of the HALF_J rows of w from wf (f32) or wh (bf16), K apart, packed. */
static inline __attribute__((always_inline)) void
w_pack(const float *wf, const uint16_t *wh, int bf16, int K, int k0, int k1, float *blk)
{
    int S = (k1 - k0 + 15) / 16, full = (k1 - k0) / 16;
    for (int h = 0; h < 2; h++) {
        float *dst = blk + (size_t)h * S * HALF_W_STEP;
        for (int s = 0; s < full; s++, dst += HALF_W_STEP) {
            size_t i = (size_t)k0 + 16 * s + 8 * h;
            for (int j = 0; j < HALF_J; j++)
                _mm256_store_ps(dst + 8 * j, bf16 ? bf16x8(wh + (size_t)j * K + i)
                                                  : _mm256_loadu_ps(wf + (size_t)j * K + i));
        }
        if (full < S) {
            size_t i = (size_t)k0 + 16 * full;
            for (int j = 0; j < HALF_J; j++)
                _mm256_store_ps(dst + 8 * j, half_w_tail(bf16 ? NULL : wf + (size_t)j * K,
                                                         bf16 ? wh + (size_t)j * K : NULL, i,
                                                         (int)((size_t)k1 - i), h, bf16));
        }
    }
}

/* Elements [p0, p1) of M rows of packed x (xb, the tile's start) against the packed rows of
 * w (wb, holding [p0, p1)), in blocks of HALF_KB as tile_halves: each half's sums from part
 * (+0 from the first element on), back into part, and at K's end reduced into y. A partial
 * last step of 16 is packed with zeros, as tile_halves's tail loads give. The prefetch of
 * the next rows of w goes on from *pp, bps bytes a step (none where bps is 0). */
static inline __attribute__((always_inline)) void tile_panel(const float *xt, const float *wb,
                                                             int p0, int p1, int K, int M,
                                                             __m256 *part, float *y, int ldy,
                                                             const char **pp, size_t bps)
{
    for (int k0 = p0; k0 < p1; k0 += HALF_KB) {
        int S = ((p1 - k0 > HALF_KB ? HALF_KB : p1 - k0) + 15) / 16;
        for (int h = 0; h < 2; h++) {
            const float *xb = xt + (size_t)HALF_T * k0 + (size_t)h * S * HALF_STEP_FLOATS;
            const float *wv_at = wb + (size_t)HALF_J * (k0 - p0) + (size_t)h * S * HALF_W_STEP;
            __m256 acc[HALF_T][HALF_J];
            __m256 *ph = part + h * HALF_T * HALF_J;
            for (int t = 0; t < M; t++)
                for (int j = 0; j < HALF_J; j++)
                    acc[t][j] = k0 == 0 ? _mm256_setzero_ps() : ph[t * HALF_J + j];
            const char *p = *pp;
            _Pragma("GCC unroll 8") for (int s = 0; s < S; s++)
            {
                if (bps) {
                    _mm_prefetch(p, KB_TILE_PF_HINT);
                    p += bps;
                }
                __m256 wv[HALF_J];
                for (int j = 0; j < HALF_J; j++)
                    wv[j] = _mm256_load_ps(wv_at + 8 * j);
                for (int t = 0; t < M; t++) {
                    __m256 xv = _mm256_load_ps(xb + 8 * t);
                    for (int j = 0; j < HALF_J; j++)
                        acc[t][j] = _mm256_fmadd_ps(xv, wv[j], acc[t][j]);
                }
                xb += HALF_STEP_FLOATS;
                wv_at += HALF_W_STEP;
            }
            *pp = p;
            for (int t = 0; t < M; t++)
                for (int j = 0; j < HALF_J; j++)
                    ph[t * HALF_J + j] = acc[t][j];
        }
    }
    if (p1 == K)
        for (int t = 0; t < M; t++)
            for (int j = 0; j < HALF_J; j++) {
                vec16 v = {part[t * HALF_J + j], part[HALF_T * HALF_J + t * HALF_J + j]};
                y[(size_t)t * ldy + j] = v_reduce(v);
            }
}

/* The tile from row t of the block (m rows, a constant at each call) over [p0, p1). */
#define PANEL_TILE(m, b)                                                                           \
    tile_panel(xp + (size_t)(t / HALF_T) * HALF_T * Kp, blk, p0, p1, K, (m),                       \
               (__m256 *)(part + (size_t)(t / HALF_T) * HALF_PART_FLOATS), y + (size_t)t * ldy,    \
               ldy, &pp, (b))

/* Rows [0, T) of a packed block of x (xp) against HALF_J rows of w, HALF_PANEL_KB elements
 * of K at a time; the whole tiles' steps prefetch the rows pf elements on, one even stream
 * in address order over all of them (as tile_halves's tiles do over their share). */
static inline __attribute__((always_inline)) void panel_tiles(const float *xp, int T, int K,
                                                              const float *wf, const uint16_t *wh,
                                                              int bf16, float *y, int ldy,
                                                              size_t pf);
static inline void panel_tiles(const float *xp, int T, int K, const float *wf, const uint16_t *wh,
                               int bf16, float *y, int ldy, size_t pf)
{
    size_t Kp = round16(K), es = bf16 ? 2 : 4;
    int tiles = T / HALF_T, m = T % HALF_T;
    float *blk = (float *)xp - HALF_PANEL_FLOATS;
    float *part = blk - (size_t)(tiles + (m > 0)) * HALF_PART_FLOATS;
    const char *pp = bf16 ? (const char *)(wh + pf) : (const char *)(wf + pf);
    /* steps of whole tiles: tiles * 2 * Kp / 16; bytes: HALF_J * K * es */
    size_t steps = (size_t)tiles * Kp / 8;
    size_t bps = steps ? ((size_t)HALF_J * K * es + steps - 1) / steps : 0;
    for (int p0 = 0; p0 < K; p0 += HALF_PANEL_KB) {
        int p1 = K - p0 > HALF_PANEL_KB ? p0 + HALF_PANEL_KB : K, t = 0;
        for (int k0 = p0; k0 < p1; k0 += HALF_KB)
            w_pack(wf, wh, bf16, K, k0, k1_of(k0, p1), blk + (size_t)HALF_J * (k0 - p0));
        for (int u = 0; u < tiles; u++, t += HALF_T)
            PANEL_TILE(HALF_T, bps);
        if (m == 1)
            PANEL_TILE(1, 0);
        else if (m == 2)
            PANEL_TILE(2, 0);
        else if (m == 3)
            PANEL_TILE(3, 0);
    }
}
#undef PANEL_TILE
static __attribute__((noinline)) void panel_tiles_f32(const float *xp, int T, int K,
                                                      const float *wf, float *y, int ldy, size_t pf)
{
    panel_tiles(xp, T, K, wf, NULL, 0, y, ldy, pf);
}
static __attribute__((noinline)) void
panel_tiles_bf16(const float *xp, int T, int K, const uint16_t *wh, float *y, int ldy, size_t pf)
{
    panel_tiles(xp, T, K, NULL, wh, 1, y, ldy, pf);
}
#ifndef HALF_PANEL_F32
#define HALF_PANEL_F32 1
#endif
/* kernels_body.h: a column of tiles of a packed block of x against rows of w */
#define KB_PANEL_TILES(xp, T, K, w, y, ldy, bf16, pf)                                              \
    ((bf16)           ? (panel_tiles_bf16((xp), (T), (K), (w).h, (y), (ldy), (pf)), 1)             \
     : HALF_PANEL_F32 ? (panel_tiles_f32((xp), (T), (K), (w).f, (y), (ldy), (pf)), 1)              \
                      : 0)

/* the tiles with more products than two-half vectors hold in registers (2 x 2) */
#define KB_TILE_HALVES(x, xp, K, w, y, ldy, bf16, M, MJ, pf)                                       \
    ((M) * (MJ) > 4 ? ((xp) ? tile_halves((x), (xp), 1, (K), (w).f, (w).h, (y), (ldy), (bf16),     \
                                          (M), (MJ), (pf))                                         \
                            : tile_halves((x), NULL, 0, (K), (w).f, (w).h, (y), (ldy), (bf16),     \
                                          (M), (MJ), (pf)),                                        \
                       1)                                                                          \
                    : 0)

/* The next rows of w are prefetched by the first HALF_PF_TILES tiles of x
 * against the rows in use, each its run of the lines (tile_halves): one
 * tile issuing them all ran out of misses in flight (batch 16/32 decode with
 * f32 weights measured 10-20 % slower); 4 or 32 tiles instead of 8 measured
 * no better at 32 and 512 rows. */
#define HALF_PF_TILES 8
#define KB_TILE_PF_SHARE(M, MJ) ((M) * (MJ) > 4 ? HALF_PF_TILES : 0)
/* tiles of 4 x 3 in half passes (above); against a single row of x
 * (batch-1 decode), 2 rows of bf16 w prefetched 8 KiB ahead in address order
 * into L2, as on the avx512 path: fewer weight streams read memory faster.
 * Against 4 rows prefetched 16 KiB ahead (into L1), in-process A/B on the
 * 340M shape, batch-1 bf16 decode measured 1.05-1.09x with two threads and
 * 1.05 with one (bench/RESULTS.md, 2026-12-03); into L2 instead of L1 the
 * step went from 54-55 % to 78-81 % of the memory rate read beside it on an
 * Intel Xeon (4 KiB ahead; 2 KiB 77-81 %, 8 KiB 73-74 %, 16 KiB 73 %:
 * bench/RESULTS.md, "The batch-1 prefetch into L2"). On an AMD Zen 4 the
 * products read 61-67 % of the bandwidth beside them with 4 KiB, 80 % (one
 * thread) and 90-91 % (two) with 8, 75 % with 16 (bench/RESULTS.md, "One
 * weight stream for a single row"), the larger difference. */
#define KB_TILE_T HALF_T
#define KB_TILE_J HALF_J
#define KB_TILE_J1 2
#ifndef KB_NARROW_PF_BYTES
#define KB_NARROW_PF_BYTES (8 * 1024)
#endif
/* Below these rows of x, 2 x 2 tiles of two-half vectors (8 accumulator
 * halves, one pass) stream the weights better than the 4 x 3 tiles. On the
 * Xeon of bench/RESULTS.md ("The first tile of a pass prefetches"), the
 * 4 x 3 tiles took bf16 batch 4-7 decode 1.16-1.32x faster, and with their
 * prefetch into L2 f32 batch 6-7 1.0-1.10x; they lost f32 batch 4-5
 * (0.93-0.98x) and bf16 batch 2-3 (0.6-0.8x) */
#define KB_NARROW_T 2
#define KB_SMALL_T 6
#define KB_SMALL_T_BF16 4
#define KB_SMALL_TILE_T 2
#define KB_SMALL_TILE_J 2
#define KB_PREFETCH(p) _mm_prefetch((const char *)(p), KB_TILE_PF_HINT)
/* a single row's prefetch goes to L2 (measured faster than to L1: above) */
#define KB_PREFETCH_NARROW(p) _mm_prefetch((const char *)(p), _MM_HINT_T1)
/* AVX2-only parts have smaller L2s (Zen 2/3: 512 KiB per core) */
#define KB_X_BLOCK_BYTES (256 * 1024)
#define KB_OPS k_ops_avx2
#define KB_NAME "avx2"
/* kb_gemm: 4 rows by one two-half vector (8 ymm accumulators); a single row by 4 */
#define KB_GEMM_NV1 4
#include "silu_avx2.h"
#include "q8_avx2.h"
#include "q4_avx2.h"
#include "bd_avx2.h"
#include "kernels_body.h"
