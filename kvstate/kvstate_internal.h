/*
 * kvstate_internal.h — what kvstate's own files share. Other modules include
 * kvstate.h only.
 */
#ifndef MHLA_KVSTATE_INTERNAL_H
#define MHLA_KVSTATE_INTERNAL_H

#include "kvstate.h"

#include <stdarg.h>
#include <stdatomic.h>

int kv_fail(kv_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with a code other than KV_ERR_INVALID. */
int kv_fail_as(kv_error *err, kv_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

enum { PG_FREE = 0, PG_USED = 1, PG_CACHED = 2 };

/* One page. A page is on exactly one of: the free list (PG_FREE), some
 * sequences' tables (PG_USED, refs > 0), the LRU list of evictable cached
 * pages (PG_CACHED, refs == 0, indexed). Indexed pages (USED or CACHED) also
 * sit on a hash chain and keep the whole token prefix they summarise, which
 * is compared on every hit: a key collision can never serve another
 * prefix's state. */
typedef struct {
    void *data;      /* page_bytes of summaries */
    int32_t *tokens; /* the token prefix [0, n_tokens) when indexed */
    int n_tokens;
    int tokens_cap; /* ints tokens can hold (grown on demand, kept for reuse) */
    int state;
    int indexed;
    int32_t refs;
    uint64_t key;       /* masked prefix key */
    uint64_t full_key;  /* the unmasked one: the disk tier's file name */
    int on_disk;        /* written or queued to the disk tier, or loaded from it */
    atomic_int pinned;  /* the disk tier's writer still reads data (pool_disk.c) */
    int32_t hnext;      /* hash chain */
    int32_t prev, next; /* LRU list (CACHED) or free list (FREE, next only) */
} kv_page_desc;

/* The end state of a finished sequence that stopped mid-block. */
typedef struct {
    int pos; /* 0: empty slot */
    int32_t *tokens;
    float *rows; /* packed current-block rows, see kv_rows_pack */
    uint64_t last_used;
} kv_resume_entry;

struct kv_pool {
    kv_pool_options opt;
    kv_memory mem; /* opt.memory, or the host's */
    size_t page_floats, page_bytes;
    int holders; /* the creator plus every live sequence */
    int bounded;
    kv_page_desc *pg;
    int n_pg, cap_pg;
    long max_pages;
    int32_t free_head;          /* free pages with storage */
    int32_t bare_head;          /* free descriptors without storage (unbounded pools only) */
    int32_t lru_head, lru_tail; /* head: least recently used */
    int32_t *buckets;
    uint64_t n_buckets; /* power of two */
    long n_used, n_cached, n_free, n_bare, n_reserved;
    uint64_t hash_mask;
    kv_stats ctr; /* hits, misses, evictions, resumed_tokens, resumes */
    kv_resume_entry *resume;
    uint64_t clock;
    kv_disk *disk;          /* the tier under the prefix cache, or NULL */
    void *disk_stage;       /* a page in host memory, for a pool in device memory */
    struct kv_stash *stash; /* new pages faulted in ahead, or NULL (page_stash.c) */
};

struct kv_seq {
    kv_pool *pool;
    int pos;
    int n_pages;
    long reserved;         /* pages promised to this sequence, not yet taken */
    int loaded;            /* state came from a snapshot: never shared (see snapshot.c) */
    int32_t *tokens;       /* [max_blocks * C] */
    int32_t *table;        /* [max_blocks] page ids */
    uint64_t *keys;        /* [max_blocks] unmasked prefix key of each closed block */
    struct kvd_load *load; /* blocks the disk tier's loader is reading (pool_disk.c) */
    kv_seq_bufs b;
};

/* ---- memory.c: storage in the pool's memory ---- */
void kv_memory_host(kv_memory *m);
void *kv_mem_alloc(const kv_pool *p, size_t bytes);
/* One page's storage (page_bytes, not zero-filled), and its release (NULL is fine). */
void *kv_mem_alloc_page(const kv_pool *p);
void kv_mem_release_page(const kv_pool *p, void *ptr);
/* The same storage left to fault in where it is first written (host pages from 2 MiB
 * on; otherwise kv_mem_alloc_page), and its faulting in, done on another thread: the
 * disk tier's loader populates the pages it reads into, not the engine thread. Both
 * only read the pool's memory hooks and page size, which never change. */
void *kv_mem_alloc_page_unpopulated(const kv_pool *p);
void kv_mem_populate_page(const kv_pool *p, void *ptr);
/* Piece k (2 MiB) of that: 1 when there was one to fault in, 0 past the page's end. */
int kv_mem_populate_piece(const kv_pool *p, void *ptr, int k);
/* 1 where faulting in a new page is slow enough to do ahead (host pages from 2 MiB on) */
int kv_mem_page_slow(const kv_pool *p);
/* the same, for buffers swept every step: the memory's alloc_swept where it has one */
void *kv_mem_alloc_swept(const kv_pool *p, size_t bytes);
void kv_mem_release(const kv_pool *p, void *ptr);
int kv_mem_copy(const kv_pool *p, void *dst, const void *src, size_t bytes, kv_copy_dir dir);

/* ---- page_stash.c: new pages faulted in ahead, on a thread of its own ---- */
typedef struct kv_stash kv_stash;
/* A stash for p, which may make limit pages in all; NULL where p's pages are
 * not slow to make, MHLA_STATE_READY_PAGES is 0, or the thread cannot start
 * (the pool then makes each page when it needs it). */
kv_stash *kv_stash_start(const kv_pool *p, long limit);
/* A ready page for the pool's next new one, or NULL (make it now); either
 * way counted as made, until kv_stash_untake when making it failed. */
void *kv_stash_take(kv_stash *s);
void kv_stash_untake(kv_stash *s);
/* Pages ready now, and pages the pool took ready so far (tests). */
void kv_stash_counts(kv_stash *s, int *ready, long *handed);
/* Stops the thread and frees the pages still ready (NULL is fine). */
void kv_stash_stop(kv_stash *s);

/* ---- pool.c ---- */
long kv_pool_available(const kv_pool *p);
/* Takes a fresh page (refs 1); from the caller's reservation when
 * from_reservation, else only when the pool can spare one beyond all
 * reservations. */
int kv_page_take(kv_pool *p, int from_reservation, int32_t *out, kv_error *err);
/* The same, a page new to the pool left unpopulated (kv_mem_alloc_page_unpopulated). */
int kv_page_take_unpopulated(kv_pool *p, int from_reservation, int32_t *out, kv_error *err);
/* Adds a reference to an indexed page (a cached one becomes used). */
void kv_page_ref(kv_pool *p, int32_t id);
void kv_page_unref(kv_pool *p, int32_t id);

/* ---- prefix_index.c ---- */
uint64_t kv_block_key(uint64_t prev_key, const int32_t *block, int n);
/* The indexed page summarising exactly tokens[0, n_tokens), or -1. */
int32_t kv_index_find(const kv_pool *p, uint64_t key, const int32_t *tokens, int n_tokens);
/* Fails (leaving the page unindexed) only when out of memory for the tokens. */
int kv_index_insert(kv_pool *p, int32_t id, uint64_t key, const int32_t *tokens, int n_tokens);
void kv_index_remove(kv_pool *p, int32_t id);

/* ---- rows.c: the current block's first r rows of every (layer, head) ---- */
size_t kv_rows_floats(const kv_geometry *g, int r);
/* dst (host) = the rows; 0, or -1 when the pool's memory failed to copy. */
int kv_rows_pack(const kv_pool *p, const kv_seq_bufs *b, int r, float *dst);
int kv_rows_unpack(const kv_pool *p, const float *src, int r, kv_seq_bufs *b);

/* ---- resume.c ---- */
void kv_resume_free_all(kv_pool *p);
void kv_resume_keep(kv_pool *p, const kv_seq *s);
/* The longest entry with pos <= limit, exactly n_blocks whole blocks (the
 * ones the caller matched) and tokens that prefix `tokens`, or NULL. */
kv_resume_entry *kv_resume_find(kv_pool *p, const int32_t *tokens, int limit, int n_blocks);

/* ---- seq_pages.c ---- */
/* Computes the prefix keys of blocks [first, last) of s and, with index,
 * publishes their pages (which must be written) to the prefix cache. */
void kv_seq_publish_blocks(kv_seq *s, int first, int last, int index);

/* ---- pool_disk.c ---- */
/* Queues indexed page id for the disk tier unless it is there already:
 * pinned (written from the page itself), or, when evicting or in a device's
 * memory, copied. */
void kv_disk_offer(kv_pool *p, int32_t id, int evicting);
/* Before page id is reused or its storage freed: the writer no longer
 * reads it (a queued page is copied, one being written waited for). */
void kv_disk_unpin(kv_pool *p, int32_t id);
/* For a match that missed memory at the block of tokens[0, n_tokens): a
 * page loaded from the tier, indexed and held by s (from its reservation
 * first), or -1. */
int32_t kv_disk_load_block(kv_pool *p, kv_seq *s, uint64_t key, const int32_t *tokens,
                           int n_tokens);
/* 1 when the pool's pages can be read into by the tier's loader thread
 * (host memory); a device's pool loads with kv_disk_load_block. */
int kv_disk_async(const kv_pool *p);
/* After nb matched blocks of tokens[0, limit): takes a page for each
 * further block the tier has a file for and queues their read (s->load).
 * The blocks queued; 0: none (nothing started). */
int kv_disk_load_start(kv_seq *s, const int32_t *tokens, int limit, int nb);
int kv_disk_load_ready(kv_seq *s, int wait);
/* A finished load: the blocks read and verified are indexed and attached,
 * the pages of the rest given back to s's reservation; s->load is freed.
 * Returns the load's tokens (the caller frees them) and its limit. */
int32_t *kv_disk_load_finish(kv_seq *s, int *limit);
/* s goes away: the load is stopped (waited for when running) and freed. */
void kv_disk_load_drop(kv_seq *s);

#endif
