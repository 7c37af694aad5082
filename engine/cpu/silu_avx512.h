/*
 * silu_avx512.h — k_silu_mul on the avx512 path (included by isa_avx512.c): e^-x in double by
 * exactly the operations of kernels.c's scalar exp_d, so the same bits as k_silu.
 */
#include "isa.h"

#include <immintrin.h>

/* e^x for 8 doubles by exactly kernels.c exp_d's operations (no fused multiply-add: the
 * tree is built with -ffp-contract=off), for x in [-110, 89]. */
static inline __m512d exp_d8(__m512d x)
{
    __m512d k = _mm512_roundscale_pd(_mm512_add_pd(_mm512_mul_pd(x, _mm512_set1_pd(K_EXP_INV)),
                                                   _mm512_set1_pd(0.5)),
                                     _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_sub_pd(_mm512_sub_pd(x, _mm512_mul_pd(k, _mm512_set1_pd(K_EXP_HI))),
                              _mm512_mul_pd(k, _mm512_set1_pd(K_EXP_LO)));
    __m512d p =
        _mm512_add_pd(_mm512_set1_pd(1.0 / 24), _mm512_mul_pd(r, _mm512_set1_pd(1.0 / 120)));
    p = _mm512_add_pd(_mm512_set1_pd(1.0 / 6), _mm512_mul_pd(r, p));
    p = _mm512_add_pd(_mm512_set1_pd(0.5), _mm512_mul_pd(r, p));
    p = _mm512_add_pd(_mm512_set1_pd(1.0), _mm512_mul_pd(r, p));
    p = _mm512_mul_pd(r, p);
    __m256i ki = _mm512_cvttpd_epi32(k);
    /* 2^(i/32) from the table in registers: two permutes of 16 entries and a blend, where a
     * gather of 8 doubles took longer (the same entries, so the same bits) */
    __m512i i64 = _mm512_cvtepi32_epi64(_mm256_and_si256(ki, _mm256_set1_epi32(31)));
    __m512d t = _mm512_mask_blend_pd(_mm512_test_epi64_mask(i64, _mm512_set1_epi64(16)),
                                     _mm512_permutex2var_pd(_mm512_loadu_pd(k_exp2_32), i64,
                                                            _mm512_loadu_pd(k_exp2_32 + 8)),
                                     _mm512_permutex2var_pd(_mm512_loadu_pd(k_exp2_32 + 16), i64,
                                                            _mm512_loadu_pd(k_exp2_32 + 24)));
    __m512i e2 = _mm512_slli_epi64(_mm512_cvtepi32_epi64(_mm256_add_epi32(_mm256_srai_epi32(ki, 5),
                                                                          _mm256_set1_epi32(1023))),
                                   52);
    return _mm512_mul_pd(_mm512_add_pd(t, _mm512_mul_pd(t, p)), _mm512_castsi512_pd(e2));
}

/* out = silu(a) * b, 16 at a time: e^-a in double as k_expf computes it, rounded to float,
 * then 1 + e, a / that and the product in float, as k_silu does; blocks with a value
 * outside k_expf's plain range (or NaN) go through k_silu. */
static void silu_mul_avx512(const float *a, const float *b, float *out, int n)
{
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 av = _mm512_loadu_ps(a + i);
        __mmask16 ok = _mm512_cmp_ps_mask(av, _mm512_set1_ps(-89.0f), _CMP_GE_OQ) &
                       _mm512_cmp_ps_mask(av, _mm512_set1_ps(110.0f), _CMP_LE_OQ);
        if (ok != 0xFFFF) {
            for (int j = i; j < i + 16; j++)
                out[j] = k_silu(a[j]) * b[j];
            continue;
        }
        __m512 x = _mm512_sub_ps(_mm512_setzero_ps(), av);
        __m256 lo = _mm512_cvtpd_ps(exp_d8(_mm512_cvtps_pd(_mm512_castps512_ps256(x))));
        __m256 hi = _mm512_cvtpd_ps(exp_d8(
            _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)))));
        __m512 e = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)),
                                                       _mm256_castps_pd(hi), 1));
        __m512 s = _mm512_div_ps(av, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_storeu_ps(out + i, _mm512_mul_ps(s, _mm512_loadu_ps(b + i)));
    }
    for (; i < n; i++)
        out[i] = k_silu(a[i]) * b[i];
}
#define KB_SILU_MUL silu_mul_avx512
