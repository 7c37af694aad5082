/* Open-addressing hash maps: token string -> id, and merge pair -> (rank, merged id). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

uint64_t tok_hash_bytes(const char *s, size_t n)
{
    /* FNV-1a over 8-byte words, then a final avalanche; never returns 0 (the empty mark). */
    uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h ? h : 1;
}

static int strmap_grow(tok_strmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    uint64_t *hash = calloc(cap, sizeof *hash);
    uint32_t *ko = malloc(cap * sizeof *ko), *kl = malloc(cap * sizeof *kl);
    int32_t *val = malloc(cap * sizeof *val);
    if (!hash || !ko || !kl || !val) {
        free(hash);
        free(ko);
        free(kl);
        free(val);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->hash[i])
            continue;
        size_t j = m->hash[i] & (cap - 1);
        while (hash[j])
            j = (j + 1) & (cap - 1);
        hash[j] = m->hash[i];
        ko[j] = m->koff[i];
        kl[j] = m->klen[i];
        val[j] = m->val[i];
    }
    free(m->hash);
    free(m->koff);
    free(m->klen);
    free(m->val);
    m->hash = hash;
    m->koff = ko;
    m->klen = kl;
    m->val = val;
    m->cap = cap;
    return 0;
}

int tok_strmap_put(tok_strmap *m, const char *k, size_t n, int32_t v)
{
    if (n > UINT32_MAX || m->keys.len + n > UINT32_MAX)
        return -1;
    if ((m->count + 1) * 2 > m->cap && strmap_grow(m))
        return -1;
    uint64_t h = tok_hash_bytes(k, n);
    size_t j = h & (m->cap - 1);
    while (m->hash[j]) {
        if (m->hash[j] == h && m->klen[j] == n && memcmp(m->keys.p + m->koff[j], k, n) == 0) {
            m->val[j] = v;
            return 0;
        }
        j = (j + 1) & (m->cap - 1);
    }
    size_t off = m->keys.len;
    if (mhla_buf_put(&m->keys, k, n))
        return -1;
    m->hash[j] = h;
    m->koff[j] = (uint32_t)off;
    m->klen[j] = (uint32_t)n;
    m->val[j] = v;
    m->count++;
    return 0;
}

bool tok_strmap_get(const tok_strmap *m, const char *k, size_t n, int32_t *v)
{
    if (!m->cap)
        return false;
    uint64_t h = tok_hash_bytes(k, n);
    size_t j = h & (m->cap - 1);
    while (m->hash[j]) {
        if (m->hash[j] == h && m->klen[j] == n && memcmp(m->keys.p + m->koff[j], k, n) == 0) {
            *v = m->val[j];
            return true;
        }
        j = (j + 1) & (m->cap - 1);
    }
    return false;
}

void tok_strmap_free(tok_strmap *m)
{
    free(m->hash);
    free(m->koff);
    free(m->klen);
    free(m->val);
    mhla_buf_free(&m->keys);
    memset(m, 0, sizeof *m);
}

static inline uint64_t pair_key(int32_t a, int32_t b)
{
    return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}
static inline size_t pair_slot(uint64_t k, size_t cap)
{
    k ^= k >> 31;
    k *= 0x9E3779B97F4A7C15ULL;
    k ^= k >> 29;
    return k & (cap - 1);
}

static int pairmap_grow(tok_pairmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 1024;
    uint64_t *key = malloc(cap * sizeof *key);
    int32_t *rank = malloc(cap * sizeof *rank), *merged = malloc(cap * sizeof *merged);
    if (!key || !rank || !merged) {
        free(key);
        free(rank);
        free(merged);
        return -1;
    }
    memset(key, 0xFF, cap * sizeof *key);
    for (size_t i = 0; i < m->cap; i++) {
        if (m->key[i] == UINT64_MAX)
            continue;
        size_t j = pair_slot(m->key[i], cap);
        while (key[j] != UINT64_MAX)
            j = (j + 1) & (cap - 1);
        key[j] = m->key[i];
        rank[j] = m->rank[i];
        merged[j] = m->merged[i];
    }
    free(m->key);
    free(m->rank);
    free(m->merged);
    m->key = key;
    m->rank = rank;
    m->merged = merged;
    m->cap = cap;
    return 0;
}

int tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t merged)
{
    if ((m->count + 1) * 2 > m->cap && pairmap_grow(m))
        return -1;
    uint64_t k = pair_key(a, b);
    size_t j = pair_slot(k, m->cap);
    while (m->key[j] != UINT64_MAX) {
        if (m->key[j] == k) { /* a repeated merge: the later rank wins, as in the reference's Map */
            m->rank[j] = rank;
            m->merged[j] = merged;
            return 0;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->key[j] = k;
    m->rank[j] = rank;
    m->merged[j] = merged;
    m->count++;
    return 0;
}

bool tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *merged)
{
    if (!m->cap)
        return false;
    uint64_t k = pair_key(a, b);
    size_t j = pair_slot(k, m->cap);
    while (m->key[j] != UINT64_MAX) {
        if (m->key[j] == k) {
            *rank = m->rank[j];
            *merged = m->merged[j];
            return true;
        }
        j = (j + 1) & (m->cap - 1);
    }
    return false;
}

void tok_pairmap_free(tok_pairmap *m)
{
    free(m->key);
    free(m->rank);
    free(m->merged);
    memset(m, 0, sizeof *m);
}
