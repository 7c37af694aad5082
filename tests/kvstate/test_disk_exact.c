/*
 * The disk tier seen through the engine, on a real (random) checkpoint: a
 * prompt answered (last-position logits, then greedy decoding with every
 * step's logits) with the tier, after a restart from the tier, and after
 * each fault, is the same bits (memcmp) as without the tier. Faults: a
 * flipped byte, a truncated file, another model's file under this model's
 * name, torn temporaries (a writer killed half-way), disk full, a read-only
 * directory; each is counted, the block recomputed, the answer unchanged.
 *
 * usage: test_disk_exact MODEL_DIR OTHER_MODEL_DIR WORK_DIR [cuda]
 * (cuda: every engine on the CUDA device, whose pages live in device memory
 * and reach the tier through host copies; the CUDA simulator's build.)
 */
#include "engine.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TEST_RNG_SEED 0x51ed270b27a4c3d1ull
#include "check.h"

#define DECODE 6
static int V, C, N;
static const char *work;
static mhla_device device = MHLA_DEVICE_CPU;
static int32_t prompt[4096];

typedef struct {
    int pos; /* where the prefix match ended */
    float *logits;
    int32_t tokens[DECODE];
} answer;

static mhla_engine *engine_on(const mhla_model *m, const char *dir, int fault)
{
    mhla_engine_options o = {.n_threads = 2,
                             .state_bytes = (size_t)256 << 20,
                             .state_dir = dir,
                             .device = device,
                             .gpu_weights = MHLA_GPU_WEIGHTS_F32};
    mhla_engine *e;
    mhla_error err;
    if (mhla_engine_create(m, &o, &e, &err))
        die_err("engine", &err);
    if (dir && fault && mhla_engine_test_control(e, &err, MHLA_TESTCTRL_DISK_FAULT, fault))
        die_err("fault", &err);
    return e;
}

static int argmax(const float *l)
{
    int b = 0;
    for (int i = 1; i < V; i++)
        if (l[i] > l[b])
            b = i;
    return b;
}

/* The prompt's last logits and DECODE greedy steps, after a prefix match. */
static answer ask(mhla_engine *e)
{
    answer a = {0};
    a.logits = malloc((size_t)(DECODE + 1) * V * sizeof(float));
    mhla_seq *s;
    mhla_error err;
    if (mhla_engine_seq_create(e, &s, &err) ||
        (a.pos = mhla_seq_match_prefix(s, prompt, N, &err)) < 0)
        die_err("match", &err);
    mhla_batch_item it = {s, prompt + a.pos, N - a.pos, N - a.pos - 1, a.logits, NULL, 0, NULL};
    if (mhla_engine_step(e, &it, 1, &err))
        die_err("prompt", &err);
    for (int k = 0; k < DECODE; k++) {
        a.tokens[k] = argmax(a.logits + (size_t)k * V);
        mhla_batch_item d = {s, &a.tokens[k], 1, 0, a.logits + (size_t)(k + 1) * V, NULL, 0, NULL};
        if (mhla_engine_step(e, &d, 1, &err))
            die_err("decode", &err);
    }
    mhla_seq_free(s);
    return a;
}

static void same(const answer *a, const answer *ref, const char *what)
{
    CHECK(memcmp(a->logits, ref->logits, (size_t)(DECODE + 1) * V * sizeof(float)) == 0 &&
              memcmp(a->tokens, ref->tokens, sizeof a->tokens) == 0,
          "%s: the answer differs from the one without the tier", what);
}

static mhla_state_stats stats(mhla_engine *e)
{
    mhla_state_stats s;
    mhla_engine_state_stats(e, &s);
    return s;
}

static void flush(mhla_engine *e)
{
    mhla_error err;
    if (mhla_engine_test_control(e, &err, MHLA_TESTCTRL_DISK_FLUSH))
        die_err("flush", &err);
}

static void fresh_dir(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", work, name);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", out, out);
    if (system(cmd) != 0)
        die("cannot make %s", out);
}

/* The path of the file of the block ending at n_tok tokens ("" if none). */
static void block_file(const char *dir, int n_tok, char *out, size_t n)
{
    char suffix[32];
    snprintf(suffix, sizeof suffix, "-%d.kvp", n_tok);
    out[0] = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t a = strlen(e->d_name), b = strlen(suffix);
        if (e->d_name[0] != '.' && a > b && strcmp(e->d_name + a - b, suffix) == 0)
            snprintf(out, n, "%s/%s", dir, e->d_name);
    }
    if (d)
        closedir(d);
}

static int count_prefix(const char *dir, const char *prefix)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return n;
}

static void restart_case(const mhla_model *m, const answer *ref)
{
    char dir[1024];
    fresh_dir(dir, sizeof dir, "restart");
    int nb = (N - 1) / C;
    mhla_engine *e = engine_on(m, dir, 0);
    answer a = ask(e);
    same(&a, ref, "with the tier, cold");
    flush(e);
    CHECK(a.pos == 0 && stats(e).disk_writes >= (uint64_t)nb, "cold: pos %d, %llu writes", a.pos,
          (unsigned long long)stats(e).disk_writes);
    mhla_engine_free(e);
    free(a.logits);
    e = engine_on(m, dir, 0);
    a = ask(e);
    same(&a, ref, "after a restart, from the disk");
    CHECK(a.pos == nb * C && stats(e).disk_hits == (uint64_t)nb, "restart: pos %d, %llu disk hits",
          a.pos, (unsigned long long)stats(e).disk_hits);
    free(a.logits);
    a = ask(e);
    same(&a, ref, "again, from memory");
    CHECK(stats(e).disk_hits == (uint64_t)nb, "the second answer comes from memory");
    free(a.logits);
    mhla_engine_free(e);
    printf("restart: %d blocks from disk, answer identical\n", nb);
}

enum { FLIP, TRUNCATE, FOREIGN };

/* Block 2's file of the prompt replaced by another model's file. */
static void foreign_file(const mhla_model *other, const char *path)
{
    char odir[1024], ofile[1100];
    fresh_dir(odir, sizeof odir, "other_model");
    const mhla_config *oc = mhla_model_config(other);
    mhla_engine *e = engine_on(other, odir, 0);
    mhla_seq *s;
    mhla_error err;
    int n = 2 * oc->chunk_size;
    int32_t *t = malloc((size_t)n * sizeof *t);
    for (int i = 0; i < n; i++)
        t[i] = prompt[i] % oc->vocab_size;
    mhla_batch_item it = {0};
    it.tokens = t;
    it.n_tokens = it.logits_from = n;
    if (mhla_engine_seq_create(e, &s, &err) || (it.seq = s, mhla_engine_step(e, &it, 1, &err)))
        die_err("other model", &err);
    mhla_seq_free(s);
    flush(e);
    mhla_engine_free(e);
    free(t);
    block_file(odir, n, ofile, sizeof ofile);
    if (!ofile[0] || rename(ofile, path))
        die("no file of the other model to move (%s)", ofile);
}

static void damage(const mhla_model *other, const char *path, int kind)
{
    if (kind == FOREIGN) {
        foreign_file(other, path);
        return;
    }
    struct stat sb;
    FILE *f = fopen(path, "r+b");
    if (!f || stat(path, &sb))
        die("open %s", path);
    if (kind == FLIP) {
        fseek(f, sb.st_size / 2, SEEK_SET);
        int c = fgetc(f);
        fseek(f, sb.st_size / 2, SEEK_SET);
        fputc(c ^ 1, f);
    }
    fclose(f);
    if (kind == TRUNCATE && truncate(path, sb.st_size / 2))
        die("truncate %s", path);
}

/* Block 2's file damaged: blocks before it load, it is refused, counted,
 * removed and recomputed, and written again for the next restart. */
static void damage_case(const mhla_model *m, const mhla_model *other, const answer *ref,
                        const char *name, int kind)
{
    char dir[1024], path[1100];
    fresh_dir(dir, sizeof dir, name);
    mhla_engine *e = engine_on(m, dir, 0);
    answer a = ask(e);
    flush(e);
    mhla_engine_free(e);
    free(a.logits);
    block_file(dir, 2 * C, path, sizeof path);
    if (!path[0])
        die("%s: block 2 was not written", name);
    damage(other, path, kind);
    e = engine_on(m, dir, 0);
    a = ask(e);
    same(&a, ref, name);
    CHECK(a.pos == C && stats(e).disk_corrupt == 1, "%s: pos %d (want %d), %llu corrupt", name,
          a.pos, C, (unsigned long long)stats(e).disk_corrupt);
    flush(e);
    mhla_engine_free(e);
    free(a.logits);
    e = engine_on(m, dir, 0);
    a = ask(e);
    same(&a, ref, name);
    CHECK(a.pos == (N - 1) / C * C, "%s: rewritten, all blocks load again (pos %d)", name, a.pos);
    mhla_engine_free(e);
    free(a.logits);
    printf("%-22s detected, counted, recomputed, answer identical\n", name);
}

/* Writes failing: counted, answers unchanged, nothing loaded later. */
static void write_fault_case(const mhla_model *m, const answer *ref, const char *name, int fault)
{
    char dir[1024];
    fresh_dir(dir, sizeof dir, name);
    mhla_engine *e = engine_on(m, dir, fault);
    answer a = ask(e);
    same(&a, ref, name);
    flush(e);
    mhla_state_stats st = stats(e);
    CHECK(st.disk_write_errors >= 1 && st.disk_writes == 0 && st.disk_error[0],
          "%s: %llu errors, %llu writes, '%s'", name, (unsigned long long)st.disk_write_errors,
          (unsigned long long)st.disk_writes, st.disk_error);
    mhla_engine_free(e);
    free(a.logits);
    CHECK((count_prefix(dir, ".tmp-") > 0) == (fault == 2), "%s: temporaries %d", name,
          count_prefix(dir, ".tmp-"));
    e = engine_on(m, dir, 0);
    a = ask(e);
    same(&a, ref, name);
    CHECK(a.pos == 0 && stats(e).disk_hits == 0 && stats(e).disk_corrupt == 0,
          "%s: nothing loaded after it (pos %d)", name, a.pos);
    mhla_engine_free(e);
    free(a.logits);
    printf("%-22s counted (%s), answer identical, nothing loaded\n", name, st.disk_error);
}

int main(int argc, char **argv)
{
    if (argc != 4 && !(argc == 5 && strcmp(argv[4], "cuda") == 0))
        die("usage: test_disk_exact MODEL_DIR OTHER_MODEL_DIR WORK_DIR [cuda]");
    work = argv[3];
    device = argc == 5 ? MHLA_DEVICE_CUDA : MHLA_DEVICE_CPU;
    mhla_error err;
    mhla_model *m, *other;
    if (mhla_model_load(argv[1], &m, &err) || mhla_model_load(argv[2], &other, &err))
        die_err("load", &err);
    const mhla_config *cfg = mhla_model_config(m);
    V = cfg->vocab_size;
    C = cfg->chunk_size;
    N = 4 * C + 3;
    if (N + DECODE > cfg->max_positions || N > 4096)
        die("the checkpoint's context is too short for 4 blocks");
    for (int i = 0; i < N; i++)
        prompt[i] = rnd(V);
    mhla_engine *plain = engine_on(m, NULL, 0);
    answer ref = ask(plain);
    mhla_engine_free(plain);
    restart_case(m, &ref);
    damage_case(m, other, &ref, "flipped_byte", FLIP);
    damage_case(m, other, &ref, "truncated", TRUNCATE);
    damage_case(m, other, &ref, "other_model_file", FOREIGN);
    write_fault_case(m, &ref, "disk_full", 1);
    write_fault_case(m, &ref, "torn_temporaries", 2);
    write_fault_case(m, &ref, "read_only_dir", 3);
    free(ref.logits);
    mhla_model_free(m);
    mhla_model_free(other);
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    else
        printf("ok\n");
    return failures ? 1 : 0;
}
