/*
 * engine.h — the MHLA language-model engine: checkpoint loading, the batched
 * forward pass over many sequences, per-sequence recurrent state, sampling.
 *
 * The model is docs/model.md. Every function that can fail returns 0 on success
 * or -1 with a one-line message in *err naming the cause; nothing aborts.
 *
 * Exactness guarantee: a sequence's logits do not depend on how its tokens
 * are split into calls (one prefill, token by token, any chunking) nor on
 * which other sequences share a call — they are bitwise identical.
 */
#ifndef MHLA_ENGINE_H
#define MHLA_ENGINE_H

#include "base.h" /* mhla_rng */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What kind of failure an error is, so that callers choose their answer
 * (an HTTP status, a retry) from the code and never from the message. */
typedef enum {
    MHLA_OK = 0,
    MHLA_ERR_INVALID,  /* a bad argument, option, request or checkpoint */
    MHLA_ERR_CONTEXT,  /* past the model's context (max_positions) */
    MHLA_ERR_FULL,     /* the state memory cannot hold it now; may fit later */
    MHLA_ERR_NOMEM,    /* the process is out of memory */
    MHLA_ERR_DEVICE,   /* the GPU or its runtime failed */
    MHLA_ERR_IO,       /* a file could not be opened, read or written */
    MHLA_ERR_INTERNAL, /* a broken invariant */
} mhla_status;

typedef struct {
    char msg[512];
    mhla_status code; /* MHLA_OK until a function fails */
} mhla_error;

typedef enum {
    MHLA_FEATURE_RELU = 0,
    MHLA_FEATURE_ELU = 1, /* elu(x) + 1 */
    MHLA_FEATURE_IDENTITY = 2,
} mhla_feature_map;

typedef struct {
    int vocab_size;  /* V */
    int hidden_size; /* D */
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

/* How the projection and MLP weights (and the output head) are held in
 * memory. With f32 and bf16 the arithmetic is f32; bf16 halves the bytes
 * each decode step streams, and for a checkpoint stored in bf16 the two give
 * the same bits. bf16dot holds them as bf16 too and rounds the activations
 * to bf16 for the products (bf16 pairs, f32 sums: AMX tiles or vdpbf16ps
 * where the CPU has them); CPU only. q8 holds them as int8 with an f32 scale per group of 32
 * (1.125 bytes a weight) and quantizes the activations the same way; q4 as
 * 4-bit integers with an f16 scale per group of 32 (0.5625 bytes a weight),
 * the activations quantized as for q8. With bf16dot, q8 and q4 the logits
 * change (slightly; q4 more: docs/model.md, Weight formats). */
typedef enum {
    MHLA_WEIGHTS_F32 = 0,
    MHLA_WEIGHTS_BF16 = 1,
    MHLA_WEIGHTS_Q8 = 2,
    MHLA_WEIGHTS_BF16DOT = 3,
    MHLA_WEIGHTS_Q4 = 4,
} mhla_weight_dtype;

/* "f32" | "bf16" | "bf16dot" | "q8" | "q4" → *out; -1 with a message otherwise. */
int mhla_weight_dtype_parse(const char *name, mhla_weight_dtype *out, mhla_error *err);
/* "f32", "bf16", "bf16dot", "q8" or "q4" */
const char *mhla_weight_dtype_name(mhla_weight_dtype wd);

typedef struct {
    mhla_weight_dtype weights;
    /* Told, as the weights load, how many of the layers are in (done of
     * total, the last call with done == total once all weights are ready);
     * may be NULL. For progress lines on big checkpoints. */
    void (*progress)(void *ctx, int done, int total);
    void *progress_ctx;
} mhla_model_options;

/* Loads config.json and model.safetensors (or an index + shards) from dir,
 * weights in f32. */
int mhla_model_load(const char *dir, mhla_model **out, mhla_error *err);
/* The same with options (NULL: defaults). */
int mhla_model_load_with(const char *dir, const mhla_model_options *opt, mhla_model **out,
                         mhla_error *err);
void mhla_model_free(mhla_model *model);
const mhla_config *mhla_model_config(const mhla_model *model);
/* Bytes of the weights the forward pass reads, as held in memory. */
size_t mhla_model_weight_bytes(const mhla_model *model);

/* ---- per-sequence state --------------------------------------------------- */

/* A sequence with state of its own: pages made as blocks close, no prefix
 * cache, no limit. mhla_engine_seq_create gives a pooled one. */
int mhla_seq_create(const mhla_model *model, mhla_seq **out, mhla_error *err);
/* A copy that continues exactly as the original would. Finished-block pages
 * are shared (reference-counted), not copied. */
int mhla_seq_clone(const mhla_seq *seq, mhla_seq **out, mhla_error *err);
void mhla_seq_free(mhla_seq *seq);
/* Number of tokens the sequence has consumed (the next token's position). */
int mhla_seq_pos(const mhla_seq *seq);
/* Takes back the tokens fed after position pos, which must all lie in the
 * open block (no block closed since pos): the sequence is then exactly
 * what feeding its first pos tokens gives. A draft model's sequence uses it
 * to drop the drafts its target did not accept. Refused, changing nothing,
 * otherwise. */
int mhla_seq_rewind(mhla_seq *seq, int pos, mhla_error *err);
/* Bytes of state the sequence holds now. */
size_t mhla_seq_state_bytes(const mhla_seq *seq);

/* ---- forward pass --------------------------------------------------------- */

typedef enum {
    MHLA_STATE_F32 = 0,
    MHLA_STATE_BF16 = 1, /* pages in bf16: half the bytes, logits change slightly */
} mhla_state_dtype;

/* Where the forward pass runs. CPU is the reference backend; CUDA needs a
 * build with nvcc and an NVIDIA GPU at run time. AUTO takes the GPU when one
 * is usable and the CPU otherwise (mhla_engine_device_note says why). */
typedef enum {
    MHLA_DEVICE_CPU = 0,
    MHLA_DEVICE_AUTO = 1,
    MHLA_DEVICE_CUDA = 2,
} mhla_device;

/* How a GPU holds the weights; products accumulate in f32 either way. */
typedef enum {
    MHLA_GPU_WEIGHTS_BF16 = 0,
    MHLA_GPU_WEIGHTS_F16 = 1,
    MHLA_GPU_WEIGHTS_F32 = 2, /* f32 activations too: matches the CPU to ~1e-6 */
} mhla_gpu_weights;

/* "cpu" | "auto" | "cuda" → *out; -1 with a message otherwise. */
int mhla_device_parse(const char *name, mhla_device *out, mhla_error *err);
/* "bf16" | "f16" | "f32" → *out; -1 with a message otherwise. */
int mhla_gpu_weights_parse(const char *name, mhla_gpu_weights *out, mhla_error *err);

typedef struct {
    int n_threads; /* 0: the CPUs this process may use (affinity mask, cgroup quota) */
    /* The CPU kernels' instruction-set path: "avx512", "avx2", "neon",
     * "portable" or "auto"; NULL or "": the MHLA_CPU_ISA environment
     * variable, else the best the CPU runs. A path the CPU cannot run is an
     * error. The choice is process-wide; all paths give the same bits. */
    const char *cpu_isa;
    /* When the CPU runs a layer's q, k, v, g products and token mixer as one
     * job of its threads: "auto" (from 16 sequences a step), "always" (every
     * step, with two threads or more) or "never"; NULL or "": the
     * MHLA_ATTENTION_JOB environment variable, else auto. Any other value is
     * an error. Every choice gives the same bits. */
    const char *attention_job;
    /* Whether the CPU threads that take part in a step adapt to the machine:
     * "on" (fewer of them where, on a machine whose cores other processes
     * take, they stop being faster than one, and more again once they pay)
     * or "off" (every thread in every job); NULL or "": the
     * MHLA_THREAD_ADAPT environment variable, else on. Any other value is an
     * error. Both give the same bits. */
    const char *thread_adapt;
    mhla_device device;           /* default CPU */
    int gpu_index;                /* which CUDA device (default 0) */
    mhla_gpu_weights gpu_weights; /* default bf16 */
    int gpu_no_graphs;            /* 1: never replay decode steps as CUDA graphs */
    /* State memory (kvstate/README.md) of the sequences made by mhla_engine_seq_create:
     * a pool of this many bytes of pages with an exact prefix cache. 0: no
     * limit and no prefix cache (pages made as needed; a released page's
     * storage is kept for reuse while fewer pages are spare than in use). */
    size_t state_bytes;
    /* Bytes of those pages made and faulted in when the engine is created (at most
     * state_bytes; 0: each made when first needed). Only host memory with pages of 2 MiB
     * and more makes them ahead (kvstate.h, prefault_bytes). */
    size_t state_prefault_bytes;
    mhla_state_dtype state_dtype;
    /* Finished sequences (mhla_seq_finish) whose end state is kept for
     * resume; used only with state_bytes > 0. */
    int resume_slots;
    /* A directory of state pages under the prefix cache (kvstate/README.md,
     * Disk tier; needs state_bytes > 0); NULL or "": none. Pages are
     * written behind as they enter the prefix cache and read back when a
     * prefix match misses memory; files of another model, weight format or
     * device are never used. Created when missing; one that cannot be made
     * or opened is an error, one that cannot be written is not (reads go
     * on; stats count the failed writes). */
    const char *state_dir;
    uint64_t state_disk_max; /* bytes of page files kept there; 0: no limit */
} mhla_engine_options;

/* With device CUDA and no usable GPU this fails with the reason; with AUTO
 * it falls back to the CPU. */
int mhla_engine_create(const mhla_model *model, const mhla_engine_options *opt, mhla_engine **out,
                       mhla_error *err);
void mhla_engine_free(mhla_engine *engine);
/* The device the engine runs on: MHLA_DEVICE_CPU or MHLA_DEVICE_CUDA. */
mhla_device mhla_engine_device(const mhla_engine *engine);
/* A one-line description: "cpu (2 threads)", "cuda:0 NVIDIA H200 (bf16 weights)". */
const char *mhla_engine_device_name(const mhla_engine *engine);
/* Why AUTO chose the CPU ("" when it did not), for the caller's log. */
const char *mhla_engine_device_note(const mhla_engine *engine);
/* The CPU kernels' instruction-set path ("avx512", "avx2", "neon", "portable"). */
const char *mhla_engine_cpu_isa(const mhla_engine *engine);
/* Why that path and that many threads, for the caller's log ("" on a GPU engine). */
const char *mhla_engine_cpu_note(const mhla_engine *engine);
/* The CPU threads of the engine and how many take part now (all 0 on a GPU). */
typedef struct {
    int threads;     /* the thread count, the caller's thread included */
    int active;      /* how many take part in a job now (thread_adapt) */
    long reductions; /* times they were reduced because they did not pay */
} mhla_cpu_threads;
void mhla_engine_cpu_threads(const mhla_engine *engine, mhla_cpu_threads *out);
/* The CPU kernel paths this CPU and binary run, best first, space-separated. */
const char *mhla_cpu_isa_runnable(void);
/* Bytes of weights a step reads on the engine's device (on a GPU, in its
 * weight dtype; without the embedding table unless the LM head is tied). */
size_t mhla_engine_step_weight_bytes(const mhla_engine *engine);
/* What the GPU backend did (all 0 on the CPU). */
typedef struct {
    uint64_t steps;          /* forward passes run on the GPU */
    uint64_t graph_captures; /* decode steps captured as CUDA graphs */
    uint64_t graph_replays;  /* decode steps run by replaying one */
} mhla_device_stats;
void mhla_engine_device_stats(const mhla_engine *engine, mhla_device_stats *out);
/* The free and total bytes of the engine's device memory now, for sizing a
 * state pool there: on a GPU (cudaMemGetInfo) the weights and the engine's
 * buffers are already allocated. -1 with a message on the CPU, whose state
 * lives in host memory. */
int mhla_engine_device_memory(mhla_engine *engine, size_t *free_bytes, size_t *total_bytes,
                              mhla_error *err);
/* Measures the memory bandwidth a step can stream at, for benchmarks'
 * memory-bandwidth bounds, reps times (rates[0..reps), bytes per second;
 * a shared machine's bandwidth moves, so a caller looks at their spread): on
 * a GPU a device-to-device copy (bytes read + written), on the CPU a read of
 * at least 256 MiB and 3 times the L3 (a read from memory, not from cache)
 * with the engine's threads, streamed as the kernels stream weights
 * (bytes read). The buffer is made on the first call and kept until the
 * engine is freed, so a single repetition can be read between two steps. */
int mhla_engine_memory_bandwidth(mhla_engine *engine, double *rates, int reps, mhla_error *err);
/* Runs matrix products of a batch-1 decode step alone and stores the rate
 * they read their weights at (bytes per second) and, where bytes is not NULL,
 * the weight bytes they read. MHLA_PRODUCTS_STEP: all of a step's, in the jobs
 * and order a step runs them (every weight matrix a step reads, against one
 * row of activations; no norms, token mixer or sampling). MHLA_PRODUCTS_HEAD:
 * the output head's alone (the largest matrix, one job). Any other value is
 * an error that names it.
 * No sequence is touched. Set against mhla_engine_memory_bandwidth, it splits
 * a step's shortfall from the memory bound into the products' own and the
 * rest of the step's, and the products' into the kernels' streaming and
 * their jobs' boundaries. The CPU engine only: -1 with a message elsewhere. */
typedef enum { MHLA_PRODUCTS_STEP, MHLA_PRODUCTS_HEAD } mhla_products;
int mhla_engine_product_rate(mhla_engine *engine, mhla_products which, double *bytes_per_s,
                             double *bytes, mhla_error *err);

/*
 * One item of a batch: feed n_tokens new tokens to seq (prefill chunk or a
 * single decode token) and ask for the logits of positions
 * tokens[logits_from .. n_tokens-1]; logits_from == n_tokens asks for none.
 * logits must hold (n_tokens - logits_from) * vocab_size floats.
 *
 * Every token is chosen inside the step, by the engine: an item may carry
 * sample slots (the token after one of its positions, through a sampler;
 * see mhla_sample_slot) and a score request (the logprobs of given tokens
 * at its positions: a prompt's own logprobs; see mhla_token_scores). Slots
 * and scores need no logits buffer: with logits NULL no logits come back,
 * only their results.
 */
typedef struct mhla_sample_slot mhla_sample_slot;
typedef struct mhla_token_scores mhla_token_scores;

typedef struct {
    mhla_seq *seq;
    const int32_t *tokens;
    int n_tokens;
    int logits_from;
    float *logits;
    mhla_sample_slot *sample; /* n_samples slots, or NULL */
    int n_samples;
    mhla_token_scores *scores; /* or NULL */
} mhla_batch_item;

/*
 * Runs one step for all items together. All inputs are validated before any
 * state changes: on error no sequence has advanced. A sequence may appear at
 * most once per call. Positions past max_positions are refused.
 */
int mhla_engine_step(mhla_engine *engine, mhla_batch_item *items, int n_items, mhla_error *err);

/* What verifying drafted tokens did (mhla_sample_slot): items that verified
 * drafts, drafted tokens taken back, and of those items the ones taken back
 * to before a block start their span had crossed (their open block's rows
 * and P_i put back). */
typedef struct {
    uint64_t verify_items;
    uint64_t tokens_taken_back;
    uint64_t block_restores;
} mhla_verify_stats;
void mhla_engine_verify_stats(const mhla_engine *engine, mhla_verify_stats *out);

/* ---- state memory: pool, prefix cache, resume, admission, snapshots -------- */
/* These calls change the engine's state pool: make them from the thread that
 * calls mhla_engine_step, never during it. */

/* A fresh sequence whose pages come from the engine's pool (on the engine's
 * device). A CUDA engine takes only such sequences. */
int mhla_engine_seq_create(mhla_engine *engine, mhla_seq **out, mhla_error *err);

/*
 * For a fresh sequence about to be fed tokens[0..n): attaches the longest
 * state the pool holds for a prefix of them — whole blocks from the prefix
 * cache (verified token by token), then possibly the partial block of a
 * finished sequence (resume) — and advances the sequence to that position.
 * Returns the position reached, 0..n-1 (at least one token is always left,
 * whose logits the caller needs): the caller feeds tokens[pos..n) only. The
 * logits are bitwise identical to computing every token.
 */
int mhla_seq_match_prefix(mhla_seq *seq, const int32_t *tokens, int n, mhla_error *err);
/*
 * The same without waiting for the disk tier: returns the position matched
 * from memory and sets *loading when the tier's loader thread is reading
 * further blocks into the sequence's pages. A loading sequence may be
 * reserved for and freed, not fed or cloned, until mhla_seq_match_poll
 * reports it done; its position then is the whole match (the blocks read
 * and verified; from a missing or bad file on, the tokens are computed).
 */
int mhla_seq_match_prefix_start(mhla_seq *seq, const int32_t *tokens, int n, int *loading,
                                mhla_error *err);
/* While loading: 0 with *done 0 (wait 0 returns at once, 1 waits for the
 * load). Done: *done 1 and the position reached, or -1 with err. */
int mhla_seq_match_poll(mhla_seq *seq, int wait, int *done, mhla_error *err);

/* Pages a sequence needs, at worst, to reach n_positions. */
int mhla_state_pages_needed(const mhla_model *model, long n_positions);
/* Admission: reserves the pages the sequence needs to reach n_positions
 * (prompt + max_tokens), so that no forward pass can fail for lack of state
 * memory. Fails, reserving nothing, with "state memory full: ..." when the
 * pool cannot promise them. The reservation ends with the sequence. */
int mhla_seq_reserve(mhla_seq *seq, long n_positions, mhla_error *err);

/* Frees a finished sequence, keeping its end state for resume (a later
 * prompt that extends this one's tokens continues exactly where it ended). */
void mhla_seq_finish(mhla_seq *seq);

/* Writes one sequence's state to a file (versioned header, model-config
 * fingerprint, checksum); loads it into a fresh sequence of the same model
 * and state dtype. A corrupt, truncated or mismatched file is refused. */
int mhla_seq_save(const mhla_seq *seq, const char *path, mhla_error *err);
int mhla_seq_load(mhla_seq *seq, const char *path, mhla_error *err);

typedef struct {
    size_t page_bytes;
    long pages_total, pages_used, pages_cached, pages_free, pages_reserved;
    long pages_available;   /* what a new reservation can still get; -1: no limit */
    uint64_t prefix_hits;   /* blocks served by the prefix cache */
    uint64_t prefix_misses; /* lookups that stopped at an uncached block */
    uint64_t evictions;
    uint64_t resumes;        /* matches that continued a finished sequence */
    uint64_t resumed_tokens; /* tokens not recomputed thanks to the three */
    long pages_prefaulted;   /* made when the engine was created (state_prefault_bytes) */
    double prefault_seconds; /* and the time that took */
    /* The disk tier (all 0 without one). */
    int disk;                    /* 1: the engine has one */
    uint64_t disk_hits;          /* pages loaded from it */
    uint64_t disk_misses;        /* lookups that found no valid file */
    uint64_t disk_bytes_read;    /* bytes of files loaded */
    uint64_t disk_bytes_written; /* bytes of files written */
    uint64_t disk_load_ns;       /* time spent loading pages */
    uint64_t disk_writes;        /* files written */
    uint64_t disk_corrupt;      /* files refused and removed (truncated, corrupt, foreign, stale) */
    uint64_t disk_write_errors; /* writes that failed: disk full, unwritable directory */
    uint64_t disk_dropped;      /* pages not written: the write queue was full */
    uint64_t disk_evictions;    /* files removed for state_disk_max */
    uint64_t disk_bytes;        /* page files in the directory, as last counted */
    char disk_error[256];       /* the latest write error ("" when none) */
    double disk_fingerprint_s;  /* time hashing the checkpoint took for the file names
                                 * (once per model, whatever number of engines) */
    uint64_t disk_fingerprint_bytes; /* checkpoint bytes hashed */
} mhla_state_stats;

void mhla_engine_state_stats(const mhla_engine *engine, mhla_state_stats *out);
/* The disk tier's fields of mhla_state_stats alone (the rest 0): these may be
 * read from any thread, at any time (the tier writes in the background). */
void mhla_engine_disk_stats(const mhla_engine *engine, mhla_state_stats *out);

/* ---- sampling ------------------------------------------------------------- */

/* The generator is base.h's mhla_rng (xoshiro256**). */

/* temperature 0 is greedy (lowest id wins ties); otherwise softmax(logits/T). */
int mhla_sample(const float *logits, int vocab_size, float temperature, mhla_rng *rng);

/*
 * The per-sequence sampler (sampler.c). Steps, in order: logit_bias is added;
 * repetition_penalty divides positive / multiplies negative logits of ids seen
 * in the prompt or the output; presence + frequency * count is subtracted for
 * ids in the output; then, on softmax(l / T): top_k and min_p (keep ids whose
 * probability is >= min_p times the best's) and last top_p (the smallest
 * best-first set holding top_p of what is left). T = 0 is greedy on the
 * adjusted logits. With temperature alone it is mhla_sample, so a seed gives
 * the tokens mhla-generate gives. Ties go to the lower id.
 */
typedef struct {
    int32_t id;
    float bias;
} mhla_logit_bias;

typedef struct {
    float temperature;                 /* >= 0; 0: greedy */
    int top_k;                         /* >= 0; 0: off */
    float top_p;                       /* (0, 1]; 1: off */
    float min_p;                       /* [0, 1]; 0: off */
    float presence_penalty;            /* 0: off */
    float frequency_penalty;           /* 0: off */
    float repetition_penalty;          /* > 0; 1: off */
    const mhla_logit_bias *logit_bias; /* copied by mhla_sampler_create */
    int n_logit_bias;
    uint64_t seed;
} mhla_sampling_params;

typedef struct mhla_sampler mhla_sampler;
typedef struct mhla_token_mask mhla_token_mask; /* below, with the sample slot */

/* temperature 1, top_p 1, repetition_penalty 1, everything else 0. */
void mhla_sampling_defaults(mhla_sampling_params *p);
/* prompt (may be NULL) feeds the repetition penalty. Bad parameters are refused. */
int mhla_sampler_create(const mhla_sampling_params *p, int vocab_size, const int32_t *prompt,
                        int n_prompt, mhla_sampler **out, mhla_error *err);
void mhla_sampler_free(mhla_sampler *s);
/* Chooses the next token from logits (not modified) and records it for the
 * penalties; with mask (may be NULL), only among the ids it allows, and the
 * mask is told the choice. NaN logits are refused. The engine calls it for
 * every token of a step (mhla_sample_slot); tests call it directly. */
int mhla_sampler_next(mhla_sampler *s, const float *logits, const mhla_token_mask *mask,
                      int32_t *token, mhla_error *err);

typedef struct {
    int32_t id;
    float logprob;
} mhla_logprob;

#define MHLA_MAX_TOP_LOGPROBS 20

/*
 * A constraint on the next token (a grammar, a JSON schema): the hook a
 * sampler consults at every token it chooses. apply sets the logit of every
 * id the constraint forbids now to -INFINITY (it works on the sampler's own
 * copy of the row); accept tells it which token was chosen, so that it
 * advances. Either returns -1 with err to fail the token; a mask that
 * leaves no id allowed fails it too.
 *
 * bits (optional) gives the same constraint as a bitmask: it fills
 * (vocab_size + 63) / 64 words, bit i of bits[i / 64] set when id i is
 * allowed now (bits past vocab_size are ignored). A mask needs apply or
 * bits; where apply is NULL the host sampler derives it from bits. With
 * bits, a GPU samples the slot on the device: the engine computes the bits
 * on the host, they go up with the step, and only the token comes back
 * (where apply alone would cost the logits row's copy to the host). Either
 * way accept is called after the choice, once per chosen token.
 */
struct mhla_token_mask {
    int (*apply)(void *ctx, float *logits, int vocab_size, mhla_error *err);
    int (*accept)(void *ctx, int32_t token, mhla_error *err);
    void *ctx;
    int (*bits)(void *ctx, uint64_t *bits, int vocab_size, mhla_error *err);
};

/*
 * A sample slot: the engine applies sampler (and mask, when given) to the
 * logits of item position at (0 .. n_tokens-1) and returns the token
 * (mhla_sampler_next) and, with n_top >= 0, its log-probability and the
 * n_top most likely ids (mhla_logprobs, under the unmasked distribution).
 *
 * Several slots of one item are taken in the order given (at ascending),
 * which is how drafted tokens are verified: where a slot's token differs
 * from the token the item feeds after its position (tokens[at + 1]), the
 * item's later slots are skipped (status 1), since their logits followed a
 * token the model did not choose. The tokens that were chosen are exactly
 * those one-token steps would have chosen, with the same draws from the
 * sampler's generator (a skipped slot draws nothing). The sequence then
 * keeps tokens[0 .. at] of the first such slot only: its position and its
 * state, pages included, are those that feeding just those tokens gives,
 * also where the drafts crossed into the next block (docs/architecture.md,
 * "Rolling back drafted tokens"). An item with a slot before its last
 * position feeds at most one block (chunk_size) of tokens. Several slots at the same position with
 * different samplers (the n choices of one prompt) all read that row.
 *
 * On a GPU a lone slot at an item's last position is sampled on the device
 * when it has no mask or a mask with bits, so only its results cross to the
 * host (a mask with apply only is sampled on the host). The CPU gives
 * exactly mhla_sampler_next's token; the GPU draws from the same
 * distribution with the same uniform from the sampler's generator, walking
 * the candidates in id order: greedy and plain temperature sampling give
 * the CPU's token, filtered sampling (top_k / top_p / min_p) may give
 * another token of the same distribution.
 * A sampling error (a NaN logit, a mask that allows nothing) fails this
 * slot only (status -1, message in err): the step itself has run and the
 * sequence has advanced.
 */
enum { MHLA_SLOT_OK = 0, MHLA_SLOT_SKIPPED = 1, MHLA_SLOT_FAILED = -1 };

struct mhla_sample_slot {
    mhla_sampler *sampler;       /* in; its generator and penalty counts advance */
    int at;                      /* in: the item position whose logits it samples */
    int n_top;                   /* in: -1 no logprobs, else 0 .. MHLA_MAX_TOP_LOGPROBS */
    const mhla_token_mask *mask; /* in: NULL, or the constraint on this token */
    int status;                  /* out: MHLA_SLOT_OK, _SKIPPED or _FAILED (with err) */
    int32_t token;               /* out */
    float token_logprob;         /* out (n_top >= 0) */
    mhla_logprob top[MHLA_MAX_TOP_LOGPROBS]; /* out: n_top entries, best first */
    mhla_error err;
};

/*
 * The logprobs of known tokens at an item's positions (echo with logprobs:
 * the prompt's own): for j < n_next, the log-probability of next[j] under
 * the logits of item position j, and its n_top most likely ids.
 */
struct mhla_token_scores {
    const int32_t *next; /* in: n_next tokens, next[j] follows item position j */
    int n_next;          /* in: 0 .. n_tokens */
    int n_top;           /* in: 0 .. MHLA_MAX_TOP_LOGPROBS */
    float *logprob;      /* out: n_next */
    mhla_logprob *top;   /* out: n_next * n_top (may be NULL when n_top is 0) */
    int status;          /* out: 0, or -1 with err (a NaN logit): the step itself has run */
    mhla_error err;
};

/* Under the model's distribution (log-softmax of the raw logits): the log-
 * probability of token and the n_top most likely ids, best first (ties: lower
 * id first). top must hold n_top entries. */
int mhla_logprobs(const float *logits, int vocab_size, int32_t token, int n_top,
                  float *token_logprob, mhla_logprob *top, mhla_error *err);

/* ---- for tests only ------------------------------------------------------- */

/*
 * One entry point for the hooks with which tests reach states that normal
 * use reaches rarely (SQLite's sqlite3_test_control is the model). Not for
 * production: an op may change or go. Returns 0, or -1 with a message for
 * an unknown op.
 */
typedef enum {
    /* (int bits): truncate prefix keys to bits bits (0: full) to force hash
     * collisions; clears the prefix cache. */
    MHLA_TESTCTRL_PREFIX_HASH_BITS = 1,
    /* (int fault): the disk tier's writes fail from now on: 1 disk full
     * (ENOSPC half-way), 2 a torn temporary left behind, 3 a read-only
     * directory, 0 none. */
    MHLA_TESTCTRL_DISK_FAULT = 2,
    /* (): waits until the disk tier has written every queued page. */
    MHLA_TESTCTRL_DISK_FLUSH = 3,
} mhla_testctrl_op;

int mhla_engine_test_control(mhla_engine *engine, mhla_error *err, int op, ...);

#ifdef __cplusplus
}
#endif
#endif
