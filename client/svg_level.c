/*
 * svg_level.c — a bench level's result as the run picture: the latencies of
 * its completed measured requests (as the report counts them), its tokens'
 * arrivals and its requests' spans, in seconds from the first measured start.
 */
#include "client_internal.h"

#include <stdlib.h>

typedef struct {
    double *ttft, *e2e, *start, *end, *tok;
    size_t n_ttft, n_e2e, n_req;
} level_arrays;

static void arrays_free(level_arrays *a)
{
    free(a->ttft);
    free(a->e2e);
    free(a->start);
    free(a->end);
    free(a->tok);
}

static int fill(level_arrays *a, const cl_level_result *r, char *err)
{
    size_t n = r->n_samples + 1;
    a->ttft = malloc(n * sizeof *a->ttft);
    a->e2e = malloc(n * sizeof *a->e2e);
    a->start = malloc(n * sizeof *a->start);
    a->end = malloc(n * sizeof *a->end);
    a->tok = malloc((r->n_token_t + 1) * sizeof *a->tok);
    if (!a->ttft || !a->e2e || !a->start || !a->end || !a->tok) {
        snprintf(err, CL_ERR_LEN, "out of memory drawing %zu requests", r->n_samples);
        return -1;
    }
    for (size_t i = 0; i < r->n_samples; i++) {
        const cl_sample *s = &r->samples[i];
        a->start[a->n_req] = s->start - r->t_measure;
        a->end[a->n_req++] = s->end - r->t_measure;
        if (!s->ok)
            continue;
        a->e2e[a->n_e2e++] = s->e2e * 1000.0;
        if (s->ttft >= 0)
            a->ttft[a->n_ttft++] = s->ttft * 1000.0;
    }
    for (size_t i = 0; i < r->n_token_t; i++)
        a->tok[i] = r->token_t[i] - r->t_measure;
    return 0;
}

int cl_write_level_svg(const char *path, const cl_bench_options *o, const cl_level_result *r,
                       char *err)
{
    level_arrays a = {0};
    int rc = fill(&a, r, err);
    if (rc == 0) {
        char title[128], sub[256];
        snprintf(title, sizeof title, "mhla-bench: %s %g, %s",
                 o->open_loop ? "rate" : "concurrency", r->level,
                 o->chat ? "/v1/chat/completions" : "/v1/completions");
        snprintf(sub, sizeof sub,
                 "%zu completed, %zu failed; %ld output tokens in %.2f s (%.1f tokens/s)",
                 r->completed, r->failed, r->out_tokens, r->window_s, r->out_tok_per_s);
        cl_run_picture p = {.title = title,
                            .subtitle = sub,
                            .ttft_ms = a.ttft,
                            .n_ttft = a.n_ttft,
                            .itl_ms = r->itl_ms,
                            .n_itl = r->n_itl,
                            .e2e_ms = a.e2e,
                            .n_e2e = a.n_e2e,
                            .token_t = a.tok,
                            .n_tokens = r->n_token_t,
                            .req_start = a.start,
                            .req_end = a.end,
                            .n_requests = a.n_req,
                            .span_s = r->window_s};
        rc = cl_write_run_svg(path, &p, err);
    }
    arrays_free(&a);
    return rc;
}

void cl_level_result_free(cl_level_result *r)
{
    free(r->samples);
    free(r->itl_ms);
    free(r->token_t);
    r->samples = NULL;
    r->itl_ms = r->token_t = NULL;
}
