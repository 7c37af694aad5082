/*
 * bd_neon.h — bf16 dot products (kernels_bd.h) on AArch64 Advanced SIMD: a
 * step of 32 bf16 is four q registers of 4 words, word l the pair (2l,
 * 2l+1) of lane l; the odd element is the word's high half (masked), the
 * even one shifted up, and two fmas run the step of each lane's chain (no
 * value is ever denormal, so FPCR's flush modes change nothing). Included by
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
static inline bdn_pair bdn_load_tail(const uint16_t *p, int n)
{
    uint16_t buf[32] = {0};
    memcpy(buf, p, (size_t)n * sizeof *buf);
    return bdn_load(buf);
}
#define BD_TILE_T 2
#define BD_TILE_J 2
#define BD_FN bd_linear
#define BD_TILE_FN bd_tile_neon
#define BD_ATTR
#define bd_op bdn_pair
#define BD_LOAD(p) bdn_load(p)
#define BD_LOAD_TAIL(p, n) bdn_load_tail((p), (n))
#define BD_MAC(acc, a, b) V_FMA((a).e, (b).e, V_FMA((a).o, (b).o, (acc)))
#include "kernels_bd_body.h"

static const char *bd_kernel(void) { return "fma"; }
