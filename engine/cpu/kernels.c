#include "kernels.h"

#include <math.h>
#include <string.h>

#if defined(__AVX512F__)
#include <immintrin.h>

typedef __m512 vec16;
#define V_ZERO() _mm512_setzero_ps()
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_LOAD_TAIL(p, n) _mm512_maskz_loadu_ps((__mmask16)((1u << (n)) - 1u), (p))
#define V_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define V_SET1(s) _mm512_set1_ps(s)
#define V_LOAD_BF16(p)                                                                           \
    _mm512_castsi512_ps(                                                                         \
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define V_LOAD_BF16_TAIL(p, n)                                                                   \
    _mm512_castsi512_ps(_mm512_slli_epi32(                                                       \
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

#else /* portable: the same lanes, the same roundings */

typedef struct {
    float l[16];
} vec16;

static inline vec16 V_ZERO(void)
{
    vec16 v;
    memset(&v, 0, sizeof v);
    return v;
}
static inline vec16 V_LOAD(const float *p)
{
    vec16 v;
    memcpy(v.l, p, sizeof v.l);
    return v;
}
static inline vec16 V_LOAD_TAIL(const float *p, int n)
{
    vec16 v = V_ZERO();
    memcpy(v.l, p, (size_t)n * sizeof(float));
    return v;
}
static inline vec16 V_FMA(vec16 a, vec16 b, vec16 c)
{
    for (int i = 0; i < 16; i++)
        c.l[i] = fmaf(a.l[i], b.l[i], c.l[i]);
    return c;
}
static inline vec16 V_LOAD_BF16_TAIL(const uint16_t *p, int n)
{
    vec16 v = V_ZERO();
    for (int i = 0; i < n; i++)
        v.l[i] = mhla_f32_from_bf16(p[i]);
    return v;
}
static inline vec16 V_LOAD_BF16(const uint16_t *p) { return V_LOAD_BF16_TAIL(p, 16); }
static inline vec16 V_SET1(float s)
{
    vec16 v;
    for (int i = 0; i < 16; i++)
        v.l[i] = s;
    return v;
}
static inline void V_STORE(float *p, vec16 v) { memcpy(p, v.l, sizeof v.l); }
static inline void V_STORE_TAIL(float *p, vec16 v, int n)
{
    memcpy(p, v.l, (size_t)n * sizeof(float));
}
static inline float v_reduce(vec16 v)
{
    float s8[8], s4[4], s2[2];
    for (int i = 0; i < 8; i++)
        s8[i] = v.l[i] + v.l[i + 8];
    for (int i = 0; i < 4; i++)
        s4[i] = s8[i] + s8[i + 4];
    for (int i = 0; i < 2; i++)
        s2[i] = s4[i] + s4[i + 2];
    return s2[0] + s2[1];
}
#endif

float k_dot(const float *a, const float *b, int n)
{
    vec16 acc = V_ZERO();
    int i = 0;
    for (; i + 16 <= n; i += 16)
        acc = V_FMA(V_LOAD(a + i), V_LOAD(b + i), acc);
    if (i < n)
        acc = V_FMA(V_LOAD_TAIL(a + i, n - i), V_LOAD_TAIL(b + i, n - i), acc);
    return v_reduce(acc);
}

/* A row pointer into a k_matrix; `bf16` is a compile-time constant at every
 * call site, so each kernel is specialised for one storage type. */
typedef struct {
    const float *f;
    const uint16_t *h;
} wrow;

static inline __attribute__((always_inline)) vec16 w_load(wrow w, size_t i, int bf16)
{
    return bf16 ? V_LOAD_BF16(w.h + i) : V_LOAD(w.f + i);
}
static inline __attribute__((always_inline)) vec16 w_load_tail(wrow w, size_t i, int n, int bf16)
{
    return bf16 ? V_LOAD_BF16_TAIL(w.h + i, n) : V_LOAD_TAIL(w.f + i, n);
}

/* 4 rows of x against 4 rows of w: 16 dot products, each in canonical order. */
static inline __attribute__((always_inline)) void tile_4x4(const float *x, int K, wrow w, float *y,
                                                            int ldy, int bf16)
{
    vec16 acc[4][4];
    for (int t = 0; t < 4; t++)
        for (int j = 0; j < 4; j++)
            acc[t][j] = V_ZERO();
    int i = 0;
    for (; i + 16 <= K; i += 16) {
        vec16 xv[4], wv[4];
        for (int t = 0; t < 4; t++)
            xv[t] = V_LOAD(x + (size_t)t * K + i);
        for (int j = 0; j < 4; j++)
            wv[j] = w_load(w, (size_t)j * K + i, bf16);
        for (int t = 0; t < 4; t++)
            for (int j = 0; j < 4; j++)
                acc[t][j] = V_FMA(xv[t], wv[j], acc[t][j]);
    }
    if (i < K) {
        int r = K - i;
        vec16 xv[4], wv[4];
        for (int t = 0; t < 4; t++)
            xv[t] = V_LOAD_TAIL(x + (size_t)t * K + i, r);
        for (int j = 0; j < 4; j++)
            wv[j] = w_load_tail(w, (size_t)j * K + i, r, bf16);
        for (int t = 0; t < 4; t++)
            for (int j = 0; j < 4; j++)
                acc[t][j] = V_FMA(xv[t], wv[j], acc[t][j]);
    }
    for (int t = 0; t < 4; t++)
        for (int j = 0; j < 4; j++)
            y[(size_t)t * ldy + j] = v_reduce(acc[t][j]);
}

/* 1 row of x against 4 rows of w. */
static inline __attribute__((always_inline)) void tile_1x4(const float *x, int K, wrow w, float *y,
                                                            int bf16)
{
    vec16 acc[4];
    for (int j = 0; j < 4; j++)
        acc[j] = V_ZERO();
    int i = 0;
    for (; i + 16 <= K; i += 16) {
        vec16 xv = V_LOAD(x + i);
        for (int j = 0; j < 4; j++)
            acc[j] = V_FMA(xv, w_load(w, (size_t)j * K + i, bf16), acc[j]);
    }
    if (i < K) {
        int r = K - i;
        vec16 xv = V_LOAD_TAIL(x + i, r);
        for (int j = 0; j < 4; j++)
            acc[j] = V_FMA(xv, w_load_tail(w, (size_t)j * K + i, r, bf16), acc[j]);
    }
    for (int j = 0; j < 4; j++)
        y[j] = v_reduce(acc[j]);
}

/* 1 row of x against 1 row of w: the canonical dot product. */
static inline __attribute__((always_inline)) float tile_1x1(const float *x, int K, wrow w, int bf16)
{
    vec16 acc = V_ZERO();
    int i = 0;
    for (; i + 16 <= K; i += 16)
        acc = V_FMA(V_LOAD(x + i), w_load(w, (size_t)i, bf16), acc);
    if (i < K)
        acc = V_FMA(V_LOAD_TAIL(x + i, K - i), w_load_tail(w, (size_t)i, K - i, bf16), acc);
    return v_reduce(acc);
}

static inline wrow row_of(k_matrix w, size_t j, int K)
{
    wrow r = {w.f32 ? w.f32 + j * K : NULL, w.bf16 ? w.bf16 + j * K : NULL};
    return r;
}

/* Tokens per cache block: a block of x stays in L2 while a thread sweeps its
 * rows of w over it, so w is streamed from memory once per block. */
#define TOKEN_BLOCK 32

static inline __attribute__((always_inline)) void
linear_range(const float *x, int T, int K, k_matrix w, int j0, int j1, float *y, int ldy, int bf16)
{
    for (int t0 = 0; t0 < T; t0 += TOKEN_BLOCK) {
        int t1 = t0 + TOKEN_BLOCK < T ? t0 + TOKEN_BLOCK : T;
        int j = j0;
        for (; j + 4 <= j1; j += 4) {
            wrow wj = row_of(w, (size_t)j, K);
            int t = t0;
            for (; t + 4 <= t1; t += 4)
                tile_4x4(x + (size_t)t * K, K, wj, y + (size_t)t * ldy + j, ldy, bf16);
            for (; t < t1; t++)
                tile_1x4(x + (size_t)t * K, K, wj, y + (size_t)t * ldy + j, bf16);
        }
        for (; j < j1; j++)
            for (int t = t0; t < t1; t++)
                y[(size_t)t * ldy + j] = tile_1x1(x + (size_t)t * K, K, row_of(w, (size_t)j, K), bf16);
    }
}

static void linear_range_f32(const float *x, int T, int K, k_matrix w, int j0, int j1, float *y,
                             int ldy)
{
    linear_range(x, T, K, w, j0, j1, y, ldy, 0);
}

static void linear_range_bf16(const float *x, int T, int K, k_matrix w, int j0, int j1, float *y,
                              int ldy)
{
    linear_range(x, T, K, w, j0, j1, y, ldy, 1);
}

void k_linear(const float *x, int T, int K, k_matrix w, int N, float *y, int ldy, int n_threads)
{
    /* Split the output columns in multiples of 4 so threads stay on the fast
     * tiles; the arithmetic of each value is the same whoever computes it. */
    int groups = (N + 3) / 4;
    int parts = n_threads < groups ? n_threads : groups;
    if (parts < 1)
        parts = 1;
    if ((long)T * K * N < 64L * 1024)
        parts = 1; /* too small to be worth waking threads */
#pragma omp parallel for num_threads(parts) schedule(static, 1) if (parts > 1)
    for (int p = 0; p < parts; p++) {
        int g0 = (int)((long)groups * p / parts), g1 = (int)((long)groups * (p + 1) / parts);
        int j0 = g0 * 4, j1 = g1 * 4 < N ? g1 * 4 : N;
        if (w.bf16)
            linear_range_bf16(x, T, K, w, j0, j1, y, ldy);
        else
            linear_range_f32(x, T, K, w, j0, j1, y, ldy);
    }
}

void k_rmsnorm(const float *x, const float *w, int n, float eps, float *out)
{
    float ms = k_dot(x, x, n) / (float)n;
    float inv = 1.0f / sqrtf(ms + eps);
    for (int i = 0; i < n; i++)
        out[i] = x[i] * inv * w[i];
}

void k_axpy(float s, const float *row, float *acc, int n)
{
    vec16 sv = V_SET1(s);
    int c = 0;
    for (; c + 16 <= n; c += 16)
        V_STORE(acc + c, V_FMA(sv, V_LOAD(row + c), V_LOAD(acc + c)));
    if (c < n)
        V_STORE_TAIL(acc + c, V_FMA(sv, V_LOAD_TAIL(row + c, n - c), V_LOAD_TAIL(acc + c, n - c)),
                     n - c);
}
