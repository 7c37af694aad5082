// cudasim.h - CPU simulator of the CUDA runtime / cuBLAS subset used by
// engine/cuda/*.cu.  Included instead of the CUDA headers when MHLA_CUDA_SIM
// is defined (see engine/cuda/compat.h); the .cu files are then compiled by
// g++ as C++17 and every kernel runs on the CPU, one block after another, with
// each CUDA thread a fiber.  See README.md in this directory for the limits.
#pragma once

// Every standard header this file needs comes first, before the CUDA keyword
// macros below exist, so the macros cannot rewrite anything inside them.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

// ---------------------------------------------------------------------------
// Keywords.  Kernels are plain functions; __shared__ variables are function
// statics, which is sound because a block's threads are fibers on one OS
// thread and blocks run one at a time (launches are serialised process-wide).
// __restrict__ is already a GCC keyword.  __noinline__ is left alone on
// purpose: libstdc++ spells __attribute__((__noinline__)).
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static
#define __constant__

#define CUDART_VERSION 13000

// ---------------------------------------------------------------------------
// Vector and index types.
struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
        : x(vx), y(vy), z(vz)
    {
    }
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};
struct __align__(8) float2 { float x, y; };
struct __align__(16) float4 { float x, y, z, w; };
struct __align__(8) int2 { int x, y; };
struct __align__(16) int4 { int x, y, z, w; };
struct __align__(8) uint2 { unsigned int x, y; };
struct __align__(16) uint4 { unsigned int x, y, z, w; };
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline int2 make_int2(int x, int y) { return int2{x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w)
{
    return uint4{x, y, z, w};
}

// ---------------------------------------------------------------------------
// Opaque handles and runtime enums (values match the CUDA 13 headers).
struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
struct cublasContext;
typedef CUstream_st *cudaStream_t;
typedef CUevent_st *cudaEvent_t;
typedef CUgraph_st *cudaGraph_t;
typedef CUgraphExec_st *cudaGraphExec_t;
typedef cublasContext *cublasHandle_t;

#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorIllegalState = 401,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorNotSupported = 801,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureImplicit = 906,
    cudaErrorStreamCaptureWrongThread = 908,
    cudaErrorUnknown = 999,
};
typedef cudaError_t cudaError;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};
enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2,
};
enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
    cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};
#define cudaStreamDefault 0x00u
#define cudaStreamNonBlocking 0x01u
#define cudaEventDefault 0x00u
#define cudaEventBlockingSync 0x01u
#define cudaEventDisableTiming 0x02u
#define cudaHostAllocDefault 0x00u
#define cudaHostAllocPortable 0x01u
#define cudaHostAllocMapped 0x02u
#define cudaHostAllocWriteCombined 0x04u

struct cudaDeviceProp { // a subset of the real fields, same names and types
    char name[256];
    size_t totalGlobalMem, sharedMemPerBlock;
    int regsPerBlock, warpSize;
    size_t memPitch;
    int maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3];
    size_t totalConstMem;
    int major, minor;
    size_t textureAlignment;
    int multiProcessorCount, integrated, canMapHostMemory, concurrentKernels, ECCEnabled;
    int pciBusID, pciDeviceID, pciDomainID, asyncEngineCount, unifiedAddressing;
    int memoryBusWidth, l2CacheSize, persistingL2CacheMaxSize, maxThreadsPerMultiProcessor;
    size_t sharedMemPerMultiprocessor;
    int regsPerMultiprocessor, managedMemory, isMultiGpuBoard, cooperativeLaunch;
    size_t sharedMemPerBlockOptin;
    int maxBlocksPerMultiProcessor;
    size_t reservedSharedMemPerBlock;
};

// ---------------------------------------------------------------------------
// 16-bit float types: storage plus conversions (round to nearest even).
// Implicit float conversions exist as in cuda_bf16.h / cuda_fp16.h, so the
// structs stay trivially copyable and can live in cudaMalloc'd memory.
namespace cudasim
{
inline uint32_t f32_bits(float f)
{
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline float bits_f32(uint32_t u)
{
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline uint16_t f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return static_cast<uint16_t>((u >> 16) | 0x0040u); // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u); // round to nearest even; overflow carries into inf
    return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t h) { return bits_f32(static_cast<uint32_t>(h) << 16); }
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
} // namespace cudasim

struct __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : __x(cudasim::f32_to_bf16(f)) {}
    operator float() const { return cudasim::bf16_to_f32(__x); }
};
struct __half {
    unsigned short __x;
    __half() = default;
    __half(float f) : __x(cudasim::f32_to_f16(f)) {}
    operator float() const { return cudasim::f16_to_f32(__x); }
};
typedef __nv_bfloat16 nv_bfloat16;
typedef __half half;
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short v)
{
    __nv_bfloat16 h;
    h.__x = v;
    return h;
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline __half __ushort_as_half(unsigned short v)
{
    __half h;
    h.__x = v;
    return h;
}
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    return __ushort_as_bfloat16(cudasim::f32_to_bf16(f));
}
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return cudasim::bf16_to_f32(h.__x); }
inline __half __float2half_rn(float f) { return __ushort_as_half(cudasim::f32_to_f16(f)); }
inline __half __float2half(float f) { return __float2half_rn(f); }
inline float __half2float(__half h) { return cudasim::f16_to_f32(h.__x); }

// ---------------------------------------------------------------------------
// Built-in variables.  The scheduler rewrites the cudasim:: copies on every
// fiber switch; kernels see them through const references so they cannot
// assign to them by mistake.
namespace cudasim
{
inline uint3 g_threadIdx{0, 0, 0}, g_blockIdx{0, 0, 0};
inline dim3 g_blockDim, g_gridDim;
inline unsigned char *g_dsmem = nullptr; // this block's dynamic shared memory
} // namespace cudasim
inline const uint3 &threadIdx = cudasim::g_threadIdx;
inline const uint3 &blockIdx = cudasim::g_blockIdx;
inline const dim3 &blockDim = cudasim::g_blockDim;
inline const dim3 &gridDim = cudasim::g_gridDim;
constexpr int warpSize = 32;

// ---------------------------------------------------------------------------
// Barriers and warp exchange (implemented by the fiber scheduler).  The asm
// memory clobber keeps the compiler from caching shared data across a barrier.
namespace cudasim
{
enum WarpOp { OP_SYNCWARP, OP_SHFL_IDX, OP_SHFL_UP, OP_SHFL_DOWN, OP_SHFL_XOR };
void syncthreads();
uint64_t warp_op(WarpOp op, unsigned mask, uint64_t bits, int arg, int width);
template <class T> inline T shfl(WarpOp op, unsigned mask, T v, int arg, int width)
{
    static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8,
                  "shuffle of a type wider than 8 bytes");
    uint64_t b = 0;
    std::memcpy(&b, &v, sizeof(T));
    asm volatile("" ::: "memory");
    b = warp_op(op, mask, b, arg, width);
    asm volatile("" ::: "memory");
    T r;
    std::memcpy(&r, &b, sizeof(T));
    return r;
}
} // namespace cudasim
inline void __syncthreads()
{
    asm volatile("" ::: "memory");
    cudasim::syncthreads();
    asm volatile("" ::: "memory");
}
inline void __syncwarp(unsigned mask = 0xffffffffu)
{
    asm volatile("" ::: "memory");
    cudasim::warp_op(cudasim::OP_SYNCWARP, mask, 0, 0, 32);
    asm volatile("" ::: "memory");
}
template <class T> inline T __shfl_sync(unsigned mask, T v, int srcLane, int width = 32)
{
    return cudasim::shfl(cudasim::OP_SHFL_IDX, mask, v, srcLane, width);
}
template <class T> inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    return cudasim::shfl(cudasim::OP_SHFL_UP, mask, v, static_cast<int>(delta), width);
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    return cudasim::shfl(cudasim::OP_SHFL_DOWN, mask, v, static_cast<int>(delta), width);
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int laneMask, int width = 32)
{
    return cudasim::shfl(cudasim::OP_SHFL_XOR, mask, v, laneMask, width);
}

// Atomics: fibers switch only at barriers, so a plain read-modify-write is
// atomic with respect to every other simulated thread.
inline float atomicAdd(float *p, float v)
{
    float o = *p;
    *p = o + v;
    return o;
}
inline double atomicAdd(double *p, double v)
{
    double o = *p;
    *p = o + v;
    return o;
}
inline int atomicAdd(int *p, int v)
{
    int o = *p;
    *p = o + v;
    return o;
}
inline unsigned atomicAdd(unsigned *p, unsigned v)
{
    unsigned o = *p;
    *p = o + v;
    return o;
}
inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
    unsigned long long o = *p;
    *p = o + v;
    return o;
}
inline int atomicSub(int *p, int v)
{
    int o = *p;
    *p = o - v;
    return o;
}
inline int atomicMax(int *p, int v)
{
    int o = *p;
    if (v > o)
        *p = v;
    return o;
}
inline unsigned atomicMax(unsigned *p, unsigned v)
{
    unsigned o = *p;
    if (v > o)
        *p = v;
    return o;
}
inline int atomicMin(int *p, int v)
{
    int o = *p;
    if (v < o)
        *p = v;
    return o;
}
inline unsigned atomicMin(unsigned *p, unsigned v)
{
    unsigned o = *p;
    if (v < o)
        *p = v;
    return o;
}
inline int atomicExch(int *p, int v)
{
    int o = *p;
    *p = v;
    return o;
}
inline unsigned atomicExch(unsigned *p, unsigned v)
{
    unsigned o = *p;
    *p = v;
    return o;
}
inline float atomicExch(float *p, float v)
{
    float o = *p;
    *p = v;
    return o;
}
inline int atomicCAS(int *p, int c, int v)
{
    int o = *p;
    if (o == c)
        *p = v;
    return o;
}
inline unsigned atomicCAS(unsigned *p, unsigned c, unsigned v)
{
    unsigned o = *p;
    if (o == c)
        *p = v;
    return o;
}
inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long c,
                                    unsigned long long v)
{
    unsigned long long o = *p;
    if (o == c)
        *p = v;
    return o;
}

// Memory fences: every simulated thread shares one OS thread, so only the
// compiler has to be kept from reordering.
inline void __threadfence() { asm volatile("" ::: "memory"); }
inline void __threadfence_block() { asm volatile("" ::: "memory"); }

// Loads and math intrinsics (<cmath> provides expf, logf, sqrtf, fmaf, ...).
// CUDA declares global min/max overloads usable in kernels; mirror them.
#define CUDASIM_MINMAX(T)                                                                          \
    inline T min(T a, T b) { return b < a ? b : a; }                                               \
    inline T max(T a, T b) { return a < b ? b : a; }
CUDASIM_MINMAX(int)
CUDASIM_MINMAX(unsigned int)
CUDASIM_MINMAX(long)
CUDASIM_MINMAX(unsigned long)
CUDASIM_MINMAX(long long)
CUDASIM_MINMAX(unsigned long long)
#undef CUDASIM_MINMAX
inline unsigned min(int a, unsigned b) { return min(static_cast<unsigned>(a), b); }
inline unsigned min(unsigned a, int b) { return min(a, static_cast<unsigned>(b)); }
inline unsigned max(int a, unsigned b) { return max(static_cast<unsigned>(a), b); }
inline unsigned max(unsigned a, int b) { return max(a, static_cast<unsigned>(b)); }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x ? __builtin_clz(static_cast<unsigned>(x)) : 32; }
inline int __ffs(int x) { return __builtin_ffs(x); }
template <class T> inline T __ldg(const T *p) { return *p; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline int __float_as_int(float f)
{
    int i;
    std::memcpy(&i, &f, 4);
    return i;
}
inline unsigned __float_as_uint(float f)
{
    unsigned u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline float __int_as_float(int i)
{
    float f;
    std::memcpy(&f, &i, 4);
    return f;
}
inline float __uint_as_float(unsigned u)
{
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// ---------------------------------------------------------------------------
// Runtime API.
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaGetDevice(int *dev);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int dev);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaRuntimeGetVersion(int *v);
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaDeviceSynchronize(void);

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags);
cudaError_t cudaFreeHost(void *p);
template <class T> cudaError_t cudaMalloc(T **p, size_t bytes)
{
    return cudaMalloc(reinterpret_cast<void **>(p), bytes);
}
template <class T> cudaError_t cudaMallocHost(T **p, size_t bytes)
{
    return cudaMallocHost(reinterpret_cast<void **>(p), bytes);
}
template <class T> cudaError_t cudaHostAlloc(T **p, size_t bytes, unsigned int flags)
{
    return cudaHostAlloc(reinterpret_cast<void **>(p), bytes, flags);
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t s = 0);
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s = 0);

cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);

cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaEventDestroy(cudaEvent_t e);

cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value);
template <class... P>
cudaError_t cudaFuncSetAttribute(void (*func)(P...), cudaFuncAttribute attr, int value)
{
    return cudaFuncSetAttribute(reinterpret_cast<const void *>(func), attr, value);
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags = 0);
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *exec, cudaGraph_t graph,
                                          unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

// Simulator-only introspection (for tests).
extern "C" size_t cudasim_live_allocations(void);
extern "C" size_t cudasim_live_bytes(void);
extern "C" size_t cudasim_graph_num_ops(cudaGraph_t graph);

// ---------------------------------------------------------------------------
// Kernel launch: MHLA_LAUNCH(k, grid, block, smem, stream)(args...) builds a
// Launch object; its operator() copies the arguments (converted to the
// kernel's parameter types, by value, as CUDA does) into a closure that every
// simulated thread calls.  A capturing stream stores the closure instead.
namespace cudasim
{
struct LaunchSite {
    const void *fn;
    const char *name, *file;
    int line;
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
};
void launch(const LaunchSite &site, std::function<void()> body);
template <class... P> struct Launch {
    void (*fn)(P...);
    LaunchSite site;
    template <class... A> void operator()(A &&...a) const
    {
        static_assert(sizeof...(A) == sizeof...(P),
                      "kernel launched with the wrong number of arguments");
        launch(site, [f = fn, args = std::tuple<std::decay_t<P>...>(std::forward<A>(a)...)]() {
            std::apply(f, args);
        });
    }
};
template <class... P>
Launch<P...> make_launch(void (*fn)(P...), const char *name, dim3 grid, dim3 block, size_t smem,
                         cudaStream_t s, const char *file, int line)
{
    return Launch<P...>{fn, LaunchSite{reinterpret_cast<const void *>(fn), name, file, line, grid,
                                       block, smem, s}};
}
} // namespace cudasim
#define MHLA_LAUNCH(kernel, grid, block, smem, stream)                                             \
    ::cudasim::make_launch(kernel, #kernel, grid, block, smem, stream, __FILE__, __LINE__)
#define MHLA_DYNAMIC_SMEM(T, name) T *name = reinterpret_cast<T *>(::cudasim::g_dsmem)

// ---------------------------------------------------------------------------
// cuBLAS subset (cublas_v2 semantics, column-major, host pointer mode).
enum cublasStatus_t {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
typedef cudaDataType_t cudaDataType;
enum cublasComputeType_t {
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_PEDANTIC = 69,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
};
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 };
enum cublasMath_t {
    CUBLAS_DEFAULT_MATH = 0,
    CUBLAS_TENSOR_OP_MATH = 1,
    CUBLAS_PEDANTIC_MATH = 2,
    CUBLAS_TF32_TENSOR_OP_MATH = 3,
};

cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasGetStream(cublasHandle_t h, cudaStream_t *s);
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode);
cublasStatus_t cublasGetMathMode(cublasHandle_t h, cublasMath_t *mode);
const char *cublasGetStatusString(cublasStatus_t s);
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType Atype,
                            int lda, const void *B, cudaDataType Btype, int ldb, const void *beta,
                            void *C, cudaDataType Ctype, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType Atype, int lda, long long strideA, const void *B,
    cudaDataType Btype, int ldb, long long strideB, const void *beta, void *C, cudaDataType Ctype,
    int ldc, long long strideC, int batchCount, cublasComputeType_t compute, cublasGemmAlgo_t algo);
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const float *alpha, const float *A, int lda,
                           const float *B, int ldb, const float *beta, float *C, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda,
                                         long long strideA, const float *B, int ldb,
                                         long long strideB, const float *beta, float *C, int ldc,
                                         long long strideC, int batchCount);
