/* The BPE model: vocab and merge-rank hash tables, a heap-driven merge loop that only
 * revisits the neighbours of each merge, byte fallback, and a thread-safe cache of the
 * ids of recently seen pre-tokens. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

#define CACHE_MAX_KEY 255 /* the reference caches pre-tokens shorter than 256 characters */

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int lookup_concat(const tok_bpe *bpe, const char *a, size_t an, const char *b, size_t bn,
                         int32_t *id)
{
    char stack[256];
    char *buf = an + bn <= sizeof stack ? stack : malloc(an + bn);
    if (!buf)
        return -1;
    memcpy(buf, a, an);
    memcpy(buf + an, b, bn);
    bool ok = tok_strmap_get(&bpe->vocab, buf, an + bn, id);
    if (buf != stack)
        free(buf);
    return ok ? 0 : 1;
}

int tok_bpe_build(const cJSON *model, tok_bpe *bpe, char *err, size_t errlen)
{
    memset(bpe, 0, sizeof *bpe);
    bpe->unk_id = -1;
    for (int i = 0; i < TOK_CACHE_LOCKS; i++)
        pthread_mutex_init(&bpe->locks[i], NULL);
    if (!cJSON_IsObject(model)) {
        tok_err(err, errlen, "tokenizer.json has no \"model\" object");
        return -1;
    }
    const char *type = jstr(model, "type");
    if (type && strcmp(type, "BPE") != 0) {
        tok_err(err, errlen, "unsupported model type \"%s\" (only BPE is supported)", type);
        return -1;
    }
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsObject(vocab)) {
        tok_err(err, errlen, "model.vocab must be an object of token -> id");
        return -1;
    }
    if (!type && !cJSON_IsArray(merges)) {
        tok_err(err, errlen, "model has no \"type\" and no merges: only BPE models are supported");
        return -1;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab)
    {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 2147483647.0 ||
            e->valuedouble != (double)(int32_t)e->valuedouble) {
            tok_err(err, errlen, "model.vocab: id of token \"%.64s\" is not a non-negative integer",
                    e->string);
            return -1;
        }
        if (tok_strmap_put(&bpe->vocab, e->string, strlen(e->string), (int32_t)e->valuedouble)) {
            tok_err(err, errlen, "out of memory loading the vocab");
            return -1;
        }
    }
    const char *cp = jstr(model, "continuing_subword_prefix");
    const char *eow = jstr(model, "end_of_word_suffix");
    if (cp && *cp) {
        bpe->cont_prefix = strdup(cp);
        bpe->cont_len = strlen(cp);
    }
    if (eow && *eow) {
        bpe->eow_suffix = strdup(eow);
        bpe->eow_len = strlen(eow);
    }
    bpe->byte_fallback = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback"));
    bpe->ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges"));
    const char *unk = jstr(model, "unk_token");
    if (unk && !tok_strmap_get(&bpe->vocab, unk, strlen(unk), &bpe->unk_id)) {
        tok_err(err, errlen, "model.unk_token \"%.64s\" is not in the vocab", unk);
        return -1;
    }
    if (merges && !cJSON_IsArray(merges)) {
        tok_err(err, errlen, "model.merges must be an array");
        return -1;
    }
    int32_t rank = 0;
    cJSON_ArrayForEach(e, merges)
    {
        const char *a, *b;
        size_t an, bn;
        char *tmp = NULL;
        if (cJSON_IsString(e)) {
            const char *sp = strchr(e->valuestring, ' ');
            if (!sp) {
                tok_err(err, errlen, "model.merges[%d] \"%.64s\" is not of the form \"a b\"", rank,
                        e->valuestring);
                return -1;
            }
            a = e->valuestring;
            an = (size_t)(sp - a);
            b = sp + 1;
            const char *sp2 = strchr(b, ' '); /* the reference keeps only the first two parts */
            bn = sp2 ? (size_t)(sp2 - b) : strlen(b);
        } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 &&
                   cJSON_IsString(cJSON_GetArrayItem(e, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(e, 1))) {
            a = cJSON_GetArrayItem(e, 0)->valuestring;
            an = strlen(a);
            b = cJSON_GetArrayItem(e, 1)->valuestring;
            bn = strlen(b);
        } else {
            tok_err(err, errlen, "model.merges[%d] must be \"a b\" or [\"a\", \"b\"]", rank);
            return -1;
        }
        int32_t ia, ib, im;
        if (!tok_strmap_get(&bpe->vocab, a, an, &ia) || !tok_strmap_get(&bpe->vocab, b, bn, &ib)) {
            tok_err(err, errlen,
                    "model.merges[%d] (\"%.*s\" \"%.*s\") uses a token that is not in the vocab",
                    rank, (int)(an > 64 ? 64 : an), a, (int)(bn > 64 ? 64 : bn), b);
            return -1;
        }
        /* with a continuing-subword prefix the merged token drops the right part's prefix */
        const char *bb = b;
        size_t bbn = bn;
        if (bpe->cont_len && bn >= bpe->cont_len &&
            memcmp(b, bpe->cont_prefix, bpe->cont_len) == 0) {
            bb += bpe->cont_len;
            bbn -= bpe->cont_len;
        }
        int r = lookup_concat(bpe, a, an, bb, bbn, &im);
        free(tmp);
        if (r < 0) {
            tok_err(err, errlen, "out of memory");
            return -1;
        }
        if (r > 0) {
            tok_err(err, errlen, "model.merges[%d]: merged token \"%.*s%.*s\" is not in the vocab",
                    rank, (int)(an > 64 ? 64 : an), a, (int)(bbn > 64 ? 64 : bbn), bb);
            return -1;
        }
        if (tok_pairmap_put(&bpe->merges, ia, ib, rank, im)) {
            tok_err(err, errlen, "out of memory");
            return -1;
        }
        rank++;
    }
    for (int32_t c = 0; c < 512; c++) {
        char enc[4];
        size_t k = mhla_utf8_put(enc, c);
        if (!tok_strmap_get(&bpe->vocab, enc, k, &bpe->small_cp_id[c]))
            bpe->small_cp_id[c] = -1;
    }
    bpe->all_byte_tokens = true;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        if (!tok_strmap_get(&bpe->vocab, name, 6, &bpe->byte_token_id[b])) {
            bpe->byte_token_id[b] = -1;
            bpe->all_byte_tokens = false;
        }
    }
    bpe->cache = calloc(TOK_CACHE_SLOTS, sizeof *bpe->cache);
    if (!bpe->cache) {
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

void tok_bpe_free(tok_bpe *bpe)
{
    tok_strmap_free(&bpe->vocab);
    tok_pairmap_free(&bpe->merges);
    free(bpe->eow_suffix);
    free(bpe->cont_prefix);
    if (bpe->cache) {
        for (size_t i = 0; i < TOK_CACHE_SLOTS; i++) {
            free(bpe->cache[i].key);
            free(bpe->cache[i].ids);
        }
        free(bpe->cache);
    }
    for (int i = 0; i < TOK_CACHE_LOCKS; i++)
        pthread_mutex_destroy(&bpe->locks[i]);
    memset(bpe, 0, sizeof *bpe);
}

/* ---- merge loop ---- */

typedef struct {
    int32_t rank, pos, a, b; /* pair (a, b) starting at symbol pos */
} heap_item;

static inline bool heap_less(const heap_item *x, const heap_item *y)
{
    return x->rank < y->rank || (x->rank == y->rank && x->pos < y->pos);
}

static void heap_push(heap_item *h, size_t *n, heap_item it)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&it, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = it;
}

static heap_item heap_pop(heap_item *h, size_t *n)
{
    heap_item top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const heap_item *cur = &last;
        if (l < *n && heap_less(&h[l], cur)) {
            m = l;
            cur = &h[l];
        }
        if (r < *n && heap_less(&h[r], cur))
            m = r;
        if (m == i)
            break;
        h[i] = h[m];
        i = m;
    }
    if (*n)
        h[i] = last;
    return top;
}

typedef struct {
    int32_t id, prev, next;
    uint32_t start, len; /* bytes of the word this symbol covers */
} symbol;

static int emit_unknown(const tok_bpe *bpe, const char *s, size_t n, tok_ids *out)
{
    if (bpe->byte_fallback) {
        bool all = true;
        for (size_t i = 0; i < n; i++)
            all &= bpe->byte_token_id[(unsigned char)s[i]] >= 0;
        if (all) {
            for (size_t i = 0; i < n; i++)
                if (tok_ids_push(out, bpe->byte_token_id[(unsigned char)s[i]]))
                    return -1;
            return 0;
        }
    }
    if (bpe->unk_id >= 0)
        return tok_ids_push(out, bpe->unk_id);
    return 0; /* no unk token: the reference drops the piece */
}

static int merge_word(const tok_bpe *bpe, const char *w, size_t n, tok_ids *out, char *err,
                      size_t errlen)
{
    /* one symbol per character; affixes make the symbol's string differ from the word */
    size_t cap = n + 1;
    symbol *sym = malloc(cap * sizeof *sym);
    heap_item *heap = malloc((3 * cap + 8) * sizeof *heap);
    if (!sym || !heap) {
        free(sym);
        free(heap);
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    size_t ns = 0, i = 0;
    while (i < n) {
        int32_t cp;
        size_t k = mhla_utf8_next(w + i, n - i, &cp);
        bool last = i + k == n, first = i == 0;
        int32_t id = -1;
        if (last && bpe->eow_len) {
            if (lookup_concat(bpe, w + i, k, bpe->eow_suffix, bpe->eow_len, &id) != 0)
                id = -1;
        } else if (!first && bpe->cont_len) {
            if (lookup_concat(bpe, bpe->cont_prefix, bpe->cont_len, w + i, k, &id) != 0)
                id = -1;
        } else if (cp < 512) {
            id = bpe->small_cp_id[cp];
        } else if (!tok_strmap_get(&bpe->vocab, w + i, k, &id)) {
            id = -1;
        }
        sym[ns] = (symbol){id, (int32_t)ns - 1, (int32_t)ns + 1, (uint32_t)i, (uint32_t)k};
        ns++;
        i += k;
    }
    if (ns)
        sym[ns - 1].next = -1;
    size_t hn = 0, hcap = 3 * cap + 8;
    for (size_t s = 0; s + 1 < ns; s++) {
        int32_t r, m;
        if (sym[s].id >= 0 && sym[s + 1].id >= 0 &&
            tok_pairmap_get(&bpe->merges, sym[s].id, sym[s + 1].id, &r, &m))
            heap_push(heap, &hn, (heap_item){r, (int32_t)s, sym[s].id, sym[s + 1].id});
    }
    while (hn) {
        heap_item it = heap_pop(heap, &hn);
        symbol *L = &sym[it.pos];
        if (L->len == 0 || L->id != it.a || L->next < 0)
            continue;
        symbol *R = &sym[L->next];
        if (R->id != it.b)
            continue;
        int32_t r, m;
        if (!tok_pairmap_get(&bpe->merges, it.a, it.b, &r, &m))
            continue;
        L->id = m;
        L->len += R->len;
        R->len = 0;
        L->next = R->next;
        if (R->next >= 0)
            sym[R->next].prev = it.pos;
        if (hn + 2 > hcap)
            continue; /* cannot happen: every merge removes a symbol */
        if (L->prev >= 0 && sym[L->prev].id >= 0 &&
            tok_pairmap_get(&bpe->merges, sym[L->prev].id, L->id, &r, &m))
            heap_push(heap, &hn, (heap_item){r, L->prev, sym[L->prev].id, L->id});
        if (L->next >= 0 && sym[L->next].id >= 0 &&
            tok_pairmap_get(&bpe->merges, L->id, sym[L->next].id, &r, &m))
            heap_push(heap, &hn, (heap_item){r, it.pos, L->id, sym[L->next].id});
    }
    int rc = 0;
    for (int32_t s = ns ? 0 : -1; s >= 0 && rc == 0; s = sym[s].next) {
        if (sym[s].id >= 0) {
            rc = tok_ids_push(out, sym[s].id);
            continue;
        }
        /* unknown: the symbol's string is its bytes plus any affix the word carried */
        mhla_buf t = {0};
        bool first = sym[s].start == 0, last = sym[s].start + sym[s].len == n;
        if (!first && bpe->cont_len)
            rc |= mhla_buf_put(&t, bpe->cont_prefix, bpe->cont_len);
        rc |= mhla_buf_put(&t, w + sym[s].start, sym[s].len);
        if (last && bpe->eow_len)
            rc |= mhla_buf_put(&t, bpe->eow_suffix, bpe->eow_len);
        if (rc == 0)
            rc = emit_unknown(bpe, t.p, t.len, out);
        mhla_buf_free(&t);
    }
    free(sym);
    free(heap);
    if (rc)
        tok_err(err, errlen, "out of memory");
    return rc;
}

int tok_bpe_encode_word(const tok_bpe *bpe, const char *w, size_t n, tok_ids *out, char *err,
                        size_t errlen)
{
    if (n == 0)
        return 0;
    int32_t id;
    if (bpe->ignore_merges && tok_strmap_get(&bpe->vocab, w, n, &id))
        return tok_ids_push(out, id);
    bool cacheable = n <= CACHE_MAX_KEY;
    uint64_t h = 0;
    tok_bpe *mut =
        (tok_bpe *)bpe; /* the cache is the only mutable state; guarded by the stripe locks */
    if (cacheable) {
        h = tok_hash_bytes(w, n);
        size_t slot = h % TOK_CACHE_SLOTS;
        pthread_mutex_t *lk = &mut->locks[slot % TOK_CACHE_LOCKS];
        pthread_mutex_lock(lk);
        tok_cache_slot *cs = &mut->cache[slot];
        if (cs->key && cs->hash == h && cs->klen == n && memcmp(cs->key, w, n) == 0) {
            int rc = 0;
            for (uint32_t k = 0; k < cs->n && rc == 0; k++)
                rc = tok_ids_push(out, cs->ids[k]);
            pthread_mutex_unlock(lk);
            if (rc)
                tok_err(err, errlen, "out of memory");
            return rc;
        }
        pthread_mutex_unlock(lk);
    }
    size_t before = out->n;
    if (merge_word(bpe, w, n, out, err, errlen))
        return -1;
    if (cacheable) {
        size_t cnt = out->n - before;
        char *key = malloc(n);
        int32_t *ids = malloc((cnt ? cnt : 1) * sizeof *ids);
        if (!key || !ids) {
            free(key);
            free(ids);
            return 0;
        } /* caching is optional */
        memcpy(key, w, n);
        memcpy(ids, out->v + before, cnt * sizeof *ids);
        size_t slot = h % TOK_CACHE_SLOTS;
        pthread_mutex_t *lk = &mut->locks[slot % TOK_CACHE_LOCKS];
        pthread_mutex_lock(lk);
        tok_cache_slot *cs = &mut->cache[slot];
        free(cs->key);
        free(cs->ids);
        *cs = (tok_cache_slot){h, key, (uint32_t)n, ids, (uint32_t)cnt};
        pthread_mutex_unlock(lk);
    }
    return 0;
}
