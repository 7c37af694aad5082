/* Byte-level BPE training: GPT-2 pre-tokenization of the input files, word counts, then
 * repeatedly merge the most frequent adjacent pair (ties: the pair of older tokens) until
 * the vocabulary is full. Writes a tokenizer.json the reference implementation loads. */
#include <cjson/cJSON.h>
#include <stdint.h>
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
    size_t n_words;
    int cap_words;
} counter;

static int count_piece(counter *c, const char *s, size_t n)
{
    int32_t idx;
    if (tok_strmap_get(&c->index, s, n, &idx)) {
        c->words[idx].count++;
        return 0;
    }
    if (c->n_words >= INT32_MAX ||
        mhla_grow(&c->words, sizeof *c->words, &c->cap_words, (int)c->n_words + 1))
        return -1;
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
        free(w->sym);
        return -1;
    }
    c->n_words++;
    return 0;
}

static void counter_free(counter *c)
{
    for (size_t w = 0; w < c->n_words; w++)
        free(c->words[w].sym);
    free(c->words);
    tok_strmap_free(&c->index);
}

/* Counts the pre-tokens of text line by line, which bounds the working set. */
static int count_text(counter *c, const tok_pretok *pt, const char *text, size_t len, char *err,
                      size_t errlen)
{
    tok_strlist in = {0}, pieces = {0};
    size_t start = 0;
    int bad = 0;
    for (size_t i = 0; i <= len && !bad; i++) {
        if (i < len && text[i] != '\n')
            continue;
        size_t end = i < len ? i + 1 : i;
        if (end > start) {
            tok_strlist_clear(&in);
            tok_strlist_clear(&pieces);
            if (tok_strlist_push(&in, text + start, end - start) ||
                tok_pretok_apply(pt, &in, 0, &pieces, err, errlen))
                bad = 1;
            for (size_t k = 0; k < pieces.n && !bad; k++)
                if (count_piece(c, tok_strlist_at(&pieces, k), pieces.len[k]))
                    bad = 1;
        }
        start = end;
    }
    tok_strlist_free(&in);
    tok_strlist_free(&pieces);
    if (bad && err && !err[0])
        tok_err(err, errlen, "out of memory while counting words");
    return bad ? -1 : 0;
}

/* Counts the pre-tokens of one input file, read as UTF-8 with invalid bytes replaced. */
static int count_file(counter *c, const tok_pretok *pt, const char *path, char *err, size_t errlen)
{
    char *raw;
    size_t len;
    if (mhla_read_file(path, SIZE_MAX, &raw, &len, err, errlen))
        return -1;
    mhla_buf clean = {0};
    int rc = tok_utf8_sanitize(raw, len, &clean);
    free(raw);
    if (rc)
        tok_err(err, errlen, "out of memory reading %s", path);
    else
        rc = count_text(c, pt, clean.p ? clean.p : "", clean.len, err, errlen);
    mhla_buf_free(&clean);
    return rc;
}

/* Counts the words of every file, pre-tokenized as GPT-2 does. */
static int count_files(counter *c, const char *const *files, size_t n_files, char *err,
                       size_t errlen)
{
    tok_pretok *pt = NULL;
    cJSON *jpre =
        cJSON_Parse("{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}");
    int rc = -1;
    if (!jpre)
        tok_err(err, errlen, "out of memory while training");
    else if (tok_pretok_build(jpre, &pt, err, errlen) == 0) {
        rc = 0;
        for (size_t f = 0; f < n_files && rc == 0; f++)
            rc = count_file(c, pt, files[f], err, errlen);
    }
    cJSON_Delete(jpre);
    tok_pretok_free(pt);
    return rc;
}

/* The vocabulary being trained: id -> byte-level string, and the merges so far. */
typedef struct {
    mhla_buf *str;
    size_t n, cap;
    cJSON *merges;
} vocab;

static void vocab_free(vocab *v)
{
    if (v->str)
        for (size_t i = 0; i < v->cap; i++)
            mhla_buf_free(&v->str[i]);
    free(v->str);
    cJSON_Delete(v->merges); /* NULL once attached to the output */
}

/* <|endoftext|> is id 0, the 256 byte characters follow. */
static int vocab_init(vocab *v, size_t cap)
{
    v->cap = cap;
    v->str = calloc(cap, sizeof *v->str);
    v->merges = cJSON_CreateArray();
    if (!v->str || !v->merges || mhla_buf_put(&v->str[0], "<|endoftext|>", 13))
        return -1;
    for (int b = 0; b < 256; b++) {
        char e[4];
        if (mhla_buf_put(&v->str[1 + b], e, mhla_utf8_put(e, tok_byte_to_cp[b])))
            return -1;
    }
    v->n = 257;
    return 0;
}

/* The most frequent adjacent pair (ties: the smaller key, the pair of older tokens), or
 * UINT64_MAX when every word is a single token. -1 when out of memory. */
static int best_pair(const counter *c, uint64_t *best)
{
    size_t total = 0;
    for (size_t w = 0; w < c->n_words; w++)
        total += c->words[w].n;
    size_t cap = 1024;
    while (cap < 2 * total + 2)
        cap *= 2;
    pair_counts pc;
    int rc = pc_init(&pc, cap);
    for (size_t w = 0; w < c->n_words && rc == 0; w++)
        for (size_t i = 0; i + 1 < c->words[w].n; i++)
            pc_add(&pc,
                   ((uint64_t)(uint32_t)c->words[w].sym[i] << 32) |
                       (uint32_t)c->words[w].sym[i + 1],
                   c->words[w].count);
    *best = UINT64_MAX;
    int64_t best_count = 0;
    for (size_t j = 0; j < pc.cap && rc == 0; j++)
        if (pc.key[j] != UINT64_MAX &&
            (pc.count[j] > best_count || (pc.count[j] == best_count && pc.key[j] < *best))) {
            *best = pc.key[j];
            best_count = pc.count[j];
        }
    free(pc.key);
    free(pc.count);
    return rc;
}

/* Token m = a + b: its string and its "a b" merge line. */
static int add_merge(vocab *v, int32_t a, int32_t b, int32_t m)
{
    const mhla_buf *sa = &v->str[a], *sb = &v->str[b];
    if (mhla_buf_put(&v->str[m], sa->p, sa->len) || mhla_buf_put(&v->str[m], sb->p, sb->len))
        return -1;
    char *line = malloc(sa->len + sb->len + 2);
    if (!line)
        return -1;
    sprintf(line, "%s %s", sa->p, sb->p);
    bool ok = cJSON_AddItemToArray(v->merges, cJSON_CreateString(line));
    free(line);
    return ok ? 0 : -1;
}

/* Every occurrence of the pair (a, b) in every word becomes m. */
static void apply_merge(counter *c, int32_t a, int32_t b, int32_t m)
{
    for (size_t w = 0; w < c->n_words; w++) {
        word *wd = &c->words[w];
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

/* Merges the most frequent pair until the vocabulary is full or nothing is left to merge. */
static int merge_until_full(counter *c, vocab *v)
{
    while (v->n < v->cap) {
        uint64_t best;
        if (best_pair(c, &best))
            return -1;
        if (best == UINT64_MAX)
            break; /* every word is a single token */
        int32_t a = (int32_t)(best >> 32), b = (int32_t)(best & 0xFFFFFFFF), m = (int32_t)v->n;
        if (add_merge(v, a, b, m))
            return -1;
        v->n++;
        apply_merge(c, a, b, m);
    }
    return 0;
}

/* pre_tokenizer, post_processor and decoder are all ByteLevel, as the reference's
 * byte-level BPE trainer writes them. */
static bool add_bytelevel(cJSON *root, const char *key, bool trim_offsets)
{
    cJSON *o = cJSON_AddObjectToObject(root, key);
    return o && cJSON_AddStringToObject(o, "type", "ByteLevel") &&
           cJSON_AddBoolToObject(o, "add_prefix_space", 0) &&
           cJSON_AddBoolToObject(o, "trim_offsets", trim_offsets) &&
           cJSON_AddBoolToObject(o, "use_regex", 1);
}

/* Everything of tokenizer.json before the model: <|endoftext|> as the one added token,
 * no normalizer, byte-level everything else. */
static bool add_pipeline(cJSON *root)
{
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens"), *eot = cJSON_CreateObject();
    if (!eot)
        return false;
    bool ok = added && cJSON_AddStringToObject(root, "version", "1.0") &&
              cJSON_AddNullToObject(root, "truncation") && cJSON_AddNullToObject(root, "padding") &&
              cJSON_AddNumberToObject(eot, "id", 0) &&
              cJSON_AddStringToObject(eot, "content", "<|endoftext|>") &&
              cJSON_AddBoolToObject(eot, "single_word", 0) &&
              cJSON_AddBoolToObject(eot, "lstrip", 0) && cJSON_AddBoolToObject(eot, "rstrip", 0) &&
              cJSON_AddBoolToObject(eot, "normalized", 0) &&
              cJSON_AddBoolToObject(eot, "special", 1) && cJSON_AddItemToArray(added, eot);
    if (!ok) {
        cJSON_Delete(eot); /* not attached */
        return false;
    }
    return cJSON_AddNullToObject(root, "normalizer") && add_bytelevel(root, "pre_tokenizer", 1) &&
           add_bytelevel(root, "post_processor", 0) && add_bytelevel(root, "decoder", 1);
}

/* token -> id; a token formed twice keeps its first id. */
static bool add_vocab(cJSON *model, const vocab *v)
{
    cJSON *obj = cJSON_AddObjectToObject(model, "vocab");
    tok_strmap seen = {0};
    bool ok = obj != NULL;
    for (size_t i = 0; i < v->n && ok; i++) {
        int32_t prev;
        if (tok_strmap_get(&seen, v->str[i].p, v->str[i].len, &prev))
            continue;
        ok = tok_strmap_put(&seen, v->str[i].p, v->str[i].len, (int32_t)i) == 0 &&
             cJSON_AddNumberToObject(obj, v->str[i].p, (double)i);
    }
    tok_strmap_free(&seen);
    return ok;
}

/* The BPE model: its options as the reference writes them, the vocab, the merges. */
static bool add_model(cJSON *root, vocab *v)
{
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    bool ok = model && cJSON_AddStringToObject(model, "type", "BPE") &&
              cJSON_AddNullToObject(model, "dropout") &&
              cJSON_AddNullToObject(model, "unk_token") &&
              cJSON_AddNullToObject(model, "continuing_subword_prefix") &&
              cJSON_AddNullToObject(model, "end_of_word_suffix") &&
              cJSON_AddBoolToObject(model, "fuse_unk", 0) &&
              cJSON_AddBoolToObject(model, "byte_fallback", 0) &&
              cJSON_AddBoolToObject(model, "ignore_merges", 0) && add_vocab(model, v);
    if (!ok || !cJSON_AddItemToObject(model, "merges", v->merges))
        return false; /* the merges are still v's to free */
    v->merges = NULL;
    return true;
}

static int write_json(const cJSON *root, const char *out_path, char *err, size_t errlen)
{
    char *json = cJSON_PrintUnformatted(root);
    if (!json) {
        tok_err(err, errlen, "out of memory while training");
        return -1;
    }
    FILE *out = fopen(out_path, "wb");
    if (!out) {
        free(json);
        tok_err(err, errlen, "cannot create %s", out_path);
        return -1;
    }
    size_t jl = strlen(json);
    int werr = fwrite(json, 1, jl, out) != jl;
    werr |= fclose(out) != 0;
    free(json);
    if (werr)
        tok_err(err, errlen, "cannot write %s", out_path);
    return werr ? -1 : 0;
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
    counter c = {0};
    vocab v = {0};
    cJSON *root = NULL;
    int rc = count_files(&c, files, n_files, err, errlen);
    if (rc == 0) {
        root = cJSON_CreateObject();
        rc = !root || vocab_init(&v, vocab_size) || merge_until_full(&c, &v) ||
                     !add_pipeline(root) || !add_model(root, &v)
                 ? -1
                 : 0;
        if (rc)
            tok_err(err, errlen, "out of memory while training");
        else
            rc = write_json(root, out_path, err, errlen);
    }
    counter_free(&c);
    vocab_free(&v);
    cJSON_Delete(root);
    return rc;
}
