/*
 * isa_portable.c — the kernels in plain C for any CPU: the same 16 lanes,
 * the same fmaf roundings and the same reduction tree as the vector paths.
 * Compiled with the baseline flags of the target.
 */
#include "base.h" /* bf16 -> f32 */

#include <math.h>
#include <stdint.h>
#include <string.h>

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

#define KB_TILE_T 4
#define KB_TILE_J 4
#define KB_OPS k_ops_portable
#define KB_NAME "portable"
#include "q8_portable.h"
#include "q4_portable.h"
#include "bd_portable.h"
#include "kernels_body.h"
