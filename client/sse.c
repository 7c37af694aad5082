/*
 * sse.c — incremental Server-Sent Events parsing (the WHATWG event-stream
 * format). The network hands over bytes in arbitrary pieces, so the parser
 * keeps the unfinished line and the event's data between calls and never
 * assumes that a read ends on a line or event boundary.
 */
#include "client_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_LINE ((size_t)16 << 20)

void cl_sse_init(cl_sse *p) { memset(p, 0, sizeof *p); }

void cl_sse_free(cl_sse *p)
{
    free(p->line);
    free(p->data);
    memset(p, 0, sizeof *p);
}

static int grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need)
        c *= 2;
    char *nb = realloc(*buf, c);
    if (!nb)
        return -1;
    *buf = nb;
    *cap = c;
    return 0;
}

/* One complete line (without its terminator). */
static int process_line(cl_sse *p, cl_sse_event_fn on_event, void *ctx, char *err)
{
    const char *l = p->line;
    size_t n = p->line_len;
    if (n == 0) { /* blank line: dispatch */
        if (!p->has_data)
            return 0;
        p->has_data = 0;
        size_t len = p->data_len;
        p->data_len = 0;
        p->data[len] = '\0';
        if (on_event(ctx, p->data, len)) {
            snprintf(err, CL_ERR_LEN, "event handler refused an event");
            return -1;
        }
        return 0;
    }
    if (l[0] == ':')
        return 0; /* comment (keep-alive) */
    size_t colon = 0;
    while (colon < n && l[colon] != ':')
        colon++;
    if (colon != 4 || memcmp(l, "data", 4) != 0)
        return 0; /* event:, id:, retry: and unknown fields do not matter here */
    size_t v = colon < n ? colon + 1 : n; /* "data" alone: an empty value */
    if (v < n && l[v] == ' ')
        v++;
    size_t vlen = n - v;
    /* data lines after the first are joined with '\n'; +1 leaves room for the NUL */
    size_t need = p->data_len + (p->has_data ? 1 : 0) + vlen + 1;
    if (grow(&p->data, &p->data_cap, need)) {
        snprintf(err, CL_ERR_LEN, "out of memory holding a %zu-byte event", need);
        return -1;
    }
    if (p->has_data)
        p->data[p->data_len++] = '\n';
    memcpy(p->data + p->data_len, l + v, vlen);
    p->data_len += vlen;
    p->has_data = 1;
    return 0;
}

int cl_sse_feed(cl_sse *p, const char *bytes, size_t n, cl_sse_event_fn on_event, void *ctx,
                char *err)
{
    size_t max_line = p->max_line ? p->max_line : DEFAULT_MAX_LINE;
    for (size_t i = 0; i < n; i++) {
        char c = bytes[i];
        if (p->after_cr) {
            p->after_cr = 0;
            if (c == '\n')
                continue; /* the \n of a \r\n split or not across reads */
        }
        if (c == '\n' || c == '\r') {
            p->after_cr = c == '\r';
            if (process_line(p, on_event, ctx, err))
                return -1;
            p->line_len = 0;
            continue;
        }
        if (p->line_len + 1 > max_line) {
            snprintf(err, CL_ERR_LEN, "event-stream line longer than %zu bytes", max_line);
            return -1;
        }
        if (grow(&p->line, &p->line_cap, p->line_len + 1)) {
            snprintf(err, CL_ERR_LEN, "out of memory holding a %zu-byte line", p->line_len + 1);
            return -1;
        }
        p->line[p->line_len++] = c;
    }
    return 0;
}
