/*
 * cpu_backend.c — the CPU backend, the engine's reference: its scratch
 * buffers (forward.c runs the steps in them), its description, the bytes of
 * weights a step streams and the memory bandwidth it can stream them at.
 * Its state lives in host memory, so it has no memory hooks.
 */
#include "cpu/kernels.h"
#include "cpu/kernels_q8.h"
#include "engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void cpu_free(void *ctx)
{
    mhla_cpu *e = ctx;
    if (!e)
        return;
    float *bufs[] = {e->x,   e->h,  e->q,    e->k,          e->v,        e->g,
                     e->att, e->up, e->gate, e->logit_rows, e->logit_buf};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(e->row_item);
    free(e->sample_rows);
    tp_free(e->workers);
    free(e);
}

/* The kernels' instruction-set path (process-wide) and the backend's threads. */
static int cpu_setup(mhla_cpu *e, const mhla_engine_options *opt, mhla_error *err)
{
    char msg[400], why[800];
    if (k_isa_select(opt ? opt->cpu_isa : NULL, msg, sizeof msg))
        return mhla_fail(err, "%s", msg);
    int dflt = tp_default_threads(why, sizeof why);
    e->n_threads = opt && opt->n_threads > 0 ? opt->n_threads : dflt;
    if (opt && opt->n_threads > 0)
        snprintf(why, sizeof why, "%d threads: requested", e->n_threads);
    int q8 = e->model->lm_head.q8 || (e->model->cfg.num_layers > 0 && e->model->layers[0].wq.q8);
    snprintf(e->cpu_note, sizeof e->cpu_note, "kernels %s; %s%s%s", k_isa_reason(), why,
             q8 ? "; q8 products with " : "", q8 ? k_q8_kernel_name() : "");
    if (tp_create(e->n_threads, &e->workers, msg, sizeof msg))
        return mhla_fail_as(err, MHLA_ERR_NOMEM, "%s", msg);
    return 0;
}

static int cpu_create(const mhla_model *model, const mhla_engine_options *opt, void **ctx,
                      mhla_error *err)
{
    *ctx = NULL;
    mhla_cpu *e = calloc(1, sizeof *e);
    if (!e)
        return mhla_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
    e->model = model;
    if (cpu_setup(e, opt, err)) {
        cpu_free(e);
        return -1;
    }
    const mhla_config *c = &model->cfg;
    e->logit_rows = malloc((size_t)MHLA_LOGIT_ROWS * c->hidden_size * sizeof(float));
    e->logit_buf = malloc((size_t)MHLA_LOGIT_ROWS * c->vocab_size * sizeof(float));
    if (!e->logit_rows || !e->logit_buf) {
        cpu_free(e);
        return mhla_fail_as(err, MHLA_ERR_NOMEM, "out of memory for the engine's buffers");
    }
    *ctx = e;
    return 0;
}

static int cpu_restore_prefix(void *ctx, mhla_seq *seq, mhla_error *err)
{
    (void)ctx;
    (void)err;
    mhla_mix_restore_prefix(seq);
    return 0;
}

static void cpu_describe(const void *ctx, char *buf, size_t len)
{
    const mhla_cpu *e = ctx;
    snprintf(buf, len, "cpu (%d threads, %s)", e->n_threads, k_isa_name());
}

static size_t cpu_step_weight_bytes(const void *ctx)
{
    const mhla_model *m = ((const mhla_cpu *)ctx)->model;
    size_t n = mhla_model_weight_bytes(m);
    size_t V = m->cfg.vocab_size, D = m->cfg.hidden_size;
    /* a step gathers a few embedding rows, unless the head is the table */
    return m->lm_head.f32 == m->embeddings ? n : n - V * D * 4;
}

typedef struct {
    const float *a;
    size_t part;
    volatile float sink;
} read_job;

static void read_part(void *ctx, int t)
{
    read_job *j = ctx;
    const float *p = j->a + (size_t)t * j->part;
    float acc[16] = {0};
    for (size_t i = 0; i + 16 <= j->part; i += 16)
        for (int l = 0; l < 16; l++)
            acc[l] += p[i + l];
    j->sink += acc[0] + acc[15];
}

/* The CPU streams weights, it does not copy them: read 256 MiB with the
 * backend's threads, as its sweeps over the weights do. */
static int cpu_memory_bandwidth(void *ctx, double *bytes_per_s, mhla_error *err)
{
    const mhla_cpu *e = ctx;
    size_t n = (256u << 20) / sizeof(float);
    float *a = malloc(n * sizeof(float));
    if (!a)
        return mhla_fail_as(err, MHLA_ERR_NOMEM, "out of memory for the bandwidth measurement");
    for (size_t i = 0; i < n; i++)
        a[i] = (float)(i & 7);
    int nt = e->n_threads;
    size_t part = n / (size_t)nt;
    read_job rj = {a, part, 0};
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        tp_run(e->workers, nt, read_part, &rj);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
        double bw = s > 0 ? (double)(part * (size_t)nt) * sizeof(float) / s : 0;
        best = bw > best ? bw : best;
    }
    free(a);
    *bytes_per_s = best;
    return 0;
}

const mhla_backend_ops mhla_cpu_backend = {
    .name = "cpu",
    .device = MHLA_DEVICE_CPU,
    .create = cpu_create,
    .free = cpu_free,
    .forward = mhla_cpu_forward,
    .restore_prefix = cpu_restore_prefix,
    .memory = NULL,
    .describe = cpu_describe,
    .step_weight_bytes = cpu_step_weight_bytes,
    .memory_bandwidth = cpu_memory_bandwidth,
    .device_memory = NULL,
    .stats = NULL,
};
