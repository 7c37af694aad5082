/*
 * A prompt prefilled in the chunks the step planner (server/step_plan.c)
 * picks -- 1 to ~10 tokens, ending anywhere in a block -- while another
 * sequence decodes one token per step beside it, one engine call per step,
 * gives the same logits, bit for bit, as the prompt run alone in one call
 * (and the decoding sequence the same as alone, token by token). The
 * simulated step costs and the target change from step to step, so the
 * chunk sizes vary. The engine's own split and batch invariance is
 * engine.batch_independence; this is the planner's splits on top of it.
 *
 * usage: test_plan_chunks MODEL_DIR
 */
#include "engine.h"
#include "step_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* Logits of every position of tokens[0..n), fed alone in one call. */
static float *run_alone(const mhla_model *m, const int32_t *tokens, int n)
{
    int V = mhla_model_config(m)->vocab_size;
    mhla_error err;
    mhla_engine *e;
    mhla_seq *s;
    mhla_engine_options o = {.n_threads = 1};
    if (mhla_engine_create(m, &o, &e, &err) || mhla_seq_create(m, &s, &err))
        die_err("create", &err);
    float *logits = malloc((size_t)n * V * sizeof(float));
    mhla_batch_item it = {s, tokens, n, 0, logits, NULL, 0, NULL};
    if (mhla_engine_step(e, &it, 1, &err))
        die_err("forward alone", &err);
    mhla_seq_free(s);
    mhla_engine_free(e);
    return logits;
}

/* The longest sequence (a) prefilled in the chunks the server's step planner
 * picks while sequence b decodes one token per step, both in one call per
 * step, on a simulated engine whose costs and target change from step to
 * step (chunks of 1 to ~20 tokens, ending anywhere in a block); then both
 * must equal their runs alone. */
static void check_planned_chunks(const mhla_model *m, const int32_t *ta, int na, const float *la,
                                 const int32_t *tb, int nb, const float *lb)
{
    int V = mhla_model_config(m)->vocab_size;
    mhla_error err;
    mhla_engine *e;
    mhla_seq *a, *b;
    mhla_engine_options o = {.n_threads = 2};
    if (mhla_engine_create(m, &o, &e, &err) || mhla_seq_create(m, &a, &err) ||
        mhla_seq_create(m, &b, &err))
        die_err("planned: create", &err);
    float *ra = malloc((size_t)na * V * sizeof(float)),
          *rb = malloc((size_t)nb * V * sizeof(float));
    srv_step_cost cost;
    srv_step_cost_reset(&cost, 0);
    srv_step_cost_observe(&cost, 0, 1, 0, 0, 1e-3 + 1e-4); /* a decode-only step, then */
    for (int k = 0; k < 8; k++) /* past the probes: the fit sizes the chunks */
        srv_step_cost_observe(&cost, 0, 1, 1 + k, 0, 1e-3 + 1e-4 + 5e-5 * (1 + k));
    int da = 0, db = 0, steps = 0, sizes = 0;
    while (da < na) {
        srv_plan_limits lim = {.target_s = 1.15e-3 + 5e-5 * rnd(20), .max_tokens = 64};
        srv_plan_prompt pp = {na - da, da, 0.01 * steps};
        int order, chunk, rows = db < nb;
        srv_plan_prefill(&lim, &cost, rows, &pp, 1, &order, &chunk);
        mhla_batch_item it[2] = {{a, ta + da, chunk, 0, ra + (size_t)da * V, NULL, 0, NULL},
                                 {b, tb + db, 1, 0, rb + (size_t)db * V, NULL, 0, NULL}};
        if (chunk == 0 && !rows)
            die_err("planned: the planner gave no prompt tokens", &err);
        /* a step with no prompt tokens (one in 32 measures decoding alone) runs b alone */
        if (mhla_engine_step(e, chunk > 0 ? it : it + 1, (chunk > 0) + rows, &err))
            die_err("planned: forward", &err);
        srv_step_cost_observe(&cost, 0, rows, chunk, 0, 1e-3 + 1e-4 * rows + 5e-5 * chunk);
        sizes |= chunk < 32 ? 1 << chunk : 0;
        da += chunk;
        db += rows;
        steps++;
    }
    CHECK(memcmp(ra, la, (size_t)na * V * sizeof(float)) == 0,
          "the planner's chunks (%d steps) differ from one prefill", steps);
    CHECK(memcmp(rb, lb, (size_t)db * V * sizeof(float)) == 0,
          "the decoding sequence beside the planner's chunks differs from alone");
    CHECK(__builtin_popcount((unsigned)sizes) >= 3, "the planner picked too few chunk sizes");
    mhla_seq_free(a);
    mhla_seq_free(b);
    mhla_engine_free(e);
    free(ra);
    free(rb);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
        return 2;
    }
    mhla_error err;
    mhla_model *m;
    if (mhla_model_load(argv[1], &m, &err))
        die_err("load", &err);
    const mhla_config *c = mhla_model_config(m);
    int na = c->max_positions, nb = 3 * c->chunk_size + 2;
    int32_t *ta = malloc((size_t)na * sizeof(int32_t)), *tb = malloc((size_t)nb * sizeof(int32_t));
    for (int t = 0; t < na; t++)
        ta[t] = rnd(c->vocab_size);
    for (int t = 0; t < nb; t++)
        tb[t] = rnd(c->vocab_size);
    float *la = run_alone(m, ta, na), *lb = run_alone(m, tb, nb);
    check_planned_chunks(m, ta, na, la, tb, nb, lb);
    free(ta);
    free(tb);
    free(la);
    free(lb);
    mhla_model_free(m);
    printf("planner's chunks: %s\n", failures ? "FAILED" : "all bitwise identical");
    return failures ? 1 : 0;
}
