/*
 * request.c — one streaming completion over libcurl: the request body, the
 * write callback that feeds the SSE parser, and the per-token timestamps
 * taken the moment each chunk's bytes arrive.
 *
 * Tokens are counted from the chunks: a chunk carrying `token_ids` (mhla-server's
 * return_token_ids) counts that many, any other chunk with text counts one.
 * When a chunk carries k > 1 tokens, the gap since the previous chunk is
 * split evenly over them, so inter-token latency is per token, not per chunk.
 * The usage chunk, when the server sends it, gives the final token counts.
 * Chat streams (chat.completion.chunk) are measured the same way from
 * delta.content: the first chunk, which carries only the assistant's role,
 * has no text and no ids, so it is not a token and does not end the TTFT.
 */
#include "client_internal.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

static void set_error(cl_req *r, const char *msg)
{
    if (!r->error_msg[0])
        snprintf(r->error_msg, sizeof r->error_msg, "%s", msg);
}

/* An error event's message and the usage chunk's counts. */
static void event_status(cl_req *r, const cJSON *o)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
    if (e && !cJSON_IsNull(e)) {
        r->error_event = 1;
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
        set_error(r, cJSON_IsString(m) ? m->valuestring : "the stream carried an error event");
    }
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "usage");
    if (cJSON_IsObject(u)) {
        const cJSON *pt = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens");
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens");
        if (cJSON_IsNumber(pt))
            r->usage_prompt = (long)pt->valuedouble;
        if (cJSON_IsNumber(ct))
            r->usage_completion = (long)ct->valuedouble;
    }
}

/* A choice's chunk: its text, and k tokens arriving at now (ITL gaps). */
static int event_choice(cl_req *r, const cJSON *c, double now)
{
    const cJSON *t =
        r->chat ? cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "delta"),
                                                   "content")
                : cJSON_GetObjectItemCaseSensitive(c, "text");
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(c, "token_ids");
    size_t tlen = cJSON_IsString(t) ? strlen(t->valuestring) : 0;
    long k = cJSON_IsArray(ids) ? cJSON_GetArraySize(ids) : (tlen > 0 ? 1 : 0);
    if (tlen > 0 && r->on_text)
        r->on_text(r->text_ctx, t->valuestring, tlen);
    if (k <= 0)
        return 0;
    if (!r->got_first) { /* a first chunk's k tokens all count as first: no gaps */
        r->got_first = 1;
        r->t_first = now;
    } else {
        double gap = (now - r->t_last) / (double)k;
        for (long i = 0; i < k; i++)
            if (cl_vec_push(&r->itl, gap))
                return -1;
    }
    r->t_last = now;
    r->tokens_seen += k;
    return 0;
}

static int on_event(void *ctx, const char *data, size_t len)
{
    cl_req *r = ctx;
    double now = mhla_now();
    (void)len;
    if (strcmp(data, "[DONE]") == 0) {
        r->got_done = 1;
        return 0;
    }
    cJSON *o = cJSON_Parse(data);
    if (!o) {
        r->bad_event = 1;
        set_error(r, "a stream event is not JSON");
        return 0;
    }
    event_status(r, o);
    const cJSON *c;
    int rc = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(o, "choices"))
    {
        if (rc == 0)
            rc = event_choice(r, c, now);
    }
    cJSON_Delete(o);
    return rc;
}

static size_t on_bytes(char *data, size_t size, size_t nmemb, void *ud)
{
    cl_req *r = ud;
    size_t n = size * nmemb;
    if (r->status == 0)
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
    if (r->status != 200) { /* keep the error body (bounded) for the message */
        if (r->err_body.len < 4096 && mhla_buf_put(&r->err_body, data, n))
            return 0;
        return n;
    }
    char err[CL_ERR_LEN];
    if (cl_sse_feed(&r->sse, data, n, on_event, r, err)) {
        set_error(r, err);
        return 0; /* aborts the transfer */
    }
    return n;
}

static int add_header(struct curl_slist **h, const char *s)
{
    struct curl_slist *n = curl_slist_append(*h, s);
    if (!n)
        return -1;
    *h = n;
    return 0;
}

/* Appends {"role": role, "content": content} to msgs; content is owned: freed when
 * it cannot be added. 0 on success. */
static int add_message(cJSON *msgs, const char *role, cJSON *content)
{
    cJSON *m = cJSON_CreateObject();
    int ok = m && content && cJSON_AddStringToObject(m, "role", role);
    if (!ok || !cJSON_AddItemToObject(m, "content", content)) {
        cJSON_Delete(content);
        cJSON_Delete(m);
        return -1;
    }
    if (!cJSON_AddItemToArray(msgs, m)) {
        cJSON_Delete(m);
        return -1;
    }
    return 0;
}

/* The prompt as the body's "prompt", or (chat) as one user message after the
 * system message, when there is one; 0 on success. */
static int add_prompt(cJSON *o, const cl_req_params *p)
{
    cJSON *prompt = cJSON_Parse(p->prompt_json);
    if (!prompt || (p->chat && !cJSON_IsString(prompt))) {
        cJSON_Delete(prompt);
        return -1;
    }
    if (!p->chat)
        return cJSON_AddItemToObject(o, "prompt", prompt) ? 0 : (cJSON_Delete(prompt), -1);
    cJSON *msgs = cJSON_AddArrayToObject(o, "messages");
    if (!msgs || (p->system && add_message(msgs, "system", cJSON_CreateString(p->system)))) {
        cJSON_Delete(prompt);
        return -1;
    }
    return add_message(msgs, "user", prompt);
}

/* The fields of the JSON object extra (NULL: none) set in o, each replacing
 * a field of o of the same name; 0, or -1 when extra is not an object. */
static int merge_fields(cJSON *o, const char *extra)
{
    if (!extra)
        return 0;
    cJSON *x = cJSON_Parse(extra);
    if (!cJSON_IsObject(x)) {
        cJSON_Delete(x);
        return -1;
    }
    int rc = 0;
    while (rc == 0 && x->child) {
        cJSON *f = cJSON_DetachItemViaPointer(x, x->child);
        cJSON_DeleteItemFromObjectCaseSensitive(o, f->string);
        /* the name is copied before the item's own is freed */
        if (!cJSON_AddItemToObject(o, f->string, f)) {
            cJSON_Delete(f);
            rc = -1;
        }
    }
    cJSON_Delete(x);
    return rc;
}

static char *build_body(const cl_conn *c, const cl_req_params *p)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || add_prompt(o, p)) {
        cJSON_Delete(o);
        return NULL;
    }
    if (c->model)
        cJSON_AddStringToObject(o, "model", c->model);
    cJSON_AddNumberToObject(o, "max_tokens", (double)p->max_tokens);
    cJSON_AddTrueToObject(o, "stream");
    if (p->usage) {
        cJSON *so = cJSON_AddObjectToObject(o, "stream_options");
        if (so)
            cJSON_AddTrueToObject(so, "include_usage");
    }
    if (p->temperature >= 0)
        cJSON_AddNumberToObject(o, "temperature", p->temperature);
    if (p->seed >= 0)
        cJSON_AddNumberToObject(o, "seed", (double)p->seed);
    if (p->ignore_eos)
        cJSON_AddTrueToObject(o, "ignore_eos");
    if (p->token_ids)
        cJSON_AddTrueToObject(o, "return_token_ids");
    if (merge_fields(o, p->body_extra) || merge_fields(o, p->prompt_extra)) {
        cJSON_Delete(o);
        return NULL;
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

int cl_req_setup(cl_req *r, const cl_conn *c, const cl_req_params *p, char *err)
{
    if (!r->easy && !(r->easy = curl_easy_init())) {
        snprintf(err, CL_ERR_LEN, "curl_easy_init failed");
        return -1;
    }
    cl_sse_init(&r->sse);
    r->usage_prompt = r->usage_completion = -1;
    r->body = build_body(c, p);
    r->chat = p->chat;
    const char *path = p->chat ? "/v1/chat/completions" : "/v1/completions";
    mhla_buf url = {0}, auth = {0};
    int bad = !r->body || mhla_buf_put(&url, c->url, strlen(c->url)) ||
              mhla_buf_put(&url, path, strlen(path)) ||
              add_header(&r->headers, "Content-Type: application/json") ||
              add_header(&r->headers, "Accept: text/event-stream") ||
              add_header(&r->headers, "Expect:"); /* no 100-continue wait on big bodies */
    if (!bad && c->api_key)
        bad = mhla_buf_put(&auth, "Authorization: Bearer ", 22) ||
              mhla_buf_put(&auth, c->api_key, strlen(c->api_key)) ||
              add_header(&r->headers, auth.p);
    if (bad) {
        mhla_buf_free(&url);
        mhla_buf_free(&auth);
        snprintf(err, CL_ERR_LEN,
                 "out of memory preparing a request (or a prompt that is not JSON, "
                 "or for chat not a string)");
        return -1;
    }
    CURL *e = r->easy;
    curl_easy_setopt(e, CURLOPT_URL, url.p); /* libcurl copies option strings */
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_bytes);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->curl_err);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, c->timeout_s > 0 ? (long)(c->timeout_s * 1000) : 0L);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    mhla_buf_free(&url);
    mhla_buf_free(&auth);
    r->curl_err[0] = '\0';
    return 0;
}

void cl_req_reset(cl_req *r)
{
    CURL *e = r->easy;
    curl_slist_free_all(r->headers);
    free(r->body);
    cl_sse_free(&r->sse);
    mhla_buf_free(&r->err_body);
    cl_vec_free(&r->itl);
    memset(r, 0, sizeof *r);
    r->easy = e;
}

void cl_req_free(cl_req *r)
{
    cl_req_reset(r);
    if (r->easy)
        curl_easy_cleanup(r->easy);
    r->easy = NULL;
}

static void body_message(const cl_req *r, char *msg)
{
    cJSON *o = r->err_body.p ? cJSON_Parse(r->err_body.p) : NULL;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
    if (cJSON_IsString(m))
        snprintf(msg, CL_ERR_LEN, "HTTP %ld: %s", r->status, m->valuestring);
    else
        snprintf(msg, CL_ERR_LEN, "HTTP %ld: %.200s", r->status,
                 r->err_body.p ? r->err_body.p : "(no body)");
    cJSON_Delete(o);
}

int cl_req_outcome(const cl_req *r, CURLcode result, char *kind, size_t kind_len, char *msg)
{
    long status = r->status;
    if (status == 0 && r->easy)
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status != 0 && status != 200) {
        snprintf(kind, kind_len, "http_%ld", status);
        cl_req tmp = *r;
        tmp.status = status;
        body_message(&tmp, msg);
        return -1;
    }
    if (r->error_event || r->bad_event) {
        snprintf(kind, kind_len, r->error_event ? "error_event" : "bad_event");
        snprintf(msg, CL_ERR_LEN, "%s", r->error_msg);
        return -1;
    }
    if (result != CURLE_OK) {
        snprintf(kind, kind_len, result == CURLE_OPERATION_TIMEDOUT ? "timeout" : "transport");
        snprintf(msg, CL_ERR_LEN, "%s",
                 r->error_msg[0]  ? r->error_msg
                 : r->curl_err[0] ? r->curl_err
                                  : curl_easy_strerror(result));
        return -1;
    }
    if (!r->got_done) {
        snprintf(kind, kind_len, "incomplete");
        snprintf(msg, CL_ERR_LEN, "the stream ended without data: [DONE]");
        return -1;
    }
    return 0;
}

long cl_req_output_tokens(const cl_req *r)
{
    return r->usage_completion >= 0 ? r->usage_completion : r->tokens_seen;
}
