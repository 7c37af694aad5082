/*
 * svg_time.c — the run picture's time panel: output tokens per second in
 * bins of 1 s (wider past 600 s, so that a long run stays a few hundred bins;
 * narrower under 10 s, so that a short one still shows its course)
 * from each token's arrival, and the mean number of requests in flight in
 * each bin. The last bin is widened to the end of the run rather than left as
 * a sliver whose rate would be noise.
 *
 * The rate line carries each bin's token count (data-counts) and the bin
 * width (data-bin-s): the counts add up to the tokens plotted.
 */
#include "client_internal.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    cl_svg_box b;
    double span, bin, rate_top, flight_top;
    size_t nb;
    double *count, *flight; /* per bin: tokens, mean requests in flight */
} time_axis;

static double tx(const time_axis *a, double t) { return a->b.l + (a->b.r - a->b.l) * t / a->span; }

static double ty(const time_axis *a, double v, double top)
{
    return a->b.b - (a->b.b - a->b.t) * v / top;
}

static double bin_start(const time_axis *a, size_t k) { return (double)k * a->bin; }

static double bin_end(const time_axis *a, size_t k)
{
    return k + 1 == a->nb ? a->span : (double)(k + 1) * a->bin;
}

static size_t bin_of(const time_axis *a, double t)
{
    double k = floor(t / a->bin);
    return k < 0 ? 0 : k >= (double)a->nb ? a->nb - 1 : (size_t)k;
}

/* Tokens and requests in flight per bin; the axes' tops. */
static void fill_bins(time_axis *a, const cl_run_picture *p)
{
    for (size_t i = 0; i < p->n_tokens; i++)
        a->count[bin_of(a, p->token_t[i])] += 1;
    for (size_t i = 0; i < p->n_requests; i++) {
        double s = fmax(p->req_start[i], 0), e = fmin(p->req_end[i], a->span);
        for (size_t k = bin_of(a, s); e > s && k < a->nb && bin_start(a, k) < e; k++) {
            double lo = fmax(s, bin_start(a, k)), hi = fmin(e, bin_end(a, k));
            a->flight[k] += fmax(hi - lo, 0) / (bin_end(a, k) - bin_start(a, k));
        }
    }
    double rmax = 0, fmaxv = 0;
    for (size_t k = 0; k < a->nb; k++) {
        rmax = fmax(rmax, a->count[k] / (bin_end(a, k) - bin_start(a, k)));
        fmaxv = fmax(fmaxv, a->flight[k]);
    }
    a->rate_top = cl_svg_nice_ceil(rmax);
    a->flight_top = cl_svg_nice_ceil(fmaxv);
}

static void grid(FILE *f, const time_axis *a, int with_flight)
{
    double step = cl_svg_nice_step(a->span, 10);
    for (double t = 0; t <= a->span * (1 + 1e-9); t += step) {
        fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#eee\"/>\n",
                tx(a, t), a->b.t, tx(a, t), a->b.b);
        fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", tx(a, t),
                a->b.b + 16, t);
    }
    for (int k = 0; k <= 5; k++) {
        double y = ty(a, a->rate_top * k / 5.0, a->rate_top);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#eee\"/>\n",
                a->b.l, y, a->b.r, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.2f\" text-anchor=\"end\" fill=\"#1f77b4\">%g</text>\n",
                a->b.l - 6, y + 4, a->rate_top * k / 5.0);
        if (with_flight)
            fprintf(f, "<text x=\"%.1f\" y=\"%.2f\" fill=\"#555\">%g</text>\n", a->b.r + 6, y + 4,
                    a->flight_top * k / 5.0);
    }
    fprintf(f,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">seconds since the first measured "
            "request (bins of %g s)</text>\n",
            (a->b.l + a->b.r) / 2, a->b.b + 34, a->bin);
    fprintf(f,
            "<text transform=\"translate(%.1f,%.1f) rotate(-90)\" text-anchor=\"middle\" "
            "fill=\"#1f77b4\">output tokens/s</text>\n",
            a->b.l - 50, (a->b.t + a->b.b) / 2);
    if (with_flight)
        fprintf(f,
                "<text transform=\"translate(%.1f,%.1f) rotate(90)\" text-anchor=\"middle\" "
                "fill=\"#555\">requests in flight</text>\n",
                a->b.r + 40, (a->b.t + a->b.b) / 2);
}

/* One horizontal step per bin: v[k] / (bin width when per_s) against top. */
static void steps(FILE *f, const time_axis *a, const double *v, int per_s, double top)
{
    for (size_t k = 0; k < a->nb; k++) {
        double w = per_s ? bin_end(a, k) - bin_start(a, k) : 1.0;
        double y = ty(a, v[k] / w, top);
        fprintf(f, "%s%.2f,%.2f %.2f,%.2f", k ? " " : "", tx(a, bin_start(a, k)), y,
                tx(a, bin_end(a, k)), y);
    }
}

static void series(FILE *f, const time_axis *a, int with_flight)
{
    if (with_flight) {
        fprintf(f,
                "<polyline class=\"time\" data-series=\"in_flight\" fill=\"none\" stroke=\"#777\" "
                "stroke-width=\"1.5\" stroke-dasharray=\"5,3\" points=\"");
        steps(f, a, a->flight, 0, a->flight_top);
        fprintf(f, "\"/>\n");
    }
    fprintf(f,
            "<polyline class=\"time\" data-series=\"tokens_per_s\" data-bin-s=\"%g\" "
            "data-counts=\"",
            a->bin);
    for (size_t k = 0; k < a->nb; k++)
        fprintf(f, "%s%.0f", k ? " " : "", a->count[k]);
    fprintf(f, "\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"");
    steps(f, a, a->count, 1, a->rate_top);
    fprintf(f, "\"/>\n");
}

int cl_svg_time_panel(FILE *f, cl_svg_box b, const cl_run_picture *p, char *err)
{
    time_axis a = {.b = b, .span = p->span_s > 0 ? p->span_s : 1.0};
    a.bin = a.span > 600  ? cl_svg_nice_ceil(a.span / 600)
            : a.span < 10 ? cl_svg_nice_ceil(a.span / 20)
                          : 1.0;
    a.nb = (size_t)floor(a.span / a.bin + 0.5);
    a.nb = a.nb ? a.nb : 1;
    a.count = calloc(a.nb, sizeof *a.count);
    a.flight = calloc(a.nb, sizeof *a.flight);
    if (!a.count || !a.flight) {
        free(a.count);
        free(a.flight);
        snprintf(err, CL_ERR_LEN, "out of memory binning %zu tokens", p->n_tokens);
        return -1;
    }
    fill_bins(&a, p);
    int with_flight = p->n_requests > 0;
    fprintf(f,
            "<g id=\"time\" data-span-s=\"%.9g\" data-left=\"%g\" data-right=\"%g\" "
            "data-top=\"%g\" data-bottom=\"%g\">\n",
            a.span, b.l, b.r, b.t, b.b);
    grid(f, &a, with_flight);
    fprintf(f,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#333\"/>\n",
            b.l, b.t, b.r - b.l, b.b - b.t);
    series(f, &a, with_flight);
    fprintf(f, "</g>\n");
    free(a.count);
    free(a.flight);
    return 0;
}
