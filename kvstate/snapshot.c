/*
 * snapshot.c — one sequence's state in a file, to move a conversation
 * between processes or keep it across restarts.
 *
 * Layout (native byte order, little-endian on every supported machine):
 *   "MHLAKVSN"  u32 version  u32 dtype  u64 model fingerprint
 *   i32 layers, kv_heads, dk, dv, block_tokens, max_blocks, key_sums
 *   i32 pos
 *   i32 tokens[pos]
 *   pages: (pos / C) * page_bytes, in the pool's dtype
 *   the partial block's rows: kv_rows_floats(pos % C) f32
 *   u64 FNV-1a of every byte before it
 * P_i is not stored: it is a function of the pages (the caller remixes it).
 */
#include "kvstate_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SNAP_MAGIC "MHLAKVSN"
#define SNAP_VERSION 1u

typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t dtype;
    uint64_t fingerprint;
    int32_t geo[7];
    int32_t pos;
} snap_header;

static void geo_fields(const kv_geometry *g, int32_t out[7])
{
    int32_t v[7] = {g->layers,       g->kv_heads,   g->dk,      g->dv,
                    g->block_tokens, g->max_blocks, g->key_sums};
    memcpy(out, v, sizeof v);
}

static size_t body_bytes(const kv_pool *p, int pos)
{
    const kv_geometry *g = &p->opt.geo;
    int C = g->block_tokens;
    return (size_t)pos * sizeof(int32_t) + (size_t)(pos / C) * p->page_bytes +
           kv_rows_floats(g, pos % C) * sizeof(float);
}

/* The file's header for sequence s. */
static void fill_header(const kv_seq *s, uint64_t fingerprint, snap_header *h)
{
    const kv_pool *p = s->pool;
    memset(h, 0, sizeof *h);
    memcpy(h->magic, SNAP_MAGIC, 8);
    h->version = SNAP_VERSION;
    h->dtype = (uint32_t)p->opt.dtype;
    h->fingerprint = fingerprint;
    geo_fields(&p->opt.geo, h->geo);
    h->pos = s->pos;
}

/* Header, tokens, the finished blocks' pages (staged through host memory:
 * the pool's may be a device's), the open block's rows, the checksum.
 * Returns 1 when every write succeeded. */
static int write_body(const kv_seq *s, const snap_header *h, const float *rows, size_t rb,
                      void *stage, FILE *f)
{
    const kv_pool *p = s->pool;
    int nb = s->pos / p->opt.geo.block_tokens;
    uint64_t sum = kv_fnv1a(KV_FNV_SEED, h, sizeof *h);
    int ok = fwrite(h, sizeof *h, 1, f) == 1;
    sum = kv_fnv1a(sum, s->tokens, (size_t)s->pos * sizeof(int32_t));
    ok = ok && fwrite(s->tokens, sizeof(int32_t), (size_t)s->pos, f) == (size_t)s->pos;
    for (int b = 0; ok && b < nb; b++) {
        ok = kv_mem_copy(p, stage, p->pg[s->table[b]].data, p->page_bytes, KV_COPY_TO_HOST) == 0;
        sum = kv_fnv1a(sum, stage, p->page_bytes);
        ok = ok && fwrite(stage, p->page_bytes, 1, f) == 1;
    }
    sum = kv_fnv1a(sum, rows, rb);
    ok = ok && (rb == 0 || fwrite(rows, rb, 1, f) == 1);
    return ok && fwrite(&sum, sizeof sum, 1, f) == 1;
}

int kv_seq_save(const kv_seq *s, uint64_t fingerprint, const char *path, kv_error *err)
{
    const kv_pool *p = s->pool;
    const kv_geometry *g = &p->opt.geo;
    int C = g->block_tokens, nb = s->pos / C, r = s->pos % C;
    if (s->n_pages < nb)
        return kv_fail(err, "snapshot: sequence at position %d holds only %d pages", s->pos,
                       s->n_pages);
    snap_header h;
    fill_header(s, fingerprint, &h);
    size_t rb = kv_rows_floats(g, r) * sizeof(float);
    float *rows = malloc(rb + 1);
    void *stage = malloc(p->page_bytes);
    int rc = 0;
    FILE *f = NULL;
    if (!rows || !stage)
        rc = kv_fail_as(err, KV_ERR_NOMEM, "snapshot: out of memory");
    else if (kv_rows_pack(p, &s->b, r, rows))
        rc = kv_fail(err, "snapshot: reading the sequence's rows failed");
    else if (!(f = fopen(path, "wb")))
        rc = kv_fail_as(err, KV_ERR_IO, "snapshot: cannot create '%s': %s", path, strerror(errno));
    else if (!(write_body(s, &h, rows, rb, stage, f) & (fclose(f) == 0))) /* both, always */
        rc = kv_fail_as(err, KV_ERR_IO, "snapshot: writing '%s' failed: %s", path, strerror(errno));
    free(rows);
    free(stage);
    return rc;
}

/* The header of a file of len bytes: magic, version, model, geometry,
 * position and size; -1 with err naming what is wrong. */
static int check_header(const kv_pool *p, uint64_t fingerprint, const char *path,
                        const unsigned char *buf, size_t len, snap_header *h, kv_error *err)
{
    const kv_geometry *g = &p->opt.geo;
    if (len < 8 || memcmp(buf, SNAP_MAGIC, 8) != 0)
        return kv_fail(err, "snapshot '%s': not a state snapshot (bad magic)", path);
    if (len < sizeof *h)
        return kv_fail(err, "snapshot '%s': truncated header (%zu bytes)", path, len);
    memcpy(h, buf, sizeof *h);
    if (h->version != SNAP_VERSION)
        return kv_fail(err, "snapshot '%s': format version %u, this build reads version %u", path,
                       h->version, SNAP_VERSION);
    if (h->fingerprint != fingerprint)
        return kv_fail(err,
                       "snapshot '%s': written for another model (fingerprint %016llx, this model "
                       "%016llx)",
                       path, (unsigned long long)h->fingerprint, (unsigned long long)fingerprint);
    int32_t geo[7];
    geo_fields(g, geo);
    if (memcmp(h->geo, geo, sizeof geo) != 0 || h->dtype != (uint32_t)p->opt.dtype)
        return kv_fail(err,
                       "snapshot '%s': state geometry or page dtype (%s) differs from this pool's "
                       "(%s)",
                       path, h->dtype == KV_DTYPE_BF16 ? "bf16" : "f32",
                       p->opt.dtype == KV_DTYPE_BF16 ? "bf16" : "f32");
    if (h->pos < 0 || h->pos > g->max_blocks * g->block_tokens)
        return kv_fail(err, "snapshot '%s': position %d outside the context", path, h->pos);
    size_t want = sizeof *h + body_bytes(p, h->pos) + sizeof(uint64_t);
    if (len != want)
        return kv_fail(err,
                       "snapshot '%s': %zu bytes, a snapshot at position %d has %zu (truncated "
                       "or trailing data)",
                       path, len, h->pos, want);
    uint64_t sum;
    memcpy(&sum, buf + len - sizeof sum, sizeof sum);
    if (kv_fnv1a(KV_FNV_SEED, buf, len - sizeof sum) != sum)
        return kv_fail(err, "snapshot '%s': checksum mismatch (corrupt file)", path);
    return 0;
}

/* Tokens, pages and rows of a checked file into the fresh sequence s. */
static int restore_body(kv_seq *s, const snap_header *h, const unsigned char *q, const char *path,
                        kv_error *err)
{
    kv_pool *p = s->pool;
    const kv_geometry *g = &p->opt.geo;
    int nb = h->pos / g->block_tokens, r = h->pos % g->block_tokens;
    if (kv_seq_ensure_pages(s, nb, err))
        return -1;
    memcpy(s->tokens, q, (size_t)h->pos * sizeof(int32_t));
    q += (size_t)h->pos * sizeof(int32_t);
    for (int b = 0; b < nb; b++, q += p->page_bytes)
        if (kv_mem_copy(p, p->pg[s->table[b]].data, q, p->page_bytes, KV_COPY_FROM_HOST))
            return kv_fail(err, "snapshot '%s': copying a page into state memory failed", path);
    float *rows = malloc(kv_rows_floats(g, r) * sizeof(float) + 1);
    if (!rows)
        return kv_fail_as(err, KV_ERR_NOMEM, "snapshot: out of memory");
    memcpy(rows, q, kv_rows_floats(g, r) * sizeof(float));
    int bad_rows = kv_rows_unpack(p, rows, r, &s->b);
    free(rows);
    if (bad_rows)
        return kv_fail(err, "snapshot '%s': copying the rows into state memory failed", path);
    s->pos = h->pos;
    /* The checksum catches corruption, not forgery: nothing a loaded
     * sequence computes is published, so a file can never put state into
     * other requests. */
    s->loaded = 1;
    kv_seq_publish_blocks(s, 0, nb, 0);
    return 0;
}

/* The file's first max + 1 bytes at most: a longer one is then refused by
 * its size, after its header has said whose snapshot it is. */
static int read_at_most(const char *path, size_t max, unsigned char **out, size_t *len,
                        kv_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return kv_fail_as(err, KV_ERR_IO, "snapshot: cannot open '%s': %s", path, strerror(errno));
    unsigned char *buf = malloc(max + 1);
    if (!buf) {
        fclose(f);
        return kv_fail_as(err, KV_ERR_NOMEM, "snapshot: out of memory");
    }
    size_t n = fread(buf, 1, max + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return kv_fail_as(err, KV_ERR_IO, "snapshot: reading '%s' failed", path);
    }
    *out = buf;
    *len = n;
    return 0;
}

int kv_seq_load(kv_seq *s, uint64_t fingerprint, const char *path, kv_error *err)
{
    kv_pool *p = s->pool;
    const kv_geometry *g = &p->opt.geo;
    int C = g->block_tokens;
    if (s->pos != 0 || s->n_pages != 0)
        return kv_fail(err, "snapshot: load into a sequence that already holds %d tokens", s->pos);
    size_t max = sizeof(snap_header) + body_bytes(p, g->max_blocks * C - 1) + sizeof(uint64_t);
    size_t mx2 = sizeof(snap_header) + body_bytes(p, g->max_blocks * C) + sizeof(uint64_t);
    if (mx2 > max)
        max = mx2;
    unsigned char *buf = NULL;
    size_t len = 0;
    if (read_at_most(path, max, &buf, &len, err))
        return -1;
    snap_header h;
    int rc = check_header(p, fingerprint, path, buf, len, &h, err) ||
                     restore_body(s, &h, buf + sizeof h, path, err)
                 ? -1
                 : 0;
    free(buf);
    return rc;
}
