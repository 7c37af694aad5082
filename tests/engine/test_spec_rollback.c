/*
 * Drafted tokens verified in one step and taken back (engine/step_verify.c):
 * for every lane (greedy; seeded temperature 0.7 with top_p, top_k, the three
 * penalties and a logit bias), decoding with random drafts — right for a
 * while, then one wrong, at random lengths, so that spans end inside a
 * block, at its end, and past it, and the taken-back part lands before and
 * after block (= page) starts — gives every token, logprob and top list of
 * plain one-token decoding bit for bit, and after every step the sequence's
 * state file (mhla_seq_save: tokens, pages, the open block's rows) is byte
 * for byte the one plain decoding writes at the same position. The lanes run
 * alone (batch 1) and then all in one step with a plain decode lane and a
 * prompt chunk beside them. At the end every page is given back.
 *
 * With "cuda" last, the engine runs on the CUDA backend (f32 weights; built
 * against the simulator in tests/cuda, or a GPU): only the greedy lane
 * drafts there (a GPU samples a plain row's lone slot itself, and its
 * filtered sampling may choose another token of the same distribution) and
 * tokens and states are compared, not logprobs (the device computes a plain
 * row's). Exit 77 when MHLA_CPU_ISA names a kernel path this CPU cannot run,
 * or "cuda" finds no usable GPU.
 *
 * usage: test_spec_rollback CHECKPOINT WORKDIR [POOL_BYTES [cuda]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "engine.h"

enum { N_PROMPT = 11, MAX_GEN = 70, N_TOP = 3, MAX_DRAFT = 7, N_LANES = 3 };

static const mhla_model *model;
static int V, C;
static const char *workdir;
static size_t pool_bytes;
static int on_cuda;
static int N_GEN; /* tokens each lane generates: MAX_GEN or what the context holds */

typedef struct {
    const char *name;
    int sampled;
    int drafts; /* 0: a plain decode lane beside the drafting ones */
} lane_cfg;

static const lane_cfg LANES[N_LANES] = {{"greedy", 0, 1},
                                        {"sampled", 1, 1},
                                        {"plain beside", 1, 0}};

typedef struct {
    int32_t tok[MAX_GEN];
    float lp[MAX_GEN];
    mhla_logprob top[MAX_GEN][N_TOP];
} trace;

static mhla_engine *new_engine(void)
{
    mhla_engine_options o = {.n_threads = 1, .state_bytes = pool_bytes};
    if (on_cuda) {
        o.device = MHLA_DEVICE_CUDA;
        o.gpu_weights = MHLA_GPU_WEIGHTS_F32;
    }
    mhla_engine *e;
    mhla_error err = {0};
    if (mhla_engine_create(model, &o, &e, &err)) {
        if (strstr(err.msg, "cannot run here") || (on_cuda && strstr(err.msg, "cuda"))) {
            printf("skipped: %s\n", err.msg);
            exit(77);
        }
        die_err("engine", &err);
    }
    return e;
}

static mhla_seq *new_seq(mhla_engine *e)
{
    mhla_seq *s;
    mhla_error err = {0};
    if (mhla_engine_seq_create(e, &s, &err) ||
        mhla_seq_reserve(s, N_PROMPT + N_GEN + MAX_DRAFT + 1, &err))
        die_err("sequence", &err);
    return s;
}

static mhla_sampler *new_sampler(int sampled, uint64_t seed)
{
    static const mhla_logit_bias bias[] = {{5, 2.0f}, {7, -1.5f}, {11, 0.75f}};
    mhla_sampling_params p;
    mhla_sampling_defaults(&p);
    if (sampled) {
        p.temperature = 0.7f;
        p.top_p = 0.9f;
        p.top_k = 40;
        p.presence_penalty = 0.3f;
        p.frequency_penalty = 0.2f;
        p.repetition_penalty = 1.1f;
        p.logit_bias = bias;
        p.n_logit_bias = 3;
    } else {
        p.temperature = 0.0f;
    }
    p.seed = seed;
    mhla_sampler *s;
    mhla_error e = {0};
    if (mhla_sampler_create(&p, V, NULL, 0, &s, &e))
        die_err("sampler", &e);
    return s;
}

static void prompt_of(int lane, int32_t *p)
{
    for (int i = 0; i < N_PROMPT; i++)
        p[i] = (int32_t)((i * 29 + lane * 7 + 3) % V);
}

static void record(trace *t, int k, const mhla_sample_slot *sl)
{
    t->tok[k] = sl->token;
    t->lp[k] = sl->token_logprob;
    memcpy(t->top[k], sl->top, sizeof t->top[k]);
}

/* One-token steps on an engine of its own: the tokens spec decoding must give. */
static void plain_trace(mhla_engine *e, int lane, trace *t)
{
    int32_t prompt[N_PROMPT];
    prompt_of(lane, prompt);
    mhla_seq *s = new_seq(e);
    mhla_sampler *smp = new_sampler(LANES[lane].sampled, 1000 + (uint64_t)lane);
    mhla_sample_slot sl = {.sampler = smp, .at = N_PROMPT - 1, .n_top = N_TOP};
    mhla_batch_item it = {.seq = s,
                          .tokens = prompt,
                          .n_tokens = N_PROMPT,
                          .logits_from = N_PROMPT,
                          .sample = &sl,
                          .n_samples = 1};
    mhla_error err = {0};
    for (int k = 0; k < N_GEN; k++) {
        if (mhla_engine_step(e, &it, 1, &err) || sl.status)
            die_err("plain decode", sl.status ? &sl.err : &err);
        record(t, k, &sl);
        it.tokens = &t->tok[k];
        it.n_tokens = it.logits_from = 1;
        sl.at = 0;
    }
    mhla_sampler_free(smp);
    mhla_seq_free(s);
}

static long file_bytes(const char *path, unsigned char **out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc((size_t)n + 1);
    if (!*out || fread(*out, 1, (size_t)n, f) != (size_t)n)
        die("cannot read %s", path);
    fclose(f);
    return n;
}

/* A drafting lane and its plain twin, fed the same tokens one at a time, so
 * that the two states can be compared at every position the lane reaches. */
typedef struct {
    int lane;
    mhla_seq *seq, *twin;
    mhla_sampler *smp;
    int n_out;        /* tokens chosen so far */
    int twin_fed;     /* generated tokens the twin has consumed */
    int32_t feed[16]; /* last token, then drafts */
    mhla_sample_slot sl[16];
    int n_feed;
} lane_run;

static void check_state(lane_run *r, mhla_engine *plain_eng, const trace *t)
{
    mhla_error err = {0};
    /* the twin consumes the same generated tokens the lane kept */
    while (mhla_seq_pos(r->twin) < mhla_seq_pos(r->seq)) {
        mhla_batch_item it = {.seq = r->twin,
                              .tokens = &t->tok[r->twin_fed],
                              .n_tokens = 1,
                              .logits_from = 1};
        if (mhla_engine_step(plain_eng, &it, 1, &err))
            die_err("twin", &err);
        r->twin_fed++;
    }
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/spec_%d.state", workdir, r->lane);
    snprintf(b, sizeof b, "%s/plain_%d.state", workdir, r->lane);
    if (mhla_seq_save(r->seq, a, &err) || mhla_seq_save(r->twin, b, &err))
        die_err("save", &err);
    unsigned char *x, *y;
    long nx = file_bytes(a, &x), ny = file_bytes(b, &y);
    CHECK(nx == ny && memcmp(x, y, (size_t)nx) == 0,
          "lane %s at position %d: state differs from plain decoding's (%ld and %ld bytes)",
          LANES[r->lane].name, mhla_seq_pos(r->seq), nx, ny);
    free(x);
    free(y);
}

/* The lane's next item: its last token and up to MAX_DRAFT drafts, right
 * up to a random one that is wrong (or none). */
static mhla_batch_item lane_item(lane_run *r, const trace *t)
{
    r->feed[0] = t->tok[r->n_out - 1];
    int left = N_GEN - r->n_out, k = 0;
    if (LANES[r->lane].drafts && !(on_cuda && LANES[r->lane].sampled)) {
        k = rnd(MAX_DRAFT + 1);
        k = k > left - 1 ? left - 1 : k;
        k = k > C - 1 ? C - 1 : k;
    }
    int wrong = 1 + rnd(k + 2); /* k + 1 and past: every draft right */
    for (int j = 1; j <= k; j++)
        r->feed[j] =
            j == wrong ? (t->tok[r->n_out - 1 + j] + 1 + rnd(V - 1)) % V : t->tok[r->n_out - 1 + j];
    r->n_feed = k + 1;
    for (int j = 0; j <= k; j++)
        r->sl[j] = (mhla_sample_slot){.sampler = r->smp, .at = j, .n_top = N_TOP};
    return (mhla_batch_item){.seq = r->seq,
                             .tokens = r->feed,
                             .n_tokens = k + 1,
                             .logits_from = k + 1,
                             .sample = r->sl,
                             .n_samples = k + 1};
}

static int crossings; /* steps that took drafts back across a block start */

/* After a step: the lane's chosen tokens against the trace, its position. */
static void lane_check(lane_run *r, const trace *t, int pos_before)
{
    int kept = 0, ok = 1;
    for (int j = 0; j < r->n_feed && ok; j++) {
        const mhla_sample_slot *sl = &r->sl[j];
        int k = r->n_out;
        CHECK(sl->status == MHLA_SLOT_OK, "lane %s slot %d: status %d", LANES[r->lane].name, j,
              sl->status);
        if (sl->status != MHLA_SLOT_OK)
            return;
        int same_lp = on_cuda || (memcmp(&sl->token_logprob, &t->lp[k], sizeof(float)) == 0 &&
                                  memcmp(sl->top, t->top[k], sizeof t->top[k]) == 0);
        CHECK(sl->token == t->tok[k] && same_lp,
              "lane %s token %d: %d (logprob %.9g), plain decoding %d (%.9g)", LANES[r->lane].name,
              k, sl->token, sl->token_logprob, t->tok[k], t->lp[k]);
        r->n_out++;
        kept++;
        ok = j + 1 < r->n_feed && sl->token == r->feed[j + 1];
    }
    for (int j = kept; j < r->n_feed; j++)
        CHECK(r->sl[j].status == MHLA_SLOT_SKIPPED, "lane %s slot %d after a miss: status %d",
              LANES[r->lane].name, j, r->sl[j].status);
    CHECK(mhla_seq_pos(r->seq) == pos_before + kept, "lane %s: position %d, want %d",
          LANES[r->lane].name, mhla_seq_pos(r->seq), pos_before + kept);
    int end = pos_before + r->n_feed;
    if (kept < r->n_feed && pos_before % C != 0 && (end - 1) / C > pos_before / C &&
        (pos_before + kept) / C == pos_before / C)
        crossings++;
}

static void lane_start(lane_run *r, int lane, mhla_engine *e, mhla_engine *plain_eng,
                       const trace *t)
{
    memset(r, 0, sizeof *r);
    r->lane = lane;
    r->seq = new_seq(e);
    r->twin = new_seq(plain_eng);
    r->smp = new_sampler(LANES[lane].sampled, 1000 + (uint64_t)lane);
    int32_t prompt[N_PROMPT];
    prompt_of(lane, prompt);
    r->sl[0] = (mhla_sample_slot){.sampler = r->smp, .at = N_PROMPT - 1, .n_top = N_TOP};
    mhla_batch_item it[2] = {
        {.seq = r->seq,
         .tokens = prompt,
         .n_tokens = N_PROMPT,
         .logits_from = N_PROMPT,
         .sample = r->sl,
         .n_samples = 1},
        {.seq = r->twin, .tokens = prompt, .n_tokens = N_PROMPT, .logits_from = N_PROMPT}};
    mhla_error err = {0};
    if (mhla_engine_step(e, &it[0], 1, &err) || mhla_engine_step(plain_eng, &it[1], 1, &err))
        die_err("prompt", &err);
    CHECK(r->sl[0].token == t->tok[0], "lane %s first token %d, plain %d", LANES[lane].name,
          r->sl[0].token, t->tok[0]);
    r->n_out = 1;
}

/* The lanes [first, first + n) together, plus (when side) a prompt of
 * another sequence fed a chunk per step beside them. */
static void run_lanes(int first, int n, int side, const trace *traces)
{
    mhla_engine *e = new_engine(), *pe = new_engine();
    lane_run runs[N_LANES];
    int crossings_before = crossings;
    for (int l = 0; l < n; l++)
        lane_start(&runs[l], first + l, e, pe, &traces[first + l]);
    mhla_seq *other = new_seq(e);
    int32_t other_tokens[MAX_GEN * 2];
    for (int i = 0; i < N_GEN * 2; i++)
        other_tokens[i] = (int32_t)((i * 13 + 1) % V);
    int other_fed = 0;
    for (int busy = 1; busy;) {
        mhla_batch_item items[N_LANES + 1];
        int pos[N_LANES], n_items = 0, lane_of[N_LANES];
        busy = 0;
        for (int l = 0; l < n; l++) {
            if (runs[l].n_out >= N_GEN)
                continue;
            pos[n_items] = mhla_seq_pos(runs[l].seq);
            lane_of[n_items] = l;
            items[n_items++] = lane_item(&runs[l], &traces[first + l]);
        }
        int lanes_in = n_items;
        if (side && other_fed + 5 <= N_GEN + N_PROMPT && n_items > 0) {
            items[n_items++] = (mhla_batch_item){.seq = other,
                                                 .tokens = other_tokens + other_fed,
                                                 .n_tokens = 5,
                                                 .logits_from = 5};
            other_fed += 5;
        }
        if (n_items == 0)
            break;
        mhla_error err = {0};
        if (mhla_engine_step(e, items, n_items, &err))
            die_err("spec step", &err);
        for (int b = 0; b < lanes_in; b++) {
            lane_run *r = &runs[lane_of[b]];
            lane_check(r, &traces[r->lane], pos[b]);
            check_state(r, pe, &traces[r->lane]);
            busy |= r->n_out < N_GEN;
        }
    }
    for (int l = 0; l < n; l++) {
        mhla_seq_free(runs[l].seq);
        mhla_seq_free(runs[l].twin);
        mhla_sampler_free(runs[l].smp);
    }
    mhla_seq_free(other);
    mhla_verify_stats vs;
    mhla_engine_verify_stats(e, &vs);
    CHECK(vs.block_restores == (uint64_t)(crossings - crossings_before),
          "the engine counted %llu restores of the open block, the test %d",
          (unsigned long long)vs.block_restores, crossings - crossings_before);
    mhla_state_stats st;
    mhla_engine_state_stats(e, &st);
    CHECK(st.pages_used == 0 && (pool_bytes == 0 || st.pages_reserved == 0),
          "after every sequence is freed: %ld pages used, %ld reserved", st.pages_used,
          st.pages_reserved);
    mhla_engine_free(e);
    mhla_engine_free(pe);
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 5)
        die("usage: test_spec_rollback CHECKPOINT WORKDIR [POOL_BYTES [cuda]]");
    on_cuda = argc == 5 && strcmp(argv[4], "cuda") == 0;
    workdir = argv[2];
    (void)mkdir(workdir, 0777); /* may exist; a save there fails loudly if it cannot */
    pool_bytes = argc >= 4 ? (size_t)strtoull(argv[3], NULL, 10) : 0;
    mhla_model *m;
    mhla_error e = {0};
    if (mhla_model_load(argv[1], &m, &e))
        die_err("load", &e);
    model = m;
    V = mhla_model_config(m)->vocab_size;
    C = mhla_model_config(m)->chunk_size;
    N_GEN = mhla_model_config(m)->max_positions - N_PROMPT - MAX_DRAFT - 1;
    N_GEN = N_GEN > MAX_GEN ? MAX_GEN : N_GEN;
    if (N_GEN < 3 * C)
        die("the checkpoint's context is too short for this test");
    trace traces[N_LANES];
    mhla_engine *ref = new_engine();
    for (int l = 0; l < N_LANES; l++)
        plain_trace(ref, l, &traces[l]);
    mhla_engine_free(ref);
    for (int round = 0; round < (on_cuda ? 1 : 3); round++) {
        for (int l = 0; l < N_LANES; l++)
            run_lanes(l, 1, 0, traces);   /* batch 1 */
        run_lanes(0, N_LANES, 1, traces); /* mixed: the lanes, a plain row and a prompt chunk */
    }
    CHECK(crossings > 0, "no step took drafts back across a block start: nothing tested there");
    mhla_model_free(m);
    if (failures)
        return 1;
    printf("drafts taken back (%d times across a block start): tokens, logprobs and state files "
           "equal plain decoding's\nengine.spec_rollback: OK\n",
           crossings);
    return 0;
}
