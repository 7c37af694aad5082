// test_cudasim.cpp - self-test of the CUDA simulator.  Kernels are written
// exactly as engine/cuda/*.cu writes them (MHLA_LAUNCH, MHLA_DYNAMIC_SMEM,
// __shared__, shuffles); misuse must come back as the error CUDA would give,
// and fatal kernel bugs (divergent barriers, out-of-bounds writes) must abort
// with a message, which is checked in forked children.  Exit status 0 = pass.
#include <algorithm>
#include <cfloat>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

#include "cudasim.h"

static int g_checks = 0, g_failures = 0;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        ++g_checks;                                                                                \
        if (!(cond)) {                                                                             \
            ++g_failures;                                                                          \
            std::fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                   \
            std::fprintf(stderr, __VA_ARGS__);                                                     \
            std::fputc('\n', stderr);                                                              \
        }                                                                                          \
    } while (0)
#define EXPECT_ERR(call, want)                                                                     \
    do {                                                                                           \
        auto e_ = (call);                                                                          \
        CHECK(e_ == (want), "%s returned %d, expected %s", #call, static_cast<int>(e_), #want);    \
    } while (0)
#define OK(call) EXPECT_ERR(call, cudaSuccess)
#define BLAS_OK(call) EXPECT_ERR(call, CUBLAS_STATUS_SUCCESS)

static uint32_t g_rng = 12345;
static float frand()
{ // small exactly-representable values keep references exact
    g_rng = g_rng * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<int>(g_rng >> 24) % 17 - 8) / 8.0f;
}
static uint32_t bits(float f)
{
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
static float from_bits(uint32_t u)
{
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// ---------------------------------------------------------------------------
// Kernels.
__global__ void block_sum(const float *__restrict__ x, float *__restrict__ out, int n)
{
    __shared__ float red[256];
    const int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    red[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] += red[t + s];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = red[0];
}

__global__ void warp_ops(float *xor_sum, float *down_sum, int *seg_bcast, unsigned *up,
                         unsigned *ghost)
{
    const unsigned t = threadIdx.x, lane = t % warpSize, nl = min(32u, blockDim.x - (t - lane));
    float a = static_cast<float>(t + 1), d = a;
    for (int off = 16; off > 0; off >>= 1) {
        const float o = __shfl_xor_sync(0xffffffffu, a, off);
        if ((lane ^ static_cast<unsigned>(off)) < nl)
            a += o; // partner may not exist in the last warp
        const float p = __shfl_down_sync(0xffffffffu, d, static_cast<unsigned>(off));
        if (lane + static_cast<unsigned>(off) < nl)
            d += p;
    }
    xor_sum[t] = a;
    down_sum[t] = d;
    seg_bcast[t] =
        __shfl_sync(0xffffffffu, static_cast<int>(t) * 3, 5, 8); // lane 5 of each 8-lane segment
    up[t] = __shfl_up_sync(0xffffffffu, t, 1u);
    ghost[t] = __shfl_sync(0xffffffffu, t, 31); // lane 31 does not exist in a 16-lane warp
    __syncwarp();
}

__global__ void index3d(unsigned *out)
{
    const unsigned lin =
        threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y;
    const unsigned nt = blockDim.x * blockDim.y * blockDim.z;
    const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const unsigned first = __shfl_sync(0xffffffffu, lin, 0);
    out[(b * nt + lin) * 2] = lin;
    out[(b * nt + lin) * 2 + 1] = first;
}

__global__ void smem_reverse(const float *in, float *out, unsigned *probe, int n)
{
    MHLA_DYNAMIC_SMEM(float, buf);
    if (threadIdx.x == 0) { // read before anything is written: must be the garbage pattern
        unsigned u;
        std::memcpy(&u, buf + n - 1, 4);
        probe[blockIdx.x * 2] = u;
        probe[blockIdx.x * 2 + 1] = static_cast<unsigned>(reinterpret_cast<uintptr_t>(buf) % 16);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        buf[i] = in[blockIdx.x * n + i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        out[blockIdx.x * n + i] = buf[n - 1 - i];
}

__global__ void atomics(float *f, int *i, unsigned long long *u, int *mx)
{
    const unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(f, 0.5f);
    atomicAdd(i, 2);
    atomicAdd(u, 1ull << 33);
    atomicMax(mx, static_cast<int>(g * 7919u % 1000u));
}

__global__ void scale_add(const float *in, float *out, float a, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i] * a + 1.0f;
}

__global__ void four_barriers(float *out)
{
    __shared__ float s[256];
    const int t = threadIdx.x;
    s[t] = static_cast<float>(t);
    __syncthreads();
    float v = s[255 - t];
    __syncthreads();
    s[t] = v + 1.0f;
    __syncthreads();
    v = s[(t + 1) % 256];
    __syncthreads();
    out[blockIdx.x * 256 + t] = v;
}

// Buggy kernels for the death tests.
__global__ void early_return_then_sync(float *out)
{
    __shared__ float s[64];
    if (threadIdx.x >= 40)
        return; // the rest then waits in __syncthreads forever
    s[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = s[(threadIdx.x + 1) % 40];
}
__global__ void shuffle_after_exit(float *out)
{
    if (threadIdx.x % 32 >= 16)
        return;
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}
__global__ void mixed_barriers(float *out)
{
    if (threadIdx.x < 16)
        __syncwarp(); // waits for lanes 16..31, which wait for the block
    else
        __syncthreads();
    out[threadIdx.x] = 0.0f;
}
__global__ void write_past_end(float *out, int n) { out[n + threadIdx.x] = 1.0f; }
__global__ void smem_overflow(int n)
{
    MHLA_DYNAMIC_SMEM(float, buf);
    buf[n + threadIdx.x] = 1.0f;
}

// ---------------------------------------------------------------------------
static void test_block_reduce()
{
    const int blocks = 1000, n = blocks * 256 - 100;
    std::vector<float> x(n), out(blocks);
    for (int i = 0; i < n; ++i)
        x[i] = static_cast<float>(i % 17 - 8);
    float *dx, *dout;
    OK(cudaMalloc(&dx, n * sizeof(float)));
    OK(cudaMalloc(&dout, blocks * sizeof(float)));
    OK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    MHLA_LAUNCH(block_sum, blocks, 256, 0, nullptr)(dx, dout, n);
    OK(cudaGetLastError());
    OK(cudaMemcpy(out.data(), dout, blocks * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int b = 0; b < blocks; ++b) {
        double ref = 0;
        for (int i = b * 256; i < std::min(n, b * 256 + 256); ++i)
            ref += x[i];
        bad += out[b] != static_cast<float>(ref);
    }
    CHECK(bad == 0, "%d of %d block sums wrong", bad, blocks);
    OK(cudaFree(dx));
    OK(cudaFree(dout));
}

static void test_warp_ops()
{
    const unsigned nt = 48; // warp 1 is partial: 16 lanes
    float *dx, *dd;
    int *ds;
    unsigned *du, *dg;
    OK(cudaMalloc(&dx, nt * 4));
    OK(cudaMalloc(&dd, nt * 4));
    OK(cudaMalloc(&ds, nt * 4));
    OK(cudaMalloc(&du, nt * 4));
    OK(cudaMalloc(&dg, nt * 4));
    MHLA_LAUNCH(warp_ops, 1, nt, 0, 0)(dx, dd, ds, du, dg);
    OK(cudaGetLastError());
    std::vector<float> x(nt), d(nt);
    std::vector<int> s(nt);
    std::vector<unsigned> u(nt), g(nt);
    OK(cudaMemcpy(x.data(), dx, nt * 4, cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(d.data(), dd, nt * 4, cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(s.data(), ds, nt * 4, cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(u.data(), du, nt * 4, cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(g.data(), dg, nt * 4, cudaMemcpyDeviceToHost));
    const float w0 = 32 * 33 / 2, w1 = (48 * 49 - 32 * 33) / 2; // sums of t+1 per warp
    int bad = 0;
    for (unsigned t = 0; t < nt; ++t) {
        const float want = t < 32 ? w0 : w1;
        bad += x[t] != want;
        if (t % 32 == 0)
            bad += d[t] != want;
        bad += s[t] != static_cast<int>((t & ~7u) + 5) * 3;
        bad += u[t] != (t % 32 == 0 ? t : t - 1);
        bad += g[t] !=
               (t < 32 ? 31u : 0xCDCDCDCDu); // nonexistent source lane reads the poison pattern
    }
    CHECK(bad == 0, "%d wrong warp-op results", bad);
    for (void *p : {static_cast<void *>(dx), static_cast<void *>(dd), static_cast<void *>(ds),
                    static_cast<void *>(du), static_cast<void *>(dg)})
        OK(cudaFree(p));
}

static void test_index3d()
{
    const dim3 grid(2, 3, 2), block(8, 4, 3);
    const unsigned nt = 96, nb = 12;
    unsigned *d;
    OK(cudaMalloc(&d, nb * nt * 2 * 4));
    MHLA_LAUNCH(index3d, grid, block, 0, nullptr)(d);
    OK(cudaGetLastError());
    std::vector<unsigned> h(nb * nt * 2);
    OK(cudaMemcpy(h.data(), d, h.size() * 4, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (unsigned b = 0; b < nb; ++b)
        for (unsigned l = 0; l < nt; ++l)
            bad += h[(b * nt + l) * 2] != l || h[(b * nt + l) * 2 + 1] != l / 32 * 32;
    CHECK(bad == 0, "%d wrong 3-D index/lane results", bad);
    OK(cudaFree(d));
}

static void test_dynamic_smem()
{
    const int n = 16384, blocks = 3; // 64 KiB per block: needs the opt-in attribute
    std::vector<float> in(n * blocks), out(n * blocks);
    for (size_t i = 0; i < in.size(); ++i)
        in[i] = static_cast<float>(i);
    float *din, *dout;
    unsigned *dprobe;
    OK(cudaMalloc(&din, in.size() * 4));
    OK(cudaMalloc(&dout, out.size() * 4));
    OK(cudaMalloc(&dprobe, blocks * 8));
    OK(cudaMemcpy(din, in.data(), in.size() * 4, cudaMemcpyHostToDevice));
    MHLA_LAUNCH(smem_reverse, blocks, 128, n * 4, 0)(din, dout, dprobe, n);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidValue); // 64 KiB > 48 KiB default
    OK(cudaFuncSetAttribute(smem_reverse, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024));
    MHLA_LAUNCH(smem_reverse, blocks, 128, n * 4, 0)(din, dout, dprobe, n);
    OK(cudaGetLastError());
    OK(cudaMemcpy(out.data(), dout, out.size() * 4, cudaMemcpyDeviceToHost));
    unsigned probe[blocks * 2];
    OK(cudaMemcpy(probe, dprobe, sizeof probe, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int b = 0; b < blocks; ++b) {
        for (int i = 0; i < n; ++i)
            bad += out[b * n + i] != in[b * n + n - 1 - i];
        bad += probe[b * 2] != 0xCDCDCDCDu || probe[b * 2 + 1] != 0;
    }
    CHECK(bad == 0, "%d wrong dynamic-shared-memory results", bad);
    MHLA_LAUNCH(smem_reverse, 1, 128, 228 * 1024, 0)(din, dout, dprobe, n);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidValue); // over the 227 KiB hardware maximum
    OK(cudaFree(din));
    OK(cudaFree(dout));
    OK(cudaFree(dprobe));
}

static void test_atomics()
{
    float *f;
    int *i, *mx;
    unsigned long long *u;
    OK(cudaMalloc(&f, 4));
    OK(cudaMalloc(&i, 4));
    OK(cudaMalloc(&mx, 4));
    OK(cudaMalloc(&u, 8));
    OK(cudaMemset(f, 0, 4));
    OK(cudaMemset(i, 0, 4));
    OK(cudaMemset(u, 0, 8));
    OK(cudaMemset(mx, 0xff, 4)); // -1
    MHLA_LAUNCH(atomics, 100, 128, 0, 0)(f, i, u, mx);
    OK(cudaGetLastError());
    float hf;
    int hi, hmx;
    unsigned long long hu;
    OK(cudaMemcpy(&hf, f, 4, cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(&hi, i, 4, cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(&hmx, mx, 4, cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(&hu, u, 8, cudaMemcpyDeviceToHost));
    int want_mx = -1;
    for (unsigned g = 0; g < 12800; ++g)
        want_mx = std::max(want_mx, static_cast<int>(g * 7919u % 1000u));
    CHECK(hf == 6400.0f && hi == 25600 && hu == 12800ull << 33 && hmx == want_mx,
          "atomics: %g %d %llu %d", hf, hi, hu, hmx);
    for (void *p : {static_cast<void *>(f), static_cast<void *>(i), static_cast<void *>(mx),
                    static_cast<void *>(u)})
        OK(cudaFree(p));
}

// Reference conversions written independently of cudasim: decode by the
// format definitions, round by comparing against midpoints of adjacent values.
static double ref_half(uint16_t h)
{
    const int e = h >> 10 & 31, m = h & 1023;
    const double v = e == 0    ? std::ldexp(m, -24)
                     : e == 31 ? (m ? NAN : INFINITY)
                               : std::ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}
static double ref_bf16(uint16_t b)
{
    const int e = b >> 7 & 255, m = b & 127;
    const double v = e == 0     ? std::ldexp(m, -133)
                     : e == 255 ? (m ? NAN : INFINITY)
                                : std::ldexp(128 + m, e - 134);
    return b & 0x8000 ? -v : v;
}
static void test_16bit_floats()
{
    int bad = 0;
    for (uint32_t b = 0; b < 65536; ++b) {
        const uint16_t v = static_cast<uint16_t>(b);
        const double rb = ref_bf16(v), rh = ref_half(v);
        const float fb = __bfloat162float(__ushort_as_bfloat16(v)),
                    fh = __half2float(__ushort_as_half(v));
        if (std::isnan(rb))
            bad += !std::isnan(fb) || !std::isnan(__bfloat162float(__float2bfloat16(fb)));
        else
            bad += static_cast<double>(fb) != rb || __bfloat16_as_ushort(__float2bfloat16(fb)) != v;
        if (std::isnan(rh))
            bad += !std::isnan(fh) || !std::isnan(__half2float(__float2half(fh)));
        else
            bad += static_cast<double>(fh) != rh || __half_as_ushort(__float2half_rn(fh)) != v;
    }
    CHECK(bad == 0, "%d 16-bit patterns do not decode or round-trip", bad);
    // Every midpoint between adjacent finite values (both signs) must round to the
    // even pattern; one float ulp either side must round to the nearer value.
    bad = 0;
    for (uint16_t lo = 0; lo < 0x7f7f; ++lo)
        for (int sign = 0; sign < 2; ++sign) {
            const uint16_t s = static_cast<uint16_t>(sign << 15), a = s | lo, b = s | (lo + 1);
            const float mid = static_cast<float>((ref_bf16(a) + ref_bf16(b)) / 2);
            const float toward0 = std::nextafter(mid, 0.0f),
                        away = std::nextafter(mid, sign ? -INFINITY : INFINITY);
            bad += __bfloat16_as_ushort(__float2bfloat16(mid)) != ((lo & 1) ? b : a);
            bad += __bfloat16_as_ushort(__float2bfloat16_rn(toward0)) != a;
            bad += __bfloat16_as_ushort(__float2bfloat16_rn(away)) != b;
        }
    for (uint16_t lo = 0; lo < 0x7bff; ++lo)
        for (int sign = 0; sign < 2; ++sign) {
            const uint16_t s = static_cast<uint16_t>(sign << 15), a = s | lo, b = s | (lo + 1);
            const float mid = static_cast<float>((ref_half(a) + ref_half(b)) / 2);
            const float toward0 = std::nextafter(mid, 0.0f),
                        away = std::nextafter(mid, sign ? -INFINITY : INFINITY);
            bad += __half_as_ushort(__float2half(mid)) != ((lo & 1) ? b : a);
            bad += __half_as_ushort(__float2half_rn(toward0)) != a;
            bad += __half_as_ushort(__float2half_rn(away)) != b;
        }
    CHECK(bad == 0, "%d rounding midpoint checks failed", bad);
    // Overflow, infinities, NaN, signed zero.
    CHECK(__bfloat16_as_ushort(__float2bfloat16(FLT_MAX)) == 0x7f80,
          "bf16(FLT_MAX) must round to inf");
    CHECK(__bfloat16_as_ushort(__float2bfloat16(from_bits(0x7f7f7fff))) == 0x7f7f,
          "bf16 just below the inf midpoint");
    CHECK(__half_as_ushort(__float2half(65520.0f)) == 0x7c00, "half(65520) must be inf");
    CHECK(__half_as_ushort(__float2half(std::nextafter(65520.0f, 0.0f))) == 0x7bff,
          "half(65519.99) must be 65504");
    CHECK(__half_as_ushort(__float2half(-INFINITY)) == 0xfc00, "half(-inf)");
    CHECK(__half_as_ushort(__float2half(-0.0f)) == 0x8000, "half(-0)");
    CHECK(__half_as_ushort(__float2half(1e-30f)) == 0 &&
              __half_as_ushort(__float2half(-1e-30f)) == 0x8000,
          "half tiny");
    CHECK(std::isnan(__half2float(__float2half(from_bits(0xffc00001u)))), "half NaN");
    CHECK(std::isnan(__bfloat162float(__float2bfloat16(from_bits(0x7f800001u)))),
          "bf16 signalling NaN stays NaN");
    CHECK(__bfloat16_as_ushort(__float2bfloat16(-0.0f)) == 0x8000, "bf16(-0)");
}

// ---------------------------------------------------------------------------
// GEMM against a naive double reference.
static void put(std::vector<unsigned char> &buf, cudaDataType t, size_t i, float v)
{
    if (t == CUDA_R_32F)
        std::memcpy(&buf[i * 4], &v, 4);
    else {
        uint16_t h = t == CUDA_R_16BF ? __bfloat16_as_ushort(__float2bfloat16(v))
                                      : __half_as_ushort(__float2half(v));
        std::memcpy(&buf[i * 2], &h, 2);
    }
}
static float get(const std::vector<unsigned char> &buf, cudaDataType t, size_t i)
{
    if (t == CUDA_R_32F) {
        float v;
        std::memcpy(&v, &buf[i * 4], 4);
        return v;
    }
    uint16_t h;
    std::memcpy(&h, &buf[i * 2], 2);
    return t == CUDA_R_16BF ? __bfloat162float(__ushort_as_bfloat16(h))
                            : __half2float(__ushort_as_half(h));
}
static size_t esz(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

struct GemmCase {
    cublasOperation_t ta, tb;
    cudaDataType in, out;
    int m, n, k, batch;
    float alpha, beta;
    int api; // 0 GemmEx / StridedBatchedEx, 1 Sgemm / SgemmStridedBatched
};
static void run_gemm_case(cublasHandle_t h, const GemmCase &c)
{
    const int ar = c.ta == CUBLAS_OP_N ? c.m : c.k, ac = c.ta == CUBLAS_OP_N ? c.k : c.m;
    const int br = c.tb == CUBLAS_OP_N ? c.k : c.n, bc = c.tb == CUBLAS_OP_N ? c.n : c.k;
    const int lda = ar + 3, ldb = br + 1, ldc = c.m + 2;
    // Batch strides leave gaps; allocations are exactly as large as the call touches.
    const long long sA = (ac - 1LL) * lda + ar + 5, sB = (bc - 1LL) * ldb + br + 7,
                    sC = (c.n - 1LL) * ldc + c.m + 3;
    // (k = 0: A and B are not touched, so a one-element allocation is enough)
    const size_t nA = c.k ? (c.batch - 1) * sA + (ac - 1) * lda + ar : 1;
    const size_t nB = c.k ? (c.batch - 1) * sB + (bc - 1) * ldb + br : 1;
    const size_t nC = (c.batch - 1) * sC + (c.n - 1) * ldc + c.m;
    std::vector<unsigned char> A(nA * esz(c.in)), B(nB * esz(c.in)), C(nC * esz(c.out)), C0;
    for (size_t i = 0; i < nA; ++i)
        put(A, c.in, i, frand());
    for (size_t i = 0; i < nB; ++i)
        put(B, c.in, i, frand());
    if (c.beta == 0.0f)
        std::fill(C.begin(), C.end(), 0xff); // NaN everywhere: must not be read
    else
        for (size_t i = 0; i < nC; ++i)
            put(C, c.out, i, frand());
    C0 = C;
    void *dA, *dB, *dC;
    OK(cudaMalloc(&dA, A.size()));
    OK(cudaMalloc(&dB, B.size()));
    OK(cudaMalloc(&dC, C.size()));
    OK(cudaMemcpy(dA, A.data(), A.size(), cudaMemcpyHostToDevice));
    OK(cudaMemcpy(dB, B.data(), B.size(), cudaMemcpyHostToDevice));
    OK(cudaMemcpy(dC, C.data(), C.size(), cudaMemcpyHostToDevice));
    cublasStatus_t st;
    if (c.api == 1 && c.batch == 1)
        st = cublasSgemm(h, c.ta, c.tb, c.m, c.n, c.k, &c.alpha, static_cast<float *>(dA), lda,
                         static_cast<float *>(dB), ldb, &c.beta, static_cast<float *>(dC), ldc);
    else if (c.api == 1)
        st =
            cublasSgemmStridedBatched(h, c.ta, c.tb, c.m, c.n, c.k, &c.alpha,
                                      static_cast<float *>(dA), lda, sA, static_cast<float *>(dB),
                                      ldb, sB, &c.beta, static_cast<float *>(dC), ldc, sC, c.batch);
    else if (c.batch == 1)
        st = cublasGemmEx(h, c.ta, c.tb, c.m, c.n, c.k, &c.alpha, dA, c.in, lda, dB, c.in, ldb,
                          &c.beta, dC, c.out, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    else
        st =
            cublasGemmStridedBatchedEx(h, c.ta, c.tb, c.m, c.n, c.k, &c.alpha, dA, c.in, lda, sA,
                                       dB, c.in, ldb, sB, &c.beta, dC, c.out, ldc, sC, c.batch,
                                       CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT_TENSOR_OP);
    CHECK(st == CUBLAS_STATUS_SUCCESS, "gemm returned %s", cublasGetStatusString(st));
    OK(cudaMemcpy(C.data(), dC, C.size(), cudaMemcpyDeviceToHost));
    int bad = 0;
    const double tol = c.out == CUDA_R_32F ? 1e-5 : c.out == CUDA_R_16BF ? 1.0 / 128 : 1.0 / 1024;
    for (int b = 0; b < c.batch; ++b)
        for (int j = 0; j < c.n; ++j)
            for (int i = 0; i < ldc; ++i) {
                const size_t ci = b * sC + static_cast<size_t>(j) * ldc + i;
                if (ci >= nC)
                    continue;
                if (i >= c.m) { // padding rows between m and ldc must be untouched
                    bad += std::memcmp(&C[ci * esz(c.out)], &C0[ci * esz(c.out)], esz(c.out)) != 0;
                    continue;
                }
                double ref = 0;
                for (int p = 0; p < c.k; ++p) {
                    const size_t ai =
                        b * sA + (c.ta == CUBLAS_OP_N ? static_cast<size_t>(p) * lda + i
                                                      : static_cast<size_t>(i) * lda + p);
                    const size_t bi =
                        b * sB + (c.tb == CUBLAS_OP_N ? static_cast<size_t>(j) * ldb + p
                                                      : static_cast<size_t>(p) * ldb + j);
                    ref += static_cast<double>(get(A, c.in, ai)) * get(B, c.in, bi);
                }
                ref = c.alpha * ref +
                      (c.beta != 0.0f ? c.beta * static_cast<double>(get(C0, c.out, ci)) : 0.0);
                const double got = get(C, c.out, ci);
                bad += !(std::fabs(got - ref) <= tol * std::max(1.0, std::fabs(ref)));
            }
    CHECK(bad == 0,
          "gemm ta=%d tb=%d in=%d out=%d m=%d n=%d k=%d batch=%d beta=%g api=%d: %d wrong elements",
          c.ta, c.tb, c.in, c.out, c.m, c.n, c.k, c.batch, c.beta, c.api, bad);
    OK(cudaFree(dA));
    OK(cudaFree(dB));
    OK(cudaFree(dC));
}

static void test_gemm()
{
    cublasHandle_t h;
    BLAS_OK(cublasCreate(&h));
    BLAS_OK(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH));
    const cublasOperation_t ops[2] = {CUBLAS_OP_N, CUBLAS_OP_T};
    const cudaDataType types[][2] = {{CUDA_R_32F, CUDA_R_32F},
                                     {CUDA_R_16BF, CUDA_R_16BF},
                                     {CUDA_R_16BF, CUDA_R_32F},
                                     {CUDA_R_16F, CUDA_R_16F},
                                     {CUDA_R_16F, CUDA_R_32F}};
    for (auto ta : ops)
        for (auto tb : ops)
            for (auto &t : types) {
                run_gemm_case(h, GemmCase{ta, tb, t[0], t[1], 7, 5, 9, 1, 1.0f, 0.0f, 0});
                run_gemm_case(h, GemmCase{ta, tb, t[0], t[1], 6, 11, 4, 1, 1.5f, 0.5f, 0});
                run_gemm_case(h, GemmCase{ta, tb, t[0], t[1], 5, 3, 8, 3, 0.75f, 0.25f,
                                          0}); // strided batched
            }
    run_gemm_case(h, GemmCase{CUBLAS_OP_T, CUBLAS_OP_N, CUDA_R_32F, CUDA_R_32F, 9, 4, 6, 1, 2.0f,
                              1.0f, 1});
    run_gemm_case(h, GemmCase{CUBLAS_OP_N, CUBLAS_OP_T, CUDA_R_32F, CUDA_R_32F, 4, 9, 6, 4, 1.0f,
                              0.0f, 1});
    run_gemm_case(h, GemmCase{CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_32F, CUDA_R_32F, 3, 3, 0, 1, 1.0f,
                              2.0f, 0}); // k = 0

    // Misuse: out of bounds, bad leading dimensions, host/device pointer mix-ups.
    std::puts("-- expected cudasim error lines follow (cuBLAS misuse) --");
    float *A, *B, *C;
    const float one = 1.0f, zero = 0.0f;
    OK(cudaMalloc(&A, 8 * 8 * 4));
    OK(cudaMalloc(&B, 8 * 8 * 4));
    OK(cudaMalloc(&C, 8 * 7 * 4)); // one column short of 8x8
    EXPECT_ERR(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &one, A, 8, B, 8, &zero, C, 8),
               CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_ERR(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 7, 8, &one, A, 7, B, 8, &zero, C, 8),
               CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_ERR(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, 8, 7, 9, &one, A, 9, B, 9, &zero, C, 8),
               CUBLAS_STATUS_INVALID_VALUE);
    std::vector<float> host(64);
    EXPECT_ERR(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 7, 8, &one, host.data(), 8, B, 8, &zero,
                           C, 8),
               CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_ERR(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 7, 8, A, A, 8, B, 8, &zero, C, 8),
               CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_ERR(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, A, CUDA_R_32F,
                                          4, 16, B, CUDA_R_32F, 4, 16, &zero, C, CUDA_R_32F, 4, 16,
                                          3, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               CUBLAS_STATUS_SUCCESS);
    EXPECT_ERR(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, A, CUDA_R_32F,
                                          4, 16, B, CUDA_R_32F, 4, 16, &zero, C, CUDA_R_32F, 4, 16,
                                          5, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               CUBLAS_STATUS_INVALID_VALUE); // the 5th batch entry runs past A's allocation
    EXPECT_ERR(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, A, CUDA_R_16BF, 4, B,
                            CUDA_R_32F, 4, &zero, C, CUDA_R_32F, 4, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT),
               CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_ERR(cublasSetWorkspace(h, A + 1, 64), CUBLAS_STATUS_INVALID_VALUE);
    BLAS_OK(cublasSetWorkspace(h, A, 256));
    OK(cudaFree(A));
    OK(cudaFree(B));
    OK(cudaFree(C));
    BLAS_OK(cublasDestroy(h));
}

// ---------------------------------------------------------------------------
static void test_graph()
{
    const int n = 200, m = 4,
              k = n / m; // GEMM: G (m x m) = X (m x k) * X^T, X = tmp viewed as m x k
    cudaStream_t s;
    OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cublasHandle_t h;
    BLAS_OK(cublasCreate(&h));
    BLAS_OK(cublasSetStream(h, s));
    cudaStream_t got;
    BLAS_OK(cublasGetStream(h, &got));
    CHECK(got == s, "cublasGetStream");
    float *in, *tmp, *out, *g;
    OK(cudaMalloc(&in, n * 4));
    OK(cudaMalloc(&tmp, n * 4));
    OK(cudaMalloc(&out, n * 4));
    OK(cudaMalloc(&g, m * m * 4));
    float a = 2.0f;
    const float one = 1.0f, zero = 0.0f;
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    MHLA_LAUNCH(scale_add, (n + 63) / 64, 64, 0, s)(in, tmp, a, n);
    OK(cudaMemsetAsync(out, 0, n * 4, s));
    OK(cudaMemcpyAsync(out, tmp, n / 2 * 4, cudaMemcpyDeviceToDevice, s));
    BLAS_OK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, m, m, k, &one, tmp, m, tmp, m, &zero, g, m));
    cudaStreamCaptureStatus cs;
    OK(cudaStreamIsCapturing(s, &cs));
    CHECK(cs == cudaStreamCaptureStatusActive, "capture status %d", cs);
    cudaGraph_t graph;
    OK(cudaStreamEndCapture(s, &graph));
    OK(cudaStreamIsCapturing(s, &cs));
    CHECK(cs == cudaStreamCaptureStatusNone, "capture status after end %d", cs);
    CHECK(cudasim_graph_num_ops(graph) == 4, "graph has %zu ops", cudasim_graph_num_ops(graph));
    a = 100.0f; // kernel arguments were captured by value
    std::vector<float> h_out(n), h_in(n), h_g(m * m);
    OK(cudaMemcpy(h_out.data(), out, n * 4, cudaMemcpyDeviceToHost));
    CHECK(bits(h_out[0]) == 0xCDCDCDCDu, "capture must not execute anything (out[0] = %g)",
          h_out[0]);
    cudaGraphExec_t exec;
    OK(cudaGraphInstantiate(&exec, graph, 0));
    OK(cudaGraphDestroy(graph)); // the executable graph stays valid
    for (int rep = 0; rep < 3; ++rep) {
        for (int i = 0; i < n; ++i)
            h_in[i] = static_cast<float>(i % 13) * (rep + 1);
        OK(cudaMemcpy(in, h_in.data(), n * 4,
                      cudaMemcpyHostToDevice)); // new contents, same pointer
        OK(cudaGraphLaunch(exec, s));
        OK(cudaStreamSynchronize(s));
        OK(cudaMemcpy(h_out.data(), out, n * 4, cudaMemcpyDeviceToHost));
        OK(cudaMemcpy(h_g.data(), g, m * m * 4, cudaMemcpyDeviceToHost));
        int bad = 0;
        for (int i = 0; i < n; ++i)
            bad += h_out[i] != (i < n / 2 ? h_in[i] * 2.0f + 1.0f : 0.0f);
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < m; ++j) {
                double ref = 0;
                for (int p = 0; p < k; ++p)
                    ref += (h_in[i + p * m] * 2.0 + 1) * (h_in[j + p * m] * 2.0 + 1);
                bad += std::fabs(h_g[i + j * m] - ref) > 1e-5 * std::fabs(ref);
            }
        CHECK(bad == 0, "graph replay %d: %d wrong values", rep, bad);
    }
    OK(cudaGraphExecDestroy(exec));

    // Misuse during capture: each refused call invalidates the capture.
    std::puts("-- expected cudasim error lines follow (capture misuse) --");
    std::vector<float> hb(n);
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    EXPECT_ERR(cudaMemcpy(in, hb.data(), n * 4, cudaMemcpyHostToDevice),
               cudaErrorStreamCaptureUnsupported);
    OK(cudaStreamIsCapturing(s, &cs));
    CHECK(cs == cudaStreamCaptureStatusInvalidated, "status after refused memcpy %d", cs);
    MHLA_LAUNCH(scale_add, 1, 64, 0, s)(in, tmp, 1.0f, n);
    EXPECT_ERR(cudaGetLastError(), cudaErrorStreamCaptureInvalidated);
    graph = reinterpret_cast<cudaGraph_t>(&hb);
    EXPECT_ERR(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
    CHECK(graph == nullptr, "invalidated capture must return no graph");
    void *p = nullptr;
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    EXPECT_ERR(cudaMalloc(&p, 16), cudaErrorStreamCaptureUnsupported);
    EXPECT_ERR(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    EXPECT_ERR(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
    EXPECT_ERR(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    EXPECT_ERR(cudaDeviceSynchronize(), cudaErrorStreamCaptureUnsupported);
    EXPECT_ERR(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed)); // relaxed mode permits cudaMalloc
    OK(cudaMalloc(&p, 16));
    OK(cudaStreamEndCapture(s, &graph));
    OK(cudaGraphDestroy(graph));
    OK(cudaFree(p));
    cudaStream_t blocking; // legacy-stream work while a blocking stream captures
    OK(cudaStreamCreate(&blocking));
    OK(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeGlobal));
    MHLA_LAUNCH(scale_add, 1, 64, 0, 0)(in, tmp, 1.0f, n);
    EXPECT_ERR(cudaGetLastError(), cudaErrorStreamCaptureImplicit);
    EXPECT_ERR(cudaStreamEndCapture(blocking, &graph), cudaErrorStreamCaptureInvalidated);
    EXPECT_ERR(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal),
               cudaErrorStreamCaptureUnsupported);
    EXPECT_ERR(cudaStreamEndCapture(blocking, &graph), cudaErrorIllegalState);
    OK(cudaStreamDestroy(blocking));
    EXPECT_ERR(cudaStreamDestroy(blocking), cudaErrorInvalidResourceHandle);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    BLAS_OK(cublasDestroy(h));
    OK(cudaStreamDestroy(s));
    for (float *q : {in, tmp, out, g})
        OK(cudaFree(q));
}

static void test_memory_misuse()
{
    std::puts("-- expected cudasim error lines follow (memory and launch misuse) --");
    float *d;
    std::vector<float> h(64);
    OK(cudaMalloc(&d, 64 * 4));
    EXPECT_ERR(cudaMemcpy(h.data(), d, 64 * 4, cudaMemcpyHostToDevice),
               cudaErrorInvalidValue); // direction swapped
    EXPECT_ERR(cudaMemcpy(d, h.data(), 64 * 4, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemcpy(d + 1, h.data(), 64 * 4, cudaMemcpyHostToDevice),
               cudaErrorInvalidValue); // runs past end
    EXPECT_ERR(cudaMemcpy(d, d, 64 * 4, cudaMemcpyHostToDevice),
               cudaErrorInvalidValue); // host side is device
    EXPECT_ERR(cudaMemcpyAsync(h.data(), h.data() + 32, 16, cudaMemcpyDeviceToDevice, 0),
               cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemset(h.data(), 0, 16), cudaErrorInvalidValue);
    EXPECT_ERR(cudaMemsetAsync(d + 60, 0, 32, 0), cudaErrorInvalidValue);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidValue); // failing calls also set the last error
    OK(cudaGetLastError());
    OK(cudaMemcpy(d + 32, h.data(), 32 * 4, cudaMemcpyDefault));
    OK(cudaMemcpy(h.data(), d, 4, cudaMemcpyDefault));
    CHECK(bits(h[0]) == 0xCDCDCDCDu, "fresh device memory must hold the 0xCD pattern");
    int local;
    EXPECT_ERR(cudaFree(&local), cudaErrorInvalidValue);
    EXPECT_ERR(cudaFree(d + 1), cudaErrorInvalidValue);
    float *pinned;
    OK(cudaMallocHost(&pinned, 256));
    OK(cudaMemcpyAsync(d, pinned, 256, cudaMemcpyHostToDevice, 0));
    EXPECT_ERR(cudaFree(pinned), cudaErrorInvalidValue);
    OK(cudaFreeHost(pinned));
    OK(cudaFree(d));
    EXPECT_ERR(cudaFree(d), cudaErrorInvalidValue); // double free
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidValue);

    float *out;
    OK(cudaMalloc(&out, 4096 * 4));
    MHLA_LAUNCH(scale_add, 1, 2048, 0, 0)(out, out, 1.0f, 16);
    EXPECT_ERR(cudaPeekAtLastError(), cudaErrorInvalidConfiguration);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidConfiguration);
    OK(cudaGetLastError());
    MHLA_LAUNCH(scale_add, 0, 64, 0, 0)(out, out, 1.0f, 16);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidConfiguration);
    MHLA_LAUNCH(scale_add, dim3(1, 1, 1), dim3(16, 1, 65), 0, 0)(out, out, 1.0f, 16);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidConfiguration);
    MHLA_LAUNCH(scale_add, 1, 1024, 0, 0)(out, out, 1.0f, 16); // a valid launch sets no error
    OK(cudaGetLastError());
    OK(cudaFree(out));
}

// Fatal kernel bugs: run in a child, expect SIGABRT and a message naming the problem.
template <class F> static void expect_abort(const char *what, const char *needle, F fn)
{
    std::fflush(stdout);
    std::fflush(stderr);
    int fd[2];
    if (pipe(fd) != 0) {
        CHECK(false, "pipe");
        return;
    }
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        fn();
        _exit(0);
    }
    close(fd[1]);
    std::string text;
    char buf[4096];
    for (ssize_t r; (r = read(fd[0], buf, sizeof buf)) > 0;)
        text.append(buf, static_cast<size_t>(r));
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    const bool aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
    CHECK(aborted && text.find(needle) != std::string::npos, "%s: aborted=%d, output: %s", what,
          aborted, text.c_str());
    std::string line = text.substr(0, text.find('\n'));
    std::printf("  abort check '%s' ok: %s\n", what, line.c_str());
}
static void test_fatal_bugs()
{
    std::puts("-- fatal kernel bugs (each in a forked child) --");
    expect_abort("early return before __syncthreads", "exited", [] {
        float *d;
        cudaMalloc(&d, 64 * 4);
        MHLA_LAUNCH(early_return_then_sync, 1, 64, 0, 0)(d);
    });
    expect_abort("shuffle with exited lanes", "has exited", [] {
        float *d;
        cudaMalloc(&d, 64 * 4);
        MHLA_LAUNCH(shuffle_after_exit, 1, 64, 0, 0)(d);
    });
    expect_abort("__syncwarp vs __syncthreads", "deadlock", [] {
        float *d;
        cudaMalloc(&d, 64 * 4);
        MHLA_LAUNCH(mixed_barriers, 1, 64, 0, 0)(d);
    });
    expect_abort("global write past the end", "out-of-bounds write", [] {
        float *d;
        cudaMalloc(&d, 100 * 4);
        MHLA_LAUNCH(write_past_end, 1, 8, 0, 0)(d, 100);
    });
    expect_abort("dynamic shared memory overflow", "dynamic shared memory", [] {
        MHLA_LAUNCH(smem_overflow, 1, 4, 1024, 0)(256);
    });
}

static void test_device_api()
{
    int n = 0, dev = -1, v = 0;
    OK(cudaGetDeviceCount(&n));
    OK(cudaSetDevice(0));
    EXPECT_ERR(cudaSetDevice(1), cudaErrorInvalidDevice);
    EXPECT_ERR(cudaGetLastError(), cudaErrorInvalidDevice);
    OK(cudaGetDevice(&dev));
    cudaDeviceProp p;
    OK(cudaGetDeviceProperties(&p, 0));
    CHECK(n == 1 && dev == 0 && std::string(p.name) == "cudasim (CPU)" && p.major == 9 &&
              p.minor == 0 && p.multiProcessorCount == 4 && p.warpSize == 32 &&
              p.maxThreadsPerBlock == 1024 && p.sharedMemPerBlockOptin == 227 * 1024 &&
              p.totalGlobalMem > 0 && p.l2CacheSize > 0,
          "device properties");
    OK(cudaDriverGetVersion(&v));
    CHECK(v == 13000, "driver version %d", v);
    OK(cudaRuntimeGetVersion(&v));
    size_t fr = 0, tot = 0;
    OK(cudaMemGetInfo(&fr, &tot));
    CHECK(fr <= tot && tot == p.totalGlobalMem, "cudaMemGetInfo");
    CHECK(std::string(cudaGetErrorString(cudaErrorInvalidValue)) == "cudaErrorInvalidValue",
          "error string");
    CHECK(std::string(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE)) ==
              "CUBLAS_STATUS_INVALID_VALUE",
          "status");
    OK(cudaGetLastError());
}

static void test_timing()
{
    float *d;
    OK(cudaMalloc(&d, 64 * 256 * 4));
    cudaEvent_t e0, e1;
    OK(cudaEventCreate(&e0));
    OK(cudaEventCreateWithFlags(&e1, cudaEventDefault));
    MHLA_LAUNCH(four_barriers, 64, 256, 0, 0)(d); // warm-up: fiber stacks get created
    double best = 1e9;
    float ev_ms = 0;
    for (int r = 0; r < 5; ++r) {
        OK(cudaEventRecord(e0, 0));
        const auto t0 = std::chrono::steady_clock::now();
        MHLA_LAUNCH(four_barriers, 64, 256, 0, 0)(d);
        const auto t1 = std::chrono::steady_clock::now();
        OK(cudaEventRecord(e1, 0));
        OK(cudaEventSynchronize(e1));
        best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
        OK(cudaEventElapsedTime(&ev_ms, e0, e1));
    }
    OK(cudaGetLastError());
    std::vector<float> h(64 * 256);
    OK(cudaMemcpy(h.data(), d, h.size() * 4, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int b = 0; b < 64; ++b)
        for (int t = 0; t < 256; ++t)
            bad += h[b * 256 + t] != static_cast<float>(255 - (t + 1) % 256 + 1);
    CHECK(bad == 0, "four_barriers: %d wrong", bad);
    std::printf(
        "  launch 64 blocks x 256 threads x 4 __syncthreads: %.2f ms (best of 5; last by events %.2f ms)\n",
        best, ev_ms);
#if defined(__x86_64__) // other targets use the slower ucontext fallback
    CHECK(best < 50.0, "launch took %.2f ms", best);
#endif
    OK(cudaEventDestroy(e0));
    OK(cudaEventDestroy(e1));
    OK(cudaFree(d));
}

int main()
{
    std::setvbuf(stdout, nullptr, _IOLBF, 0); // keep our lines in order with the simulator's stderr
    test_device_api();
    test_block_reduce();
    test_warp_ops();
    test_index3d();
    test_dynamic_smem();
    test_atomics();
    test_16bit_floats();
    test_gemm();
    test_graph();
    test_memory_misuse();
    test_fatal_bugs();
    test_timing();
    OK(cudaDeviceSynchronize());
    CHECK(cudasim_live_allocations() == 0 && cudasim_live_bytes() == 0,
          "%zu allocations (%zu bytes) leaked", cudasim_live_allocations(), cudasim_live_bytes());
    if (g_failures) {
        std::printf("cudasim selftest: %d of %d checks FAILED\n", g_failures, g_checks);
        return 1;
    }
    std::printf("cudasim selftest: all %d checks passed\n", g_checks);
    return 0;
}
