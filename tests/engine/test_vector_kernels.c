/*
 * The token mixer's matrix product and the SwiGLU gate (engine/cpu/kernels.h), on every
 * kernel path this CPU runs:
 *   - k_gemm_acc equals, to the bit, C[m][n] = fmaf(A[m][k], B[k][n], C[m][n]) for k in
 *     order, and k_gemm_set the same from a zeroed C without reading C, computed here in plain C:
 * shapes on both sides of each path's register tile, columns that leave a partial vector, A read by
 * rows and by columns (the mixer reads K_iᵀ that way);
 *   - k_linear (f32 and bf16 weights) equals, to the bit, the canonical dot product computed
 *     here in plain C (16 lanes of fmaf in k order, then lane i + i+8, i+4, i+2, i+1), for
 *     rows of x on both sides of each tile and of a cache block, K on both sides of a
 *     vector and of a block of K, with one thread and two, with x packed for the tiles and
 *     read in place (k_set_x_pack);
 *   - k_silu_mul equals silu(a) * b with the scalar k_expf, to the bit, for values over
 *     k_expf's whole range and past it (±89, ±110, infinities, NaN, subnormals, -0), for
 *     every length up to two vectors plus a tail, in place on either input.
 */
#include "cpu/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_RNG_SEED 0x5eed0017ull
#include "check.h"

static float frand(float mag) { return mag * (float)(rnd(2000001) - 1000000) / 1e6f; }

static int same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof *a) == 0;
}

static void check_gemm(const char *path)
{
    int cases = 0;
    for (int rep = 0; rep < 300; rep++) {
        /* every third shape wider than a register tile's row (the one-row form, N > 64) */
        int M = 1 + rnd(13), N = 1 + rnd(rep % 3 == 0 ? 300 : 80), K = 1 + rnd(70),
            by_cols = rnd(2);
        size_t lda = by_cols ? (size_t)M + rnd(3) : (size_t)K + rnd(3);
        size_t ldb = (size_t)N + rnd(5), ldc = (size_t)N + rnd(5);
        size_t a_rs = by_cols ? 1 : lda, a_cs = by_cols ? lda : 1;
        float *A = malloc(sizeof(float) * lda * (by_cols ? K : M));
        float *B = malloc(sizeof(float) * ldb * K);
        float *C = malloc(sizeof(float) * ldc * M), *R = malloc(sizeof(float) * ldc * M);
        float *S = malloc(sizeof(float) * ldc * M), *Z = malloc(sizeof(float) * ldc * M);
        if (!A || !B || !C || !R || !S || !Z) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        for (size_t i = 0; i < lda * (by_cols ? K : M); i++)
            A[i] = frand(rep % 7 == 0 ? 1e-30f : 2.0f);
        for (size_t i = 0; i < ldb * K; i++)
            B[i] = frand(3.0f);
        /* k_gemm_set's C starts as garbage (NaN included) that it must not read; Z is the
         * reference from a zeroed C, with S's padding past N */
        for (size_t i = 0; i < ldc * M; i++) {
            R[i] = C[i] = rnd(4) ? frand(1.0f) : 0.0f;
            S[i] = rnd(5) ? frand(1e30f) : NAN;
            Z[i] = (i % ldc) < (size_t)N ? 0.0f : S[i];
        }
        for (int m = 0; m < M; m++)
            for (int k = 0; k < K; k++)
                for (int n = 0; n < N; n++) {
                    float a = A[m * a_rs + k * a_cs], b = B[k * ldb + n];
                    R[m * ldc + n] = fmaf(a, b, R[m * ldc + n]);
                    Z[m * ldc + n] = fmaf(a, b, Z[m * ldc + n]);
                }
        k_gemm_acc(M, N, K, A, a_rs, a_cs, B, ldb, C, ldc);
        k_gemm_set(M, N, K, A, a_rs, a_cs, B, ldb, S, ldc);
        /* the padding past N is the caller's: it must come back untouched too */
        CHECK(same_bits(C, R, ldc * M),
              "%s: k_gemm_acc M=%d N=%d K=%d a_rs=%zu a_cs=%zu: not the bits of fmaf in k order",
              path, M, N, K, a_rs, a_cs);
        CHECK(same_bits(S, Z, ldc * M),
              "%s: k_gemm_set M=%d N=%d K=%d a_rs=%zu a_cs=%zu: not the bits of fmaf in k order "
              "from a zeroed C",
              path, M, N, K, a_rs, a_cs);
        cases++;
        free(A);
        free(B);
        free(C);
        free(R);
        free(S);
        free(Z);
    }
    printf("%s: k_gemm_acc and k_gemm_set, %d shapes, the bits of fmaf in k order\n", path, cases);
}

/* The canonical dot product (kernels.h) in plain C: lanes past K take fmaf(0, 0, lane), as
 * a vector path's zeroed tail does. */
static float canonical_dot(const float *x, const float *w, int K)
{
    float lane[16] = {0};
    for (int k = 0; k < K; k++)
        lane[k % 16] = fmaf(x[k], w[k], lane[k % 16]);
    for (int l = K % 16; K % 16 && l < 16; l++)
        lane[l] = fmaf(0.0f, 0.0f, lane[l]);
    for (int half = 8; half >= 1; half /= 2)
        for (int i = 0; i < half; i++)
            lane[i] = lane[i] + lane[i + half];
    return lane[0];
}

static void *must_alloc(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

static void check_linear(const char *path, tp_pool *const pools[2])
{
    /* rows: batch 1, the narrow and small tiles, whole and short tiles of 4, two cache
     * blocks (128 rows at K <= 513, 60 at K = 1029), a job cut by rows of x (300: tasks of
     * 48 rows and a short last one, kernels.c ROW_TASK_MIN); K: a tail, one vector, on
     * both sides of a block of K (the avx2 half passes: 512; its packed rows of w: 1024)
     * and over three and five of them */
    static const int Ts[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 33, 70, 131, 300};
    static const int Ks[] = {1, 15, 16, 17, 128, 129, 300, 512, 513, 1024, 1029, 2063};
    int cases = 0;
    for (size_t a = 0; a < sizeof Ts / sizeof *Ts; a++)
        for (size_t b = 0; b < sizeof Ks / sizeof *Ks; b++) {
            int T = Ts[a], K = Ks[b], N = 1 + rnd(40), ldy = N + rnd(3);
            size_t ny = (size_t)T * ldy;
            float *x = must_alloc(sizeof(float) * T * K), *wf = must_alloc(sizeof(float) * N * K);
            float *wb = must_alloc(sizeof(float) * N * K); /* the bf16 weights, widened */
            uint16_t *wh = must_alloc(sizeof(uint16_t) * N * K);
            float *ref = must_alloc(sizeof(float) * ny), *y = must_alloc(sizeof(float) * ny);
            for (size_t i = 0; i < (size_t)T * K; i++)
                x[i] = rnd(8) ? frand(2.0f) : 0.0f;
            for (size_t i = 0; i < (size_t)N * K; i++) {
                wf[i] = frand(3.0f);
                wh[i] = mhla_bf16_from_f32(frand(3.0f));
                wb[i] = mhla_f32_from_bf16(wh[i]);
            }
            for (int bf16 = 0; bf16 < 2; bf16++) {
                memset(ref, 0x7f, sizeof(float) * ny); /* the padding past N must stay so */
                for (int t = 0; t < T; t++)
                    for (int j = 0; j < N; j++)
                        ref[(size_t)t * ldy + j] =
                            canonical_dot(x + (size_t)t * K, (bf16 ? wb : wf) + (size_t)j * K, K);
                k_matrix m = {.f32 = bf16 ? NULL : wf, .bf16 = bf16 ? wh : NULL};
                for (int th = 0; th < 2; th++)
                    for (int pack = 1; pack >= 0; pack--) {
                        k_set_x_pack(pack);
                        memset(y, 0x7f, sizeof(float) * ny);
                        k_linear(x, T, K, m, N, y, ldy, pools[th]);
                        CHECK(same_bits(y, ref, ny),
                              "%s: k_linear %s T=%d K=%d N=%d, %d thread(s), x %s: not the "
                              "canonical bits",
                              path, bf16 ? "bf16" : "f32", T, K, N, tp_threads(pools[th]),
                              pack ? "packed" : "in place");
                    }
            }
            k_set_x_pack(1);
            cases++;
            free(x);
            free(wf);
            free(wb);
            free(wh);
            free(ref);
            free(y);
        }
    printf("%s: k_linear, %d shapes x f32/bf16 x %d/%d threads x packed/in place, the canonical "
           "bits\n",
           path, cases, tp_threads(pools[0]), tp_threads(pools[1]));
}

static void check_silu(const char *path)
{
    static const float special[] = {0.0f,     -0.0f,     89.0f,     -89.0f,   110.0f,
                                    -110.0f,  89.0001f,  -89.0001f, 110.001f, -110.001f,
                                    INFINITY, -INFINITY, NAN,       1e-40f,   -1e-40f,
                                    3.4e38f,  -3.4e38f,  1e-7f,     -1e-7f,   0.5f};
    enum { N = 16 * 8 + 5 };
    float a[N], b[N], out[N], ref[N], tmp[N];
    int lengths = 0;
    for (int rep = 0; rep < 400; rep++) {
        for (int i = 0; i < N; i++) {
            int kind = rnd(10);
            a[i] = kind == 0   ? special[rnd((int)(sizeof special / sizeof *special))]
                   : kind == 1 ? frand(120.0f)
                               : frand(12.0f);
            b[i] = rnd(8) ? frand(4.0f) : special[rnd((int)(sizeof special / sizeof *special))];
        }
        int n = rep < 40 ? rep : 1 + rnd(N);
        for (int i = 0; i < n; i++)
            ref[i] = a[i] / (1.0f + k_expf(-a[i])) * b[i];
        memset(out, 0x7f, sizeof out);
        k_silu_mul(a, b, out, n);
        CHECK(same_bits(out, ref, (size_t)n), "%s: k_silu_mul, %d values: not the scalar bits",
              path, n);
        memcpy(tmp, a, sizeof tmp);
        k_silu_mul(tmp, b, tmp, n);
        CHECK(same_bits(tmp, ref, (size_t)n), "%s: k_silu_mul in place on a, %d values", path, n);
        memcpy(tmp, b, sizeof tmp);
        k_silu_mul(a, tmp, tmp, n);
        CHECK(same_bits(tmp, ref, (size_t)n), "%s: k_silu_mul in place on b, %d values", path, n);
        lengths++;
    }
    /* every float in a dense sweep of the plain range, against the scalar form */
    long swept = 0;
    for (float x = -89.0f; x <= 110.0f; x += 0.0137f) {
        float one = 1.0f, got;
        k_silu_mul(&x, &one, &got, 1); /* the tail */
        float v[16], o[16], w[16];
        for (int i = 0; i < 16; i++) {
            v[i] = x + (float)i * 0.0007f;
            w[i] = 1.0f;
        }
        k_silu_mul(v, w, o, 16);
        for (int i = 0; i < 16; i++) {
            float r = v[i] / (1.0f + k_expf(-v[i]));
            if (memcmp(&o[i], &r, sizeof r) != 0) {
                CHECK(0, "%s: silu(%a) = %a, scalar %a", path, (double)v[i], (double)o[i],
                      (double)r);
                break;
            }
        }
        swept += 16;
    }
    printf("%s: k_silu_mul, %d lengths and %ld swept values, the scalar bits\n", path, lengths,
           swept);
}

/* usage: test_vector_kernels [THREADS]: k_linear runs on pools of 1 and THREADS threads
 * (default 2; the aarch64 run under qemu-user passes 1: its pthread_create never returned
 * on the project's x86-64 machines). */
int main(int argc, char **argv)
{
    char paths[64], err[256];
    tp_pool *pools[2];
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    if (threads < 1 || threads > 64) {
        fprintf(stderr, "FAIL: THREADS must be 1 to 64, not %s\n", argv[1]);
        return 1;
    }
    for (int i = 0; i < 2; i++)
        if (tp_create(i ? threads : 1, &pools[i], err, sizeof err)) {
            fprintf(stderr, "FAIL: pool of %d: %s\n", i + 1, err);
            return 1;
        }
    snprintf(paths, sizeof paths, "%s", k_isa_runnable());
    int n_paths = 0;
    for (char *p = strtok(paths, " "); p; p = strtok(NULL, " ")) {
        if (k_isa_select(p, err, sizeof err)) {
            CHECK(0, "select %s: %s", p, err);
            continue;
        }
        check_gemm(p);
        check_linear(p, pools);
        check_silu(p);
        n_paths++;
    }
    CHECK(n_paths >= 1, "no kernel path ran");
    for (int i = 0; i < 2; i++)
        tp_free(pools[i]);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok: %d paths\n", n_paths);
    return 0;
}
