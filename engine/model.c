/*
 * model.c — binds a checkpoint's tensors to the model, checking each name,
 * shape and dtype against config.json (docs/model.md, Tensors). Tensors are copied once
 * out of the mapping into huge-page memory (see alloc_weights), F16 and BF16
 * widened to f32 — or, with bf16 weight storage, the matrices narrowed, and
 * with q8 storage the matrices quantized to int8 (engine/cpu/kernels_q8.h).
 */
#include "engine_internal.h"
#include "cpu/kernels_q4.h"
#include "cpu/kernels_q8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/*
 * Memory for weights the forward pass streams. 2 MiB-aligned and advised for
 * transparent huge pages: with 4 KiB pages the projections' sweeps over
 * multi-megabyte matrices miss the TLB constantly (bench/RESULTS.md: +34%
 * prefill, +22% batch-1 decode on the 340M shape against using the file
 * mapping in place).
 */
static void *alloc_weights(size_t bytes)
{
    void *p = NULL;
    size_t huge = 2u << 20;
    if (bytes < huge)
        return malloc(bytes ? bytes : 1);
    /* A last part-page of a region is left on 4 KiB pages (a huge page must lie wholly
     * inside it): on the 340M shape that was 1.5 of each 5.5 MiB MLP matrix, ~16 % of a
     * bf16 step's weights, and the batch-1 kernels stream 4 KiB pages 15-20 % slower
     * (bench/RESULTS.md). So the region is whole huge pages where that adds at most 1/8. */
    size_t whole = (bytes + huge - 1) / huge * huge;
    if (whole - bytes <= bytes / 8)
        bytes = whole;
    if (posix_memalign(&p, huge, bytes))
        return NULL;
    (void)madvise(p, bytes, MADV_HUGEPAGE); /* advice only: fine if refused */
    return p;
}

static int keep_owned(mhla_model *m, void *p, mhla_error *err)
{
    if (mhla_grow(&m->owned, sizeof *m->owned, &m->owned_cap, m->n_owned + 1)) {
        free(p);
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
    }
    m->owned[m->n_owned++] = p;
    return 0;
}

/* Finds name, checks its shape, and returns its data as f32. */
static int bind(mhla_model *m, const char *name, int ndim, const int64_t *shape, const float **out,
                mhla_error *err)
{
    const st_tensor *t = st_find(&m->st, name);
    if (!t)
        return eng_fail(err, "tensor '%s' is missing from the checkpoint", name);
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = t->shape[i] == shape[i];
    if (!ok) {
        char want[128] = "", got[128] = "";
        for (int i = 0; i < ndim; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? ", " : "",
                     (long long)shape[i]);
        for (int i = 0; i < t->ndim; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "",
                     (long long)t->shape[i]);
        return eng_fail(err, "tensor '%s' has shape [%s], config.json implies [%s]", name, got,
                        want);
    }
    size_t n = t->nbytes / (t->dtype == ST_F32 ? 4 : 2);
    if (t->dtype == ST_OTHER)
        return eng_fail(err, "tensor '%s' has dtype %s; weights must be F32, F16 or BF16", name,
                        t->dtype_name);
    /* Tensors about to be narrowed to bf16 are read from the mapping. */
    if (t->dtype == ST_F32 && ((uintptr_t)t->data % sizeof(float)) == 0 && !m->copy_weights) {
        *out = t->data;
        return 0;
    }
    float *buf = alloc_weights(n * sizeof(float));
    if (!buf)
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory converting tensor '%s'", name);
    const unsigned char *src = t->data;
    for (size_t i = 0; i < n; i++) {
        if (t->dtype == ST_F32) {
            memcpy(&buf[i], src + 4 * i, 4);
        } else {
            uint16_t h = (uint16_t)(src[2 * i] | (src[2 * i + 1] << 8));
            buf[i] = t->dtype == ST_F16 ? f16_to_f32(h) : mhla_f32_from_bf16(h);
        }
    }
    if (keep_owned(m, buf, err))
        return -1;
    *out = buf;
    return 0;
}

/* Binds a 2-d weight matrix, held as f32 until convert_weights(). */
static int bind_matrix(mhla_model *m, const char *name, int64_t rows, int64_t cols, k_matrix *out,
                       mhla_error *err)
{
    int64_t shape[2] = {rows, cols};
    out->bf16 = NULL;
    out->q8 = NULL;
    return bind(m, name, 2, shape, &out->f32, err);
}

#define BIND(m, name, out, ...)                                                                    \
    bind((m), (name), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),                   \
         (int64_t[]){__VA_ARGS__}, (out), err)

/* The mixing matrix fixes Lm: [Lm, Lm, 1, 1, 1, 1] (trailing ones optional). */
static int bind_mixing(mhla_model *m, int l, float **out, mhla_error *err)
{
    char name[128];
    snprintf(name, sizeof name, "model.layers.%d.attn.mixing_matrix", l);
    const st_tensor *t = st_find(&m->st, name);
    if (!t)
        return eng_fail(err, "tensor '%s' is missing from the checkpoint", name);
    int ok =
        t->ndim >= 2 && t->shape[0] == t->shape[1] && t->shape[0] > 0 && t->shape[0] <= 1 << 16;
    for (int i = 2; ok && i < t->ndim; i++)
        ok = t->shape[i] == 1;
    if (!ok)
        return eng_fail(err, "tensor '%s' has a bad shape: expected [Lm, Lm, 1, 1, 1, 1]", name);
    int Lm = (int)t->shape[0];
    if (m->cfg.num_blocks == 0) {
        m->cfg.num_blocks = Lm;
    } else if (Lm != m->cfg.num_blocks) {
        return eng_fail(err, "tensor '%s' has shape [%d, %d, ...], layer 0 has %d blocks", name, Lm,
                        Lm, m->cfg.num_blocks);
    }
    int64_t shape[ST_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    const float *raw = NULL;
    if (bind(m, name, t->ndim, shape, &raw, err))
        return -1;
    float *mix = malloc((size_t)Lm * Lm * sizeof(float));
    if (!mix || keep_owned(m, mix, err))
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < (size_t)Lm * Lm; i++) {
        float v = raw[i];
        /* Only b <= i is ever read. A NaN there would poison every output
         * after it, so it is refused rather than clamped. */
        if (i % (size_t)Lm <= i / (size_t)Lm && v != v)
            return eng_fail(err, "tensor '%s' holds NaN at [%zu, %zu]", name, i / (size_t)Lm,
                            i % (size_t)Lm);
        mix[i] = v < 1e-5f ? 1e-5f : (v > 1.0f ? 1.0f : v);
    }
    *out = mix;
    return 0;
}

static int bind_layer(mhla_model *m, int l, mhla_error *err)
{
    const mhla_config *c = &m->cfg;
    int64_t D = c->hidden_size, H = c->num_heads, Hkv = c->num_kv_heads, dk = c->head_k_dim,
            dv = c->head_v_dim, I = c->intermediate_size;
    eng_layer *y = &m->layers[l];
    char n[160];
#define LNAME(suffix) (snprintf(n, sizeof n, "model.layers.%d.%s", l, suffix), n)
    if (BIND(m, LNAME("attn_norm.weight"), &y->attn_norm, D) ||
        bind_matrix(m, LNAME("attn.q_proj.weight"), H * dk, D, &y->wq, err) ||
        bind_matrix(m, LNAME("attn.k_proj.weight"), Hkv * dk, D, &y->wk, err) ||
        bind_matrix(m, LNAME("attn.v_proj.weight"), Hkv * dv, D, &y->wv, err) ||
        bind_matrix(m, LNAME("attn.o_proj.weight"), D, H * dv, &y->wo, err) ||
        BIND(m, LNAME("mlp_norm.weight"), &y->mlp_norm, D) ||
        bind_matrix(m, LNAME("mlp.gate_proj.weight"), I, D, &y->w_gate, err) ||
        bind_matrix(m, LNAME("mlp.up_proj.weight"), I, D, &y->w_up, err) ||
        bind_matrix(m, LNAME("mlp.down_proj.weight"), D, I, &y->w_down, err))
        return -1;
    if (c->use_output_gate) {
        if (bind_matrix(m, LNAME("attn.g_proj.weight"), H * dv, D, &y->wg, err) ||
            BIND(m, LNAME("attn.g_norm_swish_gate.weight"), &y->g_norm, dv))
            return -1;
    } else if (BIND(m, LNAME("attn.g_norm.weight"), &y->g_norm, dv)) {
        return -1;
    }
#undef LNAME
    return bind_mixing(m, l, &y->mix, err);
}

static int build_rope(mhla_model *m, mhla_error *err)
{
    const mhla_config *c = &m->cfg;
    int half = c->head_k_dim / 2;
    size_t n = (size_t)c->max_positions * half;
    m->rope_cos = malloc(n * sizeof(float));
    m->rope_sin = malloc(n * sizeof(float));
    if (!m->rope_cos || !m->rope_sin)
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory for the rotary tables");
    for (int r = 0; r < half; r++) {
        /* The reference computes the frequency and the angle in fp32. */
        float inv_freq = 1.0f / powf(10000.0f, (float)(2 * r) / (float)c->head_k_dim);
        for (int p = 0; p < c->max_positions; p++) {
            float angle = (float)p * inv_freq;
            m->rope_cos[(size_t)p * half + r] = (float)cos((double)angle);
            m->rope_sin[(size_t)p * half + r] = (float)sin((double)angle);
        }
    }
    return 0;
}

static int load_config(const char *dir, mhla_config *cfg, mhla_error *err)
{
    char path[4096], msg[512];
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
        return eng_fail(err, "model directory path is too long");
    char *buf;
    size_t n;
    int rc = mhla_read_file(path, (size_t)1 << 24, &buf, &n, msg, sizeof msg);
    if (rc == MHLA_READ_IO && access(path, F_OK) != 0)
        return eng_fail_as(err, MHLA_ERR_IO,
                           "cannot open %s: no config.json in the model directory", path);
    if (rc)
        return eng_fail_as(err,
                           rc == MHLA_READ_NOMEM ? MHLA_ERR_NOMEM
                           : rc == MHLA_READ_IO  ? MHLA_ERR_IO
                                                 : MHLA_ERR_INVALID,
                           "config.json: %s", msg);
    rc = eng_config_parse(buf, n, cfg, err);
    free(buf);
    return rc;
}

/*
 * The converted matrices (bf16 or q8) share one region of huge-page memory,
 * carved in the order the forward pass reads them. Allocated one by one, the
 * matrices under 2 MiB (bf16 q and k of the 340M shape, 1 MiB each) and the
 * last part-page of the others, and every q8 scale array, sat on 4 KiB pages,
 * which the batch-1 kernels stream 15-20 % slower (bench/RESULTS.md); one
 * region puts all of them on huge pages without rounding each up.
 */
typedef struct {
    unsigned char *base; /* NULL while the bytes are only being counted */
    size_t used, size;
} weight_arena;

/* Each piece starts on a cache line. */
#define ARENA_ALIGN 64

/* The next `bytes` of the arena; while counting (no base) NULL, with the bytes counted. */
static void *arena_take(weight_arena *a, size_t bytes)
{
    size_t at = (a->used + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    if (!a->base) {
        a->used = at + bytes;
        return NULL;
    }
    if (at > a->size || bytes > a->size - at)
        return NULL;
    a->used = at + bytes;
    return a->base + at;
}

/* Frees a tensor converted out of the mapping once nothing reads it. */
static void release_owned(mhla_model *m, const void *p)
{
    for (int i = 0; i < m->n_owned; i++)
        if (m->owned[i] == p) {
            free(m->owned[i]);
            m->owned[i] = NULL;
            return;
        }
}

/* Narrows one [N, K] matrix to bf16 (round to nearest even; for bf16 dot
 * products as kernels_bd.h rounds, tiny values to zero, and packed in its
 * panels); the f32 copy, if converted rather than mapped, is released —
 * except the embeddings, which a tied head shares and the forward pass still
 * gathers. */
static int to_bf16(mhla_model *m, weight_arena *a, k_matrix *w, size_t N, size_t K, int dot,
                   mhla_error *err)
{
    if (!w->f32)
        return 0;
    size_t n = dot ? k_bd_packed_count((int)N, (int)K) : N * K;
    uint16_t *h = arena_take(a, n * sizeof *h);
    if (!a->base)
        return 0;
    if (!h)
        return eng_fail(err, "the bf16 weights outgrew the region counted for them");
    if (dot)
        k_bd_pack(w->f32, (int)N, (int)K, h);
    else
        for (size_t i = 0; i < n; i++)
            h[i] = mhla_bf16_from_f32(w->f32[i]);
    if (w->f32 != m->embeddings)
        release_owned(m, w->f32);
    *w = (k_matrix){NULL, h, NULL, dot};
    return 0;
}

/* Quantizes one [N, K] matrix to int8 per group of 32 (kernels_q8.h). The
 * f32 copy, if converted rather than mapped, is released — except the
 * embeddings, which a tied head shares and the forward pass still gathers. */
static int to_q8(mhla_model *m, weight_arena *a, k_matrix *w, size_t N, size_t K, const char *name,
                 mhla_error *err)
{
    if (!w->f32)
        return 0;
    size_t qb, sb;
    k_q8_sizes((int)N, (int)K, &qb, &sb);
    int8_t *q = arena_take(a, qb);
    float *sc = arena_take(a, sb);
    if (!a->base)
        return 0;
    if (!q || !sc)
        return eng_fail(err, "the q8 weights outgrew the region counted for them");
    k_q8_matrix *qm = malloc(sizeof *qm);
    if (!qm || keep_owned(m, qm, err))
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory quantizing weights to q8");
    char why[160];
    if (k_q8_quantize(w->f32, (int)N, (int)K, q, sc, qm, why, sizeof why))
        return eng_fail(err,
                        "--weights q8 cannot quantize tensor '%s' [%zu, %zu]: %s (load it "
                        "with --weights f32 or bf16)",
                        name, N, K, why);
    if (w->f32 != m->embeddings)
        release_owned(m, w->f32);
    *w = (k_matrix){NULL, NULL, qm, 0};
    return 0;
}

/* Quantizes one [N, K] matrix to 4 bits per group of m->q4_group
 * (kernels_q4.h), the f32 copy released as in to_q8. */
static int to_q4(mhla_model *m, weight_arena *a, k_matrix *w, size_t N, size_t K, const char *name,
                 mhla_error *err)
{
    if (!w->f32)
        return 0;
    size_t qb, sb;
    k_q4_sizes((int)N, (int)K, m->q4_group, &qb, &sb);
    uint8_t *q = arena_take(a, qb);
    uint16_t *sc = arena_take(a, sb);
    if (!a->base)
        return 0;
    if (!q || !sc)
        return eng_fail(err, "the q4 weights outgrew the region counted for them");
    k_q8_matrix *qm = malloc(sizeof *qm);
    if (!qm || keep_owned(m, qm, err))
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory quantizing weights to q4");
    char why[160];
    if (k_q4_quantize(w->f32, (int)N, (int)K, m->q4_group, q, sc, qm, why, sizeof why))
        return eng_fail(err,
                        "--weights q4 cannot quantize tensor '%s' [%zu, %zu]: %s (load it "
                        "with --weights f32 or bf16%s)",
                        name, N, K, why, m->q4_group > 32 ? ", or with MHLA_Q4_GROUP=32" : "");
    if (w->f32 != m->embeddings)
        release_owned(m, w->f32);
    *w = (k_matrix){NULL, NULL, qm, 0};
    return 0;
}

/* One matrix to the storage asked for: its shape [N, K] and its tensor's name
 * (for errors) */
static int convert_one(mhla_model *m, weight_arena *a, mhla_weight_dtype wd, k_matrix *w, size_t N,
                       size_t K, const char *name, mhla_error *err)
{
    return wd == MHLA_WEIGHTS_Q8   ? to_q8(m, a, w, N, K, name, err)
           : wd == MHLA_WEIGHTS_Q4 ? to_q4(m, a, w, N, K, name, err)
                                   : to_bf16(m, a, w, N, K, wd == MHLA_WEIGHTS_BF16DOT, err);
}

/* Every matrix converted into the arena, in the order a step reads them (an
 * arena without a base only counts the bytes). */
static int convert_into(mhla_model *m, weight_arena *a, mhla_weight_dtype wd, mhla_error *err)
{
    const mhla_config *c = &m->cfg;
    size_t D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    size_t qd = (size_t)c->num_heads * c->head_k_dim, kd = (size_t)c->num_kv_heads * c->head_k_dim;
    size_t vd = (size_t)c->num_kv_heads * c->head_v_dim, od = (size_t)c->num_heads * c->head_v_dim;
    for (int l = 0; l < c->num_layers; l++) {
        eng_layer *y = &m->layers[l];
        char n[160];
#define LNAME(suffix) (snprintf(n, sizeof n, "model.layers.%d.%s", l, suffix), n)
        if (convert_one(m, a, wd, &y->wq, qd, D, LNAME("attn.q_proj.weight"), err) ||
            convert_one(m, a, wd, &y->wk, kd, D, LNAME("attn.k_proj.weight"), err) ||
            convert_one(m, a, wd, &y->wv, vd, D, LNAME("attn.v_proj.weight"), err) ||
            convert_one(m, a, wd, &y->wg, od, D, LNAME("attn.g_proj.weight"), err) ||
            convert_one(m, a, wd, &y->wo, D, od, LNAME("attn.o_proj.weight"), err) ||
            convert_one(m, a, wd, &y->w_gate, I, D, LNAME("mlp.gate_proj.weight"), err) ||
            convert_one(m, a, wd, &y->w_up, I, D, LNAME("mlp.up_proj.weight"), err) ||
            convert_one(m, a, wd, &y->w_down, D, I, LNAME("mlp.down_proj.weight"), err))
            return -1;
#undef LNAME
    }
    return convert_one(m, a, wd, &m->lm_head, V, D,
                       m->lm_head.f32 == m->embeddings ? "model.embeddings.weight (the tied head)"
                                                       : "lm_head.weight",
                       err);
}

static int convert_weights(mhla_model *m, mhla_weight_dtype wd, mhla_error *err)
{
    weight_arena a = {NULL, 0, 0};
    if (convert_into(m, &a, wd, err))
        return -1;
    a.size = a.used;
    a.used = 0;
    a.base = alloc_weights(a.size);
    if (!a.base || keep_owned(m, a.base, err))
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory for %zu MB of %s weights",
                           a.size >> 20, mhla_weight_dtype_name(wd));
    return convert_into(m, &a, wd, err);
}

size_t eng_matrix_bytes(k_matrix w, size_t n)
{
    if (w.q8) {
        size_t qb, sb;
        if (w.q8->bits == 4)
            k_q4_sizes(w.q8->N, w.q8->K, w.q8->wgroup, &qb, &sb);
        else
            k_q8_sizes(w.q8->N, w.q8->K, &qb, &sb);
        return qb + sb; /* with the padding rows of the last block */
    }
    return w.bf16 ? n * 2 : (w.f32 ? n * 4 : 0);
}

static size_t weight_bytes(const mhla_model *m)
{
    const mhla_config *c = &m->cfg;
    size_t D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    size_t qd = (size_t)c->num_heads * c->head_k_dim, kd = (size_t)c->num_kv_heads * c->head_k_dim;
    size_t vd = (size_t)c->num_kv_heads * c->head_v_dim, od = (size_t)c->num_heads * c->head_v_dim;
    size_t n = V * D * 4 + D * 4; /* embeddings, final norm */
    for (int l = 0; l < c->num_layers; l++) {
        const eng_layer *y = &m->layers[l];
        n += eng_matrix_bytes(y->wq, qd * D) + eng_matrix_bytes(y->wk, kd * D) +
             eng_matrix_bytes(y->wv, vd * D) + eng_matrix_bytes(y->wg, od * D) +
             eng_matrix_bytes(y->wo, D * od) + eng_matrix_bytes(y->w_gate, I * D) +
             eng_matrix_bytes(y->w_up, I * D) + eng_matrix_bytes(y->w_down, D * I);
        n += (2 * D + (size_t)c->head_v_dim + (size_t)c->num_blocks * c->num_blocks) * 4;
    }
    /* A tied head in f32 is the embedding matrix, already counted. */
    if (m->lm_head.bf16 || m->lm_head.q8 || m->lm_head.f32 != m->embeddings)
        n += eng_matrix_bytes(m->lm_head, V * D);
    return n;
}

int mhla_model_load(const char *dir, mhla_model **out, mhla_error *err)
{
    return mhla_model_load_with(dir, NULL, out, err);
}

/* The output head: its own weights, or the embeddings' when tied. */
static int bind_head(mhla_model *m, mhla_error *err)
{
    const mhla_config *c = &m->cfg;
    if (st_find(&m->st, "lm_head.weight") || !c->tie_word_embeddings)
        return bind_matrix(m, "lm_head.weight", c->vocab_size, c->hidden_size, &m->lm_head, err);
    m->lm_head = (k_matrix){m->embeddings, NULL, NULL, 0};
    return 0;
}

/* Every layer's weights, the caller told after each but the last (the
 * last call comes when all weights are ready). */
static int bind_layers(mhla_model *m, const mhla_model_options *opt, mhla_error *err)
{
    int n = m->cfg.num_layers;
    for (int l = 0; l < n; l++) {
        if (bind_layer(m, l, err))
            return -1;
        if (opt && opt->progress && l + 1 < n)
            opt->progress(opt->progress_ctx, l + 1, n);
    }
    return 0;
}

/* A storage this build holds; for q4 its group size (kernels_q4.h) too. */
static int check_storage(mhla_model *m, mhla_weight_dtype wd, mhla_error *err)
{
    if (wd != MHLA_WEIGHTS_F32 && wd != MHLA_WEIGHTS_BF16 && wd != MHLA_WEIGHTS_Q8 &&
        wd != MHLA_WEIGHTS_BF16DOT && wd != MHLA_WEIGHTS_Q4)
        return eng_fail(err, "unknown weight storage %d (f32, bf16, bf16dot, q8 or q4)", (int)wd);
    char why[120];
    if (wd == MHLA_WEIGHTS_Q4 && (m->q4_group = k_q4_group_from_env(why, sizeof why)) < 0)
        return eng_fail(err, "--weights q4: %s", why);
    return 0;
}

int mhla_model_load_with(const char *dir, const mhla_model_options *opt, mhla_model **out,
                         mhla_error *err)
{
    *out = NULL;
    mhla_model *m = calloc(1, sizeof *m);
    if (!m)
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
    if (load_config(dir, &m->cfg, err) || st_open_dir(dir, &m->st, err))
        goto fail;
    mhla_weight_dtype wd = opt ? opt->weights : MHLA_WEIGHTS_F32;
    if (check_storage(m, wd, err))
        goto fail;
    m->copy_weights = wd == MHLA_WEIGHTS_F32;
    mhla_config *c = &m->cfg;
    m->layers = calloc((size_t)c->num_layers, sizeof *m->layers);
    if (!m->layers) {
        eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
        goto fail;
    }
    int64_t V = c->vocab_size, D = c->hidden_size;
    if (BIND(m, "model.embeddings.weight", &m->embeddings, V, D) ||
        BIND(m, "model.norm.weight", &m->final_norm, D))
        goto fail;
    if (bind_layers(m, opt, err))
        goto fail;
    if (bind_head(m, err))
        goto fail;
    if ((long)c->num_blocks * c->chunk_size > (1L << 24)) {
        eng_fail(err, "context of %d blocks x %d tokens is too large", c->num_blocks,
                 c->chunk_size);
        goto fail;
    }
    c->max_positions = c->num_blocks * c->chunk_size;
    m->q_scale = (float)pow((double)c->head_k_dim, -0.5);
    if (build_rope(m, err))
        goto fail;
    if (wd != MHLA_WEIGHTS_F32 && convert_weights(m, wd, err))
        goto fail;
    m->weight_bytes = weight_bytes(m);
    if (opt && opt->progress)
        opt->progress(opt->progress_ctx, c->num_layers, c->num_layers);
    *out = m;
    return 0;
fail:
    mhla_model_free(m);
    return -1;
}

void mhla_model_free(mhla_model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    free(m->rope_cos);
    free(m->rope_sin);
    st_close(&m->st);
    free(m);
}

const mhla_config *mhla_model_config(const mhla_model *m) { return &m->cfg; }

size_t mhla_model_weight_bytes(const mhla_model *m) { return m->weight_bytes; }

size_t eng_step_weight_bytes(const mhla_model *m)
{
    size_t V = m->cfg.vocab_size, D = m->cfg.hidden_size;
    /* a step gathers a few embedding rows, unless the head is the table */
    return m->lm_head.f32 == m->embeddings ? m->weight_bytes : m->weight_bytes - V * D * 4;
}
