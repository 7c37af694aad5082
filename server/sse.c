/*
 * sse.c — the Server-Sent Events body of a streaming completion: one
 * `data: {json}\n\n` chunk per choice with new text, a final chunk per choice
 * carrying finish_reason, the usage chunk when asked for, then
 * `data: [DONE]\n\n`. A chat stream (p.chat) opens each choice with its role
 * delta and gives the finish_reason a chunk of its own (an empty delta).
 * Text reaches here only at UTF-8 character boundaries and past
 * stop-string hold-back (the engine thread sees to both).
 */
#include "server_internal.h"

#include <stdlib.h>
#include <string.h>

struct srv_sse {
    srv_req *r;
    const char *model_name;
    const srv_codec *codec;
    mhla_buf out;
    size_t out_pos;
    int echo_done, end;
    int (*alive)(void *);
    void *alive_ctx;
};

int srv_sse_create(srv_req *r, const char *model_name, const srv_codec *codec, int (*alive)(void *),
                   void *alive_ctx, srv_sse **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return -1;
    (*out)->r = r;
    (*out)->alive = alive;
    (*out)->alive_ctx = alive_ctx;
    (*out)->model_name = model_name;
    (*out)->codec = codec;
    return 0;
}

static int event(mhla_buf *b, char *json)
{
    if (!json)
        return -1;
    size_t len = b->len;
    int rc = mhla_buf_put(b, "data: ", 6) || mhla_buf_put(b, json, strlen(json)) ||
             mhla_buf_put(b, "\n\n", 2);
    if (rc && b->p) { /* out of memory: no half event, whatever part of it fitted */
        b->len = len;
        b->p[len] = 0;
    }
    free(json);
    return rc;
}

/* The stream's opening events: chat's role deltas, the echoed prompts. */
static int opening(srv_sse *s)
{
    srv_req *r = s->r;
    int rc = 0;
    for (int i = 0; r->p.chat && i < r->n_choices && !rc; i++)
        rc = event(&s->out, srv_chat_role_chunk_json(r, s->model_name, i));
    for (int i = 0; r->echo && i < r->n_choices && !rc; i++)
        rc = event(&s->out, srv_echo_chunk_json(r, s->model_name, s->codec, i));
    return rc;
}

/* A chat choice's events: its new content, its new tool calls, then its
 * finish reason in a chunk of its own (an empty delta). */
static int chat_events(srv_sse *s, int i, int finished)
{
    srv_req *r = s->r;
    srv_choice *c = &r->choices[i];
    size_t new_text = c->text.len - c->text_sent;
    int rc = 0;
    if (new_text > 0) {
        rc = event(&s->out, srv_chunk_json(r, s->model_name, s->codec, i, c->text.p + c->text_sent,
                                           new_text, c->ids_sent, c->n_ids, NULL));
        c->text_sent = c->text.len;
        c->ids_sent = c->n_ids;
    }
    if (!rc && c->n_calls > c->calls_sent) {
        rc = event(&s->out,
                   srv_chat_calls_chunk_json(r, s->model_name, i, c->calls_sent, c->n_calls));
        c->calls_sent = c->n_calls;
    }
    if (!rc && finished) {
        rc = event(&s->out, srv_chunk_json(r, s->model_name, s->codec, i, "", 0, c->ids_sent,
                                           c->n_ids, c->finish_reason));
        c->finish_sent = 1;
        c->ids_sent = c->n_ids;
    }
    return rc ? -1 : 0;
}

/* Choice i's new text and ids, and its finish reason once it ended.
 * -1 when out of memory. */
static int choice_events(srv_sse *s, int i)
{
    srv_req *r = s->r;
    srv_choice *c = &r->choices[i];
    size_t new_text = c->text.len - c->text_sent;
    const char *text = c->text.p ? c->text.p + c->text_sent : ""; /* none yet: NULL */
    int finished = c->state == SRV_CH_DONE && !r->failed && !c->finish_sent, rc = 0;
    if (r->p.chat)
        return chat_events(s, i, finished);
    if (finished) {
        rc = event(&s->out, srv_chunk_json(r, s->model_name, s->codec, i, text, new_text,
                                           c->ids_sent, c->n_ids, c->finish_reason));
        c->finish_sent = 1;
    } else if (new_text > 0) {
        rc = event(&s->out, srv_chunk_json(r, s->model_name, s->codec, i, text, new_text,
                                           c->ids_sent, c->n_ids, NULL));
    } else {
        return 0;
    }
    c->text_sent = c->text.len;
    c->ids_sent = c->n_ids;
    return rc ? -1 : 0;
}

/* The end: the failure, the usage chunk when asked for, [DONE]. */
static int closing(srv_sse *s)
{
    srv_req *r = s->r;
    int rc = 0;
    if (r->failed) {
        srv_error e;
        srv_error_set(&e, r->err_code, NULL, "%s", r->err);
        rc = event(&s->out, srv_error_json(&e));
    }
    if (!rc && r->p.include_usage && !r->failed)
        rc = event(&s->out, srv_usage_chunk_json(r, s->model_name));
    if (!rc)
        rc = mhla_buf_put(&s->out, "data: [DONE]\n\n", 14);
    s->end = 1;
    return rc;
}

/* Formats whatever is new (r locked). Returns -1 when out of memory. */
static int produce(srv_sse *s)
{
    srv_req *r = s->r;
    int rc = 0;
    if (!s->echo_done) {
        s->echo_done = 1;
        rc = opening(s);
    }
    int all_sent = 1;
    for (int i = 0; i < r->n_choices && !rc; i++) {
        rc = choice_events(s, i);
        if (!r->choices[i].finish_sent)
            all_sent = 0;
    }
    if (!rc && r->done && (all_sent || r->failed))
        rc = closing(s);
    return rc;
}

/* Formats the next events, waiting for the engine thread until there are
 * some or the stream ends. */
static void fill(srv_sse *s)
{
    srv_req *r = s->r;
    s->out.len = 0;
    s->out_pos = 0;
    srv_req_lock(r);
    while (!s->end) {
        if (produce(s))
            s->end = 1;
        else if (s->out.len)
            break;
        else if (!s->end && srv_req_wait(r, 0.25, s->alive, s->alive_ctx) < 0)
            s->end = 1; /* the client is gone (r cancelled): nobody reads the rest */
    }
    srv_req_unlock(r);
}

long srv_sse_read(srv_sse *s, char *buf, size_t max)
{
    while (s->out_pos == s->out.len) {
        if (s->end)
            return -1;
        fill(s);
    }
    size_t n = s->out.len - s->out_pos;
    if (n > max)
        n = max;
    memcpy(buf, s->out.p + s->out_pos, n);
    s->out_pos += n;
    return (long)n;
}

void srv_sse_free(srv_sse *s)
{
    if (!s)
        return;
    srv_req_abandon(s->r);
    mhla_buf_free(&s->out);
    free(s);
}
