/*
 * state.h — the CUDA backend's state (device.cu creates it, forward.cu
 * runs steps on it). C++ only.
 */
#ifndef MHLA_CUDA_STATE_H
#define MHLA_CUDA_STATE_H

#include "sample.cuh"

namespace eng_gpu
{

struct dev_layer {
    void *w_qkvg; /* [qd+kd+vd+od, D]: q, k, v and gate rows in one product */
    void *wo;     /* [D, od] */
    void *w_gu;   /* [2I, D]: gate rows, then up rows */
    void *w_down; /* [D, I] */
    float *attn_norm, *g_norm, *mlp_norm;
    float *mix; /* points into mix_all */
};

/* A captured decode step for n sequences of one token each. */
struct graph_entry {
    int n;
    cudaGraphExec_t exec;
    unsigned long long last_used;
};

constexpr int MAX_GRAPHS = 32;

/* Step descriptors: one device buffer, mirrored by one pinned host buffer,
 * carved into arrays at fixed offsets (fixed while capacities stay, so
 * graphs can keep pointing at them). */
struct step_bufs {
    int cap_T, cap_R, cap_seg, cap_items, cap_pages, cap_samp, cap_pen, cap_bias;
    int cap_mask; /* masked sampled rows: (V + 63) / 64 words each */
    size_t off_tokens, off_rowpos, off_segs, off_items, off_pages, off_lrows, off_samp, off_pen,
        off_bias, off_mask, off_fblocks, bytes;
    unsigned char *dev, *host;
};

} // namespace eng_gpu

struct eng_cuda {
    mhla_config cfg;
    int dev_index;
    int dt; /* weights and product inputs: DT_* */
    size_t dt_bytes;
    int state_bf16;
    int no_graphs;
    int failed; /* a device fault: every later call is refused */
    char name[400];
    size_t bytes;     /* device memory held for weights */
    size_t buf_bytes; /* ... and for step buffers */

    cudaStream_t stream;
    cublasHandle_t blas;
    void *blas_ws;

    int W;                          /* fused q|k|v|g row width */
    int q_off, k_off, v_off, g_off; /* g_off -1 without output gate */
    void *emb, *lm_head;
    float *final_norm, *rope_cos, *rope_sin, *mix_all;
    eng_gpu::dev_layer *layers; /* host array of device pointers */
    float q_scale;

    /* activations for cap_T rows, logits for cap_R rows */
    int cap_T, cap_R, cap_seg;
    float *x, *y, *qkvg, *att, *gu, *logits;
    void *h;  /* product inputs [cap_T, max(D, od, I)] in dt */
    void *hl; /* [cap_R, D] in dt */
    float *pscr, *pkscr;
    float *logits_host; /* pinned */
    float *sample_adj;  /* [cap_samp, V]: adjusted logits of sampled rows */
    /* whole blocks of a step (prefill): S_b and intra-block scores by products */
    int cap_full, n_full, n_runs;
    float *sscr;   /* [cap_full][Hkv][dk*dv] */
    float *scores; /* [cap_full][H][C][C] */
    /* host: runs of consecutive whole blocks: first full index, first
     * segment, count, first row */
    int *run_f0, *run_s0, *run_n, *run_t0;
    eng_gpu::sample_result *sample_out, *sample_out_host; /* device, pinned */
    eng_gpu::step_bufs sb;

    eng_gpu::graph_entry graphs[eng_gpu::MAX_GRAPHS];
    int n_graphs;
    unsigned long long clock;
    uint64_t steps, captures, replays;
    void **restore_pages; /* device, max_blocks pointers */
};

/* Checks a CUDA runtime call in a function with a char *err. */
#define CU(call, what)                                                                             \
    do {                                                                                           \
        cudaError_t rc_ = (call);                                                                  \
        if (rc_ != cudaSuccess)                                                                    \
            return eng_gpu::fail(err, "CUDA: %s: %s", what, cudaGetErrorString(rc_));              \
    } while (0)

namespace eng_gpu
{
/* Formats err and returns -1. */
int fail(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Drops every captured graph (buffers moved or the backend is going away). */
void drop_graphs(eng_cuda *g);
/* Frees the activation and descriptor buffers. */
void free_buffers(eng_cuda *g);
} // namespace eng_gpu

#endif
