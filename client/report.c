/*
 * report.c — what a run prints: the per-level table (mean, p50, p90, p99, max
 * of each latency), the one-row-per-level sweep table, and the --json result.
 * Latencies are in milliseconds everywhere; rates are per second of the
 * measurement window.
 */
#include "client_internal.h"

#include <cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *level_name(const cl_bench_options *o)
{
    return o->open_loop ? "rate (req/s)" : "concurrency";
}

static int has_slo(const cl_bench_options *o)
{
    return o->slo_ttft_ms > 0 || o->slo_tpot_ms > 0 || o->slo_e2e_ms > 0;
}

static void latency_row(FILE *f, const char *name, const cl_summary *s)
{
    if (s->n == 0) {
        fprintf(f, "  %-22s %10s %10s %10s %10s %10s\n", name, "-", "-", "-", "-", "-");
        return;
    }
    fprintf(f, "  %-22s %10.2f %10.2f %10.2f %10.2f %10.2f\n", name, s->mean, s->p50, s->p90,
            s->p99, s->max);
}

void cl_print_level(FILE *f, const cl_bench_options *o, const cl_level_result *r)
{
    fprintf(f, "%s %g: %zu completed, %zu failed", level_name(o), r->level, r->completed,
            r->failed);
    for (size_t i = 0; i < r->n_fail_kinds; i++)
        fprintf(f, "%s%s %zu", i ? ", " : " (", r->fails[i].kind, r->fails[i].n);
    fprintf(f, "%s in %.2f s\n", r->n_fail_kinds ? ")" : "", r->window_s);
    if (r->first_error[0])
        fprintf(f, "  first failure: %s\n", r->first_error);
    if (o->open_loop && r->late_arrivals)
        fprintf(f, "  %zu arrivals waited for a free slot (--max-concurrency %ld)\n",
                r->late_arrivals, o->max_concurrency);
    fprintf(f, "  %-22s %10.2f\n", "requests/s", r->req_per_s);
    fprintf(f, "  %-22s %10.1f   (%ld tokens)\n", "input tokens/s", r->in_tok_per_s, r->in_tokens);
    fprintf(f, "  %-22s %10.1f   (%ld tokens)\n", "output tokens/s", r->out_tok_per_s,
            r->out_tokens);
    if (has_slo(o)) {
        fprintf(f, "  %-22s %10.2f   (%zu of %zu within", "goodput (req/s)", r->goodput_req_per_s,
                r->good, r->completed);
        if (o->slo_ttft_ms > 0)
            fprintf(f, " TTFT<=%gms", o->slo_ttft_ms);
        if (o->slo_tpot_ms > 0)
            fprintf(f, " TPOT<=%gms", o->slo_tpot_ms);
        if (o->slo_e2e_ms > 0)
            fprintf(f, " E2E<=%gms", o->slo_e2e_ms);
        fprintf(f, ")\n");
    }
    fprintf(f, "  %-22s %10s %10s %10s %10s %10s\n", "latency (ms)", "mean", "p50", "p90", "p99",
            "max");
    latency_row(f, "time to first token", &r->ttft);
    latency_row(f, "time per output token", &r->tpot);
    latency_row(f, "inter-token latency", &r->itl);
    latency_row(f, "end-to-end", &r->e2e);
}

void cl_print_sweep(FILE *f, const cl_bench_options *o, const cl_level_result *r, size_t n)
{
    fprintf(f, "%12s %6s %6s %8s %10s %10s %10s %10s %10s %10s %10s",
            o->open_loop ? "rate" : "conc", "done", "failed", "req/s", "out tok/s", "TTFT p50",
            "TTFT p99", "TPOT p50", "TPOT p99", "ITL p99", "E2E p99");
    fprintf(f, has_slo(o) ? " %10s\n" : "\n", "goodput");
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%12g %6zu %6zu %8.2f %10.1f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f",
                r[i].level, r[i].completed, r[i].failed, r[i].req_per_s, r[i].out_tok_per_s,
                r[i].ttft.p50, r[i].ttft.p99, r[i].tpot.p50, r[i].tpot.p99, r[i].itl.p99,
                r[i].e2e.p99);
        if (has_slo(o))
            fprintf(f, " %10.2f", r[i].goodput_req_per_s);
        fprintf(f, "\n");
    }
    fprintf(f, "(latencies in ms)\n");
}

static cJSON *summary_json(const cl_summary *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "n", (double)s->n);
    cJSON_AddNumberToObject(o, "mean", s->mean);
    cJSON_AddNumberToObject(o, "p50", s->p50);
    cJSON_AddNumberToObject(o, "p90", s->p90);
    cJSON_AddNumberToObject(o, "p99", s->p99);
    cJSON_AddNumberToObject(o, "max", s->max);
    return o;
}

static cJSON *level_json(const cl_level_result *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "level", r->level);
    cJSON_AddNumberToObject(o, "completed", (double)r->completed);
    cJSON_AddNumberToObject(o, "failed", (double)r->failed);
    cJSON *fails = cJSON_AddObjectToObject(o, "failures");
    for (size_t i = 0; fails && i < r->n_fail_kinds; i++)
        cJSON_AddNumberToObject(fails, r->fails[i].kind, (double)r->fails[i].n);
    if (r->first_error[0])
        cJSON_AddStringToObject(o, "first_error", r->first_error);
    cJSON_AddNumberToObject(o, "late_arrivals", (double)r->late_arrivals);
    cJSON_AddNumberToObject(o, "duration_s", r->window_s);
    cJSON_AddNumberToObject(o, "input_tokens", (double)r->in_tokens);
    cJSON_AddNumberToObject(o, "output_tokens", (double)r->out_tokens);
    cJSON_AddNumberToObject(o, "request_throughput", r->req_per_s);
    cJSON_AddNumberToObject(o, "input_token_throughput", r->in_tok_per_s);
    cJSON_AddNumberToObject(o, "output_token_throughput", r->out_tok_per_s);
    cJSON_AddNumberToObject(o, "good_requests", (double)r->good);
    cJSON_AddNumberToObject(o, "goodput", r->goodput_req_per_s);
    cJSON_AddItemToObject(o, "ttft_ms", summary_json(&r->ttft));
    cJSON_AddItemToObject(o, "tpot_ms", summary_json(&r->tpot));
    cJSON_AddItemToObject(o, "itl_ms", summary_json(&r->itl));
    cJSON_AddItemToObject(o, "e2e_ms", summary_json(&r->e2e));
    return o;
}

int cl_write_samples(const char *path, const cl_bench_options *o, const cl_level_result *r,
                     size_t n, char *err)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, CL_ERR_LEN, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    /* times in seconds from the level's start; latencies in ms, -1 when unknown */
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < r[i].n_samples; k++) {
            const cl_sample *s = &r[i].samples[k];
            fprintf(f,
                    "{\"level\": %g, \"mode\": \"%s\", \"ok\": %s, \"failure\": \"%s\", "
                    "\"start_s\": %.6f, \"end_s\": %.6f, \"ttft_ms\": %.3f, \"tpot_ms\": %.3f, "
                    "\"e2e_ms\": %.3f, \"input_tokens\": %ld, \"output_tokens\": %ld}\n",
                    r[i].level, o->open_loop ? "rate" : "concurrency", s->ok ? "true" : "false",
                    s->ok ? "" : s->kind, s->start - r[i].t0, s->end - r[i].t0,
                    s->ttft >= 0 ? s->ttft * 1000.0 : -1.0, s->tpot >= 0 ? s->tpot * 1000.0 : -1.0,
                    s->ok ? s->e2e * 1000.0 : -1.0, s->ok ? s->in_tokens : 0L,
                    s->ok ? s->out_tokens : 0L);
        }
    if (fclose(f) != 0) {
        snprintf(err, CL_ERR_LEN, "error writing %s", path);
        return -1;
    }
    return 0;
}

/* What the run was: target, endpoint, load and objectives. */
static void run_json(cJSON *root, const cl_bench_options *o)
{
    cJSON_AddStringToObject(root, "tool", "mhla-bench");
    cJSON_AddStringToObject(root, "url", o->conn.url);
    if (o->conn.model)
        cJSON_AddStringToObject(root, "model", o->conn.model);
    cJSON_AddStringToObject(root, "endpoint", o->chat ? "/v1/chat/completions" : "/v1/completions");
    cJSON_AddStringToObject(root, "mode", o->open_loop ? "rate" : "concurrency");
    if (o->open_loop)
        cJSON_AddStringToObject(root, "arrivals", o->poisson ? "poisson" : "constant");
    if (o->duration_s > 0)
        cJSON_AddNumberToObject(root, "duration_s", o->duration_s);
    else
        cJSON_AddNumberToObject(root, "requests", (double)o->requests);
    cJSON_AddNumberToObject(root, "warmup_s", o->warmup_s);
    cJSON_AddNumberToObject(root, "warmup_requests", (double)o->warmup_requests);
    cJSON *slo = cJSON_AddObjectToObject(root, "slo_ms");
    if (slo && o->slo_ttft_ms > 0)
        cJSON_AddNumberToObject(slo, "ttft", o->slo_ttft_ms);
    if (slo && o->slo_tpot_ms > 0)
        cJSON_AddNumberToObject(slo, "tpot", o->slo_tpot_ms);
    if (slo && o->slo_e2e_ms > 0)
        cJSON_AddNumberToObject(slo, "e2e", o->slo_e2e_ms);
}

int cl_write_json(const char *path, const cl_bench_options *o, const cl_level_result *r, size_t n,
                  char *err)
{
    cJSON *root = cJSON_CreateObject();
    if (!root) {
        snprintf(err, CL_ERR_LEN, "out of memory writing %s", path);
        return -1;
    }
    run_json(root, o);
    cJSON *levels = cJSON_AddArrayToObject(root, "levels");
    for (size_t i = 0; levels && i < n; i++)
        cJSON_AddItemToArray(levels, level_json(&r[i]));
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    if (!s) {
        snprintf(err, CL_ERR_LEN, "out of memory writing %s", path);
        return -1;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, CL_ERR_LEN, "cannot write %s: %s", path, strerror(errno));
        free(s);
        return -1;
    }
    int bad = fputs(s, f) < 0 || fputc('\n', f) == EOF;
    bad |= fclose(f) != 0;
    free(s);
    if (bad) {
        snprintf(err, CL_ERR_LEN, "error writing %s", path);
        return -1;
    }
    return 0;
}
