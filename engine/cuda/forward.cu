/*
 * forward.cu — one engine step on the GPU, top to bottom like the CPU's
 * forward.c: embedding, then per layer RMSNorm → one fused q|k|v|gate
 * product → feature map and rotary → token mixer → gated norm → output
 * product → RMSNorm → fused gate|up product → SwiGLU → down product, then
 * the final norm and the LM head for the rows that want logits.
 *
 * The host describes the step in one small buffer (tokens, positions, the
 * (sequence, block) segments, page tables) copied up in one transfer. A step
 * of n sequences decoding one token each has the same shape every time, so
 * it is captured once as a CUDA graph and replayed: only the descriptor
 * buffer's contents change between replays.
 */
#include "state.h"

#include <cstdlib>
#include <cstring>

using namespace eng_gpu;

static size_t align256(size_t v) { return (v + 255) & ~(size_t)255; }

static int grow_to(int need, int have, int floor)
{
    if (need <= have)
        return have;
    int n = have > 0 ? have * 2 : floor;
    return n < need ? need : n;
}

static int alloc_dev(eng_cuda *g, void *p, size_t bytes, char *err)
{
    void **pp = static_cast<void **>(p);
    CU(cudaMalloc(pp, bytes ? bytes : 16), "out of GPU memory for step buffers");
    g->buf_bytes += bytes;
    return 0;
}

/* Buffers for a step of T rows, R logit rows, n_seg segments, n_items
 * sequences and n_pages page pointers. Growing moves them, which drops the
 * captured graphs. */
/* What a step needs room for. */
struct step_need {
    int T, R, n_seg, n_items, n_pages, n_samp, n_pen, n_bias, n_mask;
};

/* 64-bit words of one row's token mask. */
static size_t mask_words(const eng_cuda *g) { return ((size_t)g->cfg.vocab_size + 63) / 64; }

/* The capacities a step that needs nd grows the buffers to. */
static step_need grown_caps(const eng_cuda *g, const step_need &nd)
{
    const step_bufs *sb = &g->sb;
    step_need cap;
    cap.T = grow_to(nd.T, g->cap_T, 64);
    cap.R = grow_to(nd.R, g->cap_R, 64);
    cap.n_seg = grow_to(nd.n_seg, g->cap_seg, 64);
    cap.n_items = grow_to(nd.n_items, sb->cap_items, 64);
    cap.n_pages = grow_to(nd.n_pages, sb->cap_pages, 64);
    if (cap.n_pages < cap.n_items * g->cfg.num_blocks) /* decode steps then never grow it */
        cap.n_pages = cap.n_items * g->cfg.num_blocks;
    cap.n_samp = grow_to(nd.n_samp, sb->cap_samp, 64);
    cap.n_pen = grow_to(nd.n_pen, sb->cap_pen, 4096);
    cap.n_bias = grow_to(nd.n_bias, sb->cap_bias, 256);
    /* none until a masked row comes: unconstrained steps upload no mask room */
    cap.n_mask = grow_to(nd.n_mask, sb->cap_mask, 8);
    return cap;
}

/* The activations, logits, mixer scratch and sampling buffers on the device. */
static int alloc_activations(eng_cuda *g, const step_need &cap, char *err)
{
    const mhla_config *c = &g->cfg;
    size_t cT = cap.T, cR = cap.R, cS = cap.n_seg, cSm = cap.n_samp;
    size_t D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    size_t od = (size_t)c->num_heads * c->head_v_dim, hw = D;
    if (od > hw)
        hw = od;
    if (I > hw)
        hw = I;
    size_t per = (size_t)c->head_k_dim * c->head_v_dim, Hkv = c->num_kv_heads;
    if (alloc_dev(g, &g->x, cT * D * 4, err) || alloc_dev(g, &g->y, cT * D * 4, err) ||
        alloc_dev(g, &g->qkvg, (size_t)cT * g->W * 4, err) ||
        alloc_dev(g, &g->att, cT * od * 4, err) || alloc_dev(g, &g->gu, cT * 2 * I * 4, err) ||
        alloc_dev(g, &g->h, cT * hw * g->dt_bytes, err) ||
        alloc_dev(g, &g->hl, cR * D * g->dt_bytes, err) ||
        alloc_dev(g, &g->logits, cR * V * 4, err) ||
        alloc_dev(g, &g->pscr, cS * Hkv * per * 4, err) ||
        alloc_dev(g, &g->pkscr, cS * Hkv * c->head_k_dim * 4, err) ||
        alloc_dev(g, &g->sample_adj, cSm * V * 4, err) ||
        alloc_dev(g, &g->sample_out, cSm * sizeof(sample_result), err))
        return -1;
    return 0;
}

/* The descriptor buffer's capacities and layout (its host and device copies
 * hold the same bytes). */
static void lay_out_descriptors(step_bufs *sb, const step_need &cap, size_t words)
{
    size_t cT = cap.T, cR = cap.R, cS = cap.n_seg;
    sb->cap_T = cap.T;
    sb->cap_R = cap.R;
    sb->cap_seg = cap.n_seg;
    sb->cap_items = cap.n_items;
    sb->cap_pages = cap.n_pages;
    sb->cap_samp = cap.n_samp;
    sb->cap_pen = cap.n_pen;
    sb->cap_bias = cap.n_bias;
    sb->cap_mask = cap.n_mask;
    sb->off_tokens = 0;
    sb->off_rowpos = align256(sb->off_tokens + cT * 4);
    sb->off_segs = align256(sb->off_rowpos + cT * 4);
    sb->off_items = align256(sb->off_segs + cS * sizeof(seg_desc));
    sb->off_pages = align256(sb->off_items + (size_t)cap.n_items * sizeof(item_desc));
    sb->off_lrows = align256(sb->off_pages + (size_t)cap.n_pages * sizeof(void *));
    sb->off_samp = align256(sb->off_lrows + cR * 4);
    sb->off_pen = align256(sb->off_samp + (size_t)cap.n_samp * sizeof(sample_desc));
    sb->off_bias = align256(sb->off_pen + (size_t)cap.n_pen * sizeof(sample_pen));
    sb->off_mask = align256(sb->off_bias + (size_t)cap.n_bias * sizeof(sample_bias));
    sb->off_fblocks = align256(sb->off_mask + (size_t)cap.n_mask * words * 8);
    sb->bytes = align256(sb->off_fblocks + cS * sizeof(int32_t));
}

/* The host side: pinned descriptors, logits and sampled tokens, and the
 * runs of whole blocks. */
static int alloc_host_side(eng_cuda *g, const step_need &cap, char *err)
{
    step_bufs *sb = &g->sb;
    size_t cR = cap.R, cS = cap.n_seg, V = g->cfg.vocab_size;
    if (cudaMallocHost(reinterpret_cast<void **>(&sb->host), sb->bytes) != cudaSuccess ||
        cudaMallocHost(reinterpret_cast<void **>(&g->logits_host), cR * V * 4) != cudaSuccess ||
        cudaMallocHost(reinterpret_cast<void **>(&g->sample_out_host),
                       (size_t)cap.n_samp * sizeof(sample_result)) != cudaSuccess)
        return fail(err, "CUDA: out of pinned host memory for step buffers");
    g->run_f0 = static_cast<int *>(malloc(cS * sizeof(int)));
    g->run_n = static_cast<int *>(malloc(cS * sizeof(int)));
    g->run_t0 = static_cast<int *>(malloc(cS * sizeof(int)));
    g->run_s0 = static_cast<int *>(malloc(cS * sizeof(int)));
    if (!g->run_f0 || !g->run_n || !g->run_t0 || !g->run_s0)
        return fail(err, "out of memory");
    return 0;
}

static int ensure_buffers(eng_cuda *g, const step_need &nd, char *err)
{
    step_bufs *sb = &g->sb;
    if (nd.T <= g->cap_T && nd.R <= g->cap_R && nd.n_seg <= g->cap_seg &&
        nd.n_items <= sb->cap_items && nd.n_pages <= sb->cap_pages && nd.n_samp <= sb->cap_samp &&
        nd.n_pen <= sb->cap_pen && nd.n_bias <= sb->cap_bias && nd.n_mask <= sb->cap_mask)
        return 0;
    step_need cap = grown_caps(g, nd);
    CU(cudaStreamSynchronize(g->stream), "finishing earlier work");
    free_buffers(g);
    if (alloc_activations(g, cap, err))
        goto fail;
    lay_out_descriptors(sb, cap, mask_words(g));
    if (alloc_dev(g, &sb->dev, sb->bytes, err) || alloc_host_side(g, cap, err))
        goto fail;
    g->cap_T = cap.T;
    g->cap_R = cap.R;
    g->cap_seg = cap.n_seg;
    return 0;
fail:
    free_buffers(g);
    return -1;
}

void eng_gpu::drop_graphs(eng_cuda *g)
{
    for (int i = 0; i < g->n_graphs; i++)
        cudaGraphExecDestroy(g->graphs[i].exec);
    g->n_graphs = 0;
}

/* y[T, ldy] = x[T, K] · w[N, K]ᵀ — column-major for cuBLAS: yᵀ = w · xᵀ. */
static int gemm(eng_cuda *g, const void *x, int T, int K, const void *w, int N, float *y, int ldy,
                char *err)
{
    const float one = 1.0f, zero = 0.0f;
    cudaDataType t = g->dt == DT_F32 ? CUDA_R_32F : g->dt == DT_F16 ? CUDA_R_16F : CUDA_R_16BF;
    cublasStatus_t rc =
        cublasGemmEx(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, T, K, &one, w, t, K, x, t, K, &zero, y,
                     CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (rc != CUBLAS_STATUS_SUCCESS)
        return fail(err, "cuBLAS: the %d x %d x %d product failed: %s", T, N, K,
                    cublasGetStatusString(rc));
    return 0;
}

/* Scratch for n_full whole blocks (grown apart from the other buffers:
 * decode steps never have any, unless blocks are one token long). */
static int ensure_full(eng_cuda *g, int n_full, char *err)
{
    if (n_full <= g->cap_full)
        return 0;
    const mhla_config *c = &g->cfg;
    int cap = grow_to(n_full, g->cap_full, 8);
    CU(cudaStreamSynchronize(g->stream), "finishing earlier work");
    drop_graphs(g);
    if (g->sscr)
        cudaFree(g->sscr);
    if (g->scores)
        cudaFree(g->scores);
    g->sscr = g->scores = nullptr;
    g->cap_full = 0;
    size_t per = (size_t)c->head_k_dim * c->head_v_dim, C = c->chunk_size;
    if (alloc_dev(g, &g->sscr, (size_t)cap * c->num_kv_heads * per * 4, err) ||
        alloc_dev(g, &g->scores, (size_t)cap * c->num_heads * C * C * 4, err))
        return -1;
    g->cap_full = cap;
    return 0;
}

/* Batched C = op(A) op(B) over f32 operands: on tensor cores (TF32) when the
 * weights are bf16/f16, in plain f32 when they are f32. */
static int strided(eng_cuda *g, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                   const float *A, int lda, long long sa, const float *B, int ldb, long long sb,
                   float *C, int ldc, long long sc, int batch, char *err, float beta = 0.0f)
{
    const float one = 1.0f; /* beta 0: C is written; 1: added to */
    cublasComputeType_t ct = g->dt == DT_F32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
    cublasStatus_t rc =
        cublasGemmStridedBatchedEx(g->blas, ta, tb, m, n, k, &one, A, CUDA_R_32F, lda, sa, B,
                                   CUDA_R_32F, ldb, sb, &beta, C, CUDA_R_32F, ldc, sc, batch, ct,
                                   CUBLAS_GEMM_DEFAULT);
    if (rc != CUBLAS_STATUS_SUCCESS)
        return fail(err, "cuBLAS: a batched %d x %d x %d product failed: %s", m, n, k,
                    cublasGetStatusString(rc));
    return 0;
}

/* The chunkwise-parallel part of prefill, for every run of whole blocks of
 * one sequence in this step: S_b = K_bᵀV_b, the scores Q_b K_bᵀ, masked and
 * scaled by m[i][i], and their product with V_b into the outputs — each a
 * batched product over the run's blocks. close_kernel then writes S_b into
 * the pages and mix_prefix_kernel mixes P_i; mixer_inter adds q~ᵀP_i. */
static int mixer_products(eng_cuda *g, const int32_t *fblocks, const float *mix, char *err)
{
    const mhla_config *c = &g->cfg;
    int C = c->chunk_size, dk = c->head_k_dim, dv = c->head_v_dim, H = c->num_heads;
    int Hkv = c->num_kv_heads, W = g->W, od = H * dv, group = H / Hkv;
    long long per = (long long)dk * dv, rows = (long long)C * W, cc = (long long)C * C;
    for (int r = 0; r < g->n_runs; r++) {
        const float *base = g->qkvg + (size_t)g->run_t0[r] * W;
        int f0 = g->run_f0[r], n = g->run_n[r];
        for (int h = 0; h < Hkv; h++)
            if (strided(g, CUBLAS_OP_N, CUBLAS_OP_T, dv, dk, C, base + g->v_off + h * dv, W, rows,
                        base + g->k_off + h * dk, W, rows, g->sscr + ((size_t)f0 * Hkv + h) * per,
                        dv, Hkv * per, n, err))
                return -1;
        for (int j = 0; j < H; j++) {
            int h = j / group;
            if (strided(g, CUBLAS_OP_T, CUBLAS_OP_N, C, C, dk, base + g->k_off + h * dk, W, rows,
                        base + g->q_off + j * dk, W, rows, g->scores + ((size_t)f0 * H + j) * cc, C,
                        H * cc, n, err))
                return -1;
        }
    }
    k_mask_scores(g->scores, fblocks, mix, c->num_blocks, g->n_full, H, C, g->stream);
    for (int r = 0; r < g->n_runs; r++) {
        const float *base = g->qkvg + (size_t)g->run_t0[r] * W;
        int f0 = g->run_f0[r], n = g->run_n[r];
        for (int j = 0; j < H; j++) {
            int h = j / group;
            if (strided(g, CUBLAS_OP_N, CUBLAS_OP_N, dv, C, C, base + g->v_off + h * dv, W, rows,
                        g->scores + ((size_t)f0 * H + j) * cc, C, H * cc,
                        g->att + (size_t)g->run_t0[r] * od + j * dv, od, (long long)C * od, n, err))
                return -1;
        }
    }
    return 0;
}

/* Whole blocks: att += Q_b P_i (P_i of each block, mixed in this step). */
static int mixer_inter(eng_cuda *g, char *err)
{
    const mhla_config *c = &g->cfg;
    int C = c->chunk_size, dk = c->head_k_dim, dv = c->head_v_dim, H = c->num_heads;
    int Hkv = c->num_kv_heads, W = g->W, od = H * dv, group = H / Hkv;
    long long per = (long long)dk * dv;
    for (int r = 0; r < g->n_runs; r++) {
        const float *base = g->qkvg + (size_t)g->run_t0[r] * W;
        for (int j = 0; j < H; j++) {
            int h = j / group;
            if (strided(g, CUBLAS_OP_N, CUBLAS_OP_N, dv, C, dk,
                        g->pscr + ((size_t)g->run_s0[r] * Hkv + h) * per, dv, Hkv * per,
                        base + g->q_off + j * dk, W, (long long)C * W,
                        g->att + (size_t)g->run_t0[r] * od + j * dv, od, (long long)C * od,
                        g->run_n[r], err, 1.0f))
                return -1;
        }
    }
    return 0;
}

/* What the mixer kernels read of a step whose descriptors are on the device
 * (the layer and its mixing matrix are set per layer). */
static mix_args mix_args_of(const eng_cuda *g, int n_seg)
{
    const mhla_config *c = &g->cfg;
    const unsigned char *d = g->sb.dev;
    mix_args a;
    a.dk = c->head_k_dim;
    a.dv = c->head_v_dim;
    a.C = c->chunk_size;
    a.Lm = c->num_blocks;
    a.H = c->num_heads;
    a.Hkv = c->num_kv_heads;
    a.L = c->num_layers;
    a.normalize = c->normalize;
    a.state_bf16 = g->state_bf16;
    a.W = g->W;
    a.q_off = g->q_off;
    a.k_off = g->k_off;
    a.v_off = g->v_off;
    a.qkvg = g->qkvg;
    a.att = g->att;
    a.segs = reinterpret_cast<const seg_desc *>(d + g->sb.off_segs);
    a.n_seg = n_seg;
    a.items = reinterpret_cast<const item_desc *>(d + g->sb.off_items);
    a.pages = reinterpret_cast<void *const *>(d + g->sb.off_pages);
    a.pscr = g->pscr;
    a.pkscr = g->pkscr;
    a.sscr = g->sscr;
    return a;
}

/* Enqueues layer l of a step of T rows. */
static int run_layer(eng_cuda *g, int l, int T, mix_args &a, char *err)
{
    const mhla_config *c = &g->cfg;
    cudaStream_t st = g->stream;
    int D = c->hidden_size, I = c->intermediate_size, H = c->num_heads;
    int Hkv = c->num_kv_heads, dk = c->head_k_dim, dv = c->head_v_dim, od = H * dv;
    float eps = c->norm_eps;
    const unsigned char *d = g->sb.dev;
    const int32_t *rowpos = reinterpret_cast<const int32_t *>(d + g->sb.off_rowpos);
    const int32_t *fblocks = reinterpret_cast<const int32_t *>(d + g->sb.off_fblocks);
    const dev_layer *ly = &g->layers[l];
    k_add_norm(g->x, l == 0 ? nullptr : g->y, ly->attn_norm, g->h, g->dt, T, D, eps, st);
    if (gemm(g, g->h, T, D, ly->w_qkvg, g->W, g->qkvg, g->W, err))
        return -1;
    k_qk_prepare(g->qkvg, g->W, g->q_off, g->k_off, rowpos, g->rope_cos, g->rope_sin, T, H, Hkv, dk,
                 c->feature_map, g->q_scale, st);
    a.layer = l;
    a.mix = ly->mix;
    if (g->n_full > 0 && mixer_products(g, fblocks, ly->mix, err))
        return -1;
    k_mixer_close_and_mix(a, st);
    if (g->n_full > 0 && mixer_inter(g, err))
        return -1;
    k_mixer_outputs(a, st);
    k_out_norm(g->att, g->qkvg, g->W, g->g_off, ly->g_norm, g->h, g->dt, T, H, dv, eps, st);
    if (gemm(g, g->h, T, od, ly->wo, D, g->y, D, err))
        return -1;
    k_add_norm(g->x, g->y, ly->mlp_norm, g->h, g->dt, T, D, eps, st);
    if (gemm(g, g->h, T, D, ly->w_gu, 2 * I, g->gu, 2 * I, err))
        return -1;
    k_swiglu(g->gu, g->h, g->dt, T, I, st);
    if (gemm(g, g->h, T, I, ly->w_down, D, g->y, D, err))
        return -1;
    return 0;
}

/* Enqueues a whole step whose descriptors are already on the device. */
static int run_step(eng_cuda *g, int T, int R, int n_seg, int n_samp, char *err)
{
    const mhla_config *c = &g->cfg;
    cudaStream_t st = g->stream;
    int D = c->hidden_size, V = c->vocab_size;
    unsigned char *d = g->sb.dev;
    const int32_t *tokens = reinterpret_cast<const int32_t *>(d + g->sb.off_tokens);
    const int32_t *lrows = reinterpret_cast<const int32_t *>(d + g->sb.off_lrows);
    mix_args a = mix_args_of(g, n_seg);

    k_embed(g->x, g->emb, g->dt, tokens, T, D, st);
    for (int l = 0; l < c->num_layers; l++)
        if (run_layer(g, l, T, a, err))
            return -1;
    if (R > 0) {
        k_final_norm(g->x, g->y, lrows, g->final_norm, g->hl, g->dt, R, D, c->norm_eps, st);
        if (gemm(g, g->hl, R, D, g->lm_head, V, g->logits, V, err))
            return -1;
    }
    k_sample(g->logits, V, g->sample_adj, reinterpret_cast<const sample_desc *>(d + g->sb.off_samp),
             n_samp, reinterpret_cast<const sample_pen *>(d + g->sb.off_pen),
             reinterpret_cast<const sample_bias *>(d + g->sb.off_bias),
             reinterpret_cast<const unsigned long long *>(d + g->sb.off_mask), g->sample_out, st);
    CU(cudaGetLastError(), "launching the step's kernels");
    return 0;
}

/* A decode step of n sequences (sampled on the device or not: n_samp is 0 or
 * n): replay its graph, capturing it first. */
static int run_decode_graph(eng_cuda *g, int n, int n_samp, char *err)
{
    graph_entry *e = nullptr;
    int key = n_samp ? -n : n;
    for (int i = 0; i < g->n_graphs; i++)
        if (g->graphs[i].n == key)
            e = &g->graphs[i];
    if (!e) {
        cudaGraph_t graph = nullptr;
        CU(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal),
           "starting a graph capture");
        int rc = run_step(g, n, n, n, n_samp, err);
        cudaError_t ec = cudaStreamEndCapture(g->stream, &graph);
        cudaGraphExec_t exec = nullptr;
        if (rc == 0 && ec == cudaSuccess)
            ec = cudaGraphInstantiate(&exec, graph, 0);
        if (graph)
            cudaGraphDestroy(graph);
        if (rc || ec != cudaSuccess) {
            /* Capture is an optimisation: run this step, and later ones,
             * without graphs. */
            cudaGetLastError();
            g->no_graphs = 1;
            return run_step(g, n, n, n, n_samp, err);
        }
        if (g->n_graphs == MAX_GRAPHS) { /* replace the least recently used */
            int lru = 0;
            for (int i = 1; i < g->n_graphs; i++)
                if (g->graphs[i].last_used < g->graphs[lru].last_used)
                    lru = i;
            cudaGraphExecDestroy(g->graphs[lru].exec);
            e = &g->graphs[lru];
        } else {
            e = &g->graphs[g->n_graphs++];
        }
        e->n = key;
        e->exec = exec;
        g->captures++;
    }
    e->last_used = ++g->clock;
    CU(cudaGraphLaunch(e->exec, g->stream), "replaying a decode step");
    g->replays++;
    return 0;
}

/* Rows of logits the host gets back for item it (the rest stay on the GPU). */
static int host_rows(const eng_cuda_item *it)
{
    return it->logits ? it->n_tokens - it->logits_from : 0;
}

/* Whether item it needs its last position's logits only for sampling. */
static int sample_only_row(const eng_cuda_item *it) { return it->sample && host_rows(it) == 0; }

/* Where the sampled rows' descriptors go in the host mirror, and how many
 * of each are there so far. */
struct sample_fill {
    sample_desc *sd;
    sample_pen *pens;
    sample_bias *biases;
    unsigned long long *masks;
    size_t words; /* per mask */
    int nsm, npen, nb, nmask;
};

/* The descriptor of a sampled row, its penalties, logit biases and mask
 * appended to f's. */
static void fill_sample_desc(const eng_cuda_sample *q, int row, sample_fill *f)
{
    sample_desc *d = &f->sd[f->nsm++];
    sample_pen *pens = f->pens;
    sample_bias *biases = f->biases;
    int *npen = &f->npen, *nb = &f->nb;
    d->mask_row = -1;
    if (q->mask) {
        d->mask_row = f->nmask++;
        memcpy(f->masks + (size_t)d->mask_row * f->words, q->mask, f->words * 8);
    }
    d->row = row;
    d->top_k = q->top_k;
    d->n_top = q->n_top > 0 ? q->n_top : 0;
    d->temperature = q->temperature;
    d->top_p = q->top_p;
    d->min_p = q->min_p;
    d->repetition = q->repetition;
    d->presence = q->presence;
    d->frequency = q->frequency;
    d->u = q->u;
    d->pen0 = *npen;
    d->n_pen = q->n_pen;
    for (int j = 0; j < q->n_pen; j++)
        pens[(*npen)++] = sample_pen{q->pen_ids[j], q->pen_counts[j]};
    d->bias0 = *nb;
    d->n_bias = q->n_bias;
    for (int j = 0; j < q->n_bias; j++)
        biases[(*nb)++] = sample_bias{q->bias[j].id, q->bias[j].bias};
}

/* The (sequence, block) segments item b's tokens (from row t_first) fall
 * in, appended at segs[*ns]; whole blocks also get a slot in fblocks and
 * join the runs of whole blocks the batched products take. */
static void add_segments(eng_cuda *g, const eng_cuda_item *it, int b, int t_first, seg_desc *segs,
                         int *ns, int32_t *fblocks)
{
    const int C = g->cfg.chunk_size;
    int end = it->pos + it->n_tokens;
    for (int p = it->pos; p < end;) {
        int blk = p / C, r0 = p % C, n = C - r0;
        if (n > end - p)
            n = end - p;
        seg_desc *s = &segs[(*ns)++];
        s->item = b;
        s->block = blk;
        s->t0 = t_first + (p - it->pos);
        s->n = n;
        s->r0 = r0;
        s->final_open = p + n == end && r0 + n < C;
        s->keep_closing = r0 + n == C && it->n_tokens <= C;
        /* whole blocks go through the products (mhla_normalize's sums
         * stay with the mixer kernels) */
        s->full = r0 == 0 && n == C && !g->cfg.normalize ? g->n_full++ : -1;
        if (s->full >= 0) {
            fblocks[s->full] = blk;
            int run = g->n_runs - 1;
            if (run >= 0 && g->run_f0[run] + g->run_n[run] == s->full &&
                g->run_t0[run] + g->run_n[run] * C == s->t0) {
                g->run_n[run]++;
            } else {
                g->run_f0[g->n_runs] = s->full;
                g->run_s0[g->n_runs] = *ns - 1;
                g->run_n[g->n_runs] = 1;
                g->run_t0[g->n_runs++] = s->t0;
            }
        }
        p += n;
    }
}

/* Fills the host mirror of the step descriptors. Logit rows: first every row
 * the host gets back, in item order, then the rows only sampled. */
static void describe_step(eng_cuda *g, const eng_cuda_item *items, int n_items, int R_host)
{
    unsigned char *h = g->sb.host;
    int32_t *tokens = reinterpret_cast<int32_t *>(h + g->sb.off_tokens);
    int32_t *rowpos = reinterpret_cast<int32_t *>(h + g->sb.off_rowpos);
    int32_t *lrows = reinterpret_cast<int32_t *>(h + g->sb.off_lrows);
    seg_desc *segs = reinterpret_cast<seg_desc *>(h + g->sb.off_segs);
    item_desc *its = reinterpret_cast<item_desc *>(h + g->sb.off_items);
    void **pages = reinterpret_cast<void **>(h + g->sb.off_pages);
    sample_fill f = {reinterpret_cast<sample_desc *>(h + g->sb.off_samp),
                     reinterpret_cast<sample_pen *>(h + g->sb.off_pen),
                     reinterpret_cast<sample_bias *>(h + g->sb.off_bias),
                     reinterpret_cast<unsigned long long *>(h + g->sb.off_mask),
                     mask_words(g),
                     0,
                     0,
                     0,
                     0};
    int32_t *fblocks = reinterpret_cast<int32_t *>(h + g->sb.off_fblocks);
    int t = 0, r = 0, r_only = R_host, ns = 0, np = 0;
    g->n_full = g->n_runs = 0;
    for (int b = 0; b < n_items; b++) {
        const eng_cuda_item *it = &items[b];
        its[b].prefix = it->prefix;
        its[b].prefix_k = it->prefix_k;
        its[b].cur_k = it->cur_k;
        its[b].cur_v = it->cur_v;
        its[b].page0 = np;
        its[b].n_pages = it->n_pages;
        for (int p = 0; p < it->n_pages; p++)
            pages[np++] = it->pages[p];
        int t_first = t, last_row = -1;
        for (int k = 0; k < it->n_tokens; k++, t++) {
            tokens[t] = it->tokens[k];
            rowpos[t] = it->pos + k;
            if (it->logits && k >= it->logits_from) {
                last_row = r;
                lrows[r++] = t;
            }
        }
        if (sample_only_row(it)) {
            last_row = r_only;
            lrows[r_only++] = t - 1;
        }
        if (it->sample)
            fill_sample_desc(it->sample, last_row, &f);
        add_segments(g, it, b, t_first, segs, &ns, fblocks);
    }
}

/* What a step of these items needs room for (*nd), the logit rows the host
 * gets back, whether it can replay a decode graph, and its whole blocks. */
static void size_step(const eng_cuda *g, const eng_cuda_item *items, int n_items, step_need *nd,
                      int *R_host, int *decode, int *n_full)
{
    const mhla_config *c = &g->cfg;
    const int C = c->chunk_size;
    int sampled = 0;
    *nd = step_need{};
    *R_host = 0;
    *decode = 1;
    for (int b = 0; b < n_items; b++) {
        const eng_cuda_item *it = &items[b];
        nd->T += it->n_tokens;
        *R_host += host_rows(it);
        nd->R += host_rows(it) + sample_only_row(it);
        nd->n_seg += (it->pos + it->n_tokens - 1) / C - it->pos / C + 1;
        nd->n_pages += it->n_pages;
        if (it->sample) {
            nd->n_samp++;
            nd->n_pen += it->sample->n_pen;
            nd->n_bias += it->sample->n_bias;
            nd->n_mask += it->sample->mask != NULL;
        }
        /* graphs: one token each, all with host logits or all sampled only */
        int kind = it->sample && !it->logits ? 2 : (!it->sample && host_rows(it) == 1) ? 1 : 0;
        if (it->n_tokens != 1 || kind == 0 || (b > 0 && kind != sampled))
            *decode = 0;
        sampled = kind;
    }
    nd->n_items = n_items;
    *n_full = 0;
    for (int b = 0; b < n_items && !c->normalize; b++) {
        const eng_cuda_item *it = &items[b];
        int first = (it->pos + C - 1) / C, end = (it->pos + it->n_tokens) / C;
        *n_full += end > first ? end - first : 0;
    }
}

/* Enqueues the copies of the host's logit rows and the sampled tokens back. */
static int copy_back(eng_cuda *g, int R_host, int n_samp, char *err)
{
    size_t V = g->cfg.vocab_size;
    if (R_host > 0) {
        cudaError_t ec = cudaMemcpyAsync(g->logits_host, g->logits, (size_t)R_host * V * 4,
                                         cudaMemcpyDeviceToHost, g->stream);
        if (ec != cudaSuccess)
            return fail(err, "CUDA: copying logits: %s", cudaGetErrorString(ec));
    }
    if (n_samp > 0) {
        cudaError_t ec = cudaMemcpyAsync(g->sample_out_host, g->sample_out,
                                         (size_t)n_samp * sizeof(sample_result),
                                         cudaMemcpyDeviceToHost, g->stream);
        if (ec != cudaSuccess)
            return fail(err, "CUDA: copying sampled tokens: %s", cudaGetErrorString(ec));
    }
    return 0;
}

/* Each item's logit rows and sampled token, from the host copies. */
static void deliver_step(const eng_cuda *g, const eng_cuda_item *items, int n_items)
{
    size_t V = g->cfg.vocab_size;
    const float *src = g->logits_host;
    const sample_result *res = g->sample_out_host;
    for (int b = 0; b < n_items; b++) {
        const eng_cuda_item *it = &items[b];
        size_t n = (size_t)host_rows(it) * V;
        if (n)
            memcpy(it->logits, src, n * sizeof(float));
        src += n;
        if (!it->sample)
            continue;
        eng_cuda_sample *q = it->sample;
        q->status = res->status;
        q->nan_id = res->nan_id;
        q->token = res->token;
        q->token_logprob = res->token_lp;
        for (int j = 0; j < q->n_top; j++)
            q->top[j] = mhla_logprob{res->top_id[j], res->top_lp[j]};
        res++;
    }
}

extern "C" int eng_cuda_forward(eng_cuda *g, const eng_cuda_item *items, int n_items, char *err)
{
    if (g->failed)
        return fail(err, "CUDA backend unusable after an earlier device error; restart");
    step_need nd;
    int R_host, decode, n_full;
    size_step(g, items, n_items, &nd, &R_host, &decode, &n_full);
    if (nd.T == 0)
        return 0;
    if (ensure_buffers(g, nd, err) || ensure_full(g, n_full, err))
        return -1;
    describe_step(g, items, n_items, R_host);
    CU(cudaMemcpyAsync(g->sb.dev, g->sb.host, g->sb.bytes, cudaMemcpyHostToDevice, g->stream),
       "copying the step's descriptors");
    int rc = decode && !g->no_graphs ? run_decode_graph(g, n_items, nd.n_samp, err)
                                     : run_step(g, nd.T, nd.R, nd.n_seg, nd.n_samp, err);
    if (rc == 0)
        rc = copy_back(g, R_host, nd.n_samp, err);
    cudaError_t ec = cudaStreamSynchronize(g->stream);
    if (ec != cudaSuccess) {
        /* A fault inside a kernel leaves the context unusable, and the
         * sequences' device state half-written. */
        g->failed = 1;
        return fail(err, "CUDA: the step failed on the device: %s", cudaGetErrorString(ec));
    }
    if (rc)
        return -1;
    g->steps++;
    deliver_step(g, items, n_items);
    return 0;
}

extern "C" int eng_cuda_restore_prefix(eng_cuda *g, const eng_cuda_item *it, char *err)
{
    if (g->failed)
        return fail(err, "CUDA backend unusable after an earlier device error; restart");
    const mhla_config *c = &g->cfg;
    int block = it->pos / c->chunk_size;
    if (block > it->n_pages)
        return fail(err, "restoring P_%d of a sequence that holds %d pages", block, it->n_pages);
    if (block > 0)
        CU(cudaMemcpyAsync(g->restore_pages, it->pages, (size_t)block * sizeof(void *),
                           cudaMemcpyHostToDevice, g->stream),
           "copying a page table");
    k_restore_prefix(g->restore_pages, block, g->mix_all, it->prefix, it->prefix_k, c->num_layers,
                     c->num_kv_heads, c->head_k_dim, c->head_v_dim, c->num_blocks, c->normalize,
                     g->state_bf16, g->stream);
    CU(cudaGetLastError(), "launching the prefix mix");
    cudaError_t ec = cudaStreamSynchronize(g->stream);
    if (ec != cudaSuccess) {
        g->failed = 1;
        return fail(err, "CUDA: the prefix mix failed on the device: %s", cudaGetErrorString(ec));
    }
    return 0;
}

extern "C" void eng_cuda_stats(const eng_cuda *g, uint64_t *steps, uint64_t *captures,
                               uint64_t *replays)
{
    *steps = g->steps;
    *captures = g->captures;
    *replays = g->replays;
}
