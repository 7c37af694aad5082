/*
 * rng.c — xoshiro256** (Blackman and Vigna), seeded through splitmix64.
 */
#include "base.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void mhla_rng_seed(mhla_rng *rng, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        rng->state[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(mhla_rng *r)
{
    uint64_t *s = r->state;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double mhla_rng_uniform(mhla_rng *rng) { return (double)(next_u64(rng) >> 11) * 0x1.0p-53; }

double mhla_rng_normal(mhla_rng *rng)
{
    /* 1 - u keeps the logarithm's argument in (0, 1]. */
    double u = 1.0 - mhla_rng_uniform(rng), v = mhla_rng_uniform(rng);
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}
