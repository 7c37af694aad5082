/* Byte-level BPE training: GPT-2 pre-tokenization of the input files, word counts, then
 * repeatedly merge the most frequent adjacent pair (ties: the pair of older tokens) until
 * the vocabulary is full. Writes a tokenizer.json the reference implementation loads. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

typedef struct {
    int32_t *sym; /* current symbol ids */
    size_t n;
    int64_t count;
} word;

typedef struct {
    uint64_t *key; /* UINT64_MAX = empty */
    int64_t *count;
    size_t cap;
} pair_counts;

static int pc_init(pair_counts *p, size_t cap)
{
    p->cap = cap;
    p->key = malloc(cap * sizeof *p->key);
    p->count = calloc(cap, sizeof *p->count);
    if (!p->key || !p->count)
        return -1;
    memset(p->key, 0xFF, cap * sizeof *p->key);
    return 0;
}

static int pc_add(pair_counts *p, uint64_t k, int64_t c)
{
    size_t j = (size_t)((k * 0x9E3779B97F4A7C15ULL) >> 20) & (p->cap - 1);
    for (size_t probes = 0; probes < p->cap; probes++) {
        if (p->key[j] == k) {
            p->count[j] += c;
            return 0;
        }
        if (p->key[j] == UINT64_MAX) {
            p->key[j] = k;
            p->count[j] = c;
            return 0;
        }
        j = (j + 1) & (p->cap - 1);
    }
    return -1;
}

typedef struct {
    tok_strmap index; /* piece -> word index */
    word *words;
    size_t n_words, cap_words;
} counter;

static int count_piece(counter *c, const char *s, size_t n)
{
    int32_t idx;
    if (tok_strmap_get(&c->index, s, n, &idx)) {
        c->words[idx].count++;
        return 0;
    }
    if (c->n_words == c->cap_words) {
        size_t cap = c->cap_words ? c->cap_words * 2 : 1024;
        word *w = realloc(c->words, cap * sizeof *w);
        if (!w)
            return -1;
        c->words = w;
        c->cap_words = cap;
    }
    /* symbols start as single bytes: ids 1..256 are the byte characters (0 is <|endoftext|>) */
    word *w = &c->words[c->n_words];
    w->sym = malloc((n + 1) * sizeof *w->sym);
    if (!w->sym)
        return -1;
    w->n = 0;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        i += mhla_utf8_next(s + i, n - i, &cp);
        w->sym[w->n++] = 1 + tok_cp_to_byte(cp);
    }
    w->count = 1;
    if (tok_strmap_put(&c->index, s, n, (int32_t)c->n_words)) {
        free(w->sym); /* not counted in n_words: nobody else frees it */
        return -1;
    }
    c->n_words++;
    return 0;
}

int mhla_tok_train_bpe(const char *const *files, size_t n_files, size_t vocab_size,
                       const char *out_path, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    if (vocab_size < 257 || vocab_size > 1000000) {
        tok_err(err, errlen,
                "vocab size must be between 257 (256 bytes + <|endoftext|>) and 1000000, got %zu",
                vocab_size);
        return -1;
    }
    int rc = -1;
    counter c = {0};
    tok_pretok *pt = NULL;
    mhla_buf *tokstr = NULL; /* id -> byte-level string */
    cJSON *root = NULL, *merges = NULL;
    char *json = NULL;
    size_t n_tok = 0;
    cJSON *jpre =
        cJSON_Parse("{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}");
    if (!jpre || tok_pretok_build(jpre, &pt, err, errlen)) {
        cJSON_Delete(jpre);
        goto done;
    }
    cJSON_Delete(jpre);
    for (size_t f = 0; f < n_files; f++) {
        FILE *fp = fopen(files[f], "rb");
        if (!fp) {
            tok_err(err, errlen, "cannot open %s", files[f]);
            goto done;
        }
        mhla_buf raw = {0}, clean = {0};
        char chunk[65536];
        size_t r;
        int bad = 0, nomem = 0;
        while ((r = fread(chunk, 1, sizeof chunk, fp)) > 0)
            nomem |= mhla_buf_put(&raw, chunk, r);
        bad |= ferror(fp);
        fclose(fp);
        if (bad || nomem || tok_utf8_sanitize(raw.p ? raw.p : "", raw.len, &clean)) {
            mhla_buf_free(&raw);
            mhla_buf_free(&clean);
            tok_err(err, errlen, bad ? "cannot read %s" : "out of memory reading %s", files[f]);
            goto done;
        }
        mhla_buf_free(&raw);
        /* pre-tokenize line by line to bound the working set */
        tok_strlist in = {0}, pieces = {0};
        size_t start = 0;
        for (size_t i = 0; i <= clean.len && !bad; i++) {
            if (i < clean.len && clean.p[i] != '\n')
                continue;
            size_t end = i < clean.len ? i + 1 : i;
            if (end > start) {
                tok_strlist_clear(&in);
                tok_strlist_clear(&pieces);
                if (tok_strlist_push(&in, clean.p + start, end - start) ||
                    tok_pretok_apply(pt, &in, 0, &pieces, err, errlen))
                    bad = 1;
                for (size_t k = 0; k < pieces.n && !bad; k++)
                    if (count_piece(&c, tok_strlist_at(&pieces, k), pieces.len[k]))
                        bad = 1;
            }
            start = end;
        }
        tok_strlist_free(&in);
        tok_strlist_free(&pieces);
        mhla_buf_free(&clean);
        if (bad) {
            if (!err[0])
                tok_err(err, errlen, "out of memory while counting words");
            goto done;
        }
    }
    tokstr = calloc(vocab_size, sizeof *tokstr);
    if (!tokstr)
        goto oom;
    if (mhla_buf_put(&tokstr[0], "<|endoftext|>", 13))
        goto oom;
    for (int b = 0; b < 256; b++) {
        char e[4];
        if (mhla_buf_put(&tokstr[1 + b], e, mhla_utf8_put(e, tok_byte_to_cp[b])))
            goto oom;
    }
    n_tok = 257;
    root = cJSON_CreateObject();
    merges = cJSON_CreateArray();
    if (!root || !merges)
        goto oom;
    while (n_tok < vocab_size) {
        size_t total = 0;
        for (size_t w = 0; w < c.n_words; w++)
            total += c.words[w].n;
        size_t cap = 1024;
        while (cap < 2 * total + 2)
            cap *= 2;
        pair_counts pc;
        if (pc_init(&pc, cap)) {
            free(pc.key);
            free(pc.count);
            goto oom;
        }
        for (size_t w = 0; w < c.n_words; w++)
            for (size_t i = 0; i + 1 < c.words[w].n; i++)
                pc_add(&pc,
                       ((uint64_t)(uint32_t)c.words[w].sym[i] << 32) |
                           (uint32_t)c.words[w].sym[i + 1],
                       c.words[w].count);
        uint64_t best = UINT64_MAX;
        int64_t best_count = 0;
        for (size_t j = 0; j < pc.cap; j++)
            if (pc.key[j] != UINT64_MAX &&
                (pc.count[j] > best_count || (pc.count[j] == best_count && pc.key[j] < best))) {
                best = pc.key[j];
                best_count = pc.count[j];
            }
        free(pc.key);
        free(pc.count);
        if (best == UINT64_MAX)
            break; /* every word is a single token */
        int32_t a = (int32_t)(best >> 32), b = (int32_t)(best & 0xFFFFFFFF), m = (int32_t)n_tok;
        if (mhla_buf_put(&tokstr[m], tokstr[a].p, tokstr[a].len) ||
            mhla_buf_put(&tokstr[m], tokstr[b].p, tokstr[b].len))
            goto oom;
        char *line = malloc(tokstr[a].len + tokstr[b].len + 2);
        if (!line)
            goto oom;
        sprintf(line, "%s %s", tokstr[a].p, tokstr[b].p);
        cJSON_AddItemToArray(merges, cJSON_CreateString(line));
        free(line);
        n_tok++;
        for (size_t w = 0; w < c.n_words; w++) {
            word *wd = &c.words[w];
            size_t k = 0;
            for (size_t i = 0; i < wd->n; i++) {
                if (i + 1 < wd->n && wd->sym[i] == a && wd->sym[i + 1] == b) {
                    wd->sym[k++] = m;
                    i++;
                } else
                    wd->sym[k++] = wd->sym[i];
            }
            wd->n = k;
        }
    }
    {
        cJSON *added = cJSON_AddArrayToObject(root, "added_tokens"), *eot = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "version", "1.0");
        cJSON_AddNullToObject(root, "truncation");
        cJSON_AddNullToObject(root, "padding");
        cJSON_AddNumberToObject(eot, "id", 0);
        cJSON_AddStringToObject(eot, "content", "<|endoftext|>");
        cJSON_AddBoolToObject(eot, "single_word", 0);
        cJSON_AddBoolToObject(eot, "lstrip", 0);
        cJSON_AddBoolToObject(eot, "rstrip", 0);
        cJSON_AddBoolToObject(eot, "normalized", 0);
        cJSON_AddBoolToObject(eot, "special", 1);
        cJSON_AddItemToArray(added, eot);
        cJSON_AddNullToObject(root, "normalizer");
        cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
        cJSON_AddStringToObject(pre, "type", "ByteLevel");
        cJSON_AddBoolToObject(pre, "add_prefix_space", 0);
        cJSON_AddBoolToObject(pre, "trim_offsets", 1);
        cJSON_AddBoolToObject(pre, "use_regex", 1);
        cJSON *post = cJSON_AddObjectToObject(root, "post_processor");
        cJSON_AddStringToObject(post, "type", "ByteLevel");
        cJSON_AddBoolToObject(post, "add_prefix_space", 0);
        cJSON_AddBoolToObject(post, "trim_offsets", 0);
        cJSON_AddBoolToObject(post, "use_regex", 1);
        cJSON *dec = cJSON_AddObjectToObject(root, "decoder");
        cJSON_AddStringToObject(dec, "type", "ByteLevel");
        cJSON_AddBoolToObject(dec, "add_prefix_space", 0);
        cJSON_AddBoolToObject(dec, "trim_offsets", 1);
        cJSON_AddBoolToObject(dec, "use_regex", 1);
        cJSON *model = cJSON_AddObjectToObject(root, "model");
        cJSON_AddStringToObject(model, "type", "BPE");
        cJSON_AddNullToObject(model, "dropout");
        cJSON_AddNullToObject(model, "unk_token");
        cJSON_AddNullToObject(model, "continuing_subword_prefix");
        cJSON_AddNullToObject(model, "end_of_word_suffix");
        cJSON_AddBoolToObject(model, "fuse_unk", 0);
        cJSON_AddBoolToObject(model, "byte_fallback", 0);
        cJSON_AddBoolToObject(model, "ignore_merges", 0);
        cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
        if (!added || !eot || !pre || !post || !dec || !model || !vocab)
            goto oom;
        tok_strmap seen = {0};
        for (size_t i = 0; i < n_tok; i++) {
            /* a token formed twice keeps its first id */
            int32_t prev;
            if (tok_strmap_get(&seen, tokstr[i].p, tokstr[i].len, &prev))
                continue;
            if (tok_strmap_put(&seen, tokstr[i].p, tokstr[i].len, (int32_t)i)) {
                tok_strmap_free(&seen);
                goto oom;
            }
            cJSON_AddNumberToObject(vocab, tokstr[i].p, (double)i);
        }
        tok_strmap_free(&seen);
        cJSON_AddItemToObject(model, "merges", merges);
        merges = NULL;
    }
    json = cJSON_PrintUnformatted(root);
    if (!json)
        goto oom;
    FILE *out = fopen(out_path, "wb");
    if (!out) {
        tok_err(err, errlen, "cannot create %s", out_path);
        goto done;
    }
    size_t jl = strlen(json);
    int werr = fwrite(json, 1, jl, out) != jl;
    werr |= fclose(out) != 0;
    if (werr) {
        tok_err(err, errlen, "cannot write %s", out_path);
        goto done;
    }
    rc = 0;
    goto done;
oom:
    tok_err(err, errlen, "out of memory while training");
done:
    cJSON_Delete(merges); /* NULL once attached to root */
    for (size_t w = 0; w < c.n_words; w++)
        free(c.words[w].sym);
    free(c.words);
    tok_strmap_free(&c.index);
    if (tokstr)
        for (size_t i = 0; i < vocab_size; i++)
            mhla_buf_free(&tokstr[i]);
    free(tokstr);
    tok_pretok_free(pt);
    cJSON_Delete(root);
    free(json);
    return rc;
}
