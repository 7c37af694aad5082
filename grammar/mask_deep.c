/*
 * mask_deep.c — token classes keyed by a stack's last k > 1 elements, for
 * the tops whose own classes leave many tokens uncertain (tokens.c: marked
 * deeper). A stack is looked up by its top, then by its last 2, 3, ...
 * elements for as long as the classes found say deeper, so each stack pays
 * for the context it needs and no more. The suffixes' classes live in one
 * open-addressing table under the tokens' mutex; each is computed outside
 * the lock, the first to finish publishes it.
 */
#include "mask_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t *key; /* NULL: an empty slot */
    uint32_t k, hash;
    gr_top_tokens *tt;
} deep_slot;

typedef struct {
    deep_slot *slot;
    uint32_t cap, n; /* cap a power of two, at most half full */
} deep_map;

static uint32_t hash_key(const uint32_t *key, uint32_t k)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ k;
    for (uint32_t i = 0; i < k; i++)
        h = (h ^ key[i]) * 0xFF51AFD7ED558CCDull;
    return (uint32_t)(h ^ (h >> 32));
}

/* The slot of key, or the empty slot where it would go. */
static deep_slot *find(const deep_map *m, const uint32_t *key, uint32_t k, uint32_t h)
{
    for (uint32_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        deep_slot *s = &m->slot[i];
        if (!s->key || (s->hash == h && s->k == k && !memcmp(s->key, key, k * sizeof *key)))
            return s;
    }
}

static int grow(deep_map *m)
{
    uint32_t cap = m->cap ? m->cap * 2 : 64;
    deep_slot *old = m->slot, *slot = calloc(cap, sizeof *slot);
    if (!slot)
        return MHLA_GRAMMAR_NOMEM;
    uint32_t old_cap = m->cap;
    m->slot = slot;
    m->cap = cap;
    for (uint32_t i = 0; i < old_cap; i++)
        if (old[i].key)
            *find(m, old[i].key, old[i].k, old[i].hash) = old[i];
    free(old);
    return 0;
}

uint32_t gr_deep_count(const void *deep) { return deep ? ((const deep_map *)deep)->n : 0; }

void gr_deep_free(void *deep)
{
    deep_map *m = deep;
    if (!m)
        return;
    for (uint32_t i = 0; i < m->cap; i++) {
        free(m->slot[i].key);
        gr_top_tokens_free(m->slot[i].tt);
    }
    free(m->slot);
    free(m);
}

/* Publishes *tt for key unless another thread did first (then *tt is freed
 * and becomes theirs). Under the mutex. */
static int publish(mhla_grammar_tokens *t, const uint32_t *key, uint32_t k, uint32_t h,
                   gr_top_tokens **tt)
{
    if (!t->deep && !(t->deep = calloc(1, sizeof(deep_map))))
        return MHLA_GRAMMAR_NOMEM;
    deep_map *m = t->deep;
    if ((m->n + 1) * 2 > m->cap && grow(m))
        return MHLA_GRAMMAR_NOMEM;
    deep_slot *s = find(m, key, k, h);
    if (s->key) {
        gr_top_tokens_free(*tt);
        *tt = s->tt;
        return 0;
    }
    if (!(s->key = malloc(k * sizeof *key)))
        return MHLA_GRAMMAR_NOMEM;
    memcpy(s->key, key, k * sizeof *key);
    *s = (deep_slot){s->key, k, h, *tt};
    m->n++;
    return 0;
}

/* The classes of suffix key (k elements); *out NULL when the table is full. */
static int deep_get(mhla_grammar_tokens *t, const uint32_t *key, uint32_t k,
                    const gr_top_tokens **out, mhla_grammar_error *err)
{
    uint32_t h = hash_key(key, k);
    pthread_mutex_lock(&t->mu);
    deep_map *m = t->deep;
    deep_slot *s = m && m->cap ? find(m, key, k, h) : NULL;
    *out = s && s->key ? s->tt : NULL;
    int full = m && m->n >= GR_MASK_MAX_DEEP;
    pthread_mutex_unlock(&t->mu);
    if (*out || full)
        return 0;
    gr_top_tokens *tt;
    int rc = gr_classify(t, key, k, &tt, err);
    if (rc)
        return rc;
    pthread_mutex_lock(&t->mu);
    rc = publish(t, key, k, h, &tt);
    pthread_mutex_unlock(&t->mu);
    if (rc) {
        gr_top_tokens_free(tt);
        return gr_mask_err(err, rc, "out of memory keeping token classes of %u elements", k);
    }
    *out = tt;
    return 0;
}

int gr_stack_tokens(mhla_grammar_tokens *t, const gr_stack *s, const gr_top_tokens **out,
                    mhla_grammar_error *err)
{
    int rc = gr_top_tokens_get(t, s->pos[s->n - 1], out, err);
    for (uint32_t k = 2; rc == 0 && (*out)->deeper && k <= s->n && k <= GR_MASK_MAX_SUFFIX; k++) {
        const gr_top_tokens *tt;
        rc = deep_get(t, s->pos + s->n - k, k, &tt, err);
        if (rc || !tt)
            break;
        *out = tt;
    }
    return rc;
}
