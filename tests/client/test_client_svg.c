/*
 * test_client_svg.c — writes run pictures (client.h, cl_write_run_svg) from
 * known samples for tests/client/test_svg.py, which parses them and checks the
 * curves against the samples written beside them; checks here the refusals
 * (a count without its samples, a path that cannot be written).
 *
 * usage: test_client_svg DIR — writes DIR/known.svg + DIR/known.json (every
 * series, with more inter-token samples than a curve keeps points) and
 * DIR/empty.svg (a run with no samples at all).
 */
#include "client.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_REQ = 120, N_ITL = 5000, N_TOK = 3000 };

static int failures;

static void check(int cond, const char *what)
{
    printf("%s %s\n", cond ? "ok  " : "FAIL", what);
    if (!cond)
        failures++;
}

static void json_array(FILE *f, const char *name, const double *v, size_t n, int last)
{
    fprintf(f, "  \"%s\": [", name);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%.17g", i ? ", " : "", v[i]);
    fprintf(f, "]%s\n", last ? "" : ",");
}

static double ttft[N_REQ], e2e[N_REQ], start[N_REQ], end[N_REQ], itl[N_ITL], tok[N_TOK];

/* Known samples: a scrambled ramp, a log-uniform spread over four decades,
 * exponential gaps, tokens thicker in the run's middle. */
static void make_samples(double span)
{
    for (int i = 0; i < N_REQ; i++) {
        ttft[i] = 5.0 + (double)((i * 37) % N_REQ) * 2.5;
        e2e[i] = 40.0 * pow(10.0, (double)((i * 53) % N_REQ) / N_REQ * 2.0);
        start[i] = span * i / N_REQ;
        end[i] = fmin(span, start[i] + 0.1 + (i % 7) * 0.3);
    }
    for (int i = 0; i < N_ITL; i++)
        itl[i] = -log(1.0 - ((i * 7919) % N_ITL + 0.5) / N_ITL) * 12.0 + 0.05;
    for (int i = 0; i < N_TOK; i++) {
        double u = (i * 2654435761u % N_TOK + 0.5) / N_TOK;
        tok[i] = span * (u < 0.5 ? u * u * 2 : 1 - (1 - u) * (1 - u) * 2) * 0.999;
    }
}

static void write_known(const char *dir)
{
    char path[4096], err[CL_ERR_LEN];
    double span = 12.5;
    make_samples(span);
    cl_run_picture p = {.title = "known <samples> & co",
                        .subtitle = "120 requests",
                        .ttft_ms = ttft,
                        .n_ttft = N_REQ,
                        .itl_ms = itl,
                        .n_itl = N_ITL,
                        .e2e_ms = e2e,
                        .n_e2e = N_REQ,
                        .token_t = tok,
                        .n_tokens = N_TOK,
                        .req_start = start,
                        .req_end = end,
                        .n_requests = N_REQ,
                        .span_s = span};
    snprintf(path, sizeof path, "%s/known.svg", dir);
    check(cl_write_run_svg(path, &p, err) == 0, "the known samples' picture is written");
    snprintf(path, sizeof path, "%s/known.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        check(0, "known.json is written");
        return;
    }
    fprintf(f, "{\n  \"span_s\": %.17g,\n", span);
    json_array(f, "ttft", ttft, N_REQ, 0);
    json_array(f, "itl", itl, N_ITL, 0);
    json_array(f, "e2e", e2e, N_REQ, 0);
    json_array(f, "tokens", tok, N_TOK, 0);
    json_array(f, "start", start, N_REQ, 0);
    json_array(f, "end", end, N_REQ, 1);
    fprintf(f, "}\n");
    check(fclose(f) == 0, "known.json is written");
}

static void refusals(const char *dir)
{
    char path[4096], err[CL_ERR_LEN] = "";
    cl_run_picture p = {.n_ttft = 3, .span_s = 1};
    snprintf(path, sizeof path, "%s/refused.svg", dir);
    check(cl_write_run_svg(path, &p, err) == -1 && strstr(err, "without its samples"),
          "a count without its samples is refused, naming why");
    cl_run_picture empty = {.span_s = 0};
    check(cl_write_run_svg("/nonexistent-dir/x.svg", &empty, err) == -1 &&
              strstr(err, "/nonexistent-dir/x.svg"),
          "a path that cannot be written is an error naming it");
    snprintf(path, sizeof path, "%s/empty.svg", dir);
    check(cl_write_run_svg(path, &empty, err) == 0, "a run without samples still has a picture");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_client_svg DIR\n");
        return 2;
    }
    write_known(argv[1]);
    refusals(argv[1]);
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
