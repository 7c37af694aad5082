/*
 * metrics.c — process-wide counters, gauges and histograms, rendered in the
 * Prometheus text exposition format for GET /metrics.
 */
#include "server_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double BUCKETS[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                 0.5,   1.0,    2.5,   5.0,  10.0,  30.0, 60.0};
#define NB ((int)(sizeof BUCKETS / sizeof BUCKETS[0]))
/* prompt tokens per step: the same number of buckets */
static const double TOKEN_BUCKETS[NB] = {0,    8,    16,   32,   64,    128,   256,  512,
                                         1024, 2048, 4096, 8192, 16384, 32768, 65536};

typedef struct {
    unsigned long long counts[NB + 1]; /* last: +Inf */
    double sum;
    unsigned long long n;
} hist;

static const char *FINISH[] = {"stop", "length", "cancelled", "error", "timeout"};
#define NF ((int)(sizeof FINISH / sizeof FINISH[0]))

static struct {
    pthread_mutex_t mu;
    unsigned long long status[600];
    unsigned long long chat_requests;
    unsigned long long finish[NF];
    unsigned long long prompt_tokens, generated_tokens;
    unsigned long long steps, step_items, step_tokens;
    int running, waiting, running_seqs;
    size_t state_bytes;
    int have_pool;
    long promised; /* pages the scheduler keeps for clones */
    mhla_state_stats pool;
    int have_device;
    mhla_device_stats dev;
    hist h[SRV_HIST_COUNT];
    hist prefill;   /* prompt tokens per step, in TOKEN_BUCKETS */
    hist overshoot; /* seconds past --itl-target-ms of the steps over it */
    double costs[4], itl_target;
    double start;
    char cpu_isa[16];
    int have_threads;
    mhla_cpu_threads threads;
} M = {.mu = PTHREAD_MUTEX_INITIALIZER};

void srv_metrics_init(void)
{
    pthread_mutex_lock(&M.mu);
    M.start = srv_wall_time();
    pthread_mutex_unlock(&M.mu);
}

void srv_metrics_chat_request(void)
{
    pthread_mutex_lock(&M.mu);
    M.chat_requests++;
    pthread_mutex_unlock(&M.mu);
}

void srv_metrics_status(int code)
{
    if (code < 100 || code >= 600)
        return;
    pthread_mutex_lock(&M.mu);
    M.status[code]++;
    pthread_mutex_unlock(&M.mu);
}

void srv_metrics_finish(const char *reason)
{
    pthread_mutex_lock(&M.mu);
    for (int i = 0; i < NF; i++)
        if (strcmp(reason, FINISH[i]) == 0)
            M.finish[i]++;
    pthread_mutex_unlock(&M.mu);
}

void srv_metrics_tokens(long prompt, long generated)
{
    pthread_mutex_lock(&M.mu);
    M.prompt_tokens += (unsigned long long)prompt;
    M.generated_tokens += (unsigned long long)generated;
    pthread_mutex_unlock(&M.mu);
}

void srv_metrics_gauges(int running, int waiting, int running_seqs, size_t state_bytes)
{
    pthread_mutex_lock(&M.mu);
    M.running = running;
    M.waiting = waiting;
    M.running_seqs = running_seqs;
    M.state_bytes = state_bytes;
    pthread_mutex_unlock(&M.mu);
}

void srv_metrics_state(const mhla_state_stats *st, long promised)
{
    pthread_mutex_lock(&M.mu);
    M.have_pool = 1;
    M.pool = *st;
    M.promised = promised;
    pthread_mutex_unlock(&M.mu);
}

/* The engine's own gauges: a CPU engine's threads, a GPU engine's step and
 * graph counters. Here, and only here, the server's metrics know the kinds. */
void srv_metrics_engine(const mhla_engine *e)
{
    mhla_device dev = mhla_engine_device(e);
    mhla_cpu_threads t;
    mhla_device_stats st;
    if (dev == MHLA_DEVICE_CPU)
        mhla_engine_cpu_threads(e, &t);
    if (dev == MHLA_DEVICE_CUDA)
        mhla_engine_device_stats(e, &st);
    pthread_mutex_lock(&M.mu);
    if (dev == MHLA_DEVICE_CPU) {
        M.have_threads = 1;
        M.threads = t;
    }
    if (dev == MHLA_DEVICE_CUDA) {
        M.have_device = 1;
        M.dev = st;
    }
    pthread_mutex_unlock(&M.mu);
}

/* M.mu held. */
static void hist_add(hist *h, const double *le, double v)
{
    int b = 0;
    while (b < NB && v > le[b])
        b++;
    h->counts[b]++;
    h->sum += v;
    h->n++;
}

void srv_metrics_observe(int which, double s)
{
    if (which < 0 || which >= SRV_HIST_COUNT)
        return;
    pthread_mutex_lock(&M.mu);
    hist_add(&M.h[which], BUCKETS, s);
    pthread_mutex_unlock(&M.mu);
}

void srv_metrics_step_plan(int prefill_tokens, const double costs[4])
{
    pthread_mutex_lock(&M.mu);
    hist_add(&M.prefill, TOKEN_BUCKETS, prefill_tokens);
    memcpy(M.costs, costs, sizeof M.costs);
    pthread_mutex_unlock(&M.mu);
}

void srv_metrics_step_budget(int decode_rows, double seconds)
{
    pthread_mutex_lock(&M.mu);
    if (decode_rows > 0 && M.itl_target > 0 && seconds > M.itl_target)
        hist_add(&M.overshoot, BUCKETS, seconds - M.itl_target);
    pthread_mutex_unlock(&M.mu);
}

void srv_metrics_itl_target(double seconds)
{
    pthread_mutex_lock(&M.mu);
    M.itl_target = seconds;
    pthread_mutex_unlock(&M.mu);
}

void srv_metrics_step(int n_items, int n_tokens)
{
    pthread_mutex_lock(&M.mu);
    M.steps++;
    M.step_items += (unsigned long long)n_items;
    M.step_tokens += (unsigned long long)n_tokens;
    pthread_mutex_unlock(&M.mu);
}

static int render_hist(mhla_buf *b, const char *name, const char *help, const hist *h,
                       const double *le)
{
    int rc = srv_buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    unsigned long long cum = 0;
    for (int i = 0; i < NB; i++) {
        cum += h->counts[i];
        rc |= srv_buf_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, le[i], cum);
    }
    cum += h->counts[NB];
    rc |= srv_buf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name, cum,
                         name, h->sum, name, h->n);
    return rc;
}

void srv_metrics_cpu_isa(const char *path)
{
    pthread_mutex_lock(&M.mu);
    snprintf(M.cpu_isa, sizeof M.cpu_isa, "%s", path);
    pthread_mutex_unlock(&M.mu);
}

/* The build as a constant 1 with labels, the Prometheus way to expose text,
 * so a dashboard can tell which build each server runs. */
static int render_build(mhla_buf *b)
{
    return srv_buf_printf(b,
                          "# HELP mhla_build_info The server's version and git commit.\n"
                          "# TYPE mhla_build_info gauge\n"
                          "mhla_build_info{version=\"%s\",commit=\"%s\"} 1\n",
                          mhla_version(), mhla_commit());
}

/* HTTP statuses, finish reasons; M.mu held. */
static int render_counters(mhla_buf *b)
{
    int rc = 0;
    rc |= srv_buf_printf(b,
                         "# HELP mhla_http_requests_total HTTP requests answered, by status code.\n"
                         "# TYPE mhla_http_requests_total counter\n");
    for (int c = 100; c < 600; c++)
        if (M.status[c])
            rc |=
                srv_buf_printf(b, "mhla_http_requests_total{status=\"%d\"} %llu\n", c, M.status[c]);
    rc |= srv_buf_printf(b,
                         "# HELP mhla_chat_requests_total Chat completion requests accepted "
                         "(parsed and rendered).\n"
                         "# TYPE mhla_chat_requests_total counter\nmhla_chat_requests_total %llu\n",
                         M.chat_requests);
    rc |= srv_buf_printf(
        b, "# HELP mhla_requests_finished_total Completion requests finished, by how they ended.\n"
           "# TYPE mhla_requests_finished_total counter\n");
    for (int i = 0; i < NF; i++)
        rc |= srv_buf_printf(b, "mhla_requests_finished_total{reason=\"%s\"} %llu\n", FINISH[i],
                             M.finish[i]);
    return rc;
}

/* requests, sequences, tokens, steps; M.mu held. */
static int render_gauges(mhla_buf *b)
{
    int rc = 0;
    rc |= srv_buf_printf(
        b,
        "# HELP mhla_requests_running Completion requests admitted to the engine.\n"
        "# TYPE mhla_requests_running gauge\nmhla_requests_running %d\n"
        "# HELP mhla_requests_waiting Completion requests queued for admission.\n"
        "# TYPE mhla_requests_waiting gauge\nmhla_requests_waiting %d\n"
        "# HELP mhla_sequences_running Sequences (choices) admitted to the engine.\n"
        "# TYPE mhla_sequences_running gauge\nmhla_sequences_running %d\n"
        "# HELP mhla_state_bytes Bytes of recurrent state held by live sequences.\n"
        "# TYPE mhla_state_bytes gauge\nmhla_state_bytes %zu\n"
        "# HELP mhla_prompt_tokens_total Prompt tokens processed.\n"
        "# TYPE mhla_prompt_tokens_total counter\nmhla_prompt_tokens_total %llu\n"
        "# HELP mhla_generation_tokens_total Tokens generated.\n"
        "# TYPE mhla_generation_tokens_total counter\nmhla_generation_tokens_total %llu\n"
        "# HELP mhla_engine_steps_total Engine forward calls.\n"
        "# TYPE mhla_engine_steps_total counter\nmhla_engine_steps_total %llu\n"
        "# HELP mhla_engine_step_items_total Batch items over all engine steps.\n"
        "# TYPE mhla_engine_step_items_total counter\nmhla_engine_step_items_total %llu\n"
        "# HELP mhla_engine_step_tokens_total Tokens fed over all engine steps.\n"
        "# TYPE mhla_engine_step_tokens_total counter\nmhla_engine_step_tokens_total %llu\n"
        "# HELP mhla_process_start_time_seconds Start time of the server, unix seconds.\n"
        "# TYPE mhla_process_start_time_seconds gauge\nmhla_process_start_time_seconds %.3f\n",
        M.running, M.waiting, M.running_seqs, M.state_bytes, M.prompt_tokens, M.generated_tokens,
        M.steps, M.step_items, M.step_tokens, M.start);
    if (M.cpu_isa[0])
        rc |= srv_buf_printf(b,
                             "# HELP mhla_cpu_isa_info The CPU kernels' instruction-set path.\n"
                             "# TYPE mhla_cpu_isa_info gauge\nmhla_cpu_isa_info{path=\"%s\"} 1\n",
                             M.cpu_isa);
    return rc;
}

/* GPU engines only; M.mu held. */
static int render_device(mhla_buf *b)
{
    int rc = 0;
    if (M.have_threads)
        rc |= srv_buf_printf(
            b,
            "# HELP mhla_cpu_threads The engine's CPU threads, the step thread included.\n"
            "# TYPE mhla_cpu_threads gauge\nmhla_cpu_threads %d\n"
            "# HELP mhla_cpu_threads_active CPU threads taking part in the engine's jobs now.\n"
            "# TYPE mhla_cpu_threads_active gauge\nmhla_cpu_threads_active %d\n"
            "# HELP mhla_cpu_thread_reductions_total Times fewer CPU threads were set to take "
            "part because they were not faster.\n"
            "# TYPE mhla_cpu_thread_reductions_total counter\nmhla_cpu_thread_reductions_total "
            "%ld\n",
            M.threads.threads, M.threads.active, M.threads.reductions);
    if (M.have_device)
        rc |= srv_buf_printf(
            b,
            "# HELP mhla_gpu_steps_total Engine steps run on the GPU.\n"
            "# TYPE mhla_gpu_steps_total counter\nmhla_gpu_steps_total %llu\n"
            "# HELP mhla_gpu_graph_captures_total Decode steps captured as CUDA graphs.\n"
            "# TYPE mhla_gpu_graph_captures_total counter\nmhla_gpu_graph_captures_total %llu\n"
            "# HELP mhla_gpu_graph_replays_total Decode steps run by replaying a CUDA graph.\n"
            "# TYPE mhla_gpu_graph_replays_total counter\nmhla_gpu_graph_replays_total %llu\n",
            (unsigned long long)M.dev.steps, (unsigned long long)M.dev.graph_captures,
            (unsigned long long)M.dev.graph_replays);
    return rc;
}

/* The share of the state budget that running requests hold or have been
 * promised (pages in use, reserved, kept for clones); cached pages are
 * evictable and do not count. 0 without a bounded pool. */
static int render_usage(mhla_buf *b)
{
    const mhla_state_stats *p = &M.pool;
    double ratio = 0;
    if (M.have_pool && p->pages_total > 0)
        ratio = (double)(p->pages_used + p->pages_reserved + M.promised) / (double)p->pages_total;
    return srv_buf_printf(b,
                          "# HELP mhla_state_memory_usage_ratio Share of the state memory budget "
                          "held or promised by running requests (0 when unbounded).\n"
                          "# TYPE mhla_state_memory_usage_ratio gauge\n"
                          "mhla_state_memory_usage_ratio %.6f\n",
                          ratio > 1 ? 1 : ratio);
}

/* the state pool with its prefix cache; M.mu held. */
static int render_pool(mhla_buf *b)
{
    int rc = render_usage(b);
    if (!M.have_pool)
        return rc;
    const mhla_state_stats *p = &M.pool;
    rc |= srv_buf_printf(
        b,
        "# HELP mhla_state_pages State pool pages (one finished block each), by use.\n"
        "# TYPE mhla_state_pages gauge\n"
        "mhla_state_pages{kind=\"total\"} %ld\nmhla_state_pages{kind=\"used\"} %ld\n"
        "mhla_state_pages{kind=\"cached\"} %ld\nmhla_state_pages{kind=\"free\"} %ld\n"
        "mhla_state_pages{kind=\"reserved\"} %ld\n"
        "# HELP mhla_state_page_bytes Bytes of one page.\n"
        "# TYPE mhla_state_page_bytes gauge\nmhla_state_page_bytes %zu\n"
        "# HELP mhla_prefix_cache_hits_total Blocks served by the prefix cache.\n"
        "# TYPE mhla_prefix_cache_hits_total counter\nmhla_prefix_cache_hits_total %llu\n"
        "# HELP mhla_prefix_cache_misses_total Prefix lookups that stopped at an uncached block.\n"
        "# TYPE mhla_prefix_cache_misses_total counter\nmhla_prefix_cache_misses_total %llu\n"
        "# HELP mhla_state_evictions_total Cached pages evicted.\n"
        "# TYPE mhla_state_evictions_total counter\nmhla_state_evictions_total %llu\n"
        "# HELP mhla_state_resumes_total Prompts that continued a finished sequence's state.\n"
        "# TYPE mhla_state_resumes_total counter\nmhla_state_resumes_total %llu\n"
        "# HELP mhla_prompt_tokens_cached_total Prompt tokens not recomputed (cache, resume).\n"
        "# TYPE mhla_prompt_tokens_cached_total counter\nmhla_prompt_tokens_cached_total %llu\n",
        p->pages_total, p->pages_used, p->pages_cached, p->pages_free, p->pages_reserved,
        p->page_bytes, (unsigned long long)p->prefix_hits, (unsigned long long)p->prefix_misses,
        (unsigned long long)p->evictions, (unsigned long long)p->resumes,
        (unsigned long long)p->resumed_tokens);
    return rc | srv_metrics_disk_render(b);
}

/* the latency histograms; M.mu held. */
static int render_hists(mhla_buf *b)
{
    int rc = 0;
    rc |= render_hist(b, "mhla_time_to_first_token_seconds",
                      "Time from arrival to the first generated token.", &M.h[SRV_HIST_TTFT],
                      BUCKETS);
    rc |=
        render_hist(b, "mhla_inter_token_latency_seconds",
                    "Time between consecutive tokens of a sequence.", &M.h[SRV_HIST_ITL], BUCKETS);
    rc |= render_hist(b, "mhla_request_duration_seconds",
                      "Time from arrival to the end of a completion request.", &M.h[SRV_HIST_E2E],
                      BUCKETS);
    rc |= render_hist(b, "mhla_queue_wait_seconds",
                      "Time from arrival to admission into the running set.", &M.h[SRV_HIST_QUEUE],
                      BUCKETS);
    return rc;
}

/* the step planner: step times, prompt tokens per step, the learned costs; M.mu held. */
static int render_steps(mhla_buf *b)
{
    int rc = render_hist(b, "mhla_engine_step_seconds", "Time of one engine forward call.",
                         &M.h[SRV_HIST_STEP], BUCKETS);
    rc |= render_hist(b, "mhla_engine_step_prefill_tokens", "Prompt tokens fed by one engine step.",
                      &M.prefill, TOKEN_BUCKETS);
    rc |= srv_buf_printf(
        b,
        "# HELP mhla_step_cost_seconds Learned engine step cost: fixed, per decode row, per "
        "prefill token, per block closed.\n"
        "# TYPE mhla_step_cost_seconds gauge\n"
        "mhla_step_cost_seconds{part=\"fixed\"} %.9f\n"
        "mhla_step_cost_seconds{part=\"per_decode_row\"} %.9f\n"
        "mhla_step_cost_seconds{part=\"per_prefill_token\"} %.9f\n"
        "mhla_step_cost_seconds{part=\"per_block_close\"} %.9f\n"
        "# HELP mhla_itl_target_seconds The step time budget while streams decode (0: off).\n"
        "# TYPE mhla_itl_target_seconds gauge\nmhla_itl_target_seconds %.6f\n",
        M.costs[0], M.costs[1], M.costs[2], M.costs[3], M.itl_target);
    rc |= srv_buf_printf(b,
                         "# HELP mhla_engine_steps_over_budget_total Steps with decode rows "
                         "that took longer than --itl-target-ms.\n"
                         "# TYPE mhla_engine_steps_over_budget_total counter\n"
                         "mhla_engine_steps_over_budget_total %llu\n",
                         M.overshoot.n);
    rc |= render_hist(b, "mhla_engine_step_overshoot_seconds",
                      "Time past --itl-target-ms of a step over it.", &M.overshoot, BUCKETS);
    return rc;
}

char *srv_metrics_render(void)
{
    mhla_buf b = {0};
    pthread_mutex_lock(&M.mu);
    /* one after the other: the exposition's order is fixed */
    int rc = render_build(&b);
    rc |= render_counters(&b);
    rc |= render_gauges(&b);
    rc |= render_device(&b);
    rc |= render_pool(&b);
    rc |= render_hists(&b);
    rc |= render_steps(&b);
    pthread_mutex_unlock(&M.mu);
    rc |= srv_metrics_grammar_render(&b);
    rc |= srv_metrics_spec_render(&b);
    if (rc) {
        mhla_buf_free(&b);
        return NULL;
    }
    return b.p;
}
