/*
 * pool_disk.c — the pool and its disk tier: a page that enters the prefix
 * cache is queued for the writer, pinned (written from the pool's storage);
 * one that leaves it by eviction before it was queued is copied; a prefix match that misses memory
 * takes a page and fills it from the tier. A page is written once, so a page from a valid file
 * holds the same bits the pool would compute for those tokens.
 */
#include "disk.h"

#include <stdlib.h>
#include <string.h>

int kv_pool_set_disk(kv_pool *p, kv_disk *d, kv_error *err)
{
    if (!p->bounded)
        return kv_fail(err, "the disk tier needs a state pool with a budget (a prefix cache)");
    if (p->disk)
        return kv_fail(err, "the pool has a disk tier already");
    if (d->page_bytes != p->page_bytes || d->dtype != p->opt.dtype)
        return kv_fail(err, "the disk tier's pages (%zu bytes) are not this pool's (%zu bytes)",
                       d->page_bytes, p->page_bytes);
    p->disk = d;
    return 0;
}

kv_disk *kv_pool_disk(const kv_pool *p) { return p->disk; }

/* Host memory is the hook set kv_memory_host installs; only then can a
 * file be read straight into a page. */
static int pages_in_host(const kv_pool *p)
{
    kv_memory host;
    kv_memory_host(&host);
    return p->mem.copy == host.copy;
}

void kv_disk_offer(kv_pool *p, int32_t id, int evicting)
{
    kv_page_desc *d = &p->pg[id];
    if (!p->disk || d->on_disk || !d->indexed)
        return;
    if (kvd_exists(p->disk, d->full_key, d->n_tokens)) {
        d->on_disk = 1;
        return;
    }
    kvd_slot *s = kvd_slot_take(p->disk, d->full_key, d->tokens, d->n_tokens);
    if (!s)
        return; /* dropped: perhaps written when evicted */
    if (pages_in_host(p) && !evicting) {
        /* Indexed, so immutable until evicted, and eviction unpins first. */
        kvd_slot_pin(s, d->data, &d->pinned);
    } else if (kvd_slot_copy_room(p->disk, s) ||
               kv_mem_copy(p, s->copy, d->data, p->page_bytes, KV_COPY_TO_HOST)) {
        kvd_slot_cancel(p->disk, s);
        return;
    } else {
        kvd_count(p->disk, &p->disk->st.copied, 1);
    }
    kvd_slot_submit(p->disk, s);
    d->on_disk = 1;
}

void kv_disk_unpin(kv_pool *p, int32_t id)
{
    if (p->disk && atomic_load(&p->pg[id].pinned))
        kvd_unpin(p->disk, &p->pg[id].pinned);
}

/* A page for s: its reservation first, else what is left beyond everyone's.
 * Unpopulated: for the loader, which faults it in. */
static int take_for(kv_pool *p, kv_seq *s, int populated, int32_t *id)
{
    int from_res = s->reserved > 0;
    if (populated ? kv_page_take(p, from_res, id, NULL)
                  : kv_page_take_unpopulated(p, from_res, id, NULL))
        return -1;
    if (from_res)
        s->reserved--;
    return 0;
}

static void give_back(kv_pool *p, kv_seq *s, int32_t id, int from_res)
{
    kv_page_unref(p, id); /* not indexed: back to the free list */
    if (from_res) {
        s->reserved++;
        p->n_reserved++;
    }
}

/* The file into page id: straight into host pages, staged for a device's. */
static int fill_page(kv_pool *p, int32_t id, uint64_t key, const int32_t *tokens, int n_tokens)
{
    void *data = p->pg[id].data;
    if (pages_in_host(p))
        return kv_disk_get(p->disk, key, tokens, n_tokens, data, NULL);
    if (!p->disk_stage && !(p->disk_stage = malloc(p->page_bytes)))
        return 0;
    if (kv_disk_get(p->disk, key, tokens, n_tokens, p->disk_stage, NULL) != 1)
        return 0;
    return kv_mem_copy(p, data, p->disk_stage, p->page_bytes, KV_COPY_FROM_HOST) == 0;
}

int32_t kv_disk_load_block(kv_pool *p, kv_seq *s, uint64_t key, const int32_t *tokens, int n_tokens)
{
    if (!kvd_exists(p->disk, key, n_tokens)) {
        kvd_count(p->disk, &p->disk->st.misses, 1);
        return -1;
    }
    int from_res = s->reserved > 0;
    int32_t id;
    if (take_for(p, s, 1, &id))
        return -1;
    if (fill_page(p, id, key, tokens, n_tokens) != 1) {
        give_back(p, s, id, from_res);
        return -1;
    }
    /* Out of memory for the key's tokens leaves the page private to s. */
    if (kv_index_insert(p, id, key, tokens, n_tokens) == 0)
        p->pg[id].on_disk = 1;
    return id;
}

int kv_disk_async(const kv_pool *p) { return p->disk && pages_in_host(p); }

static void load_free(kvd_load *l)
{
    if (!l)
        return;
    free(l->tokens);
    free(l->keys);
    free(l->pages);
    free(l);
}

static kvd_load *load_new(const int32_t *tokens, int limit, int max_blocks)
{
    kvd_load *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->tokens = malloc((size_t)(limit > 0 ? limit : 1) * sizeof *l->tokens);
    l->keys = malloc((size_t)max_blocks * sizeof *l->keys);
    l->pages = malloc((size_t)max_blocks * sizeof *l->pages);
    if (!l->tokens || !l->keys || !l->pages) {
        load_free(l);
        return NULL;
    }
    memcpy(l->tokens, tokens, (size_t)limit * sizeof *tokens);
    l->limit = limit;
    return l;
}

int kv_disk_load_start(kv_seq *s, const int32_t *tokens, int limit, int nb)
{
    kv_pool *p = s->pool;
    int C = p->opt.geo.block_tokens, max = limit / C - nb;
    kvd_load *l = max > 0 ? load_new(tokens, limit, max) : NULL;
    if (!l)
        return 0;
    uint64_t key = nb ? s->keys[nb - 1] : 0;
    int k = 0;
    for (int32_t id; k < max; k++) {
        key = kv_block_key(key, tokens + (size_t)(nb + k) * C, C);
        if (!kvd_exists(p->disk, key, (nb + k + 1) * C)) {
            kvd_count(p->disk, &p->disk->st.misses, 1);
            break;
        }
        if (take_for(p, s, 0, &id))
            break;
        s->table[nb + k] = id;
        s->keys[nb + k] = key;
        s->n_pages = nb + k + 1;
        l->keys[k] = key;
        l->pages[k] = p->pg[id].data;
    }
    if (k == 0) {
        load_free(l);
        return 0;
    }
    l->pool = p;
    l->first = nb;
    l->n_blocks = k;
    l->block_tokens = C;
    s->load = l;
    kvd_load_submit(p->disk, l);
    return k;
}

int kv_disk_load_ready(kv_seq *s, int wait) { return kvd_load_done(s->pool->disk, s->load, wait); }

int32_t *kv_disk_load_finish(kv_seq *s, int *limit)
{
    kv_pool *p = s->pool;
    kvd_load *l = s->load;
    int C = p->opt.geo.block_tokens;
    for (int i = 0; i < l->n_blocks; i++) {
        int b = l->first + i, n_tok = (b + 1) * C;
        int32_t id = s->table[b];
        if (i >= l->n_read) {
            give_back(p, s, id, 1); /* recomputed: the page stays promised to s */
            continue;
        }
        int32_t q = kv_index_find(p, l->keys[i], l->tokens, n_tok);
        if (q >= 0) { /* computed meanwhile by another sequence: the same bits */
            kv_page_ref(p, q);
            kv_page_unref(p, id);
            s->table[b] = q;
        } else if (kv_index_insert(p, id, l->keys[i], l->tokens, n_tok) == 0) {
            p->pg[id].on_disk = 1;
        }
    }
    s->n_pages = l->first + l->n_read;
    *limit = l->limit;
    int32_t *tokens = l->tokens;
    l->tokens = NULL;
    load_free(l);
    s->load = NULL;
    return tokens;
}

void kv_disk_load_drop(kv_seq *s)
{
    if (!s->load)
        return;
    kvd_load_cancel(s->pool->disk, s->load);
    load_free(s->load);
    s->load = NULL; /* its pages, unindexed, go back with the sequence's */
}
