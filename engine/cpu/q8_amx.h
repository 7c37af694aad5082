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
 * bytes of the unit), and the A tile is 16 rows of x's int8 (32 bytes each,
 * K apart). tdpbssd multiplies signed by signed bytes into int32, exact (no
 * saturation: |dot| <= 32 * 127 * 127), so each group's integer is the one
 * every other path finds. Each group has a C tile of its own (zeroed, one
 * tdpbssd), stored, and each row's 16 int32 go through the same float step
 * as KQ512_COMBINE, group after group in order: the same bits. The q4
 * weights are unpacked (q in [-8, 7], signed) into that layout first.
 *
 * Tiles: C in tmm0-3 (four consecutive groups, so the stores and the float
 * step of one group overlap the tile work of the next), A in tmm4/5, B in
 * tmm6/7. The configuration is loaded at each kernel call and the tiles
 * released at its end, so whatever else a pool thread runs (a library with
 * a tile configuration of its own) neither breaks nor is broken by it, and
 * a context switch need not save tile state between calls.
 *
 * AMX is used for products of at least KQ_AMX_MIN_T rows of x; below that
 * (batch-1 decode) a 16-row tile would be mostly padding and vpdpbusd is
 * faster. Where the kernel, the compiler or the OS lacks AMX, or
 * MHLA_CPU_Q8_NO_AMX=1 (or MHLA_CPU_Q8_NO_DOT=1) is set, the vpdpbusd /
 * vpmaddubsw kernels run everywhere: tests run both on the same machine.
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

#ifndef KQ_AMX_MIN_T
#define KQ_AMX_MIN_T 8
#endif
/* Rows of x per pass over a task's weights (a multiple of 16) */
#ifndef KQ_AMX_TOKEN_BLOCK
#define KQ_AMX_TOKEN_BLOCK 32
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

/* One group's tile product into C tile i (a compile-time constant) */
#define KQ_AMX_DOT(i, ta, tb, g)                                                                   \
    do {                                                                                           \
        _tile_zero(i);                                                                             \
        _tile_loadd(ta, a + (size_t)(g)*KQ_GROUP, lda);                                            \
        _tile_loadd(tb, wb + (size_t)(g)*512, 64);                                                 \
        _tile_dpbssd(i, ta, tb);                                                                   \
    } while (0)

/* acc[m] (lane r) = the product of row m of the 16 at a (lda apart, group
 * scales at d, ldd apart) with row r of the block whose B tiles start at wb
 * and whose scales start at s: groups 4 at a time, the float step per row
 * in group order, as KQ512_COMBINE / k4_combine512 take it. */
KQ_AMX_ATTR static inline __attribute__((always_inline)) void
kq_amx_tile(const int8_t *a, size_t lda, const float *d, size_t ldd, const int8_t *wb,
            const void *s, int shift, int G, __m512 acc[16])
{
    int32_t c[4][16][16] __attribute__((aligned(64)));
    for (int m = 0; m < 16; m++)
        acc[m] = _mm512_setzero_ps();
    for (int g = 0; g < G; g += 4) {
        int n = G - g < 4 ? G - g : 4;
        KQ_AMX_DOT(0, 4, 6, g);
        if (n > 1)
            KQ_AMX_DOT(1, 5, 7, g + 1);
        if (n > 2)
            KQ_AMX_DOT(2, 4, 6, g + 2);
        if (n > 3)
            KQ_AMX_DOT(3, 5, 7, g + 3);
        _tile_stored(0, c[0], 64);
        if (n > 1)
            _tile_stored(1, c[1], 64);
        if (n > 2)
            _tile_stored(2, c[2], 64);
        if (n > 3)
            _tile_stored(3, c[3], 64);
        for (int i = 0; i < n; i++) {
            __m512 sc = kq_amx_scale(s, g + i, shift);
            for (int m = 0; m < 16; m++) {
                __m512 p = _mm512_mul_ps(sc, _mm512_set1_ps(d[(size_t)m * ldd + g + i]));
                acc[m] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)c[i][m])), p,
                                    acc[m]);
            }
        }
    }
}

/* A's source: x's rows in place, or (fewer than 16 in all) copied into a
 * buffer of 16 rows padded with zeros; NULL when that buffer cannot be had. */
typedef struct {
    const int8_t *q;
    const float *d;
    int rows; /* at least 16 */
} kq_amx_src;
static int kq_amx_source(const kq_act *x, int T, kq_amx_src *src)
{
    if (T >= 16) {
        *src = (kq_amx_src){x->q, x->d, T};
        return 0;
    }
    size_t qb = (size_t)16 * x->K, db = (size_t)16 * x->groups * sizeof(float);
    unsigned char *b = kq_amx_buf(0, qb + db);
    if (!b)
        return -1;
    memset(b, 0, qb + db);
    memcpy(b, x->q, (size_t)T * x->K);
    memcpy(b + qb, x->d, (size_t)T * x->groups * sizeof(float));
    *src = (kq_amx_src){(const int8_t *)b, (const float *)(b + qb), 16};
    return 0;
}

/* The block's outputs for rows [t, t1) of x: the 16-row tile that ends at t1
 * where fewer than 16 are left (rows before t computed again, not stored;
 * each row's result is its own, so the same bits). */
KQ_AMX_ATTR static inline __attribute__((always_inline)) void
kq_amx_rows(const kq_amx_src *src, const kq_act *x, int t, int t1, const int8_t *wb, const void *s,
            int shift, int cols, float *yb, int ldy)
{
    int t0 = t1 - t < 16 ? t1 - 16 : t;
    if (t0 < 0)
        t0 = 0;
    __m512 acc[16];
    kq_amx_tile(src->q + (size_t)t0 * x->K, (size_t)x->K, src->d + (size_t)t0 * x->groups,
                (size_t)x->groups, wb, s, shift, x->groups, acc);
    __mmask16 mk = (__mmask16)((1u << cols) - 1u);
    for (int m = t - t0; m < 16 && t0 + m < t1; m++)
        _mm512_mask_storeu_ps(yb + (size_t)(t0 + m) * ldy, mk, acc[m]);
}

KQ_AMX_ATTR static void kq_amx_q8(const kq_amx_src *src, const kq_act *x, int T,
                                  const k_q8_matrix *w, int b0, int b1, float *y, int ldy)
{
    const int G = w->groups;
    for (int t0 = 0; t0 < T; t0 += KQ_AMX_TOKEN_BLOCK) {
        int t1 = t0 + KQ_AMX_TOKEN_BLOCK < T ? t0 + KQ_AMX_TOKEN_BLOCK : T;
        for (int b = b0; b < b1; b++) {
            const int8_t *wb = w->q + (size_t)b * G * 512;
            const float *sb = w->scale + (size_t)b * G * KQ_ROWS;
            int cols = w->N - b * KQ_ROWS < KQ_ROWS ? w->N - b * KQ_ROWS : KQ_ROWS;
            for (int t = t0; t < t1; t += 16)
                kq_amx_rows(src, x, t, t + 16 < t1 ? t + 16 : t1, wb, sb, -1, cols,
                            y + (size_t)b * KQ_ROWS, ldy);
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

KQ_AMX_ATTR static void kq_amx_q4(const kq_amx_src *src, const kq_act *x, int T,
                                  const k_q8_matrix *w, int b0, int b1, float *y, int ldy,
                                  int8_t *wbuf)
{
    const int G = w->groups, shift = k4_shift(w->wgroup), GW = w->K / w->wgroup;
    const uint8_t *q = (const uint8_t *)w->q;
    for (int t0 = 0; t0 < T; t0 += KQ_AMX_TOKEN_BLOCK) {
        int t1 = t0 + KQ_AMX_TOKEN_BLOCK < T ? t0 + KQ_AMX_TOKEN_BLOCK : T;
        for (int b = b0; b < b1; b++) {
            kq_amx_unpack4(q + (size_t)b * G * 256, G, wbuf);
            const uint16_t *sh = w->scale_h + (size_t)b * GW * KQ_ROWS;
            int cols = w->N - b * KQ_ROWS < KQ_ROWS ? w->N - b * KQ_ROWS : KQ_ROWS;
            for (int t = t0; t < t1; t += 16)
                kq_amx_rows(src, x, t, t + 16 < t1 ? t + 16 : t1, wbuf, sh, shift, cols,
                            y + (size_t)b * KQ_ROWS, ldy);
        }
    }
}

/* The product on the tiles: -1 (nothing done) when a buffer cannot be had */
KQ_AMX_ATTR static int kq_amx_linear(const kq_act *x, int T, const k_q8_matrix *w, int b0, int b1,
                                     float *y, int ldy)
{
    kq_amx_src src;
    int8_t *wbuf = NULL;
    if (kq_amx_source(x, T, &src))
        return -1;
    if (w->bits == 4 && !(wbuf = (int8_t *)kq_amx_buf(1, (size_t)w->groups * 512)))
        return -1;
    kq_amx_begin();
    if (w->bits == 4)
        kq_amx_q4(&src, x, T, w, b0, b1, y, ldy, wbuf);
    else
        kq_amx_q8(&src, x, T, w, b0, b1, y, ldy);
    _tile_release();
    return 0;
}
#define KQ_AMX_RUN(x, T, w, b0, b1, y, ldy)                                                        \
    ((T) >= KQ_AMX_MIN_T && kq_use_amx() &&                                                        \
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
