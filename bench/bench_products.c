/*
 * bench_products — one matrix product y = x wᵀ (k_linear) with f32, bf16, bf16-dot, q8 and
 * q4 weights, and OpenBLAS's sgemm on the same shape where the build found OpenBLAS, side by
 * side on the same x and w, the formats alternating run by run. Each is timed in the CPU
 * time of the calling thread (on a shared machine the wall clock counts the time others held
 * the CPU, the thread's CPU time does not) and in wall time; each format's best of REPS
 * runs, and its rate against f32's and against sgemm's.
 *
 * usage: bench_products [T N K THREADS REPS [FORMATS]]   (default 512 2816 1024 1 5, every
 * format; FORMATS a comma-separated subset of f32,bf16,bf16dot,q8,q4,sgemm: a prefill's MLP
 * up projection on the 340M shape). With THREADS > 1 the CPU time is the whole process's
 * (every thread's work; the engine's idle workers spin 30 µs, OpenBLAS's longer, so each
 * run starts after a pause of 200 ms in which the last one's threads go to sleep).
 * The kernel path: MHLA_CPU_ISA (default the best this CPU runs); MHLA_CPU_BF16_NO_DOT=1
 * computes the bf16 dot products with fmas (no AMX tiles, no vdpbf16ps), MHLA_CPU_BF16_NO_AMX=1
 * MHLA_CPU_BF16_DOT=1 with vdpbf16ps, MHLA_CPU_Q8_NO_DOT=1 the q8 and q4
 * products without vpdpbusd / sdot; MHLA_Q4_GROUP the q4 group size (default 32). OpenBLAS picks
 * its kernels by the CPU or by OPENBLAS_CORETYPE (Haswell: its AVX2 kernels, the bound for the avx2
 * path).
 */
#include "cpu/kernels.h"
#include "cpu/kernels_bd.h"
#include "cpu/kernels_q4.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef MHLA_BENCH_OPENBLAS
#include <cblas.h>
#endif

static double clock_s(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int arg(int argc, char **argv, int i, int dflt)
{
    return argc > i && atoi(argv[i]) > 0 ? atoi(argv[i]) : dflt;
}

enum { F_F32, F_BF16, F_BD, F_Q8, F_Q4, F_SGEMM, F_N };
static const char *const NAME[F_N] = {"f32", "bf16", "bf16dot", "q8", "q4", "sgemm"};

typedef struct {
    int T, N, K;
    const float *x, *wf;
    float *y;
    k_matrix m[F_Q4 + 1];
    tp_pool *pool;
} bench;

/* One run of format f; 0 when it was not run (no OpenBLAS, or no q8 / q4 matrix). */
static int run_one(const bench *b, int f)
{
    if (f == F_SGEMM) {
#ifdef MHLA_BENCH_OPENBLAS
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b->T, b->N, b->K, 1.0f, b->x, b->K,
                    b->wf, b->K, 0.0f, b->y, b->N);
        return 1;
#else
        return 0;
#endif
    }
    if ((f == F_Q8 || f == F_Q4) && !b->m[f].q8)
        return 0;
    k_linear(b->x, b->T, b->K, b->m[f], b->N, b->y, b->N, b->pool);
    return 1;
}

static const char *sgemm_core(int threads)
{
#ifdef MHLA_BENCH_OPENBLAS
    openblas_set_num_threads(threads);
    return openblas_get_corename();
#else
    (void)threads;
    return "none (built without OpenBLAS)";
#endif
}

static void report(const bench *b, int threads, int reps, const double *cpu, const double *wall)
{
    printf("path %s, bf16 dot products with %s, q8 with %s, q4 with %s, sgemm core %s; T=%d "
           "N=%d K=%d, %d threads, best of %d, CPU time of the %s\n",
           k_isa_name(), k_bd_kernel_name(), k_q8_kernel_name(), k_q4_kernel_name(),
           sgemm_core(threads), b->T, b->N, b->K, threads, reps,
           threads > 1 ? "process" : "thread");
    double flop = 2.0 * b->T * b->N * b->K;
    for (int f = 0; f < F_N; f++) {
        if (cpu[f] >= 1e30)
            continue;
        printf("%-8s %9.3f ms CPU %7.1f GFLOP/s %.2fx f32", NAME[f], cpu[f] * 1e3,
               flop / cpu[f] / 1e9, cpu[F_F32] / cpu[f]);
        if (cpu[F_SGEMM] < 1e30)
            printf(" %.3f of sgemm", cpu[F_SGEMM] / cpu[f]);
        printf(" | wall %9.3f ms %7.1f GFLOP/s", wall[f] * 1e3, flop / wall[f] / 1e9);
        if (wall[F_SGEMM] < 1e30)
            printf(" %.3f of sgemm", wall[F_SGEMM] / wall[f]);
        printf("\n");
    }
}

/* w as 4-bit groups (kernels_q4.h, MHLA_Q4_GROUP); m[F_Q4] stays empty where K does not
 * divide into groups */
static int make_q4(bench *b)
{
    static k_q8_matrix q4;
    char err[200];
    size_t qb, sb;
    b->m[F_Q4] = (k_matrix){NULL, NULL, NULL, 0};
    int wg = k_q4_group_from_env(err, sizeof err);
    if (wg < 0) {
        fprintf(stderr, "bench_products: %s\n", err);
        return -1;
    }
    if (b->K % wg != 0)
        return 0;
    k_q4_sizes(b->N, b->K, wg, &qb, &sb);
    uint8_t *q = malloc(qb);
    uint16_t *sc = malloc(sb);
    if (!q || !sc || k_q4_quantize(b->wf, b->N, b->K, wg, q, sc, &q4, err, sizeof err)) {
        fprintf(stderr, "bench_products: quantizing to q4: %s\n", q && sc ? err : "no memory");
        return -1;
    }
    b->m[F_Q4].q8 = &q4;
    return 0;
}

static int make_weights(bench *b, uint16_t *wh, uint16_t *wd, int8_t *q, float *sc)
{
    float *wf = (float *)b->wf;
    for (size_t i = 0; i < (size_t)b->N * b->K; i++) {
        wf[i] = (float)(rand() % 2001 - 1000) / 3e4f;
        wh[i] = mhla_bf16_from_f32(wf[i]);
    }
    k_bd_pack(wf, b->N, b->K, wd);
    b->m[F_F32] = (k_matrix){wf, NULL, NULL, 0};
    b->m[F_BF16] = (k_matrix){NULL, wh, NULL, 0};
    b->m[F_BD] = (k_matrix){NULL, wd, NULL, 1};
    static k_q8_matrix q8;
    char err[200];
    b->m[F_Q8] = (k_matrix){NULL, NULL, NULL, 0};
    if (b->K % KQ_GROUP == 0 && !k_q8_quantize(wf, b->N, b->K, q, sc, &q8, err, sizeof err))
        b->m[F_Q8].q8 = &q8;
    return make_q4(b);
}

/* whether `name` is one of the comma-separated names in `list` */
static int format_listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == 0))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    bench b = {.T = arg(argc, argv, 1, 512),
               .N = arg(argc, argv, 2, 2816),
               .K = arg(argc, argv, 3, 1024)};
    int threads = arg(argc, argv, 4, 1), reps = arg(argc, argv, 5, 5);
    char err[200];
    if (k_isa_select(NULL, err, sizeof err) || tp_create(threads, &b.pool, err, sizeof err)) {
        fprintf(stderr, "bench_products: %s\n", err);
        return 1;
    }
    size_t qb, sb;
    k_q8_sizes(b.N, b.K, &qb, &sb);
    float *x = malloc((size_t)b.T * b.K * 4), *wf = malloc((size_t)b.N * b.K * 4);
    b.y = malloc((size_t)b.T * b.N * 4);
    uint16_t *wh = malloc((size_t)b.N * b.K * 2), *wd = malloc(k_bd_packed_count(b.N, b.K) * 2);
    int8_t *q = malloc(qb);
    float *sc = malloc(sb);
    if (!x || !wf || !b.y || !wh || !wd || !q || !sc) {
        fprintf(stderr, "bench_products: out of memory\n");
        return 1;
    }
    srand(7);
    for (size_t i = 0; i < (size_t)b.T * b.K; i++)
        x[i] = (float)(rand() % 2001 - 1000) / 1000.0f;
    b.x = x, b.wf = wf;
    if (make_weights(&b, wh, wd, q, sc))
        return 1;
    sgemm_core(threads);
    int on[F_N];
    for (int f = 0; f < F_N; f++)
        on[f] = argc <= 6 || format_listed(argv[6], NAME[f]);
    on[F_F32] = 1; /* the rates are set against f32's */
    double cpu[F_N], wall[F_N];
    for (int f = 0; f < F_N; f++)
        cpu[f] = wall[f] = 1e30;
    clockid_t cpu_clock = threads > 1 ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_THREAD_CPUTIME_ID;
    for (int r = 0; r < reps; r++) /* the formats alternate */
        for (int f = 0; f < F_N; f++) {
            if (!on[f])
                continue;
            if (threads > 1)
                usleep(200 * 1000);
            double c0 = clock_s(cpu_clock), w0 = clock_s(CLOCK_MONOTONIC);
            if (!run_one(&b, f))
                continue;
            double dc = clock_s(cpu_clock) - c0, dw = clock_s(CLOCK_MONOTONIC) - w0;
            cpu[f] = dc < cpu[f] ? dc : cpu[f];
            wall[f] = dw < wall[f] ? dw : wall[f];
        }
    report(&b, threads, reps, cpu, wall);
    tp_free(b.pool);
    return 0;
}
