/*
 * device.cu — the CUDA backend's life: finding the device, putting the
 * weights on it (in bf16, f16 or f32), the state memory kvstate allocates
 * pages from, and tearing it all down.
 */
#include "state.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

using namespace eng_gpu;

int eng_gpu::fail(char *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, MHLA_CUDA_ERR, fmt, ap);
        va_end(ap);
    }
    return -1;
}

extern "C" int eng_cuda_probe(int index, char *why)
{
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess)
        return fail(why, "no usable CUDA driver or device (%s)", cudaGetErrorString(rc));
    if (n == 0)
        return fail(why, "no CUDA device found");
    if (index < 0 || index >= n)
        return fail(why, "CUDA device %d does not exist (%d found)", index, n);
    cudaDeviceProp p;
    rc = cudaGetDeviceProperties(&p, index);
    if (rc != cudaSuccess)
        return fail(why, "CUDA device %d: %s", index, cudaGetErrorString(rc));
    /* the build carries sm_90a code and compute_80 PTX */
    if (p.major < 8)
        return fail(why, "CUDA device %d (%s) has compute capability %d.%d; 8.0 or newer is needed",
                    index, p.name, p.major, p.minor);
    return 0;
}

/* ---- device memory --------------------------------------------------------- */

static int dmalloc(eng_cuda *g, void **p, size_t bytes, char *err)
{
    *p = nullptr;
    cudaError_t rc = cudaMalloc(p, bytes ? bytes : 16);
    if (rc != cudaSuccess)
        return fail(err, "CUDA: out of GPU memory for %zu bytes (%s)", bytes,
                    cudaGetErrorString(rc));
    g->bytes += bytes;
    return 0;
}

static void dfree(eng_cuda *g, void *p, size_t bytes)
{
    if (p) {
        cudaFree(p);
        g->bytes -= bytes;
    }
}

/*
 * State memory (kvstate's pages and sequence buffers) is recycled, not
 * freed: cudaFree waits for the whole device to go idle, which would stall
 * every running sequence each time one finishes. Released blocks wait in a
 * process-wide cache keyed by size (kvstate asks for a handful of sizes)
 * until a later allocation of that size or the backend's end. Process-wide
 * so that a sequence released after its engine still has somewhere to go.
 */
static std::mutex cache_mu;
static std::unordered_map<void *, size_t> cache_live;              /* handed out */
static std::unordered_map<size_t, std::vector<void *>> cache_free; /* by size */

static void cache_drop_all()
{
    std::lock_guard<std::mutex> lock(cache_mu);
    for (auto &kv : cache_free)
        for (void *p : kv.second)
            cudaFree(p);
    cache_free.clear();
}

extern "C" void *eng_cuda_mem_alloc(void *ctx, size_t bytes)
{
    eng_cuda *g = static_cast<eng_cuda *>(ctx);
    size_t n = bytes ? bytes : 16;
    void *p = nullptr;
    {
        std::lock_guard<std::mutex> lock(cache_mu);
        auto it = cache_free.find(n);
        if (it != cache_free.end() && !it->second.empty()) {
            p = it->second.back();
            it->second.pop_back();
        }
    }
    if (!p && cudaMalloc(&p, n) != cudaSuccess)
        return nullptr;
    if (cudaMemsetAsync(p, 0, n, g->stream) != cudaSuccess ||
        cudaStreamSynchronize(g->stream) != cudaSuccess) {
        cudaFree(p);
        return nullptr;
    }
    try {
        std::lock_guard<std::mutex> lock(cache_mu);
        cache_live[p] = n;
    } catch (...) { /* no room to remember it: hand it out untracked, freed on release */
    }
    return p;
}

extern "C" void eng_cuda_mem_release(void *ctx, void *p)
{
    (void)ctx;
    if (!p)
        return;
    std::lock_guard<std::mutex> lock(cache_mu);
    auto it = cache_live.find(p);
    if (it != cache_live.end()) {
        try {
            cache_free[it->second].push_back(p);
            cache_live.erase(it);
            return;
        } catch (...) {
        }
        cache_live.erase(it);
    }
    cudaFree(p);
}

extern "C" int eng_cuda_mem_copy(void *ctx, void *dst, const void *src, size_t bytes, int dir)
{
    eng_cuda *g = static_cast<eng_cuda *>(ctx);
    cudaMemcpyKind kind = dir == 0   ? cudaMemcpyDeviceToHost
                          : dir == 1 ? cudaMemcpyHostToDevice
                                     : cudaMemcpyDeviceToDevice;
    if (cudaMemcpyAsync(dst, src, bytes, kind, g->stream) != cudaSuccess ||
        cudaStreamSynchronize(g->stream) != cudaSuccess)
        return -1;
    return 0;
}

/* ---- weights ---------------------------------------------------------------- */

/* Host values go through a device staging buffer and are converted there. */
struct uploader {
    eng_cuda *g;
    void *stage;
    size_t stage_bytes;
};

static int upload(uploader *u, const void *host, int host_dt, size_t n, void *dst, int dst_dt,
                  char *err)
{
    size_t hb = host_dt == DT_F32 ? 4 : 2, db = dst_dt == DT_F32 ? 4 : 2;
    size_t chunk = u->stage_bytes / hb;
    for (size_t off = 0; off < n; off += chunk) {
        size_t w = n - off < chunk ? n - off : chunk;
        CU(cudaMemcpyAsync(u->stage, static_cast<const unsigned char *>(host) + off * hb, w * hb,
                           cudaMemcpyHostToDevice, u->g->stream),
           "copying weights to the GPU");
        k_convert(u->stage, host_dt, static_cast<unsigned char *>(dst) + off * db, dst_dt, w,
                  u->g->stream);
        CU(cudaGetLastError(), "converting weights");
        /* the staging buffer is reused by the next chunk */
        CU(cudaStreamSynchronize(u->g->stream), "converting weights");
    }
    return 0;
}

static int upload_mat(uploader *u, eng_cuda_hmat m, size_t n, void *dst, char *err)
{
    if (m.f32)
        return upload(u, m.f32, DT_F32, n, dst, u->g->dt, err);
    return upload(u, m.bf16, DT_BF16, n, dst, u->g->dt, err);
}

static int upload_f32(uploader *u, const float *host, size_t n, float **dst, char *err)
{
    if (dmalloc(u->g, reinterpret_cast<void **>(dst), n * 4, err))
        return -1;
    CU(cudaMemcpy(*dst, host, n * 4, cudaMemcpyHostToDevice), "copying to the GPU");
    return 0;
}

static int upload_layer(uploader *u, const eng_cuda_layer_src *s, dev_layer *d, char *err)
{
    eng_cuda *g = u->g;
    const mhla_config *c = &g->cfg;
    size_t D = c->hidden_size, I = c->intermediate_size, eb = g->dt_bytes;
    size_t qd = (size_t)c->num_heads * c->head_k_dim, kd = (size_t)c->num_kv_heads * c->head_k_dim;
    size_t vd = (size_t)c->num_kv_heads * c->head_v_dim, od = (size_t)c->num_heads * c->head_v_dim;
    unsigned char *p;
    if (dmalloc(g, &d->w_qkvg, (size_t)g->W * D * eb, err))
        return -1;
    p = static_cast<unsigned char *>(d->w_qkvg);
    if (upload_mat(u, s->wq, qd * D, p, err) ||
        upload_mat(u, s->wk, kd * D, p + qd * D * eb, err) ||
        upload_mat(u, s->wv, vd * D, p + (qd + kd) * D * eb, err))
        return -1;
    if (g->g_off >= 0 && upload_mat(u, s->wg, od * D, p + (qd + kd + vd) * D * eb, err))
        return -1;
    if (dmalloc(g, &d->wo, D * od * eb, err) || upload_mat(u, s->wo, D * od, d->wo, err))
        return -1;
    if (dmalloc(g, &d->w_gu, 2 * I * D * eb, err) ||
        upload_mat(u, s->w_gate, I * D, d->w_gu, err) ||
        upload_mat(u, s->w_up, I * D, static_cast<unsigned char *>(d->w_gu) + I * D * eb, err))
        return -1;
    if (dmalloc(g, &d->w_down, D * I * eb, err) || upload_mat(u, s->w_down, D * I, d->w_down, err))
        return -1;
    if (upload_f32(u, s->attn_norm, D, &d->attn_norm, err) ||
        upload_f32(u, s->mlp_norm, D, &d->mlp_norm, err) ||
        upload_f32(u, s->g_norm, (size_t)c->head_v_dim, &d->g_norm, err))
        return -1;
    return 0;
}

static int upload_model(eng_cuda *g, const eng_cuda_model_src *src, char *err)
{
    const mhla_config *c = &g->cfg;
    size_t V = c->vocab_size, D = c->hidden_size, L = c->num_layers, Lm = c->num_blocks;
    uploader u = {g, nullptr, 64u << 20};
    if (dmalloc(g, &u.stage, u.stage_bytes, err))
        return -1;
    int rc = -1;
    g->layers = static_cast<dev_layer *>(calloc(L, sizeof(dev_layer)));
    if (!g->layers) {
        fail(err, "out of memory");
        goto out;
    }
    if (dmalloc(g, &g->emb, V * D * g->dt_bytes, err) ||
        upload(&u, src->embeddings, DT_F32, V * D, g->emb, g->dt, err))
        goto out;
    if (src->lm_head_tied) {
        g->lm_head = g->emb;
    } else if (dmalloc(g, &g->lm_head, V * D * g->dt_bytes, err) ||
               upload_mat(&u, src->lm_head, V * D, g->lm_head, err)) {
        goto out;
    }
    if (upload_f32(&u, src->final_norm, D, &g->final_norm, err))
        goto out;
    {
        size_t rope = (size_t)c->max_positions * (c->head_k_dim / 2);
        if (upload_f32(&u, src->rope_cos, rope, &g->rope_cos, err) ||
            upload_f32(&u, src->rope_sin, rope, &g->rope_sin, err))
            goto out;
    }
    if (dmalloc(g, reinterpret_cast<void **>(&g->mix_all), L * Lm * Lm * 4, err))
        goto out;
    for (size_t l = 0; l < L; l++) {
        g->layers[l].mix = g->mix_all + l * Lm * Lm;
        if (cudaMemcpy(g->layers[l].mix, src->layers[l].mix, Lm * Lm * 4, cudaMemcpyHostToDevice) !=
            cudaSuccess) {
            fail(err, "CUDA: copying a mixing matrix to the GPU failed");
            goto out;
        }
        if (upload_layer(&u, &src->layers[l], &g->layers[l], err))
            goto out;
    }
    rc = 0;
out:
    dfree(g, u.stage, u.stage_bytes);
    return rc;
}

/* ---- create / free ------------------------------------------------------------ */

/* The weights' and the state's types and the fused [q;k;v;g] product's rows. */
static void create_layout(eng_cuda *g, const eng_cuda_model_src *src, const eng_cuda_options *opt)
{
    const mhla_config *c = src->cfg;
    g->cfg = *c;
    g->dev_index = opt->device_index;
    g->dt = opt->weights == MHLA_GPU_WEIGHTS_F32   ? DT_F32
            : opt->weights == MHLA_GPU_WEIGHTS_F16 ? DT_F16
                                                   : DT_BF16;
    g->dt_bytes = g->dt == DT_F32 ? 4 : 2;
    g->state_bf16 = opt->state_bf16;
    g->no_graphs = opt->no_graphs;
    int qd = c->num_heads * c->head_k_dim, kd = c->num_kv_heads * c->head_k_dim;
    int vd = c->num_kv_heads * c->head_v_dim, od = c->num_heads * c->head_v_dim;
    g->q_off = 0;
    g->k_off = qd;
    g->v_off = qd + kd;
    g->g_off = src->layers[0].wg.f32 || src->layers[0].wg.bf16 ? qd + kd + vd : -1;
    g->W = qd + kd + vd + (g->g_off >= 0 ? od : 0);
    g->q_scale = src->q_scale;
}

/* The stream and the cuBLAS handle, with a workspace of our own: products
 * captured in CUDA graphs must not allocate. */
static int create_handles(eng_cuda *g, char *err)
{
    if (cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking) != cudaSuccess)
        return fail(err, "CUDA: cannot create a stream");
    if (cublasCreate(&g->blas) != CUBLAS_STATUS_SUCCESS) {
        g->blas = nullptr;
        return fail(err, "cuBLAS: cannot create a handle");
    }
    if (dmalloc(g, &g->blas_ws, 32u << 20, err))
        return -1;
    if (cublasSetStream(g->blas, g->stream) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(g->blas, g->blas_ws, 32u << 20) != CUBLAS_STATUS_SUCCESS ||
        cublasSetMathMode(g->blas, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS)
        return fail(err, "cuBLAS: cannot configure the handle");
    return 0;
}

extern "C" int eng_cuda_create(const eng_cuda_model_src *src, const eng_cuda_options *opt,
                               eng_cuda **out, char *err)
{
    *out = nullptr;
    if (eng_cuda_probe(opt->device_index, err))
        return -1;
    const mhla_config *c = src->cfg;
    if (c->head_k_dim % 2 || c->num_heads % c->num_kv_heads)
        return fail(err, "CUDA backend: unsupported head shape");
    if (mixer_smem_bytes(c->head_k_dim, c->chunk_size) > 48 * 1024)
        return fail(err,
                    "CUDA backend: head_k_dim %d with blocks of %d tokens needs %zu bytes of "
                    "shared memory per mixer block (at most 49152)",
                    c->head_k_dim, c->chunk_size, mixer_smem_bytes(c->head_k_dim, c->chunk_size));
    eng_cuda *g = static_cast<eng_cuda *>(calloc(1, sizeof *g));
    if (!g)
        return fail(err, "out of memory");
    create_layout(g, src, opt);

    cudaDeviceProp p;
    if (cudaSetDevice(g->dev_index) != cudaSuccess ||
        cudaGetDeviceProperties(&p, g->dev_index) != cudaSuccess) {
        free(g);
        return fail(err, "CUDA: cannot select device %d", opt->device_index);
    }
    snprintf(g->name, sizeof g->name, "cuda:%d %s (%s weights, %s state)", g->dev_index, p.name,
             g->dt == DT_F32   ? "f32"
             : g->dt == DT_F16 ? "f16"
                               : "bf16",
             g->state_bf16 ? "bf16" : "f32");
    if (create_handles(g, err) || upload_model(g, src, err) ||
        dmalloc(g, reinterpret_cast<void **>(&g->restore_pages),
                (size_t)c->num_blocks * sizeof(void *), err)) {
        eng_cuda_free(g);
        return -1;
    }
    *out = g;
    return 0;
}

void eng_gpu::free_buffers(eng_cuda *g)
{
    drop_graphs(g);
    void *dev[] = {g->x,      g->y,          g->qkvg,       g->att,  g->gu,
                   g->logits, g->h,          g->hl,         g->pscr, g->pkscr,
                   g->sb.dev, g->sample_adj, g->sample_out, g->sscr, g->scores};
    for (void *p : dev)
        if (p)
            cudaFree(p);
    if (g->logits_host)
        cudaFreeHost(g->logits_host);
    if (g->sample_out_host)
        cudaFreeHost(g->sample_out_host);
    g->sample_adj = nullptr;
    g->sample_out = g->sample_out_host = nullptr;
    g->sscr = g->scores = nullptr;
    g->cap_full = 0;
    free(g->run_f0);
    free(g->run_s0);
    free(g->run_n);
    free(g->run_t0);
    g->run_f0 = g->run_s0 = g->run_n = g->run_t0 = nullptr;
    if (g->sb.host)
        cudaFreeHost(g->sb.host);
    g->x = g->y = g->qkvg = g->att = g->gu = g->logits = g->pscr = g->pkscr = nullptr;
    g->h = g->hl = nullptr;
    g->logits_host = nullptr;
    g->sb = step_bufs{};
    g->cap_T = g->cap_R = g->cap_seg = 0;
    g->buf_bytes = 0;
}

extern "C" void eng_cuda_free(eng_cuda *g)
{
    if (!g)
        return;
    if (g->stream)
        cudaStreamSynchronize(g->stream);
    free_buffers(g);
    if (g->layers) {
        for (int l = 0; l < g->cfg.num_layers; l++) {
            dev_layer *d = &g->layers[l];
            void *ps[] = {d->w_qkvg,    d->wo,     d->w_gu,    d->w_down,
                          d->attn_norm, d->g_norm, d->mlp_norm};
            for (void *p : ps)
                if (p)
                    cudaFree(p);
        }
        free(g->layers);
    }
    if (g->lm_head && g->lm_head != g->emb)
        cudaFree(g->lm_head);
    void *ps[] = {g->emb,     g->final_norm, g->rope_cos,     g->rope_sin,
                  g->mix_all, g->blas_ws,    g->restore_pages};
    for (void *p : ps)
        if (p)
            cudaFree(p);
    if (g->blas)
        cublasDestroy(g->blas);
    if (g->stream)
        cudaStreamDestroy(g->stream);
    cache_drop_all();
    free(g);
}

extern "C" const char *eng_cuda_name(const eng_cuda *g) { return g->name; }

extern "C" int eng_cuda_mem_info(eng_cuda *g, size_t *free_bytes, size_t *total_bytes, char *err)
{
    *free_bytes = *total_bytes = 0;
    if (cudaSetDevice(g->dev_index) != cudaSuccess ||
        cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess)
        return fail(err, "CUDA: cannot read device %d's free memory", g->dev_index);
    return 0;
}

extern "C" int eng_cuda_copy_bandwidth(eng_cuda *g, double *bytes_per_s, char *err)
{
    const size_t n = 512u << 20;
    void *a = nullptr, *b = nullptr;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    float ms = 0;
    int rc = -1;
    *bytes_per_s = 0;
    if (dmalloc(g, &a, n, err) || dmalloc(g, &b, n, err))
        goto out;
    if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) {
        fail(err, "CUDA: cannot create events");
        goto out;
    }
    /* one warm-up copy, then ten timed */
    if (cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, g->stream) != cudaSuccess ||
        cudaEventRecord(e0, g->stream) != cudaSuccess)
        goto copy_failed;
    for (int i = 0; i < 10; i++)
        if (cudaMemcpyAsync(i % 2 ? a : b, i % 2 ? b : a, n, cudaMemcpyDeviceToDevice, g->stream) !=
            cudaSuccess)
            goto copy_failed;
    if (cudaEventRecord(e1, g->stream) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
        cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
        goto copy_failed;
    *bytes_per_s = ms > 0 ? 10.0 * 2.0 * (double)n / (ms * 1e-3) : 0;
    rc = 0;
    goto out;
copy_failed:
    fail(err, "CUDA: timing a device copy failed");
out:
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    dfree(g, a, n);
    dfree(g, b, n);
    return rc;
}
