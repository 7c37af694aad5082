/*
 * mhla_mixer.c — the MHLA token mixer in its streaming form (docs/model.md, Streaming form), for
 * one layer and one kv head of one sequence.
 *
 * For the token at position p in block i:
 *     o = q~ᵀ P_i + m[i][i] · Σ_{s in block i, s ≤ p} (q~ · k~_s) v_s
 * The current block's k~ and v are kept raw (at most C rows, cache-resident),
 * so a token reads P_i once and never a running S_i; S_i = K_iᵀ V_i is formed
 * once when the block closes, and P_{i+1} = Σ_{b ≤ i} m[i+1][b] S_b once when
 * the next block starts. Prefill and decode run this same code token by
 * token, which is why any split of a sequence into calls gives the same bits.
 */
#include "cpu/kernels.h"
#include "engine_internal.h"

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

/* Columns [c0, c0+w) of row a of S_i = K_iᵀ V_i, summed in token order. */
static void block_summary_span(const head_view *h, int a, int c0, int w, float *dst)
{
    memset(dst, 0, (size_t)w * sizeof(float));
    for (int u = 0; u < h->C; u++)
        k_axpy(h->cur_k[(size_t)u * h->dk + a], h->cur_v + (size_t)u * h->dv + c0, dst, w);
}

static float key_sum(const head_view *h, int a)
{
    float sum = 0.0f;
    for (int u = 0; u < h->C; u++)
        sum += h->cur_k[(size_t)u * h->dk + a];
    return sum;
}

/* S_i = K_iᵀ V_i (and the key sum) into block i's page. */
static void close_block(const head_view *h, int i)
{
    void *page = kv_seq_page(h->kv, i);
    if (h->dtype == KV_DTYPE_F32) {
        float *S = (float *)page + h->page_s;
        for (int a = 0; a < h->dk; a++)
            block_summary_span(h, a, 0, h->dv, S + (size_t)a * h->dv);
        if (h->prefix_k)
            for (int a = 0; a < h->dk; a++)
                ((float *)page)[h->page_k + a] = key_sum(h, a);
        return;
    }
    float buf[PAGE_SPAN];
    for (int a = 0; a < h->dk; a++)
        for (int c0 = 0; c0 < h->dv; c0 += PAGE_SPAN) {
            int w = h->dv - c0 < PAGE_SPAN ? h->dv - c0 : PAGE_SPAN;
            block_summary_span(h, a, c0, w, buf);
            kv_page_write(h->dtype, page, h->page_s + (size_t)a * h->dv + c0, buf, (size_t)w);
        }
    if (h->prefix_k)
        for (int a = 0; a < h->dk; a++) {
            float v = key_sum(h, a);
            kv_page_write(h->dtype, page, h->page_k + a, &v, 1);
        }
}

/* Output of one query head for the token at block offset r of block i. */
static void head_output(const head_view *h, const float *q, int i, int r, float *out, float *scores)
{
    int dk = h->dk, dv = h->dv;
    memset(out, 0, (size_t)dv * sizeof(float));
    if (i > 0)
        for (int a = 0; a < dk; a++)
            k_axpy(q[a], h->prefix + (size_t)a * dv, out, dv);
    for (int u = 0; u <= r; u++)
        scores[u] = k_dot(q, h->cur_k + (size_t)u * dk, dk);
    float intra[dv];
    memset(intra, 0, sizeof intra);
    for (int u = 0; u <= r; u++)
        k_axpy(scores[u], h->cur_v + (size_t)u * dv, intra, dv);
    float m_ii = h->mix[(size_t)i * h->Lm + i];
    k_axpy(m_ii, intra, out, dv);
    if (h->prefix_k) {
        float z = i > 0 ? k_dot(q, h->prefix_k, dk) : 0.0f, zs = 0.0f;
        for (int u = 0; u <= r; u++)
            zs += scores[u];
        float den = z + m_ii * zs;
        /* The formula leaves 0/0 undefined (relu features that share no
         * positive component); its limit, 0, is returned instead of a NaN
         * that would poison every later position. */
        if (den == 0.0f)
            memset(out, 0, (size_t)dv * sizeof(float));
        else
            for (int c = 0; c < dv; c++)
                out[c] /= den;
    }
}

void mhla_mix_run(mhla_seq *s, int layer, int kv_head, const mhla_mixer_io *io)
{
    head_view h = view_of(s, layer, kv_head);
    const mhla_config *c = &s->model->cfg;
    int group = c->num_heads / c->num_kv_heads;
    float scores[h.C];
    int pos = kv_seq_pos(s->kv);
    for (int t = 0; t < io->n; t++) {
        int p = pos + t, i = p / h.C, r = p % h.C;
        if (r == 0)
            mix_prefix(&h, i);
        memcpy(h.cur_k + (size_t)r * h.dk,
               io->k + (size_t)t * io->k_stride + (size_t)kv_head * h.dk,
               (size_t)h.dk * sizeof(float));
        memcpy(h.cur_v + (size_t)r * h.dv,
               io->v + (size_t)t * io->v_stride + (size_t)kv_head * h.dv,
               (size_t)h.dv * sizeof(float));
        for (int jj = 0; jj < group; jj++) {
            int j = kv_head * group + jj;
            head_output(&h, io->q + (size_t)t * io->q_stride + (size_t)j * h.dk, i, r,
                        io->out + (size_t)t * io->out_stride + (size_t)j * h.dv, scores);
        }
        if (r == h.C - 1)
            close_block(&h, i);
    }
}

void mhla_mix_restore_prefix(mhla_seq *s)
{
    const mhla_config *c = &s->model->cfg;
    int i = kv_seq_pos(s->kv) / c->chunk_size;
    for (int l = 0; l < c->num_layers; l++)
        for (int g = 0; g < c->num_kv_heads; g++) {
            head_view h = view_of(s, l, g);
            mix_prefix(&h, i);
        }
}
