/* The bytes one token adds in the middle of a text (mhla_tok_token_bytes): the decoder
 * chain applied to that token alone, minus what the chain does only at a text's edges
 * (Metaspace's and a fused Strip's trimming of the first space) and minus the UTF-8
 * repair a decode applies to whole runs (a byte-level or <0xAB> token that holds part
 * of a character gives that raw byte). A constrained decoder matches these bytes
 * against its grammar. The clean-up of spaces (clean_up_tokenization_spaces) spans
 * tokens and is not applied. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

typedef struct {
    mhla_buf cur;
    bool fused; /* a Fuse has run: later Strips trim the text's edges only */
    bool added; /* an added token's content: ByteLevel passes it through */
} tb_state;

/* cur = t (t's storage is taken). */
static void tb_set(tb_state *st, mhla_buf *t)
{
    mhla_buf_free(&st->cur);
    st->cur = *t;
    memset(t, 0, sizeof *t);
}

static int tb_bytelevel(tb_state *st)
{
    mhla_buf t = {0};
    int rc = 0;
    for (size_t k = 0; k < st->cur.len && rc == 0;) {
        int32_t cp;
        k += mhla_utf8_next(st->cur.p + k, st->cur.len - k, &cp);
        int b = tok_cp_to_byte(cp);
        rc = mhla_buf_putc(&t, (char)(b < 0 ? 0 : b)); /* as the decoder does */
    }
    tb_set(st, &t);
    return rc;
}

static int tb_metaspace(const tok_decoder *d, tb_state *st)
{
    mhla_buf t = {0};
    int rc = 0;
    const char *s = st->cur.p;
    for (size_t k = 0, n = st->cur.len; k < n && rc == 0;) {
        bool at = d->str_len && n - k >= d->str_len && memcmp(s + k, d->str, d->str_len) == 0;
        rc = mhla_buf_putc(&t, at ? ' ' : s[k]);
        k += at ? d->str_len : 1;
    }
    tb_set(st, &t);
    return rc;
}

static int tb_strip(const tok_decoder *d, tb_state *st)
{
    tok_strlist l = {0};
    mhla_buf t = {0};
    int rc = tok_strip_token(d, st->cur.p ? st->cur.p : "", st->cur.len, &l);
    if (rc == 0)
        rc = mhla_buf_put(&t, tok_strlist_at(&l, 0), l.len[0]);
    tok_strlist_free(&l);
    tb_set(st, &t);
    return rc;
}

/* A "<0xAB>" token is its one byte, raw (a decode would repair a run of them). */
static int tb_bytefallback(tb_state *st)
{
    int b = tok_byte_token(st->cur.p ? st->cur.p : "", st->cur.len);
    if (b >= 0) {
        st->cur.p[0] = (char)b;
        st->cur.len = 1;
    }
    return 0;
}

static int tb_apply(const tok_decoder *d, tb_state *st, char *err, size_t errlen)
{
    int rc = 0;
    mhla_buf t = {0};
    switch (d->kind) {
    case DEC_SEQUENCE:
        for (size_t c = 0; c < d->n_children && rc == 0; c++)
            rc = tb_apply(d->children[c], st, err, errlen);
        return rc;
    case DEC_BYTELEVEL: return st->added ? 0 : tb_bytelevel(st);
    case DEC_METASPACE: return tb_metaspace(d, st);
    case DEC_REPLACE:
        rc = tok_regex_replace(&d->re, st->cur.p ? st->cur.p : "", st->cur.len, d->str, d->str_len,
                               &t, err, errlen);
        tb_set(st, &t);
        return rc;
    case DEC_BYTEFALLBACK: return tb_bytefallback(st);
    case DEC_FUSE: st->fused = true; return 0;
    case DEC_STRIP: return st->fused ? 0 : tb_strip(d, st);
    }
    return -1;
}

/* End-of-word suffixes become spaces after decoding, as tok_decode_internal does. */
static int tb_suffixes(const mhla_tokenizer *tok, tb_state *st)
{
    const char *sfx = tok->bpe.eow_suffix;
    size_t sn = tok->bpe.eow_len;
    mhla_buf t = {0};
    int rc = 0;
    for (size_t i = 0; i < st->cur.len && rc == 0;) {
        bool at = st->cur.len - i >= sn && memcmp(st->cur.p + i, sfx, sn) == 0;
        rc = mhla_buf_putc(&t, at ? ' ' : st->cur.p[i]);
        i += at ? sn : 1;
    }
    tb_set(st, &t);
    return rc;
}

static bool is_added_content(const mhla_tokenizer *tok, const char *s, size_t n)
{
    int32_t idx;
    return tok_strmap_get(&tok->added_map, s, n, &idx) && tok->added[idx].len == n &&
           memcmp(tok->added[idx].content, s, n) == 0;
}

/* st->cur = the token's bytes. */
static int tb_token(const mhla_tokenizer *tok, int32_t id, tb_state *st)
{
    char err[8];
    const char *s = tok->id_str[id];
    size_t n = tok->id_len[id];
    st->added = is_added_content(tok, s, n);
    /* without a decoder, a decode joins the token strings with spaces */
    if ((!tok->decoder && mhla_buf_putc(&st->cur, ' ')) || mhla_buf_put(&st->cur, s, n))
        return -1;
    if (!tok->decoder)
        return 0;
    if (tb_apply(tok->decoder, st, err, sizeof err))
        return -1;
    return tok->bpe.eow_len ? tb_suffixes(tok, st) : 0;
}

int mhla_tok_token_bytes(const mhla_tokenizer *tok, int32_t id, char *buf, size_t cap, size_t *len)
{
    *len = 0;
    if (!tok || id < 0 || (size_t)id >= tok->n_ids || !tok->id_str[id])
        return -1;
    tb_state st = {{0}, false, false};
    int rc = tb_token(tok, id, &st);
    if (rc == 0) {
        *len = st.cur.len;
        rc = st.cur.len <= cap ? 0 : -1;
    }
    if (rc == 0 && st.cur.len)
        memcpy(buf, st.cur.p, st.cur.len);
    mhla_buf_free(&st.cur);
    return rc;
}
