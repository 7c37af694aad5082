/*
 * sched.c — continuous batching. One engine thread owns every sequence; HTTP
 * threads only enqueue requests (bounded queue) and read their results.
 * A request's sequences are made when it is admitted from the queue. Each
 * step then plans the batch once (every running sequence's next decode
 * token plus chunks of waiting prompts that step_plan.c sizes to the step's
 * time budget: chunked prefill, so a long prompt never stalls running
 * streams), runs one timed mhla_engine_step call, in which the engine
 * chooses every token (a decode row's next, a finished prompt's first for
 * each of its choices, an echoed prompt's own logprobs), and applies the
 * results: output.c hands each token to its request, and finished prompts
 * start their choices. Requests join and leave at every step; a cancelled
 * request's state is freed at the next step.
 */
#include "server_internal.h"
#include "step_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ITEM_DECODE, ITEM_PREFILL };

/* One item of a step's plan: what it feeds and the tokens the engine
 * chooses for it. */
typedef struct {
    srv_req *r;
    int kind, idx, n, final;
    int n_slots; /* sample slots: 1 + drafts for a decode row, n for a prompt's last chunk */
    int slot0;   /* its first in the step's slots */
    int feed0;   /* a decode row's tokens in the step's feed: its last token, then drafts */
    int want;    /* --speculate draft: drafts the cost rule allows (the draft model proposes) */
    int end;     /* a decode row's text (prompt + output) before the step */
} item_ref;

/* A prompt still prefilling, as the step planner sees it. */
typedef struct {
    srv_req *r;
    int g;
} prompt_ref;

struct srv_sched {
    srv_sched_options c;
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
    int n_refs, n_slots, n_tokens;
    int step_rows, step_prefill; /* the plan's decode rows and prompt tokens */
    int step_closes;             /* the blocks its items close */
    int step_drafts;             /* the plan's drafted tokens (spec.c) */
    int prompts_waiting;         /* this step feeds prompt tokens: it drafts nothing */
    int32_t *feed;               /* the decode rows' tokens: each last token, then its drafts */
    int n_feed, cap_feed;
    int on_gpu;
    srv_spec_cost spec_cost; /* a drafted token's share of a step */
    srv_draft_row *drows;    /* --speculate draft: the step's drafting rows */
    int *drow_ref, cap_drows, cap_drow_ref;
    double draft_s;    /* the draft model's time in this step */
    int draft_catchup; /* tokens its rows fed to catch up (not a draft's cost) */
    long n_steps;
    srv_step_cost cost;  /* learned from every step's forward time */
    prompt_ref *prompts; /* the step planner's input and output */
    srv_plan_prompt *pp;
    int *pp_order, *pp_chunk;
    int cap_prompts;
    mhla_batch_item *batch;
    int cap_items, cap_batch;
    mhla_sample_slot *slots; /* the engine chooses every token inside the step */
    int cap_slots;
    srv_output out; /* a chosen token's way to its request */
};

/* ---- finishing ------------------------------------------------------------- */

static void free_req_engine(srv_req *r)
{
    for (int i = 0; i < r->n_choices; i++)
        srv_choice_free_engine(&r->choices[i]);
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
    srv_metrics_observe(SRV_HIST_E2E, mhla_now() - r->t_arrive);
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
    /* the prompt's own logprobs need every prompt position's logits: no cache. A
     * prefix read from the disk tier is read in the background (poll_loads). */
    int pos = r->p.prompt_logprobs
                  ? 0
                  : mhla_seq_match_prefix_start(gr->seq, pr->ids, pr->n, &gr->loading, e);
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
        srv_req_lock(r);
        r->cached_tokens = matched; /* the usage's prompt_tokens_details */
        srv_req_unlock(r);
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

/* A constrained choice's matcher, whose mask its sample slots carry. */
static int make_grammar(srv_sched *s, srv_req *r, int ci, mhla_error *e)
{
    srv_choice *c = &r->choices[ci];
    if (srv_row_grammar_create(r->p.grammar, s->mc->vocab_size, &c->grammar, &c->mask, e->msg,
                               sizeof e->msg)) {
        e->code = MHLA_ERR_NOMEM;
        return -1;
    }
    srv_metrics_grammar_row();
    return 0;
}

/* Each choice's sampler, made at admission: the engine samples its first
 * token from the prompt's last logits in the step that finishes the prompt. */
static int make_samplers(srv_sched *s, srv_req *r, mhla_error *e)
{
    for (int ci = 0; ci < r->n_choices; ci++) {
        int g = ci / r->p.n, k = ci % r->p.n;
        mhla_sampling_params sp = r->p.sampling;
        sp.logit_bias = r->p.bias;
        sp.n_logit_bias = r->p.n_bias;
        sp.seed =
            r->p.has_seed ? r->p.seed + (uint64_t)k * 0x9e3779b97f4a7c15ull : srv_random_u64();
        if (mhla_sampler_create(&sp, s->mc->vocab_size, r->p.prompts[g].ids, r->p.prompts[g].n,
                                &r->choices[ci].sampler, e))
            return -1;
        if (r->p.grammar && make_grammar(s, r, ci, e))
            return -1;
    }
    return 0;
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
    return mhla_grow(&s->run, sizeof *s->run, &s->cap_run, s->n_run + 1);
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
        if (rc == 0)
            rc = make_samplers(s, r, &e);
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
        r->t_admit = mhla_now();
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
    double now = mhla_now();
    for (int i = 0; i < s->n_run; i++) {
        srv_req *r = s->run[i];
        if (srv_req_cancelled(r))
            finish_all(r, "cancelled", SRV_ERR_INTERNAL, NULL);
        else if (r->t_deadline > 0 &&
                 now > r->t_deadline) /* not "length": alerts tell them apart */
            finish_all(r, "timeout", SRV_ERR_INTERNAL, NULL);
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
        srv_state_disk_watch(&st);
    }
    srv_metrics_engine(s->c.engine);
    srv_metrics_spec_engine(s->c.engine);
}

/* ---- the step: plan ---------------------------------------------------------- */

static int plan_item(srv_sched *s, item_ref ref)
{
    if (mhla_grow(&s->refs, sizeof *s->refs, &s->cap_items, s->n_refs + 1))
        return -1;
    ref.slot0 = s->n_slots;
    s->refs[s->n_refs++] = ref;
    s->n_slots += ref.n_slots;
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
                    .n_slots = final ? r->p.n : 0};
    return plan_item(s, ref);
}

/* Drafts choice ch may verify this step: none under a grammar (docs/architecture.md,
 * "Grammar rows do not draft"), on a GPU only for greedy rows without logprobs
 * (whose lone slot the device samples with the host's bits), never past
 * max_tokens, a block or the context. */
static int draft_room(const srv_sched *s, const srv_req *r, const srv_choice *ch)
{
    if (!s->c.speculate || ch->grammar ||
        (s->on_gpu && (r->p.sampling.temperature > 0.0f || r->p.logprobs >= 0)))
        return 0;
    int k = s->c.draft_max < s->mc->chunk_size - 1 ? s->c.draft_max : s->mc->chunk_size - 1;
    int left = r->p.max_tokens - ch->n_ids - 1;
    int ctx = s->mc->max_positions - mhla_seq_pos(ch->seq) - 1;
    k = left < k ? left : k;
    k = ctx < k ? ctx : k;
    return k < 0 ? 0 : k;
}

/* A drafted token's cost until steps with drafts have been timed: a prompt
 * token's, and with a draft model its step's share of a row (its weights
 * over the model's times a decode row's time). */
static double stand_in(const srv_sched *s, double per_row)
{
    double c = s->cost.theta[SRV_COST_PER_TOKEN];
    if (s->c.speculate == SRV_SPEC_DRAFT)
        c += per_row * srv_drafter_cost_ratio(s->c.drafter, s->c.model);
    return c;
}

/* Choice ci's feed this step: its last token, then the drafts that pay
 * beside rows decode rows. Returns the drafts, -1 when out of memory; with
 * a draft model -2 - k: room for k drafts it proposes later (draft_phase). */
static int plan_feed(srv_sched *s, srv_req *r, int ci, int rows, int *feed0)
{
    srv_choice *ch = &r->choices[ci];
    if (mhla_grow(&s->feed, sizeof *s->feed, &s->cap_feed, s->n_feed + s->c.draft_max + 1))
        return -1;
    *feed0 = s->n_feed;
    s->feed[s->n_feed++] = ch->last_tok;
    /* one step in SRV_PLAN_REFRESH_STEPS drafts nothing: the planner's decode costs
     * stay measured; nor does a step that feeds a prompt: its chunk has the step's
     * time left after the decode rows, and the planner learns its costs from steps
     * without drafts */
    int refresh = s->n_steps % SRV_PLAN_REFRESH_STEPS == SRV_PLAN_REFRESH_STEPS - 1;
    int room = refresh || s->prompts_waiting ? 0 : draft_room(s, r, ch);
    if (room <= 0)
        return 0;
    /* a batch size's first step is plain: what a draft must beat is measured first */
    double per_row = srv_spec_cost_per_row(&s->spec_cost, rows);
    if (per_row <= 0.0)
        return 0;
    /* until steps with drafts have been timed, a prompt token's cost stands in */
    double per_tok = srv_spec_cost_per_token(&s->spec_cost, rows);
    per_tok = per_tok > 0.0 ? per_tok : stand_in(s, per_row);
    int k = srv_spec_length(&ch->spec, room, per_row, per_tok);
    int floor = s->c.draft_min < room ? s->c.draft_min : room;
    k = k < floor ? floor : k;
    if (s->c.speculate == SRV_SPEC_DRAFT) {
        s->n_feed += ch->draft.off ? 0 : k; /* room for what the draft model proposes */
        return ch->draft.off ? 0 : -2 - k;
    }
    const srv_prompt *pr = &r->p.prompts[ch->group];
    srv_spec_text t = {.prompt = pr->ids, .n_prompt = pr->n, .out = ch->ids, .n_out = ch->n_ids};
    k = k > 0 ? srv_spec_lookup(&t, s->c.draft_ngram, k, s->feed + s->n_feed) : 0;
    s->n_feed += k;
    return k;
}

static int count_decode_rows(const srv_sched *s)
{
    int rows = 0;
    for (int i = 0; i < s->n_run; i++)
        for (int c = 0; c < s->run[i]->n_choices; c++)
            rows += s->run[i]->choices[c].state == SRV_CH_DECODE;
    return rows;
}

/* Every decoding choice's next token, and its drafts; returns the rows, -1
 * when out of memory. */
static int plan_decode(srv_sched *s)
{
    int rows = count_decode_rows(s);
    s->n_feed = s->step_drafts = 0;
    for (int i = 0; i < s->n_run; i++) {
        srv_req *r = s->run[i];
        for (int c = 0; c < r->n_choices; c++) {
            if (r->choices[c].state != SRV_CH_DECODE)
                continue;
            int feed0, k = plan_feed(s, r, c, rows, &feed0), want = k < -1 ? -2 - k : 0;
            k = k < -1 ? 0 : k;
            if (k < 0 || plan_item(s, (item_ref){.r = r,
                                                 .kind = ITEM_DECODE,
                                                 .idx = c,
                                                 .n = 1 + k,
                                                 .n_slots = 1 + k,
                                                 .feed0 = feed0,
                                                 .want = want,
                                                 .end = r->p.prompts[r->choices[c].group].n +
                                                        r->choices[c].n_ids}))
                return -1;
            s->step_drafts += k;
        }
    }
    return rows;
}

/* Row j of the draft phase: decode item ref's choice, its text and room. */
static srv_draft_row draft_row(srv_sched *s, const item_ref *rf)
{
    srv_req *r = rf->r;
    srv_choice *ch = &r->choices[rf->idx];
    const srv_prompt *pr = &r->p.prompts[ch->group];
    return (srv_draft_row){
        .st = &ch->draft,
        .text = {.prompt = pr->ids, .n_prompt = pr->n, .out = ch->ids, .n_out = ch->n_ids},
        .reserve = (long)pr->n + r->p.max_tokens + s->c.draft_max,
        .want = rf->want,
        .out = s->feed + rf->feed0 + 1};
}

/* --speculate draft: the draft model proposes what each row's rule allows,
 * one draft-engine step per draft position for all rows at once; its time
 * counts as the drafts' cost (learn). The decode items then take their
 * drafts, and every item's slots move up. -1 when out of memory. */
static int draft_phase(srv_sched *s)
{
    int n = 0;
    s->draft_s = 0.0;
    s->draft_catchup = 0;
    for (int j = 0; j < s->n_refs; j++) {
        if (s->refs[j].want <= 0)
            continue;
        if (mhla_grow(&s->drows, sizeof *s->drows, &s->cap_drows, n + 1) ||
            mhla_grow(&s->drow_ref, sizeof *s->drow_ref, &s->cap_drow_ref, n + 1))
            return -1;
        s->drow_ref[n] = j;
        s->drows[n++] = draft_row(s, &s->refs[j]);
    }
    if (n == 0)
        return 0;
    char err[512];
    double t0 = mhla_now();
    if (srv_drafter_propose(s->c.drafter, s->drows, n, &s->draft_catchup, err, sizeof err))
        srv_logf(MHLA_LOG_WARN, "draft", "no drafts this step: %s", err);
    s->draft_s = mhla_now() - t0;
    s->n_slots = s->n_tokens = 0;
    for (int i = 0; i < n; i++) {
        item_ref *rf = &s->refs[s->drow_ref[i]];
        rf->n = rf->n_slots = 1 + s->drows[i].got;
        s->step_drafts += s->drows[i].got;
    }
    for (int j = 0; j < s->n_refs; j++) {
        s->refs[j].slot0 = s->n_slots;
        s->n_slots += s->refs[j].n_slots;
        s->n_tokens += s->refs[j].n;
    }
    return 0;
}

static int grow_prompts(srv_sched *s, int n)
{
    if (n <= s->cap_prompts)
        return 0;
    int c1 = s->cap_prompts, c2 = c1, c3 = c1, c4 = c1;
    if (mhla_grow(&s->prompts, sizeof *s->prompts, &c1, n) ||
        mhla_grow(&s->pp, sizeof *s->pp, &c2, c1) ||
        mhla_grow(&s->pp_order, sizeof *s->pp_order, &c3, c1) ||
        mhla_grow(&s->pp_chunk, sizeof *s->pp_chunk, &c4, c1))
        return -1;
    s->cap_prompts = c1;
    return 0;
}

/* The prompts with tokens left to feed, in admission order; -1 when out of memory. */
static int gather_prompts(srv_sched *s)
{
    int n = 0;
    double now = mhla_now();
    for (int i = 0; i < s->n_run; i++) {
        srv_req *r = s->run[i];
        for (int g = 0; g < r->p.n_prompts; g++) {
            int rem = r->p.prompts[g].n - r->groups[g].pos;
            if (rem <= 0 || r->groups[g].loading)
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

/* Blocks the step's items close: a row or a chunk that reaches a block's end. */
static int count_closes(const srv_sched *s)
{
    int C = s->mc->chunk_size, n = 0;
    for (int j = 0; j < s->n_refs; j++) {
        const item_ref *rf = &s->refs[j];
        int pos = rf->kind == ITEM_DECODE ? mhla_seq_pos(rf->r->choices[rf->idx].seq)
                                          : rf->r->groups[rf->idx].pos;
        n += (pos + rf->n) / C - pos / C;
    }
    return n;
}

/* The step's items, decided once: every decoding choice's next token, then
 * the prompt chunks step_plan.c sizes to the time budget (or, without a
 * target, to the token budget in arrival order). Returns the number of
 * items, -1 when out of memory. */
static int plan(srv_sched *s)
{
    s->n_refs = s->n_slots = s->n_tokens = 0;
    int n = gather_prompts(s);
    s->prompts_waiting = n > 0 && s->c.itl_target_s > 0;
    s->step_rows = n < 0 ? -1 : plan_decode(s);
    if (s->step_rows < 0 || draft_phase(s))
        return -1;
    srv_plan_limits l = {.target_s = s->c.itl_target_s,
                         .max_tokens = s->c.max_batch_tokens,
                         .block_tokens = s->mc->chunk_size,
                         .decode_closes = count_closes(s)};
    s->step_prefill =
        srv_plan_prefill(&l, &s->cost, s->step_rows, s->pp, n, s->pp_order, s->pp_chunk);
    for (int k = 0; k < n; k++)
        if (s->pp_chunk[k] > 0 && plan_chunk(s, s->prompts[k].r, s->prompts[k].g, s->pp_chunk[k]))
            return -1;
    s->step_closes = count_closes(s);
    return s->n_refs;
}

/* ---- the step: run ----------------------------------------------------------- */

/* Decode item j: its choice's next token, and a slot after each draft,
 * which the engine verifies (a skipped slot follows a draft it did not take). */
static mhla_batch_item decode_item(srv_sched *s, const item_ref *rf)
{
    srv_choice *ch = &rf->r->choices[rf->idx];
    mhla_sample_slot *sl = &s->slots[rf->slot0];
    for (int j = 0; j < rf->n_slots; j++) {
        memset(&sl[j], 0, sizeof sl[j]);
        sl[j].sampler = ch->sampler;
        sl[j].mask = ch->grammar ? &ch->mask : NULL;
        sl[j].at = j;
        sl[j].n_top = rf->r->p.logprobs >= 0 ? rf->r->p.logprobs : -1;
    }
    return (mhla_batch_item){.seq = ch->seq,
                             .tokens = s->feed + rf->feed0,
                             .n_tokens = rf->n,
                             .logits_from = rf->n,
                             .sample = sl,
                             .n_samples = rf->n_slots};
}

/* A prompt chunk: with prompt logprobs the scores of its next tokens; the
 * last chunk samples each choice's first token from its last position. */
static mhla_batch_item prefill_item(srv_sched *s, const item_ref *rf)
{
    srv_req *r = rf->r;
    srv_group *gr = &r->groups[rf->idx];
    const srv_prompt *pr = &r->p.prompts[rf->idx];
    mhla_batch_item it = {.seq = gr->seq,
                          .tokens = pr->ids + gr->pos,
                          .n_tokens = rf->n,
                          .logits_from = rf->n,
                          .sample = rf->n_slots ? &s->slots[rf->slot0] : NULL,
                          .n_samples = rf->n_slots};
    for (int k = 0; k < rf->n_slots; k++) {
        mhla_sample_slot *sl = &s->slots[rf->slot0 + k];
        memset(sl, 0, sizeof *sl);
        srv_choice *ch = &r->choices[rf->idx * r->p.n + k];
        sl->sampler = ch->sampler;
        sl->mask = ch->grammar ? &ch->mask : NULL;
        sl->at = rf->n - 1;
        sl->n_top = r->p.logprobs >= 0 ? r->p.logprobs : -1;
    }
    if (r->p.prompt_logprobs) { /* prompt token t + 1 under position t's logits */
        int K = r->p.logprobs, from = gr->pos + 1, left = pr->n - from;
        gr->scores = (mhla_token_scores){.next = pr->ids + from,
                                         .n_next = left < rf->n ? left : rf->n,
                                         .n_top = K,
                                         .logprob = gr->prompt_logprob + from,
                                         .top = K ? gr->prompt_tops + (size_t)from * K : NULL};
        it.scores = &gr->scores;
    }
    return it;
}

static int grow_step(srv_sched *s)
{
    return mhla_grow(&s->batch, sizeof *s->batch, &s->cap_batch, s->n_refs) ||
           mhla_grow(&s->slots, sizeof *s->slots, &s->cap_slots, s->n_slots);
}

/* The process's CPU seconds so far (every thread's): beside a step's wall
 * time in the step log, it tells a step that did more work from one whose
 * threads waited for a CPU (a busy machine). */
static double cpu_seconds(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
        return 0.0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The step's debug record: its shape, wall time against the prediction, the
 * process's CPU time over it and the engine's threads taking part (and how
 * often so far they were reduced). */
static void log_step(const srv_sched *s, double seconds, double predicted, double cpu)
{
    mhla_cpu_threads th = {0};
    mhla_engine_cpu_threads(s->c.engine, &th);
    srv_logf(MHLA_LOG_DEBUG, "step",
             "decode_rows %d prefill_tokens %d block_closes %d drafts %d took %.3f ms (predicted "
             "%.3f ms) cpu %.3f ms threads_active %d thread_reductions %ld; costs now fixed %.4f "
             "ms, per row %.4f ms, per prompt token %.5f ms, per block close %.4f ms",
             s->step_rows, s->step_prefill, s->step_closes, s->step_drafts, seconds * 1e3,
             predicted * 1e3, cpu * 1e3, th.active, th.reductions, s->cost.theta[0] * 1e3,
             s->cost.theta[1] * 1e3, s->cost.theta[2] * 1e3, s->cost.theta[3] * 1e3);
}

/* The step's forward time feeds the cost fit and the metrics. */
static void learn(srv_sched *s, double seconds, double cpu)
{
    double predicted =
        srv_step_cost_predict(&s->cost, s->step_rows, s->step_prefill, s->step_closes);
    s->n_steps++;
    /* a step's drafts are timed apart (spec.c), against plain steps of its size;
     * the planner learns from the steps without drafts */
    /* a draft model's catch-up on a prompt is its prefill, not what drafts cost */
    if (s->step_prefill == 0 && s->step_drafts > 0) {
        if (s->draft_catchup == 0)
            srv_spec_cost_observe(&s->spec_cost, s->step_rows, s->step_drafts,
                                  seconds + s->draft_s);
    } else if (s->step_prefill == 0) {
        srv_spec_cost_plain(&s->spec_cost, s->step_rows, seconds);
    }
    if (s->step_drafts == 0)
        srv_step_cost_observe(&s->cost, (int)mhla_engine_device(s->c.engine), s->step_rows,
                              s->step_prefill, s->step_closes, seconds);
    srv_metrics_observe(SRV_HIST_STEP, seconds);
    if (srv_log_enabled(MHLA_LOG_DEBUG)) /* every step: the planner's record */
        log_step(s, seconds, predicted, cpu);
    srv_metrics_step_plan(s->step_prefill, s->cost.theta);
    srv_metrics_step_budget(s->step_rows, seconds);
}

/* One forward pass over the plan. On failure nothing advanced and every
 * request of the batch fails with the cause. */
static int run(srv_sched *s)
{
    mhla_error e = {0};
    const char *why = NULL;
    srv_errcode code = SRV_ERR_INTERNAL;
    if (grow_step(s)) {
        why = "out of memory for the batch";
    } else {
        for (int j = 0; j < s->n_refs; j++)
            s->batch[j] = s->refs[j].kind == ITEM_DECODE ? decode_item(s, &s->refs[j])
                                                         : prefill_item(s, &s->refs[j]);
        double t0 = mhla_now(), c0 = cpu_seconds();
        if (mhla_engine_step(s->c.engine, s->batch, s->n_refs, &e)) {
            why = e.msg;
            code = srv_error_from_engine(e.code);
        } else {
            learn(s, mhla_now() - t0, cpu_seconds() - c0);
        }
    }
    if (!why)
        return 0;
    for (int j = 0; j < s->n_refs; j++)
        fail_req(s->refs[j].r, code, why);
    return -1;
}

/* ---- the step: apply --------------------------------------------------------- */

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

/* The choices of group g start decoding, each from the first token the
 * engine sampled for it from the prompt's last logits. */
static int start_group(srv_sched *s, srv_req *r, const item_ref *rf, char *err, size_t errlen)
{
    if (clone_choices(s, r, rf->idx, err, errlen))
        return -1;
    for (int k = 0; k < r->p.n; k++) {
        int ci = rf->idx * r->p.n + k;
        srv_spec_row_init(&r->choices[ci].spec, s->c.draft_max);
        if (srv_output_start(&s->out, r, ci, err, errlen) ||
            srv_output_token(&s->out, r, ci, &s->slots[rf->slot0 + k], err, errlen))
            return -1;
    }
    return 0;
}

/* A decode row's tokens: the first, then one after each draft the model
 * chose too, until a skipped slot or the choice's end (a stop string, max_tokens). */
static int apply_decode(srv_sched *s, const item_ref *rf, char *err, size_t errlen)
{
    srv_choice *ch = &rf->r->choices[rf->idx];
    int drafted = rf->n - 1, accepted = 0;
    for (int j = 0; j < rf->n_slots; j++) {
        const mhla_sample_slot *sl = &s->slots[rf->slot0 + j];
        if (sl->status == MHLA_SLOT_SKIPPED)
            break;
        if (srv_output_token(&s->out, rf->r, rf->idx, sl, err, errlen))
            return -1;
        accepted += j < drafted && sl->token == s->feed[rf->feed0 + j + 1];
        if (!ch->seq) /* finished */
            break;
    }
    if (drafted > 0) {
        srv_metrics_spec(s->c.speculate, drafted, accepted);
        srv_spec_row_update(&ch->spec, drafted, accepted, s->c.draft_max);
    }
    if (rf->want > 0) /* the draft model's state goes back to the accepted text */
        srv_draft_settle(&ch->draft, rf->end, accepted);
    return 0;
}

/* The result of plan entry j: a decode row's tokens, or a prompt chunk consumed. */
static int apply_item(srv_sched *s, int j, char *err, size_t errlen)
{
    item_ref *rf = &s->refs[j];
    srv_req *r = rf->r;
    if (rf->kind == ITEM_DECODE)
        return apply_decode(s, rf, err, errlen);
    srv_group *gr = &r->groups[rf->idx];
    if (s->batch[j].scores && gr->scores.status) {
        snprintf(err, errlen, "%s", gr->scores.err.msg);
        return -1;
    }
    gr->pos += rf->n;
    srv_metrics_tokens(rf->n, 0);
    return rf->final ? start_group(s, r, rf, err, errlen) : 0;
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

/* Prompts whose prefix finished loading from the disk tier join the next
 * plan, from where the load got them (the tokens after a missing or bad
 * file are computed). Returns the groups still loading. */
static int poll_loads(srv_sched *s)
{
    int still = 0;
    for (int i = 0; i < s->n_run; i++) {
        srv_req *r = s->run[i];
        for (int g = 0; g < r->p.n_prompts; g++) {
            srv_group *gr = &r->groups[g];
            if (!gr->loading || srv_req_done(r))
                continue;
            mhla_error e = {0};
            int done, pos = mhla_seq_match_poll(gr->seq, 0, &done, &e);
            still += !done;
            if (!done)
                continue;
            gr->loading = 0;
            if (pos < 0) {
                fail_req(r, srv_error_from_engine(e.code), e.msg);
                continue;
            }
            srv_metrics_tokens(pos - gr->pos, 0);
            srv_req_lock(r);
            r->cached_tokens += pos - gr->pos;
            srv_req_unlock(r);
            gr->pos = pos;
        }
    }
    return still;
}

/* One engine step over the running requests; returns the items it ran, or
 * -1 when it ran none while prefixes are loading from disk. */
static int step(srv_sched *s)
{
    expire(s);
    compact(s);
    int loading = poll_loads(s);
    int n = plan(s);
    if (n < 0) {
        for (int i = 0; i < s->n_run; i++)
            fail_req(s->run[i], SRV_ERR_INTERNAL, "out of memory for the batch");
        n = 0;
    } else if (n > 0 && run(s) == 0) {
        apply(s);
    }
    compact(s);
    return n == 0 && loading ? -1 : n;
}

/* Nothing to step but prefixes loading from disk: a short nap, cut short
 * by a new request (the loader's end is polled, it signals nothing). */
static void wait_loads(srv_sched *s)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += 1000000;
    if (t.tv_nsec >= 1000000000) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&s->mu);
    if (!s->stop)
        pthread_cond_timedwait(&s->cv, &s->mu, &t);
    pthread_mutex_unlock(&s->mu);
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
        int ran = step(s);
        update_gauges(s);
        if (ran < 0)
            wait_loads(s);
    }
    return NULL;
}

int srv_sched_create(const srv_sched_options *c, srv_sched **out, char *err, size_t errlen)
{
    *out = NULL;
    srv_sched *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory for the scheduler");
        return -1;
    }
    s->c = *c;
    s->mc = mhla_model_config(c->model);
    s->on_gpu = mhla_engine_device(c->engine) == MHLA_DEVICE_CUDA;
    s->out = (srv_output){.codec = c->codec, .gen = c->gen, .state_pool = c->state_pool};
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
    free(s->slots);
    free(s->feed);
    free(s->drows);
    free(s->drow_ref);
    free(s->prompts);
    free(s->pp);
    free(s->pp_order);
    free(s->pp_chunk);
    srv_output_free(&s->out);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
