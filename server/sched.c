/*
 * sched.c — continuous batching. One engine thread owns every sequence; HTTP
 * threads only enqueue requests (bounded queue) and read their results.
 * Each step packs every running sequence's next decode token plus chunks of
 * waiting prompts under the token budget (chunked prefill: a long prompt
 * never stalls running streams), makes one mhla_engine_forward call, samples
 * and hands the new text to the requests. Requests join and leave at every
 * step; a cancelled request's state is freed at the next step.
 */
#include "srv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ITEM_DECODE, ITEM_PREFILL };

typedef struct {
    srv_req *r;
    int kind, idx, n, final;
    float *row;
} item_ref;

struct srv_sched {
    srv_sched_config c;
    const mhla_config *mc;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_req *qhead, *qtail; /* under mu */
    int n_waiting;          /* under mu */
    int stop, draining;     /* under mu */
    int shared_run_seqs;    /* under mu: the engine's run_seqs */
    atomic_int n_active;    /* queued + running requests */
    pthread_t thr;
    int thr_started;
    /* engine thread only */
    srv_req **run;
    int n_run, cap_run, run_seqs;
    mhla_batch_item *items;
    item_ref *refs;
    int cap_items;
    float *logits;
    int cap_rows;
    srv_buf emit;
};

/* ---- finishing ------------------------------------------------------------- */

static void free_choice_engine(srv_choice *c)
{
    mhla_seq_free(c->seq);
    c->seq = NULL;
    srv_sampler_free(c->sampler);
    c->sampler = NULL;
    srv_codec_stream_free(c->dec);
    c->dec = NULL;
    srv_stopper_free(&c->stopper);
}

static void free_req_engine(srv_req *r)
{
    for (int i = 0; i < r->n_choices; i++)
        free_choice_engine(&r->choices[i]);
    for (int g = 0; g < r->p.n_prompts; g++) {
        mhla_seq_free(r->groups[g].seq);
        r->groups[g].seq = NULL;
    }
}

/* Ends every unfinished choice of r with reason; failure sets r->failed. */
static void finish_all(srv_req *r, const char *reason, const char *failure)
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
        snprintf(r->err, sizeof r->err, "%s", failure);
    }
    r->done = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    free_req_engine(r);
}

/* Metrics for a request leaving the engine, then the engine's reference goes. */
static void retire(srv_sched *s, srv_req *r, const char *metric_reason)
{
    srv_metrics_finish(metric_reason);
    srv_metrics_observe(SRV_HIST_E2E, srv_now() - r->t_arrive);
    atomic_fetch_sub(&s->n_active, 1);
    srv_req_release(r);
}

/* ---- public ---------------------------------------------------------------- */

int srv_sched_submit(srv_sched *s, srv_req *r)
{
    pthread_mutex_lock(&s->mu);
    if (s->draining || s->stop) {
        pthread_mutex_unlock(&s->mu);
        return SRV_SUBMIT_DRAINING;
    }
    /* count the queued requests that will really wait (FIFO admission into
     * the free sequence slots), this one included */
    int free_seqs = s->c.max_running - s->shared_run_seqs, blocked = 0;
    for (srv_req *q = s->qhead; q; q = q->next) {
        if (!blocked && q->n_choices <= free_seqs)
            free_seqs -= q->n_choices;
        else
            blocked++;
    }
    if (blocked || r->n_choices > free_seqs)
        blocked++;
    if (blocked > s->c.max_queue) {
        pthread_mutex_unlock(&s->mu);
        return SRV_SUBMIT_FULL;
    }
    pthread_mutex_lock(&r->mu);
    r->refs++;
    pthread_mutex_unlock(&r->mu);
    if (s->c.request_timeout_s > 0)
        r->t_deadline = r->t_arrive + s->c.request_timeout_s;
    r->next = NULL;
    if (s->qtail)
        s->qtail->next = r;
    else
        s->qhead = r;
    s->qtail = r;
    s->n_waiting++;
    atomic_fetch_add(&s->n_active, 1);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return SRV_SUBMIT_OK;
}

void srv_sched_drain(srv_sched *s)
{
    pthread_mutex_lock(&s->mu);
    s->draining = 1;
    pthread_mutex_unlock(&s->mu);
}

int srv_sched_draining(srv_sched *s)
{
    pthread_mutex_lock(&s->mu);
    int d = s->draining;
    pthread_mutex_unlock(&s->mu);
    return d;
}

int srv_sched_active(srv_sched *s) { return atomic_load(&s->n_active); }

/* ---- the engine step ------------------------------------------------------- */

static int grow(srv_sched *s, int n_items, int n_rows)
{
    if (n_items > s->cap_items) {
        int cap = n_items * 2;
        mhla_batch_item *it = realloc(s->items, (size_t)cap * sizeof *it);
        if (!it)
            return -1;
        s->items = it;
        item_ref *rf = realloc(s->refs, (size_t)cap * sizeof *rf);
        if (!rf)
            return -1;
        s->refs = rf;
        s->cap_items = cap;
    }
    if (n_rows > s->cap_rows) {
        int cap = n_rows * 2;
        float *l = realloc(s->logits, (size_t)cap * (size_t)s->mc->vocab_size * sizeof *l);
        if (!l)
            return -1;
        s->logits = l;
        s->cap_rows = cap;
    }
    return 0;
}

/* Feeds the decoder output of choice c through its stop strings into s->emit.
 * Returns 1 when a stop string ended the choice, 0, -1 on error (msg set). */
static int emit_text(srv_choice *c, const char *piece, size_t len, srv_buf *emit)
{
    return srv_stopper_feed(&c->stopper, piece, len, emit);
}

/* Hands token tok of choice ci to request r; ends the choice when it is done. */
static int deliver(srv_sched *s, srv_req *r, int ci, int32_t tok, char *err, size_t errlen)
{
    srv_choice *c = &r->choices[ci];
    double now = srv_now();
    int first_of_req = 0;
    if (c->n_ids == 0) {
        if (r->t_first == 0) {
            r->t_first = now;
            first_of_req = 1;
        }
    } else {
        srv_metrics_observe(SRV_HIST_ITL, now - c->t_last);
    }
    if (first_of_req)
        srv_metrics_observe(SRV_HIST_TTFT, now - r->t_arrive);
    c->t_last = now;
    srv_metrics_tokens(0, 1);

    s->emit.len = 0;
    const char *reason = NULL;
    int is_eos = tok == s->mc->eos_token_id && !r->p.ignore_eos;
    int last = is_eos || c->n_ids + 1 >= r->p.max_tokens;
    if (!is_eos) {
        const char *piece;
        size_t len;
        if (srv_codec_stream_push(c->dec, tok, &piece, &len, err, errlen))
            return -1;
        int st = emit_text(c, piece, len, &s->emit);
        if (st < 0)
            goto oom;
        if (st == 1)
            reason = "stop";
    } else {
        reason = "stop";
    }
    if (!reason || is_eos) {
        if (last) {
            const char *piece;
            size_t len;
            if (srv_codec_stream_finish(c->dec, &piece, &len, err, errlen))
                return -1;
            int st = emit_text(c, piece, len, &s->emit);
            if (st < 0)
                goto oom;
            if (st == 1)
                reason = "stop";
            else if (srv_stopper_flush(&c->stopper, &s->emit))
                goto oom;
            if (!reason)
                reason = "length";
        }
    }
    pthread_mutex_lock(&r->mu);
    int rc = 0;
    if (c->n_ids == c->cap_ids) {
        int cap = c->cap_ids ? c->cap_ids * 2 : 16;
        int32_t *ids = realloc(c->ids, (size_t)cap * sizeof *ids);
        if (ids) {
            c->ids = ids;
            c->cap_ids = cap;
        } else {
            rc = -1;
        }
    }
    if (rc == 0) {
        c->ids[c->n_ids++] = tok;
        r->completion_tokens++;
        if (s->emit.len)
            rc = srv_buf_append(&c->text, s->emit.data, s->emit.len);
    }
    if (rc == 0 && reason) {
        c->state = SRV_CH_DONE;
        c->finish_reason = reason;
        r->n_done++;
        if (r->n_done == r->n_choices)
            r->done = 1;
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (rc)
        goto oom;
    if (reason)
        free_choice_engine(c);
    else
        c->last_tok = tok;
    return 0;
oom:
    snprintf(err, errlen, "out of memory while emitting text");
    return -1;
}

/* Starts decoding the choices of group g from the prompt's last logits. */
static int start_group(srv_sched *s, srv_req *r, int g, const float *row, char *err,
                       size_t errlen)
{
    srv_group *gr = &r->groups[g];
    int n = r->p.n;
    mhla_error e = {{0}};
    /* the clones first: the prefill sequence itself goes to the first choice */
    for (int k = n - 1; k >= 0; k--) {
        srv_choice *c = &r->choices[g * n + k];
        if (k > 0) {
            if (mhla_seq_clone(gr->seq, &c->seq, &e)) {
                snprintf(err, errlen, "%s", e.msg);
                return -1;
            }
        } else {
            c->seq = gr->seq;
            gr->seq = NULL;
        }
    }
    for (int k = 0; k < n; k++) {
        int ci = g * n + k;
        srv_choice *c = &r->choices[ci];
        uint64_t seed = r->p.has_seed ? r->p.seed + (uint64_t)k * 0x9e3779b97f4a7c15ull
                                      : srv_random_u64();
        if (srv_sampler_create(&r->p.sampling, s->mc->vocab_size, seed, r->p.prompts[g].ids,
                               r->p.prompts[g].n, &c->sampler, err, errlen) ||
            srv_codec_stream_new(s->c.codec, &c->dec, err, errlen))
            return -1;
        srv_stopper_init(&c->stopper, r->p.stop, r->p.n_stop);
        pthread_mutex_lock(&r->mu);
        c->state = SRV_CH_DECODE;
        pthread_mutex_unlock(&r->mu);
        int32_t tok = srv_sampler_next(c->sampler, row);
        if (deliver(s, r, ci, tok, err, errlen))
            return -1;
    }
    return 0;
}

static void admit_and_purge(srv_sched *s)
{
    /* queued requests whose client went away never reach the engine */
    srv_req **pp = &s->qhead, *prev = NULL;
    while (*pp) {
        srv_req *r = *pp;
        if (atomic_load(&r->cancelled)) {
            *pp = r->next;
            if (s->qtail == r)
                s->qtail = prev;
            s->n_waiting--;
            finish_all(r, "cancelled", NULL);
            retire(s, r, "cancelled");
            continue;
        }
        prev = r;
        pp = &r->next;
    }
    while (s->qhead && s->run_seqs + s->qhead->n_choices <= s->c.max_running) {
        if (s->n_run == s->cap_run) {
            int cap = s->cap_run ? s->cap_run * 2 : 16;
            srv_req **nr = realloc(s->run, (size_t)cap * sizeof *nr);
            if (!nr)
                break;
            s->run = nr;
            s->cap_run = cap;
        }
        srv_req *r = s->qhead;
        s->qhead = r->next;
        if (!s->qhead)
            s->qtail = NULL;
        r->next = NULL;
        s->n_waiting--;
        s->run[s->n_run++] = r;
        s->run_seqs += r->n_choices;
    }
    s->shared_run_seqs = s->run_seqs;
}

/* Drops finished requests from the running list. */
static void compact(srv_sched *s)
{
    int k = 0;
    for (int i = 0; i < s->n_run; i++) {
        srv_req *r = s->run[i];
        pthread_mutex_lock(&r->mu);
        int done = r->done;
        pthread_mutex_unlock(&r->mu);
        if (done) {
            s->run_seqs -= r->n_choices;
            const char *reason = r->failed ? "error" : r->choices[0].finish_reason;
            free_req_engine(r);
            retire(s, r, reason ? reason : "error");
        } else {
            s->run[k++] = r;
        }
    }
    s->n_run = k;
    pthread_mutex_lock(&s->mu);
    s->shared_run_seqs = s->run_seqs;
    pthread_mutex_unlock(&s->mu);
}

static void update_gauges(srv_sched *s)
{
    size_t bytes = 0;
    for (int i = 0; i < s->n_run; i++) {
        srv_req *r = s->run[i];
        for (int c = 0; c < r->n_choices; c++)
            if (r->choices[c].seq)
                bytes += mhla_seq_state_bytes(r->choices[c].seq);
        for (int g = 0; g < r->p.n_prompts; g++)
            if (r->groups[g].seq)
                bytes += mhla_seq_state_bytes(r->groups[g].seq);
    }
    pthread_mutex_lock(&s->mu);
    int waiting = s->n_waiting;
    pthread_mutex_unlock(&s->mu);
    srv_metrics_gauges(s->n_run, waiting, s->run_seqs, bytes);
}

static void fail_req(srv_req *r, const char *msg)
{
    srv_logf(MHLA_LOG_ERROR, "request_failed", "%s: %s", r->id, msg);
    finish_all(r, "error", msg);
}

/* One engine step over the running requests; returns the items it ran. */
static int step(srv_sched *s)
{
    char err[512];
    double now = srv_now();
    for (int i = 0; i < s->n_run; i++) {
        srv_req *r = s->run[i];
        if (atomic_load(&r->cancelled))
            finish_all(r, "cancelled", NULL);
        else if (r->t_deadline > 0 && now > r->t_deadline)
            finish_all(r, "length", NULL);
    }
    compact(s);
    /* count the items first */
    int n_items = 0, n_rows = 0, budget = s->c.max_batch_tokens;
    for (int i = 0; i < s->n_run; i++) {
        srv_req *r = s->run[i];
        for (int c = 0; c < r->n_choices; c++)
            if (r->choices[c].state == SRV_CH_DECODE)
                n_items++, n_rows++, budget--;
    }
    int prefill_budget = budget;
    for (int i = 0; i < s->n_run && budget > 0; i++) {
        srv_req *r = s->run[i];
        for (int g = 0; g < r->p.n_prompts && budget > 0; g++) {
            int rem = r->p.prompts[g].n - r->groups[g].pos;
            if (rem > 0)
                n_items++, n_rows++, budget -= rem;
        }
    }
    if (n_items == 0)
        return 0;
    if (grow(s, n_items, n_rows)) {
        for (int i = 0; i < s->n_run; i++)
            fail_req(s->run[i], "out of memory for the batch");
        compact(s);
        return 0;
    }
    int k = 0, row = 0, tokens = 0;
    size_t V = (size_t)s->mc->vocab_size;
    for (int i = 0; i < s->n_run; i++) {
        srv_req *r = s->run[i];
        for (int c = 0; c < r->n_choices; c++) {
            srv_choice *ch = &r->choices[c];
            if (ch->state != SRV_CH_DECODE)
                continue;
            float *lr = s->logits + (size_t)row++ * V;
            s->items[k] = (mhla_batch_item){.seq = ch->seq, .tokens = &ch->last_tok,
                                            .n_tokens = 1, .logits_from = 0, .logits = lr};
            s->refs[k++] = (item_ref){.r = r, .kind = ITEM_DECODE, .idx = c, .n = 1, .row = lr};
            tokens++;
        }
    }
    budget = prefill_budget;
    for (int i = 0; i < s->n_run && budget > 0; i++) {
        srv_req *r = s->run[i];
        for (int g = 0; g < r->p.n_prompts && budget > 0; g++) {
            srv_group *gr = &r->groups[g];
            int rem = r->p.prompts[g].n - gr->pos;
            if (rem <= 0)
                continue;
            if (!gr->seq) {
                mhla_error e = {{0}};
                if (mhla_seq_create(s->c.model, &gr->seq, &e)) {
                    fail_req(r, e.msg);
                    break;
                }
            }
            int chunk = rem < budget ? rem : budget;
            int final = chunk == rem;
            float *lr = final ? s->logits + (size_t)row++ * V : NULL;
            s->items[k] = (mhla_batch_item){.seq = gr->seq,
                                            .tokens = r->p.prompts[g].ids + gr->pos,
                                            .n_tokens = chunk,
                                            .logits_from = final ? chunk - 1 : chunk,
                                            .logits = lr};
            s->refs[k++] = (item_ref){
                .r = r, .kind = ITEM_PREFILL, .idx = g, .n = chunk, .final = final, .row = lr};
            budget -= chunk;
            tokens += chunk;
        }
    }
    /* a request that failed while packing leaves the batch */
    int kk = 0;
    for (int j = 0; j < k; j++) {
        srv_req *r = s->refs[j].r;
        pthread_mutex_lock(&r->mu);
        int done = r->done;
        pthread_mutex_unlock(&r->mu);
        if (!done) {
            s->items[kk] = s->items[j];
            s->refs[kk++] = s->refs[j];
        }
    }
    k = kk;
    if (k == 0) {
        compact(s);
        return 0;
    }
    mhla_error e = {{0}};
    if (mhla_engine_forward(s->c.engine, s->items, k, &e)) {
        /* nothing advanced; every request of the batch fails with the cause */
        for (int j = 0; j < k; j++)
            fail_req(s->refs[j].r, e.msg);
        compact(s);
        return k;
    }
    srv_metrics_step(k, tokens);
    for (int j = 0; j < k; j++) {
        item_ref *rf = &s->refs[j];
        srv_req *r = rf->r;
        pthread_mutex_lock(&r->mu);
        int done = r->done;
        pthread_mutex_unlock(&r->mu);
        if (done)
            continue;
        if (rf->kind == ITEM_DECODE) {
            srv_choice *c = &r->choices[rf->idx];
            int32_t tok = srv_sampler_next(c->sampler, rf->row);
            if (deliver(s, r, rf->idx, tok, err, sizeof err))
                fail_req(r, err);
        } else {
            r->groups[rf->idx].pos += rf->n;
            srv_metrics_tokens(rf->n, 0);
            if (rf->final && start_group(s, r, rf->idx, rf->row, err, sizeof err))
                fail_req(r, err);
        }
    }
    compact(s);
    return k;
}

static void *engine_main(void *arg)
{
    srv_sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stop && !s->qhead && s->n_run == 0)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->stop) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        admit_and_purge(s);
        pthread_mutex_unlock(&s->mu);
        update_gauges(s);
        step(s);
        update_gauges(s);
    }
    return NULL;
}

int srv_sched_create(const srv_sched_config *c, srv_sched **out, char *err, size_t errlen)
{
    *out = NULL;
    srv_sched *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory for the scheduler");
        return -1;
    }
    s->c = *c;
    s->mc = mhla_model_config(c->model);
    atomic_init(&s->n_active, 0);
    if (pthread_mutex_init(&s->mu, NULL) || pthread_cond_init(&s->cv, NULL)) {
        free(s);
        snprintf(err, errlen, "cannot initialise the scheduler's locks");
        return -1;
    }
    if (pthread_create(&s->thr, NULL, engine_main, s)) {
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
        snprintf(err, errlen, "cannot start the engine thread");
        return -1;
    }
    s->thr_started = 1;
    *out = s;
    return 0;
}

void srv_sched_free(srv_sched *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    s->draining = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->thr_started)
        pthread_join(s->thr, NULL);
    /* the engine thread is gone: what is left ends here */
    for (int i = 0; i < s->n_run; i++) {
        finish_all(s->run[i], "error", "the server shut down before the request finished");
        retire(s, s->run[i], "error");
    }
    s->n_run = 0;
    while (s->qhead) {
        srv_req *r = s->qhead;
        s->qhead = r->next;
        finish_all(r, "error", "the server shut down before the request started");
        retire(s, r, "error");
    }
    free(s->run);
    free(s->items);
    free(s->refs);
    free(s->logits);
    srv_buf_free(&s->emit);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
