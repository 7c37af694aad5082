/*
 * bench_page_take — what taking a new state page costs the thread that closes a
 * block, with pages of the 340M shape (12 MiB):
 *   1. faulting in PAGES pages' mappings one after another, kept, on
 *      transparent huge pages and on 4 KiB pages (MADV_POPULATE_WRITE, as
 *      kvstate/memory.c does), then writing each once: the work a fresh
 *      pool's take did inside the close. What it costs depends on the
 *      memory the kernel has at hand: memory just given back is quick to
 *      fault in again, memory the machine has not touched in a while can
 *      be many times slower (a virtual machine's host backs it then);
 *   2. a fresh bounded pool's takes, one every STEP_MS of busy work on the
 *      taking thread (a step between two closes), with the stash that faults
 *      pages in ahead (kvstate/page_stash.c) and without it
 *      (MHLA_STATE_READY_PAGES=0): each take's time, mean and largest, and the
 *      process's CPU time for the whole run (the stash moves the work, it does
 *      not remove it).
 *
 * usage: bench_page_take [PAGES 16] [STEP_MS 100] [ROUNDS 2]
 */
#include "kvstate_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static const kv_geometry GEO = {.layers = 24,
                                .kv_heads = 4,
                                .dk = 128,
                                .dv = 256,
                                .block_tokens = 64,
                                .max_blocks = 64,
                                .key_sums = 0};

static double now_s(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* n pages' mappings faulted in one after another and kept (huge: advised for huge pages),
 * each then written once: the mean and largest times. Kept, so that each takes memory the
 * kernel has not just been given back (as a fresh server's pool does). */
static void fault_in(size_t bytes, int n, int huge, double *pop_mean, double *pop_max,
                     double *write_mean)
{
    const size_t H = (size_t)2 << 20;
    size_t span = (bytes + H - 1) / H * H;
    unsigned char **maps = calloc((size_t)n, sizeof *maps);
    *pop_mean = *pop_max = *write_mean = 0;
    for (int i = 0; maps && i < n; i++) {
        unsigned char *m =
            mmap(NULL, span + H, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            break;
        maps[i] = m;
        unsigned char *p = (unsigned char *)(((uintptr_t)m + H - 1) & ~(uintptr_t)(H - 1));
        if (huge)
            (void)madvise(p, span, MADV_HUGEPAGE);
        double t0 = now_s(CLOCK_MONOTONIC);
        (void)madvise(p, span, MADV_POPULATE_WRITE);
        double t1 = now_s(CLOCK_MONOTONIC);
        memset(p, 1, bytes);
        double t2 = now_s(CLOCK_MONOTONIC);
        *pop_mean += (t1 - t0) * 1e3 / n;
        *pop_max = (t1 - t0) * 1e3 > *pop_max ? (t1 - t0) * 1e3 : *pop_max;
        *write_mean += (t2 - t1) * 1e3 / n;
    }
    for (int i = 0; maps && i < n; i++)
        if (maps[i])
            munmap(maps[i], span + H);
    free(maps);
}

/* Busy work on this thread for ms milliseconds (a step's arithmetic). */
static void work(double ms)
{
    double end = now_s(CLOCK_MONOTONIC) + ms * 1e-3;
    volatile double x = 1.0;
    while (now_s(CLOCK_MONOTONIC) < end)
        for (int i = 0; i < 1000; i++)
            x = x * 1.0000001 + 1e-9;
}

/* PAGES takes from a fresh pool, STEP_MS of work before each; -1 when the pool fails. */
static int takes(int pages, double step_ms, const char *ready, double *mean_ms, double *max_ms,
                 double *cpu_s)
{
    setenv("MHLA_STATE_READY_PAGES", ready, 1);
    kv_pool_options o = {.geo = GEO, .dtype = KV_DTYPE_F32};
    o.budget_bytes = kv_page_floats(&GEO) * 4 * (size_t)pages;
    kv_pool *p;
    kv_error err;
    double c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    if (kv_pool_create(&o, &p, &err)) {
        fprintf(stderr, "pool: %s\n", err.msg);
        return -1;
    }
    double sum = 0, max = 0;
    int32_t *id = malloc((size_t)pages * sizeof *id);
    for (int i = 0; i < pages && id; i++) {
        work(step_ms);
        double t0 = now_s(CLOCK_MONOTONIC);
        if (kv_page_take(p, 0, &id[i], &err)) {
            fprintf(stderr, "take %d: %s\n", i, err.msg);
            free(id);
            kv_pool_release(p);
            return -1;
        }
        memset(p->pg[id[i]].data, 1, p->page_bytes); /* the close writes it whole */
        double ms = (now_s(CLOCK_MONOTONIC) - t0) * 1e3;
        sum += ms;
        max = ms > max ? ms : max;
    }
    for (int i = 0; i < pages && id; i++)
        kv_page_unref(p, id[i]);
    free(id);
    kv_pool_release(p);
    *mean_ms = sum / pages;
    *max_ms = max;
    *cpu_s = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    return 0;
}

int main(int argc, char **argv)
{
    int pages = argc > 1 ? atoi(argv[1]) : 16;
    double step_ms = argc > 2 ? atof(argv[2]) : 100;
    int rounds = argc > 3 ? atoi(argv[3]) : 2;
    if (pages < 1 || step_ms < 0 || rounds < 1) {
        fprintf(stderr, "usage: bench_page_take [PAGES 16] [STEP_MS 100] [ROUNDS 2]\n");
        return 2;
    }
    size_t bytes = kv_page_floats(&GEO) * 4;
    printf("page: %.1f MiB (the 340M shape, f32)\n", (double)bytes / (1 << 20));
    for (int r = 0; r < rounds; r++)
        for (int huge = 1; huge >= 0; huge--) {
            double pop, pop_max, wr;
            fault_in(bytes, pages, huge, &pop, &pop_max, &wr);
            printf("%d pages faulted in on %s pages: mean %.2f ms, largest %.2f ms; then "
                   "written once: %.2f ms\n",
                   pages, huge ? "huge" : "4 KiB", pop, pop_max, wr);
        }
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 2; k++) { /* which goes first alternates */
            int stash = (k + r) % 2;
            double mean, max, cpu;
            if (takes(pages, step_ms, stash ? "4" : "0", &mean, &max, &cpu))
                return 1;
            printf("%d takes, %.0f ms apart, %s: mean %.2f ms, largest %.2f ms, process CPU "
                   "%.2f s\n",
                   pages, step_ms, stash ? "with the stash" : "without (READY_PAGES=0)", mean, max,
                   cpu);
        }
    return 0;
}
