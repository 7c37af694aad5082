/*
 * bd_avx2.h — bf16 dot products (kernels_bd.h) on AVX2 + FMA: a step of 32
 * bf16 is two ymm of 8 words, word l the pair (2l, 2l+1) of lane l (lanes
 * 8-15 in the second); the odd element is the word's high half (masked),
 * the even one shifted up, and two fmas run the step of each lane's chain.
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
static inline bd256_pair bd256_load_tail(const uint16_t *p, int n)
{
    uint16_t buf[32] = {0};
    memcpy(buf, p, (size_t)n * sizeof *buf);
    return bd256_load(buf);
}
#define BD_TILE_T 2
#define BD_TILE_J 2
#define BD_FN bd_linear
#define BD_TILE_FN bd_tile_avx2
#define BD_ATTR
#define bd_op bd256_pair
#define BD_LOAD(p) bd256_load(p)
#define BD_LOAD_TAIL(p, n) bd256_load_tail((p), (n))
#define BD_MAC(acc, a, b) V_FMA((a).e, (b).e, V_FMA((a).o, (b).o, (acc)))
#include "kernels_bd_body.h"

static const char *bd_kernel(void) { return "fma"; }
