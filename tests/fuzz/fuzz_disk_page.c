/*
 * libFuzzer target for the disk tier's page files (kvstate/disk_*.c): the
 * input is written as the file of one block of a small tier, then read back
 * with kv_disk_get. The reader must return cleanly — a page or no page, a
 * bad file counted and removed — and must accept only a file that is,
 * byte for byte, the one the tier itself writes for the page it returned:
 * a header, tokens or page the tier would not have written is never served.
 *
 * With MHLA_FUZZ_DISK_SEED=PATH it writes a valid file (the seed corpus)
 * to PATH and exits. The files live under /dev/shm when it exists.
 */
#include "kvstate.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const kv_geometry GEO = {.layers = 2,
                                .kv_heads = 1,
                                .dk = 4,
                                .dv = 4,
                                .block_tokens = 4,
                                .max_blocks = 8,
                                .key_sums = 0};
#define PAGE_FLOATS 32
#define N_TOKENS 8
#define KEY 0x0123456789abcdefull

static kv_disk *disk, *canon; /* the tier under test; one that writes the canonical files */
static int32_t tokens[N_TOKENS];
static float page[PAGE_FLOATS];
static char path[1024], canon_path[1024];

static kv_disk *open_at(const char *dir)
{
    kv_disk_options o = {.dir = dir, .fingerprint = 0x5eedull};
    kv_disk *d;
    kv_error e;
    if (kv_disk_open(&o, &GEO, KV_DTYPE_F32, &d, &e)) {
        fprintf(stderr, "fuzz_disk_page: %s\n", e.msg);
        exit(2);
    }
    return d;
}

static unsigned char *slurp(const char *p, size_t *len)
{
    FILE *f = fopen(p, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = malloc(65536);
    *len = buf ? fread(buf, 1, 65536, f) : 0;
    fclose(f);
    return buf;
}

static void put(const char *p, const void *data, size_t len)
{
    FILE *f = fopen(p, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
        fprintf(stderr, "fuzz_disk_page: cannot write %s\n", p);
        exit(2);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char work[256], dir[300], cdir[300];
    snprintf(work, sizeof work, "%s/mhla-fuzz-disk-%d",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
    snprintf(dir, sizeof dir, "%s/tier", work);
    snprintf(cdir, sizeof cdir, "%s/canon", work);
    mkdir(work, 0700);
    disk = open_at(dir);
    canon = open_at(cdir);
    for (int i = 0; i < N_TOKENS; i++)
        tokens[i] = 7 * i + 3;
    for (int i = 0; i < PAGE_FLOATS; i++)
        page[i] = (float)i * 0.5f - 3.0f;
    kv_disk_path(disk, KEY, N_TOKENS, path, sizeof path);
    kv_disk_path(canon, KEY, N_TOKENS, canon_path, sizeof canon_path);
    const char *seed = getenv("MHLA_FUZZ_DISK_SEED");
    if (seed) {
        kv_error e;
        size_t len;
        unsigned char *bytes;
        if (kv_disk_put(canon, KEY, tokens, N_TOKENS, page, &e) ||
            !(bytes = slurp(canon_path, &len))) {
            fprintf(stderr, "fuzz_disk_page: cannot write the seed\n");
            exit(2);
        }
        put(seed, bytes, len);
        free(bytes);
        exit(0);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    put(path, data, size);
    float got[PAGE_FLOATS];
    kv_error e;
    int rc = kv_disk_get(disk, KEY, tokens, N_TOKENS, got, &e);
    if (rc == 0)
        return 0; /* refused (and removed, unless a sound file of other tokens) */
    if (rc != 1)
        abort(); /* -1 is for bad arguments only */
    /* Served: the tier must have written exactly these bytes for that page. */
    unlink(canon_path);
    size_t len = 0;
    unsigned char *want = NULL;
    if (kv_disk_put(canon, KEY, tokens, N_TOKENS, got, &e) || !(want = slurp(canon_path, &len)))
        abort();
    if (len != size || memcmp(want, data, size) != 0) {
        fprintf(stderr, "fuzz_disk_page: served a file the tier would not write\n");
        abort();
    }
    free(want);
    return 0;
}
