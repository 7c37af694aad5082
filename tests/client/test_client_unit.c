/*
 * test_client_unit.c — unit tests of client/'s statistics and SSE parser
 * (public API client.h): percentiles against values known in closed form,
 * and the parser fed the same stream split at every possible place.
 */
#include "client.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void check(int cond, const char *what)
{
    printf("%s %s\n", cond ? "ok  " : "FAIL", what);
    if (!cond)
        failures++;
}

static int near(double a, double b, double tol) { return fabs(a - b) <= tol; }

static void test_percentiles(void)
{
    char err[CL_ERR_LEN];
    cl_summary s;
    double v[100000];

    for (int i = 0; i < 100; i++)
        v[i] = 100 - i; /* 100..1, descending: the summary must sort */
    check(cl_summarize(v, 100, &s, err) == 0, "summarize 1..100");
    check(s.n == 100 && near(s.mean, 50.5, 1e-12) && s.min == 1 && s.max == 100,
          "1..100: n, mean, min, max");
    check(near(s.p50, 50.5, 1e-9) && near(s.p90, 90.1, 1e-9) && near(s.p99, 99.01, 1e-9),
          "1..100: p50 50.5, p90 90.1, p99 99.01 (linear interpolation)");
    check(v[0] == 100 && v[99] == 1, "summarize leaves its input unchanged");

    v[0] = 7;
    check(cl_summarize(v, 1, &s, err) == 0 && s.p50 == 7 && s.p99 == 7 && s.max == 7 && s.mean == 7,
          "one sample: every figure is that sample");

    v[0] = 10;
    v[1] = 0;
    check(cl_summarize(v, 2, &s, err) == 0 && near(s.p50, 5, 1e-12) && near(s.p90, 9, 1e-12) &&
              near(s.p99, 9.9, 1e-12),
          "two samples {0, 10}: p50 5, p90 9, p99 9.9");

    for (int i = 0; i < 50; i++)
        v[i] = 3.25;
    check(cl_summarize(v, 50, &s, err) == 0 && s.p50 == 3.25 && s.p99 == 3.25 && s.mean == 3.25,
          "constant sample");

    /* 0..999 in a scrambled order (multiplication by a unit mod 1000) */
    for (int i = 0; i < 1000; i++)
        v[i] = (double)((i * 37) % 1000);
    check(cl_summarize(v, 1000, &s, err) == 0 && near(s.p50, 499.5, 1e-9) &&
              near(s.p90, 899.1, 1e-9) && near(s.p99, 989.01, 1e-9) && s.max == 999,
          "scrambled 0..999: p50 499.5, p90 899.1, p99 989.01");

    /* exponential(1) quantiles: the sample at the midpoints of 1e5 equal-probability
     * bins; its percentiles are ln 2, ln 10, ln 100 to within the bin width */
    int n = 100000;
    for (int i = 0; i < n; i++)
        v[(i * 7919) % n] = -log(1.0 - (i + 0.5) / n);
    check(cl_summarize(v, (size_t)n, &s, err) == 0 && near(s.p50, log(2.0), 1e-3) &&
              near(s.p90, log(10.0), 1e-3) && near(s.p99, log(100.0), 1e-2) &&
              near(s.mean, 1.0, 1e-3),
          "exponential(1): p50 ln2, p90 ln10, p99 ln100, mean 1");

    /* uniform(0, 1) quantiles */
    for (int i = 0; i < n; i++)
        v[(i * 7919) % n] = (i + 0.5) / n;
    check(cl_summarize(v, (size_t)n, &s, err) == 0 && near(s.p50, 0.5, 1e-4) &&
              near(s.p90, 0.9, 1e-4) && near(s.p99, 0.99, 1e-4),
          "uniform(0,1): p50 0.5, p90 0.9, p99 0.99");

    /* direct calls and refusals */
    double sorted[4] = {1, 2, 3, 4}, out = -1;
    check(cl_percentile(sorted, 4, 0, &out, err) == 0 && out == 1, "p0 is the minimum");
    check(cl_percentile(sorted, 4, 100, &out, err) == 0 && out == 4, "p100 is the maximum");
    check(cl_percentile(sorted, 4, 25, &out, err) == 0 && near(out, 1.75, 1e-12),
          "p25 of {1,2,3,4} is 1.75");
    check(cl_percentile(sorted, 0, 50, &out, err) == -1 && strstr(err, "empty") != NULL,
          "percentile of an empty sample is refused, naming the cause");
    check(cl_percentile(sorted, 4, 101, &out, err) == -1 && strstr(err, "101") != NULL,
          "percentile 101 is refused, naming the value");
    check(cl_percentile(sorted, 4, NAN, &out, err) == -1, "percentile NaN is refused");
    check(cl_summarize(v, 0, &s, err) == 0 && s.n == 0 && s.p99 == 0, "empty summary is zeros");
}

/* ---- SSE ---- */

typedef struct {
    char got[4096];
    size_t len;
    int events, refuse_at;
} sink;

static int collect(void *ctx, const char *data, size_t len)
{
    sink *s = ctx;
    s->events++;
    if (s->refuse_at && s->events == s->refuse_at)
        return 1;
    if (strlen(data) != len || s->len + len + 2 >= sizeof s->got)
        return 1;
    memcpy(s->got + s->len, data, len);
    s->len += len;
    s->got[s->len++] = '|';
    s->got[s->len] = '\0';
    return 0;
}

/* Feeds stream in pieces cut at a and b (a <= b); returns 0 and the events. */
static int feed3(const char *stream, size_t a, size_t b, sink *s)
{
    cl_sse p;
    char err[CL_ERR_LEN];
    cl_sse_init(&p);
    memset(s, 0, sizeof *s);
    size_t n = strlen(stream);
    int rc = cl_sse_feed(&p, stream, a, collect, s, err) ||
             cl_sse_feed(&p, stream + a, b - a, collect, s, err) ||
             cl_sse_feed(&p, stream + b, n - b, collect, s, err);
    cl_sse_free(&p);
    return rc ? -1 : 0;
}

static void test_sse(void)
{
    const char *stream = ": comment line\n"
                         "data: {\"a\":1}\n\n"
                         "event: message\r\n"
                         "id: 7\r\n"
                         "data:no-space\r\n\r\n"
                         "data: line one\r"
                         "data: line two\r\r"
                         "retry: 100\n"
                         "data\n\n" /* a data field with no value: one empty event */
                         "\n\n"     /* blank lines alone dispatch nothing */
                         "data: [DONE]\n\n"
                         "data: never dispatched"; /* no blank line after it */
    const char *want = "{\"a\":1}|no-space|line one\nline two||[DONE]|";
    size_t n = strlen(stream);
    int all_ok = 1, cases = 0;
    for (size_t a = 0; a <= n; a++)
        for (size_t b = a; b <= n; b++) {
            sink s;
            cases++;
            if (feed3(stream, a, b, &s) != 0 || strcmp(s.got, want) != 0 || s.events != 5) {
                if (all_ok)
                    printf("  first mismatch at cuts %zu,%zu: got '%s'\n", a, b, s.got);
                all_ok = 0;
            }
        }
    char what[128];
    snprintf(what, sizeof what, "SSE: same 5 events for all %d ways to cut the stream in 3", cases);
    check(all_ok, what);

    /* one byte at a time */
    cl_sse p;
    char err[CL_ERR_LEN];
    sink s;
    memset(&s, 0, sizeof s);
    cl_sse_init(&p);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++)
        rc = cl_sse_feed(&p, stream + i, 1, collect, &s, err);
    cl_sse_free(&p);
    check(rc == 0 && strcmp(s.got, want) == 0, "SSE: same events fed one byte at a time");

    /* a handler's refusal stops parsing with an error */
    memset(&s, 0, sizeof s);
    s.refuse_at = 2;
    cl_sse_init(&p);
    rc = cl_sse_feed(&p, stream, n, collect, &s, err);
    cl_sse_free(&p);
    check(rc == -1 && s.events == 2 && strstr(err, "refused") != NULL,
          "SSE: a handler's refusal stops the feed with a message");

    /* an over-long line is refused, not grown without bound */
    cl_sse_init(&p);
    p.max_line = 64;
    char big[200];
    memset(big, 'x', sizeof big);
    memcpy(big, "data: ", 6);
    memset(&s, 0, sizeof s);
    rc = cl_sse_feed(&p, big, sizeof big, collect, &s, err);
    cl_sse_free(&p);
    check(rc == -1 && strstr(err, "longer than 64") != NULL,
          "SSE: a line past max_line is refused, naming the limit");
}

int main(void)
{
    test_percentiles();
    test_sse();
    if (failures)
        printf("%d check(s) failed\n", failures);
    else
        printf("all checks passed\n");
    return failures ? 1 : 0;
}
