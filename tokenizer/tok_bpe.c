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

/* The model object, BPE (or untyped with merges), with a vocab object. */
static int check_model(const cJSON *model, char *err, size_t errlen)
{
    if (!cJSON_IsObject(model)) {
        tok_err(err, errlen, "tokenizer.json has no \"model\" object");
        return -1;
    }
    const char *type = jstr(model, "type");
    if (type && strcmp(type, "BPE") != 0) {
        tok_err(err, errlen, "unsupported model type \"%s\" (only BPE is supported)", type);
        return -1;
    }
    if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(model, "vocab"))) {
        tok_err(err, errlen, "model.vocab must be an object of token -> id");
        return -1;
    }
    if (!type && !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(model, "merges"))) {
        tok_err(err, errlen, "model has no \"type\" and no merges: only BPE models are supported");
        return -1;
    }
    return 0;
}

static int load_vocab(tok_bpe *bpe, const cJSON *vocab, char *err, size_t errlen)
{
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
    return 0;
}

/* A copy of the model's non-empty string at key (NULL when absent or empty). */
static int affix(const cJSON *model, const char *key, char **out, size_t *len, char *err,
                 size_t errlen)
{
    const char *s = jstr(model, key);
    if (!s || !*s)
        return 0;
    *out = strdup(s);
    if (!*out) {
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    *len = strlen(s);
    return 0;
}

static int load_options(tok_bpe *bpe, const cJSON *model, char *err, size_t errlen)
{
    if (affix(model, "continuing_subword_prefix", &bpe->cont_prefix, &bpe->cont_len, err, errlen) ||
        affix(model, "end_of_word_suffix", &bpe->eow_suffix, &bpe->eow_len, err, errlen))
        return -1;
    bpe->byte_fallback = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "byte_fallback"));
    bpe->ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges"));
    const char *unk = jstr(model, "unk_token");
    if (unk && !tok_strmap_get(&bpe->vocab, unk, strlen(unk), &bpe->unk_id)) {
        tok_err(err, errlen, "model.unk_token \"%.64s\" is not in the vocab", unk);
        return -1;
    }
    return 0;
}

/* The two tokens of a merge written "a b" or ["a", "b"]. */
static int merge_parts(const cJSON *e, int32_t rank, const char **a, size_t *an, const char **b,
                       size_t *bn, char *err, size_t errlen)
{
    if (cJSON_IsString(e)) {
        const char *sp = strchr(e->valuestring, ' ');
        if (!sp) {
            tok_err(err, errlen, "model.merges[%d] \"%.64s\" is not of the form \"a b\"", rank,
                    e->valuestring);
            return -1;
        }
        *a = e->valuestring;
        *an = (size_t)(sp - *a);
        *b = sp + 1;
        const char *sp2 = strchr(*b, ' '); /* the reference keeps only the first two parts */
        *bn = sp2 ? (size_t)(sp2 - *b) : strlen(*b);
        return 0;
    }
    if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 &&
        cJSON_IsString(cJSON_GetArrayItem(e, 0)) && cJSON_IsString(cJSON_GetArrayItem(e, 1))) {
        *a = cJSON_GetArrayItem(e, 0)->valuestring;
        *an = strlen(*a);
        *b = cJSON_GetArrayItem(e, 1)->valuestring;
        *bn = strlen(*b);
        return 0;
    }
    tok_err(err, errlen, "model.merges[%d] must be \"a b\" or [\"a\", \"b\"]", rank);
    return -1;
}

#define SHOWN(n) (int)((n) > 64 ? 64 : (n)) /* at most 64 bytes of a token in a message */

/* Merge number rank: both tokens and the merged one must be in the vocab. */
static int load_merge(tok_bpe *bpe, const cJSON *e, int32_t rank, char *err, size_t errlen)
{
    const char *a, *b;
    size_t an, bn;
    int32_t ia, ib, im;
    if (merge_parts(e, rank, &a, &an, &b, &bn, err, errlen))
        return -1;
    if (!tok_strmap_get(&bpe->vocab, a, an, &ia) || !tok_strmap_get(&bpe->vocab, b, bn, &ib)) {
        tok_err(err, errlen,
                "model.merges[%d] (\"%.*s\" \"%.*s\") uses a token that is not in the vocab", rank,
                SHOWN(an), a, SHOWN(bn), b);
        return -1;
    }
    /* with a continuing-subword prefix the merged token drops the right part's prefix */
    if (bpe->cont_len && bn >= bpe->cont_len && memcmp(b, bpe->cont_prefix, bpe->cont_len) == 0) {
        b += bpe->cont_len;
        bn -= bpe->cont_len;
    }
    int r = lookup_concat(bpe, a, an, b, bn, &im);
    if (r > 0)
        tok_err(err, errlen, "model.merges[%d]: merged token \"%.*s%.*s\" is not in the vocab",
                rank, SHOWN(an), a, SHOWN(bn), b);
    else if (r < 0 || tok_pairmap_put(&bpe->merges, ia, ib, rank, im))
        tok_err(err, errlen, "out of memory");
    else
        return 0;
    return -1;
}

static int load_merges(tok_bpe *bpe, const cJSON *merges, char *err, size_t errlen)
{
    if (merges && !cJSON_IsArray(merges)) {
        tok_err(err, errlen, "model.merges must be an array");
        return -1;
    }
    int32_t rank = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, merges)
    {
        if (load_merge(bpe, e, rank, err, errlen))
            return -1;
        rank++;
    }
    return 0;
}

/* Direct tables for the commonest lookups: one-character tokens below U+0200 and the
 * <0xAB> byte tokens of byte fallback. */
static void index_chars(tok_bpe *bpe)
{
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
}

int tok_bpe_build(const cJSON *model, tok_bpe *bpe, char *err, size_t errlen)
{
    memset(bpe, 0, sizeof *bpe);
    bpe->unk_id = -1;
    for (int i = 0; i < TOK_CACHE_LOCKS; i++)
        pthread_mutex_init(&bpe->locks[i], NULL);
    if (check_model(model, err, errlen) ||
        load_vocab(bpe, cJSON_GetObjectItemCaseSensitive(model, "vocab"), err, errlen) ||
        load_options(bpe, model, err, errlen) ||
        load_merges(bpe, cJSON_GetObjectItemCaseSensitive(model, "merges"), err, errlen))
        return -1;
    index_chars(bpe);
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

/* One symbol per character of w, with the id of its token: a character at the end carries
 * the end-of-word suffix, any other but the first the continuing-subword prefix. Returns
 * the number of symbols, linked in order. */
static size_t word_symbols(const tok_bpe *bpe, const char *w, size_t n, symbol *sym)
{
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
    return ns;
}

/* Queues the pair of symbol pos and the one after it when the merges have it. */
static void queue_pair(const tok_bpe *bpe, const symbol *sym, int32_t pos, heap_item *heap,
                       size_t *hn)
{
    int32_t r, m, next = sym[pos].next;
    if (next >= 0 && sym[pos].id >= 0 && sym[next].id >= 0 &&
        tok_pairmap_get(&bpe->merges, sym[pos].id, sym[next].id, &r, &m))
        heap_push(heap, hn, (heap_item){r, pos, sym[pos].id, sym[next].id});
}

/* Applies merges lowest rank first (leftmost on ties), as the reference does; a merge
 * only re-queues the pairs its new symbol forms with its neighbours. */
static void merge_symbols(const tok_bpe *bpe, symbol *sym, size_t ns, heap_item *heap, size_t hcap)
{
    size_t hn = 0;
    for (size_t s = 0; s + 1 < ns; s++)
        queue_pair(bpe, sym, (int32_t)s, heap, &hn);
    while (hn) {
        heap_item it = heap_pop(heap, &hn);
        symbol *L = &sym[it.pos];
        if (L->len == 0 || L->id != it.a || L->next < 0)
            continue; /* stale: a symbol of the pair was merged since */
        symbol *R = &sym[L->next];
        int32_t r, m;
        if (R->id != it.b || !tok_pairmap_get(&bpe->merges, it.a, it.b, &r, &m))
            continue;
        L->id = m;
        L->len += R->len;
        R->len = 0;
        L->next = R->next;
        if (R->next >= 0)
            sym[R->next].prev = it.pos;
        if (hn + 2 > hcap)
            continue; /* cannot happen: every merge removes a symbol */
        if (L->prev >= 0)
            queue_pair(bpe, sym, L->prev, heap, &hn);
        queue_pair(bpe, sym, it.pos, heap, &hn);
    }
}

/* The ids of the merged symbols; a symbol without a token goes through emit_unknown. */
static int emit_symbols(const tok_bpe *bpe, const char *w, size_t n, const symbol *sym, size_t ns,
                        tok_ids *out)
{
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
    return rc;
}

static int merge_word(const tok_bpe *bpe, const char *w, size_t n, tok_ids *out, char *err,
                      size_t errlen)
{
    size_t cap = n + 1, hcap = 3 * cap + 8;
    symbol *sym = malloc(cap * sizeof *sym);
    heap_item *heap = malloc(hcap * sizeof *heap);
    int rc = -1;
    if (sym && heap) {
        size_t ns = word_symbols(bpe, w, n, sym);
        merge_symbols(bpe, sym, ns, heap, hcap);
        rc = emit_symbols(bpe, w, n, sym, ns, out);
    }
    free(sym);
    free(heap);
    if (rc)
        tok_err(err, errlen, "out of memory");
    return rc;
}

/* The cache slot of a pre-token with hash h, and the lock that guards it. The cache is the
 * tokenizer's only mutable state, shared by every thread that encodes. */
static tok_cache_slot *cache_slot(const tok_bpe *bpe, uint64_t h, pthread_mutex_t **lock)
{
    tok_bpe *mut = (tok_bpe *)bpe;
    size_t slot = h % TOK_CACHE_SLOTS;
    *lock = &mut->locks[slot % TOK_CACHE_LOCKS];
    return &mut->cache[slot];
}

/* Appends the cached ids of w: 1 when cached, 0 when not, -1 when out of memory. */
static int cache_get(const tok_bpe *bpe, uint64_t h, const char *w, size_t n, tok_ids *out)
{
    pthread_mutex_t *lk;
    tok_cache_slot *cs = cache_slot(bpe, h, &lk);
    int rc = 0;
    pthread_mutex_lock(lk);
    if (cs->key && cs->hash == h && cs->klen == n && memcmp(cs->key, w, n) == 0) {
        for (uint32_t k = 0; k < cs->n && rc == 0; k++)
            rc = tok_ids_push(out, cs->ids[k]);
        rc = rc ? -1 : 1;
    }
    pthread_mutex_unlock(lk);
    return rc;
}

/* Remembers the n_ids ids of w (caching is optional: nothing happens without memory). */
static void cache_put(const tok_bpe *bpe, uint64_t h, const char *w, size_t n, const int32_t *ids,
                      size_t n_ids)
{
    char *key = malloc(n);
    int32_t *copy = malloc((n_ids ? n_ids : 1) * sizeof *copy);
    if (!key || !copy) {
        free(key);
        free(copy);
        return;
    }
    memcpy(key, w, n);
    memcpy(copy, ids, n_ids * sizeof *copy);
    pthread_mutex_t *lk;
    tok_cache_slot *cs = cache_slot(bpe, h, &lk);
    pthread_mutex_lock(lk);
    free(cs->key);
    free(cs->ids);
    *cs = (tok_cache_slot){h, key, (uint32_t)n, copy, (uint32_t)n_ids};
    pthread_mutex_unlock(lk);
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
    uint64_t h = cacheable ? tok_hash_bytes(w, n) : 0;
    int hit = cacheable ? cache_get(bpe, h, w, n, out) : 0;
    if (hit < 0)
        tok_err(err, errlen, "out of memory");
    if (hit)
        return hit < 0 ? -1 : 0;
    size_t before = out->n;
    if (merge_word(bpe, w, n, out, err, errlen))
        return -1;
    if (cacheable)
        cache_put(bpe, h, w, n, out->v + before, out->n - before);
    return 0;
}
