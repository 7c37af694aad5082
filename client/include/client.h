/*
 * client.h — the public API of mhla-serve's bundled clients (docs/architecture.md, The modules):
 * mhla-bench, the load generator, and mhla-cli, which streams one completion to
 * the terminal. Both speak the OpenAI completions protocol (chat completions
 * with --chat) over libcurl, so they work against any compatible server.
 *
 * Exposed here are the two entry points and the two pieces that are worth
 * testing on their own: the latency statistics (percentiles), the
 * incremental Server-Sent Events parser and the picture of one run.
 * Everything else is private to client/.
 *
 * Errors: functions return 0 on success and -1 on failure, with a message
 * naming the cause written to a caller buffer of CL_ERR_LEN bytes.
 */
#ifndef MHLA_CLIENT_H
#define MHLA_CLIENT_H

#include <stddef.h>

#define CL_ERR_LEN 256

/* ---- statistics -------------------------------------------------------- */

/* Summary of a sample. With n == 0 every figure is 0. */
typedef struct {
    size_t n;
    double mean, min, p50, p90, p99, max;
} cl_summary;

/* The q-th percentile (0 <= q <= 100) of the n >= 1 values of sorted (ascending),
 * by linear interpolation between closest ranks: rank q/100·(n−1), the
 * definition of numpy.percentile's default method. */
int cl_percentile(const double *sorted, size_t n, double q, double *out, char *err);

/* *out: an ascending copy of v[0..n-1] (malloc'd; NULL when n is 0). */
int cl_sorted_copy(const double *v, size_t n, double **out, char *err);

/* Summarises v[0..n-1] (any order; v is not modified). n may be 0. */
int cl_summarize(const double *v, size_t n, cl_summary *out, char *err);

/* ---- incremental Server-Sent Events parser ----------------------------- */

/* Called once per complete event with its data (the data: lines joined by
 * '\n', NUL-terminated). A non-zero return stops parsing: cl_sse_feed then
 * returns -1 with err naming the callback's refusal. */
typedef int (*cl_sse_event_fn)(void *ctx, const char *data, size_t len);

/* Parser state: bytes may arrive split anywhere (inside a line, between \r
 * and \n); lines end with \n, \r\n or \r; ':' lines are comments; fields other
 * than data are ignored; a blank line dispatches the event (when it has data). */
typedef struct {
    char *line;
    size_t line_len, line_cap;
    char *data;
    size_t data_len, data_cap;
    int has_data;
    int after_cr;    /* the previous byte ended a line with \r: a following \n is part of it */
    size_t max_line; /* longest line accepted (bytes); 0 means 16 MiB */
} cl_sse;

void cl_sse_init(cl_sse *p);
int cl_sse_feed(cl_sse *p, const char *bytes, size_t n, cl_sse_event_fn on_event, void *ctx,
                char *err);
void cl_sse_free(cl_sse *p);

/* ---- the picture of one run (svg_run.c) ------------------------------- */

/* What a run left, as plain arrays (any order). Times are seconds from the
 * start of the measurement; latencies are milliseconds. */
typedef struct {
    const char *title, *subtitle; /* the picture's two heading lines (escaped here) */
    const double *ttft_ms, *itl_ms, *e2e_ms;
    size_t n_ttft, n_itl, n_e2e;
    const double *token_t; /* each output token's arrival */
    size_t n_tokens;
    const double *req_start, *req_end; /* each request's span (for requests in flight); */
    size_t n_requests;                 /* NULL and 0 leave that line out */
    double span_s;                     /* the time axis runs from 0 to span_s */
} cl_run_picture;

/* Writes one self-contained SVG: the empirical CDFs of TTFT, ITL and E2E on a
 * log axis with p50 and p99 marked (numpy's percentiles, as the text report),
 * and output tokens/s over time in 1-second bins (coarser past 600 s, finer under 10 s) with the
 * mean number of requests in flight per bin. A curve keeps every sample up to
 * CL_CDF_MAX_POINTS, then that many evenly spaced quantiles. */
#define CL_CDF_MAX_POINTS 2000
int cl_write_run_svg(const char *path, const cl_run_picture *p, char *err);

/* ---- programs ---------------------------------------------------------- */

/* mhla-bench and mhla-cli: parse argv, run, print; return the process exit
 * status (0 success, 1 error or failed requests where so documented, 2 usage). */
int cl_bench_main(int argc, char **argv);
int cl_cli_main(int argc, char **argv);

#endif
