/*
 * silu_avx2.h — k_silu_mul on the avx2 path (included by isa_avx2.c): e^-x in double by
 * exactly the operations of kernels.c's scalar exp_d, so the same bits as k_silu.
 */
#include "isa.h"

#include <immintrin.h>

/* e^x for 4 doubles by exactly kernels.c exp_d's operations (no fused multiply-add: the
 * tree is built with -ffp-contract=off), for x in [-110, 89]. */
static inline __m256d exp_d4(__m256d x)
{
    __m256d k = _mm256_floor_pd(
        _mm256_add_pd(_mm256_mul_pd(x, _mm256_set1_pd(K_EXP_INV)), _mm256_set1_pd(0.5)));
    __m256d r = _mm256_sub_pd(_mm256_sub_pd(x, _mm256_mul_pd(k, _mm256_set1_pd(K_EXP_HI))),
                              _mm256_mul_pd(k, _mm256_set1_pd(K_EXP_LO)));
    __m256d p =
        _mm256_add_pd(_mm256_set1_pd(1.0 / 24), _mm256_mul_pd(r, _mm256_set1_pd(1.0 / 120)));
    p = _mm256_add_pd(_mm256_set1_pd(1.0 / 6), _mm256_mul_pd(r, p));
    p = _mm256_add_pd(_mm256_set1_pd(0.5), _mm256_mul_pd(r, p));
    p = _mm256_add_pd(_mm256_set1_pd(1.0), _mm256_mul_pd(r, p));
    p = _mm256_mul_pd(r, p);
    __m128i ki = _mm256_cvttpd_epi32(k);
    __m256d t = _mm256_i32gather_pd(k_exp2_32, _mm_and_si128(ki, _mm_set1_epi32(31)), 8);
    __m256i e2 = _mm256_slli_epi64(_mm256_cvtepi32_epi64(
                                       _mm_add_epi32(_mm_srai_epi32(ki, 5), _mm_set1_epi32(1023))),
                                   52);
    return _mm256_mul_pd(_mm256_add_pd(t, _mm256_mul_pd(t, p)), _mm256_castsi256_pd(e2));
}

/* out = silu(a) * b, 8 at a time, as silu_mul_avx512 (isa_avx512.c) does */
static void silu_mul_avx2(const float *a, const float *b, float *out, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 av = _mm256_loadu_ps(a + i);
        __m256 ok = _mm256_and_ps(_mm256_cmp_ps(av, _mm256_set1_ps(-89.0f), _CMP_GE_OQ),
                                  _mm256_cmp_ps(av, _mm256_set1_ps(110.0f), _CMP_LE_OQ));
        if (_mm256_movemask_ps(ok) != 0xFF) {
            for (int j = i; j < i + 8; j++)
                out[j] = k_silu(a[j]) * b[j];
            continue;
        }
        __m256 x = _mm256_sub_ps(_mm256_setzero_ps(), av);
        __m128 lo = _mm256_cvtpd_ps(exp_d4(_mm256_cvtps_pd(_mm256_castps256_ps128(x))));
        __m128 hi = _mm256_cvtpd_ps(exp_d4(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))));
        __m256 e = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
        __m256 s = _mm256_div_ps(av, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(s, _mm256_loadu_ps(b + i)));
    }
    for (; i < n; i++)
        out[i] = k_silu(a[i]) * b[i];
}
#define KB_SILU_MUL silu_mul_avx2
