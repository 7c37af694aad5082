/*
 * mhla_seq_rewind (what a draft model's sequence uses to drop the drafts its
 * target refused): a sequence fed the true tokens one step at a time, and a
 * twin fed, before each true token, up to MAX_WRONG wrong ones in one-token
 * steps (never one that would close a block) and then rewound to the true
 * position, give bit-identical logits at every position, and their state
 * files (mhla_seq_save: tokens, pages, the open block's rows) are byte for
 * byte the same after every rewind. A rewind that would reopen a closed
 * block, or go forward, is refused and changes nothing. With a state pool
 * (prefix cache) every page is given back at the end.
 *
 * usage: test_seq_rewind CHECKPOINT WORKDIR [POOL_BYTES]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "engine.h"

enum { MAX_WRONG = 5 };

static int V, C;
static const char *workdir;

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

static int same_state(const mhla_seq *a, const mhla_seq *b)
{
    char pa[4096], pb[4096];
    mhla_error e = {0};
    snprintf(pa, sizeof pa, "%s/a.state", workdir);
    snprintf(pb, sizeof pb, "%s/b.state", workdir);
    if (mhla_seq_save(a, pa, &e) || mhla_seq_save(b, pb, &e))
        die_err("save", &e);
    unsigned char *x, *y;
    long nx = file_bytes(pa, &x), ny = file_bytes(pb, &y);
    int same = nx == ny && memcmp(x, y, (size_t)nx) == 0;
    free(x);
    free(y);
    return same;
}

/* One token into seq; its logits into out (V floats). */
static void feed(mhla_engine *e, mhla_seq *s, int32_t tok, float *out)
{
    mhla_batch_item it = {.seq = s, .tokens = &tok, .n_tokens = 1, .logits_from = 0, .logits = out};
    mhla_error err = {0};
    if (mhla_engine_step(e, &it, 1, &err))
        die_err("step", &err);
}

static void check_refusals(mhla_seq *twin, int pos)
{
    mhla_error e = {0};
    CHECK(mhla_seq_rewind(twin, pos + 1, &e) != 0, "a rewind forward was accepted");
    if (pos % C == 0 && pos >= C)
        CHECK(mhla_seq_rewind(twin, pos - 1, &e) != 0 && strstr(e.msg, "closed block"),
              "a rewind into a closed block at %d was accepted (%s)", pos, e.msg);
    CHECK(mhla_seq_pos(twin) == pos, "a refused rewind moved the sequence");
}

/* Wrong tokens the twin may be fed at pos: none that would close a block. */
static int wrong_room(int pos)
{
    int left = C - 1 - pos % C;
    return left < MAX_WRONG ? left : MAX_WRONG;
}

static void run(mhla_engine *e, int n_tokens)
{
    mhla_seq *plain, *twin;
    mhla_error err = {0};
    if (mhla_engine_seq_create(e, &plain, &err) || mhla_engine_seq_create(e, &twin, &err) ||
        mhla_seq_reserve(plain, n_tokens + 1, &err) ||
        mhla_seq_reserve(twin, n_tokens + MAX_WRONG + 1, &err))
        die_err("sequence", &err);
    float *a = malloc(sizeof(float) * (size_t)V), *b = malloc(sizeof(float) * (size_t)V);
    int rewinds = 0;
    for (int pos = 0; pos < n_tokens; pos++) {
        int32_t tok = (int32_t)rnd(V);
        int n_wrong = rnd(wrong_room(pos) + 1);
        for (int w = 0; w < n_wrong; w++)
            feed(e, twin, (int32_t)rnd(V), b);
        if (n_wrong && mhla_seq_rewind(twin, pos, &err))
            die_err("rewind", &err);
        rewinds += n_wrong > 0;
        CHECK(same_state(plain, twin), "state differs after a rewind to %d", pos);
        check_refusals(twin, pos);
        feed(e, plain, tok, a);
        feed(e, twin, tok, b);
        CHECK(memcmp(a, b, sizeof(float) * (size_t)V) == 0, "logits differ at %d", pos);
    }
    CHECK(rewinds > n_tokens / 4, "only %d rewinds", rewinds);
    free(a);
    free(b);
    mhla_seq_free(plain);
    mhla_seq_free(twin);
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4)
        die("usage: test_seq_rewind CHECKPOINT WORKDIR [POOL_BYTES]");
    workdir = argv[2];
    (void)mkdir(workdir, 0777);
    size_t pool = argc == 4 ? (size_t)strtoull(argv[3], NULL, 10) : 0;
    mhla_model *m;
    mhla_engine *e;
    mhla_error err = {0};
    mhla_engine_options o = {.n_threads = 1, .state_bytes = pool};
    if (mhla_model_load(argv[1], &m, &err) || mhla_engine_create(m, &o, &e, &err))
        die_err("setup", &err);
    V = mhla_model_config(m)->vocab_size;
    C = mhla_model_config(m)->chunk_size;
    int n = 3 * C + C / 2;
    n = n < mhla_model_config(m)->max_positions - MAX_WRONG - 1
            ? n
            : mhla_model_config(m)->max_positions - MAX_WRONG - 1;
    run(e, n);
    mhla_state_stats st;
    mhla_engine_state_stats(e, &st);
    CHECK(!pool || st.pages_used == 0, "%ld pages still used at the end", st.pages_used);
    mhla_engine_free(e);
    mhla_model_free(m);
    if (failures)
        return 1;
    printf("engine.seq_rewind: OK (%d positions, blocks of %d)\n", n, C);
    return 0;
}
