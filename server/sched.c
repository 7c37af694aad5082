/*
 * sched.c — continuous batching. One engine thread owns every sequence; HTTP
 * threads only enqueue requests (bounded queue) and read their results.
 * A request's sequences are made when it is admitted from the queue. Each
 * step then plans the batch once (every running sequence's next decode
 * token plus chunks of waiting prompts that step_plan.c sizes to the step's
 * time budget: chunked prefill, so a long prompt never stalls running
 * streams), runs one timed mhla_engine_forward call, and applies the
 * results: samples, hands the new text to the requests, starts the choices
 * of finished prompts. Requests join and leave at every step; a cancelled
 * request's state is freed at the next step.
 */
#include "server_internal.h"
#include "step_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ITEM_DECODE, ITEM_PREFILL };

/* One item of a step's plan: what it feeds and where its logits go. */
typedef struct {
    srv_req *r;
    int kind, idx, n, final;
    int n_rows;  /* logits rows it needs: echo + logprobs every position, else 1 when final */
    float *row;  /* the logits that start or continue generation */
    float *rows; /* echo + logprobs: the logits of every position of the chunk */
} item_ref;

/* A prompt still prefilling, as the step planner sees it. */
typedef struct {
    srv_req *r;
    int g;
} prompt_ref;

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
    item_ref *refs; /* the step's plan */
    int n_refs, n_rows, n_tokens;
    int step_rows, step_prefill; /* the plan's decode rows and prompt tokens */
    srv_step_cost cost;          /* learned from every step's forward time */
    prompt_ref *prompts;         /* the step planner's input and output */
    srv_plan_prompt *pp;
    int *pp_order, *pp_chunk;
    int cap_prompts;
    mhla_batch_item *batch;
    mhla_sample_slot *slots; /* decode items sample inside the step (on a GPU: on the device) */
    int cap_items;
    float *logits;
    int cap_rows;
    mhla_buf emit;
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

/* Ends every unfinished choice of r with reason (failure: r fails with
 * code) and frees its engine-side state. */
static void finish_all(srv_req *r, const char *reason, srv_errcode code, const char *failure)
{
    srv_req_finish(r, reason, code, failure);
    free_req_engine(r);
}

static void fail_req(srv_req *r, srv_errcode code, const char *msg)
{
    srv_logf(MHLA_LOG_ERROR, "request_failed", "%s: %s", r->id, msg);
    finish_all(r, "error", code, msg);
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

/* The queued requests that will really wait (FIFO admission into the free
 * sequence slots), r included; s->mu held. */
static int count_blocked(const srv_sched *s, const srv_req *r)
{
    int free_seqs = s->c.max_running - s->shared_run_seqs, blocked = 0;
    for (const srv_req *q = s->qhead; q; q = q->next) {
        if (!blocked && q->n_choices <= free_seqs)
            free_seqs -= q->n_choices;
        else
            blocked++;
    }
    if (blocked || r->n_choices > free_seqs)
        blocked++;
    return blocked;
}

int srv_sched_submit(srv_sched *s, srv_req *r)
{
    if (s->c.state_pool && pages_needed(s, r) > s->pages_total)
        return SRV_SUBMIT_TOO_BIG;
    pthread_mutex_lock(&s->mu);
    int rc = s->draining || s->stop                 ? SRV_SUBMIT_DRAINING
             : count_blocked(s, r) > s->c.max_queue ? SRV_SUBMIT_FULL
                                                    : SRV_SUBMIT_OK;
    if (rc != SRV_SUBMIT_OK) {
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    srv_req_retain(r); /* the engine's own */
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

/* ---- admission: the only place a request's sequences are made --------------- */

/* Group g's sequence. With the state pool it takes what the prefix cache
 * holds of the prompt, reserves its worst case and keeps pages free for the
 * n - 1 clones made when the prompt is done. */
static int admit_group(srv_sched *s, srv_req *r, int g, long *matched, mhla_error *e)
{
    srv_group *gr = &r->groups[g];
    const srv_prompt *pr = &r->p.prompts[g];
    if (mhla_engine_seq_create(s->c.engine, &gr->seq, e))
        return -1;
    if (!s->c.state_pool)
        return 0;
    /* echo + logprobs needs the logits of every prompt position: no cache */
    int pos = gr->prompt_lp ? 0 : mhla_seq_match_prefix(gr->seq, pr->ids, pr->n, e);
    if (pos < 0 || mhla_seq_reserve(gr->seq, (long)pr->n + r->p.max_tokens, e))
        return -1;
    gr->pos = pos;
    *matched += pos;
    long clones =
        (long)(r->p.n - 1) * mhla_state_pages_needed(s->c.model, (long)pr->n + r->p.max_tokens);
    mhla_state_stats st;
    mhla_engine_state_stats(s->c.engine, &st);
    /* the reservation above must not have taken pages promised to others */
    if (st.pages_available >= 0 && st.pages_available - s->promised < clones) {
        snprintf(e->msg, sizeof e->msg,
                 "state memory full: %d choices need %ld more pages, %ld available", r->p.n, clones,
                 st.pages_available - s->promised);
        e->code = MHLA_ERR_FULL;
        return -1;
    }
    gr->promised = clones;
    s->promised += clones;
    return 0;
}

/* Makes r's group sequences. Returns 0, or -1 with e set and nothing kept
 * (e->code MHLA_ERR_FULL: the state pool cannot promise it now). */
static int admit_seqs(srv_sched *s, srv_req *r, mhla_error *e)
{
    long matched = 0;
    int g = 0;
    while (g < r->p.n_prompts && admit_group(s, r, g, &matched, e) == 0)
        g++;
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
    return -1;
}

/* Unlinks r (whose predecessor is prev) from the queue; s->mu held. */
static void unqueue(srv_sched *s, srv_req *r, srv_req *prev)
{
    if (prev)
        prev->next = r->next;
    else
        s->qhead = r->next;
    if (s->qtail == r)
        s->qtail = prev;
    r->next = NULL;
    s->n_waiting--;
}

/* Queued requests whose client went away never reach the engine. */
static void purge_cancelled(srv_sched *s)
{
    srv_req *prev = NULL, *r = s->qhead;
    while (r) {
        srv_req *next = r->next;
        if (srv_req_cancelled(r)) {
            unqueue(s, r, prev);
            finish_all(r, "cancelled", SRV_ERR_INTERNAL, NULL);
            retire(s, r, "cancelled");
        } else {
            prev = r;
        }
        r = next;
    }
}

static int grow_run(srv_sched *s)
{
    if (s->n_run < s->cap_run)
        return 0;
    int cap = s->cap_run ? s->cap_run * 2 : 16;
    srv_req **nr = realloc(s->run, (size_t)cap * sizeof *nr);
    if (!nr)
        return -1;
    s->run = nr;
    s->cap_run = cap;
    return 0;
}

/* Moves queued requests into the running set while sequence slots (and the
 * state pool) allow; s->mu held. */
static void admit(srv_sched *s)
{
    purge_cancelled(s);
    while (s->qhead && s->run_seqs + s->qhead->n_choices <= s->c.max_running) {
        if (grow_run(s))
            break;
        srv_req *r = s->qhead;
        mhla_error e = {0};
        int rc = admit_seqs(s, r, &e);
        if (rc && e.code == MHLA_ERR_FULL && s->n_run > 0)
            break; /* waits until running requests free their pages */
        unqueue(s, r, NULL);
        if (rc) {
            fail_req(r, srv_error_from_engine(e.code), e.msg);
            retire(s, r, "error");
            continue;
        }
        s->run[s->n_run++] = r;
        s->run_seqs += r->n_choices;
        r->t_admit = srv_now();
        srv_metrics_observe(SRV_HIST_QUEUE, r->t_admit - r->t_arrive);
    }
    s->shared_run_seqs = s->run_seqs;
}

/* Drops finished requests from the running list. */
static void compact(srv_sched *s)
{
    int k = 0;
    for (int i = 0; i < s->n_run; i++) {
        srv_req *r = s->run[i];
        if (!srv_req_done(r)) {
            s->run[k++] = r;
            continue;
        }
        s->run_seqs -= r->n_choices;
        const char *reason = r->failed ? "error" : r->choices[0].finish_reason;
        free_req_engine(r);
        retire(s, r, reason ? reason : "error");
    }
    s->n_run = k;
    pthread_mutex_lock(&s->mu);
    s->shared_run_seqs = s->run_seqs;
    pthread_mutex_unlock(&s->mu);
}

/* Cancelled requests and those past their deadline end here. */
static void expire(srv_sched *s)
{
    double now = srv_now();
    for (int i = 0; i < s->n_run; i++) {
        srv_req *r = s->run[i];
        if (srv_req_cancelled(r))
            finish_all(r, "cancelled", SRV_ERR_INTERNAL, NULL);
        else if (r->t_deadline > 0 && now > r->t_deadline)
            finish_all(r, "length", SRV_ERR_INTERNAL, NULL);
    }
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
        srv_metrics_state(&st, s->promised);
    }
    if (mhla_engine_device(s->c.engine) == MHLA_DEVICE_CPU) {
        mhla_cpu_threads ct;
        mhla_engine_cpu_threads(s->c.engine, &ct);
        srv_metrics_cpu_threads(&ct);
    }
    if (mhla_engine_device(s->c.engine) == MHLA_DEVICE_CUDA) {
        mhla_device_stats ds;
        mhla_engine_device_stats(s->c.engine, &ds);
        srv_metrics_device(&ds);
    }
}

/* ---- the step: plan ---------------------------------------------------------- */

/* Reallocates the array *pp points to (any element type, `size` bytes each) to
 * cap elements; on failure it keeps the old one and returns -1. */
static int grow_to(void *pp, size_t size, int cap)
{
    void *old, *p;
    memcpy(&old, pp, sizeof old);
    if (!(p = realloc(old, (size_t)cap * size)))
        return -1;
    memcpy(pp, &p, sizeof p);
    return 0;
}

static int grow_items(srv_sched *s, int n)
{
    if (n <= s->cap_items)
        return 0;
    int cap = n * 2;
    if (grow_to(&s->refs, sizeof *s->refs, cap) || grow_to(&s->batch, sizeof *s->batch, cap) ||
        grow_to(&s->slots, sizeof *s->slots, cap))
        return -1;
    s->cap_items = cap;
    return 0;
}

static int plan_item(srv_sched *s, item_ref ref)
{
    if (grow_items(s, s->n_refs + 1))
        return -1;
    s->refs[s->n_refs++] = ref;
    s->n_rows += ref.n_rows;
    s->n_tokens += ref.n;
    return 0;
}

/* A chunk of n tokens of r's prompt g. */
static int plan_chunk(srv_sched *s, srv_req *r, int g, int n)
{
    srv_group *gr = &r->groups[g];
    int final = n == r->p.prompts[g].n - gr->pos;
    item_ref ref = {.r = r,
                    .kind = ITEM_PREFILL,
                    .idx = g,
                    .n = n,
                    .final = final,
                    .n_rows = gr->prompt_lp ? n : final};
    return plan_item(s, ref);
}

/* Every decoding choice's next token; returns the rows, -1 when out of memory. */
static int plan_decode(srv_sched *s)
{
    int rows = 0;
    for (int i = 0; i < s->n_run; i++) {
        srv_req *r = s->run[i];
        for (int c = 0; c < r->n_choices; c++) {
            if (r->choices[c].state != SRV_CH_DECODE)
                continue;
            if (plan_item(s, (item_ref){.r = r, .kind = ITEM_DECODE, .idx = c, .n = 1}))
                return -1;
            rows++;
        }
    }
    return rows;
}

static int grow_prompts(srv_sched *s, int n)
{
    if (n <= s->cap_prompts)
        return 0;
    int cap = n * 2;
    if (grow_to(&s->prompts, sizeof *s->prompts, cap) || grow_to(&s->pp, sizeof *s->pp, cap) ||
        grow_to(&s->pp_order, sizeof *s->pp_order, cap) ||
        grow_to(&s->pp_chunk, sizeof *s->pp_chunk, cap))
        return -1;
    s->cap_prompts = cap;
    return 0;
}

/* The prompts with tokens left to feed, in admission order; -1 when out of memory. */
static int gather_prompts(srv_sched *s)
{
    int n = 0;
    double now = srv_now();
    for (int i = 0; i < s->n_run; i++) {
        srv_req *r = s->run[i];
        for (int g = 0; g < r->p.n_prompts; g++) {
            int rem = r->p.prompts[g].n - r->groups[g].pos;
            if (rem <= 0)
                continue;
            if (grow_prompts(s, n + 1))
                return -1;
            s->prompts[n] = (prompt_ref){r, g};
            s->pp[n++] = (srv_plan_prompt){.remaining = rem,
                                           .fed = r->groups[g].pos,
                                           .age_s = now - r->t_arrive};
        }
    }
    return n;
}

/* The step's items, decided once: every decoding choice's next token, then
 * the prompt chunks step_plan.c sizes to the time budget (or, without a
 * target, to the token budget in arrival order). Returns the number of
 * items, -1 when out of memory. */
static int plan(srv_sched *s)
{
    s->n_refs = s->n_rows = s->n_tokens = 0;
    s->step_rows = plan_decode(s);
    int n = s->step_rows < 0 ? -1 : gather_prompts(s);
    if (n < 0)
        return -1;
    srv_plan_limits l = {.target_s = s->c.itl_target_s, .max_tokens = s->c.max_batch_tokens};
    s->step_prefill =
        srv_plan_prefill(&l, &s->cost, s->step_rows, s->pp, n, s->pp_order, s->pp_chunk);
    for (int k = 0; k < n; k++)
        if (s->pp_chunk[k] > 0 && plan_chunk(s, s->prompts[k].r, s->prompts[k].g, s->pp_chunk[k]))
            return -1;
    return s->n_refs;
}

/* ---- the step: run ----------------------------------------------------------- */

static int grow_logits(srv_sched *s, int n_rows)
{
    if (n_rows <= s->cap_rows)
        return 0;
    int cap = n_rows * 2;
    float *l = realloc(s->logits, (size_t)cap * (size_t)s->mc->vocab_size * sizeof *l);
    if (!l)
        return -1;
    s->logits = l;
    s->cap_rows = cap;
    return 0;
}

/* The engine's batch item of plan entry j; *row is the next free logits row. */
static mhla_batch_item batch_item(srv_sched *s, int j, int *row)
{
    item_ref *rf = &s->refs[j];
    srv_req *r = rf->r;
    if (rf->kind == ITEM_DECODE) {
        srv_choice *ch = &r->choices[rf->idx];
        mhla_sample_slot *sl = &s->slots[j];
        memset(sl, 0, sizeof *sl);
        sl->sampler = ch->sampler;
        sl->n_top = r->p.logprobs >= 0 ? r->p.logprobs : -1;
        return (mhla_batch_item){
            .seq = ch->seq, .tokens = &ch->last_tok, .n_tokens = 1, .logits_from = 1, .sample = sl};
    }
    size_t V = (size_t)s->mc->vocab_size;
    srv_group *gr = &r->groups[rf->idx];
    float *first = rf->n_rows ? s->logits + (size_t)*row * V : NULL;
    *row += rf->n_rows;
    rf->rows = gr->prompt_lp ? first : NULL; /* every position: the prompt's own logprobs */
    rf->row = rf->final ? first + (size_t)(rf->n_rows - 1) * V : NULL;
    return (mhla_batch_item){.seq = gr->seq,
                             .tokens = r->p.prompts[rf->idx].ids + gr->pos,
                             .n_tokens = rf->n,
                             .logits_from = gr->prompt_lp ? 0 : rf->n - rf->n_rows,
                             .logits = first};
}

/* The step's forward time feeds the cost fit and the metrics. */
static void learn(srv_sched *s, double seconds)
{
    double predicted = srv_step_cost_predict(&s->cost, s->step_rows, s->step_prefill);
    srv_step_cost_observe(&s->cost, (int)mhla_engine_device(s->c.engine), s->step_rows,
                          s->step_prefill, seconds);
    srv_metrics_observe(SRV_HIST_STEP, seconds);
    if (srv_log_enabled(MHLA_LOG_DEBUG)) /* every step: the planner's record */
        srv_logf(MHLA_LOG_DEBUG, "step",
                 "decode_rows %d prefill_tokens %d took %.3f ms (predicted %.3f ms); costs now "
                 "fixed %.4f ms, per row %.4f ms, per prompt token %.5f ms",
                 s->step_rows, s->step_prefill, seconds * 1e3, predicted * 1e3,
                 s->cost.theta[0] * 1e3, s->cost.theta[1] * 1e3, s->cost.theta[2] * 1e3);
    srv_metrics_step_plan(s->step_prefill, s->cost.theta);
}

/* One forward pass over the plan. On failure nothing advanced and every
 * request of the batch fails with the cause. */
static int run(srv_sched *s)
{
    mhla_error e = {0};
    const char *why = NULL;
    srv_errcode code = SRV_ERR_INTERNAL;
    if (grow_logits(s, s->n_rows)) {
        why = "out of memory for the batch";
    } else {
        int row = 0;
        for (int j = 0; j < s->n_refs; j++)
            s->batch[j] = batch_item(s, j, &row);
        double t0 = srv_now();
        if (mhla_engine_forward(s->c.engine, s->batch, s->n_refs, &e)) {
            why = e.msg;
            code = srv_error_from_engine(e.code);
        } else {
            learn(s, srv_now() - t0);
        }
    }
    if (!why)
        return 0;
    for (int j = 0; j < s->n_refs; j++)
        fail_req(s->refs[j].r, code, why);
    return -1;
}

/* ---- the step: apply --------------------------------------------------------- */

static int oom(char *err, size_t errlen)
{
    snprintf(err, errlen, "out of memory while emitting text");
    return -1;
}

/* Decodes token tok of choice c through its stop strings into s->emit;
 * *reason is set when the choice ends here. */
static int emit_text(srv_sched *s, srv_choice *c, int32_t tok, int is_eos, int last,
                     const char **reason, char *err, size_t errlen)
{
    const char *piece;
    size_t len;
    s->emit.len = 0;
    *reason = is_eos ? "stop" : NULL;
    if (!is_eos) {
        if (srv_codec_stream_push(c->dec, tok, &piece, &len, err, errlen))
            return -1;
        c->dec_chars += srv_utf8_chars(piece, len);
        int st = srv_stopper_feed(&c->stopper, piece, len, &s->emit);
        if (st < 0)
            return oom(err, errlen);
        if (st == 1)
            *reason = "stop";
        if (st == 1 || !last)
            return 0;
    }
    if (srv_codec_stream_finish(c->dec, &piece, &len, err, errlen))
        return -1;
    int st = srv_stopper_feed(&c->stopper, piece, len, &s->emit);
    if (st < 0 || (st == 0 && srv_stopper_flush(&c->stopper, &s->emit)))
        return oom(err, errlen);
    if (!*reason)
        *reason = st == 1 ? "stop" : "length";
    return 0;
}

static void observe_latency(srv_req *r, srv_choice *c)
{
    double now = srv_now();
    if (c->n_ids > 0)
        srv_metrics_observe(SRV_HIST_ITL, now - c->t_last);
    else if (r->t_first == 0) {
        r->t_first = now;
        srv_metrics_observe(SRV_HIST_TTFT, now - r->t_arrive);
    }
    c->t_last = now;
    srv_metrics_tokens(0, 1);
}

/* Hands choice ci's next token (sampled by the engine's step or by deliver)
 * to request r; ends the choice when it is done. */
static int deliver_token(srv_sched *s, srv_req *r, int ci, int32_t tok, float tok_lp,
                         const mhla_logprob *top, char *err, size_t errlen)
{
    srv_choice *c = &r->choices[ci];
    srv_token t = {.id = tok, .lp = {.logprob = tok_lp, .text_offset = c->dec_chars}, .top = top};
    observe_latency(r, c);
    int is_eos = srv_gen_is_eos(s->c.gen, tok) && !r->p.ignore_eos;
    int last = is_eos || c->n_ids + 1 >= r->p.max_tokens;
    if (emit_text(s, c, tok, is_eos, last, &t.finish, err, errlen))
        return -1;
    t.text = s->emit.p;
    t.len = s->emit.len;
    if (srv_req_push_token(r, ci, &t))
        return oom(err, errlen);
    if (!t.finish) {
        c->last_tok = tok;
        return 0;
    }
    if (s->c.state_pool) { /* its end state stays for resume */
        mhla_seq_finish(c->seq);
        c->seq = NULL;
    }
    free_choice_engine(c);
    return 0;
}

/* Samples the next token of choice ci from its logits row and hands it to
 * request r; ends the choice when it is done. */
static int deliver(srv_sched *s, srv_req *r, int ci, const float *row, char *err, size_t errlen)
{
    srv_choice *c = &r->choices[ci];
    int32_t tok;
    mhla_error me = {0};
    int K = r->p.logprobs;
    float lp = 0;
    mhla_logprob top[MHLA_MAX_TOP_LOGPROBS];
    if (mhla_sampler_next(c->sampler, row, &tok, &me) ||
        (K >= 0 && mhla_logprobs(row, s->mc->vocab_size, tok, K, &lp, top, &me))) {
        snprintf(err, errlen, "%s", me.msg);
        return -1;
    }
    return deliver_token(s, r, ci, tok, lp, top, err, errlen);
}

/* echo + logprobs: the logits of prompt position t give the logprobs of
 * prompt token t + 1 (the first prompt token has none). */
static int prompt_logprobs(srv_sched *s, srv_req *r, const item_ref *rf, char *err, size_t errlen)
{
    srv_group *gr = &r->groups[rf->idx];
    const srv_prompt *pr = &r->p.prompts[rf->idx];
    int K = r->p.logprobs, V = s->mc->vocab_size;
    mhla_error e = {0};
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

/* The n - 1 clones of group g's prefill sequence (which goes to the first
 * choice), each with its own reservation. */
static int clone_choices(srv_sched *s, srv_req *r, int g, char *err, size_t errlen)
{
    srv_group *gr = &r->groups[g];
    int n = r->p.n;
    long need = (long)r->p.prompts[g].n + r->p.max_tokens;
    mhla_error e = {0};
    for (int k = n - 1; k > 0; k--) {
        srv_choice *c = &r->choices[g * n + k];
        if (mhla_seq_clone(gr->seq, &c->seq, &e) ||
            (s->c.state_pool && mhla_seq_reserve(c->seq, need, &e))) {
            snprintf(err, errlen, "%s", e.msg);
            return -1;
        }
    }
    r->choices[g * n].seq = gr->seq;
    gr->seq = NULL;
    s->promised -= gr->promised; /* the clones hold their own reservations now */
    gr->promised = 0;
    return 0;
}

/* Choice ci of group g: its sampler, decoder and stop strings, then its
 * first token from the prompt's last logits. */
static int start_choice(srv_sched *s, srv_req *r, int g, int k, const float *row, char *err,
                        size_t errlen)
{
    int ci = g * r->p.n + k;
    srv_choice *c = &r->choices[ci];
    mhla_sampling_params sp = r->p.sampling;
    sp.logit_bias = r->p.bias;
    sp.n_logit_bias = r->p.n_bias;
    sp.seed = r->p.has_seed ? r->p.seed + (uint64_t)k * 0x9e3779b97f4a7c15ull : srv_random_u64();
    mhla_error e = {0};
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
    srv_req_set_decoding(r, ci);
    return deliver(s, r, ci, row, err, errlen);
}

/* Starts decoding the choices of group g from the prompt's last logits. */
static int start_group(srv_sched *s, srv_req *r, int g, const float *row, char *err, size_t errlen)
{
    if (clone_choices(s, r, g, err, errlen))
        return -1;
    for (int k = 0; k < r->p.n; k++)
        if (start_choice(s, r, g, k, row, err, errlen))
            return -1;
    return 0;
}

/* The result of plan entry j: a sampled token, or a prompt chunk consumed. */
static int apply_item(srv_sched *s, int j, char *err, size_t errlen)
{
    item_ref *rf = &s->refs[j];
    srv_req *r = rf->r;
    if (rf->kind == ITEM_DECODE) {
        const mhla_sample_slot *sl = s->batch[j].sample;
        if (sl->status) {
            snprintf(err, errlen, "%s", sl->err.msg);
            return -1;
        }
        return deliver_token(s, r, rf->idx, sl->token, sl->token_logprob, sl->top, err, errlen);
    }
    if (rf->rows && prompt_logprobs(s, r, rf, err, errlen))
        return -1;
    r->groups[rf->idx].pos += rf->n;
    srv_metrics_tokens(rf->n, 0);
    return rf->final ? start_group(s, r, rf->idx, rf->row, err, errlen) : 0;
}

static void apply(srv_sched *s)
{
    char err[512];
    srv_metrics_step(s->n_refs, s->n_tokens);
    for (int j = 0; j < s->n_refs; j++) {
        srv_req *r = s->refs[j].r;
        if (!srv_req_done(r) && apply_item(s, j, err, sizeof err))
            fail_req(r, SRV_ERR_INTERNAL, err);
    }
}

/* One engine step over the running requests; returns the items it ran. */
static int step(srv_sched *s)
{
    expire(s);
    compact(s);
    int n = plan(s);
    if (n < 0) {
        for (int i = 0; i < s->n_run; i++)
            fail_req(s->run[i], SRV_ERR_INTERNAL, "out of memory for the batch");
        n = 0;
    } else if (n > 0 && run(s) == 0) {
        apply(s);
    }
    compact(s);
    return n;
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
        admit(s);
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
    srv_step_cost_reset(&s->cost, (int)mhla_engine_device(c->engine));
    srv_metrics_itl_target(c->itl_target_s);
    if (c->state_pool) {
        mhla_state_stats st;
        mhla_engine_state_stats(c->engine, &st);
        s->pages_total = st.pages_total;
        srv_metrics_state(&st, 0);
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
        finish_all(s->run[i], "error", SRV_ERR_INTERNAL,
                   "the server shut down before the request finished");
        retire(s, s->run[i], "error");
    }
    s->n_run = 0;
    while (s->qhead) {
        srv_req *r = s->qhead;
        s->qhead = r->next;
        finish_all(r, "error", SRV_ERR_INTERNAL, "the server shut down before the request started");
        retire(s, r, "error");
    }
    free(s->run);
    free(s->batch);
    free(s->refs);
    free(s->logits);
    free(s->slots);
    free(s->prompts);
    free(s->pp);
    free(s->pp_order);
    free(s->pp_chunk);
    mhla_buf_free(&s->emit);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
