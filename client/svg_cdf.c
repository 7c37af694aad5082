/*
 * svg_cdf.c — the run picture's latency panel: the empirical CDF of each
 * latency (point i of n sorted samples at (v_i, i/n), so every curve ends at
 * 1.0 on its largest sample) on one log axis, since TTFT, inter-token and
 * end-to-end latencies sit decades apart. p50 and p99 are marked on each curve
 * and by dashed guides across the panel.
 *
 * The panel's <g> carries its axis (data-x-lo/-hi in ms, the plot's pixels) and
 * each curve its sample count and percentiles, so that a reader (or a test) can
 * map the points back to milliseconds.
 */
#include "client_internal.h"

#include <math.h>

enum { MAX_DECADES = 8 }; /* samples below hi/10^8 are drawn at the left edge */

typedef struct {
    cl_svg_box b;
    double dlo, dhi; /* log10 of the axis's ends */
} cdf_axis;

static double ax(const cdf_axis *a, double ms)
{
    double v = ms > 0 ? log10(ms) : a->dlo;
    v = v < a->dlo ? a->dlo : v > a->dhi ? a->dhi : v;
    return a->b.l + (a->b.r - a->b.l) * (v - a->dlo) / (a->dhi - a->dlo);
}

static double ay(const cdf_axis *a, double frac) { return a->b.b - (a->b.b - a->b.t) * frac; }

/* Whole decades around the smallest positive and the largest sample. */
static cdf_axis axis_of(cl_svg_box b, const cl_cdf_curve *c, size_t n)
{
    double lo = INFINITY, hi = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < c[i].n && !(c[i].sorted[k] > 0))
            k++;
        if (k < c[i].n && c[i].sorted[k] < lo)
            lo = c[i].sorted[k];
        if (c[i].n && c[i].sorted[c[i].n - 1] > hi)
            hi = c[i].sorted[c[i].n - 1];
    }
    cdf_axis a = {b, 0, 1};
    if (!(hi > 0))
        return a;
    a.dhi = ceil(log10(hi) - 1e-12);
    a.dlo = floor(log10(lo < hi ? lo : hi) + 1e-12);
    if (a.dhi <= a.dlo)
        a.dhi = a.dlo + 1;
    if (a.dhi - a.dlo > MAX_DECADES)
        a.dlo = a.dhi - MAX_DECADES;
    return a;
}

static void x_grid(FILE *f, const cdf_axis *a)
{
    int few = a->dhi - a->dlo <= 2; /* few decades: 2 and 5 are labelled too */
    for (int d = (int)a->dlo; d <= (int)a->dhi; d++)
        for (int m = 1; m <= 9 && (m == 1 || d < (int)a->dhi); m++) {
            double v = m * pow(10.0, d), x = ax(a, v);
            fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"%s\"/>\n", x,
                    a->b.t, x, a->b.b, m == 1 ? "#ccc" : "#eee");
            if (m == 1 || (few && (m == 2 || m == 5)))
                fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", x,
                        a->b.b + 16, v);
        }
    fprintf(f,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">latency (ms, log scale)</text>\n",
            (a->b.l + a->b.r) / 2, a->b.b + 34);
}

static void y_grid(FILE *f, const cdf_axis *a)
{
    for (int k = 0; k <= 10; k++) {
        double y = ay(a, k / 10.0);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#eee\"/>\n",
                a->b.l, y, a->b.r, y);
        if (k % 2 == 0)
            fprintf(f, "<text x=\"%.1f\" y=\"%.2f\" text-anchor=\"end\">%g</text>\n", a->b.l - 6,
                    y + 4, k / 10.0);
    }
    const double q[2] = {0.5, 0.99};
    for (int k = 0; k < 2; k++) {
        double y = ay(a, q[k]);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#888\" "
                "stroke-dasharray=\"3,3\"/>\n",
                a->b.l, y, a->b.r, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.2f\" fill=\"#555\">%s</text>\n", a->b.r + 4, y + 4,
                k ? "p99" : "p50");
    }
    fprintf(f,
            "<text transform=\"translate(%.1f,%.1f) rotate(-90)\" text-anchor=\"middle\">"
            "fraction of samples at or below</text>\n",
            a->b.l - 44, (a->b.t + a->b.b) / 2);
}

/* The curve: every sample, or CL_CDF_MAX_POINTS evenly spaced ranks ending at the last. */
static void curve(FILE *f, const cdf_axis *a, const cl_cdf_curve *c)
{
    size_t pts = c->n <= CL_CDF_MAX_POINTS ? c->n : CL_CDF_MAX_POINTS;
    fprintf(f,
            "<polyline class=\"cdf\" data-series=\"%s\" data-n=\"%zu\" data-p50=\"%.9g\" "
            "data-p99=\"%.9g\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s%s%s points=\"",
            c->key, c->n, c->p50, c->p99, c->color, c->dash ? " stroke-dasharray=\"" : "",
            c->dash ? c->dash : "", c->dash ? "\"" : "");
    for (size_t k = 1; k <= pts; k++) {
        size_t i = pts == c->n ? k : (size_t)ceil((double)k * (double)c->n / (double)pts);
        fprintf(f, "%s%.2f,%.2f", k > 1 ? " " : "", ax(a, c->sorted[i - 1]),
                ay(a, (double)i / (double)c->n));
    }
    fprintf(f, "\"/>\n");
    const double q[2] = {0.5, 0.99}, v[2] = {c->p50, c->p99};
    for (int k = 0; k < 2; k++)
        fprintf(f,
                "<circle class=\"mark\" data-series=\"%s\" cx=\"%.2f\" cy=\"%.2f\" r=\"4\" "
                "fill=\"%s\" stroke=\"%s\" stroke-width=\"1.5\"/>\n",
                c->key, ax(a, v[k]), ay(a, q[k]), k ? "white" : c->color, c->color);
}

void cl_svg_cdf_panel(FILE *f, cl_svg_box b, const cl_cdf_curve *c, size_t n)
{
    cdf_axis a = axis_of(b, c, n);
    fprintf(f,
            "<g id=\"cdf\" data-x-scale=\"log\" data-x-lo=\"%.9g\" data-x-hi=\"%.9g\" "
            "data-left=\"%g\" data-right=\"%g\" data-top=\"%g\" data-bottom=\"%g\">\n",
            pow(10.0, a.dlo), pow(10.0, a.dhi), b.l, b.r, b.t, b.b);
    x_grid(f, &a);
    y_grid(f, &a);
    fprintf(f,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#333\"/>\n",
            b.l, b.t, b.r - b.l, b.b - b.t);
    for (size_t i = 0; i < n; i++)
        if (c[i].n)
            curve(f, &a, &c[i]);
    fprintf(f, "</g>\n");
}
