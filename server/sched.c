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
    float *row;  /* the logits that start or continue generation */
    float *rows; /* echo + logprobs: the logits of every position of the chunk */
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
    long pages_total;       /* the state pool's size (state_pool) */
    long promised;          /* engine thread: pages kept for clones not yet made */
    atomic_int n_active;    /* queued + running requests */
    pthread_t thr;
    int thr_started;
    /* engine thread only */
    srv_req **run;
    int n_run, cap_run, run_seqs;
    mhla_batch_item *items;
    item_ref *refs;
    mhla_sample_slot *slots; /* decode items sample inside the step (on a GPU: on the device) */
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
    mhla_sampler_free(c->sampler);
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
    for (int g = 0; g < r->p.n_prompts; g++) {
        s->promised -= r->groups[g].promised;
        r->groups[g].promised = 0;
    }
    srv_metrics_finish(metric_reason);
    srv_metrics_observe(SRV_HIST_E2E, srv_now() - r->t_arrive);
    atomic_fetch_sub(&s->n_active, 1);
    srv_req_release(r);
}

/* ---- public ---------------------------------------------------------------- */

/* Pages r needs at worst: every choice reaching prompt + max_tokens. */
static long pages_needed(const srv_sched *s, const srv_req *r)
{
    long need = 0;
    for (int g = 0; g < r->p.n_prompts; g++)
        need += (long)r->p.n *
                mhla_state_pages_needed(s->c.model, (long)r->p.prompts[g].n + r->p.max_tokens);
    return need;
}

int srv_sched_submit(srv_sched *s, srv_req *r)
{
    if (s->c.state_pool && pages_needed(s, r) > s->pages_total)
        return SRV_SUBMIT_TOO_BIG;
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
        mhla_sample_slot *sl = realloc(s->slots, (size_t)cap * sizeof *sl);
        if (!sl)
            return -1;
        s->slots = sl;
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
        if (K > 0) {
            mhla_logprob *t = realloc(c->tops, (size_t)cap * (size_t)K * sizeof *t);
            if (!t)
                return -1;
            c->tops = t;
        }
    }
    c->cap_ids = cap;
    return 0;
}

static int deliver_token(srv_sched *s, srv_req *r, int ci, int32_t tok, float tok_lp,
                         const mhla_logprob *top, char *err, size_t errlen);

/* Samples the next token of choice ci from its logits row and hands it to
 * request r; ends the choice when it is done. */
static int deliver(srv_sched *s, srv_req *r, int ci, const float *row, char *err, size_t errlen)
{
    srv_choice *c = &r->choices[ci];
    int32_t tok;
    mhla_error me = {{0}};
    if (mhla_sampler_next(c->sampler, row, &tok, &me)) {
        snprintf(err, errlen, "%s", me.msg);
        return -1;
    }
    int K = r->p.logprobs;
    float lp = 0;
    mhla_logprob top[MHLA_MAX_TOP_LOGPROBS];
    if (K >= 0 && mhla_logprobs(row, s->mc->vocab_size, tok, K, &lp, top, &me)) {
        snprintf(err, errlen, "%s", me.msg);
        return -1;
    }
    return deliver_token(s, r, ci, tok, lp, top, err, errlen);
}

/* Hands choice ci's next token (sampled by the engine's step or by deliver)
 * to request r; ends the choice when it is done. */
static int deliver_token(srv_sched *s, srv_req *r, int ci, int32_t tok, float tok_lp,
                         const mhla_logprob *top, char *err, size_t errlen)
{
    srv_choice *c = &r->choices[ci];
    int K = r->p.logprobs;
    srv_lp lp = {0};
    lp.logprob = tok_lp;
    lp.text_offset = c->dec_chars;
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
    int is_eos = srv_gen_is_eos(s->c.gen, tok) && !r->p.ignore_eos;
    int last = is_eos || c->n_ids + 1 >= r->p.max_tokens;
    if (!is_eos) {
        const char *piece;
        size_t len;
        if (srv_codec_stream_push(c->dec, tok, &piece, &len, err, errlen))
            return -1;
        c->dec_chars += srv_utf8_chars(piece, len);
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
    int rc = reserve_id(r, c);
    if (rc == 0) {
        if (K >= 0) {
            c->lp[c->n_ids] = lp;
            if (K > 0)
                memcpy(c->tops + (size_t)c->n_ids * (size_t)K, top, (size_t)K * sizeof *top);
        }
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
    if (reason && s->c.state_pool) { /* its end state stays for resume */
        mhla_seq_finish(c->seq);
        c->seq = NULL;
    }
    if (reason)
        free_choice_engine(c);
    else
        c->last_tok = tok;
    return 0;
oom:
    snprintf(err, errlen, "out of memory while emitting text");
    return -1;
}

/* echo + logprobs: the logits of prompt position t give the logprobs of
 * prompt token t + 1 (the first prompt token has none). */
static int prompt_logprobs(srv_sched *s, srv_req *r, const item_ref *rf, char *err, size_t errlen)
{
    srv_group *gr = &r->groups[rf->idx];
    const srv_prompt *pr = &r->p.prompts[rf->idx];
    int K = r->p.logprobs, V = s->mc->vocab_size;
    mhla_error e = {{0}};
    for (int j = 0; j < rf->n; j++) {
        int t = gr->pos + j + 1;
        if (t >= pr->n)
            break;
        if (mhla_logprobs(rf->rows + (size_t)j * (size_t)V, V, pr->ids[t], K,
                          &gr->prompt_lp[t].logprob,
                          K ? gr->prompt_tops + (size_t)t * (size_t)K : NULL, &e)) {
            snprintf(err, errlen, "%s", e.msg);
            return -1;
        }
    }
    return 0;
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
            if (mhla_seq_clone(gr->seq, &c->seq, &e) ||
                (s->c.state_pool &&
                 mhla_seq_reserve(c->seq, (long)r->p.prompts[g].n + r->p.max_tokens, &e))) {
                snprintf(err, errlen, "%s", e.msg);
                return -1;
            }
        } else {
            c->seq = gr->seq;
            gr->seq = NULL;
        }
    }
    s->promised -= gr->promised; /* the clones hold their own reservations now */
    gr->promised = 0;
    for (int k = 0; k < n; k++) {
        int ci = g * n + k;
        srv_choice *c = &r->choices[ci];
        mhla_sampling_params sp = r->p.sampling;
        sp.logit_bias = r->p.bias;
        sp.n_logit_bias = r->p.n_bias;
        sp.seed = r->p.has_seed ? r->p.seed + (uint64_t)k * 0x9e3779b97f4a7c15ull
                                : srv_random_u64();
        if (mhla_sampler_create(&sp, s->mc->vocab_size, r->p.prompts[g].ids, r->p.prompts[g].n,
                                &c->sampler, &e)) {
            snprintf(err, errlen, "%s", e.msg);
            return -1;
        }
        if (srv_codec_stream_new(s->c.codec, &c->dec, err, errlen))
            return -1;
        /* text_offset counts the echoed prompt too */
        c->dec_chars = r->echo ? srv_utf8_chars(r->echo[g], strlen(r->echo[g])) : 0;
        srv_stopper_init(&c->stopper, r->p.stop, r->p.n_stop);
        pthread_mutex_lock(&r->mu);
        c->state = SRV_CH_DECODE;
        pthread_mutex_unlock(&r->mu);
        if (deliver(s, r, ci, row, err, errlen))
            return -1;
    }
    return 0;
}

static void fail_req(srv_req *r, const char *msg);

/* State pool: r's group sequences come from the pool, take what the prefix
 * cache holds of their prompts, and reserve their worst case. Returns 0, 1
 * when the pool cannot promise it now (nothing is kept), -1 on error. */
static int pool_admit(srv_sched *s, srv_req *r, char *err, size_t errlen)
{
    mhla_error e = {{0}};
    long matched = 0;
    int g;
    for (g = 0; g < r->p.n_prompts; g++) {
        srv_group *gr = &r->groups[g];
        const srv_prompt *pr = &r->p.prompts[g];
        if (mhla_engine_seq_create(s->c.engine, &gr->seq, &e))
            break;
        int pos = mhla_seq_match_prefix(gr->seq, pr->ids, pr->n, &e);
        if (pos < 0)
            break;
        gr->pos = pos;
        matched += pos;
        if (mhla_seq_reserve(gr->seq, (long)pr->n + r->p.max_tokens, &e))
            break;
        /* the n - 1 clones reserve when the prompt is done: keep their pages free */
        long clones = (long)(r->p.n - 1) *
                      mhla_state_pages_needed(s->c.model, (long)pr->n + r->p.max_tokens);
        mhla_state_stats st;
        mhla_engine_state_stats(s->c.engine, &st);
        if (clones > 0 && st.pages_available >= 0 &&
            st.pages_available - s->promised < clones) {
            snprintf(e.msg, sizeof e.msg,
                     "state memory full: %d choices need %ld more pages, %ld available", r->p.n,
                     clones, st.pages_available - s->promised);
            break;
        }
        gr->promised = clones;
        s->promised += clones;
    }
    if (g == r->p.n_prompts) {
        srv_metrics_tokens(matched, 0); /* prompt tokens served by the cache */
        return 0;
    }
    for (int k = 0; k <= g && k < r->p.n_prompts; k++) {
        s->promised -= r->groups[k].promised;
        r->groups[k].promised = 0;
        mhla_seq_free(r->groups[k].seq);
        r->groups[k].seq = NULL;
        r->groups[k].pos = 0;
    }
    snprintf(err, errlen, "%s", e.msg);
    return strncmp(e.msg, "state memory full", 17) == 0 ? 1 : -1;
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
        if (s->c.state_pool) {
            char err[512];
            int st = pool_admit(s, r, err, sizeof err);
            if (st == 1 && s->n_run > 0)
                break; /* waits until running requests free their pages */
            if (st != 0) {
                s->qhead = r->next;
                if (!s->qhead)
                    s->qtail = NULL;
                s->n_waiting--;
                fail_req(r, err);
                retire(s, r, "error");
                continue;
            }
        }
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
    if (s->c.state_pool) {
        mhla_state_stats st;
        mhla_engine_state_stats(s->c.engine, &st);
        srv_metrics_state(&st);
    }
    if (mhla_engine_device(s->c.engine) == MHLA_DEVICE_CUDA) {
        mhla_device_stats ds;
        mhla_engine_device_stats(s->c.engine, &ds);
        srv_metrics_device(&ds);
    }
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
                n_items++, budget--;
    }
    int prefill_budget = budget;
    for (int i = 0; i < s->n_run && budget > 0; i++) {
        srv_req *r = s->run[i];
        for (int g = 0; g < r->p.n_prompts && budget > 0; g++) {
            int rem = r->p.prompts[g].n - r->groups[g].pos;
            int chunk = rem < budget ? rem : budget;
            if (rem > 0)
                n_items++, n_rows += r->groups[g].prompt_lp ? chunk : 1, budget -= rem;
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
            mhla_sample_slot *sl = &s->slots[k];
            memset(sl, 0, sizeof *sl);
            sl->sampler = ch->sampler;
            sl->n_top = r->p.logprobs >= 0 ? r->p.logprobs : -1;
            s->items[k] = (mhla_batch_item){.seq = ch->seq, .tokens = &ch->last_tok,
                                            .n_tokens = 1, .logits_from = 1, .logits = NULL,
                                            .sample = sl};
            s->refs[k++] = (item_ref){.r = r, .kind = ITEM_DECODE, .idx = c, .n = 1};
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
                if (mhla_engine_seq_create(s->c.engine, &gr->seq, &e)) {
                    fail_req(r, e.msg);
                    break;
                }
            }
            int chunk = rem < budget ? rem : budget;
            int final = chunk == rem;
            float *lr = NULL, *all = NULL;
            int from = final ? chunk - 1 : chunk;
            if (gr->prompt_lp) { /* every position: the prompt's own logprobs */
                all = s->logits + (size_t)row * V;
                row += chunk;
                from = 0;
                lr = final ? all + (size_t)(chunk - 1) * V : NULL;
            } else if (final) {
                lr = s->logits + (size_t)row++ * V;
            }
            s->items[k] = (mhla_batch_item){.seq = gr->seq,
                                            .tokens = r->p.prompts[g].ids + gr->pos,
                                            .n_tokens = chunk,
                                            .logits_from = from,
                                            .logits = all ? all : lr};
            s->refs[k++] = (item_ref){.r = r, .kind = ITEM_PREFILL, .idx = g, .n = chunk,
                                      .final = final, .row = lr, .rows = all};
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
            const mhla_sample_slot *sl = s->items[j].sample;
            if (sl->status)
                fail_req(r, sl->err.msg);
            else if (deliver_token(s, r, rf->idx, sl->token, sl->token_logprob, sl->top, err,
                                   sizeof err))
                fail_req(r, err);
        } else {
            if (rf->rows && prompt_logprobs(s, r, rf, err, sizeof err)) {
                fail_req(r, err);
                continue;
            }
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
    if (c->state_pool) {
        mhla_state_stats st;
        mhla_engine_state_stats(c->engine, &st);
        s->pages_total = st.pages_total;
        srv_metrics_state(&st);
    }
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
    free(s->slots);
    srv_buf_free(&s->emit);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
