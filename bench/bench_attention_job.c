/*
 * bench_attention_job — decode steps with a layer's attention as one job of
 * the CPU threads (the default from 16 sequences a step) against the in-turn
 * form, the two alternating step by step on the same sequences in one
 * process: a shared host's minutes move both alike, so a difference of a few
 * percent shows in the medians.
 *
 * usage: bench_attention_job MODEL_DIR [--batch 16,32] [--positions 100,1900]
 *            [--steps 40] [--threads 2] [--weights f32|bf16|q8] [--cpu-isa P]
 * (the flags are rows of base's option table, mhla_opts)
 *
 * For each position, one sequence is prefilled to it; for each batch, that
 * many clones of it then take 2 x steps decode steps, odd ones on an engine
 * with attention_job "never", even ones on one with "auto" (both with the
 * same threads and kernels). Each step's time counts for its engine; the
 * first two of each are left out (caches, pages). Prints per batch and
 * position the median step time of each form and never / auto (above 1: the
 * one-job form is faster).
 */
#include "bench_util.h"
#include "engine.h"

#include <stddef.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int rc, const mhla_error *err)
{
    if (rc) {
        fprintf(stderr, "bench_attention_job: error: %s\n", err->msg);
        exit(1);
    }
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "bench_attention_job: out of memory\n");
        exit(1);
    }
    return p;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* 2 x steps alternating steps of `batch` clones of base; *never_ms and
 * *auto_ms get each engine's median step time. */
static void alternate(mhla_engine *e_never, mhla_engine *e_auto, const mhla_seq *base, int batch,
                      int steps, int V, unsigned *seed, double *never_ms, double *auto_ms)
{
    mhla_error err;
    mhla_seq **seqs = xcalloc((size_t)batch, sizeof *seqs);
    mhla_batch_item *items = xcalloc((size_t)batch, sizeof *items);
    int32_t *tok = xcalloc((size_t)batch, sizeof *tok);
    float *logits = xcalloc((size_t)batch * V, sizeof(float));
    double *t[2] = {xcalloc((size_t)steps, sizeof(double)), xcalloc((size_t)steps, sizeof(double))};
    for (int b = 0; b < batch; b++) {
        check(mhla_seq_clone(base, &seqs[b], &err), &err);
        items[b] = (mhla_batch_item){seqs[b], &tok[b], 1, 0, logits + (size_t)b * V, NULL, 0, NULL};
    }
    for (int s = 0; s < 2 * steps; s++) {
        for (int b = 0; b < batch; b++)
            tok[b] = (int32_t)(rand_r(seed) % V);
        double t0 = mhla_now();
        check(mhla_engine_step(s % 2 ? e_auto : e_never, items, batch, &err), &err);
        t[s % 2][s / 2] = (mhla_now() - t0) * 1e3;
    }
    *never_ms = median(t[0] + 2, steps - 2);
    *auto_ms = median(t[1] + 2, steps - 2);
    for (int b = 0; b < batch; b++)
        mhla_seq_free(seqs[b]);
    free(seqs);
    free(items);
    free(tok);
    free(logits);
    free(t[0]);
    free(t[1]);
}

/* Everything bench_attention_job's flags set. */
typedef struct {
    mhla_engine_options o;
    int weights; /* mhla_weight_dtype */
    int batch[8], pos[8], n_batch, n_pos, steps;
} job_args;

static int parse_batch(const char *flag, const char *v, void *base, char *err, size_t errlen)
{
    job_args *a = base;
    return bench_opt_list(flag, v, 1, 1000000, a->batch, 8, &a->n_batch, err, errlen);
}

static int parse_positions(const char *flag, const char *v, void *base, char *err, size_t errlen)
{
    job_args *a = base;
    return bench_opt_list(flag, v, 1, 1000000, a->pos, 8, &a->n_pos, err, errlen);
}

static const char *const weight_words[] = {"f32", "bf16", "q8", NULL};

static const mhla_opt rows[] = {
    {.name = "batch",
     .kind = MHLA_OPT_CUSTOM,
     .parse = parse_batch,
     .metavar = "16,32",
     .help = "batch sizes"},
    {.name = "positions",
     .kind = MHLA_OPT_CUSTOM,
     .parse = parse_positions,
     .metavar = "100,1900",
     .help = "positions the sequences decode at"},
    {.name = "steps",
     .kind = MHLA_OPT_INT,
     .off = offsetof(job_args, steps),
     .lo = 4,
     .hi = 100000,
     .metavar = "40",
     .help = "steps of each form a cell"},
    {.name = "threads",
     .kind = MHLA_OPT_INT,
     .off = offsetof(job_args, o.n_threads),
     .lo = 1,
     .hi = 4096,
     .metavar = "2",
     .help = "engine threads"},
    {.name = "weights",
     .kind = MHLA_OPT_ENUM,
     .off = offsetof(job_args, weights),
     .words = weight_words,
     .help = "how the weights are held"},
    {.name = "cpu-isa",
     .kind = MHLA_OPT_STRING,
     .off = offsetof(job_args, o.cpu_isa),
     .metavar = "P",
     .help = "CPU kernel path"},
};

static const mhla_opts spec = {
    .usage = "usage: bench_attention_job MODEL_DIR [options]\n",
    .rows = rows,
    .n_rows = sizeof rows / sizeof rows[0],
    .help_col = 25,
};

/* The flags after MODEL_DIR into *a; 0, or the exit status 2 with the
 * message (or the usage) printed. */
static int parse_args(int argc, char **argv, job_args *a)
{
    char err[256];
    *a = (job_args){.o = {.n_threads = 2},
                    .batch = {16, 32},
                    .pos = {100, 1900},
                    .n_batch = 2,
                    .n_pos = 2,
                    .steps = 40};
    if (argc < 2 || argv[1][0] == '-') {
        mhla_opts_help(&spec, stderr);
        return 2;
    }
    int rc = mhla_opts_parse(&spec, a, argc - 1, argv + 1, NULL, err, sizeof err);
    if (rc == 1)
        mhla_opts_help(&spec, stderr);
    else if (rc < 0)
        fprintf(stderr, "bench_attention_job: %s\n", err);
    return rc ? 2 : 0;
}

int main(int argc, char **argv)
{
    job_args a;
    if (parse_args(argc, argv, &a))
        return 2;
    int *batch = a.batch, *pos = a.pos, n_batch = a.n_batch, n_pos = a.n_pos, steps = a.steps;
    mhla_model_options mo = {.weights = (mhla_weight_dtype)a.weights};
    mhla_engine_options o = a.o;
    mhla_error err;
    mhla_model *m;
    check(mhla_model_load_with(argv[1], &mo, &m, &err), &err);
    const mhla_config *c = mhla_model_config(m);
    int V = c->vocab_size;
    mhla_engine *e_never, *e_auto;
    o.attention_job = "never";
    check(mhla_engine_create(m, &o, &e_never, &err), &err);
    o.attention_job = "auto";
    check(mhla_engine_create(m, &o, &e_auto, &err), &err);
    printf("model %s (%s weights), kernels %s, %d threads\n", argv[1],
           mhla_weight_dtype_name(mo.weights), mhla_engine_cpu_isa(e_auto), o.n_threads);
    printf("%d steps of each form a cell, alternating; median step time in ms\n", steps);
    printf("| batch | position | in turn (never) | one job (auto) | never / auto |\n");
    printf("|---|---|---|---|---|\n");
    unsigned seed = 7;
    for (int p = 0; p < n_pos; p++) {
        /* room for the steps after the position */
        if (pos[p] + 2 * steps + 1 > c->max_positions) {
            fprintf(stderr,
                    "bench_attention_job: position %d plus %d steps is past the context (%d)\n",
                    pos[p], 2 * steps, c->max_positions);
            return 1;
        }
        mhla_seq *base;
        check(mhla_seq_create(m, &base, &err), &err);
        int32_t *tok = xcalloc((size_t)pos[p], sizeof *tok);
        float *last = xcalloc((size_t)V, sizeof(float));
        for (int i = 0; i < pos[p]; i++)
            tok[i] = (int32_t)(rand_r(&seed) % V);
        mhla_batch_item it = {base, tok, pos[p], pos[p] - 1, last, NULL, 0, NULL};
        check(mhla_engine_step(e_auto, &it, 1, &err), &err);
        free(tok);
        free(last);
        for (int b = 0; b < n_batch; b++) {
            double never_ms, auto_ms;
            alternate(e_never, e_auto, base, batch[b], steps, V, &seed, &never_ms, &auto_ms);
            printf("| %d | %d | %.3f | %.3f | %.3f |\n", batch[b], pos[p], never_ms, auto_ms,
                   never_ms / auto_ms);
            fflush(stdout);
        }
        mhla_seq_free(base);
    }
    mhla_engine_free(e_never);
    mhla_engine_free(e_auto);
    mhla_model_free(m);
    return 0;
}
