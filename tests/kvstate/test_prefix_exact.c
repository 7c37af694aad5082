/*
 * The state memory seen through the engine, on a real (random) checkpoint:
 * logits after a prefix-cache hit, after a resume, after a snapshot load,
 * in a small pool that evicts, and with forced key collisions, must be the
 * same bits (memcmp) as computing every token from scratch. Also: admission
 * (a reserved sequence never fails for lack of pages), clones share pages,
 * snapshots refuse corrupt, truncated and mismatched files, and what bf16
 * pages do to the logits (printed; their hits are bitwise exact too).
 *
 * usage: test_prefix_exact MODEL_DIR OTHER_MODEL_DIR WORK_DIR
 */
#include "engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#include "check.h"

static const mhla_config *cfg;
static int V, C, CTX;

static mhla_engine *engine_with(const mhla_model *m, size_t bytes, mhla_state_dtype dt, int resume)
{
    mhla_engine_options o = {.n_threads = 2,
                             .state_bytes = bytes,
                             .state_dtype = dt,
                             .resume_slots = resume};
    mhla_engine *e;
    mhla_error err;
    if (mhla_engine_create(m, &o, &e, &err))
        die_err("engine", &err);
    return e;
}

/* Feeds tokens[from..n) to s in random chunks; logits of those positions. */
static int feed(mhla_engine *e, mhla_seq *s, const int32_t *tok, int from, int n, float *logits,
                mhla_error *err)
{
    for (int done = from; done < n;) {
        int len = 1 + rnd(2 * C);
        if (len > n - done)
            len = n - done;
        mhla_batch_item it = {s,    tok + done, len, 0, logits + (size_t)(done - from) * V,
                              NULL, 0,          NULL};
        if (mhla_engine_step(e, &it, 1, err))
            return -1;
        done += len;
    }
    return 0;
}

/* Logits of every position of tokens[0..n), computed from scratch by a
 * sequence of its own pool in one call. */
static float *scratch(const mhla_model *m, mhla_engine *e, const int32_t *tok, int n)
{
    mhla_seq *s;
    mhla_error err;
    float *l = malloc((size_t)n * V * sizeof(float));
    if (mhla_seq_create(m, &s, &err))
        die_err("seq", &err);
    mhla_batch_item it = {s, tok, n, 0, l, NULL, 0, NULL};
    if (mhla_engine_step(e, &it, 1, &err))
        die_err("scratch forward", &err);
    mhla_seq_free(s);
    return l;
}

static void random_tokens(int32_t *t, int n)
{
    for (int i = 0; i < n; i++)
        t[i] = rnd(V);
}

/* Matches tok[0..n) in a pooled sequence of e, feeds the rest, compares with
 * scratch logits ref. Returns the matched position. */
static int hit_and_compare(const char *what, mhla_engine *e, const int32_t *tok, int n,
                           const float *ref, mhla_seq **keep)
{
    mhla_seq *s;
    mhla_error err;
    if (mhla_engine_seq_create(e, &s, &err))
        die_err("seq", &err);
    int pos = mhla_seq_match_prefix(s, tok, n, &err);
    if (pos < 0)
        die_err("match", &err);
    CHECK(pos < n && mhla_seq_pos(s) == pos, "%s: match returned %d for %d tokens", what, pos, n);
    float *l = malloc((size_t)(n - pos) * V * sizeof(float));
    if (feed(e, s, tok, pos, n, l, &err))
        die_err("feed after match", &err);
    CHECK(memcmp(l, ref + (size_t)pos * V, (size_t)(n - pos) * V * sizeof(float)) == 0,
          "%s: logits after a match at %d of %d differ from scratch", what, pos, n);
    free(l);
    if (keep)
        *keep = s;
    else
        mhla_seq_free(s);
    return pos;
}

static void test_prefix_hits(const mhla_model *m)
{
    mhla_engine *e = engine_with(m, (size_t)64 * 1024 * 1024, MHLA_STATE_F32, 0);
    int n = CTX < 6 * C ? CTX : 6 * C;
    int32_t *a = malloc((size_t)CTX * sizeof *a), *b = malloc((size_t)CTX * sizeof *b);
    random_tokens(a, n);
    float *ra = scratch(m, e, a, n);
    CHECK(hit_and_compare("cold", e, a, n, ra, NULL) == 0, "cold sequence matched something");
    /* The same prompt: every whole block but the one holding the last token. */
    int pos = hit_and_compare("same prompt", e, a, n, ra, NULL);
    CHECK(pos == (n - 1) / C * C, "same prompt matched %d, expected %d", pos, (n - 1) / C * C);
    /* Shared prefixes of every length, each followed by its own tail: the
     * rest is prefilled from the block boundary in random chunks, so most
     * chunks start mid-block. */
    for (int k = 1; k < n; k += 1 + rnd(C)) {
        memcpy(b, a, (size_t)k * sizeof *b);
        int nb = k + 1 + rnd(2 * C);
        if (nb > CTX)
            nb = CTX;
        random_tokens(b + k, nb - k);
        b[k] = (a[k] + 1) % V; /* diverge right at k */
        float *rb = scratch(m, e, b, nb);
        int p = hit_and_compare("shared prefix", e, b, nb, rb, NULL);
        int want = (k < nb - 1 ? k : nb - 1) / C * C;
        CHECK(p >= want, "prefix of %d tokens matched only %d (expected >= %d)", k, p, want);
        free(rb);
    }
    /* A hit followed by one decode token, then a prefill starting mid-block. */
    {
        mhla_seq *s;
        mhla_error err;
        if (mhla_engine_seq_create(e, &s, &err))
            die_err("seq", &err);
        int p = mhla_seq_match_prefix(s, a, n, &err);
        CHECK(p > 0 && p % C == 0, "expected a whole-block hit, got %d", p);
        float *l = malloc((size_t)n * V * sizeof(float));
        mhla_batch_item one = {s, a + p, 1, 0, l, NULL, 0, NULL};
        if (mhla_engine_step(e, &one, 1, &err))
            die_err("decode after hit", &err);
        mhla_batch_item rest = {s, a + p + 1, n - p - 1, 0, l + V, NULL, 0, NULL};
        if (n - p - 1 > 0 && mhla_engine_step(e, &rest, 1, &err))
            die_err("prefill after hit", &err);
        CHECK(memcmp(l, ra + (size_t)p * V, (size_t)(n - p) * V * sizeof(float)) == 0,
              "hit + decode + mid-block prefill differs from scratch");
        free(l);
        mhla_seq_free(s);
    }
    /* Clones share their pages and continue exactly. */
    {
        mhla_seq *s, *c2;
        mhla_error err;
        mhla_state_stats st0, st1;
        if (mhla_engine_seq_create(e, &s, &err))
            die_err("seq", &err);
        float *l = malloc((size_t)n * V * sizeof(float));
        int half = n / 2;
        if (feed(e, s, a, 0, half, l, &err))
            die_err("feed", &err);
        mhla_engine_state_stats(e, &st0);
        if (mhla_seq_clone(s, &c2, &err))
            die_err("clone", &err);
        mhla_engine_state_stats(e, &st1);
        CHECK(st1.pages_used == st0.pages_used, "a clone took pages (%ld -> %ld used)",
              st0.pages_used, st1.pages_used);
        if (feed(e, c2, a, half, n, l, &err))
            die_err("feed clone", &err);
        CHECK(memcmp(l, ra + (size_t)half * V, (size_t)(n - half) * V * sizeof(float)) == 0,
              "clone continued differently from scratch");
        mhla_seq_free(s);
        mhla_seq_free(c2);
        free(l);
    }
    mhla_state_stats st;
    mhla_engine_state_stats(e, &st);
    CHECK(st.prefix_hits > 0 && st.resumed_tokens > 0 && st.pages_used == 0,
          "stats: hits %llu resumed %llu used %ld", (unsigned long long)st.prefix_hits,
          (unsigned long long)st.resumed_tokens, st.pages_used);
    free(ra);
    free(a);
    free(b);
    mhla_engine_free(e);
}

/* Multi-turn: prompt + completion finish mid-block; the next prompt extends
 * them and resumes at the exact position. */
static void test_resume(const mhla_model *m)
{
    mhla_engine *e = engine_with(m, (size_t)64 * 1024 * 1024, MHLA_STATE_F32, 4);
    int32_t *t = malloc((size_t)CTX * sizeof *t);
    for (int round = 0; round < 6; round++) {
        int prompt = 1 + rnd(CTX / 3), gen = 1 + rnd(C), more = 1 + rnd(C + 3);
        if (prompt + gen + more > CTX)
            continue;
        if ((prompt + gen) % C == 0)
            gen++;
        if (prompt + gen + more > CTX)
            continue;
        random_tokens(t, prompt);
        mhla_seq *s;
        mhla_error err;
        if (mhla_engine_seq_create(e, &s, &err))
            die_err("seq", &err);
        float *l = malloc((size_t)V * (prompt + 1) * sizeof(float));
        if (feed(e, s, t, 0, prompt, l, &err))
            die_err("prompt", &err);
        /* Greedy decode, one token per call, as a server would. */
        float *last = l + (size_t)(prompt - 1) * V;
        for (int g = 0; g < gen; g++) {
            t[prompt + g] = mhla_sample(last, V, 0.0f, NULL);
            mhla_batch_item it = {s, t + prompt + g, 1, 0, l, NULL, 0, NULL};
            if (mhla_engine_step(e, &it, 1, &err))
                die_err("decode", &err);
            last = l;
        }
        mhla_seq_finish(s);
        int n = prompt + gen + more;
        random_tokens(t + prompt + gen, more);
        float *ref = scratch(m, e, t, n);
        int pos = hit_and_compare("resume", e, t, n, ref, NULL);
        CHECK(pos == prompt + gen, "resume reached %d, the finished sequence held %d", pos,
              prompt + gen);
        free(ref);
        free(l);
    }
    mhla_state_stats st;
    mhla_engine_state_stats(e, &st);
    CHECK(st.resumes > 0, "no resume was counted");
    free(t);
    mhla_engine_free(e);
}

/* Prefixes that share roots and diverge, in a pool of a few pages (evictions)
 * and with keys cut to `bits` bits (0: full keys). */
static void test_churn(const mhla_model *m, int bits, int pages, int rounds)
{
    mhla_engine *e0 = engine_with(m, 0, MHLA_STATE_F32, 0); /* scratch runs */
    mhla_state_stats st;
    mhla_engine *e = NULL;
    mhla_error err;
    {
        mhla_engine_options o = {.n_threads = 2, .state_bytes = 1};
        CHECK(mhla_engine_create(m, &o, &e, &err) != 0 && strstr(err.msg, "holds no page"),
              "a pool smaller than a page was accepted");
    }
    int32_t roots[3][512];
    for (int r = 0; r < 3; r++)
        random_tokens(roots[r], 512);
    mhla_engine *small = NULL;
    {
        /* Size the pool in pages from a pooled sequence's page size. */
        mhla_engine *big = engine_with(m, (size_t)1 << 26, MHLA_STATE_F32, 0);
        mhla_engine_state_stats(big, &st);
        small = engine_with(m, st.page_bytes * (size_t)pages, MHLA_STATE_F32, 2);
        mhla_engine_free(big);
    }
    if (bits)
        CHECK(mhla_engine_test_control(small, &err, MHLA_TESTCTRL_PREFIX_HASH_BITS, bits) == 0,
              "test control: %s", err.msg);
    int32_t *t = malloc((size_t)CTX * sizeof *t);
    int refused = 0, hits = 0;
    for (int round = 0; round < rounds; round++) {
        int n = 2 + rnd(CTX < 8 * C ? CTX - 1 : 8 * C);
        int shared = rnd(n + 1);
        const int32_t *root = roots[rnd(3)];
        for (int i = 0; i < n; i++)
            t[i] = i < shared && i < 512 ? root[i] : rnd(V);
        if (rnd(4) == 0 && shared < n) /* near-misses: one token differs */
            t[rnd(n)] = rnd(V);
        mhla_seq *s;
        if (mhla_engine_seq_create(small, &s, &err))
            die_err("seq", &err);
        if (mhla_seq_reserve(s, n, &err)) {
            CHECK(strstr(err.msg, "state memory full") != NULL, "reserve: %s", err.msg);
            refused++;
            mhla_seq_free(s);
            continue;
        }
        int pos = mhla_seq_match_prefix(s, t, n, &err);
        if (pos < 0)
            die_err("match", &err);
        hits += pos > 0;
        float *l = malloc((size_t)(n - pos) * V * sizeof(float));
        if (feed(small, s, t, pos, n, l, &err))
            die_err("forward after reserve failed", &err);
        float *ref = scratch(m, e0, t, n);
        CHECK(memcmp(l, ref + (size_t)pos * V, (size_t)(n - pos) * V * sizeof(float)) == 0,
              "churn round %d (bits %d): match at %d of %d differs from scratch", round, bits, pos,
              n);
        free(ref);
        free(l);
        if (rnd(2))
            mhla_seq_finish(s);
        else
            mhla_seq_free(s);
    }
    mhla_engine_state_stats(small, &st);
    printf("churn bits=%d pages=%d: %d rounds, %d refused, %d hits, %llu evictions, "
           "%llu resumes\n",
           bits, pages, rounds, refused, hits, (unsigned long long)st.evictions,
           (unsigned long long)st.resumes);
    CHECK(hits > 0, "churn: no prefix hit at all");
    CHECK(st.pages_used == 0 && st.pages_reserved == 0, "churn: %ld used %ld reserved at the end",
          st.pages_used, st.pages_reserved);
    free(t);
    mhla_engine_free(small);
    mhla_engine_free(e0);
}

/* A reservation is honoured even when others fill the pool. */
static void test_admission(const mhla_model *m)
{
    mhla_engine *big = engine_with(m, (size_t)1 << 26, MHLA_STATE_F32, 0);
    mhla_state_stats st;
    mhla_engine_state_stats(big, &st);
    mhla_engine_free(big);
    int pages = 3;
    mhla_engine *e = engine_with(m, st.page_bytes * pages, MHLA_STATE_F32, 0);
    mhla_error err;
    mhla_seq *a, *b;
    if (mhla_engine_seq_create(e, &a, &err) || mhla_engine_seq_create(e, &b, &err))
        die_err("seq", &err);
    CHECK(mhla_state_pages_needed(m, 2L * C + 1) == 2, "pages needed for 2C+1 positions");
    CHECK(mhla_seq_reserve(a, (long)(pages + 1) * C, &err) != 0 &&
              strstr(err.msg, "state memory full"),
          "reserved more pages than the pool has");
    if (mhla_seq_reserve(a, (long)2 * C, &err))
        die_err("reserve", &err);
    int32_t *t = malloc((size_t)4 * C * sizeof *t);
    random_tokens(t, 4 * C);
    mhla_batch_item ib = {b, t, 2 * C, 2 * C, NULL, NULL, 0, NULL};
    CHECK(mhla_engine_step(e, &ib, 1, &err) != 0 && strstr(err.msg, "state memory full"),
          "an unreserved sequence took reserved pages");
    CHECK(mhla_seq_pos(b) == 0, "a refused call advanced the sequence");
    mhla_batch_item ia = {a, t, 2 * C, 2 * C, NULL, NULL, 0, NULL};
    CHECK(mhla_engine_step(e, &ia, 1, &err) == 0, "reserved sequence failed: %s", err.msg);
    mhla_seq_free(a);
    mhla_seq_free(b);
    mhla_engine_state_stats(e, &st);
    CHECK(st.pages_used == 0 && st.pages_reserved == 0 && st.pages_available == pages,
          "admission accounting: used %ld reserved %ld available %ld", st.pages_used,
          st.pages_reserved, st.pages_available);
    free(t);
    mhla_engine_free(e);
}

static int write_bytes(const char *path, const unsigned char *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(d, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

static unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *d = malloc(*n + 1);
    if (fread(d, 1, *n, f) != *n) {
        free(d);
        d = NULL;
    }
    fclose(f);
    return d;
}

static void expect_load_error(mhla_engine *e, const char *path, const char *needle,
                              const char *what)
{
    mhla_seq *s;
    mhla_error err;
    if (mhla_engine_seq_create(e, &s, &err))
        die_err("seq", &err);
    int rc = mhla_seq_load(s, path, &err);
    CHECK(rc != 0 && strstr(err.msg, needle), "%s: load %s (%s), wanted '%s'", what,
          rc ? "failed" : "succeeded", rc ? err.msg : "", needle);
    mhla_seq_free(s);
}

static void test_snapshot(const mhla_model *m, const mhla_model *other, const char *work)
{
    mhla_engine *e = engine_with(m, (size_t)1 << 26, MHLA_STATE_F32, 0);
    int n = CTX < 3 * C + 5 ? CTX : 3 * C + 5, cut = n - 1 - rnd(C);
    if (cut < 1)
        cut = 1;
    int32_t *t = malloc((size_t)n * sizeof *t);
    random_tokens(t, n);
    float *ref = scratch(m, e, t, n);
    char path[1024], bad[1100];
    snprintf(path, sizeof path, "%s/seq.snap", work);
    snprintf(bad, sizeof bad, "%s/bad.snap", work);
    mhla_seq *s;
    mhla_error err;
    float *l = malloc((size_t)n * V * sizeof(float));
    if (mhla_engine_seq_create(e, &s, &err) || feed(e, s, t, 0, cut, l, &err))
        die_err("snapshot source", &err);
    if (mhla_seq_save(s, path, &err))
        die_err("save", &err);
    mhla_seq_free(s);
    if (mhla_engine_seq_create(e, &s, &err))
        die_err("seq", &err);
    if (mhla_seq_load(s, path, &err))
        die_err("load", &err);
    CHECK(mhla_seq_pos(s) == cut, "loaded position %d, saved %d", mhla_seq_pos(s), cut);
    if (feed(e, s, t, cut, n, l, &err))
        die_err("feed after load", &err);
    CHECK(memcmp(l, ref + (size_t)cut * V, (size_t)(n - cut) * V * sizeof(float)) == 0,
          "logits after a snapshot load (position %d) differ from scratch", cut);
    mhla_seq_free(s);

    size_t len;
    unsigned char *d = read_bytes(path, &len);
    CHECK(d != NULL, "cannot read back %s", path);
    if (d) {
        unsigned char *c = malloc(len);
        memcpy(c, d, len);
        c[len / 2] ^= 0x10;
        write_bytes(bad, c, len);
        expect_load_error(e, bad, "checksum", "flipped byte");
        write_bytes(bad, d, len - 5);
        expect_load_error(e, bad, "truncated", "truncated");
        write_bytes(bad, d, 20);
        expect_load_error(e, bad, "truncated", "header only");
        memcpy(c, d, len);
        c[0] = 'X';
        write_bytes(bad, c, len);
        expect_load_error(e, bad, "bad magic", "bad magic");
        memcpy(c, d, len);
        c[8] = 9; /* version */
        write_bytes(bad, c, len);
        expect_load_error(e, bad, "version", "other version");
        free(c);
        free(d);
    }
    expect_load_error(e, "/nonexistent/snap", "cannot open", "missing file");
    mhla_engine *eo = engine_with(other, (size_t)1 << 26, MHLA_STATE_F32, 0);
    expect_load_error(eo, path, "another model", "other model");
    mhla_engine_free(eo);
    mhla_engine *eb = engine_with(m, (size_t)1 << 26, MHLA_STATE_BF16, 0);
    expect_load_error(eb, path, "dtype", "bf16 pool");
    mhla_engine_free(eb);
    free(l);
    free(ref);
    free(t);
    mhla_engine_free(e);
}

/* bf16 pages: hits are exact against bf16 from scratch; the difference to f32
 * is printed (the report in bench/kvstate/RESULTS.md). */
static void test_bf16(const mhla_model *m)
{
    mhla_engine *e = engine_with(m, (size_t)1 << 26, MHLA_STATE_BF16, 2);
    mhla_engine *cold = engine_with(m, (size_t)1 << 26, MHLA_STATE_BF16, 0);
    int n = CTX < 5 * C + 3 ? CTX : 5 * C + 3;
    int32_t *t = malloc((size_t)n * sizeof *t);
    random_tokens(t, n);
    float *lb = malloc((size_t)n * V * sizeof(float));
    mhla_seq *s;
    mhla_error err;
    if (mhla_engine_seq_create(cold, &s, &err) || feed(cold, s, t, 0, n, lb, &err))
        die_err("bf16 scratch", &err);
    mhla_seq_free(s);
    int pos = hit_and_compare("bf16 warm", e, t, n, lb, NULL);
    pos = hit_and_compare("bf16 hit", e, t, n, lb, NULL);
    CHECK(pos > 0, "bf16: no hit");
    float *lf = scratch(m, e, t, n);
    double max_abs = 0, max_logit = 0;
    for (size_t i = 0; i < (size_t)n * V; i++) {
        double d = fabs((double)lb[i] - lf[i]);
        if (!(d <= max_abs))
            max_abs = d;
        if (fabs(lf[i]) > max_logit)
            max_logit = fabs(lf[i]);
    }
    mhla_state_stats st, sf;
    mhla_engine_state_stats(e, &st);
    mhla_engine *ef = engine_with(m, (size_t)1 << 26, MHLA_STATE_F32, 0);
    mhla_engine_state_stats(ef, &sf);
    mhla_engine_free(ef);
    printf("bf16 pages: %zu bytes per page (f32: %zu); max |logit diff| %.3g over %d positions "
           "(max |logit| %.3g)\n",
           st.page_bytes, sf.page_bytes, max_abs, n, max_logit);
    CHECK(2 * st.page_bytes == sf.page_bytes, "bf16 page is not half an f32 page");
    CHECK(isfinite(max_abs) && max_abs > 0 && max_abs < 0.25 * max_logit + 1e-3,
          "bf16 logits: max difference %g to f32 (max logit %g)", max_abs, max_logit);
    free(lf);
    free(lb);
    free(t);
    mhla_engine_free(cold);
    mhla_engine_free(e);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL_DIR OTHER_MODEL_DIR WORK_DIR\n", argv[0]);
        return 2;
    }
    mhla_error err;
    mhla_model *m, *other;
    if (mhla_model_load(argv[1], &m, &err) || mhla_model_load(argv[2], &other, &err))
        die_err("load", &err);
    cfg = mhla_model_config(m);
    V = cfg->vocab_size;
    C = cfg->chunk_size;
    CTX = cfg->max_positions;
    test_prefix_hits(m);
    test_resume(m);
    test_admission(m);
    test_snapshot(m, other, argv[3]);
    test_bf16(m);
    test_churn(m, 0, 6, 40);
    test_churn(m, 1, 8, 40); /* every key collides with half the others */
    mhla_model_free(m);
    mhla_model_free(other);
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
