/*
 * metrics_spec.c — the speculative-decoding part of /metrics: tokens
 * drafted, those the model accepted, and the rate, by what drafted them
 * (mode "ngram": prompt lookup, "draft": a draft model).
 */
#include "server_internal.h"

#include <pthread.h>

enum { N_MODES = 3 }; /* SRV_SPEC_OFF, _NGRAM, _DRAFT */

static struct {
    pthread_mutex_t mu;
    unsigned long long drafted[N_MODES], accepted[N_MODES], verify_rows[N_MODES];
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

void srv_metrics_spec(int mode, int drafted, int accepted)
{
    if (mode <= SRV_SPEC_OFF || mode >= N_MODES)
        return;
    pthread_mutex_lock(&S.mu);
    S.drafted[mode] += (unsigned long long)drafted;
    S.accepted[mode] += (unsigned long long)accepted;
    S.verify_rows[mode]++;
    pthread_mutex_unlock(&S.mu);
}

/* One counter (or the rate, rate set) for both modes. */
static int render_family(mhla_buf *b, const char *name, const char *type, const char *help,
                         const unsigned long long *v, int rate)
{
    static const char *const mode[N_MODES] = {"off", "ngram", "draft"};
    int rc = srv_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    for (int m = SRV_SPEC_NGRAM; m < N_MODES; m++) {
        if (rate)
            rc |= srv_buf_printf(b, "%s{mode=\"%s\"} %.6f\n", name, mode[m],
                                 S.drafted[m] ? (double)S.accepted[m] / (double)S.drafted[m] : 0.0);
        else
            rc |= srv_buf_printf(b, "%s{mode=\"%s\"} %llu\n", name, mode[m], v[m]);
    }
    return rc;
}

int srv_metrics_spec_render(mhla_buf *b)
{
    pthread_mutex_lock(&S.mu);
    int rc = render_family(b, "mhla_spec_draft_tokens_total", "counter",
                           "Tokens drafted (by prompt lookup or a draft model) and verified.",
                           S.drafted, 0);
    rc |= render_family(b, "mhla_spec_accepted_tokens_total", "counter",
                        "Drafted tokens the model chose too.", S.accepted, 0);
    rc |= render_family(b, "mhla_spec_verify_rows_total", "counter",
                        "Decode rows that verified drafts.", S.verify_rows, 0);
    rc |= render_family(b, "mhla_spec_acceptance_rate", "gauge",
                        "Accepted over drafted tokens since the start.", NULL, 1);
    rc |= srv_buf_printf(
        b,
        "# HELP mhla_spec_block_restores_total Verify steps taken back to before a block "
        "start their drafts had crossed.\n"
        "# TYPE mhla_spec_block_restores_total counter\nmhla_spec_block_restores_total %llu\n",
        (unsigned long long)S.engine.block_restores);
    pthread_mutex_unlock(&S.mu);
    return rc;
}
