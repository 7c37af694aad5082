/*
 * bench_step_shapes — one engine step's time by its shape: decode rows
 * (0 or 1 sequence decoding one token) beside a prompt chunk of k tokens.
 * What the step planner (server/step_plan.c) must know to size a prompt's
 * chunk beside a decoding stream: the decode-only step, the time a prompt
 * token adds beside it, and a prompt token's cost in a step that only
 * prefills. The shapes are measured in turn, round after round, and each
 * shape's median over the rounds is printed, so a burst of load from
 * elsewhere does not land on one shape only.
 *
 * usage: bench_step_shapes MODEL_DIR [--weights f32|bf16|q8] [--threads N]
 *                         [--rounds 5] [--chunks 0,4,8,16,32,64,128,256,512]
 */
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

#define MAX_SHAPES 32

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    const mhla_model *m;
    mhla_engine *e;
    mhla_seq *dec, *pre;
    int32_t *ids;
    int n_ids;
} rig;

static int fail(const char *what, const mhla_error *err)
{
    fprintf(stderr, "bench_step_shapes: %s: %s\n", what, err->msg);
    return -1;
}

/* One step: the decoding sequence's next token (rows 1) beside a chunk of
 * the prompt sequence (k tokens), restarting either before it runs past the
 * context. Returns its seconds, < 0 on failure. */
static double one_step(rig *r, int rows, int k)
{
    mhla_error err = {0};
    int ctx = mhla_model_config(r->m)->max_positions;
    if (rows && mhla_seq_pos(r->dec) + 1 >= ctx - 1) {
        mhla_seq_free(r->dec);
        if (mhla_seq_create(r->m, &r->dec, &err))
            return fail("decode sequence", &err);
    }
    if (k && mhla_seq_pos(r->pre) + k >= ctx - 1) {
        mhla_seq_free(r->pre);
        if (mhla_seq_create(r->m, &r->pre, &err))
            return fail("prompt sequence", &err);
    }
    mhla_batch_item it[2] = {
        {.seq = r->pre, .tokens = r->ids, .n_tokens = k, .logits_from = k},
        {.seq = r->dec, .tokens = r->ids + 7, .n_tokens = 1, .logits_from = 1},
    };
    mhla_batch_item *first = k ? it : it + 1;
    int n = (k > 0) + rows;
    double t0 = mhla_now();
    if (mhla_engine_step(r->e, first, n, &err))
        return fail("step", &err);
    return mhla_now() - t0;
}

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        out[n++] = atoi(s);
        const char *c = strchr(s, ',');
        if (!c)
            break;
        s = c + 1;
    }
    return n;
}

static void report(int rows, int k, double *t, int rounds, double decode)
{
    qsort(t, rounds, sizeof *t, cmp_double);
    double med = t[rounds / 2];
    printf("%4d %6d %10.2f", rows, k, med * 1e3);
    if (k > 0)
        printf(" %14.3f", (med - (rows ? decode : 0)) / k * 1e3);
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr,
                "usage: %s MODEL_DIR [--weights W] [--threads N] [--rounds R] "
                "[--chunks LIST]\n",
                argv[0]);
        return 2;
    }
    const char *wname = "bf16", *chunks_arg = "0,4,8,16,32,64,128,256,512";
    int threads = 0, rounds = 5;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--weights"))
            wname = argv[i + 1];
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--chunks"))
            chunks_arg = argv[i + 1];
    }
    int chunks[MAX_SHAPES], nc = parse_list(chunks_arg, chunks, MAX_SHAPES);
    if (rounds < 1 || rounds > 100 || nc < 1)
        return fprintf(stderr, "bench_step_shapes: bad --rounds or --chunks\n"), 2;
    mhla_error err = {0};
    mhla_model_options mo = {0};
    rig r = {0};
    mhla_model *m;
    if (mhla_weight_dtype_parse(wname, &mo.weights, &err) ||
        mhla_model_load_with(argv[1], &mo, &m, &err))
        return fail("load", &err) ? 1 : 1;
    r.m = m;
    mhla_engine_options eo = {.n_threads = threads};
    if (mhla_engine_create(m, &eo, &r.e, &err) || mhla_seq_create(m, &r.dec, &err) ||
        mhla_seq_create(m, &r.pre, &err))
        return fail("engine", &err) ? 1 : 1;
    int V = mhla_model_config(m)->vocab_size, maxk = 8;
    for (int i = 0; i < nc; i++)
        maxk = chunks[i] > maxk ? chunks[i] : maxk;
    r.ids = malloc((size_t)(maxk + 8) * sizeof *r.ids);
    for (int i = 0; i < maxk + 8; i++)
        r.ids[i] = 3 + (int)((i * 7919u) % (unsigned)(V - 3));
    static double t[2][MAX_SHAPES][100];
    for (int w = 0; w < 3; w++) /* warm up: pages, packed buffers, the thread pool */
        one_step(&r, 1, 16);
    for (int k = 0; k < rounds; k++)
        for (int rows = 0; rows < 2; rows++)
            for (int i = 0; i < nc; i++)
                if (rows || chunks[i] > 0)
                    if ((t[rows][i][k] = one_step(&r, rows, chunks[i])) < 0)
                        return 1;
    printf("model %s, weights %s, %s, %s, median of %d rounds\n", argv[1], wname,
           mhla_engine_device_name(r.e), mhla_engine_cpu_isa(r.e), rounds);
    printf("rows prompt  step (ms)  per prompt token (ms, beyond the decode-only step)\n");
    double decode = 0;
    for (int rows = 1; rows >= 0; rows--)
        for (int i = 0; i < nc; i++) {
            if (!rows && chunks[i] == 0)
                continue;
            if (rows && chunks[i] == 0) {
                double c[100];
                memcpy(c, t[1][i], sizeof(double) * rounds);
                qsort(c, rounds, sizeof *c, cmp_double);
                decode = c[rounds / 2];
            }
            report(rows, chunks[i], t[rows][i], rounds, decode);
        }
    mhla_seq_free(r.dec);
    mhla_seq_free(r.pre);
    mhla_engine_free(r.e);
    mhla_model_free(m);
    free(r.ids);
    return 0;
}
