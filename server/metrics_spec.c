/*
 * metrics_spec.c — the speculative-decoding part of /metrics: tokens
 * drafted by prompt lookup, those the model accepted, and the rate.
 */
#include "server_internal.h"

#include <pthread.h>

static struct {
    pthread_mutex_t mu;
    unsigned long long drafted, accepted, verify_rows;
    mhla_verify_stats engine;
} S = {.mu = PTHREAD_MUTEX_INITIALIZER};

void srv_metrics_spec_engine(mhla_engine *engine)
{
    mhla_verify_stats v;
    mhla_engine_verify_stats(engine, &v);
    pthread_mutex_lock(&S.mu);
    S.engine = v;
    pthread_mutex_unlock(&S.mu);
}

void srv_metrics_spec(int drafted, int accepted)
{
    pthread_mutex_lock(&S.mu);
    S.drafted += (unsigned long long)drafted;
    S.accepted += (unsigned long long)accepted;
    S.verify_rows++;
    pthread_mutex_unlock(&S.mu);
}

int srv_metrics_spec_render(mhla_buf *b)
{
    pthread_mutex_lock(&S.mu);
    double rate = S.drafted ? (double)S.accepted / (double)S.drafted : 0.0;
    int rc = srv_buf_printf(
        b,
        "# HELP mhla_spec_draft_tokens_total Tokens drafted by prompt lookup and verified.\n"
        "# TYPE mhla_spec_draft_tokens_total counter\nmhla_spec_draft_tokens_total %llu\n"
        "# HELP mhla_spec_accepted_tokens_total Drafted tokens the model chose too.\n"
        "# TYPE mhla_spec_accepted_tokens_total counter\nmhla_spec_accepted_tokens_total %llu\n"
        "# HELP mhla_spec_verify_rows_total Decode rows that verified drafts.\n"
        "# TYPE mhla_spec_verify_rows_total counter\nmhla_spec_verify_rows_total %llu\n"
        "# HELP mhla_spec_acceptance_rate Accepted over drafted tokens since the start.\n"
        "# TYPE mhla_spec_acceptance_rate gauge\nmhla_spec_acceptance_rate %.6f\n"
        "# HELP mhla_spec_block_restores_total Verify steps taken back to before a block "
        "start their drafts had crossed.\n"
        "# TYPE mhla_spec_block_restores_total counter\nmhla_spec_block_restores_total %llu\n",
        S.drafted, S.accepted, S.verify_rows, rate, (unsigned long long)S.engine.block_restores);
    pthread_mutex_unlock(&S.mu);
    return rc;
}
