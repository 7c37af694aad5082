/*
 * token_mixer.c — the MHLA token mixer in its streaming form (docs/model.md, Streaming form), for
 * one layer and one kv head of one sequence.
 *
 * For the token at position p in block i:
 *     o = q~ᵀ P_i + m[i][i] · Σ_{s in block i, s ≤ p} (q~ · k~_s) v_s
 * The current block's k~ and v are kept raw (at most C rows, cache-resident),
 * so a token reads P_i once and never a running S_i; S_i = K_iᵀ V_i is formed
 * once when the block closes, and P_{i+1} = Σ_{b ≤ i} m[i+1][b] S_b once when
 * the next block starts. The tokens of a call that fall in one block are
 * done together, as matrix products, but every value is summed in the same
 * order as for one token at a time, which is why prefill, decode and any
 * split of a sequence into calls give the same bits.
 */
#include "cpu_backend.h"
#include "kernels.h"

#include <string.h>

typedef struct {
    int dk, dv, C, L, Hkv, Lm;
    const kv_seq *kv; /* the pages */
    kv_dtype dtype;   /* how pages store values */
    float *prefix;    /* P_i [dk][dv] */
    float *prefix_k;  /* normaliser prefix [dk] or NULL */
    float *cur_k;     /* [C][dk] */
    float *cur_v;     /* [C][dv] */
    size_t page_s;    /* offset of this (layer, head)'s S_b in a page */
    size_t page_k;    /* offset of its key sum */
    const float *mix;
} head_view;

/* Page values are converted this many at a time (stack buffers stay small on
 * the worker threads); axpy is elementwise, so the split changes no bit. */
#define PAGE_SPAN 256

static head_view view_of(mhla_seq *s, int layer, int kv_head)
{
    const mhla_config *c = &s->model->cfg;
    kv_seq_bufs b = kv_seq_buffers(s->kv);
    head_view h;
    h.dk = c->head_k_dim;
    h.dv = c->head_v_dim;
    h.C = c->chunk_size;
    h.L = c->num_layers;
    h.Hkv = c->num_kv_heads;
    h.Lm = c->num_blocks;
    h.kv = s->kv;
    h.dtype = kv_pool_dtype(kv_seq_pool(s->kv));
    size_t lh = (size_t)layer * c->num_kv_heads + kv_head;
    h.prefix = b.prefix + lh * h.dk * h.dv;
    h.prefix_k = c->normalize ? b.prefix_k + lh * h.dk : NULL;
    h.cur_k = b.cur_k + lh * h.C * h.dk;
    h.cur_v = b.cur_v + lh * h.C * h.dv;
    h.page_s = lh * h.dk * h.dv;
    h.page_k = (size_t)h.L * h.Hkv * h.dk * h.dv + lh * h.dk;
    h.mix = s->model->layers[layer].mix;
    return h;
}

/* acc[0..n) += m * page values [off, off+n). */
static void axpy_page(const head_view *h, float m, const void *page, size_t off, float *acc,
                      size_t n)
{
    if (h->dtype == KV_DTYPE_F32) {
        k_axpy(m, (const float *)page + off, acc, (int)n);
        return;
    }
    float buf[PAGE_SPAN];
    for (size_t i = 0; i < n; i += PAGE_SPAN) {
        size_t w = n - i < PAGE_SPAN ? n - i : PAGE_SPAN;
        kv_page_read(h->dtype, page, off + i, buf, w);
        k_axpy(m, buf, acc + i, (int)w);
    }
}

/* P_i = Σ_{b<i} m[i][b] S_b, summed in block order. */
static void mix_prefix(const head_view *h, int i)
{
    size_t n = (size_t)h->dk * h->dv;
    memset(h->prefix, 0, n * sizeof(float));
    if (h->prefix_k)
        memset(h->prefix_k, 0, (size_t)h->dk * sizeof(float));
    for (int b = 0; b < i; b++) {
        float m = h->mix[(size_t)i * h->Lm + b];
        const void *page = kv_seq_page(h->kv, b);
        axpy_page(h, m, page, h->page_s, h->prefix, n);
        if (h->prefix_k)
            axpy_page(h, m, page, h->page_k, h->prefix_k, (size_t)h->dk);
    }
}

/* Floats of stack scratch a worker uses for the summaries of non-f32 pages and for a pass of
 * block_outputs (R tokens' scores, intra-block sums and queries): 32 KiB. */
#define SCRATCH_FLOATS 8192

/* Rows [a0, a0 + na), columns [c0, c0 + w) of S_i = K_iᵀ V_i into dst (leading dimension
 * ldd): a matrix product that sums each value in token order, as C rank-1 updates would. */
static void summary_part(const head_view *h, int a0, int na, int c0, int w, float *dst, size_t ldd)
{
    k_gemm_set(na, w, h->C, h->cur_k + a0, 1, (size_t)h->dk, h->cur_v + c0, (size_t)h->dv, dst,
               ldd);
}

static float key_sum(const head_view *h, int a)
{
    float sum = 0.0f;
    for (int u = 0; u < h->C; u++)
        sum += h->cur_k[(size_t)u * h->dk + a];
    return sum;
}

/* S_i = K_iᵀ V_i (and the key sum) into block i's page: straight into an f32 page, else
 * a stack-sized part at a time, converted as it is written. */
static void close_block(const head_view *h, int i)
{
    void *page = kv_seq_page(h->kv, i);
    if (h->dtype == KV_DTYPE_F32) {
        summary_part(h, 0, h->dk, 0, h->dv, (float *)page + h->page_s, (size_t)h->dv);
    } else {
        float buf[SCRATCH_FLOATS];
        int w = h->dv < SCRATCH_FLOATS ? h->dv : SCRATCH_FLOATS;
        int rows = SCRATCH_FLOATS / w;
        for (int c0 = 0; c0 < h->dv; c0 += w) {
            int cw = h->dv - c0 < w ? h->dv - c0 : w;
            for (int a0 = 0; a0 < h->dk; a0 += rows) {
                int na = h->dk - a0 < rows ? h->dk - a0 : rows;
                summary_part(h, a0, na, c0, cw, buf, (size_t)cw);
                for (int a = 0; a < na; a++)
                    kv_page_write(h->dtype, page, h->page_s + (size_t)(a0 + a) * h->dv + c0,
                                  buf + (size_t)a * cw, (size_t)cw);
            }
        }
    }
    if (h->prefix_k)
        for (int a = 0; a < h->dk; a++) {
            float v = key_sum(h, a);
            if (h->dtype == KV_DTYPE_F32)
                ((float *)page)[h->page_k + a] = v;
            else
                kv_page_write(h->dtype, page, h->page_k + a, &v, 1);
        }
}

/* The last part of a pass of block_outputs: each of its nr tokens' output
 * (q_tᵀ P_i already in ot) gets m[i][i] times its intra-block sum and, with
 * mhla_normalize, is divided by its normaliser. */
static void finish_pass(const head_view *h, const float *qt, size_t q_stride, int i, int ra, int nr,
                        const float *scores, const float *intra, float *ot, size_t out_stride)
{
    int dk = h->dk, dv = h->dv, C = h->C;
    float m_ii = h->mix[(size_t)i * h->Lm + i];
    for (int t = 0; t < nr; t++) {
        float *o = ot + (size_t)t * out_stride;
        k_axpy(m_ii, intra + (size_t)t * dv, o, dv);
        if (!h->prefix_k)
            continue;
        float z = i > 0 ? k_dot(qt + (size_t)t * q_stride, h->prefix_k, dk) : 0.0f, zs = 0.0f;
        for (int u = 0; u <= ra + t; u++)
            zs += scores[(size_t)t * C + u];
        float den = z + m_ii * zs;
        /* The formula leaves 0/0 undefined (relu features that share no
         * positive component); its limit, 0, is returned instead of a NaN
         * that would poison every later position. */
        if (den == 0.0f)
            memset(o, 0, (size_t)dv * sizeof(float));
        else
            for (int c = 0; c < dv; c++)
                o[c] /= den;
    }
}

/* Outputs of one query head for the n tokens at block offsets r0 .. r0+n-1 of block i
 * (their k and v already in cur_k, cur_v), R tokens per pass:
 *     out_t = q_tᵀ P_i + m[i][i] Σ_{u ≤ r0+t} (q_t · k_u) v_u
 * Both sums are matrix products over the pass's tokens (P_i and each v_u read once per
 * pass, not once per token), each value summed in the order the one-token form sums it:
 * q_tᵀ P_i over a, the intra-block sum over u, so any split into passes, chunks or calls
 * gives the same bits. */
static void block_outputs(const head_view *h, const float *q, size_t q_stride, int i, int r0, int n,
                          float *out, size_t out_stride, float *scratch, int R)
{
    int dk = h->dk, dv = h->dv, C = h->C;
    for (int t0 = 0; t0 < n; t0 += R) {
        int nr = n - t0 < R ? n - t0 : R, ra = r0 + t0;
        const float *qt = q + (size_t)t0 * q_stride;
        float *ot = out + (size_t)t0 * out_stride;
        /* [nr][C], [nr][dv], and the queries' rows [nr][dk] after them */
        float *scores = scratch, *intra = scratch + (size_t)R * C;
        for (int t = 0; t < nr; t++)
            memset(ot + (size_t)t * out_stride, 0, (size_t)dv * sizeof(float));
        if (i > 0)
            k_gemm_acc(nr, dv, dk, qt, q_stride, 1, h->prefix, (size_t)dv, ot, out_stride);
        /* q_t · k_u for u ≤ ra + t: the pass's queries against the rows of cur_k as one
         * product (each value the canonical dot product, the same bits as k_dot's, whatever the
         * rows around it). It also forms q_t · k_u for ra + t < u < ra + nr, which no token may
         * see: nothing below reads those. */
        const float *qrows = qt;
        if (nr > 1) { /* the queries as rows of their own (k_linear's x is [nr, dk]) */
            float *qr = scratch + (size_t)R * (C + dv);
            for (int t = 0; t < nr; t++)
                memcpy(qr + (size_t)t * dk, qt + (size_t)t * q_stride, (size_t)dk * sizeof(float));
            qrows = qr;
        }
        k_linear(qrows, nr, dk, (k_matrix){.f32 = h->cur_k}, ra + nr, scores, C, NULL);
        memset(intra, 0, (size_t)nr * dv * sizeof(float));
        /* keys every token of the pass sees, then each token's own few beyond them */
        k_gemm_acc(nr, dv, ra + 1, scores, (size_t)C, 1, h->cur_v, (size_t)dv, intra, (size_t)dv);
        for (int t = 1; t < nr; t++)
            for (int u = ra + 1; u <= ra + t; u++)
                k_axpy(scores[(size_t)t * C + u], h->cur_v + (size_t)u * dv, intra + (size_t)t * dv,
                       dv);
        finish_pass(h, qt, q_stride, i, ra, nr, scores, intra, ot, out_stride);
    }
}

void eng_token_mixer_run(mhla_seq *s, int layer, int kv_head, const eng_token_mixer_io *io)
{
    head_view h = view_of(s, layer, kv_head);
    const mhla_config *c = &s->model->cfg;
    int group = c->num_heads / c->num_kv_heads;
    /* at least one token's row of each (a model with very wide heads or blocks) */
    int row = h.C + h.dv + h.dk;
    int n_scratch = row > SCRATCH_FLOATS ? row : SCRATCH_FLOATS;
    float scratch[n_scratch];
    int R = n_scratch / row;
    R = R < 1 ? 1 : R > 16 ? 16 : R;
    int pos = kv_seq_pos(s->kv);
    /* a segment: the call's tokens that fall in one block */
    for (int t0 = 0; t0 < io->n;) {
        int p = pos + t0, i = p / h.C, r0 = p % h.C;
        int n = io->n - t0 < h.C - r0 ? io->n - t0 : h.C - r0;
        if (r0 == 0)
            mix_prefix(&h, i);
        for (int t = 0; t < n; t++) {
            memcpy(h.cur_k + (size_t)(r0 + t) * h.dk,
                   io->k + (size_t)(t0 + t) * io->k_stride + (size_t)kv_head * h.dk,
                   (size_t)h.dk * sizeof(float));
            memcpy(h.cur_v + (size_t)(r0 + t) * h.dv,
                   io->v + (size_t)(t0 + t) * io->v_stride + (size_t)kv_head * h.dv,
                   (size_t)h.dv * sizeof(float));
        }
        for (int jj = 0; jj < group; jj++) {
            int j = kv_head * group + jj;
            block_outputs(&h, io->q + (size_t)t0 * io->q_stride + (size_t)j * h.dk,
                          (size_t)io->q_stride, i, r0, n,
                          io->out + (size_t)t0 * io->out_stride + (size_t)j * h.dv,
                          (size_t)io->out_stride, scratch, R);
        }
        if (r0 + n == h.C)
            close_block(&h, i);
        t0 += n;
    }
}

void eng_token_mixer_restore_prefix(mhla_seq *s)
{
    const mhla_config *c = &s->model->cfg;
    int i = kv_seq_pos(s->kv) / c->chunk_size;
    for (int l = 0; l < c->num_layers; l++)
        for (int g = 0; g < c->num_kv_heads; g++) {
            head_view h = view_of(s, l, g);
            mix_prefix(&h, i);
        }
}
