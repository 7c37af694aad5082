/*
 * engine.c — an engine: a model, the backend its steps run on (chosen at run
 * time from the ones this build has), and the state memory of its
 * sequences; what it tells about its device. step.c runs its steps.
 */
#include "engine_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mhla_device_parse(const char *name, mhla_device *out, mhla_error *err)
{
    if (name && strcmp(name, "cpu") == 0)
        *out = MHLA_DEVICE_CPU;
    else if (name && strcmp(name, "auto") == 0)
        *out = MHLA_DEVICE_AUTO;
    else if (name && strcmp(name, "cuda") == 0)
        *out = MHLA_DEVICE_CUDA;
    else
        return eng_fail(err, "device '%.64s' is not auto, cpu or cuda", name ? name : "");
    return 0;
}

int mhla_gpu_weights_parse(const char *name, mhla_gpu_weights *out, mhla_error *err)
{
    if (name && strcmp(name, "bf16") == 0)
        *out = MHLA_GPU_WEIGHTS_BF16;
    else if (name && strcmp(name, "f16") == 0)
        *out = MHLA_GPU_WEIGHTS_F16;
    else if (name && strcmp(name, "f32") == 0)
        *out = MHLA_GPU_WEIGHTS_F32;
    else
        return eng_fail(err, "GPU weights '%.64s' are not bf16, f16 or f32", name ? name : "");
    return 0;
}

int mhla_weight_dtype_parse(const char *name, mhla_weight_dtype *out, mhla_error *err)
{
    if (name && strcmp(name, "f32") == 0)
        *out = MHLA_WEIGHTS_F32;
    else if (name && strcmp(name, "bf16") == 0)
        *out = MHLA_WEIGHTS_BF16;
    else if (name && strcmp(name, "q8") == 0)
        *out = MHLA_WEIGHTS_Q8;
    else if (name && strcmp(name, "bf16dot") == 0)
        *out = MHLA_WEIGHTS_BF16DOT;
    else if (name && strcmp(name, "q4") == 0)
        *out = MHLA_WEIGHTS_Q4;
    else
        return eng_fail(err, "'%.64s' is not f32, bf16, bf16dot, q8 or q4", name ? name : "");
    return 0;
}

const char *mhla_weight_dtype_name(mhla_weight_dtype wd)
{
    return wd == MHLA_WEIGHTS_Q8        ? "q8"
           : wd == MHLA_WEIGHTS_Q4      ? "q4"
           : wd == MHLA_WEIGHTS_BF16    ? "bf16"
           : wd == MHLA_WEIGHTS_BF16DOT ? "bf16dot"
                                        : "f32";
}

static const eng_backend_ops *backend_for(mhla_device device)
{
    for (int i = 0; eng_backends[i]; i++)
        if (eng_backends[i]->device == device)
            return eng_backends[i];
    return NULL;
}

/* Creates the backend the options ask for. AUTO takes the GPU when one is
 * usable and otherwise the CPU, with device_note saying why; CUDA without a
 * usable GPU fails with the reason. */
static int open_backend(mhla_engine *e, const mhla_engine_options *opt, mhla_error *err)
{
    mhla_device want = opt ? opt->device : MHLA_DEVICE_CPU;
    if (want != MHLA_DEVICE_CPU && want != MHLA_DEVICE_AUTO && want != MHLA_DEVICE_CUDA)
        return eng_fail(err, "unknown device %d", (int)want);
    if (want != MHLA_DEVICE_CPU) {
        const eng_backend_ops *gpu = backend_for(MHLA_DEVICE_CUDA);
        mhla_error why;
        if (!gpu)
            snprintf(why.msg, sizeof why.msg,
                     "this build has no CUDA backend (nvcc was not found "
                     "when it was configured)");
        else if (gpu->create(e->model, opt, &e->backend, &why) == 0) {
            e->ops = gpu;
            return 0;
        }
        if (want == MHLA_DEVICE_CUDA)
            return eng_fail_as(err, MHLA_ERR_DEVICE, "device cuda: %s", why.msg);
        snprintf(e->device_note, sizeof e->device_note, "no GPU used: %s", why.msg);
    }
    e->ops = &eng_cpu_backend;
    return e->ops->create(e->model, opt, &e->backend, err);
}

int mhla_engine_create(const mhla_model *model, const mhla_engine_options *opt, mhla_engine **out,
                       mhla_error *err)
{
    *out = NULL;
    mhla_engine *e = calloc(1, sizeof *e);
    if (!e)
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
    e->model = model;
    kv_pool_options po = {
        .geo = eng_state_geometry(&model->cfg),
        .dtype = opt && opt->state_dtype == MHLA_STATE_BF16 ? KV_DTYPE_BF16 : KV_DTYPE_F32,
        .budget_bytes = opt ? opt->state_bytes : 0,
        .prefault_bytes = opt ? opt->state_prefault_bytes : 0,
        .resume_slots = opt ? opt->resume_slots : 0,
    };
    kv_error ke;
    if (opt && opt->state_dtype != MHLA_STATE_F32 && opt->state_dtype != MHLA_STATE_BF16) {
        mhla_engine_free(e);
        return eng_fail(err, "unknown state dtype %d", (int)opt->state_dtype);
    }
    if (open_backend(e, opt, err)) {
        mhla_engine_free(e);
        return -1;
    }
    e->ops->describe(e->backend, e->device_name, sizeof e->device_name);
    if (e->ops->memory) {
        e->ops->memory(e->backend, &e->memory);
        e->home = e->backend;
        po.memory = &e->memory;
    }
    if (kv_pool_create(&po, &e->pool, &ke)) {
        mhla_engine_free(e);
        return eng_fail_kv(err, &ke);
    }
    size_t page_bytes = kv_pool_page_bytes(e->pool);
    if (po.budget_bytes > 0 && po.budget_bytes < page_bytes) {
        mhla_engine_free(e);
        return eng_fail(err, "state memory of %zu bytes holds no page of %zu bytes",
                        po.budget_bytes, page_bytes);
    }
    if (eng_state_disk_open(e, opt, err)) {
        mhla_engine_free(e);
        return -1;
    }
    *out = e;
    return 0;
}

void mhla_engine_free(mhla_engine *e)
{
    if (!e)
        return;
    /* its sequences keep the pool alive as long as they live; on a GPU they
     * must all be gone before the backend goes */
    kv_pool_release(e->pool);
    if (e->ops)
        e->ops->free(e->backend);
    eng_step_rows_free(e->rows);
    eng_verify_free(e->verify);
    free(e);
}

int mhla_engine_seq_create(mhla_engine *e, mhla_seq **out, mhla_error *err)
{
    return eng_seq_create_in(e->model, e->pool, e->ops, e->home, out, err);
}

mhla_device mhla_engine_device(const mhla_engine *e) { return e->ops->device; }
const char *mhla_engine_device_name(const mhla_engine *e) { return e->device_name; }
const char *mhla_engine_device_note(const mhla_engine *e) { return e->device_note; }

const char *mhla_engine_cpu_isa(const mhla_engine *e)
{
    (void)e; /* the kernels' path is chosen once per process */
    return k_isa_name();
}

const char *mhla_engine_cpu_note(const mhla_engine *e)
{
    return e->ops->note ? e->ops->note(e->backend) : "";
}

void mhla_engine_cpu_threads(const mhla_engine *e, mhla_cpu_threads *out)
{
    memset(out, 0, sizeof *out);
    if (e->ops->threads)
        e->ops->threads(e->backend, out);
}

size_t mhla_engine_step_weight_bytes(const mhla_engine *e)
{
    return e->ops->step_weight_bytes(e->backend);
}

int mhla_engine_memory_bandwidth(mhla_engine *e, double *rates, int reps, mhla_error *err)
{
    if (reps < 1)
        return eng_fail(err, "a bandwidth measurement needs at least one repetition, not %d", reps);
    return e->ops->memory_bandwidth(e->backend, rates, reps, err);
}

int mhla_engine_product_rate(mhla_engine *e, mhla_products which, double *bytes_per_s,
                             double *bytes, mhla_error *err)
{
    double s, b = 0;
    *bytes_per_s = 0;
    if (bytes)
        *bytes = 0;
    if (!e->ops->product_pass)
        return eng_fail(err, "the %s engine does not time its products alone", e->ops->name);
    if (e->ops->product_pass(e->backend, which, &s, &b, err))
        return -1;
    *bytes_per_s = b / s;
    if (bytes)
        *bytes = b;
    return 0;
}

int mhla_engine_device_memory(mhla_engine *e, size_t *free_bytes, size_t *total_bytes,
                              mhla_error *err)
{
    *free_bytes = *total_bytes = 0;
    if (!e->ops->device_memory)
        return eng_fail(err, "the %s engine keeps its state in host memory: no device memory",
                        e->ops->name);
    return e->ops->device_memory(e->backend, free_bytes, total_bytes, err);
}

void mhla_engine_device_stats(const mhla_engine *e, mhla_device_stats *out)
{
    memset(out, 0, sizeof *out);
    if (e->ops->stats)
        e->ops->stats(e->backend, out);
}

void mhla_engine_state_stats(const mhla_engine *e, mhla_state_stats *out)
{
    kv_stats k;
    kv_pool_stats(e->pool, &k);
    memset(out, 0, sizeof *out);
    out->page_bytes = k.page_bytes;
    out->pages_total = k.pages_total;
    out->pages_used = k.pages_used;
    out->pages_cached = k.pages_cached;
    out->pages_free = k.pages_free;
    out->pages_reserved = k.pages_reserved;
    out->pages_available = k.pages_available;
    out->prefix_hits = k.hits;
    out->prefix_misses = k.misses;
    out->evictions = k.evictions;
    out->resumes = k.resumes;
    out->resumed_tokens = k.resumed_tokens;
    out->pages_prefaulted = k.pages_prefaulted;
    out->prefault_seconds = k.prefault_seconds;
    eng_state_disk_stats(e, out);
}

int mhla_engine_test_control(mhla_engine *e, mhla_error *err, int op, ...)
{
    va_list ap;
    va_start(ap, op);
    int rc = 0;
    switch (op) {
    case MHLA_TESTCTRL_PREFIX_HASH_BITS: kv_pool_set_hash_bits(e->pool, va_arg(ap, int)); break;
    case MHLA_TESTCTRL_DISK_FAULT: rc = eng_state_disk_control(e, op, va_arg(ap, int), err); break;
    case MHLA_TESTCTRL_DISK_FLUSH: rc = eng_state_disk_control(e, op, 0, err); break;
    default: rc = eng_fail(err, "unknown test-control op %d", op);
    }
    va_end(ap);
    return rc;
}
