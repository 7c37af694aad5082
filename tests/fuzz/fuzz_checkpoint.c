/*
 * libFuzzer target for the checkpoint loader: the input becomes either the
 * model.safetensors file (first byte even) or config.json (first byte odd) of
 * an otherwise valid checkpoint, and mhla_model_load must return cleanly —
 * success or one error message — with no crash, overflow or leak.
 *
 * MHLA_FUZZ_SEED_DIR names a valid checkpoint whose files fill in the other
 * half. The files are written under /dev/shm when it exists.
 */
#include "engine.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char work[256];
static char *seed_config, *seed_weights;
static size_t seed_config_len, seed_weights_len;

static char *slurp(const char *dir, const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_checkpoint: cannot open %s\n", path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "fuzz_checkpoint: cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void put(const char *name, const void *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", work, name);
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
        fprintf(stderr, "fuzz_checkpoint: cannot write %s\n", path);
        exit(2);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *seed = getenv("MHLA_FUZZ_SEED_DIR");
    if (!seed) {
        fprintf(stderr, "fuzz_checkpoint: set MHLA_FUZZ_SEED_DIR to a valid checkpoint\n");
        exit(2);
    }
    seed_config = slurp(seed, "config.json", &seed_config_len);
    seed_weights = slurp(seed, "model.safetensors", &seed_weights_len);
    snprintf(work, sizeof work, "%s/mhla-fuzz-%d",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
    mkdir(work, 0700);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1) {
        put("config.json", data + 1, size - 1);
        put("model.safetensors", seed_weights, seed_weights_len);
    } else {
        put("config.json", seed_config, seed_config_len);
        put("model.safetensors", data + 1, size - 1);
    }
    mhla_error err;
    mhla_model *m = NULL;
    if (mhla_model_load(work, &m, &err) == 0) {
        /* A checkpoint that loads must also run. */
        mhla_engine *e = NULL;
        mhla_seq *s = NULL;
        if (mhla_engine_create(m, NULL, &e, &err) == 0 && mhla_seq_create(m, &s, &err) == 0) {
            int32_t tok = 0;
            mhla_batch_item it = {s, &tok, 1, 1, NULL, NULL, 0, NULL};
            (void)mhla_engine_step(e, &it, 1, &err);
        }
        mhla_seq_free(s);
        mhla_engine_free(e);
        mhla_model_free(m);
    }
    return 0;
}
