/*
 * A sequence's logits must be the same bits whether it runs alone or in a
 * batch with other sequences of other lengths, whatever the split of its
 * tokens into calls and whatever the number of threads. Also checks that a
 * refused call (context limit, bad token, duplicate sequence) leaves every
 * sequence exactly where it was.
 *
 * usage: test_batch_independence MODEL_DIR [f32|bf16|bf16dot|q8|q4]
 */
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_RNG_SEED 88172645463325252ull
#include "check.h"

#define N_SEQ 5
/* the wide batch: more sequences than the attention's one-job form needs
 * (engine/cpu/attention_job.c, from 16 a step), most of them decoding */
#define N_WIDE 20

/* Logits of every position of tokens[0..n), fed alone in chunks of `chunk`
 * (0: one call). */
static float *run_alone(const mhla_model *m, int threads, const int32_t *tokens, int n, int chunk)
{
    const mhla_config *c = mhla_model_config(m);
    mhla_error err;
    mhla_engine *e;
    mhla_seq *s;
    mhla_engine_options o = {.n_threads = threads};
    if (mhla_engine_create(m, &o, &e, &err) || mhla_seq_create(m, &s, &err))
        die_err("create", &err);
    float *logits = malloc((size_t)n * c->vocab_size * sizeof(float));
    for (int done = 0; done < n;) {
        int len = chunk ? chunk : n;
        if (len > n - done)
            len = n - done;
        mhla_batch_item it = {s, tokens + done, len, 0, logits + (size_t)done * c->vocab_size, NULL,
                              0, NULL};
        if (mhla_engine_step(e, &it, 1, &err))
            die_err("forward alone", &err);
        done += len;
    }
    mhla_seq_free(s);
    mhla_engine_free(e);
    return logits;
}

/* A wide batch: every unfinished sequence in every step, mostly one token
 * each (decode), so steps hold 16 and more sequences until the shorter ones
 * finish, and fewer after; each sequence's logits against its own alone.
 * Returns the steps it took. */
static int wide_batch(const mhla_model *m, int threads)
{
    const mhla_config *c = mhla_model_config(m);
    int V = c->vocab_size;
    mhla_error err;
    mhla_engine *e;
    mhla_engine_options o = {.n_threads = threads};
    if (mhla_engine_create(m, &o, &e, &err))
        die_err("engine", &err);
    int wlen[N_WIDE], wdone[N_WIDE] = {0};
    int32_t *wtok[N_WIDE];
    float *walone[N_WIDE], *wbatched[N_WIDE];
    mhla_seq *wseq[N_WIDE];
    int wide_steps = 0, widest = 0;
    for (int i = 0; i < N_WIDE; i++) {
        wlen[i] = 2 * c->chunk_size + rnd(2 * c->chunk_size + 3);
        wtok[i] = malloc((size_t)wlen[i] * sizeof(int32_t));
        for (int t = 0; t < wlen[i]; t++)
            wtok[i][t] = rnd(V);
        walone[i] = run_alone(m, 1, wtok[i], wlen[i], 0);
        wbatched[i] = calloc((size_t)wlen[i] * V, sizeof(float));
        if (mhla_seq_create(m, &wseq[i], &err))
            die_err("seq", &err);
    }
    for (;;) {
        mhla_batch_item items[N_WIDE];
        int n = 0;
        for (int i = 0; i < N_WIDE; i++) {
            if (wdone[i] == wlen[i])
                continue;
            int chunk = rnd(8) == 0 ? 1 + rnd(c->chunk_size + 1) : 1;
            if (chunk > wlen[i] - wdone[i])
                chunk = wlen[i] - wdone[i];
            items[n++] = (mhla_batch_item){
                wseq[i], wtok[i] + wdone[i], chunk, 0, wbatched[i] + (size_t)wdone[i] * V, NULL, 0,
                NULL};
            wdone[i] += chunk;
        }
        if (n == 0)
            break;
        if (mhla_engine_step(e, items, n, &err))
            die_err("forward wide", &err);
        widest = n > widest ? n : widest;
        wide_steps++;
    }
    for (int i = 0; i < N_WIDE; i++) {
        CHECK(memcmp(wbatched[i], walone[i], (size_t)wlen[i] * V * sizeof(float)) == 0,
              "sequence %d (%d tokens) differs in the wide batch (%d threads) from alone", i,
              wlen[i], threads);
        mhla_seq_free(wseq[i]);
        free(wtok[i]);
        free(walone[i]);
        free(wbatched[i]);
    }
    CHECK(widest == N_WIDE, "the wide batch's first step held %d sequences, not %d", widest,
          N_WIDE);
    mhla_engine_free(e);
    return wide_steps;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s MODEL_DIR [f32|bf16|bf16dot|q8|q4]\n", argv[0]);
        return 2;
    }
    mhla_error err;
    mhla_model *m;
    mhla_model_options mo = {.weights = MHLA_WEIGHTS_F32};
    if (argc == 3 && mhla_weight_dtype_parse(argv[2], &mo.weights, &err))
        die_err("weights", &err);
    if (mhla_model_load_with(argv[1], &mo, &m, &err))
        die_err("load", &err);
    const mhla_config *c = mhla_model_config(m);
    int V = c->vocab_size, ctx = c->max_positions;
    int len[N_SEQ] = {1, c->chunk_size - 1, c->chunk_size + 1, 3 * c->chunk_size + 2, ctx};
    int32_t *tok[N_SEQ];
    float *alone[N_SEQ];
    for (int i = 0; i < N_SEQ; i++) {
        tok[i] = malloc((size_t)len[i] * sizeof(int32_t));
        for (int t = 0; t < len[i]; t++)
            tok[i][t] = rnd(V);
        alone[i] = run_alone(m, 1, tok[i], len[i], 0);
    }

    /* Split and thread invariance of one sequence. */
    int longest = N_SEQ - 1;
    size_t bytes = (size_t)len[longest] * V * sizeof(float);
    float *decode = run_alone(m, 2, tok[longest], len[longest], 1);
    CHECK(memcmp(decode, alone[longest], bytes) == 0,
          "token-by-token decode (2 threads) differs from one prefill (1 thread)");
    float *chunks = run_alone(m, 2, tok[longest], len[longest], 5);
    CHECK(memcmp(chunks, alone[longest], bytes) == 0, "chunks of 5 differ from one prefill");
    free(decode);
    free(chunks);

    /* All sequences together: each step gives every unfinished sequence a
     * random chunk (1 token = decode), so prefills and decodes mix and the
     * batch's composition changes from step to step. */
    mhla_engine *e;
    mhla_engine_options o = {.n_threads = 2};
    if (mhla_engine_create(m, &o, &e, &err))
        die_err("engine", &err);
    mhla_seq *seq[N_SEQ];
    int done[N_SEQ] = {0};
    float *batched[N_SEQ];
    for (int i = 0; i < N_SEQ; i++) {
        if (mhla_seq_create(m, &seq[i], &err))
            die_err("seq", &err);
        batched[i] = calloc((size_t)len[i] * V, sizeof(float));
    }
    int steps = 0;
    for (;;) {
        mhla_batch_item items[N_SEQ];
        int n = 0;
        for (int i = 0; i < N_SEQ; i++) {
            if (done[i] == len[i] || rnd(4) == 0)
                continue;
            int chunk = rnd(3) == 0 ? 1 : 1 + rnd(2 * c->chunk_size + 3);
            if (chunk > len[i] - done[i])
                chunk = len[i] - done[i];
            items[n++] = (mhla_batch_item){
                seq[i], tok[i] + done[i], chunk, 0, batched[i] + (size_t)done[i] * V, NULL, 0,
                NULL};
            done[i] += chunk;
        }
        int left = 0;
        for (int i = 0; i < N_SEQ; i++)
            left += len[i] - done[i];
        if (n > 0 && mhla_engine_step(e, items, n, &err))
            die_err("forward batched", &err);
        steps++;
        if (!left)
            break;
    }
    for (int i = 0; i < N_SEQ; i++)
        CHECK(memcmp(batched[i], alone[i], (size_t)len[i] * V * sizeof(float)) == 0,
              "sequence %d (%d tokens) differs in a batch from alone", i, len[i]);

    /* A wide batch, on 2 and on 3 threads. */
    int wide_steps = 0;
    for (int threads = 2; threads <= 3; threads++)
        wide_steps += wide_batch(m, threads);

    /* Refusals change nothing. seq[0] holds 1 token; seq[4] is at the limit. */
    int32_t one = 1, bad = V;
    float *l1 = malloc((size_t)V * sizeof(float)), *l2 = malloc((size_t)V * sizeof(float));
    mhla_seq *copy;
    if (mhla_seq_clone(seq[0], &copy, &err))
        die_err("clone", &err);
    mhla_batch_item over[2] = {{seq[0], &one, 1, 0, l1, NULL, 0, NULL},
                               {seq[N_SEQ - 1], &one, 1, 0, l2, NULL, 0, NULL}};
    CHECK(mhla_engine_step(e, over, 2, &err) != 0 && strstr(err.msg, "context"),
          "a token past the context was not refused (%s)", err.msg);
    mhla_batch_item badtok[2] = {{seq[0], &one, 1, 0, l1, NULL, 0, NULL},
                                 {seq[1], &bad, 1, 0, l2, NULL, 0, NULL}};
    CHECK(mhla_engine_step(e, badtok, 2, &err) != 0 && strstr(err.msg, "vocabulary"),
          "an out-of-vocabulary token was not refused (%s)", err.msg);
    mhla_batch_item dup[2] = {{seq[0], &one, 1, 0, l1, NULL, 0, NULL},
                              {seq[0], &one, 1, 0, l2, NULL, 0, NULL}};
    CHECK(mhla_engine_step(e, dup, 2, &err) != 0 && strstr(err.msg, "same sequence"),
          "a sequence fed twice in one call was not refused (%s)", err.msg);
    CHECK(mhla_seq_pos(seq[0]) == 1 && mhla_seq_pos(seq[N_SEQ - 1]) == ctx,
          "a refused call moved a sequence");
    mhla_batch_item a = {seq[0], &one, 1, 0, l1, NULL, 0, NULL},
                    b = {copy, &one, 1, 0, l2, NULL, 0, NULL};
    if (mhla_engine_step(e, &a, 1, &err) || mhla_engine_step(e, &b, 1, &err))
        die_err("forward after refusal", &err);
    CHECK(memcmp(l1, l2, (size_t)V * sizeof(float)) == 0,
          "after refused calls a sequence differs from its clone");

    for (int i = 0; i < N_SEQ; i++) {
        mhla_seq_free(seq[i]);
        free(tok[i]);
        free(alone[i]);
        free(batched[i]);
    }
    mhla_seq_free(copy);
    free(l1);
    free(l2);
    mhla_engine_free(e);
    mhla_model_free(m);
    printf("batch independence: %d mixed steps over %d sequences, %d steps of a batch of %d on 2 "
           "and 3 threads, %s\n",
           steps, N_SEQ, wide_steps, N_WIDE, failures ? "FAILED" : "all bitwise identical");
    return failures ? 1 : 0;
}
