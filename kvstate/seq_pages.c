/*
 * seq_pages.c — one sequence's state: its page table, the buffers the engine's
 * token mixer works in (P_i, the current block's raw rows), its token
 * history (the prefix cache's keys), its reservation; publishing closed
 * blocks and attaching cached ones.
 */
#include "kvstate_internal.h"

#include <stdlib.h>
#include <string.h>

static size_t heads(const kv_geometry *g) { return (size_t)g->layers * g->kv_heads; }

int kv_seq_create(kv_pool *p, kv_seq **out, kv_error *err)
{
    const kv_geometry *g = &p->opt.geo;
    *out = NULL;
    kv_seq *s = calloc(1, sizeof *s);
    if (!s)
        return kv_fail_as(err, KV_ERR_NOMEM, "out of memory for a sequence");
    s->pool = p;
    p->holders++;
    size_t ctx = (size_t)g->max_blocks * g->block_tokens;
    s->tokens = malloc(ctx * sizeof *s->tokens);
    s->table = malloc((size_t)g->max_blocks * sizeof *s->table);
    s->keys = malloc((size_t)g->max_blocks * sizeof *s->keys);
    s->b.prefix = kv_mem_alloc_swept(p, heads(g) * g->dk * g->dv * sizeof(float));
    s->b.prefix_k = g->key_sums ? kv_mem_alloc(p, heads(g) * g->dk * sizeof(float)) : NULL;
    s->b.cur_k = kv_mem_alloc_swept(p, heads(g) * g->block_tokens * g->dk * sizeof(float));
    s->b.cur_v = kv_mem_alloc_swept(p, heads(g) * g->block_tokens * g->dv * sizeof(float));
    if (!s->tokens || !s->table || !s->keys || !s->b.prefix || (g->key_sums && !s->b.prefix_k) ||
        !s->b.cur_k || !s->b.cur_v) {
        kv_seq_free(s);
        return kv_fail_as(err, KV_ERR_NOMEM, "out of memory for a sequence's state");
    }
    *out = s;
    return 0;
}

int kv_seq_clone(const kv_seq *src, kv_seq **out, kv_error *err)
{
    kv_pool *p = src->pool;
    const kv_geometry *g = &p->opt.geo;
    kv_seq *s;
    if (src->load)
        return kv_fail(err, "cloning a sequence whose prefix is still loading from disk");
    if (kv_seq_create(p, &s, err))
        return -1;
    s->pos = src->pos;
    s->loaded = src->loaded;
    memcpy(s->tokens, src->tokens, (size_t)src->pos * sizeof *s->tokens);
    /* Only closed pages are shared; a page taken ahead for a block still
     * open (a refused forward pass) stays with its owner. */
    int closed = src->pos / g->block_tokens;
    if (closed > src->n_pages)
        closed = src->n_pages;
    for (int b = 0; b < closed; b++) {
        s->table[b] = src->table[b];
        s->keys[b] = src->keys[b];
        kv_page_ref(p, s->table[b]);
    }
    s->n_pages = closed;
    const kv_copy_dir w = KV_COPY_WITHIN;
    if (kv_mem_copy(p, s->b.prefix, src->b.prefix, heads(g) * g->dk * g->dv * sizeof(float), w) ||
        (g->key_sums &&
         kv_mem_copy(p, s->b.prefix_k, src->b.prefix_k, heads(g) * g->dk * sizeof(float), w)) ||
        kv_mem_copy(p, s->b.cur_k, src->b.cur_k, heads(g) * g->block_tokens * g->dk * sizeof(float),
                    w) ||
        kv_mem_copy(p, s->b.cur_v, src->b.cur_v, heads(g) * g->block_tokens * g->dv * sizeof(float),
                    w)) {
        kv_seq_free(s);
        return kv_fail(err, "cloning a sequence: copying its state buffers failed");
    }
    *out = s;
    return 0;
}

void kv_seq_free(kv_seq *s)
{
    if (!s)
        return;
    kv_pool *p = s->pool;
    kv_disk_load_drop(s); /* the loader writes into pages s holds */
    for (int b = 0; b < s->n_pages; b++)
        kv_page_unref(p, s->table[b]);
    p->n_reserved -= s->reserved;
    free(s->tokens);
    free(s->table);
    free(s->keys);
    kv_mem_release(p, s->b.prefix);
    kv_mem_release(p, s->b.prefix_k);
    kv_mem_release(p, s->b.cur_k);
    kv_mem_release(p, s->b.cur_v);
    free(s);
    kv_pool_release(p);
}

void kv_seq_finish(kv_seq *s)
{
    if (!s)
        return;
    kv_pool *p = s->pool;
    if (p->bounded && p->opt.resume_slots > 0 && !s->loaded &&
        s->pos % p->opt.geo.block_tokens != 0)
        kv_resume_keep(p, s);
    kv_seq_free(s);
}

kv_pool *kv_seq_pool(const kv_seq *s) { return s->pool; }
int kv_seq_pos(const kv_seq *s) { return s->pos; }
const int32_t *kv_seq_tokens(const kv_seq *s) { return s->tokens; }
kv_seq_bufs kv_seq_buffers(const kv_seq *s) { return s->b; }
int kv_seq_n_pages(const kv_seq *s) { return s->n_pages; }

void *kv_seq_page(const kv_seq *s, int b) { return s->pool->pg[s->table[b]].data; }

size_t kv_seq_bytes(const kv_seq *s)
{
    const kv_geometry *g = &s->pool->opt.geo;
    size_t f = heads(g) * ((size_t)g->dk * g->dv + (g->key_sums ? g->dk : 0) +
                           (size_t)g->block_tokens * (g->dk + g->dv));
    return (size_t)s->n_pages * s->pool->page_bytes + f * sizeof(float);
}

int kv_seq_reserve(kv_seq *s, long n_positions, kv_error *err)
{
    kv_pool *p = s->pool;
    long need = kv_pages_needed(&p->opt.geo, n_positions) - s->n_pages - s->reserved;
    if (need <= 0 || !p->bounded)
        return 0;
    long avail = kv_pool_available(p);
    if (avail < need)
        return kv_fail_as(err, KV_ERR_FULL,
                          "state memory full: %ld positions need %ld more pages of %zu bytes, "
                          "%ld available",
                          n_positions, need, p->page_bytes, avail);
    s->reserved += need;
    p->n_reserved += need;
    return 0;
}

int kv_seq_ensure_pages(kv_seq *s, int n_blocks, kv_error *err)
{
    kv_pool *p = s->pool;
    if (n_blocks > p->opt.geo.max_blocks)
        n_blocks = p->opt.geo.max_blocks;
    while (s->n_pages < n_blocks) {
        int from_res = s->reserved > 0;
        if (kv_page_take(p, from_res, &s->table[s->n_pages], err))
            return -1;
        if (from_res)
            s->reserved--;
        s->n_pages++;
    }
    return 0;
}

void kv_seq_publish_blocks(kv_seq *s, int first, int last, int index)
{
    kv_pool *p = s->pool;
    int C = p->opt.geo.block_tokens;
    for (int b = first; b < last; b++) {
        s->keys[b] = kv_block_key(b ? s->keys[b - 1] : 0, s->tokens + (size_t)b * C, C);
        if (!index || !p->bounded || b >= s->n_pages || p->pg[s->table[b]].indexed)
            continue;
        int n_tok = (b + 1) * C;
        int32_t q = kv_index_find(p, s->keys[b], s->tokens, n_tok);
        if (q >= 0) {
            /* Same prefix, so the same bits: share the cached page and give
             * ours back. The swap leaves the pool's availability unchanged. */
            kv_page_ref(p, q);
            kv_page_unref(p, s->table[b]);
            s->table[b] = q;
        } else {
            /* Out of memory for the key's tokens leaves the page private. */
            if (kv_index_insert(p, s->table[b], s->keys[b], s->tokens, n_tok) == 0)
                kv_disk_offer(p, s->table[b], 0);
        }
    }
}

void kv_seq_advance(kv_seq *s, const int32_t *tokens, int n)
{
    int C = s->pool->opt.geo.block_tokens;
    int old = s->pos;
    memcpy(s->tokens + old, tokens, (size_t)n * sizeof *tokens);
    s->pos += n;
    kv_seq_publish_blocks(s, old / C, s->pos / C, !s->loaded);
}

int kv_seq_rewind(kv_seq *s, int pos, kv_error *err)
{
    int C = s->pool->opt.geo.block_tokens;
    if (pos < 0 || pos > s->pos)
        return kv_fail(err, "rewinding to position %d of a sequence at %d", pos, s->pos);
    if (pos < s->pos && pos / C != s->pos / C)
        return kv_fail(err, "rewinding from %d to %d would reopen a closed block", s->pos, pos);
    s->pos = pos;
    return 0;
}
