/*
 * svg_util.c — what the charts share: round axis limits and steps, the file's
 * opening (white background, one font, no scripts or external resources, so
 * it renders on GitHub and in any browser) and closing, escaped text.
 */
#include "client_internal.h"

#include <errno.h>
#include <math.h>
#include <string.h>

double cl_svg_nice_ceil(double x)
{
    if (!(x > 0))
        return 1.0;
    double p = pow(10.0, floor(log10(x)));
    for (double m = 1.0;; m = m == 1.0 ? 2.0 : m == 2.0 ? 5.0 : 10.0)
        if (m * p >= x * (1.0 - 1e-12))
            return m * p;
}

double cl_svg_nice_step(double span, int max_ticks)
{
    if (!(span > 0) || max_ticks < 1)
        return 1.0;
    return cl_svg_nice_ceil(span / max_ticks);
}

FILE *cl_svg_open(const char *path, int w, int h, char *err)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, CL_ERR_LEN, "cannot write %s: %s", path, strerror(errno));
        return NULL;
    }
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
            w, h, w, h);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", w, h);
    return f;
}

int cl_svg_close(FILE *f, const char *path, char *err)
{
    fprintf(f, "</svg>\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        snprintf(err, CL_ERR_LEN, "error writing %s", path);
        return -1;
    }
    return 0;
}

void cl_svg_escaped(FILE *f, const char *s)
{
    for (; s && *s; s++)
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
}

void cl_svg_legend_entry(FILE *f, double x, double y, const char *color, const char *dash,
                         const char *label)
{
    fprintf(f,
            "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
            "stroke-width=\"2\"%s%s%s/>\n",
            x, y - 4, x + 24, y - 4, color, dash ? " stroke-dasharray=\"" : "", dash ? dash : "",
            dash ? "\"" : "");
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", x + 30, y);
    cl_svg_escaped(f, label);
    fprintf(f, "</text>\n");
}
