/*
 * mhla_cuda.h — the CUDA code's C interface: what the engine's CUDA backend
 * (ops.c) asks of the CUDA C++ side.
 *
 * The engine keeps the bookkeeping (validation, kvstate's page tables,
 * prefix cache, admission) and hands the backend plain descriptors: device
 * pointers of each sequence's buffers and pages, tokens, positions. The
 * backend holds the weights on the GPU and runs whole steps there. Built
 * two ways: by nvcc (a GPU), or by g++ against tests/cudasim (the same
 * kernels on the CPU, for tests without a GPU); a build without CUDA has
 * neither, and the engine no CUDA backend.
 *
 * Every function that can fail returns 0 or -1 with a one-line message in
 * err (MHLA_CUDA_ERR bytes).
 */
#ifndef MHLA_CUDA_API_H
#define MHLA_CUDA_API_H

#include "engine.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MHLA_CUDA_ERR 512

typedef struct eng_cuda eng_cuda;

/* A host matrix [rows, cols], row-major: exactly one of f32 / bf16 is set. */
typedef struct {
    const float *f32;
    const uint16_t *bf16;
} eng_cuda_hmat;

typedef struct {
    const float *attn_norm, *g_norm, *mlp_norm;             /* g_norm [dv] */
    const float *mix;                                       /* [Lm, Lm], clamped */
    eng_cuda_hmat wq, wk, wv, wg, wo, w_gate, w_up, w_down; /* wg: both NULL without gate */
} eng_cuda_layer_src;

typedef struct {
    const mhla_config *cfg;
    const float *embeddings; /* [V, D] */
    const float *final_norm;
    eng_cuda_hmat lm_head; /* [V, D] */
    int lm_head_tied;      /* lm_head is the embedding matrix: one copy on the GPU */
    const eng_cuda_layer_src *layers;
    const float *rope_cos, *rope_sin; /* [max_positions, dk/2] */
    float q_scale;
} eng_cuda_model_src;

typedef struct {
    int device_index;
    mhla_gpu_weights weights;
    int state_bf16; /* pages hold bf16 */
    int no_graphs;
} eng_cuda_options;

/* 0 when a usable device exists; otherwise -1 and why (no driver, no GPU). */
int eng_cuda_probe(int device_index, char *why);
int eng_cuda_create(const eng_cuda_model_src *src, const eng_cuda_options *opt, eng_cuda **out,
                    char *err);
void eng_cuda_free(eng_cuda *g);
const char *eng_cuda_name(const eng_cuda *g);

void eng_cuda_stats(const eng_cuda *g, uint64_t *steps, uint64_t *captures, uint64_t *replays);
/* The device's free and total memory now (cudaMemGetInfo). */
int eng_cuda_mem_info(eng_cuda *g, size_t *free_bytes, size_t *total_bytes, char *err);
/* Device-to-device copy bandwidth, bytes read + written per second. */
int eng_cuda_copy_bandwidth(eng_cuda *g, double *bytes_per_s, char *err);

/* kvstate's memory hooks (kv_memory), ctx = the backend. */
void *eng_cuda_mem_alloc(void *ctx, size_t bytes);
void eng_cuda_mem_release(void *ctx, void *p);
/* dir: 0 to host, 1 from host, 2 within the device (kv_copy_dir). */
int eng_cuda_mem_copy(void *ctx, void *dst, const void *src, size_t bytes, int dir);

/* Sampling a sequence's next token on the device (engine.h's
 * mhla_sample_slot, unpacked by the engine). */
typedef struct {
    float temperature, top_p, min_p, repetition, presence, frequency;
    int top_k, n_top;          /* n_top -1: no logprobs */
    double u;                  /* the uniform the host sampler would draw */
    const int32_t *pen_ids;    /* ids the penalties touch */
    const int32_t *pen_counts; /* their generated counts; bit 30: seen in the prompt */
    int n_pen;
    const mhla_logit_bias *bias;
    int n_bias;
    const uint64_t *mask; /* NULL, or the allowed ids: bit i of word i / 64, (V + 63) / 64 words */
    int status, nan_id;   /* out: 0; -1 and the id of a NaN logit; -2 the mask allows no id */
    int32_t token;
    float token_logprob;
    mhla_logprob top[MHLA_MAX_TOP_LOGPROBS];
} eng_cuda_sample;

/* One sequence's part of a step. Buffers are the kvstate ones (device). */
typedef struct {
    int pos;      /* position of tokens[0] */
    int n_tokens; /* >= 1 */
    const int32_t *tokens;
    int logits_from;
    float *logits;           /* host, (n_tokens - logits_from) * V; NULL: none (with sample) */
    eng_cuda_sample *sample; /* NULL, or sample the token after the last position */
    float *prefix;           /* P_i [L][Hkv][dk*dv] */
    float *prefix_k;         /* [L][Hkv][dk] or NULL */
    float *cur_k;            /* [L][Hkv][C][dk] */
    float *cur_v;            /* [L][Hkv][C][dv] */
    void *const *pages;      /* host array: device storage of blocks 0 .. n_pages-1 */
    int n_pages;
} eng_cuda_item;

/* One step over all items; every page a closing block needs exists. On a
 * device fault the backend refuses every later call. */
int eng_cuda_forward(eng_cuda *g, const eng_cuda_item *items, int n_items, char *err);
/* Recomputes P_i (and its key-sum part) of a sequence attached mid-block,
 * from its pages (item.pos is the position; tokens/logits unused). */
int eng_cuda_restore_prefix(eng_cuda *g, const eng_cuda_item *item, char *err);

#ifdef __cplusplus
}
#endif
#endif
