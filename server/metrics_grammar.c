/*
 * metrics_grammar.c — the structured-output part of /metrics: grammars
 * compiled and their time, cache lookups that found one, constrained rows,
 * and the time a mask takes per token (a histogram, microseconds apart at
 * the low end: the mask is meant to vanish beside a decode step).
 */
#include "server_internal.h"

#include <pthread.h>

static const double MASK_LE[] = {1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3, 2.5e-2};
#define NMB ((int)(sizeof MASK_LE / sizeof MASK_LE[0]))

static struct {
    pthread_mutex_t mu;
    unsigned long long compiled, hits, misses, rows, masks;
    double compile_s, mask_s;
    unsigned long long mask_counts[NMB + 1];
} G = {.mu = PTHREAD_MUTEX_INITIALIZER};

void srv_metrics_grammar_compiled(double seconds)
{
    pthread_mutex_lock(&G.mu);
    G.compiled++;
    G.compile_s += seconds;
    pthread_mutex_unlock(&G.mu);
}

void srv_metrics_grammar_lookup(int hit)
{
    pthread_mutex_lock(&G.mu);
    if (hit)
        G.hits++;
    else
        G.misses++;
    pthread_mutex_unlock(&G.mu);
}

void srv_metrics_grammar_row(void)
{
    pthread_mutex_lock(&G.mu);
    G.rows++;
    pthread_mutex_unlock(&G.mu);
}

void srv_metrics_grammar_mask(double seconds)
{
    int b = 0;
    while (b < NMB && seconds > MASK_LE[b])
        b++;
    pthread_mutex_lock(&G.mu);
    G.mask_counts[b]++;
    G.masks++;
    G.mask_s += seconds;
    pthread_mutex_unlock(&G.mu);
}

static int render_mask_hist(mhla_buf *b)
{
    const char *n = "mhla_grammar_mask_seconds";
    int rc = srv_buf_printf(b,
                            "# HELP %s Time to compute one constrained row's token mask.\n"
                            "# TYPE %s histogram\n",
                            n, n);
    unsigned long long cum = 0;
    for (int i = 0; i < NMB; i++) {
        cum += G.mask_counts[i];
        rc |= srv_buf_printf(b, "%s_bucket{le=\"%g\"} %llu\n", n, MASK_LE[i], cum);
    }
    cum += G.mask_counts[NMB];
    return rc | srv_buf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", n,
                               cum, n, G.mask_s, n, G.masks);
}

int srv_metrics_grammar_render(mhla_buf *b)
{
    pthread_mutex_lock(&G.mu);
    int rc = srv_buf_printf(
        b,
        "# HELP mhla_grammar_compiled_total Grammars and schemas compiled.\n"
        "# TYPE mhla_grammar_compiled_total counter\nmhla_grammar_compiled_total %llu\n"
        "# HELP mhla_grammar_compile_seconds_total Time spent compiling them.\n"
        "# TYPE mhla_grammar_compile_seconds_total counter\n"
        "mhla_grammar_compile_seconds_total %.6f\n"
        "# HELP mhla_grammar_cache_hits_total Requests whose grammar was compiled already.\n"
        "# TYPE mhla_grammar_cache_hits_total counter\nmhla_grammar_cache_hits_total %llu\n"
        "# HELP mhla_grammar_cache_misses_total Requests whose grammar had to be compiled.\n"
        "# TYPE mhla_grammar_cache_misses_total counter\nmhla_grammar_cache_misses_total %llu\n"
        "# HELP mhla_grammar_rows_total Choices generated under a grammar.\n"
        "# TYPE mhla_grammar_rows_total counter\nmhla_grammar_rows_total %llu\n",
        G.compiled, G.compile_s, G.hits, G.misses, G.rows);
    rc |= render_mask_hist(b);
    pthread_mutex_unlock(&G.mu);
    return rc;
}
