/*
 * The CUDA backend's state handling, through the engine API: decode steps
 * replayed as CUDA graphs give the bits eager steps give; a sequence's
 * logits do not depend on the batch around it; a prefix-cache hit, a resume
 * mid-block (P_i recomputed on the device), a snapshot load and a clone
 * continue exactly as computing from scratch; sequences with state on the
 * GPU are refused by a CPU engine and vice versa; nothing leaks.
 *
 * Built twice: against the CPU simulator of CUDA (every comparison bitwise:
 * --tol 0) and against the real backend (on a GPU, cuBLAS may pick another
 * algorithm for another batch shape: --tol 1e-4, relative to each row's rms).
 * Without a usable GPU it prints why and exits 77 (ctest: skipped).
 *
 * usage: test_cuda_state MODEL_DIR WORK_DIR [--tol T]
 */
#include "engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_RNG_SEED 0x2545f4914f6cdd1dull
#include "check.h"
#include "gpu_engine.h"

static const mhla_config *cfg;
static int V, C;
static double tol;
static double worst;

static mhla_engine *gpu_engine(const mhla_model *m, size_t state_bytes, int graphs)
{
    mhla_engine_options o = {.n_threads = 2,
                             .device = MHLA_DEVICE_CUDA,
                             .gpu_weights = MHLA_GPU_WEIGHTS_F32,
                             .gpu_no_graphs = !graphs,
                             .state_bytes = state_bytes,
                             .resume_slots = state_bytes ? 8 : 0};
    return engine_or_skip(m, &o);
}

static mhla_seq *new_seq(mhla_engine *e)
{
    mhla_seq *s;
    mhla_error err;
    if (mhla_engine_seq_create(e, &s, &err))
        die_err("sequence", &err);
    return s;
}

/* Feeds tokens in one call; logits of the last position into out. */
static void feed(mhla_engine *e, mhla_seq *s, const int32_t *t, int n, float *out)
{
    mhla_batch_item it = {s, t, n, n - 1, out, NULL, 0, NULL};
    mhla_error err;
    if (mhla_engine_step(e, &it, 1, &err))
        die_err("forward", &err);
}

/* a against reference b, one row of V: bitwise when tol is 0. */
static void same(const char *what, const float *a, const float *b)
{
    if (tol == 0) {
        CHECK(memcmp(a, b, (size_t)V * sizeof(float)) == 0, "%s: logits differ (bitwise)", what);
        return;
    }
    double rms = 0, e = 0;
    for (int v = 0; v < V; v++)
        rms += (double)b[v] * b[v];
    rms = sqrt(rms / V);
    for (int v = 0; v < V; v++) {
        double d = fabs((double)a[v] - b[v]) / fmax(fabs(b[v]), rms);
        e = d > e ? d : e;
    }
    worst = e > worst ? e : worst;
    CHECK(e <= tol, "%s: relative error %.3g > %.3g", what, e, tol);
}

static void random_tokens(int32_t *t, int n)
{
    for (int i = 0; i < n; i++)
        t[i] = (int32_t)rnd(V);
}

/* Three sequences prefilled to different lengths, then decoded together;
 * graphs and eager steps must agree, and so must each sequence alone. */
static void test_graphs_and_batch(const mhla_model *m)
{
    enum { NS = 3, STEPS = 40 };
    mhla_engine *eg = gpu_engine(m, 0, 1), *en = gpu_engine(m, 0, 0);
    int len[NS] = {C - 1, 2 * C + 3, 5};
    int32_t *tok = malloc(sizeof(int32_t) * NS * (3 * C + STEPS));
    float *lg = malloc(sizeof(float) * NS * V), *ln = malloc(sizeof(float) * NS * V);
    float *alone = malloc(sizeof(float) * V);
    mhla_seq *sg[NS], *sn[NS], *sa[NS];
    int stride = 3 * C + STEPS;
    for (int i = 0; i < NS; i++) {
        random_tokens(tok + i * stride, len[i] + STEPS);
        sg[i] = new_seq(eg);
        sn[i] = new_seq(en);
        sa[i] = new_seq(en);
        feed(eg, sg[i], tok + i * stride, len[i], lg + (size_t)i * V);
        feed(en, sn[i], tok + i * stride, len[i], ln + (size_t)i * V);
        feed(en, sa[i], tok + i * stride, len[i], alone);
        same("prefill, graphs engine vs eager engine", lg + (size_t)i * V, ln + (size_t)i * V);
    }
    mhla_error err;
    for (int s = 0; s < STEPS; s++) {
        mhla_batch_item ig[NS], in[NS];
        for (int i = 0; i < NS; i++) {
            const int32_t *t = tok + i * stride + len[i] + s;
            ig[i] = (mhla_batch_item){sg[i], t, 1, 0, lg + (size_t)i * V, NULL, 0, NULL};
            in[i] = (mhla_batch_item){sn[i], t, 1, 0, ln + (size_t)i * V, NULL, 0, NULL};
        }
        if (mhla_engine_step(eg, ig, NS, &err) || mhla_engine_step(en, in, NS, &err))
            die_err("decode", &err);
        for (int i = 0; i < NS; i++) {
            char what[96];
            snprintf(what, sizeof what, "decode step %d seq %d: graph vs eager", s, i);
            CHECK(memcmp(lg + (size_t)i * V, ln + (size_t)i * V, (size_t)V * 4) == 0, "%s", what);
            feed(en, sa[i], tok + i * stride + len[i] + s, 1, alone);
            snprintf(what, sizeof what, "decode step %d seq %d: batch of 3 vs alone", s, i);
            same(what, ln + (size_t)i * V, alone);
        }
    }
    mhla_device_stats dg, dn;
    mhla_engine_device_stats(eg, &dg);
    mhla_engine_device_stats(en, &dn);
    CHECK(dg.graph_captures == 1 && dg.graph_replays == STEPS,
          "graphs engine: %llu captures, %llu replays (want 1 and %d)",
          (unsigned long long)dg.graph_captures, (unsigned long long)dg.graph_replays, STEPS);
    CHECK(dn.graph_replays == 0, "the eager engine replayed %llu graphs",
          (unsigned long long)dn.graph_replays);
    /* a step that mixes a prefill chunk with decode tokens */
    int32_t extra[2 * 8];
    random_tokens(extra, 2 * 8);
    mhla_batch_item mix[2] = {{sn[0], extra, 8, 0, NULL, NULL, 0, NULL},
                              {sn[1], extra + 8, 1, 0, ln, NULL, 0, NULL}};
    float *chunk = malloc(sizeof(float) * 8 * V);
    mix[0].logits = chunk;
    if (mhla_engine_step(en, mix, 2, &err))
        die_err("mixed step", &err);
    feed(en, sa[1], extra + 8, 1, alone);
    same("decode token batched with a prefill chunk vs alone", ln, alone);
    for (int i = 0; i < NS; i++) {
        mhla_seq_free(sg[i]);
        mhla_seq_free(sn[i]);
        mhla_seq_free(sa[i]);
    }
    free(chunk);
    mhla_engine_free(eg);
    mhla_engine_free(en);
    free(tok);
    free(lg);
    free(ln);
    free(alone);
    printf("done: graphs = eager (bitwise) over %d decode steps; batched = alone\n", STEPS);
}

/* Prefix hit, resume mid-block, snapshot, clone: each continues exactly as
 * a sequence computed from scratch on an engine without a pool. */
static void test_state_memory(const mhla_model *m, const char *work)
{
    mhla_engine *ep = gpu_engine(m, (size_t)64 << 20, 1), *ef = gpu_engine(m, 0, 1);
    mhla_error err;
    int n = 3 * C + 2, tail = C / 2; /* the resumed block stays open: its P_i is the restored one */
    int32_t *t = malloc(sizeof(int32_t) * (n + tail));
    float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
    random_tokens(t, n + tail);

    /* reference: everything from scratch */
    mhla_seq *ref = new_seq(ef);
    feed(ef, ref, t, n + tail, b);

    /* prefix hit: a first sequence publishes 3 blocks and finishes mid-block */
    mhla_seq *s1 = new_seq(ep);
    feed(ep, s1, t, n, a);
    mhla_seq_finish(s1);
    mhla_state_stats st;
    mhla_seq *s2 = new_seq(ep);
    int pos = mhla_seq_match_prefix(s2, t, n + tail, &err);
    if (pos < 0)
        die_err("match", &err);
    mhla_engine_state_stats(ep, &st);
    CHECK(pos == n, "resume should reach position %d, got %d", n, pos);
    CHECK(st.prefix_hits == 3 && st.resumes == 1, "hits %llu resumes %llu",
          (unsigned long long)st.prefix_hits, (unsigned long long)st.resumes);
    feed(ep, s2, t + pos, n + tail - pos, a);
    same("prefix hit + resume mid-block vs from scratch", a, b);

    /* a prompt that shares only whole blocks: hits without the resume */
    int32_t *u = malloc(sizeof(int32_t) * (2 * C + 7));
    memcpy(u, t, sizeof(int32_t) * 2 * C);
    random_tokens(u + 2 * C, 7);
    mhla_seq *s3 = new_seq(ep), *r3 = new_seq(ef);
    pos = mhla_seq_match_prefix(s3, u, 2 * C + 7, &err);
    CHECK(pos == 2 * C, "block hits should reach %d, got %d", 2 * C, pos);
    feed(ep, s3, u + pos, 2 * C + 7 - pos, a);
    feed(ef, r3, u, 2 * C + 7, b);
    same("prefix hit of two blocks vs from scratch", a, b);

    /* snapshot mid-block, loaded into a fresh sequence, continued */
    char path[512];
    snprintf(path, sizeof path, "%s/cuda_state.snap", work);
    mhla_seq *s4 = new_seq(ef), *s5 = new_seq(ef), *r4 = new_seq(ef);
    feed(ef, s4, t, n, a);
    if (mhla_seq_save(s4, path, &err) || mhla_seq_load(s5, path, &err))
        die_err("snapshot", &err);
    CHECK(mhla_seq_pos(s5) == n, "loaded position %d", mhla_seq_pos(s5));
    feed(ef, s5, t + n, tail, a);
    feed(ef, r4, t, n + tail, b);
    same("snapshot load + continue vs from scratch", a, b);

    /* clone mid-block: both continue identically */
    mhla_seq *c1;
    if (mhla_seq_clone(s4, &c1, &err))
        die_err("clone", &err);
    feed(ef, s4, t + n, tail, a);
    feed(ef, c1, t + n, tail, b);
    CHECK(memcmp(a, b, (size_t)V * 4) == 0, "clone and original differ");

    /* a CPU engine refuses GPU sequences */
    mhla_engine *cpu;
    mhla_engine_options co = {.n_threads = 1};
    if (mhla_engine_create(m, &co, &cpu, &err))
        die_err("cpu engine", &err);
    mhla_batch_item it = {c1, t, 1, 0, a, NULL, 0, NULL};
    CHECK(mhla_engine_step(cpu, &it, 1, &err) != 0 && strstr(err.msg, "another device"),
          "a CPU engine took a GPU sequence (%s)", err.msg);
    mhla_seq *hs;
    if (mhla_seq_create(m, &hs, &err))
        die_err("host sequence", &err);
    it.seq = hs;
    CHECK(mhla_engine_step(ef, &it, 1, &err) != 0 && strstr(err.msg, "another device"),
          "a GPU engine took a host sequence (%s)", err.msg);
    mhla_seq_free(hs);
    mhla_engine_free(cpu);

    mhla_seq *all[] = {ref, s2, s3, r3, s4, s5, r4, c1};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        mhla_seq_free(all[i]);
    mhla_engine_free(ep);
    mhla_engine_free(ef);
    free(t);
    free(u);
    free(a);
    free(b);
    printf("done: prefix hits, resume mid-block, snapshot, clone continue as from scratch\n");
}

#ifdef MHLA_TEST_CUDASIM
size_t cudasim_live_allocations(void);
#endif

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL_DIR WORK_DIR [--tol T]\n", argv[0]);
        return 2;
    }
    tol = argc > 4 && strcmp(argv[3], "--tol") == 0 ? atof(argv[4]) : 0.0;
    mhla_model *m;
    mhla_error err;
    if (mhla_model_load(argv[1], &m, &err))
        die_err("model", &err);
    cfg = mhla_model_config(m);
    V = cfg->vocab_size;
    C = cfg->chunk_size;
    CHECK(cfg->max_positions >= 4 * C + 8, "model context too short");
#ifdef MHLA_TEST_CUDASIM
    size_t live0 = cudasim_live_allocations();
#endif
    test_graphs_and_batch(m);
    test_state_memory(m, argv[2]);
#ifdef MHLA_TEST_CUDASIM
    CHECK(cudasim_live_allocations() == live0, "%zu device allocations leaked",
          cudasim_live_allocations() - live0);
    printf("done: every device allocation freed\n");
#endif
    mhla_model_free(m);
    if (tol > 0)
        printf("worst relative error %.3g (limit %.3g)\n", worst, tol);
    if (failures) {
        printf("FAIL: %d checks failed\n", failures);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
