/*
 * bench_opts.c — mhla-bench's flags, their defaults and --help. Every flag
 * takes `--flag VALUE` or `--flag=VALUE`; a bad value is a usage error naming
 * the flag, never a silent default.
 */
#include "client_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void cl_bench_print_help(FILE *f)
{
    fprintf(
        f,
        "usage: mhla-bench [options]\n"
        "\n"
        "Load generator for OpenAI-compatible completion servers (streaming).\n"
        "\n"
        "target\n"
        "  --url URL               server base URL (default http://127.0.0.1:8080)\n"
        "  --model NAME            \"model\" field to send (default: none)\n"
        "  --api-key KEY           Authorization: Bearer KEY (default: $MHLA_API_KEY)\n"
        "  --timeout S             per-request timeout in seconds (default 600)\n"
        "load\n"
        "  --concurrency LIST      closed loop: requests kept in flight, e.g. 8 or 1,2,4,8\n"
        "  --rate LIST             open loop: requests per second, e.g. 5 or 1,2,4\n"
        "  --arrivals KIND         open-loop arrivals: poisson (default) or constant\n"
        "  --max-concurrency N     open-loop cap on requests in flight (default 256)\n"
        "  --duration S            measure for S seconds per level ...\n"
        "  --requests N            ... or for N requests per level (default 100)\n"
        "  --warmup S              seconds per level left out of the figures (default 0)\n"
        "  --warmup-requests N     first N requests per level left out (default 0)\n"
        "prompts\n"
        "  --prompts FILE.jsonl    one {\"prompt\": ..., \"max_tokens\": N} a line, in turn\n"
        "  --input-len N           synthesized prompt length in tokens (default 128)\n"
        "  --input-dist D          fixed (default), uniform (N ± spread), normal (sd = spread)\n"
        "  --input-spread X        (default 0)\n"
        "  --output-len N          max_tokens of synthesized prompts (default 64)\n"
        "  --output-dist D, --output-spread X\n"
        "  --num-prompts N         distinct synthesized prompts (default 64)\n"
        "  --seed N                random seed of prompt synthesis and arrivals (default 1)\n"
        "request\n"
        "  --temperature T         sampling temperature (default: the server's)\n"
        "  --sampling-seed N       \"seed\" field of every request (default: none)\n"
        "  --no-ignore-eos         do not send ignore_eos (outputs may end before max_tokens)\n"
        "  --no-token-ids          do not send return_token_ids (then one chunk = one token)\n"
        "  --no-usage              do not ask for the usage chunk (stream_options)\n"
        "goodput\n"
        "  --slo-ttft-ms X, --slo-tpot-ms X, --slo-e2e-ms X\n"
        "                          a request is good when it completed within every given bound\n"
        "output\n"
        "  --json FILE             machine-readable result\n"
        "  --svg FILE              chart of throughput and p99 latency vs level (sweeps)\n"
        "  --samples FILE          one JSON line per measured request (JSONL)\n"
        "  --progress, --no-progress  live progress line on stderr (default: when a terminal)\n"
        "  --help                  this text\n"
        "\n"
        "Exit status: 0 when every measured request completed, 1 when some failed or on error,\n"
        "2 on a usage error.\n");
}

static int num(const char *flag, const char *v, double lo, double hi, double *out, char *err)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi)) {
        snprintf(err, CL_ERR_LEN, "%s: '%.64s' is not a number in [%g, %g]", flag, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int whole(const char *flag, const char *v, double lo, double hi, long *out, char *err)
{
    double x;
    if (num(flag, v, lo, hi, &x, err))
        return -1;
    if (x != floor(x)) {
        snprintf(err, CL_ERR_LEN, "%s: '%.64s' is not a whole number", flag, v);
        return -1;
    }
    *out = (long)x;
    return 0;
}

static int list(const char *flag, const char *v, cl_bench_args *a, char *err)
{
    a->run.n_levels = 0;
    const char *p = v;
    while (*p) {
        char item[64];
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= sizeof item || a->run.n_levels == 64) {
            snprintf(err, CL_ERR_LEN, "%s: '%.64s' is not a list of up to 64 numbers", flag, v);
            return -1;
        }
        memcpy(item, p, n);
        item[n] = '\0';
        double x;
        if (num(flag, item, 1e-6, 1e6, &x, err))
            return -1;
        a->levels_buf[a->run.n_levels++] = x;
        p += n + (p[n] == ',');
    }
    if (a->run.n_levels == 0) {
        snprintf(err, CL_ERR_LEN, "%s: empty list", flag);
        return -1;
    }
    return 0;
}

static void defaults(cl_bench_args *a)
{
    memset(a, 0, sizeof *a);
    cl_bench_opts *o = &a->run;
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
    o->requests = 100;
    o->temperature = -1;
    o->seed = -1;
    o->ignore_eos = o->token_ids = o->usage = 1;
    o->rng_seed = 1;
    a->input = (cl_len_spec){128, CL_DIST_FIXED, 0};
    a->output = (cl_len_spec){64, CL_DIST_FIXED, 0};
    a->num_prompts = 64;
    a->progress_mode = -1;
}

int cl_bench_parse_args(int argc, char **argv, cl_bench_args *a, char *err)
{
    defaults(a);
    cl_bench_opts *o = &a->run;
    int have_conc = 0, have_rate = 0, have_dur = 0, have_req = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = NULL;
        char flag[64];
        const char *eq = strchr(arg, '=');
        size_t fl = eq ? (size_t)(eq - arg) : strlen(arg);
        if (fl >= sizeof flag) {
            snprintf(err, CL_ERR_LEN, "unknown option '%.64s' (see --help)", arg);
            return -1;
        }
        memcpy(flag, arg, fl);
        flag[fl] = '\0';
        /* flags without a value */
        if (!eq) {
            int hit = 1;
            if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0)
                return 1;
            else if (strcmp(flag, "--no-ignore-eos") == 0)
                o->ignore_eos = 0;
            else if (strcmp(flag, "--no-token-ids") == 0)
                o->token_ids = 0;
            else if (strcmp(flag, "--no-usage") == 0)
                o->usage = 0;
            else if (strcmp(flag, "--progress") == 0)
                a->progress_mode = 1;
            else if (strcmp(flag, "--no-progress") == 0)
                a->progress_mode = 0;
            else
                hit = 0;
            if (hit)
                continue;
        }
        if (strncmp(flag, "--", 2) != 0) {
            snprintf(err, CL_ERR_LEN, "unexpected argument '%.64s' (see --help)", arg);
            return -1;
        }
        if (eq)
            val = eq + 1;
        else if (i + 1 < argc)
            val = argv[++i];
        else {
            snprintf(err, CL_ERR_LEN, "%s needs a value (or is unknown; see --help)", flag);
            return -1;
        }
        long l;
        int rc = 0;
        if (strcmp(flag, "--url") == 0)
            o->conn.url = val;
        else if (strcmp(flag, "--model") == 0)
            o->conn.model = val;
        else if (strcmp(flag, "--api-key") == 0)
            o->conn.api_key = val;
        else if (strcmp(flag, "--timeout") == 0)
            rc = num(flag, val, 0, 1e6, &o->conn.timeout_s, err);
        else if (strcmp(flag, "--concurrency") == 0) {
            rc = list(flag, val, a, err);
            have_conc = 1;
            for (size_t k = 0; !rc && k < o->n_levels; k++)
                if (a->levels_buf[k] != floor(a->levels_buf[k]) || a->levels_buf[k] > 10000) {
                    snprintf(err, CL_ERR_LEN,
                             "--concurrency: %g is not a whole number in "
                             "[1, 10000]",
                             a->levels_buf[k]);
                    rc = -1;
                }
        } else if (strcmp(flag, "--rate") == 0) {
            rc = list(flag, val, a, err);
            have_rate = 1;
        } else if (strcmp(flag, "--arrivals") == 0) {
            if (strcmp(val, "poisson") == 0 || strcmp(val, "constant") == 0)
                o->poisson = val[0] == 'p';
            else {
                snprintf(err, CL_ERR_LEN, "--arrivals: '%.64s' is not poisson or constant", val);
                rc = -1;
            }
        } else if (strcmp(flag, "--max-concurrency") == 0)
            rc = whole(flag, val, 1, 10000, &o->max_concurrency, err);
        else if (strcmp(flag, "--duration") == 0) {
            rc = num(flag, val, 1e-3, 1e7, &o->duration_s, err);
            have_dur = 1;
        } else if (strcmp(flag, "--requests") == 0) {
            rc = whole(flag, val, 1, 1e9, &o->requests, err);
            have_req = 1;
        } else if (strcmp(flag, "--warmup") == 0)
            rc = num(flag, val, 0, 1e6, &o->warmup_s, err);
        else if (strcmp(flag, "--warmup-requests") == 0)
            rc = whole(flag, val, 0, 1e9, &o->warmup_requests, err);
        else if (strcmp(flag, "--prompts") == 0)
            a->prompts_path = val;
        else if (strcmp(flag, "--input-len") == 0)
            rc = whole(flag, val, 1, 1e7, &a->input.mean, err);
        else if (strcmp(flag, "--output-len") == 0)
            rc = whole(flag, val, 1, 1e7, &a->output.mean, err);
        else if (strcmp(flag, "--input-dist") == 0 || strcmp(flag, "--output-dist") == 0) {
            cl_len_spec *s = flag[2] == 'i' ? &a->input : &a->output;
            if (cl_parse_dist(val, &s->dist)) {
                snprintf(err, CL_ERR_LEN, "%s: '%.64s' is not fixed, uniform or normal", flag, val);
                rc = -1;
            }
        } else if (strcmp(flag, "--input-spread") == 0)
            rc = num(flag, val, 0, 1e7, &a->input.spread, err);
        else if (strcmp(flag, "--output-spread") == 0)
            rc = num(flag, val, 0, 1e7, &a->output.spread, err);
        else if (strcmp(flag, "--num-prompts") == 0)
            rc = whole(flag, val, 1, 1e6, &a->num_prompts, err);
        else if (strcmp(flag, "--seed") == 0) {
            rc = whole(flag, val, 0, 9007199254740992.0, &l, err);
            o->rng_seed = (uint64_t)l;
        } else if (strcmp(flag, "--temperature") == 0)
            rc = num(flag, val, 0, 100, &o->temperature, err);
        else if (strcmp(flag, "--sampling-seed") == 0) {
            rc = whole(flag, val, 0, 9007199254740992.0, &l, err);
            o->seed = l;
        } else if (strcmp(flag, "--slo-ttft-ms") == 0)
            rc = num(flag, val, 1e-6, 1e9, &o->slo_ttft_ms, err);
        else if (strcmp(flag, "--slo-tpot-ms") == 0)
            rc = num(flag, val, 1e-6, 1e9, &o->slo_tpot_ms, err);
        else if (strcmp(flag, "--slo-e2e-ms") == 0)
            rc = num(flag, val, 1e-6, 1e9, &o->slo_e2e_ms, err);
        else if (strcmp(flag, "--json") == 0)
            a->json_path = val;
        else if (strcmp(flag, "--svg") == 0)
            a->svg_path = val;
        else if (strcmp(flag, "--samples") == 0)
            a->samples_path = val;
        else {
            snprintf(err, CL_ERR_LEN, "unknown option '%.64s' (see --help)", flag);
            rc = -1;
        }
        if (rc)
            return -1;
    }
    if (have_conc && have_rate) {
        snprintf(err, CL_ERR_LEN, "--concurrency and --rate exclude each other");
        return -1;
    }
    if (have_dur && have_req) {
        snprintf(err, CL_ERR_LEN, "--duration and --requests exclude each other");
        return -1;
    }
    o->open_loop = have_rate;
    if (!have_dur)
        o->duration_s = 0;
    size_t ul = strlen(o->conn.url);
    if (ul && o->conn.url[ul - 1] == '/') {
        snprintf(err, CL_ERR_LEN, "--url: give the base URL without a trailing '/'");
        return -1;
    }
    return 0;
}
