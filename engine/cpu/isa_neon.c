/*
 * isa_neon.c — the kernels on AArch64 Advanced SIMD: a 16-lane vector is
 * four 4-lane quarters, reduced in the same tree as the other paths
 * (lane i with i+8: quarters 0+2 and 1+3; then i+4, i+2, i+1).
 */
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    float32x4_t q[4];
} vec16;

static inline vec16 V_ZERO(void)
{
    vec16 v;
    for (int i = 0; i < 4; i++)
        v.q[i] = vdupq_n_f32(0.0f);
    return v;
}
static inline vec16 V_LOAD(const float *p)
{
    vec16 v;
    for (int i = 0; i < 4; i++)
        v.q[i] = vld1q_f32(p + 4 * i);
    return v;
}
static inline vec16 V_LOAD_TAIL(const float *p, int n)
{
    float buf[16] = {0};
    memcpy(buf, p, (size_t)n * sizeof *p);
    return V_LOAD(buf);
}
static inline vec16 V_FMA(vec16 a, vec16 b, vec16 c)
{
    for (int i = 0; i < 4; i++)
        c.q[i] = vfmaq_f32(c.q[i], a.q[i], b.q[i]);
    return c;
}
static inline vec16 V_SET1(float s)
{
    vec16 v;
    for (int i = 0; i < 4; i++)
        v.q[i] = vdupq_n_f32(s);
    return v;
}
static inline vec16 V_LOAD_BF16(const uint16_t *p)
{
    vec16 v;
    for (int i = 0; i < 4; i++)
        v.q[i] = vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p + 4 * i), 16));
    return v;
}
static inline vec16 V_LOAD_BF16_TAIL(const uint16_t *p, int n)
{
    uint16_t buf[16] = {0};
    memcpy(buf, p, (size_t)n * sizeof *p);
    return V_LOAD_BF16(buf);
}
static inline void V_STORE(float *p, vec16 v)
{
    for (int i = 0; i < 4; i++)
        vst1q_f32(p + 4 * i, v.q[i]);
}
static inline void V_STORE_TAIL(float *p, vec16 v, int n)
{
    float buf[16];
    V_STORE(buf, v);
    memcpy(p, buf, (size_t)n * sizeof *p);
}
static inline float v_reduce(vec16 v)
{
    float32x4_t s4 = vaddq_f32(vaddq_f32(v.q[0], v.q[2]), vaddq_f32(v.q[1], v.q[3]));
    float32x2_t s2 = vadd_f32(vget_low_f32(s4), vget_high_f32(s4));
    return vget_lane_f32(s2, 0) + vget_lane_f32(s2, 1);
}

/* 32 q registers: 1 x 4 (16 accumulators) and 2 x 2 tiles fit */
#define KB_TILE_T 2
#define KB_TILE_J 2
#define KB_OPS k_ops_neon
#define KB_NAME "neon"
#include "q8_neon.h"
#include "q4_neon.h"
#include "bd_neon.h"
#include "kernels_body.h"
