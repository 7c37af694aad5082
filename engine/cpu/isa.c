/*
 * isa.c — which instruction-set path the kernels run: what the CPU reports
 * (cpuid and the OS's saved register state on x86-64, getauxval on
 * AArch64), what this binary holds, and what the caller or MHLA_CPU_ISA
 * asks for. The choice is process-wide; every path gives the same bits, so
 * engines that ask for different paths still agree.
 */
#include "isa.h"
#include "kernels.h"

#include "engine.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

typedef struct {
    const k_ops *ops;
    char why[160]; /* what the CPU lacks; "" when it runs the path */
} isa_path;

/* Best first. */
enum { PATH_AVX512, PATH_AVX2, PATH_NEON, PATH_PORTABLE, N_PATHS };
static const char *const path_names[N_PATHS] = {"avx512", "avx2", "neon", "portable"};

static isa_path paths[N_PATHS];
static char cpu_extras[160]; /* features present that later kernels may use */
static char runnable[64];    /* the paths with an empty why, best first */
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

static _Atomic(const k_ops *) chosen;
static char chosen_reason[400];
static pthread_mutex_t select_lock = PTHREAD_MUTEX_INITIALIZER;

static void append(char *dst, size_t cap, const char *word)
{
    size_t n = strlen(dst);
    snprintf(dst + n, cap - n, "%s%s", n ? " " : "", word);
}

#if defined(__x86_64__)
static uint64_t xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void probe_x86(void)
{
    unsigned a, b, c, d;
    unsigned l1c = 0, l7b = 0, l7c = 0, l71a = 0;
    if (__get_cpuid(1, &a, &b, &c, &d))
        l1c = c;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        l7b = b;
        l7c = c;
        if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d))
            l71a = a;
    }
    int osxsave = (l1c >> 27) & 1;
    uint64_t xs = osxsave ? xcr0() : 0;
    int os_ymm = (xs & 0x6) == 0x6, os_zmm = os_ymm && (xs & 0xe0) == 0xe0;
    int fma = (l1c >> 12) & 1, avx = (l1c >> 28) & 1, avx2 = (l7b >> 5) & 1;
    int f = (l7b >> 16) & 1, bw = (l7b >> 30) & 1, vl = (l7b >> 31) & 1;

    paths[PATH_AVX2].ops = &k_ops_avx2;
    char *w2 = paths[PATH_AVX2].why;
    if (!avx || !avx2)
        append(w2, sizeof paths[PATH_AVX2].why, "no avx2");
    if (!fma)
        append(w2, sizeof paths[PATH_AVX2].why, "no fma");
    if (!os_ymm)
        append(w2, sizeof paths[PATH_AVX2].why, "the OS does not save ymm registers");

    paths[PATH_AVX512].ops = &k_ops_avx512;
    char *w5 = paths[PATH_AVX512].why;
    size_t n5 = sizeof paths[PATH_AVX512].why;
    if (!f)
        append(w5, n5, "no avx512f");
    if (!bw)
        append(w5, n5, "no avx512bw");
    if (!vl)
        append(w5, n5, "no avx512vl");
    if (!fma)
        append(w5, n5, "no fma");
    if (!os_zmm)
        append(w5, n5, "the OS does not save zmm registers");

    if ((l71a >> 5) & 1)
        append(cpu_extras, sizeof cpu_extras, "avx512_bf16");
    if ((l7c >> 11) & 1)
        append(cpu_extras, sizeof cpu_extras, "avx512_vnni");
    if ((l71a >> 4) & 1)
        append(cpu_extras, sizeof cpu_extras, "avx_vnni");
}
#endif

#if defined(__aarch64__)
static void probe_arm(void)
{
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    paths[PATH_NEON].ops = &k_ops_neon;
    /* HWCAP_FP (bit 0), HWCAP_ASIMD (bit 1): Advanced SIMD is part of AArch64 */
    if (!(hw & 2))
        snprintf(paths[PATH_NEON].why, sizeof paths[PATH_NEON].why, "no asimd");
    if (hw & (1ul << 20)) /* HWCAP_ASIMDDP */
        append(cpu_extras, sizeof cpu_extras, "asimddp");
    if (hw2 & (1ul << 14)) /* HWCAP2_BF16 */
        append(cpu_extras, sizeof cpu_extras, "bf16");
    if (hw2 & (1ul << 13)) /* HWCAP2_I8MM */
        append(cpu_extras, sizeof cpu_extras, "i8mm");
}
#endif

static void probe(void)
{
    for (int p = 0; p < N_PATHS; p++)
        snprintf(paths[p].why, sizeof paths[p].why, "not built into this binary (%s)",
#if defined(__x86_64__)
                 "an x86-64 build"
#elif defined(__aarch64__)
                 "an aarch64 build"
#else
                 "neither x86-64 nor aarch64"
#endif
        );
#if defined(__x86_64__)
    paths[PATH_AVX512].why[0] = paths[PATH_AVX2].why[0] = 0;
    probe_x86();
#endif
#if defined(__aarch64__)
    paths[PATH_NEON].why[0] = 0;
    probe_arm();
#endif
    paths[PATH_PORTABLE].ops = &k_ops_portable;
    paths[PATH_PORTABLE].why[0] = 0;
    for (int p = 0; p < N_PATHS; p++)
        if (!paths[p].why[0])
            append(runnable, sizeof runnable, path_names[p]);
}

static int best_path(void)
{
    for (int p = 0; p < N_PATHS; p++)
        if (!paths[p].why[0])
            return p;
    return PATH_PORTABLE;
}

static void set_chosen(int p, const char *how)
{
    int best = best_path();
    char extras[200] = "";
    if (cpu_extras[0])
        snprintf(extras, sizeof extras, "; the CPU also has %s", cpu_extras);
    if (p == best)
        snprintf(chosen_reason, sizeof chosen_reason, "%s: the best path this CPU runs%s%s",
                 path_names[p], how, extras);
    else
        snprintf(chosen_reason, sizeof chosen_reason, "%s%s (this CPU runs %s)%s", path_names[p],
                 how, path_names[best], extras);
    atomic_store(&chosen, paths[p].ops);
}

static void init_default(void)
{
    probe();
    set_chosen(best_path(), "");
}

const k_ops *k_isa_ops(void)
{
    const k_ops *o = atomic_load_explicit(&chosen, memory_order_acquire);
    if (o)
        return o;
    pthread_once(&probe_once, init_default);
    return atomic_load(&chosen);
}

int k_isa_select(const char *name, char *err, size_t errlen)
{
    pthread_once(&probe_once, init_default);
    const char *how = ": requested";
    if (!name || !name[0]) {
        name = getenv("MHLA_CPU_ISA");
        how = ": set by MHLA_CPU_ISA";
    }
    if (!name || !name[0] || strcmp(name, "auto") == 0) {
        pthread_mutex_lock(&select_lock);
        set_chosen(best_path(), "");
        pthread_mutex_unlock(&select_lock);
        return 0;
    }
    for (int p = 0; p < N_PATHS; p++) {
        if (strcmp(name, path_names[p]) != 0)
            continue;
        if (paths[p].why[0]) {
            snprintf(err, errlen, "CPU kernel path '%s' cannot run here: %s (this CPU runs: %s)",
                     name, paths[p].why, k_isa_runnable());
            return -1;
        }
        pthread_mutex_lock(&select_lock);
        set_chosen(p, how);
        pthread_mutex_unlock(&select_lock);
        return 0;
    }
    snprintf(err, errlen,
             "unknown CPU kernel path '%.40s' (one of: auto, avx512, avx2, neon, "
             "portable)",
             name);
    return -1;
}

const char *k_isa_name(void) { return k_isa_ops()->name; }

const char *k_isa_reason(void)
{
    k_isa_ops();
    return chosen_reason;
}

const char *k_isa_runnable(void)
{
    pthread_once(&probe_once, init_default);
    return runnable;
}

const char *mhla_cpu_isa_runnable(void) { return k_isa_runnable(); }
