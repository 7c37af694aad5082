/*
 * ops.c — the CUDA backend as the engine's backend interface sees
 * it (backend.h): describes the model and each step to the CUDA code
 * (mhla_cuda.h) in plain descriptors, and gives kvstate the GPU's memory for
 * pages and buffers. Built only where the build has the CUDA backend (nvcc,
 * or the tests' simulator).
 */
#include "engine_internal.h"
#include "mhla_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static eng_cuda_hmat hmat(k_matrix m) { return (eng_cuda_hmat){m.f32, m.bf16}; }

/* The engine's side of the backend: the CUDA one and what the engine
 * accounts with it. */
typedef struct {
    eng_cuda *gpu;
    const mhla_model *model;
    size_t weight_elem; /* bytes per weight on the GPU */
} cuda_ctx;

static void cuda_free(void *ctx)
{
    cuda_ctx *g = ctx;
    if (!g)
        return;
    eng_cuda_free(g->gpu);
    free(g);
}

/* A layer's host tensors as the CUDA code takes them. */
static eng_cuda_layer_src layer_src(const eng_layer *y)
{
    return (eng_cuda_layer_src){
        .attn_norm = y->attn_norm,
        .g_norm = y->g_norm,
        .mlp_norm = y->mlp_norm,
        .mix = y->mix,
        .wq = hmat(y->wq),
        .wk = hmat(y->wk),
        .wv = hmat(y->wv),
        .wg = hmat(y->wg),
        .wo = hmat(y->wo),
        .w_gate = hmat(y->w_gate),
        .w_up = hmat(y->w_up),
        .w_down = hmat(y->w_down),
    };
}

/* The GPU kernels read f32 or 16-bit weights: int8, 4-bit and bf16-dot ones are CPU only. */
static int cpu_only_weights(const mhla_model *m, mhla_error *err)
{
    const k_q8_matrix *qm = m->lm_head.q8           ? m->lm_head.q8
                            : m->cfg.num_layers > 0 ? m->layers[0].wq.q8
                                                    : NULL;
    const char *f = qm ? (qm->bits == 4 ? "q4" : "q8")
                    : m->lm_head.bf16_dot || (m->cfg.num_layers > 0 && m->layers[0].wq.bf16_dot)
                        ? "bf16dot"
                        : NULL;
    if (!f)
        return 0;
    return eng_fail_as(err, MHLA_ERR_DEVICE,
                       "%s weights (--weights %s) run on the CPU only: on a GPU load the model "
                       "with --weights f32 or bf16 and choose the GPU's storage with "
                       "--gpu-weights bf16|f16|f32",
                       f, f);
}

static int open_gpu(const mhla_model *m, const mhla_engine_options *opt, eng_cuda **out,
                    mhla_error *err)
{
    *out = NULL;
    char why[MHLA_CUDA_ERR];
    if (cpu_only_weights(m, err))
        return -1;
    if (eng_cuda_probe(opt->gpu_index, why))
        return eng_fail_as(err, MHLA_ERR_DEVICE, "%s", why);
    const mhla_config *c = &m->cfg;
    eng_cuda_layer_src *ls = calloc((size_t)c->num_layers, sizeof *ls);
    if (!ls)
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
    for (int l = 0; l < c->num_layers; l++)
        ls[l] = layer_src(&m->layers[l]);
    eng_cuda_model_src src = {
        .cfg = c,
        .embeddings = m->embeddings,
        .final_norm = m->final_norm,
        .lm_head = hmat(m->lm_head),
        .lm_head_tied = m->lm_head.f32 == m->embeddings ||
                        (c->tie_word_embeddings && !st_find(&m->st, "lm_head.weight")),
        .layers = ls,
        .rope_cos = m->rope_cos,
        .rope_sin = m->rope_sin,
        .q_scale = m->q_scale,
    };
    eng_cuda_options co = {
        .device_index = opt->gpu_index,
        .weights = opt->gpu_weights,
        .state_bf16 = opt->state_dtype == MHLA_STATE_BF16,
        .no_graphs = opt->gpu_no_graphs,
    };
    char cerr[MHLA_CUDA_ERR];
    int rc = eng_cuda_create(&src, &co, out, cerr);
    free(ls);
    if (rc)
        return eng_fail_as(err, MHLA_ERR_DEVICE, "%s", cerr);
    return 0;
}

static int cuda_create(const mhla_model *m, const mhla_engine_options *opt, void **ctx,
                       mhla_error *err)
{
    *ctx = NULL;
    mhla_engine_options defaults = {.device = MHLA_DEVICE_CUDA};
    if (!opt)
        opt = &defaults;
    cuda_ctx *g = calloc(1, sizeof *g);
    if (!g)
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
    g->model = m;
    g->weight_elem = opt->gpu_weights == MHLA_GPU_WEIGHTS_F32 ? 4 : 2;
    if (open_gpu(m, opt, &g->gpu, err)) {
        cuda_free(g);
        return -1;
    }
    *ctx = g;
    return 0;
}

static int device_copy(void *ctx, void *dst, const void *src, size_t bytes, kv_copy_dir dir)
{
    return eng_cuda_mem_copy(ctx, dst, src, bytes, (int)dir);
}

static void cuda_memory(void *ctx, kv_memory *mem)
{
    mem->ctx = ((cuda_ctx *)ctx)->gpu;
    mem->alloc = eng_cuda_mem_alloc;
    mem->alloc_swept = NULL; /* device memory has no huge pages to ask for: alloc serves */
    mem->release = eng_cuda_mem_release;
    mem->alloc_page = NULL; /* alloc and release serve */
    mem->release_page = NULL;
    mem->copy = device_copy;
}

/* A sequence's buffers and page table as the backend sees them. The page
 * pointers live in pages (n_pages of them, caller-owned). */
static int describe_seq(const mhla_seq *s, void **pages, eng_cuda_item *it)
{
    kv_seq_bufs b = kv_seq_buffers(s->kv);
    int np = kv_seq_n_pages(s->kv);
    for (int p = 0; p < np; p++)
        pages[p] = kv_seq_page(s->kv, p);
    memset(it, 0, sizeof *it);
    it->pos = kv_seq_pos(s->kv);
    it->prefix = b.prefix;
    it->prefix_k = b.prefix_k;
    it->cur_k = b.cur_k;
    it->cur_v = b.cur_v;
    it->pages = pages;
    it->n_pages = np;
    return np;
}

/* The device's view of a sample slot: parameters, the uniform the host
 * sampler would draw now, and the ids its penalties touch. pen holds
 * 2 * n_seen ints (ids, then counts). */
static void describe_sample(mhla_sample_slot *sl, int32_t *pen, const uint64_t *mask,
                            eng_cuda_sample *q)
{
    eng_sampler_view v;
    eng_sampler_view_of(sl->sampler, &v);
    memset(q, 0, sizeof *q);
    q->temperature = v.p->temperature;
    q->top_p = v.p->top_p;
    q->min_p = v.p->min_p;
    q->repetition = v.p->repetition_penalty;
    q->presence = v.p->presence_penalty;
    q->frequency = v.p->frequency_penalty;
    q->top_k = v.p->top_k;
    q->n_top = sl->n_top;
    q->bias = v.p->logit_bias;
    q->n_bias = v.p->n_logit_bias;
    q->mask = mask;
    if (v.counts) {
        for (int j = 0; j < v.n_seen; j++) {
            int32_t id = v.seen[j];
            pen[j] = id;
            pen[v.n_seen + j] = v.counts[id] | (v.in_prompt[id] ? 1 << 30 : 0);
        }
        q->pen_ids = pen;
        q->pen_counts = pen + v.n_seen;
        q->n_pen = v.n_seen;
    }
    q->u = eng_sampler_draw(sl->sampler);
}

static void finish_sample(mhla_sample_slot *sl, const eng_cuda_sample *q)
{
    sl->status = q->status ? MHLA_SLOT_FAILED : MHLA_SLOT_OK;
    if (q->status == -2) { /* the engine's host sampler says the same */
        eng_fail(&sl->err, "sampler: the token mask allows no token here");
        return;
    }
    if (q->status) {
        eng_fail(&sl->err, "sampler: the logit of token %d is NaN", q->nan_id);
        return;
    }
    sl->token = q->token;
    eng_sampler_record(sl->sampler, q->token);
    if (sl->n_top >= 0) {
        sl->token_logprob = q->token_logprob;
        memcpy(sl->top, q->top, (size_t)sl->n_top * sizeof *sl->top);
    }
}

static int cuda_forward(void *ctx, mhla_batch_item *items, int n_items,
                        const uint64_t *const *masks, mhla_error *err)
{
    eng_cuda *dev = ((cuda_ctx *)ctx)->gpu;
    int Lm = items[0].seq->model->cfg.num_blocks, n_pen = 0;
    for (int b = 0; b < n_items; b++)
        if (items[b].sample) {
            eng_sampler_view v;
            eng_sampler_view_of(items[b].sample->sampler, &v);
            n_pen += v.counts ? 2 * v.n_seen : 0;
        }
    eng_cuda_item *ci = malloc((size_t)n_items * sizeof *ci);
    eng_cuda_sample *cs = malloc((size_t)n_items * sizeof *cs);
    void **pages = malloc((size_t)n_items * Lm * sizeof *pages + 1);
    int32_t *pen = malloc((size_t)n_pen * sizeof *pen + 1);
    if (!ci || !cs || !pages || !pen) {
        free(ci);
        free(cs);
        free(pages);
        free(pen);
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
    }
    int32_t *pen_at = pen;
    for (int b = 0; b < n_items; b++) {
        describe_seq(items[b].seq, pages + (size_t)b * Lm, &ci[b]);
        ci[b].n_tokens = items[b].n_tokens;
        ci[b].tokens = items[b].tokens;
        ci[b].logits_from = items[b].logits_from;
        ci[b].logits = items[b].logits;
        ci[b].sample = NULL;
        if (items[b].sample) {
            describe_sample(items[b].sample, pen_at, masks ? masks[b] : NULL, &cs[b]);
            pen_at += 2 * cs[b].n_pen;
            ci[b].sample = &cs[b];
        }
    }
    char cerr[MHLA_CUDA_ERR];
    int rc = eng_cuda_forward(dev, ci, n_items, cerr);
    for (int b = 0; rc == 0 && b < n_items; b++)
        if (items[b].sample)
            finish_sample(items[b].sample, &cs[b]);
    free(ci);
    free(cs);
    free(pages);
    free(pen);
    if (rc)
        return eng_fail_as(err, MHLA_ERR_DEVICE, "%s", cerr);
    return 0;
}

static int cuda_restore_prefix(void *ctx, mhla_seq *s, mhla_error *err)
{
    void **pages = malloc((size_t)s->model->cfg.num_blocks * sizeof *pages + 1);
    if (!pages)
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
    eng_cuda_item it;
    describe_seq(s, pages, &it);
    char cerr[MHLA_CUDA_ERR];
    int rc = eng_cuda_restore_prefix(((cuda_ctx *)ctx)->gpu, &it, cerr);
    free(pages);
    if (rc)
        return eng_fail_as(err, MHLA_ERR_DEVICE, "%s", cerr);
    return 0;
}

static void cuda_describe(const void *ctx, char *buf, size_t len)
{
    snprintf(buf, len, "%s", eng_cuda_name(((const cuda_ctx *)ctx)->gpu));
}

/* On the GPU the weights are held in its weight dtype; the embedding table
 * is read only where it is the LM head too. */
static size_t cuda_step_weight_bytes(const void *ctx)
{
    const cuda_ctx *g = ctx;
    const mhla_model *m = g->model;
    const mhla_config *c = &m->cfg;
    size_t D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    size_t qd = (size_t)c->num_heads * c->head_k_dim, kd = (size_t)c->num_kv_heads * c->head_k_dim;
    size_t vd = (size_t)c->num_kv_heads * c->head_v_dim, od = (size_t)c->num_heads * c->head_v_dim;
    size_t gate = k_matrix_present(m->layers[0].wg) ? od : 0;
    size_t per_layer = (qd + kd + vd + gate) * D + D * od + 3 * I * D;
    return ((size_t)c->num_layers * per_layer + V * D) * g->weight_elem;
}

static int cuda_memory_bandwidth(void *ctx, double *rates, int reps, mhla_error *err)
{
    char cerr[MHLA_CUDA_ERR];
    for (int r = 0; r < reps; r++)
        if (eng_cuda_copy_bandwidth(((cuda_ctx *)ctx)->gpu, &rates[r], cerr))
            return eng_fail_as(err, MHLA_ERR_DEVICE, "%s", cerr);
    return 0;
}

static int cuda_device_memory(void *ctx, size_t *free_bytes, size_t *total_bytes, mhla_error *err)
{
    char cerr[MHLA_CUDA_ERR];
    if (eng_cuda_mem_info(((cuda_ctx *)ctx)->gpu, free_bytes, total_bytes, cerr))
        return eng_fail_as(err, MHLA_ERR_DEVICE, "%s", cerr);
    return 0;
}

static void cuda_stats(const void *ctx, mhla_device_stats *out)
{
    eng_cuda_stats(((const cuda_ctx *)ctx)->gpu, &out->steps, &out->graph_captures,
                   &out->graph_replays);
}

const eng_backend_ops eng_cuda_backend = {
    .name = "cuda",
    .device = MHLA_DEVICE_CUDA,
    .create = cuda_create,
    .free = cuda_free,
    .forward = cuda_forward,
    .restore_prefix = cuda_restore_prefix,
    .memory = cuda_memory,
    .describe = cuda_describe,
    .step_weight_bytes = cuda_step_weight_bytes,
    .memory_bandwidth = cuda_memory_bandwidth,
    .product_pass = NULL,
    .device_memory = cuda_device_memory,
    .stats = cuda_stats,
    .note = NULL,
    .threads = NULL,
    .samples_on_device = 1,
};
