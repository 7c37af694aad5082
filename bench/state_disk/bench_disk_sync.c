/*
 * The disk tier's writer: one sync pass per batch of files (the default) against each
 * file synced and placed on its own (kv_disk_options.sync_each). A pool with the tier
 * closes BLOCKS blocks at once (a prompt chunk's worth), the writer writes them from
 * the pinned pages; the time until the queue is empty (wall) and the process's CPU
 * time for it (every thread: the writer's write, XXH3, fsync), per mode, alternating
 * which goes first, ROUNDS rounds. Pages of 12 MiB, as the 340M shape's.
 *
 * usage: bench_disk_sync DIR [BLOCKS 16] [ROUNDS 4]
 */
#include "kvstate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static const kv_geometry GEO = {.layers = 24,
                                .kv_heads = 4,
                                .dk = 128,
                                .dv = 256,
                                .block_tokens = 64,
                                .max_blocks = 64,
                                .key_sums = 0};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static void die(const char *what, const kv_error *e)
{
    fprintf(stderr, "bench_disk_sync: %s: %s\n", what, e ? e->msg : "failed");
    exit(1);
}

/* One run: BLOCKS blocks of fresh tokens closed at once; (wall, cpu) until written. */
static void run(const char *dir, int sync_each, int blocks, int seed, double *wall, double *cpu)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    if (system(cmd) != 0)
        die("cannot make the directory", NULL);
    kv_pool_options o = {.geo = GEO, .dtype = KV_DTYPE_F32};
    o.budget_bytes = (size_t)(blocks + 1) * kv_page_floats(&GEO) * sizeof(float);
    kv_disk_options d = {.dir = dir,
                         .fingerprint = 1,
                         .queue_slots = blocks,
                         .sync_each = sync_each};
    kv_pool *p;
    kv_disk *disk;
    kv_seq *s;
    kv_error e;
    if (kv_pool_create(&o, &p, &e) || kv_disk_open(&d, &GEO, KV_DTYPE_F32, &disk, &e) ||
        kv_pool_set_disk(p, disk, &e) || kv_seq_create(p, &s, &e) ||
        kv_seq_ensure_pages(s, blocks, &e))
        die("pool", &e);
    int n = blocks * GEO.block_tokens;
    int32_t *tok = malloc((size_t)n * sizeof *tok);
    for (int i = 0; i < n; i++)
        tok[i] = seed * 100003 + i;
    for (int b = 0; b < blocks; b++)
        memset(kv_seq_page(s, b), b + seed, kv_pool_page_bytes(p));
    double t0 = now_s(), c0 = cpu_s();
    kv_seq_advance(s, tok, n); /* every block published, queued, pinned */
    kv_disk_flush(disk);
    *wall = now_s() - t0;
    *cpu = cpu_s() - c0;
    kv_disk_stats st;
    kv_disk_stats_get(disk, &st);
    if (st.writes != (uint64_t)blocks || st.copied != 0)
        die("not every block was written from its page", NULL);
    kv_seq_free(s);
    kv_pool_release(p);
    free(tok);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        die("usage: bench_disk_sync DIR [BLOCKS 16] [ROUNDS 4]", NULL);
    int blocks = argc > 2 ? atoi(argv[2]) : 16, rounds = argc > 3 ? atoi(argv[3]) : 4;
    double w[2] = {0, 0}, c[2] = {0, 0};
    printf("round  batch wall s  cpu s   each wall s  cpu s   (%d files of 12 MiB)\n", blocks);
    for (int r = 0; r < rounds; r++) {
        double rw[2], rc[2];
        for (int k = 0; k < 2; k++) {
            int mode = (k + r) % 2; /* 0: batch, 1: each */
            run(argv[1], mode, blocks, 2 * r + mode, &rw[mode], &rc[mode]);
            w[mode] += rw[mode];
            c[mode] += rc[mode];
        }
        printf("%5d  %12.3f  %5.3f  %11.3f  %5.3f\n", r, rw[0], rc[0], rw[1], rc[1]);
    }
    printf("sum    %12.3f  %5.3f  %11.3f  %5.3f   each / batch: wall %.3f, cpu %.3f\n", w[0], c[0],
           w[1], c[1], w[1] / w[0], c[1] / c[0]);
    return 0;
}
