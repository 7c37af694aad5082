/*
 * kvstate.h — state memory for MHLA sequences (kvstate/README.md): a pool of fixed-size
 * pages, one page holding one finished block's summaries for every layer and
 * kv head; per-sequence state (page table, mixed prefix, the current block's
 * raw rows, token history); an exact prefix cache; a resume store; snapshots.
 *
 * The module knows nothing of the model: the engine passes the geometry as
 * plain numbers and decides what the floats in a page mean. Pages are
 * reference-counted and shared; a page is written once, by the sequence that
 * allocated it, before it is published to the prefix cache, and is immutable
 * afterwards.
 *
 * Not thread-safe: the pool is changed only between forward passes (the
 * engine's parallel token mixer reads pages and writes only pages and
 * buffers that belong to one sequence).
 *
 * Every function that can fail returns 0 (or a count) on success and -1 with
 * a one-line message in *err naming the cause.
 */
#ifndef MHLA_KVSTATE_H
#define MHLA_KVSTATE_H

#include <stddef.h>
#include <stdint.h>

/* The kind of a failure (engine.h maps it onto mhla_status one to one). */
typedef enum {
    KV_OK = 0,
    KV_ERR_INVALID,  /* a bad argument or file */
    KV_ERR_FULL,     /* the pool's budget cannot hold it now */
    KV_ERR_NOMEM,    /* malloc failed */
    KV_ERR_IO,       /* a snapshot file could not be read or written */
    KV_ERR_INTERNAL, /* an invariant check failed */
} kv_status;

typedef struct {
    char msg[512];
    kv_status code;
} kv_error;

typedef enum {
    KV_DTYPE_F32 = 0,
    KV_DTYPE_BF16 = 1, /* pages only; rounded to nearest even when stored */
} kv_dtype;

/* The shape of one sequence's state. A page holds layers * kv_heads blocks of
 * dk*dv values, then (with key_sums) layers * kv_heads vectors of dk. */
typedef struct {
    int layers;
    int kv_heads;
    int dk;
    int dv;
    int block_tokens; /* C */
    int max_blocks;   /* Lm: a sequence holds at most this many pages */
    int key_sums;     /* 1: pages also hold per-head key sums */
} kv_geometry;

/* Where page storage and a sequence's buffers live. NULL in the pool options:
 * host memory (malloc). A device backend passes its allocator; kvstate then
 * never dereferences that memory itself and moves bytes only through copy. */
typedef enum {
    KV_COPY_TO_HOST = 0,   /* dst host, src in this memory */
    KV_COPY_FROM_HOST = 1, /* dst in this memory, src host */
    KV_COPY_WITHIN = 2,    /* both in this memory */
} kv_copy_dir;

typedef struct {
    void *ctx;
    /* Zero-filled storage, or NULL when out of memory. */
    void *(*alloc)(void *ctx, size_t bytes);
    /* The same for a sequence's P_i and current-block rows, which the token
     * mixer reads whole every step (host memory: huge pages); released with
     * release. NULL: alloc. */
    void *(*alloc_swept)(void *ctx, size_t bytes);
    void (*release)(void *ctx, void *p);
    /* Storage for one state page (bytes = the pool's page size), or NULL. It
     * need not be zero-filled: a page is wholly written before it is read.
     * Host memory maps it with its pages already faulted in, at one system
     * call instead of one fault per 4 KiB page as the block closes. NULL:
     * alloc and release serve. */
    void *(*alloc_page)(void *ctx, size_t bytes);
    void (*release_page)(void *ctx, void *p, size_t bytes);
    /* Returns 0, or -1 when the copy failed. */
    int (*copy)(void *ctx, void *dst, const void *src, size_t bytes, kv_copy_dir dir);
} kv_memory;

typedef struct {
    kv_geometry geo;
    kv_dtype dtype;
    const kv_memory *memory; /* copied; NULL: host memory */
    /* Bytes of page storage. 0: unbounded, pages are made on demand and there
     * is no prefix cache; a released page's storage is kept for the next take
     * while the pool keeps fewer spare pages than it has pages in use, and
     * given back otherwise. > 0: at most
     * budget / page_bytes pages; released pages are kept (free list or prefix
     * cache) and reused. */
    size_t budget_bytes;
    /* Bytes of pages made at creation, faulted in, onto the free list (at most the budget):
     * what a fresh pool would otherwise make in its first steps. Only a bounded pool in host
     * memory whose pages are 2 MiB or more makes them (smaller pages come from the
     * allocator's reused blocks, device memory has its own); others ignore it. */
    size_t prefault_bytes;
    /* End states of finished sequences kept for resume (0: none). */
    int resume_slots;
} kv_pool_options;

typedef struct kv_pool kv_pool;
typedef struct kv_seq kv_seq;

/* Counters for admission and /metrics. */
typedef struct {
    size_t page_bytes;
    long pages_total;        /* capacity (pages created so far, when unbounded) */
    long pages_used;         /* referenced by at least one sequence */
    long pages_cached;       /* unreferenced, kept by the prefix cache, evictable */
    long pages_free;         /* on the free list */
    long pages_reserved;     /* promised to admitted sequences, not yet taken */
    long pages_available;    /* what a new reservation can still get */
    uint64_t hits;           /* blocks served by the prefix cache */
    uint64_t misses;         /* lookups that found no (further) block */
    uint64_t evictions;      /* cached pages dropped to make room */
    uint64_t resumed_tokens; /* tokens skipped by prefix hits and resumes */
    uint64_t resumes;        /* lookups served from the resume store */
    long pages_prefaulted;   /* pages made at creation (kv_pool_options.prefault_bytes) */
    double prefault_seconds; /* and the time that took */
} kv_stats;

/* ---- pool ------------------------------------------------------------------ */

int kv_pool_create(const kv_pool_options *opt, kv_pool **out, kv_error *err);
/* Drops the creator's hold: the pool goes away once its last sequence does. */
void kv_pool_release(kv_pool *pool);
void kv_pool_stats(const kv_pool *pool, kv_stats *out);
size_t kv_pool_page_bytes(const kv_pool *pool);
size_t kv_page_floats(const kv_geometry *geo);
kv_dtype kv_pool_dtype(const kv_pool *pool);
/* Test hook: keep only the low `bits` bits of every prefix key (0: all 64),
 * so that different prefixes collide. Clears the prefix cache. */
void kv_pool_set_hash_bits(kv_pool *pool, int bits);
/* Checks every invariant (counts, lists, refcounts, index); for tests. */
int kv_pool_check(const kv_pool *pool, kv_error *err);
/* Worst-case pages a sequence needs to reach n_positions. */
int kv_pages_needed(const kv_geometry *geo, long n_positions);

/* ---- per-sequence state ---------------------------------------------------- */

/* The float buffers a sequence owns; the engine's token mixer works in them.
 * They live in the pool's memory (kv_pool_options.memory). */
typedef struct {
    float *prefix;   /* P_i: [layers][kv_heads][dk*dv] */
    float *prefix_k; /* [layers][kv_heads][dk], or NULL without key_sums */
    float *cur_k;    /* current block's rows: [layers][kv_heads][C][dk] */
    float *cur_v;    /* [layers][kv_heads][C][dv] */
} kv_seq_bufs;

int kv_seq_create(kv_pool *pool, kv_seq **out, kv_error *err);
/* A copy that continues exactly as the original would; pages are shared. */
int kv_seq_clone(const kv_seq *src, kv_seq **out, kv_error *err);
/* Releases its pages and reservation. */
void kv_seq_free(kv_seq *seq);
/* Keeps the sequence's end state in the resume store (when the pool has
 * one), then frees it. */
void kv_seq_finish(kv_seq *seq);
kv_pool *kv_seq_pool(const kv_seq *seq);
int kv_seq_pos(const kv_seq *seq);
const int32_t *kv_seq_tokens(const kv_seq *seq);
kv_seq_bufs kv_seq_buffers(const kv_seq *seq);
int kv_seq_n_pages(const kv_seq *seq);
/* Storage of page b (< kv_seq_n_pages), in the pool's dtype and memory. */
void *kv_seq_page(const kv_seq *seq, int b);
/* Bytes the sequence holds: its pages (shared ones counted whole) and buffers. */
size_t kv_seq_bytes(const kv_seq *seq);

/* Admission: makes sure the sequence can reach n_positions without a page
 * allocation failing (the reservation is consumed as pages are taken and
 * returned when the sequence is freed). Fails, changing nothing, when the
 * pool cannot promise it. */
int kv_seq_reserve(kv_seq *seq, long n_positions, kv_error *err);
/* Makes sure pages exist for blocks [0, n_blocks); called before a forward
 * pass so that the pass itself never fails. */
int kv_seq_ensure_pages(kv_seq *seq, int n_blocks, kv_error *err);
/* Records n tokens the engine has just computed: appends them to the
 * history, advances the position and publishes every block they closed to
 * the prefix cache (or swaps in an identical cached page). Never fails. */
void kv_seq_advance(kv_seq *seq, const int32_t *tokens, int n);
/* Takes back the tokens after pos, all of them in the open block: the
 * state is then what feeding tokens[0..pos) gives (rows past pos are never
 * read, and the next tokens overwrite them). Refused, changing nothing,
 * when a block closed after pos (its page may be published) or pos is not
 * behind the position. */
int kv_seq_rewind(kv_seq *seq, int pos, kv_error *err);

/* Rolling back a verify step (docs/architecture.md, "Rolling back drafted
 * tokens"): the floats kv_seq_rows_save needs for the current block's first
 * r rows; a copy of them (k~ then v per layer and kv head) to host memory
 * dst before a step overwrites them, and back afterwards. */
size_t kv_seq_rows_floats(const kv_seq *seq, int r);
int kv_seq_rows_save(const kv_seq *seq, int r, float *dst, kv_error *err);
int kv_seq_rows_restore(kv_seq *seq, int r, const float *src, kv_error *err);

/* A spare P_i (and key sums) in a pool's memory: saved before a verify step
 * replaces it, put back when the step's drafts are taken back. A copy holds
 * its pool; it serves any sequence of that pool. */
typedef struct kv_prefix_copy kv_prefix_copy;
int kv_prefix_copy_create(kv_pool *pool, kv_prefix_copy **out, kv_error *err);
void kv_prefix_copy_free(kv_prefix_copy *c);
kv_pool *kv_prefix_copy_pool(const kv_prefix_copy *c);
int kv_seq_prefix_save(const kv_seq *seq, kv_prefix_copy *c, kv_error *err);
int kv_seq_prefix_restore(kv_seq *seq, const kv_prefix_copy *c, kv_error *err);

/* For a fresh sequence (position 0): attaches the longest state the pool
 * holds for a prefix of tokens[0..n), never more than n - 1 tokens so that at
 * least one token is left to compute. Whole blocks come from the prefix
 * cache; a resume entry may add the rows of a partial block. Returns the new
 * position (0: nothing matched). When it ends mid-block, the caller must
 * recompute the mixed prefix P_i from the pages. */
int kv_seq_match(kv_seq *seq, const int32_t *tokens, int n, kv_error *err);
/* kv_seq_match in two halves, so that disk reads do not hold the caller:
 * attaches the blocks memory holds now; when the disk tier has files for
 * the next ones it takes pages for them (from the sequence's reservation,
 * else what the pool can spare) and has the tier's loader thread read them.
 * Returns the position matched so far; while kv_seq_loading the sequence
 * must not be fed or cloned (kv_seq_reserve counts its loading pages as
 * held; kv_seq_free stops the load). */
int kv_seq_match_start(kv_seq *seq, const int32_t *tokens, int n, kv_error *err);
int kv_seq_loading(const kv_seq *seq);
/* The load's end: KV_STILL_LOADING while it runs (without wait); else the
 * blocks read and verified are attached (the pages of those from the first
 * missing or bad file on stay promised to the sequence, which recomputes
 * them), then a resume entry's rows, and the position is returned. */
#define KV_STILL_LOADING (-2)
int kv_seq_match_poll(kv_seq *seq, int wait);

/* ---- snapshots --------------------------------------------------------------- */

/* Writes the sequence's state (tokens, pages, current block rows) to path:
 * a versioned header, the caller's model fingerprint, the geometry, the
 * data, and a checksum over everything. */
int kv_seq_save(const kv_seq *seq, uint64_t fingerprint, const char *path, kv_error *err);
/* Loads a snapshot into a fresh sequence. Refused with a message: a missing,
 * truncated or corrupt file (checksum), another version, another
 * fingerprint, geometry or dtype. The mixed prefix is not stored: when the
 * position is mid-block the caller recomputes it from the pages. */
int kv_seq_load(kv_seq *seq, uint64_t fingerprint, const char *path, kv_error *err);

/* ---- page values ------------------------------------------------------------- */

/* dst[0..n) = the f32 values of page storage src[off .. off+n). */
void kv_page_read(kv_dtype dtype, const void *src, size_t off, float *dst, size_t n);
/* page storage dst[off .. off+n) = src[0..n), rounded when dtype is bf16. */
void kv_page_write(kv_dtype dtype, void *dst, size_t off, const float *src, size_t n);

/* FNV-1a over bytes, continuing from h (start with KV_FNV_SEED). */
#define KV_FNV_SEED 14695981039346656037ull
uint64_t kv_fnv1a(uint64_t h, const void *data, size_t n);

/* ---- disk tier ----------------------------------------------------------------- */

/*
 * Finished blocks' pages in files under a directory, below the prefix cache
 * (kvstate/README.md, Disk tier). A page is written when it enters the prefix
 * cache (by a background thread, straight from the page, which the pool
 * keeps from reuse until it is written; a device's pages from a copy) and
 * read back when a prefix match misses memory. A file names the model fingerprint,
 * the unmasked prefix key and the token count; it holds a header (format
 * version, fingerprint, geometry, dtype, the token ids it covers), the page
 * and an XXH3-64 checksum of everything before it. Files are written to a
 * temporary name, synced, renamed and the directory synced, so a reader only
 * ever opens complete files; anything that fails a check is counted,
 * removed, and the page recomputed. Write errors (disk full, read-only
 * directory) are counted and the last one kept for the caller's log; they
 * never fail a request. The directory may be shared by processes.
 */
typedef struct kv_disk kv_disk;

typedef struct {
    const char *dir;      /* created when missing (parents must exist) */
    uint64_t max_bytes;   /* files kept, least recently used dropped past it; 0: no limit */
    uint64_t fingerprint; /* model, weight format, device: whose bits the pages are */
    int queue_slots;      /* pages waiting to be written; 0: from the page size */
    int sync_each;        /* 1: sync and place each file on its own; 0: a batch of the
                           * files waiting at once, one directory sync for them all */
} kv_disk_options;

typedef struct {
    uint64_t hits;          /* pages loaded from a valid file */
    uint64_t misses;        /* lookups that found no file */
    uint64_t bytes_read;    /* bytes of files loaded */
    uint64_t bytes_written; /* bytes of files written */
    uint64_t load_ns;       /* time spent loading */
    uint64_t writes;        /* files written */
    uint64_t corrupt;       /* files refused and removed: truncated, checksum, foreign, stale */
    uint64_t write_errors;  /* writes that failed (disk full, unwritable directory) */
    uint64_t dropped;       /* pages not written: the queue was full */
    uint64_t copied;        /* pages copied for the writer rather than written from the
                             * pool's pinned page (device memory, or evicted early) */
    uint64_t evictions;     /* files removed for the size limit */
    uint64_t bytes;         /* the directory's page files, as last counted */
    char last_error[256];   /* the latest write error, "" when none */
} kv_disk_stats;

/* Fault injection for tests: makes writes fail as named. */
typedef enum {
    KV_DISK_FAULT_NONE = 0,
    KV_DISK_FAULT_ENOSPC = 1,   /* half the file is written, then ENOSPC (the temp is removed) */
    KV_DISK_FAULT_TORN = 2,     /* half the temp is written and left, as a kill -9 would */
    KV_DISK_FAULT_READONLY = 3, /* creating the temp fails with EROFS (a root process
                                 * writes through chmod, not through a read-only mount) */
    KV_DISK_FAULT_HOLD = 4,     /* the writer waits before each batch of writes, the
                                 * loader before each block it reads, until the fault
                                 * changes: a full queue, a slow load, deterministically */
} kv_disk_fault;

/* Opens (creating) the directory and starts the writer thread. An
 * unwritable directory is not an error (reads still work; writes count
 * errors); a directory that cannot be made or read is. */
int kv_disk_open(const kv_disk_options *opt, const kv_geometry *geo, kv_dtype dtype, kv_disk **out,
                 kv_error *err);
/* Writes what is queued, stops the thread, frees. */
void kv_disk_close(kv_disk *disk);
void kv_disk_stats_get(kv_disk *disk, kv_disk_stats *out);
void kv_disk_set_fault(kv_disk *disk, kv_disk_fault fault);
/* Waits until the queue is empty and nothing is being written. */
void kv_disk_flush(kv_disk *disk);
/* The file of a page: dir/<fingerprint>-<key>-<n_tokens>.kvp. */
int kv_disk_path(const kv_disk *disk, uint64_t key, int n_tokens, char *buf, size_t len);
/* Writes one page now, on the caller's thread (page in host memory). */
int kv_disk_put(kv_disk *disk, uint64_t key, const int32_t *tokens, int n_tokens, const void *page,
                kv_error *err);
/* Reads the page of exactly tokens[0, n_tokens) into page (host memory).
 * 1: loaded; 0: no valid file (a bad one is counted and removed; err says
 * why when there was one); -1 only for bad arguments. */
int kv_disk_get(kv_disk *disk, uint64_t key, const int32_t *tokens, int n_tokens, void *page,
                kv_error *err);
/* The pool takes the tier (and closes it with itself): closed blocks are
 * written behind, prefix matches that miss memory read from it. A pool
 * without a budget has no prefix cache and refuses it. */
int kv_pool_set_disk(kv_pool *pool, kv_disk *disk, kv_error *err);
kv_disk *kv_pool_disk(const kv_pool *pool);

/* XXH3-64 of data, seeded (fingerprints, checksums). */
uint64_t kv_hash64(uint64_t seed, const void *data, size_t n);

#endif
