/*
 * stats.c — percentiles and summaries of latency samples. One definition of a
 * percentile (numpy's default, linear interpolation) so that the figures can
 * be checked against numpy and compared with other tools that use it.
 */
#include "client_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cl_percentile(const double *sorted, size_t n, double q, double *out, char *err)
{
    if (n == 0) {
        snprintf(err, CL_ERR_LEN, "percentile of an empty sample");
        return -1;
    }
    if (!(q >= 0.0 && q <= 100.0)) {
        snprintf(err, CL_ERR_LEN, "percentile %g outside [0, 100]", q);
        return -1;
    }
    double rank = q / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(rank);
    if (lo >= n - 1) {
        *out = sorted[n - 1];
        return 0;
    }
    double frac = rank - (double)lo;
    *out = sorted[lo] + (sorted[lo + 1] - sorted[lo]) * frac;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int cl_sorted_copy(const double *v, size_t n, double **out, char *err)
{
    *out = NULL;
    if (n == 0)
        return 0;
    double *s = malloc(n * sizeof *s);
    if (!s) {
        snprintf(err, CL_ERR_LEN, "out of memory sorting %zu samples", n);
        return -1;
    }
    memcpy(s, v, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_double);
    *out = s;
    return 0;
}

int cl_summarize(const double *v, size_t n, cl_summary *out, char *err)
{
    memset(out, 0, sizeof *out);
    double *s;
    if (n == 0 || cl_sorted_copy(v, n, &s, err))
        return n == 0 ? 0 : -1;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += s[i];
    out->n = n;
    out->mean = sum / (double)n;
    out->min = s[0];
    out->max = s[n - 1];
    int rc = cl_percentile(s, n, 50.0, &out->p50, err) | cl_percentile(s, n, 90.0, &out->p90, err) |
             cl_percentile(s, n, 99.0, &out->p99, err);
    free(s);
    return rc ? -1 : 0;
}

int cl_vec_push(cl_vec *v, double x)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        double *p = realloc(v->v, cap * sizeof *p);
        if (!p)
            return -1;
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return 0;
}

void cl_vec_free(cl_vec *v)
{
    free(v->v);
    memset(v, 0, sizeof *v);
}
