/*
 * state_pool.c — the engine's state memory as the server sees it: pooled
 * sequences, counters, the prefix cache's test hook. The pool itself is
 * kvstate's; each mhla_engine owns one (forward.c creates it).
 */
#include "internal.h"

int mhla_engine_seq_create(mhla_engine *e, mhla_seq **out, mhla_error *err)
{
    return mhla_seq_create_in(mhla_engine_model(e), mhla_engine_state_pool(e), mhla_engine_cuda(e),
                              out, err);
}

void mhla_engine_state_stats(const mhla_engine *e, mhla_state_stats *out)
{
    kv_stats k;
    kv_pool_stats(mhla_engine_state_pool(e), &k);
    out->page_bytes = k.page_bytes;
    out->pages_total = k.pages_total;
    out->pages_used = k.pages_used;
    out->pages_cached = k.pages_cached;
    out->pages_free = k.pages_free;
    out->pages_reserved = k.pages_reserved;
    out->pages_available = k.pages_available;
    out->prefix_hits = k.hits;
    out->prefix_misses = k.misses;
    out->evictions = k.evictions;
    out->resumes = k.resumes;
    out->resumed_tokens = k.resumed_tokens;
}

void mhla_engine_set_prefix_hash_bits(mhla_engine *e, int bits)
{
    kv_pool_set_hash_bits(mhla_engine_state_pool(e), bits);
}
