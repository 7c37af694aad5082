/*
 * probe_bits.h — what the instruction probes (probe_bf16_dot.c, probe_amx_bf16.c) share:
 * a float's bits and back, a bf16 widened, and one xorshift64 stream of random bits.
 */
#ifndef MHLA_BENCH_PROBE_BITS_H
#define MHLA_BENCH_PROBE_BITS_H

#include "base.h"

#include <stdint.h>
#include <string.h>

static inline float f_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}
static inline uint32_t u_of(float x)
{
    uint32_t v;
    memcpy(&v, &x, 4);
    return v;
}
static inline float bf(uint16_t h) { return mhla_f32_from_bf16(h); }

static uint64_t rng = 88172645463325252ull;
static inline uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

#endif
