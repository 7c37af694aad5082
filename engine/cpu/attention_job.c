/*
 * attention_job.c — the first half of a layer on the CPU: the q, k, v (and g)
 * projections, φ and the rotary embedding, the token mixer and its output
 * norm (docs/model.md, Forward pass), from the normed rows in e->h to the
 * mixed rows in e->att.
 *
 * Two ways to run it, the same bits either way:
 *   - in turn: one job of the pool for the products, then one for φ and
 *     rotary, then one for the mixer, with a wait for the slowest thread
 *     after each;
 *   - as one job, from 16 sequences a step (attention_as_job below): the
 *     products cut by kv head, and a sequence's mixer unit for a head
 *     started as soon as that head's products are done, while the other
 *     threads go on with the next heads' products. The products are bound by
 *     compute there and the mixer by memory (it reads each sequence's P_i
 *     and block rows, 11.5 MB a layer at batch 16 of the 340M shape), so a
 *     thread streaming state beside one computing does both in less time
 *     than both threads doing one and then the other (bench/RESULTS.md).
 */
#include "cpu_backend.h"
#include "kernels.h"

#include <sched.h>
#include <stdatomic.h>
#include <string.h>

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
    eng_cpu *e;
    const mhla_batch_item *items;
    const int *row_start;
    const eng_layer *ly;
    int layer;
} step_job;

/* φ, rotary and (for q) the scale on token row t: query heads [h0, h1) and
 * kv heads [g0, g1). */
static void prepare_qk_heads(const step_job *sj, int t, int h0, int h1, int g0, int g1)
{
    eng_cpu *e = sj->e;
    const mhla_model *m = e->model;
    const mhla_config *c = &m->cfg;
    int dk = c->head_k_dim, H = c->num_heads, Hkv = c->num_kv_heads;
    int b = e->row_item[t];
    int pos = mhla_seq_pos(sj->items[b].seq) + (t - sj->row_start[b]);
    for (int j = h0; j < h1; j++) {
        float *q = e->q + (size_t)t * H * dk + (size_t)j * dk;
        feature_map(c->feature_map, q, dk);
        rope(m, pos, q, dk);
        for (int a = 0; a < dk; a++)
            q[a] *= m->q_scale;
    }
    for (int j = g0; j < g1; j++) {
        float *k = e->k + (size_t)t * Hkv * dk + (size_t)j * dk;
        feature_map(c->feature_map, k, dk);
        rope(m, pos, k, dk);
    }
}

static void prepare_qk_row(void *ctx, int t)
{
    const step_job *sj = ctx;
    const mhla_config *c = &sj->e->model->cfg;
    prepare_qk_heads(sj, t, 0, c->num_heads, 0, c->num_kv_heads);
}

/* o = RMSNorm_dv(o) * w, times swish(g) with the output gate: head j of row t. */
static void output_norm(eng_cpu *e, const eng_layer *ly, int t, int j)
{
    const mhla_config *c = &e->model->cfg;
    int H = c->num_heads, dv = c->head_v_dim;
    float *o = e->att + ((size_t)t * H + j) * dv;
    k_rmsnorm(o, ly->g_norm, dv, c->norm_eps, o);
    if (k_matrix_present(ly->wg))
        k_silu_mul(e->g + ((size_t)t * H + j) * dv, o, o, dv);
}

/* The mixer of unit u (sequence u / Hkv, kv head u % Hkv) and the output norm of its heads. */
static void token_mixer_unit(void *ctx, int u)
{
    const step_job *sj = ctx;
    eng_cpu *e = sj->e;
    const mhla_batch_item *items = sj->items;
    const int *row_start = sj->row_start;
    const mhla_config *c = &e->model->cfg;
    int Hkv = c->num_kv_heads;
    size_t qs = (size_t)c->num_heads * c->head_k_dim, ks = (size_t)Hkv * c->head_k_dim;
    size_t vs = (size_t)Hkv * c->head_v_dim, os = (size_t)c->num_heads * c->head_v_dim;
    int b = u / Hkv, g = u % Hkv;
    size_t r0 = (size_t)row_start[b];
    eng_token_mixer_io io = {
        .q = e->q + r0 * qs,
        .q_stride = (int)qs,
        .k = e->k + r0 * ks,
        .k_stride = (int)ks,
        .v = e->v + r0 * vs,
        .v_stride = (int)vs,
        .out = e->att + r0 * os,
        .out_stride = (int)os,
        .n = items[b].n_tokens,
    };
    eng_token_mixer_run(items[b].seq, sj->layer, g, &io);
    int group = c->num_heads / Hkv;
    for (int t = row_start[b]; t < row_start[b + 1]; t++)
        for (int j = g * group; j < (g + 1) * group; j++)
            output_norm(e, sj->ly, t, j);
}

/* ---- in turn ---- */

static void attention_in_turn(eng_cpu *e, const step_job *sj, int n_items, int T)
{
    const mhla_config *c = &e->model->cfg;
    const eng_layer *ly = sj->ly;
    int qd = c->num_heads * c->head_k_dim, kd = c->num_kv_heads * c->head_k_dim;
    int vd = c->num_kv_heads * c->head_v_dim, od = c->num_heads * c->head_v_dim;
    /* q, k, v (and g) in one job of the pool */
    k_matrix w[4] = {ly->wq, ly->wk, ly->wv, ly->wg};
    int n[4] = {qd, kd, vd, od};
    float *y[4] = {e->q, e->k, e->v, e->g};
    (void)k_linear_multi(e->h, T, c->hidden_size, w, n, y, n, k_matrix_present(ly->wg) ? 4 : 3,
                         e->workers);
    tp_run(T > 8 ? e->workers : NULL, T, prepare_qk_row, (void *)sj);
    /* a step too small to be worth waking threads for (a small model's
     * decode): q~ᵀ P_i, the bulk of the mixer's work, under 64K products */
    long work = (long)T * c->num_heads * c->head_k_dim * c->head_v_dim;
    tp_run(work >= 64L * 1024 ? e->workers : NULL, n_items * c->num_kv_heads, token_mixer_unit,
           (void *)sj);
}

/* ---- as one job ---- */

/* From this many sequences in a step the attention runs as one job: at batch
 * 16 the attention took 0.4-2.8 ms less a step on both x86 paths and all
 * weight formats, and whole steps ran at 0.98-1.08 times the in-turn speed; batch
 * 1-8 and one sequence's prefill (4 mixer units a layer) measured no gain. */
#define ATTN_JOB_MIN_SEQS 16
#define ATTN_MAX_KV_HEADS 256

typedef struct {
    step_job sj;
    const k_prod *prod;
    int Hkv, n_items, n_parts;
    int per_head; /* product tasks per kv head */
    int mix_max;  /* threads on the mixer at once while products remain */
    k_matrix w[4];
    float *y[4];
    int ld[4], cols[4], step[4]; /* a head's columns in each matrix; k_prod_step */
    _Atomic int prod_next, mix_next, mix_busy;
    _Atomic int prod_done[ATTN_MAX_KV_HEADS];
} attention_job;

/* Product task p: piece p % per_head of kv head p / per_head's columns,
 * counted over the matrices one after the other. */
static void job_products(attention_job *j, int p)
{
    int g = p / j->per_head, s = p % j->per_head, total = 0;
    for (int i = 0; i < j->n_parts; i++)
        total += j->cols[i];
    int a = (int)((long)total * s / j->per_head), b = (int)((long)total * (s + 1) / j->per_head);
    for (int i = 0, base = 0; i < j->n_parts; base += j->cols[i++]) {
        int lo = a > base ? a - base : 0, hi = b - base < j->cols[i] ? b - base : j->cols[i];
        /* whole steps of the storage (q8's 16-row blocks); a head's columns are whole steps */
        lo = (lo + j->step[i] - 1) / j->step[i] * j->step[i];
        hi = hi == j->cols[i] ? hi : (hi + j->step[i] - 1) / j->step[i] * j->step[i];
        if (lo < hi)
            k_prod_cols(j->prod, j->w[i], g * j->cols[i] + lo, g * j->cols[i] + hi, j->y[i],
                        j->ld[i]);
    }
}

/* Mixer unit m (kv head m / n_items, sequence m % n_items): φ and rotary on
 * its rows and heads, then the mixer and the output norm. */
static void job_mixer(attention_job *j, int m)
{
    const mhla_config *c = &j->sj.e->model->cfg;
    int g = m / j->n_items, b = m % j->n_items, group = c->num_heads / c->num_kv_heads;
    for (int t = j->sj.row_start[b]; t < j->sj.row_start[b + 1]; t++)
        prepare_qk_heads(&j->sj, t, g * group, (g + 1) * group, g, g + 1);
    token_mixer_unit(&j->sj, b * j->Hkv + g);
}

static void wait_done(_Atomic int *done, int want)
{
    /* the holder is running a product task (~10-100 µs): spin, then give the CPU away */
    for (int spin = 0; atomic_load_explicit(done, memory_order_acquire) < want; spin++)
        if (spin >= 1000)
            sched_yield();
}

/* Each thread of the job: a mixer unit whose head's products are done, while
 * fewer than mix_max threads are on the mixer; else the next product task;
 * once all products are handed out, the mixer units left, in order. */
static void job_thread(void *ctx, int task)
{
    (void)task;
    attention_job *j = ctx;
    int n_prod = j->Hkv * j->per_head, n_mix = j->Hkv * j->n_items;
    for (;;) {
        int m = atomic_load(&j->mix_next);
        if (m >= n_mix)
            return;
        int ready = atomic_load_explicit(&j->prod_done[m / j->n_items], memory_order_acquire) ==
                    j->per_head;
        int products_left = atomic_load(&j->prod_next) < n_prod;
        if (ready && (!products_left || atomic_load(&j->mix_busy) < j->mix_max)) {
            if (!atomic_compare_exchange_weak(&j->mix_next, &m, m + 1))
                continue;
            atomic_fetch_add(&j->mix_busy, 1);
            job_mixer(j, m);
            atomic_fetch_sub(&j->mix_busy, 1);
            continue;
        }
        if (products_left) {
            int p = atomic_fetch_add(&j->prod_next, 1);
            if (p < n_prod) {
                job_products(j, p);
                atomic_fetch_add_explicit(&j->prod_done[p / j->per_head], 1, memory_order_release);
                continue;
            }
        }
        /* every product handed out, unit m's head still being computed */
        wait_done(&j->prod_done[m / j->n_items], j->per_head);
    }
}

/* Runs the attention as one job; 0 when it did, -1 when this step or model
 * takes the in-turn form (one thread, fewer than ATTN_JOB_MIN_SEQS sequences
 * unless MHLA_ATTENTION_JOB=always, a kv head's columns not whole blocks of
 * q8 rows, out of memory for the quantized rows). */
static int attention_as_job(eng_cpu *e, const step_job *sj, int n_items, int T)
{
    const mhla_config *c = &e->model->cfg;
    const eng_layer *ly = sj->ly;
    int threads = tp_threads(e->workers), Hkv = c->num_kv_heads, grp = c->num_heads / Hkv;
    if (e->attention_job == MHLA_ATTN_JOB_NEVER || threads < 2 || Hkv > ATTN_MAX_KV_HEADS ||
        (e->attention_job == MHLA_ATTN_JOB_AUTO && n_items < ATTN_JOB_MIN_SEQS))
        return -1;
    attention_job j = {.sj = *sj, .Hkv = Hkv, .n_items = n_items};
    j.n_parts = k_matrix_present(ly->wg) ? 4 : 3;
    k_matrix w[4] = {ly->wq, ly->wk, ly->wv, ly->wg};
    float *y[4] = {e->q, e->k, e->v, e->g};
    int cols[4] = {grp * c->head_k_dim, c->head_k_dim, c->head_v_dim, grp * c->head_v_dim};
    int prep = 0;
    for (int i = 0; i < j.n_parts; i++) {
        j.w[i] = w[i];
        j.y[i] = y[i];
        j.cols[i] = cols[i];
        j.ld[i] = cols[i] * Hkv;
        j.step[i] = k_prod_step(w[i]);
        prep |= w[i].q8 ? K_PROD_Q8 : w[i].bf16_dot ? K_PROD_BD : 0;
        if (cols[i] % j.step[i])
            return -1;
    }
    j.per_head = 2 * threads;
    j.mix_max = threads / 2; /* the counters start at 0 with j's initializer */
    k_prod prod;
    if (k_prod_begin(&prod, e->h, T, c->hidden_size, prep, e->workers))
        return -1;
    j.prod = &prod;
    /* loops: run alone, one after the other (the pool's threads reduced), the
     * first does every unit and the others find none left */
    tp_run_loops(e->workers, threads, job_thread, &j);
    k_prod_end(&prod);
    return 0;
}

void eng_cpu_token_mixer(eng_cpu *e, int layer, const mhla_batch_item *items, int n_items, int T,
                         const int *row_start)
{
    step_job sj = {.e = e,
                   .items = items,
                   .row_start = row_start,
                   .ly = &e->model->layers[layer],
                   .layer = layer};
    if (attention_as_job(e, &sj, n_items, T))
        attention_in_turn(e, &sj, n_items, T);
}
