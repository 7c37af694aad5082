/*
 * forward.c — one engine step over a batch of sequences (SPEC §2.4).
 *
 * All tokens of the step, whatever sequence they belong to, go through the
 * norms, projections and MLP together as rows of one matrix; only the token
 * mixer looks at sequences, each with its own recurrent state. Row arithmetic
 * never depends on the other rows (see cpu/kernels.h), so a sequence's logits
 * are the same bits alone or in any batch.
 */
#include "cpu/kernels.h"
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Rows of final hidden states turned into logits per lm_head call. */
#define LOGIT_ROWS 64

struct mhla_engine {
    const mhla_model *model;
    int n_threads;
    tp_pool *workers; /* the CPU threads of a step, the caller's included */
    int cap; /* token rows the scratch buffers hold */
    float *x, *h, *q, *k, *v, *g, *att, *up, *gate;
    float *logit_rows, *logit_buf;
    int *row_item; /* which batch item each token row belongs to */
    float *sample_rows; /* logits of sampled positions no caller buffer holds */
    int sample_cap;
    kv_pool *pool; /* state memory of mhla_engine_seq_create's sequences */
    mhla_cuda *cuda; /* the GPU the steps run on; NULL: the CPU */
    kv_memory cuda_memory;
    size_t gpu_weight_elem; /* bytes per weight on the GPU */
    char device_name[420];
    char device_note[600];
    char cpu_note[1200]; /* the kernels' instruction-set path and the thread count, and why */
};

/* The kernels' instruction-set path (process-wide) and the engine's threads. */
static int cpu_setup(mhla_engine *e, const mhla_engine_options *opt, mhla_error *err)
{
    char msg[400], why[800];
    if (k_isa_select(opt ? opt->cpu_isa : NULL, msg, sizeof msg))
        return mhla_fail(err, "%s", msg);
    int dflt = tp_default_threads(why, sizeof why);
    e->n_threads = opt && opt->n_threads > 0 ? opt->n_threads : dflt;
    if (opt && opt->n_threads > 0)
        snprintf(why, sizeof why, "%d threads: requested", e->n_threads);
    snprintf(e->cpu_note, sizeof e->cpu_note, "kernels %s; %s", k_isa_reason(), why);
    if (tp_create(e->n_threads, &e->workers, msg, sizeof msg))
        return mhla_fail(err, "%s", msg);
    return 0;
}

int mhla_engine_create(const mhla_model *model, const mhla_engine_options *opt, mhla_engine **out,
                       mhla_error *err)
{
    *out = NULL;
    mhla_engine *e = calloc(1, sizeof *e);
    if (!e)
        return mhla_fail(err, "out of memory");
    e->model = model;
    if (cpu_setup(e, opt, err)) {
        mhla_engine_free(e);
        return -1;
    }
    const mhla_config *c = &model->cfg;
    kv_pool_options po = {
        .geo = mhla_state_geometry(c),
        .dtype = opt && opt->state_dtype == MHLA_STATE_BF16 ? KV_DTYPE_BF16 : KV_DTYPE_F32,
        .budget_bytes = opt ? opt->state_bytes : 0,
        .resume_slots = opt ? opt->resume_slots : 0,
    };
    kv_error ke;
    if (opt && opt->state_dtype != MHLA_STATE_F32 && opt->state_dtype != MHLA_STATE_BF16) {
        mhla_engine_free(e);
        return mhla_fail(err, "unknown state dtype %d", (int)opt->state_dtype);
    }
    if (opt && opt->device != MHLA_DEVICE_CPU) {
        if (opt->device != MHLA_DEVICE_AUTO && opt->device != MHLA_DEVICE_CUDA) {
            mhla_engine_free(e);
            return mhla_fail(err, "unknown device %d", (int)opt->device);
        }
        if (mhla_device_open(model, opt, &e->cuda, e->device_note, sizeof e->device_note, err)) {
            mhla_engine_free(e);
            return -1;
        }
        if (e->cuda) {
            e->gpu_weight_elem = opt->gpu_weights == MHLA_GPU_WEIGHTS_F32 ? 4 : 2;
            mhla_device_memory(e->cuda, &e->cuda_memory);
            po.memory = &e->cuda_memory;
        }
    }
    if (e->cuda)
        snprintf(e->device_name, sizeof e->device_name, "%s", mhla_cuda_name(e->cuda));
    else
        snprintf(e->device_name, sizeof e->device_name, "cpu (%d threads, %s)", e->n_threads,
                 k_isa_name());
    if (kv_pool_create(&po, &e->pool, &ke)) {
        mhla_engine_free(e);
        return mhla_fail(err, "%s", ke.msg);
    }
    if (po.budget_bytes > 0 && po.budget_bytes < kv_pool_page_bytes(e->pool)) {
        mhla_engine_free(e);
        return mhla_fail(err, "state memory of %zu bytes holds no page of %zu bytes",
                         po.budget_bytes, kv_pool_page_bytes(e->pool));
    }
    e->logit_rows = malloc((size_t)LOGIT_ROWS * c->hidden_size * sizeof(float));
    e->logit_buf = malloc((size_t)LOGIT_ROWS * c->vocab_size * sizeof(float));
    if (!e->logit_rows || !e->logit_buf) {
        mhla_engine_free(e);
        return mhla_fail(err, "out of memory for the engine's buffers");
    }
    *out = e;
    return 0;
}

void mhla_engine_free(mhla_engine *e)
{
    if (!e)
        return;
    float *bufs[] = {e->x, e->h, e->q, e->k, e->v, e->g, e->att, e->up, e->gate,
                     e->logit_rows, e->logit_buf};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(e->row_item);
    free(e->sample_rows);
    /* its sequences keep the pool alive as long as they live; on a GPU they
     * must all be gone before the backend goes */
    kv_pool_release(e->pool);
    mhla_cuda_free(e->cuda);
    tp_free(e->workers);
    free(e);
}

static int grow(float **p, size_t n, mhla_error *err)
{
    float *np = realloc(*p, n * sizeof(float));
    if (!np)
        return mhla_fail(err, "out of memory for %zu activation values", n);
    *p = np;
    return 0;
}

static int ensure_capacity(mhla_engine *e, int T, mhla_error *err)
{
    if (T <= e->cap)
        return 0;
    const mhla_config *c = &e->model->cfg;
    size_t n = (size_t)T, D = c->hidden_size, I = c->intermediate_size;
    size_t qd = (size_t)c->num_heads * c->head_k_dim, kd = (size_t)c->num_kv_heads * c->head_k_dim;
    size_t vd = (size_t)c->num_kv_heads * c->head_v_dim, od = (size_t)c->num_heads * c->head_v_dim;
    if (grow(&e->x, n * D, err) || grow(&e->h, n * D, err) || grow(&e->q, n * qd, err) ||
        grow(&e->k, n * kd, err) || grow(&e->v, n * vd, err) || grow(&e->g, n * od, err) ||
        grow(&e->att, n * od, err) || grow(&e->up, n * I, err) || grow(&e->gate, n * I, err))
        return -1;
    int *ri = realloc(e->row_item, n * sizeof *ri);
    if (!ri)
        return mhla_fail(err, "out of memory");
    e->row_item = ri;
    e->cap = T;
    return 0;
}

static int validate(const mhla_engine *e, const mhla_batch_item *items, int n_items, int *T,
                    mhla_error *err)
{
    const mhla_config *c = &e->model->cfg;
    long total = 0;
    for (int b = 0; b < n_items; b++) {
        const mhla_batch_item *it = &items[b];
        if (!it->seq || it->seq->model != e->model)
            return mhla_fail(err, "batch item %d: no sequence of this model", b);
        if (it->seq->dev != e->cuda)
            return mhla_fail(err, "batch item %d: the sequence's state is on another device (make "
                                  "sequences with mhla_engine_seq_create)", b);
        if (it->n_tokens < 1 || !it->tokens)
            return mhla_fail(err, "batch item %d: no tokens", b);
        if (it->logits_from < 0 || it->logits_from > it->n_tokens)
            return mhla_fail(err, "batch item %d: logits_from %d outside [0, %d]", b,
                             it->logits_from, it->n_tokens);
        if (it->logits_from < it->n_tokens && !it->logits && !it->sample)
            return mhla_fail(err, "batch item %d: logits requested without a buffer", b);
        if (it->sample && (!it->sample->sampler || it->sample->n_top < -1 ||
                           it->sample->n_top > MHLA_MAX_TOP_LOGPROBS))
            return mhla_fail(err, "batch item %d: a sample slot needs a sampler and n_top in "
                                  "[-1, %d]", b, MHLA_MAX_TOP_LOGPROBS);
        int pos = mhla_seq_pos(it->seq);
        if ((long)pos + it->n_tokens > c->max_positions)
            return mhla_fail(err,
                             "context length exceeded: position %d + %d tokens passes the model's "
                             "context of %d tokens (%d blocks of %d)",
                             pos, it->n_tokens, c->max_positions, c->num_blocks,
                             c->chunk_size);
        for (int t = 0; t < it->n_tokens; t++)
            if (it->tokens[t] < 0 || it->tokens[t] >= c->vocab_size)
                return mhla_fail(err, "batch item %d: token id %d outside the vocabulary [0, %d)",
                                 b, it->tokens[t], c->vocab_size);
        for (int o = 0; o < b; o++)
            if (items[o].seq == it->seq)
                return mhla_fail(err, "batch items %d and %d feed the same sequence", o, b);
        total += it->n_tokens;
        if (total > (1L << 24))
            return mhla_fail(err, "batch of more than %ld tokens", 1L << 24);
    }
    *T = (int)total;
    return 0;
}

static float silu(float x) { return x / (1.0f + k_expf(-x)); }

static void feature_map(mhla_feature_map fm, float *x, int n)
{
    for (int i = 0; i < n; i++) {
        if (fm == MHLA_FEATURE_RELU)
            x[i] = x[i] > 0.0f ? x[i] : 0.0f;
        else if (fm == MHLA_FEATURE_ELU)
            x[i] = (x[i] > 0.0f ? x[i] : k_expm1f(x[i])) + 1.0f;
    }
}

/* Rotary embedding, halves rotated (non-interleaved). */
static void rope(const mhla_model *m, int pos, float *x, int dk)
{
    int half = dk / 2;
    const float *cs = m->rope_cos + (size_t)pos * half, *sn = m->rope_sin + (size_t)pos * half;
    for (int r = 0; r < half; r++) {
        float a = x[r], b = x[r + half];
        x[r] = a * cs[r] - b * sn[r];
        x[r + half] = b * cs[r] + a * sn[r];
    }
}

typedef struct {
    mhla_engine *e;
    const mhla_batch_item *items;
    const int *row_start;
    const mhla_layer *ly;
    int layer;
} step_job;

static void prepare_qk_row(void *ctx, int t)
{
    const step_job *sj = ctx;
    mhla_engine *e = sj->e;
    const mhla_batch_item *items = sj->items;
    const int *row_start = sj->row_start;
    const mhla_model *m = e->model;
    const mhla_config *c = &m->cfg;
    int dk = c->head_k_dim, H = c->num_heads, Hkv = c->num_kv_heads;
    {
        int b = e->row_item[t];
        int pos = mhla_seq_pos(items[b].seq) + (t - row_start[b]);
        for (int j = 0; j < H; j++) {
            float *q = e->q + (size_t)t * H * dk + (size_t)j * dk;
            feature_map(c->feature_map, q, dk);
            rope(m, pos, q, dk);
            for (int a = 0; a < dk; a++)
                q[a] *= m->q_scale;
        }
        for (int j = 0; j < Hkv; j++) {
            float *k = e->k + (size_t)t * Hkv * dk + (size_t)j * dk;
            feature_map(c->feature_map, k, dk);
            rope(m, pos, k, dk);
        }
    }
}

/* φ, rotary and (for q) the scale, for every head of every token row. */
static void prepare_qk(mhla_engine *e, const mhla_batch_item *items, const int *row_start,
                       int T)
{
    step_job sj = {.e = e, .items = items, .row_start = row_start};
    tp_run(T > 8 ? e->workers : NULL, T, prepare_qk_row, &sj);
}

static void token_mixer_unit(void *ctx, int u)
{
    const step_job *sj = ctx;
    mhla_engine *e = sj->e;
    const mhla_batch_item *items = sj->items;
    const int *row_start = sj->row_start;
    int layer = sj->layer;
    const mhla_config *c = &e->model->cfg;
    int Hkv = c->num_kv_heads;
    size_t qs = (size_t)c->num_heads * c->head_k_dim, ks = (size_t)Hkv * c->head_k_dim;
    size_t vs = (size_t)Hkv * c->head_v_dim, os = (size_t)c->num_heads * c->head_v_dim;
    {
        int b = u / Hkv, g = u % Hkv;
        size_t r0 = (size_t)row_start[b];
        mhla_mixer_io io = {
            .q = e->q + r0 * qs, .q_stride = (int)qs,
            .k = e->k + r0 * ks, .k_stride = (int)ks,
            .v = e->v + r0 * vs, .v_stride = (int)vs,
            .out = e->att + r0 * os, .out_stride = (int)os,
            .n = items[b].n_tokens,
        };
        mhla_mix_run(items[b].seq, layer, g, &io);
    }
}

/* Runs the token mixer: one work unit per (sequence, kv head). */
static void token_mixer(mhla_engine *e, int layer, mhla_batch_item *items, int n_items,
                        const int *row_start)
{
    step_job sj = {.e = e, .items = items, .row_start = row_start, .layer = layer};
    /* a step too small to be worth waking threads for (a small model's
     * decode): q~ᵀ P_i, the bulk of the work, under 64K products */
    const mhla_config *c = &e->model->cfg;
    long work = (long)row_start[n_items] * c->num_heads * c->head_k_dim * c->head_v_dim;
    tp_run(work >= 64L * 1024 ? e->workers : NULL, n_items * c->num_kv_heads, token_mixer_unit,
           &sj);
}

static void output_norm_row(void *ctx, int t)
{
    const step_job *sj = ctx;
    mhla_engine *e = sj->e;
    const mhla_layer *ly = sj->ly;
    const mhla_config *c = &e->model->cfg;
    int H = c->num_heads, dv = c->head_v_dim;
    {
        for (int j = 0; j < H; j++) {
            float *o = e->att + ((size_t)t * H + j) * dv;
            k_rmsnorm(o, ly->g_norm, dv, c->norm_eps, o);
            if (ly->wg.f32 || ly->wg.bf16) {
                const float *g = e->g + ((size_t)t * H + j) * dv;
                for (int i = 0; i < dv; i++)
                    o[i] *= silu(g[i]);
            }
        }
    }
}

/* o = RMSNorm_dv(o) * w, times swish(g) with the output gate. */
static void output_norm(mhla_engine *e, const mhla_layer *ly, int T)
{
    step_job sj = {.e = e, .ly = ly};
    tp_run(T > 8 ? e->workers : NULL, T, output_norm_row, &sj);
}

typedef struct {
    const mhla_config *c;
    const float *x, *w;
    float *out;
} rmsnorm_job;

static void rmsnorm_row(void *ctx, int t)
{
    const rmsnorm_job *j = ctx;
    int D = j->c->hidden_size;
    k_rmsnorm(j->x + (size_t)t * D, j->w, D, j->c->norm_eps, j->out + (size_t)t * D);
}

static void rmsnorm_rows(mhla_engine *e, const float *x, const float *w, float *out, int T)
{
    rmsnorm_job j = {&e->model->cfg, x, w, out};
    tp_run(T > 16 ? e->workers : NULL, T, rmsnorm_row, &j);
}

static void add_rows(float *x, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] += y[i];
}

typedef struct {
    float *gate;
    const float *up;
    int I;
} swiglu_job;

static void swiglu_row(void *ctx, int t)
{
    const swiglu_job *j = ctx;
    float *g = j->gate + (size_t)t * j->I;
    const float *u = j->up + (size_t)t * j->I;
    for (int i = 0; i < j->I; i++)
        g[i] = silu(g[i]) * u[i];
}

/* gate = silu(gate) * up, row by row over the pool */
static void swiglu_rows(mhla_engine *e, int T, int I)
{
    swiglu_job j = {e->gate, e->up, I};
    tp_run(T > 8 ? e->workers : NULL, T, swiglu_row, &j);
}

static void layer_forward(mhla_engine *e, int l, mhla_batch_item *items, int n_items, int T,
                          const int *row_start)
{
    const mhla_config *c = &e->model->cfg;
    const mhla_layer *ly = &e->model->layers[l];
    int D = c->hidden_size, I = c->intermediate_size;
    tp_pool *nt = e->workers;
    int qd = c->num_heads * c->head_k_dim, kd = c->num_kv_heads * c->head_k_dim;
    int vd = c->num_kv_heads * c->head_v_dim, od = c->num_heads * c->head_v_dim;

    rmsnorm_rows(e, e->x, ly->attn_norm, e->h, T);
    k_linear(e->h, T, D, ly->wq, qd, e->q, qd, nt);
    k_linear(e->h, T, D, ly->wk, kd, e->k, kd, nt);
    k_linear(e->h, T, D, ly->wv, vd, e->v, vd, nt);
    if (ly->wg.f32 || ly->wg.bf16)
        k_linear(e->h, T, D, ly->wg, od, e->g, od, nt);
    prepare_qk(e, items, row_start, T);
    token_mixer(e, l, items, n_items, row_start);
    output_norm(e, ly, T);
    k_linear(e->att, T, od, ly->wo, D, e->h, D, nt);
    add_rows(e->x, e->h, (size_t)T * D);

    rmsnorm_rows(e, e->x, ly->mlp_norm, e->h, T);
    k_linear(e->h, T, D, ly->w_gate, I, e->gate, I, nt);
    k_linear(e->h, T, D, ly->w_up, I, e->up, I, nt);
    swiglu_rows(e, T, I);
    k_linear(e->gate, T, I, ly->w_down, D, e->h, D, nt);
    add_rows(e->x, e->h, (size_t)T * D);
}

/* Final norm and lm_head for the requested rows, LOGIT_ROWS at a time. */
static void flush_logits(mhla_engine *e, float **dst, int n)
{
    const mhla_model *m = e->model;
    int V = m->cfg.vocab_size;
    k_linear(e->logit_rows, n, m->cfg.hidden_size, m->lm_head, V, e->logit_buf, V, e->workers);
    for (int r = 0; r < n; r++)
        memcpy(dst[r], e->logit_buf + (size_t)r * V, (size_t)V * sizeof(float));
}

/* The logits row of item b's position t, or NULL when nobody wants it. A
 * sampled last position the caller has no buffer for goes to sample_rows. */
static float *logits_dst(mhla_engine *e, const mhla_batch_item *it, int t, int *n_sampled)
{
    int V = e->model->cfg.vocab_size;
    if (it->logits && t >= it->logits_from)
        return it->logits + (size_t)(t - it->logits_from) * V;
    if (it->sample && t == it->n_tokens - 1)
        return e->sample_rows + (size_t)(*n_sampled)++ * V;
    return NULL;
}

static void compute_logits(mhla_engine *e, mhla_batch_item *items, int n_items,
                           const int *row_start)
{
    const mhla_model *m = e->model;
    int D = m->cfg.hidden_size, n = 0, n_sampled = 0;
    float *dst[LOGIT_ROWS];
    for (int b = 0; b < n_items; b++) {
        int first = items[b].logits ? items[b].logits_from : items[b].n_tokens;
        if (items[b].sample && first > items[b].n_tokens - 1)
            first = items[b].n_tokens - 1;
        for (int t = first; t < items[b].n_tokens; t++) {
            float *d = logits_dst(e, &items[b], t, &n_sampled);
            if (!d)
                continue;
            if (n == LOGIT_ROWS) {
                flush_logits(e, dst, n);
                n = 0;
            }
            k_rmsnorm(e->x + (size_t)(row_start[b] + t) * D, m->final_norm, D, m->cfg.norm_eps,
                      e->logit_rows + (size_t)n * D);
            dst[n++] = d;
        }
    }
    if (n > 0)
        flush_logits(e, dst, n);
}

/* Sample slots on the CPU: the sampler itself on the sampled rows. */
static void sample_on_host(mhla_engine *e, mhla_batch_item *items, int n_items)
{
    int V = e->model->cfg.vocab_size, n_sampled = 0;
    for (int b = 0; b < n_items; b++) {
        mhla_sample_slot *sl = items[b].sample;
        if (!sl)
            continue;
        const float *row = logits_dst(e, &items[b], items[b].n_tokens - 1, &n_sampled);
        sl->status = 0;
        if (mhla_sampler_next(sl->sampler, row, &sl->token, &sl->err) ||
            (sl->n_top >= 0 &&
             mhla_logprobs(row, V, sl->token, sl->n_top, &sl->token_logprob, sl->top, &sl->err)))
            sl->status = -1;
    }
}

static int ensure_sample_rows(mhla_engine *e, const mhla_batch_item *items, int n_items,
                              mhla_error *err)
{
    int n = 0;
    for (int b = 0; b < n_items; b++)
        n += items[b].sample && !(items[b].logits && items[b].logits_from < items[b].n_tokens);
    if (n <= e->sample_cap)
        return 0;
    float *p = realloc(e->sample_rows, (size_t)n * e->model->cfg.vocab_size * sizeof(float));
    if (!p)
        return mhla_fail(err, "out of memory for sampled logits");
    e->sample_rows = p;
    e->sample_cap = n;
    return 0;
}

int mhla_engine_forward(mhla_engine *e, mhla_batch_item *items, int n_items, mhla_error *err)
{
    const mhla_model *m = e->model;
    const mhla_config *c = &m->cfg;
    int T = 0;
    if (n_items < 0 || (n_items > 0 && !items))
        return mhla_fail(err, "bad batch");
    if (validate(e, items, n_items, &T, err))
        return -1;
    if (T == 0)
        return 0;
    for (int b = 0; b < n_items; b++) {
        mhla_seq *s = items[b].seq;
        if (mhla_seq_reserve_pages(s, (mhla_seq_pos(s) + items[b].n_tokens) / c->chunk_size, err))
            return -1;
    }
    if (e->cuda) {
        if (mhla_device_forward(e->cuda, items, n_items, err))
            return -1;
        for (int b = 0; b < n_items; b++)
            kv_seq_advance(items[b].seq->kv, items[b].tokens, items[b].n_tokens);
        return 0;
    }
    if (ensure_capacity(e, T, err) || ensure_sample_rows(e, items, n_items, err))
        return -1;
    int *row_start = malloc(((size_t)n_items + 1) * sizeof *row_start);
    if (!row_start)
        return mhla_fail(err, "out of memory");
    int D = c->hidden_size, t = 0;
    for (int b = 0; b < n_items; b++) {
        row_start[b] = t;
        for (int i = 0; i < items[b].n_tokens; i++, t++) {
            e->row_item[t] = b;
            memcpy(e->x + (size_t)t * D, m->embeddings + (size_t)items[b].tokens[i] * D,
                   (size_t)D * sizeof(float));
        }
    }
    row_start[n_items] = t;
    for (int l = 0; l < c->num_layers; l++)
        layer_forward(e, l, items, n_items, T, row_start);
    compute_logits(e, items, n_items, row_start);
    sample_on_host(e, items, n_items);
    /* Advances each sequence and publishes the blocks it closed to the
     * prefix cache: serial, after the parallel mixer is done with the pool. */
    for (int b = 0; b < n_items; b++)
        kv_seq_advance(items[b].seq->kv, items[b].tokens, items[b].n_tokens);
    free(row_start);
    return 0;
}

kv_pool *mhla_engine_state_pool(const mhla_engine *e) { return e->pool; }
mhla_cuda *mhla_engine_cuda(const mhla_engine *e) { return e->cuda; }
mhla_device mhla_engine_device(const mhla_engine *e)
{
    return e->cuda ? MHLA_DEVICE_CUDA : MHLA_DEVICE_CPU;
}
const char *mhla_engine_device_name(const mhla_engine *e) { return e->device_name; }
const char *mhla_engine_device_note(const mhla_engine *e) { return e->device_note; }
const char *mhla_engine_cpu_isa(const mhla_engine *e)
{
    (void)e;
    return k_isa_name();
}
const char *mhla_engine_cpu_note(const mhla_engine *e) { return e->cpu_note; }
size_t mhla_engine_device_bytes(const mhla_engine *e)
{
    return e->cuda ? mhla_cuda_bytes(e->cuda) : 0;
}
const mhla_model *mhla_engine_model(const mhla_engine *e) { return e->model; }

size_t mhla_engine_step_weight_bytes(const mhla_engine *e)
{
    const mhla_model *m = e->model;
    const mhla_config *c = &m->cfg;
    size_t D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    if (!e->cuda) {
        size_t n = mhla_model_weight_bytes(m);
        /* a step gathers a few embedding rows, unless the head is the table */
        return m->lm_head.f32 == m->embeddings ? n : n - V * D * 4;
    }
    size_t qd = (size_t)c->num_heads * c->head_k_dim, kd = (size_t)c->num_kv_heads * c->head_k_dim;
    size_t vd = (size_t)c->num_kv_heads * c->head_v_dim, od = (size_t)c->num_heads * c->head_v_dim;
    size_t gate = m->layers[0].wg.f32 || m->layers[0].wg.bf16 ? od : 0;
    size_t per_layer = (qd + kd + vd + gate) * D + D * od + 3 * I * D;
    return ((size_t)c->num_layers * per_layer + V * D) * e->gpu_weight_elem;
}

typedef struct {
    const float *a;
    size_t part;
    volatile float sink;
} read_job;

static void read_part(void *ctx, int t)
{
    read_job *j = ctx;
    const float *p = j->a + (size_t)t * j->part;
    float acc[16] = {0};
    for (size_t i = 0; i + 16 <= j->part; i += 16)
        for (int l = 0; l < 16; l++)
            acc[l] += p[i + l];
    j->sink += acc[0] + acc[15];
}

int mhla_engine_memory_bandwidth(mhla_engine *e, double *bytes_per_s, mhla_error *err)
{
    if (e->cuda) {
        char cerr[MHLA_CUDA_ERR];
        if (mhla_cuda_copy_bandwidth(e->cuda, bytes_per_s, cerr))
            return mhla_fail(err, "%s", cerr);
        return 0;
    }
    /* The CPU streams weights, it does not copy them: read 256 MiB with the
     * engine's threads, as its sweeps over the weights do. */
    size_t n = (256u << 20) / sizeof(float);
    float *a = malloc(n * sizeof(float));
    if (!a)
        return mhla_fail(err, "out of memory for the bandwidth measurement");
    for (size_t i = 0; i < n; i++)
        a[i] = (float)(i & 7);
    int nt = e->n_threads;
    size_t part = n / (size_t)nt;
    read_job rj = {a, part, 0};
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        tp_run(e->workers, nt, read_part, &rj);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
        double bw = s > 0 ? (double)(part * (size_t)nt) * sizeof(float) / s : 0;
        best = bw > best ? bw : best;
    }
    free(a);
    *bytes_per_s = best;
    return 0;
}

void mhla_engine_device_stats(const mhla_engine *e, mhla_device_stats *out)
{
    memset(out, 0, sizeof *out);
    if (e->cuda)
        mhla_cuda_stats(e->cuda, &out->steps, &out->graph_captures, &out->graph_replays);
}
