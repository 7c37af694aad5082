/*
 * forward.c — the CPU backend's forward pass: one engine step over a batch
 * of sequences (docs/model.md, Forward pass), top to bottom: embeddings, then per layer the
 * norms, projections, token mixer and MLP, then the logits rows asked for
 * (the engine chooses tokens from them: step_choose.c).
 *
 * All tokens of the step, whatever sequence they belong to, go through the
 * norms, projections and MLP together as rows of one matrix; only the token
 * mixer looks at sequences, each with its own recurrent state. Row arithmetic
 * never depends on the other rows (see cpu/kernels.h), so a sequence's logits
 * are the same bits alone or in any batch.
 */
#include "cpu_backend.h"
#include "kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int grow(float **p, size_t n, mhla_error *err)
{
    float *np = realloc(*p, n * sizeof(float));
    if (!np)
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory for %zu activation values", n);
    *p = np;
    return 0;
}

/* With q8 weights, the quantized rows of the step's widest product in both
 * of the pool's slots, now (with bf16-dot weights, the rounded rows): a
 * product whose rows could not be allocated half-way through a step would
 * leave the sequences' state changed. */
static int reserve_q8_rows(eng_cpu *e, int T, mhla_error *err)
{
    const mhla_config *c = &e->model->cfg;
    int bd = e->model->layers[0].wq.bf16_dot || e->model->lm_head.bf16_dot;
    if (!e->model->layers[0].wq.q8 && !e->model->lm_head.q8 && !bd)
        return 0;
    int K = c->hidden_size;
    K = c->intermediate_size > K ? c->intermediate_size : K;
    K = c->num_heads * c->head_v_dim > K ? c->num_heads * c->head_v_dim : K;
    size_t bytes = bd ? k_bd_rows_bytes(T, K) : k_q8_rows_bytes(T, K);
    if (!tp_scratch(e->workers, K_Q8_SLOT_LINEAR, bytes) ||
        !tp_scratch(e->workers, K_Q8_SLOT_PROD, bytes))
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory for %d rows' quantized activations",
                           T);
    return 0;
}

static int ensure_capacity(eng_cpu *e, int T, mhla_error *err)
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
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
    e->row_item = ri;
    if (reserve_q8_rows(e, T, err))
        return -1;
    e->cap = T;
    return 0;
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

static void rmsnorm_rows(eng_cpu *e, const float *x, const float *w, float *out, int T)
{
    rmsnorm_job j = {&e->model->cfg, x, w, out};
    tp_run(T > 16 ? e->workers : NULL, T, rmsnorm_row, &j);
}

static void add_rows(float *x, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] += y[i];
}

void eng_swiglu_cols(void *ctx, int c0, int c1)
{
    const eng_swiglu_job *j = ctx;
    for (int t = 0; t < j->T; t++) {
        float *g = j->gate + (size_t)t * j->I;
        k_silu_mul(g + c0, j->up + (size_t)t * j->I + c0, g + c0, c1 - c0);
    }
}

static void layer_forward(eng_cpu *e, int l, mhla_batch_item *items, int n_items, int T,
                          const int *row_start)
{
    const mhla_config *c = &e->model->cfg;
    const eng_layer *ly = &e->model->layers[l];
    int D = c->hidden_size, I = c->intermediate_size;
    tp_pool *nt = e->workers;
    int od = c->num_heads * c->head_v_dim;

    rmsnorm_rows(e, e->x, ly->attn_norm, e->h, T);
    eng_cpu_token_mixer(e, l, items, n_items, T, row_start);
    k_linear(e->att, T, od, ly->wo, D, e->h, D, nt);
    add_rows(e->x, e->h, (size_t)T * D);

    rmsnorm_rows(e, e->x, ly->mlp_norm, e->h, T);
    /* gate and up in one job, silu(gate) * up in its tasks */
    k_matrix wgu[2] = {ly->w_gate, ly->w_up};
    float *ygu[2] = {e->gate, e->up};
    eng_swiglu_job sw = {e->gate, e->up, T, I};
    k_linear_pair(e->h, T, D, wgu, I, ygu, I, eng_swiglu_cols, &sw, nt);
    k_linear(e->gate, T, I, ly->w_down, D, e->h, D, nt);
    add_rows(e->x, e->h, (size_t)T * D);
}

/* Final norm and lm_head for the requested rows, MHLA_LOGIT_ROWS at a time. */
static void flush_logits(eng_cpu *e, float **dst, int n)
{
    const mhla_model *m = e->model;
    int V = m->cfg.vocab_size;
    k_linear(e->logit_rows, n, m->cfg.hidden_size, m->lm_head, V, e->logit_buf, V, e->workers);
    for (int r = 0; r < n; r++)
        memcpy(dst[r], e->logit_buf + (size_t)r * V, (size_t)V * sizeof(float));
}

static void compute_logits(eng_cpu *e, mhla_batch_item *items, int n_items, const int *row_start)
{
    const mhla_model *m = e->model;
    int D = m->cfg.hidden_size, V = m->cfg.vocab_size, n = 0;
    float *dst[MHLA_LOGIT_ROWS];
    for (int b = 0; b < n_items; b++) {
        if (!items[b].logits)
            continue;
        for (int t = items[b].logits_from; t < items[b].n_tokens; t++) {
            if (n == MHLA_LOGIT_ROWS) {
                flush_logits(e, dst, n);
                n = 0;
            }
            k_rmsnorm(e->x + (size_t)(row_start[b] + t) * D, m->final_norm, D, m->cfg.norm_eps,
                      e->logit_rows + (size_t)n * D);
            dst[n++] = items[b].logits + (size_t)(t - items[b].logits_from) * V;
        }
    }
    if (n > 0)
        flush_logits(e, dst, n);
}

int eng_cpu_forward(void *ctx, mhla_batch_item *items, int n_items, mhla_error *err)
{
    eng_cpu *e = ctx;
    const mhla_model *m = e->model;
    const mhla_config *c = &m->cfg;
    int T = 0;
    for (int b = 0; b < n_items; b++)
        T += items[b].n_tokens;
    if (ensure_capacity(e, T, err))
        return -1;
    int *row_start = malloc(((size_t)n_items + 1) * sizeof *row_start);
    if (!row_start)
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
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
    free(row_start);
    return 0;
}
