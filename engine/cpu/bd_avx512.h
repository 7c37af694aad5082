/*
 * bd_avx512.h — bf16 dot products (kernels_bd.h) on AVX-512: a zmm holds a
 * step of 32 bf16, its 32-bit word l the pair (2l, 2l+1) of lane l. With
 * AVX512-BF16, vdpbf16ps runs a step of every lane's chain; without it, the
 * pair is split into the odd element (the word's high half, masked) and the
 * even one (shifted up) as f32, and two fmas run the step. vdpbf16ps is used
 * only where CPUID reports it and it gave the definition's bits on the
 * check at start (k_bd_agrees). Included by isa_avx512.c before kernels_body.h.
 */
#include "kernels_bd.h"

#include <cpuid.h>
#include <stdlib.h>

#define BD_TILE_T 4
#define BD_TILE_J 4
#define BD_TILE_STORE(acc, y, ldy) tile_store_4x4((acc), (y), (ldy))
#define BD512_MASK(n) ((__mmask32)((n) >= 32 ? 0xffffffffu : (1u << (n)) - 1u))

#define BD_FN bd_linear_dot
#define BD_TILE_FN bd_tile_dot
#define BD_ATTR __attribute__((target("avx512bf16")))
#define bd_op __m512i
#define BD_LOAD(p) _mm512_loadu_si512((const void *)(p))
#define BD_LOAD_TAIL(p, n) _mm512_maskz_loadu_epi16(BD512_MASK(n), (p))
#define BD_MAC(acc, a, b) _mm512_dpbf16_ps((acc), (__m512bh)(a), (__m512bh)(b))
#include "kernels_bd_body.h"

typedef struct {
    __m512 o, e; /* the odd and the even elements of the pairs, as f32 */
} bd512_pair;
static inline __attribute__((always_inline)) bd512_pair bd512_split(__m512i v)
{
    bd512_pair p = {_mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u))),
                    _mm512_castsi512_ps(_mm512_slli_epi32(v, 16))};
    return p;
}
#define BD_FN bd_linear_fma
#define BD_TILE_FN bd_tile_fma
#define BD_ATTR
#define bd_op bd512_pair
#define BD_LOAD(p) bd512_split(_mm512_loadu_si512((const void *)(p)))
#define BD_LOAD_TAIL(p, n) bd512_split(_mm512_maskz_loadu_epi16(BD512_MASK(n), (p)))
#define BD_MAC(acc, a, b) _mm512_fmadd_ps((a).e, (b).e, _mm512_fmadd_ps((a).o, (b).o, (acc)))
#include "kernels_bd_body.h"

/* MHLA_CPU_BF16_NO_DOT=1 leaves vdpbf16ps unused even where the CPU has it,
 * so that tests can run the other kernel on the same machine. */
static int bd_use_dot(void)
{
    static _Atomic int v = -1; /* set once; every thread finds the same answer */
    if (v < 0) {
        const char *off = getenv("MHLA_CPU_BF16_NO_DOT");
        unsigned a = 0, b, c, d; /* cpuid 7.1 eax bit 5: AVX512_BF16 (the path checked zmm) */
        int has = __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 5) & 1);
        v = has && !(off && off[0] == '1') && k_bd_agrees(bd_linear_dot);
    }
    return v;
}

static void bd_linear(const uint16_t *x, int T, int Kp, const uint16_t *w, int K, int j0, int j1,
                      float *y, int ldy)
{
    (bd_use_dot() ? bd_linear_dot : bd_linear_fma)(x, T, Kp, w, K, j0, j1, y, ldy);
}

static const char *bd_kernel(void) { return bd_use_dot() ? "vdpbf16ps" : "fma"; }
