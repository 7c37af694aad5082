/*
 * request.c — the completion request object shared by an HTTP thread and
 * the engine thread. Its lock, condition variable and reference count are
 * touched here only: HTTP threads retain, release, wait and read under
 * srv_req_lock; the engine thread pushes tokens and finishes choices.
 */
#include "server_internal.h"

#include <cJSON.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The request's lock and its condition variable on the monotonic clock. */
static int init_sync(srv_req *r)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca))
        return -1;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc)
        return -1;
    if (pthread_mutex_init(&r->mu, NULL)) {
        pthread_cond_destroy(&r->cv);
        return -1;
    }
    return 0;
}

static void init_fields(srv_req *r)
{
    r->refs = 1;
    atomic_init(&r->cancelled, 0);
    uint64_t a = srv_random_u64(), b = srv_random_u64();
    snprintf(r->id, sizeof r->id, "cmpl-%016llx%08llx", (unsigned long long)a,
             (unsigned long long)(b & 0xffffffffu));
    r->created = (long)srv_wall_time();
    r->t_arrive = mhla_now();
    for (int i = 0; i < r->n_choices; i++) {
        r->choices[i].group = i / r->p.n;
        r->choices[i].state = SRV_CH_PREFILL;
    }
    for (int g = 0; g < r->p.n_prompts; g++)
        r->prompt_tokens += r->p.prompts[g].n;
}

int srv_req_create(srv_params *p, const srv_codec *codec, srv_req **out, srv_error *e)
{
    *out = NULL;
    srv_req *r = calloc(1, sizeof *r);
    if (r) {
        r->n_choices = p->n_prompts * p->n;
        r->groups = calloc((size_t)p->n_prompts, sizeof *r->groups);
        r->choices = calloc((size_t)r->n_choices, sizeof *r->choices);
    }
    if (!r || !r->groups || !r->choices || init_sync(r)) {
        if (r) {
            free(r->groups);
            free(r->choices);
        }
        free(r);
        srv_params_free(p);
        srv_error_set(e, SRV_ERR_INTERNAL, NULL, "out of memory for a request");
        return -1;
    }
    r->p = *p;
    memset(p, 0, sizeof *p);
    init_fields(r);
    if (r->p.echo && srv_req_echo_prompts(r, codec, e)) {
        srv_req_release(r);
        return -1;
    }
    *out = r;
    return 0;
}

void srv_choice_free_engine(srv_choice *c)
{
    mhla_seq_free(c->seq);
    c->seq = NULL;
    srv_draft_state_free(&c->draft);
    mhla_sampler_free(c->sampler);
    c->sampler = NULL;
    srv_codec_stream_free(c->dec);
    c->dec = NULL;
    srv_stopper_free(&c->stopper);
    srv_tool_parser_free(c->tools);
    c->tools = NULL;
    srv_row_grammar_free(c->grammar);
    c->grammar = NULL;
}

void srv_req_release(srv_req *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    int left = --r->refs;
    pthread_mutex_unlock(&r->mu);
    if (left > 0)
        return;
    /* engine-side resources are freed by the engine thread; these are leftovers
     * of a request that never reached it */
    for (int i = 0; i < r->n_choices; i++) {
        srv_choice *c = &r->choices[i];
        srv_choice_free_engine(c);
        mhla_buf_free(&c->text);
        cJSON_Delete(c->tool_calls);
        free(c->ids);
        free(c->lp);
        free(c->tops);
    }
    for (int g = 0; g < r->p.n_prompts; g++) {
        mhla_seq_free(r->groups[g].seq);
        free(r->groups[g].prompt_logprob);
        free(r->groups[g].prompt_offset);
        free(r->groups[g].prompt_tops);
        if (r->echo)
            free(r->echo[g]);
    }
    free(r->echo);
    srv_params_free(&r->p);
    free(r->groups);
    free(r->choices);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

void srv_req_retain(srv_req *r)
{
    pthread_mutex_lock(&r->mu);
    r->refs++;
    pthread_mutex_unlock(&r->mu);
}

void srv_req_cancel(srv_req *r) { atomic_store(&r->cancelled, 1); }

int srv_req_cancelled(srv_req *r) { return atomic_load(&r->cancelled); }

void srv_req_lock(srv_req *r) { pthread_mutex_lock(&r->mu); }

void srv_req_unlock(srv_req *r) { pthread_mutex_unlock(&r->mu); }

int srv_req_done(srv_req *r)
{
    pthread_mutex_lock(&r->mu);
    int done = r->done;
    pthread_mutex_unlock(&r->mu);
    return done;
}

void srv_req_abandon(srv_req *r)
{
    if (!srv_req_done(r))
        srv_req_cancel(r);
    srv_req_release(r);
}

int srv_req_wait(srv_req *r, double timeout_s, int (*alive)(void *), void *ctx)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long ns = ts.tv_nsec + (long)(timeout_s * 1e9);
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) != ETIMEDOUT || r->done || !alive)
        return 0;
    pthread_mutex_unlock(&r->mu); /* the liveness check may block briefly */
    int up = alive(ctx);
    pthread_mutex_lock(&r->mu);
    if (up)
        return 0;
    srv_req_cancel(r); /* the client is gone: nobody reads the rest */
    return -1;
}

/* Room for one more id (and its logprobs) in choice c; r->mu held. */
static int reserve_id(srv_req *r, srv_choice *c)
{
    if (c->n_ids < c->cap_ids)
        return 0;
    int cap = c->cap_ids ? c->cap_ids * 2 : 16, K = r->p.logprobs;
    int32_t *ids = realloc(c->ids, (size_t)cap * sizeof *ids);
    if (!ids)
        return -1;
    c->ids = ids;
    if (K >= 0) {
        srv_lp *lp = realloc(c->lp, (size_t)cap * sizeof *lp);
        if (!lp)
            return -1;
        c->lp = lp;
    }
    if (K > 0) {
        mhla_logprob *t = realloc(c->tops, (size_t)cap * (size_t)K * sizeof *t);
        if (!t)
            return -1;
        c->tops = t;
    }
    c->cap_ids = cap;
    return 0;
}

/* Appends one token with its logprobs and text to choice c; r->mu held. */
static int append_token(srv_req *r, srv_choice *c, const srv_token *t)
{
    int K = r->p.logprobs;
    if (reserve_id(r, c))
        return -1;
    if (K >= 0)
        c->lp[c->n_ids] = t->lp;
    if (K > 0)
        memcpy(c->tops + (size_t)c->n_ids * (size_t)K, t->top, (size_t)K * sizeof *t->top);
    c->ids[c->n_ids++] = t->id;
    r->completion_tokens++;
    if (t->calls && t->calls->child) {
        if (!c->tool_calls && !(c->tool_calls = cJSON_CreateArray()))
            return -1;
        while (t->calls->child) {
            cJSON_AddItemToArray(c->tool_calls,
                                 cJSON_DetachItemViaPointer(t->calls, t->calls->child));
            c->n_calls++;
        }
    }
    return t->len ? mhla_buf_put(&c->text, t->text, t->len) : 0;
}

int srv_req_push_token(srv_req *r, int ci, const srv_token *t)
{
    srv_choice *c = &r->choices[ci];
    pthread_mutex_lock(&r->mu);
    int rc = append_token(r, c, t);
    if (rc == 0 && t->finish) {
        c->state = SRV_CH_DONE;
        c->finish_reason = t->finish;
        r->n_done++;
        if (r->n_done == r->n_choices)
            r->done = 1;
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

void srv_req_set_decoding(srv_req *r, int ci)
{
    pthread_mutex_lock(&r->mu);
    r->choices[ci].state = SRV_CH_DECODE;
    pthread_mutex_unlock(&r->mu);
}

void srv_req_finish(srv_req *r, const char *reason, srv_errcode code, const char *failure)
{
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n_choices; i++) {
        srv_choice *c = &r->choices[i];
        if (c->state != SRV_CH_DONE) {
            c->state = SRV_CH_DONE;
            c->finish_reason = reason;
            r->n_done++;
        }
    }
    if (failure && !r->failed) {
        r->failed = 1;
        r->err_code = code;
        snprintf(r->err, sizeof r->err, "%s", failure);
    }
    r->done = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}
