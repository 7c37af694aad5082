/*
 * cpu_backend.h — what the CPU backend's own files share (private to
 * engine/cpu): its state, the forward pass (forward.c), the attention job
 * (attention_job.c), the token mixer (token_mixer.c) and the products-only
 * pass (product_rate.c). The engine's core sees the backend only through its
 * table, eng_cpu_backend (backend.c; engine/backend.h).
 */
#ifndef MHLA_ENGINE_CPU_BACKEND_H
#define MHLA_ENGINE_CPU_BACKEND_H

#include "engine_internal.h"
#include "kernels.h"

typedef struct {
    const mhla_model *model;
    int n_threads;
    tp_pool *workers;    /* the CPU threads of a step, the caller's included */
    char cpu_note[1200]; /* the kernels' instruction-set path and the thread count, and why */
    int cap;             /* token rows the scratch buffers hold */
    float *x, *h, *q, *k, *v, *g, *att, *up, *gate;
    float *logit_rows, *logit_buf;
    int *row_item; /* which batch item each token row belongs to */
    /* the bandwidth measurement's buffer, made on its first call and kept, so
     * that single readings can alternate with steps (bench_decode) */
    float *bw_mem, *bw_sums;
    size_t bw_part; /* floats per task */
    /* when the attention runs as one job (attention_job.c; MHLA_ATTENTION_JOB) */
    enum { MHLA_ATTN_JOB_AUTO, MHLA_ATTN_JOB_ALWAYS, MHLA_ATTN_JOB_NEVER } attention_job;
} eng_cpu;

/* Rows of final hidden states turned into logits per lm_head call. */
#define MHLA_LOGIT_ROWS 64

/* gate = silu(gate) * up on columns [c0, c1) of each of T rows of I (ctx: an
 * eng_swiglu_job): the epilogue of the job that computes those columns of
 * gate and up (forward.c; the products-only pass runs it as a step does). */
typedef struct {
    float *gate;
    const float *up;
    int T, I;
} eng_swiglu_job;
void eng_swiglu_cols(void *ctx, int c0, int c1);

/* One validated step on the CPU (the backend's forward). */
int eng_cpu_forward(void *ctx, mhla_batch_item *items, int n_items, mhla_error *err);

/* The products of one batch-1 step alone, or its head alone, timed
 * (product_rate.c; the backend's product_pass): *seconds, and *bytes the
 * weight bytes they read. */
int eng_cpu_product_pass(void *ctx, mhla_products which, double *seconds, double *bytes,
                         mhla_error *err);

/* The first half of layer `layer` on the CPU (attention_job.c): from the normed
 * rows in e->h, the q, k, v, g projections, the token mixer and its output
 * norm, into e->att. */
void eng_cpu_token_mixer(eng_cpu *e, int layer, const mhla_batch_item *items, int n_items, int T,
                         const int *row_start);

/* Runs the token mixer of one layer and one kv head over a run of n tokens of
 * one sequence, starting at its position (which it does not advance).
 * q: [n][q_stride] (head rows at q + j*dk), k, v likewise; out: [n][o_stride]. */
typedef struct {
    const float *q;
    int q_stride;
    const float *k;
    int k_stride;
    const float *v;
    int v_stride;
    float *out;
    int out_stride;
    int n;
} eng_token_mixer_io;

void eng_token_mixer_run(mhla_seq *seq, int layer, int kv_head, const eng_token_mixer_io *io);

/* Recomputes P_i from the pages after the state was attached mid-block (a
 * resume or a snapshot): the mixer (token_mixer.c) itself mixes only at a block's first token. */
void eng_token_mixer_restore_prefix(mhla_seq *seq);

#endif
