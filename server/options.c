/*
 * options.c — mhla-server's command-line flags, their defaults and --help:
 * one row each in base's option table (mhla_opts), which parses them and
 * writes --help.
 */
#include "server_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MHLA_DEFAULT_MODEL
#define MHLA_DEFAULT_MODEL "models/brown-mhla"
#endif

void mhla_server_options_default(mhla_server_options *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->model_dir = MHLA_DEFAULT_MODEL;
    o->threads = 0;
    o->max_batch_tokens = 512;
    o->itl_target_ms = 100;
    o->max_running = 64;
    o->max_queue = 256;
    o->log_level = MHLA_LOG_INFO;
    o->device = MHLA_DEVICE_AUTO;
    o->max_body_bytes = 1u << 20;
    o->max_connections = 512;
    o->timeout_s = 30;
    o->read_timeout_s = 30;
    o->request_timeout_s = 600;
    o->shutdown_timeout_s = 30;
    o->state_memory_mb = SRV_STATE_MEMORY_AUTO;
    o->state_prefault_mb = SRV_STATE_MEMORY_AUTO;
    o->speculate = SRV_SPEC_NGRAM;
    o->draft_state_memory_mb = SRV_STATE_MEMORY_AUTO;
    o->draft_max = 8;
    o->draft_ngram = 3;
}

/* --speculate: off, ngram or draft (--draft-model names the model). */
static int parse_speculate(const char *flag, const char *v, void *base, char *err, size_t errlen)
{
    static const char *const words[] = {"off", "ngram", "draft"};
    mhla_server_options *o = base;
    for (int i = 0; i < 3; i++)
        if (strcmp(v, words[i]) == 0) {
            o->speculate = i;
            return 0;
        }
    snprintf(err, errlen, "--%s takes off, ngram or draft, not '%.64s'", flag, v);
    return -1;
}

/* auto (SRV_STATE_MEMORY_AUTO), or MiB from 0 to 4 TiB, into *out. */
static int parse_mib_or_auto(const char *flag, const char *v, int *out, char *err, size_t errlen)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (strcmp(v, "auto") == 0) {
        *out = SRV_STATE_MEMORY_AUTO;
        return 0;
    }
    if (end == v || *end || x < 0 || x > (1L << 22)) {
        snprintf(err, errlen, "--%s takes auto or an integer from 0 to %d (MiB), not '%.64s'", flag,
                 1 << 22, v);
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* --state-memory: auto, or MiB (0: unbounded state, no prefix cache). */
static int parse_state_memory(const char *flag, const char *v, void *base, char *err, size_t errlen)
{
    return parse_mib_or_auto(flag, v, &((mhla_server_options *)base)->state_memory_mb, err, errlen);
}

/* --state-prefault: auto, or MiB (0: none). */
static int parse_state_prefault(const char *flag, const char *v, void *base, char *err,
                                size_t errlen)
{
    return parse_mib_or_auto(flag, v, &((mhla_server_options *)base)->state_prefault_mb, err,
                             errlen);
}

/* --draft-state-memory: auto, or MiB (0: unbounded). */
static int parse_draft_state_memory(const char *flag, const char *v, void *base, char *err,
                                    size_t errlen)
{
    return parse_mib_or_auto(flag, v, &((mhla_server_options *)base)->draft_state_memory_mb, err,
                             errlen);
}

/* The words of the enum flags, in the order of their enum's values. */
static const char *const device_words[] = {"cpu", "auto", "cuda", NULL};
static const char *const gpu_weight_words[] = {"bf16", "f16", "f32", NULL};
static const char *const weight_words[] = {"f32", "bf16", "q8", "bf16dot", "q4", NULL};
static const char *const tool_format_words[] = {"auto",    "hermes", "llama3",
                                                "mistral", "none",   NULL};
static const char *const log_words[] = {"debug", "info", "warn", "error", "off", NULL};
static const char *const log_format_words[] = {"auto", "text", "json", NULL};

_Static_assert(sizeof(mhla_log_level) == sizeof(int), "--log-level is stored as an int");
#define OPT(field) offsetof(mhla_server_options, field)
#define INT_ROW(flag, field, min, max)                                                             \
    .name = flag, .kind = MHLA_OPT_INT, .off = OPT(field), .lo = (min), .hi = (max)
/* The help texts' defaults are mhla_server_options_default's. */
static const mhla_opt rows[] = {
    {.name = "host",
     .kind = MHLA_OPT_STRING,
     .off = OPT(host),
     .metavar = "ADDR",
     .help = "address to listen on (default 127.0.0.1)"},
    {INT_ROW("port", port, 0, 65535), .metavar = "N",
     .help = "TCP port, 0 picks a free one (default 8080)"},
    {.name = "model",
     .kind = MHLA_OPT_STRING,
     .off = OPT(model_dir),
     .metavar = "DIR",
     .help = "checkpoint directory (default " MHLA_DEFAULT_MODEL ")"},
    {.name = "model-name",
     .kind = MHLA_OPT_STRING,
     .off = OPT(model_name),
     .metavar = "NAME",
     .help = "model id clients send (default: DIR's last component)"},
    {.name = "chat-template",
     .kind = MHLA_OPT_STRING,
     .off = OPT(chat_template),
     .metavar = "FILE",
     .help = "chat template (Jinja) for chat requests (default: the model's\n"
             "tokenizer_config.json chat_template, else a built-in ChatML one)"},
    {.name = "tool-call-format",
     .kind = MHLA_OPT_ENUM,
     .off = OPT(tool_call_format),
     .words = tool_format_words,
     .metavar = "F",
     .help = "how the model writes tool calls: hermes (<tool_call>),\n"
             "llama3 (a JSON reply), mistral ([TOOL_CALLS]) or none (not\n"
             "parsed) (default auto: by the markers the template writes)"},
    {INT_ROW("threads", threads, 0, 1024), .metavar = "N",
     .help = "engine threads, 0 = the CPUs this process may use:\n"
             "affinity mask and cgroup CPU quota (default 0)"},
    {.name = "cpu-isa",
     .kind = MHLA_OPT_STRING,
     .off = OPT(cpu_isa),
     .metavar = "P",
     .help = "CPU kernel path: auto, avx512, avx2, neon or portable\n"
             "(default: MHLA_CPU_ISA, else the best the CPU runs;\n"
             "every path gives the same bits)"},
    {.name = "thread-adapt",
     .kind = MHLA_OPT_STRING,
     .off = OPT(thread_adapt),
     .metavar = "on|off",
     .help = "on: where the engine threads stop being faster than one\n"
             "(other processes take the cores), fewer take part until\n"
             "more pay again; off: all take part in every step (default:\n"
             "MHLA_THREAD_ADAPT, else on; both give the same bits)"},
    {INT_ROW("max-batch-tokens", max_batch_tokens, 1, 1 << 20), .metavar = "N",
     .help = "tokens per engine step, decode + prefill chunks: a hard\n"
             "cap (default 512)"},
    {INT_ROW("itl-target-ms", itl_target_ms, 0, 600000), .metavar = "MS",
     .help = "time budget of a step while streams decode: prompt\n"
             "chunks are sized to it from the learned step costs;\n"
             "0 = the token budget alone (default 100)"},
    {.name = "speculate",
     .kind = MHLA_OPT_CUSTOM,
     .parse = parse_speculate,
     .metavar = "off|ngram|draft",
     .help = "ngram: draft tokens by prompt lookup (the last n tokens\n"
             "found earlier in the prompt and the output); draft: a\n"
             "smaller model with the same tokenizer (--draft-model)\n"
             "proposes them; either way they are verified in one step,\n"
             "the output is bit for bit plain decoding's, and drafts\n"
             "are made only where they pay (default ngram)"},
    {.name = "draft-model",
     .kind = MHLA_OPT_STRING,
     .off = OPT(draft_model),
     .metavar = "DIR",
     .help = "the draft model of --speculate draft: an MHLA checkpoint\n"
             "with the model's tokenizer.json (refused otherwise)"},
    {.name = "draft-state-memory",
     .kind = MHLA_OPT_CUSTOM,
     .parse = parse_draft_state_memory,
     .metavar = "auto|MB|0",
     .help = "the draft model's own state pool (with its own prefix\n"
             "cache); a choice it cannot hold drafts nothing. auto\n"
             "(default): as many positions as the model's pool holds\n"
             "(its size times the draft's state per position over the\n"
             "model's); 0: unbounded"},
    {INT_ROW("draft-max", draft_max, 1, 63), .metavar = "N",
     .help = "drafted tokens a sequence verifies per step at most\n"
             "(default 8; never more than a block less one)"},
    {INT_ROW("draft-min", draft_min, 0, 63), .metavar = "N",
     .help = "draft at least N tokens where lookup finds them, even\n"
             "where the measured costs say they do not pay (tests,\n"
             "measurements) (default 0)"},
    {INT_ROW("draft-ngram", draft_ngram, 1, 16), .metavar = "N",
     .help = "longest n-gram prompt lookup matches, tried from N\n"
             "down to 1 (default 3)"},
    {INT_ROW("max-running", max_running, 1, 4096), .metavar = "N",
     .help = "sequences decoding at once (default 64)"},
    {INT_ROW("max-queue", max_queue, 0, 1 << 20), .metavar = "N",
     .help = "waiting requests before 429 (default 256)"},
    {.name = "api-key",
     .kind = MHLA_OPT_STRING,
     .off = OPT(api_key),
     .metavar = "KEY",
     .help = "require Authorization: Bearer KEY on /v1/*, /tokenize,\n"
             "/detokenize and /apply-template; /health, /metrics, /version,\n"
             "/openapi.json and the playground (/) stay open (default:\n"
             "none; MHLA_API_KEY works too)"},
    {.name = "allowed-origins",
     .kind = MHLA_OPT_STRING,
     .off = OPT(allowed_origins),
     .metavar = "LIST",
     .help = "CORS: browser origins (scheme://host[:port], comma-\n"
             "separated, or *) whose pages may call the API; preflights\n"
             "are answered before the API key check (default: none)"},
    {.name = "no-webui",
     .kind = MHLA_OPT_FLAG,
     .off = OPT(no_webui),
     .help = "no playground page at GET / (its paths answer 404)"},
    {.name = "max-body-bytes",
     .kind = MHLA_OPT_SIZE,
     .off = OPT(max_body_bytes),
     .lo = 64,
     .hi = 1L << 30,
     .metavar = "N",
     .help = "request body limit, 413 past it (default 1048576)"},
    {INT_ROW("max-connections", max_connections, 1, 65536), .metavar = "N",
     .help = "concurrent connections (default 512)"},
    {INT_ROW("timeout", timeout_s, 1, 86400), .metavar = "S",
     .help = "idle connection timeout in seconds, also the write\n"
             "deadline of a stream whose client stops reading (default 30)"},
    {INT_ROW("read-timeout", read_timeout_s, 1, 86400), .metavar = "S",
     .help = "deadline for receiving a whole request, headers and body\n(default 30)"},
    {INT_ROW("max-connections-per-client", max_connections_per_client, 0, 65536), .metavar = "N",
     .help = "connections one client address may hold\n"
             "(default 0: all but max(4, max-connections/8))"},
    {INT_ROW("request-timeout", request_timeout_s, 0, 86400 * 7), .metavar = "S",
     .help = "per-request deadline in seconds, 0 = none (default 600)"},
    {INT_ROW("shutdown-timeout", shutdown_timeout_s, 0, 86400), .metavar = "S",
     .help = "on SIGTERM, time running requests get to finish (default 30)"},
    {.name = "state-memory",
     .kind = MHLA_OPT_CUSTOM,
     .parse = parse_state_memory,
     .metavar = "auto|MB|0",
     .help = "state pool with exact prefix cache; requests wait until\n"
             "their worst-case pages fit. auto (default): sized from\n"
             "the memory cgroup's limit (v2 or v1) or MemAvailable,\n"
             "on a GPU its free memory, less weights, buffers and\n"
             "headroom (logged at start); 0: unbounded state per\n"
             "sequence, no prefix cache, no admission by memory"},
    {.name = "state-prefault",
     .kind = MHLA_OPT_CUSTOM,
     .parse = parse_state_prefault,
     .metavar = "auto|MB|0",
     .help = "state pages made at start, before the server listens,\n"
             "so that the first requests do not wait for new memory.\n"
             "auto (default): 1024 MiB, at most the pool; 0: pages made\n"
             "as needed. For pages of 2 MiB and more in host memory"},
    {.name = "state-dir",
     .kind = MHLA_OPT_STRING,
     .off = OPT(state_dir),
     .metavar = "DIR",
     .help = "state tier on disk under the prefix cache (default: none):\n"
             "finished blocks' state is written there in the background\n"
             "and read back instead of recomputed, across restarts and\n"
             "by every server sharing DIR (same model, same answers)"},
    {.name = "state-disk-max",
     .kind = MHLA_OPT_CUSTOM,
     .parse = srv_parse_size,
     .metavar = "SIZE",
     .help = "bytes the state dir may hold, K/M/G/T suffixes; least\n"
             "recently used files go past it (default: half the free\n"
             "space of its filesystem at start)"},
    {.name = "weights",
     .kind = MHLA_OPT_ENUM,
     .off = OPT(weights),
     .words = weight_words,
     .help = "how weights are held in memory: bf16 halves the bytes\n"
             "each step reads, arithmetic stays f32; q8 (CPU only):\n"
             "int8 per group of 32, 0.28x the bytes of f32, logits\n"
             "change slightly (docs/model.md); bf16dot (CPU only):\n"
             "bf16 weights and bf16 dot products, activations rounded\n"
             "to bf16 (AMX tiles or vdpbf16ps where the CPU has\n"
             "them: fastest prefill on such CPUs); q4 (CPU only):\n"
             "4-bit per group of 32 with f16 scales, 0.14x the bytes\n"
             "of f32, logits change more than q8's (default f32)"},
    {.name = "device",
     .kind = MHLA_OPT_ENUM,
     .off = OPT(device),
     .words = device_words,
     .metavar = "D",
     .help = "auto (a GPU when one is usable, else the CPU), cpu or\n"
             "cuda (refuses to start without a usable GPU) (default auto)"},
    {.name = "gpu-weights",
     .kind = MHLA_OPT_ENUM,
     .off = OPT(gpu_weights),
     .words = gpu_weight_words,
     .metavar = "W",
     .help = "bf16, f16 or f32: how the GPU holds weights (default bf16)"},
    {INT_ROW("gpu-index", gpu_index, 0, 64), .metavar = "N",
     .help = "which CUDA device (default 0)"},
    {.name = "no-graphs",
     .kind = MHLA_OPT_FLAG,
     .off = OPT(gpu_no_graphs),
     .help = "never replay decode steps as CUDA graphs"},
    {.name = "log-level",
     .kind = MHLA_OPT_ENUM,
     .off = OPT(log_level),
     .words = log_words,
     .metavar = "LEVEL",
     .help = "debug, info, warn, error or off (default info)"},
    {.name = "log-format",
     .kind = MHLA_OPT_ENUM,
     .off = OPT(log_format),
     .words = log_format_words,
     .help = "text: TIME LEVEL event: message key=value; json: one\n"
             "object a line (default auto: text when stderr is a\n"
             "terminal, else json)"},
};
#undef INT_ROW
#undef OPT

static const mhla_opts spec = {
    .usage = "usage: mhla-server [options]\n"
             "\n"
             "OpenAI-compatible completion server for MHLA language models.\n"
             "\n",
    .rows = rows,
    .n_rows = sizeof rows / sizeof rows[0],
    .help_col = 27,
};

void mhla_server_print_help(void *fp) { mhla_opts_help(&spec, fp); }

int mhla_server_parse_args(int argc, char **argv, mhla_server_options *o, char *err, size_t errlen)
{
    const char *env_key = getenv("MHLA_API_KEY");
    if (env_key && env_key[0])
        o->api_key = env_key;
    int rc = mhla_opts_parse(&spec, o, argc, argv, NULL, err, errlen);
    if (rc == 1)
        mhla_server_print_help(stdout);
    if (rc)
        return rc;
    if (!o->host[0]) {
        snprintf(err, errlen, "--host must not be empty");
        return -1;
    }
    if (o->api_key && !o->api_key[0])
        o->api_key = NULL;
    if (o->allowed_origins && !o->allowed_origins[0])
        o->allowed_origins = NULL;
    if (o->state_prefault_mb > 0 && o->state_memory_mb == 0) {
        snprintf(err, errlen,
                 "--state-prefault %d makes pages of the state pool, and --state-memory 0 has "
                 "none: give --state-memory auto or MB",
                 o->state_prefault_mb);
        return -1;
    }
    if ((o->speculate == SRV_SPEC_DRAFT) != (o->draft_model && o->draft_model[0])) {
        snprintf(err, errlen,
                 o->draft_model && o->draft_model[0]
                     ? "--draft-model is the draft model of --speculate draft: give both"
                     : "--speculate draft needs --draft-model DIR (a smaller model with the "
                       "same tokenizer)");
        return -1;
    }
    return srv_cors_check(o->allowed_origins, err, errlen);
}
