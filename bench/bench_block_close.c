/*
 * bench_block_close — what a block's close adds to an engine step, the cost the
 * step planner learns as per_close (server/step_cost.c). One sequence decodes a
 * token a step beside a prompt fed in chunks of CHUNK tokens (a divisor of the
 * block), so one step in block/CHUNK closes one of the prompt's blocks. Steps are
 * timed in three passes on one engine with a bounded state pool:
 *   fresh  the pool makes each new page (with its stash of pages made ahead,
 *          kvstate/page_stash.c, unless MHLA_STATE_READY_PAGES=0);
 *   reused a second prompt of other tokens whose pages come from the first's,
 *          evicted from the prefix cache (the pool holds no more): memory
 *          faulted in long before;
 * and for each, the median step with a close and without, wall and the
 * process's CPU time, and their difference: a close's cost.
 *
 * usage: bench_block_close MODEL_DIR [--weights bf16] [--threads N]
 *                          [--chunk 16] [--blocks 16]
 */
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double median(double *v, int n)
{
    if (n == 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

typedef struct {
    mhla_engine *e;
    mhla_seq *dec;
    int32_t *ids;
    float *logits; /* the decoding row's, as a server's step makes them */
    int chunk, C, blocks;
} rig;

/* One prompt of blocks × C tokens (ids from seed) beside the decoding row;
 * prints the medians of the steps with a close and without. */
static int pass(rig *r, const char *name, unsigned seed, int V)
{
    mhla_error err = {0};
    mhla_seq *pre;
    if (mhla_engine_seq_create(r->e, &pre, &err)) {
        fprintf(stderr, "bench_block_close: sequence: %s\n", err.msg);
        return -1;
    }
    int n = r->blocks * r->C, steps = n / r->chunk, nc = 0, no = 0;
    for (int i = 0; i < n; i++)
        r->ids[i] = 3 + (int)((i * 7919u + seed * 104729u) % (unsigned)(V - 3));
    double *wc = calloc((size_t)steps, sizeof *wc), *wo = calloc((size_t)steps, sizeof *wo);
    double *cc = calloc((size_t)steps, sizeof *cc), *co = calloc((size_t)steps, sizeof *co);
    int32_t tok = 7;
    for (int s = 0; s < steps && wc && wo && cc && co; s++) {
        mhla_batch_item it[2] = {
            {.seq = pre,
             .tokens = r->ids + s * r->chunk,
             .n_tokens = r->chunk,
             .logits_from = r->chunk},
            {.seq = r->dec, .tokens = &tok, .n_tokens = 1, .logits = r->logits},
        };
        int closes = (s + 1) * r->chunk % r->C == 0;
        double t0 = mhla_now(), c0 = cpu_now();
        if (mhla_engine_step(r->e, it, 2, &err)) {
            fprintf(stderr, "bench_block_close: step: %s\n", err.msg);
            break;
        }
        double w = mhla_now() - t0, c = cpu_now() - c0;
        if (closes)
            wc[nc] = w, cc[nc++] = c;
        else
            wo[no] = w, co[no++] = c;
    }
    double mwc = median(wc, nc), mwo = median(wo, no), mcc = median(cc, nc), mco = median(co, no);
    printf("%-7s %3d closes: step %.2f ms (CPU %.2f), without %.2f ms (CPU %.2f): a close "
           "%.2f ms (CPU %.2f)\n",
           name, nc, mwc * 1e3, mcc * 1e3, mwo * 1e3, mco * 1e3, (mwc - mwo) * 1e3,
           (mcc - mco) * 1e3);
    free(wc);
    free(wo);
    free(cc);
    free(co);
    mhla_seq_free(pre);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr,
                "usage: %s MODEL_DIR [--weights W] [--threads N] [--chunk 16] "
                "[--blocks 16]\n",
                argv[0]);
        return 2;
    }
    const char *wname = "bf16";
    int threads = 0, chunk = 16, blocks = 16;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--weights"))
            wname = argv[i + 1];
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--chunk"))
            chunk = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--blocks"))
            blocks = atoi(argv[i + 1]);
    }
    mhla_error err = {0};
    mhla_model_options mo = {0};
    mhla_model *m;
    if (mhla_weight_dtype_parse(wname, &mo.weights, &err) ||
        mhla_model_load_with(argv[1], &mo, &m, &err)) {
        fprintf(stderr, "bench_block_close: %s\n", err.msg);
        return 1;
    }
    const mhla_config *c = mhla_model_config(m);
    if (chunk < 1 || c->chunk_size % chunk || blocks < 2 ||
        (long)blocks * c->chunk_size + 16 > c->max_positions) {
        fprintf(stderr,
                "bench_block_close: --chunk must divide the block (%d) and --blocks "
                "fit the context\n",
                c->chunk_size);
        return 2;
    }
    rig r = {.chunk = chunk, .C = c->chunk_size, .blocks = blocks};
    /* pages (f32) for one prompt and the decoding row's few: the second prompt evicts the
     * first's */
    size_t page = (size_t)c->num_layers * c->num_kv_heads * c->head_k_dim *
                  (c->head_v_dim + (c->normalize ? 1 : 0)) * sizeof(float);
    mhla_engine_options eo = {.n_threads = threads, .state_bytes = page * (size_t)(blocks + 4)};
    if (mhla_engine_create(m, &eo, &r.e, &err) || mhla_engine_seq_create(r.e, &r.dec, &err)) {
        fprintf(stderr, "bench_block_close: engine: %s\n", err.msg);
        return 1;
    }
    r.ids = malloc((size_t)blocks * c->chunk_size * sizeof *r.ids);
    r.logits = malloc((size_t)c->vocab_size * sizeof *r.logits);
    const char *ready = getenv("MHLA_STATE_READY_PAGES");
    printf("model %s, weights %s, %s, %s; chunks of %d beside 1 decoding row, %d blocks of %d; "
           "pages made ahead: %s\n",
           argv[1], wname, mhla_engine_device_name(r.e), mhla_engine_cpu_isa(r.e), chunk, blocks,
           c->chunk_size, ready && *ready ? ready : "default");
    int rc = !r.ids || !r.logits || pass(&r, "fresh", 1, c->vocab_size) ||
             pass(&r, "reused", 2, c->vocab_size);
    free(r.ids);
    free(r.logits);
    mhla_seq_free(r.dec);
    mhla_engine_free(r.e);
    mhla_model_free(m);
    return rc ? 1 : 0;
}
