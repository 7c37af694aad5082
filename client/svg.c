/*
 * svg.c — the sweep chart: output tokens/s (left axis) and p99 latencies
 * (right axis, ms) against the level. Levels are placed evenly, in the order
 * given, because sweeps are usually geometric (1, 2, 4, ...). The file's frame
 * and the legend's entries are svg_util.c's.
 */
#include "client_internal.h"

#include <math.h>

enum { W = 760, H = 440, ML = 80, MR = 90, MT = 56, MB = 64 };

static double px(size_t i, size_t n)
{
    double w = W - ML - MR;
    return n <= 1 ? ML + w / 2 : ML + w * (double)i / (double)(n - 1);
}

static double py(double v, double top) { return MT + (H - MT - MB) * (1.0 - v / top); }

static void series(FILE *f, const cl_level_result *r, size_t n, size_t offset, double top,
                   const char *color, const char *dash)
{
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s%s%s points=\"", color,
            dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%.1f,%.1f", i ? " " : "", px(i, n),
                py(*(const double *)((const char *)&r[i] + offset), top));
    fprintf(f, "\"/>\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", px(i, n),
                py(*(const double *)((const char *)&r[i] + offset), top), color);
}

/* The title, the grid with both axes' labels, the frame and the x labels. */
static void frame(FILE *f, const cl_bench_options *o, const cl_level_result *r, size_t n,
                  double tmax, double lmax)
{
    fprintf(f,
            "<text x=\"%d\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">mhla-bench "
            "sweep: output throughput and p99 latency vs %s</text>\n",
            W / 2, o->open_loop ? "request rate" : "concurrency");
    for (int k = 0; k <= 5; k++) {
        double y = py(tmax * k / 5.0, tmax);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", ML, y,
                W - MR, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" fill=\"#1f77b4\">%g</text>\n",
                ML - 6, y + 4, tmax * k / 5.0);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" fill=\"#d62728\">%g</text>\n", W - MR + 6, y + 4,
                lmax * k / 5.0);
    }
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
            "stroke=\"#333\"/>\n",
            ML, MT, W - ML - MR, H - MT - MB);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", px(i, n),
                H - MB + 18, r[i].level);
}

/* The three axes' titles and the legend of the three series. */
static void titles_and_legend(FILE *f, const cl_bench_options *o)
{
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", (ML + W - MR) / 2,
            H - MB + 40,
            o->open_loop ? "request rate (req/s)" : "concurrency (requests in flight)");
    fprintf(f,
            "<text transform=\"translate(20,%d) rotate(-90)\" text-anchor=\"middle\" "
            "fill=\"#1f77b4\">output tokens/s</text>\n",
            (MT + H - MB) / 2);
    fprintf(f,
            "<text transform=\"translate(%d,%d) rotate(90)\" text-anchor=\"middle\" "
            "fill=\"#d62728\">p99 latency (ms)</text>\n",
            W - 20, (MT + H - MB) / 2);
    const char *names[3] = {"output tokens/s", "p99 end-to-end (ms)",
                            "p99 time to first token (ms)"};
    const char *colors[3] = {"#1f77b4", "#d62728", "#ff7f0e"};
    for (int k = 0; k < 3; k++)
        cl_svg_legend_entry(f, ML + 10 + k * 200, H - 4, colors[k], k == 2 ? "6,4" : NULL,
                            names[k]);
}

int cl_write_svg(const char *path, const cl_bench_options *o, const cl_level_result *r, size_t n,
                 char *err)
{
    if (n == 0) {
        snprintf(err, CL_ERR_LEN, "no levels to chart in %s", path);
        return -1;
    }
    double tmax = 0, lmax = 0;
    for (size_t i = 0; i < n; i++) {
        tmax = fmax(tmax, r[i].out_tok_per_s);
        lmax = fmax(lmax, fmax(r[i].e2e.p99, r[i].ttft.p99));
    }
    tmax = cl_svg_nice_ceil(tmax);
    lmax = cl_svg_nice_ceil(lmax);
    FILE *f = cl_svg_open(path, W, H, err);
    if (!f)
        return -1;
    frame(f, o, r, n, tmax, lmax);
    titles_and_legend(f, o);
    series(f, r, n, offsetof(cl_level_result, out_tok_per_s), tmax, "#1f77b4", NULL);
    series(f, r, n, offsetof(cl_level_result, e2e) + offsetof(cl_summary, p99), lmax, "#d62728",
           NULL);
    series(f, r, n, offsetof(cl_level_result, ttft) + offsetof(cl_summary, p99), lmax, "#ff7f0e",
           "6,4");
    return cl_svg_close(f, path, err);
}
