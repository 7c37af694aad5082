/*
 * engine_internal.h — what the engine's own files share. Not part of the public API:
 * other modules include engine.h only.
 */
#ifndef MHLA_ENGINE_INTERNAL_H
#define MHLA_ENGINE_INTERNAL_H

#include "backend.h"
#include "cpu/kernels.h"
#include "engine.h"
#include "kvstate.h"

#include <stdarg.h>
#include <stdint.h>

/* Formats a message into err (if non-NULL), sets its code (eng_fail:
 * MHLA_ERR_INVALID) and returns -1. */
int eng_fail(mhla_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int eng_fail_as(mhla_error *err, mhla_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Passes a kvstate error on with its message and the matching code. */
int eng_fail_kv(mhla_error *err, const kv_error *ke);

/* ---- config.json ---------------------------------------------------------- */

/* Parses config.json text into cfg. num_blocks / max_positions stay 0: they
 * come from the mixing matrix's shape. */
int eng_config_parse(const char *json, size_t len, mhla_config *cfg, mhla_error *err);

/* ---- safetensors ------------------------------------------------------------ */

typedef enum {
    ST_F32,
    ST_F16,
    ST_BF16,
    ST_OTHER, /* a known safetensors dtype the engine cannot use for weights */
} st_dtype;

#define ST_MAX_DIMS 8

typedef struct {
    char *name;
    char dtype_name[16];
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;
    size_t nbytes;
    const char *file; /* which file holds it, for messages */
} st_tensor;

typedef struct {
    void *base;
    size_t size;
    char *path;
} st_mapping;

typedef struct {
    st_mapping *maps;
    int n_maps;
    st_tensor *tensors;
    int n_tensors;
} st_set;

/* Opens model.safetensors, or model.safetensors.index.json and its shards. */
int st_open_dir(const char *dir, st_set *set, mhla_error *err);
const st_tensor *st_find(const st_set *set, const char *name);
void st_close(st_set *set);

/* ---- model ------------------------------------------------------------------ */

typedef struct {
    const float *attn_norm; /* [D] */
    k_matrix wq;            /* [H*dk, D] */
    k_matrix wk;            /* [Hkv*dk, D] */
    k_matrix wv;            /* [Hkv*dv, D] */
    k_matrix wg;            /* [H*dv, D]; both NULL without output gate */
    const float *g_norm;    /* [dv] */
    k_matrix wo;            /* [D, H*dv] */
    float *mix;             /* [Lm, Lm] clamped to [1e-5, 1] */
    const float *mlp_norm;  /* [D] */
    k_matrix w_gate;        /* [I, D] */
    k_matrix w_up;          /* [I, D] */
    k_matrix w_down;        /* [D, I] */
} eng_layer;

struct mhla_model {
    mhla_config cfg;
    st_set st;
    const float *embeddings; /* [V, D] */
    const float *final_norm; /* [D] */
    k_matrix lm_head;        /* [V, D] */
    eng_layer *layers;
    float *rope_cos; /* [max_positions, dk/2] */
    float *rope_sin;
    float q_scale;    /* dk^-0.5 */
    int copy_weights; /* hold f32 tensors in huge-page memory, not the mapping */
    int q4_group;     /* --weights q4: weights per scale (kernels_q4.h) */
    void **owned;     /* tensors copied or converted out of the mapping */
    int n_owned, owned_cap;
    size_t weight_bytes;
    /* The disk tier's hash of the config and every checkpoint byte (state_disk.c): made
     * once per model, however many engines it serves (a GPU server with --state-memory
     * auto makes two), and what that took. */
    uint64_t checkpoint_fp;
    int checkpoint_fp_done;
    double checkpoint_fp_s;
    uint64_t checkpoint_fp_bytes;
};

/* The bytes matrix w of n weights is held in (its q8 scales and padding
 * included), and the weight bytes one step reads (the model's, less the
 * embedding table unless the head is it: a step gathers only a few rows). */
size_t eng_matrix_bytes(k_matrix w, size_t n);
size_t eng_step_weight_bytes(const mhla_model *m);

/* ---- per-sequence state --------------------------------------------------- */

/*
 * The recurrent state of one sequence (docs/model.md, Streaming form), for every layer and kv head,
 * lives in kvstate (kvstate.h): pages, P_i, the current block's rows, the token
 * history. A page holds one finished block's summaries for all layers and kv
 * heads: [L][Hkv][dk*dv] (S_b), followed, with mhla_normalize, by [L][Hkv][dk]
 * (the block's key sums), stored in the pool's dtype.
 */
struct mhla_seq {
    const mhla_model *model;
    kv_seq *kv;
    const eng_backend_ops *ops; /* restores its state: the CPU's, or its engine's backend's */
    void *home; /* the backend whose device memory holds its state; NULL: host memory */
};

/* The state geometry kvstate is given for a model. */
kv_geometry eng_state_geometry(const mhla_config *cfg);
/* A fresh sequence whose pages come from pool, its state restored by ops
 * (in home's memory when home is not NULL). */
int eng_seq_create_in(const mhla_model *model, kv_pool *pool, const eng_backend_ops *ops,
                      void *home, mhla_seq **out, mhla_error *err);
/* Makes sure pages for blocks [0, n_blocks) exist. */
int eng_seq_reserve_pages(mhla_seq *seq, int n_blocks, mhla_error *err);
/* The same on whichever device holds the sequence's state. */
int eng_seq_restore_prefix(mhla_seq *seq, mhla_error *err);

/* ---- sampler.c: what sampling on a GPU needs of a sampler ---- */

typedef struct {
    const mhla_sampling_params *p; /* logit_bias: the sampler's own copy */
    const int *counts;             /* NULL without penalties */
    const unsigned char *in_prompt;
    const int32_t *seen; /* distinct ids with counts[id] > 0 or in_prompt[id] */
    int n_seen;
} eng_sampler_view;

void eng_sampler_view_of(const mhla_sampler *s, eng_sampler_view *v);
/* The one uniform mhla_sampler_next would draw for this token (0 and none
 * drawn when greedy). */
double eng_sampler_draw(mhla_sampler *s);
/* Counts a chosen token for the penalties, as mhla_sampler_next does. */
void eng_sampler_record(mhla_sampler *s, int32_t tok);

/* ---- the engine (engine.c creates it, step.c runs its steps) ---- */

/* ---- step_choose.c: where every token is chosen ---- */

typedef struct eng_step_rows eng_step_rows;
/* Item b's sample slots and token scores are well formed. */
int eng_step_check_choices(const mhla_batch_item *it, int b, int vocab_size, mhla_error *err);
/* The items as the backend runs them (*run, the engine's): each with the
 * logits rows its slots and scores need, and only the slot the backend
 * samples on its device; *masks (the engine's) the bitmask of each such
 * slot's mask, computed now (a mask whose bits fail fails its slot here). */
int eng_step_rows_plan(mhla_engine *e, const mhla_batch_item *items, int n_items,
                       mhla_batch_item **run, const uint64_t *const **masks, mhla_error *err);
/* After the backend's pass: samples every other slot, computes every score,
 * and copies the logits a caller asked for where the engine's rows held them. */
void eng_step_choose(mhla_engine *e, mhla_batch_item *items, int n_items);
void eng_step_rows_free(eng_step_rows *r);

/* ---- state_disk.c: the disk tier under the pool ---- */
/* Opens opt->state_dir's tier under e->pool (nothing without one). */
int eng_state_disk_open(mhla_engine *e, const mhla_engine_options *opt, mhla_error *err);
/* Adds the tier's counters to out (nothing without one). */
void eng_state_disk_stats(const mhla_engine *e, mhla_state_stats *out);
/* MHLA_TESTCTRL_DISK_FAULT (arg: the fault) and MHLA_TESTCTRL_DISK_FLUSH. */
int eng_state_disk_control(mhla_engine *e, int op, int arg, mhla_error *err);

/* ---- step_verify.c: drafted tokens taken back ---- */

typedef struct eng_verify eng_verify;
void eng_verify_free(eng_verify *v);
/* Item it has sample slots before its last position: it verifies drafts. */
int eng_item_drafts(const mhla_batch_item *it);
/* After the choice: the tokens of it its sequence keeps (through the first
 * slot whose token is not the one fed after it). */
int eng_item_kept(const mhla_batch_item *it);
/* Before the backend's pass: saves the open block's rows and P_i that
 * drafting items overwrite as their span crosses into the next block. */
int eng_verify_save(mhla_engine *e, const mhla_batch_item *items, int n_items, mhla_error *err);
/* After the choice: advances each sequence by the tokens it keeps, putting
 * back the open block where the kept tokens end in it. -1 only when a copy
 * back into the device's memory fails. */
int eng_verify_advance(mhla_engine *e, mhla_batch_item *items, int n_items, mhla_error *err);

struct mhla_engine {
    const mhla_model *model;
    const eng_backend_ops *ops; /* the backend the steps run on */
    void *backend;              /* its state */
    void *home;                 /* backend when its state lives in device memory, else NULL */
    kv_memory memory;           /* kvstate's hooks for that memory */
    kv_pool *pool;              /* state memory of mhla_engine_seq_create's sequences */
    char device_name[420];
    char device_note[600];
    eng_step_rows *rows; /* the logits rows of a step's samples and scores (step_choose.c) */
    eng_verify *verify;  /* rows saved for taking drafts back (step_verify.c) */
    mhla_verify_stats verify_stats;
};

#endif
