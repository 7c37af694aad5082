/*
 * sample.cu — sampling on the device (engine.h, mhla_sample_slot): for each
 * sampled row, its token mask (a bitmask: forbidden ids to -inf), logit_bias
 * and the penalties, then temperature, min_p, top_k
 * and top_p exactly as engine/sampler.c defines them, one draw with the
 * uniform the host took from the sequence's generator, and the logprobs of
 * the raw logits. Only the results (a few dozen bytes a row) go back.
 *
 * One thread block per row. Candidates are ordered as on the host: higher
 * logit first, then lower id — packed into one 64-bit key per id, so top_k
 * (the k-th best key) and top_p (the key where the best-first mass reaches
 * top_p) are found by radix selection, 8 bits at a time, without sorting.
 * The draw walks the kept ids in id order (the host walks its own candidate
 * order: the same distribution; the same token for greedy and for plain
 * temperature sampling, which the host also walks in id order).
 */
#include "sample.cuh"

#include <cfloat>
#include <climits>
#include <cmath>

namespace eng_gpu
{

#ifdef MHLA_CUDA_SIM
using std::isfinite; /* nvcc's device headers declare them unqualified */
using std::isnan;
#endif

constexpr unsigned FULL = 0xffffffffu;

/* Larger key = better candidate: the logit's bits made order-preserving as
 * an unsigned integer, then the id reversed (a lower id wins ties). */
__device__ __forceinline__ unsigned long long cand_key(float l, int id)
{
    unsigned b = __float_as_uint(l);
    b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    return ((unsigned long long)b << 32) | (unsigned long long)(0xffffffffu - (unsigned)id);
}

__device__ __forceinline__ int key_id(unsigned long long k)
{
    return (int)(0xffffffffu - (unsigned)(k & 0xffffffffu));
}

__device__ double sum_d(double v)
{
    __shared__ double part[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(FULL, v, o);
    __syncthreads();
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    double r = 0.0;
    for (int i = 0; i < nw; i++)
        r += part[i];
    return r;
}

__device__ float max_f(float v)
{
    __shared__ float part[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
    __syncthreads();
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    float r = part[0];
    for (int i = 1; i < nw; i++)
        r = fmaxf(r, part[i]);
    return r;
}

__device__ unsigned long long max_u64(unsigned long long v)
{
    __shared__ unsigned long long part[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    for (int o = 16; o > 0; o >>= 1) {
        unsigned long long w = __shfl_xor_sync(FULL, v, o);
        v = w > v ? w : v;
    }
    __syncthreads();
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    unsigned long long r = part[0];
    for (int i = 1; i < nw; i++)
        r = part[i] > r ? part[i] : r;
    return r;
}

/* Exclusive prefix sum over the threads of the block, in thread order. */
__device__ double scan_d(double v, double *total)
{
    __shared__ double warp_sum[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    double inc = v;
    for (int o = 1; o < 32; o <<= 1) {
        double n = __shfl_up_sync(FULL, inc, o);
        if (lane >= o)
            inc += n;
    }
    __syncthreads();
    if (lane == 31)
        warp_sum[warp] = inc;
    __syncthreads();
    double before = 0.0, all = 0.0;
    for (int i = 0; i < nw; i++) {
        if (i < warp)
            before += warp_sum[i];
        all += warp_sum[i];
    }
    *total = all;
    return before + inc - v;
}

struct row_view {
    const float *adj;
    float maxl, min_p;
    double inv_t;
    unsigned long long kth; /* top_k cut: keys below are out (0: none) */
    unsigned long long cut; /* top_p cut (0: none) */
};

__device__ __forceinline__ double weight(const row_view &r, int i)
{
    return exp(((double)r.adj[i] - (double)r.maxl) * r.inv_t);
}

/* Whether id i survives min_p and the cuts found so far; *w its weight. */
__device__ __forceinline__ bool kept(const row_view &r, int i, unsigned long long key, double *w)
{
    *w = weight(r, i);
    if (r.min_p > 0.0f && *w < (double)r.min_p)
        return false;
    return key >= r.kth && key >= r.cut;
}

/* The key at which the best-first count (by_mass 0) reaches `want`, or the
 * best-first mass (by_mass 1) does, among the kept ids; *above gets the
 * count or mass of the kept keys above it. */
__device__ unsigned long long radix_select(const row_view &r, int V, bool by_mass, double want,
                                           double *above)
{
    __shared__ double hist[256];
    __shared__ unsigned long long s_prefix;
    __shared__ double s_above;
    unsigned long long prefix = 0, mask = 0;
    double acc = 0.0;
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += blockDim.x)
            hist[b] = 0.0;
        __syncthreads();
        for (int i = threadIdx.x; i < V; i += blockDim.x) {
            unsigned long long k = cand_key(r.adj[i], i);
            double w;
            if ((k & mask) != prefix || !kept(r, i, k, &w))
                continue;
            atomicAdd(&hist[(k >> shift) & 255], by_mass ? w : 1.0);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int sel = -1, last_nonempty = -1;
            for (int b = 255; b >= 0; b--) {
                if (hist[b] == 0.0)
                    continue;
                last_nonempty = b;
                if (acc + hist[b] >= want) {
                    sel = b;
                    break;
                }
                acc += hist[b];
            }
            if (sel < 0) { /* rounding left the target just out of reach: the last one */
                sel = last_nonempty < 0 ? 0 : last_nonempty;
                if (last_nonempty >= 0)
                    acc -= hist[sel];
            }
            s_prefix = prefix | ((unsigned long long)sel << shift);
            s_above = acc;
        }
        __syncthreads();
        prefix = s_prefix;
        acc = s_above;
        mask |= 255ull << shift;
        __syncthreads();
    }
    *above = acc;
    return prefix;
}

/* The highest key of a NaN logit's id (0: none), for every thread. */
__device__ unsigned long long first_nan_key(const float *raw, int V)
{
    unsigned long long nan_key = 0;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        if (isnan(raw[i]))
            nan_key = nan_key > cand_key(0.0f, i) ? nan_key : cand_key(0.0f, i);
    return max_u64(nan_key);
}

/* log-sum-exp of the raw logits, for the logprobs */
__device__ double raw_lse(const float *raw, int V)
{
    int tid = threadIdx.x, nt = blockDim.x;
    float mx = -INFINITY;
    for (int i = tid; i < V; i += nt)
        mx = fmaxf(mx, raw[i]);
    mx = max_f(mx);
    double se = 0.0;
    for (int i = tid; i < V; i += nt)
        se += exp((double)raw[i] - (double)mx);
    return (double)mx + log(sum_d(se));
}

/* The mask (forbidden ids at -inf; NULL: none), then bias, then penalties,
 * on a copy of the raw logits in adj. The host sampler masks after bias and
 * penalties: -inf stays -inf through both, so the rows are the same. */
__device__ void adjust_logits(const sample_desc &d, const float *raw, float *adj, int V,
                              const sample_pen *pens, const sample_bias *biases,
                              const unsigned long long *mask)
{
    int tid = threadIdx.x, nt = blockDim.x;
    for (int i = tid; i < V; i += nt)
        adj[i] = !mask || ((mask[i >> 6] >> (i & 63)) & 1ull) ? raw[i] : -INFINITY;
    __syncthreads();
    for (int j = tid; j < d.n_bias; j += nt)
        atomicAdd(&adj[biases[d.bias0 + j].id], biases[d.bias0 + j].bias);
    __syncthreads();
    for (int j = tid; j < d.n_pen; j += nt) {
        sample_pen p = pens[d.pen0 + j];
        int count = p.count & 0x3fffffff, seen_in_prompt = (p.count >> 30) & 1;
        float l = adj[p.id];
        if (d.repetition != 1.0f && (count || seen_in_prompt))
            l = l > 0 ? l / d.repetition : l * d.repetition;
        if (count)
            l -= d.presence + d.frequency * (float)count;
        adj[p.id] = l;
    }
    __syncthreads();
}

/* The greedy token: the highest logit, the lowest id among equals. */
__device__ int best_token(const float *adj, int V)
{
    unsigned long long best = 0;
    for (int i = threadIdx.x; i < V; i += blockDim.x) {
        unsigned long long k = cand_key(adj[i], i);
        best = k > best ? k : best;
    }
    return key_id(max_u64(best));
}

/* How many ids survive (mass 0), or their weight (mass 1). */
__device__ double kept_sum(const row_view &r, int V, bool mass)
{
    double w, sum = 0.0;
    for (int i = threadIdx.x; i < V; i += blockDim.x)
        if (kept(r, i, cand_key(r.adj[i], i), &w))
            sum += mass ? w : 1.0;
    return sum_d(sum);
}

/* The kept id at which the weights, summed in id order, pass target (each
 * thread owns a contiguous run of ids); -1 when rounding left none. */
__device__ int inverse_cdf(const row_view &r, int V, double target)
{
    const float *adj = r.adj;
    int tid = threadIdx.x, nt = blockDim.x;
    int chunk = (V + nt - 1) / nt, lo = tid * chunk, hi = lo + chunk < V ? lo + chunk : V;
    double w, mine = 0.0;
    for (int i = lo; i < hi; i++)
        if (kept(r, i, cand_key(adj[i], i), &w))
            mine += w;
    double all, acc = scan_d(mine, &all);
    unsigned long long pick = 0, last = 0;
    for (int i = lo; i < hi; i++) {
        if (!kept(r, i, cand_key(adj[i], i), &w))
            continue;
        last = (unsigned long long)i + 1;
        acc += w;
        if (acc > target) {
            pick = cand_key(0.0f, i); /* the lowest such id wins below */
            break;
        }
    }
    pick = max_u64(pick);
    last = max_u64(last);
    if (pick)
        return key_id(pick);
    if (last) /* rounding put the target at the very end */
        return (int)last - 1;
    return -1;
}

/* A draw with temperature, min_p, top_k and top_p from the adjusted logits
 * (token: the greedy one, kept when the draw finds none). */
__device__ int draw_token(const sample_desc &d, const float *adj, int V, int token)
{
    row_view r = {adj, adj[token], d.min_p, 1.0 / (double)d.temperature, 0, 0};
    double n_kept = kept_sum(r, V, false), above;
    if (d.top_k > 0 && (double)d.top_k < n_kept)
        r.kth = radix_select(r, V, false, (double)d.top_k, &above);
    double total = kept_sum(r, V, true);
    if (d.top_p < 1.0f) {
        r.cut = radix_select(r, V, true, (double)d.top_p * total, &above);
        total = kept_sum(r, V, true);
    }
    int pick = inverse_cdf(r, V, d.u * total);
    return pick >= 0 ? pick : token;
}

/* the n_top best raw logits, best first */
__device__ void top_logprobs(const float *raw, int V, double lse, int n_top, sample_result *res)
{
    unsigned long long prev = ~0ull;
    for (int j = 0; j < n_top; j++) {
        unsigned long long b = 0;
        for (int i = threadIdx.x; i < V; i += blockDim.x) {
            unsigned long long k = cand_key(raw[i], i);
            if (k < prev && k > b)
                b = k;
        }
        b = max_u64(b);
        if (threadIdx.x == 0) {
            res->top_id[j] = key_id(b);
            res->top_lp[j] = (float)((double)raw[key_id(b)] - lse);
        }
        prev = b;
    }
}

__global__ void __launch_bounds__(1024)
    sample_kernel(const float *logits, int V, float *adj_all, const sample_desc *descs,
                  const sample_pen *pens, const sample_bias *biases,
                  const unsigned long long *masks, sample_result *results)
{
    const sample_desc d = descs[blockIdx.x];
    const float *raw = logits + (size_t)d.row * V;
    float *adj = adj_all + (size_t)blockIdx.x * V;
    sample_result *res = &results[blockIdx.x];

    unsigned long long nan_key = first_nan_key(raw, V);
    if (nan_key) {
        if (threadIdx.x == 0) {
            res->status = -1;
            res->nan_id = key_id(nan_key);
        }
        return;
    }
    double lse = raw_lse(raw, V);
    const unsigned long long *mask =
        d.mask_row >= 0 ? masks + (size_t)d.mask_row * (size_t)((V + 63) / 64) : nullptr;
    adjust_logits(d, raw, adj, V, pens, biases, mask);
    int token = best_token(adj, V);
    if (mask && adj[token] == -INFINITY) { /* the best is -inf: the mask left no id */
        if (threadIdx.x == 0)
            res->status = -2;
        return;
    }
    if (d.temperature > 0.0f && isfinite(adj[token]))
        token = draw_token(d, adj, V, token);
    if (threadIdx.x == 0) {
        res->status = 0;
        res->token = token;
        res->token_lp = (float)((double)raw[token] - lse);
    }
    top_logprobs(raw, V, lse, d.n_top, res);
}

void k_sample(const float *logits, int V, float *adj, const sample_desc *descs, int n,
              const sample_pen *pens, const sample_bias *biases, const unsigned long long *masks,
              sample_result *results, cudaStream_t st)
{
    /* a warp per 32 ids up to 1024 threads: small vocabularies need fewer */
    int threads = V >= 1024 ? 1024 : ((V + 31) / 32) * 32;
    if (n > 0)
        MHLA_LAUNCH(sample_kernel, n, threads, 0, st)
    (logits, V, adj, descs, pens, biases, masks, results);
}

} // namespace eng_gpu
