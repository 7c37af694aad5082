/*
 * bench_products — one matrix product y = x wᵀ (k_linear) with f32, bf16 and bf16-dot
 * weights, side by side on the same x and w, in the CPU time of the calling thread: on a
 * shared machine the wall clock counts the time others held the CPU, the thread's CPU time
 * does not. Each format's best of REPS runs, and its rate against f32's.
 *
 * usage: bench_products [T N K THREADS REPS]   (default 512 2816 1024 1 5: a prefill's MLP
 * up projection on the 340M shape; with THREADS > 1 the times are the caller's alone)
 * The kernel path: MHLA_CPU_ISA (default the best this CPU runs); MHLA_CPU_BF16_NO_DOT=1
 * computes the bf16 dot products without vdpbf16ps.
 */
#include "cpu/kernels.h"
#include "cpu/kernels_bd.h"

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
    k_matrix m[3] = {{wf, NULL, NULL, 0}, {NULL, wh, NULL, 0}, {NULL, wd, NULL, 1}};
    const char *name[3] = {"f32", "bf16", "bf16dot"};
    double best[3] = {1e30, 1e30, 1e30};
    for (int r = 0; r < reps; r++) /* the formats alternate */
        for (int i = 0; i < 3; i++) {
            double t0 = cpu_now();
            k_linear(x, T, K, m[i], N, y, N, pool);
            double dt = cpu_now() - t0;
            best[i] = dt < best[i] ? dt : best[i];
        }
    printf("path %s, bf16 dot products with %s; T=%d N=%d K=%d, %d threads, best of %d\n",
           k_isa_name(), k_bd_kernel_name(), T, N, K, threads, reps);
    for (int i = 0; i < 3; i++)
        printf("%-8s %9.3f ms CPU  %7.1f GFLOP/s  %.2fx f32\n", name[i], best[i] * 1e3,
               2.0 * T * N * K / best[i] / 1e9, best[0] / best[i]);
    tp_free(pool);
    return 0;
}
