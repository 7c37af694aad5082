/*
 * check.h — what the C tests share: a CHECK that counts failures and goes on,
 * a seeded xorshift generator (set TEST_RNG_SEED before including), and die()
 * for setup errors that leave nothing to test.
 */
#ifndef MHLA_TESTS_CHECK_H
#define MHLA_TESTS_CHECK_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef TEST_RNG_SEED
#define TEST_RNG_SEED 88172645463325252ull
/* die() for a failed call that filled an error struct with a msg field
 * (mhla_error, kv_error). */
#define die_err(what, e) die("%s: %s", (what), (e)->msg)

#endif
/* Stop after this many failures: later ones are usually echoes of the first. */
#ifndef CHECK_MAX_FAILURES
#define CHECK_MAX_FAILURES 1000000
/* die() for a failed call that filled an error struct with a msg field
 * (mhla_error, kv_error). */
#define die_err(what, e) die("%s: %s", (what), (e)->msg)

#endif

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            if (++failures > CHECK_MAX_FAILURES)                                                   \
                exit(1);                                                                           \
        }                                                                                          \
    } while (0)

static uint64_t rng_state = TEST_RNG_SEED;

static inline int rnd(int n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (int)(rng_state % (uint64_t)n);
}

/* A setup error that leaves nothing to test: says why and exits 2. */
static inline void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static inline void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "test setup failed: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

/* die() for a failed call that filled an error struct with a msg field
 * (mhla_error, kv_error). */
#define die_err(what, e) die("%s: %s", (what), (e)->msg)

#endif
