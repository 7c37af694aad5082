/*
 * bench_opts.c — mhla-bench's flags, their defaults and --help: one row each
 * in base's option table (mhla_opts). Every flag takes `--flag VALUE` or
 * `--flag=VALUE`; a bad value is a usage error naming the flag and the value,
 * never a silent default.
 */
#include "client_internal.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* --concurrency / --rate: a comma-separated list of up to 64 levels, each a
 * number in [lo, hi] (whole numbers when whole is set). */
static int parse_levels(const char *flag, const char *v, cl_bench_args *a, double lo, double hi,
                        int whole, char *err, size_t errlen)
{
    a->run.n_levels = 0;
    for (const char *p = v; *p || a->run.n_levels == 0;) {
        char item[64], *end;
        size_t n = strcspn(p, ",");
        double x = 0;
        int ok = n > 0 && n < sizeof item && a->run.n_levels < 64;
        if (ok) {
            memcpy(item, p, n);
            item[n] = '\0';
            errno = 0;
            x = strtod(item, &end);
            ok = end != item && !*end && !errno && x >= lo && x <= hi && (!whole || x == floor(x));
        }
        if (!ok) {
            snprintf(err, errlen, "--%s takes a list of up to 64 %s from %g to %g, not '%.64s'",
                     flag, whole ? "whole numbers" : "numbers", lo, hi, v);
            return -1;
        }
        a->levels_buf[a->run.n_levels++] = x;
        p += n + (p[n] == ',');
    }
    return 0;
}

static int parse_concurrency(const char *flag, const char *v, void *base, char *err, size_t errlen)
{
    cl_bench_args *a = base;
    a->have_concurrency = 1;
    return parse_levels(flag, v, a, 1, 10000, 1, err, errlen);
}

static int parse_rate(const char *flag, const char *v, void *base, char *err, size_t errlen)
{
    cl_bench_args *a = base;
    a->run.open_loop = 1;
    return parse_levels(flag, v, a, 1e-6, 1e6, 0, err, errlen);
}

_Static_assert(sizeof(cl_dist) == sizeof(int), "--input-dist is stored as an int");

static const char *const arrival_words[] = {"constant", "poisson", NULL};
static const char *const dist_words[] = {"fixed", "uniform", "normal", NULL};

#define ARG(field) offsetof(cl_bench_args, field)
#define RUN(field) offsetof(cl_bench_args, run.field)
#define TEXT(t)                                                                                    \
    {                                                                                              \
        .kind = MHLA_OPT_TEXT, .help = t                                                           \
    }
#define NUM(flag, off_, min, max, meta)                                                            \
    .name = flag, .kind = MHLA_OPT_DOUBLE, .off = off_, .lo = min, .hi = max, .metavar = meta
#define WHOLE(flag, off_, min, max, meta)                                                          \
    .name = flag, .kind = MHLA_OPT_LONG, .off = off_, .lo = min, .hi = max, .metavar = meta
#define STR(flag, off_, meta) .name = flag, .kind = MHLA_OPT_STRING, .off = off_, .metavar = meta
static const mhla_opt rows[] = {
    TEXT("target"),
    {STR("url", RUN(conn.url), "URL"), .help = "server base URL (default http://127.0.0.1:8080)"},
    {STR("model", RUN(conn.model), "NAME"), .help = "\"model\" field to send (default: none)"},
    {STR("api-key", RUN(conn.api_key), "KEY"),
     .help = "Authorization: Bearer KEY (default: $MHLA_API_KEY)"},
    {NUM("timeout", RUN(conn.timeout_s), 0, 1e6, "S"),
     .help = "per-request timeout in seconds (default 600)"},
    TEXT("load"),
    {.name = "concurrency",
     .kind = MHLA_OPT_CUSTOM,
     .parse = parse_concurrency,
     .metavar = "LIST",
     .help = "closed loop: requests kept in flight, e.g. 8 or 1,2,4,8"},
    {.name = "rate",
     .kind = MHLA_OPT_CUSTOM,
     .parse = parse_rate,
     .metavar = "LIST",
     .help = "open loop: requests per second, e.g. 5 or 1,2,4"},
    {.name = "arrivals",
     .kind = MHLA_OPT_ENUM,
     .off = RUN(poisson),
     .words = arrival_words,
     .metavar = "KIND",
     .help = "open-loop arrivals: poisson (default) or constant"},
    {WHOLE("max-concurrency", RUN(max_concurrency), 1, 10000, "N"),
     .help = "open-loop cap on requests in flight (default 256)"},
    {NUM("duration", RUN(duration_s), 1e-3, 1e7, "S"),
     .help = "measure for S seconds per level ..."},
    {WHOLE("requests", RUN(requests), 1, 1e9, "N"),
     .help = "... or for N requests per level (default 100)"},
    {NUM("warmup", RUN(warmup_s), 0, 1e6, "S"),
     .help = "seconds per level left out of the figures (default 0)"},
    {WHOLE("warmup-requests", RUN(warmup_requests), 0, 1e9, "N"),
     .help = "first N requests per level left out (default 0)"},
    TEXT("prompts"),
    {STR("prompts", ARG(prompts_path), "FILE.jsonl"),
     .help = "one {\"prompt\": ..., \"max_tokens\": N} a line, in turn"},
    {WHOLE("input-len", ARG(input.mean), 1, 1e7, "N"),
     .help = "synthesized prompt length in tokens (default 128)"},
    {.name = "input-dist",
     .kind = MHLA_OPT_ENUM,
     .off = ARG(input.dist),
     .words = dist_words,
     .metavar = "D",
     .help = "fixed (default), uniform (N ± spread), normal (sd = spread)"},
    {NUM("input-spread", ARG(input.spread), 0, 1e7, "X"), .help = "(default 0)"},
    {WHOLE("output-len", ARG(output.mean), 1, 1e7, "N"),
     .help = "max_tokens of synthesized prompts (default 64)"},
    {.name = "output-dist",
     .kind = MHLA_OPT_ENUM,
     .off = ARG(output.dist),
     .words = dist_words,
     .metavar = "D",
     .help = "as --input-dist, for the output length"},
    {NUM("output-spread", ARG(output.spread), 0, 1e7, "X"), .help = "(default 0)"},
    {WHOLE("num-prompts", ARG(num_prompts), 1, 1e6, "N"),
     .help = "distinct synthesized prompts (default 64)"},
    {WHOLE("seed", ARG(rng_seed), 0, 9007199254740992.0, "N"),
     .help = "random seed of prompt synthesis and arrivals (default 1)"},
    TEXT("request"),
    {.name = "chat",
     .kind = MHLA_OPT_FLAG,
     .off = RUN(chat),
     .help = "send each prompt as one user message to /v1/chat/completions\n"
             "(measured from its chat.completion.chunk stream)"},
    {STR("system", RUN(system), "TEXT"),
     .help = "with --chat: a system message before every prompt"},
    {NUM("temperature", RUN(temperature), 0, 100, "T"),
     .help = "sampling temperature (default: the server's)"},
    {WHOLE("sampling-seed", ARG(sampling_seed), 0, 9007199254740992.0, "N"),
     .help = "\"seed\" field of every request (default: none)"},
    {STR("body-extra", RUN(body_extra), "JSON"),
     .help = "a JSON object whose fields are set in every request body,\n"
             "replacing the bench's own of the same name (e.g.\n"
             "{\"response_format\": {...}}); a --prompts line's other fields\n"
             "are set after them, for that prompt"},
    {.name = "no-ignore-eos",
     .kind = MHLA_OPT_FLAG_OFF,
     .off = RUN(ignore_eos),
     .help = "do not send ignore_eos (outputs may end before max_tokens)"},
    {.name = "no-token-ids",
     .kind = MHLA_OPT_FLAG_OFF,
     .off = RUN(token_ids),
     .help = "do not send return_token_ids (then one chunk = one token)"},
    {.name = "no-usage",
     .kind = MHLA_OPT_FLAG_OFF,
     .off = RUN(usage),
     .help = "do not ask for the usage chunk (stream_options)"},
    TEXT("goodput (a request is good when it completed within every given bound)"),
    {NUM("slo-ttft-ms", RUN(slo_ttft_ms), 1e-6, 1e9, "X"), .help = "bound on time to first token"},
    {NUM("slo-tpot-ms", RUN(slo_tpot_ms), 1e-6, 1e9, "X"),
     .help = "bound on time per output token"},
    {NUM("slo-e2e-ms", RUN(slo_e2e_ms), 1e-6, 1e9, "X"), .help = "bound on the whole request"},
    TEXT("output"),
    {STR("json", ARG(json_path), "FILE"), .help = "machine-readable result"},
    {STR("svg", ARG(svg_path), "FILE"),
     .help = "picture: one level: latency CDFs and tokens/s over time;\n"
             "a sweep: throughput and p99 latency vs level"},
    {STR("samples", ARG(samples_path), "FILE"),
     .help = "one JSON line per measured request (JSONL)"},
    {.name = "progress",
     .kind = MHLA_OPT_FLAG,
     .off = ARG(progress_mode),
     .help = "live progress line on stderr (default: when a terminal)"},
    {.name = "no-progress",
     .kind = MHLA_OPT_FLAG_OFF,
     .off = ARG(progress_mode),
     .help = "no progress line"},
};
#undef ARG
#undef RUN
#undef TEXT
#undef NUM
#undef WHOLE
#undef STR

static const mhla_opts spec = {
    .usage = "usage: mhla-bench [options]\n"
             "\n"
             "Load generator for OpenAI-compatible completion servers (streaming).\n"
             "\n",
    .rows = rows,
    .n_rows = sizeof rows / sizeof rows[0],
    .footer = "\n"
              "Exit status: 0 when every measured request completed, 1 when some failed or on "
              "error,\n"
              "2 on a usage error.\n",
    .help_col = 26,
};

void cl_bench_print_help(FILE *f) { mhla_opts_help(&spec, f); }

static void defaults(cl_bench_args *a)
{
    memset(a, 0, sizeof *a);
    cl_bench_options *o = &a->run;
    o->conn.url = "http://127.0.0.1:8080";
    o->conn.api_key = getenv("MHLA_API_KEY");
    if (o->conn.api_key && !*o->conn.api_key)
        o->conn.api_key = NULL;
    o->conn.timeout_s = 600;
    a->levels_buf[0] = 1;
    o->levels = a->levels_buf;
    o->n_levels = 1;
    o->poisson = 1;
    o->max_concurrency = 256;
    o->requests = 0; /* 100 unless --duration is given */
    o->temperature = -1;
    o->ignore_eos = o->token_ids = o->usage = 1;
    a->rng_seed = 1;
    a->sampling_seed = -1;
    a->input = (cl_len_spec){128, CL_DIST_FIXED, 0};
    a->output = (cl_len_spec){64, CL_DIST_FIXED, 0};
    a->num_prompts = 64;
    a->progress_mode = -1;
}

/* --body-extra must be a JSON object: anything else is a usage error now,
 * not a failure of every request later. */
static int check_body_extra(const char *s, char *err)
{
    cJSON *x = s ? cJSON_Parse(s) : NULL;
    int ok = !s || cJSON_IsObject(x);
    cJSON_Delete(x);
    if (!ok)
        snprintf(err, CL_ERR_LEN, "--body-extra takes a JSON object, not '%.200s'", s);
    return ok ? 0 : -1;
}

int cl_bench_parse_args(int argc, char **argv, cl_bench_args *a, char *err)
{
    defaults(a);
    cl_bench_options *o = &a->run;
    int rc = mhla_opts_parse(&spec, a, argc, argv, NULL, err, CL_ERR_LEN);
    if (rc)
        return rc;
    if (a->have_concurrency && o->open_loop) {
        snprintf(err, CL_ERR_LEN, "--concurrency and --rate exclude each other");
        return -1;
    }
    if (o->duration_s > 0 && o->requests > 0) {
        snprintf(err, CL_ERR_LEN, "--duration and --requests exclude each other");
        return -1;
    }
    if (o->system && !o->chat) {
        snprintf(err, CL_ERR_LEN, "--system needs --chat (a system message is a chat message)");
        return -1;
    }
    if (check_body_extra(o->body_extra, err))
        return -1;
    if (o->duration_s <= 0 && o->requests == 0)
        o->requests = 100;
    o->rng_seed = (uint64_t)a->rng_seed;
    o->seed = a->sampling_seed;
    size_t ul = strlen(o->conn.url);
    if (ul && o->conn.url[ul - 1] == '/') {
        snprintf(err, CL_ERR_LEN, "--url: give the base URL without a trailing '/'");
        return -1;
    }
    return 0;
}
