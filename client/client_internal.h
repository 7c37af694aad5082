/*
 * client_internal.h — private declarations shared by the files of client/ (not part of
 * the module's public API, which is client.h).
 */
#ifndef MHLA_CL_H
#define MHLA_CL_H

#include "base.h"
#include "client.h"

#include <curl/curl.h>
#include <stdint.h>
#include <stdio.h>

/* ---- small helpers (stats.c, util.c) ---- */

typedef struct {
    double *v;
    size_t n, cap;
} cl_vec;

int cl_vec_push(cl_vec *v, double x);
void cl_vec_free(cl_vec *v);

/* The clock is base's mhla_now (monotonic seconds); the bench's generator is base's mhla_rng (runs
 * repeat from a seed on any libc); growable strings are base's mhla_buf. */

/* s as a JSON string literal (malloc'd), or NULL when out of memory. */
char *cl_json_string(const char *s);

/* ---- connection settings shared by both programs ---- */

typedef struct {
    const char *url;     /* base URL, e.g. http://127.0.0.1:8080 */
    const char *model;   /* "model" field, or NULL to leave it out */
    const char *api_key; /* Bearer token, or NULL */
    double timeout_s;    /* per request, 0 = none */
} cl_conn;

/* Blocking JSON POST to base URL + path: *body_out receives the response body
 * (malloc'd, NUL-terminated), *status the HTTP status. */
int cl_post_json(const cl_conn *c, const char *path, const char *body, long *status,
                 char **body_out, char *err);

/* ---- one streaming completion request (request.c) ---- */

typedef struct cl_req {
    CURL *easy;
    struct curl_slist *headers;
    char *body;
    cl_sse sse;
    char curl_err[CURL_ERROR_SIZE];
    /* timing, in mhla_now() seconds */
    double t_send, t_first, t_last, t_end;
    int got_first, got_done, error_event, bad_event;
    long status;
    long tokens_seen;                    /* counted from the stream */
    long usage_prompt, usage_completion; /* from the usage chunk; -1 when absent */
    char error_msg[CL_ERR_LEN];          /* an error event's or body's message */
    mhla_buf err_body;                   /* body of a non-200 response */
    cl_vec itl;                          /* seconds between tokens */
    /* for mhla-cli: each piece of text as it arrives */
    void (*on_text)(void *ctx, const char *text, size_t len);
    void *text_ctx;
    int chat; /* the stream's chunks are chat.completion.chunk: text in delta.content */
    /* bookkeeping of the runner */
    int measured;
    long expected_in;
} cl_req;

typedef struct {
    const char *prompt_json; /* the prompt as a JSON value (string or id array) */
    long max_tokens;
    double temperature; /* < 0: leave out */
    long long seed;     /* < 0: leave out */
    int ignore_eos, token_ids, usage;
    int chat;           /* /v1/chat/completions: the prompt (a string) is one user message */
    const char *system; /* chat: a system message before it, or NULL */
    /* JSON objects whose fields are set in the body after the bench's own (a
     * field of the same name replaced): every request's, then this prompt's;
     * NULL: none */
    const char *body_extra, *prompt_extra;
} cl_req_params;

/* Prepares r (zeroed by the caller or reused after cl_req_reset) to send one
 * completion with stream=true. */
int cl_req_setup(cl_req *r, const cl_conn *c, const cl_req_params *p, char *err);
/* Frees what one request held; keeps r->easy for the next one (connection reuse). */
void cl_req_reset(cl_req *r);
void cl_req_free(cl_req *r);

/* After the transfer ends: 0 when the request completed ([DONE] seen, HTTP 200,
 * no error event); else -1 and kind (e.g. "http_429", "transport", "incomplete",
 * "error_event") with the cause in msg. */
int cl_req_outcome(const cl_req *r, CURLcode result, char *kind, size_t kind_len, char *msg);
long cl_req_output_tokens(const cl_req *r);

/* ---- prompts (prompts.c) ---- */

typedef enum { CL_DIST_FIXED, CL_DIST_UNIFORM, CL_DIST_NORMAL } cl_dist;

typedef struct {
    long mean;
    cl_dist dist;
    double spread; /* uniform: ±spread; normal: standard deviation */
} cl_len_spec;

typedef struct {
    char *prompt_json; /* JSON value */
    long max_tokens;
    long input_tokens; /* known prompt length, or -1 */
    char *extra_json;  /* a JSONL line's other fields, as an object, or NULL */
} cl_prompt;

typedef struct {
    cl_prompt *p;
    size_t n;
    size_t as_ids; /* synthesized prompts sent as ids because text did not round-trip */
} cl_prompts;

int cl_parse_dist(const char *s, cl_dist *out);
long cl_draw_len(const cl_len_spec *s, mhla_rng *r);
/* text_only (chat, whose message content is a string): a line whose prompt is a
 * token-id array is an error naming the line. */
int cl_prompts_load_jsonl(const char *path, long default_max_tokens, int text_only, cl_prompts *out,
                          char *err);
/* text_only (chat): every prompt stays text, and its input_tokens is -1, since
 * the server's chat template adds tokens the client cannot count. */
int cl_prompts_synthesize(const cl_conn *c, const cl_len_spec *in, const cl_len_spec *out_len,
                          size_t count, uint64_t seed, int text_only, cl_prompts *out, char *err);
void cl_prompts_free(cl_prompts *p);

/* ---- the load run (runner.c) ---- */

typedef struct {
    cl_conn conn;
    int open_loop;  /* 0: fixed concurrency; 1: request rate */
    double *levels; /* concurrency values or rates (req/s) */
    size_t n_levels;
    int poisson;          /* open loop arrivals: Poisson (1) or constant (0) */
    long max_concurrency; /* open loop cap on requests in flight */
    double duration_s;    /* > 0: measure for this long ... */
    long requests;        /* ... else this many requests */
    double warmup_s;
    long warmup_requests;
    double temperature;
    long long seed;
    int ignore_eos, token_ids, usage;
    int chat;               /* /v1/chat/completions, each prompt one user message */
    const char *system;     /* chat: the system message of every request, or NULL */
    const char *body_extra; /* a JSON object merged into every request body, or NULL */
    double slo_ttft_ms, slo_tpot_ms, slo_e2e_ms; /* <= 0: no objective */
    int progress;                                /* live progress line on stderr */
    int keep_tokens; /* hand each token's arrival time and gap to the result (the run picture) */
    uint64_t rng_seed;
} cl_bench_options;

/* Everything mhla-bench's flags set (bench_opts.c). */
typedef struct {
    cl_bench_options run;
    const char *prompts_path; /* JSONL, or NULL to synthesize */
    cl_len_spec input, output;
    long num_prompts; /* distinct synthesized prompts, used in turn */
    const char *json_path, *svg_path, *samples_path;
    int progress_mode; /* -1 auto (a terminal), 0 off, 1 on */
    double levels_buf[64];
    int have_concurrency; /* --concurrency was given (--rate sets run.open_loop) */
    long rng_seed;        /* --seed, for run.rng_seed */
    long sampling_seed;   /* --sampling-seed, for run.seed; -1: none */
} cl_bench_args;

/* 0: run with *a; 1: --help was printed; -1: usage error in err. */
int cl_bench_parse_args(int argc, char **argv, cl_bench_args *a, char *err);
void cl_bench_print_help(FILE *f);

/* What one measured request left. */
typedef struct {
    int ok;
    char kind[32];
    double start, ttft, tpot, e2e; /* seconds; ttft/tpot -1 when unknown */
    long in_tokens, out_tokens;
    double end;
} cl_sample;

typedef struct {
    char kind[32];
    size_t n;
} cl_fail_count;

typedef struct {
    double level;
    size_t completed, failed, late_arrivals;
    cl_fail_count fails[16];
    size_t n_fail_kinds;
    char first_error[CL_ERR_LEN];
    double window_s;
    long in_tokens, out_tokens;
    double req_per_s, in_tok_per_s, out_tok_per_s;
    cl_summary ttft, tpot, itl, e2e; /* milliseconds */
    size_t good;
    double goodput_req_per_s;
    cl_sample *samples; /* every measured request, in completion order (owned; free()) */
    size_t n_samples;
    double t0;        /* mhla_now() at the level's start: samples' times are absolute */
    double t_measure; /* mhla_now() at the first measured request's start */
    /* with keep_tokens (owned; free()): every inter-token gap (ms) and each output token's
     * arrival (mhla_now()) of the completed measured requests */
    double *itl_ms, *token_t;
    size_t n_itl, n_token_t;
} cl_level_result;

int cl_run_level(const cl_bench_options *o, const cl_prompts *prompts, double level,
                 cl_level_result *res, char *err);

/* ---- reports (report.c, svg.c) ---- */

void cl_print_level(FILE *f, const cl_bench_options *o, const cl_level_result *r);
void cl_print_sweep(FILE *f, const cl_bench_options *o, const cl_level_result *r, size_t n);
int cl_write_json(const char *path, const cl_bench_options *o, const cl_level_result *r, size_t n,
                  char *err);
/* One JSON object per measured request and level (--samples). */
int cl_write_samples(const char *path, const cl_bench_options *o, const cl_level_result *r,
                     size_t n, char *err);
int cl_write_svg(const char *path, const cl_bench_options *o, const cl_level_result *r, size_t n,
                 char *err);
/* The picture of one level (cl_write_run_svg); r ran with keep_tokens. */
int cl_write_level_svg(const char *path, const cl_bench_options *o, const cl_level_result *r,
                       char *err);
void cl_level_result_free(cl_level_result *r);

/* ---- SVG primitives (svg_util.c) and the run picture's panels ---- */

/* The smallest 1, 2 or 5 × 10^k at or above x (1 when x <= 0). */
double cl_svg_nice_ceil(double x);
/* A 1, 2 or 5 × 10^k step that cuts span into at most max_ticks parts. */
double cl_svg_nice_step(double span, int max_ticks);
/* Opens path and writes the <svg> element and a white background. */
FILE *cl_svg_open(const char *path, int w, int h, char *err);
/* Ends the <svg> element and closes f; -1 when anything failed to be written. */
int cl_svg_close(FILE *f, const char *path, char *err);
/* s as text content or an attribute value (<, >, &, " escaped). */
void cl_svg_escaped(FILE *f, const char *s);
/* A short line of the series' colour and dash, then its label, on baseline y. */
void cl_svg_legend_entry(FILE *f, double x, double y, const char *color, const char *dash,
                         const char *label);

typedef struct {
    double l, r, t, b; /* a plot area, pixels */
} cl_svg_box;

typedef struct {
    const char *key, *name, *color, *dash;
    const double *sorted; /* ascending */
    size_t n;
    double p50, p99;
} cl_cdf_curve;

/* The CDF panel: log x axis (ms) over every curve's samples, fractions 0..1. */
void cl_svg_cdf_panel(FILE *f, cl_svg_box b, const cl_cdf_curve *c, size_t n);
/* The time panel: output tokens/s per bin (left axis), requests in flight (right axis). */
int cl_svg_time_panel(FILE *f, cl_svg_box b, const cl_run_picture *p, char *err);

#endif
