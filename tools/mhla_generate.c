/*
 * mhla-generate — evaluate a prompt and generate tokens with the CPU engine.
 * The --feed modes drive the same sequence through one prefill call, token
 * by token, or random chunks, which is what the exactness tests compare.
 */
#include "engine.h"
#include "tokenizer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *USAGE =
    "usage: mhla-generate --model DIR (--prompt-ids 1,2,3 | --prompt-ids-file FILE) [options]\n"
    "       mhla-generate --model DIR --perplexity FILE [--threads N] [--weights W]\n"
    "\n"
    "  --model DIR            checkpoint directory (config.json + safetensors)\n"
    "  --prompt TEXT          prompt text, encoded with the model's tokenizer.json; the\n"
    "                         generated text is streamed to stdout\n"
    "  --prompt-ids LIST      prompt token ids, comma or space separated\n"
    "  --prompt-ids-file F    read the prompt ids from a file\n"
    "  --feed MODE            prefill (one call, default), decode (token by token),\n"
    "                         splits (random chunks, see --split-seed)\n"
    "  --split-seed S         seed of the chunk sizes for --feed splits (default 1)\n"
    "  --logits-out FILE      write the logits of every prompt position as raw\n"
    "                         little-endian float32, row-major [n_prompt, vocab]\n"
    "  --max-tokens N         tokens to generate (default 16; 0 evaluates the prompt only)\n"
    "  --temperature T        0 is greedy (default 0)\n"
    "  --seed S               sampling seed (default 0)\n"
    "  --ignore-eos           keep generating after the end-of-sequence token\n"
    "  --print-ids            print the generated ids on one line of stdout\n"
    "  --threads N            worker threads (default: the CPUs this process may use)\n"
    "  --cpu-isa P            CPU kernel path: auto (default: MHLA_CPU_ISA, else the\n"
    "                         best this CPU runs), avx512, avx2, neon or portable; all\n"
    "                         give the same bits. A path the CPU cannot run is an error\n"
    "  --list-cpu-isas        print the kernel paths this CPU runs, best first, and exit\n"
    "  --thread-adapt on|off  on: fewer threads take part while they are not faster than\n"
    "                         one (a busy machine); off: all, always (default:\n"
    "                         MHLA_THREAD_ADAPT, else on; the same bits either way)\n"
    "  --weights f32|bf16|q8  how weights are held in memory (default f32; bf16 halves\n"
    "                         the bytes per step, arithmetic stays f32; q8, CPU only:\n"
    "                         int8 per group of 32, logits change slightly)\n"
    "  --device D             auto (a GPU when one is usable, else the CPU), cpu (default)\n"
    "                         or cuda (fails without a usable GPU)\n"
    "  --gpu-weights W        bf16 (default), f16 or f32: how the GPU holds the weights\n"
    "  --gpu-index N          which CUDA device (default 0)\n"
    "  --no-graphs            never replay decode steps as CUDA graphs\n"
    "  --perplexity FILE      evaluate the token ids in FILE instead of generating: the ids\n"
    "                         are cut into consecutive windows of the model's context; in\n"
    "                         each window every token but the first is predicted from the\n"
    "                         ones before it. Prints 'perplexity P tokens N nll S' (S: summed\n"
    "                         negative log-likelihood in nats) on stdout\n"
    "  --help                 this text\n";

typedef struct {
    const char *model, *prompt_text, *prompt_ids, *prompt_file, *feed, *logits_out, *weights,
        *perplexity, *cpu_isa, *thread_adapt;
    long split_seed, max_tokens, seed, threads, gpu_index;
    double temperature;
    int print_ids, ignore_eos, no_graphs;
    mhla_device device;
    mhla_gpu_weights gpu_weights;
} options;

static char errbuf[600];

static int fail(const char *fmt, const char *arg)
{
    snprintf(errbuf, sizeof errbuf, fmt, arg);
    return -1;
}

static int parse_long(const char *s, long lo, long hi, long *out, const char *flag)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        snprintf(errbuf, sizeof errbuf, "%s: '%.64s' is not an integer in [%ld, %ld]", flag, s, lo,
                 hi);
        return -1;
    }
    *out = v;
    return 0;
}

static mhla_engine_options engine_options(const options *o)
{
    mhla_engine_options eo = {
        .n_threads = (int)o->threads,
        .cpu_isa = o->cpu_isa,
        .thread_adapt = o->thread_adapt,
        .device = o->device,
        .gpu_index = (int)o->gpu_index,
        .gpu_weights = o->gpu_weights,
        .gpu_no_graphs = o->no_graphs,
    };
    return eo;
}

/* Loads --model with the --weights storage. */
static int load_model(const options *o, mhla_model **model, mhla_error *err)
{
    mhla_model_options mo = {MHLA_WEIGHTS_F32};
    if (o->weights && mhla_weight_dtype_parse(o->weights, &mo.weights, err))
        return -1;
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

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->feed = "prefill";
    o->split_seed = 1;
    o->max_tokens = 16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(USAGE, stdout);
            exit(0);
        }
        if (strcmp(a, "--print-ids") == 0) {
            o->print_ids = 1;
            continue;
        }
        if (strcmp(a, "--ignore-eos") == 0) {
            o->ignore_eos = 1;
            continue;
        }
        if (strcmp(a, "--no-graphs") == 0) {
            o->no_graphs = 1;
            continue;
        }
        if (strcmp(a, "--list-cpu-isas") == 0) {
            printf("%s\n", mhla_cpu_isa_runnable());
            exit(0);
        }
        if (i + 1 >= argc)
            return fail("%s needs a value (see --help)", a);
        const char *v = argv[++i];
        if (strcmp(a, "--model") == 0)
            o->model = v;
        else if (strcmp(a, "--prompt-ids") == 0)
            o->prompt_ids = v;
        else if (strcmp(a, "--prompt") == 0)
            o->prompt_text = v;
        else if (strcmp(a, "--prompt-ids-file") == 0)
            o->prompt_file = v;
        else if (strcmp(a, "--feed") == 0)
            o->feed = v;
        else if (strcmp(a, "--logits-out") == 0)
            o->logits_out = v;
        else if (strcmp(a, "--perplexity") == 0)
            o->perplexity = v;
        else if (strcmp(a, "--cpu-isa") == 0)
            o->cpu_isa = v;
        else if (strcmp(a, "--thread-adapt") == 0)
            o->thread_adapt = v;
        else if (strcmp(a, "--device") == 0) {
            mhla_error e;
            if (mhla_device_parse(v, &o->device, &e))
                return fail("--device: %s", e.msg);
        } else if (strcmp(a, "--gpu-weights") == 0) {
            mhla_error e;
            if (mhla_gpu_weights_parse(v, &o->gpu_weights, &e))
                return fail("--gpu-weights: %s", e.msg);
        } else if (strcmp(a, "--gpu-index") == 0) {
            if (parse_long(v, 0, 64, &o->gpu_index, a))
                return -1;
        } else if (strcmp(a, "--weights") == 0) {
            mhla_weight_dtype wd;
            mhla_error e;
            if (mhla_weight_dtype_parse(v, &wd, &e))
                return fail("--weights: %s", e.msg);
            o->weights = v;
        } else if (strcmp(a, "--split-seed") == 0) {
            if (parse_long(v, 0, 1L << 62, &o->split_seed, a))
                return -1;
        } else if (strcmp(a, "--max-tokens") == 0) {
            if (parse_long(v, 0, 1L << 24, &o->max_tokens, a))
                return -1;
        } else if (strcmp(a, "--seed") == 0) {
            if (parse_long(v, 0, 1L << 62, &o->seed, a))
                return -1;
        } else if (strcmp(a, "--threads") == 0) {
            if (parse_long(v, 1, 1024, &o->threads, a))
                return -1;
        } else if (strcmp(a, "--temperature") == 0) {
            char *end;
            o->temperature = strtod(v, &end);
            if (end == v || *end || !(o->temperature >= 0 && o->temperature <= 100))
                return fail("--temperature: '%.64s' is not a number in [0, 100]", v);
        } else
            return fail("unknown option '%.64s' (see --help)", a);
    }
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
    if (strcmp(o->feed, "prefill") && strcmp(o->feed, "decode") && strcmp(o->feed, "splits"))
        return fail("--feed: '%.64s' is not prefill, decode or splits", o->feed);
    return 0;
}

/* Reads ids separated by commas and/or whitespace. */
static int parse_ids(const char *text, int32_t **ids, int *n)
{
    int cap = 64;
    *n = 0;
    *ids = malloc((size_t)cap * sizeof **ids);
    if (!*ids)
        return fail("%s", "out of memory");
    const char *p = text;
    for (;;) {
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX)
            return fail("prompt ids: '%.32s' is not a token id", p);
        if (*n == cap) {
            cap *= 2;
            int32_t *ni = realloc(*ids, (size_t)cap * sizeof *ni);
            if (!ni)
                return fail("%s", "out of memory");
            *ids = ni;
        }
        (*ids)[(*n)++] = (int32_t)v;
        p = end;
    }
    if (*n == 0)
        return fail("%s", "the prompt is empty: give at least one token id");
    return 0;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(errbuf, sizeof errbuf, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
        if (n == cap) {
            char *nb = cap < (1u << 30) ? realloc(buf, cap * 2 + 1) : NULL;
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) {
        snprintf(errbuf, sizeof errbuf, "cannot read %s: out of memory", path);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Feeds the prompt in the chunks the feed mode asks for. With all_logits
 * every position's logits are kept; the last position's always land in last. */
static int run_prompt(mhla_engine *eng, mhla_seq *seq, const options *o, const int32_t *ids, int n,
                      float *all_logits, float *last, int V, mhla_error *err)
{
    mhla_rng rng;
    mhla_rng_seed(&rng, (uint64_t)o->split_seed);
    for (int done = 0; done < n;) {
        int len = n - done;
        if (strcmp(o->feed, "decode") == 0)
            len = 1;
        else if (strcmp(o->feed, "splits") == 0) {
            /* 1..23 tokens: crosses block boundaries at every offset. */
            int r = 1 + (int)(mhla_rng_uniform(&rng) * 23.0);
            len = r < len ? r : len;
        }
        int final = done + len == n;
        mhla_batch_item it = {.seq = seq, .tokens = ids + done, .n_tokens = len};
        if (all_logits) {
            it.logits_from = 0;
            it.logits = all_logits + (size_t)done * V;
        } else {
            it.logits_from = final ? len - 1 : len;
            it.logits = final ? last : NULL;
        }
        if (mhla_engine_forward(eng, &it, 1, err))
            return fail("%s", err->msg);
        done += len;
    }
    if (all_logits)
        memcpy(last, all_logits + (size_t)(n - 1) * V, (size_t)V * sizeof(float));
    return 0;
}

/* --perplexity: windows of the model's context, each in a fresh sequence, fed in
 * prefill chunks of up to PPL_CHUNK tokens; log-softmax in double. */
#define PPL_CHUNK 256
static int run_perplexity(const options *o)
{
    int rc = -1, n = 0;
    mhla_error err = {0};
    mhla_model *model = NULL;
    mhla_engine *eng = NULL;
    mhla_seq *seq = NULL;
    int32_t *ids = NULL;
    float *logits = NULL;
    char *text = read_file(o->perplexity);
    if (!text || parse_ids(text, &ids, &n))
        goto done;
    if (n < 2) {
        fail("%s", "--perplexity needs at least two token ids");
        goto done;
    }
    if (load_model(o, &model, &err)) {
        fail("%s", err.msg);
        goto done;
    }
    const mhla_config *c = mhla_model_config(model);
    int V = c->vocab_size, W = c->max_positions;
    for (int i = 0; i < n; i++)
        if (ids[i] >= V) {
            snprintf(errbuf, sizeof errbuf, "token id %d is outside the vocabulary [0, %d)", ids[i],
                     V);
            goto done;
        }
    if (open_engine(o, model, &eng, &err)) {
        fail("%s", err.msg);
        goto done;
    }
    logits = malloc((size_t)PPL_CHUNK * V * sizeof(float));
    if (!logits) {
        fail("%s", "out of memory for the logits");
        goto done;
    }
    double nll = 0.0, t0 = now();
    long counted = 0;
    for (int w0 = 0; w0 < n; w0 += W) {
        int wn = n - w0 < W ? n - w0 : W;
        if (wn < 2)
            break;
        mhla_seq_free(seq);
        seq = NULL;
        if (mhla_engine_seq_create(eng, &seq, &err)) {
            fail("%s", err.msg);
            goto done;
        }
        /* positions 0 .. wn-2 predict 1 .. wn-1; the window's last token is never fed */
        for (int done = 0; done < wn - 1;) {
            int len = wn - 1 - done < PPL_CHUNK ? wn - 1 - done : PPL_CHUNK;
            mhla_batch_item it = {.seq = seq,
                                  .tokens = ids + w0 + done,
                                  .n_tokens = len,
                                  .logits_from = 0,
                                  .logits = logits};
            if (mhla_engine_forward(eng, &it, 1, &err)) {
                fail("%s", err.msg);
                goto done;
            }
            for (int t = 0; t < len; t++) {
                const float *row = logits + (size_t)t * V;
                double mx = row[0];
                for (int v = 1; v < V; v++)
                    mx = row[v] > mx ? row[v] : mx;
                double se = 0.0;
                for (int v = 0; v < V; v++)
                    se += exp((double)row[v] - mx);
                nll += mx + log(se) - (double)row[ids[w0 + done + t + 1]];
                counted++;
            }
            done += len;
        }
    }
    double dt = now() - t0;
    printf("perplexity %.6f tokens %ld nll %.6f\n", exp(nll / (double)counted), counted, nll);
    fprintf(stderr,
            "mhla-generate: perplexity over %ld predicted tokens in %.2f s (%.1f tokens/s)\n",
            counted, dt, counted / dt);
    rc = 0;
done:
    free(text);
    free(ids);
    free(logits);
    mhla_seq_free(seq);
    mhla_engine_free(eng);
    mhla_model_free(model);
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

static int run(const options *o)
{
    if (o->perplexity)
        return run_perplexity(o);
    int rc = -1;
    mhla_error err = {0};
    mhla_model *model = NULL;
    mhla_engine *eng = NULL;
    mhla_seq *seq = NULL;
    int32_t *ids = NULL;
    float *logits = NULL, *row = NULL;
    char *text = NULL;
    FILE *out = NULL;
    int n = 0;
    mhla_tokenizer *tok = NULL;
    mhla_tok_stream *stream = NULL;

    if (o->prompt_text) {
        char msg[512];
        size_t nn = 0;
        if (load_tokenizer(o->model, &tok))
            goto done;
        if (mhla_tok_encode(tok, o->prompt_text, strlen(o->prompt_text), 1, &ids, &nn, msg,
                            sizeof msg)) {
            fail("%s", msg);
            goto done;
        }
        if (nn == 0 || nn > INT32_MAX) {
            fail("%s", "the prompt encodes to no tokens");
            goto done;
        }
        n = (int)nn;
        if (!o->print_ids && mhla_tok_stream_new(tok, 1, &stream, msg, sizeof msg)) {
            fail("%s", msg);
            goto done;
        }
    } else {
        if (o->prompt_file) {
            text = read_file(o->prompt_file);
            if (!text)
                goto done;
        }
        if (parse_ids(o->prompt_ids ? o->prompt_ids : text, &ids, &n))
            goto done;
    }
    double t0 = now();
    if (load_model(o, &model, &err)) {
        fail("%s", err.msg);
        goto done;
    }
    const mhla_config *c = mhla_model_config(model);
    int V = c->vocab_size;
    for (int i = 0; i < n; i++)
        if (ids[i] >= V) {
            snprintf(errbuf, sizeof errbuf, "prompt id %d is outside the vocabulary [0, %d)",
                     ids[i], V);
            goto done;
        }
    if ((long)n + o->max_tokens > c->max_positions) {
        snprintf(errbuf, sizeof errbuf,
                 "context length exceeded: %d prompt tokens + %ld new tokens > the model's "
                 "context of %d tokens",
                 n, o->max_tokens, c->max_positions);
        goto done;
    }
    if (open_engine(o, model, &eng, &err) || mhla_engine_seq_create(eng, &seq, &err)) {
        fail("%s", err.msg);
        goto done;
    }
    fprintf(stderr,
            "mhla-generate: model loaded in %.2f s (%d layers, d=%d, vocab %d, context %d)\n",
            now() - t0, c->num_layers, c->hidden_size, V, c->max_positions);

    row = malloc((size_t)V * sizeof(float));
    if (o->logits_out)
        logits = malloc((size_t)n * V * sizeof(float));
    if (!row || (o->logits_out && !logits)) {
        fail("%s", "out of memory for the logits");
        goto done;
    }
    double t1 = now();
    if (run_prompt(eng, seq, o, ids, n, logits, row, V, &err))
        goto done;
    double t2 = now();
    fprintf(stderr, "mhla-generate: prompt %d tokens in %.3f s (%.1f tokens/s, feed %s)\n", n,
            t2 - t1, n / (t2 - t1), o->feed);
    if (logits) {
        out = fopen(o->logits_out, "wb");
        if (!out || fwrite(logits, sizeof(float), (size_t)n * V, out) != (size_t)n * V ||
            fclose(out) != 0) {
            out = NULL;
            fail("cannot write %s", o->logits_out);
            goto done;
        }
        out = NULL;
    }
    if (o->max_tokens > 0) {
        mhla_rng rng;
        mhla_rng_seed(&rng, (uint64_t)o->seed);
        double t3 = now();
        long produced = 0;
        for (long g = 0; g < o->max_tokens; g++) {
            int32_t id = (int32_t)mhla_sample(row, V, (float)o->temperature, &rng);
            produced++;
            int last = (id == c->eos_token_id && !o->ignore_eos) || g + 1 == o->max_tokens;
            if (o->print_ids)
                printf(g ? " %d" : "%d", id);
            else if (stream && emit_text(stream, id, last))
                goto done;
            if (last)
                break;
            mhla_batch_item it = {
                .seq = seq, .tokens = &id, .n_tokens = 1, .logits_from = 0, .logits = row};
            if (mhla_engine_forward(eng, &it, 1, &err)) {
                fail("%s", err.msg);
                goto done;
            }
        }
        if (o->print_ids)
            printf("\n");
        double t4 = now();
        fprintf(stderr, "mhla-generate: generated %ld tokens in %.3f s (%.1f tokens/s)\n", produced,
                t4 - t3, produced / (t4 - t3));
    }
    mhla_cpu_threads ct;
    mhla_engine_cpu_threads(eng, &ct);
    if (ct.reductions > 0)
        fprintf(stderr,
                "mhla-generate: the threads that take part were reduced %ld times (thread adapt); "
                "%d of %d at the end\n",
                ct.reductions, ct.active, ct.threads);
    rc = 0;
done:
    if (out)
        fclose(out);
    mhla_tok_stream_free(stream);
    mhla_tok_free(tok);
    free(text);
    free(ids);
    free(logits);
    free(row);
    mhla_seq_free(seq);
    mhla_engine_free(eng);
    mhla_model_free(model);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o) || run(&o)) {
        fprintf(stderr, "mhla-generate: error: %s\n", errbuf);
        return 1;
    }
    return 0;
}
