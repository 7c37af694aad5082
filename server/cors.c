/*
 * cors.c — cross-origin requests from browsers (--allowed-origins): which
 * origins may call the API, the headers that let a page read the answers, and
 * the headers of the answer to a preflight. Without --allowed-origins nothing
 * here adds a header, so a browser page of another origin cannot read answers.
 */
#include "server_internal.h"

#include <microhttpd.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The headers a page reads besides the CORS-safelisted ones: how long to wait
 * before retrying (429, 503) and the request's id for a bug report. */
#define EXPOSE_HEADERS "Retry-After, X-Request-Id, WWW-Authenticate"
/* CORS-safelisted methods (GET, HEAD, POST) need no listing; OPTIONS is named
 * for clients that check it. */
#define ALLOW_METHODS "GET, POST, OPTIONS"
/* What every request of the API may carry: the key and a JSON body. */
#define ALLOW_HEADERS "Authorization, Content-Type"
/* Seconds a browser may reuse a preflight's answer; short, so that a changed
 * --allowed-origins takes effect soon (browsers cap it at 2 h anyway). */
#define MAX_AGE "600"
/* Longest Access-Control-Request-Headers echoed back. */
#define MAX_REQUESTED 512

static int is_any(const char *list) { return list && strcmp(list, "*") == 0; }

/* The next comma-separated entry of *p, spaces trimmed: its start and length;
 * *p becomes NULL after the last (so "a," has an empty last entry). */
static const char *next_entry(const char **p, size_t *len)
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t')
        s++;
    const char *end = strchr(s, ',');
    const char *stop = end ? end : s + strlen(s);
    *p = end ? end + 1 : NULL;
    while (stop > s && (stop[-1] == ' ' || stop[-1] == '\t'))
        stop--;
    *len = (size_t)(stop - s);
    return s;
}

/* An origin as browsers send it: scheme "://" host [":" port], nothing after
 * (no path, no trailing slash), no spaces. */
static int origin_ok(const char *s, size_t len)
{
    const char *sep = len > 3 ? strstr(s, "://") : NULL;
    if (!sep || sep == s || (size_t)(sep - s) + 3 >= len)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] <= ' ' || s[i] == '*' || (s + i > sep + 2 && s[i] == '/'))
            return 0;
    return 1;
}

int srv_cors_check(const char *list, char *err, size_t errlen)
{
    if (!list || is_any(list))
        return 0;
    const char *p = list;
    while (p) {
        size_t len;
        const char *s = next_entry(&p, &len);
        if (!origin_ok(s, len)) {
            snprintf(err, errlen,
                     "--allowed-origins: '%.*s' is not an origin (scheme://host[:port], "
                     "no path or trailing slash); give a comma-separated list of them, or *",
                     (int)(len > 200 ? 200 : len), s);
            return -1;
        }
    }
    return 0;
}

const char *srv_cors_allow(const char *list, const char *origin)
{
    if (!list || !origin || !origin[0])
        return NULL;
    if (is_any(list))
        return "*";
    /* Origins are compared without case: scheme and host are case-insensitive,
     * and the header sent back is the request's own spelling. */
    const char *p = list;
    size_t olen = strlen(origin);
    while (p) {
        size_t len;
        const char *s = next_entry(&p, &len);
        if (len == olen && strncasecmp(s, origin, len) == 0)
            return origin;
    }
    return NULL;
}

void srv_cors_headers(struct MHD_Response *resp, const char *list, const char *allow)
{
    /* With a list the answer differs by Origin (one origin gets the header,
     * another not): caches must keep them apart. */
    if (list && !is_any(list))
        MHD_add_response_header(resp, "Vary", "Origin");
    if (!allow)
        return;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", allow);
    MHD_add_response_header(resp, "Access-Control-Expose-Headers", EXPOSE_HEADERS);
}

/* A header-name list as browsers send it: tokens, commas and spaces only. */
static int simple_list(const char *s)
{
    size_t n = strlen(s);
    if (n > MAX_REQUESTED)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] == '-' || s[i] == '_' || s[i] == ',' || s[i] == ' ' ||
              (s[i] >= '0' && s[i] <= '9') || ((s[i] | 0x20) >= 'a' && (s[i] | 0x20) <= 'z')))
            return 0;
    return 1;
}

/* ALLOW_HEADERS and the names of requested not among them, into out. */
static void allow_headers(const char *requested, char *out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap, "%s", ALLOW_HEADERS);
    /* The headers a page asked for are allowed too (an SDK's own X-Stainless-*,
     * say): the API ignores them, and refusing them would fail the request. */
    if (!requested || !simple_list(requested))
        return;
    for (const char *p = requested; p;) {
        size_t len;
        const char *s = next_entry(&p, &len);
        int dup = (len == 13 && strncasecmp(s, "Authorization", len) == 0) ||
                  (len == 12 && strncasecmp(s, "Content-Type", len) == 0);
        if (len && !dup && n + len + 2 < cap)
            n += (size_t)snprintf(out + n, cap - n, ", %.*s", (int)len, s);
    }
}

void srv_cors_preflight_headers(struct MHD_Response *resp, const char *requested)
{
    MHD_add_response_header(resp, "Access-Control-Allow-Methods", ALLOW_METHODS);
    char hdrs[sizeof ALLOW_HEADERS + MAX_REQUESTED + 2];
    allow_headers(requested, hdrs, sizeof hdrs);
    MHD_add_response_header(resp, "Access-Control-Allow-Headers", hdrs);
    MHD_add_response_header(resp, "Access-Control-Max-Age", MAX_AGE);
}
