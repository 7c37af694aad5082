/*
 * mhla-generate — evaluate a prompt and generate tokens with the CPU engine.
 * The --feed modes drive the same sequence through one prefill call, token
 * by token, or random chunks, which is what the exactness tests compare.
 * The flags are rows of base's option table (mhla_opts).
 */
#include "base.h"
#include "engine.h"
#include "tokenizer.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILE_BYTES ((size_t)1 << 30)

enum { FEED_PREFILL, FEED_DECODE, FEED_SPLITS };

typedef struct {
    const char *model, *prompt_text, *prompt_ids, *prompt_file, *logits_out, *perplexity, *cpu_isa,
        *thread_adapt;
    int feed, weights, device, gpu_weights; /* the enums' values */
    long split_seed, max_tokens, seed, threads, gpu_index;
    double temperature;
    int print_ids, ignore_eos, no_graphs, list_cpu_isas;
} options;

_Static_assert(sizeof(mhla_device) == sizeof(int) && sizeof(mhla_gpu_weights) == sizeof(int) &&
                   sizeof(mhla_weight_dtype) == sizeof(int),
               "the enum flags are stored as ints");

static const char *const feed_words[] = {"prefill", "decode", "splits", NULL};
static const char *const weight_words[] = {"f32", "bf16", "q8", "bf16dot", "q4", NULL};
static const char *const device_words[] = {"cpu", "auto", "cuda", NULL};
static const char *const gpu_weight_words[] = {"bf16", "f16", "f32", NULL};

#define OPT(field) offsetof(options, field)
#define STR(flag, field, meta)                                                                     \
    .name = flag, .kind = MHLA_OPT_STRING, .off = OPT(field), .metavar = meta
#define LONG(flag, field, min, max, meta)                                                          \
    .name = flag, .kind = MHLA_OPT_LONG, .off = OPT(field), .lo = min, .hi = max, .metavar = meta
static const mhla_opt rows[] = {
    {STR("model", model, "DIR"), .help = "checkpoint directory (config.json + safetensors)"},
    {STR("prompt", prompt_text, "TEXT"),
     .help = "prompt text, encoded with the model's tokenizer.json; the\n"
             "generated text is streamed to stdout"},
    {STR("prompt-ids", prompt_ids, "LIST"), .help = "prompt token ids, comma or space separated"},
    {STR("prompt-ids-file", prompt_file, "F"), .help = "read the prompt ids from a file"},
    {.name = "feed",
     .kind = MHLA_OPT_ENUM,
     .off = OPT(feed),
     .words = feed_words,
     .metavar = "MODE",
     .help = "prefill (one call, default), decode (token by token),\n"
             "splits (random chunks, see --split-seed)"},
    {LONG("split-seed", split_seed, 0, 4611686018427387904.0, "S"),
     .help = "seed of the chunk sizes for --feed splits (default 1)"},
    {STR("logits-out", logits_out, "FILE"),
     .help = "write the logits of every prompt position as raw\n"
             "little-endian float32, row-major [n_prompt, vocab]"},
    {LONG("max-tokens", max_tokens, 0, 1 << 24, "N"),
     .help = "tokens to generate (default 16; 0 evaluates the prompt only)"},
    {.name = "temperature",
     .kind = MHLA_OPT_DOUBLE,
     .off = OPT(temperature),
     .lo = 0,
     .hi = 100,
     .metavar = "T",
     .help = "0 is greedy (default 0)"},
    {LONG("seed", seed, 0, 4611686018427387904.0, "S"), .help = "sampling seed (default 0)"},
    {.name = "ignore-eos",
     .kind = MHLA_OPT_FLAG,
     .off = OPT(ignore_eos),
     .help = "keep generating after the end-of-sequence token"},
    {.name = "print-ids",
     .kind = MHLA_OPT_FLAG,
     .off = OPT(print_ids),
     .help = "print the generated ids on one line of stdout"},
    {LONG("threads", threads, 1, 1024, "N"),
     .help = "worker threads (default: the CPUs this process may use)"},
    {STR("cpu-isa", cpu_isa, "P"), .help =
                                       "CPU kernel path: auto (default: MHLA_CPU_ISA, else the\n"
                                       "best this CPU runs), avx512, avx2, neon or portable; all\n"
                                       "give the same bits. A path the CPU cannot run is an error"},
    {.name = "list-cpu-isas",
     .kind = MHLA_OPT_FLAG,
     .off = OPT(list_cpu_isas),
     .help = "print the kernel paths this CPU runs, best first, and exit"},
    {STR("thread-adapt", thread_adapt, "on|off"),
     .help = "on: fewer threads take part while they are not faster than\n"
             "one (a busy machine); off: all, always (default:\n"
             "MHLA_THREAD_ADAPT, else on; the same bits either way)"},
    {.name = "weights",
     .kind = MHLA_OPT_ENUM,
     .off = OPT(weights),
     .words = weight_words,
     .help = "how weights are held in memory (default f32; bf16 halves\n"
             "the bytes per step, arithmetic stays f32; q8, CPU only:\n"
             "int8 per group of 32, logits change slightly; bf16dot,\n"
             "CPU only: bf16 dot products, activations rounded to bf16;\n"
             "q4, CPU only: 4-bit per group of 32, f16 scales)"},
    {.name = "device",
     .kind = MHLA_OPT_ENUM,
     .off = OPT(device),
     .words = device_words,
     .metavar = "D",
     .help = "auto (a GPU when one is usable, else the CPU), cpu (default)\n"
             "or cuda (fails without a usable GPU)"},
    {.name = "gpu-weights",
     .kind = MHLA_OPT_ENUM,
     .off = OPT(gpu_weights),
     .words = gpu_weight_words,
     .metavar = "W",
     .help = "bf16 (default), f16 or f32: how the GPU holds the weights"},
    {LONG("gpu-index", gpu_index, 0, 64, "N"), .help = "which CUDA device (default 0)"},
    {.name = "no-graphs",
     .kind = MHLA_OPT_FLAG,
     .off = OPT(no_graphs),
     .help = "never replay decode steps as CUDA graphs"},
    {STR("perplexity", perplexity, "FILE"),
     .help = "evaluate the token ids in FILE instead of generating: the ids\n"
             "are cut into consecutive windows of the model's context; in\n"
             "each window every token but the first is predicted from the\n"
             "ones before it. Prints 'perplexity P tokens N nll S' (S: summed\n"
             "negative log-likelihood in nats) on stdout"},
};
#undef OPT
#undef STR
#undef LONG

static const mhla_opts spec = {
    .usage = "usage: mhla-generate --model DIR (--prompt-ids 1,2,3 | --prompt-ids-file FILE) "
             "[options]\n"
             "       mhla-generate --model DIR --perplexity FILE [--threads N] [--weights W]\n"
             "\n",
    .rows = rows,
    .n_rows = sizeof rows / sizeof rows[0],
    .help_col = 25,
};

static char errbuf[600];

static int fail(const char *fmt, const char *arg)
{
    snprintf(errbuf, sizeof errbuf, fmt, arg);
    return -1;
}

/* What the flags say together: a model, and a prompt or --perplexity. */
static int check_args(const options *o)
{
    if (!o->model)
        return fail("%s", "--model DIR is required");
    if (o->perplexity) {
        if (o->prompt_ids || o->prompt_file || o->prompt_text || o->logits_out)
            return fail("%s", "--perplexity takes no prompt and no --logits-out");
        return 0;
    }
    if (!!o->prompt_ids + !!o->prompt_file + !!o->prompt_text != 1)
        return fail("%s", "give the prompt with exactly one of --prompt, --prompt-ids or "
                          "--prompt-ids-file");
    return 0;
}

/* Returns -1 to go on, else the exit status: 0 after --help or
 * --list-cpu-isas, 2 on a usage error (the message in errbuf). */
static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->feed = FEED_PREFILL;
    o->split_seed = 1;
    o->max_tokens = 16;
    o->weights = MHLA_WEIGHTS_F32;
    o->device = MHLA_DEVICE_CPU;
    o->gpu_weights = MHLA_GPU_WEIGHTS_BF16;
    int rc = mhla_opts_parse(&spec, o, argc, argv, NULL, errbuf, sizeof errbuf);
    if (rc == 1)
        mhla_opts_help(&spec, stdout);
    if (rc == 1 || rc == 2) /* --help or --version */
        return 0;
    if (rc == 0 && o->list_cpu_isas) {
        printf("%s\n", mhla_cpu_isa_runnable());
        return 0;
    }
    return rc || check_args(o) ? 2 : -1;
}

static mhla_engine_options engine_options(const options *o)
{
    mhla_engine_options eo = {
        .n_threads = (int)o->threads,
        .cpu_isa = o->cpu_isa,
        .thread_adapt = o->thread_adapt,
        .device = (mhla_device)o->device,
        .gpu_index = (int)o->gpu_index,
        .gpu_weights = (mhla_gpu_weights)o->gpu_weights,
        .gpu_no_graphs = o->no_graphs,
    };
    return eo;
}

/* Loads --model with the --weights storage. */
static int load_model(const options *o, mhla_model **model, mhla_error *err)
{
    mhla_model_options mo = {.weights = (mhla_weight_dtype)o->weights};
    return mhla_model_load_with(o->model, &mo, model, err);
}

/* Creates the engine and says on stderr where it runs (and why not on a GPU
 * when --device auto found none). */
static int open_engine(const options *o, const mhla_model *model, mhla_engine **eng,
                       mhla_error *err)
{
    mhla_engine_options eo = engine_options(o);
    if (mhla_engine_create(model, &eo, eng, err))
        return -1;
    const char *note = mhla_engine_device_note(*eng);
    fprintf(stderr, "mhla-generate: device %s%s%s\n", mhla_engine_device_name(*eng),
            note[0] ? "; " : "", note);
    fprintf(stderr, "mhla-generate: cpu %s\n", mhla_engine_cpu_note(*eng));
    return 0;
}

/* Reads ids separated by commas and/or whitespace. */
static int parse_ids(const char *text, int32_t **ids, int *n)
{
    int cap = 0;
    *n = 0;
    *ids = NULL;
    for (const char *p = text;;) {
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX)
            return fail("prompt ids: '%.32s' is not a token id", p);
        if (mhla_grow(ids, sizeof **ids, &cap, *n + 1))
            return fail("%s", "out of memory");
        (*ids)[(*n)++] = (int32_t)v;
        p = end;
    }
    if (*n == 0)
        return fail("%s", "the prompt is empty: give at least one token id");
    return 0;
}

/* The token ids in the file at path. */
static int read_ids_file(const char *path, int32_t **ids, int *n)
{
    char *text = NULL, msg[512];
    size_t len;
    if (mhla_read_file(path, MAX_FILE_BYTES, &text, &len, msg, sizeof msg))
        return fail("%s", msg);
    int rc = parse_ids(text, ids, n);
    free(text);
    return rc;
}

/* Refuses ids outside the model's vocabulary of V tokens. */
static int check_vocab(const int32_t *ids, int n, int V, const char *what)
{
    for (int i = 0; i < n; i++)
        if (ids[i] >= V) {
            snprintf(errbuf, sizeof errbuf, "%s id %d is outside the vocabulary [0, %d)", what,
                     ids[i], V);
            return -1;
        }
    return 0;
}

/* What one run holds; gen_free releases all of it. */
typedef struct {
    mhla_model *model;
    mhla_engine *eng;
    mhla_seq *seq;
    mhla_tokenizer *tok;
    mhla_tok_stream *stream;
    int32_t *ids; /* the prompt, or --perplexity's ids */
    int n;
    int V;                 /* vocabulary size */
    float *logits;         /* --logits-out: every prompt position's; --perplexity: a chunk's */
    mhla_sampler *sampler; /* the engine samples each next token with it */
    mhla_sample_slot slot; /* the token the last step chose */
} gen_state;

static void gen_free(gen_state *g)
{
    mhla_tok_stream_free(g->stream);
    mhla_tok_free(g->tok);
    free(g->ids);
    free(g->logits);
    mhla_sampler_free(g->sampler);
    mhla_seq_free(g->seq);
    mhla_engine_free(g->eng);
    mhla_model_free(g->model);
}

/* Loads the model (the engine comes after the checks against it). */
static int open_model(const options *o, gen_state *g)
{
    mhla_error err = {0};
    if (load_model(o, &g->model, &err))
        return fail("%s", err.msg);
    g->V = mhla_model_config(g->model)->vocab_size;
    return 0;
}

static int start_engine(const options *o, gen_state *g)
{
    mhla_error err = {0};
    if (open_engine(o, g->model, &g->eng, &err))
        return fail("%s", err.msg);
    return 0;
}

/* Feeds the prompt in the chunks the feed mode asks for. With all_logits
 * every position's logits are kept; with first, the last chunk samples the
 * first generated token from the prompt's last position. */
static int run_prompt(mhla_engine *eng, mhla_seq *seq, const options *o, const int32_t *ids, int n,
                      float *all_logits, mhla_sample_slot *first, int V, mhla_error *err)
{
    mhla_rng rng;
    mhla_rng_seed(&rng, (uint64_t)o->split_seed);
    for (int done = 0; done < n;) {
        int len = n - done;
        if (o->feed == FEED_DECODE)
            len = 1;
        else if (o->feed == FEED_SPLITS) {
            /* 1..23 tokens: crosses block boundaries at every offset. */
            int r = 1 + (int)(mhla_rng_uniform(&rng) * 23.0);
            len = r < len ? r : len;
        }
        int final = done + len == n;
        mhla_batch_item it = {.seq = seq,
                              .tokens = ids + done,
                              .n_tokens = len,
                              .logits_from = len};
        if (all_logits) {
            it.logits_from = 0;
            it.logits = all_logits + (size_t)done * V;
        }
        if (final && first) {
            first->at = len - 1;
            it.sample = first;
            it.n_samples = 1;
        }
        if (mhla_engine_step(eng, &it, 1, err))
            return fail("%s", err->msg);
        done += len;
    }
    return 0;
}

/* --perplexity: windows of the model's context, each in a fresh sequence, fed in
 * prefill chunks of up to PPL_CHUNK tokens; log-softmax in double. */
#define PPL_CHUNK 256

/* -log softmax(row)[target], in double. */
static double token_nll(const float *row, int V, int target)
{
    double mx = row[0], se = 0.0;
    for (int v = 1; v < V; v++)
        mx = row[v] > mx ? row[v] : mx;
    for (int v = 0; v < V; v++)
        se += exp((double)row[v] - mx);
    return mx + log(se) - (double)row[target];
}

/* Adds the negative log-likelihood of ids[1..wn) given what precedes each, in
 * a fresh sequence (the window's last token is never fed). */
static int window_nll(gen_state *g, const int32_t *ids, int wn, double *nll, long *counted)
{
    mhla_error err = {0};
    mhla_seq_free(g->seq);
    g->seq = NULL;
    if (mhla_engine_seq_create(g->eng, &g->seq, &err))
        return fail("%s", err.msg);
    for (int done = 0; done < wn - 1;) {
        int len = wn - 1 - done < PPL_CHUNK ? wn - 1 - done : PPL_CHUNK;
        mhla_batch_item it = {.seq = g->seq,
                              .tokens = ids + done,
                              .n_tokens = len,
                              .logits_from = 0,
                              .logits = g->logits};
        if (mhla_engine_step(g->eng, &it, 1, &err))
            return fail("%s", err.msg);
        for (int t = 0; t < len; t++)
            *nll += token_nll(g->logits + (size_t)t * g->V, g->V, ids[done + t + 1]);
        *counted += len;
        done += len;
    }
    return 0;
}

static int run_perplexity(const options *o)
{
    gen_state g = {0};
    int rc = -1;
    if (read_ids_file(o->perplexity, &g.ids, &g.n))
        goto done;
    if (g.n < 2) {
        fail("%s", "--perplexity needs at least two token ids");
        goto done;
    }
    if (open_model(o, &g) || check_vocab(g.ids, g.n, g.V, "token") || start_engine(o, &g))
        goto done;
    if (!(g.logits = malloc((size_t)PPL_CHUNK * g.V * sizeof(float)))) {
        fail("%s", "out of memory for the logits");
        goto done;
    }
    int W = mhla_model_config(g.model)->max_positions;
    double nll = 0.0, t0 = mhla_now();
    long counted = 0;
    for (int w0 = 0; w0 + 1 < g.n; w0 += W)
        if (window_nll(&g, g.ids + w0, g.n - w0 < W ? g.n - w0 : W, &nll, &counted))
            goto done;
    double dt = mhla_now() - t0;
    printf("perplexity %.6f tokens %ld nll %.6f\n", exp(nll / (double)counted), counted, nll);
    fprintf(stderr,
            "mhla-generate: perplexity over %ld predicted tokens in %.2f s (%.1f tokens/s)\n",
            counted, dt, counted / dt);
    rc = 0;
done:
    gen_free(&g);
    return rc;
}

/* Loads DIR/tokenizer.json (and tokenizer_config.json when present). */
static int load_tokenizer(const char *dir, mhla_tokenizer **tok)
{
    char path[4096], cfg[4096], msg[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
    FILE *f = fopen(cfg, "rb");
    if (f)
        fclose(f);
    if (mhla_tok_load(path, f ? cfg : NULL, tok, msg, sizeof msg))
        return fail("--prompt needs the model's tokenizer: %s", msg);
    return 0;
}

/* Writes what the streaming decoder releases for id (complete characters only). */
static int emit_text(mhla_tok_stream *st, int32_t id, int last)
{
    const char *piece;
    size_t len;
    char msg[512];
    if (mhla_tok_stream_push(st, id, &piece, &len, msg, sizeof msg))
        return fail("%s", msg);
    fwrite(piece, 1, len, stdout);
    if (last) {
        if (mhla_tok_stream_finish(st, &piece, &len, msg, sizeof msg))
            return fail("%s", msg);
        fwrite(piece, 1, len, stdout);
        fputc('\n', stdout);
    }
    fflush(stdout);
    return 0;
}

/* The prompt's ids: --prompt encoded with the model's tokenizer (which then
 * also decodes the output), or --prompt-ids / --prompt-ids-file. */
static int read_prompt(const options *o, gen_state *g)
{
    char msg[512];
    size_t nn = 0;
    if (o->prompt_ids)
        return parse_ids(o->prompt_ids, &g->ids, &g->n);
    if (o->prompt_file)
        return read_ids_file(o->prompt_file, &g->ids, &g->n);
    if (load_tokenizer(o->model, &g->tok))
        return -1;
    if (mhla_tok_encode(g->tok, o->prompt_text, strlen(o->prompt_text), 1, &g->ids, &nn, msg,
                        sizeof msg))
        return fail("%s", msg);
    if (nn == 0 || nn > INT32_MAX)
        return fail("%s", "the prompt encodes to no tokens");
    g->n = (int)nn;
    if (!o->print_ids && mhla_tok_stream_new(g->tok, 1, &g->stream, msg, sizeof msg))
        return fail("%s", msg);
    return 0;
}

/* Loads the model, checks the prompt against it and opens a sequence. */
static int prepare(const options *o, gen_state *g)
{
    mhla_error err = {0};
    double t0 = mhla_now();
    if (open_model(o, g) || check_vocab(g->ids, g->n, g->V, "prompt"))
        return -1;
    const mhla_config *c = mhla_model_config(g->model);
    if ((long)g->n + o->max_tokens > c->max_positions) {
        snprintf(errbuf, sizeof errbuf,
                 "context length exceeded: %d prompt tokens + %ld new tokens > the model's "
                 "context of %d tokens",
                 g->n, o->max_tokens, c->max_positions);
        return -1;
    }
    if (start_engine(o, g))
        return -1;
    if (mhla_engine_seq_create(g->eng, &g->seq, &err))
        return fail("%s", err.msg);
    fprintf(stderr,
            "mhla-generate: model loaded in %.2f s (%d layers, d=%d, vocab %d, context %d)\n",
            mhla_now() - t0, c->num_layers, c->hidden_size, g->V, c->max_positions);
    return 0;
}

static int write_logits(const char *path, const float *logits, size_t count)
{
    FILE *out = fopen(path, "wb");
    int bad = !out || fwrite(logits, sizeof(float), count, out) != count;
    if (out && fclose(out) != 0)
        bad = 1;
    return bad ? fail("cannot write %s", path) : 0;
}

/* The sampler of --temperature and --seed: with temperature alone it is
 * mhla_sample on the logits with a generator seeded by --seed. */
static int make_sampler(const options *o, gen_state *g)
{
    mhla_sampling_params p;
    mhla_sampling_defaults(&p);
    p.temperature = (float)o->temperature;
    p.seed = (uint64_t)o->seed;
    mhla_error err = {0};
    if (mhla_sampler_create(&p, g->V, NULL, 0, &g->sampler, &err))
        return fail("%s", err.msg);
    g->slot = (mhla_sample_slot){.sampler = g->sampler, .n_top = -1};
    return 0;
}

/* Feeds the prompt as --feed says; --logits-out gets every position's logits;
 * with tokens to generate, the engine samples the first from its last. */
static int eval_prompt(const options *o, gen_state *g)
{
    mhla_error err = {0};
    if (o->logits_out && !(g->logits = malloc((size_t)g->n * g->V * sizeof(float))))
        return fail("%s", "out of memory for the logits");
    if (o->max_tokens > 0 && make_sampler(o, g))
        return -1;
    double t1 = mhla_now();
    if (run_prompt(g->eng, g->seq, o, g->ids, g->n, g->logits, o->max_tokens > 0 ? &g->slot : NULL,
                   g->V, &err))
        return -1;
    double t2 = mhla_now();
    fprintf(stderr, "mhla-generate: prompt %d tokens in %.3f s (%.1f tokens/s, feed %s)\n", g->n,
            t2 - t1, g->n / (t2 - t1), feed_words[o->feed]);
    if (g->logits)
        return write_logits(o->logits_out, g->logits, (size_t)g->n * g->V);
    return 0;
}

/* Samples up to --max-tokens tokens, feeding each back; prints ids or text. */
static int generate(const options *o, gen_state *g)
{
    mhla_error err = {0};
    int eos = mhla_model_config(g->model)->eos_token_id;
    double t3 = mhla_now();
    long produced = 0;
    for (long i = 0; i < o->max_tokens; i++) {
        if (g->slot.status != MHLA_SLOT_OK)
            return fail("%s", g->slot.err.msg);
        int32_t id = g->slot.token;
        produced++;
        int last = (id == eos && !o->ignore_eos) || i + 1 == o->max_tokens;
        if (o->print_ids)
            printf(i ? " %d" : "%d", id);
        else if (g->stream && emit_text(g->stream, id, last))
            return -1;
        if (last)
            break;
        g->slot.at = 0;
        mhla_batch_item it = {.seq = g->seq,
                              .tokens = &id,
                              .n_tokens = 1,
                              .logits_from = 1,
                              .sample = &g->slot,
                              .n_samples = 1};
        if (mhla_engine_step(g->eng, &it, 1, &err))
            return fail("%s", err.msg);
    }
    if (o->print_ids)
        printf("\n");
    double t4 = mhla_now();
    fprintf(stderr, "mhla-generate: generated %ld tokens in %.3f s (%.1f tokens/s)\n", produced,
            t4 - t3, produced / (t4 - t3));
    return 0;
}

static void report_thread_adapt(const mhla_engine *eng)
{
    mhla_cpu_threads ct;
    mhla_engine_cpu_threads(eng, &ct);
    if (ct.reductions > 0)
        fprintf(stderr,
                "mhla-generate: the threads that take part were reduced %ld times (thread adapt); "
                "%d of %d at the end\n",
                ct.reductions, ct.active, ct.threads);
}

static int run(const options *o)
{
    if (o->perplexity)
        return run_perplexity(o);
    gen_state g = {0};
    int rc = read_prompt(o, &g) || prepare(o, &g) || eval_prompt(o, &g) ||
             (o->max_tokens > 0 && generate(o, &g));
    if (rc == 0)
        report_thread_adapt(g.eng);
    gen_free(&g);
    return rc ? -1 : 0;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0) {
        if (rc)
            fprintf(stderr, "mhla-generate: error: %s\n", errbuf);
        return rc;
    }
    if (run(&o)) {
        fprintf(stderr, "mhla-generate: error: %s\n", errbuf);
        return 1;
    }
    return 0;
}
