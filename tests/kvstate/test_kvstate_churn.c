/*
 * Churn: thousands of random sequences of random lengths sharing random
 * prefixes, with random frees, finishes (resume), clones, reservations and
 * evictions, in a deliberately small pool, with and without keys cut to 2
 * bits (forced collisions). The "engine" here writes into each page and each
 * current-block row a value that is a function of the token prefix it
 * summarises, so any state served for the wrong prefix shows up.
 *
 * After every operation: kv_pool_check (lists, counts, index), every page's
 * reference count equals the number of live tables holding it, reservations
 * add up, and every live sequence's pages and rows are right for its tokens.
 * Also: a sequence of a real model's size gets zero-filled, 2 MiB-aligned buffers, and its
 * pages whole huge pages where they fit them; pages are made ahead (the stash) and at
 * creation (prefault_bytes).
 * Built also with AddressSanitizer and run under valgrind (fewer rounds).
 *
 * With DISK_DIR the pools have a disk tier there (write-behind, loads on
 * memory misses): the same checks then prove that every page loaded from
 * disk holds its own prefix's values, and disk hits must happen.
 *
 * usage: test_kvstate_churn [ROUNDS [DISK_DIR]]
 */
#include "kvstate_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TEST_RNG_SEED 0x2545f4914f6cdd1dull
#define CHECK_MAX_FAILURES 20
#include "check.h"

#define MAX_LIVE 12
#define ROOTS 3

static const kv_geometry GEO = {.layers = 2,
                                .kv_heads = 1,
                                .dk = 2,
                                .dv = 3,
                                .block_tokens = 4,
                                .max_blocks = 12,
                                .key_sums = 1};
#define CTX (12 * 4)
#define VOCAB 3 /* few ids: prefixes meet often */

typedef struct {
    kv_seq *s;
    int32_t tok[CTX];
    int n; /* tokens it will be fed in all */
} live_seq;

static live_seq live[MAX_LIVE];
static int n_live;
static int32_t roots[ROOTS][CTX];

/* The value slot j of whatever summarises tokens[0..n) must hold. */
static float expect(const int32_t *tokens, int n, int j)
{
    uint64_t h = kv_fnv1a(KV_FNV_SEED, tokens, (size_t)n * 4);
    h = kv_fnv1a(h, &j, sizeof j);
    return (float)(h & 0xff); /* exact in bf16 too */
}

static void write_page(kv_seq *s, int b, const int32_t *tokens)
{
    size_t n = kv_page_floats(&GEO);
    float v[64];
    for (size_t j = 0; j < n; j++)
        v[j] = expect(tokens, (b + 1) * GEO.block_tokens, (int)j);
    kv_page_write(kv_pool_dtype(kv_seq_pool(s)), kv_seq_page(s, b), 0, v, n);
}

/* Row r (position p) of every (layer, head): a function of tokens[0..p]. */
static void write_row(kv_seq *s, int p, const int32_t *tokens)
{
    kv_seq_bufs b = kv_seq_buffers(s);
    int C = GEO.block_tokens, r = p % C;
    for (int lh = 0; lh < GEO.layers * GEO.kv_heads; lh++) {
        for (int a = 0; a < GEO.dk; a++)
            b.cur_k[((size_t)lh * C + r) * GEO.dk + a] = expect(tokens, p + 1, 100 + lh * 10 + a);
        for (int a = 0; a < GEO.dv; a++)
            b.cur_v[((size_t)lh * C + r) * GEO.dv + a] = expect(tokens, p + 1, 200 + lh * 10 + a);
    }
}

static void verify_seq(const live_seq *ls, const char *when)
{
    kv_seq *s = ls->s;
    int pos = kv_seq_pos(s), C = GEO.block_tokens;
    const int32_t *t = kv_seq_tokens(s);
    CHECK(memcmp(t, ls->tok, (size_t)pos * 4) == 0, "%s: token history differs", when);
    size_t n = kv_page_floats(&GEO);
    float v[64];
    for (int b = 0; b < pos / C; b++) {
        kv_page_read(kv_pool_dtype(kv_seq_pool(s)), kv_seq_page(s, b), 0, v, n);
        for (size_t j = 0; j < n; j++)
            if (v[j] != expect(ls->tok, (b + 1) * C, (int)j)) {
                CHECK(0, "%s: page of block %d at position %d holds another prefix's state", when,
                      b, pos);
                return;
            }
    }
    kv_seq_bufs bf = kv_seq_buffers(s);
    for (int p = pos / C * C; p < pos; p++)
        for (int lh = 0; lh < GEO.layers * GEO.kv_heads; lh++)
            for (int a = 0; a < GEO.dk; a++)
                if (bf.cur_k[((size_t)lh * C + p % C) * GEO.dk + a] !=
                    expect(ls->tok, p + 1, 100 + lh * 10 + a)) {
                    CHECK(0, "%s: row %d holds another prefix's state", when, p);
                    return;
                }
}

static void verify_all(const kv_pool *p, const char *when)
{
    kv_error err;
    if (kv_pool_check(p, &err))
        CHECK(0, "%s: %s", when, err.msg);
    static int refs[4096];
    memset(refs, 0, sizeof refs);
    long reserved = 0, distinct = 0;
    for (int i = 0; i < n_live; i++) {
        kv_seq *s = live[i].s;
        for (int b = 0; b < s->n_pages; b++)
            refs[s->table[b]]++;
        reserved += s->reserved;
        verify_seq(&live[i], when);
    }
    for (int id = 0; id < p->n_pg; id++) {
        CHECK(refs[id] == p->pg[id].refs, "%s: page %d has %d references, %d tables hold it", when,
              id, p->pg[id].refs, refs[id]);
        distinct += refs[id] > 0;
    }
    CHECK(distinct == p->n_used, "%s: %ld pages in tables, %ld counted used", when, distinct,
          p->n_used);
    CHECK(reserved == p->n_reserved, "%s: sequences reserve %ld, pool counts %ld", when, reserved,
          p->n_reserved);
    kv_stats st;
    kv_pool_stats(p, &st);
    CHECK(st.pages_used + st.pages_cached + st.pages_free == st.pages_total,
          "%s: used %ld + cached %ld + free %ld != total %ld", when, st.pages_used, st.pages_cached,
          st.pages_free, st.pages_total);
}

static void drop(int i, int finish)
{
    if (finish)
        kv_seq_finish(live[i].s);
    else
        kv_seq_free(live[i].s);
    live[i] = live[--n_live];
}

static void op_new(kv_pool *p)
{
    if (n_live == MAX_LIVE)
        return;
    live_seq *ls = &live[n_live];
    kv_error err;
    ls->n = 1 + rnd(CTX);
    int shared = rnd(ls->n + 1);
    const int32_t *root = roots[rnd(ROOTS)];
    for (int i = 0; i < ls->n; i++)
        ls->tok[i] = i < shared ? root[i] : rnd(VOCAB);
    if (kv_seq_create(p, &ls->s, &err)) {
        CHECK(0, "create: %s", err.msg);
        return;
    }
    n_live++;
    if (rnd(2) && kv_seq_reserve(ls->s, ls->n, &err))
        CHECK(strstr(err.msg, "state memory full") != NULL, "reserve: %s", err.msg);
    int pos = kv_seq_match(ls->s, ls->tok, ls->n, &err);
    CHECK(pos >= 0 && (pos < ls->n || ls->n == 1) && pos == kv_seq_pos(ls->s),
          "match returned %d for %d tokens", pos, ls->n);
}

static void op_step(int i)
{
    live_seq *ls = &live[i];
    kv_seq *s = ls->s;
    int pos = kv_seq_pos(s), C = GEO.block_tokens;
    if (pos >= ls->n) {
        drop(i, rnd(2));
        return;
    }
    int len = 1 + rnd(2 * C);
    if (len > ls->n - pos)
        len = ls->n - pos;
    kv_error err;
    if (kv_seq_ensure_pages(s, (pos + len) / C, &err)) {
        CHECK(strstr(err.msg, "state memory full") != NULL, "ensure_pages: %s", err.msg);
        CHECK(kv_seq_pos(s) == pos, "a refused step moved the sequence");
        if (rnd(2))
            drop(i, 0);
        return;
    }
    for (int p = pos; p < pos + len; p++) {
        write_row(s, p, ls->tok);
        if (p % C == C - 1)
            write_page(s, p / C, ls->tok);
    }
    kv_seq_advance(s, ls->tok + pos, len);
}

static void op_clone(int i)
{
    if (n_live == MAX_LIVE)
        return;
    kv_error err;
    live[n_live] = live[i];
    if (kv_seq_clone(live[i].s, &live[n_live].s, &err)) {
        CHECK(0, "clone: %s", err.msg);
        return;
    }
    n_live++;
}

/* Runs one sequence over tokens[0..n) and frees it: its blocks stay cached. */
static void run_and_free(kv_pool *p, const int32_t *tok, int n)
{
    kv_seq *s;
    kv_error err;
    if (kv_seq_create(p, &s, &err) || kv_seq_ensure_pages(s, n / GEO.block_tokens, &err)) {
        CHECK(0, "run_and_free: %s", err.msg);
        return;
    }
    for (int q = 0; q < n; q++) {
        write_row(s, q, tok);
        if (q % GEO.block_tokens == GEO.block_tokens - 1)
            write_page(s, q / GEO.block_tokens, tok);
    }
    kv_seq_advance(s, tok, n);
    kv_seq_free(s);
}

/* Blocks of tok[0..n) a fresh sequence finds cached (then freed). */
static int cached_blocks(kv_pool *p, const int32_t *tok, int n)
{
    kv_seq *s;
    kv_error err;
    if (kv_seq_create(p, &s, &err))
        return -1;
    int pos = kv_seq_match(s, tok, n, &err);
    kv_seq_free(s);
    return pos < 0 ? -1 : pos / GEO.block_tokens;
}

/* Eviction takes the least recently used cached page, and a hit refreshes a
 * page's age. */
static void test_lru_order(void)
{
    kv_pool_options o = {.geo = GEO, .dtype = KV_DTYPE_F32};
    o.budget_bytes = kv_page_floats(&GEO) * 4 * 3; /* 3 pages */
    kv_pool *p;
    kv_error err;
    if (kv_pool_create(&o, &p, &err)) {
        CHECK(0, "pool: %s", err.msg);
        return;
    }
    int C = GEO.block_tokens;
    int32_t x[8] = {0, 0, 0, 0, 9}, y[8] = {1, 1, 1, 1, 9}, z[8] = {2, 2, 2, 2, 9};
    int32_t w[8] = {0, 1, 2, 0, 9};
    run_and_free(p, x, C);
    run_and_free(p, y, C);
    run_and_free(p, z, C);
    CHECK(p->n_cached == 3, "3 blocks cached, counted %ld", p->n_cached);
    CHECK(cached_blocks(p, x, C + 1) == 1, "x not cached"); /* x is now the youngest */
    run_and_free(p, w, C);                                  /* needs a page: evicts y, the oldest */
    CHECK(cached_blocks(p, y, C + 1) == 0, "LRU kept y, the least recently used block");
    CHECK(cached_blocks(p, x, C + 1) == 1 && cached_blocks(p, z, C + 1) == 1 &&
              cached_blocks(p, w, C + 1) == 1,
          "LRU evicted a more recently used block");
    CHECK(p->ctr.evictions == 1, "%llu evictions, expected 1",
          (unsigned long long)p->ctr.evictions);
    verify_all(p, "LRU test");
    kv_pool_release(p);
}

/* A sequence of a real model's size: its P_i and current-block rows (2 MiB and more each) are
 * zero-filled, 2 MiB-aligned (huge-page blocks in host memory), writable to the last float,
 * and a clone gets copies of them, not the same memory; a sequence made after them is zero-filled
 * too (the allocator may hand it the same blocks). */
static void test_large_buffers(void)
{
    const kv_geometry g = {
        .layers = 16, .kv_heads = 4, .dk = 128, .dv = 256, .block_tokens = 64, .max_blocks = 2};
    kv_pool_options o = {.geo = g, .dtype = KV_DTYPE_F32};
    kv_pool *p;
    kv_seq *s, *c;
    kv_error err;
    if (kv_pool_create(&o, &p, &err)) {
        CHECK(0, "pool: %s", err.msg);
        return;
    }
    if (kv_seq_create(p, &s, &err)) {
        CHECK(0, "sequence: %s", err.msg);
        kv_pool_release(p);
        return;
    }
    kv_seq_bufs b = kv_seq_buffers(s);
    size_t heads = (size_t)g.layers * g.kv_heads;
    float *buf[3] = {b.prefix, b.cur_k, b.cur_v};
    size_t n[3] = {heads * g.dk * g.dv, heads * g.block_tokens * g.dk,
                   heads * g.block_tokens * g.dv};
    for (int i = 0; i < 3; i++) {
        CHECK(((uintptr_t)buf[i] & ((2u << 20) - 1)) == 0, "buffer %d at %p, not 2 MiB-aligned", i,
              (void *)buf[i]);
        size_t nonzero = 0;
        for (size_t j = 0; j < n[i]; j++)
            nonzero += buf[i][j] != 0.0f;
        CHECK(nonzero == 0, "buffer %d: %zu of %zu floats not zero", i, nonzero, n[i]);
        for (size_t j = 0; j < n[i]; j++)
            buf[i][j] = (float)(j % 1000 + i);
    }
    if (kv_seq_clone(s, &c, &err)) {
        CHECK(0, "clone: %s", err.msg);
    } else {
        kv_seq_bufs cb = kv_seq_buffers(c);
        CHECK(cb.prefix != b.prefix && cb.cur_k != b.cur_k && cb.cur_v != b.cur_v,
              "the clone shares a buffer with its original");
        CHECK(memcmp(cb.prefix, b.prefix, n[0] * sizeof(float)) == 0 &&
                  memcmp(cb.cur_k, b.cur_k, n[1] * sizeof(float)) == 0 &&
                  memcmp(cb.cur_v, b.cur_v, n[2] * sizeof(float)) == 0,
              "the clone's buffers differ from the original's");
        kv_seq_free(c);
    }
    kv_seq_free(s);
    /* new sequences, written and freed in turn: the allocator hands later ones the blocks
     * of earlier ones (glibc from the third on, once its mmap threshold has risen), and each
     * must still start at zero */
    for (int round = 2; round <= 4; round++) {
        if (kv_seq_create(p, &s, &err)) {
            CHECK(0, "sequence %d: %s", round, err.msg);
            break;
        }
        b = kv_seq_buffers(s);
        float *again[3] = {b.prefix, b.cur_k, b.cur_v};
        for (int i = 0; i < 3; i++) {
            size_t nonzero = 0;
            for (size_t j = 0; j < n[i]; j++)
                nonzero += again[i][j] != 0.0f;
            CHECK(nonzero == 0, "sequence %d, buffer %d: %zu of %zu floats not zero", round, i,
                  nonzero, n[i]);
            for (size_t j = 0; j < n[i]; j++)
                again[i][j] = (float)(j % 1000 + round);
        }
        kv_seq_free(s);
    }
    kv_pool_release(p);
}

/* 1 when some 4 KiB page of [p, p + bytes) is mapped in this process */
static int any_mapped(const void *p, size_t bytes)
{
    unsigned char v;
    for (size_t off = 0; off < bytes; off += 4096)
        if (mincore((char *)p + off, 4096, &v) == 0)
            return 1;
    return 0;
}

/* The 340M shape's heads (4 of 128 x 256) over `layers` layers */
static kv_geometry large_page_geo(int layers, int key_sums)
{
    return (kv_geometry){.layers = layers,
                         .kv_heads = 4,
                         .dk = 128,
                         .dv = 256,
                         .block_tokens = 64,
                         .max_blocks = 4,
                         .key_sums = key_sums};
}

/* State pages of a real model's size (2 MiB and more) are mappings of their own: whole huge
 * pages, 2 MiB-aligned, where rounding up to them costs at most 1/16 more, else their own
 * size; zero-filled and writable to the last byte either way, and unmapped whole when an
 * unbounded pool gives their storage back. */
static void test_large_pages(void)
{
    const size_t huge = (size_t)2 << 20;
    struct {
        kv_geometry g;
        kv_dtype dt;
        size_t span; /* what the page's mapping should cover */
    } cases[] = {
        /* 8 x 4 heads x 128 x 256: 4 MiB of f32, 2 MiB of bf16 */
        {large_page_geo(8, 0), KV_DTYPE_F32, 2 * huge},
        {large_page_geo(8, 0), KV_DTYPE_BF16, huge},
        /* with key sums 4 MiB + 16 KiB: 6 MiB of huge pages would cost half as much again */
        {large_page_geo(8, 1), KV_DTYPE_F32, 0},
        /* 64 layers with key sums, 32 MiB + 128 KiB: 34 MiB of huge pages cost < 1/16 more */
        {large_page_geo(64, 1), KV_DTYPE_F32, 17 * huge},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        kv_pool_options o = {.geo = cases[c].g, .dtype = cases[c].dt}; /* unbounded */
        kv_pool *p;
        kv_error err;
        if (kv_pool_create(&o, &p, &err)) {
            CHECK(0, "case %zu: pool: %s", c, err.msg);
            continue;
        }
        size_t bytes = p->page_bytes;
        size_t span = cases[c].span ? cases[c].span : (bytes + 4095) / 4096 * 4096;
        int32_t id[2];
        unsigned char *data[2];
        for (int i = 0; i < 2; i++) {
            if (kv_page_take(p, 0, &id[i], &err)) {
                CHECK(0, "case %zu: take %d: %s", c, i, err.msg);
                kv_pool_release(p);
                return;
            }
            data[i] = p->pg[id[i]].data;
            if (cases[c].span)
                CHECK(((uintptr_t)data[i] & (huge - 1)) == 0,
                      "case %zu: a %zu-byte page at %p, not on a huge page's boundary", c, bytes,
                      (void *)data[i]);
            size_t nonzero = 0;
            for (size_t j = 0; j < bytes; j++)
                nonzero += data[i][j] != 0;
            CHECK(nonzero == 0, "case %zu: page %d: %zu of %zu bytes not zero", c, i, nonzero,
                  bytes);
            memset(data[i], 0x5a, bytes);
        }
        /* used 2 -> 1 (no spare: keep it), 1 -> 0 (one spare: give the storage back) */
        kv_page_unref(p, id[0]);
        kv_page_unref(p, id[1]);
        CHECK(kv_pool_check(p, &err) == 0, "case %zu: after the releases: %s", c, err.msg);
        CHECK(!any_mapped(data[1], span),
              "case %zu: a page given back (%zu bytes at %p) is still mapped in part", c, span,
              (void *)data[1]);
        CHECK(any_mapped(data[0], bytes), "case %zu: the page kept for reuse is not mapped", c);
        for (int i = 0; i < 2; i++) {
            if (kv_page_take(p, 0, &id[i], &err)) {
                CHECK(0, "case %zu: take again %d: %s", c, i, err.msg);
                break;
            }
            unsigned char *d = p->pg[id[i]].data;
            if (i == 0) {
                CHECK(d == data[0], "case %zu: the kept page was not handed out first", c);
                continue;
            }
            size_t nonzero = 0;
            for (size_t j = 0; j < bytes; j++)
                nonzero += d[j] != 0;
            CHECK(nonzero == 0, "case %zu: fresh storage: %zu of %zu bytes not zero", c, nonzero,
                  bytes);
            memset(d, 0x33, bytes);
        }
        kv_page_unref(p, id[0]);
        kv_page_unref(p, id[1]);
        CHECK(kv_pool_check(p, &err) == 0, "case %zu: at the end: %s", c, err.msg);
        kv_pool_release(p);
    }
}

/* Waits until the stash holds `ready` pages; returns the pages taken ready so far, or -1
 * when it never does (given a minute, times MHLA_TEST_TIME_FACTOR: making a page takes
 * milliseconds, so only a stash that does not work waits that long). */
static long wait_ready(kv_pool *p, int ready)
{
    const char *f = getenv("MHLA_TEST_TIME_FACTOR");
    double factor = f && atof(f) > 1 ? atof(f) : 1;
    int now;
    long handed;
    for (long ms = 0; ms < (long)(60000 * factor); ms++) {
        kv_stash_counts(p->stash, &now, &handed);
        if (now == ready)
            return handed;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    CHECK(0, "the stash never held %d pages (%d)", ready, now);
    return -1;
}

/* A bounded pool of large pages keeps new pages faulted in ahead (page_stash.c): 4 ready
 * from the start, each new page taken from them (zero-filled, writable, distinct), refilled
 * only while the budget allows, never past it; none for small pages or with
 * MHLA_STATE_READY_PAGES=0. */
static void test_ready_pages(void)
{
    kv_pool_options o = {.geo = large_page_geo(8, 0), .dtype = KV_DTYPE_F32};
    o.budget_bytes = kv_page_floats(&o.geo) * 4 * 6; /* 6 pages of 4 MiB */
    kv_pool *p;
    kv_error err;
    if (kv_pool_create(&o, &p, &err)) {
        CHECK(0, "ready pages: pool: %s", err.msg);
        return;
    }
    CHECK(p->stash != NULL, "a bounded pool of 4 MiB pages has no stash");
    wait_ready(p, 4);
    int32_t id[6];
    unsigned char *data[6];
    for (int i = 0; i < 6; i++) {
        if (i == 4) /* 2 pages left to the budget: 2 made ahead, no more */
            CHECK(wait_ready(p, 2) == 4, "the first 4 pages were not the ready ones");
        if (kv_page_take(p, 0, &id[i], &err)) {
            CHECK(0, "ready pages: take %d: %s", i, err.msg);
            kv_pool_release(p);
            return;
        }
        data[i] = p->pg[id[i]].data;
        size_t nonzero = 0;
        for (size_t j = 0; j < p->page_bytes; j++)
            nonzero += data[i][j] != 0;
        CHECK(nonzero == 0, "ready page %d: %zu bytes not zero", i, nonzero);
        memset(data[i], 0x11 * (i + 1), p->page_bytes);
        for (int k = 0; k < i; k++)
            CHECK(data[k] != data[i], "pages %d and %d share storage", k, i);
    }
    int ready;
    long handed;
    nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL); /* time to make one too many */
    kv_stash_counts(p->stash, &ready, &handed);
    CHECK(ready == 0 && handed == 6, "at the budget: %d pages ready, %ld of 6 taken ready", ready,
          handed);
    int32_t extra;
    CHECK(kv_page_take(p, 0, &extra, &err) != 0 && err.code == KV_ERR_FULL,
          "a 7th page past a budget of 6 was given");
    for (int i = 0; i < 6; i++)
        kv_page_unref(p, id[i]);
    CHECK(kv_pool_check(p, &err) == 0, "ready pages: %s", err.msg);
    kv_pool_release(p);
    o.geo = GEO; /* small pages: the allocator's, no stash */
    o.budget_bytes = kv_page_floats(&GEO) * 4 * 6;
    if (kv_pool_create(&o, &p, &err) == 0) {
        CHECK(p->stash == NULL, "a pool of %zu-byte pages has a stash", p->page_bytes);
        kv_pool_release(p);
    }
    setenv("MHLA_STATE_READY_PAGES", "0", 1);
    o.geo = large_page_geo(8, 0);
    o.budget_bytes = kv_page_floats(&o.geo) * 4 * 6;
    if (kv_pool_create(&o, &p, &err) == 0) {
        CHECK(p->stash == NULL, "MHLA_STATE_READY_PAGES=0 still made a stash");
        kv_pool_release(p);
    }
    unsetenv("MHLA_STATE_READY_PAGES");
}

/* Bytes of [p, p + bytes) resident in memory (mincore), in whole 4 KiB pages */
static size_t resident_bytes(const void *p, size_t bytes)
{
    size_t n = (bytes + 4095) / 4096, in = 0;
    unsigned char *v = malloc(n);
    if (!v || mincore((void *)p, bytes, v) != 0) {
        free(v);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        in += v[i] & 1;
    free(v);
    return in * 4096;
}

/* Out of memory while making pages at creation: the pool is not made and says why. In a child
 * whose address space ends 64 MiB past what it maps now; 1 when it behaved, 0 when not, -1
 * when the check cannot run here (sanitizers and valgrind map memory of their own). */
static int prefault_out_of_memory(const kv_pool_options *base)
{
#if defined(__SANITIZE_ADDRESS__)
    (void)base;
    return -1;
#else
    const char *pre = getenv("LD_PRELOAD");
    if (pre && strstr(pre, "vgpreload"))
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        long pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        if (!f || fscanf(f, "%ld", &pages) != 1)
            _exit(2);
        fclose(f);
        rlim_t cap = (rlim_t)pages * 4096 + ((rlim_t)64 << 20);
        struct rlimit r = {cap, cap};
        if (setrlimit(RLIMIT_AS, &r))
            _exit(2);
        kv_pool_options o = *base;
        size_t pb = kv_page_floats(&o.geo) * 4;
        o.budget_bytes = o.prefault_bytes = pb * 64; /* 256 MiB */
        kv_pool *p;
        kv_error err;
        if (kv_pool_create(&o, &p, &err) == 0)
            _exit(1);
        _exit(err.code == KV_ERR_NOMEM && strstr(err.msg, "to make at start") ? 0 : 1);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) == 2)
        return -1;
    return WEXITSTATUS(st) == 0;
#endif
}

/* prefault_bytes: that many whole pages (at most the budget) made at creation, resident,
 * zero-filled, on the free list and handed out before any new one; the stash makes only what
 * the budget leaves. Pools of small pages and unbounded pools make none; out of memory, the
 * pool is not made. */
static void test_prefault_pages(void)
{
    kv_pool_options o = {.geo = large_page_geo(8, 0), .dtype = KV_DTYPE_F32};
    size_t pb = kv_page_floats(&o.geo) * 4;
    o.budget_bytes = pb * 6;
    o.prefault_bytes = pb * 3 + pb / 2; /* 3 whole pages */
    kv_pool *p;
    kv_error err;
    if (kv_pool_create(&o, &p, &err)) {
        CHECK(0, "prefault: pool: %s", err.msg);
        return;
    }
    kv_stats st;
    kv_pool_stats(p, &st);
    CHECK(st.pages_prefaulted == 3 && p->n_pg == 3 && p->n_free == 3,
          "prefault of 3.5 pages: %ld made (%d pages, %ld free)", st.pages_prefaulted, p->n_pg,
          p->n_free);
    CHECK(st.pages_free == 6 && st.pages_available == 6, "prefault: %ld free, %ld available of 6",
          st.pages_free, st.pages_available);
    void *made[3] = {0};
    for (int i = 0; i < 3 && i < p->n_pg; i++) {
        made[i] = p->pg[i].data;
        CHECK(resident_bytes(made[i], pb) == pb, "made page %d: %zu of %zu bytes resident", i,
              resident_bytes(made[i], pb), pb);
    }
    CHECK(kv_pool_check(p, &err) == 0, "prefault: at creation: %s", err.msg);
    wait_ready(p, 3); /* the stash makes the 3 the budget leaves */
    int32_t id[6];
    for (int i = 0; i < 6; i++) {
        if (kv_page_take(p, 0, &id[i], &err)) {
            CHECK(0, "prefault: take %d: %s", i, err.msg);
            kv_pool_release(p);
            return;
        }
        unsigned char *d = p->pg[id[i]].data;
        int was_made = d == made[0] || d == made[1] || d == made[2];
        CHECK(was_made == (i < 3), "prefault: take %d %s a page made at creation", i,
              was_made ? "got" : "did not get");
        size_t nonzero = 0;
        for (size_t j = 0; j < pb; j++)
            nonzero += d[j] != 0;
        CHECK(nonzero == 0, "prefault: page %d: %zu bytes not zero", i, nonzero);
        memset(d, 0x21 * (i + 1), pb);
    }
    int ready;
    long handed;
    kv_stash_counts(p->stash, &ready, &handed);
    CHECK(ready == 0 && handed == 3, "prefault: %d ready and %ld of 3 taken from the stash", ready,
          handed);
    int32_t extra;
    CHECK(kv_page_take(p, 0, &extra, &err) != 0 && err.code == KV_ERR_FULL,
          "prefault: a 7th page past a budget of 6 was given");
    for (int i = 0; i < 6; i++)
        kv_page_unref(p, id[i]);
    CHECK(kv_pool_check(p, &err) == 0, "prefault: %s", err.msg);
    kv_pool_release(p);

    o.prefault_bytes = pb * 100; /* past the budget: the budget, and nothing left to stash */
    if (kv_pool_create(&o, &p, &err) == 0) {
        kv_pool_stats(p, &st);
        CHECK(st.pages_prefaulted == 6 && p->stash == NULL,
              "prefault past the budget: %ld of 6 made, stash %s", st.pages_prefaulted,
              p->stash ? "running" : "none");
        kv_pool_release(p);
    }
    o.budget_bytes = 0; /* unbounded */
    if (kv_pool_create(&o, &p, &err) == 0) {
        kv_pool_stats(p, &st);
        CHECK(st.pages_prefaulted == 0 && p->n_pg == 0, "an unbounded pool made %ld pages",
              st.pages_prefaulted);
        kv_pool_release(p);
    }
    o.geo = GEO; /* small pages: the allocator's */
    o.budget_bytes = o.prefault_bytes = kv_page_floats(&GEO) * 4 * 6;
    if (kv_pool_create(&o, &p, &err) == 0) {
        kv_pool_stats(p, &st);
        CHECK(st.pages_prefaulted == 0 && p->n_pg == 0, "a pool of %zu-byte pages made %ld",
              p->page_bytes, st.pages_prefaulted);
        kv_pool_release(p);
    }
    o.geo = large_page_geo(8, 0);
    int oom = prefault_out_of_memory(&o);
    if (oom < 0)
        printf("prefault out of memory: not checked here (sanitizer, valgrind or no fork)\n");
    else
        CHECK(oom == 1, "out of memory while making pages at creation: no clear failure");
}

/* An unbounded pool keeps a released page's storage while it holds fewer spare pages than pages
 * in use, hands that storage to the next take, and gives the rest back (kv_pool_check after each
 * step: a spare on the free list has storage, a descriptor without it sits on its own list). */
static void test_unbounded_spares(void)
{
    kv_pool_options o = {.geo = GEO, .dtype = KV_DTYPE_F32}; /* budget 0: unbounded */
    kv_pool *p;
    kv_error err;
    if (kv_pool_create(&o, &p, &err)) {
        CHECK(0, "pool: %s", err.msg);
        return;
    }
    int32_t id[4];
    void *data[4];
    for (int i = 0; i < 4; i++) {
        if (kv_page_take(p, 0, &id[i], &err)) {
            CHECK(0, "take %d: %s", i, err.msg);
            kv_pool_release(p);
            return;
        }
        data[i] = p->pg[id[i]].data;
        memset(data[i], 0x5a, p->page_bytes); /* all of it is the pool's to give */
    }
    /* used 4 -> 3 (0 spare: keep), 3 -> 2 (1: keep), 2 -> 1 (2: give back), 1 -> 0 (give back) */
    for (int i = 0; i < 4; i++) {
        kv_page_unref(p, id[i]);
        CHECK(kv_pool_check(p, &err) == 0, "after release %d: %s", i, err.msg);
    }
    CHECK(p->n_free == 2 && p->n_bare == 2, "spares %ld, without storage %ld: expected 2 and 2",
          p->n_free, p->n_bare);
    int reused = 0;
    for (int i = 0; i < 3; i++) {
        int32_t t;
        if (kv_page_take(p, 0, &t, &err)) {
            CHECK(0, "take again %d: %s", i, err.msg);
            break;
        }
        void *d = p->pg[t].data;
        CHECK(d != NULL, "take again %d: a page without storage", i);
        if (i < 2)
            reused += d == data[0] || d == data[1];
        else
            memset(d, 0x33, p->page_bytes); /* fresh storage is whole */
        CHECK(kv_pool_check(p, &err) == 0, "after take %d: %s", i, err.msg);
        id[i] = t;
    }
    CHECK(reused == 2, "%d of the 2 kept spares were handed out again", reused);
    CHECK(p->n_free == 0 && p->n_bare == 1 && p->n_pg == 4,
          "after 3 takes: spares %ld, without storage %ld, descriptors %d", p->n_free, p->n_bare,
          p->n_pg);
    for (int i = 0; i < 3; i++)
        kv_page_unref(p, id[i]);
    CHECK(kv_pool_check(p, &err) == 0, "at the end: %s", err.msg);
    kv_pool_release(p); /* spares go back here (the ASan and valgrind runs check the leaks) */
}

/* A fresh disk tier under p in dir/name. */
static void attach_disk(kv_pool *p, const char *dir, const char *name, kv_dtype dt)
{
    char path[1024], cmd[2200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", path, path);
    kv_disk_options o = {.dir = path, .fingerprint = 77 + (uint64_t)dt, .queue_slots = 8};
    kv_disk *d;
    kv_error err;
    if (system(cmd) != 0 || kv_disk_open(&o, &GEO, dt, &d, &err) || kv_pool_set_disk(p, d, &err))
        die("disk tier in %s", path);
}

static void report_disk(kv_pool *p, int rounds)
{
    kv_disk *d = kv_pool_disk(p);
    if (!d)
        return;
    kv_disk_flush(d);
    kv_disk_stats st;
    kv_disk_stats_get(d, &st);
    printf("  disk tier: %llu written, %llu dropped, %llu hits, %llu misses, %llu corrupt\n",
           (unsigned long long)st.writes, (unsigned long long)st.dropped,
           (unsigned long long)st.hits, (unsigned long long)st.misses,
           (unsigned long long)st.corrupt);
    CHECK(st.corrupt == 0 && st.write_errors == 0, "disk tier: %llu corrupt, %llu write errors",
          (unsigned long long)st.corrupt, (unsigned long long)st.write_errors);
    if (rounds >= 2000)
        CHECK(st.hits > 0, "churn did not load any page from the disk tier");
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20000;
    const char *disk_dir = argc > 2 ? argv[2] : NULL;
    test_lru_order();
    test_large_buffers();
    test_large_pages();
    test_ready_pages();
    test_prefault_pages();
    test_unbounded_spares();
    for (int r = 0; r < ROOTS; r++)
        for (int i = 0; i < CTX; i++)
            roots[r][i] = rnd(VOCAB);
    for (int dt = 0; dt < 2; dt++) {
        kv_pool_options o = {.geo = GEO,
                             .dtype = dt ? KV_DTYPE_BF16 : KV_DTYPE_F32,
                             .resume_slots = 3};
        kv_error err;
        kv_pool *p;
        o.budget_bytes = kv_page_floats(&GEO) * (dt ? 2 : 4) * 20; /* 20 pages */
        if (kv_pool_create(&o, &p, &err)) {
            fprintf(stderr, "FAIL: pool: %s\n", err.msg);
            return 1;
        }
        if (disk_dir)
            attach_disk(p, disk_dir, dt ? "bf16" : "f32", o.dtype);
        for (int it = 0; it < rounds; it++) {
            if (it % 2000 == 1000) /* forced collisions for a while */
                kv_pool_set_hash_bits(p, 2);
            else if (it % 2000 == 0)
                kv_pool_set_hash_bits(p, 0);
            int op = rnd(10);
            if (op < 2 || n_live == 0)
                op_new(p);
            else if (op < 8)
                op_step(rnd(n_live));
            else if (op < 9)
                op_clone(rnd(n_live));
            else
                drop(rnd(n_live), rnd(2));
            verify_all(p, "after an operation");
            if (failures)
                break;
        }
        kv_stats st;
        kv_pool_stats(p, &st);
        printf("%s pool: %d rounds: %llu hits, %llu misses, %llu evictions, %llu resumes, "
               "%llu tokens not recomputed\n",
               dt ? "bf16" : "f32", rounds, (unsigned long long)st.hits,
               (unsigned long long)st.misses, (unsigned long long)st.evictions,
               (unsigned long long)st.resumes, (unsigned long long)st.resumed_tokens);
        if (rounds >= 2000)
            CHECK(st.hits > 0 && st.evictions > 0 && st.resumes > 0,
                  "churn did not exercise hits, evictions and resumes");
        report_disk(p, rounds);
        while (n_live)
            drop(n_live - 1, rnd(2));
        verify_all(p, "at the end");
        CHECK(p->n_used == 0 && p->n_reserved == 0, "pages left used or reserved");
        kv_pool_release(p);
    }
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
