// cudasim.cpp - the CPU runtime behind cudasim.h: device-memory registry with
// bounds checks and redzones, streams with graph capture, a fiber scheduler
// that runs each block's threads with CUDA barrier semantics, and a reference
// cuBLAS GEMM.  Everything runs synchronously on the calling host thread; one
// process-wide lock serialises API calls (and so kernels, whose __shared__
// variables are function statics).
//
// Standard headers come before cudasim.h so its keyword macros cannot touch them.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <sys/mman.h>
#include <unistd.h>
#if !defined(__x86_64__) || defined(CUDASIM_USE_UCONTEXT)
#include <ucontext.h>
#endif

#include "cudasim.h"

// ---------------------------------------------------------------------------
// Handle types (opaque in the header).
namespace cudasim
{
struct Op { // one recorded stream operation; re-validates its pointers when run
    const char *what;
    std::function<cudaError_t()> fn;
};
using OpList = std::vector<Op>;
struct Capture {
    cudaStreamCaptureMode mode;
    std::thread::id owner;
    bool invalidated;
    OpList ops;
};
} // namespace cudasim
struct CUstream_st {
    unsigned flags;
    std::unique_ptr<cudasim::Capture> cap;
};
struct CUevent_st {
    unsigned flags;
    bool recorded;
    std::chrono::steady_clock::time_point t;
};
struct CUgraph_st {
    cudasim::OpList ops;
};
struct CUgraphExec_st {
    std::shared_ptr<const cudasim::OpList> ops; // shared with graphs that launch it from a capture
};
struct cublasContext {
    cudaStream_t stream;
    cublasMath_t math;
};

// State lives in namespace cudasim with external linkage (not an anonymous
// namespace) so the compiler must assume the context switch can change it.
namespace cudasim
{

std::recursive_mutex &mu()
{
    static std::recursive_mutex m;
    return m;
}
using Lock = std::lock_guard<std::recursive_mutex>;
thread_local cudaError_t t_last_error = cudaSuccess;

cudaError_t fail(cudaError_t e)
{ // every failing call also sets the last error, as CUDA does
    if (e != cudaSuccess)
        t_last_error = e;
    return e;
}
__attribute__((format(printf, 1, 2))) void msg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    std::fputs("cudasim: ", stderr);
    std::vfprintf(stderr, fmt, ap);
    std::fputc('\n', stderr);
    va_end(ap);
}
size_t env_size(const char *name, size_t dflt)
{
    const char *v = std::getenv(name);
    return v && *v ? std::strtoull(v, nullptr, 10) : dflt;
}

// ---------------------------------------------------------------------------
// Device memory.  Each allocation is [256-byte redzone][size bytes of 0xCD,
// padded to 256 with redzone][256-byte redzone]; redzones are verified after
// every kernel, at cudaFree and at cudaDeviceSynchronize.
constexpr size_t kRed = 256;
constexpr unsigned char kFill = 0xCD, kRedFill = 0xFD, kFreedFill = 0xDD;
constexpr size_t kSmemDefault = 48 * 1024, kSmemOptin = 227 * 1024;
struct Alloc {
    size_t size, padded;
    unsigned long long serial;
    void *map; // large allocations: their own 2 MiB-aligned mapping (else aligned_alloc)
    size_t map_len;
};
// Filling a fresh allocation with 0xCD faults in every page; for large ones,
// transparent huge pages cut that cost by ~10x (4 KiB faults dominated runs).
constexpr size_t kHuge = size_t(2) << 20;
unsigned char *alloc_raw(size_t len, void **map, size_t *map_len)
{
    *map = nullptr;
    *map_len = 0;
    if (len < kHuge)
        return static_cast<unsigned char *>(std::aligned_alloc(256, len));
    size_t ml = ((len + kHuge - 1) & ~(kHuge - 1)) + kHuge;
    void *m = mmap(nullptr, ml, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return nullptr;
    unsigned char *a = reinterpret_cast<unsigned char *>(
        (reinterpret_cast<uintptr_t>(m) + kHuge - 1) & ~(kHuge - 1));
    madvise(a, (len + kHuge - 1) & ~(kHuge - 1), MADV_HUGEPAGE);
    *map = m;
    *map_len = ml;
    return a;
}
std::map<uintptr_t, Alloc> g_dev;
std::map<uintptr_t, size_t> g_host; // cudaMallocHost / cudaHostAlloc
size_t g_dev_bytes = 0;
unsigned long long g_serial = 0;
size_t total_mem() { return env_size("CUDASIM_DEVICE_MEM_MB", 4096) << 20; }

uintptr_t addr(const void *p) { return reinterpret_cast<uintptr_t>(p); }
// The live allocation containing [p, p+n), or end().
std::map<uintptr_t, Alloc>::iterator dev_find(const void *p, size_t n)
{
    auto it = g_dev.upper_bound(addr(p));
    if (it == g_dev.begin())
        return g_dev.end();
    --it;
    uintptr_t a = addr(p);
    if (a >= it->first && n <= it->second.size && a - it->first <= it->second.size - n)
        return it;
    return g_dev.end();
}
// Any live allocation overlapping [p, p+max(n,1)), or end().
std::map<uintptr_t, Alloc>::iterator dev_overlap(const void *p, size_t n)
{
    uintptr_t a = addr(p), e = a + std::max<size_t>(n, 1);
    auto it = g_dev.lower_bound(e);
    if (it == g_dev.begin())
        return g_dev.end();
    --it;
    return it->first + it->second.size > a ? it : g_dev.end();
}
// Why [p, p+n) is not one device range, for messages.
std::string describe(const void *p, size_t n)
{
    char buf[200];
    auto it = dev_overlap(p, n);
    if (it == g_dev.end())
        std::snprintf(buf, sizeof buf, "%p is not device memory (no live cudaMalloc allocation)",
                      p);
    else
        std::snprintf(buf, sizeof buf, "[%p, +%zu) overruns device allocation #%llu [%p, +%zu)", p,
                      n, it->second.serial, reinterpret_cast<void *>(it->first), it->second.size);
    return buf;
}
// Offset (from the user pointer) of the first damaged redzone byte, or 0 if intact.
long long redzone_damage(uintptr_t base, const Alloc &a)
{
    const unsigned char *u = reinterpret_cast<const unsigned char *>(base);
    for (size_t i = 0; i < kRed; ++i)
        if (u[-static_cast<ptrdiff_t>(kRed) + static_cast<ptrdiff_t>(i)] != kRedFill)
            return static_cast<long long>(i) - static_cast<long long>(kRed);
    for (size_t i = a.size; i < a.padded + kRed; ++i)
        if (u[i] != kRedFill)
            return static_cast<long long>(i);
    return 0;
}
void check_redzones(const char *after)
{
    for (auto &kv : g_dev) {
        long long off = redzone_damage(kv.first, kv.second);
        if (off == 0)
            continue;
        msg("FATAL: out-of-bounds write detected %s: device allocation #%llu [%p, +%zu bytes) was written at byte "
            "offset %lld",
            after, kv.second.serial, reinterpret_cast<void *>(kv.first), kv.second.size, off);
        std::abort();
    }
}

// ---------------------------------------------------------------------------
// Streams and capture.
std::set<const void *> g_streams, g_events, g_graphs, g_execs, g_handles;
std::map<const void *, int> g_func_smem; // cudaFuncAttributeMaxDynamicSharedMemorySize per kernel

bool is_default(cudaStream_t s)
{
    return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
}
bool stream_valid(cudaStream_t s) { return is_default(s) || g_streams.count(s); }
const char *mode_name(cudaStreamCaptureMode m)
{
    return m == cudaStreamCaptureModeGlobal        ? "Global"
           : m == cudaStreamCaptureModeThreadLocal ? "ThreadLocal"
                                                   : "Relaxed";
}
// cudaThreadExchangeStreamCaptureMode rules for a thread in Global mode: a
// "potentially unsafe" call (cudaMalloc, synchronous memcpy/memset, ...) is
// refused while this thread captures in a non-Relaxed mode or any thread
// captures in Global mode; the capture is invalidated.
cudaError_t unsafe_call(const char *api)
{
    for (const void *p : g_streams) {
        auto *s = static_cast<CUstream_st *>(const_cast<void *>(p));
        if (!s->cap || s->cap->mode == cudaStreamCaptureModeRelaxed)
            continue;
        if (s->cap->owner != std::this_thread::get_id() &&
            s->cap->mode != cudaStreamCaptureModeGlobal)
            continue;
        s->cap->invalidated = true;
        msg("%s is not permitted while stream %p is capturing (mode %s): cudaErrorStreamCaptureUnsupported, "
            "capture invalidated",
            api, p, mode_name(s->cap->mode));
        return cudaErrorStreamCaptureUnsupported;
    }
    return cudaSuccess;
}
// Work on the legacy default stream implicitly joins every capturing blocking stream.
cudaError_t legacy_use(const char *api)
{
    for (const void *p : g_streams) {
        auto *s = static_cast<CUstream_st *>(const_cast<void *>(p));
        if (!s->cap || (s->flags & cudaStreamNonBlocking))
            continue;
        s->cap->invalidated = true;
        msg("%s on the legacy default stream while blocking stream %p is capturing: "
            "cudaErrorStreamCaptureImplicit, capture invalidated",
            api, p);
        return cudaErrorStreamCaptureImplicit;
    }
    return cudaSuccess;
}
// Execute now, or record when the stream is capturing.
cudaError_t submit(cudaStream_t s, const char *what, std::function<cudaError_t()> fn)
{
    if (!stream_valid(s)) {
        msg("%s: stream %p is not a live stream", what, static_cast<void *>(s));
        return cudaErrorInvalidResourceHandle;
    }
    if (!is_default(s) && s->cap) {
        if (s->cap->invalidated)
            return cudaErrorStreamCaptureInvalidated;
        s->cap->ops.push_back(Op{what, std::move(fn)});
        return cudaSuccess;
    }
    if (s == nullptr || s == cudaStreamLegacy)
        if (cudaError_t e = legacy_use(what))
            return e;
    return fn();
}

// ---------------------------------------------------------------------------
// Fibers.  x86-64 uses a 6-register hand-written switch (swapcontext makes a
// sigprocmask syscall per switch, ~50x slower); other targets use ucontext.
#if defined(__x86_64__) && !defined(CUDASIM_USE_UCONTEXT)
extern "C" __attribute__((visibility("hidden"))) void cudasim_swap(void **save_sp, void *new_sp);
extern "C" __attribute__((visibility("hidden"))) void cudasim_trampoline();
asm(R"(
    .text
    .globl cudasim_swap
    .hidden cudasim_swap
    .type cudasim_swap, @function
cudasim_swap:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cudasim_swap, .-cudasim_swap
    .globl cudasim_trampoline
    .hidden cudasim_trampoline
    .type cudasim_trampoline, @function
cudasim_trampoline:
    .cfi_startproc
    .cfi_undefined rip
    call *%r12
    ud2
    .cfi_endproc
    .size cudasim_trampoline, .-cudasim_trampoline
)");
struct Ctx {
    void *sp = nullptr;
};
void ctx_make(Ctx &c, char *stack_top, size_t, void (*entry)())
{
    // Frame popped by cudasim_swap: r15 r14 r13 r12(=entry) rbx rbp, then the
    // return address (trampoline).  top-72 makes rsp 16-aligned at the call.
    void **sp = reinterpret_cast<void **>(stack_top - 72);
    for (int i = 0; i < 6; ++i)
        sp[i] = nullptr;
    sp[3] = reinterpret_cast<void *>(entry);
    sp[6] = reinterpret_cast<void *>(&cudasim_trampoline);
    c.sp = sp;
}
inline void ctx_swap(Ctx &from, Ctx &to) { cudasim_swap(&from.sp, to.sp); }
#else
struct Ctx {
    ucontext_t uc;
};
void ctx_make(Ctx &c, char *stack_top, size_t size, void (*entry)())
{
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack_top - size;
    c.uc.uc_stack.ss_size = size;
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, entry, 0);
}
inline void ctx_swap(Ctx &from, Ctx &to) { swapcontext(&from.uc, &to.uc); }
#endif

enum State : unsigned char { RUN, BAR, WARP, DONE };
struct Fiber {
    Ctx ctx;
    State st;
    WarpOp op;
    uint3 tid;
    unsigned lin, mask; // linear thread id; warp-op mask
    int arg, width;
    uint64_t val, res;
};
std::vector<std::unique_ptr<Fiber>> g_fibers; // grown on demand, reused by every launch
Ctx g_sched;
Fiber *g_cur = nullptr;
const LaunchSite *g_site = nullptr;
const std::function<void()> *g_body = nullptr;

void fiber_main()
{
    for (;;) { // one iteration per block this fiber takes part in
        (*g_body)();
        g_cur->st = DONE;
        ctx_swap(g_cur->ctx, g_sched);
    }
}
void ensure_fibers(unsigned n)
{
    static const size_t bytes = std::max<size_t>(env_size("CUDASIM_STACK_KB", 64), 16) << 10;
    static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    while (g_fibers.size() < n) {
        // A PROT_NONE guard page below each stack turns an overflow into SIGSEGV.
        void *m =
            mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED || mprotect(m, page, PROT_NONE) != 0) {
            msg("FATAL: cannot allocate a fiber stack: %s", std::strerror(errno));
            std::abort();
        }
        auto f = std::make_unique<Fiber>();
        ctx_make(f->ctx, static_cast<char *>(m) + page + bytes, bytes, fiber_main);
        g_fibers.push_back(std::move(f));
    }
}

[[noreturn]] __attribute__((format(printf, 1, 2))) void kernel_die(const char *fmt, ...)
{
    const LaunchSite &s = *g_site;
    std::fprintf(
        stderr,
        "cudasim: FATAL in kernel %s launched at %s:%d (grid %u,%u,%u block %u,%u,%u), block (%u,%u,%u): ",
        s.name, s.file, s.line, s.grid.x, s.grid.y, s.grid.z, s.block.x, s.block.y, s.block.z,
        g_blockIdx.x, g_blockIdx.y, g_blockIdx.z);
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fputc('\n', stderr);
    std::abort();
}
const char *op_name(WarpOp op)
{
    static const char *n[] = {"__syncwarp", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
                              "__shfl_xor_sync"};
    return n[op];
}
std::string tstr(const Fiber &f)
{
    return "(" + std::to_string(f.tid.x) + "," + std::to_string(f.tid.y) + "," +
           std::to_string(f.tid.z) + ")";
}

// Barrier entry points, called on a fiber's stack.
void syncthreads()
{
    Fiber *f = g_cur;
    if (!f) {
        msg("FATAL: __syncthreads() called outside a kernel");
        std::abort();
    }
    f->st = BAR;
    ctx_swap(f->ctx, g_sched);
}
uint64_t warp_op(WarpOp op, unsigned mask, uint64_t bits, int arg, int width)
{
    Fiber *f = g_cur;
    if (!f) {
        msg("FATAL: %s called outside a kernel", op_name(op));
        std::abort();
    }
    unsigned lane = f->lin % 32;
    if (!(mask >> lane & 1u))
        kernel_die(
            "thread %s (lane %u) calls %s with mask 0x%08x, which does not name its own lane",
            tstr(*f).c_str(), lane, op_name(op), mask);
    if (width < 1 || width > 32 || (width & (width - 1)))
        kernel_die("thread %s calls %s with width %d (must be a power of two <= 32)",
                   tstr(*f).c_str(), op_name(op), width);
    f->op = op;
    f->mask = mask;
    f->val = bits;
    f->arg = arg;
    f->width = width;
    f->st = WARP;
    ctx_swap(f->ctx, g_sched);
    return f->res;
}

// Release every group of lanes that all wait in the same warp operation with
// the same mask (lanes of a partial last warp that do not exist are ignored),
// doing the shuffle exchange here so no second barrier is needed.  A source
// lane that does not exist or is not in the mask yields the 0xCD pattern.
bool release_warps(unsigned n)
{
    bool released = false;
    for (unsigned base = 0; base < n; base += 32) {
        unsigned lanes = std::min(32u, n - base), exist = lanes == 32 ? ~0u : (1u << lanes) - 1;
        Fiber *w[32];
        for (unsigned j = 0; j < lanes; ++j)
            w[j] = g_fibers[base + j].get();
        for (unsigned l = 0; l < lanes; ++l) {
            if (w[l]->st != WARP)
                continue;
            unsigned group = w[l]->mask & exist;
            bool ready = true;
            for (unsigned j = 0; j < lanes && ready; ++j) {
                if (!(group >> j & 1u))
                    continue;
                if (w[j]->st == DONE)
                    kernel_die(
                        "thread %s waits in %s(mask 0x%08x) but lane %u of its warp (thread %s) has exited",
                        tstr(*w[l]).c_str(), op_name(w[l]->op), w[l]->mask, j, tstr(*w[j]).c_str());
                ready = w[j]->st == WARP && w[j]->mask == w[l]->mask && w[j]->op == w[l]->op;
            }
            if (!ready)
                continue;
            for (unsigned j = 0; j < lanes; ++j) {
                if (!(group >> j & 1u))
                    continue;
                Fiber &f = *w[j];
                int a = f.arg, wd = f.width;
                unsigned seg = j & ~static_cast<unsigned>(wd - 1),
                         pos = j & static_cast<unsigned>(wd - 1), src = j;
                switch (f.op) {
                case OP_SHFL_IDX:
                    src = seg + (static_cast<unsigned>(a) & static_cast<unsigned>(wd - 1));
                    break;
                case OP_SHFL_UP:
                    src = pos >= static_cast<unsigned>(a) ? j - static_cast<unsigned>(a) : j;
                    break;
                case OP_SHFL_DOWN:
                    src = pos + static_cast<unsigned>(a) < static_cast<unsigned>(wd)
                              ? j + static_cast<unsigned>(a)
                              : j;
                    break;
                case OP_SHFL_XOR:
                    src = j ^ (static_cast<unsigned>(a) & 31u);
                    if (src >= seg + static_cast<unsigned>(wd))
                        src = j;
                    break;
                case OP_SYNCWARP: break;
                }
                f.res = (group >> src & 1u) ? w[src]->val : 0xCDCDCDCDCDCDCDCDull;
            }
            for (unsigned j = 0; j < lanes; ++j)
                if (group >> j & 1u)
                    w[j]->st = RUN;
            released = true;
        }
    }
    return released;
}

[[noreturn]] void report_deadlock(unsigned n)
{
    // Summarise the waiting threads by what they wait in, with one example each.
    struct Group {
        State st;
        WarpOp op;
        unsigned mask, count;
        const Fiber *first;
    };
    std::vector<Group> groups;
    for (unsigned t = 0; t < n; ++t) {
        const Fiber &f = *g_fibers[t];
        auto it = std::find_if(groups.begin(), groups.end(), [&](const Group &g) {
            return g.st == f.st && (f.st != WARP || (g.op == f.op && g.mask == f.mask));
        });
        if (it == groups.end())
            groups.push_back(Group{f.st, f.op, f.mask, 1, &f});
        else
            ++it->count;
    }
    std::string s;
    for (const Group &g : groups) {
        char buf[160];
        if (g.st == BAR)
            std::snprintf(buf, sizeof buf, "%u in __syncthreads", g.count);
        else if (g.st == DONE)
            std::snprintf(buf, sizeof buf, "%u exited", g.count);
        else
            std::snprintf(buf, sizeof buf, "%u in %s(mask 0x%08x)", g.count, op_name(g.op), g.mask);
        s += std::string(s.empty() ? "" : "; ") + buf + " (e.g. thread " + tstr(*g.first) + ")";
    }
    kernel_die("deadlock, divergent barriers: no thread can proceed: %s", s.c_str());
}

void run_block(unsigned n)
{
    const dim3 b = g_blockDim;
    for (unsigned t = 0; t < n; ++t) {
        Fiber &f = *g_fibers[t];
        f.st = RUN;
        f.lin = t;
        f.tid = uint3{t % b.x, t / b.x % b.y, t / (b.x * b.y)};
    }
    for (;;) {
        for (unsigned t = 0; t < n; ++t) {
            Fiber &f = *g_fibers[t];
            if (f.st != RUN)
                continue;
            g_threadIdx = f.tid;
            g_cur = &f;
            ctx_swap(g_sched, f.ctx); // runs until the thread exits or waits at a barrier
        }
        unsigned done = 0, bar = 0, warp = 0;
        for (unsigned t = 0; t < n; ++t) {
            State st = g_fibers[t]->st;
            done += st == DONE;
            bar += st == BAR;
            warp += st == WARP;
        }
        if (done == n)
            break;
        if (warp && release_warps(n))
            continue;
        if (bar && bar + done == n) {
            if (done == 0) {
                for (unsigned t = 0; t < n; ++t)
                    g_fibers[t]->st = RUN;
                continue;
            }
            const Fiber *ex = nullptr, *wt = nullptr;
            for (unsigned t = 0; t < n; ++t)
                (g_fibers[t]->st == DONE ? ex : wt) = g_fibers[t].get();
            kernel_die(
                "%u thread(s) exited (e.g. %s) while %u wait in __syncthreads (e.g. %s); every thread of a "
                "block must reach each __syncthreads",
                done, tstr(*ex).c_str(), bar, tstr(*wt).c_str());
        }
        report_deadlock(n);
    }
    g_cur = nullptr;
}

unsigned char *g_smem_buf = nullptr;
size_t g_smem_cap = 0;

cudaError_t run_kernel(const LaunchSite &site, const std::function<void()> &body)
{
    const unsigned n = site.block.x * site.block.y * site.block.z;
    ensure_fibers(n);
    if (g_smem_cap < site.smem + kRed) {
        std::free(g_smem_buf);
        g_smem_cap = (site.smem + kRed + 4095) & ~size_t(4095);
        g_smem_buf = static_cast<unsigned char *>(std::aligned_alloc(256, g_smem_cap));
    }
    g_site = &site;
    g_body = &body;
    g_gridDim = site.grid;
    g_blockDim = site.block;
    g_dsmem = site.smem ? g_smem_buf : nullptr;
    for (unsigned z = 0; z < site.grid.z; ++z)
        for (unsigned y = 0; y < site.grid.y; ++y)
            for (unsigned x = 0; x < site.grid.x; ++x) {
                g_blockIdx = uint3{x, y, z};
                std::memset(g_smem_buf, kFill,
                            site.smem); // uninitialised shared memory reads as garbage
                std::memset(g_smem_buf + site.smem, kRedFill, kRed);
                run_block(n);
                for (size_t i = 0; i < kRed; ++i)
                    if (g_smem_buf[site.smem + i] != kRedFill)
                        kernel_die(
                            "wrote past the end of its %zu bytes of dynamic shared memory (byte %zu)",
                            site.smem, site.smem + i);
            }
    g_dsmem = nullptr;
    char after[300];
    std::snprintf(after, sizeof after, "after kernel %s launched at %s:%d", site.name, site.file,
                  site.line);
    check_redzones(after);
    g_site = nullptr;
    return cudaSuccess;
}

cudaError_t check_config(const LaunchSite &s)
{
    const dim3 b = s.block, g = s.grid;
    unsigned long long threads = 1ull * b.x * b.y * b.z;
    const char *why = nullptr;
    cudaError_t e = cudaErrorInvalidConfiguration;
    if (!b.x || !b.y || !b.z || !g.x || !g.y || !g.z)
        why = "a grid or block dimension is 0";
    else if (threads > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64)
        why = "more than 1024 threads per block (or block.z > 64)";
    else if (g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535)
        why = "grid dimension too large";
    else {
        auto it = g_func_smem.find(s.fn);
        size_t limit =
            std::max<size_t>(kSmemDefault,
                             it == g_func_smem.end() ? 0 : static_cast<size_t>(it->second));
        e = cudaErrorInvalidValue;
        if (s.smem > kSmemOptin)
            why = "dynamic shared memory over the 227 KiB per-block maximum";
        else if (s.smem > limit)
            why = "dynamic shared memory over the kernel's limit (48 KiB unless raised with "
                  "cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize))";
    }
    if (!why)
        return cudaSuccess;
    msg("launch of kernel %s at %s:%d (grid %u,%u,%u block %u,%u,%u, %zu bytes dynamic shared memory) fails: %s: %s",
        s.name, s.file, s.line, g.x, g.y, g.z, b.x, b.y, b.z, s.smem, why, cudaGetErrorName(e));
    return e;
}

void launch(const LaunchSite &site, std::function<void()> body)
{
    Lock lk(mu());
    if (g_cur)
        kernel_die("launches kernel %s from device code (dynamic parallelism is not simulated)",
                   site.name);
    if (fail(check_config(site)))
        return;
    fail(submit(site.stream, site.name,
                [site, body = std::move(body)]() { return run_kernel(site, body); }));
}

// ---------------------------------------------------------------------------
// float <-> binary16, round to nearest even, subnormals, inf and NaN.
uint16_t f32_to_f16(float f)
{
    uint32_t x = f32_bits(f), ax = x & 0x7fffffffu;
    uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    if (ax > 0x7f800000u)
        return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu)); // quiet NaN
    if (ax >= 0x477ff000u)
        return static_cast<uint16_t>(sign | 0x7c00u); // >= 65520 rounds to infinity
    if (ax >= 0x38800000u) { // normal: rebias the exponent, round the low 13 bits
        uint32_t r = ax - 0x38000000u;
        return static_cast<uint16_t>(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
    }
    if (ax <= 0x33000000u)
        return sign; // at most half the smallest subnormal: ties to even = 0
    uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e; // shift in [14, 24]
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u)))
        ++q;
    return static_cast<uint16_t>(sign | q);
}
float f16_to_f32(uint16_t h)
{
    uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float v = static_cast<float>(m) * 0x1p-24f;
        return sign ? -v : v;
    }
    if (e == 31)
        return bits_f32(sign | 0x7f800000u | (m << 13));
    return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

// ---------------------------------------------------------------------------
// Copies.
const char *kind_name(cudaMemcpyKind k)
{
    static const char *n[] = {"HostToHost", "HostToDevice", "DeviceToHost", "DeviceToDevice",
                              "Default"};
    return static_cast<unsigned>(k) <= 4 ? n[k] : "invalid kind";
}
// Device sides must lie inside one live allocation, host sides outside all of them.
cudaError_t check_side(const char *api, const char *side, const void *p, size_t n, bool want_dev)
{
    if (want_dev ? dev_find(p, n) != g_dev.end() : dev_overlap(p, n) == g_dev.end())
        return cudaSuccess;
    if (want_dev)
        msg("%s: %s %s: cudaErrorInvalidValue", api, side, describe(p, n).c_str());
    else
        msg("%s: %s %p is device memory but the copy kind says host: cudaErrorInvalidValue", api,
            side, p);
    return cudaErrorInvalidValue;
}
cudaError_t check_copy(const char *api, void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    if (n == 0)
        return cudaSuccess;
    char name[96];
    std::snprintf(name, sizeof name, "%s(%zu bytes, %s)", api, n, kind_name(kind));
    if (static_cast<unsigned>(kind) > 4 || !dst || !src) {
        msg("%s: null pointer or invalid kind: cudaErrorInvalidValue", name);
        return cudaErrorInvalidValue;
    }
    bool ddev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool sdev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind == cudaMemcpyDefault) { // unified addressing: infer each side
        ddev = dev_overlap(dst, n) != g_dev.end();
        sdev = dev_overlap(src, n) != g_dev.end();
    }
    if (cudaError_t e = check_side(name, "destination", dst, n, ddev))
        return e;
    return check_side(name, "source", src, n, sdev);
}
cudaError_t check_set(const char *api, const void *p, size_t n)
{
    if (n == 0 || dev_find(p, n) != g_dev.end())
        return cudaSuccess;
    msg("%s(%zu bytes): %s: cudaErrorInvalidValue", api, n, describe(p, n).c_str());
    return cudaErrorInvalidValue;
}

} // namespace cudasim

using namespace cudasim;

// ---------------------------------------------------------------------------
// Runtime API.
extern "C" size_t cudasim_live_allocations(void)
{
    Lock lk(mu());
    return g_dev.size();
}
extern "C" size_t cudasim_live_bytes(void)
{
    Lock lk(mu());
    return g_dev_bytes;
}
extern "C" size_t cudasim_graph_num_ops(cudaGraph_t g)
{
    Lock lk(mu());
    return g_graphs.count(g) ? g->ops.size() : 0;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return fail(cudaErrorInvalidValue);
    *count = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int dev) { return dev == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice); }
cudaError_t cudaGetDevice(int *dev)
{
    if (!dev)
        return fail(cudaErrorInvalidValue);
    *dev = 0;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev)
{
    if (!p)
        return fail(cudaErrorInvalidValue);
    if (dev != 0)
        return fail(cudaErrorInvalidDevice);
    std::memset(p, 0, sizeof *p);
    std::snprintf(p->name, sizeof p->name, "cudasim (CPU)");
    p->totalGlobalMem = total_mem();
    p->sharedMemPerBlock = kSmemDefault;
    p->sharedMemPerBlockOptin = kSmemOptin;
    p->sharedMemPerMultiprocessor = 228 * 1024;
    p->reservedSharedMemPerBlock = 1024;
    p->regsPerBlock = p->regsPerMultiprocessor = 65536;
    p->warpSize = 32;
    p->memPitch = INT_MAX;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = INT_MAX;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->totalConstMem = 65536;
    p->major = 9;
    p->minor = 0;
    p->textureAlignment = 512;
    p->multiProcessorCount = 4;
    p->concurrentKernels = p->unifiedAddressing = 1;
    p->memoryBusWidth = 5120;
    p->l2CacheSize = 50 * 1024 * 1024;
    p->maxThreadsPerMultiProcessor = 2048;
    p->maxBlocksPerMultiProcessor = 32;
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *v)
{
    if (!v)
        return fail(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v) { return cudaDriverGetVersion(v); }

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
#define CASE(x)                                                                                    \
    case x: return #x;
        CASE(cudaSuccess)
        CASE(cudaErrorInvalidValue)
        CASE(cudaErrorMemoryAllocation)
        CASE(cudaErrorInitializationError)
        CASE(cudaErrorInvalidConfiguration)
        CASE(cudaErrorInvalidDevice)
        CASE(cudaErrorInvalidResourceHandle)
        CASE(cudaErrorIllegalState)
        CASE(cudaErrorNotReady)
        CASE(cudaErrorIllegalAddress)
        CASE(cudaErrorNotSupported)
        CASE(cudaErrorStreamCaptureUnsupported)
        CASE(cudaErrorStreamCaptureInvalidated)
        CASE(cudaErrorStreamCaptureImplicit)
        CASE(cudaErrorStreamCaptureWrongThread)
        CASE(cudaErrorUnknown)
#undef CASE
    }
    return "unrecognized error code";
}
const char *cudaGetErrorString(cudaError_t e) { return cudaGetErrorName(e); }
cudaError_t cudaGetLastError(void)
{
    cudaError_t e = t_last_error;
    t_last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return t_last_error; }

cudaError_t cudaDeviceSynchronize(void)
{
    Lock lk(mu());
    cudaError_t e = cudaSuccess;
    for (const void *p : g_streams) { // illegal while any stream captures; invalidates the captures
        auto *s = static_cast<CUstream_st *>(const_cast<void *>(p));
        if (!s->cap)
            continue;
        s->cap->invalidated = true;
        msg("cudaDeviceSynchronize while stream %p is capturing: cudaErrorStreamCaptureUnsupported, capture invalidated",
            p);
        e = cudaErrorStreamCaptureUnsupported;
    }
    check_redzones("at cudaDeviceSynchronize");
    return fail(e);
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    Lock lk(mu());
    size_t total = total_mem();
    if (free_bytes)
        *free_bytes = total > g_dev_bytes ? total - g_dev_bytes : 0;
    if (total_bytes)
        *total_bytes = total;
    return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t bytes)
{
    Lock lk(mu());
    if (!p)
        return fail(cudaErrorInvalidValue);
    if (cudaError_t e = unsafe_call("cudaMalloc"))
        return fail(e);
    if (bytes == 0) {
        *p = nullptr;
        return cudaSuccess;
    }
    size_t padded = (bytes + 255) & ~size_t(255), map_len = 0;
    void *map = nullptr;
    unsigned char *raw = bytes > (size_t(1) << 48) || g_dev_bytes + bytes > total_mem()
                             ? nullptr
                             : alloc_raw(padded + 2 * kRed, &map, &map_len);
    if (!raw) {
        msg("cudaMalloc(%zu bytes): out of simulated device memory (%zu of %zu bytes in use; CUDASIM_DEVICE_MEM_MB "
            "raises the limit): cudaErrorMemoryAllocation",
            bytes, g_dev_bytes, total_mem());
        return fail(cudaErrorMemoryAllocation);
    }
    unsigned char *u = raw + kRed;
    std::memset(raw, kRedFill, kRed);
    std::memset(u, kFill, bytes);
    std::memset(u + bytes, kRedFill, padded - bytes + kRed);
    g_dev[addr(u)] = Alloc{bytes, padded, ++g_serial, map, map_len};
    g_dev_bytes += bytes;
    *p = u;
    return cudaSuccess;
}
cudaError_t cudaFree(void *p)
{
    Lock lk(mu());
    if (!p)
        return cudaSuccess;
    if (cudaError_t e = unsafe_call("cudaFree"))
        return fail(e);
    auto it = g_dev.find(addr(p));
    if (it == g_dev.end()) {
        msg("cudaFree(%p): not the start of a live cudaMalloc allocation (%s): cudaErrorInvalidValue",
            p,
            dev_find(p, 1) != g_dev.end() ? "points inside one"
                                          : "double free, or not device memory");
        return fail(cudaErrorInvalidValue);
    }
    if (long long off = redzone_damage(it->first, it->second)) {
        msg("FATAL: cudaFree(%p): device allocation #%llu (%zu bytes) was written out of bounds at byte offset %lld",
            p, it->second.serial, it->second.size, off);
        std::abort();
    }
    const Alloc a = it->second;
    g_dev_bytes -= a.size;
    g_dev.erase(it);
    if (a.map) {
        munmap(a.map, a.map_len); // stale pointers now fault
    } else {
        std::memset(p, kFreedFill, a.size); // stale pointers into reused heap memory read garbage
        std::free(static_cast<unsigned char *>(p) - kRed);
    }
    return cudaSuccess;
}
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int)
{
    Lock lk(mu());
    if (!p)
        return fail(cudaErrorInvalidValue);
    if (cudaError_t e = unsafe_call("cudaMallocHost/cudaHostAlloc"))
        return fail(e);
    void *m = std::aligned_alloc(4096, (std::max<size_t>(bytes, 1) + 4095) & ~size_t(4095));
    if (!m)
        return fail(cudaErrorMemoryAllocation);
    std::memset(m, kFill, bytes);
    g_host[addr(m)] = bytes;
    *p = m;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t bytes) { return cudaHostAlloc(p, bytes, 0); }
cudaError_t cudaFreeHost(void *p)
{
    Lock lk(mu());
    if (!p)
        return cudaSuccess;
    if (cudaError_t e = unsafe_call("cudaFreeHost"))
        return fail(e);
    if (!g_host.erase(addr(p))) {
        msg("cudaFreeHost(%p): not a live cudaMallocHost/cudaHostAlloc allocation: cudaErrorInvalidValue",
            p);
        return fail(cudaErrorInvalidValue);
    }
    std::free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    Lock lk(mu());
    if (cudaError_t e = unsafe_call("cudaMemcpy"))
        return fail(e);
    if (cudaError_t e = legacy_use("cudaMemcpy"))
        return fail(e);
    if (cudaError_t e = check_copy("cudaMemcpy", dst, src, n, kind))
        return fail(e);
    if (n)
        std::memmove(dst, src, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t s)
{
    Lock lk(mu());
    if (cudaError_t e = check_copy("cudaMemcpyAsync", dst, src, n, kind))
        return fail(e);
    return fail(submit(s, "cudaMemcpyAsync", [=]() {
        if (cudaError_t e = check_copy("cudaMemcpyAsync (replayed)", dst, src, n, kind))
            return e;
        if (n)
            std::memmove(dst, src, n);
        return cudaSuccess;
    }));
}
cudaError_t cudaMemset(void *p, int value, size_t n)
{
    Lock lk(mu());
    if (cudaError_t e = unsafe_call("cudaMemset"))
        return fail(e);
    if (cudaError_t e = legacy_use("cudaMemset"))
        return fail(e);
    if (cudaError_t e = check_set("cudaMemset", p, n))
        return fail(e);
    if (n)
        std::memset(p, value, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s)
{
    Lock lk(mu());
    if (cudaError_t e = check_set("cudaMemsetAsync", p, n))
        return fail(e);
    return fail(submit(s, "cudaMemsetAsync", [=]() {
        if (cudaError_t e = check_set("cudaMemsetAsync (replayed)", p, n))
            return e;
        if (n)
            std::memset(p, value, n);
        return cudaSuccess;
    }));
}

// Streams.
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    Lock lk(mu());
    if (!s)
        return fail(cudaErrorInvalidValue);
    *s = new CUstream_st{flags, nullptr};
    g_streams.insert(*s);
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    return cudaStreamCreateWithFlags(s, cudaStreamDefault);
}
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    Lock lk(mu());
    if (is_default(s) || !g_streams.count(s)) {
        msg("cudaStreamDestroy(%p): not a live stream: cudaErrorInvalidResourceHandle",
            static_cast<void *>(s));
        return fail(cudaErrorInvalidResourceHandle);
    }
    if (s->cap) {
        msg("cudaStreamDestroy(%p) while the stream is capturing: cudaErrorIllegalState (end the capture first)",
            static_cast<void *>(s));
        return fail(cudaErrorIllegalState);
    }
    g_streams.erase(s);
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    Lock lk(mu());
    if (!stream_valid(s))
        return fail(cudaErrorInvalidResourceHandle);
    if (!is_default(s) && s->cap) {
        s->cap->invalidated = true;
        msg("cudaStreamSynchronize/Query on capturing stream %p: cudaErrorStreamCaptureUnsupported, capture invalidated",
            static_cast<void *>(s));
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    if (s == nullptr || s == cudaStreamLegacy)
        return fail(legacy_use("cudaStreamSynchronize"));
    return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t s) { return cudaStreamSynchronize(s); }

// Events: wall-clock time when the record executes (at replay for a captured record).
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    Lock lk(mu());
    if (!e)
        return fail(cudaErrorInvalidValue);
    *e = new CUevent_st{flags, false, {}};
    g_events.insert(*e);
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    return cudaEventCreateWithFlags(e, cudaEventDefault);
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    Lock lk(mu());
    if (!g_events.count(e))
        return fail(cudaErrorInvalidResourceHandle);
    return fail(submit(s, "cudaEventRecord", [e]() {
        if (!g_events.count(e))
            return cudaErrorInvalidResourceHandle;
        e->recorded = true;
        e->t = std::chrono::steady_clock::now();
        return cudaSuccess;
    }));
}
cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    Lock lk(mu());
    return g_events.count(e) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaEventQuery(cudaEvent_t e) { return cudaEventSynchronize(e); }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    Lock lk(mu());
    if (!ms)
        return fail(cudaErrorInvalidValue);
    if (!g_events.count(a) || !g_events.count(b) || !a->recorded || !b->recorded ||
        ((a->flags | b->flags) & cudaEventDisableTiming))
        return fail(cudaErrorInvalidResourceHandle);
    *ms = std::chrono::duration<float, std::milli>(b->t - a->t).count();
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    Lock lk(mu());
    if (!g_events.erase(e))
        return fail(cudaErrorInvalidResourceHandle);
    delete e;
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, cudaFuncAttribute attr, int value)
{
    Lock lk(mu());
    if (!func)
        return fail(cudaErrorInvalidValue);
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || static_cast<size_t>(value) > kSmemOptin) {
            msg("cudaFuncSetAttribute(MaxDynamicSharedMemorySize, %d): over the 227 KiB maximum: cudaErrorInvalidValue",
                value);
            return fail(cudaErrorInvalidValue);
        }
        g_func_smem[func] = value;
    }
    return cudaSuccess;
}

// Capture and graphs.
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode)
{
    Lock lk(mu());
    if (!stream_valid(s))
        return fail(cudaErrorInvalidResourceHandle);
    if (is_default(s)) {
        msg("cudaStreamBeginCapture on the default stream: cudaErrorStreamCaptureUnsupported");
        return fail(cudaErrorStreamCaptureUnsupported);
    }
    if (static_cast<unsigned>(mode) > 2)
        return fail(cudaErrorInvalidValue);
    if (s->cap)
        return fail(cudaErrorIllegalState);
    s->cap.reset(new Capture{mode, std::this_thread::get_id(), false, {}});
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph)
{
    Lock lk(mu());
    if (!graph)
        return fail(cudaErrorInvalidValue);
    if (!stream_valid(s))
        return fail(cudaErrorInvalidResourceHandle);
    if (is_default(s) || !s->cap)
        return fail(cudaErrorIllegalState);
    if (s->cap->mode != cudaStreamCaptureModeRelaxed && s->cap->owner != std::this_thread::get_id())
        return fail(cudaErrorStreamCaptureWrongThread);
    std::unique_ptr<Capture> cap = std::move(s->cap);
    *graph = nullptr;
    if (cap->invalidated)
        return fail(cudaErrorStreamCaptureInvalidated);
    *graph = new CUgraph_st{std::move(cap->ops)};
    g_graphs.insert(*graph);
    return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *status)
{
    Lock lk(mu());
    if (!status)
        return fail(cudaErrorInvalidValue);
    if (!stream_valid(s))
        return fail(cudaErrorInvalidResourceHandle);
    *status = cudaStreamCaptureStatusNone;
    if (is_default(s)) {
        for (const void *p :
             g_streams) { // the legacy stream is unusable while a blocking stream captures
            auto *c = static_cast<const CUstream_st *>(p);
            if (s != cudaStreamPerThread && c->cap && !(c->flags & cudaStreamNonBlocking))
                return fail(cudaErrorStreamCaptureImplicit);
        }
        return cudaSuccess;
    }
    if (s->cap)
        *status = s->cap->invalidated ? cudaStreamCaptureStatusInvalidated
                                      : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long)
{
    Lock lk(mu());
    if (!exec || !g_graphs.count(graph))
        return fail(cudaErrorInvalidValue);
    *exec = new CUgraphExec_st{std::make_shared<const OpList>(graph->ops)};
    g_execs.insert(*exec);
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *exec, cudaGraph_t graph,
                                          unsigned long long flags)
{
    return cudaGraphInstantiate(exec, graph, flags);
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s)
{
    Lock lk(mu());
    if (!g_execs.count(exec))
        return fail(cudaErrorInvalidResourceHandle);
    std::shared_ptr<const OpList> ops = exec->ops;
    return fail(submit(s, "cudaGraphLaunch", [ops]() {
        for (size_t i = 0; i < ops->size(); ++i)
            if (cudaError_t e = (*ops)[i].fn()) {
                msg("cudaGraphLaunch: replayed operation %zu (%s) failed: %s", i, (*ops)[i].what,
                    cudaGetErrorName(e));
                return e;
            }
        return cudaSuccess;
    }));
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    Lock lk(mu());
    if (!g_execs.erase(exec))
        return fail(cudaErrorInvalidResourceHandle);
    delete exec;
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    Lock lk(mu());
    if (!g_graphs.erase(graph))
        return fail(cudaErrorInvalidResourceHandle);
    delete graph;
    return cudaSuccess;
}

// ---------------------------------------------------------------------------
// cuBLAS.  A GEMM call is validated when issued (and again when a captured
// call is replayed), then computed in float: op(A) and op(B) are expanded to
// float column-major copies and each column of C accumulates over k in order,
// with the i loop innermost so it vectorises without reassociating sums.
namespace cudasim
{
struct Gemm {
    const char *api;
    cublasOperation_t ta, tb;
    int m, n, k;
    float alpha, beta;
    const void *A;
    cudaDataType at;
    int lda;
    long long sA;
    const void *B;
    cudaDataType bt;
    int ldb;
    long long sB;
    void *C;
    cudaDataType ct;
    int ldc;
    long long sC;
    int batch;
};
size_t dt_size(cudaDataType t)
{
    return t == CUDA_R_32F ? 4 : (t == CUDA_R_16F || t == CUDA_R_16BF) ? 2 : 0;
}
float load(const void *p, cudaDataType t, size_t i)
{
    if (t == CUDA_R_32F)
        return static_cast<const float *>(p)[i];
    const uint16_t h = static_cast<const uint16_t *>(p)[i];
    return t == CUDA_R_16BF ? bf16_to_f32(h) : f16_to_f32(h);
}
void store(void *p, cudaDataType t, size_t i, float v)
{
    if (t == CUDA_R_32F)
        static_cast<float *>(p)[i] = v;
    else
        static_cast<uint16_t *>(p)[i] = t == CUDA_R_16BF ? f32_to_bf16(v) : f32_to_f16(v);
}
// Operand X stored rows x cols (column-major, leading dimension ld) must lie,
// for every batch entry, inside one live device allocation.
cublasStatus_t check_operand(const Gemm &g, const char *name, const void *p, cudaDataType t,
                             int rows, int cols, int ld, long long stride)
{
    long long es = static_cast<long long>(dt_size(t));
    long long bytes =
        ((static_cast<long long>(cols) - 1) * ld + rows) * es + (g.batch - 1LL) * stride * es;
    if (dev_find(p, static_cast<size_t>(bytes)) != g_dev.end())
        return CUBLAS_STATUS_SUCCESS;
    msg("%s: matrix %s (%dx%d, ld %d, stride %lld, batch %d: %lld bytes) is out of bounds: %s: "
        "CUBLAS_STATUS_INVALID_VALUE",
        g.api, name, rows, cols, ld, stride, g.batch, bytes,
        describe(p, static_cast<size_t>(bytes)).c_str());
    return CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t gemm_check(const Gemm &g)
{
    auto bad = [&](const char *why) {
        msg("%s(m=%d n=%d k=%d lda=%d ldb=%d ldc=%d batch=%d): %s: CUBLAS_STATUS_INVALID_VALUE",
            g.api, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch, why);
        return CUBLAS_STATUS_INVALID_VALUE;
    };
    if (g.ta > CUBLAS_OP_C || g.tb > CUBLAS_OP_C)
        return bad("invalid cublasOperation_t");
    if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 0)
        return bad("negative dimension or batch count");
    const int ar = g.ta == CUBLAS_OP_N ? g.m : g.k, ac = g.ta == CUBLAS_OP_N ? g.k : g.m;
    const int br = g.tb == CUBLAS_OP_N ? g.k : g.n, bc = g.tb == CUBLAS_OP_N ? g.n : g.k;
    if (g.lda < std::max(1, ar))
        return bad("lda is smaller than the rows of A as stored");
    if (g.ldb < std::max(1, br))
        return bad("ldb is smaller than the rows of B as stored");
    if (g.ldc < std::max(1, g.m))
        return bad("ldc < m");
    if (!dt_size(g.at) || g.at != g.bt || (g.ct != g.at && g.ct != CUDA_R_32F)) {
        msg("%s: type combination A=%d B=%d C=%d is not supported: CUBLAS_STATUS_NOT_SUPPORTED",
            g.api, g.at, g.bt, g.ct);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (g.m == 0 || g.n == 0 || g.batch == 0)
        return CUBLAS_STATUS_SUCCESS; // nothing is touched
    if (g.sA < 0 || g.sB < 0 || g.sC < 0)
        return bad("negative stride (not simulated)");
    if (g.batch > 1 && g.sC < (g.n - 1LL) * g.ldc + g.m)
        return bad("the batch's C matrices overlap (strideC too small)");
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    if (g.k > 0) {
        if ((st = check_operand(g, "A", g.A, g.at, ar, ac, g.lda, g.sA)))
            return st;
        if ((st = check_operand(g, "B", g.B, g.bt, br, bc, g.ldb, g.sB)))
            return st;
    }
    return check_operand(g, "C", g.C, g.ct, g.m, g.n, g.ldc, g.sC);
}
// out (rows x cols, column-major, packed) = op(X) where X is stored with leading dimension ld.
void expand(const void *X, cudaDataType t, bool trans, int rows, int cols, int ld, float *out)
{
    for (int c = 0; c < cols; ++c)
        for (int r = 0; r < rows; ++r)
            out[static_cast<size_t>(c) * rows + r] =
                load(X, t,
                     trans ? static_cast<size_t>(r) * ld + c : static_cast<size_t>(c) * ld + r);
}
void gemm_run(const Gemm &g)
{
    const size_t m = static_cast<size_t>(g.m), n = static_cast<size_t>(g.n),
                 k = static_cast<size_t>(g.k);
    std::vector<float> a(m * k), b(k * n), acc(m);
    const size_t ea = dt_size(g.at), eb = dt_size(g.bt), ec = dt_size(g.ct);
    for (int bi = 0; bi < g.batch; ++bi) {
        const char *A = static_cast<const char *>(g.A) + bi * g.sA * static_cast<long long>(ea);
        const char *B = static_cast<const char *>(g.B) + bi * g.sB * static_cast<long long>(eb);
        char *C = static_cast<char *>(g.C) + bi * g.sC * static_cast<long long>(ec);
        if (k) {
            expand(A, g.at, g.ta != CUBLAS_OP_N, g.m, g.k, g.lda, a.data());
            expand(B, g.bt, g.tb != CUBLAS_OP_N, g.k, g.n, g.ldb, b.data());
        }
        for (size_t j = 0; j < n; ++j) {
            float *__restrict__ s = acc.data();
            std::fill(acc.begin(), acc.end(), 0.0f);
            for (size_t p = 0; p < k; ++p) {
                const float bv = b[j * k + p];
                const float *__restrict__ ap = a.data() + p * m;
                for (size_t i = 0; i < m; ++i)
                    s[i] += ap[i] * bv;
            }
            for (size_t i = 0; i < m; ++i) {
                const size_t idx = i + j * static_cast<size_t>(g.ldc);
                float v = g.alpha * s[i];
                if (g.beta != 0.0f)
                    v += g.beta * load(C, g.ct, idx); // beta == 0: C is not read (may be NaN)
                store(C, g.ct, idx, v);
            }
        }
    }
}
cublasStatus_t gemm_issue(cublasHandle_t h, Gemm g, const void *alpha, const void *beta,
                          cublasComputeType_t ct)
{
    Lock lk(mu());
    if (!g_handles.count(h)) {
        msg("%s: handle %p is not a live cuBLAS handle: CUBLAS_STATUS_NOT_INITIALIZED", g.api,
            static_cast<void *>(h));
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (ct != CUBLAS_COMPUTE_32F && ct != CUBLAS_COMPUTE_32F_PEDANTIC &&
        ct != CUBLAS_COMPUTE_32F_FAST_TF32) {
        msg("%s: compute type %d is not simulated: CUBLAS_STATUS_NOT_SUPPORTED", g.api, ct);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (!alpha || !beta || dev_overlap(alpha, 4) != g_dev.end() ||
        dev_overlap(beta, 4) != g_dev.end()) {
        msg("%s: alpha/beta must be host float pointers (CUBLAS_POINTER_MODE_HOST): CUBLAS_STATUS_INVALID_VALUE",
            g.api);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    g.alpha = *static_cast<const float *>(
        alpha); // host pointer mode: read at call time, also when capturing
    g.beta = *static_cast<const float *>(beta);
    if (cublasStatus_t st = gemm_check(g))
        return st;
    cudaError_t e = submit(h->stream, g.api, [g]() {
        if (gemm_check(g))
            return cudaErrorIllegalAddress;
        gemm_run(g);
        return cudaSuccess;
    });
    if (e) {
        msg("%s: could not be issued on stream %p: %s: CUBLAS_STATUS_EXECUTION_FAILED", g.api,
            static_cast<void *>(h->stream), cudaGetErrorName(e));
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    return CUBLAS_STATUS_SUCCESS;
}
} // namespace cudasim

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    Lock lk(mu());
    if (!h)
        return CUBLAS_STATUS_INVALID_VALUE;
    *h = new cublasContext{nullptr, CUBLAS_DEFAULT_MATH};
    g_handles.insert(*h);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    Lock lk(mu());
    if (!g_handles.erase(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    Lock lk(mu());
    if (!g_handles.count(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!stream_valid(s))
        return CUBLAS_STATUS_INVALID_VALUE;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetStream(cublasHandle_t h, cudaStream_t *s)
{
    Lock lk(mu());
    if (!g_handles.count(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!s)
        return CUBLAS_STATUS_INVALID_VALUE;
    *s = h->stream;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes)
{
    Lock lk(mu());
    if (!g_handles.count(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (bytes && (addr(ws) % 256 || dev_find(ws, bytes) == g_dev.end())) {
        msg("cublasSetWorkspace(%p, %zu): the workspace must be 256-byte aligned device memory: "
            "CUBLAS_STATUS_INVALID_VALUE",
            ws, bytes);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS; // the simulated GEMM needs no workspace
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
    Lock lk(mu());
    if (!g_handles.count(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetMathMode(cublasHandle_t h, cublasMath_t *mode)
{
    Lock lk(mu());
    if (!g_handles.count(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode)
        return CUBLAS_STATUS_INVALID_VALUE;
    *mode = h->math;
    return CUBLAS_STATUS_SUCCESS;
}
const char *cublasGetStatusString(cublasStatus_t s)
{
    switch (s) {
#define CASE(x)                                                                                    \
    case x: return #x;
        CASE(CUBLAS_STATUS_SUCCESS)
        CASE(CUBLAS_STATUS_NOT_INITIALIZED)
        CASE(CUBLAS_STATUS_ALLOC_FAILED)
        CASE(CUBLAS_STATUS_INVALID_VALUE)
        CASE(CUBLAS_STATUS_ARCH_MISMATCH)
        CASE(CUBLAS_STATUS_MAPPING_ERROR)
        CASE(CUBLAS_STATUS_EXECUTION_FAILED)
        CASE(CUBLAS_STATUS_INTERNAL_ERROR)
        CASE(CUBLAS_STATUS_NOT_SUPPORTED)
#undef CASE
    }
    return "CUBLAS_STATUS_UNKNOWN";
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType at,
                                          int lda, long long sA, const void *B, cudaDataType bt,
                                          int ldb, long long sB, const void *beta, void *C,
                                          cudaDataType ct, int ldc, long long sC, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t)
{
    return gemm_issue(h,
                      Gemm{"cublasGemmStridedBatchedEx",
                           ta,
                           tb,
                           m,
                           n,
                           k,
                           0,
                           0,
                           A,
                           at,
                           lda,
                           sA,
                           B,
                           bt,
                           ldb,
                           sB,
                           C,
                           ct,
                           ldc,
                           sC,
                           batch},
                      alpha, beta, compute);
}
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType at,
                            int lda, const void *B, cudaDataType bt, int ldb, const void *beta,
                            void *C, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t)
{
    return gemm_issue(
        h,
        Gemm{"cublasGemmEx", ta, tb, m, n, k, 0, 0, A, at, lda, 0, B, bt, ldb, 0, C, ct, ldc, 0, 1},
        alpha, beta, compute);
}
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const float *alpha, const float *A, int lda,
                           const float *B, int ldb, const float *beta, float *C, int ldc)
{
    return gemm_issue(h, Gemm{"cublasSgemm", ta,  tb, m, n,          k,   0, 0, A,
                              CUDA_R_32F,    lda, 0,  B, CUDA_R_32F, ldb, 0, C, CUDA_R_32F,
                              ldc,           0,   1},
                      alpha, beta, CUBLAS_COMPUTE_32F);
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const float *alpha, const float *A, int lda, long long sA,
                                         const float *B, int ldb, long long sB, const float *beta,
                                         float *C, int ldc, long long sC, int batch)
{
    return gemm_issue(h,
                      Gemm{"cublasSgemmStridedBatched",
                           ta,
                           tb,
                           m,
                           n,
                           k,
                           0,
                           0,
                           A,
                           CUDA_R_32F,
                           lda,
                           sA,
                           B,
                           CUDA_R_32F,
                           ldb,
                           sB,
                           C,
                           CUDA_R_32F,
                           ldc,
                           sC,
                           batch},
                      alpha, beta, CUBLAS_COMPUTE_32F);
}
