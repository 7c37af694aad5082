/*
 * disk_format.c — the disk tier's file header: what a file must say before
 * its bytes are trusted. A file is valid for a block only when its format
 * version, model fingerprint (model, weight format, device), state layout
 * (geometry, dtype, page size), key and token count are this pool's and the
 * block's; the tokens and the checksum are checked by the reader.
 */
#include "disk.h"

#include <string.h>
#include <xxhash.h>

uint64_t kv_hash64(uint64_t seed, const void *data, size_t n)
{
    return XXH3_64bits_withSeed(data, n, seed);
}

static void geo_fields(const kv_geometry *g, int32_t out[7])
{
    int32_t v[7] = {g->layers,       g->kv_heads,   g->dk,      g->dv,
                    g->block_tokens, g->max_blocks, g->key_sums};
    memcpy(out, v, sizeof v);
}

void kvd_header_fill(const kv_disk *d, uint64_t key, int n_tokens, kvd_header *h)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, KVD_MAGIC, 8);
    h->version = KVD_VERSION;
    h->dtype = (uint32_t)d->dtype;
    h->fingerprint = d->fingerprint;
    h->key = key;
    geo_fields(&d->geo, h->geo);
    h->n_tokens = n_tokens;
    h->page_bytes = d->page_bytes;
}

uint64_t kvd_file_bytes(const kv_disk *d, int n_tokens)
{
    return sizeof(kvd_header) + (uint64_t)n_tokens * sizeof(int32_t) + d->page_bytes +
           sizeof(uint64_t);
}

int kvd_header_check(const kv_disk *d, const kvd_header *h, uint64_t key, int n_tokens,
                     kv_error *err)
{
    if (memcmp(h->magic, KVD_MAGIC, 8) != 0)
        return kv_fail(err, "not a state page file (bad magic)");
    if (h->version != KVD_VERSION)
        return kv_fail(err, "format version %u, this build reads version %u", h->version,
                       KVD_VERSION);
    if (h->fingerprint != d->fingerprint)
        return kv_fail(err,
                       "written for another model or device (fingerprint %016llx, ours %016llx)",
                       (unsigned long long)h->fingerprint, (unsigned long long)d->fingerprint);
    int32_t geo[7];
    geo_fields(&d->geo, geo);
    if (memcmp(h->geo, geo, sizeof geo) != 0 || h->dtype != (uint32_t)d->dtype ||
        h->page_bytes != d->page_bytes)
        return kv_fail(err, "another state layout (geometry, page dtype or page size)");
    if (h->key != key || h->n_tokens != n_tokens)
        return kv_fail(err, "the file holds another block (key %016llx, %d tokens)",
                       (unsigned long long)h->key, h->n_tokens);
    return 0;
}
