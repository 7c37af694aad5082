/*
 * backend.h — what a device the engine runs on implements (private to the
 * engine). The engine keeps the bookkeeping (validation, kvstate's page
 * tables, the prefix cache, admission); a backend holds the weights in its
 * form and runs whole steps. engine.c picks one at run time from the table
 * of the backends this build has (backend_registry.c), as ggml does: a build
 * without CUDA simply has no CUDA entry.
 *
 *   cpu   cpu/backend.c (cpu/forward.c is its forward pass): the reference
 *   cuda  cuda/ops.c over the CUDA code in engine/cuda
 *
 * The core knows a backend by this table only: never its state's type.
 */
#ifndef MHLA_ENGINE_BACKEND_H
#define MHLA_ENGINE_BACKEND_H

#include "engine.h"
#include "kvstate.h"

#include <stddef.h>

typedef struct {
    const char *name; /* "cpu", "cuda": what --device calls it */
    mhla_device device;
    /* A backend for model with opt (NULL: defaults), in *ctx; -1 with the
     * reason in err when the device is absent or unusable (device AUTO then
     * falls back to the CPU). */
    int (*create)(const mhla_model *model, const mhla_engine_options *opt, void **ctx,
                  mhla_error *err);
    void (*free)(void *ctx);
    /* One validated step: every page a closing block needs is reserved, and
     * the engine advances the sequences afterwards. masks (NULL: none) holds
     * per item the allowed-token bitmask ((vocab + 63) / 64 words, NULL:
     * none) of the slot forward samples on its device; the engine calls the
     * mask's accept afterwards. */
    int (*forward)(void *ctx, mhla_batch_item *items, int n_items, const uint64_t *const *masks,
                   mhla_error *err);
    /* Recomputes P_i of a sequence whose state was attached mid-block (a
     * resume or a snapshot); ctx is NULL for a sequence of no engine. */
    int (*restore_prefix)(void *ctx, mhla_seq *seq, mhla_error *err);
    /* kvstate's memory hooks for state in the device's memory; NULL: the
     * state lives in host memory. */
    void (*memory)(void *ctx, kv_memory *mem);
    /* A one-line description for mhla_engine_device_name. */
    void (*describe)(const void *ctx, char *buf, size_t len);
    /* Bytes of weights one step reads (mhla_engine_step_weight_bytes). */
    size_t (*step_weight_bytes)(const void *ctx);
    /* The memory bandwidth a step can stream at, measured reps times into
     * rates[0..reps) (mhla_engine_memory_bandwidth). */
    int (*memory_bandwidth)(void *ctx, double *rates, int reps, mhla_error *err);
    /* The seconds the products of one batch-1 step (or its head) take
     * alone and the weight bytes they read (mhla_engine_product_rate); NULL:
     * not measured on this device. */
    int (*product_pass)(void *ctx, mhla_products which, double *seconds, double *bytes,
                        mhla_error *err);
    /* Free and total bytes of the device's memory (mhla_engine_device_memory);
     * NULL: the backend works in host memory. */
    int (*device_memory)(void *ctx, size_t *free_bytes, size_t *total_bytes, mhla_error *err);
    /* Counters (mhla_engine_device_stats); NULL: all 0. */
    void (*stats)(const void *ctx, mhla_device_stats *out);
    /* How the backend set itself up and why (mhla_engine_cpu_note: the CPU
     * kernels' path and the thread count); NULL: "". */
    const char *(*note)(const void *ctx);
    /* Its CPU threads (mhla_engine_cpu_threads); NULL: all 0. */
    void (*threads)(const void *ctx, mhla_cpu_threads *out);
    /* 1: forward samples an item's lone slot at its last position itself (on
     * the device, so that only the results cross to the host), unmasked or
     * with a mask that gives bits (applied before everything else); 0: the
     * engine samples every slot from the logits rows forward returns. */
    int samples_on_device;
} eng_backend_ops;

extern const eng_backend_ops eng_cpu_backend;
extern const eng_backend_ops eng_cuda_backend; /* builds with CUDA only */

/* The backends of this build, NULL-terminated (backend_registry.c). */
extern const eng_backend_ops *const eng_backends[];

#endif
