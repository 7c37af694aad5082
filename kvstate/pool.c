/*
 * pool.c — the page pool: O(1) take and release through a free list,
 * reference counts, LRU eviction of unreferenced cached pages, reservations
 * for admission, and the accounting that kv_pool_check verifies.
 *
 * A bounded pool creates page storage lazily, up to budget / page_bytes
 * pages, and never returns it: after warm-up, taking a page allocates
 * nothing; before, large pages are made at creation (prefault) or faulted
 * in ahead (page_stash.c). An unbounded pool makes pages
 * on demand and keeps a released page's storage for the next take while it holds fewer spare pages
 * than pages in use (so at most twice what is in use, and a block closing in a batch of growing
 * sequences takes storage a finished one left instead of fresh memory); past that it gives the
 * storage back.
 */
#include "kvstate_internal.h"

#include "base.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int vfail(kv_error *err, kv_status code, const char *fmt, va_list ap)
{
    if (err) {
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        err->code = code;
    }
    return -1;
}

int kv_fail(kv_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(err, KV_ERR_INVALID, fmt, ap);
    va_end(ap);
    return -1;
}

int kv_fail_as(kv_error *err, kv_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(err, code, fmt, ap);
    va_end(ap);
    return -1;
}

size_t kv_page_floats(const kv_geometry *g)
{
    size_t per_head = (size_t)g->dk * g->dv + (g->key_sums ? (size_t)g->dk : 0);
    return (size_t)g->layers * g->kv_heads * per_head;
}

int kv_pages_needed(const kv_geometry *g, long n_positions)
{
    if (n_positions <= 0)
        return 0;
    long n = n_positions / g->block_tokens;
    return n > g->max_blocks ? g->max_blocks : (int)n;
}

static int geometry_ok(const kv_geometry *g)
{
    return g->layers > 0 && g->kv_heads > 0 && g->dk > 0 && g->dv > 0 && g->block_tokens > 0 &&
           g->max_blocks > 0 && g->layers <= 4096 && g->kv_heads <= 4096 && g->dk <= 65536 &&
           g->dv <= 65536 && g->block_tokens <= 65536 && g->max_blocks <= 65536;
}

static int bounded_setup(kv_pool *p, const kv_pool_options *opt, kv_error *err);

/* A page with storage onto the free list */
static void free_push(kv_pool *p, int32_t id)
{
    p->pg[id].state = PG_FREE;
    p->pg[id].next = p->free_head;
    p->free_head = id;
    p->n_free++;
}

int kv_pool_create(const kv_pool_options *opt, kv_pool **out, kv_error *err)
{
    *out = NULL;
    if (!opt || !geometry_ok(&opt->geo))
        return kv_fail(err, "state pool: bad geometry");
    if (opt->dtype != KV_DTYPE_F32 && opt->dtype != KV_DTYPE_BF16)
        return kv_fail(err, "state pool: unknown page dtype %d", (int)opt->dtype);
    if (opt->resume_slots < 0 || opt->resume_slots > 65536)
        return kv_fail(err, "state pool: resume slots %d outside [0, 65536]", opt->resume_slots);
    kv_pool *p = calloc(1, sizeof *p);
    if (!p)
        return kv_fail_as(err, KV_ERR_NOMEM, "out of memory for the state pool");
    p->opt = *opt;
    if (opt->memory)
        p->mem = *opt->memory;
    else
        kv_memory_host(&p->mem);
    p->opt.memory = &p->mem;
    p->page_floats = kv_page_floats(&opt->geo);
    p->page_bytes = p->page_floats * (opt->dtype == KV_DTYPE_BF16 ? 2 : 4);
    p->holders = 1;
    p->free_head = p->bare_head = p->lru_head = p->lru_tail = -1;
    p->hash_mask = ~0ull;
    p->bounded = opt->budget_bytes > 0;
    if (p->bounded && bounded_setup(p, opt, err)) {
        kv_pool_release(p);
        return -1;
    }
    if (!p->bounded) {
        p->max_pages = LONG_MAX / 4;
        p->opt.resume_slots = 0; /* resume needs the prefix cache */
    }
    *out = p;
    return 0;
}

static void pool_destroy(kv_pool *p)
{
    /* Before the pages: the writer writes what is queued from the pinned
     * pages themselves. Nothing is offered any more. */
    kv_disk_close(p->disk);
    kv_stash_stop(p->stash);
    for (int i = 0; i < p->n_pg; i++) {
        kv_mem_release_page(p, p->pg[i].data);
        free(p->pg[i].tokens);
    }
    kv_resume_free_all(p);
    free(p->disk_stage);
    free(p->resume);
    free(p->pg);
    free(p->buckets);
    free(p);
}

void kv_pool_release(kv_pool *p)
{
    if (p && --p->holders == 0)
        pool_destroy(p);
}

size_t kv_pool_page_bytes(const kv_pool *p) { return p->page_bytes; }
kv_dtype kv_pool_dtype(const kv_pool *p) { return p->opt.dtype; }

long kv_pool_available(const kv_pool *p)
{
    if (!p->bounded)
        return LONG_MAX / 4;
    return p->n_free + p->n_cached + (p->max_pages - p->n_pg) - p->n_reserved;
}

void kv_pool_stats(const kv_pool *p, kv_stats *o)
{
    *o = p->ctr;
    o->page_bytes = p->page_bytes;
    o->pages_total = p->bounded ? p->max_pages : p->n_used;
    o->pages_used = p->n_used;
    o->pages_cached = p->n_cached;
    o->pages_free = p->bounded ? p->n_free + (p->max_pages - p->n_pg) : 0;
    o->pages_reserved = p->n_reserved;
    o->pages_available = p->bounded ? kv_pool_available(p) : -1;
}

static void lru_unlink(kv_pool *p, int32_t id)
{
    kv_page_desc *d = &p->pg[id];
    if (d->prev >= 0)
        p->pg[d->prev].next = d->next;
    else
        p->lru_head = d->next;
    if (d->next >= 0)
        p->pg[d->next].prev = d->prev;
    else
        p->lru_tail = d->prev;
    d->prev = d->next = -1;
}

static void lru_push_tail(kv_pool *p, int32_t id)
{
    kv_page_desc *d = &p->pg[id];
    d->next = -1;
    d->prev = p->lru_tail;
    if (p->lru_tail >= 0)
        p->pg[p->lru_tail].next = id;
    else
        p->lru_head = id;
    p->lru_tail = id;
}

/* A new descriptor with storage, or -1. */
static int32_t grow(kv_pool *p, int populated, kv_error *err)
{
    if (!p->bounded && p->n_pg == p->cap_pg) {
        int cap = p->cap_pg ? 2 * p->cap_pg : 16;
        kv_page_desc *np = realloc(p->pg, (size_t)cap * sizeof *np);
        if (!np)
            return kv_fail_as(err, KV_ERR_NOMEM, "out of memory for the state pool's page table");
        p->pg = np;
        p->cap_pg = cap;
    }
    kv_page_desc *d = &p->pg[p->n_pg];
    memset(d, 0, sizeof *d);
    d->hnext = d->prev = d->next = -1;
    d->data = kv_stash_take(p->stash); /* faulted in ahead, off this thread */
    if (!d->data)
        d->data = populated ? kv_mem_alloc_page(p) : kv_mem_alloc_page_unpopulated(p);
    if (!d->data) {
        kv_stash_untake(p->stash);
        return kv_fail_as(err, KV_ERR_NOMEM, "out of memory for a state page (%zu bytes)",
                          p->page_bytes);
    }
    return p->n_pg++;
}

/*
 * Pages made at creation: a fresh pool makes a page for nearly every block it closes until it
 * reaches its budget (released pages stay in the prefix cache), and memory new to the process
 * costs the kernel's zeroing and faults. The stash moves that off the step, but onto a core
 * the engine's threads share: on a 2-vCPU guest a fresh server's served output rate rose 2-8 %
 * with its first 1 GiB made here (bench/RESULTS.md). Made here, the cost is paid once, before
 * the first request: 1 GiB took 0.1 s where the host had backed the guest's memory before,
 * 1.5-2.3 s where it had not. One thread: two made 14 GiB 1.8-2.4x slower (the populates
 * share the process's memory map).
 */
static int prefault(kv_pool *p, size_t bytes, kv_error *err)
{
    if (!kv_mem_page_slow(p))
        return 0;
    long n = (long)(bytes / p->page_bytes);
    if (n > p->max_pages)
        n = p->max_pages;
    double t0 = mhla_now();
    for (long i = 0; i < n; i++) {
        int32_t id = grow(p, 1, err);
        if (id < 0)
            return kv_fail_as(err, KV_ERR_NOMEM,
                              "out of memory for state page %ld of the %ld to make at start "
                              "(%zu bytes each)",
                              i + 1, n, p->page_bytes);
        free_push(p, id);
    }
    p->ctr.pages_prefaulted = n;
    p->ctr.prefault_seconds = mhla_now() - t0;
    return 0;
}

/* A bounded pool's tables, the pages it makes at creation and its stash. */
static int bounded_setup(kv_pool *p, const kv_pool_options *opt, kv_error *err)
{
    size_t n = opt->budget_bytes / p->page_bytes;
    if (n > INT32_MAX / 4)
        n = INT32_MAX / 4;
    p->max_pages = (long)n;
    p->cap_pg = (int)n;
    p->n_buckets = 1;
    while (p->n_buckets < 2 * n)
        p->n_buckets <<= 1;
    p->pg = calloc(n ? n : 1, sizeof *p->pg);
    p->buckets = malloc(p->n_buckets * sizeof *p->buckets);
    p->resume = calloc(opt->resume_slots ? (size_t)opt->resume_slots : 1, sizeof *p->resume);
    if (!p->pg || !p->buckets || !p->resume)
        return kv_fail_as(err, KV_ERR_NOMEM,
                          "out of memory for the state pool's tables (%zu pages)", n);
    memset(p->buckets, 0xff, p->n_buckets * sizeof *p->buckets);
    if (prefault(p, opt->prefault_bytes, err))
        return -1;
    p->stash = kv_stash_start(p, p->max_pages - p->n_pg);
    return 0;
}

static int take(kv_pool *p, int from_reservation, int populated, int32_t *out, kv_error *err)
{
    if (!from_reservation && kv_pool_available(p) < 1)
        return kv_fail_as(err, KV_ERR_FULL,
                          "state memory full: all %ld pages of %zu bytes are in use or reserved "
                          "(%ld used, %ld reserved)",
                          p->max_pages, p->page_bytes, p->n_used, p->n_reserved);
    int32_t id;
    if (p->free_head >= 0) {
        id = p->free_head;
        p->free_head = p->pg[id].next;
        p->pg[id].next = -1;
        p->n_free--;
    } else if (p->bare_head >= 0) { /* unbounded: a descriptor whose storage went back */
        id = p->bare_head;
        p->pg[id].data = kv_mem_alloc_page(p);
        if (!p->pg[id].data)
            return kv_fail_as(err, KV_ERR_NOMEM, "out of memory for a state page (%zu bytes)",
                              p->page_bytes);
        p->bare_head = p->pg[id].next;
        p->pg[id].next = -1;
        p->n_bare--;
    } else if (p->n_pg < p->max_pages) {
        id = grow(p, populated, err);
        if (id < 0)
            return -1;
    } else if (p->lru_head >= 0) {
        id = p->lru_head;        /* evict the least recently used cached page */
        kv_disk_offer(p, id, 1); /* unless the tier has it: the page's last chance */
        kv_disk_unpin(p, id);    /* it is about to be overwritten */
        lru_unlink(p, id);
        kv_index_remove(p, id);
        p->n_cached--;
        p->ctr.evictions++;
    } else {
        return kv_fail_as(err, KV_ERR_FULL, "state memory full: no free or evictable page");
    }
    if (from_reservation)
        p->n_reserved--;
    kv_page_desc *d = &p->pg[id];
    d->state = PG_USED;
    d->refs = 1;
    p->n_used++;
    *out = id;
    return 0;
}

int kv_page_take(kv_pool *p, int from_reservation, int32_t *out, kv_error *err)
{
    return take(p, from_reservation, 1, out, err);
}

int kv_page_take_unpopulated(kv_pool *p, int from_reservation, int32_t *out, kv_error *err)
{
    return take(p, from_reservation, 0, out, err);
}

void kv_page_ref(kv_pool *p, int32_t id)
{
    kv_page_desc *d = &p->pg[id];
    if (d->state == PG_CACHED) {
        lru_unlink(p, id);
        p->n_cached--;
        p->n_used++;
        d->state = PG_USED;
    }
    d->refs++;
}

void kv_page_unref(kv_pool *p, int32_t id)
{
    kv_page_desc *d = &p->pg[id];
    if (--d->refs > 0)
        return;
    p->n_used--;
    if (d->indexed) {
        d->state = PG_CACHED;
        p->n_cached++;
        lru_push_tail(p, id);
        return;
    }
    if (!p->bounded && p->n_free >= p->n_used) {
        d->state = PG_FREE;
        kv_mem_release_page(p, d->data);
        d->data = NULL;
        d->next = p->bare_head;
        p->bare_head = id;
        p->n_bare++;
        return;
    }
    free_push(p, id);
}

void kv_pool_set_hash_bits(kv_pool *p, int bits)
{
    if (p->disk)
        kv_disk_flush(p->disk); /* pages go back to the free list: none pinned */
    /* Drop every index entry first: keys stored under the old mask would
     * not be found under the new one. */
    for (int i = 0; i < p->n_pg; i++)
        if (p->pg[i].indexed) {
            kv_index_remove(p, i);
            if (p->pg[i].state == PG_CACHED) {
                lru_unlink(p, i);
                p->n_cached--;
                free_push(p, i);
            }
        }
    p->hash_mask = bits <= 0 || bits >= 64 ? ~0ull : (1ull << bits) - 1;
}

/* What kv_pool_check counts of the pages and its lists. */
typedef struct {
    long used, cached, freed, indexed, lru, fl, bare, chained;
} pool_counts;

/* Every page descriptor agrees with its state and the index. */
static int check_pages(const kv_pool *p, pool_counts *n, kv_error *err)
{
    for (int i = 0; i < p->n_pg; i++) {
        const kv_page_desc *d = &p->pg[i];
        if (d->state == PG_USED) {
            n->used++;
            if (d->refs <= 0)
                return kv_fail(err, "page %d is used with %d references", i, d->refs);
        } else if (d->state == PG_CACHED) {
            n->cached++;
            if (d->refs != 0 || !d->indexed)
                return kv_fail(err, "cached page %d has %d references, indexed %d", i, d->refs,
                               d->indexed);
        } else {
            n->freed++;
            if (d->refs != 0 || d->indexed)
                return kv_fail(err, "free page %d has %d references, indexed %d", i, d->refs,
                               d->indexed);
        }
        if (d->indexed) {
            n->indexed++;
            if (kv_index_find(p, d->key, d->tokens, d->n_tokens) != i)
                return kv_fail(err, "indexed page %d cannot be found by its key", i);
        }
    }
    return 0;
}

int kv_pool_check(const kv_pool *p, kv_error *err)
{
    pool_counts n = {0};
    if (check_pages(p, &n, err))
        return -1;
    for (int32_t id = p->lru_head, prev = -1; id >= 0; prev = id, id = p->pg[id].next) {
        if (p->pg[id].state != PG_CACHED || p->pg[id].prev != prev || ++n.lru > p->n_pg)
            return kv_fail(err, "LRU list broken at page %d", id);
    }
    for (int32_t id = p->free_head; id >= 0; id = p->pg[id].next)
        if (p->pg[id].state != PG_FREE || !p->pg[id].data || ++n.fl > p->n_pg)
            return kv_fail(err, "free list broken at page %d", id);
    for (int32_t id = p->bare_head; id >= 0; id = p->pg[id].next)
        if (p->pg[id].state != PG_FREE || p->pg[id].data || ++n.bare > p->n_pg)
            return kv_fail(err, "list of free descriptors without storage broken at page %d", id);
    for (uint64_t b = 0; p->bounded && b < p->n_buckets; b++)
        for (int32_t id = p->buckets[b]; id >= 0; id = p->pg[id].hnext)
            if (!p->pg[id].indexed || ++n.chained > p->n_pg)
                return kv_fail(err, "hash chain %llu broken at page %d", (unsigned long long)b, id);
    if (n.used != p->n_used || n.cached != p->n_cached || n.lru != n.cached || n.fl != p->n_free ||
        n.bare != p->n_bare || n.freed != n.fl + n.bare || n.chained != n.indexed ||
        (p->bounded && n.bare != 0))
        return kv_fail(
            err,
            "pool accounting: used %ld/%ld cached %ld/%ld lru %ld free %ld: list %ld/%ld, "
            "without storage %ld/%ld; indexed %ld chained %ld",
            n.used, p->n_used, n.cached, p->n_cached, n.lru, n.freed, n.fl, p->n_free, n.bare,
            p->n_bare, n.indexed, n.chained);
    if (p->n_reserved < 0 || (p->bounded && kv_pool_available(p) < 0))
        return kv_fail(err, "reservations exceed the pool: %ld reserved, %ld available",
                       p->n_reserved, kv_pool_available(p));
    return 0;
}
