/*
 * http.c — the HTTP layer (libmicrohttpd, one thread per connection):
 * routing, body limits, API-key check, JSON/SSE responses and one JSON log
 * line per request.
 */
#include "server_internal.h"

#include <cJSON.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

struct srv_http {
    srv_http_options c;
    struct MHD_Daemon *d;
    srv_limits lim;
    srv_watch *watch;     /* the read deadline of every connection */
    atomic_int in_flight; /* completions whose response is not sent yet */
};

typedef struct {
    int started;
    mhla_buf body;
    int too_large;
    double t0;
    char method[16];
    char path[160];
    int status;
    int stream;
    srv_req *r; /* a reference, for the log line */
    struct MHD_Connection *conn;
    srv_watch_conn *watch;                   /* the connection's read deadline */
    int close;                               /* answer with Connection: close */
    char request_id[SRV_REQUEST_ID_MAX + 1]; /* X-Request-Id: the client's, else made here */
    /* --allowed-origins (NULL: CORS off) and this request's
     * Access-Control-Allow-Origin (NULL: none) */
    const char *cors_list, *cors_allow;
} conn_ctx;

/* ---- responses ------------------------------------------------------------- */

static enum MHD_Result send_body(struct MHD_Connection *conn, conn_ctx *ctx, int status,
                                 const char *ctype, char *body, const char *hdr, const char *hval)
{
    if (!body) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":"
                                  "\"server_error\",\"param\":null,\"code\":null}}";
        status = 500;
        ctype = "application/json";
        body = strdup(oom);
        if (!body)
            return MHD_NO;
    }
    size_t len = strlen(body);
    /* a newline ends JSON bodies, as curl users expect */
    int add_nl = strcmp(ctype, "application/json") == 0;
    char *b = body;
    if (add_nl) {
        b = realloc(body, len + 2);
        if (!b) {
            free(body);
            return MHD_NO;
        }
        b[len++] = '\n';
        b[len] = 0;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, b, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(b);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(resp, "X-Request-Id", ctx->request_id);
    srv_cors_headers(resp, ctx->cors_list, ctx->cors_allow);
    if (ctx->close)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    if (hdr)
        MHD_add_response_header(resp, hdr, hval);
    ctx->status = status;
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result send_error(struct MHD_Connection *conn, conn_ctx *ctx, const srv_error *e)
{
    int status = srv_error_status(e->code);
    const char *hdr = NULL, *hval = NULL;
    if (status == 429 || status == 503)
        hdr = MHD_HTTP_HEADER_RETRY_AFTER, hval = "1";
    else if (status == 401)
        hdr = MHD_HTTP_HEADER_WWW_AUTHENTICATE, hval = "Bearer";
    return send_body(conn, ctx, status, "application/json", srv_error_json(e), hdr, hval);
}

static enum MHD_Result error_reply(struct MHD_Connection *conn, conn_ctx *ctx, srv_errcode code,
                                   const char *param, const char *msg)
{
    srv_error e;
    srv_error_set(&e, code, param, "%s", msg);
    return send_error(conn, ctx, &e);
}

static enum MHD_Result method_not_allowed(struct MHD_Connection *conn, conn_ctx *ctx,
                                          const char *allow)
{
    srv_error e;
    srv_error_set(&e, SRV_ERR_METHOD, NULL, "Method %s is not allowed on %s (allowed: %s)",
                  ctx->method, ctx->path, allow);
    return send_body(conn, ctx, 405, "application/json", srv_error_json(&e), MHD_HTTP_HEADER_ALLOW,
                     allow);
}

static char *print_json(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

/* ---- client liveness ------------------------------------------------------- */

static int conn_alive(void *arg)
{
    struct MHD_Connection *conn = arg;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return 1;
    char c;
    ssize_t n = recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    /* n == 0 is the peer's FIN: a client that closed, or one that only shut
     * down its sending side and still reads (half-close). The two look the
     * same until something is written; the answer's first write tells (a
     * closed client resets it, which ends the connection and the request). */
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return 0; /* reset */
    return 1;
}

/* ---- endpoints ------------------------------------------------------------- */

static enum MHD_Result handle_models(srv_http *h, struct MHD_Connection *conn, conn_ctx *ctx,
                                     const char *one)
{
    cJSON *m = cJSON_CreateObject();
    if (m) {
        cJSON_AddStringToObject(m, "id", h->c.model_name);
        cJSON_AddStringToObject(m, "object", "model");
        cJSON_AddNumberToObject(m, "created", 0);
        cJSON_AddStringToObject(m, "owned_by", "mhla-serve");
        cJSON_AddNumberToObject(m, "max_model_len", h->c.cfg->max_positions);
        cJSON_AddNumberToObject(m, "vocab_size", h->c.cfg->vocab_size);
        if (h->c.chat) /* where chat requests' template comes from */
            cJSON_AddStringToObject(m, "chat_template", h->c.chat->source);
        if (h->c.render)
            cJSON_AddStringToObject(m, "tool_call_format",
                                    srv_tool_format_name(h->c.render->tool_format));
    }
    if (one) {
        if (strcmp(one, h->c.model_name) != 0) {
            cJSON_Delete(m);
            return error_reply(conn, ctx, SRV_ERR_MODEL_NOT_FOUND, "model",
                               "The model does not exist on this server");
        }
        return send_body(conn, ctx, 200, "application/json", print_json(m), NULL, NULL);
    }
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddStringToObject(o, "object", "list");
        cJSON *arr = cJSON_AddArrayToObject(o, "data");
        if (arr && m)
            cJSON_AddItemToArray(arr, m);
        else
            cJSON_Delete(m);
    } else {
        cJSON_Delete(m);
    }
    return send_body(conn, ctx, 200, "application/json", print_json(o), NULL, NULL);
}

static enum MHD_Result handle_health(srv_http *h, struct MHD_Connection *conn, conn_ctx *ctx)
{
    int draining = srv_sched_draining(h->c.sched);
    cJSON *o = cJSON_CreateObject();
    if (o)
        cJSON_AddStringToObject(o, "status", draining ? "draining" : "ok");
    return send_body(conn, ctx, draining ? 503 : 200, "application/json", print_json(o),
                     draining ? MHD_HTTP_HEADER_RETRY_AFTER : NULL, draining ? "1" : NULL);
}

static enum MHD_Result handle_metrics(struct MHD_Connection *conn, conn_ctx *ctx)
{
    return send_body(conn, ctx, 200, "text/plain; version=0.0.4; charset=utf-8",
                     srv_metrics_render(), NULL, NULL);
}

/* GET /version: which build answers, for operators and deploy checks. */
static enum MHD_Result handle_version(struct MHD_Connection *conn, conn_ctx *ctx)
{
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON_AddStringToObject(o, "version", mhla_version());
        cJSON_AddStringToObject(o, "commit", mhla_commit());
        cJSON_AddStringToObject(o, "build_type", mhla_build_type());
    }
    return send_body(conn, ctx, 200, "application/json", print_json(o), NULL, NULL);
}

static cJSON *parse_body(struct MHD_Connection *conn, conn_ctx *ctx, enum MHD_Result *rc)
{
    srv_error e;
    cJSON *root = srv_json_parse_body(ctx->body.p ? ctx->body.p : "", ctx->body.len, &e);
    if (root && cJSON_IsObject(root))
        return root;
    if (root) /* valid JSON of another kind */
        srv_error_set(&e, SRV_ERR_INVALID, NULL, "the request body must be a JSON object");
    cJSON_Delete(root);
    *rc = send_error(conn, ctx, &e);
    return NULL;
}

/* POST /apply-template: {"messages": [...], "tools"?, "add_generation_prompt"?,
 * "chat_template_kwargs"?} -> {"prompt": the text a chat request would encode}. */
static enum MHD_Result handle_apply_template(srv_http *h, struct MHD_Connection *conn,
                                             conn_ctx *ctx)
{
    enum MHD_Result rc = MHD_NO;
    cJSON *root = parse_body(conn, ctx, &rc);
    if (!root)
        return rc;
    srv_error e;
    char *text = NULL;
    size_t len = 0;
    int bad = !h->c.render
                  ? (srv_error_set(&e, SRV_ERR_NOT_FOUND, NULL, "no chat template is loaded"), 1)
                  : srv_chat_apply_template(h->c.render, root, &text, &len, &e) != 0;
    cJSON_Delete(root);
    if (bad)
        return send_error(conn, ctx, &e);
    cJSON *o = cJSON_CreateObject();
    if (o && !cJSON_AddStringToObject(o, "prompt", text)) {
        cJSON_Delete(o);
        o = NULL;
    }
    free(text);
    return send_body(conn, ctx, 200, "application/json", print_json(o), NULL, NULL);
}

static enum MHD_Result handle_tokenize(srv_http *h, struct MHD_Connection *conn, conn_ctx *ctx)
{
    enum MHD_Result rc = MHD_NO;
    cJSON *root = parse_body(conn, ctx, &rc);
    if (!root)
        return rc;
    cJSON *pr = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (!cJSON_IsString(pr)) {
        cJSON_Delete(root);
        return error_reply(conn, ctx, SRV_ERR_INVALID, "prompt", "'prompt' must be a string");
    }
    /* add_special_tokens (default true) as the completions endpoint encodes prompts */
    cJSON *as = cJSON_GetObjectItemCaseSensitive(root, "add_special_tokens");
    if (as && !cJSON_IsNull(as) && !cJSON_IsBool(as)) {
        cJSON_Delete(root);
        return error_reply(conn, ctx, SRV_ERR_INVALID, "add_special_tokens",
                           "'add_special_tokens' must be a boolean");
    }
    int add_special = !as || !cJSON_IsFalse(as);
    int32_t *ids = NULL;
    int n = 0;
    char msg[256];
    int enc = srv_codec_encode(h->c.codec, pr->valuestring, strlen(pr->valuestring), add_special,
                               &ids, &n, msg, sizeof msg);
    if (enc) { /* -1: the text is refused; -2: the server failed */
        cJSON_Delete(root);
        return error_reply(conn, ctx, enc == -1 ? SRV_ERR_INVALID : SRV_ERR_INTERNAL,
                           enc == -1 ? "prompt" : NULL, msg);
    }
    cJSON_Delete(root);
    cJSON *o = cJSON_CreateObject();
    if (o) {
        cJSON *arr = cJSON_AddArrayToObject(o, "tokens");
        for (int i = 0; arr && i < n; i++)
            cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
        cJSON_AddNumberToObject(o, "count", n);
        cJSON_AddNumberToObject(o, "max_model_len", h->c.cfg->max_positions);
    }
    free(ids);
    return send_body(conn, ctx, 200, "application/json", print_json(o), NULL, NULL);
}

static enum MHD_Result handle_detokenize(srv_http *h, struct MHD_Connection *conn, conn_ctx *ctx)
{
    enum MHD_Result rc = MHD_NO;
    cJSON *root = parse_body(conn, ctx, &rc);
    if (!root)
        return rc;
    cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    int n = cJSON_IsArray(t) ? cJSON_GetArraySize(t) : -1;
    int32_t *ids = n >= 0 ? malloc((size_t)(n ? n : 1) * sizeof *ids) : NULL;
    int k = 0;
    const cJSON *it;
    if (ids)
        cJSON_ArrayForEach(it, t)
        {
            if (!cJSON_IsNumber(it) || it->valuedouble != (double)(int32_t)it->valuedouble ||
                it->valuedouble < 0 || it->valuedouble >= h->c.cfg->vocab_size)
                break;
            ids[k++] = (int32_t)it->valuedouble;
        }
    cJSON_Delete(root);
    if (!ids || k != n) {
        free(ids);
        char msg[160];
        snprintf(msg, sizeof msg, "'tokens' must be an array of token ids in [0, %d)",
                 h->c.cfg->vocab_size);
        return error_reply(conn, ctx, SRV_ERR_INVALID, "tokens", msg);
    }
    char *text = NULL, msg[256];
    size_t len = 0;
    if (srv_codec_decode(h->c.codec, ids, n, 0, &text, &len, msg, sizeof msg)) {
        free(ids);
        return error_reply(conn, ctx, SRV_ERR_INVALID, "tokens", msg);
    }
    free(ids);
    cJSON *o = cJSON_CreateObject();
    if (o)
        cJSON_AddStringToObject(o, "prompt", text);
    free(text);
    return send_body(conn, ctx, 200, "application/json", print_json(o), NULL, NULL);
}

/* A stream's body: the SSE writer and the connection's deadlines. */
typedef struct {
    srv_sse *sse;
    srv_watch *watch;
    srv_watch_conn *wc;
} stream_body;

/* libmicrohttpd asks for more of a stream once it sent what it had: no
 * deadline while the writer waits for tokens, the write deadline from the
 * moment it hands the next events out. */
static ssize_t sse_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream_body *b = cls;
    srv_watch_phase(b->watch, b->wc, SRV_WATCH_IN_APP);
    long n = srv_sse_read(b->sse, buf, max);
    srv_watch_phase(b->watch, b->wc, SRV_WATCH_WRITING);
    return n < 0 ? (ssize_t)MHD_CONTENT_READER_END_OF_STREAM : (ssize_t)n;
}

static void sse_free(void *cls)
{
    stream_body *b = cls;
    srv_sse_free(b->sse);
    free(b);
}

/* The answer for a request the scheduler did not take. */
static enum MHD_Result refused(struct MHD_Connection *conn, conn_ctx *ctx, int sub)
{
    if (sub == SRV_SUBMIT_FULL)
        return error_reply(conn, ctx, SRV_ERR_QUEUE_FULL, NULL,
                           "the server's request queue is full; retry later");
    if (sub == SRV_SUBMIT_TOO_BIG)
        return error_reply(conn, ctx, SRV_ERR_FULL, NULL,
                           "the server's state memory (--state-memory) cannot hold this "
                           "request's prompt + max_tokens for every choice; reduce them");
    return error_reply(conn, ctx, SRV_ERR_DRAINING, NULL,
                       "the server is shutting down; retry on another replica");
}

/* A streaming answer: the SSE writer reads r as the engine thread fills it. */
static enum MHD_Result stream_reply(srv_http *h, struct MHD_Connection *conn, conn_ctx *ctx,
                                    srv_req *r)
{
    srv_req_retain(r); /* the stream's own */
    stream_body *b = calloc(1, sizeof *b);
    if (!b || srv_sse_create(r, h->c.model_name, h->c.codec, conn_alive, conn, &b->sse)) {
        free(b);
        srv_req_abandon(r);
        return error_reply(conn, ctx, SRV_ERR_INTERNAL, NULL, "out of memory");
    }
    b->watch = h->watch;
    b->wc = ctx->watch;
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_reader, b, sse_free);
    if (!resp) {
        sse_free(b);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    MHD_add_response_header(resp, "X-Request-Id", ctx->request_id);
    srv_cors_headers(resp, ctx->cors_list, ctx->cors_allow);
    ctx->status = 200;
    enum MHD_Result rc = MHD_queue_response(conn, 200, resp);
    MHD_destroy_response(resp);
    return rc;
}

/* A non-streaming answer: waits here (this connection's own thread). */
static enum MHD_Result wait_reply(srv_http *h, struct MHD_Connection *conn, conn_ctx *ctx,
                                  srv_req *r)
{
    srv_req_lock(r);
    while (!r->done && srv_req_wait(r, 0.2, conn_alive, conn) == 0)
        ;
    int failed = r->failed, done = r->done;
    srv_error e;
    srv_error_set(&e, r->err_code, NULL, "%s", r->err);
    char *body = (failed || !done) ? NULL : srv_completion_json(r, h->c.model_name, h->c.codec);
    srv_req_unlock(r);
    if (!done)
        return error_reply(conn, ctx, SRV_ERR_CLIENT_CLOSED, NULL,
                           "the client closed the connection");
    if (failed)
        return send_error(conn, ctx, &e);
    return send_body(conn, ctx, 200, "application/json", body, NULL, NULL);
}

/* Either endpoint (chat: /v1/chat/completions): the body becomes a request
 * on the scheduler, answered as a stream or in one body. */
static enum MHD_Result handle_completions(srv_http *h, struct MHD_Connection *conn, conn_ctx *ctx,
                                          int chat)
{
    srv_error e;
    if (srv_sched_draining(h->c.sched))
        return refused(conn, ctx, SRV_SUBMIT_DRAINING);
    srv_params p;
    const char *body = ctx->body.p ? ctx->body.p : "";
    if ((chat ? srv_chat_params_parse : srv_params_parse)(body, ctx->body.len, &h->lim, &p, &e))
        return send_error(conn, ctx, &e);
    if (chat)
        srv_metrics_chat_request();
    srv_req *r = NULL;
    if (srv_req_create(&p, h->c.codec, &r, &e))
        return send_error(conn, ctx, &e);
    ctx->r = r; /* the reference the log line uses; released when the request ends */
    atomic_fetch_add(&h->in_flight, 1);
    /* Generation may keep this connection quiet for longer than the idle
     * timeout (queueing, long prefill): libmicrohttpd's timeout is off until
     * the answer is sent (on_completed turns it on again). Meanwhile the
     * liveness checks, the request deadline and conn_watch's write deadline
     * (what the server hands out must be taken within --timeout) look after
     * the connection. */
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned int)0);
    ctx->stream = r->p.stream;
    int sub = srv_sched_submit(h->c.sched, r);
    if (sub != SRV_SUBMIT_OK)
        return refused(conn, ctx, sub);
    return ctx->stream ? stream_reply(h, conn, ctx, r) : wait_reply(h, conn, ctx, r);
}

/* ---- the access handler ---------------------------------------------------- */

static int authorized(srv_http *h, struct MHD_Connection *conn)
{
    const char *key = h->c.opt->api_key;
    if (!key || !key[0])
        return 1;
    const char *auth =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0) /* the scheme is case-insensitive */
        return 0;
    return srv_ct_equal(auth + 7, key);
}

/* Every path the router serves: others are a 404 before anything else.
 * tests/server/test_openapi.py reads these comparisons to check that
 * server/openapi.json describes each path and no other. */
static int known_path(const char *path)
{
    return strcmp(path, "/v1/chat/completions") == 0 || strcmp(path, "/v1/completions") == 0 ||
           strcmp(path, "/v1/models") == 0 || strncmp(path, "/v1/models/", 11) == 0 ||
           strcmp(path, "/tokenize") == 0 || strcmp(path, "/detokenize") == 0 ||
           strcmp(path, "/apply-template") == 0 || strcmp(path, "/health") == 0 ||
           strcmp(path, "/metrics") == 0 || strcmp(path, "/openapi.json") == 0 ||
           strcmp(path, "/version") == 0 || strcmp(path, "/") == 0 ||
           strcmp(path, "/webui/app.js") == 0 || strcmp(path, "/webui/style.css") == 0 ||
           strcmp(path, "/webui/icon.svg") == 0;
}

/* A browser's CORS preflight: OPTIONS with Access-Control-Request-Method,
 * while --allowed-origins is set (without it OPTIONS is a plain 405). */
static int is_preflight(srv_http *h, struct MHD_Connection *conn, conn_ctx *ctx)
{
    return h->c.opt->allowed_origins && strcmp(ctx->method, "OPTIONS") == 0 &&
           MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Access-Control-Request-Method");
}

/* The preflight's answer, before any API key check: a browser sends none on
 * a preflight. An origin not allowed gets a 403 that says so, for whoever
 * reads the network log (the browser only sees that the preflight failed). */
static enum MHD_Result preflight(struct MHD_Connection *conn, conn_ctx *ctx)
{
    if (!ctx->cors_allow)
        return error_reply(conn, ctx, SRV_ERR_ORIGIN, NULL,
                           "this Origin is not in the server's --allowed-origins");
    static char empty[1];
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, empty, MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    srv_cors_headers(resp, ctx->cors_list, ctx->cors_allow);
    srv_cors_preflight_headers(resp, MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                                 "Access-Control-Request-Headers"));
    ctx->status = 204;
    enum MHD_Result rc = MHD_queue_response(conn, 204, resp);
    MHD_destroy_response(resp);
    return rc;
}

/* The document is compiled in: no file to find or read at run time. */
static enum MHD_Result handle_openapi(struct MHD_Connection *conn, conn_ctx *ctx)
{
    char *doc = strdup(srv_openapi_json);
    size_t n = doc ? strlen(doc) : 0;
    while (n && doc[n - 1] == '\n') /* send_body ends JSON with its own newline */
        doc[--n] = 0;
    return send_body(conn, ctx, 200, "application/json", doc, NULL, NULL);
}

/* The playground's page and files: open to all (they hold no secret; the
 * page sends the key the user types with its API calls). */
static enum MHD_Result handle_webui(struct MHD_Connection *conn, conn_ctx *ctx)
{
    int status = 0;
    struct MHD_Response *resp =
        srv_webui_response(ctx->path,
                           MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                       MHD_HTTP_HEADER_IF_NONE_MATCH),
                           &status);
    if (!resp)
        return error_reply(conn, ctx, SRV_ERR_INTERNAL, NULL, "out of memory");
    MHD_add_response_header(resp, "X-Request-Id", ctx->request_id);
    ctx->status = status;
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result route(srv_http *h, struct MHD_Connection *conn, conn_ctx *ctx)
{
    const char *path = ctx->path, *m = ctx->method;
    int get = strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0, post = strcmp(m, "POST") == 0;
    int webui = srv_webui_is_asset(path);
    if (!known_path(path) || (webui && h->c.opt->no_webui)) {
        char msg[256];
        snprintf(msg, sizeof msg, "no such endpoint: %.160s", path);
        return error_reply(conn, ctx, SRV_ERR_NOT_FOUND, NULL, msg);
    }
    if (is_preflight(h, conn, ctx))
        return preflight(conn, ctx);
    if (strcmp(path, "/health") == 0)
        return get ? handle_health(h, conn, ctx) : method_not_allowed(conn, ctx, "GET, HEAD");
    if (strcmp(path, "/metrics") == 0)
        return get ? handle_metrics(conn, ctx) : method_not_allowed(conn, ctx, "GET, HEAD");
    if (strcmp(path, "/openapi.json") == 0)
        return get ? handle_openapi(conn, ctx) : method_not_allowed(conn, ctx, "GET, HEAD");
    if (strcmp(path, "/version") == 0)
        return get ? handle_version(conn, ctx) : method_not_allowed(conn, ctx, "GET, HEAD");
    if (webui)
        return get ? handle_webui(conn, ctx) : method_not_allowed(conn, ctx, "GET, HEAD");
    int chat = strcmp(path, "/v1/chat/completions") == 0;
    if (!authorized(h, conn))
        return error_reply(conn, ctx, SRV_ERR_UNAUTHORIZED, NULL,
                           "missing or incorrect API key (send Authorization: Bearer KEY)");
    if (chat || strcmp(path, "/v1/completions") == 0)
        return post ? handle_completions(h, conn, ctx, chat)
                    : method_not_allowed(conn, ctx, "POST");
    if (strcmp(path, "/v1/models") == 0)
        return get ? handle_models(h, conn, ctx, NULL) : method_not_allowed(conn, ctx, "GET, HEAD");
    if (strncmp(path, "/v1/models/", 11) == 0)
        return get ? handle_models(h, conn, ctx, path + 11)
                   : method_not_allowed(conn, ctx, "GET, HEAD");
    if (strcmp(path, "/tokenize") == 0 || strcmp(path, "/apply-template") == 0)
        return !post            ? method_not_allowed(conn, ctx, "POST")
               : path[1] == 't' ? handle_tokenize(h, conn, ctx)
                                : handle_apply_template(h, conn, ctx);
    return post ? handle_detokenize(h, conn, ctx) : method_not_allowed(conn, ctx, "POST");
}

/* Limits answered here in the OpenAI error shape. libmicrohttpd's memory per
 * connection (CONNECTION_MEMORY) is set well above them, so that it only
 * answers itself (a bare HTML page) for requests far past them. */
#define MAX_URI_BYTES 8192
#define MAX_HEADER_BYTES 32768
#define CONNECTION_MEMORY (128 * 1024)

typedef struct {
    int n_length, chunked;
    size_t bytes; /* of the header fields */
} framing;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    (void)value;
    framing *f = cls;
    f->bytes += strlen(key) + (value ? strlen(value) : 0) + 4;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
        f->n_length++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0)
        f->chunked = 1;
    return MHD_YES;
}

/* RFC 9112 §6.3: a request framed both ways, or with Content-Length given
 * twice, is refused (and its connection closed): a proxy in front that
 * reads the framing differently would let a second request through. */
static const char *bad_framing(struct MHD_Connection *conn, size_t *header_bytes)
{
    framing f = {0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_framing, &f);
    *header_bytes = f.bytes;
    if (f.chunked && f.n_length)
        return "a request must not have both Transfer-Encoding and Content-Length";
    if (f.n_length > 1)
        return "a request must not have more than one Content-Length";
    return NULL;
}

static enum MHD_Result too_large(srv_http *h, struct MHD_Connection *conn, conn_ctx *ctx)
{
    char msg[160];
    ctx->too_large = 1;
    snprintf(msg, sizeof msg, "the request body is larger than %zu bytes",
             h->c.opt->max_body_bytes);
    return error_reply(conn, ctx, SRV_ERR_TOO_LARGE, NULL, msg);
}

/* The first call for a request (its headers are in): framing and size are
 * checked before any of the body is read. */
static enum MHD_Result start_request(srv_http *h, struct MHD_Connection *conn, conn_ctx *ctx,
                                     const char *url)
{
    size_t header_bytes;
    const char *bad = bad_framing(conn, &header_bytes);
    char msg[160];
    ctx->close = bad || header_bytes > MAX_HEADER_BYTES || strlen(url) > MAX_URI_BYTES;
    if (bad)
        return error_reply(conn, ctx, SRV_ERR_INVALID, NULL, bad);
    if (strlen(url) > MAX_URI_BYTES) {
        snprintf(msg, sizeof msg, "the request's URI is longer than %d bytes", MAX_URI_BYTES);
        return error_reply(conn, ctx, SRV_ERR_URI_TOO_LONG, NULL, msg);
    }
    if (header_bytes > MAX_HEADER_BYTES) {
        snprintf(msg, sizeof msg, "the request's header fields exceed %d bytes", MAX_HEADER_BYTES);
        return error_reply(conn, ctx, SRV_ERR_HEADERS_TOO_LARGE, NULL, msg);
    }
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (!cl)
        return MHD_YES;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(cl, &end, 10);
    if (errno || end == cl || v > h->c.opt->max_body_bytes)
        return too_large(h, conn, ctx);
    return MHD_YES;
}

/* The client's X-Request-Id when it is 1 to SRV_REQUEST_ID_MAX printable
 * ASCII characters (it goes into a header and the log as it is), else a new
 * one: a per-process random prefix and a counter, unique across restarts. */
static void request_id(struct MHD_Connection *conn, char *out, size_t outlen)
{
    static atomic_ullong counter;
    static unsigned prefix;
    const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
    size_t n = v ? strlen(v) : 0;
    int ok = n > 0 && n <= SRV_REQUEST_ID_MAX;
    for (size_t k = 0; ok && k < n; k++)
        ok = v[k] >= 0x20 && v[k] < 0x7f;
    if (ok) {
        snprintf(out, outlen, "%s", v);
        return;
    }
    unsigned long long c = atomic_fetch_add(&counter, 1);
    if (c == 0 || !prefix) /* a race here only makes two threads pick a prefix each */
        prefix = ((unsigned)(srv_wall_time() * 1e6) ^ ((unsigned)getpid() << 16)) | 1u;
    snprintf(out, outlen, "%08x-%llu", prefix, c);
}

static conn_ctx *new_ctx(struct MHD_Connection *conn, const char *url, const char *method)
{
    conn_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    ctx->t0 = mhla_now();
    ctx->conn = conn;
    const union MHD_ConnectionInfo *sc =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    ctx->watch = sc ? sc->socket_context : NULL;
    snprintf(ctx->method, sizeof ctx->method, "%s", method);
    snprintf(ctx->path, sizeof ctx->path, "%s", url);
    request_id(conn, ctx->request_id, sizeof ctx->request_id);
    return ctx;
}

/* A piece of the body; past --max-body-bytes the rest is dropped (413). */
static void take_body(srv_http *h, conn_ctx *ctx, const char *data, size_t n)
{
    if (ctx->too_large)
        return;
    if (ctx->body.len + n > h->c.opt->max_body_bytes || mhla_buf_put(&ctx->body, data, n)) {
        ctx->too_large = 1;
        mhla_buf_free(&ctx->body);
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    srv_http *h = cls;
    conn_ctx *ctx = *con_cls;
    if (!ctx) {
        *con_cls = ctx = new_ctx(conn, url, method);
        if (!ctx)
            return MHD_NO;
        ctx->cors_list = h->c.opt->allowed_origins;
        ctx->cors_allow =
            srv_cors_allow(ctx->cors_list,
                           MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin"));
        return start_request(h, conn, ctx, url);
    }
    if (*upload_data_size) {
        if (!ctx->status) /* once answered (early 400, 413), what still arrives is dropped */
            take_body(h, ctx, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (ctx->status)
        return MHD_YES;
    if (ctx->too_large)
        return too_large(h, conn, ctx);
    srv_watch_phase(h->watch, ctx->watch, SRV_WATCH_IN_APP); /* all of it is in */
    enum MHD_Result rc = route(h, conn, ctx);
    srv_watch_phase(h->watch, ctx->watch, SRV_WATCH_WRITING);
    return rc;
}

static const char *termination_name(enum MHD_RequestTerminationCode toe)
{
    switch (toe) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK: return "ok";
    case MHD_REQUEST_TERMINATED_WITH_ERROR: return "error";
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED: return "timeout";
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN: return "shutdown";
    case MHD_REQUEST_TERMINATED_READ_ERROR: return "read_error";
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT: return "client_abort";
    default: return "other";
    }
}

/* The client's numeric address into host; NULL when unknown. */
static const char *remote_of(struct MHD_Connection *conn, char *host, size_t len)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr &&
        getnameinfo(ci->client_addr,
                    ci->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                           : sizeof(struct sockaddr_in),
                    host, (socklen_t)len, NULL, 0, NI_NUMERICHOST) == 0)
        return host;
    return NULL;
}

/* One access-log line per request (log.c writes it). */
static void log_request(struct MHD_Connection *conn, conn_ctx *ctx,
                        enum MHD_RequestTerminationCode toe)
{
    if (!srv_log_enabled(MHLA_LOG_INFO))
        return;
    char host[NI_MAXHOST];
    srv_access a = {.method = ctx->method,
                    .path = ctx->path,
                    .termination = termination_name(toe),
                    .remote = remote_of(conn, host, sizeof host),
                    .status = ctx->status,
                    .stream = ctx->stream,
                    .duration_s = mhla_now() - ctx->t0,
                    .request_id = ctx->request_id,
                    .r = ctx->r};
    srv_log_access(&a);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    srv_http *h = cls;
    conn_ctx *ctx = *con_cls;
    if (!ctx)
        return;
    *con_cls = NULL;
    srv_metrics_status(ctx->status);
    /* a client gone before the end (a browser's Stop, say): the request is
     * cancelled now, not when its stream is freed, so the log line says so */
    if (ctx->r && toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && !srv_req_done(ctx->r))
        srv_req_cancel(ctx->r);
    log_request(conn, ctx, toe);
    srv_watch_phase(h->watch, ctx->watch, SRV_WATCH_RECEIVING); /* the next request's */
    if (ctx->r) {
        atomic_fetch_sub(&h->in_flight, 1);
        /* the completion turned the idle timeout off: on again for what follows */
        MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT,
                                  (unsigned int)h->c.opt->timeout_s);
    }
    if (ctx->r && ctx->stream)
        srv_req_release(ctx->r); /* the stream's writer cancels when it must */
    else if (ctx->r)
        srv_req_abandon(ctx->r); /* a client that left before the answer */
    mhla_buf_free(&ctx->body);
    free(ctx);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    srv_http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        srv_watch_remove(h->watch, *socket_context);
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    *socket_context = ci ? srv_watch_add(h->watch, ci->connect_fd) : NULL;
}

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    if (!srv_log_enabled(MHLA_LOG_DEBUG))
        return;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = 0;
    srv_logf(MHLA_LOG_DEBUG, "microhttpd", "%s", msg);
}

/* ---- start / stop ---------------------------------------------------------- */

/* Connections one client address may hold: what --max-connections-per-client
 * says, else all but a reserve of an eighth (at least 4) of the slots, so
 * that one client can never take the slots other clients and /health
 * probes need. */
static int per_client(const mhla_server_options *o)
{
    if (o->max_connections_per_client > 0)
        return o->max_connections_per_client;
    int reserve = o->max_connections / 8 > 4 ? o->max_connections / 8 : 4;
    return o->max_connections > reserve ? o->max_connections - reserve : 1;
}

/* libmicrohttpd's daemon on the resolved address ai. No
 * MHD_OPTION_LISTENING_ADDRESS_REUSE: set to 1 it adds SO_REUSEPORT, so a
 * second server on the same port starts and the kernel splits connections
 * between the two; set to 0 it drops SO_REUSEADDR too. Left out, libmicrohttpd
 * sets SO_REUSEADDR alone: a restart binds past TIME_WAIT, a second live
 * server fails with EADDRINUSE. */
static struct MHD_Daemon *start_daemon(srv_http *h, const struct addrinfo *ai)
{
    const mhla_server_options *o = h->c.opt;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    return MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, h,
                            MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)o->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)o->timeout_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)per_client(o),
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_MEMORY,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, h, MHD_OPTION_END);
}

/* --host and --port as an address to listen on; *ai is the caller's to free. */
static int resolve(const mhla_server_options *o, struct addrinfo **ai, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    *ai = NULL;
    int gai = getaddrinfo(o->host, port, &hints, ai);
    if (gai || !*ai) {
        snprintf(err, errlen, "cannot resolve --host '%.100s': %s", o->host,
                 gai ? gai_strerror(gai) : "no address");
        return -1;
    }
    return 0;
}

int srv_http_start(const srv_http_options *c, srv_http **out, int *bound_port, char *err,
                   size_t errlen)
{
    *out = NULL;
    srv_http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    h->c = *c;
    h->lim = (srv_limits){.codec = c->codec,
                          .gen = c->gen,
                          .chat = c->render,
                          .grammars = c->grammars,
                          .model_name = c->model_name,
                          .vocab_size = c->cfg->vocab_size,
                          .max_positions = c->cfg->max_positions,
                          .max_running = c->opt->max_running};
    atomic_init(&h->in_flight, 0);
    struct addrinfo *ai = NULL;
    if (resolve(c->opt, &ai, err, errlen) ||
        srv_watch_start(c->opt->read_timeout_s, c->opt->timeout_s, &h->watch, err, errlen)) {
        if (ai)
            freeaddrinfo(ai);
        free(h);
        return -1;
    }
    h->d = start_daemon(h, ai);
    freeaddrinfo(ai);
    if (!h->d) {
        srv_watch_stop(h->watch);
        snprintf(err, errlen,
                 "cannot listen on %.100s:%d (address in use, or not an address of this host?)",
                 c->opt->host, c->opt->port);
        free(h);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *bound_port = di ? (int)di->port : c->opt->port;
    *out = h;
    return 0;
}

void srv_http_flush(srv_http *h, double max_s)
{
    double deadline = mhla_now() + max_s;
    while (h && atomic_load(&h->in_flight) > 0 && mhla_now() < deadline) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

void srv_http_stop(srv_http *h)
{
    if (!h)
        return;
    if (h->d)
        MHD_stop_daemon(h->d);
    srv_watch_stop(h->watch);
    free(h);
}
