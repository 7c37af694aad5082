/*
 * kernels.cuh — what the CUDA backend's files share with its kernels
 * (kernels.cu): element types, the step descriptors the kernels read, the
 * kernel launchers.
 */
#ifndef MHLA_CUDA_INTERNAL_CUH
#define MHLA_CUDA_INTERNAL_CUH

#include "compat.h"
#include "mhla_cuda.h"

#include <cstddef>
#include <cstdint>

namespace eng_gpu
{

/* Element types of weights and GEMM inputs. */
enum { DT_F32 = 0, DT_BF16 = 1, DT_F16 = 2 };

/* The tokens of one sequence that fall in one block during a step. Rows
 * [t0, t0+n) of the step are that block's rows [r0, r0+n). */
struct seg_desc {
    int item;
    int block;
    int t0, n, r0;
    int final_open; /* the sequence's block still open after the step */
    /* A block an item of at most one block's tokens closes: its rows (and,
     * from its start, its P_i) are kept too, so that a verify step whose
     * drafts are taken back finds the block as one-token steps leave it. */
    int keep_closing;
    /* A whole block of this step's rows (r0 0, n C): its S_b and its
     * intra-block outputs come from matrix products (tensor cores where the
     * weights are bf16/f16), index into the step's full-block scratch; else -1. */
    int full;
};

/* One sequence of the step: its kvstate buffers and where its page
 * pointers start in the step's page table. */
struct item_desc {
    float *prefix, *prefix_k, *cur_k, *cur_v;
    int page0, n_pages;
};

/* What the token-mixer kernels of one layer read. Passed by value: a CUDA
 * graph captures it, and every pointer in it stays valid across replays. */
struct mix_args {
    int dk, dv, C, Lm, H, Hkv, L, layer, normalize, state_bf16;
    int W, q_off, k_off, v_off; /* the fused q|k|v|g row and its parts */
    const float *qkvg;          /* [T, W] after feature map and rotary */
    float *att;                 /* [T, H*dv] */
    const seg_desc *segs;
    int n_seg;
    const item_desc *items;
    void *const *pages;
    const float *mix;  /* this layer's [Lm, Lm] */
    float *pscr;       /* [n_seg][Hkv][dk*dv]: P of blocks started in the step */
    float *pkscr;      /* [n_seg][Hkv][dk] */
    const float *sscr; /* [n_full][Hkv][dk*dv]: S_b of the full blocks (products) */
};

/* ---- kernels.cu: launchers (enqueue on stream; errors surface at sync) ---- */
void k_convert(const void *src, int src_dt, void *dst, int dst_dt, size_t n, cudaStream_t st);
void k_embed(float *x, const void *emb, int dt, const int32_t *tokens, int T, int D,
             cudaStream_t st);
/* x += y (y may be NULL); h = rmsnorm(x) * w, in dtype dt. */
void k_add_norm(float *x, const float *y, const float *w, void *h, int dt, int T, int D, float eps,
                cudaStream_t st);
/* hl[r] = rmsnorm(x[rows[r]] + y[rows[r]]) * w, in dtype dt. */
void k_final_norm(const float *x, const float *y, const int32_t *rows, const float *w, void *hl,
                  int dt, int R, int D, float eps, cudaStream_t st);
void k_qk_prepare(float *qkvg, int W, int q_off, int k_off, const int32_t *rowpos,
                  const float *rope_cos, const float *rope_sin, int T, int H, int Hkv, int dk,
                  int feature_map, float q_scale, cudaStream_t st);
/* ho = RMSNorm_dv(att) * g_norm (* swish(gate) when g_off >= 0), in dtype dt. */
void k_out_norm(const float *att, const float *qkvg, int W, int g_off, const float *g_norm,
                void *ho, int dt, int T, int H, int dv, float eps, cudaStream_t st);
void k_swiglu(const float *gu, void *out, int dt, int T, int I, cudaStream_t st);
/* The token mixer of one layer, in two halves (whole blocks' products go
 * between them): close blocks and mix the prefixes of blocks that start;
 * then the outputs of partial blocks and keeping the open block's rows. */
void k_mixer_close_and_mix(const mix_args &a, cudaStream_t st);
void k_mixer_outputs(const mix_args &a, cudaStream_t st);
/* Full blocks: scores[f][j] (C x C, row t, column u) = m[i][i] * (q_t . k_u)
 * for u <= t, 0 above the diagonal; blocks[f] is block i of full block f. */
void k_mask_scores(float *scores, const int32_t *blocks, const float *mix, int Lm, int n_full,
                   int H, int C, cudaStream_t st);
/* P_i of one sequence for every layer and head, from its pages. */
void k_restore_prefix(void *const *pages, int block, const float *mix_all, float *prefix,
                      float *prefix_k, int L, int Hkv, int dk, int dv, int Lm, int normalize,
                      int state_bf16, cudaStream_t st);

/* Rows of the mixer's output tile, and its shared memory. */
constexpr int MIX_TT = 8;
inline size_t mixer_smem_bytes(int dk, int C) { return (size_t)MIX_TT * (dk + C) * sizeof(float); }

} // namespace eng_gpu

#endif
