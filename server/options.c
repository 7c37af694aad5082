/*
 * options.c — mhla-server's command-line flags, their defaults and --help.
 */
#include "srv.h"

#include <errno.h>
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
    o->max_running = 64;
    o->max_queue = 256;
    o->log_level = MHLA_LOG_INFO;
    o->device = MHLA_DEVICE_AUTO;
    o->max_body_bytes = 1u << 20;
    o->max_connections = 512;
    o->timeout_s = 30;
    o->request_timeout_s = 600;
    o->shutdown_timeout_s = 30;
}

void mhla_server_print_help(void *fp)
{
    FILE *f = fp;
    mhla_server_options d;
    mhla_server_options_default(&d);
    fprintf(f,
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
            "  --max-batch-tokens N     tokens per engine step, decode + prefill chunks (default %d)\n"
            "  --max-running N          sequences decoding at once (default %d)\n"
            "  --max-queue N            waiting requests before 429 (default %d)\n"
            "  --api-key KEY            require Authorization: Bearer KEY on /v1/* (default: none;\n"
            "                           the MHLA_API_KEY environment variable works too)\n"
            "  --max-body-bytes N       request body limit, 413 past it (default %zu)\n"
            "  --max-connections N      concurrent connections (default %d)\n"
            "  --timeout S              idle connection timeout in seconds (default %d)\n"
            "  --request-timeout S      per-request deadline in seconds, 0 = none (default %d)\n"
            "  --shutdown-timeout S     on SIGTERM, time running requests get to finish (default %d)\n"
            "  --state-memory MB        state pool with exact prefix cache; requests wait until\n"
            "                           their worst-case pages fit (default 0: state per sequence)\n"
            "  --weights f32|bf16       how weights are held in memory: bf16 halves the bytes\n"
            "                           each step reads, arithmetic stays f32 (default f32)\n"
            "  --device D               auto (a GPU when one is usable, else the CPU), cpu or\n"
            "                           cuda (refuses to start without a usable GPU) (default auto)\n"
            "  --gpu-weights W          bf16, f16 or f32: how the GPU holds weights (default bf16)\n"
            "  --gpu-index N            which CUDA device (default 0)\n"
            "  --no-graphs              never replay decode steps as CUDA graphs\n"
            "  --log-level LEVEL        debug, info, warn, error or off (default info)\n"
            "  --help                   this text\n",
            d.host, d.port, d.model_dir, d.threads, d.max_batch_tokens, d.max_running,
            d.max_queue, d.max_body_bytes, d.max_connections, d.timeout_s, d.request_timeout_s,
            d.shutdown_timeout_s);
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

int mhla_server_parse_args(int argc, char **argv, mhla_server_options *o, char *err,
                           size_t errlen)
{
    const char *env_key = getenv("MHLA_API_KEY");
    if (env_key && env_key[0])
        o->api_key = env_key;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            mhla_server_print_help(stdout);
            return 1;
        }
        const char *v = NULL;
        char flag[64];
        const char *eq = strchr(a, '=');
        if (strncmp(a, "--", 2) == 0 && eq && (size_t)(eq - a) < sizeof flag) {
            memcpy(flag, a, (size_t)(eq - a));
            flag[eq - a] = 0;
            v = eq + 1;
            a = flag;
        } else if (i + 1 < argc) {
            v = argv[i + 1];
        }
        long x;
#define INTFLAG(name, lo, hi, field)                                                          \
    if (strcmp(a, name) == 0) {                                                               \
        if (!v)                                                                               \
            goto missing;                                                                     \
        if (parse_int(name, v, lo, hi, &x, err, errlen))                                      \
            return -1;                                                                        \
        o->field = (int)x;                                                                    \
        if (!eq)                                                                              \
            i++;                                                                              \
        continue;                                                                             \
    }
#define STRFLAG(name, field)                                                                  \
    if (strcmp(a, name) == 0) {                                                               \
        if (!v)                                                                               \
            goto missing;                                                                     \
        o->field = v;                                                                         \
        if (!eq)                                                                              \
            i++;                                                                              \
        continue;                                                                             \
    }
        STRFLAG("--host", host)
        INTFLAG("--port", 0, 65535, port)
        STRFLAG("--model", model_dir)
        STRFLAG("--model-name", model_name)
        INTFLAG("--threads", 0, 1024, threads)
        STRFLAG("--cpu-isa", cpu_isa)
        INTFLAG("--max-batch-tokens", 1, 1 << 20, max_batch_tokens)
        INTFLAG("--max-running", 1, 4096, max_running)
        INTFLAG("--max-queue", 0, 1 << 20, max_queue)
        STRFLAG("--api-key", api_key)
        INTFLAG("--max-connections", 1, 65536, max_connections)
        INTFLAG("--timeout", 1, 86400, timeout_s)
        INTFLAG("--request-timeout", 0, 86400 * 7, request_timeout_s)
        INTFLAG("--shutdown-timeout", 0, 86400, shutdown_timeout_s)
        INTFLAG("--state-memory", 0, 1 << 22, state_memory_mb)
#undef INTFLAG
#undef STRFLAG
        if (strcmp(a, "--max-body-bytes") == 0) {
            if (!v)
                goto missing;
            if (parse_int(a, v, 64, 1L << 30, &x, err, errlen))
                return -1;
            o->max_body_bytes = (size_t)x;
            if (!eq)
                i++;
            continue;
        }
        if (strcmp(a, "--no-graphs") == 0) {
            o->gpu_no_graphs = 1;
            continue;
        }
        if (strcmp(a, "--device") == 0 || strcmp(a, "--gpu-weights") == 0) {
            if (!v)
                goto missing;
            mhla_error pe;
            mhla_device d;
            mhla_gpu_weights w;
            if (strcmp(a, "--device") == 0 ? mhla_device_parse(v, &d, &pe)
                                           : mhla_gpu_weights_parse(v, &w, &pe)) {
                snprintf(err, errlen, "%s: %s", a, pe.msg);
                return -1;
            }
            if (strcmp(a, "--device") == 0)
                o->device = (int)d;
            else
                o->gpu_weights = (int)w;
            if (!eq)
                i++;
            continue;
        }
        if (strcmp(a, "--gpu-index") == 0) {
            if (!v)
                goto missing;
            long x;
            if (parse_int(a, v, 0, 64, &x, err, errlen))
                return -1;
            o->gpu_index = (int)x;
            if (!eq)
                i++;
            continue;
        }
        if (strcmp(a, "--weights") == 0) {
            if (!v)
                goto missing;
            if (strcmp(v, "f32") && strcmp(v, "bf16")) {
                snprintf(err, errlen, "--weights: '%.32s' is not f32 or bf16", v);
                return -1;
            }
            o->weights_bf16 = strcmp(v, "bf16") == 0;
            if (!eq)
                i++;
            continue;
        }
        if (strcmp(a, "--log-level") == 0) {
            if (!v)
                goto missing;
            static const char *names[] = {"debug", "info", "warn", "error", "off"};
            int found = -1;
            for (int k = 0; k < 5; k++)
                if (strcmp(v, names[k]) == 0)
                    found = k;
            if (found < 0) {
                snprintf(err, errlen, "--log-level: '%.32s' is not debug, info, warn, error or off",
                         v);
                return -1;
            }
            o->log_level = (mhla_log_level)found;
            if (!eq)
                i++;
            continue;
        }
        snprintf(err, errlen, "unknown option '%.64s' (see --help)", argv[i]);
        return -1;
    missing:
        snprintf(err, errlen, "%s needs a value (see --help)", a);
        return -1;
    }
    if (!o->host[0]) {
        snprintf(err, errlen, "--host must not be empty");
        return -1;
    }
    if (o->api_key && !o->api_key[0])
        o->api_key = NULL;
    return 0;
}
