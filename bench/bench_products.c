/*
 * bench_products — one matrix product y = x wᵀ (k_linear) with f32, bf16, bf16-dot, q8
 * and q4 weights, side by side on the same x and w, in the CPU time of the calling thread: on a
 * shared machine the wall clock counts the time others held the CPU, the thread's CPU time
 * does not. Each format's best of REPS runs, and its rate against f32's.
 *
 * usage: bench_products [T N K THREADS REPS]   (default 512 2816 1024 1 5: a prefill's MLP
 * up projection on the 340M shape; with THREADS > 1 the times are the caller's alone)
 * The kernel path: MHLA_CPU_ISA (default the best this CPU runs); MHLA_CPU_BF16_NO_DOT=1
 * computes the bf16 dot products without vdpbf16ps, MHLA_CPU_Q8_NO_DOT=1 the q8 and q4
 * products without vpdpbusd / sdot; MHLA_Q4_GROUP the q4 group size (default 32).
 */
#include "cpu/kernels.h"
#include "cpu/kernels_bd.h"
#include "cpu/kernels_q4.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int arg(int argc, char **argv, int i, int dflt)
{
    return argc > i && atoi(argv[i]) > 0 ? atoi(argv[i]) : dflt;
}

#define NF 5 /* formats */

/* w as int8 (kernels_q8.h) and as 4-bit (kernels_q4.h, groups of MHLA_Q4_GROUP) */
static int quantize(const float *w, int N, int K, k_q8_matrix *q8m, k_q8_matrix *q4m)
{
    char err[200];
    size_t qb8, sb8, qb4, sb4;
    int wg = k_q4_group_from_env(err, sizeof err);
    if (wg < 0) {
        fprintf(stderr, "bench_products: %s\n", err);
        return -1;
    }
    k_q8_sizes(N, K, &qb8, &sb8);
    k_q4_sizes(N, K, wg, &qb4, &sb4);
    void *q8 = malloc(qb8), *s8 = malloc(sb8), *q4 = malloc(qb4), *s4 = malloc(sb4);
    if (!q8 || !s8 || !q4 || !s4 || k_q8_quantize(w, N, K, q8, s8, q8m, err, sizeof err) ||
        k_q4_quantize(w, N, K, wg, q4, s4, q4m, err, sizeof err)) {
        fprintf(stderr, "bench_products: quantizing: %s\n",
                q8 && s8 && q4 && s4 ? err : "no memory");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int T = arg(argc, argv, 1, 512), N = arg(argc, argv, 2, 2816), K = arg(argc, argv, 3, 1024);
    int threads = arg(argc, argv, 4, 1), reps = arg(argc, argv, 5, 5);
    char err[200];
    tp_pool *pool;
    if (k_isa_select(NULL, err, sizeof err) || tp_create(threads, &pool, err, sizeof err)) {
        fprintf(stderr, "bench_products: %s\n", err);
        return 1;
    }
    float *x = malloc((size_t)T * K * 4), *wf = malloc((size_t)N * K * 4);
    float *y = malloc((size_t)T * N * 4);
    uint16_t *wh = malloc((size_t)N * K * 2), *wd = malloc((size_t)N * K * 2);
    if (!x || !wf || !y || !wh || !wd) {
        fprintf(stderr, "bench_products: out of memory\n");
        return 1;
    }
    srand(7);
    for (size_t i = 0; i < (size_t)T * K; i++)
        x[i] = (float)(rand() % 2001 - 1000) / 1000.0f;
    for (size_t i = 0; i < (size_t)N * K; i++) {
        wf[i] = (float)(rand() % 2001 - 1000) / 3e4f;
        wh[i] = mhla_bf16_from_f32(wf[i]);
        wd[i] = k_bd_round(wf[i]);
    }
    k_q8_matrix q8m, q4m;
    if (quantize(wf, N, K, &q8m, &q4m))
        return 1;
    k_matrix m[NF] = {{wf, NULL, NULL, 0},
                      {NULL, wh, NULL, 0},
                      {NULL, wd, NULL, 1},
                      {NULL, NULL, &q8m, 0},
                      {NULL, NULL, &q4m, 0}};
    const char *name[NF] = {"f32", "bf16", "bf16dot", "q8", "q4"};
    double best[NF] = {1e30, 1e30, 1e30, 1e30, 1e30};
    for (int r = 0; r < reps; r++) /* the formats alternate */
        for (int i = 0; i < NF; i++) {
            double t0 = cpu_now();
            k_linear(x, T, K, m[i], N, y, N, pool);
            double dt = cpu_now() - t0;
            best[i] = dt < best[i] ? dt : best[i];
        }
    printf("path %s, bf16 dot products with %s, q8 with %s, q4 (groups of %d) with %s; T=%d "
           "N=%d K=%d, %d threads, best of %d\n",
           k_isa_name(), k_bd_kernel_name(), k_q8_kernel_name(), q4m.wgroup, k_q4_kernel_name(), T,
           N, K, threads, reps);
    for (int i = 0; i < NF; i++)
        printf("%-8s %9.3f ms CPU  %7.1f GFLOP/s  %.2fx f32\n", name[i], best[i] * 1e3,
               2.0 * T * N * K / best[i] / 1e9, best[0] / best[i]);
    tp_free(pool);
    return 0;
}
