/*
 * seq_match.c — a fresh sequence takes the longest state the pool holds for
 * its prompt: whole blocks from the prefix cache, then from the disk tier
 * (read by the tier's loader thread while the caller goes on, pool_disk.c),
 * then a resume entry's rows of a partial block.
 */
#include "kvstate_internal.h"

#include <stdlib.h>
#include <string.h>

/* Attaches the cached page of block nb (prefix key key) to s. 0, or -1
 * when memory does not hold it (or the pool cannot spare an evictable page). */
static int attach_cached(kv_seq *s, const int32_t *tokens, int nb, uint64_t key)
{
    kv_pool *p = s->pool;
    int n_tok = (nb + 1) * p->opt.geo.block_tokens;
    int32_t q = kv_index_find(p, key, tokens, n_tok);
    if (q < 0)
        return -1;
    if (p->pg[q].state == PG_CACHED) {
        /* Taking an evictable page costs availability: use the
         * sequence's reservation, or what is left beyond everyone's. */
        if (s->reserved > 0) {
            s->reserved--;
            p->n_reserved--;
        } else if (kv_pool_available(p) < 1) {
            return -1;
        }
    }
    kv_page_ref(p, q); /* off the LRU list; back at its tail when released */
    s->table[nb] = q;
    s->keys[nb] = key;
    s->n_pages = nb + 1;
    p->ctr.hits++;
    return 0;
}

/* The same from memory, else at once from the disk tier (a pool in a
 * device's memory, whose pages the loader cannot read into). */
static int attach_block(kv_seq *s, const int32_t *tokens, int nb, uint64_t key, int sync_disk)
{
    kv_pool *p = s->pool;
    if (attach_cached(s, tokens, nb, key) == 0)
        return 0;
    int n_tok = (nb + 1) * p->opt.geo.block_tokens;
    int32_t q = sync_disk ? kv_disk_load_block(p, s, key, tokens, n_tok) : -1;
    if (q < 0)
        return -1;
    s->table[nb] = q; /* held by s already */
    s->keys[nb] = key;
    s->n_pages = nb + 1;
    return 0;
}

/* Blocks from nb on while memory (or a synchronous disk) has them; the
 * blocks attached in all. */
static int attach_from(kv_seq *s, const int32_t *tokens, int limit, int nb, int sync_disk)
{
    int C = s->pool->opt.geo.block_tokens;
    for (; (nb + 1) * C <= limit; nb++) {
        uint64_t key = kv_block_key(nb ? s->keys[nb - 1] : 0, tokens + (size_t)nb * C, C);
        if (attach_block(s, tokens, nb, key, sync_disk)) {
            s->pool->ctr.misses++;
            break;
        }
    }
    return nb;
}

/* After nb whole blocks: a resume entry's partial block, then the position. */
static int match_tail(kv_seq *s, const int32_t *tokens, int limit, int nb)
{
    kv_pool *p = s->pool;
    int C = p->opt.geo.block_tokens;
    int pos = nb * C;
    kv_resume_entry *e = kv_resume_find(p, tokens, limit, nb);
    if (e && kv_rows_unpack(p, e->rows, e->pos % C, &s->b) == 0) {
        e->last_used = ++p->clock;
        pos = e->pos;
        p->ctr.resumes++;
    }
    memcpy(s->tokens, tokens, (size_t)pos * sizeof *tokens);
    s->pos = pos;
    p->ctr.resumed_tokens += (uint64_t)pos;
    return pos;
}

int kv_seq_match_start(kv_seq *s, const int32_t *tokens, int n, kv_error *err)
{
    kv_pool *p = s->pool;
    const kv_geometry *g = &p->opt.geo;
    int C = g->block_tokens;
    if (s->pos != 0 || s->n_pages != 0 || s->load)
        return kv_fail(err, "prefix match on a sequence that already holds %d tokens", s->pos);
    if (n < 0 || (n > 0 && !tokens))
        return kv_fail(err, "prefix match: no tokens");
    if (!p->bounded || n < 2)
        return 0;
    int limit = n - 1, ctx = g->max_blocks * C;
    if (limit > ctx)
        limit = ctx;
    int nb = 0;
    for (; (nb + 1) * C <= limit; nb++) {
        uint64_t key = kv_block_key(nb ? s->keys[nb - 1] : 0, tokens + (size_t)nb * C, C);
        if (attach_cached(s, tokens, nb, key))
            break;
    }
    if ((nb + 1) * C > limit)
        return match_tail(s, tokens, limit, nb);
    if (!p->disk || !kv_disk_async(p))
        return match_tail(s, tokens, limit, attach_from(s, tokens, limit, nb, p->disk != NULL));
    if (kv_disk_load_start(s, tokens, limit, nb) > 0)
        return nb * C; /* the rest when the load is done: kv_seq_match_poll */
    p->ctr.misses++;
    return match_tail(s, tokens, limit, nb);
}

int kv_seq_loading(const kv_seq *s) { return s->load != NULL; }

int kv_seq_match_poll(kv_seq *s, int wait)
{
    if (!s->load)
        return s->pos;
    if (!kv_disk_load_ready(s, wait))
        return KV_STILL_LOADING;
    int limit;
    int32_t *tokens = kv_disk_load_finish(s, &limit);
    if (!tokens)
        return s->pos; /* cannot happen: finish keeps the tokens of a load */
    int nb = attach_from(s, tokens, limit, s->n_pages, 0);
    int pos = match_tail(s, tokens, limit, nb);
    free(tokens);
    return pos;
}

int kv_seq_match(kv_seq *s, const int32_t *tokens, int n, kv_error *err)
{
    int pos = kv_seq_match_start(s, tokens, n, err);
    return pos < 0 || !s->load ? pos : kv_seq_match_poll(s, 1);
}
