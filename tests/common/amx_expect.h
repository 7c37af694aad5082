/*
 * amx_expect.h — whether the q8 / q4 products on the avx512 path should be
 * running AMX-INT8 tiles here (engine/cpu/q8_amx.h), found independently of
 * the engine: the CPU reports amx_tile and amx_int8, Linux grants the tile
 * state, and neither MHLA_CPU_Q8_NO_AMX=1 nor MHLA_CPU_Q8_NO_DOT=1 is set.
 * A test that finds the kernel name without "amx" where this says yes fails:
 * the tiles were meant to be tested and were not. Where it says no, the test
 * reports the AMX case as skipped and why.
 */
#ifndef MHLA_TEST_AMX_EXPECT_H
#define MHLA_TEST_AMX_EXPECT_H

#include <stdlib.h>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* 1 when expected; else 0 and the reason in *why */
static inline int amx_expected(const char **why)
{
    const char *no_amx = getenv("MHLA_CPU_Q8_NO_AMX"), *no_dot = getenv("MHLA_CPU_Q8_NO_DOT");
    if ((no_amx && no_amx[0] == '1') || (no_dot && no_dot[0] == '1')) {
        *why = "turned off by MHLA_CPU_Q8_NO_AMX / MHLA_CPU_Q8_NO_DOT";
        return 0;
    }
#if defined(__x86_64__) && defined(__linux__)
    unsigned a, b, c, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((d >> 24) & 1) || !((d >> 25) & 1) ||
        !((c >> 11) & 1)) {
        *why = "this CPU has no AMX-INT8 (or no AVX512-VNNI)";
        return 0;
    }
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
        *why = "the kernel does not grant the AMX tile state";
        return 0;
    }
    return 1;
#else
    *why = "not x86-64 Linux";
    return 0;
#endif
}

#endif
