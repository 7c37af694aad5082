/*
 * disk.h — what the disk tier's files share (disk_*.c, pool_disk.c). Other
 * modules see the tier through kvstate.h only.
 */
#ifndef MHLA_KVSTATE_DISK_H
#define MHLA_KVSTATE_DISK_H

#include "kvstate_internal.h"

#include <pthread.h>
#include <stdatomic.h>

#define KVD_MAGIC "MHLAKVPG"
#define KVD_VERSION 1u
#define KVD_SUFFIX ".kvp"
#define KVD_TMP_PREFIX ".tmp-"

/* The file's first bytes (native byte order, little-endian on every
 * supported machine). Tokens, the page and the checksum follow. */
typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t dtype;
    uint64_t fingerprint;
    uint64_t key; /* the unmasked prefix key of the block */
    int32_t geo[7];
    int32_t n_tokens;
    uint64_t page_bytes;
} kvd_header;

enum { SLOT_FREE = 0, SLOT_FILLING, SLOT_PENDING, SLOT_WRITING };

/* One page waiting for the writer. Host pages are written from the pool's
 * own storage, pinned (the pool's pin flag set) until the file is placed: a
 * page is immutable while indexed, and the pool evicts a pinned page only
 * after kvd_unpin. Pages in a device's memory (and pages the pool evicts
 * before they were queued) are copied into the slot's buffer instead. */
typedef struct {
    int state;
    uint64_t order; /* written oldest first */
    uint64_t key;
    int n_tokens, tokens_cap;
    int32_t *tokens;
    const void *page; /* what the writer writes: the pinned page or copy */
    void *copy;       /* page_bytes, host memory, kept for the slot's next copy */
    atomic_int *pin;  /* the pinned page's flag, cleared once written; NULL: a copy */
} kvd_slot;

enum { LOAD_QUEUED = 0, LOAD_RUNNING, LOAD_DONE };

/* One sequence's blocks read from the tier by the loader thread, straight
 * into pages the sequence holds (taken, not yet indexed: nobody else reads
 * or reuses them until the engine thread attaches them). */
typedef struct kvd_load {
    int state;           /* under the tier's lock */
    atomic_int cancel;   /* the sequence is going away: stop between blocks */
    int first, n_blocks; /* the blocks [first, first + n_blocks) of the prompt */
    int n_read;          /* the loader's: blocks read and verified, from first on */
    int limit;           /* the match's last position; tokens[0, limit) kept */
    int block_tokens;
    const kv_pool *pool; /* its memory hooks: the loader populates the pages */
    int32_t *tokens;
    uint64_t *keys; /* [n_blocks] unmasked prefix keys */
    void **pages;   /* [n_blocks] host storage of the sequence's pages */
    struct kvd_load *next;
} kvd_load;

struct kv_disk {
    char *dir;
    int dir_fd;
    uint64_t max_bytes, fingerprint;
    kv_geometry geo;
    kv_dtype dtype;
    size_t page_bytes;
    pthread_mutex_t mu; /* the slots, the counters */
    pthread_cond_t work, idle;
    kvd_slot *slots;
    kvd_slot **batch;       /* the writer's: the slots it writes now */
    struct kvd_temp *temps; /* the writer's: their temporaries */
    int n_slots, pending, busy, stop, started;
    uint64_t next_order;
    pthread_t thread;
    /* the loader thread: its queue and stop flag (under mu) */
    pthread_cond_t load_work, load_done;
    kvd_load *load_head, *load_tail;
    int load_stop, load_started;
    pthread_t load_thread;
    atomic_int fault;
    atomic_ulong tmp_counter;
    uint64_t tmp_id; /* random: temporaries of writers in other processes differ */
    int sync_each;   /* kv_disk_options.sync_each */
    kv_disk_stats st;
};

/* A page's file written under a temporary name, still open. */
typedef struct kvd_temp {
    int fd;
    char tmp[160], name[96];
} kvd_temp;

/* ---- disk_format.c ---- */
void kvd_header_fill(const kv_disk *d, uint64_t key, int n_tokens, kvd_header *h);
/* 0 when h is a header this tier wrote for exactly (key, n_tokens); else -1
 * and why in err (another format version, model, layout, key). */
int kvd_header_check(const kv_disk *d, const kvd_header *h, uint64_t key, int n_tokens,
                     kv_error *err);
/* Bytes of the file of a block of n_tokens tokens. */
uint64_t kvd_file_bytes(const kv_disk *d, int n_tokens);

/* ---- disk_file.c ---- */
/* Writes the file atomically (temporary, fsync, rename, fsync of the
 * directory). 1: written; 0: another writer's file was already there; -1
 * with err. */
int kvd_write(kv_disk *d, uint64_t key, const int32_t *tokens, int n_tokens, const void *page,
              kv_error *err);
/* kvd_write in steps, for a batch: the temporary written (not synced)... */
int kvd_temp_write(kv_disk *d, uint64_t key, const int32_t *tokens, int n_tokens, const void *page,
                   kvd_temp *t, kv_error *err);
/* ...then synced, closed and placed (1, 0 or -1 as kvd_write), then the
 * directory synced once for the batch. */
int kvd_temp_place(kv_disk *d, kvd_temp *t, kv_error *err);
void kvd_sync_dir(kv_disk *d);
/* 1: the page is in page; 0: no file; -1: a bad file (removed, counted by
 * the caller) with err; -2: a valid file for other tokens (a key collision:
 * left alone). */
int kvd_read(kv_disk *d, uint64_t key, const int32_t *tokens, int n_tokens, void *page,
             kv_error *err);

/* ---- disk_lru.c ---- */
/* Counts the page files (st.bytes) and removes stale temporaries. */
void kvd_scan(kv_disk *d);
/* After a write of bytes: past max_bytes, removes the least recently used
 * files until a tenth below it. */
void kvd_account_write(kv_disk *d, uint64_t bytes);

/* ---- disk_writer.c ---- */
int kvd_writer_start(kv_disk *d, kv_error *err);
void kvd_writer_stop(kv_disk *d);
/* A free slot holding a copy of the tokens, its page still to be set by
 * the caller (kvd_slot_pin, or a copy into s->copy after kvd_slot_copy_room);
 * NULL (counted as dropped) when none is free. */
kvd_slot *kvd_slot_take(kv_disk *d, uint64_t key, const int32_t *tokens, int n_tokens);
/* The slot writes page itself and clears *pin once the file is placed. */
void kvd_slot_pin(kvd_slot *s, const void *page, atomic_int *pin);
/* s->copy ready for a page: 0, or -1 out of memory. */
int kvd_slot_copy_room(kv_disk *d, kvd_slot *s);
void kvd_slot_submit(kv_disk *d, kvd_slot *s);
void kvd_slot_cancel(kv_disk *d, kvd_slot *s);
/* Returns with *pin clear: a page still waiting is copied into its slot
 * (the writer then writes the copy), one being written is waited for. For
 * the pool, before it reuses a pinned page. */
void kvd_unpin(kv_disk *d, atomic_int *pin);

/* ---- disk_loader.c ---- */
int kvd_loader_start(kv_disk *d, kv_error *err);
void kvd_loader_stop(kv_disk *d);
void kvd_load_submit(kv_disk *d, kvd_load *l);
/* 1 when the load is done (wait: after waiting for it), else 0. */
int kvd_load_done(kv_disk *d, kvd_load *l, int wait);
/* Returns once the loader no longer touches l (a queued load never starts). */
void kvd_load_cancel(kv_disk *d, kvd_load *l);

/* ---- disk_tier.c ---- */
/* Counts under the lock. */
void kvd_count(kv_disk *d, uint64_t *counter, uint64_t n);
void kvd_note_error(kv_disk *d, const char *msg);
/* The block's file name (no directory). */
void kvd_name(const kv_disk *d, uint64_t key, int n_tokens, char *buf, size_t len);
/* Whether the block's file exists (a stat, no checks). */
int kvd_exists(const kv_disk *d, uint64_t key, int n_tokens);
uint64_t kvd_now_ns(void);

#endif
