/*
 * req.c — the completion request object shared by an HTTP thread and the
 * engine thread: creation, reference counting, cancellation.
 */
#include "srv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int srv_req_create(srv_params *p, srv_req **out, char *err, size_t errlen)
{
    *out = NULL;
    srv_req *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory for a request");
        return -1;
    }
    r->n_choices = p->n_prompts * p->n;
    r->groups = calloc((size_t)p->n_prompts, sizeof *r->groups);
    r->choices = calloc((size_t)r->n_choices, sizeof *r->choices);
    pthread_condattr_t ca;
    int cond_ok = pthread_condattr_init(&ca) == 0;
    if (cond_ok) {
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        cond_ok = pthread_cond_init(&r->cv, &ca) == 0;
        pthread_condattr_destroy(&ca);
    }
    if (!r->groups || !r->choices || !cond_ok || pthread_mutex_init(&r->mu, NULL) != 0) {
        if (cond_ok)
            pthread_cond_destroy(&r->cv);
        free(r->groups);
        free(r->choices);
        free(r);
        snprintf(err, errlen, "out of memory for a request");
        return -1;
    }
    r->p = *p;
    memset(p, 0, sizeof *p);
    r->refs = 1;
    atomic_init(&r->cancelled, 0);
    uint64_t a = srv_random_u64(), b = srv_random_u64();
    snprintf(r->id, sizeof r->id, "cmpl-%016llx%08llx", (unsigned long long)a,
             (unsigned long long)(b & 0xffffffffu));
    r->created = (long)srv_wall_time();
    r->t_arrive = srv_now();
    for (int i = 0; i < r->n_choices; i++) {
        r->choices[i].group = i / r->p.n;
        r->choices[i].state = SRV_CH_PREFILL;
    }
    for (int g = 0; g < r->p.n_prompts; g++)
        r->prompt_tokens += r->p.prompts[g].n;
    *out = r;
    return 0;
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
        mhla_seq_free(c->seq);
        mhla_sampler_free(c->sampler);
        srv_codec_stream_free(c->dec);
        srv_stopper_free(&c->stopper);
        srv_buf_free(&c->text);
        free(c->ids);
        free(c->lp);
        free(c->tops);
    }
    for (int g = 0; g < r->p.n_prompts; g++) {
        mhla_seq_free(r->groups[g].seq);
        free(r->groups[g].prompt_lp);
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

void srv_req_cancel(srv_req *r) { atomic_store(&r->cancelled, 1); }
