/*
 * engine.h — the MHLA language-model engine: checkpoint loading, the batched
 * forward pass over many sequences, per-sequence recurrent state, sampling.
 *
 * The contract is SPEC §2. Every function that can fail returns 0 on success
 * or -1 with a one-line message in *err naming the cause; nothing aborts.
 *
 * Exactness guarantee: a sequence's logits do not depend on how its tokens
 * are split into calls (one prefill, token by token, any chunking) nor on
 * which other sequences share a call — they are bitwise identical.
 */
#ifndef MHLA_ENGINE_H
#define MHLA_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char msg[512];
} mhla_error;

typedef enum {
    MHLA_FEATURE_RELU = 0,
    MHLA_FEATURE_ELU = 1, /* elu(x) + 1 */
    MHLA_FEATURE_IDENTITY = 2,
} mhla_feature_map;

typedef struct {
    int vocab_size;        /* V */
    int hidden_size;       /* D */
    int num_layers;
    int num_heads;         /* H */
    int num_kv_heads;      /* Hkv */
    int head_k_dim;        /* dk */
    int head_v_dim;        /* dv */
    int intermediate_size; /* I */
    int chunk_size;        /* C, tokens per block */
    int num_blocks;        /* Lm, blocks covered by the mixing matrix */
    int max_positions;     /* Lm * C */
    mhla_feature_map feature_map;
    int use_output_gate;
    int normalize; /* mhla_normalize */
    int tie_word_embeddings;
    float norm_eps;
    int bos_token_id;
    int eos_token_id;
} mhla_config;

typedef struct mhla_model mhla_model;
typedef struct mhla_seq mhla_seq;
typedef struct mhla_engine mhla_engine;

/* ---- model ---------------------------------------------------------------- */

/* Loads config.json and model.safetensors (or an index + shards) from dir. */
int mhla_model_load(const char *dir, mhla_model **out, mhla_error *err);
void mhla_model_free(mhla_model *model);
const mhla_config *mhla_model_config(const mhla_model *model);
/* Bytes of weights as held in memory (f32). */
size_t mhla_model_weight_bytes(const mhla_model *model);

/* ---- per-sequence state --------------------------------------------------- */

int mhla_seq_create(const mhla_model *model, mhla_seq **out, mhla_error *err);
/* A deep copy: the copy continues exactly as the original would. */
int mhla_seq_clone(const mhla_seq *seq, mhla_seq **out, mhla_error *err);
void mhla_seq_free(mhla_seq *seq);
/* Number of tokens the sequence has consumed (the next token's position). */
int mhla_seq_pos(const mhla_seq *seq);
/* Bytes of state the sequence holds now. */
size_t mhla_seq_state_bytes(const mhla_seq *seq);

/* ---- forward pass --------------------------------------------------------- */

typedef struct {
    int n_threads; /* 0: all online CPUs */
} mhla_engine_options;

int mhla_engine_create(const mhla_model *model, const mhla_engine_options *opt,
                       mhla_engine **out, mhla_error *err);
void mhla_engine_free(mhla_engine *engine);

/*
 * One item of a batch: feed n_tokens new tokens to seq (prefill chunk or a
 * single decode token) and ask for the logits of positions
 * tokens[logits_from .. n_tokens-1]; logits_from == n_tokens asks for none.
 * logits must hold (n_tokens - logits_from) * vocab_size floats.
 */
typedef struct {
    mhla_seq *seq;
    const int32_t *tokens;
    int n_tokens;
    int logits_from;
    float *logits;
} mhla_batch_item;

/*
 * Runs one step for all items together. All inputs are validated before any
 * state changes: on error no sequence has advanced. A sequence may appear at
 * most once per call. Positions past max_positions are refused.
 */
int mhla_engine_forward(mhla_engine *engine, mhla_batch_item *items, int n_items,
                        mhla_error *err);

/* ---- sampling ------------------------------------------------------------- */

typedef struct {
    uint64_t state[4]; /* xoshiro256** */
} mhla_rng;

void mhla_rng_seed(mhla_rng *rng, uint64_t seed);
/* Uniform in [0, 1). */
double mhla_rng_uniform(mhla_rng *rng);

/* temperature 0 is greedy (lowest id wins ties); otherwise softmax(logits/T). */
int mhla_sample(const float *logits, int vocab_size, float temperature, mhla_rng *rng);

#ifdef __cplusplus
}
#endif
#endif
