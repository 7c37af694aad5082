/*
 * bd_neon.h — bf16 dot products (kernels_bd.h) on AArch64 Advanced SIMD: a
 * pair of a panel's 16 rows is four q registers of 4 words, word l the pair
 * of lane l; the odd element is the word's high half (masked), the even one
 * shifted up, and an fma each runs a step of the lane's two chains (no value
 * is ever denormal, so FPCR's flush modes change nothing). Included by
 * isa_neon.c before kernels_body.h.
 */
#include "kernels_bd.h"

typedef struct {
    vec16 o, e;
} bdn_pair;
static inline bdn_pair bdn_load(const uint16_t *p)
{
    bdn_pair r;
    for (int i = 0; i < 4; i++) {
        uint32x4_t v = vld1q_u32((const uint32_t *)(const void *)(p + 8 * i));
        r.o.q[i] = vreinterpretq_f32_u32(vandq_u32(v, vdupq_n_u32(0xffff0000u)));
        r.e.q[i] = vreinterpretq_f32_u32(vshlq_n_u32(v, 16));
    }
    return r;
}
#define BD_TILE_T 1
#define BD_TILE_J 1
#define BD_FN bd_linear
#define BD_TILE_FN bd_tile_neon
#define BD_PART_FN bd_part_neon
#define BD_ATTR
#define bd_op bdn_pair
#define BD_LOAD(p) bdn_load(p)
#include "kernels_bd_body.h"

static const char *bd_kernel(void) { return "fma"; }
