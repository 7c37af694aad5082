/*
 * runner.c — one load level: a single thread drives every request through a
 * curl multi handle, so timestamps come from one clock in one place and a
 * thousand streams cost no threads.
 *
 * Closed loop: `level` requests are kept in flight; each completion starts the
 * next. Open loop: requests start at `level` per second (constant gaps or
 * Poisson, i.e. exponential gaps) whether or not earlier ones finished, up to
 * max_concurrency in flight; an arrival that finds the cap full waits and is
 * counted as late.
 *
 * Requests started during the warm-up (first warmup_s seconds and first
 * warmup_requests requests) run but are left out of every figure. The
 * measurement window runs from the first measured request's start to the last
 * measured request's end; rates are totals over that window.
 */
#include "client_internal.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cl_sample *s;
    size_t n, cap;
} sample_list;

static int push_sample(sample_list *l, const cl_sample *s)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        cl_sample *p = realloc(l->s, cap * sizeof *p);
        if (!p)
            return -1;
        l->s = p;
        l->cap = cap;
    }
    l->s[l->n++] = *s;
    return 0;
}

static void count_failure(cl_level_result *res, const char *kind, const char *msg)
{
    res->failed++;
    if (!res->first_error[0])
        snprintf(res->first_error, sizeof res->first_error, "%s", msg);
    for (size_t i = 0; i < res->n_fail_kinds; i++)
        if (strcmp(res->fails[i].kind, kind) == 0) {
            res->fails[i].n++;
            return;
        }
    size_t cap = sizeof res->fails / sizeof *res->fails;
    size_t i = res->n_fail_kinds < cap ? res->n_fail_kinds++ : cap - 1; /* last slot: "other" */
    if (i == cap - 1 && res->fails[i].n > 0 && strcmp(res->fails[i].kind, kind) != 0)
        snprintf(res->fails[i].kind, sizeof res->fails[i].kind, "other");
    else
        snprintf(res->fails[i].kind, sizeof res->fails[i].kind, "%s", kind);
    res->fails[i].n++;
}

typedef struct {
    const cl_bench_options *o;
    cl_level_result *res;
    sample_list samples;
    cl_vec itl_ms;
    cl_vec token_t; /* with keep_tokens: each output token's arrival */
    double measure_start;
    /* the level's transfers */
    const cl_prompts *prompts;
    double level;
    long cap;      /* request slots: requests in flight at most */
    cl_req *slots; /* cap of them */
    char *busy;    /* slot i is in flight */
    CURLM *multi;
    mhla_rng rng; /* open-loop arrivals */
    cl_req_params params;
    double t0, warm_end, next_arrival;
    long total, issued, in_flight; /* total: requests to send (LONG_MAX: until the duration) */
    int stop, waiting_late;
    size_t next_prompt;
} run_state;

/* Each token's arrival, from the gaps the request kept: a first chunk's tokens
 * arrive at t_first, every later one a gap after the one before (the gaps of a
 * chunk of k tokens are split evenly, as its ITL samples are). Done once per
 * request after it ends, so the stream's callback does no more work. */
static int push_token_times(cl_vec *out, const cl_req *r)
{
    long first = r->tokens_seen - (long)r->itl.n;
    double t = r->t_first;
    for (long i = 0; i < first; i++)
        if (cl_vec_push(out, t))
            return -1;
    for (size_t i = 0; i < r->itl.n; i++)
        if (cl_vec_push(out, t += r->itl.v[i]))
            return -1;
    return 0;
}

/* A transfer ended: record it (when measured). */
static int finish(run_state *st, cl_req *r, CURLcode result, char *err)
{
    double now = mhla_now();
    if (!r->measured)
        return 0;
    char kind[32], msg[CL_ERR_LEN];
    if (cl_req_outcome(r, result, kind, sizeof kind, msg)) {
        count_failure(st->res, kind, msg);
        cl_sample s = {.ok = 0, .start = r->t_send, .end = now, .ttft = -1, .tpot = -1};
        snprintf(s.kind, sizeof s.kind, "%s", kind);
        return push_sample(&st->samples, &s) ? (snprintf(err, CL_ERR_LEN, "out of memory"), -1) : 0;
    }
    cl_sample s = {.ok = 1, .start = r->t_send, .end = now, .tpot = -1};
    s.e2e = now - r->t_send;
    s.ttft = r->got_first ? r->t_first - r->t_send : -1;
    s.out_tokens = cl_req_output_tokens(r);
    s.in_tokens = r->usage_prompt >= 0 ? r->usage_prompt : r->expected_in;
    if (r->got_first && s.out_tokens > 1)
        s.tpot = (r->t_last - r->t_first) / (double)(s.out_tokens - 1);
    st->res->completed++;
    for (size_t i = 0; i < r->itl.n; i++)
        if (cl_vec_push(&st->itl_ms, r->itl.v[i] * 1000.0)) {
            snprintf(err, CL_ERR_LEN, "out of memory");
            return -1;
        }
    if (push_sample(&st->samples, &s) ||
        (st->o->keep_tokens && r->got_first && push_token_times(&st->token_t, r))) {
        snprintf(err, CL_ERR_LEN, "out of memory");
        return -1;
    }
    return 0;
}

static void progress(const run_state *st, double level, double t0, long in_flight, int final)
{
    double now = mhla_now();
    long out = 0;
    for (size_t i = 0; i < st->samples.n; i++)
        out += st->samples.s[i].ok ? st->samples.s[i].out_tokens : 0;
    double span = st->measure_start >= 0 ? now - st->measure_start : 0;
    fprintf(stderr,
            "\r\033[K%s %g | %6.1f s | done %zu | failed %zu | in flight %ld | "
            "%.1f out tok/s",
            st->o->open_loop ? "rate" : "concurrency", level, now - t0, st->res->completed,
            st->res->failed, in_flight, span > 0 ? out / span : 0.0);
    if (final)
        fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

static int summarize(run_state *st, char *err)
{
    cl_level_result *res = st->res;
    size_t n = st->samples.n;
    double *ttft = malloc((n + 1) * sizeof *ttft), *tpot = malloc((n + 1) * sizeof *tpot),
           *e2e = malloc((n + 1) * sizeof *e2e);
    int rc = -1;
    if (!ttft || !tpot || !e2e) {
        snprintf(err, CL_ERR_LEN, "out of memory summarising %zu requests", n);
        goto out;
    }
    size_t nt = 0, np = 0, ne = 0;
    double end = st->measure_start;
    const cl_bench_options *o = st->o;
    for (size_t i = 0; i < n; i++) {
        const cl_sample *s = &st->samples.s[i];
        if (s->end > end)
            end = s->end;
        if (!s->ok)
            continue;
        e2e[ne++] = s->e2e * 1000.0;
        if (s->ttft >= 0)
            ttft[nt++] = s->ttft * 1000.0;
        if (s->tpot >= 0)
            tpot[np++] = s->tpot * 1000.0;
        res->in_tokens += s->in_tokens > 0 ? s->in_tokens : 0;
        res->out_tokens += s->out_tokens;
        int good = (o->slo_ttft_ms <= 0 || (s->ttft >= 0 && s->ttft * 1000.0 <= o->slo_ttft_ms)) &&
                   (o->slo_tpot_ms <= 0 || s->tpot < 0 || s->tpot * 1000.0 <= o->slo_tpot_ms) &&
                   (o->slo_e2e_ms <= 0 || s->e2e * 1000.0 <= o->slo_e2e_ms);
        res->good += (size_t)good;
    }
    res->window_s = n ? end - st->measure_start : 0;
    if (res->window_s > 0) {
        res->req_per_s = (double)res->completed / res->window_s;
        res->in_tok_per_s = (double)res->in_tokens / res->window_s;
        res->out_tok_per_s = (double)res->out_tokens / res->window_s;
        res->goodput_req_per_s = (double)res->good / res->window_s;
    }
    if (cl_summarize(ttft, nt, &res->ttft, err) || cl_summarize(tpot, np, &res->tpot, err) ||
        cl_summarize(e2e, ne, &res->e2e, err) ||
        cl_summarize(st->itl_ms.v, st->itl_ms.n, &res->itl, err))
        goto out;
    rc = 0;
out:
    free(ttft);
    free(tpot);
    free(e2e);
    return rc;
}

/* Sends the next prompt in a free slot at time now. */
static int send_one(run_state *st, double now, char *err)
{
    const cl_bench_options *o = st->o;
    long si = 0;
    while (st->busy[si])
        si++;
    cl_req *r = &st->slots[si];
    const cl_prompt *p = &st->prompts->p[st->next_prompt++ % st->prompts->n];
    st->params.prompt_json = p->prompt_json;
    st->params.max_tokens = p->max_tokens;
    st->params.prompt_extra = p->extra_json;
    if (cl_req_setup(r, &o->conn, &st->params, err))
        return -1;
    r->expected_in = p->input_tokens;
    r->measured = now >= st->warm_end && st->issued >= o->warmup_requests;
    if (r->measured && st->measure_start < 0)
        st->measure_start = now;
    r->t_send = mhla_now();
    CURLMcode mc = curl_multi_add_handle(st->multi, r->easy);
    if (mc != CURLM_OK) {
        snprintf(err, CL_ERR_LEN, "curl_multi_add_handle: %s", curl_multi_strerror(mc));
        cl_req_reset(r);
        return -1;
    }
    st->busy[si] = 1;
    st->in_flight++;
    st->issued++;
    if (o->open_loop)
        st->next_arrival +=
            o->poisson ? -log(1.0 - mhla_rng_uniform(&st->rng)) / st->level : 1.0 / st->level;
    return 0;
}

/* Sends what is due now: the closed loop fills its slots, the open loop sends
 * the arrivals whose time has come (one counted late when no slot is free);
 * sets stop once the level has sent all it will. */
static int send_due(run_state *st, double now, char *err)
{
    const cl_bench_options *o = st->o;
    while (!st->stop) {
        if (st->issued >= st->total || (o->duration_s > 0 && st->measure_start >= 0 &&
                                        now >= st->measure_start + o->duration_s)) {
            st->stop = 1;
            break;
        }
        if (o->open_loop && now < st->next_arrival)
            break;
        if (st->in_flight >= st->cap) {
            if (o->open_loop && !st->waiting_late) {
                st->waiting_late = 1;
                st->res->late_arrivals++;
            }
            break;
        }
        st->waiting_late = 0;
        if (send_one(st, now, err))
            return -1;
    }
    return 0;
}

/* Moves the transfers forward and records the ones that ended. */
static int collect_done(run_state *st, char *err)
{
    int running = 0, queued;
    CURLMcode mc = curl_multi_perform(st->multi, &running);
    if (mc != CURLM_OK) {
        snprintf(err, CL_ERR_LEN, "curl_multi_perform: %s", curl_multi_strerror(mc));
        return -1;
    }
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(st->multi, &queued))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURL *e = msg->easy_handle;
        CURLcode result = msg->data.result;
        cl_req *r = NULL;
        curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&r);
        curl_multi_remove_handle(st->multi, e);
        int frc = finish(st, r, result, err);
        cl_req_reset(r);
        st->busy[r - st->slots] = 0;
        st->in_flight--;
        if (frc)
            return -1;
    }
    return 0;
}

/* Waits for network activity, at most until the next request is due. */
static int wait_for_work(run_state *st, char *err)
{
    const cl_bench_options *o = st->o;
    int timeout_ms = 100, free_slot = !st->stop && st->in_flight < st->cap;
    if (free_slot && o->open_loop) {
        double wait = (st->next_arrival - mhla_now()) * 1000.0;
        timeout_ms = wait <= 0 ? 0 : wait < 100 ? (int)ceil(wait) : 100;
    }
    if (free_slot && !o->open_loop)
        timeout_ms = 0;
    CURLMcode mc;
    if (timeout_ms > 0 &&
        (mc = curl_multi_poll(st->multi, NULL, 0, timeout_ms, NULL)) != CURLM_OK) {
        snprintf(err, CL_ERR_LEN, "curl_multi_poll: %s", curl_multi_strerror(mc));
        return -1;
    }
    return 0;
}

/* The slots, the multi handle and the schedule of one level. */
static int level_setup(run_state *st, const cl_bench_options *o, double level, char *err)
{
    if (!(level > 0) || (!o->open_loop && level != floor(level))) {
        snprintf(err, CL_ERR_LEN,
                 "level %g: a concurrency must be a whole number >= 1 and a rate > 0", level);
        return -1;
    }
    st->cap = o->open_loop ? o->max_concurrency : (long)level;
    st->slots = calloc((size_t)st->cap, sizeof *st->slots);
    st->busy = calloc((size_t)st->cap, 1);
    st->multi = curl_multi_init();
    if (!st->slots || !st->busy || !st->multi) {
        snprintf(err, CL_ERR_LEN, "out of memory setting up %ld request slots", st->cap);
        return -1;
    }
    curl_multi_setopt(st->multi, CURLMOPT_MAXCONNECTS, st->cap);
    mhla_rng_seed(&st->rng, o->rng_seed ^ (uint64_t)(level * 1000.0));
    st->params = (cl_req_params){.temperature = o->temperature,
                                 .seed = o->seed,
                                 .ignore_eos = o->ignore_eos,
                                 .token_ids = o->token_ids,
                                 .usage = o->usage,
                                 .chat = o->chat,
                                 .system = o->system,
                                 .body_extra = o->body_extra};
    st->t0 = st->next_arrival = mhla_now();
    st->warm_end = st->t0 + o->warmup_s;
    st->total = o->duration_s > 0 ? LONG_MAX : o->warmup_requests + o->requests;
    return 0;
}

static void level_free(run_state *st)
{
    for (long i = 0; st->slots && i < st->cap; i++) {
        if (st->busy[i])
            curl_multi_remove_handle(st->multi, st->slots[i].easy);
        cl_req_free(&st->slots[i]);
    }
    if (st->multi)
        curl_multi_cleanup(st->multi);
    free(st->slots);
    free(st->busy);
    free(st->samples.s);
    cl_vec_free(&st->itl_ms);
    cl_vec_free(&st->token_t);
}

int cl_run_level(const cl_bench_options *o, const cl_prompts *prompts, double level,
                 cl_level_result *res, char *err)
{
    memset(res, 0, sizeof *res);
    res->level = level;
    run_state st = {.o = o, .res = res, .measure_start = -1, .prompts = prompts, .level = level};
    int rc = -1;
    if (level_setup(&st, o, level, err))
        goto out;
    double last_progress = st.t0;
    for (;;) {
        if (send_due(&st, mhla_now(), err))
            goto out;
        if (st.stop && st.in_flight == 0)
            break;
        if (collect_done(&st, err))
            goto out;
        double now = mhla_now();
        if (o->progress && now - last_progress >= 0.5) {
            last_progress = now;
            progress(&st, level, st.t0, st.in_flight, 0);
        }
        if (wait_for_work(&st, err))
            goto out;
    }
    if (o->progress)
        progress(&st, level, st.t0, 0, 1);
    rc = summarize(&st, err);
    if (rc == 0) { /* the samples go to the caller */
        res->samples = st.samples.s;
        res->n_samples = st.samples.n;
        res->t0 = st.t0;
        res->t_measure = st.measure_start;
        st.samples.s = NULL;
        if (o->keep_tokens) { /* the picture's gaps and arrivals go too */
            res->itl_ms = st.itl_ms.v;
            res->n_itl = st.itl_ms.n;
            res->token_t = st.token_t.v;
            res->n_token_t = st.token_t.n;
            st.itl_ms = st.token_t = (cl_vec){0};
        }
    }
out:
    level_free(&st);
    return rc;
}
