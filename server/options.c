/*
 * options.c — mhla-server's command-line flags, their defaults and --help.
 */
#include "server_internal.h"

#include <errno.h>
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
}

static void print_help_memory_device(FILE *f)
{
    fputs("  --state-memory auto|MB|0 state pool with exact prefix cache; requests wait until\n"
          "                           their worst-case pages fit. auto (default): sized from\n"
          "                           the memory cgroup's limit (v2 or v1) or MemAvailable,\n"
          "                           on a GPU its free memory, less weights, buffers and\n"
          "                           headroom (logged at start); 0: unbounded state per\n"
          "                           sequence, no prefix cache, no admission by memory\n"
          "  --weights f32|bf16|q8    how weights are held in memory: bf16 halves the bytes\n"
          "                           each step reads, arithmetic stays f32; q8 (CPU only):\n"
          "                           int8 per group of 32, 0.28x the bytes of f32, logits\n"
          "                           change slightly (docs/model.md) (default f32)\n"
          "  --device D               auto (a GPU when one is usable, else the CPU), cpu or\n"
          "                           cuda (refuses to start without a usable GPU) (default auto)\n"
          "  --gpu-weights W          bf16, f16 or f32: how the GPU holds weights (default bf16)\n"
          "  --gpu-index N            which CUDA device (default 0)\n"
          "  --no-graphs              never replay decode steps as CUDA graphs\n"
          "  --log-level LEVEL        debug, info, warn, error or off (default info)\n"
          "  --help                   this text\n",
          f);
}

void mhla_server_print_help(void *fp)
{
    FILE *f = fp;
    mhla_server_options d;
    mhla_server_options_default(&d);
    fprintf(
        f,
        "usage: mhla-server [options]\n"
        "\n"
        "OpenAI-compatible completion server for MHLA language models.\n"
        "\n"
        "  --host ADDR              address to listen on (default %s)\n"
        "  --port N                 TCP port, 0 picks a free one (default %d)\n"
        "  --model DIR              checkpoint directory (default %s)\n"
        "  --model-name NAME        model id clients send (default: DIR's last component)\n"
        "  --threads N              engine threads, 0 = the CPUs this process may use:\n"
        "                           affinity mask and cgroup CPU quota (default %d)\n"
        "  --cpu-isa P              CPU kernel path: auto, avx512, avx2, neon or portable\n"
        "                           (default: MHLA_CPU_ISA, else the best the CPU runs;\n"
        "                           every path gives the same bits)\n"
        "  --thread-adapt on|off    on: where the engine threads stop being faster than one\n"
        "                           (other processes take the cores), fewer take part until\n"
        "                           more pay again; off: all take part in every step (default:\n"
        "                           MHLA_THREAD_ADAPT, else on; both give the same bits)\n"
        "  --max-batch-tokens N     tokens per engine step, decode + prefill chunks: a hard\n"
        "                           cap (default %d)\n"
        "  --itl-target-ms MS       time budget of a step while streams decode: prompt\n"
        "                           chunks are sized to it from the learned step costs;\n"
        "                           0 = the token budget alone (default %d)\n"
        "  --max-running N          sequences decoding at once (default %d)\n"
        "  --max-queue N            waiting requests before 429 (default %d)\n"
        "  --api-key KEY            require Authorization: Bearer KEY on /v1/* (default: none;\n"
        "                           the MHLA_API_KEY environment variable works too)\n"
        "  --max-body-bytes N       request body limit, 413 past it (default %zu)\n"
        "  --max-connections N      concurrent connections (default %d)\n"
        "  --timeout S              idle connection timeout in seconds, also the write\n"
        "                           deadline of a stream whose client stops reading (default %d)\n"
        "  --read-timeout S         deadline for receiving a whole request, headers and body\n"
        "                           (default %d)\n"
        "  --max-connections-per-client N  connections one client address may hold\n"
        "                           (default 0: all but max(4, max-connections/8))\n"
        "  --request-timeout S      per-request deadline in seconds, 0 = none (default %d)\n"
        "  --shutdown-timeout S     on SIGTERM, time running requests get to finish (default %d)\n",
        d.host, d.port, d.model_dir, d.threads, d.max_batch_tokens, d.itl_target_ms, d.max_running,
        d.max_queue, d.max_body_bytes, d.max_connections, d.timeout_s, d.read_timeout_s,
        d.request_timeout_s, d.shutdown_timeout_s);
    print_help_memory_device(f);
}

static int parse_int(const char *flag, const char *v, long lo, long hi, long *out, char *err,
                     size_t errlen)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        snprintf(err, errlen, "%s: '%.64s' is not an integer in [%ld, %ld]", flag, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int set_device(const char *flag, const char *v, mhla_server_options *o, char *err,
                      size_t errlen)
{
    mhla_error pe;
    mhla_device d;
    if (mhla_device_parse(v, &d, &pe)) {
        snprintf(err, errlen, "%s: %s", flag, pe.msg);
        return -1;
    }
    o->device = (int)d;
    return 0;
}

static int set_gpu_weights(const char *flag, const char *v, mhla_server_options *o, char *err,
                           size_t errlen)
{
    mhla_error pe;
    mhla_gpu_weights w;
    if (mhla_gpu_weights_parse(v, &w, &pe)) {
        snprintf(err, errlen, "%s: %s", flag, pe.msg);
        return -1;
    }
    o->gpu_weights = (int)w;
    return 0;
}

static int set_weights(const char *flag, const char *v, mhla_server_options *o, char *err,
                       size_t errlen)
{
    mhla_error pe;
    mhla_weight_dtype w;
    if (mhla_weight_dtype_parse(v, &w, &pe)) {
        snprintf(err, errlen, "%s: %s", flag, pe.msg);
        return -1;
    }
    o->weights = (int)w;
    return 0;
}

static int set_log_level(const char *flag, const char *v, mhla_server_options *o, char *err,
                         size_t errlen)
{
    (void)flag;
    static const char *names[] = {"debug", "info", "warn", "error", "off"};
    for (int k = 0; k < 5; k++) {
        if (strcmp(v, names[k]) == 0) {
            o->log_level = (mhla_log_level)k;
            return 0;
        }
    }
    snprintf(err, errlen, "--log-level: '%.32s' is not debug, info, warn, error or off", v);
    return -1;
}

static int set_state_memory(const char *flag, const char *v, mhla_server_options *o, char *err,
                            size_t errlen)
{
    long x;
    if (strcmp(v, "auto") == 0) {
        o->state_memory_mb = SRV_STATE_MEMORY_AUTO;
        return 0;
    }
    if (parse_int(flag, v, 0, 1 << 22, &x, err, errlen)) {
        snprintf(err, errlen, "%s: '%.64s' is not auto or an integer in [0, %d] (MiB)", flag, v,
                 1 << 22);
        return -1;
    }
    o->state_memory_mb = (int)x;
    return 0;
}

enum { FLAG_INT, FLAG_SIZE, FLAG_STR, FLAG_SWITCH, FLAG_FN };

typedef struct {
    const char *name;
    int kind;
    size_t off; /* the field of mhla_server_options */
    long lo, hi;
    int (*fn)(const char *flag, const char *v, mhla_server_options *o, char *err, size_t errlen);
} flag_def;

#define OPT(field) offsetof(mhla_server_options, field)
static const flag_def flags[] = {
    {"--host", FLAG_STR, OPT(host), 0, 0, NULL},
    {"--port", FLAG_INT, OPT(port), 0, 65535, NULL},
    {"--model", FLAG_STR, OPT(model_dir), 0, 0, NULL},
    {"--model-name", FLAG_STR, OPT(model_name), 0, 0, NULL},
    {"--threads", FLAG_INT, OPT(threads), 0, 1024, NULL},
    {"--cpu-isa", FLAG_STR, OPT(cpu_isa), 0, 0, NULL},
    {"--thread-adapt", FLAG_STR, OPT(thread_adapt), 0, 0, NULL},
    {"--max-batch-tokens", FLAG_INT, OPT(max_batch_tokens), 1, 1 << 20, NULL},
    {"--itl-target-ms", FLAG_INT, OPT(itl_target_ms), 0, 600000, NULL},
    {"--max-running", FLAG_INT, OPT(max_running), 1, 4096, NULL},
    {"--max-queue", FLAG_INT, OPT(max_queue), 0, 1 << 20, NULL},
    {"--api-key", FLAG_STR, OPT(api_key), 0, 0, NULL},
    {"--max-connections", FLAG_INT, OPT(max_connections), 1, 65536, NULL},
    {"--timeout", FLAG_INT, OPT(timeout_s), 1, 86400, NULL},
    {"--read-timeout", FLAG_INT, OPT(read_timeout_s), 1, 86400, NULL},
    {"--max-connections-per-client", FLAG_INT, OPT(max_connections_per_client), 0, 65536, NULL},
    {"--request-timeout", FLAG_INT, OPT(request_timeout_s), 0, 86400 * 7, NULL},
    {"--shutdown-timeout", FLAG_INT, OPT(shutdown_timeout_s), 0, 86400, NULL},
    {"--state-memory", FLAG_FN, 0, 0, 0, set_state_memory},
    {"--max-body-bytes", FLAG_SIZE, OPT(max_body_bytes), 64, 1L << 30, NULL},
    {"--gpu-index", FLAG_INT, OPT(gpu_index), 0, 64, NULL},
    {"--no-graphs", FLAG_SWITCH, OPT(gpu_no_graphs), 0, 0, NULL},
    {"--device", FLAG_FN, 0, 0, 0, set_device},
    {"--gpu-weights", FLAG_FN, 0, 0, 0, set_gpu_weights},
    {"--weights", FLAG_FN, 0, 0, 0, set_weights},
    {"--log-level", FLAG_FN, 0, 0, 0, set_log_level},
};
#undef OPT

static const flag_def *find_flag(const char *name)
{
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
        if (strcmp(flags[k].name, name) == 0)
            return &flags[k];
    return NULL;
}

/* Stores value v of flag f into o. */
static int set_flag(const flag_def *f, const char *v, mhla_server_options *o, char *err,
                    size_t errlen)
{
    char *field = (char *)o + f->off;
    long x;
    if (f->kind == FLAG_FN)
        return f->fn(f->name, v, o, err, errlen);
    if (f->kind == FLAG_STR) {
        *(const char **)field = v;
        return 0;
    }
    if (parse_int(f->name, v, f->lo, f->hi, &x, err, errlen))
        return -1;
    if (f->kind == FLAG_SIZE)
        *(size_t *)field = (size_t)x;
    else
        *(int *)field = (int)x;
    return 0;
}

int mhla_server_parse_args(int argc, char **argv, mhla_server_options *o, char *err, size_t errlen)
{
    const char *env_key = getenv("MHLA_API_KEY");
    if (env_key && env_key[0])
        o->api_key = env_key;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            mhla_server_print_help(stdout);
            return 1;
        }
        char flag[64];
        const char *eq = strchr(a, '='); /* --flag=value */
        if (strncmp(a, "--", 2) == 0 && eq && (size_t)(eq - a) < sizeof flag) {
            snprintf(flag, sizeof flag, "%.*s", (int)(eq - a), a);
            v = eq + 1;
            a = flag;
        }
        const flag_def *f = find_flag(a);
        if (!f) {
            snprintf(err, errlen, "unknown option '%.64s' (see --help)", argv[i]);
            return -1;
        }
        if (f->kind == FLAG_SWITCH) {
            *(int *)((char *)o + f->off) = 1;
            continue;
        }
        if (!v) {
            snprintf(err, errlen, "%s needs a value (see --help)", a);
            return -1;
        }
        if (set_flag(f, v, o, err, errlen))
            return -1;
        if (a != flag)
            i++;
    }
    if (!o->host[0]) {
        snprintf(err, errlen, "--host must not be empty");
        return -1;
    }
    if (o->api_key && !o->api_key[0])
        o->api_key = NULL;
    return 0;
}
