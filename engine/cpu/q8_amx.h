/*
 * q8_amx.h — the q8 and q4 products (kernels_q8.h, kernels_q4.h) on AMX-INT8,
 * and the choice among this path's kernels. Included by isa_avx512.c after
 * q8_avx512.h and q4_avx512.h.
 *
 * Why AMX: vpdpbusd spends 8 instructions on a group of 32 for one row of x
 * against 16 rows of w; one tdpbssd computes a group for 16 rows of x
 * against 16 rows of w (16 x 16 exact int32 dots). Prefill and batched
 * decode are compute-bound on the vector units, so the tiles free them for
 * the float side alone.
 *
 * Why the bits stay the same: the packed q8 block (kernels_q8.h) is already
 * AMX's B-tile layout (8 rows of 64 bytes: unit u, then row r, then the 4
 * bytes of the unit), and an A tile is 16 rows of x's int8, one group of 32
 * bytes each (packed per tile first: kq_amx_pack). tdpbssd multiplies
 * signed by signed bytes into int32, exact (no saturation: |dot| <= 32 *
 * 127 * 127), so each group's integer is the one every other path finds.
 * Each group has a C tile of its own (zeroed, one tdpbssd), stored, and
 * each row's 16 int32 go through the same float step as KQ512_COMBINE,
 * group after group in order: the same bits. The q4 weights are unpacked
 * (q in [-8, 7], signed) into that layout first, a block at a time.
 *
 * Tiles: C in tmm0-3 (two sets of two groups, so that the tiles compute one
 * pair while the vector units take the float step of the other), A in
 * tmm4/5, B in tmm6/7. The configuration is loaded at each kernel call and
 * the tiles released at its end, so whatever else a pool thread runs (a
 * library with a tile configuration of its own) neither breaks nor is
 * broken by it, and a context switch need not save tile state between
 * calls.
 *
 * AMX is used for products of at least KQ_AMX_MIN_T_Q8 (q4: _Q4) rows of x:
 * below that (batch-1 decode) a 16-row tile is mostly padding and vpdpbusd
 * is as fast or faster, for q4 up to more rows, since each pass first
 * unpacks its weights (measured with bench_products: bench/RESULTS.md).
 * Where the CPU, the compiler or the OS lacks AMX, or MHLA_CPU_Q8_NO_AMX=1
 * (or MHLA_CPU_Q8_NO_DOT=1) is set, the vpdpbusd / vpmaddubsw kernels run
 * everywhere: tests run both on the same machine.
 */
#include "kernels_q4.h"

#include <cpuid.h>
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__) && defined(__GNUC__) &&                                                     \
    (defined(__clang__) ? __clang_major__ >= 12 : __GNUC__ >= 11)
#define KQ_HAVE_AMX 1
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define KQ_HAVE_AMX 0
#endif

#ifndef KQ_AMX_MIN_T_Q8
#define KQ_AMX_MIN_T_Q8 6
#endif
/* q4 from 12 rows: with the first tile of a pass prefetching its weights, vpdpbusd runs batch-8
 * decode of the 340M shape 1.2-1.3x the tiles' rate and batch 10 1.06-1.10x, batch 12 is even
 * and batch 16 0.88x (bench/RESULTS.md, "The first tile of a pass prefetches") */
#ifndef KQ_AMX_MIN_T_Q4
#define KQ_AMX_MIN_T_Q4 12
#endif
/* Rows of x per pass over a task's weights (a multiple of 16): 16 to 128
 * measured, 64 the fastest within the noise (bench/RESULTS.md) */
#ifndef KQ_AMX_TOKEN_BLOCK
#define KQ_AMX_TOKEN_BLOCK 64
#endif

#if KQ_HAVE_AMX

#define KQ_AMX_ATTR __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,fma")))

/* Linux grants the tile state (8 KiB of XSAVE area) only on request; the OS
 * must then have it enabled in XCR0 (bits 17, 18). */
static int kq_amx_enable(void)
{
    unsigned a, b, c, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((d >> 24) & 1) || !((d >> 25) & 1))
        return 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) /* OSXSAVE, for xgetbv */
        return 0;
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) != 0)
        return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return ((lo >> 17) & 3) == 3;
}

static int kq_use_amx(void)
{
    static _Atomic int v = -1; /* set once; every thread finds the same answer */
    if (v < 0) {
        const char *off = getenv("MHLA_CPU_Q8_NO_AMX");
        v = kq_use_vnni() && !(off && off[0] == '1') && kq_amx_enable();
    }
    return v;
}

/* The calling thread's buffer for the q4 weights unpacked, or for x's rows
 * padded to a tile: kept for its next calls, freed when the thread ends. */
static pthread_key_t kq_amx_key;
static pthread_once_t kq_amx_once = PTHREAD_ONCE_INIT;
static int kq_amx_key_ok;
static _Thread_local unsigned char *kq_amx_mem[2];
static _Thread_local size_t kq_amx_cap[2];
static void kq_amx_free(void *p)
{
    unsigned char **m = p;
    free(m[0]);
    free(m[1]);
}
static void kq_amx_key_init(void)
{
    kq_amx_key_ok = pthread_key_create(&kq_amx_key, kq_amx_free) == 0;
}
static unsigned char *kq_amx_buf(int i, size_t bytes)
{
    if (bytes <= kq_amx_cap[i])
        return kq_amx_mem[i];
    pthread_once(&kq_amx_once, kq_amx_key_init);
    bytes = (bytes + 63) & ~(size_t)63;
    unsigned char *b = kq_amx_key_ok ? aligned_alloc(64, bytes) : NULL;
    if (!b || pthread_setspecific(kq_amx_key, kq_amx_mem) != 0) {
        free(b);
        return NULL;
    }
    free(kq_amx_mem[i]);
    kq_amx_mem[i] = b;
    kq_amx_cap[i] = bytes;
    return b;
}

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} kq_amx_cfg;

KQ_AMX_ATTR static void kq_amx_begin(void)
{
    kq_amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 4; i++) { /* C: 16 rows of x by 16 int32 */
        c.rows[i] = 16;
        c.colsb[i] = 64;
    }
    for (int i = 4; i < 6; i++) { /* A: 16 rows of x by one group of 32 bytes */
        c.rows[i] = 16;
        c.colsb[i] = 32;
    }
    for (int i = 6; i < 8; i++) { /* B: a packed group, 8 units by 16 rows of w */
        c.rows[i] = 8;
        c.colsb[i] = 64;
    }
    _tile_loadconfig(&c);
}

/* The scales of group g's 16 rows of w: f32 (q8), or f16 widened (q4, shift >= 0) */
KQ_AMX_ATTR static inline __attribute__((always_inline)) __m512 kq_amx_scale(const void *s, int g,
                                                                             int shift)
{
    if (shift < 0)
        return _mm512_loadu_ps((const float *)s + (size_t)g * KQ_ROWS);
    return _mm512_cvtph_ps(_mm256_loadu_si256(
        (const __m256i *)((const uint16_t *)s + (size_t)(g >> shift) * KQ_ROWS)));
}

/* A pass's first tile reads its weights from memory: q8's are asked for this far ahead, q4's
 * (unpacked a block at a time) a block ahead */
#ifndef KQ_AMX_PREFETCH_BYTES
#define KQ_AMX_PREFETCH_BYTES 2048
#endif

/* One group's tile product into C tile i (a compile-time constant), and the prefetch of the
 * group's share of the weights ahead (pf: NULL for none; pfs bytes a group) */
#define KQ_AMX_DOT(i, ta, tb, g)                                                                   \
    do {                                                                                           \
        if (pf)                                                                                    \
            for (int l_ = 0; l_ < pfs; l_ += 64)                                                   \
                _mm_prefetch(pf + (size_t)(g)*pfs + l_, _MM_HINT_T0);                              \
        _tile_zero(i);                                                                             \
        _tile_loadd(ta, a + (size_t)(g)*512, 32);                                                  \
        _tile_loadd(tb, wb + (size_t)(g)*512, 64);                                                 \
        _tile_dpbssd(i, ta, tb);                                                                   \
    } while (0)

/* Two groups' products into C tiles c0 and c1 (n of them, 1 or 2), and their stores */
#define KQ_AMX_PAIR(c0, c1, g, n)                                                                  \
    do {                                                                                           \
        KQ_AMX_DOT(c0, 4, 6, g);                                                                   \
        if ((n) > 1)                                                                               \
            KQ_AMX_DOT(c1, 5, 7, (g) + 1);                                                         \
    } while (0)
#define KQ_AMX_STORE(c0, c1, buf, n)                                                               \
    do {                                                                                           \
        _tile_stored(c0, (buf)[0], 64);                                                            \
        if ((n) > 1)                                                                               \
            _tile_stored(c1, (buf)[1], 64);                                                        \
    } while (0)

/* The float step of groups g and g + 1 (n of them) for the 16 rows, from their stored dots */
KQ_AMX_ATTR static inline __attribute__((always_inline)) void
kq_amx_combine(int32_t c[2][16][16], const float *d, const void *s, int shift, int g, int n,
               __m512 acc[16])
{
    for (int i = 0; i < n; i++) {
        __m512 sc = kq_amx_scale(s, g + i, shift);
        for (int m = 0; m < 16; m++) {
            __m512 p = _mm512_mul_ps(sc, _mm512_set1_ps(d[(size_t)(g + i) * 16 + m]));
            acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)c[i][m])),
                                     p, acc[m]);
        }
    }
}

static inline int kq_amx_left(int G, int g) { return G - g < 0 ? 0 : G - g < 2 ? G - g : 2; }

/* acc[m] (lane r) = the product of row m of a packed tile of x (kq_amx_pack)
 * with row r of the block whose B tiles start at wb
 * and whose scales start at s. Groups go in pairs through two sets of C
 * tiles (0-1, 2-3): the tiles compute the next pair while the vector units
 * take the last one's float step, in group order for every row. */
KQ_AMX_ATTR static inline __attribute__((always_inline)) void
kq_amx_tile(const int8_t *a, const float *d, const int8_t *wb, const void *s, int shift, int G,
            const char *pf, int pfs, __m512 acc[16])
{
    int32_t c[2][2][16][16] __attribute__((aligned(64)));
    for (int m = 0; m < 16; m++)
        acc[m] = _mm512_setzero_ps();
    KQ_AMX_PAIR(0, 1, 0, kq_amx_left(G, 0));
    KQ_AMX_STORE(0, 1, c[0], kq_amx_left(G, 0));
    for (int g = 0; g < G; g += 4) {
        int n1 = kq_amx_left(G, g + 2), n2 = kq_amx_left(G, g + 4);
        if (n1)
            KQ_AMX_PAIR(2, 3, g + 2, n1);
        kq_amx_combine(c[0], d, s, shift, g, kq_amx_left(G, g), acc);
        if (!n1)
            break;
        KQ_AMX_STORE(2, 3, c[1], n1);
        if (n2)
            KQ_AMX_PAIR(0, 1, g + 4, n2);
        kq_amx_combine(c[1], d, s, shift, g + 2, n1, acc);
        if (n2)
            KQ_AMX_STORE(0, 1, c[0], n2);
    }
}

/* Rows [t0, t1) of x as A tiles of 16 rows, zeros past t1: tile u's group g
 * at qp + (u G + g) 512 (row m at + 32 m), its scales at dp + (u G + g) 16.
 * In place, a tile's rows would lie K bytes apart: 16 lines to load for 512
 * bytes, and at K a multiple of 1 KiB all in a few of the L1's sets, which
 * the weights streaming through evict; packed, a tile's group is 8 lines in
 * a row, read against every block of the task. */
static void kq_amx_pack(const kq_act *x, int t0, int t1, int8_t *qp, float *dp)
{
    const int G = x->groups, tiles = (t1 - t0 + 15) / 16;
    for (int u = 0; u < tiles; u++)
        for (int m = 0; m < 16; m++) {
            int t = t0 + 16 * u + m;
            for (int g = 0; g < G; g++) {
                int8_t *q = qp + ((size_t)u * G + g) * 512 + m * KQ_GROUP;
                float *d = dp + ((size_t)u * G + g) * 16 + m;
                if (t < t1) {
                    memcpy(q, x->q + (size_t)t * x->K + g * KQ_GROUP, KQ_GROUP);
                    *d = x->d[(size_t)t * G + g];
                } else {
                    memset(q, 0, KQ_GROUP);
                    *d = 0.0f;
                }
            }
        }
}

/* Block b's 4-bit groups as int8 B tiles (q = nibble - 8), 512 bytes a group */
KQ_AMX_ATTR static void kq_amx_unpack4(const uint8_t *wb, int G, int8_t *out)
{
    const __m512i lo = _mm512_set1_epi8(15), eight = _mm512_set1_epi8(8);
    for (int g = 0; g < G; g++)
        for (int u = 0; u < 4; u++) {
            __m512i v = _mm512_loadu_si512(wb + (size_t)g * 256 + u * 64);
            __m512i l = _mm512_sub_epi8(_mm512_and_si512(v, lo), eight);
            __m512i h = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), lo), eight);
            _mm512_store_si512((void *)(out + (size_t)g * 512 + u * 64), l);
            _mm512_store_si512((void *)(out + (size_t)g * 512 + (u + 4) * 64), h);
        }
}

/* The packed rows [t0, t1) against row blocks [b0, b1) of w (q4: each
 * block's groups unpacked into wbuf first) */
KQ_AMX_ATTR static inline __attribute__((always_inline)) void
kq_amx_blocks(const k_q8_matrix *w, int q4, int b0, int b1, int t0, int t1, const int8_t *qp,
              const float *dp, int8_t *wbuf, float *y, int ldy)
{
    const int G = w->groups, shift = q4 ? k4_shift(w->wgroup) : -1;
    const size_t ss = (size_t)(q4 ? w->K / w->wgroup : G) * KQ_ROWS; /* a block's scales */
    const int pfs = q4 ? 256 : 512;
    for (int b = b0; b < b1; b++) {
        const int8_t *wb = w->q + (size_t)b * G * 512;
        const char *pf = q4 ? (const char *)w->q + (size_t)(b + 1) * G * 256
                            : (const char *)wb + KQ_AMX_PREFETCH_BYTES;
        const void *s = w->scale + b * ss;
        if (q4) {
            kq_amx_unpack4((const uint8_t *)w->q + (size_t)b * G * 256, G, wbuf);
            wb = wbuf;
            s = w->scale_h + b * ss;
        }
        int cols = w->N - b * KQ_ROWS < KQ_ROWS ? w->N - b * KQ_ROWS : KQ_ROWS;
        __mmask16 mk = (__mmask16)((1u << cols) - 1u);
        for (int u = 0; 16 * u < t1 - t0; u++) {
            __m512 acc[16];
            kq_amx_tile(qp + (size_t)u * G * 512, dp + (size_t)u * G * 16, wb, s, shift, G,
                        u == 0 && (!q4 || b + 1 < b1) ? pf : NULL, pfs, acc);
            for (int m = 0; m < 16 && t0 + 16 * u + m < t1; m++)
                _mm512_mask_storeu_ps(y + (size_t)(t0 + 16 * u + m) * ldy + (size_t)b * KQ_ROWS, mk,
                                      acc[m]);
        }
    }
}

KQ_AMX_ATTR static void kq_amx_blocks_q8(const k_q8_matrix *w, int b0, int b1, int t0, int t1,
                                         const int8_t *qp, const float *dp, float *y, int ldy)
{
    kq_amx_blocks(w, 0, b0, b1, t0, t1, qp, dp, NULL, y, ldy);
}

KQ_AMX_ATTR static void kq_amx_blocks_q4(const k_q8_matrix *w, int b0, int b1, int t0, int t1,
                                         const int8_t *qp, const float *dp, int8_t *wbuf, float *y,
                                         int ldy)
{
    kq_amx_blocks(w, 1, b0, b1, t0, t1, qp, dp, wbuf, y, ldy);
}

/* The product on the tiles, a pass over the task's blocks per KQ_AMX_TOKEN_BLOCK
 * rows of x: -1 (nothing done) when a buffer cannot be had */
KQ_AMX_ATTR static int kq_amx_linear(const kq_act *x, int T, const k_q8_matrix *w, int b0, int b1,
                                     float *y, int ldy)
{
    const size_t TB = KQ_AMX_TOKEN_BLOCK, G = (size_t)w->groups;
    unsigned char *buf = kq_amx_buf(0, TB * G * (KQ_GROUP + sizeof(float)));
    int8_t *wbuf = NULL;
    if (!buf || (w->bits == 4 && !(wbuf = (int8_t *)kq_amx_buf(1, G * 512))))
        return -1;
    int8_t *qp = (int8_t *)buf;
    float *dp = (float *)(buf + TB * G * KQ_GROUP);
    kq_amx_begin();
    for (int t0 = 0; t0 < T; t0 += (int)TB) {
        int t1 = t0 + (int)TB < T ? t0 + (int)TB : T;
        kq_amx_pack(x, t0, t1, qp, dp);
        if (w->bits == 4)
            kq_amx_blocks_q4(w, b0, b1, t0, t1, qp, dp, wbuf, y, ldy);
        else
            kq_amx_blocks_q8(w, b0, b1, t0, t1, qp, dp, y, ldy);
    }
    _tile_release();
    return 0;
}
#define KQ_AMX_RUN(x, T, w, b0, b1, y, ldy)                                                        \
    ((T) >= ((w)->bits == 4 ? KQ_AMX_MIN_T_Q4 : KQ_AMX_MIN_T_Q8) && kq_use_amx() &&                \
     kq_amx_linear((x), (T), (w), (b0), (b1), (y), (ldy)) == 0)
#else
#define KQ_AMX_RUN(x, T, w, b0, b1, y, ldy) 0
static int kq_use_amx(void) { return 0; }
#endif /* KQ_HAVE_AMX */

/* The kernels this path runs: the tiles for enough rows of x, else vpdpbusd
 * (or vpmaddubsw without VNNI or with MHLA_CPU_Q8_NO_DOT=1). */
static void kq_linear(const kq_act *x, int T, const k_q8_matrix *w, int b0, int b1, float *y,
                      int ldy)
{
    if (KQ_AMX_RUN(x, T, w, b0, b1, y, ldy))
        return;
    if (kq_use_vnni())
        kq_linear_vnni(x, T, w, b0, b1, y, ldy);
    else
        kq_linear_bw(x, T, w, b0, b1, y, ldy);
}

static void k4_linear(const kq_act *x, int T, const k_q8_matrix *w, int b0, int b1, float *y,
                      int ldy)
{
    if (KQ_AMX_RUN(x, T, w, b0, b1, y, ldy))
        return;
    if (kq_use_vnni())
        k4_linear_vnni(x, T, w, b0, b1, y, ldy);
    else
        k4_linear_bw(x, T, w, b0, b1, y, ldy);
}

static const char *kq_kernel(void)
{
    return kq_use_amx() ? "amx-int8+vpdpbusd" : kq_use_vnni() ? "vpdpbusd" : "vpmaddubsw";
}
static const char *k4_kernel(void) { return kq_kernel(); }
