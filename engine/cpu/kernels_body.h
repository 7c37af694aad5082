/*
 * kernels_body.h — the kernels, written once over a 16-lane vector type.
 *
 * Included by each isa_*.c after it defines, for its instruction set:
 *   vec16, V_ZERO, V_LOAD, V_LOAD_TAIL, V_FMA, V_SET1, V_LOAD_BF16,
 *   V_LOAD_BF16_TAIL, V_STORE, V_STORE_TAIL, v_reduce (lane i with i+8,
 *   i+4, i+2, i+1), KB_TILE_T x KB_TILE_J (the register tile: rows of x by
 *   rows of w) and KB_OPS / KB_NAME (the table it exports); optionally
 *   KB_TILE_STORE(acc, y, ldy), reducing a whole tile at once in the same
 *   tree, KB_TILE_HALVES(x, xp, K, w, y, ldy, bf16, M, MJ, pf), its own kernel
 *   for the tiles it takes (nonzero when it did; same products, same order),
 *   with KB_X_PACK(x, T, K) and KB_X_PACKED(xp, t, K) (a block of rows of x
 *   packed for that kernel, or NULL, and where the tile from row t starts:
 *   xp, NULL where x was not packed),
 *   KB_NARROW_T (the fewest rows of x that go in tiles), KB_SMALL_T with
 *   KB_SMALL_TILE_T x KB_SMALL_TILE_J (the tile below KB_SMALL_T rows of x;
 *   below KB_SMALL_T_BF16 for bf16 weights, by default the same),
 *   KB_TILE_J1 (rows of w per tile against a
 * single row of x: the weight streams of batch-1 decode; KB_TILE_J1_F32 for f32
 *   weights), KB_PREFETCH(p) and KB_PF_BYTES (how far ahead it reaches),
 *   KB_PREFETCH_NARROW(p) (a single row's: KB_PREFETCH unless defined),
 *   KB_NARROW_PF_BYTES (how far ahead batch-1 bf16 tiles prefetch, at least
 *   one tile; default: as the wider tiles, at least KB_TILE_MAX_J rows), KB_TILE_JN
 *   (rows of bf16 w per tile for 2 to KB_NARROW_T - 1 rows of x; default KB_TILE_J1),
 *   KB_TILE_PF_SHARE(M, MJ) (how many tiles of x share the prefetch of the
 *   next rows of w, for KB_TILE_HALVES's tiles; 0: the first tile alone),
 *   KB_GEMM_M x KB_GEMM_NV, KB_GEMM_NV1 (kb_gemm's register tiles), KB_SILU_MUL,
 *   KB_PANEL_TILES(xp, T, K, w, y, ldy, bf16, pf) (its own loop over all T rows of a
 *   packed block of x against KB_TILE_J rows of w, nonzero when it took them; same
 *   products, same order).
 * Lanes not loaded by a tail are zero on every path, and fma(0, 0, acc) is
 * applied to them everywhere, so the paths agree to the bit.
 */
#include "isa.h"

#include <stddef.h>
#include <string.h>

#ifndef KB_TILE_J1
#define KB_TILE_J1 KB_TILE_J
#endif
#ifndef KB_TILE_J1_F32
#define KB_TILE_J1_F32 KB_TILE_J
#endif
#ifndef KB_TILE_JN
#define KB_TILE_JN KB_TILE_J1
#endif
#ifndef KB_PREFETCH_NARROW
#define KB_PREFETCH_NARROW(p) KB_PREFETCH(p)
#endif
#ifndef KB_PREFETCH
#define KB_PREFETCH(p) ((void)0)
#endif
/* Below this many rows of x, rows of w go against one row of x at a time
 * (batch-1 decode); from it on, in tiles (the last rows of x in a shorter one). */
#ifndef KB_NARROW_T
#define KB_NARROW_T KB_TILE_T
#endif
#if defined(KB_SMALL_T) && !defined(KB_SMALL_T_BF16)
#define KB_SMALL_T_BF16 KB_SMALL_T
#endif

static float kb_dot(const float *a, const float *b, int n)
{
    vec16 acc = V_ZERO();
    int i = 0;
    for (; i + 16 <= n; i += 16)
        acc = V_FMA(V_LOAD(a + i), V_LOAD(b + i), acc);
    if (i < n)
        acc = V_FMA(V_LOAD_TAIL(a + i, n - i), V_LOAD_TAIL(b + i, n - i), acc);
    return v_reduce(acc);
}

static void kb_axpy(float s, const float *row, float *acc, int n)
{
    vec16 sv = V_SET1(s);
    int c = 0;
    for (; c + 16 <= n; c += 16)
        V_STORE(acc + c, V_FMA(sv, V_LOAD(row + c), V_LOAD(acc + c)));
    if (c < n)
        V_STORE_TAIL(acc + c, V_FMA(sv, V_LOAD_TAIL(row + c, n - c), V_LOAD_TAIL(acc + c, n - c)),
                     n - c);
}

/* C[m][n] = fma(A[m][k], B[k][n], C[m][n]) for k = 0, 1, ... K-1 in turn: per element the
 * same operations, in the same order, as K calls of kb_axpy, so the same bits; a register
 * tile of M rows by NV vectors of C loads B's row k once for M rows and never stores C
 * between steps of k. M, NV and `tail` (the lanes of the last vector, 0 for all 16) are
 * constants at every call site. With `set`, the tile starts from +0 instead of C (the bits
 * of a zeroed C) and C is only written: a block's summary goes to a page in memory, where
 * zeroing it first and then reading it back cost a pass over the page each. */
#ifndef KB_GEMM_M
#define KB_GEMM_M 4
#endif
#ifndef KB_GEMM_NV
#define KB_GEMM_NV 1
#endif
/* Rows left over from whole tiles (all of them at decode, one token per sequence) go one
 * at a time, KB_GEMM_NV1 vectors wide: a longer run of each row of B read in one go. */
#ifndef KB_GEMM_NV1
#define KB_GEMM_NV1 KB_GEMM_NV
#endif
#define KB_GEMM_NVMAX (KB_GEMM_NV1 > KB_GEMM_NV ? KB_GEMM_NV1 : KB_GEMM_NV)
static inline __attribute__((always_inline)) void
kb_gemm_tile(int M, int NV, int tail, int K, const float *A, size_t a_rs, size_t a_cs,
             const float *B, size_t ldb, float *C, size_t ldc, int set)
{
    vec16 acc[KB_GEMM_M][KB_GEMM_NVMAX];
    for (int m = 0; m < M; m++)
        for (int v = 0; v < NV; v++)
            acc[m][v] = set                   ? V_ZERO()
                        : tail && v == NV - 1 ? V_LOAD_TAIL(C + (size_t)m * ldc + 16 * v, tail)
                                              : V_LOAD(C + (size_t)m * ldc + 16 * v);
    for (int k = 0; k < K; k++) {
        vec16 b[KB_GEMM_NVMAX];
        const float *bk = B + (size_t)k * ldb;
        for (int v = 0; v < NV; v++)
            b[v] = tail && v == NV - 1 ? V_LOAD_TAIL(bk + 16 * v, tail) : V_LOAD(bk + 16 * v);
        for (int m = 0; m < M; m++) {
            vec16 a = V_SET1(A[(size_t)m * a_rs + (size_t)k * a_cs]);
            for (int v = 0; v < NV; v++)
                acc[m][v] = V_FMA(a, b[v], acc[m][v]);
        }
    }
    for (int m = 0; m < M; m++)
        for (int v = 0; v < NV; v++) {
            if (tail && v == NV - 1)
                V_STORE_TAIL(C + (size_t)m * ldc + 16 * v, acc[m][v], tail);
            else
                V_STORE(C + (size_t)m * ldc + 16 * v, acc[m][v]);
        }
}

/* One row of A wider than a register tile (the token mixer's q · P_i at decode, 256 columns
 * of 1 KiB rows): C's row (in L1) takes each of B's rows whole, in order, so B streams as one
 * sequence. Column strips of a register tile read B's rows a strip's width at a time, 1 KiB
 * apart, and streamed ~40 % slower from memory (avx2, bench/RESULTS.md). The sum of each value
 * is the same chain of multiply-adds over k, so the bits do not change. */
static void kb_gemm_row(int N, int K, const float *A, size_t a_cs, const float *B, size_t ldb,
                        float *C)
{
    int N16 = N / 16 * 16, tail = N - N16;
    for (int k = 0; k < K; k++) {
        vec16 a = V_SET1(A[(size_t)k * a_cs]);
        const float *bk = B + (size_t)k * ldb;
        for (int n = 0; n < N16; n += 16)
            V_STORE(C + n, V_FMA(a, V_LOAD(bk + n), V_LOAD(C + n)));
        if (tail)
            V_STORE_TAIL(C + N16, V_FMA(a, V_LOAD_TAIL(bk + N16, tail), V_LOAD_TAIL(C + N16, tail)),
                         tail);
    }
}

/* Whole tiles of rows, a slab of B's columns (K rows by the tile's width, in L1) at a time
 * for all of them; then the rows left over (zeroed first with `set`). */
static void kb_gemm(int M, int N, int K, const float *A, size_t a_rs, size_t a_cs, const float *B,
                    size_t ldb, float *C, size_t ldc, int set)
{
    int M4 = M / KB_GEMM_M * KB_GEMM_M, n = 0;
    for (; n + 16 * KB_GEMM_NV <= N; n += 16 * KB_GEMM_NV)
        for (int m = 0; m < M4; m += KB_GEMM_M)
            kb_gemm_tile(KB_GEMM_M, KB_GEMM_NV, 0, K, A + (size_t)m * a_rs, a_rs, a_cs, B + n, ldb,
                         C + (size_t)m * ldc + n, ldc, set);
    for (; n < N; n += 16)
        for (int m = 0; m < M4; m += KB_GEMM_M)
            kb_gemm_tile(KB_GEMM_M, 1, N - n < 16 ? N - n : 0, K, A + (size_t)m * a_rs, a_rs, a_cs,
                         B + n, ldb, C + (size_t)m * ldc + n, ldc, set);
    for (int m = M4; m < M; m++) {
        const float *Am = A + (size_t)m * a_rs;
        float *Cm = C + (size_t)m * ldc;
        if (set)
            memset(Cm, 0, (size_t)N * sizeof(float));
        if (N > 16 * KB_GEMM_NV1) {
            kb_gemm_row(N, K, Am, a_cs, B, ldb, Cm);
            continue;
        }
        n = 0;
        for (; n + 16 * KB_GEMM_NV1 <= N; n += 16 * KB_GEMM_NV1)
            kb_gemm_tile(1, KB_GEMM_NV1, 0, K, Am, a_rs, a_cs, B + n, ldb, Cm + n, ldc, 0);
        for (; n < N; n += 16)
            kb_gemm_tile(1, 1, N - n < 16 ? N - n : 0, K, Am, a_rs, a_cs, B + n, ldb, Cm + n, ldc,
                         0);
    }
}

/* silu(a) * b, one value at a time where the path has no vector form (KB_SILU_MUL) */
#ifndef KB_SILU_MUL
static void kb_silu_mul(const float *a, const float *b, float *out, int n)
{
    for (int i = 0; i < n; i++)
        out[i] = k_silu(a[i]) * b[i];
}
#define KB_SILU_MUL kb_silu_mul
#endif

/* A weight row pointer; `bf16` is a compile-time constant at every call
 * site, so each kernel is specialised for one storage type. */
typedef struct {
    const float *f;
    const uint16_t *h;
} kb_wrow;

static inline __attribute__((always_inline)) vec16 kb_wload(kb_wrow w, size_t i, int bf16)
{
    return bf16 ? V_LOAD_BF16(w.h + i) : V_LOAD(w.f + i);
}
static inline __attribute__((always_inline)) vec16 kb_wload_tail(kb_wrow w, size_t i, int n,
                                                                 int bf16)
{
    return bf16 ? V_LOAD_BF16_TAIL(w.h + i, n) : V_LOAD_TAIL(w.f + i, n);
}

/* M rows of x against M_J rows of w: M * M_J dot products, each in the
 * canonical order. M and MJ are constants at every call site. With `pf`
 * set, the loop also prefetches the weights from pf elements past the
 * tile's first row on (rows follow each other in memory, so that is a later
 * tile), in address order: MJ cache lines for each line of a row the tile
 * reads, so by the tile's end the next MJ rows from there are all on their
 * way. One sequential stream of prefetches, as a plain read's, measured
 * faster than MJ streams at the same offset in each row (the hardware has
 * fewer streams to follow). */
#define KB_TILE_MAX_J1 (KB_TILE_J1 > KB_TILE_JN ? KB_TILE_J1 : KB_TILE_JN)
#define KB_TILE_MAX_J (KB_TILE_MAX_J1 > KB_TILE_J ? KB_TILE_MAX_J1 : KB_TILE_J)
static inline __attribute__((always_inline)) void kb_tile(const float *x, const float *xp, int K,
                                                          kb_wrow w, float *y, int ldy, int bf16,
                                                          int M, int MJ, size_t pf)
{
#ifdef KB_TILE_HALVES
    if (KB_TILE_HALVES(x, xp, K, w, y, ldy, bf16, M, MJ, pf))
        return;
#endif
    (void)xp;
    vec16 acc[KB_TILE_T][KB_TILE_MAX_J];
    for (int t = 0; t < M; t++)
        for (int j = 0; j < MJ; j++)
            acc[t][j] = V_ZERO();
    int i = 0;
    for (; i + 16 <= K; i += 16) {
        vec16 xv[KB_TILE_T], wv[KB_TILE_MAX_J];
        if (pf && M == 1 && (!bf16 || (i & 16) == 0)) {
            /* elements per cache line: 32 bf16, 16 f32 */
            size_t at = pf + (size_t)i * MJ;
            (void)at; /* a path without a prefetch instruction */
            for (int j = 0; j < MJ; j++)
                KB_PREFETCH_NARROW(bf16 ? (const void *)(w.h + at + (size_t)j * 32)
                                        : (const void *)(w.f + at + (size_t)j * 16));
        } else if (pf && (!bf16 || (i & 16) == 0))
            for (int j = 0; j < MJ; j++)
                KB_PREFETCH(bf16 ? (const void *)(w.h + (size_t)j * K + i + pf)
                                 : (const void *)(w.f + (size_t)j * K + i + pf));
        for (int t = 0; t < M; t++)
            xv[t] = V_LOAD(x + (size_t)t * K + i);
        for (int j = 0; j < MJ; j++)
            wv[j] = kb_wload(w, (size_t)j * K + i, bf16);
        for (int t = 0; t < M; t++)
            for (int j = 0; j < MJ; j++)
                acc[t][j] = V_FMA(xv[t], wv[j], acc[t][j]);
    }
    if (i < K) {
        int r = K - i;
        vec16 xv[KB_TILE_T], wv[KB_TILE_MAX_J];
        for (int t = 0; t < M; t++)
            xv[t] = V_LOAD_TAIL(x + (size_t)t * K + i, r);
        for (int j = 0; j < MJ; j++)
            wv[j] = kb_wload_tail(w, (size_t)j * K + i, r, bf16);
        for (int t = 0; t < M; t++)
            for (int j = 0; j < MJ; j++)
                acc[t][j] = V_FMA(xv[t], wv[j], acc[t][j]);
    }
#ifdef KB_TILE_STORE
    if (M == KB_TILE_T && MJ == KB_TILE_J) {
        vec16 tile[KB_TILE_T][KB_TILE_J];
        for (int t = 0; t < M; t++)
            for (int j = 0; j < MJ; j++)
                tile[t][j] = acc[t][j];
        KB_TILE_STORE(tile, y, ldy);
        return;
    }
#endif
    for (int t = 0; t < M; t++)
        for (int j = 0; j < MJ; j++)
            y[(size_t)t * ldy + j] = v_reduce(acc[t][j]);
}

static inline kb_wrow kb_row(const float *wf, const uint16_t *wh, size_t j, int K)
{
    kb_wrow r = {wf ? wf + j * K : NULL, wh ? wh + j * K : NULL};
    return r;
}

#ifndef KB_TILE_PF_SHARE
#define KB_TILE_PF_SHARE(M, MJ) 0
#endif

/* Tokens per cache block: a block of x stays in L2 while a thread sweeps its
 * rows of w over it, so w is streamed from memory once per block. The block
 * is as many tiles of x as fit in KB_X_BLOCK_BYTES, between 32 and 128 rows
 * (fewer blocks: w read from memory fewer times; the block must stay in
 * L2 next to the stream of w). */
#ifndef KB_X_BLOCK_BYTES
#define KB_X_BLOCK_BYTES (512 * 1024)
#endif
static inline int kb_token_block(int K)
{
    long rows = (long)KB_X_BLOCK_BYTES / ((long)K * 4);
    rows = rows < 32 ? 32 : rows > 128 ? 128 : rows;
    return (int)(rows / KB_TILE_T * KB_TILE_T);
}
/* How far ahead the weights are prefetched, in bytes: about the next
 * tiles' rows (a few KiB each), well inside L1 with the tile in use. */
#ifndef KB_PF_BYTES
#define KB_PF_BYTES (16 * 1024)
#endif

/* The prefetch distance in elements: whole rows, at least one tile ahead
 * (rows follow each other in memory, so that is the next tiles' rows). */
static inline size_t kb_pf(int K, int bf16)
{
    size_t rows = (size_t)KB_PF_BYTES / ((size_t)K * (bf16 ? 2 : 4));
    return (rows < KB_TILE_MAX_J ? KB_TILE_MAX_J : rows) * (size_t)K;
}

/* The batch-1 bf16 tiles' prefetch distance in elements: whole rows, at
 * least the tile's J (the rows after it). */
#ifdef KB_NARROW_PF_BYTES
static inline size_t kb_pf_narrow(int K, int J)
{
    size_t rows = (size_t)KB_NARROW_PF_BYTES / ((size_t)K * 2);
    return (rows < (size_t)J ? (size_t)J : rows) * (size_t)K;
}
#else
#define kb_pf_narrow(K, J) kb_pf((K), 1)
#endif

/* Fewer rows of x than a tile holds (decode at batch 1): J rows of w per
 * tile against each row of x; bf16 tiles prefetch the next tiles' rows
 * (f32 ones streamed slower with the prefetch, with two threads), but only
 * rows below j1: the rows past a task's end are another task's, mostly read
 * already by then, and past a matrix's end they are not weights of it. Those
 * prefetches were ~2 % of a batch-1 step's traffic (16-22 KiB a task); without
 * them the products streamed ~0.6 % faster (bench/RESULTS.md). */
static inline __attribute__((always_inline)) void
kb_linear_narrow(const float *x, int T, int K, const float *wf, const uint16_t *wh, int j0, int j1,
                 float *y, int ldy, int bf16, int J, size_t pf)
{
    int j = j0;
    /* the last tile whose prefetch (rows j + pf / K on, J of them) stays below j1 */
    int j_pf = j1 - J - (int)(pf / (size_t)K);
    for (; j + J <= j1; j += J)
        for (int t = 0; t < T; t++)
            kb_tile(x + (size_t)t * K, NULL, K, kb_row(wf, wh, (size_t)j, K),
                    y + (size_t)t * ldy + j, ldy, bf16, 1, J, j <= j_pf ? pf : 0);
    for (; j + KB_TILE_J <= j1; j += KB_TILE_J)
        for (int t = 0; t < T; t++)
            kb_tile(x + (size_t)t * K, NULL, K, kb_row(wf, wh, (size_t)j, K),
                    y + (size_t)t * ldy + j, ldy, bf16, 1, KB_TILE_J, 0);
    for (; j < j1; j++)
        for (int t = 0; t < T; t++)
            kb_tile(x + (size_t)t * K, NULL, K, kb_row(wf, wh, (size_t)j, K),
                    y + (size_t)t * ldy + j, ldy, bf16, 1, 1, 0);
}

/* A tile of TT rows of x (xp: the same rows packed, or NULL) by n < TJ rows
 * of w (n a constant in each call, so every case is a tile kernel of its own). */
static inline __attribute__((always_inline)) void kb_tile_rest(const float *x, const float *xp,
                                                               int K, kb_wrow w, float *y, int ldy,
                                                               int bf16, int TT, int TJ, int n)
{
    (void)TJ; /* unused where tiles have 2 rows of w */
    if (n == 1)
        kb_tile(x, xp, K, w, y, ldy, bf16, TT, 1, 0);
#if KB_TILE_MAX_J > 2
    else if (n == 2 && TJ > 2)
        kb_tile(x, xp, K, w, y, ldy, bf16, TT, 2, 0);
#endif
#if KB_TILE_MAX_J > 3
    else if (n == 3 && TJ > 3)
        kb_tile(x, xp, K, w, y, ldy, bf16, TT, 3, 0);
#endif
    else
        for (int j = 0; j < n; j++)
            kb_tile(x, xp, K, kb_row(w.f, w.h, (size_t)j, K), y + j, ldy, bf16, TT, 1, 0);
}

/* A tile of m < TT rows of x (the last of a block; xp: packed, or NULL) by
 * TJ rows of w; m a constant in each call. */
static inline __attribute__((always_inline)) void kb_tile_short(const float *x, const float *xp,
                                                                int K, kb_wrow w, float *y, int ldy,
                                                                int bf16, int TT, int TJ, int m)
{
    (void)TT; /* unused where tiles have 2 rows of x */
#if KB_TILE_T > 2
    if (m == 2 && TT > 2) {
        kb_tile(x, xp, K, w, y, ldy, bf16, 2, TJ, 0);
        return;
    }
#endif
#if KB_TILE_T > 3
    if (m == 3 && TT > 3) {
        kb_tile(x, xp, K, w, y, ldy, bf16, 3, TJ, 0);
        return;
    }
#endif
    (void)xp;
    for (int t = 0; t < m; t++)
        kb_tile(x + (size_t)t * K, NULL, K, w, y + (size_t)t * ldy, ldy, bf16, 1, TJ, 0);
}

/* A path may pack each block of rows of x for its tiles (KB_X_PACK(x, T, K):
 * the packed block, or NULL to read x in place; KB_X_PACKED(xp, t, K): where
 * the tile from row t of the block starts in it). */
#ifndef KB_X_PACK
#define KB_X_PACK(x, T, K) ((void)(x), (void)(T), (void)(K), (const float *)NULL)
#define KB_X_PACKED(xp, t, K) ((void)(t), (void)(K), (xp))
#endif

/* Rows [j, j1) of w left over from whole tiles (a task's share need not divide the tile),
 * against rows [t0, t1) of x (xpk: packed from t0 on, or NULL): tiles of that many rows,
 * each tile of x reading them once. */
static inline __attribute__((always_inline)) void
kb_tiled_rest(const float *x, const float *xpk, int t0, int t1, int K, const float *wf,
              const uint16_t *wh, int j, int j1, float *y, int ldy, int bf16, int TT, int TJ)
{
    int t = t0;
    for (; t + TT <= t1; t += TT)
        kb_tile_rest(x + (size_t)t * K, xpk ? KB_X_PACKED(xpk, t - t0, K) : NULL, K,
                     kb_row(wf, wh, (size_t)j, K), y + (size_t)t * ldy + j, ldy, bf16, TT, TJ,
                     j1 - j);
    for (; j < j1; j++)
        for (int u = t; u < t1; u++)
            kb_tile(x + (size_t)u * K, NULL, K, kb_row(wf, wh, (size_t)j, K),
                    y + (size_t)u * ldy + j, ldy, bf16, 1, 1, 0);
}

/* Rows of x in tiles of TT x TJ (constants at each call), over blocks of x
 * that stay in L2. */
static inline __attribute__((always_inline)) void
kb_linear_tiled(const float *x, int T, int K, const float *wf, const uint16_t *wh, int j0, int j1,
                float *y, int ldy, int bf16, int TT, int TJ)
{
    int tb = kb_token_block(K);
    for (int t0 = 0; t0 < T; t0 += tb) {
        int t1 = t0 + tb < T ? t0 + tb : T;
        /* the tiles' rows packed for the path's own tile kernel, if it has one */
        const float *xpk =
            TT == KB_TILE_T && TJ == KB_TILE_J ? KB_X_PACK(x + (size_t)t0 * K, t1 - t0, K) : NULL;
#define KB_XP(t) (xpk ? KB_X_PACKED(xpk, (t)-t0, K) : NULL)
        int j = j0;
        for (; j + TJ <= j1; j += TJ) {
            kb_wrow wj = kb_row(wf, wh, (size_t)j, K);
#ifdef KB_PANEL_TILES
            /* the path's own loop over the block's tiles against these rows of w */
            if (xpk && KB_PANEL_TILES(xpk, t1 - t0, K, wj, y + (size_t)t0 * ldy + j, ldy, bf16,
                                      kb_pf(K, bf16)))
                continue;
#endif
            int t = t0;
            if (KB_TILE_PF_SHARE(TT, TJ) > 0) {
                /* the first KB_TILE_PF_SHARE(TT, TJ) tiles of x each prefetch their
                 * share of the next rows (the path folds the tile's index and the
                 * count into pf), so the prefetches are spread over more time */
                int n = (t1 - t0) / TT;
                n = n < KB_TILE_PF_SHARE(TT, TJ) ? n : KB_TILE_PF_SHARE(TT, TJ);
                for (int u = 0; u < n; t += TT, u++)
                    kb_tile(x + (size_t)t * K, KB_XP(t), K, wj, y + (size_t)t * ldy + j, ldy, bf16,
                            TT, TJ, kb_pf(K, bf16) << 16 | (size_t)u << 8 | (size_t)n);
            } else if (t + TT <= t1) {
                /* the first tile of x against these rows of w prefetches the next rows */
                kb_tile(x + (size_t)t * K, KB_XP(t), K, wj, y + (size_t)t * ldy + j, ldy, bf16, TT,
                        TJ, kb_pf(K, bf16));
                t += TT;
            }
            for (; t + TT <= t1; t += TT)
                kb_tile(x + (size_t)t * K, KB_XP(t), K, wj, y + (size_t)t * ldy + j, ldy, bf16, TT,
                        TJ, 0);
            if (t < t1)
                kb_tile_short(x + (size_t)t * K, KB_XP(t), K, wj, y + (size_t)t * ldy + j, ldy,
                              bf16, TT, TJ, t1 - t);
        }
        if (j < j1)
            kb_tiled_rest(x, xpk, t0, t1, K, wf, wh, j, j1, y, ldy, bf16, TT, TJ);
#undef KB_XP
    }
}

/* Each path of each weight type is a function of its own: inlined into one,
 * the tile kernels shared its registers and spilled (measured: batch-4
 * decode 5-10 % slower on the avx2 path). */
#define KB_PATH(name, body)                                                                        \
    static __attribute__((noinline)) void name(const float *x, int T, int K, const float *wf,      \
                                               const uint16_t *wh, int j0, int j1, float *y,       \
                                               int ldy)                                            \
    {                                                                                              \
        body;                                                                                      \
    }
KB_PATH(kb_narrow_f32, kb_linear_narrow(x, T, K, wf, wh, j0, j1, y, ldy, 0, KB_TILE_J1_F32, 0))
KB_PATH(kb_narrow1_bf16, kb_linear_narrow(x, T, K, wf, wh, j0, j1, y, ldy, 1, KB_TILE_J1,
                                          kb_pf_narrow(K, KB_TILE_J1)))
KB_PATH(kb_narrow_bf16,
        kb_linear_narrow(x, T, K, wf, wh, j0, j1, y, ldy, 1, KB_TILE_JN, kb_pf(K, 1)))
KB_PATH(kb_tiled_f32, kb_linear_tiled(x, T, K, wf, wh, j0, j1, y, ldy, 0, KB_TILE_T, KB_TILE_J))
KB_PATH(kb_tiled_bf16, kb_linear_tiled(x, T, K, wf, wh, j0, j1, y, ldy, 1, KB_TILE_T, KB_TILE_J))
#ifdef KB_SMALL_T
KB_PATH(kb_small_f32,
        kb_linear_tiled(x, T, K, wf, wh, j0, j1, y, ldy, 0, KB_SMALL_TILE_T, KB_SMALL_TILE_J))
KB_PATH(kb_small_bf16,
        kb_linear_tiled(x, T, K, wf, wh, j0, j1, y, ldy, 1, KB_SMALL_TILE_T, KB_SMALL_TILE_J))
#endif

/* The path for T rows of x, for f32 (wf) or bf16 (wh) weights. */
static void kb_linear_any(const float *x, int T, int K, const float *wf, const uint16_t *wh, int j0,
                          int j1, float *y, int ldy)
{
    int bf16 = wh != NULL;
    if (T < KB_NARROW_T)
        (bf16 ? (T == 1 ? kb_narrow1_bf16 : kb_narrow_bf16) : kb_narrow_f32)(x, T, K, wf, wh, j0,
                                                                             j1, y, ldy);
#ifdef KB_SMALL_T
    else if (T < (bf16 ? KB_SMALL_T_BF16 : KB_SMALL_T))
        (bf16 ? kb_small_bf16 : kb_small_f32)(x, T, K, wf, wh, j0, j1, y, ldy);
#endif
    else
        (bf16 ? kb_tiled_bf16 : kb_tiled_f32)(x, T, K, wf, wh, j0, j1, y, ldy);
}

static void kb_linear_f32(const float *x, int T, int K, const float *w, int j0, int j1, float *y,
                          int ldy)
{
    kb_linear_any(x, T, K, w, NULL, j0, j1, y, ldy);
}

static void kb_linear_bf16(const float *x, int T, int K, const uint16_t *w, int j0, int j1,
                           float *y, int ldy)
{
    kb_linear_any(x, T, K, NULL, w, j0, j1, y, ldy);
}

/* The sum of n floats (n a multiple of 64), read the way the kernels stream
 * weights: whole vectors in order, four cache lines an iteration, and with
 * `prefetch` each line fetched KB_PF_BYTES ahead as the bf16 tiles do. The
 * memory-bandwidth measurement's read; its value only keeps the loads. */
static float kb_stream_sum(const float *p, size_t n, int prefetch)
{
    vec16 a0 = V_ZERO(), a1 = V_ZERO(), a2 = V_ZERO(), a3 = V_ZERO(), one = V_SET1(1.0f);
    const size_t pf = KB_PF_BYTES / sizeof(float);
    (void)pf; /* a path without a prefetch instruction */
    for (size_t i = 0; i + 64 <= n; i += 64) {
        if (prefetch) {
            KB_PREFETCH(p + i + pf);
            KB_PREFETCH(p + i + pf + 16);
            KB_PREFETCH(p + i + pf + 32);
            KB_PREFETCH(p + i + pf + 48);
        }
        a0 = V_FMA(V_LOAD(p + i), one, a0);
        a1 = V_FMA(V_LOAD(p + i + 16), one, a1);
        a2 = V_FMA(V_LOAD(p + i + 32), one, a2);
        a3 = V_FMA(V_LOAD(p + i + 48), one, a3);
    }
    return v_reduce(a0) + v_reduce(a1) + v_reduce(a2) + v_reduce(a3);
}

const k_ops KB_OPS = {
    .name = KB_NAME,
    .dot = kb_dot,
    .axpy = kb_axpy,
    .gemm = kb_gemm,
    .silu_mul = KB_SILU_MUL,
    .linear_f32 = kb_linear_f32,
    .linear_bf16 = kb_linear_bf16,
    .linear_q8 = kq_linear, /* kernels_q8_body.h, via the isa_*.c */
    .q8_kernel = kq_kernel,
    .linear_q4 = k4_linear, /* kernels_q4_body.h, via the isa_*.c */
    .q4_kernel = k4_kernel,
    .linear_bd = bd_linear, /* bd_*.h, via the isa_*.c */
    .bd_kernel = bd_kernel,
    .stream_sum = kb_stream_sum,
};
