/*
 * kernels.cu — the backend's own kernels: everything of a step that is not
 * a matrix product (those go to cuBLAS, forward.cu).
 *
 * Activations between kernels are f32; the inputs of matrix products are
 * written in the weights' dtype (cuBLAS multiplies like types) and every
 * product accumulates in f32. The token mixer follows the CPU's
 * cpu/token_mixer.c: the current block's raw rows are kept, S_b = K_bᵀV_b is
 * formed once when a block closes, P_i = Σ_b m[i][b] S_b once when a block
 * starts, and o = q~ᵀP_i + m[i][i] Σ_{u≤r} (q~·k~_u) v_u — the same sums, in
 * the same order where the order is a plain loop.
 */
#include "kernels.cuh"

#include <cmath>

namespace eng_gpu
{

__device__ __forceinline__ float ld_dt(const void *p, size_t i, int dt)
{
    if (dt == DT_BF16)
        return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
    if (dt == DT_F16)
        return __half2float(static_cast<const __half *>(p)[i]);
    return static_cast<const float *>(p)[i];
}

__device__ __forceinline__ void st_dt(void *p, size_t i, float v, int dt)
{
    if (dt == DT_BF16)
        static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16(v);
    else if (dt == DT_F16)
        static_cast<__half *>(p)[i] = __float2half_rn(v);
    else
        static_cast<float *>(p)[i] = v;
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every
 * thread gets the result. */
__device__ float block_sum(float v)
{
    __shared__ float part[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    v = warp_sum(v);
    __syncthreads(); /* part[] may still be read by a previous call */
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    float s = lane < nw ? part[lane] : 0.0f;
    return warp_sum(s);
}

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

/* ---- conversion, embedding, norms ----------------------------------------- */

__global__ void convert_kernel(const void *src, int sdt, void *dst, int ddt, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        st_dt(dst, i, ld_dt(src, i, sdt), ddt);
}

void k_convert(const void *src, int src_dt, void *dst, int dst_dt, size_t n, cudaStream_t st)
{
    if (n == 0)
        return;
    MHLA_LAUNCH(convert_kernel, (unsigned)((n + 255) / 256), 256, 0, st)
    (src, src_dt, dst, dst_dt, n);
}

__global__ void embed_kernel(float *x, const void *emb, int dt, const int32_t *tokens, int D)
{
    int t = blockIdx.x;
    size_t base = (size_t)tokens[t] * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x)
        x[(size_t)t * D + d] = ld_dt(emb, base + d, dt);
}

void k_embed(float *x, const void *emb, int dt, const int32_t *tokens, int T, int D,
             cudaStream_t st)
{
    MHLA_LAUNCH(embed_kernel, T, 256, 0, st)(x, emb, dt, tokens, D);
}

__global__ void add_norm_kernel(float *x, const float *y, const float *w, void *h, int dt, int D,
                                float eps)
{
    size_t row = (size_t)blockIdx.x * D;
    float ss = 0.0f;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float v = x[row + d];
        if (y) {
            v += y[row + d];
            x[row + d] = v;
        }
        ss = fmaf(v, v, ss);
    }
    ss = block_sum(ss);
    float inv = 1.0f / sqrtf(ss / (float)D + eps);
    for (int d = threadIdx.x; d < D; d += blockDim.x)
        st_dt(h, row + d, x[row + d] * inv * w[d], dt);
}

void k_add_norm(float *x, const float *y, const float *w, void *h, int dt, int T, int D, float eps,
                cudaStream_t st)
{
    MHLA_LAUNCH(add_norm_kernel, T, 256, 0, st)(x, y, w, h, dt, D, eps);
}

__global__ void final_norm_kernel(const float *x, const float *y, const int32_t *rows,
                                  const float *w, void *hl, int dt, int D, float eps)
{
    size_t src = (size_t)rows[blockIdx.x] * D, dst = (size_t)blockIdx.x * D;
    float ss = 0.0f;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float v = x[src + d] + y[src + d];
        ss = fmaf(v, v, ss);
    }
    ss = block_sum(ss);
    float inv = 1.0f / sqrtf(ss / (float)D + eps);
    for (int d = threadIdx.x; d < D; d += blockDim.x)
        st_dt(hl, dst + d, (x[src + d] + y[src + d]) * inv * w[d], dt);
}

void k_final_norm(const float *x, const float *y, const int32_t *rows, const float *w, void *hl,
                  int dt, int R, int D, float eps, cudaStream_t st)
{
    MHLA_LAUNCH(final_norm_kernel, R, 256, 0, st)(x, y, rows, w, hl, dt, D, eps);
}

/* ---- feature map, rotary, scale ------------------------------------------ */

__device__ __forceinline__ float feature(int fm, float x)
{
    if (fm == MHLA_FEATURE_RELU)
        return x > 0.0f ? x : 0.0f;
    if (fm == MHLA_FEATURE_ELU)
        return (x > 0.0f ? x : expm1f(x)) + 1.0f;
    return x;
}

/* One thread per rotated pair (r, r + dk/2) of one head of one row. */
__global__ void qk_prepare_kernel(float *qkvg, int W, int q_off, int k_off, const int32_t *rowpos,
                                  const float *rope_cos, const float *rope_sin, int H, int Hkv,
                                  int dk, int fm, float q_scale)
{
    int t = blockIdx.x, half = dk / 2;
    size_t pos = (size_t)rowpos[t];
    const float *cs = rope_cos + pos * half, *sn = rope_sin + pos * half;
    for (int p = threadIdx.x; p < (H + Hkv) * half; p += blockDim.x) {
        int head = p / half, r = p % half, is_q = head < H;
        float *x = qkvg + (size_t)t * W + (is_q ? q_off + head * dk : k_off + (head - H) * dk);
        float a = feature(fm, x[r]), b = feature(fm, x[r + half]);
        float na = a * cs[r] - b * sn[r], nb = b * cs[r] + a * sn[r];
        if (is_q) {
            na *= q_scale;
            nb *= q_scale;
        }
        x[r] = na;
        x[r + half] = nb;
    }
}

void k_qk_prepare(float *qkvg, int W, int q_off, int k_off, const int32_t *rowpos,
                  const float *rope_cos, const float *rope_sin, int T, int H, int Hkv, int dk,
                  int feature_map, float q_scale, cudaStream_t st)
{
    MHLA_LAUNCH(qk_prepare_kernel, T, 128, 0, st)
    (qkvg, W, q_off, k_off, rowpos, rope_cos, rope_sin, H, Hkv, dk, feature_map, q_scale);
}

/* ---- output norm with gate, SwiGLU ---------------------------------------- */

/* One warp per (row, head). */
__global__ void out_norm_kernel(const float *att, const float *qkvg, int W, int g_off,
                                const float *g_norm, void *ho, int dt, int T, int H, int dv,
                                float eps)
{
    int w = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (w >= T * H) /* uniform across the warp */
        return;
    int t = w / H, j = w % H;
    const float *o = att + (size_t)w * dv;
    float ss = 0.0f;
    for (int c = lane; c < dv; c += 32)
        ss = fmaf(o[c], o[c], ss);
    ss = warp_sum(ss);
    float inv = 1.0f / sqrtf(ss / (float)dv + eps);
    for (int c = lane; c < dv; c += 32) {
        float v = o[c] * inv * g_norm[c];
        if (g_off >= 0)
            v *= silu(qkvg[(size_t)t * W + g_off + (size_t)j * dv + c]);
        st_dt(ho, (size_t)w * dv + c, v, dt);
    }
}

void k_out_norm(const float *att, const float *qkvg, int W, int g_off, const float *g_norm,
                void *ho, int dt, int T, int H, int dv, float eps, cudaStream_t st)
{
    int warps = T * H;
    MHLA_LAUNCH(out_norm_kernel, (warps + 3) / 4, 128, 0, st)
    (att, qkvg, W, g_off, g_norm, ho, dt, T, H, dv, eps);
}

/* gu rows hold [gate | up], each I wide. */
__global__ void swiglu_kernel(const float *gu, void *out, int dt, size_t n, int I)
{
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n)
        return;
    size_t t = idx / I, i = idx % I;
    float g = gu[t * 2 * I + i], u = gu[t * 2 * I + I + i];
    st_dt(out, idx, silu(g) * u, dt);
}

void k_swiglu(const float *gu, void *out, int dt, int T, int I, cudaStream_t st)
{
    size_t n = (size_t)T * I;
    MHLA_LAUNCH(swiglu_kernel, (unsigned)((n + 255) / 256), 256, 0, st)(gu, out, dt, n, I);
}

/* ---- the token mixer ------------------------------------------------------- */

__device__ __forceinline__ float page_get(const void *page, size_t i, int bf16)
{
    return bf16 ? __bfloat162float(static_cast<const __nv_bfloat16 *>(page)[i])
                : static_cast<const float *>(page)[i];
}

__device__ __forceinline__ void page_put(void *page, size_t i, float v, int bf16)
{
    if (bf16)
        static_cast<__nv_bfloat16 *>(page)[i] = __float2bfloat16(v);
    else
        static_cast<float *>(page)[i] = v;
}

__device__ __forceinline__ size_t head_index(const mix_args &a, int g)
{
    return (size_t)a.layer * a.Hkv + g;
}

/* Row u of the segment's block, head g: rows before r0 were kept by earlier
 * steps (kvstate's cur_k / cur_v), the rest are this step's activations. */
__device__ __forceinline__ const float *krow(const mix_args &a, const seg_desc &s,
                                             const item_desc &it, int g, int u)
{
    if (u < s.r0)
        return it.cur_k + (head_index(a, g) * a.C + u) * a.dk;
    return a.qkvg + (size_t)(s.t0 + u - s.r0) * a.W + a.k_off + (size_t)g * a.dk;
}

__device__ __forceinline__ const float *vrow(const mix_args &a, const seg_desc &s,
                                             const item_desc &it, int g, int u)
{
    if (u < s.r0)
        return it.cur_v + (head_index(a, g) * a.C + u) * a.dv;
    return a.qkvg + (size_t)(s.t0 + u - s.r0) * a.W + a.v_off + (size_t)g * a.dv;
}

/* Blocks that close in this step: S_b = K_bᵀV_b (and the key sums) into the
 * block's page. grid (segment, kv head, element tiles). */
__global__ void close_kernel(mix_args a)
{
    const seg_desc s = a.segs[blockIdx.x];
    if (s.r0 + s.n != a.C)
        return;
    int g = blockIdx.y;
    const item_desc it = a.items[s.item];
    void *page = a.pages[it.page0 + s.block];
    size_t per = (size_t)a.dk * a.dv, step = (size_t)gridDim.z * blockDim.x;
    const float *from_product = s.full >= 0 ? a.sscr + ((size_t)s.full * a.Hkv + g) * per : nullptr;
    for (size_t e = (size_t)blockIdx.z * blockDim.x + threadIdx.x; e < per; e += step) {
        float acc = 0.0f;
        if (from_product) {
            acc = from_product[e];
        } else {
            int ai = (int)(e / a.dv), c = (int)(e % a.dv);
            for (int u = 0; u < a.C; u++)
                acc = fmaf(krow(a, s, it, g, u)[ai], vrow(a, s, it, g, u)[c], acc);
        }
        page_put(page, head_index(a, g) * per + e, acc, a.state_bf16);
    }
    if (a.normalize && blockIdx.z == 0) {
        size_t koff = (size_t)a.L * a.Hkv * per + head_index(a, g) * a.dk;
        for (int ai = threadIdx.x; ai < a.dk; ai += blockDim.x) {
            float sum = 0.0f;
            for (int u = 0; u < a.C; u++)
                sum += krow(a, s, it, g, u)[ai];
            page_put(page, koff + ai, sum, a.state_bf16);
        }
    }
}

/* Blocks that start in this step: P_i = Σ_{b<i} m[i][b] S_b, summed in block
 * order, into the step's scratch. */
__global__ void mix_prefix_kernel(mix_args a)
{
    const seg_desc s = a.segs[blockIdx.x];
    if (s.r0 != 0)
        return;
    int g = blockIdx.y, i = s.block;
    const item_desc it = a.items[s.item];
    size_t per = (size_t)a.dk * a.dv, step = (size_t)gridDim.z * blockDim.x;
    size_t slot = (size_t)blockIdx.x * a.Hkv + g;
    size_t end = per + (a.normalize ? (size_t)a.dk : 0);
    const float *mrow = a.mix + (size_t)i * a.Lm;
    for (size_t e = (size_t)blockIdx.z * blockDim.x + threadIdx.x; e < end; e += step) {
        size_t off = e < per ? head_index(a, g) * per + e
                             : (size_t)a.L * a.Hkv * per + head_index(a, g) * a.dk + (e - per);
        float acc = 0.0f;
        for (int b = 0; b < i; b++)
            acc = fmaf(mrow[b], page_get(a.pages[it.page0 + b], off, a.state_bf16), acc);
        if (e < per)
            a.pscr[slot * per + e] = acc;
        else
            a.pkscr[slot * a.dk + (e - per)] = acc;
    }
}

/* Outputs of the segment's tokens for every query head of kv head g, MIX_TT
 * tokens at a time; one thread per output column. grid (segment, kv head,
 * column tiles of blockDim.x). */
/* The scores q~·k~_u of a tile's nt tokens (queries in qs) for u up to each
 * token's own row, into sc: a warp per pair. */
__device__ __forceinline__ void mix_tile_scores(const mix_args &a, const seg_desc &s,
                                                const item_desc &it, int g, int tt0, int nt,
                                                const float *qs, float *sc)
{
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32, dk = a.dk;
    for (int p = warp; p < nt * a.C; p += nw) {
        int tt = p / a.C, u = p % a.C;
        if (u > s.r0 + tt0 + tt)
            continue;
        const float *kr = krow(a, s, it, g, u);
        float d = 0.0f;
        for (int ai = lane; ai < dk; ai += 32)
            d = fmaf(qs[tt * dk + ai], kr[ai], d);
        d = warp_sum(d);
        if (lane == 0)
            sc[tt * a.C + u] = d;
    }
}

/* Column c of query head j's outputs for a tile's nt tokens:
 * o = q~ᵀP_i + m[i][i] Σ_{u≤r} (q~·k~_u) v_u, normalised with PK. */
__device__ __forceinline__ void mix_tile_outputs(const mix_args &a, const seg_desc &s,
                                                 const item_desc &it, int g, int j, int c, int tt0,
                                                 int nt, const float *qs, const float *sc,
                                                 const float *P, const float *PK)
{
    int i = s.block, dk = a.dk, dv = a.dv;
    float m_ii = a.mix[(size_t)i * a.Lm + i];
    float acc[MIX_TT];
    for (int tt = 0; tt < MIX_TT; tt++)
        acc[tt] = 0.0f;
    if (i > 0)
        for (int ai = 0; ai < dk; ai++) {
            float pv = P[(size_t)ai * dv + c];
            for (int tt = 0; tt < MIX_TT; tt++)
                acc[tt] = fmaf(qs[tt * dk + ai], pv, acc[tt]);
        }
    for (int tt = 0; tt < nt; tt++) {
        int r = s.r0 + tt0 + tt;
        float *dst = a.att + (size_t)(s.t0 + tt0 + tt) * a.H * dv + (size_t)j * dv + c;
        float intra = 0.0f;
        for (int u = 0; u <= r; u++)
            intra = fmaf(sc[tt * a.C + u], vrow(a, s, it, g, u)[c], intra);
        float o = fmaf(m_ii, intra, acc[tt]);
        if (PK) {
            float z = 0.0f, zs = 0.0f;
            if (i > 0)
                for (int ai = 0; ai < dk; ai++)
                    z = fmaf(qs[tt * dk + ai], PK[ai], z);
            for (int u = 0; u <= r; u++)
                zs += sc[tt * a.C + u];
            float den = z + m_ii * zs;
            /* 0/0 (relu features sharing no positive component)
             * gives 0, as on the CPU */
            o = den == 0.0f ? 0.0f : o / den;
        }
        *dst = o;
    }
}

__global__ void mix_output_kernel(mix_args a)
{
    MHLA_DYNAMIC_SMEM(float, smem);
    const seg_desc s = a.segs[blockIdx.x];
    if (s.full >= 0) /* a whole block: its outputs came from the products */
        return;
    const item_desc it = a.items[s.item];
    int g = blockIdx.y, dk = a.dk, dv = a.dv;
    int c = blockIdx.z * blockDim.x + threadIdx.x;
    size_t per = (size_t)dk * dv, slot = (size_t)blockIdx.x * a.Hkv + g;
    const float *P = s.r0 == 0 ? a.pscr + slot * per : it.prefix + head_index(a, g) * per;
    const float *PK = !a.normalize ? nullptr
                      : s.r0 == 0  ? a.pkscr + slot * dk
                                   : it.prefix_k + head_index(a, g) * dk;
    float *qs = smem;                       /* [MIX_TT][dk] */
    float *sc = smem + (size_t)MIX_TT * dk; /* [MIX_TT][C] */
    int group = a.H / a.Hkv;
    for (int jj = 0; jj < group; jj++) {
        int j = g * group + jj;
        for (int tt0 = 0; tt0 < s.n; tt0 += MIX_TT) {
            int nt = s.n - tt0 < MIX_TT ? s.n - tt0 : MIX_TT;
            for (int idx = threadIdx.x; idx < MIX_TT * dk; idx += blockDim.x) {
                int tt = idx / dk, ai = idx % dk;
                qs[idx] =
                    tt < nt
                        ? a.qkvg[(size_t)(s.t0 + tt0 + tt) * a.W + a.q_off + (size_t)j * dk + ai]
                        : 0.0f;
            }
            __syncthreads();
            mix_tile_scores(a, s, it, g, tt0, nt, qs, sc);
            __syncthreads();
            if (c < dv)
                mix_tile_outputs(a, s, it, g, j, c, tt0, nt, qs, sc, P, PK);
            __syncthreads(); /* qs and sc are rewritten by the next tile */
        }
    }
}

/* The block still open after the step keeps this step's rows (and, when it
 * started in the step, its P) in the sequence's buffers; so does a block
 * closed by an item of at most a block's tokens (keep_closing: drafts taken
 * back may reopen it; its rows land where the next block's, fewer than its
 * start offset, do not). */
__global__ void keep_rows_kernel(mix_args a)
{
    const seg_desc s = a.segs[blockIdx.x];
    if (!s.final_open && !s.keep_closing)
        return;
    int g = blockIdx.y;
    const item_desc it = a.items[s.item];
    size_t per = (size_t)a.dk * a.dv, step = (size_t)gridDim.z * blockDim.x;
    size_t h = head_index(a, g), slot = (size_t)blockIdx.x * a.Hkv + g;
    size_t nk = (size_t)s.n * a.dk, nv = (size_t)s.n * a.dv;
    size_t end = nk > nv ? nk : nv;
    if (s.r0 == 0 && per > end)
        end = per;
    for (size_t e = (size_t)blockIdx.z * blockDim.x + threadIdx.x; e < end; e += step) {
        if (e < nk) {
            int uu = (int)(e / a.dk), ai = (int)(e % a.dk);
            it.cur_k[(h * a.C + s.r0 + uu) * a.dk + ai] =
                a.qkvg[(size_t)(s.t0 + uu) * a.W + a.k_off + (size_t)g * a.dk + ai];
        }
        if (e < nv) {
            int uu = (int)(e / a.dv), c = (int)(e % a.dv);
            it.cur_v[(h * a.C + s.r0 + uu) * a.dv + c] =
                a.qkvg[(size_t)(s.t0 + uu) * a.W + a.v_off + (size_t)g * a.dv + c];
        }
        if (s.r0 == 0) {
            if (e < per)
                it.prefix[h * per + e] = a.pscr[slot * per + e];
            if (a.normalize && e < (size_t)a.dk)
                it.prefix_k[h * a.dk + e] = a.pkscr[slot * a.dk + e];
        }
    }
}

static unsigned tiles(size_t n, unsigned block) { return (unsigned)((n + block - 1) / block); }

/* Blocks per (segment, head) of the element-wise mixer kernels: most
 * segments of a decode step neither close nor start a block and leave at
 * once, so the grid stays small and the few that work loop. */
constexpr unsigned MIX_SPLIT = 8;

/* Close before mixing: a block that closes in this step feeds the P of the
 * next one. */
void k_mixer_close_and_mix(const mix_args &a, cudaStream_t st)
{
    unsigned ns = (unsigned)a.n_seg, hk = (unsigned)a.Hkv;
    MHLA_LAUNCH(close_kernel, dim3(ns, hk, MIX_SPLIT), 256, 0, st)(a);
    MHLA_LAUNCH(mix_prefix_kernel, dim3(ns, hk, MIX_SPLIT), 256, 0, st)(a);
}

/* Outputs read the rows before keep_rows overwrites them. */
void k_mixer_outputs(const mix_args &a, cudaStream_t st)
{
    unsigned ns = (unsigned)a.n_seg, hk = (unsigned)a.Hkv;
    MHLA_LAUNCH(mix_output_kernel, dim3(ns, hk, tiles(a.dv, 128)), 128, mixer_smem_bytes(a.dk, a.C),
                st)
    (a);
    MHLA_LAUNCH(keep_rows_kernel, dim3(ns, hk, MIX_SPLIT), 256, 0, st)(a);
}

/* grid (full block * H + query head), one thread per score */
__global__ void mask_scores_kernel(float *scores, const int32_t *blocks, const float *mix, int Lm,
                                   int H, int C)
{
    int f = blockIdx.x / H, i = blocks[f];
    float m_ii = mix[(size_t)i * Lm + i];
    float *sc = scores + (size_t)blockIdx.x * C * C;
    for (int e = threadIdx.x; e < C * C; e += blockDim.x) {
        int t = e / C, u = e % C;
        sc[e] = u <= t ? m_ii * sc[e] : 0.0f;
    }
}

void k_mask_scores(float *scores, const int32_t *blocks, const float *mix, int Lm, int n_full,
                   int H, int C, cudaStream_t st)
{
    if (n_full <= 0)
        return;
    MHLA_LAUNCH(mask_scores_kernel, (unsigned)(n_full * H), 256, 0, st)
    (scores, blocks, mix, Lm, H, C);
}

/* grid (layer * Hkv + head, element tiles) */
__global__ void restore_prefix_kernel(void *const *pages, int block, const float *mix_all,
                                      float *prefix, float *prefix_k, int L, int Hkv, int dk,
                                      int dv, int Lm, int normalize, int state_bf16)
{
    size_t h = blockIdx.x, per = (size_t)dk * dv;
    size_t e = (size_t)blockIdx.y * blockDim.x + threadIdx.x;
    int layer = (int)(h / Hkv);
    const float *mrow = mix_all + (size_t)layer * Lm * Lm + (size_t)block * Lm;
    if (e < per) {
        float acc = 0.0f;
        for (int b = 0; b < block; b++)
            acc = fmaf(mrow[b], page_get(pages[b], h * per + e, state_bf16), acc);
        prefix[h * per + e] = acc;
    } else if (normalize && e < per + dk) {
        size_t ai = e - per, off = (size_t)L * Hkv * per + h * dk + ai;
        float acc = 0.0f;
        for (int b = 0; b < block; b++)
            acc = fmaf(mrow[b], page_get(pages[b], off, state_bf16), acc);
        prefix_k[h * dk + ai] = acc;
    }
}

void k_restore_prefix(void *const *pages, int block, const float *mix_all, float *prefix,
                      float *prefix_k, int L, int Hkv, int dk, int dv, int Lm, int normalize,
                      int state_bf16, cudaStream_t st)
{
    size_t per = (size_t)dk * dv;
    MHLA_LAUNCH(restore_prefix_kernel, dim3((unsigned)(L * Hkv), tiles(per + dk, 256)), 256, 0, st)
    (pages, block, mix_all, prefix, prefix_k, L, Hkv, dk, dv, Lm, normalize, state_bf16);
}

} // namespace eng_gpu
