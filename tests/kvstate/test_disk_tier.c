/*
 * The disk tier's store and its pool integration, fault by fault: every bad
 * file is detected, counted and removed and never returned as a page; a
 * failed write is counted and leaves no file a reader would take; the size
 * limit drops the least recently used files; two writers of one key do no
 * harm; pages written behind by one pool are loaded, bit for bit, by the
 * next pool on the same directory (a restart); a full queue drops writes
 * without blocking, and an evicted page that was dropped is written then;
 * pages are written from the pool's storage, pinned, and one evicted while
 * still queued is copied before it is reused.
 *
 * usage: test_disk_tier WORKDIR
 */
#include "disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static const kv_geometry GEO = {.layers = 2,
                                .kv_heads = 1,
                                .dk = 4,
                                .dv = 4,
                                .block_tokens = 4,
                                .max_blocks = 8,
                                .key_sums = 0};
#define FP 0x1234abcdull
#define PAGE_FLOATS 32
static const char *work;

static void fresh_dir(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", work, name);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", out, out);
    if (system(cmd) != 0)
        die("cannot make %s", out);
}

static kv_disk *open_disk(const char *dir, uint64_t fp, const kv_geometry *g, uint64_t max)
{
    kv_disk_options o = {.dir = dir, .max_bytes = max, .fingerprint = fp};
    kv_disk *d;
    kv_error e;
    if (kv_disk_open(&o, g, KV_DTYPE_F32, &d, &e))
        die_err("kv_disk_open", &e);
    return d;
}

static void fill_page(float *page, int seed)
{
    for (int i = 0; i < PAGE_FLOATS; i++)
        page[i] = (float)(seed * 100 + i) * 0.25f;
}

static void tokens_of(int32_t *t, int n, int seed)
{
    for (int i = 0; i < n; i++)
        t[i] = (seed * 7 + i) % 50;
}

/* Files in dir whose name starts with prefix. */
static int count_files(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return n;
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static kv_disk_stats stats(kv_disk *d)
{
    kv_disk_stats s;
    kv_disk_stats_get(d, &s);
    return s;
}

/* Writes block (key 1, tokens seed 1) and returns its path. */
static void put_one(kv_disk *d, char *path, size_t n)
{
    int32_t t[8];
    float page[PAGE_FLOATS];
    tokens_of(t, 8, 1);
    fill_page(page, 1);
    kv_error e;
    if (kv_disk_put(d, 1, t, 8, page, &e))
        die_err("kv_disk_put", &e);
    kv_disk_path(d, 1, 8, path, n);
}

/* 1 when the block of put_one reads back exactly. */
static int get_one(kv_disk *d)
{
    int32_t t[8];
    float page[PAGE_FLOATS], want[PAGE_FLOATS];
    tokens_of(t, 8, 1);
    fill_page(want, 1);
    memset(page, 0, sizeof page);
    kv_error e;
    int rc = kv_disk_get(d, 1, t, 8, page, &e);
    return rc == 1 && memcmp(page, want, sizeof page) == 0;
}

/* Applies damage to the file at path; the next get must refuse it. */
typedef void (*damage_fn)(const char *path, kv_disk *d);

static void truncate_file(const char *path, kv_disk *d)
{
    (void)d;
    struct stat sb;
    if (stat(path, &sb) || truncate(path, sb.st_size - 10))
        die("truncate %s", path);
}

static void flip_at(const char *path, long off)
{
    FILE *f = fopen(path, "r+b");
    if (!f || fseek(f, off, SEEK_SET))
        die("open %s", path);
    int c = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
}

static void flip_page_byte(const char *path, kv_disk *d)
{
    (void)d;
    flip_at(path, (long)(sizeof(kvd_header) + 8 * 4 + 5));
}

static void flip_token_byte(const char *path, kv_disk *d)
{
    (void)d;
    flip_at(path, (long)sizeof(kvd_header) + 4);
}

static void stale_version(const char *path, kv_disk *d)
{
    (void)d;
    flip_at(path, 8); /* the version's low byte */
}

/* The same block written by a tier of another fingerprint (another model,
 * weight format or device), put under this tier's name. */
static void foreign_fingerprint(const char *path, kv_disk *d)
{
    char other[1100];
    kv_disk *o = open_disk(d->dir, FP + 1, &GEO, 0);
    put_one(o, other, sizeof other);
    kv_disk_close(o);
    if (rename(other, path))
        die("rename %s", other);
}

/* A file of another model's shape (dk 8: pages twice as large). */
static void other_model(const char *path, kv_disk *d)
{
    kv_geometry g = GEO;
    g.dk = 8;
    char other[1100];
    kv_disk *o = open_disk(d->dir, FP, &g, 0);
    int32_t t[8];
    float page[2 * PAGE_FLOATS] = {0};
    tokens_of(t, 8, 1);
    kv_error e;
    unlink(path); /* the same name: the layout is not in it */
    if (kv_disk_put(o, 1, t, 8, page, &e))
        die_err("put", &e);
    kv_disk_path(o, 1, 8, other, sizeof other);
    kv_disk_close(o);
    if (rename(other, path))
        die("rename %s", other);
}

/* One kind of bad file: refused, counted, removed; a rewrite is read again. */
static void bad_file_case(const char *name, damage_fn damage)
{
    char dir[1024], path[1100];
    fresh_dir(dir, sizeof dir, name);
    kv_disk *d = open_disk(dir, FP, &GEO, 0);
    put_one(d, path, sizeof path);
    CHECK(get_one(d), "%s: a sound file reads back", name);
    damage(path, d);
    CHECK(!get_one(d), "%s: the bad file is refused", name);
    kv_disk_stats s = stats(d);
    CHECK(s.corrupt == 1, "%s: counted (%llu)", name, (unsigned long long)s.corrupt);
    CHECK(!exists(path), "%s: removed", name);
    put_one(d, path, sizeof path); /* what the pool does after recomputing */
    CHECK(get_one(d), "%s: rewritten and read", name);
    kv_disk_close(d);
    printf("bad file: %-20s detected, counted, removed, rewritten\n", name);
}

/* A write that fails with fault f leaves no page file; the temporary only
 * with TORN (a writer killed half-way), which no reader opens and a later
 * open removes once it is stale. */
static void failed_write_case(const char *name, kv_disk_fault f, const char *want_err)
{
    char dir[1024], path[1100];
    fresh_dir(dir, sizeof dir, name);
    kv_disk *d = open_disk(dir, FP, &GEO, 0);
    kv_disk_set_fault(d, f);
    int32_t t[8];
    float page[PAGE_FLOATS];
    tokens_of(t, 8, 1);
    fill_page(page, 1);
    kv_error e;
    CHECK(kv_disk_put(d, 1, t, 8, page, &e) == -1, "%s: the write fails", name);
    kv_disk_stats s = stats(d);
    CHECK(s.write_errors == 1 && strstr(s.last_error, want_err), "%s: counted (%llu), '%s'", name,
          (unsigned long long)s.write_errors, s.last_error);
    kv_disk_path(d, 1, 8, path, sizeof path);
    CHECK(!exists(path), "%s: no page file", name);
    CHECK(count_files(dir, KVD_TMP_PREFIX) == (f == KV_DISK_FAULT_TORN), "%s: temporaries %d", name,
          count_files(dir, KVD_TMP_PREFIX));
    CHECK(!get_one(d) && stats(d).corrupt == 0, "%s: a miss, nothing loaded", name);
    kv_disk_set_fault(d, KV_DISK_FAULT_NONE);
    put_one(d, path, sizeof path);
    CHECK(get_one(d), "%s: written once the fault is gone", name);
    kv_disk_close(d);
    printf("failed write: %-16s counted, no file a reader takes\n", name);
}

/* A killed writer's temporary: ignored by readers, removed when stale. */
static void torn_temp_cleanup(void)
{
    char dir[1024], cmd[2400];
    fresh_dir(dir, sizeof dir, "torn_old");
    kv_disk *d = open_disk(dir, FP, &GEO, 0);
    kv_disk_set_fault(d, KV_DISK_FAULT_TORN);
    char path[1100];
    int32_t t[8];
    float page[PAGE_FLOATS] = {0};
    tokens_of(t, 8, 1);
    CHECK(kv_disk_put(d, 1, t, 8, page, NULL) == -1, "torn write fails");
    kv_disk_close(d);
    (void)path;
    snprintf(cmd, sizeof cmd, "touch -d '1 hour ago' '%s'/" KVD_TMP_PREFIX "*", dir);
    if (system(cmd) != 0)
        die("touch");
    d = open_disk(dir, FP, &GEO, 0);
    CHECK(count_files(dir, KVD_TMP_PREFIX) == 0, "a stale temporary is removed on open");
    CHECK(stats(d).bytes == 0, "temporaries are not counted as the tier's size");
    kv_disk_close(d);
}

/* Root writes through chmod: then the fault hook stands in for the mount. */
static void read_only_case(void)
{
    char dir[1024], path[1100], probe[1100];
    fresh_dir(dir, sizeof dir, "readonly");
    kv_disk *d = open_disk(dir, FP, &GEO, 0);
    put_one(d, path, sizeof path);
    kv_disk_close(d);
    chmod(dir, 0555);
    snprintf(probe, sizeof probe, "%s/probe", dir);
    int fd = open(probe, O_CREAT | O_WRONLY, 0644);
    int writable = fd >= 0;
    if (fd >= 0) {
        close(fd);
        unlink(probe);
    }
    d = open_disk(dir, FP, &GEO, 0);
    if (writable)
        kv_disk_set_fault(d, KV_DISK_FAULT_READONLY);
    else
        CHECK(stats(d).write_errors == 1, "an unwritable directory is reported when opened");
    CHECK(get_one(d), "a read-only directory still serves its pages");
    int32_t t[8];
    float page[PAGE_FLOATS] = {0};
    tokens_of(t, 8, 2);
    uint64_t before = stats(d).write_errors;
    CHECK(kv_disk_put(d, 2, t, 8, page, NULL) == -1, "a write into it fails");
    CHECK(stats(d).write_errors == before + 1, "and is counted");
    kv_disk_close(d);
    chmod(dir, 0755);
    printf("read-only directory: reads served, writes counted (%s)\n",
           writable ? "fault hook: this process writes through chmod" : "chmod 0555");
}

/* A sound file whose tokens are not the request's (a 64-bit key collision):
 * a miss, and the file stays for the prefix it belongs to. */
static void collision_case(void)
{
    char dir[1024], path[1100];
    fresh_dir(dir, sizeof dir, "collision");
    kv_disk *d = open_disk(dir, FP, &GEO, 0);
    put_one(d, path, sizeof path);
    int32_t t[8];
    float page[PAGE_FLOATS];
    tokens_of(t, 8, 9);
    CHECK(kv_disk_get(d, 1, t, 8, page, NULL) == 0, "other tokens under the same key: a miss");
    CHECK(stats(d).corrupt == 0 && exists(path), "the file is kept, not counted as corrupt");
    CHECK(get_one(d), "and still serves its own tokens");
    kv_disk_close(d);
}

static void set_age(const char *path, int seconds_ago)
{
    struct timespec ts[2];
    clock_gettime(CLOCK_REALTIME, &ts[0]);
    ts[0].tv_sec -= seconds_ago;
    ts[1] = ts[0];
    if (utimensat(AT_FDCWD, path, ts, 0))
        die("utimensat %s", path);
}

/* Past the limit the least recently used files go; a read refreshes one. */
static void lru_case(void)
{
    char dir[1024], path[4][1100];
    fresh_dir(dir, sizeof dir, "lru");
    kv_disk *probe = open_disk(dir, FP, &GEO, 0);
    uint64_t fb = kvd_file_bytes(probe, 8);
    kv_disk_close(probe);
    kv_disk *d = open_disk(dir, FP, &GEO, fb * 7 / 2);
    int32_t t[4][8];
    float page[PAGE_FLOATS] = {0};
    for (int i = 0; i < 4; i++) {
        tokens_of(t[i], 8, 10 + i);
        if (i == 3) {
            for (int k = 0; k < 3; k++)
                set_age(path[k], 30 - 10 * k);
            CHECK(kv_disk_get(d, 10, t[0], 8, page, NULL) == 1, "the oldest file is read");
        }
        CHECK(kv_disk_put(d, 10 + (uint64_t)i, t[i], 8, page, NULL) == 0, "put %d", i);
        kv_disk_path(d, 10 + (uint64_t)i, 8, path[i], sizeof path[i]);
    }
    kv_disk_stats s = stats(d);
    CHECK(exists(path[0]) && !exists(path[1]) && exists(path[2]) && exists(path[3]),
          "the least recently used file went (%d %d %d %d)", exists(path[0]), exists(path[1]),
          exists(path[2]), exists(path[3]));
    CHECK(s.evictions == 1 && s.bytes == 3 * fb, "evictions %llu, size %llu of %llu",
          (unsigned long long)s.evictions, (unsigned long long)s.bytes,
          (unsigned long long)(3 * fb));
    kv_disk_close(d);
}

typedef struct {
    kv_disk *d;
    int fails;
} writer_arg;

static void *hammer(void *arg)
{
    writer_arg *w = arg;
    int32_t t[8];
    float page[PAGE_FLOATS];
    tokens_of(t, 8, 1);
    fill_page(page, 1);
    for (int i = 0; i < 200; i++) {
        char path[1100];
        kv_disk_path(w->d, 1, 8, path, sizeof path);
        if (i % 2)
            unlink(path); /* keep the race on: both rewrite it */
        w->fails += kv_disk_put(w->d, 1, t, 8, page, NULL) != 0;
    }
    return NULL;
}

/* Two tiers (two servers) on one directory writing one key at once. */
static void two_writers_case(void)
{
    char dir[1024];
    fresh_dir(dir, sizeof dir, "two_writers");
    writer_arg a = {open_disk(dir, FP, &GEO, 0), 0}, b = {open_disk(dir, FP, &GEO, 0), 0};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, hammer, &a);
    pthread_create(&tb, NULL, hammer, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(a.fails == 0 && b.fails == 0, "concurrent writers of one key: no failure (%d, %d)",
          a.fails, b.fails);
    char path[1100];
    put_one(a.d, path, sizeof path);
    CHECK(get_one(b.d) && stats(b.d).corrupt == 0, "the file is sound");
    CHECK(count_files(dir, KVD_TMP_PREFIX) == 0, "no temporaries left");
    kv_disk_close(a.d);
    kv_disk_close(b.d);
}

/* ---- through a pool ------------------------------------------------------- */

/* The value slot j of the page summarising tokens[0..n) holds. */
static float expect(const int32_t *tokens, int n, int j)
{
    uint64_t h = kv_fnv1a(KV_FNV_SEED, tokens, (size_t)n * 4);
    h = kv_fnv1a(h, &j, sizeof j);
    return (float)(h & 0xffff);
}

static kv_pool *pool_on(const char *dir, int pages, int slots)
{
    kv_pool_options o = {.geo = GEO, .dtype = KV_DTYPE_F32, .budget_bytes = 0};
    o.budget_bytes = (size_t)pages * kv_page_floats(&GEO) * sizeof(float);
    kv_pool *p;
    kv_disk *d;
    kv_error e;
    kv_disk_options dopt = {.dir = dir, .fingerprint = FP, .queue_slots = slots};
    if (kv_pool_create(&o, &p, &e) || kv_disk_open(&dopt, &GEO, KV_DTYPE_F32, &d, &e) ||
        kv_pool_set_disk(p, d, &e))
        die_err("pool with a disk tier", &e);
    return p;
}

/* A sequence fed tok[0..n), its pages written as the "engine" would. */
static kv_seq *compute(kv_pool *p, const int32_t *tok, int n)
{
    kv_seq *s;
    kv_error e;
    int C = GEO.block_tokens;
    if (kv_seq_create(p, &s, &e) || kv_seq_ensure_pages(s, n / C, &e))
        die_err("sequence", &e);
    for (int b = 0; b < n / C; b++) {
        float *pg = p->pg[s->table[b]].data;
        for (int j = 0; j < PAGE_FLOATS; j++)
            pg[j] = expect(tok, (b + 1) * C, j);
    }
    kv_seq_advance(s, tok, n);
    return s;
}

/* Matches tok[0..n) in a fresh sequence: the position, pages checked. */
static int match_checked(kv_pool *p, const int32_t *tok, int n, const char *what)
{
    kv_seq *s;
    kv_error e;
    if (kv_seq_create(p, &s, &e))
        die_err("sequence", &e);
    int pos = kv_seq_match(s, tok, n, &e);
    int bad = 0;
    for (int b = 0; b < pos / GEO.block_tokens; b++)
        for (int j = 0; j < PAGE_FLOATS; j++)
            bad += ((float *)kv_seq_page(s, b))[j] != expect(tok, (b + 1) * GEO.block_tokens, j);
    CHECK(bad == 0, "%s: %d values of the matched pages are wrong", what, bad);
    CHECK(kv_pool_check(p, &e) == 0, "%s: %s", what, e.msg);
    kv_seq_free(s);
    return pos;
}

static void restart_case(void)
{
    char dir[1024];
    fresh_dir(dir, sizeof dir, "restart");
    int32_t tok[22];
    tokens_of(tok, 22, 3);
    kv_pool *p = pool_on(dir, 8, 0);
    kv_seq_free(compute(p, tok, 22));
    kv_disk_flush(kv_pool_disk(p));
    CHECK(stats(kv_pool_disk(p)).writes == 5, "5 closed blocks written behind (%llu)",
          (unsigned long long)stats(kv_pool_disk(p)).writes);
    kv_pool_release(p);
    p = pool_on(dir, 8, 0); /* a restart */
    CHECK(match_checked(p, tok, 22, "after a restart") == 20, "5 blocks from disk");
    CHECK(stats(kv_pool_disk(p)).hits == 5, "disk hits %llu",
          (unsigned long long)stats(kv_pool_disk(p)).hits);
    CHECK(match_checked(p, tok, 22, "again") == 20 && stats(kv_pool_disk(p)).hits == 5,
          "the second match comes from memory");
    kv_pool_release(p);
    char path[1100];
    p = pool_on(dir, 8, 0);
    uint64_t k = 0;
    for (int b = 0; b < 3; b++)
        k = kv_block_key(k, tok + 4 * b, 4);
    kv_disk_path(kv_pool_disk(p), k, 12, path, sizeof path);
    flip_at(path, (long)sizeof(kvd_header) + 12 * 4 + 1);
    CHECK(match_checked(p, tok, 22, "a corrupt third block") == 8, "stops before it");
    CHECK(stats(kv_pool_disk(p)).corrupt == 1 && !exists(path), "counted and removed");
    kv_pool_release(p);
}

/* A full queue drops (never blocks); a dropped page is written at eviction. */
static void queue_full_case(void)
{
    char dir[1024];
    fresh_dir(dir, sizeof dir, "queue_full");
    int32_t a[12], b[12];
    tokens_of(a, 12, 4);
    tokens_of(b, 12, 5);
    kv_pool *p = pool_on(dir, 3, 1);
    kv_disk *d = kv_pool_disk(p);
    kv_disk_set_fault(d, KV_DISK_FAULT_HOLD);
    kv_seq_free(compute(p, a, 12));
    CHECK(stats(d).dropped == 2, "one slot: two of three pages dropped (%llu)",
          (unsigned long long)stats(d).dropped);
    kv_disk_set_fault(d, KV_DISK_FAULT_NONE);
    kv_disk_flush(d);
    kv_seq *s;
    kv_error e;
    if (kv_seq_create(p, &s, &e))
        die_err("sequence", &e);
    for (int k = 1; k <= 3; k++) { /* each take evicts one of a's pages */
        if (kv_seq_ensure_pages(s, k, &e))
            die_err("pages", &e);
        kv_disk_flush(d);
    }
    CHECK(stats(d).writes == 3, "the dropped pages were written when evicted (%llu)",
          (unsigned long long)stats(d).writes);
    kv_seq_free(s);
    kv_pool_release(p);
    p = pool_on(dir, 3, 1);
    CHECK(match_checked(p, a, 12, "evicted pages") == 8, "two blocks back from disk");
    kv_pool_release(p);
    (void)b;
}

/* Pages are written from the pool's own storage (no copy) and stay pinned
 * until written: a queued page the pool must evict is copied first, so the
 * file holds its bits, not those of the block that reuses the page. */
static void pinned_case(void)
{
    char dir[1024];
    fresh_dir(dir, sizeof dir, "pinned");
    int32_t a[13], b[13];
    tokens_of(a, 13, 6);
    tokens_of(b, 13, 7);
    kv_pool *p = pool_on(dir, 3, 4);
    kv_disk *d = kv_pool_disk(p);
    kv_seq_free(compute(p, a, 12));
    kv_disk_flush(d);
    CHECK(stats(d).writes == 3 && stats(d).copied == 0,
          "written uncopied: %llu writes, %llu copies", (unsigned long long)stats(d).writes,
          (unsigned long long)stats(d).copied);
    kv_pool_release(p);
    fresh_dir(dir, sizeof dir, "pinned");
    p = pool_on(dir, 3, 4);
    d = kv_pool_disk(p);
    kv_disk_set_fault(d, KV_DISK_FAULT_HOLD);
    kv_seq_free(compute(p, a, 12)); /* three pages pinned, waiting */
    kv_error e;
    CHECK(kv_pool_check(p, &e) == 0, "pinned: %s", e.msg);
    kv_seq_free(compute(p, b, 12)); /* evicts (and overwrites) all three */
    CHECK(stats(d).copied == 3, "the evicted queued pages were copied (%llu)",
          (unsigned long long)stats(d).copied);
    kv_disk_set_fault(d, KV_DISK_FAULT_NONE);
    kv_disk_flush(d);
    kv_pool_release(p);
    p = pool_on(dir, 3, 4);
    CHECK(match_checked(p, a, 13, "pages evicted while queued") == 12, "a's blocks from disk");
    kv_pool_release(p);
    p = pool_on(dir, 3, 4); /* closing writes what is queued, from the pinned pages */
    kv_disk_set_fault(kv_pool_disk(p), KV_DISK_FAULT_HOLD);
    int32_t c[13];
    tokens_of(c, 13, 8);
    kv_seq_free(compute(p, c, 12));
    kv_pool_release(p);
    p = pool_on(dir, 3, 4);
    CHECK(match_checked(p, c, 13, "pages queued at close") == 12, "c's blocks from disk");
    kv_pool_release(p);
}

/* A sequence fresh on p, its match started: the position from memory. */
static kv_seq *match_start(kv_pool *p, const int32_t *tok, int n, int *pos)
{
    kv_seq *s;
    kv_error e;
    if (kv_seq_create(p, &s, &e))
        die_err("sequence", &e);
    *pos = kv_seq_match_start(s, tok, n, &e);
    if (*pos < 0)
        die_err("match", &e);
    return s;
}

/* Disk reads run on the tier's loader thread: the match returns at once,
 * the pool goes on serving other sequences while the load is held, and the
 * blocks are attached when it is done; a load that meets a bad file stops
 * there (its pages stay promised to the sequence, which recomputes); a
 * sequence freed while its load waits stops it. */
static void async_load_case(void)
{
    char dir[1024];
    fresh_dir(dir, sizeof dir, "async");
    int32_t tok[22], other[9];
    tokens_of(tok, 22, 9);
    tokens_of(other, 9, 10);
    kv_pool *p = pool_on(dir, 12, 0);
    kv_seq_free(compute(p, tok, 22));
    kv_pool_release(p);
    p = pool_on(dir, 12, 0);
    kv_disk *d = kv_pool_disk(p);
    kv_disk_set_fault(d, KV_DISK_FAULT_HOLD);
    int pos;
    kv_seq *s = match_start(p, tok, 22, &pos);
    CHECK(pos == 0 && kv_seq_loading(s) && kv_seq_match_poll(s, 0) == KV_STILL_LOADING,
          "the match returns while the loader is held (pos %d)", pos);
    kv_seq_free(compute(p, other, 9)); /* the pool serves others meanwhile */
    kv_error e;
    CHECK(kv_pool_check(p, &e) == 0, "while loading: %s", e.msg);
    kv_disk_set_fault(d, KV_DISK_FAULT_NONE);
    CHECK(kv_seq_match_poll(s, 1) == 20 && !kv_seq_loading(s), "5 blocks loaded");
    for (int b = 0, bad = 0; b < 5; b++, bad = 0) {
        for (int j = 0; j < PAGE_FLOATS; j++)
            bad += ((float *)kv_seq_page(s, b))[j] != expect(tok, (b + 1) * 4, j);
        CHECK(bad == 0, "block %d: %d wrong values", b, bad);
    }
    kv_seq_free(s);
    CHECK(match_checked(p, tok, 22, "now from memory") == 20 && stats(d).hits == 5,
          "the loaded blocks were indexed (%llu disk hits)", (unsigned long long)stats(d).hits);
    kv_pool_release(p);
    p = pool_on(dir, 12, 0);
    d = kv_pool_disk(p);
    char path[1100];
    uint64_t k = 0;
    for (int b = 0; b < 3; b++)
        k = kv_block_key(k, tok + 4 * b, 4);
    kv_disk_path(d, k, 12, path, sizeof path);
    flip_at(path, (long)sizeof(kvd_header) + 12 * 4 + 3);
    s = match_start(p, tok, 22, &pos);
    CHECK(kv_seq_match_poll(s, 1) == 8, "a bad third block: the load stops before it");
    CHECK(stats(d).corrupt == 1 && s->n_pages == 2 && s->reserved == 3,
          "counted; its pages and the rest's promised for the recompute (%d pages, %ld "
          "reserved)",
          s->n_pages, s->reserved);
    CHECK(kv_pool_check(p, &e) == 0, "after a failed load: %s", e.msg);
    kv_seq_free(s);
    kv_pool_release(p);
    p = pool_on(dir, 12, 0); /* blocks 1-2 on disk only */
    d = kv_pool_disk(p);
    kv_disk_set_fault(d, KV_DISK_FAULT_HOLD);
    s = match_start(p, tok, 22, &pos);
    CHECK(kv_seq_loading(s), "a load waits");
    kv_seq_free(s); /* stops it: no wait for the held loader */
    kv_disk_set_fault(d, KV_DISK_FAULT_NONE);
    CHECK(kv_pool_check(p, &e) == 0, "after a dropped load: %s", e.msg);
    kv_pool_release(p);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        die("usage: test_disk_tier WORKDIR");
    work = argv[1];
    bad_file_case("truncated", truncate_file);
    bad_file_case("flipped_page_byte", flip_page_byte);
    bad_file_case("flipped_token_byte", flip_token_byte);
    bad_file_case("stale_version", stale_version);
    bad_file_case("wrong_fingerprint", foreign_fingerprint);
    bad_file_case("other_model", other_model);
    failed_write_case("disk_full", KV_DISK_FAULT_ENOSPC, "No space");
    failed_write_case("torn_temp", KV_DISK_FAULT_TORN, "No space");
    failed_write_case("read_only", KV_DISK_FAULT_READONLY, "Read-only");
    torn_temp_cleanup();
    read_only_case();
    collision_case();
    lru_case();
    two_writers_case();
    restart_case();
    queue_full_case();
    pinned_case();
    async_load_case();
    if (failures)
        fprintf(stderr, "%d failures\n", failures);
    else
        printf("disk tier: all cases passed\n");
    return failures ? 1 : 0;
}
