/*
 * sample.cuh — device sampling's descriptors (sample.cu reads them, forward.cu
 * fills them).
 */
#ifndef MHLA_CUDA_SAMPLE_CUH
#define MHLA_CUDA_SAMPLE_CUH

#include "kernels.cuh"

namespace eng_gpu
{

/* One sampled row. */
struct sample_desc {
    int row; /* in the step's logits */
    int top_k, n_top;
    float temperature, top_p, min_p, repetition, presence, frequency;
    double u; /* the host's uniform draw */
    int pen0, n_pen;
    int bias0, n_bias;
    int mask_row; /* its allowed-id bitmask in the step's masks, or -1: none */
};

/* A penalised id: its generated count, bit 30 set when it was in the prompt. */
struct sample_pen {
    int id, count;
};

struct sample_bias {
    int id;
    float bias;
};

struct sample_result {
    int status, token, nan_id; /* status 0; -1 a NaN logit (nan_id); -2 the mask allows no id */
    float token_lp;
    int top_id[MHLA_MAX_TOP_LOGPROBS];
    float top_lp[MHLA_MAX_TOP_LOGPROBS];
};

/* masks: the step's bitmasks, (V + 63) / 64 words a row (sample_desc.mask_row). */
void k_sample(const float *logits, int V, float *adj, const sample_desc *descs, int n,
              const sample_pen *pens, const sample_bias *biases, const unsigned long long *masks,
              sample_result *results, cudaStream_t st);

} // namespace eng_gpu

#endif
