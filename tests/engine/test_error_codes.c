/*
 * Every engine error carries a code (mhla_status) besides its message, so
 * that callers choose their answer from the code: a missing checkpoint is
 * IO, a reservation the state pool cannot hold is FULL (a kvstate error
 * passed on through the engine), tokens past the context are CONTEXT, bad
 * sampling parameters, token ids and environment settings are INVALID. Success leaves the code
 * MHLA_OK.
 *
 * usage: test_error_codes CHECKPOINT
 */
#include "check.h"
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void expect(int rc, const mhla_error *e, mhla_status want, const char *what)
{
    int ok = rc != 0 && e->code == want && e->msg[0];
    printf("%s %s (rc %d, code %d, want %d: %s)\n", ok ? "ok  " : "FAIL", what, rc, (int)e->code,
           (int)want, e->msg);
    failures += !ok;
}

/* A pooled sequence of an engine whose pool holds `pages` pages. */
static void full_pool(const mhla_model *m)
{
    mhla_error e = {0};
    mhla_engine *probe, *eng;
    mhla_engine_options o = {.state_bytes = 1 << 20};
    if (mhla_engine_create(m, &o, &probe, &e))
        die_err("engine", &e);
    mhla_state_stats st;
    mhla_engine_state_stats(probe, &st);
    mhla_engine_free(probe);
    o.state_bytes = 2 * st.page_bytes;
    mhla_seq *s;
    if (mhla_engine_create(m, &o, &eng, &e) || mhla_engine_seq_create(eng, &s, &e))
        die_err("engine with 2 pages", &e);
    int ctx = mhla_model_config(m)->max_positions;
    mhla_error r = {0};
    expect(mhla_seq_reserve(s, ctx, &r), &r, MHLA_ERR_FULL,
           "reserving a full context in a pool of 2 pages is FULL");
    mhla_seq_free(s);
    mhla_engine_free(eng);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_error_codes CHECKPOINT\n");
        return 2;
    }
    mhla_error e = {0};
    mhla_model *m;
    expect(mhla_model_load("/nonexistent/checkpoint", &m, &e), &e, MHLA_ERR_IO,
           "a missing checkpoint directory is IO");
    e = (mhla_error){0};
    if (mhla_model_load(argv[1], &m, &e))
        die_err("load", &e);
    printf("%s success leaves the code MHLA_OK\n", e.code == MHLA_OK ? "ok  " : "FAIL");
    failures += e.code != MHLA_OK;
    full_pool(m);

    /* an environment setting the engine does not know is refused, not ignored */
    mhla_engine *bad;
    setenv("MHLA_ATTENTION_JOB", "sometimes", 1);
    e = (mhla_error){0};
    int rc = mhla_engine_create(m, NULL, &bad, &e);
    expect(rc, &e, MHLA_ERR_INVALID, "MHLA_ATTENTION_JOB=sometimes is INVALID");
    failures += rc == 0 || !strstr(e.msg, "MHLA_ATTENTION_JOB");
    if (rc == 0)
        mhla_engine_free(bad);
    unsetenv("MHLA_ATTENTION_JOB");
    mhla_engine_options bad_opt = {.attention_job = "fast"};
    e = (mhla_error){0};
    rc = mhla_engine_create(m, &bad_opt, &bad, &e);
    expect(rc, &e, MHLA_ERR_INVALID, "the attention_job option 'fast' is INVALID");
    if (rc == 0)
        mhla_engine_free(bad);
    setenv("MHLA_THREAD_ADAPT", "sometimes", 1);
    e = (mhla_error){0};
    rc = mhla_engine_create(m, NULL, &bad, &e);
    expect(rc, &e, MHLA_ERR_INVALID, "MHLA_THREAD_ADAPT=sometimes is INVALID");
    failures += rc == 0 || !strstr(e.msg, "MHLA_THREAD_ADAPT");
    if (rc == 0)
        mhla_engine_free(bad);
    /* the option wins over the environment */
    mhla_engine_options adapt_off = {.n_threads = 2, .thread_adapt = "off"};
    e = (mhla_error){0};
    rc = mhla_engine_create(m, &adapt_off, &bad, &e);
    mhla_cpu_threads ct = {0};
    if (rc == 0) {
        mhla_engine_cpu_threads(bad, &ct);
        mhla_engine_free(bad);
    }
    printf("%s thread_adapt \"off\" beside MHLA_THREAD_ADAPT=sometimes: %s, %d of %d threads "
           "taking part\n",
           rc == 0 && ct.threads == 2 && ct.active == 2 ? "ok  " : "FAIL", rc ? e.msg : "created",
           ct.active, ct.threads);
    failures += rc != 0 || ct.threads != 2 || ct.active != 2;
    unsetenv("MHLA_THREAD_ADAPT");
    bad_opt = (mhla_engine_options){.thread_adapt = "maybe"};
    e = (mhla_error){0};
    rc = mhla_engine_create(m, &bad_opt, &bad, &e);
    expect(rc, &e, MHLA_ERR_INVALID, "the thread_adapt option 'maybe' is INVALID");
    if (rc == 0)
        mhla_engine_free(bad);

    const mhla_config *c = mhla_model_config(m);
    mhla_engine *eng;
    mhla_seq *s;
    if (mhla_engine_create(m, NULL, &eng, &e) || mhla_seq_create(m, &s, &e))
        die_err("engine", &e);
    int n = c->max_positions + 1;
    int32_t *tok = calloc((size_t)n, sizeof *tok);
    mhla_batch_item it = {.seq = s, .tokens = tok, .n_tokens = n, .logits_from = n};
    mhla_error r = {0};
    expect(mhla_engine_step(eng, &it, 1, &r), &r, MHLA_ERR_CONTEXT,
           "feeding max_positions + 1 tokens is CONTEXT");

    mhla_sampling_params sp;
    mhla_sampling_defaults(&sp);
    sp.temperature = -1;
    mhla_sampler *smp;
    r = (mhla_error){0};
    expect(mhla_sampler_create(&sp, c->vocab_size, NULL, 0, &smp, &r), &r, MHLA_ERR_INVALID,
           "a negative temperature is INVALID");
    float *logits = calloc((size_t)c->vocab_size, sizeof *logits);
    float lp;
    r = (mhla_error){0};
    expect(mhla_logprobs(logits, c->vocab_size, c->vocab_size, 0, &lp, NULL, &r), &r,
           MHLA_ERR_INVALID, "logprobs of a token outside the vocabulary is INVALID");
    free(logits);
    free(tok);
    mhla_seq_free(s);
    mhla_engine_free(eng);
    mhla_model_free(m);
    if (failures) {
        printf("%d FAILED\n", failures);
        return 1;
    }
    printf("all error-code checks passed\n");
    return 0;
}
