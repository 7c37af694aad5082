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
    const cl_bench_opts *o;
    cl_level_result *res;
    sample_list samples;
    cl_vec itl_ms;
    double measure_start;
} run_state;

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
    if (push_sample(&st->samples, &s)) {
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
    const cl_bench_opts *o = st->o;
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

int cl_run_level(const cl_bench_opts *o, const cl_prompts *prompts, double level,
                 cl_level_result *res, char *err)
{
    memset(res, 0, sizeof *res);
    res->level = level;
    if (!(level > 0) || (!o->open_loop && level != floor(level))) {
        snprintf(err, CL_ERR_LEN,
                 "level %g: a concurrency must be a whole number >= 1 and a "
                 "rate > 0",
                 level);
        return -1;
    }
    long cap = o->open_loop ? o->max_concurrency : (long)level;
    cl_req *slots = calloc((size_t)cap, sizeof *slots);
    char *busy = calloc((size_t)cap, 1);
    CURLM *m = curl_multi_init();
    run_state st = {.o = o, .res = res, .measure_start = -1};
    int rc = -1;
    if (!slots || !busy || !m) {
        snprintf(err, CL_ERR_LEN, "out of memory setting up %ld request slots", cap);
        goto out;
    }
    curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, cap);

    mhla_rng rng;
    mhla_rng_seed(&rng, o->rng_seed ^ (uint64_t)(level * 1000.0));
    cl_req_params params = {.temperature = o->temperature,
                            .seed = o->seed,
                            .ignore_eos = o->ignore_eos,
                            .token_ids = o->token_ids,
                            .usage = o->usage};
    double t0 = mhla_now(), warm_end = t0 + o->warmup_s, next_arrival = t0, last_progress = t0;
    long total = o->duration_s > 0 ? LONG_MAX : o->warmup_requests + o->requests;
    long issued = 0, in_flight = 0;
    int stop = 0, waiting_late = 0;
    size_t next_prompt = 0;
    for (;;) {
        double now = mhla_now();
        while (!stop) {
            if (issued >= total || (o->duration_s > 0 && st.measure_start >= 0 &&
                                    now >= st.measure_start + o->duration_s)) {
                stop = 1;
                break;
            }
            if (o->open_loop && now < next_arrival)
                break;
            if (in_flight >= cap) {
                if (o->open_loop && !waiting_late) {
                    waiting_late = 1;
                    res->late_arrivals++;
                }
                break;
            }
            waiting_late = 0;
            long si = 0;
            while (busy[si])
                si++;
            cl_req *r = &slots[si];
            const cl_prompt *p = &prompts->p[next_prompt++ % prompts->n];
            params.prompt_json = p->prompt_json;
            params.max_tokens = p->max_tokens;
            if (cl_req_setup(r, &o->conn, &params, err))
                goto out;
            r->expected_in = p->input_tokens;
            r->measured = now >= warm_end && issued >= o->warmup_requests;
            if (r->measured && st.measure_start < 0)
                st.measure_start = now;
            r->t_send = mhla_now();
            CURLMcode mc = curl_multi_add_handle(m, r->easy);
            if (mc != CURLM_OK) {
                snprintf(err, CL_ERR_LEN, "curl_multi_add_handle: %s", curl_multi_strerror(mc));
                cl_req_reset(r);
                goto out;
            }
            busy[si] = 1;
            in_flight++;
            issued++;
            if (o->open_loop)
                next_arrival +=
                    o->poisson ? -log(1.0 - mhla_rng_uniform(&rng)) / level : 1.0 / level;
        }
        if (stop && in_flight == 0)
            break;
        int running = 0;
        CURLMcode mc = curl_multi_perform(m, &running);
        if (mc != CURLM_OK) {
            snprintf(err, CL_ERR_LEN, "curl_multi_perform: %s", curl_multi_strerror(mc));
            goto out;
        }
        CURLMsg *msg;
        int queued;
        while ((msg = curl_multi_info_read(m, &queued))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            CURL *e = msg->easy_handle;
            CURLcode result = msg->data.result;
            cl_req *r = NULL;
            curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&r);
            curl_multi_remove_handle(m, e);
            int frc = finish(&st, r, result, err);
            cl_req_reset(r);
            busy[r - slots] = 0;
            in_flight--;
            if (frc)
                goto out;
        }
        now = mhla_now();
        if (o->progress && now - last_progress >= 0.5) {
            last_progress = now;
            progress(&st, level, t0, in_flight, 0);
        }
        int timeout_ms = 100;
        if (!stop && o->open_loop && in_flight < cap) {
            double wait = (next_arrival - mhla_now()) * 1000.0;
            timeout_ms = wait <= 0 ? 0 : wait < 100 ? (int)ceil(wait) : 100;
        }
        if (!stop && !o->open_loop && in_flight < cap)
            timeout_ms = 0;
        if (timeout_ms > 0 && (mc = curl_multi_poll(m, NULL, 0, timeout_ms, NULL)) != CURLM_OK) {
            snprintf(err, CL_ERR_LEN, "curl_multi_poll: %s", curl_multi_strerror(mc));
            goto out;
        }
    }
    if (o->progress)
        progress(&st, level, t0, 0, 1);
    rc = summarize(&st, err);
    if (rc == 0) { /* the samples go to the caller */
        res->samples = st.samples.s;
        res->n_samples = st.samples.n;
        res->t0 = t0;
        st.samples.s = NULL;
    }
out:
    for (long i = 0; slots && i < cap; i++) {
        if (busy[i])
            curl_multi_remove_handle(m, slots[i].easy);
        cl_req_free(&slots[i]);
    }
    if (m)
        curl_multi_cleanup(m);
    free(slots);
    free(busy);
    free(st.samples.s);
    cl_vec_free(&st.itl_ms);
    return rc;
}
