/* Loading tokenizer.json (+ tokenizer_config.json), and the encode / decode pipelines:
 * added-token split -> normalizer -> pre-tokenizer -> BPE -> post-processor, and
 * ids -> token strings -> decoder chain. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

#define MAX_FILE_BYTES ((size_t)1 << 31)

static int read_file(const char *path, char **data, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        tok_err(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    mhla_buf b = {0};
    char chunk[65536];
    size_t r;
    while ((r = fread(chunk, 1, sizeof chunk, f)) > 0) {
        int big = b.len + r > MAX_FILE_BYTES;
        if (big || mhla_buf_put(&b, chunk, r)) {
            fclose(f);
            mhla_buf_free(&b);
            tok_err(err, errlen, big ? "%s is too large" : "out of memory reading %s", path);
            return -1;
        }
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        mhla_buf_free(&b);
        tok_err(err, errlen, "cannot read %s", path);
        return -1;
    }
    if (mhla_buf_reserve(&b, 0)) {
        mhla_buf_free(&b);
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    *data = b.p;
    *len = b.len;
    return 0;
}

int mhla_tok_load(const char *path, const char *config_path, mhla_tokenizer **out, char *err,
                  size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    *out = NULL;
    char *js = NULL, *cfg = NULL;
    size_t jn = 0, cn = 0;
    if (read_file(path, &js, &jn, err, errlen))
        return -1;
    if (config_path && read_file(config_path, &cfg, &cn, err, errlen)) {
        free(js);
        return -1;
    }
    int rc = mhla_tok_load_mem(js, jn, cfg, cn, out, err, errlen);
    if (rc) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s", err ? err : "");
        tok_err(err, errlen, "%s: %s", path, tmp);
    }
    free(js);
    free(cfg);
    return rc;
}

void mhla_tok_free(mhla_tokenizer *tok)
{
    if (!tok)
        return;
    tok_bpe_free(&tok->bpe);
    tok_normalizer_free(tok->normalizer);
    tok_pretok_free(tok->pretok);
    tok_decoder_free(tok->decoder);
    free(tok->post.before);
    free(tok->post.after);
    for (size_t i = 0; i < tok->n_added; i++)
        free(tok->added[i].content);
    free(tok->added);
    tok_strmap_free(&tok->added_map);
    tok_trie_free(tok->trie_raw);
    tok_trie_free(tok->trie_norm);
    free(tok->id_str);
    free(tok->id_len);
    free(tok->is_added);
    free(tok->is_special);
    free(tok->unk_str);
    free(tok);
}

static int load_added(mhla_tokenizer *tok, const cJSON *arr, char *err, size_t errlen)
{
    if (!arr || cJSON_IsNull(arr))
        return 0;
    if (!cJSON_IsArray(arr)) {
        tok_err(err, errlen, "\"added_tokens\" must be an array");
        return -1;
    }
    size_t n = (size_t)cJSON_GetArraySize(arr);
    tok->added = calloc(n + 1, sizeof *tok->added);
    if (!tok->added) {
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        size_t i = tok->n_added;
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > 2147483647.0 ||
            id->valuedouble != (double)(int32_t)id->valuedouble || !cJSON_IsString(content) ||
            !content->valuestring[0]) {
            tok_err(err, errlen,
                    "added_tokens[%zu] needs an integer \"id\" and a non-empty \"content\"", i);
            return -1;
        }
        tok_added *a = &tok->added[i];
        a->content = strdup(content->valuestring);
        if (!a->content) {
            tok_err(err, errlen, "out of memory");
            return -1;
        }
        a->len = strlen(a->content);
        a->id = (int32_t)id->valuedouble;
        a->special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special"));
        a->lstrip = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "lstrip"));
        a->rstrip = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "rstrip"));
        a->single_word = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "single_word"));
        const cJSON *norm = cJSON_GetObjectItemCaseSensitive(e, "normalized");
        a->normalized = cJSON_IsBool(norm) ? cJSON_IsTrue(norm) : !a->special;
        tok->n_added++;
    }
    return 0;
}

/* tokenizer_config.json token fields are a string or an AddedToken object. */
static const char *config_token(const cJSON *cfg, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsString(v))
        return v->valuestring;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
    return cJSON_IsString(c) ? c->valuestring : NULL;
}

static int build_tables(mhla_tokenizer *tok, char *err, size_t errlen)
{
    /* id -> string: vocab first, then added tokens (which override, as in the reference) */
    size_t max_id = 0;
    const tok_strmap *v = &tok->bpe.vocab;
    for (size_t i = 0; i < v->cap; i++)
        if (v->hash[i] && (size_t)v->val[i] + 1 > max_id)
            max_id = (size_t)v->val[i] + 1;
    for (size_t i = 0; i < tok->n_added; i++)
        if ((size_t)tok->added[i].id + 1 > max_id)
            max_id = (size_t)tok->added[i].id + 1;
    if (max_id > 16u * 1024 * 1024) {
        tok_err(err, errlen, "vocabulary ids go up to %zu, more than supported", max_id);
        return -1;
    }
    tok->n_ids = max_id;
    tok->id_str = calloc(max_id + 1, sizeof *tok->id_str);
    tok->id_len = calloc(max_id + 1, sizeof *tok->id_len);
    tok->is_added = calloc(max_id + 1, 1);
    tok->is_special = calloc(max_id + 1, 1);
    if (!tok->id_str || !tok->id_len || !tok->is_added || !tok->is_special) {
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < v->cap; i++) {
        if (!v->hash[i])
            continue;
        tok->id_str[v->val[i]] = v->keys.p + v->koff[i];
        tok->id_len[v->val[i]] = v->klen[i];
    }
    for (size_t i = 0; i < tok->n_added; i++) {
        tok_added *a = &tok->added[i];
        tok->id_str[a->id] = a->content;
        tok->id_len[a->id] = (uint32_t)a->len;
        tok->is_added[a->id] = 1;
        if (a->special)
            tok->is_special[a->id] = 1;
    }
    return 0;
}

int mhla_tok_load_mem(const char *json, size_t len, const char *config_json, size_t config_len,
                      mhla_tokenizer **out, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    *out = NULL;
    /* JSON text is UTF-8 (RFC 8259), and the reference refuses a file that is not: a token
     * holding invalid bytes would otherwise reach decoded text verbatim */
    size_t bad = tok_utf8_invalid_at(json, len);
    if (bad < len) {
        tok_err(err, errlen, "tokenizer.json is not valid UTF-8 (byte %zu)", bad);
        return -1;
    }
    if (config_json && (bad = tok_utf8_invalid_at(config_json, config_len)) < config_len) {
        tok_err(err, errlen, "tokenizer_config.json is not valid UTF-8 (byte %zu)", bad);
        return -1;
    }
    cJSON *root = cJSON_ParseWithLength(json, len), *cfg = NULL;
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= json && at <= json + len ? (size_t)(at - json) : 0;
        tok_err(err, errlen, "tokenizer.json is not valid JSON (error near byte %zu)", off);
        return -1;
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        tok_err(err, errlen, "tokenizer.json must be a JSON object");
        return -1;
    }
    if (config_json) {
        cfg = cJSON_ParseWithLength(config_json, config_len);
        if (!cJSON_IsObject(cfg)) {
            cJSON_Delete(root);
            cJSON_Delete(cfg);
            tok_err(err, errlen, "tokenizer_config.json is not a valid JSON object");
            return -1;
        }
    }
    mhla_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) {
        cJSON_Delete(root);
        cJSON_Delete(cfg);
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    tok->bos_id = tok->eos_id = -1;
    int rc = -1;
    const cJSON *j;
    if (tok_bpe_build(cJSON_GetObjectItemCaseSensitive(root, "model"), &tok->bpe, err, errlen))
        goto done;
    if (load_added(tok, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), err, errlen))
        goto done;
    j = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    if (j && !cJSON_IsNull(j) && tok_normalizer_build(j, &tok->normalizer, err, errlen))
        goto done;
    j = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (j && !cJSON_IsNull(j) && tok_pretok_build(j, &tok->pretok, err, errlen))
        goto done;
    j = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    if (j && !cJSON_IsNull(j) && tok_decoder_build(j, &tok->decoder, err, errlen))
        goto done;
    tok->trie_raw = tok_trie_new();
    tok->trie_norm = tok_trie_new();
    if (!tok->trie_raw || !tok->trie_norm) {
        tok_err(err, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < tok->n_added; i++) {
        tok_added *a = &tok->added[i];
        if (tok_strmap_put(&tok->bpe.vocab, a->content, a->len, a->id) ||
            tok_strmap_put(&tok->added_map, a->content, a->len, (int32_t)i)) {
            tok_err(err, errlen, "out of memory");
            goto done;
        }
        if (a->normalized && tok->normalizer) {
            mhla_buf nb = {0};
            if (tok_normalizer_apply(tok->normalizer, a->content, a->len, &nb, err, errlen))
                goto done;
            int r = nb.len ? tok_trie_add(tok->trie_norm, nb.p, nb.len, (int32_t)i) |
                                 tok_strmap_put(&tok->added_map, nb.p, nb.len, (int32_t)i)
                           : 0;
            mhla_buf_free(&nb);
            if (r) {
                tok_err(err, errlen, "out of memory");
                goto done;
            }
        } else if (tok_trie_add(tok->trie_raw, a->content, a->len, (int32_t)i)) {
            tok_err(err, errlen, "out of memory");
            goto done;
        }
    }
    if (build_tables(tok, err, errlen))
        goto done;
    if (tok_post_build(cJSON_GetObjectItemCaseSensitive(root, "post_processor"), tok, &tok->post,
                       err, errlen))
        goto done;
    if (tok->post.n_before)
        tok->bos_id = tok->post.before[0];
    if (tok->post.n_after)
        tok->eos_id = tok->post.after[tok->post.n_after - 1];
    if (cfg) {
        const char *bos = config_token(cfg, "bos_token"), *eos = config_token(cfg, "eos_token");
        if (bos)
            tok->bos_id = mhla_tok_token_to_id(tok, bos, strlen(bos));
        if (eos)
            tok->eos_id = mhla_tok_token_to_id(tok, eos, strlen(eos));
        const cJSON *ab = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token");
        const cJSON *ae = cJSON_GetObjectItemCaseSensitive(cfg, "add_eos_token");
        /* as transformers' fast Llama tokenizer does: the flags rebuild the single template */
        if (cJSON_IsBool(ab) || cJSON_IsBool(ae)) {
            bool add_b = cJSON_IsTrue(ab), add_e = cJSON_IsTrue(ae);
            if ((add_b && tok->bos_id < 0) || (add_e && tok->eos_id < 0)) {
                tok_err(err, errlen,
                        "tokenizer_config.json asks for add_%s_token but the %s token is unknown",
                        add_b && tok->bos_id < 0 ? "bos" : "eos",
                        add_b && tok->bos_id < 0 ? "bos" : "eos");
                goto done;
            }
            free(tok->post.before);
            free(tok->post.after);
            tok->post.before = malloc(sizeof(int32_t));
            tok->post.after = malloc(sizeof(int32_t));
            if (!tok->post.before || !tok->post.after) {
                tok_err(err, errlen, "out of memory");
                goto done;
            }
            tok->post.n_before = add_b ? 1 : 0;
            tok->post.n_after = add_e ? 1 : 0;
            tok->post.before[0] = tok->bos_id;
            tok->post.after[0] = tok->eos_id;
            tok->post.present = true;
        }
        tok->cleanup_spaces =
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "clean_up_tokenization_spaces"));
    }
    if (tok->eos_id < 0) {
        static const char *names[] = {"<|endoftext|>", "</s>", "<|end_of_text|>"};
        for (size_t i = 0; i < 3 && tok->eos_id < 0; i++)
            tok->eos_id = mhla_tok_token_to_id(tok, names[i], strlen(names[i]));
    }
    {
        const cJSON *unk =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "model"),
                                             "unk_token");
        if (cJSON_IsString(unk)) {
            tok->unk_str = strdup(unk->valuestring);
            tok->unk_len = tok->unk_str ? strlen(tok->unk_str) : 0;
        }
    }
    rc = 0;
done:
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    if (rc)
        mhla_tok_free(tok);
    else
        *out = tok;
    return rc;
}

size_t mhla_tok_vocab_size(const mhla_tokenizer *tok) { return tok->n_ids; }

int32_t mhla_tok_token_to_id(const mhla_tokenizer *tok, const char *s, size_t len)
{
    int32_t idx, id;
    if (tok_strmap_get(&tok->added_map, s, len, &idx))
        return tok->added[idx].id;
    return tok_strmap_get(&tok->bpe.vocab, s, len, &id) ? id : -1;
}

const char *mhla_tok_id_to_token(const mhla_tokenizer *tok, int32_t id, size_t *len)
{
    if (id < 0 || (size_t)id >= tok->n_ids || !tok->id_str[id])
        return NULL;
    if (len)
        *len = tok->id_len[id];
    return tok->id_str[id];
}

int mhla_tok_is_special(const mhla_tokenizer *tok, int32_t id)
{
    return id >= 0 && (size_t)id < tok->n_ids && tok->is_special[id];
}

int32_t mhla_tok_bos_id(const mhla_tokenizer *tok) { return tok->bos_id; }
int32_t mhla_tok_eos_id(const mhla_tokenizer *tok) { return tok->eos_id; }

/* ---- encode ---- */

static int encode_plain(const mhla_tokenizer *tok, const char *s, size_t n, size_t section_index,
                        tok_ids *ids, tok_strlist *a, tok_strlist *b, char *err, size_t errlen)
{
    tok_strlist_clear(a);
    tok_strlist_clear(b);
    if (tok_strlist_push(a, s, n)) {
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    tok_strlist *pieces = a;
    if (tok->pretok) {
        if (tok_pretok_apply(tok->pretok, a, section_index, b, err, errlen))
            return -1;
        pieces = b;
    }
    for (size_t i = 0; i < pieces->n; i++)
        if (tok_bpe_encode_word(&tok->bpe, tok_strlist_at(pieces, i), pieces->len[i], ids, err,
                                errlen))
            return -1;
    return 0;
}

static bool section_added(const mhla_tokenizer *tok, const char *s, size_t n, int32_t *id)
{
    int32_t idx;
    if (!tok_strmap_get(&tok->added_map, s, n, &idx))
        return false;
    *id = tok->added[idx].id;
    return true;
}

int mhla_tok_encode(const mhla_tokenizer *tok, const char *text, size_t len, int add_special,
                    int32_t **out_ids, size_t *n_ids, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    *out_ids = NULL;
    *n_ids = 0;
    if (!text && len) {
        tok_err(err, errlen, "encode: NULL text");
        return -1;
    }
    mhla_buf clean = {0}, norm = {0};
    tok_ids ids = {0};
    tok_strlist a = {0}, b = {0};
    tok_section *secs = NULL, *subs = NULL;
    size_t nsec = 0, nsub = 0;
    int rc = -1;
    if (tok_utf8_sanitize(text ? text : "", len, &clean)) {
        tok_err(err, errlen, "out of memory");
        goto done;
    }
    const char *s = clean.p ? clean.p : "";
    if (add_special && tok->post.present)
        for (size_t i = 0; i < tok->post.n_before; i++)
            if (tok_ids_push(&ids, tok->post.before[i]))
                goto oom;
    if (tok_added_split(tok->trie_raw, tok->added, s, clean.len, &secs, &nsec, err, errlen))
        goto done;
    for (size_t si = 0; si < nsec; si++) {
        const char *ss = s + secs[si].start;
        size_t sn = secs[si].end - secs[si].start;
        int32_t id;
        if (sn == 0)
            continue;
        if (section_added(tok, ss, sn, &id)) {
            if (tok_ids_push(&ids, id))
                goto oom;
            continue;
        }
        if (tok->normalizer) {
            norm.len = 0;
            if (tok_normalizer_apply(tok->normalizer, ss, sn, &norm, err, errlen))
                goto done;
            ss = norm.p ? norm.p : "";
            sn = norm.len;
            if (sn == 0)
                continue;
        }
        free(subs);
        subs = NULL;
        if (tok_added_split(tok->trie_norm, tok->added, ss, sn, &subs, &nsub, err, errlen))
            goto done;
        for (size_t k = 0; k < nsub; k++) {
            const char *us = ss + subs[k].start;
            size_t un = subs[k].end - subs[k].start;
            if (un == 0)
                continue;
            if (section_added(tok, us, un, &id)) {
                if (tok_ids_push(&ids, id))
                    goto oom;
                continue;
            }
            if (encode_plain(tok, us, un, si, &ids, &a, &b, err, errlen))
                goto done;
        }
    }
    if (add_special && tok->post.present)
        for (size_t i = 0; i < tok->post.n_after; i++)
            if (tok_ids_push(&ids, tok->post.after[i]))
                goto oom;
    *out_ids = ids.v ? ids.v : malloc(sizeof(int32_t));
    if (!*out_ids)
        goto oom;
    ids.v = NULL;
    *n_ids = ids.n;
    rc = 0;
    goto done;
oom:
    tok_err(err, errlen, "out of memory while encoding");
done:
    free(ids.v);
    free(secs);
    free(subs);
    mhla_buf_free(&clean);
    mhla_buf_free(&norm);
    tok_strlist_free(&a);
    tok_strlist_free(&b);
    return rc;
}

/* ---- decode ---- */

/* The reference's clean_up_tokenization: " ." -> "." etc. */
static int cleanup_spaces(const char *s, size_t n, mhla_buf *out)
{
    static const char *pat[] = {" .",   " ?",  " !",  " ,",   " ' ",
                                " n't", " 'm", " 's", " 've", " 're"};
    static const char *rep[] = {".", "?", "!", ",", "'", "n't", "'m", "'s", "'ve", "'re"};
    mhla_buf cur = {0}, nxt = {0};
    if (mhla_buf_put(&cur, s, n))
        return -1;
    for (size_t p = 0; p < 10; p++) {
        size_t pl = strlen(pat[p]);
        nxt.len = 0;
        if (mhla_buf_reserve(&nxt, cur.len))
            goto fail;
        for (size_t i = 0; i < cur.len;) {
            if (cur.len - i >= pl && memcmp(cur.p + i, pat[p], pl) == 0) {
                if (mhla_buf_put(&nxt, rep[p], strlen(rep[p])))
                    goto fail;
                i += pl;
            } else if (mhla_buf_putc(&nxt, cur.p[i++]))
                goto fail;
        }
        mhla_buf t = cur;
        cur = nxt;
        nxt = t;
    }
    int rc = mhla_buf_put(out, cur.p ? cur.p : "", cur.len);
    mhla_buf_free(&cur);
    mhla_buf_free(&nxt);
    return rc;
fail:
    mhla_buf_free(&cur);
    mhla_buf_free(&nxt);
    return -1;
}

int tok_decode_internal(const mhla_tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                        bool cleanup, mhla_buf *out, char *err, size_t errlen)
{
    tok_strlist toks = {0}, tmp = {0};
    mhla_buf joined = {0};
    int rc = -1;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || (size_t)id >= tok->n_ids || !tok->id_str[id]) {
            tok_err(err, errlen, "decode: token id %ld is not in the vocabulary (size %zu)",
                    (long)id, tok->n_ids);
            goto done;
        }
        if (skip_special && tok->is_special[id])
            continue;
        if (tok_strlist_push(&toks, tok->id_str[id], tok->id_len[id]))
            goto oom;
    }
    if (tok->decoder) {
        if (tok_decoder_run(tok, tok->decoder, &toks, &tmp, err, errlen))
            goto done;
        for (size_t i = 0; i < toks.n; i++)
            if (mhla_buf_put(&joined, tok_strlist_at(&toks, i), toks.len[i]))
                goto oom;
    } else {
        for (size_t i = 0; i < toks.n; i++)
            if ((i && mhla_buf_putc(&joined, ' ')) ||
                mhla_buf_put(&joined, tok_strlist_at(&toks, i), toks.len[i]))
                goto oom;
    }
    if (tok->decoder && tok->bpe.eow_len) {
        /* the reference turns end-of-word suffixes into spaces after decoding */
        mhla_buf r = {0};
        for (size_t i = 0; i < joined.len;) {
            if (joined.len - i >= tok->bpe.eow_len &&
                memcmp(joined.p + i, tok->bpe.eow_suffix, tok->bpe.eow_len) == 0) {
                if (mhla_buf_putc(&r, ' ')) {
                    mhla_buf_free(&r);
                    goto oom;
                }
                i += tok->bpe.eow_len;
            } else if (mhla_buf_putc(&r, joined.p[i++])) {
                mhla_buf_free(&r);
                goto oom;
            }
        }
        mhla_buf_free(&joined);
        joined = r;
        if (skip_special) {
            size_t a, e;
            tok_js_trim(joined.p ? joined.p : "", joined.len, true, true, &a, &e);
            memmove(joined.p, joined.p + a, e - a);
            joined.len = e - a;
        }
    }
    if (cleanup) {
        if (cleanup_spaces(joined.p ? joined.p : "", joined.len, out))
            goto oom;
    } else if (mhla_buf_put(out, joined.p ? joined.p : "", joined.len))
        goto oom;
    rc = 0;
    goto done;
oom:
    tok_err(err, errlen, "out of memory while decoding");
done:
    tok_strlist_free(&toks);
    tok_strlist_free(&tmp);
    mhla_buf_free(&joined);
    return rc;
}

int mhla_tok_decode(const mhla_tokenizer *tok, const int32_t *ids, size_t n_ids, int skip_special,
                    char **text, size_t *len, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    *text = NULL;
    *len = 0;
    mhla_buf out = {0};
    if (tok_decode_internal(tok, ids, n_ids, skip_special, tok->cleanup_spaces, &out, err,
                            errlen) ||
        mhla_buf_reserve(&out, 0)) {
        if (err && !err[0])
            tok_err(err, errlen, "out of memory");
        mhla_buf_free(&out);
        return -1;
    }
    *text = out.p;
    *len = out.len;
    return 0;
}
