/*
 * webui.c — the playground (GET / and the files under /webui): a page, its script, style
 * and icon, compiled in from server/webui/ by cmake/embed_file.cmake, so the
 * program needs no file, CDN or network to serve them. The paths are fixed,
 * not named by content, so answers carry an ETag and "no-cache": a browser
 * asks again each time and gets a 304 while the build is the same.
 */
#include "server_internal.h"

#include <microhttpd.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern const char srv_webui_index_html[], srv_webui_app_js[], srv_webui_style_css[],
    srv_webui_icon_svg[];

typedef struct {
    const char *path, *type, *body;
} webui_asset;

static const webui_asset ASSETS[] = {
    {"/", "text/html; charset=utf-8", srv_webui_index_html},
    {"/webui/app.js", "text/javascript; charset=utf-8", srv_webui_app_js},
    {"/webui/style.css", "text/css; charset=utf-8", srv_webui_style_css},
    {"/webui/icon.svg", "image/svg+xml", srv_webui_icon_svg},
};

/* The page and what it loads come from this server only; it calls only this
 * server's API; no inline script or style (an injected one would not run),
 * no frames around it, no forms posting elsewhere. */
#define CSP                                                                                        \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "                    \
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static const webui_asset *find(const char *path)
{
    for (size_t i = 0; i < sizeof ASSETS / sizeof ASSETS[0]; i++)
        if (strcmp(ASSETS[i].path, path) == 0)
            return &ASSETS[i];
    return NULL;
}

int srv_webui_is_asset(const char *path) { return find(path) != NULL; }

/* A strong validator from the bytes themselves (FNV-1a, 64 bits): the same
 * build always gives the same tag, a changed file another. */
static void etag_of(const char *body, char *out, size_t outlen)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)body; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    snprintf(out, outlen, "\"%016llx\"", (unsigned long long)h);
}

struct MHD_Response *srv_webui_response(const char *path, const char *if_none_match, int *status)
{
    const webui_asset *a = find(path);
    if (!a)
        return NULL;
    char etag[24];
    etag_of(a->body, etag, sizeof etag);
    int fresh = if_none_match && strstr(if_none_match, etag) != NULL;
    /* the bodies are static: libmicrohttpd sends them without a copy */
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(fresh ? 0 : strlen(a->body), (void *)a->body,
                                        MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return NULL;
    if (!fresh)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, a->type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "Content-Security-Policy", CSP);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    *status = fresh ? 304 : 200;
    return resp;
}
