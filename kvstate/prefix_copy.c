/*
 * prefix_copy.c — a spare copy of a sequence's mixed prefix P_i (and key
 * sums), in the pool's memory: what a verify step that crosses into the
 * next block saves before it overwrites P_i, so that taking its drafts back
 * is a copy, not a mix of every page again.
 */
#include "kvstate_internal.h"

#include <stdlib.h>

struct kv_prefix_copy {
    kv_pool *pool;
    float *prefix, *prefix_k;
};

static size_t prefix_bytes(const kv_geometry *g)
{
    return (size_t)g->layers * g->kv_heads * g->dk * g->dv * sizeof(float);
}

static size_t key_bytes(const kv_geometry *g)
{
    return (size_t)g->layers * g->kv_heads * g->dk * sizeof(float);
}

int kv_prefix_copy_create(kv_pool *p, kv_prefix_copy **out, kv_error *err)
{
    const kv_geometry *g = &p->opt.geo;
    kv_prefix_copy *c = calloc(1, sizeof *c);
    *out = NULL;
    if (!c)
        return kv_fail_as(err, KV_ERR_NOMEM, "out of memory for a copy of P_i");
    c->pool = p;
    p->holders++;
    c->prefix = kv_mem_alloc(p, prefix_bytes(g));
    c->prefix_k = g->key_sums ? kv_mem_alloc(p, key_bytes(g)) : NULL;
    if (!c->prefix || (g->key_sums && !c->prefix_k)) {
        kv_prefix_copy_free(c);
        return kv_fail_as(err, KV_ERR_NOMEM, "out of memory for a copy of P_i");
    }
    *out = c;
    return 0;
}

void kv_prefix_copy_free(kv_prefix_copy *c)
{
    if (!c)
        return;
    kv_mem_release(c->pool, c->prefix);
    kv_mem_release(c->pool, c->prefix_k);
    kv_pool_release(c->pool);
    free(c);
}

kv_pool *kv_prefix_copy_pool(const kv_prefix_copy *c) { return c->pool; }

/* Copies P_i and the key sums from one set of buffers to the other. */
static int copy(kv_pool *p, float *dp, float *dk, const float *sp, const float *sk)
{
    const kv_geometry *g = &p->opt.geo;
    return kv_mem_copy(p, dp, sp, prefix_bytes(g), KV_COPY_WITHIN) ||
           (g->key_sums && kv_mem_copy(p, dk, sk, key_bytes(g), KV_COPY_WITHIN));
}

int kv_seq_prefix_save(const kv_seq *s, kv_prefix_copy *c, kv_error *err)
{
    if (c->pool != s->pool)
        return kv_fail(err, "a copy of P_i from another pool");
    if (copy(s->pool, c->prefix, c->prefix_k, s->b.prefix, s->b.prefix_k))
        return kv_fail(err, "saving P_i: the copy failed");
    return 0;
}

int kv_seq_prefix_restore(kv_seq *s, const kv_prefix_copy *c, kv_error *err)
{
    if (c->pool != s->pool)
        return kv_fail(err, "a copy of P_i from another pool");
    if (copy(s->pool, s->b.prefix, s->b.prefix_k, c->prefix, c->prefix_k))
        return kv_fail(err, "restoring P_i: the copy failed");
    return 0;
}
