/*
 * prefix_index.c — the exact prefix cache's index: a hash chain over token
 * ids (key_b = H(key_{b-1}, tokens of block b)) into chained buckets. A key
 * only narrows the search: a hit also compares the whole token prefix, so a
 * collision (forced in tests by masking keys) can never serve wrong state.
 */
#include "kvstate_internal.h"

#include <stdlib.h>
#include <string.h>

uint64_t kv_fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* splitmix64's finaliser: spreads FNV's weak low bits over the bucket index. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t kv_block_key(uint64_t prev_key, const int32_t *block, int n)
{
    return mix64(kv_fnv1a(prev_key ^ KV_FNV_SEED, block, (size_t)n * sizeof *block));
}

static uint64_t bucket_of(const kv_pool *p, uint64_t key)
{
    return mix64(key) & (p->n_buckets - 1);
}

int32_t kv_index_find(const kv_pool *p, uint64_t key, const int32_t *tokens, int n_tokens)
{
    if (!p->bounded)
        return -1;
    key &= p->hash_mask;
    for (int32_t id = p->buckets[bucket_of(p, key)]; id >= 0; id = p->pg[id].hnext) {
        const kv_page_desc *d = &p->pg[id];
        if (d->key == key && d->n_tokens == n_tokens &&
            memcmp(d->tokens, tokens, (size_t)n_tokens * sizeof *tokens) == 0)
            return id;
    }
    return -1;
}

int kv_index_insert(kv_pool *p, int32_t id, uint64_t key, const int32_t *tokens, int n_tokens)
{
    kv_page_desc *d = &p->pg[id];
    if (d->tokens_cap < n_tokens) { /* at a block boundary, never per token */
        int32_t *t = realloc(d->tokens, (size_t)n_tokens * sizeof *t);
        if (!t)
            return -1;
        d->tokens = t;
        d->tokens_cap = n_tokens;
    }
    d->key = key & p->hash_mask;
    d->full_key = key;
    d->n_tokens = n_tokens;
    memcpy(d->tokens, tokens, (size_t)n_tokens * sizeof *tokens);
    uint64_t b = bucket_of(p, d->key);
    d->hnext = p->buckets[b];
    p->buckets[b] = id;
    d->indexed = 1;
    return 0;
}

void kv_index_remove(kv_pool *p, int32_t id)
{
    kv_page_desc *d = &p->pg[id];
    if (!d->indexed)
        return;
    int32_t *link = &p->buckets[bucket_of(p, d->key)];
    while (*link != id)
        link = &p->pg[*link].hnext;
    *link = d->hnext;
    d->hnext = -1;
    d->indexed = 0;
    d->on_disk = 0;
    d->n_tokens = 0;
}
