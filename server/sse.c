/*
 * sse.c — the Server-Sent Events body of a streaming completion: one
 * `data: {json}\n\n` chunk per choice with new text, a final chunk per choice
 * carrying finish_reason, the usage chunk when asked for, then
 * `data: [DONE]\n\n`. Text reaches here only at UTF-8 character boundaries
 * and past stop-string hold-back (the engine thread sees to both).
 */
#include "srv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct srv_sse {
    srv_req *r;
    const char *model_name;
    const srv_codec *codec;
    srv_buf out;
    size_t out_pos;
    int echo_done, end;
    int (*alive)(void *);
    void *alive_ctx;
};

int srv_sse_create(srv_req *r, const char *model_name, const srv_codec *codec,
                   int (*alive)(void *), void *alive_ctx, srv_sse **out)
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

static int event(srv_buf *b, char *json)
{
    if (!json)
        return -1;
    int rc = srv_buf_append(b, "data: ", 6) | srv_buf_append(b, json, strlen(json)) |
             srv_buf_append(b, "\n\n", 2);
    free(json);
    return rc;
}

/* Formats whatever is new (r->mu held). Returns -1 when out of memory. */
static int produce(srv_sse *s)
{
    srv_req *r = s->r;
    int rc = 0;
    if (!s->echo_done) {
        s->echo_done = 1;
        if (r->echo)
            for (int i = 0; i < r->n_choices && !rc; i++)
                rc = event(&s->out, srv_echo_chunk_json(r, s->model_name, s->codec, i));
    }
    int all_sent = 1;
    for (int i = 0; i < r->n_choices && !rc; i++) {
        srv_choice *c = &r->choices[i];
        size_t new_text = c->text.len - c->text_sent;
        const char *text = c->text.data ? c->text.data + c->text_sent : ""; /* none yet: NULL */
        int finished = c->state == SRV_CH_DONE && !r->failed;
        if (finished && !c->finish_sent) {
            rc = event(&s->out, srv_chunk_json(r, s->model_name, s->codec, i,
                                               text, new_text, c->ids_sent,
                                               c->n_ids, c->finish_reason));
            c->finish_sent = 1;
        } else if (new_text > 0) {
            rc = event(&s->out, srv_chunk_json(r, s->model_name, s->codec, i,
                                               text, new_text, c->ids_sent,
                                               c->n_ids, NULL));
        } else {
            if (!c->finish_sent)
                all_sent = 0;
            continue;
        }
        c->text_sent = c->text.len;
        c->ids_sent = c->n_ids;
        if (!c->finish_sent)
            all_sent = 0;
    }
    if (!rc && r->done && (all_sent || r->failed)) {
        if (r->failed) {
            srv_error e;
            srv_error_set(&e, 500, "server_error", NULL, NULL, "%s", r->err);
            rc = event(&s->out, srv_error_json(&e));
        }
        if (!rc && r->p.include_usage && !r->failed)
            rc = event(&s->out, srv_usage_chunk_json(r, s->model_name));
        if (!rc)
            rc = srv_buf_append(&s->out, "data: [DONE]\n\n", 14);
        s->end = 1;
    }
    return rc;
}

long srv_sse_read(srv_sse *s, char *buf, size_t max)
{
    srv_req *r = s->r;
    while (s->out_pos == s->out.len) {
        if (s->end)
            return -1;
        s->out.len = 0;
        s->out_pos = 0;
        pthread_mutex_lock(&r->mu);
        for (;;) {
            if (produce(s)) {
                s->end = 1;
                break;
            }
            if (s->out.len || s->end)
                break;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 250000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) == ETIMEDOUT && s->alive &&
                !s->alive(s->alive_ctx)) {
                srv_req_cancel(r); /* the client is gone: nobody reads the rest */
                s->end = 1;
                break;
            }
        }
        pthread_mutex_unlock(&r->mu);
    }
    size_t n = s->out.len - s->out_pos;
    if (n > max)
        n = max;
    memcpy(buf, s->out.data + s->out_pos, n);
    s->out_pos += n;
    return (long)n;
}

void srv_sse_free(srv_sse *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->r->mu);
    int done = s->r->done;
    pthread_mutex_unlock(&s->r->mu);
    if (!done)
        srv_req_cancel(s->r);
    srv_req_release(s->r);
    srv_buf_free(&s->out);
    free(s);
}
