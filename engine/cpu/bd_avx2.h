/*
 * bd_avx2.h — bf16 dot products (kernels_bd.h) on AVX2 + FMA: a pair of a
 * panel's 16 rows is two ymm of 8 words, word l the pair of lane l (lanes
 * 8-15 in the second); the odd element is the word's high half (masked),
 * the even one shifted up, and an fma each runs a step of the lane's two
 * chains.
 * Included by isa_avx2.c before kernels_body.h.
 */
#include "kernels_bd.h"

typedef struct {
    vec16 o, e;
} bd256_pair;
static inline __attribute__((always_inline)) bd256_pair bd256_split(__m256i a, __m256i b)
{
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    bd256_pair p = {{_mm256_castsi256_ps(_mm256_and_si256(a, hi)),
                     _mm256_castsi256_ps(_mm256_and_si256(b, hi))},
                    {_mm256_castsi256_ps(_mm256_slli_epi32(a, 16)),
                     _mm256_castsi256_ps(_mm256_slli_epi32(b, 16))}};
    return p;
}
static inline __attribute__((always_inline)) bd256_pair bd256_load(const uint16_t *p)
{
    return bd256_split(_mm256_loadu_si256((const __m256i *)p),
                       _mm256_loadu_si256((const __m256i *)(p + 16)));
}
#define BD_TILE_T 2
#define BD_TILE_J 1
#ifndef BD_PREFETCH_BYTES
#define BD_PREFETCH_BYTES 4096 /* a single row prefetches its panel, as bd_avx512.h */
#endif
#define BD_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
#define BD_FN bd_linear
#define BD_TILE_FN bd_tile_avx2
#define BD_PART_FN bd_part_avx2
#define BD_ATTR
#define bd_op bd256_pair
#define BD_LOAD(p) bd256_load(p)
#include "kernels_bd_body.h"

static const char *bd_kernel(void) { return "fma"; }
