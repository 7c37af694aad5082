/*
 * svg_run.c — the picture of one run (--svg with a single level): the latency
 * CDFs above, output tokens/s and requests in flight over time below, each
 * with its legend. The percentiles marked are computed as the text report's
 * (cl_percentile), so the picture and the table agree.
 */
#include "client_internal.h"

#include <stdlib.h>
#include <string.h>

enum { W = 760, H = 790, ML = 80, MR = 690 };

/* c->sorted: a sorted copy of v (malloc'd; NULL when n is 0) with its p50 and p99. */
static int sorted_curve(cl_cdf_curve *c, const double *v, size_t n, char *err)
{
    c->n = n;
    double *s;
    if (cl_sorted_copy(v, n, &s, err))
        return -1;
    c->sorted = s;
    if (n == 0)
        return 0;
    return cl_percentile(s, n, 50, &c->p50, err) || cl_percentile(s, n, 99, &c->p99, err) ? -1 : 0;
}

static void heading(FILE *f, const cl_run_picture *p)
{
    fprintf(f, "<text x=\"%d\" y=\"26\" text-anchor=\"middle\" font-size=\"15\">", W / 2);
    cl_svg_escaped(f, p->title ? p->title : "mhla-bench run");
    fprintf(f, "</text>\n<text x=\"%d\" y=\"46\" text-anchor=\"middle\" fill=\"#555\">", W / 2);
    cl_svg_escaped(f, p->subtitle ? p->subtitle : "");
    fprintf(f, "</text>\n");
}

static void cdf_legend(FILE *f, const cl_cdf_curve *c, size_t n, double y)
{
    for (size_t i = 0; i < n; i++, y += 18) {
        char label[160];
        if (c[i].n)
            snprintf(label, sizeof label, "%s: p50 %.2f ms, p99 %.2f ms (%zu samples)", c[i].name,
                     c[i].p50, c[i].p99, c[i].n);
        else
            snprintf(label, sizeof label, "%s: no samples", c[i].name);
        cl_svg_legend_entry(f, ML + 10, y, c[i].color, c[i].dash, label);
    }
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" fill=\"#555\">filled dot: p50, open dot: p99</text>\n",
            ML + 440, y - 18);
}

static int draw(FILE *f, const cl_run_picture *p, const cl_cdf_curve *c, size_t n, char *err)
{
    heading(f, p);
    cl_svg_cdf_panel(f, (cl_svg_box){ML, MR, 66, 356}, c, n);
    cdf_legend(f, c, n, 414);
    if (cl_svg_time_panel(f, (cl_svg_box){ML, MR, 494, 704}, p, err))
        return -1;
    cl_svg_legend_entry(f, ML + 10, 770, "#1f77b4", NULL, "output tokens/s");
    if (p->n_requests)
        cl_svg_legend_entry(f, ML + 200, 770, "#777", "5,3", "requests in flight (mean per bin)");
    return 0;
}

static int check_input(const char *path, const cl_run_picture *p, char *err)
{
    int ok = path && p && (p->ttft_ms || !p->n_ttft) && (p->itl_ms || !p->n_itl) &&
             (p->e2e_ms || !p->n_e2e) && (p->token_t || !p->n_tokens) &&
             ((p->req_start && p->req_end) || !p->n_requests) && p->span_s >= 0;
    if (!ok)
        snprintf(err, CL_ERR_LEN, "run picture %s: a count without its samples, or a negative span",
                 path ? path : "(no path)");
    return ok ? 0 : -1;
}

int cl_write_run_svg(const char *path, const cl_run_picture *p, char *err)
{
    if (check_input(path, p, err))
        return -1;
    cl_cdf_curve c[3] = {
        {.key = "ttft", .name = "time to first token", .color = "#ff7f0e"},
        {.key = "itl", .name = "inter-token latency", .color = "#2ca02c", .dash = "6,3"},
        {.key = "e2e", .name = "end-to-end", .color = "#d62728"},
    };
    int rc = sorted_curve(&c[0], p->ttft_ms, p->n_ttft, err) ||
             sorted_curve(&c[1], p->itl_ms, p->n_itl, err) ||
             sorted_curve(&c[2], p->e2e_ms, p->n_e2e, err);
    FILE *f = rc ? NULL : cl_svg_open(path, W, H, err);
    if (f) {
        char close_err[CL_ERR_LEN];
        rc = draw(f, p, c, 3, err);
        if (cl_svg_close(f, path, close_err) && rc == 0) {
            snprintf(err, CL_ERR_LEN, "%s", close_err);
            rc = -1;
        }
    } else {
        rc = -1;
    }
    for (int i = 0; i < 3; i++)
        free((double *)c[i].sorted);
    return rc;
}
