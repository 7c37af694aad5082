/*
 * backend.c — the CPU backend, the engine's reference: its scratch
 * buffers (forward.c runs the steps in them), its description, the bytes of
 * weights a step streams and the memory bandwidth it can stream them at.
 * Its state lives in host memory, so it has no memory hooks.
 */
#include "cpu_backend.h"
#include "kernels.h"
#include "kernels_q4.h"
#include "kernels_q8.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void cpu_free(void *ctx)
{
    eng_cpu *e = ctx;
    if (!e)
        return;
    float *bufs[] = {e->x,   e->h,  e->q,    e->k,          e->v,        e->g,
                     e->att, e->up, e->gate, e->logit_rows, e->logit_buf};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(e->row_item);
    free(e->bw_mem);
    free(e->bw_sums);
    tp_free(e->workers);
    free(e);
}

/* The kernels' instruction-set path (process-wide) and the backend's threads. */
/* The note's products: q8 or q4 (int8 or 4-bit weights alike), bf16 dot, with their kernels */
static void products_note(const mhla_model *m, char *out, size_t n)
{
    const k_q8_matrix *qm = m->lm_head.q8           ? m->lm_head.q8
                            : m->cfg.num_layers > 0 ? m->layers[0].wq.q8
                                                    : NULL;
    int bd = m->lm_head.bf16_dot || (m->cfg.num_layers > 0 && m->layers[0].wq.bf16_dot);
    int q4 = qm && qm->bits == 4;
    snprintf(out, n, "%s%s%s%s",
             !qm  ? ""
             : q4 ? "; q4 products with "
                  : "; q8 products with ",
             !qm  ? ""
             : q4 ? k_q4_kernel_name()
                  : k_q8_kernel_name(),
             bd ? "; bf16 dot products with " : "", bd ? k_bd_kernel_name() : "");
}

static int cpu_setup(eng_cpu *e, const mhla_engine_options *opt, mhla_error *err)
{
    char msg[400], why[800];
    if (k_isa_select(opt ? opt->cpu_isa : NULL, msg, sizeof msg))
        return eng_fail(err, "%s", msg);
    int dflt = tp_default_threads(why, sizeof why);
    e->n_threads = opt && opt->n_threads > 0 ? opt->n_threads : dflt;
    if (opt && opt->n_threads > 0)
        snprintf(why, sizeof why, "%d threads: requested", e->n_threads);
    char prods[160];
    products_note(e->model, prods, sizeof prods);
    snprintf(e->cpu_note, sizeof e->cpu_note, "kernels %s; %s%s", k_isa_reason(), why, prods);
    if (tp_create(e->n_threads, &e->workers, msg, sizeof msg))
        return eng_fail_as(err, MHLA_ERR_NOMEM, "%s", msg);
    /* whether the threads that take part adapt (threadpool.c): the option, else
     * MHLA_THREAD_ADAPT */
    const char *ta = opt && opt->thread_adapt && *opt->thread_adapt ? opt->thread_adapt
                                                                    : getenv("MHLA_THREAD_ADAPT");
    if (ta && *ta && strcmp(ta, "on") && strcmp(ta, "off"))
        return eng_fail(
            err, "thread adapt '%.40s' (the option or MHLA_THREAD_ADAPT): expected on or off", ta);
    int adapt = !(ta && !strcmp(ta, "off"));
    tp_set_adaptive(e->workers, adapt);
    if (e->n_threads > 1) {
        size_t len = strlen(e->cpu_note);
        snprintf(e->cpu_note + len, sizeof e->cpu_note - len, "; %s",
                 adapt ? "fewer take part while they do not pay (thread adapt on)"
                       : "all take part in every job (thread adapt off)");
    }
    /* when the attention runs as one job (attention_job.c): the option, else MHLA_ATTENTION_JOB */
    const char *aj = opt && opt->attention_job && *opt->attention_job
                         ? opt->attention_job
                         : getenv("MHLA_ATTENTION_JOB");
    if (!aj || !*aj || !strcmp(aj, "auto"))
        e->attention_job = MHLA_ATTN_JOB_AUTO;
    else if (!strcmp(aj, "always"))
        e->attention_job = MHLA_ATTN_JOB_ALWAYS;
    else if (!strcmp(aj, "never"))
        e->attention_job = MHLA_ATTN_JOB_NEVER;
    else
        return eng_fail(
            err,
            "attention job '%.40s' (the option or MHLA_ATTENTION_JOB): expected auto, always or never",
            aj);
    return 0;
}

static int cpu_create(const mhla_model *model, const mhla_engine_options *opt, void **ctx,
                      mhla_error *err)
{
    *ctx = NULL;
    eng_cpu *e = calloc(1, sizeof *e);
    if (!e)
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory");
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
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory for the engine's buffers");
    }
    *ctx = e;
    return 0;
}

static int cpu_restore_prefix(void *ctx, mhla_seq *seq, mhla_error *err)
{
    (void)ctx;
    (void)err;
    eng_token_mixer_restore_prefix(seq);
    return 0;
}

static void cpu_describe(const void *ctx, char *buf, size_t len)
{
    const eng_cpu *e = ctx;
    snprintf(buf, len, "cpu (%d threads, %s)", e->n_threads, k_isa_name());
}

static size_t cpu_step_weight_bytes(const void *ctx)
{
    return eng_step_weight_bytes(((const eng_cpu *)ctx)->model);
}

static const char *cpu_note(const void *ctx) { return ((const eng_cpu *)ctx)->cpu_note; }

static void cpu_threads(const void *ctx, mhla_cpu_threads *out)
{
    tp_stats st;
    tp_get_stats(((const eng_cpu *)ctx)->workers, &st);
    out->threads = st.threads;
    out->active = st.active;
    out->reductions = st.reductions;
}

/* The bandwidth measurement's buffer, large enough that a read of it comes
 * from memory: at least 256 MiB (8 times a desktop CPU's 32 MiB L3), and
 * 3 times the L3 the C library reports. A server CPU's L3 of 300 MiB held
 * much of a 256 MiB buffer: the reading was 68 GB/s there, 39.5 GB/s from
 * 1 GiB (bench/RESULTS.md, 2026-12-07). */
#define BW_MIN_BYTES ((size_t)256 << 20)
static size_t bw_bytes(void)
{
    size_t bytes = BW_MIN_BYTES;
#ifdef _SC_LEVEL3_CACHE_SIZE
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0 && (size_t)l3 <= ((size_t)16 << 30) && (size_t)l3 * 3 > bytes)
        bytes = (size_t)l3 * 3;
#endif
    return bytes;
}
/* Tasks per thread, as k_linear cuts its jobs: each a contiguous part. */
#define BW_TASKS_PER_THREAD 4

typedef struct {
    float *a;
    size_t part; /* floats per task */
    int prefetch;
    float *sums; /* one per task: keeps the loads */
} read_job;

static void fill_part(void *ctx, int t)
{
    read_job *j = ctx;
    size_t i0 = (size_t)t * j->part;
    /* no two pages alike (a page of one repeated pattern could be shared by
     * the host and read from cache), and every value small and finite */
    for (size_t i = i0; i < i0 + j->part; i++)
        j->a[i] = (float)((uint32_t)(i * 2654435761u) >> 16);
}

static void read_part(void *ctx, int t)
{
    read_job *j = ctx;
    j->sums[t] = k_stream_sum(j->a + (size_t)t * j->part, j->part, j->prefetch);
}

static double seconds_of(tp_pool *pool, int n_tasks, read_job *j)
{
    double t0 = mhla_now();
    tp_run_all(pool, n_tasks, read_part, j);
    return mhla_now() - t0;
}

/* The CPU streams weights, it does not copy them: each repetition reads
 * bw_bytes() with the backend's threads, cut into tasks as k_linear cuts a
 * matrix, from memory placed as the weights are (2 MiB-aligned, advised for
 * transparent huge pages), with the vectors of the kernels' path, once with
 * and once without the bf16 tiles' software prefetch; the faster read is the
 * repetition's rate, so the reading is never below what either pattern got. */
static int cpu_memory_bandwidth(void *ctx, double *rates, int reps, mhla_error *err)
{
    eng_cpu *e = ctx;
    int n_tasks = e->n_threads * BW_TASKS_PER_THREAD;
    if (!e->bw_mem) {
        /* made once: a reading can then be a single repetition between two
         * steps, without the allocation and the page faults */
        size_t part = bw_bytes() / sizeof(float) / (size_t)n_tasks / 64 * 64;
        void *mem = NULL;
        float *sums = malloc((size_t)n_tasks * sizeof *sums);
        if (!sums ||
            posix_memalign(&mem, (size_t)2 << 20, part * (size_t)n_tasks * sizeof(float))) {
            free(sums);
            return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory for the bandwidth measurement");
        }
        (void)madvise(mem, part * (size_t)n_tasks * sizeof(float), MADV_HUGEPAGE);
        read_job fill = {mem, part, 1, sums};
        tp_run_all(e->workers, n_tasks, fill_part, &fill);
        e->bw_mem = mem, e->bw_sums = sums, e->bw_part = part;
        (void)seconds_of(e->workers, n_tasks, &fill); /* the pages mapped */
    }
    read_job rj = {e->bw_mem, e->bw_part, 1, e->bw_sums};
    double bytes = (double)rj.part * n_tasks * sizeof(float);
    for (int r = 0; r < reps; r++) {
        double best = 0;
        for (int pf = 1; pf >= 0; pf--) {
            rj.prefetch = pf;
            double s = seconds_of(e->workers, n_tasks, &rj);
            double bw = s > 0 ? bytes / s : 0;
            best = bw > best ? bw : best;
        }
        rates[r] = best;
    }
    return 0;
}

/* The CPU samples nothing inside forward (samples_on_device 0): no masks come. */
static int cpu_forward(void *ctx, mhla_batch_item *items, int n_items, const uint64_t *const *masks,
                       mhla_error *err)
{
    (void)masks;
    return eng_cpu_forward(ctx, items, n_items, err);
}

const eng_backend_ops eng_cpu_backend = {
    .name = "cpu",
    .device = MHLA_DEVICE_CPU,
    .create = cpu_create,
    .free = cpu_free,
    .forward = cpu_forward,
    .restore_prefix = cpu_restore_prefix,
    .memory = NULL,
    .describe = cpu_describe,
    .step_weight_bytes = cpu_step_weight_bytes,
    .memory_bandwidth = cpu_memory_bandwidth,
    .product_pass = eng_cpu_product_pass,
    .device_memory = NULL,
    .stats = NULL,
    .note = cpu_note,
    .threads = cpu_threads,
};
