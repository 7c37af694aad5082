/*
 * The token mixer's matrix product and the SwiGLU gate (engine/cpu/kernels.h), on every
 * kernel path this CPU runs:
 *   - k_gemm_acc equals, to the bit, C[m][n] = fmaf(A[m][k], B[k][n], C[m][n]) for k in
 *     order, computed here in plain C: shapes on both sides of each path's register tile,
 *     columns that leave a partial vector, A read by rows and by columns (the mixer reads
 *     K_iᵀ that way);
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
        int M = 1 + rnd(13), N = 1 + rnd(80), K = 1 + rnd(70), by_cols = rnd(2);
        size_t lda = by_cols ? (size_t)M + rnd(3) : (size_t)K + rnd(3);
        size_t ldb = (size_t)N + rnd(5), ldc = (size_t)N + rnd(5);
        size_t a_rs = by_cols ? 1 : lda, a_cs = by_cols ? lda : 1;
        float *A = malloc(sizeof(float) * lda * (by_cols ? K : M));
        float *B = malloc(sizeof(float) * ldb * K);
        float *C = malloc(sizeof(float) * ldc * M), *R = malloc(sizeof(float) * ldc * M);
        if (!A || !B || !C || !R) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        for (size_t i = 0; i < lda * (by_cols ? K : M); i++)
            A[i] = frand(rep % 7 == 0 ? 1e-30f : 2.0f);
        for (size_t i = 0; i < ldb * K; i++)
            B[i] = frand(3.0f);
        for (size_t i = 0; i < ldc * M; i++)
            R[i] = C[i] = rnd(4) ? frand(1.0f) : 0.0f;
        for (int m = 0; m < M; m++)
            for (int k = 0; k < K; k++)
                for (int n = 0; n < N; n++)
                    R[m * ldc + n] = fmaf(A[m * a_rs + k * a_cs], B[k * ldb + n], R[m * ldc + n]);
        k_gemm_acc(M, N, K, A, a_rs, a_cs, B, ldb, C, ldc);
        /* the padding past N is the caller's: it must come back untouched too */
        CHECK(same_bits(C, R, ldc * M),
              "%s: k_gemm_acc M=%d N=%d K=%d a_rs=%zu a_cs=%zu: not the bits of fmaf in k order",
              path, M, N, K, a_rs, a_cs);
        cases++;
        free(A);
        free(B);
        free(C);
        free(R);
    }
    printf("%s: k_gemm_acc, %d shapes, the bits of fmaf in k order\n", path, cases);
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

int main(void)
{
    char paths[64], err[256];
    snprintf(paths, sizeof paths, "%s", k_isa_runnable());
    int n_paths = 0;
    for (char *p = strtok(paths, " "); p; p = strtok(NULL, " ")) {
        if (k_isa_select(p, err, sizeof err)) {
            CHECK(0, "select %s: %s", p, err);
            continue;
        }
        check_gemm(p);
        check_silu(p);
        n_paths++;
    }
    CHECK(n_paths >= 1, "no kernel path ran");
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok: %d paths\n", n_paths);
    return 0;
}
